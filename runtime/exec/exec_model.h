/* exec_model.h — one rank's share of a GPT-style decoder stack on a GPU, and
 * the walk over a per-rank program (plan.h's plan_op) that trains it.
 *
 * BF16 weights and activations, FP32 master weights, FP32 gradient
 * accumulators (weight-gradient GEMMs accumulate into them directly) and
 * AdamW moments. Megatron-LM's tensor parallelism: QKV and FC1 are
 * column-parallel, the attention output projection and FC2 row-parallel (their
 * outputs all-reduced over the TP group), the embedding and the output layer
 * split over the vocabulary. Data parallelism: one all-reduce of the gradient
 * accumulators. Parameters are laid out like exec_ref.h's (same tensor names
 * and order) with each tensor cut to this rank's shard, so a gradient here can
 * be compared with the float64 reference tensor by tensor.
 *
 * Codecs: TACO and CAAT-Net (and both) on the TP all-reduces, see
 * exec_model_set_codecs.
 * Pipeline stages: PP > 1 with 1F1B, GPipe or interleaved 1F1B (exec_model_create_pp).
 * Walked plan programs add sequence parallelism, recomputation and ZeRO-1
 * (see sp, recomputing, zero1 below).
 * Grouped-query attention: see kv_local below.
 * The zoo's layers as published (exec_ref.h): RoPE (rope op between qkv and
 * attn: in place on the query and key columns, inverse on their gradient),
 * biases on qkv and fc1 (added after the GEMM, their gradients with the
 * weight gradient) and on attn_out and fc2 (added in the residual op, after
 * the TP reduction, as Megatron-LM's bias-dropout-add), an untied output
 * weight (lm_head, vocabulary-parallel like wte). Qwen3's attention
 * (exec_ref.h): head_dim other than hidden / heads (hidden_local below is
 * this rank's query width, heads_local x head_dim, the output projection's
 * K) and the QK norm (q_norm, k_norm ops between qkv and rope: each query and
 * key head RMS-normed in place in qkv, its input kept in qk_in; the weights'
 * gradients are partial on each TP rank and summed over TP in the plan's
 * norm-gradient all-reduce, exec_sp_sync_norms). */
#ifndef EXEC_MODEL_H
#define EXEC_MODEL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>

#include "coll_taco.h"
#include "exec_gemm.h"
#include "exec_ref.h"
#include "exec_ep.h"
#include "exec_walk_map.h"
#include "plan.h"
#include "ts_error.h"

/* Compressed calls of one iteration that get a NaN/Inf counter of their own. */
#define EXEC_NF_CALLS 1024


struct exec_moe_acts;    /* exec_moe.h */
struct exec_moe_scratch; /* exec_moe.h */

typedef struct {
  void *x_in, *n1, *qkv, *P, *attn, *x_mid, *n2, *u, *a; /* bf16 (an MoE layer's shared FFN uses u and a) */
  float *mean1, *rstd1, *mean2, *rstd2;
  void *qk_in;    /* the QK norm's input (qk_norm): [T x (hidden_local + kv_local head_dim)] bf16, queries then keys */
  float *qk_rstd; /* its 1/rms per token and head: [T x (heads_local + kv_local)], queries then keys */
  struct exec_moe_acts *moe; /* MoE layers: routing and expert activations (NULL otherwise) */
  /* Multi-head latent attention (exec_mla.c; NULL otherwise), bf16: q_a's output cq [T x q_lora] and it normed
   * (cqn, q_b's input), kv_a's output kva [T x (kv_lora + qk_rope)] (c_kv and the shared rope key, not rotated)
   * and c_kv normed (ckvn [T x kv_lora], kv_b's input); the two norms' 1/rms per token. qkv holds the
   * assembled [q | k | v] (heads x (nope + rope), the same, heads x v_head), attn heads x v_head. */
  void *cq, *cqn, *kva, *ckvn;
  float *rstd_q, *rstd_kv;
} exec_layer_acts;

typedef struct {
  exec_ref_config cfg; /* the whole model; batch = micro-batch size */
  int micros;          /* micro-batches per iteration on this rank */
  int tp, tp_rank, dp, dp_rank;
  ncclComm_t tp_comm, dp_comm; /* NULL when the group has one rank */
  /* Expert parallelism (exec_pipeline.ep at creation; the walked plan's must
   * match): ep ranks of the DP group exchange tokens over ep_comm (dp_comm
   * when ep = dp), each holding only its E / ep experts' weights, gradients
   * and AdamW state (the expert tensors cut to them); their gradients are
   * reduced over expert-DP (edp_comm: the dp / ep ranks with the same
   * experts; NULL when it has one rank). exec_ep.h's place. */
  int ep; /* 1: no EP */
  exec_ep_place epl;
  ncclComm_t ep_comm, edp_comm;
  cudaStream_t stream;
  exec_gemm *gemm;
  int layer_op_index[EXEC_OP_COUNT]; /* model_op index of each layer op (identity unless the plan says otherwise) */

  /* shard sizes */
  long long tokens, vocab_padded, vocab_local, vocab_start;
  int hidden_local, ffn_local, fc1_local, heads_local, head_dim; /* hidden_local: heads_local x head_dim */
  /* The value head (head_dim but with MLA, where head_dim is qk_nope + qk_rope and hidden_local the attention
   * output's heads_local x v_dim, attn_out's input) and RoPE's dimension (head_dim; MLA: qk_rope). */
  int v_dim, rope_dim;
  /* Grouped-query attention: kv_local key/value heads on this rank, qkv_cols
   * = hidden_local + 2 kv_local head_dim columns of the QKV GEMM. The fused
   * attention kernels read each group's key/value head in place and write
   * dqkv [T x qkv_cols] with the key/value gradients summed over the group
   * (exec_flash.h); kv_local < heads_local needs them (exec_model_create
   * refuses other shapes). */
  int kv_local, qkv_cols;
  float *rope_inv_freq; /* RoPE: head_dim / 2 frequencies (NULL with learned positions) */

  /* parameters: tensors in exec_ref order, local shapes */
  int ntensors;
  exec_tensor tensors[EXEC_REF_MAX_TENSORS];
  size_t nparams;
  void *w16;                                   /* bf16 working weights */
  float *master, *grad, *adam_m, *adam_v;      /* fp32 */
  int adam_step;
  float lr;

  /* codecs of the TP all-reduces (forward: row-parallel outputs; backward:
   * column-parallel input gradients), through kernels/coll_taco.h */
  plan_codec tp_codec[2];
  int team_ready;
  coll_team team;
  /* TACO on pipeline messages (the plan's codec.pp): a team over pp_comm whose
   * stream is pp_stream (exec_model_prepare_codecs) */
  int pp_team_ready;
  coll_team pp_team;
  /* TACO on the DP gradient buckets (the plan's codec.dp): FP32 gradients
   * through a team over dp_comm whose stream is dp_stream */
  int dp_team_ready;
  coll_team dp_team;
  /* CAAT-Net backward: the shared channels of the input gradient are reduced
   * in FP32 (DESIGN.md, plan.h); this is the FP32 copy. NULL when the backward
   * reduces in BF16 (--variant caat-bwd=bf16, the variant measured on 2026-11-29). */
  float *caat_f32;
  /* Optional replacement of the layer TP all-reduces (forward: row-parallel
   * outputs; backward: column-parallel input gradients; not the embedding's):
   * when set, called instead of the codecs above, in place on the rows x cols
   * BF16 buffer, enqueued on `stream` (the TP stream). Lets a caller run a
   * codec of its own (tacorun train's per-tensor FP8) without a plan codec. */
  int (*tp_allreduce_hook)(void *ctx, void *buf, size_t rows, size_t cols, int backward, cudaStream_t stream,
                           ts_err *e);
  void *tp_allreduce_hook_ctx;

  /* TP all-reduces run on their own stream so that the backward's input-
   * gradient all-reduce overlaps the weight-gradient GEMM of the same layer
   * (Megatron-LM's async TP all-reduce): the GEMM is deferred until the
   * all-reduce is enqueued, and the compute stream waits for it after. */
  cudaStream_t tp_stream;
  int overlap_wgrad;   /* 0 with --variant wgrad-overlap=off (fallback, for comparison) */
  int lower_softmax;   /* 0 with --variant softmax=full: rt_ops' full-row causal softmax */
  cudaEvent_t ev_ready, ev_done;
  struct {
    int active;
    long long M, N, K;
    const void *X, *dY;
    float *dW;
  } pending_wgrad;
  /* Profiling (optional): per program op, events the walk records for the
   * caller: after the deferred weight-gradient GEMM (compute stream) and
   * around the transfer itself (TP stream). NULL when not profiling. */
  int cur_op;
  cudaEvent_t *prof_wgrad_done, *prof_tp_start, *prof_tp_end;

  /* Walking a plan_build_program() program (exec_walk.h): the walker orders
   * the streams by the program's deps, so collectives only enqueue on their
   * stream; DP buckets reduce the gradient groups completed so far (head,
   * each layer, the embedding: the plan fills buckets layer by layer). */
  int walker_mode;
  cudaStream_t dp_stream;
  unsigned char *group_done, *group_reduced; /* [layers + 2]: layers, head, embedding */
  /* Each gradient group is one contiguous range [group_lo, group_hi) of the
   * flat arrays (embedding first, layers, final norm last: backward order is
   * reverse memory order), its start aligned to 128 x DP elements so that
   * ZeRO-1 can cut it into DP equal, aligned shards. */
  size_t *group_lo, *group_hi;

  /* Sequence parallelism (Megatron-LM; walked plans with
   * "sequence_parallel"): the residual stream, the norms and the residual adds
   * run on this rank's rows [sp_row0, sp_row0 + sp_rows) of the T tokens; the
   * plan's all-gathers fill the full-size input of the column-parallel GEMMs
   * and its reduce-scatters leave each rank its rows of the row-parallel
   * outputs (in place: buffers stay T rows, only the shard's rows are used). */
  int sp;
  long long sp_rows, sp_row0;
  /* Recomputation (the plan's "full"/"selective"): ops of phase recompute
   * rerun the forward (with its collectives) before the backward that needs
   * it. A model created with cfg.recompute keeps only what the plan does not
   * recompute (full: each layer's input; selective: all but the softmax
   * probabilities) and shares the rest between layers; without it, the rerun
   * rewrites kept activations with the same values. While set, a layer's
   * output goes to scratch. */
  int recomputing;
  /* ZeRO-1 (walked plans with "zero1", DP > 1): the DP buckets reduce-scatter
   * each group's FP32 gradients (this rank keeps shard dp_rank of the group),
   * AdamW updates only those shards, and the plan's parameter all-gathers
   * rebuild the BF16 weights. group_bucket[g]: the bucket op that reduced
   * group g (its all-gather is that bucket's). From exec_model_set_layout on,
   * master, adam_m and adam_v hold only this rank's shards: group g's at
   * zero1_off[g], zero1_params floats in all (about nparams / DP). */
  int zero1, bucket_next;
  int *group_bucket;
  size_t *zero1_off, zero1_params;

  /* Pipeline stage (PP > 1, 1F1B): this rank runs layers [layer_lo, layer_hi)
   * and holds every tensor but updates only its own (exec_model_holds_tensor).
   * Activations are kept per micro-batch slot (nslots: the most micro-batches
   * the rank's walked program holds at once, exec_walk_program_shape; else one
   * per micro-batch when PP > 1 or under GPipe at PP = 1; a micro-batch reuses
   * a slot only after its previous holder's last op, so a recv or a later
   * forward never overwrites what a pending backward needs); the stage
   * boundary activation is acts[slot][layer_hi].x_in
   * (sent) or acts[slot][layer_lo].x_in (received); gradients travel through
   * pp_grad_in/pp_grad_out[slot]. Send/recv run on pp_stream through pp_comm
   * (ranks = stages); emb_comm joins the first and last stage for the tied
   * embedding's gradient. */
  int pp, pp_rank, layer_lo, layer_hi, nslots, slot;
  /* slot_of[micro]: the slot a walked program gives each micro-batch
   * (exec_walk_slots; set by exec_walk_init, owned by the walk); NULL: micro
   * % nslots. act_bytes: what the slots hold (activations, boundary
   * gradients, the head's per-slot state), counted when allocated. */
  const int *slot_of;
  size_t act_bytes;
  /* Boundary buffers (pipe->bslots > 0, PP > 1): the forward activation a
   * chunk receives (layer chunk_lo[c] > 0's x_in) lands in bnd_x[bslot * vpp
   * + c], nbslots of them per chunk, held from the receive on (the program
   * posts it before the backward in hand), so the other activations need
   * slots only from the micro-batch's first compute on; exec_model_run_op
   * points that layer's x_in at its buffer. NULL: x_in lives in the slot. */
  int nbslots, bslot;
  const int *bslot_of;
  void **bnd_x;
  /* This stage's chunks: chunk c holds layers [chunk_lo[c], chunk_hi[c])
   * (even: virtual stage v = c pp + pp_rank holds [v lpc, (v+1) lpc); uneven
   * stages, vpp 1: the plan's bounds, exec_pipeline.layer_lo/hi). */
#define EXEC_MAX_CHUNKS 64
  int chunk_lo[EXEC_MAX_CHUNKS], chunk_hi[EXEC_MAX_CHUNKS];
  /* Interleaved 1F1B (cfg.vpp > 1): the stage holds vpp chunks of lpc layers,
   * chunk c being virtual stage c * pp + pp_rank (layers [v lpc, (v+1) lpc));
   * boundary gradients are per (slot, chunk): pp_grad_*[slot * vpp + c].
   * With vpp = 1, [layer_lo, layer_hi) is the one chunk. */
  int vpp, lpc;
  ncclComm_t pp_comm, emb_comm;
  cudaStream_t pp_stream;
  void **pp_grad_in, **pp_grad_out;

  /* activations kept for backward: nslots x (layers + 1), see exec_acts();
   * under recomputation (cfg.recompute) the recomputed ones point into
   * `shared` (one set for every layer and slot) */
  exec_layer_acts *acts;
  exec_layer_acts shared;
  void *x_final, *nf, *proj, *logits;
  float *meanf, *rstdf, *ce_rowmax, *ce_sums;
  /* The output layer's kept state (stack output, final norm, its statistics,
   * dlogits) per micro-batch slot on a last stage whose schedule runs several
   * forwards before their backwards (GPipe, interleaved): x_final .. rstdf
   * above point at heads[slot] (exec_model_run_op). NULL otherwise. */
  struct exec_head_acts {
    void *x_final, *nf, *logits;
    float *meanf, *rstdf;
  } *heads;
  /* backward scratch */
  void *dx, *dtmp, *dtmp2, *dqkv, *dattn, *du, *da, *dP;
  /* attention scratch: raw scores, and dS whose upper triangle stays zero
   * (as does every layer's P): the causal softmax touches only the lower one */
  void *scores, *dS;
  /* data: tokens and labels of every micro-batch, [micros x tokens] */
  int32_t *tokens_dev, *labels_dev;
  /* loss accumulated over the micro-batches of the iteration (mean over the global batch) */
  float *loss_sum;
  unsigned long long *nonfinite; /* one counter per tensor */
  /* NaN/Inf that the TACO encodes met (and encoded as zeros): one counter per
   * compressed call of the iteration, named by its op (exec_step.c), read and
   * reset by exec_model_check_finite; calls past EXEC_NF_CALLS count in the
   * teams' own counters. */
  taco_nonfinite *nf_calls;
  const plan_op *nf_ops[EXEC_NF_CALLS];
  int nf_used;
  const plan_op *run_op; /* the op exec_model_run_op runs */
  double wait_timeout_s; /* bound on exec_stream_wait (0: 300 s); the commands set their --timeout */
  int tp_comm_foreign;   /* tp_comm is a caller's handle, not NCCL's (train_emu.h): waits do not poll it */
  /* Mixture-of-experts layers (cfg.experts > 0; exec_moe.h): TP = PP = 1, EP 1
   * or EP dividing DP (see ep above), no recomputation; the buffers every MoE
   * layer shares. */
  struct exec_moe_scratch *moe;
  /* Multi-head latent attention (cfg.kv_lora > 0; exec_mla.h): TP 1; the scratch every layer shares. */
  struct exec_mla_scratch *mla;
} exec_model;

/* A pipeline stage for exec_model_create_pp (pp = 1: the whole stack; the
 * chunks per stage of interleaved 1F1B come from cfg->vpp). */
typedef struct {
  int pp, pp_rank;
  ncclComm_t pp_comm, emb_comm; /* NULL when pp == 1 */
  int all_micros; /* pp == 1 under GPipe: every forward runs before any backward, so each micro-batch keeps its
                     activations (a slot of its own), as on a pipeline stage */
  int slots; /* > 0: activation slots (exec_walk_program_shape: the most micro-batches the rank's program holds at
                once); 0: one per micro-batch when pp > 1 or all_micros, else 1 */
  int bslots; /* > 0 (with slots): boundary buffers per chunk for received activations (exec_model.h's bnd_x) */
  int layer_lo, layer_hi; /* hi > 0: this stage's layers [lo, hi) (uneven stages, vpp 1); 0: layers / pp each */
  /* Expert parallelism (MoE models): ep (0 or 1: none) dividing dp; ep_comm over this rank's EP group (ep
   * consecutive DP ranks; the DP communicator when ep = dp), edp_comm over its expert-DP group (NULL when
   * ep = dp). exec_ep.h. */
  int ep;
  ncclComm_t ep_comm, edp_comm;
} exec_pipeline;

/* Allocates everything for cfg cut over (tp, dp, pp) with `micros` micro-batches. */
int exec_model_create_pp(exec_model *m, const exec_ref_config *cfg, int micros, int tp, int tp_rank,
                         ncclComm_t tp_comm, int dp, int dp_rank, ncclComm_t dp_comm, const exec_pipeline *pipe,
                         cudaStream_t stream, ts_err *e);
/* True when the stage owns (updates, reports) tensor t: its layers, the
 * embedding on the first stage, the final norm and the tied word embedding on
 * the last. */
int exec_model_holds_tensor(const exec_model *m, int t);
/* True when the stage runs layer l; the chunk (0 .. vpp-1) of a layer it runs. */
int exec_model_holds_layer(const exec_model *m, int l);
int exec_model_chunk_of_layer(const exec_model *m, int l);
/* Layer l's activations of the current micro-batch slot. */
exec_layer_acts *exec_acts(const exec_model *m, int l);
/* Allocates everything for cfg cut over (tp, dp) with `micros` micro-batches (PP = 1). */
int exec_model_create(exec_model *m, const exec_ref_config *cfg, int micros, int tp, int tp_rank,
                      ncclComm_t tp_comm, int dp, int dp_rank, ncclComm_t dp_comm, cudaStream_t stream, ts_err *e);
void exec_model_destroy(exec_model *m);

/* Sets the codecs of the TP all-reduces (index 0 forward, 1 backward). TACO
 * runs the two-shot compressed all-reduce; CAAT-Net the partial all-reduce of
 * the first floor(p h) channels (private channels scaled by sqrt(TP), in both
 * directions), and then the gradients of the replicated tensors (norms,
 * positions) are averaged over TP before the optimizer, because the ranks'
 * activations differ. */
int exec_model_set_codecs(exec_model *m, plan_codec fwd, plan_codec bwd, ts_err *e);
/* Readies what the compressed ops of a plan program need before the first
 * timed iteration (collective set-up and staging buffers allocate and
 * synchronize): TACO on the sequence-parallel all-gathers/reduce-scatters
 * (the TP team), on pipeline send/recv (a team over pp_comm) and on the DP
 * gradient buckets (a team over dp_comm, FP32). Call after
 * exec_model_set_layout. */
int exec_model_prepare_codecs(exec_model *m, const plan_op *ops, int nops, ts_err *e);
/* (CAAT-Net backward all-reduces run in FP32 unless --variant caat-bwd=bf16.) */

/* Loads this rank's shard of a full parameter array laid out as exec_ref_tensors(). */
int exec_model_load_ref(exec_model *m, const double *params, ts_err *e);
/* Initialises on the GPU from a seed (normal-like weights with std 0.02, gains 1). */
int exec_model_init_random(exec_model *m, unsigned long long seed, ts_err *e);
/* Tokens and labels for every micro-batch: host arrays of micros * tokens. */
int exec_model_set_data(exec_model *m, const int32_t *tokens, const int32_t *labels, ts_err *e);

/* Zeroes gradient accumulators and the loss (the start of an iteration). */
int exec_model_zero_grad(exec_model *m, ts_err *e);

/* Runs one op of a rank program. Compute ops are mapped by model_op and
 * phase, collectives by group (and codec: only "none" runs here). */
int exec_model_run_op(exec_model *m, const plan_op *op, ts_err *e);

/* Counts NaN/Inf per gradient tensor; on any, fails naming the step and the
 * first tensor. The loss is checked the same way. Synchronizes the stream. */
int exec_model_check_finite(exec_model *m, int step, float *loss_out, ts_err *e);

/* Copies this rank's gradient accumulators to host (nparams floats). */
int exec_model_grads_to_host(exec_model *m, float *out, ts_err *e);
/* This rank's shard of a full reference array (nparams values, local layout). */
void exec_model_shard_of(const exec_model *m, const double *full, double *local);

/* The CUDA stream an op runs on (compute, TP or DP stream). */
cudaStream_t exec_model_op_stream(const exec_model *m, const plan_op *op);
/* Switches to walking plan_build_program() programs (see walker_mode). */
int exec_model_enter_walker_mode(exec_model *m, ts_err *e);
/* The plan's layout features the walker runs (call after entering walker
 * mode): sequence parallelism (needs TP > 1 and TP dividing the tokens) and
 * ZeRO-1 (ignored with DP = 1, as in the plan's program; it keeps only this
 * rank's shards of the master weights and moments, so call it after the
 * weights are loaded and before the first optimizer step). */
int exec_model_set_layout(exec_model *m, int sequence_parallel, int zero1, ts_err *e);
/* ZeRO-1: this rank's shard [*lo, *hi) of group g (empty when not ZeRO-1). */
void exec_model_zero1_shard(const exec_model *m, int g, size_t *lo, size_t *hi);
/* ZeRO-1: all-gathers every group's updated BF16 weights (the step after the last one, with
 * overlap_param_gather: its program gathers before the next forward). */
int exec_model_zero1_gather_all(exec_model *m, ts_err *e);
/* The gradient group of tensor t (its layer; layers: the final norm; layers + 1: the embedding). */
int exec_model_group_of_tensor(const exec_model *m, int t);
/* End of a walked iteration: reduce the DP groups no bucket took, join the streams. */
int exec_model_walker_finish(exec_model *m, ts_err *e);

/* Builds the program of a rank that is its whole pipeline (PP = 1):
 * per micro-batch forward then backward (embedding, layers, loss, with their
 * TP all-reduces), then the DP gradient all-reduce and the optimizer step.
 * The same op vocabulary as plan_build_program(); caller frees *ops. */
int exec_program_build_single_stage(const exec_model *m, plan_op **ops, int *nops, ts_err *e);

#endif
