/* sim_costs.c — op durations from the calibration (no SimGrid here). */
#include "sim_costs.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "sim_nccl.h"

void sim_roofline_of(const topo_cluster *cl, schema_roofline *roof) {
  roof->peak_flops = cl->gpu.bf16_tflops * 1e12;
  roof->hbm_bytes_per_s = cl->gpu.hbm_gbps * 1e9;
  roof->link_bytes_per_s = cl->intra.gbps_per_gpu * 1e9;
  roof->launch_us = 3.0;
  roof->coll_latency_us = cl->intra.latency_us > 0 ? cl->intra.latency_us : 1.0;
}

const char *sim_transport_of(topo_intra_kind kind) {
  switch (kind) {
  case TOPO_INTRA_SHM: return "shm";
  case TOPO_INTRA_SOCKET: return "socket";
  case TOPO_INTRA_PCIE: return "pcie";
  default: return "nvlink"; /* NVLink and NVSwitch */
  }
}

bool sim_transport_matches(const char *transport, topo_intra_kind kind) {
  return strcmp(transport, sim_transport_of(kind)) == 0;
}

double sim_tpo_gemm_us(const plan *p, const schema_calibration *cal, int g, double t, double c) {
  if (g < 0 || !(t > 0)) return t;
  const int sms = p->cluster.gpu.sms, held = plan_tpo_held_sms(p, g);
  const bool margin = plan_tpo_sm_margin(p, g);
  if (held <= 0) { /* ring exchange: nothing beside it; told sms - num_sm SMs with set_sm_margin true */
    const int told = margin ? plan_tpo_num_sm(p, g) : 0;
    return told > 0 && sms > told ? t * sms / (sms - told) : t;
  }
  const double r = schema_tpo_sm_ratio(cal, sms, held, margin);     /* beside the kernel: rate 1 / r */
  const double after = margin && sms > held ? (double)sms / (sms - held) : 1.0; /* after it: told sms - n, or all */
  if (!(c > 0)) return t * after;
  const double beside = c / r; /* the GEMM work done while the kernel runs */
  return beside < t ? c + (t - beside) * after : t * r;
}

int sim_tpo_companion_us(schema_lookup *lk, const plan *p, bool intra_calibrated, const plan_tpo_companion *comp,
                         double *c_us, ts_err *e) {
  sim_intra_coll how;
  if (sim_intra_coll_us(lk, &p->cluster, intra_calibrated, ts_coll_name((ts_coll)comp->coll), p->tp, comp->wire, &how,
                        e))
    return -1;
  *c_us = how.us;
  return 0;
}

int sim_tpo_piece_us(schema_lookup *lk, const plan *p, bool intra_calibrated, const model_op *ops, int n, int mop,
                     int phase, int part, int piece, int pieces, double t, double *us, ts_err *e) {
  plan_tpo_companion comp;
  double c = 0;
  int beside = ops ? plan_tpo_ops_companion(p, ops, n, mop, phase, part, piece, pieces, &comp)
                   : plan_tpo_comm_companion(p, mop, phase, part, piece, pieces, &comp);
  if (beside && sim_tpo_companion_us(lk, p, intra_calibrated, &comp, &c, e)) return -1;
  *us = sim_tpo_gemm_us(p, lk->cal, comp.gemm, t, beside ? c : 0);
  return 0;
}

int sim_costs_init(sim_costs *c, const plan *p, const schema_calibration *cal, FILE *warn, ts_err *e) {
  memset(c, 0, sizeof *c);
  c->p = p;
  c->intra_calibrated = sim_transport_matches(cal->transport, p->cluster.intra.kind);
  schema_roofline roof;
  sim_roofline_of(&p->cluster, &roof);
  schema_lookup_init(&c->lk, cal, &roof, warn);
  model_shard sh = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                    .seq = plan_local_seq(p), .ep = p->ep, .etp = p->etp, /* ep, etp: MoE expert rows and widths;
                                                                            * seq: this CP rank's tokens */
                    .no_hidden_dropout = !(p->hidden_dropout > 0), /* inference: 0 (plan_infer_forward_plan) */
                    .moe_tokens_replicated = p->moe_tokens_replicated};
  c->n_mops = model_layer_ops(&p->model, &sh, c->mops, MODEL_MAX_LAYER_OPS, e);
  if (c->n_mops < 0) return -1;
  model_op head[4];
  int n_head = model_output_ops(&p->model, &sh, head, 4, e);
  if (n_head < 0) return -1;
  for (int i = 0; i < n_head; i++)
    if (head[i].kind == MODEL_OP_LOGITS_LOSS) c->loss_kernel_bytes = head[i].bytes_fwd;
  return 0;
}

/* A missing table falls back to `instead` (another table, or the roofline),
 * named once on the warning stream (never silently). */
static void warn_fallback(sim_costs *c, const char *table, const char *instead) {
  for (int i = 0; i < c->n_missing; i++)
    if (strcmp(c->missing[i], table) == 0) return;
  if (c->n_missing < 16) snprintf(c->missing[c->n_missing++], sizeof c->missing[0], "%s", table);
  if (c->lk.warn)
    fprintf(c->lk.warn, "tacosim: warning: %s: no \"%s\" table; using %s\n",
            c->lk.cal->path[0] ? c->lk.cal->path : "calibration", table, instead);
}

/* Like warn_fallback, for a table that is there but lacks what was asked: "TEXT" after the file's name. */
static void warn_lacking(sim_costs *c, const char *key, const char *text) {
  for (int i = 0; i < c->n_missing; i++)
    if (strcmp(c->missing[i], key) == 0) return;
  if (c->n_missing < 16) snprintf(c->missing[c->n_missing++], sizeof c->missing[0], "%s", key);
  if (c->lk.warn)
    fprintf(c->lk.warn, "tacosim: warning: %s: %s\n", c->lk.cal->path[0] ? c->lk.cal->path : "calibration", text);
}

static void warn_missing(sim_costs *c, const char *table) { warn_fallback(c, table, "the roofline of the cluster"); }

/* Appends what (a table read, a floor applied) to out where it is not there yet, "; "-separated. */
static void append_source(char *out, size_t cap, const char *what) {
  const size_t n = strlen(out), w = strlen(what);
  for (const char *at = strstr(out, what); at; at = strstr(at + 1, what))
    if ((at == out || at[-1] == ' ') && (at[w] == '\0' || at[w] == ';')) return;
  snprintf(out + n, cap - n, "%s%s", n ? "; " : "", what);
}

/* Appends the "; "-separated parts of src to out; only the CAAT-Net ones with caat_only. */
static void append_sources(char *out, size_t cap, const char *src, bool caat_only) {
  for (const char *tok = src, *end; *tok; tok = *end ? end + 2 : end) {
    end = strstr(tok, "; ");
    if (!end) end = tok + strlen(tok);
    char one[SIM_COST_SRC_LEN];
    snprintf(one, sizeof one, "%.*s", (int)(end - tok), tok);
    if (!caat_only || strstr(one, "caat")) append_source(out, cap, one);
  }
}

static void note_source(sim_costs *c, const char *what) { append_source(c->src, sizeof c->src, what); }

/* Notes the measured collective table that schema_lookup_coll reads for `name` at nranks and bytes (the
 * nearest rank count, the larger on a tie), as the calibration names it: "collectives.<name>.<ranks>
 * (<transport>)", and what the lookup does beyond it: another rank count scaled by bus bandwidth, a size
 * outside its points moved along its roofline. */
static void note_coll(sim_costs *c, const char *name, int nranks, double bytes) {
  const schema_calibration *cal = c->lk.cal;
  const schema_coll_table *t = NULL;
  for (int i = 0; i < cal->n_colls; i++) {
    const schema_coll_table *x = &cal->colls[i];
    if (strcmp(x->name, name) != 0) continue;
    if (!t || abs(x->nranks - nranks) < abs(t->nranks - nranks) ||
        (abs(x->nranks - nranks) == abs(t->nranks - nranks) && x->nranks > t->nranks))
      t = x;
  }
  if (!t) return;
  char what[SIM_COST_SRC_LEN], ranks[32] = "";
  if (t->nranks != nranks) snprintf(ranks, sizeof ranks, " scaled to %d ranks", nranks);
  bool beyond = t->n > 0 && bytes > 0 && (bytes < t->pts[0].bytes || bytes > t->pts[t->n - 1].bytes);
  snprintf(what, sizeof what, "collectives.%s.%d (%s)%s%s", name, t->nranks, cal->transport[0] ? cal->transport : "?",
           ranks, beyond ? ", roofline beyond its sizes" : "");
  note_source(c, what);
}

static int kernel_us(sim_costs *c, const char *name, double x, int group, bool by_flops, double *us, ts_err *e) {
  if (x <= 0) {
    *us = 0;
    return 0;
  }
  char what[80];
  if (schema_has_kernel(c->lk.cal, name)) {
    snprintf(what, sizeof what, "kernels.%s", name);
    note_source(c, what);
    return schema_lookup_kernel(&c->lk, name, x, group, us, e);
  }
  warn_missing(c, name);
  snprintf(what, sizeof what, "roofline (no %s table)", name);
  note_source(c, what);
  *us = c->lk.roof.launch_us + x / (by_flops ? c->lk.roof.peak_flops : c->lk.roof.hbm_bytes_per_s) * 1e6;
  return 0;
}

/* A backward op uses the "<name>_bwd" table when the calibration measured one
 * (its x axis is the backward's own FLOPs or bytes), else "<name>". */
static int kernel_phase_us(sim_costs *c, const char *name, double x, int phase, bool by_flops, double *us,
                           ts_err *e) {
  if (phase == PLAN_PHASE_BWD) {
    char bwd[48];
    snprintf(bwd, sizeof bwd, "%s_bwd", name);
    if (schema_has_kernel(c->lk.cal, bwd)) return kernel_us(c, bwd, x, 0, by_flops, us, e);
  }
  return kernel_us(c, name, x, 0, by_flops, us, e);
}

/* Attention: the table of the model's head dimension and the plan's
 * sequence, "attention.d<D>.s<S>" ("attention_bwd.d<D>.s<S>" backward), when
 * the calibration has it: there the FLOPs fix batch x heads, so the point is
 * the shape's own. Else the FLOP-keyed "attention" table, which averages
 * shapes of equal FLOPs but different sequence lengths (cost per FLOP grows
 * with the sequence: the softmax is s^2 x bh); the fallback is named once. */
/* First of all: the calibration's "attention_shapes" (schema_lookup_attn:
 * this shape's own time, else the efficiency of the nearest measured shapes)
 * when it has some, for the whole causal attention of a rank (heads and
 * key/value heads over TP, the micro-batch), or for one piece of a CP ring,
 * which plan_program_cp.c makes the local causal attention of seq / cp
 * tokens (with the 2 cp load-balanced split every piece has that work); not
 * MLA's unequal head dimensions: those keep the tables below. */
/* The plan's attention_backend picks the points: fused and flash their own
 * ("attention_backends"), the executor "attention_shapes". A calibration
 * without the plan's backend, or MLA: the executor's tables, and the
 * fallback is named once (the prediction is then the executor's kernel,
 * slower than cuDNN's on the H200: calibration/README.md). */
int sim_attention_shape_of(const schema_calibration *cal, const plan *p, schema_attn_backend *be,
                           schema_attn_shape *q, int *fell_back) {
  const model_config *m = &p->model;
  *be = p->attention_backend == PLAN_ATTENTION_FLASH   ? SCHEMA_ATTN_FLASH
        : p->attention_backend == PLAN_ATTENTION_FUSED ? SCHEMA_ATTN_FUSED
                                                       : SCHEMA_ATTN_EXECUTOR;
  *fell_back = 0;
  int n = 0;
  bool shaped = m->attention == MODEL_ATTN_GQA;
  if (*be != SCHEMA_ATTN_EXECUTOR && p->attention_dropout > 0) { /* the same kernel drawing its mask */
    schema_attn_backend d = *be == SCHEMA_ATTN_FLASH ? SCHEMA_ATTN_FLASH_DROPOUT : SCHEMA_ATTN_FUSED_DROPOUT;
    schema_attn_points(cal, d, &n);
    if (n > 0) *be = d;
    else *fell_back = 3;
  }
  if (*be != SCHEMA_ATTN_EXECUTOR) {
    schema_attn_points(cal, *be, &n);
    if (n == 0 || !shaped) {
      *fell_back = n == 0 ? 1 : 2;
      *be = SCHEMA_ATTN_EXECUTOR;
    }
  }
  schema_attn_points(cal, *be, &n);
  if (!n || !shaped) return 1;
  *q = (schema_attn_shape){.head_dim = model_head_dim(m), .seq = plan_local_seq(p), .batch = p->micro_batch,
                           .heads = m->heads / p->tp, .kv_heads = m->kv_heads / p->tp, .causal = true};
  return q->heads < 1 || q->kv_heads < 1;
}

static int attention_shape_us(sim_costs *c, int phase, double *us) {
  schema_attn_backend be;
  schema_attn_shape q;
  int fell_back;
  int rc = sim_attention_shape_of(c->lk.cal, c->p, &be, &q, &fell_back);
  if (fell_back == 3) {
    schema_attn_backend want =
        c->p->attention_backend == PLAN_ATTENTION_FLASH ? SCHEMA_ATTN_FLASH_DROPOUT : SCHEMA_ATTN_FUSED_DROPOUT;
    char what[64];
    snprintf(what, sizeof what, "attention_backends.%s", schema_attn_backend_name(want));
    warn_fallback(c, what, "the same backend without dropout: attention_dropout priced at no cost");
  } else if (fell_back) {
    char what[64], instead[160];
    schema_attn_backend want = c->p->attention_backend == PLAN_ATTENTION_FLASH ? SCHEMA_ATTN_FLASH : SCHEMA_ATTN_FUSED;
    snprintf(what, sizeof what, "attention_backends.%s", schema_attn_backend_name(want));
    snprintf(instead, sizeof instead, "the executor's attention tables (%s)",
             fell_back == 1 ? "the calibration has no points of this backend" : "MLA has no such points");
    warn_fallback(c, what, instead);
  }
  if (rc) return 1;
  char what[64];
  snprintf(what, sizeof what, "%s.%s", be == SCHEMA_ATTN_EXECUTOR ? "attention_shapes" : "attention_backends",
           schema_attn_backend_name(be));
  note_source(c, what);
  return schema_lookup_attn_backend(&c->lk, be, &q, phase == PLAN_PHASE_BWD, us);
}

/* The FLOP-keyed tables below know no shape: neither the transfer to another
 * GPU (sim_transfer.c) nor their lookup can tell that a point moves more
 * bytes than the target's HBM carries in its time. A short attention (a CP
 * piece of seq / cp tokens, an MLA layer) can be memory-bound on a GPU of
 * less bandwidth per FLOP although it was not on the H200 (L40S: 419 FLOP
 * per byte at its ridge, the H200 206; causal attention does s/2 to s FLOPs
 * per byte of Q, K, V, O). So the price is at least the op's own roofline
 * on the cluster's GPU (its kernel's FLOPs at the peak, its bytes at the HBM
 * rate, one launch), as decode attention without its table (sim_infer.c). */
static int attention_us(sim_costs *c, const plan_op *op, int phase, double *us, ts_err *e) {
  if (attention_shape_us(c, phase, us) == 0) return 0;
  char table[48], instead[64];
  snprintf(table, sizeof table, "attention%s.d%d.s%d", phase == PLAN_PHASE_BWD ? "_bwd" : "",
           model_head_dim(&c->p->model), plan_local_seq(c->p)); /* CP: each piece is a (seq / cp)-long block */
  int rc;
  if (schema_has_kernel(c->lk.cal, table)) {
    rc = kernel_us(c, table, op->flops, 0, true, us, e);
  } else {
    snprintf(instead, sizeof instead, "the FLOP-keyed \"attention%s\" table",
             phase == PLAN_PHASE_BWD && schema_has_kernel(c->lk.cal, "attention_bwd") ? "_bwd" : "");
    warn_fallback(c, table, instead);
    rc = kernel_phase_us(c, "attention", op->flops, phase, true, us, e);
  }
  if (rc) return -1;
  double roof = sim_attention_roof_us(&c->lk.roof, c->p->attention_backend, phase == PLAN_PHASE_BWD, op->flops,
                                      op->bytes);
  if (*us < roof) *us = roof, note_source(c, "attention roofline floor");
  return 0;
}

/* The unfused cross-entropy (plan cross_entropy_loss_fusion false): each of
 * Megatron's kernels of this phase (plan_loss.c) priced on its own from its
 * bytes through the memory-bound "elementwise" table of the phase
 * ("elementwise_bwd" backward when measured), as the unfused attention's
 * softmax and dropout are; a transferred calibration carries the table to
 * the plan's GPU. */
static int unfused_ce_us(sim_costs *c, int phase, double *us, ts_err *e) {
  const plan_ce_kernel *k;
  int n = plan_ce_kernels(c->p, phase, &k);
  *us = 0;
  for (int i = 0; i < n; i++) {
    double t;
    if (kernel_phase_us(c, "elementwise", plan_ce_kernel_bytes(c->p, &k[i]), phase, false, &t, e)) return -1;
    *us += t;
  }
  return 0;
}

/* The calibration's generic tables ("norm", "elementwise") average every
 * kernel that moves the same bytes (layernorm with rmsnorm, gelu with swiglu
 * with add). The kernel the model runs has its own table ("layernorm_fwd",
 * "gelu_bwd", "add_fwd", ...) in measured files: use it when present. */
static const char *specific_kernel(const sim_costs *c, const char *op_name, model_op_kind kind) {
  const model_config *m = &c->p->model;
  if (kind == MODEL_OP_NORM) return m->norm == MODEL_NORM_LAYERNORM ? "layernorm" : "rmsnorm";
  if (kind != MODEL_OP_ELEMENTWISE) return NULL;
  if (strcmp(op_name, "act") == 0) return m->activation == MODEL_ACT_SWIGLU ? "swiglu" : "gelu";
  /* rope_fwd / rope_bwd (rt_rope, the training executor's kernel) when calibrated, else "elementwise";
   * inference runs a RoPE fused with the KV-cache scatter (infer_rope_scatter), which has no table of
   * its own: "rope_scatter_fwd" when a file has one, else "elementwise" */
  if (strcmp(op_name, "rope") == 0) return c->inference ? "rope_scatter" : "rope";
  size_t n = strlen(op_name);
  if (n >= 9 && strcmp(op_name + n - 9, "_residual") == 0) return "add";
  return NULL;
}

/* A bias pass: its own table when measured, else the generic elementwise one of the phase. */
static int mapped_bias_us(sim_costs *c, const char *table, double bytes, double *us, ts_err *e) {
  if (schema_has_kernel(c->lk.cal, table)) return kernel_us(c, table, bytes, 0, false, us, e);
  return kernel_phase_us(c, "elementwise", bytes, strcmp(table, "bias_bwd") == 0 ? PLAN_PHASE_BWD : PLAN_PHASE_FWD,
                         false, us, e);
}

/* The specific kernel's table of this phase when the calibration has it, else the generic one. */
static int mapped_kernel_us(sim_costs *c, const char *op_name, model_op_kind kind, const char *generic, double x,
                            int phase, double *us, ts_err *e) {
  const char *specific = specific_kernel(c, op_name, kind);
  if (specific) {
    char table[48];
    snprintf(table, sizeof table, "%s_%s", specific, phase == PLAN_PHASE_BWD ? "bwd" : "fwd");
    if (schema_has_kernel(c->lk.cal, table)) return kernel_us(c, table, x, 0, false, us, e);
  }
  return kernel_phase_us(c, generic, x, phase, false, us, e);
}

static int gemm_us(sim_costs *c, long long m, long long n, long long k, double *us, ts_err *e) {
  if (c->lk.cal->n_gemm) {
    note_source(c, "gemm");
    return schema_lookup_gemm(&c->lk, m, n, k, us, e);
  }
  warn_missing(c, "gemm");
  note_source(c, "roofline (no gemm table)");
  *us = c->lk.roof.launch_us + 2.0 * (double)m * (double)n * (double)k / c->lk.roof.peak_flops * 1e6;
  return 0;
}

/* Biases, where the executor adds them (runtime/exec/exec_layer.c): after the qkv
 * GEMM (qkv_bias) and the fc1 GEMM (linear_bias) over its m x n output, and
 * in the residual ops (linear_bias: attn_out's and fc2's, after the TP
 * reduction) over their rows; in the backward, the bias gradient reads the
 * output gradient once (with the weight gradient). Priced from the
 * calibration's "bias_fwd" / "bias_bwd" tables when measured, else the
 * generic "elementwise" ones, by the bytes each pass moves (BF16: forward
 * read and write, backward one read). 0 for ops without a bias, and 0 under
 * the plan's bias_fusion (Megatron-LM's default: the bias rides in kernels
 * that run anyway). */
static int bias_us(sim_costs *c, const model_op *mo, const plan_op *op, double *us, ts_err *e) {
  const model_config *m = &c->p->model;
  double elems = 0;
  *us = 0;
  if (!c->p->bias_unfused) return 0;
  if (mo->kind == MODEL_OP_GEMM && ((!strcmp(mo->name, "qkv") && m->qkv_bias) || (!strcmp(mo->name, "fc1") && m->linear_bias)))
    elems = (double)mo->m * (double)mo->n;
  else if (mo->kind == MODEL_OP_ELEMENTWISE && m->linear_bias) {
    size_t n = strlen(mo->name);
    if (n >= 9 && strcmp(mo->name + n - 9, "_residual") == 0) {
      double tokens = (double)c->p->micro_batch * plan_local_seq(c->p);
      elems = (c->p->sequence_parallel ? tokens / c->p->tp : tokens) * m->hidden;
    }
  }
  if (elems <= 0 || op->row_chunks > 1) return 0; /* (a row chunk: the bias is added with the residual) */
  if (op->phase == PLAN_PHASE_BWD) {
    if (op->part == PLAN_PART_DGRAD) return 0;
    return mapped_bias_us(c, "bias_bwd", 2.0 * elems, us, e);
  }
  return mapped_bias_us(c, "bias_fwd", 4.0 * elems, us, e);
}

/* A weight gradient C[m x n] += A^T B (FP32 accumulation): its own timing of
 * the shape when the calibration has one ("gemm_wgrad": a shape that is also
 * some layer's forward or input-gradient product), else the GEMM lookup. */
static int gemm_wgrad_us(sim_costs *c, long long m, long long n, long long k, double *us, ts_err *e) {
  if (schema_gemm_wgrad_us(c->lk.cal, m, n, k, us)) {
    note_source(c, "gemm_wgrad");
    return 0;
  }
  return gemm_us(c, m, n, k, us, e);
}

double sim_gemm_fp8_transfer_us(const topo_gpu *g, long long m, long long n, long long k, double bf16_us) {
  const double flops = 2.0 * (double)m * (double)n * (double)k, bw = g->hbm_gbps * 1e9;
  const double ab = (double)m * (double)k + (double)k * (double)n, cc = (double)m * (double)n;
  const double from = sim_roof_us(flops, 2.0 * (ab + cc), g->bf16_tflops * 1e12, bw);
  const double to = sim_roof_us(flops, ab + 2.0 * cc, g->fp8_tflops * 1e12, bw);
  return from > 0 ? bf16_us * to / from : bf16_us;
}

double sim_gemm_fp4_transfer_us(const topo_gpu *g, long long m, long long n, long long k, double fp8_us) {
  if (!(g->fp8_tflops > 0) || !(g->fp4_tflops > 0)) return fp8_us;
  const double flops = 2.0 * (double)m * (double)n * (double)k, bw = g->hbm_gbps * 1e9;
  const double ab = (double)m * (double)k + (double)k * (double)n, cc = (double)m * (double)n;
  const double from = sim_roof_us(flops, ab + 2.0 * cc, g->fp8_tflops * 1e12, bw);
  const double to = sim_roof_us(flops, PLAN_NVFP4_BYTES_PER_PARAM * ab + 2.0 * cc, g->fp4_tflops * 1e12, bw);
  return from > 0 ? fp8_us * to / from : fp8_us;
}

/* Interpolation first: left out of the list, its bracketed points are predicted to a median 1.1-1.3 % (decode m)
 * and 3.4-3.6 % (prefill m) by it, 1.8-2.6 % and 5.4-5.7 % by the ratio (experiments/fp8-interp/README.md).
 * A weight gradient keeps the ratio: its m is a weight dimension, its BF16 time its own layout's. */
double sim_gemm_fp8_unmeasured_us(const schema_calibration *cal, const topo_gpu *g, long long m, long long n,
                                  long long k, bool wgrad, double bf16_us, sim_fp8_rule *rule, long long *ratio_m) {
  double ratio, us;
  long long lo_m, hi_m;
  *ratio_m = 0;
  if (!wgrad && schema_gemm_fp8_between_us(cal, m, n, k, &us, &lo_m, &hi_m)) {
    *rule = SIM_FP8_BETWEEN;
    return us;
  }
  if (schema_gemm_fp8_ratio(cal, m, n, k, SIM_FP8_RATIO_M_FACTOR, &ratio, ratio_m)) {
    *rule = SIM_FP8_RATIO;
    return bf16_us * ratio;
  }
  *rule = SIM_FP8_TRANSFER;
  return sim_gemm_fp8_transfer_us(g, m, n, k, bf16_us);
}

double sim_gemm_fp8_recipe_us(const plan *p, double tensor_us) {
  const double r = p->cluster.gpu.mxfp8_gemm_ratio;
  return p->fp8_recipe == PLAN_FP8_MXFP8 && r > 0 ? tensor_us * r : tensor_us;
}

/* layout.fp8: a per-tensor-scaled FP8 GEMM (plan_fp8_gemm) of (m, n, k), its weight gradient (wgrad) too: the
 * calibration's "gemm_fp8" point of the shape when it has one, else (not a weight gradient) the interpolation
 * in m between its two points of the same (n, k) around m, else the BF16 time of the shape ("gemm_wgrad" for
 * a weight gradient, else "gemm") times the FP8 / BF16 ratio measured at the nearest m of the same (n, k),
 * else that BF16 time transferred to the FP8 peak (sim_gemm_fp8_unmeasured_us); the last two warned once. */
static int gemm_fp8_tensor_us(sim_costs *c, long long m, long long n, long long k, bool wgrad, double *us,
                              ts_err *e) {
  if (schema_gemm_fp8_us(c->lk.cal, m, n, k, us)) {
    note_source(c, "gemm_fp8");
    return 0;
  }
  double bf16;
  long long at;
  sim_fp8_rule rule;
  if ((wgrad ? gemm_wgrad_us(c, m, n, k, &bf16, e) : gemm_us(c, m, n, k, &bf16, e))) return -1;
  *us = sim_gemm_fp8_unmeasured_us(c->lk.cal, &c->p->cluster.gpu, m, n, k, wgrad, bf16, &rule, &at);
  if (rule == SIM_FP8_BETWEEN) {
    note_source(c, "gemm_fp8 interpolated in m"); /* inside the measured range: not warned, as "gemm"'s */
  } else if (rule == SIM_FP8_RATIO) {
    char text[420];
    snprintf(text, sizeof text, "\"gemm_fp8\" lacks m=%lld n=%lld k=%lld and its points of the same n, k do not lie "
             "around that m, or it is a weight gradient's (the first such shape); using the BF16 time times the FP8 / "
             "BF16 ratio measured at the nearest m of the same n, k (else the nearest k of the same m, n), for it and "
             "any other", m, n, k);
    warn_lacking(c, "gemm_fp8 ratio", text);
    note_source(c, "gemm_fp8 ratio at the nearest m or k (no points around m, or a weight gradient)");
  } else if (c->lk.cal->n_gemm_fp8 == 0) {
    warn_fallback(c, "gemm_fp8", "the BF16 GEMM times moved to the FP8 peak (fp8_tflops) by the transfer rule: "
                  "FP8 GEMMs transferred, not measured");
    note_source(c, "to the FP8 peak (no gemm_fp8)");
  } else {
    char text[320];
    snprintf(text, sizeof text, "\"gemm_fp8\" has no point near m=%lld n=%lld k=%lld (the same n, k within %gx in m, or "
             "the same m, n within %gx in k; the first such shape); using the BF16 time moved to the FP8 peak by the "
             "transfer rule for it and any other", m, n, k, SIM_FP8_RATIO_M_FACTOR, SIM_FP8_RATIO_M_FACTOR);
    warn_lacking(c, "gemm_fp8 transfer", text);
    note_source(c, "to the FP8 peak (no gemm_fp8 point near)");
  }
  return 0;
}

/* layout.fp8: an FP8 GEMM of the plan's recipe: the per-tensor-scaled price (gemm_fp8_tensor_us: the
 * calibration's "gemm_fp8" list is cuBLASLt's per-tensor FP8), for "mxfp8" times the GPU catalogue's measured
 * MXFP8 / per-tensor ratio (sim_gemm_fp8_recipe_us); a GPU without that figure prices MXFP8 GEMMs as
 * per-tensor ones, warned once. */
static int gemm_fp8_us(sim_costs *c, long long m, long long n, long long k, bool wgrad, double *us, ts_err *e) {
  if (gemm_fp8_tensor_us(c, m, n, k, wgrad, us, e)) return -1;
  if (c->p->fp4_serving) { /* quantization nvfp4: that per-tensor FP8 price moved to the FP4 peak */
    *us = sim_gemm_fp4_transfer_us(&c->p->cluster.gpu, m, n, k, *us);
    warn_fallback(c, "gemm_nvfp4", "the FP8 GEMM prices moved to the NVFP4 peak (fp4_tflops) by the roofline rule: "
                  "NVFP4 GEMMs transferred, not measured");
    note_source(c, "NVFP4: the FP8 price moved to the FP4 peak");
    return 0;
  }
  if (c->p->fp8_recipe != PLAN_FP8_MXFP8) return 0;
  const topo_gpu *g = &c->p->cluster.gpu;
  if (g->mxfp8_gemm_ratio > 0) {
    *us = sim_gemm_fp8_recipe_us(c->p, *us);
    note_source(c, "MXFP8 / per-tensor FP8 GEMM ratio (GPU catalogue)");
    return 0;
  }
  bool warned = false;
  for (int i = 0; i < c->n_missing; i++) warned |= strcmp(c->missing[i], "mxfp8_gemm_ratio") == 0;
  if (!warned && c->n_missing < 16) snprintf(c->missing[c->n_missing++], sizeof c->missing[0], "mxfp8_gemm_ratio");
  if (!warned && c->lk.warn)
    fprintf(c->lk.warn, "tacosim: warning: GPU %s: no measured mxfp8_gemm_ratio; MXFP8 GEMMs priced as per-tensor "
            "FP8 ones\n", g->name);
  return 0;
}

/* Forward GEMM out[m x n] = X[m x k] W[k x n]; backward is dgrad [m x k] =
 * dY[m x n] W^T plus wgrad [k x n] = X^T dY. fp8: all three FP8 GEMMs (layout.fp8). */
static int gemm_phase_us(sim_costs *c, long long m, long long n, long long k, int phase, int part, bool fp8,
                         double *us, ts_err *e) {
  if (phase != PLAN_PHASE_BWD) return fp8 ? gemm_fp8_us(c, m, n, k, false, us, e) : gemm_us(c, m, n, k, us, e);
  double dgrad = 0, wgrad = 0;
  if (part != PLAN_PART_WGRAD && (fp8 ? gemm_fp8_us(c, m, k, n, false, &dgrad, e) : gemm_us(c, m, k, n, &dgrad, e)))
    return -1;
  if (part != PLAN_PART_DGRAD &&
      (fp8 ? gemm_fp8_us(c, k, n, m, true, &wgrad, e) : gemm_wgrad_us(c, k, n, m, &wgrad, e)))
    return -1;
  *us = dgrad + wgrad;
  return 0;
}

double sim_causal_softmax_scores(long long s) {
  const long long q = s / 8, r = s % 8; /* row i covers 8 x (floor(i / 8) + 1) columns */
  return 32.0 * (double)q * (double)(q + 1) + 8.0 * (double)r * (double)(q + 1);
}

/* Unfused attention (plan attention_backend "unfused"), as Megatron-LM ran it
 * before flash attention: for each of the micro-batch x heads/tp heads of
 * this GPU, S = Q K^T (s x s x d), a fused scale-mask-softmax over S, dropout
 * on the probabilities, O = P V (s x d x s); the full s x s scores (the mask
 * is applied after the GEMM, as the kernel did). The batched GEMMs are
 * priced as one GEMM of the stacked rows (one launch, the same FLOPs), the
 * softmax and dropout as memory-bound kernels over fp16/bf16 scores: softmax
 * reads and writes them (4 bytes per score), dropout (attention_dropout > 0)
 * reads, writes and stores a byte mask (5); backward: dropout 5, softmax 6
 * (its output, the incoming and outgoing gradient), dS K, dS^T Q, dO V^T,
 * P^T dO. The executor's unfused path (runtime/ops/exec_core.c) is the same
 * program without dropout; MLA's values are narrower than its queries and
 * keys (v_head_dim under qk_nope + qk_rope), so the GEMMs over the head
 * dimension take d = the q/k width (Q K^T, dQ = dS K, dK = dS^T Q) or dv =
 * the value width (P V, dP = dO V^T, dV = P^T dO), as the executor's do.
 * The executor's softmax kernels (exec_softmax_causal_lower_fwd / _bwd, its
 * default) read and write each row's scores up to the diagonal only, in
 * chunks of 8 (sim_causal_softmax_scores); Megatron's over the whole row. */
static int unfused_attention_us(sim_costs *c, int phase, double *us, double *gemm_part_us, ts_err *e) {
  const plan *p = c->p;
  const long long d = model_head_dim(&p->model), s = p->seq;
  const long long dv = p->model.attention == MODEL_ATTN_MLA ? p->model.v_head_dim : d;
  long long rows = (long long)p->micro_batch * (p->model.heads / p->tp) * s; /* stacked query rows */
  const double per_row = p->attention_backend == PLAN_ATTENTION_EXECUTOR ? sim_causal_softmax_scores(s) / (double)s
                                                                         : (double)s;
  double scores = (double)rows * per_row, g1, g2, g3 = 0, mem; /* the scores the softmax reads and writes */
  double dropout = p->attention_dropout > 0 ? 5.0 : 0.0; /* bytes per score of the dropout kernel */
  if (phase == PLAN_PHASE_BWD) {
    if (gemm_us(c, rows, d, s, &g1, e) || gemm_us(c, rows, s, dv, &g2, e) || gemm_us(c, rows, dv, s, &g3, e))
      return -1;
    g1 *= 2; /* dQ = dS K and dK = dS^T Q: the same shape */
    if (kernel_phase_us(c, "elementwise", (6.0 + dropout) * scores, phase, false, &mem, e)) return -1;
  } else {
    if (gemm_us(c, rows, s, d, &g1, e) || gemm_us(c, rows, dv, s, &g2, e)) return -1;
    if (kernel_phase_us(c, "elementwise", (4.0 + dropout) * scores, phase, false, &mem, e)) return -1;
  }
  *gemm_part_us = g1 + g2 + g3;
  *us = *gemm_part_us + mem;
  return 0;
}

/* The executor runs MLA's attention unfused (its fused kernels take equal
 * query/key and value widths only: exec_core.c, exec_attention_fused), so a
 * plan of its backend prices it so; attention_backend "unfused" always. */
bool sim_attention_runs_unfused(const plan *p) {
  const model_config *m = &p->model;
  if (p->attention_backend == PLAN_ATTENTION_UNFUSED) return true;
  return p->attention_backend == PLAN_ATTENTION_EXECUTOR && m->attention == MODEL_ATTN_MLA &&
         m->v_head_dim != model_head_dim(m);
}

int sim_attention_unfused_fwd_s(sim_costs *c, double *s, ts_err *e) {
  double us, gemm;
  if (unfused_attention_us(c, PLAN_PHASE_FWD, &us, &gemm, e)) return -1;
  *s = us * 1e-6;
  return 0;
}

/* MoE: one product of a grouped GEMM, G experts' GEMMs of the dense key
 * (m, n, k) each (forward, dgrad or wgrad convention; token_k: the rows are
 * k, the wgrad). From the calibration's "gemm_grouped.*" table of that
 * family (calibration.h: timed as the executor runs it, G products back to
 * back) at the group's FLOPs; without one, G x the dense GEMM less the
 * launches a grouped kernel saves, named once on the warning stream. */
/* A piece below its table's smallest point (a decode step's few rows an expert): the FLOP-keyed
 * lookup scales that point's time by FLOPs alone, though so few rows are bound by reading the experts'
 * weights; the piece takes at least that point's time scaled by the two rooflines with the bytes
 * (schema_grouped_gemm_bytes, as the transfer counts a grouped point). */
static double grouped_below_range_us(sim_costs *c, const char *name, int G, bool token_k, long long a,
                                     long long b, double flops, double us) {
  const schema_kernel_table *t = schema_kernel_table_of(c->lk.cal, name);
  if (!t || t->n == 0 || flops >= t->pts[0].x) return us;
  const double P = c->lk.roof.peak_flops, B = c->lk.roof.hbm_bytes_per_s;
  const double x0 = t->pts[0].x, b0 = schema_grouped_gemm_bytes(G, token_k, a, b, x0);
  const double bx = schema_grouped_gemm_bytes(G, token_k, a, b, flops);
  const double r0 = fmax(x0 / P, b0 / B), rx = fmax(flops / P, bx / B);
  const double anchored = t->pts[0].us * rx / r0;
  if (anchored > us) note_source(c, "below the grouped table: anchored by bytes");
  return anchored > us ? anchored : us;
}

/* The same family's table (token_k, a, b) of the group count nearest G (by ratio; the larger of two as near),
 * or 0 without one. */
static int grouped_nearest_g(const schema_calibration *cal, bool token_k, long long a, long long b, int G) {
  int best = 0;
  for (int i = 0; i < cal->n_kernels; i++) {
    int g;
    bool tk;
    long long x, y;
    if (schema_grouped_gemm_parse(cal->kernels[i].name, &g, &tk, &x, &y) || tk != token_k || x != a || y != b ||
        g == G || cal->kernels[i].n == 0)
      continue;
    const double d = fabs(log((double)g / G)), dbest = best ? fabs(log((double)best / G)) : INFINITY;
    if (d < dbest - 1e-12 || (fabs(d - dbest) <= 1e-12 && g > best)) best = g;
  }
  return best;
}

static int grouped_piece_us(sim_costs *c, int G, long long m, long long n, long long k, bool token_k, double *us,
                            ts_err *e) {
  char name[48];
  const long long a = token_k ? m : n, b = token_k ? n : k; /* the table's family */
  const double flops = 2.0 * G * (double)m * (double)n * (double)k;
  if (!schema_grouped_gemm_name(name, sizeof name, G, token_k, a, b) && schema_has_kernel(c->lk.cal, name)) {
    if (kernel_us(c, name, flops, 0, true, us, e)) return -1;
    *us = grouped_below_range_us(c, name, G, token_k, a, b, flops, *us);
    return 0;
  }
  /* The executor runs a group's products back to back, one GEMM an expert (exec_moe.c, experts()), launched
   * and timed that way in every grouped table: G products of one shape take G / G2 times G2 of them, read
   * from the family's table of the nearest other count G2 (its FLOPs: G2 of the same products). */
  const int G2 = grouped_nearest_g(c->lk.cal, token_k, a, b, G);
  char other[48];
  if (G2 > 0 && !schema_grouped_gemm_name(other, sizeof other, G2, token_k, a, b)) {
    char instead[160];
    snprintf(instead, sizeof instead, "%d / %d x the \"%s\" table (the same products back to back)", G, G2, other);
    warn_fallback(c, name, instead);
    const double flops2 = flops * G2 / G;
    double us2;
    if (kernel_us(c, other, flops2, 0, true, &us2, e)) return -1;
    *us = (double)G / G2 * grouped_below_range_us(c, other, G2, token_k, a, b, flops2, us2);
    return 0;
  }
  warn_fallback(c, name, "the groups x the dense \"gemm\" table less the launches a grouped kernel saves");
  double one;
  if (gemm_us(c, m, n, k, &one, e)) return -1;
  *us = G * one - (G - 1) * c->lk.roof.launch_us;
  if (*us < one) *us = one;
  return 0;
}

/* The experts of a grouped GEMM that get rows: the executor runs one GEMM per expert with rows and
 * none for an expert without (runtime/exec/exec_moe.c, experts()). With m copies spread evenly over G
 * experts, an expert gets none with probability (1 - 1/G)^m, so about G (1 - (1 - 1/G)^m) run: every one
 * of them in training (thousands of copies: the power underflows to 0), fewer in a decode step (8 tokens
 * x top 8 over 128 experts: 51). */
int sim_grouped_active(long long m, int G) {
  if (G <= 1 || m <= 0) return G < 1 ? 1 : G;
  const long n = lround(G * (1.0 - pow(1.0 - 1.0 / G, (double)m)));
  return n < 1 ? 1 : n > G ? G : (int)n;
}

/* (grouped_gemm_us' own *gemm_us hides gemm_us there) fp8: the FP8 GEMM of the shape (gemm_fp8_us) */
static int fused_moe_us(sim_costs *c, long long m, long long n, long long k, bool fp8, double *us, ts_err *e) {
  return fp8 ? gemm_fp8_us(c, m, n, k, false, us, e) : gemm_us(c, m, n, k, us, e);
}

/* An FP8 expert's GEMM against its BF16 one (quantization fp8, moe_kernel per-expert): the FP8 lookup's time of
 * one expert's (rows, n, k) over the "gemm" table's, which scales the grouped BF16 price (no grouped FP8 table:
 * the executor's back-to-back GEMMs keep their measured launches, each product at the FP8 rate of its shape). */
static int expert_fp8_ratio(sim_costs *c, long long m, long long n, long long k, double *ratio, ts_err *e) {
  double fp8, bf16;
  if (gemm_fp8_us(c, m, n, k, false, &fp8, e) || gemm_us(c, m, n, k, &bf16, e)) return -1;
  *ratio = bf16 > 0 ? fp8 / bf16 : 1.0;
  return 0;
}

double sim_grouped_idle_bytes(const model_op *mo) {
  if (mo->kind != MODEL_OP_GEMM || mo->groups <= 1) return 0;
  return 2.0 * (double)(mo->groups - sim_grouped_active(mo->m, mo->groups)) * (double)mo->n * (double)mo->k;
}

/* MoE: a grouped GEMM of `groups` experts, the active ones (above) on m / active rows each (the
 * mean): forward (rows, n, k); backward dgrad (rows, k, n) and wgrad (k, n, rows), as gemm_phase_us
 * keys the dense ones. Priced as the table of all the groups at those rows, times active / groups:
 * the products run back to back, so each expert without rows takes its share of that time off. */
static int grouped_gemm_us(sim_costs *c, const model_op *mo, int phase, int part, double *us, double *gemm_us,
                           ts_err *e) {
  const int active = sim_grouped_active(mo->m, mo->groups);
  long long rows = mo->m / active;
  if (rows < 1) rows = 1;
  const bool fp8 = plan_fp8_gemm(c->p, mo); /* inference quantization fp8 only (plan_fp8_serving_linear) */
  if (c->p->moe_fused && phase != PLAN_PHASE_BWD) {
    /* a serving engine's fused MoE kernel (inference "moe_kernel": "fused"; vLLM's fused_moe): one launch
     * over the rows sorted by expert, each active expert's weights read once, so it is priced as one dense
     * GEMM of the active experts side by side, rows x (active n) x k: the same FLOPs, the same weights
     * read, one launch, at the "gemm" table's measured rate for that shape (memory-bound at decode); under
     * FP8 weights the FP8 GEMM of that shape, as a dense FP8 GEMM is priced. That GEMM reads its rows of x
     * once, where the kernel reads each active expert's own rows: the other (active - 1) x rows x k elements
     * are added at the HBM bandwidth (BF16, or FP8 under FP8 weights). Nothing at decode (a few rows an
     * expert), but at prefill sizes a large part of the kernel's traffic (DeepSeek-V3's 256 experts at 256
     * rows each, TP 8: 0.94 GB beside 1.9 GB of weights, which the dense GEMM's price alone ran faster than
     * the GPU's memory allows). */
    if (fused_moe_us(c, rows, (long long)active * mo->n, mo->k, fp8, us, e)) return -1;
    *us += (fp8 ? 1.0 : 2.0) * (double)(active - 1) * (double)rows * (double)mo->k / c->lk.roof.hbm_bytes_per_s * 1e6;
    *gemm_us = *us;
    return 0;
  }
  double dgrad = 0, wgrad = 0;
  if (phase != PLAN_PHASE_BWD) {
    if (grouped_piece_us(c, mo->groups, rows, mo->n, mo->k, false, us, e)) return -1;
    double ratio;
    if (fp8 && expert_fp8_ratio(c, rows, mo->n, mo->k, &ratio, e)) return -1;
    if (fp8) *us *= ratio;
  } else {
    if (part != PLAN_PART_WGRAD && grouped_piece_us(c, mo->groups, rows, mo->k, mo->n, false, &dgrad, e)) return -1;
    if (part != PLAN_PART_DGRAD && grouped_piece_us(c, mo->groups, mo->k, mo->n, rows, true, &wgrad, e)) return -1;
    *us = dgrad + wgrad;
  }
  if (active < mo->groups) *us *= (double)active / mo->groups;
  *gemm_us = *us;
  return 0;
}

/* MoE routing ops (models/model_layer.c: router_topk, permute, unpermute):
 * the calibration's "moe_<op>_<phase>" table (runtime/calibrate/calibrate_moe.c; x =
 * the op's bytes, group = top_k) when measured; else the generic table of the
 * phase, named once. The router's backward was never measured on its own
 * (a few elementwise passes over t x E): generic, silently. *done = 0: not
 * a routing op. */
static int moe_route_us(sim_costs *c, const model_op *mo, const plan_op *op, double *us, int *done, ts_err *e) {
  static const char *const ops[][2] = {{"router_topk", "moe_router_topk"}, {"permute", "moe_permute"},
                                       {"unpermute", "moe_unpermute"}};
  *done = 0;
  if (mo->layers_kind != MODEL_LAYERS_MOE) return 0;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    if (strcmp(mo->name, ops[i][0])) continue;
    bool bwd = op->phase == PLAN_PHASE_BWD;
    char table[48];
    snprintf(table, sizeof table, "%s_%s", ops[i][1], bwd ? "bwd" : "fwd");
    if (schema_has_kernel(c->lk.cal, table)) {
      *done = 1;
      return kernel_us(c, table, op->bytes, c->p->model.top_k, false, us, e);
    }
    if (i > 0 || !bwd) warn_fallback(c, table, bwd ? "the generic \"elementwise_bwd\" table" : "the generic \"elementwise\" table");
    return 0;
  }
  return 0;
}

static int compute_us(sim_costs *c, const plan_op *op, double *us, double *gemm_us, ts_err *e);

/* quantization nvfp4: the quantize of an NVFP4 GEMM's BF16 input (m x k) to E2M1 values and E4M3 block scales
 * before the GEMM, a kernel of its own in TensorRT-LLM (NVFP4LinearMethod.apply calls fp4_quantize unless its
 * input is already an Fp4QuantizedTensor): a memory-bound pass priced from the "elementwise" table by its bytes,
 * m x k x 2 read and m x k x PLAN_NVFP4_BYTES_PER_PARAM written, as layout.fp8's casts are. 0 for any other op. */
static int nvfp4_quantize_us(sim_costs *c, const model_op *mo, const plan_op *op, double *us, ts_err *e) {
  *us = 0;
  if (!c->p->fp4_serving || op->phase == PLAN_PHASE_BWD || mo->groups > 1 || !plan_fp8_gemm(c->p, mo)) return 0;
  const long long m = op->row_chunks > 1 ? mo->m / op->row_chunks : mo->m;
  const double bytes = (double)m * (double)mo->k * (2.0 + PLAN_NVFP4_BYTES_PER_PARAM);
  note_source(c, "NVFP4 input quantize (elementwise)");
  return kernel_phase_us(c, "elementwise", bytes, PLAN_PHASE_FWD, false, us, e);
}

/* MoE: the wait for the busiest EP rank (PLAN_MOP_MOE_IMBALANCE, tag 0
 * forward, 1 backward): (max load - 1) x the time of this rank's routed-
 * expert ops of that phase (their rows are the mean), so a rank's expert
 * time plus the wait is what the busiest rank computes. */
static int moe_imbalance_us(sim_costs *c, const plan_op *op, double *us, double *gemm_us, ts_err *e) {
  double f = plan_moe_max_load(c->p), sum = 0, gsum = 0;
  *us = *gemm_us = 0;
  for (int i = 0; i < c->n_mops; i++) {
    const model_op *mo = &c->mops[i];
    if (mo->parallel != MODEL_PAR_EXPERT) continue;
    int bwd = op->tag == 1;
    plan_op x = {.kind = PLAN_OP_COMPUTE, .phase = (uint8_t)(bwd ? PLAN_PHASE_BWD : PLAN_PHASE_FWD),
                 .part = PLAN_PART_WHOLE, .model_op = (int16_t)i, .flops = bwd ? mo->flops_bwd : mo->flops_fwd,
                 .bytes = bwd ? mo->bytes_bwd : mo->bytes_fwd};
    double t, g;
    if (compute_us(c, &x, &t, &g, e)) return -1;
    sum += t, gsum += g;
  }
  *us = (f - 1.0) * sum;
  *gemm_us = (f - 1.0) * gsum;
  return 0;
}

/* Time of a compute op (us); *gemm_us: the part of it spent in GEMMs and
 * attention (tensor-core bound: the clock model speeds it by gemm_speed, the
 * rest by mem_speed). */
static int compute_us(sim_costs *c, const plan_op *op, double *us, double *gemm_us, ts_err *e) {
  const plan *p = c->p;
  int phase = op->phase;
  *gemm_us = 0;
  if (op->model_op >= 0 && op->model_op < c->n_mops) {
    const model_op *mo = &c->mops[op->model_op];
    switch (mo->kind) {
    case MODEL_OP_GEMM:
      if (mo->groups > 1) return grouped_gemm_us(c, mo, phase, op->part, us, gemm_us, e);
      /* tp_overlap_chunks: a forward row-parallel GEMM over 1/row_chunks of the token rows */
      if (gemm_phase_us(c, op->row_chunks > 1 ? mo->m / op->row_chunks : mo->m, mo->n, mo->k, phase, op->part,
                        plan_fp8_gemm(p, mo), us, e))
        return -1;
      /* tp_comm_overlap: a userbuffer kernel beside this piece holds SMs while it runs (plan_program_tpo.c) */
      if (p->tp_comm_overlap) {
        double alone = *us;
        if (sim_tpo_piece_us(&c->lk, p, c->intra_calibrated, NULL, 0, op->model_op, phase, op->part, op->row_chunk,
                             op->row_chunks, *us, us, e))
          return -1;
        if (*us != alone) note_source(c, "tp_comm_overlap_sm (SMs held by a userbuffer kernel)");
      }
      *gemm_us = *us;
      double b;
      if (bias_us(c, mo, op, &b, e)) return -1;
      *us += b;
      if (nvfp4_quantize_us(c, mo, op, &b, e)) return -1;
      *us += b;
      return 0;
    case MODEL_OP_ATTENTION:
      if (sim_attention_runs_unfused(p)) return unfused_attention_us(c, phase, us, gemm_us, e);
      if (attention_us(c, op, phase, us, e)) return -1;
      *gemm_us = *us;
      return 0;
    case MODEL_OP_NORM:
      return mapped_kernel_us(c, mo->name, mo->kind, "norm", op->bytes, phase, us, e);
    case MODEL_OP_EMBEDDING:
      return kernel_phase_us(c, "embedding", op->bytes, phase, false, us, e);
    case MODEL_OP_LOGITS_LOSS: /* fused: the forward kernel writes the gradient too */
      if (phase == PLAN_PHASE_BWD) {
        *us = 0;
        return 0;
      }
      return kernel_us(c, "loss", op->bytes, 0, false, us, e);
    case MODEL_OP_ELEMENTWISE:
    default: {
      double b;
      int done;
      if (moe_route_us(c, mo, op, us, &done, e)) return -1;
      if (done) return 0;
      if (mapped_kernel_us(c, mo->name, MODEL_OP_ELEMENTWISE, "elementwise", op->bytes, phase, us, e) ||
          bias_us(c, mo, op, &b, e))
        return -1;
      *us += b;
      return 0;
    }
    }
  }
  if (op->model_op == PLAN_MOP_OPTIMIZER) return kernel_us(c, "optimizer", op->bytes, 0, false, us, e);
  /* layout.fp8's quantize: a memory-bound pass over its bytes, the same kernel forward and backward */
  if (op->model_op == PLAN_MOP_FP8_CAST)
    return kernel_phase_us(c, "elementwise", op->bytes, PLAN_PHASE_FWD, false, us, e);
  /* MLA's copy of kv_b's output into the key and value heads, or of their gradients back (plan_mla.c): one
   * memory-bound kernel over its bytes, the same forward and backward */
  if (op->model_op == PLAN_MOP_MLA_KV_SCATTER)
    return kernel_phase_us(c, "elementwise", op->bytes, PLAN_PHASE_FWD, false, us, e);
  if (op->model_op == PLAN_MOP_MOE_IMBALANCE) return moe_imbalance_us(c, op, us, gemm_us, e);
  if (op->model_op == PLAN_MOP_FINAL_NORM)
    return mapped_kernel_us(c, "final_norm", MODEL_OP_NORM, "norm", op->bytes, phase, us, e);
  if (op->model_op == PLAN_MOP_EMBEDDING) return kernel_phase_us(c, "embedding", op->bytes, phase, false, us, e);
  if (op->model_op == PLAN_MOP_LOSS) {
    /* output GEMM [tokens x vocab/tp] = X [tokens x hidden] . E^T, then the
     * softmax cross-entropy. Its kernel computes the loss and the logits'
     * gradient in one pass in the forward (as the executor runs it, and the
     * calibration's "loss" table measures it), so the backward is the two
     * GEMM halves only. The kernel's x is its own traffic, not the op's
     * (which includes the GEMM's). Unfused (cross_entropy_loss_fusion
     * false): Megatron's fp32 kernels, the forward's after the GEMM, the
     * backward's with the dgrad half (unfused_ce_us). */
    long long tokens = (long long)p->micro_batch * plan_local_seq(p);
    long long vocab = model_vocab_per_gpu(&p->model, p->tp);
    double g, l = 0;
    if (gemm_phase_us(c, tokens, vocab, p->model.hidden, phase, op->part, false, &g, e)) return -1;
    if (p->ce_unfused) {
      if (op->part != PLAN_PART_WGRAD && unfused_ce_us(c, phase, &l, e)) return -1;
    } else if (phase != PLAN_PHASE_BWD && kernel_us(c, "loss", c->loss_kernel_bytes, 0, false, &l, e)) {
      return -1;
    }
    *us = g + l;
    *gemm_us = g;
    return 0;
  }
  /* unknown compute op: roofline on its own FLOPs and bytes */
  double tf = op->flops / c->lk.roof.peak_flops, tb = op->bytes / c->lk.roof.hbm_bytes_per_s;
  *us = (op->flops > 0 || op->bytes > 0) ? c->lk.roof.launch_us + (tf > tb ? tf : tb) * 1e6 : 0;
  if (tf > tb) *gemm_us = *us;
  return 0;
}

/* The FLOPs the attention kernel of the plan's backend does for an
 * attention op. The op counts the full s x s square (models/model_layer.c,
 * the convention of the model-FLOP figures: forward 4 b s^2 h d, backward 2.5x
 * that). The causal kernels do less: fused (cuDNN) and flash attention, and
 * the executor (its flash path; its unfused path does more), skip the tiles
 * above the diagonal, half the square, and recompute Q K^T in the backward:
 * half the op's count in both directions (flash-attention's own benchmark
 * count, benchmarks/benchmark_flash_attention.py; schema_attn_flops). The
 * unfused program multiplies the full square (the mask comes after the GEMM)
 * and keeps P: forward the op's count, backward 4 GEMMs of 2 b h s^2 d, 0.8
 * of the op's 2.5x. A CP piece's op counts its local square the same way. */
double sim_attention_kernel_flops_of(int backend, bool bwd, double op_flops) {
  if (backend != PLAN_ATTENTION_UNFUSED) return 0.5 * op_flops;
  return bwd ? 0.8 * op_flops : op_flops;
}

double sim_attention_kernel_flops(const plan *p, const plan_op *op) {
  const int backend = sim_attention_runs_unfused(p) ? PLAN_ATTENTION_UNFUSED : p->attention_backend;
  return sim_attention_kernel_flops_of(backend, op->phase == PLAN_PHASE_BWD, op->flops);
}

double sim_attention_roof_us(const schema_roofline *r, int backend, bool bwd, double op_flops, double bytes) {
  double tf = sim_attention_kernel_flops_of(backend, bwd, op_flops) / r->peak_flops, tb = bytes / r->hbm_bytes_per_s;
  return r->launch_us + (tf > tb ? tf : tb) * 1e6;
}

/* No op may run faster than the GPU allows: the FLOPs its kernel does at the
 * dense BF16 peak or its bytes beyond what the L2 cache holds at the HBM
 * bandwidth, whichever takes longer. (A working set the L2 holds may be
 * served from it: the calibration's own MoE permute points of 19-38 MB run at
 * 4.1-5.0 TB/s of nominal bytes on the H200, above its 4.8 TB/s HBM, and a
 * check that counted them at the HBM rate refused them.) A cost below that is
 * a bug (a table of another GPU, a unit mistake, a transfer gone wrong), not a
 * prediction: the simulation stops and names the op. */
double sim_ceiling_us(const sim_costs *c, double flops, double bytes, double *hbm_bytes) {
  const double l2 = c->p->cluster.gpu.l2_mib * 1048576.0;
  *hbm_bytes = bytes > l2 ? bytes - l2 : 0;
  double tf = flops / c->lk.roof.peak_flops * 1e6, tb = *hbm_bytes / c->lk.roof.hbm_bytes_per_s * 1e6;
  return tf > tb ? tf : tb;
}

#define CEILING_SLACK 0.98 /* rounding of the op's FLOP and byte counts */
static int check_ceiling(const sim_costs *c, const plan_op *op, double us, ts_err *e) {
  /* the loss backward's op counts the fused cross-entropy's gradient, which
   * its forward kernel computed (compute_us prices only the GEMM halves);
   * the unfused one's backward kernels are priced there */
  if (op->model_op == PLAN_MOP_LOSS && op->phase == PLAN_PHASE_BWD && !c->p->ce_unfused) return 0;
  bool attn = op->model_op >= 0 && op->model_op < c->n_mops && c->mops[op->model_op].kind == MODEL_OP_ATTENTION;
  double flops = attn ? sim_attention_kernel_flops(c->p, op) : op->flops, bytes = op->bytes;
  const topo_gpu *g = &c->p->cluster.gpu;
  /* a grouped GEMM's idle experts' weights are not read (BF16 bytes, taken off before an FP8 GEMM's halving) */
  if (op->model_op >= 0 && op->model_op < c->n_mops && op->phase != PLAN_PHASE_BWD)
    bytes -= sim_grouped_idle_bytes(&c->mops[op->model_op]);
  if (op->model_op >= 0 && op->model_op < c->n_mops && plan_fp8_gemm(c->p, &c->mops[op->model_op]) &&
      g->fp8_tflops > 0) { /* an FP8 GEMM: its FLOPs at the FP8 peak, its operands at half their BF16 bytes or more */
    flops *= g->bf16_tflops / g->fp8_tflops;
    bytes *= 0.5;
    /* an NVFP4 one: its FLOPs at the FP4 peak, its operands at PLAN_NVFP4_BYTES_PER_PARAM of 2 bytes or more */
    if (c->p->fp4_serving && g->fp4_tflops > 0)
      flops *= g->fp8_tflops / g->fp4_tflops, bytes *= PLAN_NVFP4_BYTES_PER_PARAM;
  }
  double hbm_bytes, floor_us = sim_ceiling_us(c, flops, bytes, &hbm_bytes);
  if (us >= CEILING_SLACK * floor_us) return 0;
  char name[96];
  plan_op_name(c->p, op, name, sizeof name);
  return ts_fail_sim(e,
                     "%s: op %s priced at %.3g us, faster than the %s's ceiling (%.3g us: %.3g FLOP%s at %.0f "
                     "TFLOP/s, %.3g bytes beyond its %.0f MiB L2 at %.0f GB/s); the costs do not belong to this GPU",
                     c->lk.cal->path[0] ? c->lk.cal->path : "calibration", name, us, c->p->cluster.gpu.name, floor_us,
                     flops, attn ? " (the attention kernel's)" : "", c->lk.roof.peak_flops / 1e12, hbm_bytes,
                     c->p->cluster.gpu.l2_mib, c->lk.roof.hbm_bytes_per_s / 1e9);
}

int sim_compute_s(sim_costs *c, const plan_op *op, double *s, ts_err *e) {
  double gemm;
  return sim_compute_parts_s(c, op, s, &gemm, e);
}

/* The cache slot of op; *hit: it holds op's price. */
static struct cost_entry *cost_slot(sim_costs *c, const plan_op *op, bool *hit) {
  unsigned h = (unsigned)(op->model_op + 16) * 2654435761u ^ (unsigned)(op->phase * 4 + op->part) * 40503u;
  h ^= (unsigned)(op->row_chunk * 256 + op->row_chunks) * 2246822519u;
  h ^= (unsigned)(long long)op->flops * 97u ^ (unsigned)(long long)op->bytes * 31u;
  struct cost_entry *ce = &c->cache[h % (sizeof c->cache / sizeof c->cache[0])];
  *hit = ce->used && ce->model_op == op->model_op && ce->phase == op->phase && ce->part == op->part &&
         ce->row_chunk == op->row_chunk && ce->row_chunks == op->row_chunks && ce->flops == op->flops &&
         ce->bytes == op->bytes;
  return ce;
}

int sim_compute_parts_s(sim_costs *c, const plan_op *op, double *s, double *gemm_s, ts_err *e) {
  bool hit;
  struct cost_entry *ce = cost_slot(c, op, &hit);
  if (hit) {
    *s = ce->us * 1e-6;
    *gemm_s = ce->gemm_us * 1e-6;
    return 0;
  }
  double us, gemm_us;
  c->src[0] = '\0';
  if (compute_us(c, op, &us, &gemm_us, e)) return -1;
  if (check_ceiling(c, op, us, e)) return -1;
  *ce = (struct cost_entry){op->model_op, op->phase,     op->part, op->row_chunk, op->row_chunks, 1,
                            op->flops,    op->bytes, us,       gemm_us};
  memcpy(ce->src, c->src, sizeof ce->src);
  *s = us * 1e-6;
  *gemm_s = gemm_us * 1e-6;
  return 0;
}

void sim_compute_source(sim_costs *c, const plan_op *op, char *out, size_t cap) {
  bool hit;
  struct cost_entry *ce = cost_slot(c, op, &hit);
  double s, gemm_s;
  ts_err e = {0};
  if (!hit && sim_compute_parts_s(c, op, &s, &gemm_s, &e)) return; /* priced before: cannot fail now */
  append_sources(out, cap, ce->src, false);
}

const char *sim_coll_name(const plan_op *op) {
  return ts_coll_name(op->kind == PLAN_OP_COLLECTIVE ? (ts_coll)op->coll : TS_COLL_SENDRECV);
}

static bool is_taco(const plan_codec *cd) { return cd->kind == PLAN_CODEC_TACO || cd->kind == PLAN_CODEC_TACO_CAAT; }
static bool is_caat(const plan_codec *cd) { return cd->kind == PLAN_CODEC_CAAT || cd->kind == PLAN_CODEC_TACO_CAAT; }

/* Bytes per element of what TACO compresses: the op's own elem_bytes when the
 * program set it (bf16 DP gradients: grad_reduce_in_fp32 false), else fp32
 * for DP gradients and CAAT-Net's backward shared channels, bf16 elsewhere. */
double sim_codec_chunks(double in_bytes) {
  double chunks = ceil(in_bytes / (double)TS_CODEC_CHUNK_BYTES);
  return chunks < 1 ? 1 : chunks;
}

static int codec_elem_bytes(const plan_op *op) {
  const plan_codec *cd = &op->codec;
  if (op->elem_bytes) return op->elem_bytes;
  return op->traffic == PLAN_TRAFFIC_DP || (op->traffic == PLAN_TRAFFIC_TP_BWD && is_caat(cd)) ? 4 : 2;
}

/* Bytes the codec kernels read: the payload that actually travels before
 * TACO (CAAT-Net's shared channels only), recovered from the wire size. */
static double codec_input_bytes(const plan_op *op) {
  const plan_codec *cd = &op->codec;
  if (!is_taco(cd)) return op->wire_bytes;
  return op->wire_bytes / (1.0 + 8.0 / cd->group) * codec_elem_bytes(op);
}

/* The encode and decode (decode-sum for a reduce-scatter) kernels of a TACO
 * message of `in` input bytes, and the decode-sum-encode of a two-shot
 * all-reduce; the tables are keyed by bf16 input bytes. */
static int taco_kernels_us(sim_costs *c, const plan_op *op, int nranks, double in, double *enc, double *dec,
                           double *dse, ts_err *e) {
  const plan_codec *cd = &op->codec;
  /* the reduce steps work on one rank's block: the message / nranks */
  double block = in / (nranks > 1 ? nranks : 1);
  bool rs = op->kind == PLAN_OP_COLLECTIVE && op->coll == PLAN_COLL_REDUCESCATTER;
  *enc = *dec = *dse = 0;
  if (kernel_us(c, "taco_encode", in, cd->group, false, enc, e)) return -1;
  if (rs && schema_has_kernel(c->lk.cal, "taco_decode_sum")) {
    if (kernel_us(c, "taco_decode_sum", block, cd->group, false, dec, e)) return -1;
  } else if (kernel_us(c, "taco_decode", in, cd->group, false, dec, e)) {
    return -1;
  }
  /* two-shot all-reduce: decode the shards, sum, re-encode for the all-gather */
  if (op->kind == PLAN_OP_COLLECTIVE && op->coll == PLAN_COLL_ALLREDUCE && nranks > 1 &&
      kernel_us(c, "taco_decode_sum_encode", block, cd->group, false, dse, e))
    return -1;
  return 0;
}

static int codec_cost_uncached(sim_costs *c, const plan_op *op, int nranks, sim_codec_cost *cc, ts_err *e) {
  memset(cc, 0, sizeof *cc);
  const plan_codec *cd = &op->codec;
  if (cd->kind == PLAN_CODEC_NONE) return 0;
  double in = codec_input_bytes(op);
  double gather = 0, scatter = 0, scale = 0;
  if (is_caat(cd)) {
    /* pack the shared channels, unpack them after; scale the private ones by
     * sqrt(TP) when the calibration measured that kernel (keyed by their bf16 bytes) */
    if (kernel_us(c, "caat_gather", in, 0, false, &gather, e) || kernel_us(c, "caat_scatter", in, 0, false, &scatter, e))
      return -1;
    double private_bytes = op->bytes * (1.0 - cd->p);
    if (private_bytes > 0 && schema_has_kernel(c->lk.cal, "caat_scale_private") &&
        kernel_us(c, "caat_scale_private", private_bytes, 0, false, &scale, e))
      return -1;
  }
  double enc = 0, dec = 0, dse = 0;
  if (is_taco(cd) && taco_kernels_us(c, op, nranks, in, &enc, &dec, &dse, e)) return -1;
  double chunks = sim_codec_chunks(in);
  /* Chunk i+1's codec overlaps chunk i's transfer: only the first encode and
   * the last decode stay outside the pipeline. One chunk (the whole message)
   * overlaps nothing: a two-shot all-reduce's decode-sum-encode waits for its
   * reduce-scatter, and its all-gather for it. */
  cc->pre_us = gather + enc / chunks + (chunks > 1 ? 0 : dse);
  cc->post_us = dec / chunks + scatter + scale;
  cc->total_us = gather + enc + dse + dec + scatter + scale;
  cc->caat_us = gather + scatter + scale;
  cc->mid_us = cc->total_us - cc->pre_us - cc->post_us;
  return 0;
}

/* ---- collectives the calibration did not measure: the NCCL model (sim_nccl.c) ---- */

/* The measured table of `name` at nranks (*exact), else the one nearest in
 * rank count (the smaller on a tie); NULL when there is none. */
static const schema_coll_table *coll_table(const schema_calibration *cal, const char *name, int nranks, bool *exact) {
  const schema_coll_table *best = NULL;
  for (int i = 0; i < cal->n_colls; i++) {
    const schema_coll_table *t = &cal->colls[i];
    if (strcmp(t->name, name) != 0 || t->n < 1 || t->nranks < 2) continue;
    int d = abs(t->nranks - nranks), bd = best ? abs(best->nranks - nranks) : 0;
    if (!best || d < bd || (d == bd && t->nranks < best->nranks)) best = t;
  }
  *exact = best && best->nranks == nranks;
  return best;
}

int sim_intra_coll_us(schema_lookup *lk, const topo_cluster *cl, bool intra_calibrated, const char *name, int nranks,
                      double bytes, sim_intra_coll *how, ts_err *e) {
  memset(how, 0, sizeof *how);
  bool exact = false;
  how->anchor = intra_calibrated ? coll_table(lk->cal, name, nranks, &exact) : NULL;
  if (exact) return schema_lookup_coll(lk, name, nranks, bytes, &how->us, e);
  how->modelled = true;
  sim_nccl_coll coll;
  if (sim_nccl_coll_from_name(name, &coll))
    return ts_fail(e, NULL, "program", "collective \"%s\": not one the NCCL model knows", name);
  sim_nccl_fabric_of_cluster(cl, &how->fabric);
  if (sim_nccl_time(&how->fabric, coll, bytes, nranks, nranks, how->anchor, &how->choice, e)) return -1;
  how->us = how->choice.us;
  return 0;
}

/* The NCCL model's choice, named once per collective and rank count on the warning stream. */
static void warn_model(sim_costs *c, const char *name, int nranks, double bytes, const sim_intra_coll *how) {
  char key[48], desc[64], why[96], what[320];
  snprintf(key, sizeof key, "%s.%d", name, nranks);
  for (int i = 0; i < c->n_missing; i++) /* named already (the message below costs more than the lookup) */
    if (strcmp(c->missing[i], key) == 0) return;
  sim_nccl_describe(&how->choice, desc, sizeof desc);
  if (how->anchor)
    snprintf(why, sizeof why, "anchored on the measured %d-rank curve (x%.2f here)", how->anchor->nranks,
             how->choice.anchor_scale);
  else
    snprintf(why, sizeof why, "not anchored: no measured curve of this collective on this fabric");
  snprintf(what, sizeof what, "the NCCL model on %s, NVLS %s: %s at %.0f bytes (other sizes may choose otherwise); %s",
           topo_intra_kind_name(how->fabric.intra), how->fabric.nvls ? "on" : "off", desc, bytes, why);
  warn_fallback(c, key, what);
}

/* The flex dispatcher's token all-to-all as its kernel moves it (plan_moe_flex_link_share, the published
 * rates): what leaves this GPU, wire x (n - 1) / n, at the kernel's share of the link's per-direction rate
 * (NVLink inside a node, the rank's NIC on the RDMA leg), after one hop's latency; *s < 0 when the op is not one.
 * The published rates are whole-kernel times at 4,096 tokens, its fill and drain included: no launch cost is
 * added beyond the hop. */
double sim_flex_token_s(const plan *p, const plan_op *op, int nranks) {
  if (op->kind != PLAN_OP_COLLECTIVE || op->coll != PLAN_COLL_ALLTOALL || op->model_op != PLAN_MOP_MOE_TOKENS ||
      op->tag < 0 || nranks < 2)
    return -1;
  int per_node;
  /* across nodes: the RDMA leg, or an EP group of one rank a node (all its traffic on the NICs) */
  bool rdma = op->group == PLAN_GROUP_EP_RAIL || (op->group == PLAN_GROUP_EP && plan_moe_ep_nodes(p, &per_node) > 1);
  double share = plan_moe_flex_link_share(p, rdma ? PLAN_GROUP_EP_RAIL : (plan_group_kind)op->group,
                                          op->tag == PLAN_MOE_TAG_COMBINE);
  if (!(share > 0)) return -1;
  const topo_cluster *cl = &p->cluster;
  /* a GPU's NIC rate: the node's NICs over its GPUs, at most one NIC's */
  double nic = cl->gpus_per_node > cl->nic.per_node && cl->gpus_per_node > 0
                   ? cl->nic.gbps * cl->nic.per_node / cl->gpus_per_node
                   : cl->nic.gbps;
  double gbps = rdma ? nic : cl->intra.gbps_per_gpu, lat_us = rdma ? cl->nic.latency_us : cl->intra.latency_us;
  if (!(gbps > 0)) return -1;
  return lat_us * 1e-6 + op->wire_bytes * (nranks - 1.0) / nranks / (share * gbps * 1e9);
}

static int calibrated_uncached(sim_costs *c, const plan_op *op, int nranks, double *s, int *codec_included,
                              ts_err *e) {
  const char *name = sim_coll_name(op);
  *codec_included = 0;
  double us, flex = sim_flex_token_s(c->p, op, nranks);
  if (flex >= 0) {
    note_source(c, "the flex kernel's published link share");
    *s = flex;
    return 0;
  }
  if (is_taco(&op->codec) && c->intra_calibrated) {
    char cname[48];
    snprintf(cname, sizeof cname, "%s.taco%d", name, op->codec.group);
    int elem = codec_elem_bytes(op);
    char fname[56];
    snprintf(fname, sizeof fname, "%s.fp32", cname);
    if (elem == 4 && schema_has_coll(c->lk.cal, fname)) { /* measured on fp32 payloads, keyed by their bytes */
      if (schema_lookup_coll(&c->lk, fname, nranks, codec_input_bytes(op), &us, e)) return -1;
      note_coll(c, fname, nranks, codec_input_bytes(op));
      *codec_included = 1;
      *s = us * 1e-6;
      return 0;
    }
    if (schema_has_coll(c->lk.cal, cname)) {
      /* The table was measured on bf16 payloads: an fp32 payload of the same
       * element count sends the same wire bytes, and its encode reads (decode
       * writes) elem - 2 more bytes per element than the bf16 one; those
       * kernels are bandwidth-bound, so that costs their bf16 time times
       * (elem - 2) / (2 + wire bytes per element). Looking the fp32 bytes up
       * instead priced twice the elements (run 7: DP2 TACO over shm). */
      if (elem == 4) warn_fallback(c, fname, "the bf16 table at the same element count, fp32 codec traffic added");
      double bf16_in = codec_input_bytes(op) / elem * 2.0;
      if (schema_lookup_coll(&c->lk, cname, nranks, bf16_in, &us, e)) return -1;
      note_coll(c, cname, nranks, bf16_in);
      if (elem > 2) {
        double enc, dec, dse, wire_per_elem = 1.0 + 8.0 / op->codec.group;
        if (taco_kernels_us(c, op, nranks, bf16_in, &enc, &dec, &dse, e)) return -1;
        us += (enc + dec) * (elem - 2) / (2.0 + wire_per_elem);
      }
      *codec_included = 1;
      *s = us * 1e-6;
      return 0;
    }
  }
  if (op->wire_bytes <= 0) {
    note_source(c, "no bytes on the wire");
    *s = 0;
    return 0;
  }
  /* measured at this rank count: the calibration's curve; else the NCCL
   * model, anchored on the measured curve of this fabric when there is one */
  sim_intra_coll how;
  if (sim_intra_coll_us(&c->lk, &c->p->cluster, c->intra_calibrated, name, nranks, op->wire_bytes, &how, e)) return -1;
  if (how.modelled) {
    warn_model(c, name, nranks, op->wire_bytes, &how);
    char what[SIM_COST_SRC_LEN];
    if (how.anchor)
      snprintf(what, sizeof what, "NCCL model (%s/%s), anchored on collectives.%s.%d (%s)",
               sim_nccl_algo_name(how.choice.algo), sim_nccl_proto_name(how.choice.proto), name, how.anchor->nranks,
               c->lk.cal->transport[0] ? c->lk.cal->transport : "?");
    else
      snprintf(what, sizeof what, "NCCL model (%s/%s) on %s, no measured curve", sim_nccl_algo_name(how.choice.algo),
               sim_nccl_proto_name(how.choice.proto), topo_intra_kind_name(how.fabric.intra));
    note_source(c, what);
  } else {
    note_coll(c, name, nranks, op->wire_bytes);
  }
  *s = how.us * 1e-6;
  return 0;
}

/* ---- cached entry points (the same messages repeat thousands of times) ---- */

static struct comm_entry *comm_slot(sim_costs *c, const plan_op *op, int nranks, int *hit) {
  unsigned long long h = (unsigned long long)(op->kind * 7 + op->coll) * 0x9E3779B97F4A7C15ull;
  h ^= (unsigned long long)nranks * 0xC2B2AE3D27D4EB4Full;
  h ^= (unsigned long long)(long long)op->bytes * 0x165667B19E3779F9ull;
  h ^= (unsigned long long)(long long)op->wire_bytes * 0x27D4EB2F165667C5ull;
  h ^= (unsigned long long)(op->codec.kind * 1024 + op->codec.group + op->traffic * 7);
  h ^= (unsigned long long)((op->tag + 2) * 64 + op->group) * 0x94D049BB133111EBull;
  /* a final mix: byte counts that are multiples of large powers of two leave the low bits of the products
   * above zero, and the slot is taken from the low bits */
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  /* two ways a set: messages whose bytes differ in the last bits (44739242.666666664 and ...672, the same
   * tensor computed two ways) share a hash, and alternating in one slot each evicted the other */
  const size_t n_slots = sizeof c->comm_cache / sizeof c->comm_cache[0];
  struct comm_entry *set = &c->comm_cache[(h % (n_slots / 2)) * 2], *ce = NULL;
  for (int w = 0; w < 2 && !ce; w++) {
    struct comm_entry *x = &set[w];
    if (x->used && x->kind == op->kind && x->coll == op->coll && x->nranks == nranks && x->bytes == op->bytes &&
        x->wire == op->wire_bytes && x->codec_kind == op->codec.kind && x->group == op->codec.group &&
        x->p == op->codec.p && x->traffic == op->traffic && x->tag == op->tag && x->op_group == op->group)
      ce = x;
  }
  *hit = ce != NULL;
  if (ce) {
    set[0].recent = ce == &set[0], set[1].recent = ce == &set[1];
  } else {
    ce = !set[0].used ? &set[0] : !set[1].used ? &set[1] : set[0].recent ? &set[1] : &set[0]; /* the older way */
    memset(ce, 0, sizeof *ce);
    ce->used = 1, ce->kind = op->kind, ce->coll = op->coll, ce->nranks = nranks, ce->bytes = op->bytes;
    ce->wire = op->wire_bytes, ce->codec_kind = op->codec.kind, ce->group = op->codec.group;
    ce->p = op->codec.p, ce->traffic = op->traffic, ce->tag = op->tag, ce->op_group = op->group;
    ce->codec_included = -1; /* codec cost not computed yet */
    set[0].recent = ce == &set[0], set[1].recent = ce == &set[1];
  }
  return ce;
}

int sim_codec_cost_of(sim_costs *c, const plan_op *op, int nranks, sim_codec_cost *cc, ts_err *e) {
  int hit;
  struct comm_entry *ce = comm_slot(c, op, nranks, &hit);
  if (ce->codec_included != -1) {
    *cc = ce->cc;
    return 0;
  }
  c->src[0] = '\0';
  if (codec_cost_uncached(c, op, nranks, cc, e)) {
    ce->used = 0;
    return -1;
  }
  memcpy(ce->codec_src, c->src, sizeof ce->codec_src);
  ce->cc = *cc;
  ce->codec_included = 0;
  return 0;
}

int sim_coll_calibrated_s(sim_costs *c, const plan_op *op, int nranks, double *s, int *codec_included, ts_err *e) {
  int hit;
  struct comm_entry *ce = comm_slot(c, op, nranks, &hit);
  if (ce->have_calibrated) {
    *s = ce->calibrated_s;
    *codec_included = ce->have_calibrated == 2;
    return 0;
  }
  c->src[0] = '\0';
  if (calibrated_uncached(c, op, nranks, s, codec_included, e)) {
    ce->used = 0;
    return -1;
  }
  memcpy(ce->src, c->src, sizeof ce->src);
  ce->calibrated_s = *s;
  ce->have_calibrated = *codec_included ? 2 : 1;
  return 0;
}

void sim_comm_source(sim_costs *c, const plan_op *op, int nranks, bool in_node, const char *flows, char *out,
                     size_t cap) {
  double s;
  int codec_included = 0, hit;
  sim_codec_cost cc;
  ts_err e = {0};
  /* priced before (the op ran): cannot fail now, and the entry holds what priced it */
  if (in_node && sim_coll_calibrated_s(c, op, nranks, &s, &codec_included, &e)) return;
  if (op->codec.kind != PLAN_CODEC_NONE && sim_codec_cost_of(c, op, nranks, &cc, &e)) return;
  struct comm_entry *ce = comm_slot(c, op, nranks, &hit);
  if (in_node)
    append_sources(out, cap, ce->src, false);
  else if (flows && flows[0])
    append_source(out, cap, flows);
  /* a measured compressed collective includes TACO's kernels, not CAAT-Net's packing (sim_comm_in_node_s) */
  if (op->codec.kind != PLAN_CODEC_NONE) append_sources(out, cap, ce->codec_src, codec_included);
}

#ifndef TACOSIM_CALIBRATION_DIR
#define TACOSIM_CALIBRATION_DIR "calibration"
#endif

/* The cluster GPU's name as a calibration file names it: lower case; 0 when
 * it holds a character other than letters, digits, '-', '.' and '_' (an
 * inline GPU block may name itself anything; such a GPU has no file). */
static int file_stem(const char *gpu, char *stem, size_t cap) {
  size_t n = 0;
  for (; gpu[n]; n++) {
    unsigned char ch = (unsigned char)gpu[n];
    if (n + 1 >= cap || !(isalnum(ch) || ch == '-' || ch == '.' || ch == '_')) return 0;
    stem[n] = (char)tolower(ch);
  }
  stem[n] = 0;
  return n > 0;
}

const char *sim_default_calibration(const topo_cluster *c) {
  static char path[600];
  const char *t = sim_transport_of(c->intra.kind);
  if (strcmp(t, "pcie") == 0) t = "nvlink";
  char stem[sizeof c->gpu.name];
  if (file_stem(c->gpu.name, stem, sizeof stem)) {
    snprintf(path, sizeof path, "%s/%s-%s.json", TACOSIM_CALIBRATION_DIR, stem, t);
    if (access(path, R_OK) == 0) return path;
  }
  snprintf(path, sizeof path, "%s/h200-%s.json", TACOSIM_CALIBRATION_DIR, t);
  if (access(path, R_OK) == 0) return path;
  if (strcmp(t, "nvlink") == 0)
    snprintf(path, sizeof path, "%s/h200-derived.json", TACOSIM_CALIBRATION_DIR);
  else
    snprintf(path, sizeof path, "%s/h200-%s-derived.json", TACOSIM_CALIBRATION_DIR, t);
  return path;
}

/* ---- compute costs memoised without a bound on their number ---- */

static size_t memo_hash(const plan_op *op) {
  uint64_t f, b;
  memcpy(&f, &op->flops, sizeof f);
  memcpy(&b, &op->bytes, sizeof b);
  uint64_t h = (uint64_t)(uint16_t)op->model_op * 0x9E3779B97F4A7C15ull;
  h ^= ((uint64_t)op->row_chunk << 24 | (uint64_t)op->phase << 16 | (uint64_t)op->part << 8 | op->row_chunks) *
       0xC2B2AE3D27D4EB4Full;
  h = (h ^ (h >> 29)) + f * 0x165667B19E3779F9ull;
  h = (h ^ (h >> 31)) + b * 0x27D4EB2F165667C5ull;
  return (size_t)(h ^ (h >> 32));
}

static bool memo_same(const sim_cost_entry *c, const plan_op *op) {
  return c->used && c->model_op == op->model_op && c->phase == op->phase && c->part == op->part &&
         c->row_chunk == op->row_chunk && c->row_chunks == op->row_chunks && c->flops == op->flops &&
         c->bytes == op->bytes;
}

static sim_cost_entry *memo_slot(sim_cost_memo *m, const plan_op *op) {
  size_t i = memo_hash(op) & (m->cap - 1);
  while (m->slots[i].used && !memo_same(&m->slots[i], op)) i = (i + 1) & (m->cap - 1);
  return &m->slots[i];
}

static int memo_grow(sim_cost_memo *m) {
  sim_cost_memo bigger = {calloc(m->cap ? 2 * m->cap : 256, sizeof(sim_cost_entry)), m->cap ? 2 * m->cap : 256, 0};
  if (!bigger.slots) return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].used) {
      plan_op key = {.model_op = m->slots[i].model_op, .phase = m->slots[i].phase, .part = m->slots[i].part,
                     .row_chunk = m->slots[i].row_chunk, .row_chunks = m->slots[i].row_chunks,
                     .flops = m->slots[i].flops, .bytes = m->slots[i].bytes};
      *memo_slot(&bigger, &key) = m->slots[i];
      bigger.n++;
    }
  free(m->slots);
  *m = bigger;
  return 0;
}

int sim_cost_memo_get(sim_cost_memo *m, sim_costs *c, const plan_op *op, double *s, double *gemm_s, ts_err *e) {
  if ((m->n + 1) * 2 > m->cap && memo_grow(m)) return ts_fail_sys(e, "out of memory");
  sim_cost_entry *ce = memo_slot(m, op);
  if (!ce->used) {
    if (sim_compute_parts_s(c, op, s, gemm_s, e)) return -1;
    *ce = (sim_cost_entry){op->model_op, op->phase,     op->part,  op->row_chunk, op->row_chunks, 1,
                           op->flops,    op->bytes, *s, *gemm_s};
    m->n++;
  }
  *s = ce->s;
  *gemm_s = ce->gemm_s;
  return 0;
}

void sim_cost_memo_free(sim_cost_memo *m) {
  free(m->slots);
  *m = (sim_cost_memo){0};
}
