/* search_infer.c — the serving-layout search (search_infer.h): candidates as inference plan files,
 * each loaded by the plan's own loader and predicted, the fitting ones ranked. */
#include <stdlib.h>
#include <string.h>

#include "search_infer.h"

static int cmp_rows(const void *a, const void *b) {
  const search_infer_row *x = a, *y = b;
  if (x->tokens_per_gpu_s != y->tokens_per_gpu_s) return x->tokens_per_gpu_s > y->tokens_per_gpu_s ? -1 : 1;
  if (x->gpus != y->gpus) return x->gpus < y->gpus ? -1 : 1;
  if (x->r.tpot_s != y->r.tpot_s) return x->r.tpot_s < y->r.tpot_s ? -1 : 1;
  return strcmp(x->plan.name, y->plan.name);
}

/* The plan file of one candidate; the codec's parameters are the design's defaults (TACO groups of 128
 * E4M3 elements, CAAT-Net p 0.5). */
static int candidate_json(const search_infer_opts *o, int tp, int pp, int ep, int batch, int kv, int quant, int codec,
                          char *name, size_t name_cap, char *out, size_t cap) {
  const char *kvn = plan_kv_precision_name((plan_kv_precision)kv), *qn = plan_infer_quant_name((plan_infer_quant)quant);
  const char *cn = plan_codec_kind_name((plan_codec_kind)codec);
  char bname[32], btext[64], ifb[192] = "";
  if (!o->inflight) {
    snprintf(bname, sizeof bname, "b%d", batch);
    snprintf(btext, sizeof btext, "\"size\": %d, ", batch);
  } else { /* in-flight: the engine's max_batch (0: its heuristic), no batch size */
    if (batch) snprintf(bname, sizeof bname, "ifb%d", batch);
    else snprintf(bname, sizeof bname, "ifb-auto");
    btext[0] = 0;
    int n = snprintf(ifb, sizeof ifb, ",\n  \"inflight\": {");
    const char *sep = "";
    if (batch) n += snprintf(ifb + n, sizeof ifb - n, " \"max_batch\": %d", batch), sep = ",";
    if (o->kv_fraction > 0)
      n += snprintf(ifb + n, sizeof ifb - n, "%s \"kv_cache_fraction\": %.6g", sep, o->kv_fraction), sep = ",";
    if (o->cuda_graph_set)
      n += snprintf(ifb + n, sizeof ifb - n, "%s \"cuda_graph_max_batch\": %d", sep, o->cuda_graph_max_batch);
    snprintf(ifb + n, sizeof ifb - n, " }");
  }
  char adp[64] = "", adp_name[24] = ""; /* ep 0: no attention_dp (the plan's default layout) */
  if (ep > 0) {
    snprintf(adp, sizeof adp, ", \"ep\": %d, \"attention_dp\": true", ep);
    snprintf(adp_name, sizeof adp_name, "-adp-ep%d", ep);
  }
  snprintf(name, name_cap, "tp%d-pp%d%s-%s-kv-%s-w-%s-%s", tp, pp, adp_name, bname, kvn, strcmp(qn, "none") ? qn : "bf16",
           cn);
  char codec_text[96];
  if (codec == PLAN_CODEC_NONE) snprintf(codec_text, sizeof codec_text, "{ \"kind\": \"none\" }");
  else if (codec == PLAN_CODEC_TACO) snprintf(codec_text, sizeof codec_text, "{ \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" }");
  else if (codec == PLAN_CODEC_CAAT) snprintf(codec_text, sizeof codec_text, "{ \"kind\": \"caat\", \"p\": 0.5 }");
  else snprintf(codec_text, sizeof codec_text, "{ \"kind\": \"taco+caat\", \"group\": 128, \"fp8\": \"e4m3\", \"p\": 0.5 }");
  char da[64] = ""; /* "decode_attention", written where it is not the default (per-kv-head) */
  if (o->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD)
    snprintf(da, sizeof da, ",\n  \"decode_attention\": \"%s\"", plan_decode_attention_name(o->decode_attention));
  int n = snprintf(out, cap,
                   "{\n  \"schema\": 1,\n  \"kind\": \"inference\",\n  \"name\": \"%s\",\n"
                   "  \"description\": \"tacosim search-infer candidate: prompt %d, generate %d\",\n"
                   "  \"model\": \"%s\",\n  \"cluster\": \"%s\",\n  \"layout\": { \"tp\": %d, \"pp\": %d%s },\n"
                   "  \"batch\": { %s\"prompt\": %d, \"generate\": %d },\n  \"kv_cache\": \"%s\",\n"
                   "  \"quantization\": \"%s\",\n  \"codec\": %s,\n  \"prefill_attention\": \"%s\"%s%s\n}\n",
                   name, o->prompt, o->generate, o->model, o->cluster, tp, pp, adp, btext, o->prompt, o->generate, kvn,
                   qn, codec_text, plan_prefill_attention_name(o->prefill_attention), da, ifb);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Whether s goes into a JSON string as it is (the candidates' plan files name the model and the cluster). */
static bool json_safe(const char *s) {
  for (; *s; s++)
    if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) return false;
  return true;
}

/* The lists left empty get their defaults from the model and the cluster. */
static int default_lists(const search_infer_opts *o, search_infer_opts *d,
                         const topo_cluster *cl) {
  *d = *o;
  if (!d->n_tps)
    for (int t = 1; t <= cl->gpus_per_node && d->n_tps < SEARCH_INFER_MAX_LIST; t *= 2) d->tps[d->n_tps++] = t;
  if (!d->n_pps) d->pps[d->n_pps++] = 1;
  if (!d->n_eps) d->eps[d->n_eps++] = 0;
  if (!d->n_batches && d->inflight) { /* the engine's heuristic, then caps below it (a TPOT limit binds there) */
    d->batches[d->n_batches++] = 0;
    for (int b = 1; b <= 4096 && d->n_batches < SEARCH_INFER_MAX_LIST; b *= 2) d->batches[d->n_batches++] = b;
  }
  if (!d->n_batches)
    for (int b = 1; b <= 512; b *= 2) d->batches[d->n_batches++] = b;
  if (!d->n_kvs) d->kvs[d->n_kvs++] = PLAN_KV_BF16, d->kvs[d->n_kvs++] = PLAN_KV_FP8;
  if (!d->n_quants) {
    d->quants[d->n_quants++] = PLAN_QUANT_NONE;
    if (cl->gpu.fp8_tflops > 0) d->quants[d->n_quants++] = PLAN_QUANT_FP8;
    if (cl->gpu.fp4_tflops > 0) d->quants[d->n_quants++] = PLAN_QUANT_NVFP4;
  }
  if (!d->n_codecs) d->codecs[d->n_codecs++] = PLAN_CODEC_NONE;
  return 0;
}

static int add_row(search_infer_result *res, int *cap, const search_infer_row *row) {
  if (res->n_rows == *cap) {
    int nc = *cap ? 2 * *cap : 64;
    search_infer_row *r = realloc(res->rows, (size_t)nc * sizeof *r);
    if (!r) return -1;
    res->rows = r, *cap = nc;
  }
  res->rows[res->n_rows++] = *row;
  return 0;
}

/* --inflight: the engine settings each layout has been predicted with, so that a max_batch which the KV-cache fit
 * (or the heuristic) resolves to another candidate's is predicted once. */
typedef struct {
  int tp, pp, ep, attention_dp, kv, quant, codec, max_batch, max_num_tokens;
} engine_key;
typedef struct {
  engine_key *k;
  int n, cap;
} engine_seen;

/* 1 when p's key was seen (nothing added), 0 when added, -1 out of memory. */
static int seen_before(engine_seen *s, const plan_infer *p) {
  const engine_key k = {p->tp, p->pp, p->ep, p->attention_dp, (int)p->kv, (int)p->quant, (int)p->codec.kind,
                        p->inflight.max_batch, p->inflight.max_num_tokens};
  for (int i = 0; i < s->n; i++)
    if (!memcmp(&s->k[i], &k, sizeof k)) return 1;
  if (s->n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 64;
    engine_key *r = realloc(s->k, (size_t)nc * sizeof *r);
    if (!r) return -1;
    s->k = r, s->cap = nc;
  }
  s->k[s->n++] = k;
  return 0;
}

/* The in-flight steady state into the row's result fields (TTFT: the admitting step; TPOT: the mean step). */
static int predict_inflight(const plan_infer *p, const schema_calibration *cal, search_infer_row *row, ts_err *e) {
  sim_inflight_result *ir = malloc(sizeof *ir);
  if (!ir) return ts_fail_sys(e, "out of memory");
  int rc = sim_inflight_predict(p, cal, NULL, ir, e);
  if (!rc) {
    row->r.ttft_s = ir->ttft_s, row->r.tpot_s = ir->tpot_s, row->r.tokens_per_s = ir->tokens_per_s;
    row->r.memory = ir->memory;
    row->in_flight = ir->in_flight;
  }
  free(ir);
  return rc;
}

/* One candidate: loaded (refused candidates counted, the first one's reason kept), predicted, kept when
 * within the limits. */
static int one(const search_infer_opts *o, const schema_calibration *cal, const char *json, const char *name,
               search_infer_result *res, int *cap, search_infer_row *row, engine_seen *seen, ts_err *e) {
  res->candidates++;
  ts_err sub = {0};
  memset(row, 0, sizeof *row);
  char what[160];
  snprintf(what, sizeof what, "candidate %s", name);
  if (plan_infer_from_json_text(json, strlen(json), what, NULL, NULL, &row->plan, &sub)) {
    if (!sub.bad_input) return ts_fail_sys(e, "%s", sub.msg);
    if (!res->refused++) snprintf(res->first_refusal, sizeof res->first_refusal, "%.250s", sub.msg);
    return 0;
  }
  if (row->plan.inflight.on) {
    int dup = seen_before(seen, &row->plan);
    if (dup < 0) return ts_fail_sys(e, "out of memory");
    if (dup) {
      res->candidates--, res->duplicates++;
      return 0;
    }
  }
  if (row->plan.inflight.on ? predict_inflight(&row->plan, cal, row, &sub)
                            : sim_infer_predict(&row->plan, cal, NULL, NULL, &row->r, &sub)) {
    if (ts_exit_status(&sub) == TS_EXIT_SIM_FAILURE || !sub.bad_input) {
      *e = sub;
      return -1;
    }
    res->failed++; /* a rule of the prediction itself (bad input), not the simulator's failure */
    if (!res->first_refusal[0]) snprintf(res->first_refusal, sizeof res->first_refusal, "%.250s", sub.msg);
    return 0;
  }
  if (o->headroom > 0) { /* the loader checked the plan's memory against the whole HBM */
    double hbm = row->plan.cluster.gpu.hbm_gib * 1073741824.0;
    if (row->r.memory.total > hbm - (o->headroom >= 1 ? o->headroom * 1073741824.0 : o->headroom * hbm)) {
      res->over_headroom++;
      return 0;
    }
  }
  if ((o->tpot_max_s > 0 && row->r.tpot_s > o->tpot_max_s) || (o->ttft_max_s > 0 && row->r.ttft_s > o->ttft_max_s)) {
    res->over_limits++;
    return 0;
  }
  snprintf(row->json, sizeof row->json, "%s", json);
  row->gpus = row->plan.tp * row->plan.pp;
  row->tokens_per_gpu_s = row->r.tokens_per_s / row->gpus;
  if (!row->plan.inflight.on) row->in_flight = row->plan.batch;
  return add_row(res, cap, row) ? ts_fail_sys(e, "out of memory") : 0;
}

int search_infer_run(const search_infer_opts *o, search_infer_result *res, ts_err *e) {
  memset(res, 0, sizeof *res);
  if (!o->model || !o->cluster) return ts_fail(e, NULL, !o->model ? "--model" : "--cluster", "required");
  if (!json_safe(o->model) || !json_safe(o->cluster))
    return ts_fail(e, NULL, !json_safe(o->model) ? "--model" : "--cluster", "a name or path without quotes, "
                   "backslashes or control characters");
  if (o->prompt < 1 || o->generate < 1) return ts_fail(e, NULL, o->prompt < 1 ? "--prompt" : "--generate", "required, >= 1");
  for (int i = 0; i < o->n_batches; i++)
    if (o->batches[i] < (o->inflight ? 0 : 1))
      return ts_fail(e, NULL, "--batches", "%d: want >= 1 (0, the engine's heuristic, only with --inflight)", o->batches[i]);
  if (o->kv_fraction != 0 && !o->inflight) return ts_fail(e, NULL, "--kv-cache-fraction", "goes with --inflight");
  if (o->cuda_graph_set && !o->inflight) return ts_fail(e, NULL, "--cuda-graph-max-batch", "goes with --inflight");
  if (o->cuda_graph_set && (o->cuda_graph_max_batch < 0 || o->cuda_graph_max_batch > 1 << 20))
    return ts_fail(e, NULL, "--cuda-graph-max-batch", "%d: want 0 .. %d", o->cuda_graph_max_batch, 1 << 20);
  static model_config m;
  static topo_cluster cl;
  if (model_load(o->model, NULL, &m, e) || topo_load(o->cluster, NULL, &cl, e)) return -1;
  for (int i = 0; i < o->n_quants; i++)
    if (o->quants[i] == PLAN_QUANT_FP8 && !(cl.gpu.fp8_tflops > 0))
      return ts_fail(e, NULL, "--quantization", "fp8: the %s of %s has no FP8 tensor cores", cl.gpu.name, cl.name);
    else if (o->quants[i] == PLAN_QUANT_NVFP4 && !(cl.gpu.fp4_tflops > 0))
      return ts_fail(e, NULL, "--quantization", "nvfp4: the %s of %s has no FP4 tensor cores (GPU catalogue: "
                     "fp4_tflops 0)", cl.gpu.name, cl.name);
  search_infer_opts d;
  default_lists(o, &d, &cl);
  schema_calibration cal;
  sim_cost_source src;
  if (sim_load_costs(o->calibration, &cl, o->transfer, &cal, &src, e)) return -1;
  snprintf(res->calibration, sizeof res->calibration, "%s", cal.path);
  search_infer_row *row = malloc(sizeof *row);
  engine_seen seen = {0};
  int cap = 0, rc = row ? 0 : ts_fail_sys(e, "out of memory");
  for (int a = 0; !rc && a < d.n_tps; a++)
    for (int b = 0; !rc && b < d.n_pps; b++)
      for (int g = 0; !rc && g < d.n_eps; g++)
        for (int c = 0; !rc && c < d.n_batches; c++)
        for (int k = 0; !rc && k < d.n_kvs; k++)
          for (int q = 0; !rc && q < d.n_quants; q++)
            for (int x = 0; !rc && x < d.n_codecs; x++) {
              char name[128], json[1024];
              if (candidate_json(&d, d.tps[a], d.pps[b], d.eps[g], d.batches[c], d.kvs[k], d.quants[q], d.codecs[x], name,
                                 sizeof name, json, sizeof json)) {
                rc = ts_fail(e, NULL, "--model", "the candidate's plan is longer than %zu bytes", sizeof json);
                break;
              }
              rc = one(&d, &cal, json, name, res, &cap, row, &seen, e);
            }
  free(seen.k);
  free(row);
  schema_calibration_free(&cal);
  if (rc) {
    search_infer_free(res);
    return -1;
  }
  qsort(res->rows, (size_t)res->n_rows, sizeof *res->rows, cmp_rows);
  return 0;
}

void search_infer_free(search_infer_result *res) {
  free(res->rows);
  res->rows = NULL, res->n_rows = 0;
}
