/* sim_infer_report.c — what `tacosim simulate INFER_PLAN.json` prints and
 * writes (JSON and CSV). */
#include <jansson.h>
#include <string.h>

#include "sim_infer.h"

static double speedup(double plain, double with) { return with > 0 ? plain / with : 0; }

static void print_phase(FILE *out, const char *name, const sim_infer_phase *ph, const plan_infer *p) {
  fprintf(out, "  %-22s %10.3f ms  compute %9.3f  tp %9.3f  (codec %7.3f)  pp %7.3f\n", name, ph->total_s * 1e3,
          ph->compute_s * 1e3, ph->tp_s * 1e3, ph->codec_s * 1e3, ph->pp_s * 1e3);
  fprintf(out, "  %-22s               of compute: GEMMs %9.3f, attention %9.3f, other %9.3f\n", "", ph->gemm_s * 1e3,
          ph->attention_s * 1e3, (ph->compute_s - ph->gemm_s - ph->attention_s) * 1e3);
  if (model_is_moe(&p->model))
    fprintf(out, "  %-22s               of GEMMs: routed experts %9.3f (moe_kernel %s)\n", "", ph->experts_s * 1e3,
            plan_moe_kernel_name(p->moe_kernel));
}

void sim_infer_print(const plan_infer *p, const sim_infer_result *r, FILE *out) {
  const double gib = 1073741824.0;
  fprintf(out, "inference plan %s: %s on %s, tp %d pp %d, batch %d, prompt %d, generate %d, kv %s%s\n", p->name,
          p->model.name, p->cluster.name, p->tp, p->pp, p->batch, p->prompt, p->generate,
          plan_kv_precision_name(p->kv), p->quant == PLAN_QUANT_FP8     ? ", FP8 weights and GEMMs (quantization fp8)"
          : p->quant == PLAN_QUANT_NVFP4 ? ", NVFP4 weights and GEMMs (quantization nvfp4)"
                                         : "");
  if (p->prefill_attention != PLAN_PREFILL_ATTN_EXECUTOR)
    fprintf(out, "prefill attention: %s (%s)\n", plan_prefill_attention_name(p->prefill_attention),
            p->prefill_attention == PLAN_PREFILL_ATTN_FUSED_FP8
                ? "the calibration's attention_backends \"fused\" table, moved by its attention_fp8 ratio"
                : "the calibration's attention_backends table of that kernel");
  if (p->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD && strcmp(r->decode_attn_source, "bound") != 0 &&
      r->decode_attn_source[0])
    fprintf(out, "decode attention: %s (the KV cache read once per query head, %d query heads a KV head: the measured "
            "\"%s\" table, by the unique KV bytes)\n", plan_decode_attention_name(p->decode_attention),
            p->model.heads / p->model.kv_heads, r->decode_attn_source);
  else if (p->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD)
    fprintf(out, "decode attention: %s (the KV cache read once per query head, %d times a KV head's: an upper bound, "
            "the decode attention table at the MHA shape of %d KV heads a GPU)\n",
            plan_decode_attention_name(p->decode_attention), p->model.heads / p->model.kv_heads,
            p->model.heads / plan_infer_attn_tp(p));
  fprintf(out, "codec of TP all-reduces: %s", plan_codec_kind_name(p->codec.kind));
  if (p->codec.kind == PLAN_CODEC_TACO || p->codec.kind == PLAN_CODEC_TACO_CAAT) fprintf(out, " G=%d", p->codec.group);
  if (p->codec.kind == PLAN_CODEC_CAAT || p->codec.kind == PLAN_CODEC_TACO_CAAT) fprintf(out, " p=%g", p->codec.p);
  fprintf(out, "%s\n", p->codec_auto ? " (auto: plain NCCL where the codec is slower)" : " (forced)");
  fprintf(out, "calibration: %s%s\n\n", r->calibration, r->derived_calibration ? " (derived, not measured)" : "");
  fprintf(out, "  time to first token   %10.3f ms\n", r->ttft_s * 1e3);
  fprintf(out, "  time per output token %10.3f ms\n", r->tpot_s * 1e3);
  fprintf(out, "  tokens/s              %10.1f  (batch x generate / (TTFT + (generate-1) x TPOT))\n",
          r->tokens_per_s);
  fprintf(out, "  memory per GPU        %10.2f GiB  (weights %.2f, KV cache %.2f, activations %.2f, runtime and NCCL "
          "%.2f, of %.0f)\n\n", r->memory.total / gib, r->memory.weights / gib, r->memory.kv_cache / gib,
          r->memory.activations / gib, r->memory.overhead / gib, p->cluster.gpu.hbm_gib);
  print_phase(out, "prefill", &r->prefill, p);
  print_phase(out, "decode (per token)", &r->decode, p);
  if (p->codec.kind != PLAN_CODEC_NONE) {
    fprintf(out, "\n  speedup over plain NCCL: TTFT %.3fx (%.3f ms), TPOT %.3fx (%.3f ms), tokens/s %.3fx\n",
            speedup(r->plain_ttft_s, r->ttft_s), r->plain_ttft_s * 1e3, speedup(r->plain_tpot_s, r->tpot_s),
            r->plain_tpot_s * 1e3,
            r->plain_tokens_per_s > 0 ? r->tokens_per_s / r->plain_tokens_per_s : 0);
    for (int i = 0; i < r->n_choices; i++) {
      const sim_infer_choice *c = &r->choices[i];
      fprintf(out, "  %-14s all-reduce %10.0f B -> %10.0f B on the wire: plain %8.1f us, codec %8.1f us: %s\n",
              c->what, c->bytes, c->wire_bytes, c->plain_s * 1e6, c->codec_s * 1e6,
              c->compressed ? "compressed" : c->fallback_is_caat ? "caat in BF16" : "plain");
    }
  }
  for (int i = 0; i < r->n_notes; i++) fprintf(out, "note: %s\n", r->notes[i]);
}

static json_t *phase_json(const sim_infer_phase *ph) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "total_s", ph->total_s, "compute_s", ph->compute_s,
                   "tp_exposed_s", ph->tp_s, "codec_s", ph->codec_s, "pp_exposed_s", ph->pp_s, "experts_gemm_s",
                   ph->experts_s);
}

static json_t *result_json(const plan_infer *p, const sim_infer_result *r) {
  json_t *choices = json_array(), *notes = json_array();
  for (int i = 0; i < r->n_choices; i++) {
    const sim_infer_choice *c = &r->choices[i];
    json_array_append_new(choices, json_pack("{s:s, s:f, s:f, s:f, s:f, s:s, s:f, s:b}", "what", c->what, "bytes",
                                             c->bytes, "wire_bytes", c->wire_bytes, "plain_s", c->plain_s,
                                             "fallback_s", c->fallback_s, "fallback",
                                             c->fallback_is_caat ? "caat" : "none", "codec_s", c->codec_s,
                                             "compressed", c->compressed));
  }
  for (int i = 0; i < r->n_notes; i++) json_array_append_new(notes, json_string(r->notes[i]));
  json_t *o = json_pack(
      "{s:i, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:{s:f, s:f}, s:o, s:o, "
      "s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:o, s:o}",
      "schema", 1, "source", "simulated", "kind", "inference", "plan", p->name, "calibration", r->calibration,
      "codec", plan_codec_kind_name(p->codec.kind), "ttft_s", r->ttft_s, "tpot_s", r->tpot_s, "tokens_per_s",
      r->tokens_per_s, "total_s", r->total_s, "memory_per_gpu_bytes", r->memory.total, "memory", "weights_bytes",
      r->memory.weights, "kv_cache_bytes", r->memory.kv_cache, "prefill", phase_json(&r->prefill), "decode",
      phase_json(&r->decode), "plain_nccl", "ttft_s", r->plain_ttft_s, "tpot_s", r->plain_tpot_s, "tokens_per_s",
      r->plain_tokens_per_s, "speedup", "ttft", speedup(r->plain_ttft_s, r->ttft_s), "tpot",
      speedup(r->plain_tpot_s, r->tpot_s), "tokens_per_s",
      r->plain_tokens_per_s > 0 ? r->tokens_per_s / r->plain_tokens_per_s : 0, "codec_choices", choices, "notes",
      notes);
  /* the result schema's headline fields (schema/result.h), so that `tacosim compare` reads a
   * prediction against a `tacorun execute` measurement: the whole batch is the "iteration" */
  double steps = p->generate > 1 ? p->generate - 1 : 0;
  json_object_set_new(o, "iteration_time_s", json_real(r->total_s));
  json_object_set_new(o, "tflops_per_gpu", json_real(0));
  json_object_set_new(o, "mfu", json_real(0));
  json_object_set_new(o, "breakdown",
                      json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "compute_s",
                                r->prefill.compute_s + steps * r->decode.compute_s, "tp_exposed_s",
                                r->prefill.tp_s + steps * r->decode.tp_s, "pp_exposed_s",
                                r->prefill.pp_s + steps * r->decode.pp_s, "dp_exposed_s", 0.0, "codec_s",
                                r->prefill.codec_s + steps * r->decode.codec_s, "bubble_s", 0.0));
  json_object_set_new(o, "ranks", json_array());
  json_t *mem = json_object_get(o, "memory"); /* the executor's buffers and the runtime, added 2026-12-06 */
  json_object_set_new(mem, "activations_bytes", json_real(r->memory.activations));
  json_object_set_new(mem, "overhead_bytes", json_real(r->memory.overhead));
  json_object_set_new(o, "quantization", json_string(plan_infer_quant_name(p->quant)));
  json_object_set_new(o, "prefill_attention", json_string(plan_prefill_attention_name(p->prefill_attention)));
  json_object_set_new(o, "decode_attention", json_string(plan_decode_attention_name(p->decode_attention)));
  if (r->options[0]) json_object_set_new(o, "options", json_string(r->options));
  if (p->model.attention == MODEL_ATTN_MLA) /* MLA plans only (sim/INFERENCE.md, "MLA"), added 2026-12-06 */
    json_object_set_new(o, "mla", json_pack("{s:s, s:f, s:f, s:f}", "kv_cache", "latent",
                                            "kv_bytes_per_token_layer",
                                            plan_infer_mla_kv_bytes(p, 1) / ((double)p->model.layers / p->pp) / p->batch,
                                            "decode_attention_s", r->decode.attention_s, "prefill_attention_s",
                                            r->prefill.attention_s));
  return o;
}

int sim_infer_save_json(const plan_infer *p, const sim_infer_result *r, const char *path, ts_err *e) {
  json_t *o = result_json(p, r);
  if (!o) return ts_fail_sys(e, "%s: cannot build the result JSON", path);
  int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
  json_decref(o);
  return rc ? ts_fail_sys(e, "%s: cannot write", path) : 0;
}

int sim_infer_save_csv(const plan_infer *p, const sim_infer_result *r, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "# tacosim inference prediction of %s (calibration %s)\n", p->name, r->calibration);
  if (r->options[0]) fprintf(f, "# options %s\n", r->options);
  fprintf(f, "# plan tp pp batch prompt generate codec ttft_s tpot_s tokens_per_s memory_per_gpu_bytes "
             "plain_ttft_s plain_tpot_s prefill_tp_s prefill_codec_s decode_tp_s decode_codec_s\n");
  fprintf(f, "%s %d %d %d %d %d %s %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", p->name, p->tp, p->pp,
          p->batch, p->prompt, p->generate, plan_codec_kind_name(p->codec.kind), r->ttft_s, r->tpot_s,
          r->tokens_per_s, r->memory.total, r->plain_ttft_s, r->plain_tpot_s, r->prefill.tp_s, r->prefill.codec_s,
          r->decode.tp_s, r->decode.codec_s);
  int bad = ferror(f);
  if (fclose(f) || bad) return ts_fail_sys(e, "%s: cannot write", path);
  return 0;
}

static int cmp_op_desc(const void *a, const void *b) {
  double x = ((const sim_infer_op_cost *)a)->s, y = ((const sim_infer_op_cost *)b)->s;
  return x < y ? 1 : x > y ? -1 : 0;
}

void sim_infer_print_ops(const plan_infer *p, const sim_infer_result *r, FILE *out) {
  static const char *phase[2] = {"prefill", "decode"};
  const bool clocked = r->prefill_clock || r->prefill_power || r->prefill_op_power; /* the ops: the tables' speed */
  const double total[2] = {clocked ? r->prefill_sustained_s : r->ttft_s, r->tpot_s};
  fprintf(out, "# op count total_ms mean_us pct (rank 0, predicted, %s; %s: one prefill of %d x %d tokens at the "
          "tables' sustained speed, one eager decode step)\n", r->calibration, p->name, p->batch, p->prompt);
  for (int ph = 0; ph < 2; ph++) {
    sim_infer_op_cost sorted[SIM_INFER_MAX_OPS];
    const int n = r->ops[ph].n;
    memcpy(sorted, r->ops[ph].op, sizeof sorted[0] * (size_t)n);
    qsort(sorted, (size_t)n, sizeof sorted[0], cmp_op_desc);
    double sum = 0;
    for (int j = 0; j < n; j++) {
      fprintf(out, "%s.%s %d %.4f %.2f %.3f\n", phase[ph], sorted[j].name, sorted[j].count, sorted[j].s * 1e3,
              sorted[j].s / sorted[j].count * 1e6, total[ph] > 0 ? 100 * sorted[j].s / total[ph] : 0);
      sum += sorted[j].s;
    }
    fprintf(out, "# %s total %.4f ms (the ops above sum to %.4f)\n", phase[ph], total[ph] * 1e3, sum * 1e3);
  }
}
