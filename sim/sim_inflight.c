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
#include <stdlib.h>
#include <string.h>

#include "sim_inflight.h"

/* Under layout.attention_dp the group's tp GPUs each run their own sequences (plan_infer_inflight's max_batch and
 * max_num_tokens are a GPU's, as TensorRT-LLM's are each attention-DP rank's) and wait for each other at every MoE
 * layer's exchange: a step takes as long as its slowest GPU's share. The new requests of a step are spread evenly
 * (TensorRT-LLM assigns each to the rank with the fewest active requests), so of n the slowest GPU takes
 * ceil(n / tp); the decoding sequences likewise. Without attention_dp one GPU's share is the whole group's. */
static int gpus_of(const plan_infer *p) { return p->attention_dp ? p->tp : 1; }
static long long share_of(long long n, int gpus) { return gpus > 1 ? (n + gpus - 1) / gpus : n; }

static void add_note(sim_inflight_result *r, const char *text) {
  if (r->n_notes < SIM_INFLIGHT_MAX_NOTES) snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s", text);
}

/* The finite run (sim_inflight_result.run): cohorts of requests by the step that admitted them, in a ring of
 * `generate` slots (a cohort admitted at step s decodes at steps s + 1 .. s + generate - 1 over prompt + j keys at
 * step s + j, and leaves after the last). */
static int finite_run(const plan_infer *p, const sim_infer_views *v, FILE *warn, sim_inflight_result *r, ts_err *e) {
  const plan_infer_inflight *f = &p->inflight;
  const int O = p->generate, I = p->prompt;
  long long *cnt = calloc((size_t)O, sizeof *cnt);
  double *first = calloc((size_t)O, sizeof *first);
  int rc = -1;
  if (!cnt || !first) {
    ts_fail_sys(e, "out of memory");
    goto out;
  }
  long long queue = f->requests, done = 0;
  double t = 0, ttft_sum = 0, tpot_sum = 0, flight_sum = 0;
  for (long long step = 0; done < f->requests; step++) {
    long long dec = 0;
    double kv_sum = 0;
    for (int j = 1; j < O && j <= step; j++) {
      const long long c = cnt[(step - j) % O];
      dec += c, kv_sum += (double)c * (I + j);
    }
    const int g = gpus_of(p);
    long long k = (long long)g * f->max_batch - dec, by_tokens = (f->max_num_tokens - dec) / I;
    if (g > 1) by_tokens = g * ((f->max_num_tokens - share_of(dec, g)) / I); /* the slowest GPU's budget */
    if (k > by_tokens) k = by_tokens;
    if (k > queue) k = queue;
    if (k < 0) k = 0;
    if (dec == 0 && k == 0) {
      ts_fail_sim(e, "%s: the run stalls at step %lld (nothing decodes, no prompt admitted)", p->path, step);
      goto out;
    }
    const long long dg = share_of(dec, g), kg = share_of(k, g); /* the slowest GPU's share */
    sim_infer_step_shape sh = {.tokens = (int)(dg + kg * I), .dec_seqs = (int)dg,
                               .kv_len = dec ? llround(kv_sum / dec) : 0, .ctx_seqs = (int)kg, .ctx_len = I,
                               .ctx_scale = 1.0, .out_seqs = (int)(dg + kg), .group_tokens = dec + k * I};
    sim_infer_step_price pr;
    if (sim_infer_step_s(p, v, &sh, warn, &pr, e)) goto out;
    t += pr.total_s;
    queue -= k;
    flight_sum += (double)(dec + k);
    ttft_sum += (double)k * t;
    const int slot = (int)(step % O);
    cnt[slot] = k, first[slot] = t; /* the cohort admitted at step - O finished at step - 1 */
    const long long last = step - (O - 1); /* the cohort whose last token this step made */
    if (last >= 0) {
      const int ls = (int)(last % O);
      if (O > 1) tpot_sum += (double)cnt[ls] * (t - first[ls]) / (O - 1);
      done += cnt[ls];
    }
    r->run_steps = (int)(step + 1);
  }
  r->run = true;
  r->run_s = t;
  r->run_tokens_per_s = (double)f->requests * O / t;
  r->run_ttft_mean_s = ttft_sum / f->requests;
  r->run_tpot_mean_s = O > 1 ? tpot_sum / f->requests : 0;
  r->run_in_flight_mean = flight_sum / r->run_steps;
  rc = 0;
out:
  free(first);
  free(cnt);
  return rc;
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
  const int g = gpus_of(p); /* attention_dp: B and N are a GPU's; the group admits g times as many */
  double adm = B / O;
  if (adm * (I + O - 1) > N) adm = N / (I + O - 1), r->token_bound = true;
  const int dec = (int)lround(adm * (O - 1)); /* a GPU's decoding sequences */
  adm *= g;
  r->admitted = adm;
  r->in_flight = adm * O;
  r->decode_seqs = adm * (O - 1);
  r->step_tokens = adm * (I + O - 1);
  r->kv_len = I + O / 2.0;
  r->k = (int)floor(adm);
  r->phi = adm - r->k;
  sim_infer_views v;
  if (sim_infer_views_new(p, cal, &v, e)) return -1;
  int rc = 0;
  for (int i = 0; i < 2 && !rc; i++) {
    sim_infer_step_shape *s = &r->shape[i];
    const int prompts = r->k + i;
    if (i == 1 && r->phi <= 0) { /* every step admits k */
      *s = r->shape[0], r->price[1] = r->price[0];
      break;
    }
    const int mine = (int)share_of(prompts, g); /* the slowest GPU's prompts */
    s->ctx_seqs = mine, s->ctx_len = p->prompt, s->ctx_scale = 1.0;
    s->dec_seqs = dec, s->kv_len = (long long)llround(r->kv_len);
    s->tokens = dec + mine * p->prompt, s->out_seqs = dec + mine;
    s->group_tokens = (long long)g * dec + (long long)prompts * p->prompt;
    if (s->tokens < 1) s->tokens = s->out_seqs = 1; /* not reached: a step decodes or admits */
    rc = sim_infer_step_s(p, &v, s, warn, &r->price[i], e);
  }
  if (!rc && f->requests > 0) rc = finite_run(p, &v, NULL, r, e);
  sim_infer_views_free(&v);
  if (rc) return -1;
  const double w0 = 1.0 - r->phi, w1 = r->phi;
  const sim_infer_step_price *a = &r->price[0], *b = &r->price[1];
  r->step = (sim_infer_step_price){w0 * a->layers_s + w1 * b->layers_s, w0 * a->gemm_s + w1 * b->gemm_s,
                                   w0 * a->decode_attn_s + w1 * b->decode_attn_s,
                                   w0 * a->prefill_attn_s + w1 * b->prefill_attn_s, w0 * a->tp_s + w1 * b->tp_s,
                                   w0 * a->ends_s + w1 * b->ends_s, w0 * a->total_s + w1 * b->total_s,
                                   w0 * a->experts_s + w1 * b->experts_s, w0 * a->exchange_s + w1 * b->exchange_s};
  r->step_s = r->step.total_s;
  r->tpot_s = r->step_s;
  r->ttft_s = r->phi > 0 ? b->total_s : a->total_s;
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
  if (g > 1) {
    snprintf(note, sizeof note, "attention_dp: the batch and max_num_tokens are each of the %d GPUs'; the group holds up "
             "to %d sequences", g, g * f->max_batch);
    add_note(r, note);
  }
  if (r->token_bound) {
    snprintf(note, sizeof note, "max_num_tokens %d binds: %.1f sequences in flight, not %d", f->max_num_tokens,
             r->in_flight, g * f->max_batch); /* attention_dp: the group's, of g GPUs' max_batch each */
    add_note(r, note);
  }
  char pqh[64]; /* "decode_attention": "per-query-head" on a GQA model: what priced it (sim_infer_pqh_table) */
  if (p->decode_attention == PLAN_DECODE_ATTN_PER_QUERY_HEAD && p->model.attention != MODEL_ATTN_MLA &&
      p->model.heads != p->model.kv_heads) {
    if (sim_infer_pqh_table(cal, p, pqh, sizeof pqh))
      snprintf(note, sizeof note, "decode attention per query head: the measured \"%s\" table, by the unique KV bytes",
               pqh);
    else
      snprintf(note, sizeof note, "decode attention per query head: an upper bound (%s%s%s): the decode attention "
               "table at the MHA shape, %d times the KV bytes", pqh[0] ? "no \"" : "head dim not 128",
               pqh[0] ? pqh : "", pqh[0] ? "\" table" : "", p->model.heads / p->model.kv_heads);
    add_note(r, note);
  }
  add_note(r, f->requests > 0
                  ? "every step eager, kernel by kernel, no engine host time: an engine's CUDA graphs and the overlap of "
                    "its scheduler with the GPU are not modelled"
                  : "every step eager, kernel by kernel, no engine host time: an engine's CUDA graphs, overlap of its "
                    "scheduler with the GPU, and a finite run's ramp-up and drain (inflight.requests) are not modelled");
  return 0;
}

void sim_inflight_print(const plan_infer *p, const sim_inflight_result *r, FILE *out) {
  const plan_infer_inflight *f = &p->inflight;
  const double gib = 1073741824.0;
  fprintf(out, "in-flight plan %s: %s on %s, tp %d, prompt %d, generate %d, kv %s%s, prefill attention %s, decode "
          "attention %s\n", p->name, p->model.name, p->cluster.name, p->tp, p->prompt, p->generate,
          plan_kv_precision_name(p->kv),
          p->quant == PLAN_QUANT_FP8 ? ", FP8 weights and GEMMs" : p->quant == PLAN_QUANT_NVFP4 ? ", NVFP4 weights and GEMMs" : "",
          plan_prefill_attention_name(p->prefill_attention), plan_decode_attention_name(p->decode_attention));
  fprintf(out, "engine: max_batch %d (given %d, heuristic %d, KV fit %d at kv_cache_fraction %.2f, blocks of %d), "
          "max_num_tokens %d (given %d, heuristic %d), no chunked prefill\n", f->max_batch, f->max_batch_given,
          f->engine_max_batch, f->kv_fit_batch, f->kv_fraction, f->tokens_per_block, f->max_num_tokens,
          f->max_num_tokens_given, f->engine_max_num_tokens);
  fprintf(out, "engine memory before the KV cache (a GPU): profiling forward of %d tokens %.2f GiB (MoE buffers for %d "
          "tokens), CUDA graphs up to batch %d %.2f GiB; kv_cache_fraction of the %.2f GiB left\n", f->max_num_tokens,
          f->profile_peak_bytes / gib, f->moe_tokens, f->cuda_graph_batch, f->cuda_graph_bytes / gib,
          f->kv_free_bytes / gib);
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
  if (p->attention_dp)
    fprintf(out, "  attention_dp: %d GPUs, each its own sequences (max_batch and max_num_tokens a GPU's); experts %d-way "
            "expert parallel x %d-way within: routed experts' GEMMs %.3f ms, exchange (all-gather + "
            "reduce-scatter) %.3f ms = the tp part; the step shapes below are the slowest GPU's\n", p->tp, p->ep,
            plan_infer_moe_tp(p), s->experts_s * 1e3, s->exchange_s * 1e3);
  for (int i = 0; i < 2; i++)
    fprintf(out, "  %4.1f%% of steps: %d tokens, %d decoding over %lld keys, %d prompts of %d, %d sampled: %.3f ms\n",
            100.0 * (i ? r->phi : 1.0 - r->phi), r->shape[i].tokens, r->shape[i].dec_seqs, r->shape[i].kv_len,
            r->shape[i].ctx_seqs, r->shape[i].ctx_len, r->shape[i].out_seqs, r->price[i].total_s * 1e3);
  if (r->run)
    fprintf(out, "\n  finite run of %d requests (all queued at the start): %d steps, %.3f s, %.1f output tokens/s (%.1f a GPU), "
            "mean TTFT %.3f s (queueing included), mean TPOT %.3f ms, %.1f sequences a step on average\n",
            f->requests, r->run_steps, r->run_s, r->run_tokens_per_s, r->run_tokens_per_s / ((double)p->tp * p->pp),
            r->run_ttft_mean_s, r->run_tpot_mean_s * 1e3, r->run_in_flight_mean);
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
  json_object_set_new(o, "decode_attention", json_string(plan_decode_attention_name(p->decode_attention)));
  json_t *in = json_pack(
      "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:b, s:f}", "prompt",
      p->prompt, "generate", p->generate, "max_batch", f->max_batch, "max_batch_given", f->max_batch_given,
      "engine_max_batch", f->engine_max_batch, "kv_fit_batch", f->kv_fit_batch, "max_num_tokens", f->max_num_tokens,
      "engine_max_num_tokens", f->engine_max_num_tokens, "kv_cache_fraction", f->kv_fraction, "tokens_per_block",
      f->tokens_per_block, "chunked_prefill", false, "in_flight", r->in_flight, "admitted_per_step", r->admitted,
      "decode_seqs", r->decode_seqs, "step_tokens", r->step_tokens, "kv_len", r->kv_len, "token_bound",
      r->token_bound, "step_s", r->step_s);
  json_object_set_new(in, "max_num_tokens_given", json_integer(f->max_num_tokens_given));
  json_object_set_new(in, "engine_memory",
                      json_pack("{s:i, s:f, s:i, s:i, s:f, s:i, s:i, s:f}", "profile_tokens", f->max_num_tokens,
                                "profile_peak_bytes", f->profile_peak_bytes, "moe_tokens", f->moe_tokens,
                                "cuda_graph_max_batch", f->cuda_graph_max_batch, "cuda_graph_bytes", f->cuda_graph_bytes,
                                "cuda_graph_batch", f->cuda_graph_batch, "moe_max_num_tokens_given",
                                f->moe_max_num_tokens, "kv_free_bytes", f->kv_free_bytes));
  json_object_set_new(in, "prompts_per_step", json_pack("{s:i, s:f}", "k", r->k, "share_k_plus_1", r->phi));
  json_object_set_new(in, "step_s_by_prompts", json_pack("[f, f]", r->price[0].total_s, r->price[1].total_s));
  json_object_set_new(in, "step", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "total_s", s->total_s, "layers_s",
                                            s->layers_s, "gemm_s", s->gemm_s, "decode_attention_s", s->decode_attn_s,
                                            "prefill_attention_s", s->prefill_attn_s, "tp_exposed_s", s->tp_s,
                                            "ends_s", s->ends_s));
  if (r->run)
    json_object_set_new(in, "run", json_pack("{s:i, s:i, s:f, s:f, s:f, s:f, s:f}", "requests", f->requests, "steps",
                                             r->run_steps, "total_s", r->run_s, "tokens_per_s", r->run_tokens_per_s,
                                             "ttft_mean_s", r->run_ttft_mean_s, "tpot_mean_s", r->run_tpot_mean_s,
                                             "in_flight_mean", r->run_in_flight_mean));
  json_object_set_new(o, "inflight", in);
  json_object_set_new(o, "layout", json_pack("{s:i, s:i}", "tp", p->tp, "pp", p->pp));
  if (p->attention_dp) { /* only then, so that the other plans' JSON stays as it was */
    json_object_set_new(json_object_get(o, "layout"), "ep", json_integer(p->ep));
    json_object_set_new(json_object_get(o, "layout"), "attention_dp", json_true());
    json_object_set_new(in, "attention_dp", json_pack("{s:i, s:i, s:i, s:f, s:f}", "gpus", p->tp, "max_batch_per_gpu",
                                                      f->max_batch, "moe_tp", plan_infer_moe_tp(p), "experts_s",
                                                      s->experts_s, "exchange_s", s->exchange_s));
  }
  /* the result schema's headline fields (schema/result.h), so that `tacosim compare` reads it: in flight the
   * "iteration" is one mean engine step (the TPOT), split as the step's price is */
  json_object_set_new(o, "iteration_time_s", json_real(r->step_s));
  json_object_set_new(o, "tflops_per_gpu", json_real(0));
  json_object_set_new(o, "mfu", json_real(0));
  json_object_set_new(o, "breakdown", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "compute_s", s->total_s - s->tp_s,
                                                "tp_exposed_s", s->tp_s, "pp_exposed_s", 0.0, "dp_exposed_s", 0.0,
                                                "codec_s", 0.0, "bubble_s", 0.0));
  json_object_set_new(o, "ranks", json_array());
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
