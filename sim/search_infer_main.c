/* search_infer_main.c — `tacosim search-infer`: the command line, the table, the JSON and the emitted
 * plans of the serving-layout search (search_infer.c). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "search_infer.h"

const char sim_search_infer_usage[] =
    "usage: tacosim search-infer --model M --cluster C --prompt P --generate G [options]\n"
    "  Serving-layout search: every combination of the lists below is an inference plan (sim/INFERENCE.md),\n"
    "  checked by the plan loader's rules (tp divides the heads, KV heads, FFN and the GPUs per node; pp the\n"
    "  layers; the plan's memory within the HBM) and predicted as tacosim simulate predicts it (eager\n"
    "  decode steps); those within --tpot-max and --ttft-max are ranked by output tokens/s per GPU, batch x\n"
    "  generate / (TTFT + (generate - 1) x TPOT) / (tp x pp), best first. One batch of equal requests, as a\n"
    "  static-batch benchmark serves it (no engine host time: the rows of experiments/published/dense-infer\n"
    "  say what that leaves out); with --inflight, requests always waiting, served with in-flight batching.\n"
    "options (defaults in brackets):\n"
    "  --model M            model: a zoo name (models/M.json) or a path (required)\n"
    "  --cluster C          cluster: a zoo name (topologies/C.json) or a path (required)\n"
    "  --prompt P           prompt tokens per sequence (required)\n"
    "  --generate G         generated tokens per sequence (required)\n"
    "  --batches LIST       sequences served together [1,2,4,...,512]; with --inflight the engine's\n"
    "                       max_batch, 0 for its own heuristic [0,1,2,4,...,4096]\n"
    "  --inflight           serve with in-flight batching (the plan field \"inflight\", sim/INFERENCE.md):\n"
    "                       max_batch from --batches, capped by the sequences whose KV cache fits; ranked by\n"
    "                       the steady state's output tokens/s per GPU; TPOT = the mean step, TTFT = the\n"
    "                       admitting step (queueing left out); a max_batch resolving to another's is\n"
    "                       predicted once [off: one static batch]\n"
    "  --kv-cache-fraction F  with --inflight: the plan's inflight.kv_cache_fraction, the share of the HBM\n"
    "                       left after weights, runtime and the engine's profiling forward and CUDA graphs\n"
    "                       that the KV cache gets [0.9]\n"
    "  --cuda-graph-max-batch N  with --inflight: the plan's inflight.cuda_graph_max_batch, the largest decode\n"
    "                       batch whose CUDA graph (and its memory pool) the engine captures, 0 for none [128]\n"
    "  --tp LIST            tensor-parallel degrees [1,2,4,... up to the GPUs per node]\n"
    "  --pp LIST            pipeline stages [1]\n"
    "  --ep LIST            MoE models: 0, tensor-parallel attention and experts; k >= 1, layout.attention_dp with\n"
    "                       layout.ep k (each GPU its own sequences, the experts split k ways by expert and\n"
    "                       tp / k within; sim/INFERENCE.md \"Attention data parallelism\") [0]\n"
    "  --kv-cache LIST      among bf16,fp8 [both]\n"
    "  --quantization LIST  among none,fp8,nvfp4 (FP8 weights and GEMMs; NVFP4 weights and W4A4 GEMMs) [none,\n"
    "                       fp8 on a GPU with FP8 tensor cores, nvfp4 on one with FP4 tensor cores]\n"
    "  --codecs LIST        TP all-reduce codecs among none,taco,caat,taco+caat (TACO groups of 128 E4M3,\n"
    "                       CAAT-Net p 0.5: CAAT-Net changes the model) [none]\n"
    "  --prefill-attention K  executor, fused or flash (the plan field; flash and fused price serving\n"
    "                       engines' fused attention) [flash]\n"
    "  --decode-attention K  per-kv-head or per-query-head (the plan field, given to every candidate:\n"
    "                       per-query-head reads a GQA model's KV cache once per query head, as engines\n"
    "                       before grouped decode kernels did; sim/INFERENCE.md) [per-kv-head]\n"
    "  --tpot-max MS        keep candidates whose time per output token is at most MS ms [no limit]\n"
    "  --ttft-max MS        keep candidates whose time to first token is at most MS ms [no limit]\n"
    "  --headroom H         HBM kept free beyond the plan's memory (weights, KV cache, runtime and NCCL; the\n"
    "                       executor's buffers only under --prefill-attention executor: a serving engine's\n"
    "                       workspace is not modelled, sim/INFERENCE.md): H >= 1 in GiB, H < 1 a fraction of\n"
    "                       the HBM [0]\n"
    "  --top K              rows printed [10]\n"
    "  --calibration FILE   op costs [as tacosim simulate: the cluster GPU's file, else the H200's, moved]\n"
    "  --transfer KIND      roofline, mamf or off, as tacosim simulate [roofline]\n"
    "  --json OUT           every ranked row as JSON [not written]\n"
    "  --emit-plans DIR     each printed row as an inference plan file DIR/NN-<name>.json that tacosim\n"
    "                       simulate predicts to the printed figures (with the same calibration) [not written]\n"
    "reads:  the model, the cluster, the calibration\n"
    "writes: standard output; OUT; DIR/*.json\n"
    "exit: 0, or 2 for bad input and when no candidate fits and meets the limits, 3 for a simulator failure\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "tacosim search-infer: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (tacosim search-infer --help)\n");
  return TS_EXIT_BAD_INPUT;
}

static int parse_ints(const char *s, int *out, int *n, int lo, int hi) {
  *n = 0;
  const char *p = s;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < lo || v > hi || *n == SEARCH_INFER_MAX_LIST) return -1;
    out[(*n)++] = (int)v;
    if (*end == ',') p = end + 1;
    else if (*end) return -1;
    else p = end;
  }
  return *n ? 0 : -1;
}

/* A comma list of names, each the index of its entry in names (values[i] = vals[index]). */
static int parse_names(const char *s, const char *const *names, const int *vals, int *out, int *n, int max) {
  *n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int j = 0;
    while (names[j] && strcmp(names[j], t)) j++;
    if (!names[j] || *n == max) return -1;
    for (int i = 0; i < *n; i++)
      if (out[i] == vals[j]) return -1;
    out[(*n)++] = vals[j];
  }
  return *n ? 0 : -1;
}

static double parse_ms(const char *s) {
  char *end;
  double v = strtod(s, &end);
  return end != s && !*end && v > 0 && v < 1e9 ? v * 1e-3 : -1;
}

static void print_rows(const search_infer_opts *o, const search_infer_result *res, int top) {
  printf("serving search: %s on %s, prompt %d, generate %d; prefill attention %s%s%s; %s\n", o->model, o->cluster,
         o->prompt, o->generate, plan_prefill_attention_name(o->prefill_attention),
         o->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD ? "; decode attention " : "",
         o->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD ? plan_decode_attention_name(o->decode_attention) : "",
         o->inflight ? "in-flight batching, the steady state (batch: the engine's max_batch; TTFT: the admitting step)"
                     : "one static batch");
  printf("calibration: %s\n", res->calibration);
  printf("candidates %d: %d predicted within the limits, %d refused by the plan rules (memory, divisibility), "
         "%d beyond the HBM less --headroom, %d over the latency limits, %d not predictable\n",
         res->candidates, res->n_rows, res->refused, res->over_headroom, res->over_limits, res->failed);
  if (res->duplicates) printf("  %d max_batch values resolved to another candidate's (predicted once)\n", res->duplicates);
  if (res->first_refusal[0]) printf("  first refusal: %s\n", res->first_refusal);
  printf("\n%4s %3s %3s %6s %9s %5s %8s %10s %10s %10s %12s %12s %9s  %s\n", "rank", "tp", "pp", "batch",
         "in flight", "kv", "weights", "codec", "TTFT ms", "TPOT ms", "tokens/s", "tok/s/GPU", "GiB/GPU", "experts");
  for (int i = 0; i < res->n_rows && i < top; i++) {
    const search_infer_row *w = &res->rows[i];
    char lay[32] = "tp";
    if (w->plan.attention_dp) snprintf(lay, sizeof lay, "attention_dp ep %d", w->plan.ep);
    printf("%4d %3d %3d %6d %9.1f %5s %8s %10s %10.2f %10.3f %12.1f %12.1f %9.1f  %s\n", i + 1, w->plan.tp,
           w->plan.pp, w->plan.batch, w->in_flight, plan_kv_precision_name(w->plan.kv),
           w->plan.quant == PLAN_QUANT_NONE ? "bf16" : plan_infer_quant_name(w->plan.quant),
           plan_codec_kind_name(w->plan.codec.kind), w->r.ttft_s * 1e3, w->r.tpot_s * 1e3, w->r.tokens_per_s,
           w->tokens_per_gpu_s, w->r.memory.total / 1073741824.0, model_is_moe(&w->plan.model) ? lay : "-");
  }
  if (!res->n_rows) printf("  (no candidate fits and meets the limits)\n");
}

static int save_json(const char *path, const search_infer_opts *o, const search_infer_result *res, ts_err *e) {
  json_t *rows = json_array();
  for (int i = 0; i < res->n_rows; i++) {
    const search_infer_row *w = &res->rows[i];
    json_t *row = json_pack("{s:i, s:s, s:i, s:i, s:i, s:f, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:f}", "rank", i + 1,
                            "name", w->plan.name, "tp", w->plan.tp, "pp", w->plan.pp, "batch", w->plan.batch,
                            "in_flight", w->in_flight, "kv_cache", plan_kv_precision_name(w->plan.kv),
                                          "quantization", plan_infer_quant_name(w->plan.quant), "codec",
                                          plan_codec_kind_name(w->plan.codec.kind), "ttft_s", w->r.ttft_s, "tpot_s",
                                          w->r.tpot_s, "tokens_per_s", w->r.tokens_per_s, "tokens_per_gpu_s",
                                          w->tokens_per_gpu_s, "memory_per_gpu_bytes", w->r.memory.total);
    if (row) json_object_set_new(row, "ep", json_integer(w->plan.ep)),
        json_object_set_new(row, "attention_dp", json_boolean(w->plan.attention_dp));
    json_array_append_new(rows, row);
  }
  json_t *root = json_pack("{s:i, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i}, s:o}",
                           "schema", 1, "kind", "search-infer", "model", o->model, "cluster", o->cluster, "prompt",
                           o->prompt, "generate", o->generate, "prefill_attention",
                           plan_prefill_attention_name(o->prefill_attention), "mode",
                           o->inflight ? "inflight" : "static", "kv_cache_fraction", o->kv_fraction,
                           "headroom", o->headroom, "tpot_max_s", o->tpot_max_s, "ttft_max_s", o->ttft_max_s,
                           "calibration", res->calibration, "counts", "candidates", res->candidates, "refused",
                           res->refused, "over_headroom", res->over_headroom, "over_limits", res->over_limits,
                           "failed", res->failed, "duplicates", res->duplicates, "rows", rows);
  if (root) json_object_set_new(root, "decode_attention", json_string(plan_decode_attention_name(o->decode_attention)));
  int rc = !root ? ts_fail_sys(e, "%s: the JSON could not be built (out of memory)", path)
           : json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) ? ts_fail_sys(e, "%s: cannot write", path)
                                                                                  : 0;
  json_decref(root);
  return rc;
}

static int emit_plans(const char *dir, const search_infer_result *res, int top, ts_err *e) {
  if (mkdir(dir, 0777) && errno != EEXIST) return ts_fail_sys(e, "%s: cannot create the folder", dir);
  for (int i = 0; i < res->n_rows && i < top; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%02d-%s.json", dir, i + 1, res->rows[i].plan.name);
    FILE *f = fopen(path, "w");
    if (!f) return ts_fail_sys(e, "%s: cannot write", path);
    int bad = fputs(res->rows[i].json, f) < 0;
    if (fclose(f) || bad) return ts_fail_sys(e, "%s: write failed", path);
  }
  return 0;
}

int sim_search_infer_main(int argc, char **argv) {
  static const char *const kv_names[] = {"bf16", "fp8", NULL}, *const q_names[] = {"none", "fp8", "nvfp4", NULL},
                           *const codec_names[] = {"none", "taco", "caat", "taco+caat", NULL},
                           *const pa_names[] = {"executor", "fused", "flash", NULL},
                           *const da_names[] = {"per-kv-head", "per-query-head", NULL};
  static const int kv_vals[] = {PLAN_KV_BF16, PLAN_KV_FP8}, q_vals[] = {PLAN_QUANT_NONE, PLAN_QUANT_FP8, PLAN_QUANT_NVFP4},
                   codec_vals[] = {PLAN_CODEC_NONE, PLAN_CODEC_TACO, PLAN_CODEC_CAAT, PLAN_CODEC_TACO_CAAT},
                   pa_vals[] = {PLAN_PREFILL_ATTN_EXECUTOR, PLAN_PREFILL_ATTN_FUSED, PLAN_PREFILL_ATTN_FLASH},
                   da_vals[] = {PLAN_DECODE_ATTN_PER_KV_HEAD, PLAN_DECODE_ATTN_PER_QUERY_HEAD};
  search_infer_opts o = {.prefill_attention = PLAN_PREFILL_ATTN_FLASH, .transfer = SIM_TRANSFER_ROOFLINE};
  const char *json = NULL, *emit = NULL;
  int top = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(sim_search_infer_usage, stdout);
      return 0;
    }
    if (a[0] != '-') return usage_error("unexpected argument %s: every input is an option", a);
    if (!strcmp(a, "--inflight")) {
      o.inflight = true;
      continue;
    }
    if (!v) return usage_error("unknown option or missing value: %s", a);
    i++;
    int one;
    if (!strcmp(a, "--model")) o.model = v;
    else if (!strcmp(a, "--cluster")) o.cluster = v;
    else if (!strcmp(a, "--prompt") || !strcmp(a, "--generate") || !strcmp(a, "--top")) {
      int n;
      if (parse_ints(v, &one, &n, 1, 1 << 24) || n != 1) return usage_error("%s: want one integer >= 1", a);
      *(!strcmp(a, "--prompt") ? &o.prompt : !strcmp(a, "--generate") ? &o.generate : &top) = one;
    } else if (!strcmp(a, "--batches")) {
      if (parse_ints(v, o.batches, &o.n_batches, 0, 1 << 20))
        return usage_error("--batches: want a comma list of 1..%s (0: the engine's heuristic, with --inflight)", "1048576");
    } else if (!strcmp(a, "--tp")) {
      if (parse_ints(v, o.tps, &o.n_tps, 1, 1 << 16)) return usage_error("--tp: want a comma list of integers >= 1%s", "");
    } else if (!strcmp(a, "--ep")) {
      if (parse_ints(v, o.eps, &o.n_eps, 0, 1 << 16)) return usage_error("--ep: want a comma list of integers >= 0%s", "");
    } else if (!strcmp(a, "--pp")) {
      if (parse_ints(v, o.pps, &o.n_pps, 1, 1 << 16)) return usage_error("--pp: want a comma list of integers >= 1%s", "");
    } else if (!strcmp(a, "--kv-cache")) {
      if (parse_names(v, kv_names, kv_vals, o.kvs, &o.n_kvs, 2)) return usage_error("--kv-cache: want a list of bf16,fp8 (got %s)", v);
    } else if (!strcmp(a, "--quantization")) {
      if (parse_names(v, q_names, q_vals, o.quants, &o.n_quants, 3))
        return usage_error("--quantization: want a list of none,fp8,nvfp4 (got %s)", v);
    } else if (!strcmp(a, "--codecs")) {
      if (parse_names(v, codec_names, codec_vals, o.codecs, &o.n_codecs, 4))
        return usage_error("--codecs: want a list of none,taco,caat,taco+caat (got %s)", v);
    } else if (!strcmp(a, "--prefill-attention")) {
      int pa[1], n;
      if (parse_names(v, pa_names, pa_vals, pa, &n, 1)) return usage_error("--prefill-attention: want executor, fused or flash (got %s)", v);
      o.prefill_attention = (plan_prefill_attention)pa[0];
    } else if (!strcmp(a, "--decode-attention")) {
      int da[1], n;
      if (parse_names(v, da_names, da_vals, da, &n, 1))
        return usage_error("--decode-attention: want per-kv-head or per-query-head (got %s)", v);
      o.decode_attention = (plan_decode_attention)da[0];
    } else if (!strcmp(a, "--tpot-max") || !strcmp(a, "--ttft-max")) {
      double s = parse_ms(v);
      if (s < 0) return usage_error("%s: want milliseconds > 0", a);
      *(!strcmp(a, "--tpot-max") ? &o.tpot_max_s : &o.ttft_max_s) = s;
    } else if (!strcmp(a, "--headroom")) {
      char *end;
      o.headroom = strtod(v, &end);
      if (end == v || *end || !(o.headroom >= 0) || o.headroom > 1e6) return usage_error("--headroom: want GiB >= 1 or a fraction in [0, 1) (got %s)", v);
    } else if (!strcmp(a, "--kv-cache-fraction")) {
      char *end;
      o.kv_fraction = strtod(v, &end);
      if (end == v || *end || !(o.kv_fraction > 0 && o.kv_fraction <= 1))
        return usage_error("--kv-cache-fraction: want a fraction in (0, 1] (got %s)", v);
    } else if (!strcmp(a, "--cuda-graph-max-batch")) {
      char *end;
      long n = strtol(v, &end, 10);
      if (end == v || *end || n < 0 || n > 1 << 20)
        return usage_error("--cuda-graph-max-batch: want an integer in [0, 1048576] (got %s)", v);
      o.cuda_graph_max_batch = (int)n, o.cuda_graph_set = true;
    } else if (!strcmp(a, "--calibration")) o.calibration = v;
    else if (!strcmp(a, "--transfer")) {
      if (!strcmp(v, "roofline")) o.transfer = SIM_TRANSFER_ROOFLINE;
      else if (!strcmp(v, "mamf")) o.transfer = SIM_TRANSFER_MAMF;
      else if (!strcmp(v, "off")) o.transfer = SIM_TRANSFER_OFF;
      else return usage_error("--transfer: \"%s\" is not one of roofline, mamf, off", v);
    } else if (!strcmp(a, "--json")) json = v;
    else if (!strcmp(a, "--emit-plans")) emit = v;
    else return usage_error("unknown option %s", a);
  }
  if (!o.model || !o.cluster || !o.prompt || !o.generate)
    return usage_error("--model, --cluster, --prompt and --generate are required%s", "");
  search_infer_result res;
  ts_err e = {0};
  if (search_infer_run(&o, &res, &e)) {
    fprintf(stderr, "tacosim search-infer: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  print_rows(&o, &res, top);
  int rc = (json && save_json(json, &o, &res, &e)) || (emit && emit_plans(emit, &res, top, &e));
  if (!rc && !res.n_rows) /* as tacosim search: no layout is an answer the user must act on */
    rc = ts_fail(&e, NULL, NULL, "no candidate fits and meets the limits (%d refused by the plan rules, %d over the "
                 "latency limits); the first refusal: %.300s", res.refused, res.over_limits,
                 res.first_refusal[0] ? res.first_refusal : "none");
  if (rc) fprintf(stderr, "tacosim search-infer: %s\n", e.msg);
  search_infer_free(&res);
  return rc ? ts_exit_status(&e) : 0;
}
