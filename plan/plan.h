/* plan.h — a training plan (model x cluster x layout x codec) and the ordered
 * program of ops each rank runs.
 *
 * This is the contract between the two halves: the simulator (sim/) and the
 * GPU executor (runtime/) both walk the programs built here, op by op, so a
 * prediction and a measurement differ only in how each op's time is found.
 * Plain C: no CUDA, no SimGrid. */
#ifndef PLAN_H
#define PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "topo.h"
#include "ts_coll.h"
#include "ts_error.h"

typedef enum { PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B } plan_schedule;

/* Which axis varies fastest when ranks are numbered: TP is always innermost
 * (fastest), so a TP group stays inside a node. */
typedef enum { PLAN_ORDER_TP_DP_PP, PLAN_ORDER_TP_PP_DP } plan_order;

/* The codecs of common/ts_coll.h's table. */
typedef enum {
  PLAN_CODEC_NONE = TS_CODEC_NONE,
  PLAN_CODEC_TACO = TS_CODEC_TACO,
  PLAN_CODEC_CAAT = TS_CODEC_CAAT,
  PLAN_CODEC_TACO_CAAT = TS_CODEC_TACO_CAAT
} plan_codec_kind;
typedef enum { PLAN_FP8_E4M3, PLAN_FP8_E5M2 } plan_fp8;

typedef struct {
  plan_codec_kind kind;
  int group;    /* TACO group size G (= Hadamard size): 32, 64, 128, 256, 512 */
  plan_fp8 fp8; /* TACO element format */
  double p;     /* CAAT-Net fraction of hidden channels synchronized, (0, 1] */
  bool group_auto; /* the group came from "group": "auto" (plan_reshape.h: the reshaping's choice) */
} plan_codec;

static inline bool plan_codec_has_taco(plan_codec_kind k) { return (unsigned)k < TS_CODEC_COUNT && ts_codecs[k].taco; }
static inline bool plan_codec_has_caat(plan_codec_kind k) { return (unsigned)k < TS_CODEC_COUNT && ts_codecs[k].caat; }

/* TACO wire bytes for `bytes` of bf16 payload: N fp8 elements + 8 bytes of
 * scales per group of G, where N = bytes / 2. */
double plan_taco_wire_bytes(double bf16_bytes, int group);

/* PLAN_TRAFFIC_EP (added): the expert-parallel token all-to-alls (dispatch and combine, forward and backward). */
/* PLAN_TRAFFIC_CP (added): context parallelism's KV (forward) and KV + dKV (backward) ring exchanges. */
typedef enum { PLAN_TRAFFIC_TP_FWD, PLAN_TRAFFIC_TP_BWD, PLAN_TRAFFIC_PP, PLAN_TRAFFIC_DP, PLAN_TRAFFIC_EP,
               PLAN_TRAFFIC_CP, PLAN_TRAFFIC_COUNT } plan_traffic;

/* Bytes on the wire for a message of `bytes` whose elements are `elem_bytes`
 * wide (2: bf16 activations, 4: fp32 gradients) under codec c: TACO sends one
 * fp8 byte per element plus 8 bytes of scales per group; CAAT-Net is applied
 * by the program builder (it changes which channels travel), not here. */
double plan_codec_wire_bytes(const plan_codec *c, double bytes, int elem_bytes);

/* layout.tp_comm_overlap_cfg (added; plan_program_tpo.c): Megatron-LM's --tp-comm-overlap-cfg YAML,
 * which Megatron-LM hands to Transformer Engine's initialize_ub as ub_cfgs: per overlapped GEMM the
 * method, the SMs its communication kernel holds (num_sm) and the pipeline method's splits (num_splits).
 * 0 in a field (and PLAN_TPO_DEFAULT) = Transformer Engine's default for that GEMM. The order is the
 * names' (plan_tpo_gemm_name). */
typedef enum {
  PLAN_TPO_QKV_FPROP, PLAN_TPO_QKV_DGRAD, PLAN_TPO_QKV_WGRAD, PLAN_TPO_PROJ_FPROP, PLAN_TPO_PROJ_DGRAD,
  PLAN_TPO_FC1_FPROP, PLAN_TPO_FC1_DGRAD, PLAN_TPO_FC1_WGRAD, PLAN_TPO_FC2_FPROP, PLAN_TPO_FC2_DGRAD,
  PLAN_TPO_GEMMS
} plan_tpo_gemm;
typedef enum { PLAN_TPO_DEFAULT, PLAN_TPO_RING_EXCHANGE, PLAN_TPO_PIPELINE, PLAN_TPO_BULK } plan_tpo_method;
typedef struct {
  uint8_t given;  /* the GEMM's key is in the object */
  uint8_t method; /* plan_tpo_method */
  uint8_t set_sm_margin; /* TE's set_sm_margin: 0 TE's default (plan_tpo_sm_margin), 1 false, 2 true */
  int num_sm, num_splits;
} plan_tpo_cfg;

/* The names' order (plan_load.c): fused, unfused, flash, executor. */
typedef enum { PLAN_ATTENTION_FUSED, PLAN_ATTENTION_UNFUSED, PLAN_ATTENTION_FLASH, PLAN_ATTENTION_EXECUTOR } plan_attention_backend;
typedef enum { PLAN_HOST_EXECUTOR, PLAN_HOST_MEGATRON_CORE } plan_host_framework;
/* Its names as plans spell them (plan_load.c). */
extern const char *const plan_host_framework_names[];

typedef struct {
  char path[512];     /* the plan file, as given */
  char name[128];
  model_config model;
  topo_cluster cluster;
  int dp, tp, pp;
  int vpp;            /* virtual stages per pipeline rank (interleaved 1F1B); 1 otherwise */
  bool sequence_parallel;
  plan_order order;
  bool zero1;         /* distributed optimizer: reduce-scatter grads, all-gather params */
  model_recompute recompute;
  int micro_batch;
  long long global_batch;
  int seq;
  int layers;         /* model.layers, or the plan's layers_override */
  plan_schedule schedule;
  plan_codec codec[PLAN_TRAFFIC_COUNT];
  double codec_min_bytes; /* messages smaller than this travel uncompressed */
  double dp_bucket_bytes; /* bytes of gradient (as reduced: plan_grad_bytes per parameter) that close a DP bucket */
  /* layout.tp_overlap_chunks (added; 1 = off): each forward row-parallel GEMM
   * (attn_out, fc2) runs as this many GEMMs over consecutive token rows, each
   * followed by the TP all-reduce of its rows, so chunk i's all-reduce runs
   * on the TP stream beside chunk i+1's GEMM (Megatron-LM's tp-comm-overlap
   * of the row-parallel output). Needs tp >= 2, no sequence parallelism and
   * an uncompressed tp_fwd; micro x seq divisible by it. */
  int tp_overlap_chunks;
  /* "attention_backend" (Megatron-Core's --attention-backend; default fused):
   * which implementation runs attention. fused: Transformer Engine's
   * FusedAttention (cuDNN's flash attention, TE's choice on Hopper); flash:
   * FlashAttention-2; executor: tacosim's own kernel (tacorun execute's).
   * These three never store the s x s scores and are priced from the
   * calibration's table of that implementation ("attention_backends" for
   * fused and flash, "attention_shapes" and the FLOP-keyed tables for the
   * executor's). unfused: as Megatron-LM ran it before flash attention
   * (SC'21): a batched GEMM Q K^T, a fused scale-mask-softmax, dropout on the
   * probabilities, a batched GEMM with V, each through device memory. */
  plan_attention_backend attention_backend;
  /* "host_launch_us", "host_sync_us" (added; 0 = not given): the host's cost per kernel launch or GEMM call
   * and the GPU's gap after a synchronisation, for the simulator's host clock (sim/README.md), when the
   * framework that runs the plan is not this executor (PyTorch's eager launches cost more). Not given: the
   * calibration's "host" section (this executor's, measured). */
  double host_launch_us, host_sync_us;
  /* "host_framework" (added; default "executor"): which code issues the layers' kernels, for the host
   * clock. "executor": this executor's calls (plan_launches.c). "megatron-core": Megatron-Core's own layer
   * code, whose host time per layer and micro-batch (forward, backward; dense and MoE layers) and per
   * collective call the calibration's "framework_host" section gives (sim/README.md, "The host"). */
  plan_host_framework host_framework;
  /* "attention_dropout" (Megatron-LM's --attention-dropout; default 0): the
   * dropout probability on the attention probabilities. Under unfused
   * attention it is a kernel of its own over the s x s scores; the fused
   * kernel applies it in registers (no cost of its own). */
  double attention_dropout;
  /* "hidden_dropout" (Megatron-LM's --hidden-dropout; default 0.1 as there,
   * megatron/training/arguments.py): the dropout probability after the
   * attention and MLP blocks (Megatron-LM's bias-dropout-add). > 0: the two
   * residual ops write a byte mask per element forward and read it backward,
   * and the masks are held as activations; the cost does not depend on the
   * rate. 0: no mask (tacorun execute runs no dropout; its plans say 0). */
  double hidden_dropout;
  /* layout.pp_scatter_gather (added; false = off): Megatron-LM's scatter/gather
   * of pipeline messages (Narayanan et al., SC'21, section 4.1). Without SP
   * every TP rank of a stage holds the whole activation; with it each TP rank
   * sends only its 1/tp slice to its peer (same TP index) of the next stage,
   * and the receiving stage all-gathers the slices on its TP group before the
   * consumer runs; likewise the backward gradients. Needs tp >= 2, pp >= 2 and
   * no sequence parallelism (there the messages are already 1/tp). */
  bool pp_scatter_gather;
  /* layout.grad_reduce_in_fp32 (added; default true, stored inverted so that a
   * zeroed plan keeps today's fp32): false keeps and reduces the gradients in
   * bf16, 2 bytes per parameter instead of 4 (DP buckets, the tied-embedding
   * all-reduce, the norm-gradient all-reduce, the gradient buffer in memory). */
  bool grad_reduce_bf16;
  /* "bias_fusion" (added; default true, stored inverted so that a zeroed plan
   * keeps Megatron-LM's default): true adds the linear and QKV biases inside
   * kernels that run anyway (Megatron-LM's --bias-gelu-fusion and
   * --bias-dropout-fusion, the GEMM's bias epilogue, the bias gradient in the
   * weight-gradient GEMM's epilogue), so they cost nothing of their own;
   * false prices each bias add and bias gradient as a pass of its own, as
   * tacorun execute runs them (runtime/exec/exec_layer.c). */
  bool bias_unfused;
  /* (inference only, plan_infer_forward_plan) the MoE tokens replicated over TP, as serving engines
   * run them (model_shard.moe_tokens_replicated); never set by a training plan */
  bool moe_tokens_replicated;
  /* (inference only) the plan's "moe_kernel" is fused: the experts' forward GEMMs priced as one kernel
   * over the active experts (sim_costs.c, grouped_gemm_us); never set by a training plan */
  bool moe_fused;
  /* (inference only) "quantization": "fp8": plan_fp8_gemm also takes plan_fp8_serving_linear's GEMMs (an MoE
   * model's routed and shared experts, MLA's projections), as the serving engines' FP8 checkpoints hold them;
   * never set by a training plan, whose FP8 keeps them BF16 */
  bool fp8_serving;
  /* (inference only) "quantization": "nvfp4": the GEMMs plan_fp8_gemm takes (fp8_serving is set too) are NVFP4
   * ones: priced as the FP8 GEMM moved to the FP4 peak (sim_costs.c, sim_gemm_fp4_transfer_us), plus the quantize
   * of their BF16 input; their weights PLAN_NVFP4_BYTES_PER_PARAM a parameter. Never set by a training plan. */
  bool fp4_serving;
  /* "cross_entropy_loss_fusion" (added; default true, stored inverted so that a
   * zeroed plan keeps tacosim's one-pass loss kernel): false runs the
   * cross-entropy as Megatron's default (--cross-entropy-loss-fusion not
   * given) does, unfused in fp32: a cast of the logits, max, subtract, exp,
   * sum, divide forward, an index update, a multiply and the cast back
   * backward, each a memory-bound kernel (plan_loss.c lists them and their
   * bytes); it also holds the 16-bit logits beside their fp32 copy during
   * the loss (plan_memory.c). */
  bool ce_unfused;
  /* layout.decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers
   * (added; Megatron-LM's --decoder-first-pipeline-num-layers /
   * --decoder-last-pipeline-num-layers; 0 = unset): the first / last pipeline
   * stage holds this many layers, the other stages share the rest evenly
   * (plan_stages.c). Both 0: layers / pp per stage, as before. */
  int first_stage_layers, last_stage_layers;
  /* layout.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
   * (added; Megatron-LM's flags of those names): the embedding / the loss
   * takes one layer's place in the split, so the layers + the accounted
   * units split evenly into the pp x vpp virtual stages and the first / the
   * last virtual stage holds one layer fewer (plan_stages.c). */
  bool account_embedding, account_loss;
  /* Data-parallel sharding and its overlaps (added; plan_program_zero.c):
   * layout.data_parallel_sharding_strategy (Megatron-LM's
   * --data-parallel-sharding-strategy): 0 no_shard, 1 optim (ZeRO-1, the
   * distributed optimizer: also "zero1": true), 2 optim_grads (ZeRO-2:
   * gradients reduce-scattered every micro-batch, only the shard kept),
   * 3 optim_grads_params (ZeRO-3 / FSDP: parameters too, all-gathered per
   * layer in forward and backward). zero1 == (zero_stage >= 1).
   * layout.overlap_grad_reduce (--overlap-grad-reduce; default true, today's
   * behaviour: buckets reduced beside the last backward; false: all after it).
   * layout.overlap_param_gather (--overlap-param-gather; default false): the
   * distributed optimizer's bucket all-gathers run beside the next forward,
   * each bucket's first forward waits for its own, the next one dispatched
   * then. layout.zero3_prefetch_layers: gathers issued ahead under ZeRO-3. */
  int zero_stage;
  bool overlap_grad_reduce_off; /* stored inverted: a zeroed plan keeps today's overlap */
  bool overlap_param_gather;
  int zero3_prefetch;
  /* layout.tp_comm_overlap (added; Megatron-Core's --tp-comm-overlap; false =
   * off): under sequence parallelism the SP all-gathers and reduce-scatters
   * of each layer run as Transformer Engine's userbuffer overlaps
   * (plan_program_tpo.c): ring-exchange all-gathers in tp steps pipelined
   * with the GEMM pieces that use them, the row-parallel output
   * reduce-scattered in 4 pieces behind the next piece's GEMM, bulk
   * overlaps in the backward; the communication kernels hold SMs the GEMMs
   * beside them lose. */
  bool tp_comm_overlap;
  /* layout.tp_comm_overlap_cfg (above plan_tpo_cfg): given at all, and per GEMM (zeroed: TE's defaults) */
  bool tp_comm_overlap_cfg_given;
  plan_tpo_cfg tpo_cfg[PLAN_TPO_GEMMS];
  /* Added: */
  char description[256];  /* the plan's optional "description" */
  long long vocab_padded; /* model.vocab padded as Megatron-LM pads it (multiple of 128 * tp) */
  /* Mixture of experts (added; plan_moe.c, plan/README.md "Mixture of experts"):
   * layout.ep experts sharded over ep ranks, layout.expert_tp each expert's FFN
   * over etp ranks; the expert layers fold the tp x dp ranks of a stage into
   * etp x ep x edp (Megatron-Core's parallel folding, no CP), edp = tp dp / (etp ep). */
  int ep, etp;
  double capacity_factor; /* layout.capacity_factor: tokens an expert takes at most, x its fair share; 0 = dropless */
  double moe_imbalance;   /* layout.moe_imbalance: the busiest EP rank's routed tokens / the mean (>= 1) */
  /* layout.moe_token_dispatcher_type (Megatron-Core's --moe-token-dispatcher-type): "alltoall" (default:
   * NCCL's all-to-all of every token copy, top_k a token) or "flex" (DeepEP / HybridEP: a token once to
   * each EP rank holding one of its experts, plan_moe_dispatch_copies; when the EP group spans nodes, once
   * to each node over RDMA and on over NVLink inside it, plan_moe_node_copies and plan_moe_nvlink_copies). */
  bool moe_flex;
  /* layout.moe_flex_dispatcher_backend (Megatron-Core's --moe-flex-dispatcher-backend; "flex" only):
   * "deepep" (default; the only flex backend of Megatron-Core 0.13, --moe-enable-deepep) or "hybridep". */
  bool moe_hybridep;
  /* layout.moe_hybridep_num_sms (Megatron-Core's --moe-hybridep-num-sms, default 16 at NVIDIA/Megatron-LM
   * fca1679e24 transformer_config.py:799; "hybridep" only): the SMs of HybridEP's dispatch and combine kernels,
   * which pick the row of their published rates (plan_moe_flex_link_share); 16 or 32, the SM counts measured. */
  int moe_hybridep_num_sms;
  /* layout.moe_pad_expert_input_to_capacity (Megatron-Core's --moe-pad-expert-input-to-capacity, default
   * false; needs capacity_factor, refused with "flex" as Megatron-Core refuses it): each expert's input padded
   * to its capacity, so the all-to-all dispatcher knows its split sizes without the GPU and the host never
   * waits (no host_sync on the forward permute). The padding rows' work is not priced beyond
   * capacity_factor's cap. */
  bool moe_pad_to_capacity;
  /* "enable_experimental" (top level; Megatron-Core's --enable-experimental, default false): with "flex" and
   * "deepep", Megatron-Core converts the received token indices with its fused Triton kernel instead of the
   * PyTorch ops that synchronise the host three times (plan_program_moe.c, plan/README.md). */
  bool enable_experimental;
  /* Context parallelism (added; plan_program_cp.c, plan/README.md "Context
   * parallelism"): layout.context_parallel_size (Megatron-LM's
   * --context-parallel-size; 0 or 1 = off): the sequence of every micro-batch
   * is split over cp ranks (2 cp chunks, rank i holding chunks i and
   * 2 cp - 1 - i, the load balancing of causal masks); each attention passes
   * the KV blocks around the CP ring (cp_comm_type p2p), or all-gathers
   * the KV before it and reduce-scatters the dKV after it (cp_comm_type
   * allgather: cp_allgather). Ranks: tp, then cp, then dp / pp as `order`
   * says (Megatron-Core's tp-cp-ep-dp-pp); gradients are reduced over
   * dp x cp. */
  int cp;
  bool cp_allgather;
  /* layout.recompute_modules (added; Megatron-LM's --recompute-modules under
   * --recompute-granularity selective; plan_recompute.c): PLAN_RECOMPUTE_* bits.
   * recompute "selective" without the field: core_attn alone (tacosim's
   * selective before the field existed); 0 unless recompute is selective. */
  unsigned recompute_modules;
  /* layout.recompute_num_layers (Megatron-LM's --recompute-method block with
   * --recompute-num-layers N, plan_recompute.c): under recompute "full", only
   * the first N layers of each model chunk are recomputed, the others keep
   * every activation; 0 (the default): every layer. */
  int recompute_num_layers;
  /* layout.fp8 (added; plan_fp8.c, plan/README.md "FP8 training"): the recipe by which Transformer Engine
   * runs the linear layers' GEMMs in FP8 (Megatron-LM's --fp8-format with --fp8-recipe); absent or null:
   * BF16. layout.fp8_param_gather (Megatron-LM's --fp8-param-gather): the distributed optimizer keeps and
   * all-gathers the parameters in FP8. Priced by the simulator only; tacorun execute refuses such plans. */
  int fp8_recipe; /* plan_fp8_recipe */
  bool fp8_param_gather;
  /* "alloc_reserve" (added; top level, a fraction in [0, 1); `tacosim plan`, `simulate` and `search`
   * --alloc-reserve): what a caching allocator (PyTorch's, under Megatron-LM) reserves beyond the live
   * tensors at the memory peak, as a fraction of the activations (plan_memory.c, in the overhead;
   * experiments/memory/alloc/README.md). Not given: PLAN_DEFAULT_ALLOC_RESERVE (plan_alloc_reserve), so
   * a plan built in code keeps the default too. */
  double alloc_reserve;
  bool alloc_reserve_given;
} plan;

/* The default of "alloc_reserve": 0, no allocator reserve (tacorun execute allocates each buffer with
 * cudaMalloc and holds none). */
#define PLAN_DEFAULT_ALLOC_RESERVE 0.0
/* The same as --help prints it (a test keeps the two equal). */
#define PLAN_DEFAULT_ALLOC_RESERVE_TEXT "0"

/* The plan's allocator reserve: its "alloc_reserve" where given (or set by --alloc-reserve), else the default. */
static inline double plan_alloc_reserve(const plan *p) {
  return p->alloc_reserve_given ? p->alloc_reserve : PLAN_DEFAULT_ALLOC_RESERVE;
}

/* layout.fp8's values (plan_fp8.c): Transformer Engine's recipes Float8CurrentScaling (Megatron-LM's
 * --fp8-recipe tensorwise), DelayedScaling (delayed) and MXFP8BlockScaling (mxfp8; Blackwell only). */
typedef enum { PLAN_FP8_OFF, PLAN_FP8_TENSORWISE, PLAN_FP8_DELAYED, PLAN_FP8_MXFP8 } plan_fp8_recipe;
extern const char *const plan_fp8_recipe_names[]; /* indexed by plan_fp8_recipe; [0] "bf16" */

enum {
  PLAN_RECOMPUTE_CORE_ATTN = 1u, /* the attention core (Korthikanti et al.'s selective recomputation) */
  PLAN_RECOMPUTE_LAYERNORM = 2u, /* the two norms of a layer: their outputs are not kept */
  PLAN_RECOMPUTE_MOE_ACT = 4u,   /* the routed experts' activation: FC2's input is not kept */
  PLAN_RECOMPUTE_MOE = 8u,       /* the whole MoE block (router to un-permute, its all-to-alls too) */
};

/* The modules a plan recomputes: under selective, the field's, or core_attn
 * alone where none were set (a plan whose recompute is set in code, as the
 * layout search's candidates); 0 otherwise. */
static inline unsigned plan_recompute_set(const plan *p) {
  if (p->recompute != MODEL_RECOMPUTE_SELECTIVE) return 0;
  return p->recompute_modules ? p->recompute_modules : PLAN_RECOMPUTE_CORE_ATTN;
}

/* Whether the plan recomputes `module` (a PLAN_RECOMPUTE_* bit) before its backward. */
static inline bool plan_recomputes(const plan *p, unsigned module) { return (plan_recompute_set(p) & module) != 0; }

/* Whether the layer at index `in_chunk` of its model chunk (0 = the chunk's
 * first) reruns its whole forward before its backward (recompute "full",
 * within recompute_num_layers). */
static inline bool plan_layer_full_recompute(const plan *p, int in_chunk) {
  return p->recompute == MODEL_RECOMPUTE_FULL && (p->recompute_num_layers == 0 || in_chunk < p->recompute_num_layers);
}
/* Note: after loading, p->model.layers == p->layers (layers_override applied),
 * so every model_* function called on p->model sees the layers actually run. */

/* Loads a plan file; the model and cluster it names are looked up in
 * models_dir / topologies_dir (NULL: the compiled-in defaults). Validates every
 * rule (TP divides heads and KV heads, PP <= layers, global batch divisible by
 * micro x DP, DP.TP.PP <= GPUs, memory fits in HBM, codec parameters valid). */
int plan_load(const char *path, const char *models_dir, const char *topologies_dir, plan *p, ts_err *e);
/* What a command line sets over the plan file's fields, before the plan is validated (its memory too). */
typedef struct {
  bool alloc_reserve_set; /* --alloc-reserve F: the plan's "alloc_reserve", over the file's */
  double alloc_reserve;
} plan_load_options;
/* plan_load with o's fields set over the file's (o NULL: as plan_load). */
int plan_load_opts(const char *path, const char *models_dir, const char *topologies_dir, const plan_load_options *o,
                   plan *p, ts_err *e);
/* --alloc-reserve's value: a fraction in [0, 1); else an error naming `cmd` and the option. */
int plan_parse_alloc_reserve(const char *cmd, const char *s, double *out, ts_err *e);
int plan_from_json_text(const char *text, size_t len, const char *what, const char *models_dir,
                        const char *topologies_dir, plan *p, ts_err *e);
int plan_validate(const plan *p, ts_err *e);
/* Sets what the loader sets when a plan file omits it: codec_min_bytes, and
 * dp_bucket_bytes for p's dp and gradient precision (the layout search's plans). */
void plan_set_loader_defaults(plan *p);

/* Bytes per gradient element as kept and reduced: 4 (fp32) or 2 (bf16). */
static inline int plan_grad_bytes(const plan *p) { return p->grad_reduce_bf16 ? 2 : 4; }

/* Context-parallel ranks per micro-batch (1 when off). */
static inline int plan_cp(const plan *p) { return p->cp > 1 ? p->cp : 1; }
/* Tokens of a sequence on one rank (seq / cp). */
static inline int plan_local_seq(const plan *p) { return p->seq / plan_cp(p); }
/* Ranks that hold the same parameters and reduce their gradients (dp x cp;
 * Megatron-Core's data-parallel group with context parallelism): the DP group,
 * the distributed optimizer's shards. */
static inline int plan_dp_shards(const plan *p) { return p->dp * plan_cp(p); }
static inline int plan_world_size(const plan *p) { return p->dp * p->tp * p->pp * plan_cp(p); }
/* (plan_program_cp.c) One KV block of the CP ring: K and V of seq / cp tokens,
 * kv_heads / tp heads, bf16; the ring's receive buffers (4 blocks, 0 at cp 1). */
double plan_cp_kv_bytes(const plan *p);
double plan_cp_buffer_bytes(const plan *p);
/* tp_comm_overlap's userbuffers and extra cuBLAS workspaces per GPU (plan_memory.c; 0 without it). */
double plan_tpo_buffer_bytes(const plan *p);
static inline int plan_micro_batches(const plan *p) {
  return (int)(p->global_batch / ((long long)p->micro_batch * p->dp));
}

/* ---- placement: rank r runs on GPU r of the cluster ---- */
typedef struct { int dp, tp, pp, cp; } plan_coord; /* cp (added) last: {dp, tp, pp} initialisers mean cp 0 */
plan_coord plan_coord_of(const plan *p, int rank);
int plan_rank_of(const plan *p, plan_coord c);

/* PLAN_GROUP_EMBEDDING (added): the first and the last pipeline stage of one
 * (dp, tp) column, which all-reduce the gradients of the tied word embedding
 * (only when pp > 1 and the model ties its embeddings). */
/* PLAN_GROUP_EP, _ETP, _EDP (added): the expert layers' groups (plan_moe.c): the ranks that exchange tokens
 * (all-to-all), that split one expert's FFN, and that hold the same experts (their gradients' reduction). */
/* PLAN_GROUP_CP (added): the ranks that share one micro-batch's sequence (same tp, dp, pp), in ring order;
 * with cp > 1 PLAN_GROUP_DP holds dp x cp ranks (cp fastest). */
/* PLAN_GROUP_EP_RAIL, _EP_NODE (added): the flex dispatcher's two legs when the EP group spans nodes
 * (plan_moe.c, DeepEP's internode kernels): the EP ranks with this rank's place among its node's EP ranks, one
 * per node of the EP group (the RDMA leg), and the EP ranks on this rank's node (the NVLink leg). */
typedef enum { PLAN_GROUP_TP, PLAN_GROUP_DP, PLAN_GROUP_PP, PLAN_GROUP_EMBEDDING, PLAN_GROUP_EP, PLAN_GROUP_ETP,
               PLAN_GROUP_EDP, PLAN_GROUP_CP, PLAN_GROUP_EP_RAIL, PLAN_GROUP_EP_NODE,
               PLAN_GROUP_COUNT } plan_group_kind;
/* Members of rank's group of that kind, in ring order; returns the count
 * (at most cap are written; -1 if rank is out of range). */
int plan_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap);
/* Position of rank inside that group (0 = first member). */
int plan_group_index(const plan *p, int rank, plan_group_kind g);

/* ---- pipeline schedules ----
 * A pipeline rank (stage) runs 2 * micro_batches * vpp steps, each the forward
 * or the backward of one micro-batch through one of its model chunks. Chunk c
 * of stage s is virtual stage v = c * pp + s and holds layers
 * [v * L/(pp*vpp), (v+1) * L/(pp*vpp)). */
typedef struct {
  int32_t micro;
  int16_t chunk;
  int8_t backward; /* 0: forward, 1: backward */
} plan_step;
/* Fills steps (cap >= plan_schedule_length) with stage's order; returns the count or -1. */
int plan_schedule_length(const plan *p);
int plan_pipeline_schedule(const plan *p, int stage, plan_step *steps, int cap);
static inline int plan_layers_per_chunk(const plan *p) { return p->layers / (p->pp * p->vpp); }
/* Uneven stages (plan_stages.c; with even stages these equal the formulas
 * above): layers of a stage, of each of its vpp chunks, the first layer of
 * chunk `chunk` of `stage`, the most any stage holds. */
bool plan_uneven_stages(const plan *p);
int plan_stage_layers(const plan *p, int stage);
int plan_chunk_layers(const plan *p, int stage);
/* Layers of one model chunk (virtual stage) of a stage: plan_chunk_layers
 * except where the embedding or the loss is accounted as a layer (0 allowed). */
int plan_vchunk_layers(const plan *p, int stage, int chunk);
int plan_chunk_first_layer(const plan *p, int stage, int chunk);
int plan_max_stage_layers(const plan *p);
int plan_validate_stages(const plan *p, ts_err *e);
static inline int plan_virtual_stage(const plan *p, int stage, int chunk) { return chunk * p->pp + stage; }
/* Micro-batches (or chunk-micro-batch steps, interleaved) whose activations
 * stage keeps at once: the schedule's in-flight peak. */
int plan_inflight_peak(const plan *p, int stage);
/* The most bytes stage holds at once when each forward step of its chunk c
 * keeps held[c] bytes (c < vpp) until that chunk's backward step of the same
 * micro-batch: the stage's schedule walked step by step. Chunks of unequal
 * size (the embedding or loss accounted as a layer) and what only one chunk
 * keeps (the last stage's logits) are counted where the schedule holds them. */
double plan_held_peak(const plan *p, int stage, const double *held);
/* The forward steps stage runs before its first backward (all of them under GPipe, or when the
 * interleaved schedule's micro-batches equal pp): after them it alternates a forward and a backward,
 * and it ends with as many backwards as it had warm-up forwards (plan_pipeline_schedule). */
int plan_warmup_steps(const plan *p, int stage);
/* Data-parallel sharding: the gradient buckets one micro-batch's backward closes on stage, over all
 * its chunks (plan_program.c's rule: walking each chunk's units backward, a bucket closes once the
 * gradient bytes of its parameters reach dp_bucket_bytes, and at the chunk's end); -1 when the
 * model's ops cannot be listed. */
int plan_zero_stage_buckets(const plan *p, int stage);
/* The same buckets in forward order over the stage's chunks (chunk 0 first): each one's parameters, its
 * layers (the embedding and the head are not layers), its chunk and whether it is its chunk's last. Returns the
 * count, the first cap of them stored in out, or -1. */
typedef struct {
  double params;
  int layers, chunk;
  bool chunk_last;
} plan_zero_bucket;
int plan_zero_stage_bucket_list(const plan *p, int stage, plan_zero_bucket *out, int cap);
/* The same with the units' parameters given (one layer, the embedding, the head as plan_program_zero.c
 * counts them: plan_layer_params, plan_embedding_params, plan_head_params), for callers that have them. */
int plan_zero_bucket_list_of(const plan *p, int stage, double layer, double emb, double head, plan_zero_bucket *out,
                             int cap);

/* ---- programs ---- */
typedef enum { PLAN_OP_COMPUTE, PLAN_OP_COLLECTIVE, PLAN_OP_SEND, PLAN_OP_RECV } plan_op_kind;

/* Streams a rank runs concurrently; ops on one stream run in program order. */
/* PLAN_STREAM_CP (added): the CP ring's KV exchanges, beside the attention that uses them. */
/* PLAN_STREAM_EP (added): the flex dispatcher's RDMA leg across nodes (plan_program_moe.c), beside its NVLink
 * leg on the TP stream, as DeepEP's internode kernel runs the two at once. */
typedef enum { PLAN_STREAM_COMPUTE, PLAN_STREAM_TP, PLAN_STREAM_PP, PLAN_STREAM_DP, PLAN_STREAM_CP, PLAN_STREAM_EP,
               PLAN_STREAM_COUNT } plan_stream;

/* The collectives of common/ts_coll.h's table (send/recv is an op kind of its own). */
typedef enum {
  PLAN_COLL_ALLREDUCE = TS_COLL_ALLREDUCE,
  PLAN_COLL_ALLGATHER = TS_COLL_ALLGATHER,
  PLAN_COLL_REDUCESCATTER = TS_COLL_REDUCESCATTER,
  PLAN_COLL_ALLTOALL = TS_COLL_ALLTOALL
} plan_coll;

typedef enum {
  PLAN_PHASE_FWD,
  PLAN_PHASE_BWD,
  PLAN_PHASE_RECOMPUTE,
  PLAN_PHASE_OPTIMIZER,
} plan_phase;

/* Compute ops that are not one of the layer's model ops. */
enum {
  PLAN_MOP_EMBEDDING = -2,
  PLAN_MOP_LOSS = -3,      /* output GEMM + cross-entropy on the last stage */
  PLAN_MOP_OPTIMIZER = -4, /* AdamW over this rank's parameter shard */
  /* Added: */
  PLAN_MOP_FINAL_NORM = -5,     /* final norm before the logits (last stage) */
  PLAN_MOP_NORM_GRADS = -6,     /* TP all-reduce of norm-weight gradients (SP or CAAT-Net) */
  PLAN_MOP_GRAD_BUCKET = -7,    /* DP reduction of a gradient bucket (tag = bucket index) */
  PLAN_MOP_PARAM_GATHER = -8,   /* ZeRO-1 all-gather of a bucket's updated parameters */
  PLAN_MOP_EMBEDDING_GRADS = -9,/* first/last stage all-reduce of the tied embedding's gradients */
  PLAN_MOP_PP_ACTIVATION = -10, /* PP send/recv of an activation (fwd) or its gradient (bwd) */
  PLAN_MOP_MOE_IMBALANCE = -11, /* (MoE) the wait for the busiest EP rank's expert GEMMs (tag: 0 fwd, 1 bwd) */
  PLAN_MOP_EXPERT_GRADS = -12,  /* (MoE) expert-DP reduction of one layer's expert gradients (tag = layer) */
  PLAN_MOP_EXPERT_GATHER = -13, /* (MoE) ZeRO-1 all-gather of one layer's updated expert parameters */
  PLAN_MOP_MOE_TOKENS = -14,    /* (MoE) dispatch / combine all-to-all or expert-TP gather / scatter of tokens */
  PLAN_MOP_FP8_CAST = -15,      /* (layout.fp8) a quantize to FP8 before a GEMM (tag: plan_fp8_cast_tag) */
  PLAN_MOP_MLA_KV_SCATTER = -16,/* (MLA) kv_b's output copied into the key and value heads (plan_mla.c) */
};
/* What the compute ops outside the layers cover: PLAN_MOP_EMBEDDING = every op
 * of model_embedding_ops(); PLAN_MOP_FINAL_NORM = "final_norm" of
 * model_output_ops(); PLAN_MOP_LOSS = its "logits" GEMM and "loss" (forward:
 * both; backward PLAN_PART_DGRAD: the cross-entropy backward and the logits
 * dgrad; PLAN_PART_WGRAD: the logits wgrad). */

/* Which half of a GEMM's backward a compute op is (added): backward GEMMs are
 * split into dgrad (input gradient) and wgrad (weight gradient) so that the
 * input-gradient all-reduce overlaps the wgrad GEMM, as in Megatron-LM. */
typedef enum { PLAN_PART_WHOLE, PLAN_PART_DGRAD, PLAN_PART_WGRAD } plan_part;

#define PLAN_MAX_DEPS 3

/* Host synchronisations of Megatron-Core's DeepEP path after each forward dispatch (plan_program_moe.c,
 * syncs_after_dispatch): the first routed-expert op after it has host_syncs_before = this ... */
#define PLAN_MOE_DEEPEP_INDEX_SYNCS 3
/* ... and the PyTorch calls it issues after the first of them that no gap covers (the gap after a sync
 * ends with the next call's kernel): mask.sum, repeat_interleave, probs[mask], .bool() */
#define PLAN_MOE_DEEPEP_INDEX_CALLS 4

typedef struct {
  uint8_t kind;     /* plan_op_kind */
  uint8_t stream;   /* plan_stream */
  uint8_t phase;    /* plan_phase */
  uint8_t coll;     /* plan_coll, for collectives */
  uint8_t group;    /* plan_group_kind, for collectives */
  uint8_t traffic;  /* plan_traffic, for communication */
  uint8_t part;     /* plan_part (added): GEMM backward half */
  uint8_t row_chunk, row_chunks; /* (added) a forward row-parallel GEMM split by tp_overlap_chunks, and the TP
                                  * all-reduce after it: this op covers token rows [row_chunk * T / row_chunks,
                                  * (row_chunk + 1) * T / row_chunks) of the T = micro x seq rows; row_chunks
                                  * 0 (or 1): all rows */
  uint8_t elem_bytes; /* comm (added): bytes per element of the payload when it differs from what its traffic
                       * class implies (bf16; fp32 for DP gradients and CAAT-Net's backward channels): 2 on DP
                       * gradient buckets reduced in bf16 (layout.grad_reduce_in_fp32 false); 0 = the class's */
  int16_t model_op; /* index into model_layer_ops() of this plan's shard, or PLAN_MOP_* */
  int32_t layer;    /* global layer index, or -1 */
  int32_t micro;    /* micro-batch index, or -1 */
  int32_t chunk;    /* model chunk (virtual stage) on this rank, 0..vpp-1 */
  int32_t peer;     /* send/recv: the other rank */
  int32_t tag;      /* send/recv: equal on the matching send and recv */
  int32_t dep[PLAN_MAX_DEPS]; /* indices of earlier ops of this program that must finish first, -1 = none */
  /* (added) compute: what the host issues for this op (plan_launches.c, the executor's counts): kernel
   * launches other than GEMMs, the walker's event records around it, cuBLASLt GEMM calls; host_sync 1: the
   * host waits for this op's end before it issues anything more (the dropless router's row counts copied to
   * the host); host_syncs_before n (0-3) and host_calls_before m (0-31): before issuing this op the host
   * waits for the GPU to reach it (its dependencies and the ops before it done), then n sync gaps and m calls
   * of its own whose GPU work the program does not hold (Megatron-Core's DeepEP path converting the received
   * indices, plan_program_moe.c) */
  uint16_t launches : 11, events : 2, host_sync : 1, host_syncs_before : 2;
  uint16_t gemm_launches : 11, host_calls_before : 5;
  double flops;     /* compute: FLOPs on this GPU */
  double bytes;     /* compute: device-memory bytes; comm: payload bytes per rank before the codec */
  double wire_bytes;/* comm: payload bytes per rank after the codec (== bytes when uncompressed) */
  plan_codec codec; /* codec applied to this message (kind NONE when none) */
} plan_op;
/* Sizes of communication ops, nccl-tests style ("size" of the buffer):
 *   all-reduce: the buffer reduced (every rank holds all of it);
 *   all-gather: the gathered output (each rank contributes bytes / n);
 *   reduce-scatter: the input (each rank keeps bytes / n);
 *   send/recv: the message.
 * A ring then moves 2(n-1)/n * wire_bytes per rank for an all-reduce and
 * (n-1)/n * wire_bytes for an all-gather or a reduce-scatter.
 * CAAT-Net ops (codec.kind CAAT or TACO_CAAT): forward all-reduces after the
 * row-parallel GEMMs reduce only the first floor(p*h) channels (bf16);
 * backward input-gradient all-reduces after the column-parallel GEMMs reduce
 * only those channels, in fp32; `bytes` is what plain Megatron-LM would send.
 * Semantics the consumers rely on:
 *   - ops of one stream run in program order, one at a time;
 *   - an op starts when the previous op of its stream and every dep finished;
 *   - the PP ops of every rank are ordered by one global order (the message's
 *     finish time in the ideal schedule, then tag), so even blocking
 *     (rendezvous) send/recv pairs cannot deadlock;
 *   - a collective's members reach it in the same order on the same stream. */

typedef struct {
  int rank;
  int n, cap;
  plan_op *ops;
} plan_program;

/* Builds rank's whole program for one iteration. Free with plan_program_free. */
int plan_build_program(const plan *p, int rank, plan_program *prog, ts_err *e);
/* Limits (plan_limits.c): the ops of one rank's program, estimated before it
 * is built (an upper bound within 2x), and what holding them costs. */
#define PLAN_MAX_OPS_PER_RANK (1 << 25)  /* 3 GiB of ops: refused above (exit 2) */
#define PLAN_SIM_BYTES_PER_OP 140.0      /* simulator state per op (measured: GPT-3 13B, 64 ranks, full mode) */
#define PLAN_MAX_SIM_BYTES (16.0 * 1073741824.0) /* programs + simulator state of the ranks simulated */
double plan_estimate_ops_per_rank(const plan *p);
double plan_estimate_program_bytes(const plan *p, int ranks);
double plan_estimate_sim_bytes(const plan *p, int ranks);
/* Exit-2 errors naming the fields that make programs grow (batch.global, layers_override). */
int plan_check_program_size(const plan *p, const char *file, ts_err *e);
int plan_check_sim_size(const plan *p, int ranks, const char *file, ts_err *e);
void plan_program_free(plan_program *prog);
/* (plan_program_share.c) Whether b is a's program run by rank b->rank: every op
 * equal, except that each send's or receive's peer is moved by b->rank -
 * a->rank (ranks of one pipeline stage, whose messages go to the same
 * position of the neighbouring stage). A consumer may then keep a alone, and
 * read b's peers as a's plus that shift. */
bool plan_program_same_shifted(const plan_program *a, const plan_program *b);

/* (plan_loss.c) The unfused cross-entropy (ce_unfused): the kernels Megatron
 * runs over this rank's tokens x vocab/tp logits in a phase, each with its
 * bytes per logit and per token. plan_ce_kernels returns their count (0 and
 * *k NULL for the fused loss); plan_ce_unfused_bytes their bytes summed. */
typedef struct {
  const char *name;
  double per_logit, per_token;
} plan_ce_kernel;
int plan_ce_kernels(const plan *p, int phase, const plan_ce_kernel **k);
double plan_ce_tokens(const plan *p); /* micro x seq (this CP rank's) */
double plan_ce_logits(const plan *p); /* tokens x vocab / tp */
double plan_ce_kernel_bytes(const plan *p, const plan_ce_kernel *k);
double plan_ce_unfused_bytes(const plan *p, int phase);

/* (plan_launches.c) Sets op's launches, gemm_launches and host_sync from the model op it runs (ops[0..n-1]:
 * model_layer_ops of the plan's shard), as the executor issues it. */
void plan_op_set_launches(const plan *p, const model_op *ops, int n, plan_op *op);

/* "layer3.mb5.fwd.attn_out.allreduce" — for traces and reports. */
void plan_op_name(const plan *p, const plan_op *op, char *buf, size_t cap);
const char *plan_op_kind_name(plan_op_kind k);
const char *plan_stream_name(plan_stream s);
const char *plan_coll_name(plan_coll c);
const char *plan_phase_name(plan_phase ph);
const char *plan_traffic_name(plan_traffic t);
const char *plan_group_name(plan_group_kind g);
const char *plan_codec_kind_name(plan_codec_kind k);
const char *plan_schedule_name(plan_schedule s);
const char *plan_attention_backend_name(plan_attention_backend b);
const char *plan_recompute_name(model_recompute r); /* "none", "selective", "full": the plan field's words */

/* ---- FP8 training (plan_fp8.c) ---- */
/* Whether the layer's model op `o` runs as an FP8 GEMM under p: the linear layers qkv, attn_out, fc1, fc2
 * when layout.fp8 is set (not attention's batched GEMMs, the logits GEMM, the router or the experts'); with
 * p->fp8_serving (an FP8 inference plan) also plan_fp8_serving_linear's. */
bool plan_fp8_gemm(const plan *p, const model_op *o);
/* The GEMMs an FP8 serving checkpoint holds in FP8 beyond plan_fp8_linear's: the routed experts'
 * (expert_fc1, expert_fc2), the shared experts' (shared_fc1, shared_fc2) and MLA's projections (q_a, q_b,
 * kv_a, kv_b); not the router, which the engines keep BF16. */
bool plan_fp8_serving_linear(const model_op *o);
/* NVFP4's bytes an element: a 4-bit E2M1 value and an E4M3 scale per 16 elements (4.5 bits); the FP32 scales per
 * tensor (a few bytes a layer) are left out. */
#define PLAN_NVFP4_BYTES_PER_PARAM (0.5 + 1.0 / 16.0)
/* The same rule without a plan: whether `o` is one of the linear layers FP8 training runs in FP8 (what
 * `tacorun calibrate --only gemm_fp8` times). plan_fp8_gemm is this and layout.fp8 set. */
bool plan_fp8_linear(const model_op *o);
/* ---- multi-head latent attention's layout op (plan_mla.c) ---- */
/* Whether model op `o` is MLA's key/value up-projection ("kv_b"), after whose forward the program has a
 * PLAN_MOP_MLA_KV_SCATTER op (and before whose backward its gather): every MLA training plan. */
bool plan_mla_kv_scatter_after(const plan *p, const model_op *o);
/* Device-memory bytes of that op, forward (scatter) or backward (gather) alike: each of the micro-batch x
 * local-sequence tokens' heads / tp heads of qk_nope + v_head BF16 elements read once and written once. */
double plan_mla_kv_scatter_bytes(const plan *p);
/* A PLAN_MOP_FP8_CAST op's tag: the GEMM's model op, and which tensor it quantizes. */
enum { PLAN_FP8_CAST_INPUT = 0, PLAN_FP8_CAST_GRAD = 1, PLAN_FP8_CAST_WEIGHT = 2 };
static inline int32_t plan_fp8_cast_tag(int model_op, int what) { return model_op * 4 + what; }
static inline int plan_fp8_cast_gemm(int32_t tag) { return tag / 4; }
static inline int plan_fp8_cast_what(int32_t tag) { return tag % 4; }
/* Device-memory bytes of quantizing `elems` BF16 elements to FP8 under p's recipe (plan_fp8.c says which
 * passes each recipe runs). */
double plan_fp8_cast_bytes(const plan *p, double elems);
/* Sequence parallelism: the quantize of the local rows before an FP8 all-gather, and the columnwise copy
 * made from the gathered FP8 rows after it (0 where none is made). */
double plan_fp8_sp_quantize_bytes(const plan *p, double local_elems);
double plan_fp8_sp_transpose_bytes(const plan *p, double gathered_elems);
/* Bytes one GPU holds for FP8 beyond the BF16 model's: per parameter of the FP8 GEMMs (their FP8 copies; negative:
 * fewer, an FP8 parameter with one copy under fp8_param_gather) */
double plan_fp8_weight_bytes_per_param(const plan *p);
/* Parameters of one layer's FP8 GEMMs on one GPU (ops: model_layer_ops of the plan's shard). */
double plan_fp8_gemm_params(const plan *p, const model_op *ops, int n);
/* Weight elements (k x n, no biases: those stay BF16 parameters) of one layer's FP8 GEMMs on one GPU: the
 * parameters Transformer Engine holds as FP8 tensors under fp8_param_gather. */
double plan_fp8_gemm_weights(const plan *p, const model_op *ops, int n);
/* The bytes one layer's kept activations change by under FP8 (negative: fewer), per micro-batch. */
double plan_fp8_activation_delta(const plan *p, const model_op *ops, int n);
/* Bytes an element of a sequence-parallel all-gather feeding model op o carries: 2 (BF16) unless o is an FP8
 * GEMM; then 1 under the per-tensor recipes, 1 + 1/32 under MXFP8 for the input (grad false) and twice that for
 * a row-parallel GEMM's output gradient (grad true), which MXFP8 gathers in both layouts. */
double plan_fp8_sp_gather_elem_bytes(const plan *p, const model_op *o, bool grad);
/* Whether quantizing FP8 GEMM o's gathered tensor (a column-parallel input in the forward, a row-parallel
 * output gradient in the backward) all-reduces its amax over the TP group first: tensorwise with SP, TP > 1. */
#define PLAN_FP8_AMAX_BYTES 4.0 /* the one float reduced */
bool plan_fp8_amax_reduction(const plan *p, const model_op *o);
/* Bytes each parameter of the FP8 GEMMs saves in the distributed optimizer's parameter all-gather (1 with
 * fp8_param_gather under tensorwise / delayed; 0 otherwise: MXFP8 gathers BF16 through the gradient buffer). */
double plan_fp8_param_gather_saved(const plan *p);
/* Refuses a bad layout.fp8 / fp8_param_gather (exit-2 errors naming the field). */
int plan_validate_fp8(const plan *p, ts_err *e);
/* Whether GPU g runs FP8 recipe `recipe`: FP8 tensor cores (fp8_tflops > 0), and for "mxfp8" the MXFP8 capability
 * of its catalogue entry (topo_gpu.mxfp8); else an exit-2 error naming file and field (plan_validate_fp8's
 * layout.fp8, `tacosim search`'s --fp8: the same message). 0 for PLAN_FP8_OFF. */
int plan_fp8_check_gpu(plan_fp8_recipe recipe, const topo_gpu *g, const char *file, const char *field, ts_err *e);

/* Memory per GPU (bytes), the largest over ranks, with its parts. */
typedef struct {
  double weights, gradients, optimizer, activations, total;
  /* What a run holds beyond its tensors (in total): CUDA context and kernel
   * images, cuBLASLt state and workspace, NCCL communicator buffers, the fused
   * attention backward's fp32 workspace (plan_memory.c, measured on H200), and
   * the caching allocator's reserve (`allocator`, part of it). */
  double overhead;
  double allocator; /* plan_alloc_reserve x activations (in overhead) */
} plan_memory;
int plan_memory_per_gpu(const plan *p, plan_memory *m);
/* The same for one pipeline stage (every rank of a stage holds the same). */
int plan_memory_of_stage(const plan *p, int stage, plan_memory *m);
/* What the output layer keeps of one micro-batch from its forward to its
 * backward (bytes, on the chunk that computes the loss): the fp32 softmax of
 * the cross-entropy, the final norm's input and statistics, the logits GEMM's
 * input (plan_memory.c). */
double plan_head_held_bytes(const plan *p);
/* The gradients alive while one layer's backward runs, less the saved activations autograd has already
 * released by then, at their peak (bytes; added once to each stage's activations: plan_memory.c). */
double plan_bwd_transient_bytes(const plan *p);
/* What the compressed collectives hold on a GPU of stage (bytes; in the memory's overhead): per
 * traffic class with TACO (TP, pipeline, DP), the encoded form of its largest message as many times
 * as the collective keeps it (all-reduce 3, reduce-scatter and send/receive 2, all-gather 1), and
 * CAAT-Net's packed shared channels (plan_memory_codec.c); -1 when the model's ops cannot be listed. */
double plan_codec_buffer_bytes(const plan *p, int stage);
/* Parameters held by one GPU of stage (layers of its chunks, plus the
 * embedding on the first stage and the output head on the last). */
double plan_params_of_stage(const plan *p, int stage);

/* tp_comm_overlap (plan_program_tpo.c): Transformer Engine's defaults per method (initialize_ub,
 * get_default_config): num_sm ring exchange 1, pipeline and bulk 16; the pipeline's num_splits 4. */
#define PLAN_TPO_RING_SMS 1
#define PLAN_TPO_PIPELINE_SMS 16
#define PLAN_TPO_BULK_SMS 16
#define PLAN_TPO_PIPELINE_SPLITS 4
#define PLAN_TPO_MAX_SPLITS 64 /* num_splits at most (row_chunk is 8 bits; TE sets no bound) */
const char *plan_tpo_gemm_name(int gemm);     /* "qkv_fprop", ... */
const char *plan_tpo_method_name(int method); /* "ring_exchange", "pipeline", "bulk" ("default" for 0) */
/* The method, num_sm and pieces of GEMM `gemm` as the plan sets them or TE's defaults: ring exchange
 * tp pieces, pipeline num_splits, bulk 1. */
plan_tpo_method plan_tpo_method_of(const plan *p, int gemm);
int plan_tpo_num_sm(const plan *p, int gemm);
int plan_tpo_splits(const plan *p, int gemm);
/* Whether TE tells cuBLAS to leave the kernel's num_sm SMs free (set_sm_margin): the plan's, else TE's
 * default (get_default_config: true but for ring_exchange). */
bool plan_tpo_sm_margin(const plan *p, int gemm);
/* SMs the communication kernel beside GEMM `gemm` holds while it runs: num_sm for pipeline and bulk (TE
 * launches their kernels on num_sm blocks); 0 for ring_exchange, whose chunks the copy engine moves
 * (use_ce true, the only value tacosim accepts) with one-thread signal and wait kernels (TE's
 * userbuffers_send / userbuffers_recv), which hold no SM; 0 for gemm < 0. */
int plan_tpo_held_sms(const plan *p, int gemm);
/* Whether the dgrad of qkv / fc1 (gemm PLAN_TPO_QKV_DGRAD or FC1_DGRAD) reduce-scatters its own output in
 * pieces (a method other than bulk: TE's ub_overlap_rs_dgrad, Megatron-LM's --tp-comm-overlap-rs-dgrad). */
bool plan_tpo_dgrad_scatters(const plan *p, int gemm);
/* SMs the communication kernel beside this GEMM holds (0: none), and which of TE's GEMMs the op is in
 * this phase and part (-1: none; qkv / proj for the attention block, fc1 / fc2 after its first
 * row-parallel op). plan_tpo_comm_sms is 0 without tp_comm_overlap. */
int plan_tpo_comm_sms(const plan *p, int model_op, int phase, int part);
int plan_tpo_comm_gemm(const plan *p, int model_op, int phase, int part); /* -1 without tp_comm_overlap */
int plan_tpo_first_column(const plan *p, int model_op);
/* The same over a layer's ops already built (model_layer_ops of plan_shard(p)), for callers that
 * ask for every op of a layer; these do not look at tp_comm_overlap. */
int plan_tpo_ops_gemm(const plan *p, const model_op *ops, int n, int model_op, int phase, int part);
int plan_tpo_ops_sms(const plan *p, const model_op *ops, int n, int model_op, int phase, int part);
int plan_tpo_ops_first_column(const model_op *ops, int n, int model_op);
/* The userbuffer kernel that runs beside piece `piece` of the `pieces` (0 or 1: a GEMM not split) the
 * program builder splits GEMM op model_op into in this phase and part (plan_program.c): its collective
 * (plan_coll), its TP traffic class, and its bytes as the builder sizes the message (tp_message: *wire the
 * bytes on the wire; both the activation x tokens share of the piece it carries). Pipeline (proj_fprop,
 * fc2_fprop, and qkv_dgrad / fc1_dgrad under ub_overlap_rs_dgrad): piece s >= 1 beside the reduce-scatter
 * of piece s - 1 (1/k of the rows), piece 0 beside nothing; bulk: the dgrad beside the all-gather of the
 * layer input, the wgrad beside the reduce-scatter of the input gradient (the whole activation). Returns 1
 * when one runs there holding SMs (plan_tpo_held_sms > 0) and is uncompressed; 0 when none does: no
 * tp_comm_overlap, a ring exchange (the copy engine, no SM), the first pipeline piece, or a compressed
 * message (its codec kernels wait for the GEMM's SMs, sim_comm.c, so nothing runs beside the GEMM). */
typedef struct {
  int gemm;          /* plan_tpo_gemm of the GEMM op, -1: none */
  int coll;          /* plan_coll of the companion */
  int traffic;       /* PLAN_TRAFFIC_TP_FWD or _BWD */
  double bytes, wire; /* payload and wire bytes as tp_message sizes them */
} plan_tpo_companion;
int plan_tpo_ops_companion(const plan *p, const model_op *ops, int n, int model_op, int phase, int part, int piece,
                           int pieces, plan_tpo_companion *c);
int plan_tpo_comm_companion(const plan *p, int model_op, int phase, int part, int piece, int pieces,
                            plan_tpo_companion *c); /* builds the layer's ops itself */
/* The pieces the program builder splits GEMM op model_op into in this phase and part under tp_comm_overlap
 * (plan_program.c): tp for a ring exchange, the GEMM's splits for a pipeline, 1 otherwise. */
int plan_tpo_ops_pieces(const plan *p, const model_op *ops, int n, int model_op, int phase, int part);
/* A TP message as the program builder sizes it (plan_program.c): caat_rule 1 = forward row-parallel output,
 * 2 = backward input gradient (CAAT-Net's shared channels), 0 = none; TACO compresses what is left if it is
 * at least codec_min_bytes. *codec is the codec the op gets (kind PLAN_CODEC_NONE: uncompressed). */
void plan_tp_message(const plan *p, int traffic, int caat_rule, double bytes, plan_codec *codec, double *wire);
int plan_validate_tpo(const plan *p, ts_err *e);

/* Share s of k (tp_overlap_chunks) of a split op's FLOPs or bytes: the k
 * shares add up to `whole` exactly. */
double plan_row_share(double whole, int s, int k);

/* ---- mixture of experts (plan_moe.c) ---- */
/* tp x dp / (etp x ep): the ranks that hold the same experts. */
int plan_edp(const plan *p);
/* Expert parameters one GPU of stage holds (0 for a dense model). */
double plan_expert_params_of_stage(const plan *p, int stage);
/* Parameters whose optimizer state one GPU of stage keeps: all of them, or
 * under ZeRO-1 the non-expert ones / dp plus the expert ones / edp. */
double plan_optimizer_params_of_stage(const plan *p, int stage);
/* The busiest EP rank's rows / the mean that its expert GEMMs run:
 * moe_imbalance, capped by capacity_factor when tokens are dropped. */
double plan_moe_max_load(const plan *p);
/* Copies of a token that the EP all-to-all carries: top_k (alltoall), or
 * under the flex dispatcher the EP ranks its top_k experts fall on, expected
 * under uniform routing: ep x (1 - C(E - E/ep, k) / C(E, k)). */
double plan_moe_dispatch_copies(const plan *p);
/* The flex dispatcher across nodes (DeepEP's internode "normal" kernels): the nodes the EP group spans and
 * its ranks on each (1 and ep when it is inside one node; -1 when its nodes hold unequal numbers of its
 * ranks, refused by the loader). */
int plan_moe_ep_nodes(const plan *p, int *per_node);
/* Expected distinct remote nodes a token reaches (each gets one RDMA copy, to the rank with the sender's
 * place there): (N - 1) x (1 - C(E - E/N, k) / C(E, k)), N the EP group's nodes; 0 unless flex across nodes. */
double plan_moe_node_copies(const plan *p);
/* Expected NVLink copies of a token inside the nodes it reaches (from the rank its RDMA copy landed on, or
 * from the sender on its own node, to every other rank there holding one of its experts): (ep - N) x
 * (1 - C(E - E/ep, k) / C(E, k)); 0 unless flex across nodes. */
double plan_moe_nvlink_copies(const plan *p);
/* The flex dispatcher's token transfer as its kernels achieve it (plan_moe.c, the published figures and their
 * sources): the share of the link's per-direction rate that the dispatch (combine false) or combine kernel of
 * the plan's backend moves a leg's bytes at, g PLAN_GROUP_EP or PLAN_GROUP_EP_NODE (NVLink) or PLAN_GROUP_EP_RAIL
 * (RDMA); 0 when the plan is not "flex", ep < 2, or g is another group (the NCCL model prices the op). */
double plan_moe_flex_link_share(const plan *p, plan_group_kind g, bool combine);
/* Tag of a flex token all-to-all (plan_op.tag): which kernel moves it. Megatron-Core's fused_a2a.py runs the
 * dispatch kernel for the forward dispatch and the combine's backward, the combine kernel for the forward
 * combine and the dispatch's backward; plan_program_moe.c's dispatch() and combine() build them so. */
#define PLAN_MOE_TAG_DISPATCH 0
#define PLAN_MOE_TAG_COMBINE 1

/* Model FLOPs of one iteration across all GPUs (GEMMs and full-square attention, 3 passes). */
double plan_model_flops(const plan *p);

/* `tacosim plan` summary: per-rank op counts, bytes per traffic class with and
 * without the codec, memory per GPU against HBM. */
int plan_print_summary(const plan *p, FILE *out, ts_err *e);

#endif
