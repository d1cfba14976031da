/* sim_infer.c — prefill and decode of an inference plan, op by op, with the
 * training simulator's cost functions (sim_costs.c).
 *
 * One forward pass of one pipeline stage is a chain: per layer, the compute
 * ops of model_layer_ops() in order, with a blocking TP all-reduce after the
 * row-parallel attn_out and fc2 GEMMs. Stages run one after the other for the
 * one batch (no pipelining across batches), with an activation send between. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_costs.h"
#include "sim_infer.h"
#include "sim_op_power.h"
#include "plan_infer_policy.h"


static void add_note(sim_infer_result *r, const char *text) {
  if (r->n_notes < SIM_INFER_MAX_NOTES) snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s", text);
}

/* Adds s seconds over count launches to op `name` of a phase's list (rec NULL: not recorded). */
static void rec_op(sim_infer_op_costs *rec, const char *name, int count, double s) {
  if (!rec || count < 1) return;
  int j = 0;
  while (j < rec->n && strcmp(rec->op[j].name, name) != 0) j++;
  if (j == rec->n) {
    if (rec->n == SIM_INFER_MAX_OPS) return; /* more op names than a forward has: the rest unlisted */
    snprintf(rec->op[rec->n++].name, sizeof rec->op[0].name, "%s", name);
  }
  rec->op[j].count += count;
  rec->op[j].s += s;
}

/* The costs of one forward shape (batch sequences of `seq` new tokens). */
typedef struct {
  plan fwd;
  sim_costs costs;
} shape_costs;

static shape_costs *shape_costs_new(const plan_infer *p, int seq, const schema_calibration *cal, FILE *warn,
                                    ts_err *e) {
  shape_costs *s = calloc(1, sizeof *s);
  if (!s) {
    ts_fail_sys(e, "out of memory");
    return NULL;
  }
  plan_infer_forward_plan(p, seq, &s->fwd);
  if (sim_costs_init(&s->costs, &s->fwd, cal, warn, e)) {
    free(s);
    return NULL;
  }
  s->costs.inference = true;
  return s;
}

static int find_op(const sim_costs *c, model_op_kind kind, const char *name) {
  for (int i = 0; i < c->n_mops; i++)
    if (c->mops[i].kind == kind && (!name || strcmp(c->mops[i].name, name) == 0)) return i;
  return -1;
}

static int compute_op_s(sim_costs *c, int model_op, double flops, double bytes, double *s, ts_err *e) {
  plan_op op = {.kind = PLAN_OP_COMPUTE, .stream = PLAN_STREAM_COMPUTE, .phase = PLAN_PHASE_FWD,
                .model_op = (int16_t)model_op, .layer = -1, .micro = 0, .flops = flops, .bytes = bytes};
  return sim_compute_s(c, &op, s, e);
}

/* No op may be priced faster than the GPU allows (sim_ceiling_us: its FLOPs
 * at the BF16 peak or its bytes beyond the L2 at the HBM rate): the costs of
 * another GPU or a unit mistake are a simulator failure (exit 3), as in the
 * training simulator. */
static int check_ceiling(const sim_costs *c, const char *what, double flops, double bytes, double s, ts_err *e) {
  double hbm_bytes, floor_us = sim_ceiling_us(c, flops, bytes, &hbm_bytes);
  if (s * 1e6 >= 0.98 * floor_us) return 0;
  return ts_fail_sim(e, "%s: %s priced at %.3g us, faster than the GPU's ceiling (%.3g us: %.3g FLOP at %.0f TFLOP/s, "
                     "%.3g bytes beyond its L2 at %.0f GB/s)", c->lk.cal->path[0] ? c->lk.cal->path : "calibration", what,
                     s * 1e6, floor_us, flops, c->lk.roof.peak_flops / 1e12, hbm_bytes, c->lk.roof.hbm_bytes_per_s / 1e9);
}

/* A decode step run as one CUDA graph (sim_infer_opts): each launch of a
 * kernel whose time comes from a table timed in a stream (a GEMM, the decode
 * attention's split and combine kernels) takes gap_s (the calibration's
 * host.graph_gap_us, measured by `tacorun bench-graph`) less, never less than
 * the GPU's ceiling for its FLOPs and bytes. The norms, element-wise ops,
 * RoPE scatter, embedding and TACO codec kernels of a decode step are priced
 * from their ".graph" tables (timed inside a CUDA graph: sim_infer_phase_view)
 * where the calibration has them, else from the anchored roofline, and keep
 * that price: nothing is subtracted from them. */
static double in_graph_s(const sim_costs *c, double s, int launches, double gap_s, double flops, double bytes) {
  if (gap_s <= 0 || launches < 1) return s;
  double tf = flops / c->lk.roof.peak_flops, tb = bytes / c->lk.roof.hbm_bytes_per_s, floor_s = tf > tb ? tf : tb;
  double t = s - launches * gap_s;
  return t > floor_s ? t : floor_s;
}

/* An op's FLOPs and bytes as the roofline sees them: an FP8 GEMM (quantization fp8: plan_fp8_gemm) does its
 * FLOPs at the FP8 peak and reads its operands at about half their BF16 bytes (the ceiling check's rule,
 * sim_costs.c), stated here in BF16-peak FLOPs; a grouped GEMM's idle experts' weights are not read. */
static void roof_terms(const sim_costs *c, const model_op *m, double *flops, double *bytes) {
  const topo_gpu *g = &c->p->cluster.gpu;
  *flops = m->flops_fwd, *bytes = m->bytes_fwd - sim_grouped_idle_bytes(m);
  if (plan_fp8_gemm(c->p, m) && g->fp8_tflops > 0) *flops *= g->bf16_tflops / g->fp8_tflops, *bytes *= 0.5;
  /* quantization nvfp4: the FP4 peak, the operands at PLAN_NVFP4_BYTES_PER_PARAM of 2 bytes */
  if (plan_fp8_gemm(c->p, m) && c->p->fp4_serving && g->fp4_tflops > 0)
    *flops *= g->fp8_tflops / g->fp4_tflops, *bytes *= PLAN_NVFP4_BYTES_PER_PARAM;
}

/* One layer's compute ops other than attention (*gemm_s: of them the
 * GEMMs, *experts_s: of those the routed experts'); gap_s > 0: in a CUDA graph (in_graph_s: one launch a GEMM op),
 * *launches counts the launches it took the gap off; rec: each op's time x layers recorded. */
static int layer_rest_s(sim_costs *c, double gap_s, double *s, double *gemm_s, double *experts_s, int *launches,
                        sim_infer_op_costs *rec, int layers, ts_err *e) {
  *s = 0, *gemm_s = 0, *experts_s = 0;
  *launches = 0;
  for (int i = 0; i < c->n_mops; i++) {
    const model_op *m = &c->mops[i];
    if (m->kind == MODEL_OP_ATTENTION) continue;
    double t;
    if (compute_op_s(c, i, m->flops_fwd, m->bytes_fwd, &t, e)) return -1;
    if (gap_s > 0 && m->kind == MODEL_OP_GEMM) {
      double fl, by;
      roof_terms(c, m, &fl, &by);
      t = in_graph_s(c, t, 1, gap_s, fl, by);
      (*launches)++;
    }
    *s += t;
    rec_op(rec, m->name, layers, layers * t);
    if (m->kind == MODEL_OP_GEMM) *gemm_s += t;
    if (m->kind == MODEL_OP_GEMM && m->expert) *experts_s += t;
  }
  return 0;
}

/* A forward TP collective of `bytes` with codec cd (kind none: plain NCCL):
 * the training simulator's intra-node formula, T = pre + max(mid, transfer) +
 * post, or the measured compressed collective when the calibration has it. */
static int tp_coll_s(sim_costs *c, const plan_infer *p, plan_coll coll, const plan_codec *cd, double bytes,
                     double *t, double *codec_s, double *wire, ts_err *e) {
  *t = *codec_s = 0;
  *wire = bytes;
  if (p->tp < 2 || bytes <= 0) return 0;
  plan_codec eff = cd ? *cd : (plan_codec){.kind = PLAN_CODEC_NONE, .group = 128};
  double shared = plan_codec_has_caat(eff.kind) ? bytes * floor(eff.p * p->model.hidden) / p->model.hidden : bytes;
  if (plan_codec_has_taco(eff.kind) && shared < p->codec_min_bytes)
    eff.kind = plan_codec_has_caat(eff.kind) ? PLAN_CODEC_CAAT : PLAN_CODEC_NONE;
  *wire = plan_infer_wire_bytes(&eff, bytes, p->model.hidden, p->codec_min_bytes);
  plan_op op = {.kind = PLAN_OP_COLLECTIVE, .stream = PLAN_STREAM_TP, .phase = PLAN_PHASE_FWD, .coll = coll,
                .group = PLAN_GROUP_TP, .traffic = PLAN_TRAFFIC_TP_FWD, .model_op = -1, .layer = -1,
                .bytes = bytes, .wire_bytes = *wire, .codec = eff};
  sim_codec_cost cc;
  int included;
  double xfer;
  if (sim_codec_cost_of(c, &op, p->tp, &cc, e) || sim_coll_calibrated_s(c, &op, p->tp, &xfer, &included, e))
    return -1;
  if (included) {
    *t = xfer + cc.caat_us * 1e-6; /* a measured TACO collective does not pack CAAT-Net channels */
    *codec_s = cc.total_us * 1e-6 < *t ? cc.total_us * 1e-6 : *t;
  } else if (cc.total_us > 0) {
    double mid = cc.mid_us * 1e-6;
    *t = cc.pre_us * 1e-6 + (xfer > mid ? xfer : mid) + cc.post_us * 1e-6;
    *codec_s = cc.total_us * 1e-6;
  } else {
    *t = xfer;
  }
  return 0;
}

/* The layer all-reduce of one phase under the policy: the plan's codec, or its
 * fallback where that is faster and codec_auto is on. The fallback of a TACO
 * plan is plain NCCL. CAAT-Net changes the model (its private channels are
 * never summed across the TP group), so a CAAT-Net plan can only drop TACO:
 * its fallback is the partial all-reduce of the shared channels in BF16, and
 * a plain CAAT-Net plan has no fallback at all. */
static int layer_allreduce(sim_costs *c, const plan_infer *p, bool use_codec, double bytes, const char *what,
                           sim_infer_result *r, double *t, double *codec_s, ts_err *e) {
  double plain, plain_codec, wire_plain;
  if (tp_coll_s(c, p, PLAN_COLL_ALLREDUCE, NULL, bytes, &plain, &plain_codec, &wire_plain, e)) return -1;
  *t = plain, *codec_s = 0;
  if (!use_codec || p->codec.kind == PLAN_CODEC_NONE || p->tp < 2) return 0;
  double fallback = plain, fallback_codec = 0, wire_fallback = wire_plain;
  bool caat = plan_codec_has_caat(p->codec.kind);
  if (caat) {
    plan_codec caat_only = plan_infer_fallback_codec(&p->codec);
    if (tp_coll_s(c, p, PLAN_COLL_ALLREDUCE, &caat_only, bytes, &fallback, &fallback_codec, &wire_fallback, e))
      return -1;
  }
  double comp, comp_codec, wire;
  if (tp_coll_s(c, p, PLAN_COLL_ALLREDUCE, &p->codec, bytes, &comp, &comp_codec, &wire, e)) return -1;
  bool compressed = plan_infer_use_codec(&p->codec, p->codec_auto, comp, fallback);
  if (compressed)
    *t = comp, *codec_s = comp_codec;
  else
    *t = fallback, *codec_s = fallback_codec;
  if (r && r->n_choices < 2) {
    sim_infer_choice *ch = &r->choices[r->n_choices++];
    snprintf(ch->what, sizeof ch->what, "%s", what);
    ch->bytes = bytes, ch->wire_bytes = wire, ch->plain_s = plain, ch->fallback_s = fallback;
    ch->fallback_is_caat = caat, ch->codec_s = comp, ch->compressed = compressed;
  }
  return 0;
}

/* Whether a kernel table's points carry groups (> 0). */
static bool kernel_has_groups(const schema_calibration *cal, const char *name) {
  const schema_kernel_table *t = schema_kernel_table_of(cal, name);
  for (int j = 0; t && j < t->n; j++)
    if (t->pts[j].group > 0) return true;
  return false;
}

bool sim_infer_pqh_table(const schema_calibration *cal, const plan_infer *p, char *name, size_t cap) {
  const model_config *m = &p->model;
  if (cap) name[0] = '\0';
  if (p->decode_attention != PLAN_DECODE_ATTN_PER_QUERY_HEAD || m->attention == MODEL_ATTN_MLA || m->kv_heads < 1 ||
      m->heads % m->kv_heads || m->heads == m->kv_heads || model_head_dim(m) != 128)
    return false;
  snprintf(name, cap, "%s.g%d", p->kv == PLAN_KV_FP8 ? "attention_decode_pqh_fp8" : "attention_decode_pqh",
           m->heads / m->kv_heads);
  return schema_has_kernel(cal, name);
}

/* The decode attention's work on one GPU for one layer at kv_len cached tokens. GQA: 4 x batch x kv_len x
 * heads / tp x head_dim FLOPs and the layer's KV cache read. MLA, absorbed as the engines run it (FlashMLA,
 * vLLM's and SGLang's MLA backends; sim/INFERENCE.md, "MLA"): W_UK folded into the query and W_UV into the
 * output, each of the heads / tp query heads scores the shared latent head of kv_lora_rank + rope elements and
 * sums kv_lora_rank of it: 2 x batch x kv_len x heads / tp x (kv_lora_rank + rope + kv_lora_rank) FLOPs, and the
 * layer's latent cache read once for all heads. */
static void decode_attention_work(const plan_infer *p, const schema_calibration *cal, long long kv_len,
                                  double *flops, double *bytes) {
  const model_config *m = &p->model;
  const double hl = (double)(m->heads / p->tp);
  if (m->attention == MODEL_ATTN_MLA)
    *flops = 2.0 * p->batch * (double)kv_len * hl * ((double)m->kv_lora_rank + m->qk_rope_head_dim + m->kv_lora_rank);
  else
    *flops = 4.0 * p->batch * (double)kv_len * hl * model_head_dim(m);
  *bytes = plan_infer_kv_bytes(p, kv_len) / ((double)m->layers / p->pp);
  /* decode_attention per-query-head (not MLA: the loader refuses it) priced by the bound: each query head reads its
   * KV head's cache from HBM. Its measured table (sim_infer_pqh_table) is keyed by the unique bytes, and the kernel
   * reads no fewer from HBM. */
  char pqh[64];
  if (p->decode_attention == PLAN_DECODE_ATTN_PER_QUERY_HEAD && m->attention != MODEL_ATTN_MLA &&
      !sim_infer_pqh_table(cal, p, pqh, sizeof pqh))
    *bytes *= (double)m->heads / m->kv_heads;
}

/* MLA's absorbed decode attention (sim/INFERENCE.md, "MLA"). No table is of its kernel (tacorun runs no MLA
 * kernel), so its two limits are priced apart:
 * - the read of the layer's latent cache, from the decode attention table by bytes ("attention_decode", or
 *   "attention_decode_fp8" over an FP8 cache, the BF16 table at the FP8 bytes without it): the rate at which
 *   the executor's decode kernel streams a cache of that many bytes from HBM on this GPU, ungrouped (the
 *   ".g<G>" tables are of head dimension 128 and KV-head pairs, not of one 576-wide latent head a sequence);
 *   without the table, a launch and the read at the HBM rate;
 * - the FLOPs at the tensor-core peak (and a launch), which matter where a GPU holds many query heads (128 at
 *   TP 1: 242 FLOP a byte, compute-bound on Hopper). No measured table times such a kernel: the FLOP-keyed
 *   "attention" table is of training and prefill shapes, whose small calls do not fill the GPU as a split-KV
 *   decode kernel does; FlashMLA reaches 580-660 of the 989 TFLOP/s (its README), so a compute-bound MLA
 *   decode is priced up to 1.5x fast.
 * The larger of the two; what it is priced from is named once on the warning stream. */
static int mla_decode_attention_s(sim_costs *c, const plan_infer *p, long long kv_len, FILE *warn,
                                  bool *warned, double *s, ts_err *e) {
  const model_config *m = &p->model;
  double flops, bytes, read, by_flops;
  decode_attention_work(p, c->lk.cal, kv_len, &flops, &bytes);
  const char *table = p->kv == PLAN_KV_FP8 ? "attention_decode_fp8" : "attention_decode";
  if (!schema_has_kernel(c->lk.cal, table)) table = "attention_decode";
  const bool has = schema_has_kernel(c->lk.cal, table);
  if (!*warned && warn)
    fprintf(warn,
            "tacosim: warning: %s: MLA decode attention (absorbed: %d query heads a GPU over one %d-wide latent "
            "head) has no table of its own; priced as the larger of its latent cache read (%s) and its FLOPs at "
            "the %.0f TFLOP/s peak\n",
            c->lk.cal->path[0] ? c->lk.cal->path : "calibration", m->heads / p->tp,
            m->kv_lora_rank + m->qk_rope_head_dim,
            !has ? "no \"attention_decode\" table: a launch and the bytes at the HBM rate"
                 : strcmp(table, "attention_decode_fp8") == 0 ? "the \"attention_decode_fp8\" table by bytes"
                 : "the \"attention_decode\" table by bytes",
            c->lk.roof.peak_flops / 1e12);
  *warned = true;
  if (has) {
    double us;
    if (schema_lookup_kernel(&c->lk, table, bytes, 0, &us, e)) return -1;
    read = us * 1e-6;
  } else {
    read = (c->lk.roof.launch_us + bytes / c->lk.roof.hbm_bytes_per_s * 1e6) * 1e-6;
  }
  by_flops = (c->lk.roof.launch_us + flops / c->lk.roof.peak_flops * 1e6) * 1e-6;
  *s = read > by_flops ? read : by_flops;
  return check_ceiling(c, "MLA decode attention", flops, bytes, *s, e);
}

/* Decode attention of batch queries over `kv_len` cached keys and values:
 * 4 x batch x kv_len x heads / tp x head_dim FLOPs (as model_layer_ops counts attention),
 * and a read of the layer's whole KV cache (plan_infer_kv_bytes: BF16, or FP8
 * codes and scales). The measured table of the cache's kernel, by KV bytes
 * read, when the calibration has it: "attention_decode" (BF16) or
 * "attention_decode_fp8" (the same kernel over E4M3 codes + scales), or its
 * table of the GPU's head layout, "<table>.g<G>" with G query heads a KV
 * head (head dim 128), where the calibration has one (tacorun calibrate-infer,
 * or merge_decode_attn.py --by-layout from a bench-decode run); a
 * table whose points carry groups is grouped by batch x KV heads on the GPU
 * (the (sequence, KV head) pairs the kernel spreads over the SMs besides its
 * splits over positions: equal bytes over fewer pairs take longer). An FP8
 * plan on a calibration without the FP8 table is priced from the BF16 table
 * at its (smaller) byte count, named once on the warning stream. Without
 * either: the larger of the FLOPs-keyed "attention" table and the KV read at
 * the HBM rate (named once). An MLA model: mla_decode_attention_s.
 * "decode_attention" per-query-head (plan_infer.h; sim/INFERENCE.md, "Decode attention read per query head"):
 * the measured table of a kernel that reads the cache once per query head, "attention_decode_pqh[_fp8].g<G>"
 * (sim_infer_pqh_table), by the unique KV bytes and batch x kv_heads / tp pairs, where the calibration has it;
 * else its upper bound, the same lookups at the shape of MHA of heads / tp KV heads: G = heads / kv_heads times
 * the bytes, the ".g1" table, batch x heads / tp pairs. */
static int decode_attention_s(sim_costs *c, const plan_infer *p, int attn, long long kv_len, FILE *warn,
                              bool *warned, double *s, ts_err *e) {
  const model_config *m = &p->model;
  if (m->attention == MODEL_ATTN_MLA) return mla_decode_attention_s(c, p, kv_len, warn, warned, s, e);
  double flops, kv_bytes;
  decode_attention_work(p, c->lk.cal, kv_len, &flops, &kv_bytes); /* per-query-head's bound: G times the bytes */
  char pqh[64];
  if (sim_infer_pqh_table(c->lk.cal, p, pqh, sizeof pqh)) { /* per-query-head, measured: the unique bytes */
    double us;
    if (schema_lookup_kernel(&c->lk, pqh, kv_bytes, kernel_has_groups(c->lk.cal, pqh) ? p->batch * m->kv_heads / p->tp : 0,
                             &us, e))
      return -1;
    *s = us * 1e-6;
    return check_ceiling(c, "decode attention per query head", flops, kv_bytes, *s, e);
  }
  const char *cal_path = c->lk.cal->path[0] ? c->lk.cal->path : "calibration";
  const char *table = p->kv == PLAN_KV_FP8 ? "attention_decode_fp8" : "attention_decode";
  if (p->kv == PLAN_KV_FP8 && !schema_has_kernel(c->lk.cal, table) && schema_has_kernel(c->lk.cal, "attention_decode")) {
    if (!*warned && warn)
      fprintf(warn,
              "tacosim: warning: %s: no \"attention_decode_fp8\" table; the FP8 KV cache's decode attention is "
              "priced from the BF16 \"attention_decode\" table at the FP8 cache's bytes\n", cal_path);
    *warned = true;
    table = "attention_decode";
  }
  /* a GPU's share: heads / tp query heads over kv_heads / tp KV heads (the loader has tp divide both); a kernel that
   * reads the cache once per query head (decode_attention per-query-head) runs as MHA of heads / tp KV heads: one
   * (sequence, head) pair a query head, G = heads / kv_heads times the bytes */
  int kvl = m->kv_heads / p->tp, hl = m->heads / p->tp;
  if (p->decode_attention == PLAN_DECODE_ATTN_PER_QUERY_HEAD) kvl = hl;
  char layout[64]; /* the table of the GPU's head layout (measured at head dim 128), where the calibration has it */
  snprintf(layout, sizeof layout, "%s.g%d", table, hl / kvl);
  if (hl % kvl == 0 && model_head_dim(m) == 128 && schema_has_kernel(c->lk.cal, layout)) table = layout;
  else if (model_head_dim(m) != 128 && schema_has_kernel(c->lk.cal, table) && !*warned && warn) {
    /* the tables are timed at head dim 128: another head dim reads the plain table by its bytes, unmeasured */
    fprintf(warn,
            "tacosim: warning: %s: decode attention at head dim %d is priced from the plain \"%s\" table by KV-cache "
            "bytes (its points are of head dim 128, 4 query heads a KV head: another head dim is not measured)\n",
            cal_path, model_head_dim(m), table);
    *warned = true;
  }
  if (schema_has_kernel(c->lk.cal, table)) {
    double us;
    /* grouped by (sequence, KV head) pairs where the table is */
    int pairs = p->batch * kvl;
    if (schema_lookup_kernel(&c->lk, table, kv_bytes, kernel_has_groups(c->lk.cal, table) ? pairs : 0, &us, e))
      return -1;
    *s = us * 1e-6;
    return check_ceiling(c, "decode attention", flops, kv_bytes, *s, e);
  }
  if (!*warned && warn)
    fprintf(warn,
            "tacosim: warning: %s: no \"%s\" table; decode attention (layer op \"%s\") is the larger "
            "of the \"attention\" table by FLOPs and the KV-cache read at the HBM rate\n",
            cal_path, table, c->mops[attn].name);
  *warned = true;
  double by_flops;
  if (compute_op_s(c, attn, flops, 0, &by_flops, e)) return -1; /* the table's FLOPs part; the KV read below */
  double by_bytes = (c->lk.roof.launch_us + kv_bytes / c->lk.roof.hbm_bytes_per_s * 1e6) * 1e-6;
  *s = by_flops > by_bytes ? by_flops : by_bytes;
  return 0;
}

/* Embedding (first stage) and head (last stage) of one pass of `tokens`
 * tokens: the vocabulary-parallel lookup and its all-reduce; the final norm
 * and the logits GEMM of the last token of each sequence, and the all-gather
 * of the logits (bf16) and the greedy sampling over them. gap_s > 0: a decode step in a CUDA graph
 * (in_graph_s on the logits GEMM). */
static int ends_s(sim_costs *c, sim_costs *last_token, const plan_infer *p, double tokens, double gap_s,
                  sim_infer_phase *ph, sim_infer_op_costs *rec, ts_err *e) {
  const model_config *m = &p->model;
  model_shard sh = {.tp = p->tp, .micro_batch = p->batch, .seq = (int)(tokens / p->batch), .moe_tokens_replicated = true};
  model_op ops[8];
  int n = model_embedding_ops(m, &sh, ops, 8, e);
  if (n < 0) return -1;
  double bytes = 0, t, codec, wire;
  for (int i = 0; i < n; i++) bytes += ops[i].bytes_fwd;
  if (compute_op_s(c, PLAN_MOP_EMBEDDING, 0, bytes, &t, e)) return -1;
  ph->compute_s += t;
  rec_op(rec, "embedding", 1, t);
  if (tp_coll_s(c, p, PLAN_COLL_ALLREDUCE, NULL, 2.0 * tokens * m->hidden, &t, &codec, &wire, e)) return -1;
  ph->tp_s += t;
  if (p->tp > 1) rec_op(rec, "embedding.allreduce", 1, t);
  model_shard one = {.tp = p->tp, .micro_batch = p->batch, .seq = 1, .moe_tokens_replicated = true};
  if ((n = model_output_ops(m, &one, ops, 8, e)) < 0) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(ops[i].name, "final_norm") == 0) {
      if (compute_op_s(last_token, PLAN_MOP_FINAL_NORM, ops[i].flops_fwd, ops[i].bytes_fwd, &t, e)) return -1;
      ph->compute_s += t;
      rec_op(rec, "final_norm", 1, t);
    }
  long long vocab = model_vocab_per_gpu(m, p->tp);
  double us;
  if (last_token->lk.cal->n_gemm) {
    if (schema_lookup_gemm(&last_token->lk, p->batch, vocab, m->hidden, &us, e)) return -1;
  } else {
    us = last_token->lk.roof.launch_us + 2.0 * p->batch * (double)vocab * m->hidden / last_token->lk.roof.peak_flops * 1e6;
  }
  if (check_ceiling(last_token, "logits GEMM", 2.0 * p->batch * (double)vocab * m->hidden,
                    2.0 * ((double)p->batch * m->hidden + (double)vocab * m->hidden + (double)p->batch * vocab),
                    us * 1e-6, e))
    return -1;
  double logits = in_graph_s(last_token, us * 1e-6, 1, gap_s, 2.0 * p->batch * (double)vocab * m->hidden,
                             2.0 * (double)vocab * m->hidden);
  ph->compute_s += logits;
  ph->gemm_s += logits;
  rec_op(rec, "logits", 1, logits);
  if (tp_coll_s(last_token, p, PLAN_COLL_ALLGATHER, NULL, 2.0 * p->batch * (double)vocab * p->tp, &t, &codec, &wire,
                e))
    return -1;
  ph->tp_s += t;
  if (p->tp > 1) rec_op(rec, "logits.allgather", 1, t);
  /* greedy sampling over the gathered logits (infer_argmax): its table, keyed by the logits read, where the
   * calibration has one (`tacorun calibrate-infer --small-only`), else a launch and the read at the HBM rate */
  double read = 2.0 * p->batch * (double)m->vocab;
  if (schema_has_kernel(last_token->lk.cal, "argmax")) {
    if (schema_lookup_kernel(&last_token->lk, "argmax", read, 0, &us, e)) return -1;
  } else {
    us = last_token->lk.roof.launch_us + read / last_token->lk.roof.hbm_bytes_per_s * 1e6;
  }
  if (check_ceiling(last_token, "greedy sampling", 0, read, us * 1e-6, e)) return -1;
  ph->compute_s += us * 1e-6;
  rec_op(rec, "argmax", 1, us * 1e-6);
  return 0;
}

/* Activation sends between stages: (pp - 1) hops of tokens x hidden bf16,
 * rank i of stage s to rank i of stage s + 1 (GPUs s*tp + i, pipeline
 * outermost). Inside a node: the calibrated (or topology) sendrecv. Across
 * nodes: alpha-beta from the topology, the stage's tp ranks sharing the
 * node's NICs (never calibrated, as in the training simulator). */
static int pp_hops_s(sim_costs *c, const plan_infer *p, double tokens, double *s, ts_err *e) {
  *s = 0;
  if (p->pp < 2) return 0;
  const topo_cluster *cl = &p->cluster;
  double bytes = 2.0 * tokens * p->model.hidden;
  plan_op op = {.kind = PLAN_OP_SEND, .stream = PLAN_STREAM_PP, .phase = PLAN_PHASE_FWD,
                .traffic = PLAN_TRAFFIC_PP, .model_op = PLAN_MOP_PP_ACTIVATION, .layer = -1,
                .bytes = bytes, .wire_bytes = bytes, .codec = {.kind = PLAN_CODEC_NONE, .group = 128}};
  int included;
  double intra;
  if (sim_coll_calibrated_s(c, &op, 2, &intra, &included, e)) return -1;
  for (int st = 0; st + 1 < p->pp; st++) {
    if (topo_node_of(cl, st * p->tp) == topo_node_of(cl, (st + 1) * p->tp) || cl->nic.per_node < 1 ||
        cl->nic.gbps <= 0) {
      *s += intra;
      continue;
    }
    double share = (double)cl->nic.per_node / (p->tp < cl->gpus_per_node ? p->tp : cl->gpus_per_node);
    double bw = cl->nic.gbps * 1e9 * (share < 1 ? share : 1);
    double latency = 2.0 * cl->nic.latency_us + 2.0 * (cl->fabric.levels > 0 ? cl->fabric.levels : 1) *
                                                    cl->fabric.latency_us;
    *s += latency * 1e-6 + bytes / bw;
  }
  return 0;
}

/* A fused context attention run with FP8 Q, K, V (plan prefill_attention fused-fp8): the "fused" (BF16)
 * table's busy time *s over the calibration's "attention_fp8" ratio (one kernel's FP8 over BF16 speed) at the
 * prompt's length (schema_attn_fp8_speedup: between its points by log length, the nearest end's ratio beyond
 * them); *kflops, the kernel's FLOPs for the ceiling, restated at the FP8 peak in BF16-peak FLOPs (as an FP8
 * GEMM's: roof_terms). A calibration without the section is refused, naming it. */
static int fp8_context_s(const sim_costs *c, const plan_infer *p, double *s, double *kflops, ts_err *e) {
  double r = schema_attn_fp8_speedup(c->lk.cal, p->prompt), launch = c->lk.roof.launch_us * 1e-6;
  if (!(r > 0))
    return ts_fail(e, c->lk.cal->path[0] ? c->lk.cal->path : "calibration", "attention_fp8",
                   "missing: %s asks for prefill_attention fused-fp8, priced from the \"fused\" table by this "
                   "section's FP8 over BF16 ratio (calibration/attn-fp8/README.md)", p->path);
  *s = *s > launch ? launch + (*s - launch) / r : *s;
  const topo_gpu *g = &p->cluster.gpu;
  *kflops *= g->bf16_tflops / g->fp8_tflops; /* fp8_tflops > 0: the plan loader's check */
  return 0;
}

/* The bytes the ceiling holds a prefill attention priced from the "attention_prefill" tables to: those the
 * executor's unfused program moves for the plan's head layout (model_prefill_attention_bytes: its s x s scores
 * written, read and written by the softmax, read again; the calibration transfer moves the keyed tables with
 * the same count, sim_transfer.c), the op's Q, K, V and O for an MLA model (its values are narrower than its
 * queries: not the program that count describes). */
static double prefill_table_bytes(const plan_infer *p, const model_op *a) {
  const model_config *m = &p->model;
  if (m->attention == MODEL_ATTN_MLA) return a->bytes_fwd;
  return model_prefill_attention_bytes_at(model_head_dim(m), p->prompt, a->flops_fwd, (double)m->heads / m->kv_heads);
}

/* Prefill attention (plan "prefill_attention"; below: executor, the default) as the inference executor runs it (unfused: batched
 * GEMMs around a causal softmax, runtime/infer/infer_model.c): the table of the
 * model's head dimension and the prompt length, "attention_prefill.d<D>.s<S>"
 * (by FLOPs: batch x heads vary), when the calibration has it; else the
 * FLOP-keyed "attention_prefill" (shapes of equal FLOPs but other lengths
 * averaged); else the unfused program itself, priced from the GEMM and
 * elementwise tables. The fallback is named once on the warning stream. */
static int prefill_attention_s(sim_costs *c, const plan_infer *p, int attn, FILE *warn, double *s, ts_err *e) {
  const model_op *a = &c->mops[attn];
  if (p->prefill_attention != PLAN_PREFILL_ATTN_EXECUTOR) {
    /* "prefill_attention" fused, flash or fused-fp8: the training attention's pricing (sim_costs.c,
     * attention_us: the "attention_backends" table of the forward plan's backend by shape, else the executor's
     * tables, warned), with its roofline floor; the ceiling holds the kernel's own FLOPs (causal: half the op's
     * square, sim_attention_kernel_flops_of) */
    if (compute_op_s(c, attn, a->flops_fwd, a->bytes_fwd, s, e)) return -1;
    double kflops = sim_attention_kernel_flops_of(c->p->attention_backend, false, a->flops_fwd);
    if (p->prefill_attention == PLAN_PREFILL_ATTN_FUSED_FP8 && fp8_context_s(c, p, s, &kflops, e)) return -1;
    return check_ceiling(c, "prefill attention", kflops, a->bytes_fwd, *s, e);
  }
  char keyed[64];
  snprintf(keyed, sizeof keyed, "attention_prefill.d%d.s%d", model_head_dim(&p->model), p->prompt);
  double us;
  if (schema_has_kernel(c->lk.cal, keyed)) {
    if (schema_lookup_kernel(&c->lk, keyed, a->flops_fwd, 0, &us, e)) return -1;
    *s = us * 1e-6;
  } else if (schema_has_kernel(c->lk.cal, "attention_prefill")) {
    if (warn)
      fprintf(warn, "tacosim: warning: %s: no \"%s\" table; using the FLOP-keyed \"attention_prefill\" table\n",
              c->lk.cal->path[0] ? c->lk.cal->path : "calibration", keyed);
    if (schema_lookup_kernel(&c->lk, "attention_prefill", a->flops_fwd, 0, &us, e)) return -1;
    /* its points average prompt lengths of other bytes per FLOP, and another GPU's copy of it was moved by its
     * FLOPs alone (sim_transfer.c, kernel_table_bytes): at least the op's own roofline, a launch + the
     * program's bytes at the HBM rate or its FLOPs at the peak, as the training simulator holds its FLOP-keyed
     * attention tables (sim_attention_roof_us) */
    const double roof_us = c->lk.roof.launch_us + sim_roof_us(a->flops_fwd, prefill_table_bytes(p, a),
                                                               c->lk.roof.peak_flops, c->lk.roof.hbm_bytes_per_s);
    *s = (us > roof_us ? us : roof_us) * 1e-6;
  } else {
    if (warn)
      fprintf(warn, "tacosim: warning: %s: no \"%s\" table; prefill attention priced as the executor's unfused "
              "program (batched GEMMs and the causal softmax, from the GEMM and elementwise tables)\n",
              c->lk.cal->path[0] ? c->lk.cal->path : "calibration", keyed);
    if (sim_attention_unfused_fwd_s(c, s, e)) return -1;
    /* the program's GEMMs and softmax priced from their own tables (sim_costs.c, unfused_attention_us), each
     * moved to another GPU by its own bytes; held to the op's Q, K, V and O as before */
    return check_ceiling(c, "prefill attention", a->flops_fwd, a->bytes_fwd, *s, e);
  }
  return check_ceiling(c, "prefill attention", a->flops_fwd, prefill_table_bytes(p, a), *s, e);
}

static void finish_phase(sim_infer_phase *ph) { ph->total_s = ph->compute_s + ph->tp_s + ph->pp_s; }

/* The prefill clock (sim/INFERENCE.md): the tables are timed at the GPU's
 * sustained clock (back to back, at the power cap); a GPU that starts a
 * burst of GEMMs from idle runs them faster for a while, as the
 * calibration's burst profile says (clock.burst, schema_burst_advance). The
 * executor times the TTFT after one warm-up prefill and two decode steps, as
 * the median of three prefills back to back (PLAN_INFER_*, plan_infer.h);
 * the GPU is taken to be idle before the warm-up (the plan's set-up). One
 * prefill is the layers' ops in order, the GEMMs and attention that are
 * compute-bound by the roofline (tensor-core work: the clock's) at the
 * profile's speed at their start, the other ops (memory-bound) and the
 * layer's two TP all-reduces at their price, then the rest of the pass
 * (embedding, head, pp sends: tail_s); a decode step takes step_s. *ttft:
 * the median of the timed prefills. */
typedef struct {
  double s[MODEL_MAX_LAYER_OPS + 1];
  bool clocked[MODEL_MAX_LAYER_OPS + 1];
  int n;
} layer_seq;

/* The power-cap model of the prefill (sim/INFERENCE.md "The prefill clock"): a prefill never idles, so its
 * sustained clock is the one its op mix allows under the cap, the mix at that clock's speeds (a fixed point:
 * gemm_s of tensor-core work at *gs, mem_s of the rest at *ms, comm_s of all-reduces, which draw power as
 * memory-bound work does, at their price). *mhz, *gs, *ms; *x_gemm the mix's GEMM share at them. */
#define PREFILL_POWER_ITERS 100
static void prefill_power_mix(const schema_power *pw, double gemm_s, double mem_s, double comm_s, double *mhz,
                              double *gs, double *ms, double *x_gemm) {
  *gs = *ms = 1.0, *mhz = pw->fit.f_gemm_model_mhz, *x_gemm = 0;
  double total = gemm_s + mem_s + comm_s;
  if (!(total > 0)) return;
  for (int i = 0; i < PREFILL_POWER_ITERS; i++) {
    double g = gemm_s / *gs, m = mem_s / *ms;
    double x = g / (g + m + comm_s), f = schema_power_clock(pw, x, 1 - x, 0);
    double before = *mhz;
    *mhz = f, *x_gemm = x;
    schema_power_speeds(pw, f, gs, ms);
    if (i > 0 && fabs(f - before) <= 1e-9 * pw->f_max_mhz) break;
  }
}

/* The burst profile under the power model: a bin's GEMM speed b is the back-to-back GEMM's clock
 * f_b = f_gemm (b)^(1 / bg) during the burst, that is P_gemm(f_b) - cap_w of power above the cap the burst
 * allows; the prefill's mix (GEMM share x_gemm) runs at the clock cap_w + that much allows, and the bin's speed
 * for its GEMM work is that clock's GEMM speed over the sustained mix's (mhz). A prefill of GEMMs alone gets the
 * profile as measured; a mix already near f_max gains little. bins: a copy of cal's, rewritten. */
static void prefill_power_burst(const schema_power *pw, double x_gemm, double mhz, schema_burst_bin *bins, int n) {
  const schema_power_fit *F = &pw->fit;
  for (int i = 0; i < n; i++) {
    double b = bins[i].gemm_speed;
    if (!(b > 0) || !(F->bg > 0)) continue;
    double fb = F->f_gemm_model_mhz * pow(b, 1.0 / F->bg);
    if (fb > pw->f_max_mhz) fb = pw->f_max_mhz;
    double extra = schema_power_w(pw, 1, 0, 0, fb) - pw->cap_w;
    double f = schema_power_clock_under(pw, x_gemm, 1 - x_gemm, 0, pw->cap_w + extra);
    bins[i].gemm_speed = pow(f / mhz, F->bg);
  }
}

static double burst_pass(const schema_calibration *cal, const layer_seq *L, int layers, double tail_s, double t) {
  for (int l = 0; l < layers; l++)
    for (int i = 0; i < L->n; i++) t = L->clocked[i] ? schema_burst_advance(cal, t, L->s[i]) : t + L->s[i];
  return t + tail_s;
}

typedef struct {
  const schema_power *pw; /* NULL: the tables' sustained speed (the duty model's prefill) */
  const schema_op_power *op; /* else, non-NULL: the prefill at one clock from its ops' classes' power */
  int heads, kv_heads, head_dim; /* then: a GPU's attention layout, and its shape */
  long long batch, seq;
  bool burst;             /* the burst profile applies (from idle) */
  double mhz, gemm_speed, mem_speed, x_gemm; /* set under pw or op: the sustained mix's clock and speeds */
  double attn_speed;      /* set under op: the attention's speed against its table (0: no attention priced) */
} prefill_clock_opts;

/* The prefill at one clock from its ops' power (sim/INFERENCE.md, "The prefill at one clock from its ops'
 * power"): each op of the layer is an item of its class, the compute-bound GEMMs the GEMM class, the attention its
 * nearest attention row, the rest and the all-reduces memory-bound (speed 1); the window's clock is the highest
 * whose mean power is at most the cap; each op's time is its table's over its speed at that clock. Then the burst
 * profile as extra power, as prefill_power_burst does under the fitted model: a bin's speed b is the GEMM
 * class's clock f_b = f_gemm b^(1 / b_exp) (at most f_max), P_gemm(f_b) - cap of power above the cap; the
 * window's clock under cap + that, over the sustained one, to the speed exponent. */
static void prefill_op_power(prefill_clock_opts *pc, layer_seq *L, int attn_index, schema_burst_bin *bins, int n) {
  const schema_op_power *op = pc->op;
  sim_op_power_item it[MODEL_MAX_LAYER_OPS + 1];
  for (int i = 0; i < L->n; i++)
    it[i] = i == attn_index ? sim_op_power_attention(op, L->s[i], pc->heads, pc->kv_heads, pc->head_dim, pc->batch,
                                                     pc->seq)
            : L->clocked[i] ? sim_op_power_gemm(op, L->s[i])
                            : sim_op_power_mem(op, L->s[i]);
  const double f = sim_op_power_clock(op, it, L->n, op->cap_w);
  double tensor = 0, total = 0;
  for (int i = 0; i < L->n; i++) {
    L->s[i] /= sim_op_power_speed(&it[i], f);
    if (it[i].b > 0) tensor += L->s[i];
    total += L->s[i];
  }
  sim_op_power_item g = sim_op_power_gemm(op, 1.0);
  pc->mhz = f, pc->gemm_speed = sim_op_power_speed(&g, f), pc->mem_speed = 1.0, pc->x_gemm = total > 0 ? tensor / total : 0;
  pc->attn_speed = attn_index >= 0 ? sim_op_power_speed(&it[attn_index], f) : 0;
  for (int i = 0; i < L->n; i++) it[i].t0_s = L->s[i] * sim_op_power_speed(&it[i], f); /* the tables' again */
  for (int i = 0; i < n; i++) {
    double b = bins[i].gemm_speed;
    if (!(b > 0) || !(op->speed_exponent > 0)) continue;
    double fb = fmin(op->gemm_mhz * pow(b, 1.0 / op->speed_exponent), op->f_max_mhz);
    double extra = schema_op_power_w(op, op->gemm_w, op->gemm_mhz, op->power_exponent, fb) - op->cap_w;
    double fx = sim_op_power_clock(op, it, L->n, op->cap_w + fmax(extra, 0));
    bins[i].gemm_speed = pow(fx / f, op->speed_exponent);
  }
}

static int burst_ttft(sim_costs *c, const schema_calibration *cal, int attn_index, double attn_s, double ar_s,
                      int layers, double tail_s, double step_s, prefill_clock_opts *pc, double *ttft, ts_err *e) {
  layer_seq L = {.n = 0};
  for (int i = 0; i < c->n_mops && L.n < MODEL_MAX_LAYER_OPS; i++) {
    const model_op *m = &c->mops[i];
    if (i == attn_index) L.s[L.n] = attn_s;
    else if (compute_op_s(c, i, m->flops_fwd, m->bytes_fwd, &L.s[L.n], e)) return -1;
    /* the clock's: tensor-core work that is compute-bound by the roofline; a memory-bound GEMM (few
     * tokens) runs at the HBM's pace, as the clock section's memory-bound kernel (mem_speed ~1) */
    double fl, by;
    roof_terms(c, m, &fl, &by);
    const bool compute_bound = fl / c->lk.roof.peak_flops > by / c->lk.roof.hbm_bytes_per_s;
    L.clocked[L.n++] = (i == attn_index || m->kind == MODEL_OP_GEMM) && compute_bound;
  }
  L.s[L.n] = 2.0 * ar_s, L.clocked[L.n++] = false;
  const int n_compute = L.n - 1; /* the ops before the all-reduces */
  schema_calibration profile = *cal; /* the burst profile this prefill runs under (none: speed 1) */
  if (!pc->burst) profile.n_burst = 0;
  if (pc->pw) { /* the sustained mix's speeds on the ops, and the profile as extra power over them */
    double gemm = 0, mem = 0;
    for (int i = 0; i < n_compute; i++) *(L.clocked[i] ? &gemm : &mem) += L.s[i];
    prefill_power_mix(pc->pw, gemm, mem, L.s[n_compute], &pc->mhz, &pc->gemm_speed, &pc->mem_speed, &pc->x_gemm);
    for (int i = 0; i < n_compute; i++) L.s[i] /= L.clocked[i] ? pc->gemm_speed : pc->mem_speed;
    prefill_power_burst(pc->pw, pc->x_gemm, pc->mhz, profile.burst, profile.n_burst);
  } else if (pc->op)
    prefill_op_power(pc, &L, attn_index < L.n ? attn_index : -1, profile.burst, profile.n_burst);
  double t = burst_pass(&profile, &L, layers, tail_s, 0.0) + PLAN_INFER_WARMUP_DECODE * step_s, d[PLAN_INFER_PREFILL_REPS];
  for (int r = 0; r < PLAN_INFER_PREFILL_REPS; r++) {
    double t1 = burst_pass(&profile, &L, layers, tail_s, t);
    d[r] = t1 - t, t = t1;
  }
  for (int i = 1; i < PLAN_INFER_PREFILL_REPS; i++) /* sort: the median */
    for (int j = i; j > 0 && d[j] < d[j - 1]; j--) {
      double x = d[j];
      d[j] = d[j - 1], d[j - 1] = x;
    }
  *ttft = d[PLAN_INFER_PREFILL_REPS / 2];
  return 0;
}

/* cal: the prefill's view, dcal: the decode step's (sim_infer_phase_view). */
static int predict(const plan_infer *p, const schema_calibration *cal, const schema_calibration *dcal, double gap_s,
                   bool prefill_clock, const schema_power *pw, const schema_op_power *op, FILE *warn, bool use_codec,
                   sim_infer_result *r, ts_err *e) {
  int rc = -1;
  shape_costs *pre = shape_costs_new(p, p->prompt, cal, warn, e);
  shape_costs *dec = pre ? shape_costs_new(p, 1, dcal, warn, e) : NULL;
  if (!dec) goto out;
  r->intra_calibrated = pre->costs.intra_calibrated;
  double layers = (double)p->model.layers; /* all stages, one after the other */
  int attn_pre = find_op(&pre->costs, MODEL_OP_ATTENTION, NULL), attn_dec = find_op(&dec->costs, MODEL_OP_ATTENTION, NULL);
  if (attn_pre < 0 || attn_dec < 0) {
    ts_fail_sys(e, "%s: the layer of %s has no attention op", p->path, p->model.name);
    goto out;
  }
  double ar_bytes_pre = 2.0 * p->batch * (double)p->prompt * p->model.hidden;
  double ar_bytes_dec = 2.0 * p->batch * (double)p->model.hidden;

  /* prefill: one forward of batch x prompt tokens */
  sim_infer_phase *ph = &r->prefill;
  double rest, rest_gemm, rest_experts, attn, ar, codec;
  int launches, step_launches = 0;
  const int nl = p->model.layers;
  if (layer_rest_s(&pre->costs, 0, &rest, &rest_gemm, &rest_experts, &launches, &r->ops[0], nl, e)) goto out;
  if (prefill_attention_s(&pre->costs, p, attn_pre, warn, &attn, e)) goto out;
  if (layer_allreduce(&pre->costs, p, use_codec, ar_bytes_pre, "prefill layer", r, &ar, &codec, e)) goto out;
  rec_op(&r->ops[0], pre->costs.mops[attn_pre].name, nl, layers * attn);
  if (p->tp > 1) rec_op(&r->ops[0], "allreduce", 2 * nl, layers * 2.0 * ar);
  ph->compute_s = layers * (rest + attn);
  ph->gemm_s = layers * rest_gemm, ph->attention_s = layers * attn, ph->experts_s = layers * rest_experts;
  const double rest_pre = rest, rest_pre_gemm = rest_gemm, attn_pre_s = attn, ar_pre = ar; /* the prefill clock's */
  ph->tp_s = layers * 2.0 * ar;
  ph->codec_s = layers * 2.0 * codec;
  if (ends_s(&pre->costs, &dec->costs, p, (double)p->batch * p->prompt, 0, ph, &r->ops[0], e)) goto out;
  if (pp_hops_s(&pre->costs, p, (double)p->batch * p->prompt, &ph->pp_s, e)) goto out;
  if (p->pp > 1) rec_op(&r->ops[0], "pp_send", p->pp - 1, ph->pp_s);
  finish_phase(ph);
  r->ttft_s = ph->total_s;

  /* decode: generate - 1 steps of batch tokens; step j attends over prompt + j keys */
  sim_infer_phase step = {0};
  if (layer_rest_s(&dec->costs, gap_s, &rest, &rest_gemm, &rest_experts, &launches, &r->ops[1], nl, e)) goto out;
  step_launches = (int)layers * launches + (gap_s > 0 ? 1 : 0); /* + the logits GEMM */
  if (layer_allreduce(&dec->costs, p, use_codec, ar_bytes_dec, "decode layer", r, &ar, &codec, e)) goto out;
  step.compute_s = layers * rest;
  step.gemm_s = layers * rest_gemm;
  step.experts_s = layers * rest_experts;
  step.tp_s = layers * 2.0 * ar;
  step.codec_s = layers * 2.0 * codec;
  if (p->tp > 1) rec_op(&r->ops[1], "allreduce", 2 * nl, layers * 2.0 * ar);
  if (ends_s(&dec->costs, &dec->costs, p, p->batch, gap_s, &step, &r->ops[1], e)) goto out;
  if (pp_hops_s(&dec->costs, p, p->batch, &step.pp_s, e)) goto out;
  if (p->pp > 1) rec_op(&r->ops[1], "pp_send", p->pp - 1, step.pp_s);
  int steps = p->generate - 1;
  double attn_sum = 0;
  bool warned = false;
  for (int j = 1; j <= steps; j++) {
    if (decode_attention_s(&dec->costs, p, attn_dec, (long long)p->prompt + j, warn, &warned, &attn, e)) goto out;
    if (gap_s > 0) { /* the split and the combine kernel */
      double flops, bytes;
      decode_attention_work(p, dec->costs.lk.cal, (long long)p->prompt + j, &flops, &bytes);
      attn = in_graph_s(&dec->costs, attn, 2, gap_s, flops, bytes);
    }
    attn_sum += attn;
  }
  if (gap_s > 0) step_launches += (int)layers * 2;
  ph = &r->decode;
  if (steps > 0) {
    *ph = step;
    ph->compute_s += layers * attn_sum / steps;
    ph->attention_s = layers * attn_sum / steps;
    rec_op(&r->ops[1], dec->costs.mops[attn_dec].name, nl, layers * attn_sum / steps);
    finish_phase(ph);
  }
  r->tpot_s = ph->total_s;
  if (gap_s > 0) r->graph_launches = step_launches;
  if (prefill_clock || pw || op) {
    ph = &r->prefill;
    double sustained = ph->total_s, clocked = layers * (rest_pre_gemm + attn_pre_s), ttft;
    double tail = ph->total_s - layers * (rest_pre + attn_pre_s + 2.0 * ar_pre);
    /* a GPU's share of the heads (the loader has tp divide both) */
    prefill_clock_opts pc = {.pw = pw, .op = pw ? NULL : op, .heads = p->model.heads / p->tp,
                             .kv_heads = p->model.kv_heads / p->tp, .head_dim = model_head_dim(&p->model),
                             .batch = p->batch, .seq = p->prompt, .burst = prefill_clock};
    if (burst_ttft(&pre->costs, cal, attn_pre, attn_pre_s, ar_pre, (int)layers, tail, r->tpot_s, &pc, &ttft, e))
      goto out;
    if (pc.pw || pc.op)
      r->prefill_power = pc.pw != NULL, r->prefill_op_power = pc.op != NULL, r->prefill_mhz = pc.mhz,
      r->prefill_gemm_speed = pc.gemm_speed, r->prefill_mem_speed = pc.mem_speed, r->prefill_x_gemm = pc.x_gemm,
      r->prefill_attn_speed = pc.attn_speed;
    double k = clocked > 0 ? 1.0 - (sustained - ttft) / clocked : 1.0; /* the clocked part's share of the change */
    ph->compute_s -= sustained - ttft;
    ph->gemm_s *= k, ph->attention_s *= k, ph->experts_s *= k;
    finish_phase(ph);
    r->ttft_s = ph->total_s;
    r->prefill_clock = prefill_clock, r->prefill_sustained_s = sustained;
  }
  r->total_s = r->ttft_s + steps * r->tpot_s;
  r->tokens_per_s = (double)p->batch * p->generate / r->total_s;
  rc = 0;
out:
  free(pre);
  free(dec);
  return rc;
}

/* The plan's row widths of the small kernels' tables (sim_infer_phase_view). */
#define PHASE_WIDTHS 9
static int phase_widths(const plan_infer *p, sim_infer_width *w) {
  const model_config *m = &p->model;
  const int hd = model_head_dim(m), kvl = (m->kv_heads + p->tp - 1) / p->tp;
  const sim_infer_width all[PHASE_WIDTHS] = {{"rmsnorm_fwd", m->hidden},   {"layernorm_fwd", m->hidden},
                                             {"add_fwd", m->hidden},       {"embedding", m->hidden},
                                             {"embedding_fwd", m->hidden}, {"swiglu_fwd", m->ffn_hidden / p->tp},
                                             {"rope_scatter_fwd", (m->heads / p->tp + kvl) * hd},
                                             {"argmax", (int)(model_vocab_per_gpu(m, p->tp) * p->tp)},
                                             {"bias_fwd", (m->heads / p->tp + 2 * kvl) * hd}};
  memcpy(w, all, sizeof all);
  return PHASE_WIDTHS;
}

static int predict_adp(const plan_infer *p, const schema_calibration *cal, FILE *warn, sim_infer_result *r,
                       ts_err *e);

/* What prices a per-query-head plan's decode attention (decode_attention_s), recorded in r (decode_attn_source and a
 * note) and, for the bound, named on the warning stream. The tables it looks for carry no ".infer", ".eager" or
 * ".graph" twins, so cal answers as the views decode_attention_s reads do. */
static void decode_attention_source(const plan_infer *p, const schema_calibration *cal, FILE *warn,
                                    sim_infer_result *r) {
  const model_config *m = &p->model;
  if (p->decode_attention != PLAN_DECODE_ATTN_PER_QUERY_HEAD || m->attention == MODEL_ATTN_MLA) return;
  char t[64], note[256];
  const int g = m->kv_heads > 0 ? m->heads / m->kv_heads : 1;
  if (sim_infer_pqh_table(cal, p, t, sizeof t)) {
    snprintf(r->decode_attn_source, sizeof r->decode_attn_source, "%s", t);
    snprintf(note, sizeof note, "decode attention per query head: the measured \"%s\" table, by the unique KV bytes",
             t);
  } else if (g > 1) {
    char why[96];
    if (t[0])
      snprintf(why, sizeof why, "no \"%s\" table", t);
    else
      snprintf(why, sizeof why, "head dim %d: the measured tables are of 128", model_head_dim(m));
    snprintf(r->decode_attn_source, sizeof r->decode_attn_source, "bound");
    snprintf(note, sizeof note,
             "decode attention per query head: an upper bound (%s): the decode attention table at the MHA shape, %d "
             "times the KV bytes", why, g);
    if (warn)
      fprintf(warn, "tacosim: warning: %s: %s\n", cal->path[0] ? cal->path : "calibration", note);
  } else {
    return; /* MHA: per query head is per KV head, one price */
  }
  add_note(r, note);
}

int sim_infer_predict(const plan_infer *p, const schema_calibration *cal, const sim_infer_opts *o, FILE *warn,
                      sim_infer_result *r, ts_err *e) {
  memset(r, 0, sizeof *r);
  double gap_s = 0;
  sim_clock_model model;
  const sim_options so = {.cal = cal, .clock_model = o ? o->clock_model : SIM_CLOCK_MODEL_AUTO};
  if (sim_clock_model_resolve(&so, &model, e)) return -1;
  if (o && o->decode_graph) {
    if (p->tp != 1 || p->pp != 1)
      return ts_fail(e, p->path, "layout", "--decode graph: the executor runs decode steps as CUDA graphs at TP 1 and "
                     "PP 1 only (plan: TP %d, PP %d)", p->tp, p->pp);
    if (!(cal->has_host && cal->host_graph_gap_us > 0))
      return ts_fail(e, cal->path[0] ? cal->path : "calibration", "host.graph_gap_us",
                     "missing: --decode graph needs it (tacorun bench-graph, then calibration/merge_graph_gap.py)");
    gap_s = cal->host_graph_gap_us * 1e-6;
    r->decode_graph = true, r->graph_gap_us = cal->host_graph_gap_us;
  }
  snprintf(r->calibration, sizeof r->calibration, "%s", cal->path);
  r->derived_calibration = cal->derived;
  if (plan_infer_memory_per_gpu(p, &r->memory)) return ts_fail(e, p->path, "layout", "memory cannot be computed");
  decode_attention_source(p, cal, warn, r);
  if (p->attention_dp) return predict_adp(p, cal, warn, r, e);
  sim_infer_result plain;
  memset(&plain, 0, sizeof plain);
  schema_calibration view; /* the ".infer" tables in place of the training ones */
  if (sim_infer_calibration_view(cal, &view, e)) return -1;
  /* the burst profile: on unless --prefill-clock off or --clock-model off (under either model) */
  const bool clock = view.n_burst > 0 && !(o && o->prefill_clock_off) && so.clock_model != SIM_CLOCK_MODEL_OFF;
  const schema_power *pw = model == SIM_CLOCK_MODEL_POWER ? &cal->power : NULL;
  /* the prefill at one clock from its ops' power: with the section, under neither the fitted power model nor off,
   * for the executor's prefill attention (the one the section's rows measured; an engine's fused kernel's clock
   * at timing is not known) */
  const schema_op_power *op = !pw && so.clock_model != SIM_CLOCK_MODEL_OFF && cal->op_power.n_attn > 0 &&
                                      !(o && o->prefill_power_off) &&
                                      p->prefill_attention == PLAN_PREFILL_ATTN_EXECUTOR
                                  ? &cal->op_power
                                  : NULL;
  /* the small kernels as each phase runs them: the prefill and an eager decode step queued in a
   * stream (".eager"), a graph decode step in its CUDA graph (".graph") */
  sim_infer_width w[PHASE_WIDTHS];
  const int nw = phase_widths(p, w);
  schema_calibration pre_view, dec_view;
  if (sim_infer_phase_view(&view, ".eager", false, w, nw, &pre_view, e)) {
    sim_infer_calibration_view_free(&view);
    return -1;
  }
  if (sim_infer_phase_view(&view, gap_s > 0 ? ".graph" : ".eager", true, w, nw, &dec_view, e)) {
    sim_infer_phase_view_free(&pre_view);
    sim_infer_calibration_view_free(&view);
    return -1;
  }
  int rc = predict(p, &pre_view, &dec_view, gap_s, clock, pw, op, warn, true, r, e) ||
                   predict(p, &pre_view, &dec_view, gap_s, clock, pw, op, NULL, false, &plain, e)
               ? -1
               : 0;
  sim_infer_phase_view_free(&dec_view);
  sim_infer_phase_view_free(&pre_view);
  sim_infer_calibration_view_free(&view);
  if (rc) return -1;
  r->plain_ttft_s = plain.ttft_s, r->plain_tpot_s = plain.tpot_s, r->plain_tokens_per_s = plain.tokens_per_s;
  char note[256];
  if (!r->intra_calibrated) {
    snprintf(note, sizeof note, "the calibration (%s) did not measure %s: TP collectives are alpha-beta from the topology",
             cal->transport, sim_transport_of(p->cluster.intra.kind));
    add_note(r, note);
  }
  for (int i = 0; i < r->n_choices; i++) {
    const sim_infer_choice *ch = &r->choices[i];
    if (p->codec.kind == PLAN_CODEC_CAAT) {
      if (ch->codec_s > ch->plain_s) {
        snprintf(note, sizeof note,
                 "%s all-reduce of %.0f B: caat takes %.1f us, plain NCCL %.1f us (CAAT-Net is the model: no fallback)",
                 ch->what, ch->bytes, ch->codec_s * 1e6, ch->plain_s * 1e6);
        add_note(r, note);
      }
    } else if (ch->codec_s > ch->fallback_s) {
      const char *fb = ch->fallback_is_caat ? "caat in BF16" : "plain NCCL";
      snprintf(note, sizeof note, "%s all-reduce of %.0f B: %s takes %.1f us, %s %.1f us: %s%s", ch->what,
               ch->bytes, plan_codec_kind_name(p->codec.kind), ch->codec_s * 1e6, fb, ch->fallback_s * 1e6,
               ch->compressed ? "sent compressed anyway (codec_auto false)" : "sent as ",
               ch->compressed ? "" : fb);
      add_note(r, note);
    }
  }
  if (r->decode_graph) {
    snprintf(note, sizeof note,
             "--decode graph: each decode step one CUDA graph; its %d GEMM and decode-attention launches priced "
             "%.2f us each below their stream-timed tables (host.graph_gap_us)", r->graph_launches, r->graph_gap_us);
    add_note(r, note);
  }
  if (r->prefill_power) {
    snprintf(note, sizeof note,
             "prefill clock (power): the prefill's mix (%.0f %% GEMM time) at %.0f MHz under the %g W cap, GEMMs x%.3f "
             "and memory-bound ops x%.3f against the tables%s; TTFT %.3f ms, %.3f ms at the tables' speed",
             100 * r->prefill_x_gemm, r->prefill_mhz, cal->power.cap_w, r->prefill_gemm_speed, r->prefill_mem_speed,
             r->prefill_clock ? ", the burst profile as extra power from idle" : "", r->ttft_s * 1e3,
             r->prefill_sustained_s * 1e3);
    add_note(r, note);
  } else if (r->prefill_op_power) {
    char attn[32] = "";
    if (r->prefill_attn_speed > 0) snprintf(attn, sizeof attn, ", attention x%.3f", r->prefill_attn_speed);
    snprintf(note, sizeof note,
             "prefill clock (op power): the prefill's ops (%.0f %% tensor-core time) at %.0f MHz under the %g W cap, "
             "GEMMs x%.3f%s against their tables%s; TTFT %.3f ms, %.3f ms at the tables' speed",
             100 * r->prefill_x_gemm, r->prefill_mhz, cal->op_power.cap_w, r->prefill_gemm_speed, attn,
             r->prefill_clock ? ", the burst profile as extra power from idle" : "", r->ttft_s * 1e3,
             r->prefill_sustained_s * 1e3);
    add_note(r, note);
  } else if (r->prefill_clock) {
    snprintf(note, sizeof note,
             "prefill clock: TTFT %.3f ms as tacorun execute times it (median of %d prefills after a warm-up prefill "
             "and %d decode steps, from idle) under the calibration's burst profile; %.3f ms at the tables' "
             "sustained speed", r->ttft_s * 1e3, PLAN_INFER_PREFILL_REPS, PLAN_INFER_WARMUP_DECODE,
             r->prefill_sustained_s * 1e3);
    add_note(r, note);
  }
  if (p->generate < 2) add_note(r, "generate is 1: no decode step, TPOT is 0");
  if (model_is_moe(&p->model) && p->moe_kernel == PLAN_MOE_KERNEL_FUSED)
    add_note(r, "moe_kernel fused: a layer's routed experts priced as one GEMM of the active experts side by "
                "side, as serving engines run them (experiments/published/moe-infer); engine host time not modelled");
  else if (model_is_moe(&p->model))
    add_note(r, "moe_kernel per-expert: one GEMM an expert, as the training executor runs an MoE layer; serving "
                "engines run one fused kernel (\"moe_kernel\": \"fused\", the default), faster for many small "
                "experts (experiments/published/moe-infer)");
  return 0;
}

/* A step's price as a phase of the static prediction (the exchange is its TP part). */
static void phase_of_step(const sim_infer_step_price *pr, sim_infer_phase *ph) {
  *ph = (sim_infer_phase){0};
  ph->tp_s = pr->tp_s;
  ph->compute_s = pr->total_s - pr->tp_s;
  ph->gemm_s = pr->gemm_s, ph->attention_s = pr->decode_attn_s + pr->prefill_attn_s, ph->experts_s = pr->experts_s;
  finish_phase(ph);
}

/* A static batch under attention_dp: each GPU serves batch / tp sequences; the prefill is one step of its prompts, each
 * decode step one of its sequences at prompt + j cached tokens (sim_infer_step_s, the in-flight step's price, whose
 * tables are the eager decode step's: the prefill clock and --decode graph do not apply). No codec: plain = plan. */
static int predict_adp(const plan_infer *p, const schema_calibration *cal, FILE *warn, sim_infer_result *r,
                       ts_err *e) {
  sim_infer_views v;
  if (sim_infer_views_new(p, cal, &v, e)) return -1;
  const int b = plan_infer_rank_batch(p), steps = p->generate - 1;
  sim_infer_step_shape sh = {.tokens = b * p->prompt, .ctx_seqs = b, .ctx_len = p->prompt, .ctx_scale = 1.0,
                             .out_seqs = b};
  sim_infer_step_price pr, sum = {0};
  int rc = sim_infer_step_s(p, &v, &sh, warn, &pr, e);
  if (!rc) phase_of_step(&pr, &r->prefill);
  for (int j = 1; j <= steps && !rc; j++) {
    sh = (sim_infer_step_shape){.tokens = b, .dec_seqs = b, .kv_len = (long long)p->prompt + j, .out_seqs = b};
    rc = sim_infer_step_s(p, &v, &sh, j == 1 ? warn : NULL, &pr, e);
    sum.total_s += pr.total_s, sum.tp_s += pr.tp_s, sum.gemm_s += pr.gemm_s, sum.experts_s += pr.experts_s;
    sum.decode_attn_s += pr.decode_attn_s;
  }
  sim_infer_views_free(&v);
  if (rc) return -1;
  if (steps > 0) {
    sum.total_s /= steps, sum.tp_s /= steps, sum.gemm_s /= steps, sum.experts_s /= steps, sum.decode_attn_s /= steps;
    phase_of_step(&sum, &r->decode);
  }
  snprintf(r->calibration, sizeof r->calibration, "%s", cal->path);
  r->derived_calibration = cal->derived;
  r->intra_calibrated = sim_transport_matches(cal->transport, p->cluster.intra.kind);
  r->ttft_s = r->prefill.total_s, r->tpot_s = r->decode.total_s;
  r->total_s = r->ttft_s + steps * r->tpot_s;
  r->tokens_per_s = (double)p->batch * p->generate / r->total_s;
  r->plain_ttft_s = r->ttft_s, r->plain_tpot_s = r->tpot_s, r->plain_tokens_per_s = r->tokens_per_s;
  char note[256];
  snprintf(note, sizeof note, "attention_dp: %d GPUs of %d sequences each, experts %d-way expert parallel x %d-way "
           "within; each MoE layer's tokens all-gathered before the experts and reduce-scattered after (the TP part)",
           p->tp, plan_infer_rank_batch(p), p->ep, plan_infer_moe_tp(p));
  add_note(r, note);
  if (p->generate < 2) add_note(r, "generate is 1: no decode step, TPOT is 0");
  return 0;
}

/* ---- one engine step of an in-flight batch (sim_inflight.c) ---- */

/* The shapes' costs of the last steps: direct-mapped by a step's tokens (the layers' rows) and by its prompts. */
#define STEP_CACHE_SLOTS 64
typedef struct {
  int key;
  shape_costs *s;
} step_slot;
struct sim_infer_step_cache {
  step_slot rows[STEP_CACHE_SLOTS], ctx[STEP_CACHE_SLOTS];
  step_slot experts[STEP_CACHE_SLOTS]; /* attention_dp: the routed experts' shapes, by a GPU's mean tokens */
};

static shape_costs *cached_shape(step_slot *slots, int key, const plan_infer *q, int seq,
                                 const schema_calibration *cal, FILE *warn, ts_err *e) {
  step_slot *sl = &slots[key % STEP_CACHE_SLOTS];
  if (sl->s && sl->key == key) return sl->s;
  shape_costs *s = shape_costs_new(q, seq, cal, warn, e);
  if (!s) return NULL;
  free(sl->s);
  sl->s = s, sl->key = key;
  return s;
}

int sim_infer_views_new(const plan_infer *p, const schema_calibration *cal, sim_infer_views *v, ts_err *e) {
  memset(v, 0, sizeof *v);
  if (!(v->cache = calloc(1, sizeof *v->cache))) return ts_fail_sys(e, "out of memory");
  if (sim_infer_calibration_view(cal, &v->view, e)) {
    free(v->cache);
    return -1;
  }
  sim_infer_width w[PHASE_WIDTHS];
  static _Thread_local plan_infer r; /* large (cluster tables): not on the stack */
  if (p->attention_dp) sim_infer_rank_plan(p, &r); /* a GPU's widths: its layers at tp 1 */
  const int nw = phase_widths(p->attention_dp ? &r : p, w);
  if (sim_infer_phase_view(&v->view, ".eager", true, w, nw, &v->step, e)) {
    sim_infer_calibration_view_free(&v->view);
    free(v->cache);
    return -1;
  }
  return 0;
}

void sim_infer_views_free(sim_infer_views *v) {
  for (int i = 0; v->cache && i < STEP_CACHE_SLOTS; i++)
    free(v->cache->rows[i].s), free(v->cache->ctx[i].s), free(v->cache->experts[i].s);
  free(v->cache);
  sim_infer_phase_view_free(&v->step);
  sim_infer_calibration_view_free(&v->view);
}

void sim_infer_rank_plan(const plan_infer *p, plan_infer *r) {
  *r = *p;
  r->tp = 1, r->ep = 1, r->attention_dp = false, r->batch = 1;
}

/* One layer kind's share of the layers: an op of every layer, of the MoE layers, of the dense first layers. */
static double op_layers(const model_config *m, const model_op *o) {
  if (o->layers_kind == MODEL_LAYERS_MOE) return (double)(m->layers - m->dense_layers);
  if (o->layers_kind == MODEL_LAYERS_DENSE) return (double)m->dense_layers;
  return (double)m->layers;
}

/* Every layer's compute ops other than attention, summed over the layers that have them (op_layers): the routed
 * experts' ops (model_op parallel MODEL_PAR_EXPERT: their GEMMs and activation) with experts, else the others. */
static int layers_part_s(sim_costs *c, bool experts, double *s, double *gemm_s, ts_err *e) {
  *s = 0, *gemm_s = 0;
  for (int i = 0; i < c->n_mops; i++) {
    const model_op *m = &c->mops[i];
    if (m->kind == MODEL_OP_ATTENTION || (m->parallel == MODEL_PAR_EXPERT) != experts) continue;
    double t;
    if (compute_op_s(c, i, m->flops_fwd, m->bytes_fwd, &t, e)) return -1;
    const double n = op_layers(&c->p->model, m);
    *s += n * t;
    if (m->kind == MODEL_OP_GEMM) *gemm_s += n * t;
  }
  return 0;
}

/* attention_dp: the exchange around one MoE layer's experts for a group of `tokens` tokens, as TensorRT-LLM's
 * CutlassFusedMoE runs it on Hopper (sim/INFERENCE.md, "Attention data parallelism"): an all-gather over the tp
 * GPUs of every token's hidden state (FP8 under quantization fp8: quantized before the gather, else BF16) with its
 * top_k expert ids (int32) and weights (FP32), and a reduce-scatter of the experts' BF16 outputs, tokens x hidden;
 * both by the calibrated collectives at the full tensor's bytes, as the training simulator's SP gathers. */
static int adp_exchange_s(sim_costs *c, const plan_infer *p, double tokens, double *s, ts_err *e) {
  const model_config *m = &p->model;
  const double act = p->quant == PLAN_QUANT_FP8 ? 1.0 : 2.0;
  double ag, rs, codec, wire;
  if (tp_coll_s(c, p, PLAN_COLL_ALLGATHER, NULL, tokens * ((double)m->hidden * act + m->top_k * 8.0), &ag, &codec,
                &wire, e) ||
      tp_coll_s(c, p, PLAN_COLL_REDUCESCATTER, NULL, tokens * (double)m->hidden * 2.0, &rs, &codec, &wire, e))
    return -1;
  *s = ag + rs;
  return 0;
}

/* One engine step under attention_dp (sim_infer_step_shape: the slowest GPU's share, the group's tokens): that
 * GPU's layers at tp 1 on its own tokens (attention, norms, router, shared and dense FFNs; decode and prefill
 * attention over its own sequences; embedding, head and sampling of its own, nothing gathered), the routed experts
 * at a GPU's mean share of the group's rows (the forward plan's ep / etp shard: its E / ep experts of
 * expert_ffn / moe_tp, t x top_k x moe_tp rows, the active ones by sim_grouped_active), and each MoE layer's
 * exchange at the group's tokens. */
/* The fewest sequences `tokens` rows split into evenly with none longer than max_seq (the forward plan's shape:
 * only attention reads the sequence length, and a step's attention is priced apart, so any split prices the rest
 * alike; a static prefill of b prompts of a GPU is more tokens than one sequence may be). */
static int rows_split(long long tokens, int max_seq) {
  for (long long d = 1; d < tokens; d++)
    if (tokens % d == 0 && tokens / d <= max_seq) return (int)d;
  return tokens > 0 ? (int)tokens : 1;
}

static int adp_step_s(const plan_infer *p, const sim_infer_views *v, const sim_infer_step_shape *sh, FILE *warn,
                      sim_infer_step_price *out, ts_err *e) {
  static _Thread_local plan_infer r, x; /* large (cluster tables): not on the stack */
  const model_config *m = &p->model;
  const long long group = sh->group_tokens > 0 ? sh->group_tokens : (long long)sh->tokens * p->tp;
  const int mean = (int)((group + p->tp / 2) / p->tp) > 0 ? (int)((group + p->tp / 2) / p->tp) : 1;
  const int dr = rows_split(sh->tokens, m->max_seq), dx = rows_split(mean, m->max_seq);
  sim_infer_rank_plan(p, &r);
  r.batch = dr; /* the GPU's tokens as dr sequences: the layers see them as rows */
  x = *p;
  x.batch = p->tp * dx; /* dx sequences a GPU: the expert shard sees its tokens as rows */
  shape_costs *rows = cached_shape(v->cache->rows, sh->tokens, &r, sh->tokens / dr, &v->step, warn, e), *ctx;
  shape_costs *ex = rows ? cached_shape(v->cache->experts, mean, &x, mean / dx, &v->step, warn, e) : NULL;
  if (!ex) return -1;
  double rest, rest_gemm, exp_s, exp_gemm, xch, attn;
  if (layers_part_s(&rows->costs, false, &rest, &rest_gemm, e) || layers_part_s(&ex->costs, true, &exp_s, &exp_gemm, e) ||
      adp_exchange_s(&ex->costs, p, (double)group, &xch, e))
    return -1;
  out->experts_s = exp_gemm; /* of gemm_s, as sim_infer_phase.experts_s (the activation is in layers_s) */
  out->layers_s = rest + exp_s, out->gemm_s = rest_gemm + exp_gemm;
  out->exchange_s = (double)(m->layers - m->dense_layers) * xch;
  out->tp_s = out->exchange_s;
  const int attn_rows = find_op(&rows->costs, MODEL_OP_ATTENTION, NULL);
  if (attn_rows < 0) return ts_fail_sys(e, "%s: the layer of %s has no attention op", p->path, m->name);
  if (sh->dec_seqs > 0) {
    bool warned = false;
    r.batch = sh->dec_seqs;
    if (decode_attention_s(&rows->costs, &r, attn_rows, sh->kv_len, warn, &warned, &attn, e)) return -1;
    out->decode_attn_s = (double)m->layers * attn;
  }
  if (sh->ctx_seqs > 0) {
    r.batch = sh->ctx_seqs, r.prompt = sh->ctx_len;
    if (!(ctx = cached_shape(v->cache->ctx, sh->ctx_seqs, &r, sh->ctx_len, &v->step, warn, e))) return -1;
    int a = find_op(&ctx->costs, MODEL_OP_ATTENTION, NULL);
    if (a < 0 || prefill_attention_s(&ctx->costs, &r, a, warn, &attn, e)) return -1;
    out->prefill_attn_s = (double)m->layers * attn * sh->ctx_scale;
  }
  sim_infer_phase ends = {0};
  sim_infer_rank_plan(p, &r);
  r.batch = sh->out_seqs;
  if (ends_s(&rows->costs, &rows->costs, &r, sh->tokens, 0, &ends, NULL, e)) return -1;
  out->ends_s = ends.compute_s, out->gemm_s += ends.gemm_s, out->tp_s += ends.tp_s;
  out->total_s = out->layers_s + out->decode_attn_s + out->prefill_attn_s + out->tp_s + out->ends_s;
  return 0;
}

int sim_infer_step_s(const plan_infer *p, const sim_infer_views *v, const sim_infer_step_shape *sh, FILE *warn,
                     sim_infer_step_price *out, ts_err *e) {
  memset(out, 0, sizeof *out);
  if (sh->tokens < 1 || sh->out_seqs < 1 || sh->dec_seqs < 0 || sh->ctx_seqs < 0)
    return ts_fail_sim(e, "%s: an engine step of %d tokens, %d decoding, %d prompts, %d sampled", p->path, sh->tokens,
                       sh->dec_seqs, sh->ctx_seqs, sh->out_seqs);
  if (p->attention_dp) return adp_step_s(p, v, sh, warn, out, e);
  static _Thread_local plan_infer q; /* large (cluster tables): not on the stack */
  q = *p;
  q.batch = 1; /* the layers see the step's tokens as rows, whoever's they are */
  int rc = -1;
  shape_costs *rows = cached_shape(v->cache->rows, sh->tokens, &q, sh->tokens, &v->step, warn, e), *ctx;
  if (!rows) return -1;
  const double layers = (double)p->model.layers;
  double rest, rest_gemm, rest_experts, ar, codec, attn;
  int launches;
  if (layer_rest_s(&rows->costs, 0, &rest, &rest_gemm, &rest_experts, &launches, NULL, 0, e)) goto out;
  if (layer_allreduce(&rows->costs, p, false, 2.0 * sh->tokens * p->model.hidden, "step layer", NULL, &ar, &codec, e))
    goto out;
  out->layers_s = layers * rest, out->gemm_s = layers * rest_gemm, out->tp_s = layers * 2.0 * ar;
  const int attn_rows = find_op(&rows->costs, MODEL_OP_ATTENTION, NULL);
  if (attn_rows < 0) {
    ts_fail_sys(e, "%s: the layer of %s has no attention op", p->path, p->model.name);
    goto out;
  }
  if (sh->dec_seqs > 0) {
    bool warned = false;
    q.batch = sh->dec_seqs;
    if (decode_attention_s(&rows->costs, &q, attn_rows, sh->kv_len, warn, &warned, &attn, e)) goto out;
    out->decode_attn_s = layers * attn;
  }
  if (sh->ctx_seqs > 0) {
    q.batch = sh->ctx_seqs, q.prompt = sh->ctx_len;
    if (!(ctx = cached_shape(v->cache->ctx, sh->ctx_seqs, &q, sh->ctx_len, &v->step, warn, e))) goto out;
    int a = find_op(&ctx->costs, MODEL_OP_ATTENTION, NULL);
    if (a < 0 || prefill_attention_s(&ctx->costs, &q, a, warn, &attn, e)) goto out;
    out->prefill_attn_s = layers * attn * sh->ctx_scale;
  }
  sim_infer_phase ends = {0};
  q = *p;
  q.batch = sh->out_seqs;
  if (ends_s(&rows->costs, &rows->costs, &q, sh->tokens, 0, &ends, NULL, e)) goto out;
  out->ends_s = ends.compute_s, out->gemm_s += ends.gemm_s, out->tp_s += ends.tp_s;
  out->total_s = out->layers_s + out->decode_attn_s + out->prefill_attn_s + out->tp_s + out->ends_s;
  rc = 0;
out:
  return rc;
}
