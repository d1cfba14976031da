/* plan_infer_floor.c — the bytes one decode step of an inference plan must read on one GPU
 * (issue 24's read floor), counted as experiments/infer/floor.py counts them. */
#include "plan_infer.h"

int plan_infer_decode_floor_bytes(const plan_infer *p, double *weight_bytes, double *kv_bytes, ts_err *e) {
  const model_config *m = &p->model;
  if (model_is_moe(m) || m->attention == MODEL_ATTN_MLA)
    return ts_fail(e, p->path, "model", "%s is an MoE or MLA model: the decode read floor is counted for dense models "
                   "only (an MoE step reads only its routed experts' weights)", m->name);
  const double h = m->hidden, heads = m->heads, kv = m->kv_heads, hd = model_head_dim(m), ffn = m->ffn_hidden;
  const double tp = p->tp, layers = m->layers; /* layers_override applied */
  const double ffn_mats = m->activation == MODEL_ACT_SWIGLU ? 3 : 2;
  const double qkv_out = (heads + 2 * kv) * hd;
  const double linear = h * qkv_out + heads * hd * h + ffn_mats * h * ffn; /* qkv, attention out, fc1, fc2 */
  double bias = 0;
  if (m->qkv_bias || m->linear_bias) bias += qkv_out;
  if (m->linear_bias) bias += h + (ffn_mats - 1) * ffn + h; /* attention out, fc1 (gate and up), fc2 */
  const double norm = m->norm == MODEL_NORM_RMSNORM ? h : 2 * h;
  /* the linear layers' weights at the plan's quantization (plan_fp8_linear's layers: FP8 1 byte, NVFP4
   * PLAN_NVFP4_BYTES_PER_PARAM; the per-tensor scales not counted), the rest BF16: biases, two norms a layer and
   * the final one whole on every GPU, the head's vocab x hidden split over TP; the embedding reads only the
   * batch's rows (not counted) */
  const double lin_b = p->quant == PLAN_QUANT_FP8     ? 1.0
                       : p->quant == PLAN_QUANT_NVFP4 ? PLAN_NVFP4_BYTES_PER_PARAM
                                                      : 2.0;
  *weight_bytes = lin_b * layers * linear / tp + 2.0 * (layers * (bias / tp + 2 * norm) + norm + (double)m->vocab * h / tp);
  const double elem = p->kv == PLAN_KV_FP8 ? 1.0 + 4.0 / hd : 2.0;
  *kv_bytes = 2.0 * layers * (kv / tp) * hd * elem * p->batch * (p->prompt + p->generate / 2.0);
  return 0;
}
