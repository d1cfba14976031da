/* calibration_op_power.c — the calibration's "op_power" section: the board power and SM clock each class of a
 * prefill's ops draws and runs at back to back (the GEMMs, the memory-bound kernels, the prefill attention by
 * shape), with the exponents by which power and speed follow the clock, all from one power phase
 * (calibration/merge_op_power.py). Strict loader, writer, the attention row nearest a shape, and a class's power
 * at a clock (calibration.h; sim/INFERENCE.md, "The prefill at one clock from its ops' power"). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "ts_json.h"

#define OP_POWER_MAX_W 1e4
#define OP_POWER_MAX_MHZ 1e4
#define OP_POWER_MAX_EXP 10.0
#define OP_POWER_MAX_HEADS 4096
#define OP_POWER_MAX_DIM 4096
#define OP_POWER_MAX_TOKENS (1LL << 30)

/* {"power_w", "mhz"} of a class at path, the clock within (0, f_max]. */
static int load_class(json_t *obj, const char *key, const schema_op_power *p, double *w, double *mhz,
                      const char *file, ts_err *e) {
  char path[48];
  snprintf(path, sizeof path, "op_power.%s", key);
  json_t *c = tsj_object(obj, key, file, "op_power", e);
  static const char *const keys[] = {"power_w", "mhz", NULL};
  if (!c || tsj_only_keys(c, keys, file, path, e) ||
      tsj_real(c, "power_w", 1e-3, OP_POWER_MAX_W, w, file, path, e) ||
      tsj_real(c, "mhz", 1e-3, p->f_max_mhz, mhz, file, path, e))
    return -1;
  if (!(*w > p->idle_w)) return ts_fail(e, file, path, "power_w %g must be above idle_w %g", *w, p->idle_w);
  return 0;
}

static int load_attn(json_t *arr, schema_op_power *p, const char *file, ts_err *e) {
  const char *sec = "op_power.attention_prefill";
  if (!arr) return ts_fail(e, file, sec, "missing (a list of the prefill attention's rows)");
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > SCHEMA_OP_POWER_ATTN)
    return ts_fail(e, file, sec, "must be a list of 1 to %d rows", SCHEMA_OP_POWER_ATTN);
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char path[64];
    snprintf(path, sizeof path, "%s[%zu]", sec, i);
    if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object");
    static const char *const keys[] = {"heads", "kv_heads", "head_dim", "batch", "seq", "power_w", "mhz", NULL};
    schema_op_power_attn *a = &p->attn[i];
    long long h, kv, d, b, s;
    if (tsj_only_keys(v, keys, file, path, e) || tsj_int(v, "heads", 1, OP_POWER_MAX_HEADS, &h, file, path, e) ||
        tsj_int(v, "kv_heads", 1, OP_POWER_MAX_HEADS, &kv, file, path, e) ||
        tsj_int(v, "head_dim", 1, OP_POWER_MAX_DIM, &d, file, path, e) ||
        tsj_int(v, "batch", 1, OP_POWER_MAX_TOKENS, &b, file, path, e) ||
        tsj_int(v, "seq", 1, OP_POWER_MAX_TOKENS, &s, file, path, e) ||
        tsj_real(v, "power_w", 1e-3, OP_POWER_MAX_W, &a->power_w, file, path, e) ||
        tsj_real(v, "mhz", 1e-3, p->f_max_mhz, &a->mhz, file, path, e))
      return -1;
    if (kv > h || h % kv) return ts_fail(e, file, path, "kv_heads %lld must divide heads %lld", kv, h);
    if (b * s > OP_POWER_MAX_TOKENS)
      return ts_fail(e, file, path, "batch x seq %lld is above %lld", b * s, OP_POWER_MAX_TOKENS);
    if (!(a->power_w > p->idle_w))
      return ts_fail(e, file, path, "power_w %g must be above idle_w %g", a->power_w, p->idle_w);
    a->heads = (int)h, a->kv_heads = (int)kv, a->head_dim = (int)d, a->batch = (int)b, a->seq = (int)s;
  }
  p->n_attn = (int)json_array_size(arr);
  return 0;
}

int schema_op_power_load(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  const char *sec = "op_power";
  schema_op_power *p = &c->op_power;
  memset(p, 0, sizeof *p);
  json_t *obj = json_object_get(root, sec);
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const keys[] = {"gpu", "source", "cap_w", "f_max_mhz", "idle_w", "power_exponent",
                                     "mem_power_exponent", "speed_exponent", "attention_speed_exponent", "gemm", "mem",
                                     "attention_prefill", NULL};
  if (tsj_only_keys(obj, keys, file, sec, e) || tsj_string(obj, "gpu", p->gpu, sizeof p->gpu, file, sec, e) ||
      tsj_string(obj, "source", p->source, sizeof p->source, file, sec, e) ||
      tsj_real(obj, "cap_w", 1e-3, OP_POWER_MAX_W, &p->cap_w, file, sec, e) ||
      tsj_real(obj, "f_max_mhz", 1e-3, OP_POWER_MAX_MHZ, &p->f_max_mhz, file, sec, e) ||
      tsj_real(obj, "idle_w", 0, OP_POWER_MAX_W, &p->idle_w, file, sec, e) ||
      tsj_real(obj, "power_exponent", 0, OP_POWER_MAX_EXP, &p->power_exponent, file, sec, e) ||
      tsj_real(obj, "mem_power_exponent", 0, OP_POWER_MAX_EXP, &p->mem_power_exponent, file, sec, e) ||
      tsj_real(obj, "speed_exponent", 0, OP_POWER_MAX_EXP, &p->speed_exponent, file, sec, e))
    goto fail;
  p->attention_speed_exponent = -1; /* optional: absent, the attention takes speed_exponent */
  if (json_object_get(obj, "attention_speed_exponent") &&
      tsj_real(obj, "attention_speed_exponent", 0, OP_POWER_MAX_EXP, &p->attention_speed_exponent, file, sec, e))
    goto fail;
  if (!(p->idle_w < p->cap_w)) {
    ts_fail(e, file, "op_power.idle_w", "%g must be below cap_w %g", p->idle_w, p->cap_w);
    goto fail;
  }
  if (load_class(obj, "gemm", p, &p->gemm_w, &p->gemm_mhz, file, e) ||
      load_class(obj, "mem", p, &p->mem_w, &p->mem_mhz, file, e) ||
      load_attn(json_object_get(obj, "attention_prefill"), p, file, e))
    goto fail;
  return 0;
fail:
  memset(p, 0, sizeof *p);
  return -1;
}

static json_t *class_json(double w, double mhz) {
  return json_pack("{s:o,s:o}", "power_w", tsj_number(w), "mhz", tsj_number(mhz));
}

json_t *schema_op_power_json(const schema_calibration *c) {
  const schema_op_power *p = &c->op_power;
  if (p->n_attn < 1) return NULL;
  json_t *rows = json_array();
  for (int i = 0; i < p->n_attn; i++) {
    const schema_op_power_attn *a = &p->attn[i];
    json_array_append_new(rows, json_pack("{s:i,s:i,s:i,s:i,s:i,s:o,s:o}", "heads", a->heads, "kv_heads",
                                          a->kv_heads, "head_dim", a->head_dim, "batch", a->batch, "seq", a->seq,
                                          "power_w", tsj_number(a->power_w), "mhz", tsj_number(a->mhz)));
  }
  json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "gpu", p->gpu, "source", p->source, "cap_w",
                        tsj_number(p->cap_w), "f_max_mhz", tsj_number(p->f_max_mhz), "idle_w", tsj_number(p->idle_w),
                        "power_exponent", tsj_number(p->power_exponent), "mem_power_exponent",
                        tsj_number(p->mem_power_exponent), "speed_exponent", tsj_number(p->speed_exponent), "gemm",
                        class_json(p->gemm_w, p->gemm_mhz), "mem", class_json(p->mem_w, p->mem_mhz),
                        "attention_prefill", rows);
  if (o && p->attention_speed_exponent >= 0)
    json_object_set_new(o, "attention_speed_exponent", tsj_number(p->attention_speed_exponent));
  return o;
}

static double log_ratio(double a, double b) { return fabs(log(a / b)); }

const schema_op_power_attn *schema_op_power_attention(const schema_op_power *p, int heads, int kv_heads, int head_dim,
                                                      long long batch, long long seq) {
  const schema_op_power_attn *best = NULL;
  double best_layout = 0, best_shape = 0;
  for (int i = 0; i < p->n_attn; i++) {
    const schema_op_power_attn *a = &p->attn[i];
    double layout = log_ratio(a->heads, heads) + log_ratio(a->kv_heads, kv_heads) + log_ratio(a->head_dim, head_dim);
    double shape = log_ratio((double)a->batch * a->seq, (double)batch * seq) + log_ratio(a->seq, (double)seq);
    if (!best || layout < best_layout - 1e-12 || (fabs(layout - best_layout) <= 1e-12 && shape < best_shape))
      best = a, best_layout = layout, best_shape = shape;
  }
  return best;
}

double schema_op_power_w(const schema_op_power *p, double p0_w, double f0_mhz, double g, double f_mhz) {
  return p->idle_w + (p0_w - p->idle_w) * pow(f_mhz / f0_mhz, g);
}
