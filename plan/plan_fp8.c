/* plan_fp8.c — FP8 training (layout.fp8, layout.fp8_param_gather): which GEMMs run in FP8, the casts
 * Transformer Engine runs around them, the bytes it keeps, and the rules of the fields.
 *
 * Sources (plan/README.md, "FP8 training"):
 * - Transformer Engine's recipes (transformer_engine.common.recipe, "Common API" of the TE 2.x user guide):
 *   DelayedScaling (the scale from the amax history of earlier iterations, the amax taken by the cast
 *   kernel itself), Float8CurrentScaling (the scale from the tensor's own amax: an amax kernel over the
 *   tensor before the cast, TE's nvte_compute_amax), MXFP8BlockScaling (an E8M0 scale per 32 elements,
 *   Blackwell only). Megatron-LM's --fp8-recipe names them delayed, tensorwise and mxfp8.
 * - Transformer Engine's Linear / LayerNormLinear (transformer_engine/pytorch/module/linear.py): the GEMM
 *   input, the weight and the output gradient are quantized; each is needed in both layouts (rowwise for
 *   one GEMM, columnwise for the other: X for fprop and wgrad, W for fprop and dgrad, dY for dgrad and
 *   wgrad), so the cast writes both (TE's cast-transpose); attention's batched GEMMs (DotProductAttention
 *   without fp8_dpa), the output layer and the router stay BF16.
 * - Megatron-Core's TELinear.forward (megatron/core/extensions/transformer_engine.py) passes
 *   is_first_microbatch to TE, which caches the weight's FP8 copies from the first micro-batch of an
 *   iteration for the rest: the weights are cast once per iteration and model chunk. With
 *   --fp8-param-gather the parameters are FP8 already (cast by the optimizer step, all-gathered in FP8): no
 *   weight cast in the layers. */
#include <string.h>

#include <jansson.h>

#include "plan.h"
#include "plan_internal.h"
#include "ts_json.h"

const char *const plan_fp8_recipe_names[] = {"bf16", "tensorwise", "delayed", "mxfp8", NULL};

bool plan_fp8_linear(const model_op *o) {
  if (o->kind != MODEL_OP_GEMM || o->groups > 1) return false;
  return !strcmp(o->name, "qkv") || !strcmp(o->name, "attn_out") || !strcmp(o->name, "fc1") ||
         !strcmp(o->name, "fc2");
}

bool plan_fp8_serving_linear(const model_op *o) {
  static const char *const names[] = {"expert_fc1", "expert_fc2", "shared_fc1", "shared_fc2", "q_a", "q_b", "kv_a",
                                      "kv_b"};
  if (o->kind != MODEL_OP_GEMM) return false;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(o->name, names[i])) return true;
  return false;
}

bool plan_fp8_gemm(const plan *p, const model_op *o) {
  return p->fp8_recipe != PLAN_FP8_OFF && (plan_fp8_linear(o) || (p->fp8_serving && plan_fp8_serving_linear(o)));
}

/* The FP8 copies a quantized tensor carries: rowwise and columnwise (1 + 1 byte an element), except a
 * per-tensor-scaled one on a GPU whose FP8 GEMMs take any operand layout (topo_gpu.fp8_non_tn_gemm:
 * Blackwell), where TE makes no transposed copy and the dgrad and wgrad GEMMs read the rowwise one (its
 * quantizers' create_tensor: with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()).
 * MXFP8's two copies differ (the scales run along the other dimension): both always. */
static double fp8_copies(const plan *p) {
  return p->fp8_recipe != PLAN_FP8_MXFP8 && p->cluster.gpu.fp8_non_tn_gemm ? 1.0 : 2.0;
}

/* A cast reads the BF16 tensor (2 bytes an element) and writes its FP8 copies (fp8_copies, 1 byte each);
 * current scaling first reads the tensor once more for its amax; MXFP8 also writes one E8M0 scale per 32
 * elements of each copy. */
double plan_fp8_cast_bytes(const plan *p, double elems) {
  double per = 2.0 + fp8_copies(p);
  if (p->fp8_recipe == PLAN_FP8_TENSORWISE) per += 2.0;
  if (p->fp8_recipe == PLAN_FP8_MXFP8) per += 2.0 / 32.0;
  return p->fp8_recipe == PLAN_FP8_OFF ? 0.0 : per * elems;
}

/* The quantize of a sequence-parallel rank's own rows before TE all-gathers them in FP8 (Transformer Engine
 * v2.9 / v2.10, `distributed.py` `_all_gather_fp8`, `module/base.py` `grad_output_preprocess`,
 * `fill_userbuffers_buffer_for_all_gather`, `layernorm_linear.py`): the per-tensor recipes quantize the
 * local rows rowwise only (the quantizer's usage set to rowwise, columnwise off: 2 + 1 bytes an element,
 * plus current scaling's amax pass); MXFP8 writes both usages of the local rows (it gathers each usage it
 * needs, plan_fp8_sp_gather_elem_bytes), as plan_fp8_cast_bytes. */
double plan_fp8_sp_quantize_bytes(const plan *p, double local_elems) {
  if (p->fp8_recipe == PLAN_FP8_OFF) return 0.0;
  if (p->fp8_recipe == PLAN_FP8_MXFP8) return plan_fp8_cast_bytes(p, local_elems);
  return (2.0 + 1.0 + (p->fp8_recipe == PLAN_FP8_TENSORWISE ? 2.0 : 0.0)) * local_elems;
}

/* The columnwise copy of a tensor gathered in FP8 rowwise: where the GEMMs need one (fp8_copies 2, a
 * per-tensor recipe on Hopper) TE makes it from the gathered FP8 data (`_create_transpose`, through
 * update_usage(columnwise_usage=True) before the wgrad): read 1 byte, write 1 byte an element of the
 * gathered rows. None on Blackwell (the GEMMs read the rowwise copy) nor under MXFP8 (both usages
 * gathered). */
double plan_fp8_sp_transpose_bytes(const plan *p, double gathered_elems) {
  if (p->fp8_recipe == PLAN_FP8_OFF || p->fp8_recipe == PLAN_FP8_MXFP8 || fp8_copies(p) < 2.0) return 0.0;
  return 2.0 * gathered_elems;
}

/* The weights' FP8 copies TE caches for the iteration: fp8_copies bytes a parameter (plus the MXFP8 scales).
 * With fp8_param_gather the parameter itself is the FP8 rowwise copy (1 byte instead of BF16's 2), so only a
 * columnwise copy is more: 2 - 2 = 0 net with two copies, 1 - 2 = -1 with one. */
double plan_fp8_weight_bytes_per_param(const plan *p) {
  if (p->fp8_recipe == PLAN_FP8_OFF) return 0.0;
  double scales = p->fp8_recipe == PLAN_FP8_MXFP8 ? 2.0 / 32.0 : 0.0;
  return fp8_copies(p) - (p->fp8_param_gather ? 2.0 : 0.0) + scales;
}

/* Bytes an element of a sequence-parallel all-gather that feeds FP8 GEMM o carries (2: BF16, any other
 * gather). Transformer Engine v2.9 / v2.10 quantize the local rows first and gather the FP8 data
 * (`transformer_engine/pytorch/distributed.py`, `gather_along_first_dim`; over NCCL and over Userbuffers,
 * whose all-gather buffers are FP8 under an FP8 recipe, `module/base.py` `initialize_ub`,
 * `fill_userbuffers_buffer_for_all_gather`): the per-tensor recipes gather the rowwise data only, 1 byte, the
 * scale is one float every rank holds (`_all_gather_fp8`; the transpose Hopper needs is made after the
 * gather). MXFP8 gathers each usage it needs with its E8M0 scales, 1 + 1/32 bytes a usage
 * (`_all_gather_mxfp8`): the column-parallel input one usage (the forward's rowwise, the backward's re-gather
 * columnwise, `layernorm_linear.py`), the row-parallel output gradient both (the dgrad's rowwise and the
 * wgrad's columnwise; over Userbuffers as two gathers, `linear.py` backward). */
double plan_fp8_sp_gather_elem_bytes(const plan *p, const model_op *o, bool grad) {
  if (!plan_fp8_gemm(p, o)) return 2.0;
  if (p->fp8_recipe != PLAN_FP8_MXFP8) return 1.0;
  return (grad ? 2.0 : 1.0) * (1.0 + 1.0 / 32.0);
}

/* Transformer Engine v2.9 / v2.10 give current scaling's quantizers whose data is gathered under SP an amax
 * all-reduce over the TP group (`layernorm_linear.py` / `linear.py`
 * `_customize_quantizers_float8_current_scaling`: the column-parallel input, the row-parallel output gradient,
 * `with_amax_reduction`), one float reduced (MAX) between the amax kernel and the cast, the stream waiting for
 * it (`csrc/quantizer.cpp`, `Float8CurrentScalingQuantizer::quantize_impl`: `allreduce(...)->wait()`). Delayed
 * scaling takes its scale from the history, MXFP8 from each block: neither reduces per quantize. */
bool plan_fp8_amax_reduction(const plan *p, const model_op *o) {
  return p->fp8_recipe == PLAN_FP8_TENSORWISE && p->sequence_parallel && p->tp > 1 && plan_fp8_gemm(p, o);
}

/* Bytes a parameter of the FP8 GEMMs saves in the distributed optimizer's parameter all-gather: with
 * fp8_param_gather under a per-tensor recipe the parameter is TE's Float8Tensor and Megatron-Core gathers its
 * uint8 data (`distributed_data_parallel.py` `_allocate_buffers_for_parameters`: param_dtype torch.uint8 for
 * is_float8tensor), 1 byte instead of 2; MXFP8 parameters go through the BF16 gradient buffer
 * (reuse_grad_buf_for_mxfp8_param_ag), 2 bytes as without FP8. */
double plan_fp8_param_gather_saved(const plan *p) {
  return p->fp8_param_gather && p->fp8_recipe != PLAN_FP8_OFF && p->fp8_recipe != PLAN_FP8_MXFP8 ? 1.0 : 0.0;
}

int plan_load_fp8_fields(json_t *layout, const char *file, plan *p, ts_err *e) {
  json_t *v = json_object_get(layout, "fp8");
  int recipe = PLAN_FP8_OFF;
  if (v && !json_is_null(v)) {
    if (!json_is_string(v) || !strcmp(json_string_value(v), "bf16"))
      return ts_fail(e, file, "layout.fp8", "must be null (BF16) or one of \"tensorwise\", \"delayed\", \"mxfp8\"");
    if (tsj_enum(layout, "fp8", plan_fp8_recipe_names, &recipe, file, "layout", e)) return -1;
  }
  p->fp8_recipe = recipe;
  return tsj_bool_opt(layout, "fp8_param_gather", false, &p->fp8_param_gather, file, "layout", e);
}

/* FP8 needs FP8 tensor cores (fp8_tflops > 0); MXFP8 block scales need the tensor cores of Blackwell, not
 * Hopper's or Ada's: the catalogue entry's "mxfp8" (topologies/gpus, with its source). */
int plan_fp8_check_gpu(plan_fp8_recipe recipe, const topo_gpu *g, const char *file, const char *field, ts_err *e) {
  if (recipe == PLAN_FP8_OFF) return 0;
  if (!(g->fp8_tflops > 0))
    return ts_fail(e, file, field, "\"%s\": the %s has no FP8 tensor cores (its catalogue entry's fp8_tflops is 0)",
                   plan_fp8_recipe_names[recipe], g->name);
  if (recipe == PLAN_FP8_MXFP8 && !g->mxfp8)
    return ts_fail(e, file, field, "\"mxfp8\" needs a GPU whose tensor cores take MXFP8 block scales (Blackwell: "
                   "B200, GB200); the %s has none (its catalogue entry's mxfp8 is false): use \"tensorwise\" or "
                   "\"delayed\"", g->name);
  return 0;
}

int plan_validate_fp8(const plan *p, ts_err *e) {
  const char *f = p->path;
  const topo_gpu *g = &p->cluster.gpu;
  if (p->fp8_recipe == PLAN_FP8_OFF) {
    if (p->fp8_param_gather)
      return ts_fail(e, f, "layout.fp8_param_gather", "true needs layout.fp8 (FP8 parameters of FP8 GEMMs)");
    return 0;
  }
  if (plan_fp8_check_gpu(p->fp8_recipe, g, f, "layout.fp8", e)) return -1;
  if (p->fp8_param_gather && !p->zero1)
    return ts_fail(e, f, "layout.fp8_param_gather", "true needs the distributed optimizer (zero1), whose "
                   "parameter all-gather it makes FP8");
  return 0;
}

double plan_fp8_gemm_params(const plan *p, const model_op *ops, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    if (plan_fp8_gemm(p, &ops[i])) s += ops[i].params;
  return s;
}

double plan_fp8_gemm_weights(const plan *p, const model_op *ops, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    if (plan_fp8_gemm(p, &ops[i])) s += (double)ops[i].k * (double)ops[i].n;
  return s;
}

/* What FP8 changes in the activations a layer keeps for its backward (bytes; the BF16 count is the model's,
 * Korthikanti et al.'s). TE saves each FP8 GEMM's input quantized (the columnwise copy the wgrad reads):
 * the norm outputs before qkv and fc1 (LayerNormLinear's ln_out, 1/tp of the rows under sequence
 * parallelism, as the BF16 count keeps them) and fc2's input are kept in FP8 instead of BF16, one byte an
 * element less; attn_out's input, the attention's output, is also kept in BF16 by the attention for its own
 * backward, so its FP8 copy is one byte an element more. Only without full recompute (which keeps the layer
 * input alone). */
double plan_fp8_activation_delta(const plan *p, const model_op *ops, int n) {
  double d = 0.0;
  for (int i = 0; i < n; i++) {
    const model_op *o = &ops[i];
    if (!plan_fp8_gemm(p, o)) continue;
    double elems = (double)o->m * (double)o->k;
    if (o->parallel == MODEL_PAR_COLUMN && p->sequence_parallel) elems /= p->tp;
    d += strcmp(o->name, "attn_out") == 0 ? elems : -elems;
  }
  return d;
}
