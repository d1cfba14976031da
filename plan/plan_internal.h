/* plan_internal.h — shared between the files of plan/, not a public API. */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan.h"

/* Default gradient bucket: Megatron-LM's max(40M, 1M * dp) parameters, in
 * fp32 gradients (4 bytes each). */
double plan_default_dp_bucket_bytes(int dp);
/* Default threshold under which messages travel uncompressed: 8 MiB, the
 * threshold the TACO authors measured on their machines. */
#define PLAN_DEFAULT_CODEC_MIN_BYTES (8.0 * 1024 * 1024)

/* Finish times of every (micro, virtual stage) forward and backward step in
 * the ideal pipeline (forward 1, backward 2, zero-cost communication),
 * indexed [micro * V + v] with V = pp * vpp. Used to order PP messages. */
typedef struct {
  int V, m;
  int64_t *fwd_finish, *bwd_finish;
} plan_ideal;
int plan_ideal_build(const plan *p, plan_ideal *t, ts_err *e);
void plan_ideal_free(plan_ideal *t);
int64_t plan_ideal_step_cost(int backward);

/* The sharded layer this plan runs (tp, sequence parallel, micro, seq). */
/* What `tacorun execute` holds on one H200 beyond its own buffers (measured
 * memory in use, cudaMemGetInfo, minus what exec_model_create allocates;
 * experiments/memory/executor_alloc.py over the GPT h4096 plans of validation
 * run 10): 1.09 GiB on one GPU (CUDA context, kernel images, cuBLASLt state),
 * plus its 32 MiB cuBLASLt workspace; 0.28 GiB more with an NCCL communicator
 * over NVLink (TP2 and DP2 alike; through shm or sockets none was seen). The
 * training memory model (plan_memory.c) and the inference one (plan_infer_load.c). */
#define PLAN_RUNTIME_BYTES (1.09 * 1073741824.0 + 32.0 * 1048576.0)
#define PLAN_NCCL_COMM_BYTES (0.28 * 1073741824.0)

model_shard plan_shard(const plan *p);
/* Norm parameters of one layer (replicated across TP). */
double plan_norm_params_per_layer(const plan *p);
/* The QK norm's weights of one layer (2 x head_dim with model qk_norm, else 0), whole on every TP rank. */
double plan_qk_norm_params_per_layer(const plan *p);
/* Whether a layer op is one of the QK norm's (q_norm, k_norm): Megatron-LM's recompute module
 * "layernorm" checkpoints the layer's input_layernorm and pre_mlp_layernorm only, not these. */
bool plan_is_qk_norm(const model_op *o);

/* (MoE, plan_moe.c) Parameters of the layers of stage's chunks on one GPU,
 * each layer by its kind (dense or MoE): all of them, or only the routed
 * experts' (experts_only); ops: model_layer_ops of plan_shard(p). */
double plan_moe_layer_params_of_stage(const plan *p, int stage, const model_op *ops, int n, bool experts_only);
/* The rules of the MoE layout fields (ep, expert_tp, capacity_factor,
 * moe_imbalance, codec.ep) against the model and the rest of the layout. */
int plan_moe_validate(const plan *p, ts_err *e);
/* Members / position of rank in one of the expert groups (EP, ETP, EDP). */
/* Ranks of one leg of the flex dispatcher across nodes at most (nodes of an EP group, or its ranks on one). */
#define PLAN_MAX_EP_LEG 4096
int plan_moe_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap);
int plan_moe_group_index(const plan *p, int rank, plan_group_kind g);

/* layout.moe_imbalance when absent: 1.04, the busiest expert's load over the
 * mean (MaxVio_global = 0.04) that Wang et al. measured with auxiliary-loss-free
 * balancing ("Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts",
 * arXiv 2408.15664, Table 1, the router DeepSeek-V3 uses; the value as recalled,
 * not re-checked against the paper when it was written — plan/README.md says so). */
#define PLAN_DEFAULT_MOE_IMBALANCE 1.04
/* layout.moe_hybridep_num_sms unset: Megatron-Core's default (NVIDIA/Megatron-LM fca1679e24, 2026-03-10,
 * megatron/core/transformer/transformer_config.py:799 moe_hybridep_num_sms: int = 16) */
#define PLAN_DEFAULT_HYBRIDEP_NUM_SMS 16

/* ---- plan files (plan_json.c), shared by the training and inference loaders ---- */
#include <jansson.h>
/* "dir/gpt3-175b.json" -> "gpt3-175b" (the default plan name); "plan" when empty. */
void plan_json_base_name(const char *path, char *out, size_t cap);
/* The plan's "name" (default: the file's base name), "description" (default ""), and the "model" and
 * "cluster" it names (required), in that order. */
#define PLAN_JSON_NAME_LEN 512
int plan_json_names(json_t *root, const char *file, char *name, size_t name_cap, char *desc, size_t desc_cap,
                    char model[PLAN_JSON_NAME_LEN], char cluster[PLAN_JSON_NAME_LEN], ts_err *e);
/* One codec object {kind, group, fp8, p} at `path` (e.g. "codec.tp_fwd"); absent (o NULL): none.
 * Checks the TACO group size, the FP8 format, p in (0, 1], and fields that do not apply. */
int plan_json_codec(json_t *o, const char *file, const char *path, plan_codec *c, ts_err *e);
/* A codec's own rules at `path`: known kind, TACO group size, CAAT-Net p in (0, 1]
 * and, when hidden > 0, at least one synchronized channel. */
int plan_codec_check(const plan_codec *c, int hidden, const char *file, const char *path, ts_err *e);
/* Whether a plan file's root says "kind": "inference". */
bool plan_json_is_inference(json_t *root);

/* ---- data-parallel sharding (plan_program_zero.c) ---- */
/* Reads layout.data_parallel_sharding_strategy, overlap_grad_reduce,
 * overlap_param_gather, zero3_prefetch_layers (after layout.zero1). */
int plan_load_zero_fields(json_t *layout, const char *file, plan *p, ts_err *e);
/* Context parallelism (plan_program_cp.c): layout.context_parallel_size and
 * cp_comm_type, their rules, one KV block (bytes), the ring's receive buffers. */
#define PLAN_CP_MAX 64
int plan_load_cp_fields(json_t *layout, const char *file, plan *p, ts_err *e);
/* layout.fp8, layout.fp8_param_gather (plan_fp8.c). */
int plan_load_fp8_fields(json_t *layout, const char *file, plan *p, ts_err *e);
int plan_validate_cp(const plan *p, ts_err *e);

int plan_validate_zero(const plan *p, ts_err *e);
/* Reads layout.tp_comm_overlap_cfg (plan_program_tpo.c; after layout.tp_comm_overlap); the rules that
 * need the whole plan are plan_validate_tpo's. */
int plan_load_tpo_cfg(json_t *layout, const char *file, plan *p, ts_err *e);

/* layout.recompute_modules (plan_recompute.c): reads the field (after
 * layout.recompute), its rules once the model is known, the activation bytes
 * per layer the modules do not keep, what the one block being recomputed
 * holds meanwhile, and the modules as "a+b" for reports. */
int plan_load_recompute_modules(json_t *layout, const char *file, plan *p, ts_err *e);
int plan_validate_recompute(const plan *p, ts_err *e);
double plan_recompute_saved_bytes(const plan *p, const model_shard *s);
double plan_recompute_transient_bytes(const plan *p, const model_shard *s);
void plan_recompute_modules_name(const plan *p, char *buf, size_t cap);

/* What a model chunk's forward runs, in order ("units": the embedding on the
 * first virtual stage, the layers, the output head on the last), with the
 * parameters of each on this GPU, and the DP bucket (forward order, 0 =
 * first gathered) of each under dp_bucket_bytes, as the backward builds them
 * (plan_program.c: head first, layers last to first, embedding). */
#define PLAN_ZERO_MAX_UNITS 4096
typedef struct {
  int n;                  /* units */
  int first_layer;        /* the layer of unit `emb` (0 or 1) */
  int emb, head;          /* 1 when the chunk has the embedding / the head */
  double params[PLAN_ZERO_MAX_UNITS];
  int bucket[PLAN_ZERO_MAX_UNITS]; /* forward-order bucket of each unit */
  int buckets;
} plan_zero_chunk;
int plan_zero_chunk_units(const plan *p, int stage, int chunk, plan_zero_chunk *z, ts_err *e);
/* Parameters (this GPU's TP shard) of one layer, the embedding, the head as
 * the head's DP bucket counts it (with the tied copy when pp > 1). */
double plan_layer_params(const plan *p);
double plan_embedding_params(const plan *p);
double plan_head_params(const plan *p);
/* ZeRO-2/3: what a GPU of `stage` keeps of its weights and gradients (params: the stage's unsharded). */
void plan_zero_memory(const plan *p, int stage, double params, plan_memory *m);

#endif
