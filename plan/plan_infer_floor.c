/* plan_infer_floor.c — the bytes one decode step of an inference plan must read on one GPU
 * (issue 24's read floor), counted as experiments/infer/floor.py counts them. */
#include "plan_infer.h"

int plan_infer_decode_floor_bytes(const plan_infer *p, double *weight_bytes, double *kv_bytes, ts_err *e) {
  const model_config *m = &p->model;
  if (model_is_moe(m) || m->attention == MODEL_ATTN_MLA)
    return ts_fail(e, p->path, "model", "%s is an MoE or MLA model: the decode read floor is counted for dense models "
                   "only (an MoE step reads only its routed experts' weights)", m->name);
  if (p->quant != PLAN_QUANT_NONE)
    return ts_fail(e, p->path, "quantization", "%s: the decode read floor counts BF16 weights only",
                   plan_infer_quant_name(p->quant));
  const double h = m->hidden, heads = m->heads, kv = m->kv_heads, hd = model_head_dim(m), ffn = m->ffn_hidden;
  const double tp = p->tp, layers = m->layers; /* layers_override applied */
  const double ffn_mats = m->activation == MODEL_ACT_SWIGLU ? 3 : 2;
  const double qkv_out = (heads + 2 * kv) * hd;
  double per_layer = h * qkv_out + heads * hd * h + ffn_mats * h * ffn; /* linear weights */
  if (m->qkv_bias || m->linear_bias) per_layer += qkv_out;
  if (m->linear_bias) per_layer += h + (ffn_mats - 1) * ffn + h; /* attention out, fc1 (gate and up), fc2 */
  const double norm = m->norm == MODEL_NORM_RMSNORM ? h : 2 * h;
  /* two norms a layer and the final one whole on every GPU; the head's vocab x hidden split over TP; the
   * embedding reads only the batch's rows (not counted) */
  *weight_bytes = 2.0 * (layers * (per_layer / tp + 2 * norm) + norm + (double)m->vocab * h / tp);
  const double elem = p->kv == PLAN_KV_FP8 ? 1.0 + 4.0 / hd : 2.0;
  *kv_bytes = 2.0 * layers * (kv / tp) * hd * elem * p->batch * (p->prompt + p->generate / 2.0);
  return 0;
}
