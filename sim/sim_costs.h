/* sim_costs.h — how long each op of a program takes, from the calibration.
 * Internal to sim/ (no SimGrid here). */
#ifndef SIM_COSTS_H
#define SIM_COSTS_H

#include <stdint.h>

#include "calibration.h"
#include "plan.h"
#include "sim_nccl.h"

#define SIM_COST_SRC_LEN 96 /* sim_compute_source's text of one op */

/* Codec around a compressed transfer: T = pre + max(mid, transfer) + post. */
typedef struct {
  double pre_us, mid_us, post_us; /* first-chunk encode, pipelined codec, last-chunk decode */
  double total_us;                /* all codec kernel time (for the breakdown) */
  double caat_us;                 /* the CAAT-Net part of it (pack, unpack, private scaling) */
} sim_codec_cost;

typedef struct {
  const plan *p;
  schema_lookup lk;
  model_op mops[MODEL_MAX_LAYER_OPS];
  int n_mops;
  double loss_kernel_bytes; /* the fused cross-entropy's own traffic (model_output_ops "loss") */
  bool intra_calibrated; /* the calibration measured this cluster's intra-node fabric */
  bool inference;        /* the inference walk's costs (sim_infer.c): RoPE is the executor's fused
                          * rope-and-cache-scatter kernel, not the training RoPE of "rope_fwd" */
  char missing[16][64];  /* tables warned about (names up to 63 characters) */
  int n_missing;
  /* small cache of compute-op times keyed by (model_op, phase, part, row_chunk, row_chunks, flops, bytes):
   * under tp_comm_overlap the pieces of one GEMM differ by the userbuffer kernel beside them */
  struct cost_entry {
    int16_t model_op;
    uint8_t phase, part, row_chunk, row_chunks, used;
    double flops, bytes, us, gemm_us;
    char src[SIM_COST_SRC_LEN]; /* what priced it (sim_compute_source) */
  } cache[512];
  char src[SIM_COST_SRC_LEN]; /* the tables the op being priced reads, "; "-separated */
  /* cache of communication-op costs keyed by everything they depend on */
  struct comm_entry {
    uint8_t used, kind, coll, codec_kind, traffic, recent; /* recent: the way of its set used last */
    uint8_t op_group; /* the op's plan_group_kind, and its tag: a flex token all-to-all is priced by its kernel */
    int tag;
    int group, nranks, codec_included;
    double bytes, wire, p, calibrated_s;
    int have_calibrated;
    sim_codec_cost cc;
    char src[SIM_COST_SRC_LEN];       /* what priced the calibrated transfer (sim_comm_source) */
    char codec_src[SIM_COST_SRC_LEN]; /* the tables of its codec kernels */
  } comm_cache[1024]; /* sets of two ways (sim_costs.c) */
} sim_costs;


/* tp_comm_overlap (plan/README.md "TP communication overlap", sim/README.md "tp_comm_overlap: the GEMM
 * beside a userbuffer kernel"): the time of a GEMM piece of TE GEMM `gemm` (plan_tpo_gemm; < 0: none, t)
 * that takes t alone on every SM, with the userbuffer kernel beside it running c (<= 0: none). Pipeline and
 * bulk kernels hold n = num_sm SMs while they run; r = the calibration's measured ratio for n and the GEMM's
 * set_sm_margin (schema_tpo_sm_ratio: the rule sms / (sms - n) when unpriced, without a table for this SM
 * count or beyond its points). The GEMM does c / r of its work while the kernel runs, the rest after it at
 * full speed (set_sm_margin false) or on the sms - n SMs cuBLAS was told (true: x sms / (sms - n)):
 *   c / r < t:  c + (t - c / r) x (margin ? sms / (sms - n) : 1);   else  t x r.
 * Ring exchange holds no SM: t, or t x sms / (sms - num_sm) with set_sm_margin true. Same units in and out. */
double sim_tpo_gemm_us(const plan *p, const schema_calibration *cal, int gemm, double t, double c);
/* The companion's time c (us): its collective over the TP group's ranks at its wire bytes as the simulator
 * prices a plain intra-node collective (sim_intra_coll_us). */
int sim_tpo_companion_us(schema_lookup *lk, const plan *p, bool intra_calibrated, const plan_tpo_companion *comp,
                         double *c_us, ts_err *e);
/* Piece `piece` of `pieces` of GEMM op model_op (phase, part), t us alone: *us priced as above with the
 * companion the program puts beside it (plan_tpo_ops_companion over ops[n], or with ops NULL the plan's own
 * layer ops, which also checks tp_comm_overlap). The simulator (sim_costs.c) and the search's estimate
 * (search_estimate.c) both call it. */
int sim_tpo_piece_us(schema_lookup *lk, const plan *p, bool intra_calibrated, const model_op *ops, int n, int model_op,
                     int phase, int part, int piece, int pieces, double t, double *us, ts_err *e);
int sim_costs_init(sim_costs *c, const plan *p, const schema_calibration *cal, FILE *warn, ts_err *e);

/* Compute-op times by everything they depend on (model op, phase, GEMM half,
 * row chunk and row chunks, FLOPs, bytes; the chunk: under tp_comm_overlap a pipeline's first piece has no
 * userbuffer kernel beside it and the others do, at equal FLOPs and bytes): the same few dozen ops repeat for every layer
 * and micro-batch, and a calibration lookup can cost tens of microseconds
 * (a GEMM shape outside the measured grid interpolates over every shape). */
typedef struct {
  int16_t model_op;
  uint8_t phase, part, row_chunk, row_chunks, used;
  double flops, bytes, s, gemm_s;
} sim_cost_entry;
typedef struct {
  sim_cost_entry *slots;
  size_t cap, n; /* cap: a power of two */
} sim_cost_memo;
/* Compute op `op`'s time *s and its GEMM part *gemm_s (sim_compute_parts_s) from m, priced by c and kept
 * there the first time: the same values as sim_compute_parts_s, whose own cache holds a few hundred ops (the
 * simulator and the search's bound, search_bound.c, both walk every op of a stage's program). */
int sim_cost_memo_get(sim_cost_memo *m, sim_costs *c, const plan_op *op, double *s, double *gemm_s, ts_err *e);
void sim_cost_memo_free(sim_cost_memo *m);
/* What priced compute op `op` (the calibration tables it read, or the roofline where it had none, and
 * the floors applied: "gemm", "kernels.rmsnorm_fwd", "attention_backends.fused", "roofline (no ...
 * table)"), appended to out (cap bytes, NUL-terminated) where not there yet, "; "-separated: a trace
 * event's "source". */
void sim_compute_source(sim_costs *c, const plan_op *op, char *out, size_t cap);
/* Of G experts sharing m routed copies evenly, how many get rows (the expected count, rounded, 1..G):
 * the executor runs a GEMM for those only; G for any m of a training micro-batch. */
int sim_grouped_active(long long m, int G);
/* The forward bytes of a model op's weights that a grouped GEMM does not read: those of its experts
 * without rows (sim_grouped_active; bf16 n x k each), 0 for any other op. A forward op's bytes less
 * these are what the ceiling check and a CUDA graph's floor count (every expert in training; 6 of 8
 * in a decode step of one Mixtral token). */
double sim_grouped_idle_bytes(const model_op *mo);
/* The fastest an op may run (us): its FLOPs at the BF16 peak or its bytes beyond the GPU's L2
 * (*hbm_bytes) at the HBM rate, whichever is longer. A price below it is a simulator failure. */
double sim_ceiling_us(const sim_costs *c, double flops, double bytes, double *hbm_bytes);
/* layout.fp8 without a measured "gemm_fp8" point: the BF16 GEMM time bf16_us of (m, n, k) moved to FP8 by the
 * transfer rule (sim/README.md, "FP8 GEMMs"): the point's share of its own roofline kept, the roofline
 * max(2mnk / peak, bytes / HBM bandwidth) taken with the BF16 peak and BF16 A, B, C (2 bytes each) on one
 * side and with the FP8 peak (fp8_tflops) and FP8 A, B (1 byte), BF16 C on the other:
 * bf16_us x roof_fp8 / roof_bf16. Also the layout search's estimate (search_estimate.c). */
double sim_gemm_fp8_transfer_us(const topo_gpu *g, long long m, long long n, long long k, double bf16_us);
/* layout.fp8, a shape the calibration's "gemm_fp8" lacks (sim/README.md, "FP8 GEMMs"), by the first rule that
 * applies (*rule): SIM_FP8_BETWEEN, a GEMM other than a weight gradient whose m lies between two "gemm_fp8"
 * points of the same (n, k): their times interpolated in m (schema_gemm_fp8_between_us); SIM_FP8_RATIO, the
 * BF16 time bf16_us of (m, n, k) times the FP8 / BF16 ratio measured at the "gemm_fp8" point of the same (n, k)
 * whose m is nearest (within SIM_FP8_RATIO_M_FACTOR; *ratio_m its m, else 0); SIM_FP8_TRANSFER,
 * sim_gemm_fp8_transfer_us. Also the layout search's estimate. */
#define SIM_FP8_RATIO_M_FACTOR 4.0
typedef enum { SIM_FP8_BETWEEN, SIM_FP8_RATIO, SIM_FP8_TRANSFER } sim_fp8_rule;
double sim_gemm_fp8_unmeasured_us(const schema_calibration *cal, const topo_gpu *g, long long m, long long n,
                                  long long k, bool wgrad, double bf16_us, sim_fp8_rule *rule, long long *ratio_m);
/* layout.fp8: an FP8 GEMM of the plan's recipe from its per-tensor-scaled price tensor_us (a "gemm_fp8" point
 * or sim_gemm_fp8_unmeasured_us): under "mxfp8" times the GPU catalogue's measured mxfp8_gemm_ratio (where it
 * has one, else unchanged), every other recipe unchanged (sim/README.md, "FP8 GEMMs"). Also the layout
 * search's estimate. */
double sim_gemm_fp8_recipe_us(const plan *p, double tensor_us);
/* quantization nvfp4 (sim/INFERENCE.md, "NVFP4 weights"): the FP8 GEMM time fp8_us of (m, n, k) on this GPU moved
 * to NVFP4 by the same roofline rule: fp8_us x roof_fp4 / roof_fp8, the roofline max(2mnk / peak, bytes / HBM
 * bandwidth) taken with the FP8 peak (fp8_tflops) and A, B at 1 byte on one side and with the FP4 peak
 * (fp4_tflops) and A, B at PLAN_NVFP4_BYTES_PER_PARAM on the other, C BF16 on both: a compute-bound GEMM is
 * priced fp8_tflops / fp4_tflops of its FP8 time, a memory-bound one by the bytes it reads. fp8_us unchanged on a
 * GPU without both peaks. */
double sim_gemm_fp4_transfer_us(const topo_gpu *g, long long m, long long n, long long k, double fp8_us);
/* Compute op (PLAN_OP_COMPUTE) time in seconds. */
int sim_compute_s(sim_costs *c, const plan_op *op, double *s, ts_err *e);
/* The same, and *gemm_s: the part of it in GEMMs and attention (the rest is
 * memory-bound kernels), which the clock model speeds up differently. */
int sim_compute_parts_s(sim_costs *c, const plan_op *op, double *s, double *gemm_s, ts_err *e);
/* The forward of unfused attention on this plan's shard (batched GEMMs of
 * the stacked query rows around a causal softmax over full s x s scores, the
 * way the inference executor's prefill runs it), in seconds. */
int sim_attention_unfused_fwd_s(sim_costs *c, double *s, ts_err *e);
/* Whether a training plan's attention op is priced as that unfused program: attention_backend "unfused",
 * or "executor" on an MLA model whose values are narrower than its queries and keys (the executor's fused
 * kernels take equal widths only, so it runs those unfused), the GEMMs at the q/k and v widths apart. */
bool sim_attention_runs_unfused(const plan *p);
/* The scores of one head and sequence of s tokens that the executor's causal softmax kernels touch: each
 * row's columns up to the diagonal in chunks of 8, s (s + 8) / 2 when 8 divides s. */
double sim_causal_softmax_scores(long long s);
/* The FLOPs the plan's attention kernel does for an attention op (the op
 * counts the full s x s square; causal kernels do half of it): what the
 * ceiling check holds its price against. */
double sim_attention_kernel_flops(const plan *p, const plan_op *op);
/* The same for a backend (plan_attention_backend), a direction and the op's count. */
double sim_attention_kernel_flops_of(int backend, bool bwd, double op_flops);
/* The attention shape and backend whose points price the plan's attention
 * (schema_lookup_attn_backend, sim_costs.c's attention_us): the plan's
 * attention_backend, else the executor's "attention_shapes" when the
 * calibration has no points of that backend (*fell_back 1) or the op is a CP
 * piece or MLA (*fell_back 2; else 0). A plan with attention_dropout > 0
 * takes the backend's "<backend>_dropout" points, or the backend's own when
 * the calibration has none (*fell_back 3: the dropout priced at no cost).
 * Returns 1 when no points price it (the caller then uses the FLOP-keyed
 * tables and the roofline floor). */
int sim_attention_shape_of(const schema_calibration *cal, const plan *p, schema_attn_backend *be,
                           schema_attn_shape *q, int *fell_back);
/* An attention's roofline time (us) on r's GPU: one launch + the larger of
 * its kernel's FLOPs at the peak and its bytes at the HBM rate. The floor of
 * a price from the FLOP-keyed attention tables, which know no bytes. */
double sim_attention_roof_us(const schema_roofline *r, int backend, bool bwd, double op_flops, double bytes);
/* Pipeline chunks of a compressed message of `in_bytes` codec input bytes:
 * cut as the executor's compressed collectives cut it (TS_CODEC_CHUNK_BYTES,
 * common/ts_coll.h), at least one. */
double sim_codec_chunks(double in_bytes);

/* "allreduce", ... "sendrecv" for an op. */
const char *sim_coll_name(const plan_op *op);
/* Codec kernels of a communication op (zero when uncompressed). */
int sim_codec_cost_of(sim_costs *c, const plan_op *op, int nranks, sim_codec_cost *cc, ts_err *e);
/* A collective (or send/recv) measured by the calibration: transfer time of
 * the op's wire bytes over nranks, in seconds, codec excluded — unless the
 * calibration measured the compressed collective itself ("allreduce.taco128"),
 * then its whole time and *codec_included = 1. */
int sim_coll_calibrated_s(sim_costs *c, const plan_op *op, int nranks, double *s, int *codec_included, ts_err *e);
/* What priced communication op `op` over nranks (a trace event's "source"), appended to out (cap bytes,
 * NUL-terminated), "; "-separated. in_node: its transfer took the calibrated time (sim_coll_calibrated_s),
 * named as the calibration names it ("collectives.allreduce.8 (nvlink)", and beyond the table "scaled from 8
 * ranks" or "roofline beyond its sizes"; "NCCL model (ring/LL128), anchored on collectives.allreduce.8 (nvlink)";
 * "the flex kernel's published link share"); else `flows`, what the caller ran on the platform (sim_comm.c).
 * Then the codec's kernel tables ("kernels.taco_encode"), those the transfer's measured compressed collective
 * does not include. */
void sim_comm_source(sim_costs *c, const plan_op *op, int nranks, bool in_node, const char *flows, char *out,
                     size_t cap);
/* A flex token all-to-all (PLAN_MOP_MOE_TOKENS, tagged by its kernel) at its kernel's published share of the link
 * (plan_moe_flex_link_share), in seconds over nranks; -1 when op is not one (the calibration or the NCCL model
 * prices it). sim_coll_calibrated_s returns it for such ops. */
double sim_flex_token_s(const plan *p, const plan_op *op, int nranks);

/* A plain intra-node collective (nccl-tests bytes) as the simulator prices it,
 * for the simulator and the layout search alike: the calibration's table of
 * this rank count when it measured this fabric, else the NCCL model
 * (sim_nccl.c), anchored on the measured curve of the nearest rank count of
 * this fabric when there is one. */
typedef struct {
  double us;
  bool modelled;                   /* the NCCL model priced it */
  const schema_coll_table *anchor; /* the curve it was anchored on, or NULL */
  sim_nccl_fabric fabric;
  sim_nccl_choice choice;
} sim_intra_coll;
int sim_intra_coll_us(schema_lookup *lk, const topo_cluster *cl, bool intra_calibrated, const char *name, int nranks,
                      double bytes, sim_intra_coll *how, ts_err *e);

#endif
