/* sim_inflight.c — the steady state of in-flight (continuous) batching (sim/INFERENCE.md, "In-flight batching").
 *
 * Requests of `prompt` tokens in and `generate` tokens out are always waiting (a throughput benchmark). A request
 * holds one of the engine's max_batch slots for `generate` steps: the step that runs its whole prompt (no chunked
 * prefill) and samples its first token, then generate - 1 decode steps. In the steady state as many requests start
 * as finish each step, r = max_batch / generate, unless the step's token budget binds first: the decode tokens of
 * the sequences in flight and the admitted prompts must fit max_num_tokens, r x (generate - 1) + r x prompt <=
 * max_num_tokens. Every step then carries the same work: r x (generate - 1) decoding sequences at the mean cached
 * length prompt + generate / 2 and r prompts, priced as one step by sim_infer_step_s (the layers at the step's
 * tokens, decode attention, prefill attention, the ends). Output tokens/s = r x generate / step; TPOT = the step;
 * TTFT = the admitting step (the time a request waits to be admitted is the benchmark's, not the engine's). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "sim_inflight.h"

static void add_note(sim_inflight_result *r, const char *text) {
  if (r->n_notes < SIM_INFLIGHT_MAX_NOTES) snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s", text);
}

static int at_least_1(double x) {
  long v = lround(x);
  return v < 1 ? 1 : (int)v;
}

int sim_inflight_predict(const plan_infer *p, const schema_calibration *cal, FILE *warn, sim_inflight_result *r,
                         ts_err *e) {
  memset(r, 0, sizeof *r);
  const plan_infer_inflight *f = &p->inflight;
  if (!f->on || f->max_batch < 1 || f->max_num_tokens < p->prompt)
    return ts_fail(e, p->path, "inflight", "not an in-flight plan with a resolved batch (plan_inflight_resolve)");
  snprintf(r->calibration, sizeof r->calibration, "%s", cal->path);
  r->derived_calibration = cal->derived;
  if (plan_infer_memory_per_gpu(p, &r->memory)) return ts_fail(e, p->path, "layout", "memory cannot be computed");
  const double I = p->prompt, O = p->generate, B = f->max_batch, N = f->max_num_tokens;
  double adm = B / O;
  if (adm * (I + O - 1) > N) adm = N / (I + O - 1), r->token_bound = true;
  r->admitted = adm;
  r->in_flight = adm * O;
  r->decode_seqs = adm * (O - 1);
  r->step_tokens = adm * (I + O - 1);
  r->kv_len = I + O / 2.0;
  sim_infer_step_shape *s = &r->shape;
  s->ctx_seqs = at_least_1(adm);
  s->ctx_len = p->prompt;
  s->ctx_scale = adm / s->ctx_seqs;
  s->dec_seqs = (int)lround(r->decode_seqs);
  s->kv_len = (long long)llround(r->kv_len);
  s->tokens = at_least_1(r->step_tokens);
  s->out_seqs = at_least_1(r->decode_seqs + adm);
  sim_infer_views v;
  if (sim_infer_views_new(p, cal, &v, e)) return -1;
  int rc = sim_infer_step_s(p, &v, s, warn, &r->step, e);
  sim_infer_views_free(&v);
  if (rc) return -1;
  r->step_s = r->step.total_s;
  r->ttft_s = r->tpot_s = r->step_s;
  r->tokens_per_s = adm * O / r->step_s;
  r->tokens_per_s_per_gpu = r->tokens_per_s / ((double)p->tp * p->pp);
  r->requests_per_s = adm / r->step_s;
  char note[256];
  const char *cap = f->max_batch_given ? "the plan's inflight.max_batch" : "trtllm-bench's heuristic";
  const int capv = f->max_batch_given ? f->max_batch_given : f->engine_max_batch;
  if (f->kv_fit_batch < capv)
    snprintf(note, sizeof note, "batch %d: the sequences whose KV cache fits (%s allows %d)", f->max_batch, cap, capv);
  else
    snprintf(note, sizeof note, "batch %d: %s (%d sequences' KV cache would fit)", f->max_batch, cap, f->kv_fit_batch);
  add_note(r, note);
  if (r->token_bound) {
    snprintf(note, sizeof note, "max_num_tokens %d binds: %.1f sequences in flight, not %d", f->max_num_tokens,
             r->in_flight, f->max_batch);
    add_note(r, note);
  }
  add_note(r, "every step eager, kernel by kernel, no engine host time: an engine's CUDA graphs, overlap of its "
              "scheduler with the GPU, and a finite run's ramp-up and drain are not modelled");
  return 0;
}

void sim_inflight_print(const plan_infer *p, const sim_inflight_result *r, FILE *out) {
  const plan_infer_inflight *f = &p->inflight;
  const double gib = 1073741824.0;
  fprintf(out, "in-flight plan %s: %s on %s, tp %d, prompt %d, generate %d, kv %s%s, prefill attention %s\n", p->name,
          p->model.name, p->cluster.name, p->tp, p->prompt, p->generate, plan_kv_precision_name(p->kv),
          p->quant == PLAN_QUANT_FP8 ? ", FP8 weights and GEMMs" : "", plan_prefill_attention_name(p->prefill_attention));
  fprintf(out, "engine: max_batch %d (given %d, heuristic %d, KV fit %d at kv_cache_fraction %.2f, blocks of %d), "
          "max_num_tokens %d (given %d, heuristic %d), no chunked prefill\n", f->max_batch, f->max_batch_given,
          f->engine_max_batch, f->kv_fit_batch, f->kv_fraction, f->tokens_per_block, f->max_num_tokens,
          f->max_num_tokens_given, f->engine_max_num_tokens);
  fprintf(out, "calibration: %s%s\n\n", r->calibration, r->derived_calibration ? " (derived, not measured)" : "");
  fprintf(out, "  steady state: %.1f sequences in flight, %.3f requests admitted a step, %.1f decoding at %.0f "
          "cached tokens, %.0f tokens a step\n", r->in_flight, r->admitted, r->decode_seqs, r->kv_len, r->step_tokens);
  fprintf(out, "  output tokens/s       %10.1f  (%.1f a GPU; %.3f requests/s)\n", r->tokens_per_s,
          r->tokens_per_s_per_gpu, r->requests_per_s);
  fprintf(out, "  time per output token %10.3f ms  (one step)\n", r->tpot_s * 1e3);
  fprintf(out, "  time to first token   %10.3f ms  (the admitting step; queueing not counted)\n", r->ttft_s * 1e3);
  fprintf(out, "  memory per GPU        %10.2f GiB  (weights %.2f, KV cache %.2f, runtime and NCCL %.2f, of %.0f)\n\n",
          r->memory.total / gib, r->memory.weights / gib, r->memory.kv_cache / gib, r->memory.overhead / gib,
          p->cluster.gpu.hbm_gib);
  const sim_infer_step_price *s = &r->step;
  fprintf(out, "  step %10.3f ms: layers %.3f (GEMMs %.3f, other %.3f), decode attention %.3f, prefill attention "
          "%.3f, tp %.3f, embedding/head/sampling %.3f\n", s->total_s * 1e3, s->layers_s * 1e3, s->gemm_s * 1e3,
          (s->layers_s - s->gemm_s) * 1e3, s->decode_attn_s * 1e3, s->prefill_attn_s * 1e3, s->tp_s * 1e3,
          s->ends_s * 1e3);
  fprintf(out, "  priced as: %d tokens, %d decoding over %lld keys, %d prompts of %d (x %.3f), %d sampled\n",
          r->shape.tokens, r->shape.dec_seqs, r->shape.kv_len, r->shape.ctx_seqs, r->shape.ctx_len, r->shape.ctx_scale,
          r->shape.out_seqs);
  for (int i = 0; i < r->n_notes; i++) fprintf(out, "note: %s\n", r->notes[i]);
}

static json_t *result_json(const plan_infer *p, const sim_inflight_result *r) {
  const plan_infer_inflight *f = &p->inflight;
  const sim_infer_step_price *s = &r->step;
  json_t *notes = json_array();
  for (int i = 0; i < r->n_notes; i++) json_array_append_new(notes, json_string(r->notes[i]));
  json_t *o = json_pack(
      "{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:{s:f, s:f, s:f}, s:o}", "schema", 1,
      "source", "simulated", "kind", "inference", "mode", "inflight", "plan", p->name, "calibration", r->calibration,
      "quantization", plan_infer_quant_name(p->quant), "prefill_attention",
      plan_prefill_attention_name(p->prefill_attention), "ttft_s", r->ttft_s, "tpot_s", r->tpot_s, "tokens_per_s",
      r->tokens_per_s, "tokens_per_s_per_gpu", r->tokens_per_s_per_gpu, "requests_per_s", r->requests_per_s,
      "memory_per_gpu_bytes", r->memory.total, "memory", "weights_bytes", r->memory.weights, "kv_cache_bytes",
      r->memory.kv_cache, "overhead_bytes", r->memory.overhead, "notes", notes);
  json_t *in = json_pack(
      "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:b, s:f}", "prompt",
      p->prompt, "generate", p->generate, "max_batch", f->max_batch, "max_batch_given", f->max_batch_given,
      "engine_max_batch", f->engine_max_batch, "kv_fit_batch", f->kv_fit_batch, "max_num_tokens", f->max_num_tokens,
      "engine_max_num_tokens", f->engine_max_num_tokens, "kv_cache_fraction", f->kv_fraction, "tokens_per_block",
      f->tokens_per_block, "chunked_prefill", false, "in_flight", r->in_flight, "admitted_per_step", r->admitted,
      "decode_seqs", r->decode_seqs, "step_tokens", r->step_tokens, "kv_len", r->kv_len, "token_bound",
      r->token_bound, "step_s", r->step_s);
  json_object_set_new(in, "max_num_tokens_given", json_integer(f->max_num_tokens_given));
  json_object_set_new(in, "step", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "total_s", s->total_s, "layers_s",
                                            s->layers_s, "gemm_s", s->gemm_s, "decode_attention_s", s->decode_attn_s,
                                            "prefill_attention_s", s->prefill_attn_s, "tp_exposed_s", s->tp_s,
                                            "ends_s", s->ends_s));
  json_object_set_new(o, "inflight", in);
  json_object_set_new(o, "layout", json_pack("{s:i, s:i}", "tp", p->tp, "pp", p->pp));
  if (r->options[0]) json_object_set_new(o, "options", json_string(r->options));
  return o;
}

int sim_inflight_save_json(const plan_infer *p, const sim_inflight_result *r, const char *path, ts_err *e) {
  json_t *o = result_json(p, r);
  if (!o) return ts_fail_sys(e, "%s: cannot build the result JSON", path);
  int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
  json_decref(o);
  return rc ? ts_fail_sys(e, "%s: cannot write", path) : 0;
}

int sim_inflight_save_csv(const plan_infer *p, const sim_inflight_result *r, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "# tacosim in-flight prediction of %s (calibration %s)\n", p->name, r->calibration);
  if (r->options[0]) fprintf(f, "# options %s\n", r->options);
  fprintf(f, "# plan tp prompt generate max_batch max_num_tokens in_flight admitted_per_step step_s ttft_s tpot_s "
             "tokens_per_s tokens_per_s_per_gpu memory_per_gpu_bytes\n");
  fprintf(f, "%s %d %d %d %d %d %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", p->name, p->tp, p->prompt, p->generate,
          p->inflight.max_batch, p->inflight.max_num_tokens, r->in_flight, r->admitted, r->step_s, r->ttft_s,
          r->tpot_s, r->tokens_per_s, r->tokens_per_s_per_gpu, r->memory.total);
  int bad = ferror(f);
  if (fclose(f) || bad) return ts_fail_sys(e, "%s: cannot write", path);
  return 0;
}
