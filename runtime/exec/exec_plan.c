/* exec_plan.c — the executor's view of a plan (exec_run.h): plan_load() reads
 * and validates the file (the simulator's loader, every rule it checks), and
 * this file refuses with "file: field: reason" what the executor itself does
 * not run (context parallelism; mixture-of-experts layouts other than EP 1 on one GPU or EP dividing DP),
 * before any GPU is touched. (CAAT-Net on pipeline or DP messages plan_load refuses itself.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_ep.h"
#include "exec_run.h"

static const char *recompute_name(model_recompute r) {
  return r == MODEL_RECOMPUTE_FULL ? "full" : r == MODEL_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* Mixture-of-experts plans run on one GPU (exec_moe.c) or with EP 2 .. 8
 * dividing DP over the DP ranks (exec_moe_ep.c: token all-to-alls plain or
 * TACO, expert gradients over expert-DP uncompressed, no ZeRO-1); expert TP 1,
 * TP = PP = 1, dropless softmax or DeepSeek-V3's sigmoid routing, no recomputation. */
static int exec_plan_refuse_moe(const plan *p, ts_err *e) {
  const char *path = p->path;
  const int etp = p->etp > 0 ? p->etp : p->tp;
  if (etp > 1)
    return ts_fail(e, path, "layout.expert_tp", "%d: expert tensor parallelism is priced by tacosim simulate; the "
                   "executor runs expert_tp 1 (NOT IMPLEMENTED here)", etp);
  if (p->tp > 1 || p->pp > 1)
    return ts_fail(e, path, "layout", "tp %d, pp %d: the executor runs MoE models with tp 1 and pp 1 (NOT "
                   "IMPLEMENTED here)", p->tp, p->pp);
  const int ep = p->ep > 1 ? p->ep : 1;
  if (ep == 1 && p->dp > 1)
    return ts_fail(e, path, "layout.ep", "1 with dp %d: the executor runs experts over DP only with expert "
                   "parallelism (ep 2 .. %d dividing dp; ep 1 over DP is not run here)", p->dp, EXEC_EP_MAX);
  exec_ep_place pl; /* ep at most EXEC_EP_MAX, dividing dp and the experts */
  if (exec_ep_place_of(path, p->dp, ep, 0, p->model.experts, &pl, e)) return -1;
  if (ep < p->dp && p->codec[PLAN_TRAFFIC_DP].kind != PLAN_CODEC_NONE)
    return ts_fail(e, path, "codec.dp", "with ep %d < dp %d: the executor reduces the expert gradients over "
                   "expert-DP uncompressed only (\"none\"; a compressed expert-DP reduction is not run here)", ep, p->dp);
  if (p->ep > 1 && p->zero1)
    return ts_fail(e, path, "layout.zero1", "ZeRO-1 with expert parallelism: NOT IMPLEMENTED in the executor");
  if (p->ep > 1 && p->codec[PLAN_TRAFFIC_EP].kind != PLAN_CODEC_NONE && p->codec[PLAN_TRAFFIC_EP].kind != PLAN_CODEC_TACO)
    return ts_fail(e, path, "codec.ep", "the executor compresses the token all-to-alls with TACO only (\"none\" or "
                   "\"taco\")");
  if (p->model.router == MODEL_ROUTER_SOFTMAX && (p->model.router_num_groups > 0 ||
                                                    (p->model.router_topk_scaling_factor > 0 &&
                                                     p->model.router_topk_scaling_factor != 1.0)))
    return ts_fail(e, path, "model.router_num_groups", "group-limited or scaled softmax routing: the executor runs "
                   "them with the sigmoid router (DeepSeek-V3) only (NOT IMPLEMENTED here)");
  if (p->model.linear_bias)
    return ts_fail(e, path, "model.linear_bias", "no linear biases with experts in the executor (NOT IMPLEMENTED)");
  if (p->moe_flex)
    return ts_fail(e, path, "layout.moe_token_dispatcher_type",
                   "\"flex\" (DeepEP): the executor dispatches with NCCL's all-to-all (\"alltoall\") only");
  if (p->capacity_factor > 0)
    return ts_fail(e, path, "layout.capacity_factor", "%g: the executor routes dropless only (NOT IMPLEMENTED "
                   "here)", p->capacity_factor);
  if (p->recompute != MODEL_RECOMPUTE_NONE)
    return ts_fail(e, path, "layout.recompute", "MoE layers are not recomputed by the executor (none only; NOT "
                   "IMPLEMENTED here)");
  return 0;
}

/* What the executor refuses of a valid plan (fields the simulator prices and
 * the executor does not run yet: NOT IMPLEMENTED here), with the field named;
 * 0 when it runs it. The one list, read by exec_plan_read and the walker. */
int exec_plan_refuse(const plan *p, ts_err *e) {
  const char *path = p->path;
  if (plan_cp(p) > 1 && plan_codec_has_taco(p->codec[PLAN_TRAFFIC_CP].kind))
    return ts_fail(e, path, "codec.cp.kind",
                   "TACO on the KV ring exchanges of context parallelism is priced by tacosim simulate; the "
                   "executor sends no compressed KV block (NOT IMPLEMENTED here)");
  if (plan_cp(p) > 1)
    return ts_fail(e, path, "layout.context_parallel_size",
                   "%d: context parallelism (the KV ring beside the attention) is priced by tacosim simulate; the "
                   "executor runs cp 1 only: its ring-attention kernels (runtime/ops/cp_attention.cu, forward and "
                   "backward) are checked on one GPU, the 2-rank ring is NOT IMPLEMENTED here", p->cp);
  /* head_dim other than hidden / heads (Qwen3) runs: Q and the output projection's input are heads x head_dim */
  if (p->model.qk_norm && (model_head_dim(&p->model) % 32 || model_head_dim(&p->model) > 256))
    return ts_fail(e, path, "model.head_dim", "%d with qk_norm: the executor's QK-norm kernels take head_dim a "
                   "multiple of 32 up to 256, one warp a head (every zoo model's is 64 or 128; tacorun execute --help)",
                   model_head_dim(&p->model));
  /* multi-head latent attention runs at TP 1 (exec_mla.c); its projections cut over TP need several GPUs to check */
  if (p->model.attention == MODEL_ATTN_MLA && p->tp > 1)
    return ts_fail(e, path, "layout.tp", "%d with %s's multi-head latent attention: the executor runs MLA at tp 1 "
                   "(MLA over TP, checked on several GPUs, is NOT IMPLEMENTED here)", p->tp, p->model.name);
  if (p->model.attention == MODEL_ATTN_MLA && p->model.position != MODEL_POS_ROPE)
    return ts_fail(e, path, "model.position", "%s: multi-head latent attention with learned positions: the executor "
                   "runs MLA with RoPE only (NOT IMPLEMENTED here)", p->model.name);
  if (model_is_moe(&p->model) && exec_plan_refuse_moe(p, e)) return -1;
  if (p->recompute == MODEL_RECOMPUTE_SELECTIVE && plan_recompute_set(p) != PLAN_RECOMPUTE_CORE_ATTN)
    return ts_fail(e, path, "layout.recompute_modules",
                   "modules other than core_attn alone are priced by tacosim simulate; the executor's selective "
                   "recomputation is the attention core (NOT IMPLEMENTED here)");
  if (p->recompute_num_layers > 0)
    return ts_fail(e, path, "layout.recompute_num_layers",
                   "%d: recomputing only some layers is priced by tacosim simulate; the executor recomputes every "
                   "layer or none (not run here)", p->recompute_num_layers);
  if (p->attention_backend == PLAN_ATTENTION_UNFUSED)
    return ts_fail(e, path, "attention_backend",
                   "\"unfused\" (Megatron-LM's pre-flash attention) is priced by tacosim simulate; the executor "
                   "runs the fused kernel only (NOT IMPLEMENTED here)");
  if (p->ce_unfused)
    return ts_fail(e, path, "cross_entropy_loss_fusion",
                   "false (Megatron's unfused fp32 cross-entropy) is priced by tacosim simulate; the executor runs "
                   "its fused loss kernel only (NOT IMPLEMENTED here)");
  if (p->attention_dropout > 0)
    return ts_fail(e, path, "attention_dropout",
                   "%g: the executor runs no dropout (NOT IMPLEMENTED here); 0 only", p->attention_dropout);
  if (p->hidden_dropout > 0)
    return ts_fail(e, path, "hidden_dropout",
                   "%g (the default is Megatron-LM's 0.1): the executor runs no dropout (NOT IMPLEMENTED here); set "
                   "\"hidden_dropout\": 0 in the plan (its prediction then charges no dropout mask either)",
                   p->hidden_dropout);
  /* Uneven stages run as one chunk per stage (exec_walk_program_shape gives each stage its layers);
   * interleaved chunks of uneven stages do not. */
  if ((p->account_embedding || p->account_loss || p->first_stage_layers > 0 || p->last_stage_layers > 0) &&
      p->vpp > 1)
    return ts_fail(e, path,
                   p->first_stage_layers > 0  ? "layout.decoder_first_pipeline_num_layers"
                   : p->last_stage_layers > 0 ? "layout.decoder_last_pipeline_num_layers"
                   : p->account_embedding     ? "layout.account_for_embedding_in_pipeline_split"
                                              : "layout.account_for_loss_in_pipeline_split",
                   "uneven stages with interleaved chunks (vpp %d) are priced by tacosim simulate; the executor runs "
                   "uneven stages with vpp 1 only (NOT IMPLEMENTED here)", p->vpp);
  if (p->zero_stage >= 2)
    return ts_fail(e, path, "layout.data_parallel_sharding_strategy",
                   "\"%s\" (ZeRO-%d) is priced by tacosim simulate; the executor runs no_shard and optim (ZeRO-1) "
                   "only (NOT IMPLEMENTED here)", p->zero_stage == 2 ? "optim_grads" : "optim_grads_params",
                   p->zero_stage);
  /* overlap_param_gather true and overlap_grad_reduce false run: the executor walks the program's
   * all-gathers before the forward and its buckets after the backward (exec_step.c) */
  if (p->cp_allgather)
    return ts_fail(e, path, "layout.cp_comm_type",
                   "\"allgather\" is priced by tacosim simulate; the executor runs the KV ring (\"p2p\") only");
  if (p->fp8_recipe != PLAN_FP8_OFF)
    return ts_fail(e, path, "layout.fp8",
                   "\"%s\": FP8 training is priced by the simulator only; the executor runs BF16",
                   plan_fp8_recipe_names[p->fp8_recipe]);
  if (p->tp_comm_overlap)
    return ts_fail(e, path, "layout.tp_comm_overlap",
                   "true is priced by tacosim simulate; the executor runs the SP collectives whole, with NCCL "
                   "(NOT IMPLEMENTED here)");
  return 0;
}

int exec_plan_read(const char *path, exec_plan_min *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  plan *pl = malloc(sizeof *pl);
  if (!pl) return ts_fail_sys(e, "exec: out of memory");
  /* The zoo folders compiled in (or TACOSIM_MODELS_DIR / TACOSIM_TOPOLOGIES_DIR), else ./models and
   * ./topologies (a copy of the tree elsewhere); the walker (exec_walk.c) loads it the same way. */
  int rc = -1;
  ts_err first;
  if (plan_load(path, NULL, NULL, pl, &first) && plan_load(path, "models", "topologies", pl, e)) {
    /* where the compiled-in zoo exists, its reason is the one to show (the fallback's would only say
     * that ./models lacks the model) */
    if (access(model_zoo_dir(), R_OK) == 0) *e = first;
    goto done;
  }
  if (exec_plan_refuse(pl, e)) goto done;
  snprintf(p->path, sizeof p->path, "%s", path);
  snprintf(p->name, sizeof p->name, "%s", pl->name);
  p->model = pl->model;
  p->dp = pl->dp, p->tp = pl->tp, p->pp = pl->pp, p->vpp = pl->vpp;
  p->ep = model_is_moe(&pl->model) && pl->ep > 1 ? pl->ep : 1;
  p->micro = pl->micro_batch, p->seq = pl->seq, p->global = pl->global_batch;
  p->layers_override = pl->layers != pl->model.layers ? pl->layers : 0;
  p->sequence_parallel = pl->sequence_parallel;
  p->zero1 = pl->zero1;
  p->dp_overlap_changed = pl->overlap_param_gather || pl->overlap_grad_reduce_off;
  p->gpipe = pl->schedule == PLAN_SCHED_GPIPE;
  snprintf(p->recompute, sizeof p->recompute, "%s", recompute_name(pl->recompute));
  p->codec_tp_fwd = pl->codec[PLAN_TRAFFIC_TP_FWD];
  p->codec_tp_bwd = pl->codec[PLAN_TRAFFIC_TP_BWD];
  p->codec_pp = pl->codec[PLAN_TRAFFIC_PP];
  rc = 0;
done:
  free(pl);
  return rc;
}

void exec_plan_config(const exec_plan_min *p, exec_ref_config *c) {
  memset(c, 0, sizeof *c);
  c->vocab = p->model.vocab;
  c->hidden = p->model.hidden;
  c->heads = p->model.heads;
  c->ffn = p->model.ffn_hidden;
  c->layers = p->layers_override > 0 ? p->layers_override : p->model.layers;
  c->seq = p->seq;
  c->batch = p->micro;
  c->act = p->model.activation == MODEL_ACT_SWIGLU ? EXEC_ACT_SWIGLU : EXEC_ACT_GELU;
  c->norm = p->model.norm == MODEL_NORM_RMSNORM ? EXEC_NORM_RMSNORM : EXEC_NORM_LAYERNORM;
  c->norm_eps = p->model.norm_eps > 0 ? p->model.norm_eps : 1e-5;
  c->kv_heads = p->model.kv_heads; /* grouped-query attention when fewer than heads */
  c->vpp = p->vpp;                 /* the executor's pipeline chunks (interleaved 1F1B) */
  c->recompute = !strcmp(p->recompute, "full") ? 2 : !strcmp(p->recompute, "selective") ? 1 : 0;
  /* the layers as the model file publishes them */
  c->rope_theta = p->model.position == MODEL_POS_ROPE ? (p->model.rope_theta > 0 ? p->model.rope_theta : 10000.0) : 0;
  c->rope_factor = p->model.rope_factor; /* Llama 3.1's scaling (0: none) */
  c->rope_low_freq = p->model.rope_low_freq, c->rope_high_freq = p->model.rope_high_freq;
  c->rope_orig_max = p->model.rope_orig_max;
  c->qkv_bias = p->model.qkv_bias;
  c->linear_bias = p->model.linear_bias;
  c->untied = !p->model.tied_embeddings;
  /* Qwen3's attention: its head_dim (Q heads x head_dim wide) and the QK norm */
  c->head_dim = p->model.attention == MODEL_ATTN_GQA ? p->model.head_dim_override : 0;
  c->qk_norm = p->model.qk_norm;
  if (p->model.attention == MODEL_ATTN_MLA) { /* DeepSeek-V3's multi-head latent attention (exec_mla.c) */
    c->q_lora = p->model.q_lora_rank, c->kv_lora = p->model.kv_lora_rank;
    c->qk_nope = p->model.qk_nope_head_dim, c->qk_rope = p->model.qk_rope_head_dim, c->v_head = p->model.v_head_dim;
  }
  /* mixture of experts (exec_moe.c runs them; exec_plan_refuse says where) */
  c->experts = p->model.experts;
  c->top_k = p->model.top_k;
  c->expert_ffn = p->model.expert_ffn_hidden;
  c->shared_ffn = p->model.shared_experts * p->model.expert_ffn_hidden;
  c->dense_layers = p->model.experts > 0 ? p->model.dense_layers : 0;
  if (c->dense_layers > c->layers) c->dense_layers = c->layers; /* layers cut below the dense ones: all dense, as planned */
  /* DeepSeek-V3's router: sigmoid scores, group-limited top-k, scaling, the balancing bias (exec_moe.c) */
  c->router_sigmoid = p->model.experts > 0 && p->model.router == MODEL_ROUTER_SIGMOID;
  c->router_groups = c->router_sigmoid ? p->model.router_num_groups : 0;
  c->router_group_topk = c->router_sigmoid ? p->model.router_group_topk : 0;
  c->router_scale = c->router_sigmoid ? p->model.router_topk_scaling_factor : 0;
  c->router_bias_rate = c->router_sigmoid && p->model.router_expert_bias ? p->model.router_bias_update_rate : 0;
}
