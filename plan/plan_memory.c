/* plan_memory.c — what one GPU holds: bf16 weights, fp32 gradients (bf16
 * with grad_reduce_in_fp32 false: plan_grad_bytes), the
 * optimizer's fp32 master weights and Adam moments (divided by DP under
 * ZeRO-1, as Megatron-LM's distributed optimizer does: 6 + 12/dp bytes per
 * parameter instead of 18), and the activations its schedule keeps in flight. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

#define WEIGHT_BYTES 2.0    /* bf16 parameters */
#define GIB_BYTES 1073741824.0
#define OPTIMIZER_BYTES 12.0 /* fp32 master weights, Adam m and v */

model_shard plan_shard(const plan *p) {
  model_shard s = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                   .seq = plan_local_seq(p), .ep = p->ep, .etp = p->etp, /* context parallelism: seq / cp */
                   .no_hidden_dropout = !(p->hidden_dropout > 0),
                   .moe_tokens_replicated = p->moe_tokens_replicated};
  return s;
}

double plan_norm_params_per_layer(const plan *p) {
  return 2.0 * (p->model.norm == MODEL_NORM_LAYERNORM ? 2.0 : 1.0) * p->model.hidden;
}

double plan_qk_norm_params_per_layer(const plan *p) {
  return p->model.qk_norm ? 2.0 * model_head_dim(&p->model) : 0.0;
}

bool plan_is_qk_norm(const model_op *o) {
  return o->kind == MODEL_OP_NORM && (!strcmp(o->name, "q_norm") || !strcmp(o->name, "k_norm"));
}

static double sum_params(const model_op *ops, int n) {
  double total = 0.0;
  for (int i = 0; i < n; i++) total += ops[i].params;
  return total;
}

double plan_params_of_stage(const plan *p, int stage) {
  model_shard s = plan_shard(p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  if (n < 0) return -1.0;
  double params = model_is_moe(&p->model) ? plan_moe_layer_params_of_stage(p, stage, ops, n, false)
                                           : sum_params(ops, n) * plan_stage_layers(p, stage);
  if (stage == 0) {
    if ((n = model_embedding_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e)) < 0) return -1.0;
    params += sum_params(ops, n);
  }
  if (stage == p->pp - 1) {
    if ((n = model_output_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e)) < 0) return -1.0;
    params += sum_params(ops, n);
    /* Tied embeddings: with pp > 1 the last stage keeps its own copy of the
     * word embedding for the logits, kept equal by the embedding all-reduce. */
    if (p->model.tied_embeddings && p->pp > 1)
      params += (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
  }
  return params;
}

/* What the schedule keeps from a forward step to its backward, walked over
 * the stage's steps (plan_held_peak): each model chunk's layers (an
 * embedding or loss slot holds none) and, on the chunk that computes the
 * loss, the output layer's (plan_head_held_bytes). Under 1F1B the last
 * stage holds one micro-batch's, under GPipe all of them; interleaved,
 * as many as its schedule runs loss forwards before their backwards. */
/* per_layer: what a layer holds from its forward to its backward under the
 * plan's recompute; plain: what a layer outside recompute_num_layers holds
 * (every activation; used only when the field is set). */
static double held_activations(const plan *p, int stage, double per_layer, double plain, double head) {
  double *held = malloc((size_t)p->vpp * sizeof *held);
  if (!held) return -1.0;
  for (int c = 0; c < p->vpp; c++) {
    const int lpc = plan_vchunk_layers(p, stage, c);
    const int rec = p->recompute_num_layers > 0 && p->recompute_num_layers < lpc ? p->recompute_num_layers : lpc;
    held[c] = per_layer * rec + plain * (lpc - rec);
    if (stage == p->pp - 1 && c == p->vpp - 1) held[c] += head;
  }
  double peak = plan_held_peak(p, stage, held);
  free(held);
  return peak;
}

/* What the output layer keeps of one micro-batch from its forward to its
 * backward, on the chunk that computes the loss: the cross-entropy's fp32
 * softmax, 4 bytes per logit (Megatron-LM saves exp_logits after the fp32
 * upcast, fused or not: megatron/core/fusions/fused_cross_entropy.py and
 * tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy.forward,
 * ctx.save_for_backward), and what the final norm and the logits GEMM save:
 * the norm's 16-bit input (the last layer's output) and its fp32 statistics
 * (rstd; mean and rstd for LayerNorm), and the GEMM's 16-bit input (the norm's
 * output, kept before SP's all-gather: Megatron-LM's linear layers gather it
 * again in their backward): 2 x 2h + 4 (8) bytes per token of the rank, the
 * tokens / tp under SP. */
double plan_head_held_bytes(const plan *p) {
  const double tokens = (double)p->micro_batch * plan_local_seq(p);
  const double stats = p->model.norm == MODEL_NORM_LAYERNORM ? 8.0 : 4.0;
  const double split = p->sequence_parallel && p->tp > 1 ? p->tp : 1.0;
  return 4.0 * tokens * model_vocab_per_gpu(&p->model, p->tp) + (4.0 * p->model.hidden + stats) * tokens / split;
}

/* Activations of one layer. Fused attention (FlashAttention, cuDNN: the
 * default attention_backend) keeps Q, K, V, the output (all in the model's
 * per-layer count already) and the row log-sum-exp in fp32, never the
 * s x s scores: the model's selective-recompute count (which drops the
 * scores) plus 4 bytes per head per token. Unfused attention keeps the
 * softmax output, its dropout mask and the dropout output (5 bytes per score,
 * Megatron-LM's count). Selective recomputation of fused attention recomputes
 * the log-sum-exp too. */
static double layer_activations(const plan *p, const model_shard *s, model_recompute r) {
  /* selective recomputation without core_attn keeps the attention as none does */
  const bool selective = r == MODEL_RECOMPUTE_SELECTIVE;
  model_recompute attn = selective && !plan_recomputes(p, PLAN_RECOMPUTE_CORE_ATTN) ? MODEL_RECOMPUTE_NONE : r;
  double b;
  if (p->attention_backend == PLAN_ATTENTION_UNFUSED || attn != MODEL_RECOMPUTE_NONE) {
    b = model_activation_bytes_per_layer(&p->model, s, attn);
  } else {
    b = model_activation_bytes_per_layer(&p->model, s, MODEL_RECOMPUTE_SELECTIVE);
    if (b >= 0) b += 4.0 * (double)s->micro_batch * s->seq * p->model.heads / s->tp;
  }
  if (b < 0) return -1.0;
  if (p->fp8_recipe != PLAN_FP8_OFF && r != MODEL_RECOMPUTE_FULL) { /* the FP8 GEMMs' saved inputs (plan_fp8.c) */
    model_op ops[MODEL_MAX_LAYER_OPS];
    ts_err e;
    int n = model_layer_ops(&p->model, s, ops, MODEL_MAX_LAYER_OPS, &e);
    if (n < 0) return -1.0;
    b += plan_fp8_activation_delta(p, ops, n);
  }
  /* the other modules (layout.recompute_modules, plan_recompute.c) */
  return selective ? b - plan_recompute_saved_bytes(p, s) : b;
}

/* The gradients alive while one layer's backward runs, beyond what the schedule holds (bytes): the peak
 * of one layer at a time, counted once per stage. PyTorch's autograd engine releases a node's saved
 * tensors as soon as that node has run (torch/csrc/autograd/engine.cpp, evaluate_function:
 * fn.release_variables() unless retain_graph), and a gradient lives until the node that takes it has
 * run, so the peak is the largest of the live gradients less the layer's saved activations already
 * released, walked backward through the MLP, all 16-bit, per token of the rank (T = micro x seq / cp;
 * h_s = h / tp under SP, else h; f_t = ffn / tp; g = 2 for SwiGLU's gate and up, else 1):
 *   fc2 (RowParallelLinear) backward: the layer's output gradient dy (h_s; it also waits in the
 *     residual add's input buffer for the MLP branch's gradient), under SP its all-gather for the
 *     GEMM (h: _ReduceScatterToSequenceParallelRegion's backward, megatron/core/tensor_parallel/
 *     mappings.py), with hidden dropout the bias-dropout-add's masked gradient (h_s), and the GEMM's
 *     output, the activation's gradient (f_t); the weight gradient goes into main_grad
 *     (gradient_accumulation_fusion), already counted; then fc2's saved input (f_t) is released.
 *   the activation's backward (bias_gelu / bias_swiglu, megatron/core/fusions: one fused kernel
 *     writes the gradient of the fc1 output, the gate and up halves concatenated; megatron/core/jit.py's
 *     jit_fuser is torch.compile from PyTorch 2.2, under TorchScript the two halves may exist before
 *     the torch.cat, f_t more, not counted): dy (h_s) + its
 *     input gradient (f_t) + its output (g f_t), less fc2's released input (f_t): h_s + g f_t; then
 *     its saved input, the fc1 output (g f_t), is released and the f_t gradient dies.
 *   fc1 (ColumnParallelLinear) backward: dy (h_s) + the fc1 output's gradient (g f_t) + the GEMM's
 *     input gradient (h), under SP also the re-gathered input for the weight gradient (h) and the
 *     reduce-scattered input gradient (h / tp) (LinearWithGradAccumulationAndAsyncCommunication.
 *     backward, megatron/core/tensor_parallel/layers.py), less the two released (f_t + g f_t).
 * The attention half runs after the MLP's saved tensors (f_t (1 + g) and more) are gone: its
 * gradients (the attention output's h / tp, Q K V's (h + 2 kv) / tp, a re-gathered qkv input under SP)
 * stay below the fc1 phase's, and the fused attention's fp32 dQ accumulator is in overhead_bytes.
 * An MoE layer's experts take the same walk over their rows (local tokens x top_k x etp) and
 * expert_ffn / etp, with the grouped GEMM's input gradient over the rows (h each) before the
 * un-permutation; its shared experts and router are left out (not measured). */
double plan_bwd_transient_bytes(const plan *p) {
  const model_config *m = &p->model;
  const double T = (double)p->micro_batch * plan_local_seq(p), h = m->hidden, tp = p->tp;
  const bool sp = p->sequence_parallel && p->tp > 1;
  const double hs = sp ? h / tp : h, g = m->activation == MODEL_ACT_SWIGLU ? 2.0 : 1.0;
  const double dropout = p->hidden_dropout > 0 ? hs : 0.0;
  const double gathered = sp ? h : 0.0; /* SP's all-gather of dy for fc2 */
  double rows = T, ft = m->ffn_hidden / tp;
  const double in_grad = sp ? 2.0 * h + h / tp : h; /* fc1's input gradient (and SP's gathered input) per token */
  const bool experts = model_is_moe(m) && m->dense_layers < p->layers;
  if (experts) { /* the experts' walk (dense first layers: below) */
    const double etp = p->etp > 0 ? p->etp : p->tp;
    rows = (sp ? T / tp : T) * m->top_k * etp, ft = m->expert_ffn_hidden / etp;
  }
  const double fc2 = T * (hs + dropout + gathered) + rows * ft;
  const double act = T * hs + rows * g * ft;
  const double fc1 = T * hs + (experts ? rows * h : T * in_grad) - rows * ft;
  double peak = 2.0 * fmax(fc2, fmax(act, fc1));
  if (experts && m->dense_layers > 0) { /* a dense first layer's walk, if larger */
    const double dft = m->ffn_hidden / tp;
    const double dense = fmax(T * (hs + dropout + gathered) + T * dft, fmax(T * hs + T * g * dft, T * (hs + in_grad) - T * dft));
    peak = fmax(peak, 2.0 * dense);
  }
  return peak;
}

/* tp_comm_overlap's userbuffers (plan/README.md, "TP communication overlap"): Megatron-LM initialises
 * Transformer Engine's userbuffers once per process with the shape [seq x micro / cp, hidden]
 * (megatron/training/initialize.py, _initialize_tp_communicators, NVIDIA/Megatron-LM at 2fd6e2b), and
 * Transformer Engine's initialize_ub allocates one buffer of that shape, in bf16, for each of its ten
 * overlapped GEMMs (ring exchange: qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; pipeline: proj_fprop,
 * fc2_fprop; bulk: qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad) and repeats the 32 MiB Hopper cuBLAS
 * workspace for its 3 GEMM streams (transformer_engine/pytorch/module/base.py, initialize_ub,
 * _NUM_MAX_UB_STREAMS = 3, NVIDIA/TransformerEngine at 0004dbd): 10 buffers and two more workspaces,
 * shared by all layers. layout.tp_comm_overlap_cfg changes the count (TE at d0067d0, base.py and
 * common/comm_gemm_overlap/comm_gemm_overlap.cpp, CommOverlapP2PBase::initialize): a reduce-scatter run
 * as ring_exchange (proj_fprop, fc2_fprop, or qkv_dgrad / fc1_dgrad when they reduce-scatter) holds
 * 2 tp - 1 chunks of 1/tp of the shape; a qkv_dgrad / fc1_dgrad that is not bulk drops its wgrad's
 * buffer. Under an FP8 recipe (layout.fp8) initialize_ub allocates the all-gather buffers (its
 * layers_all_gather_overlap: qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad, and qkv_dgrad / fc1_dgrad unless
 * they reduce-scatter) as uint8, fp8_buf, 1 byte an element (TE v2.9 / v2.10, module/base.py); the
 * reduce-scatter buffers stay bf16. Not measured here. */
double plan_tpo_buffer_bytes(const plan *p) {
  if (!p->tp_comm_overlap) return 0;
  const double elems = (double)p->micro_batch * plan_local_seq(p) * (double)p->model.hidden;
  double bytes = 0;
  for (int g = 0; g < PLAN_TPO_GEMMS; g++) {
    if ((g == PLAN_TPO_QKV_WGRAD || g == PLAN_TPO_FC1_WGRAD) && plan_tpo_dgrad_scatters(p, g - 1)) continue;
    bool scatters = g == PLAN_TPO_PROJ_FPROP || g == PLAN_TPO_FC2_FPROP || plan_tpo_dgrad_scatters(p, g);
    double n = scatters && plan_tpo_method_of(p, g) == PLAN_TPO_RING_EXCHANGE ? (2.0 * p->tp - 1) / p->tp : 1.0;
    /* TE's fp8_buf: an all-gather buffer is uint8 under an FP8 recipe, a reduce-scatter one (the wgrads'
     * too) stays bf16 */
    bool gathers = !scatters && g != PLAN_TPO_QKV_WGRAD && g != PLAN_TPO_FC1_WGRAD;
    double elem_bytes = p->fp8_recipe != PLAN_FP8_OFF && gathers ? 1.0 : 2.0;
    bytes += n * elems * elem_bytes;
  }
  return bytes + 2.0 * 32.0 * 1048576.0;
}

/* Beyond the tensors: the runtime (PLAN_RUNTIME_BYTES), one NCCL communicator per
 * parallel dimension in use, CP's ring buffers, tp_comm_overlap's userbuffers (above), the compressed
 * collectives' encoded buffers (plan_codec_buffer_bytes), and the fused
 * attention backward's fp32 dQ
 * accumulator and row sums of one layer (FlashAttention-2's dq_accum and
 * softmax_d), held while that layer's backward runs. */
static double overhead_bytes(const plan *p, int stage) {
  double comms = (p->tp > 1) + (p->dp > 1) + (p->pp > 1) + (plan_cp(p) > 1);
  const double codec = plan_codec_buffer_bytes(p, stage); /* the compressed collectives' (plan_memory_codec.c) */
  if (codec < 0) return -1.0;
  double b = PLAN_RUNTIME_BYTES + PLAN_NCCL_COMM_BYTES * comms + plan_cp_buffer_bytes(p) + plan_tpo_buffer_bytes(p) + codec;
  if (p->attention_backend != PLAN_ATTENTION_UNFUSED) {
    double tokens = (double)p->micro_batch * plan_local_seq(p);
    b += 4.0 * tokens * ((double)p->model.heads * model_head_dim(&p->model) + p->model.heads) / p->tp;
  }
  return b;
}

int plan_memory_of_stage(const plan *p, int stage, plan_memory *mem) {
  *mem = (plan_memory){0};
  if (stage < 0 || stage >= p->pp || plan_chunk_layers(p, stage) < 1) return -1;
  double params = plan_params_of_stage(p, stage);
  if (params < 0) return -1;
  mem->weights = WEIGHT_BYTES * params;
  if (p->fp8_recipe != PLAN_FP8_OFF) { /* the FP8 copies of the FP8 GEMMs' weights (plan_fp8.c) */
    model_shard fs = plan_shard(p);
    model_op ops[MODEL_MAX_LAYER_OPS];
    ts_err e;
    int n = model_layer_ops(&p->model, &fs, ops, MODEL_MAX_LAYER_OPS, &e);
    if (n < 0) return -1;
    mem->weights += plan_fp8_weight_bytes_per_param(p) * plan_fp8_gemm_params(p, ops, n) * plan_stage_layers(p, stage);
  }
  /* The gradient buffer the backward accumulates into and DP reduces: fp32
   * main gradients by default (Megatron-LM accumulates bf16 runs in fp32),
   * bf16 with grad_reduce_in_fp32 false. The fp32 copy the optimizer makes of
   * its shard's gradients at the step is not counted: no activations are
   * held then. */
  mem->gradients = plan_grad_bytes(p) * params;
  mem->optimizer = model_is_moe(&p->model) ? OPTIMIZER_BYTES * plan_optimizer_params_of_stage(p, stage)
                                            : OPTIMIZER_BYTES * params / (p->zero1 ? plan_dp_shards(p) : 1);
  plan_zero_memory(p, stage, params, mem); /* ZeRO-2/3 (plan_program_zero.c); refused with experts */
  model_shard s = plan_shard(p);
  double per_layer = layer_activations(p, &s, p->recompute);
  if (per_layer < 0) return -1;
  const double plain = p->recompute_num_layers > 0 ? layer_activations(p, &s, MODEL_RECOMPUTE_NONE) : 0.0;
  if (plain < 0) return -1;
  mem->activations = held_activations(p, stage, per_layer, plain, plan_head_held_bytes(p));
  if (mem->activations < 0) return -1;
  if (p->recompute == MODEL_RECOMPUTE_FULL) /* the one layer being recomputed holds everything */
    mem->activations += layer_activations(p, &s, MODEL_RECOMPUTE_NONE);
  mem->activations += plan_recompute_transient_bytes(p, &s);
  mem->activations += plan_bwd_transient_bytes(p); /* one layer's backward gradients at a time */
  if (stage == p->pp - 1) {
    /* the unfused cross-entropy (cross_entropy_loss_fusion false) casts the
     * 16-bit logits to an fp32 copy (the 4 bytes above, kept as the softmax
     * for the backward) while the 16-bit ones are still held, and makes a
     * 16-bit gradient from the fp32 one in the backward: 2 more bytes per
     * logit of the micro-batch in its loss */
    if (p->ce_unfused) mem->activations += 2.0 * plan_ce_logits(p);
  }
  /* The caching allocator's reserve beyond the live tensors at the peak (alloc_reserve; a PyTorch run's, measured
   * under Megatron-Core in experiments/memory/alloc): a fraction of what churns, the activations. */
  mem->allocator = plan_alloc_reserve(p) * mem->activations;
  mem->overhead = overhead_bytes(p, stage);
  if (mem->overhead < 0) return -1;
  mem->overhead += mem->allocator;
  mem->total = mem->weights + mem->gradients + mem->optimizer + mem->activations + mem->overhead;
  return 0;
}

int plan_memory_per_gpu(const plan *p, plan_memory *m) {
  *m = (plan_memory){0};
  /* Middle stages hold what stage 1 holds with no more in flight (the peak
   * falls with the stage in every schedule), so three stages decide. */
  int stages[3] = {0, 1, p->pp - 1};
  /* Uneven stages: every stage (the middle ones may hold more layers than stage 1's neighbours) */
  const int n = plan_uneven_stages(p) ? p->pp : 3;
  for (int i = 0; i < n; i++) {
    int s = n == 3 ? stages[i] : i;
    if (s >= p->pp) continue;
    plan_memory here;
    if (plan_memory_of_stage(p, s, &here)) return -1;
    if (here.total > m->total) *m = here;
  }
  return 0;
}

double plan_model_flops(const plan *p) {
  model_config m = p->model;
  m.layers = p->layers;
  return model_flops_per_iteration(&m, p->global_batch, p->seq, false);
}
