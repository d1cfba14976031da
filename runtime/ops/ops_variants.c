/* ops_variants.c — the table of the executor's variants (ops_variants.h). */
#include "ops_variants.h"

#include <stdlib.h>
#include <string.h>

#define OPS_MAX_VALUES 6

typedef struct {
  const char *name;
  const char *values[OPS_MAX_VALUES]; /* default first; NULL-ended; none: a whole number >= 0 */
  const char *help;
  const char *number_default; /* a whole-number variant's default; NULL: "0" */
} ops_variant_row;

/* Defaults are the winners of runtime/RESULTS-exec.md (fused attention: 2026-11-30;
 * fused cross-entropy and norm backward; the two-stage 128-query forward and the
 * 128-key backward; longest tiles first). */
static const ops_variant_row rows[OPS_V_COUNT] = {
    [OPS_V_ATTN] = {"attn", {"fused", "unfused"},
                    "attention: fused (flash; where the shape allows) or batched GEMMs around a softmax"},
    [OPS_V_FLASH_FWD] = {"flash-fwd", {"default", "v1", "w8", "fa128"},
                         "fused forward: two-stage 128-query tiles (64-query where seq is no multiple of 128); v1 64-query "
                         "everywhere; w8 8 warps of 16 rows; fa128 one-stage 128-query"},
    [OPS_V_FLASH_BWD] = {"flash-bwd", {"default", "v1", "v4", "split", "fa128"},
                         "fused backward: 128-key blocks; v1 64-key; v4 float4 dQ atomics; split two passes; "
                         "fa128 the kernels before 2026-11-30"},
    [OPS_V_FLASH_BWD_WARPS] = {"flash-bwd-warps", {"4", "8"}, "warps of the fused backward (8: 128-key blocks)"},
    [OPS_V_FLASH_BWD_PARTS] = {"flash-bwd-parts", {NULL},
                               "CTAs that share a key/value head's query heads in the fused backward (128-key "
                               "blocks), FP32 partials summed in a fixed order: 0 the smallest divisor P of the group "
                               "whose longest CTA is within 5/4 of an even spread over the SMs (1 where the grid fills "
                               "the GPU); N at most N (a divisor of the group; 1: one CTA a group)",
                               "0"},
    [OPS_V_FLASH_ORDER] = {"flash-order", {"longest", "head"},
                           "tile launch order: longest tiles of every head first, or one head's tiles together"},
    [OPS_V_CE] = {"ce", {"fused", "unfused"}, "vocabulary-parallel cross-entropy: one pass or three kernels"},
    [OPS_V_NORM_BWD] = {"norm-bwd", {"fused", "unfused"}, "norm backward: one kernel or three"},
    [OPS_V_SOFTMAX] = {"softmax", {"causal", "full"},
                       "unfused attention's softmax: the causal lower triangle only, or the full square"},
    [OPS_V_WGRAD_OVERLAP] = {"wgrad-overlap", {"on", "off"},
                             "the backward TP all-reduce beside the weight-gradient GEMM"},
    [OPS_V_CAAT_BWD] = {"caat-bwd", {"fp32", "bf16"}, "CAAT-Net backward accumulation"},
    [OPS_V_TP_OVERLAP_SM_MARGIN] = {"tp-overlap-sm-margin", {NULL},
                                    "SMs left free for the overlapped TP all-reduce (layout.tp_overlap_chunks; "
                                    "experimental)"},
    [OPS_V_GEMM_ALGO] = {"gemm-algo", {"bucket", "exact"},
                         "cuBLASLt algorithm of an MoE expert GEMM shape not seen before (their rows follow the "
                         "routing): bucket (a shape within the same powers of two of m, n, k as a cached one reuses "
                         "its algorithm if cuBLASLt accepts it) or exact (a heuristic query for each; other GEMMs "
                         "always)"},
    [OPS_V_GEMM_CACHE] = {"gemm-cache", {"hash", "scan"},
                          "lookup of a GEMM's cached plan: hash of the shape, or scan (every cached shape in turn, "
                          "the lookup before 2026-12-04)"},
    [OPS_V_REDUCE] = {"reduce", {"atomic", "ordered"},
                      "sums over rows and tokens (the loss, norm and bias weight gradients, the embedding gradients, "
                      "attention's dQ): atomic adds, whose order and so last bits vary from run to run, or a fixed "
                      "order (a run repeats bit for bit; the three-kernel norm backward and the two-pass attention "
                      "backward)"},
    [OPS_V_PP_SLOTS] = {"pp-slots", {"program", "per-micro"},
                        "activation slots of a walked plan program: program (as many as the rank's program holds "
                        "micro-batches at once: pp - stage under 1F1B) or per-micro (one per micro-batch on a "
                        "pipeline stage, the executor before 2026-12-04; for memory comparisons)"},
};

static char values[OPS_V_COUNT][16]; /* "" = the default */

static const char *default_of(const ops_variant_row *r) {
  return r->values[0] ? r->values[0] : r->number_default ? r->number_default : "0";
}

const char *ops_variant(ops_variant_id id) {
  if ((unsigned)id >= OPS_V_COUNT) return "";
  return values[id][0] ? values[id] : default_of(&rows[id]);
}

int ops_variant_is(ops_variant_id id, const char *value) { return strcmp(ops_variant(id), value) == 0; }

void ops_variant_reset(void) { memset(values, 0, sizeof values); }

static void choices(const ops_variant_row *r, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  if (!r->values[0]) {
    snprintf(buf, cap, "a whole number >= 0");
    return;
  }
  for (int i = 0; i < OPS_MAX_VALUES && r->values[i] && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", r->values[i]);
}

int ops_variant_set(const char *arg, ts_err *e) {
  const char *eq = strchr(arg, '=');
  if (!eq) return ts_fail(e, "--variant", NULL, "'%s' is not NAME=VALUE", arg);
  int id = 0;
  while (id < OPS_V_COUNT && (strlen(rows[id].name) != (size_t)(eq - arg) || strncmp(rows[id].name, arg, eq - arg)))
    id++;
  if (id == OPS_V_COUNT) {
    char names[256];
    size_t n = 0;
    for (int i = 0; i < OPS_V_COUNT; i++) n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", rows[i].name);
    return ts_fail(e, "--variant", NULL, "'%.*s' is not a variant (%s)", (int)(eq - arg), arg, names);
  }
  const ops_variant_row *r = &rows[id];
  const char *v = eq + 1;
  int ok = 0;
  if (!r->values[0]) {
    char *end;
    long x = strtol(v, &end, 10);
    ok = *v && !*end && x >= 0 && x <= 4096;
  } else {
    for (int i = 0; i < OPS_MAX_VALUES && r->values[i]; i++) ok |= !strcmp(r->values[i], v);
  }
  if (!ok || strlen(v) >= sizeof values[id]) {
    char c[128];
    choices(r, c, sizeof c);
    return ts_fail(e, "--variant", r->name, "'%s' is not one of %s", v, c);
  }
  snprintf(values[id], sizeof values[id], "%s", v);
  return 0;
}

void ops_variant_usage(FILE *out) {
  fprintf(out, "  --variant NAME=VALUE    a kernel or schedule variant of the executor (repeatable; recorded in the\n"
               "                          result); NAME: VALUES [default] what:\n");
  for (int i = 0; i < OPS_V_COUNT; i++) {
    char c[128];
    choices(&rows[i], c, sizeof c);
    fprintf(out, "      %s: %s [%s]\n          ", rows[i].name, c, default_of(&rows[i]));
    fputs(rows[i].help, out);
    fprintf(out, "\n");
  }
}

void ops_variant_note(char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "variants:");
  for (int i = 0; i < OPS_V_COUNT && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, " %s=%s", rows[i].name, ops_variant((ops_variant_id)i));
}
