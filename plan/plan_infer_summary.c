/* plan_infer_summary.c — what `tacosim plan INFER_PLAN.json` prints. */
#include "plan_infer.h"

static void print_allreduce(const plan_infer *p, FILE *out, const char *what, double tokens) {
  double bytes = 2.0 * tokens * p->model.hidden;
  double wire = plan_infer_wire_bytes(&p->codec, bytes, p->model.hidden, p->codec_min_bytes);
  fprintf(out, "  %-8s %2d x %d layers all-reduces of %12.0f B (%9.0f tokens), %12.0f B on the wire with %s\n", what,
          2, p->model.layers, bytes, tokens, wire, plan_codec_kind_name(p->codec.kind));
}

/* attention_dp: no all-reduce; around each MoE layer's experts an all-gather of the group's tokens (hidden state,
 * FP8 under quantization fp8, with top_k int32 ids and FP32 weights) and a reduce-scatter of their BF16 outputs. */
static void print_exchange(const plan_infer *p, FILE *out, const char *what, double tokens) {
  const model_config *m = &p->model;
  const double ag = tokens * ((double)m->hidden * (p->quant == PLAN_QUANT_FP8 ? 1.0 : 2.0) + m->top_k * 8.0);
  fprintf(out, "  %-8s %d MoE layers: all-gather of %12.0f B and reduce-scatter of %12.0f B (%9.0f tokens of the group)\n",
          what, m->layers - m->dense_layers, ag, tokens * 2.0 * m->hidden, tokens);
}

/* The decode step's read floor (plan_infer_decode_floor_bytes) and its time at the cluster GPU's HBM rate. */
static void print_decode_floor(const plan_infer *p, FILE *out) {
  double w, kv;
  ts_err fe;
  if (plan_infer_decode_floor_bytes(p, &w, &kv, &fe)) {
    fprintf(out, "  decode read floor: not counted (dense models only)\n");
    return;
  }
  fprintf(out, "  decode read floor per GPU: %.0f B weights + %.0f B KV cache a step (at prompt + generate / 2 "
          "positions), %.3f ms at the GPU's %.0f GB/s\n", w, kv,
          p->cluster.gpu.hbm_gbps > 0 ? (w + kv) / (p->cluster.gpu.hbm_gbps * 1e9) * 1e3 : 0.0,
          p->cluster.gpu.hbm_gbps);
}

int plan_infer_print_summary(const plan_infer *p, FILE *out, ts_err *e) {
  plan_infer_memory mem;
  if (plan_infer_memory_per_gpu(p, &mem)) return ts_fail(e, p->path, "layout", "memory cannot be computed");
  const double gib = 1073741824.0;
  fprintf(out, "inference plan %s%s%s\n", p->name, p->description[0] ? ": " : "", p->description);
  fprintf(out, "  model %s (%d layers), cluster %s, tp %d pp %d (%d GPUs)\n", p->model.name, p->model.layers,
          p->cluster.name, p->tp, p->pp, p->tp * p->pp);
  fprintf(out, "  batch %d, prompt %d, generate %d, KV cache %s\n", p->batch, p->prompt, p->generate,
          plan_kv_precision_name(p->kv));
  if (p->inflight.on) /* the batch is the engine's (plan_inflight.c); the lines below size one static batch of it */
    fprintf(out, "  in flight: at most %d sequences (given %d, trtllm-bench's heuristic %d, KV cache fits %d) and %d tokens "
            "a step (given %d, heuristic %d); the all-reduces below are of one static batch of that size\n",
            p->inflight.max_batch, p->inflight.max_batch_given, p->inflight.engine_max_batch, p->inflight.kv_fit_batch,
            p->inflight.max_num_tokens, p->inflight.max_num_tokens_given, p->inflight.engine_max_num_tokens);
  fprintf(out, "  memory per GPU %.2f GiB of %.0f: weights %.2f, KV cache %.2f, activations %.2f%s, runtime and NCCL "
          "%.2f\n", mem.total / gib, p->cluster.gpu.hbm_gib, mem.weights / gib, mem.kv_cache / gib,
          mem.activations / gib,
          p->prefill_attention == PLAN_PREFILL_ATTN_EXECUTOR ? " (the executor's buffers)"
                                                             : " (an engine's workspace: not modelled)",
          mem.overhead / gib);
  print_decode_floor(p, out);
  if (p->attention_dp) {
    fprintf(out, "  attention_dp: each GPU attends over its own %d sequences with the whole attention; routed experts "
            "%d-way expert parallel x %d-way within (moe_tp)\n", plan_infer_rank_batch(p), p->ep, plan_infer_moe_tp(p));
    print_exchange(p, out, "prefill", (double)p->batch * p->prompt);
    print_exchange(p, out, "decode", p->batch);
    return 0;
  }
  print_allreduce(p, out, "prefill", (double)p->batch * p->prompt);
  print_allreduce(p, out, "decode", p->batch);
  fprintf(out, "  codec policy: %s\n",
          p->codec_auto ? "auto (plain NCCL where the calibration says the codec is slower)" : "forced");
  return 0;
}
