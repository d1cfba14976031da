/* infer_run.c — `tacorun execute INFER_PLAN.json`: prefill and decode of an
 * inference plan on GPUs, timed (see infer_run.h). */
#include "ts_args.h"
#include "infer_run.h"
#include "infer_prof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_infer.h"
#include "plan_infer_policy.h"
#include "result.h"
#include "rt_ops.h"
#include "rt_world.h"
#include "infer_decode.h"
#include "infer_graph.h"

void infer_usage(FILE *out) {
  fprintf(out,
          "usage: mpirun -np TP tacorun execute INFER_PLAN.json... [--json OUT | --json-dir DIR] [--csv OUT]\n"
          "                                     [--warmup N] [--prefill-reps N] [--seed S] [--timeout S]\n"
          "                                     [--transport auto|p2p|shm|socket] [--peak-gbps G]\n"
          "       mpirun -np N tacorun execute --infer-check\n"
          "\n"
          "Serves one batch of an inference plan (\"kind\": \"inference\") for real, one process per GPU\n"
          "of the TP group: a prefill forward pass over the prompts that fills the KV cache (the plan's\n"
          "kv_cache: bf16, or fp8 = E4M3 codes with one FP32 scale per position and KV head, quantized on\n"
          "append, read by the FP8 variant of decode attention v3 (or v2); prefill attention stays BF16), then\n"
          "generate - 1 decode steps (one token per sequence each, attending over the cache), greedy\n"
          "sampling; synthetic weights (fixed seed) and prompt tokens. Llama-, Qwen2- and dense Qwen3-style\n"
          "models (RMSNorm, RoPE, grouped-query attention, SwiGLU, a QKV bias or none, untied head; Qwen3's\n"
          "attention: head_dim other than hidden / heads, Q and the output projection's input heads x head_dim\n"
          "wide, and the QK norm, model qk_norm: each query and key head RMS-normed after the QKV projection,\n"
          "before RoPE, rt_qk_norm_fwd without its saved copy); the plan's layers_override runs fewer layers.\n"
          "TP all-reduces use the plan's codec (TACO two-shot, CAAT-Net partial, both)\n"
          "with the simulator's per-size rule (plan_infer_policy.h): with codec_auto each size (prefill,\n"
          "decode) is timed here with the codec and its fallback and travels the faster way.\n"
          "\n"
          "TTFT: median of --prefill-reps prefills (default 3, after one warm-up prefill). TPOT: median\n"
          "of the decode steps after the first --warmup (default 2). tokens/s = batch x generate /\n"
          "(TTFT + (generate - 1) x TPOT), as the simulator counts it. --json/--csv write the result\n"
          "schema (kind \"inference\", source \"measured\") that `tacosim compare` reads. Several plans\n"
          "(same TP) run one after the other in one launch; --json-dir DIR writes DIR/PLAN_NAME.json each.\n"
          "\n"
          "Decode floor (issue 24): after the TTFT/TPOT line, the bytes one decode step must read on one GPU\n"
          "(plan_infer_decode_floor_bytes, experiments/infer/floor.py's count: the weights streamed, split over\n"
          "TP, and the KV cache at prompt + generate / 2 positions), its time at the HBM rate, the GB/s the TPOT\n"
          "reads at and the floor's time as a %% of the TPOT; also a note of the result file.\n"
          "\n"
          "--infer-check: decode attention (v1, v3, v4, v2 to v5 over the FP8 cache; v2 over BF16: bench-decode;\n"
          "the per-query-head calibration kernel over both caches, infer_decode_pqh.h),\n"
          "RoPE, the QK norm before RoPE (prefill and decode step, head_dim 128), and the FP8 cache's\n"
          "quantize-on-append against the plain-C reference, TP = N against TP = 1\n"
          "logits on a tiny model and a Qwen3-like one (head_dim 128 over hidden / heads 64, the QK norm),\n"
          "prefill of S + 1 tokens against prefill of S plus a decode step (also Qwen2- and Qwen3-style\n"
          "on decode attention v3), and the TACO / CAAT-Net / both all-reduce paths.\n"
          "\n"
          "Refused (exit 2, naming the field): pp > 1 (pipeline stages are not run), kv_cache fp8 with\n"
          "--decode-attention v1, quantization fp8 (FP8 weights and GEMMs: simulator only), inflight (in-flight\n"
          "batching: simulator only), layout.attention_dp / layout.ep (simulator only), prefill_attention\n"
          "other than executor (simulator only), decode_attention other than per-kv-head (simulator only),\n"
          "a TP degree other than the number of processes, non-Llama models.\n"
          "\n"
          "options, inference plans (defaults in brackets):\n"
          "  --warmup N        decode steps before the timed ones [2]\n"
          "  --prefill-reps N  timed prefills, after one warm-up [3]\n"
          "  --seed S          weights and prompt tokens [1234]\n"
          "  --timeout S       bound on every wait, seconds [300]\n"
          "  --peak-gbps G     the HBM rate the decode floor is read at, GB/s [the GPU catalogue's hbm_gbps of\n"
          "                    the device found (topologies/gpus, its device_names), e.g. 4800 for \"NVIDIA H200\";\n"
          "                    a device not in the catalogue: the floor in GB and the achieved GB/s only]\n"
          RT_TRANSPORT_USAGE
          "  NaN/Inf that a TACO encode of a TP all-reduce meets (sent as zeros) stop the run (exit 1),\n"
          "  naming the prefill or decode step (its position), the layer, the all-reduce and the count.\n"
          "  --json OUT        the result (kind \"inference\", source \"measured\") [not written]\n"
          "  --json-dir DIR    DIR/PLAN_NAME.json for each plan (several plans) [not written]\n"
          "  --csv OUT         the result as gnuplot columns [not written]\n"
          "  --ops-csv OUT     after the timed run, the per-op profile (infer_prof.h): CUDA events after each\n"
          "                    op of 3 more prefills and 3 eager decode steps at KV length prompt + generate / 2,\n"
          "                    the mean a pass by op name (\"prefill.qkv\", \"decode.attn\", ...), in the layout of\n"
          "                    `tacosim ops PLAN` (one plan) [not written]\n"
          "  --ops-dir DIR     the same as DIR/PLAN_NAME.ops.txt for each plan [not written]\n"
          "  --infer-check     the inference correctness checks instead of a plan [off]\n"
          "  --decode-graph    also run the decode steps as one CUDA graph launch each (TP 1; captured\n"
          "                    and updated every step, infer_graph.h), from a fresh prefill: prints both\n"
          "                    TPOTs and whether the graph steps' tokens equal the eager ones (with an FNV-1a\n"
          "                    hash of the tokens, to compare runs); the result's\n"
          "                    TPOT is the graph one [off: eager launches]\n"
          "  --decode-attention v1|v2|v3|v4|v5  decode attention over the KV cache: v1 infer_kernels.h, v2 to\n"
          "                    v5 infer_decode.h (v2: 4 positions in flight a warp, CUDA cores; v3: tensor-core mma\n"
          "                    over the query heads of a KV head; v4: v3 with the next tile's loads in flight\n"
          "                    in registers, the same bits, up to 10 %% faster over BF16 on an H100; v5: v4 over\n"
          "                    BF16, over the FP8 cache the cached positions as the mma's rows (head_dim 128,\n"
          "                    1 to 8 query heads a KV head; else v4's); runtime/RESULTS-decode.md) [v%d]\n"
          "reads:  INFER_PLAN.json..., the models and clusters they name\n"
          "writes: TTFT, TPOT and tokens/s on standard output (rank 0); OUT of --json, --csv, --ops-csv, files in\n"
          "        --json-dir and --ops-dir\n",
          INFER_DECODE_DEFAULT);
}

int infer_wants(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--infer-check")) return 1;
    if (argv[i][0] == '-') {
      /* options with a value: skip it */
      if (i + 1 < argc && strcmp(argv[i], "--check") && strcmp(argv[i], "--help") && strcmp(argv[i], "-h")) i++;
      continue;
    }
    bool inf = false;
    ts_err e;
    return plan_file_is_inference(argv[i], &inf, &e) == 0 && inf;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median time of `reps` all-reduces of rows x hidden the way `mode` says, after two warm-ups. */
static int time_ar(rt_nccl *w, infer_model *m, long long rows, infer_ar_mode mode, double *s, ts_err *e) {
  enum { REPS = 7 };
  cudaEvent_t ev[REPS + 1];
  for (int i = 0; i <= REPS; i++) RT_CUDA(e, cudaEventCreate(&ev[i]));
  int rc = -1;
  for (int i = 0; i < 2; i++)
    if (infer_allreduce(m, m->proj, rows, mode, e)) goto out;
  for (int i = 0; i < REPS; i++) {
    if (cudaEventRecord(ev[i], m->stream) != cudaSuccess || infer_allreduce(m, m->proj, rows, mode, e)) goto out;
  }
  RT_CUDA(e, cudaEventRecord(ev[REPS], m->stream));
  if (rt_nccl_wait(w, e)) goto out;
  double t[REPS];
  for (int i = 0; i < REPS; i++) {
    float ms;
    RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    t[i] = ms * 1e-3;
  }
  *s = median(t, REPS);
  rc = 0;
out:
  for (int i = 0; i <= REPS; i++) cudaEventDestroy(ev[i]);
  return rc;
}

static infer_ar_mode mode_of(plan_codec_kind k) {
  switch (k) {
  case PLAN_CODEC_TACO: return INFER_AR_TACO;
  case PLAN_CODEC_CAAT: return INFER_AR_CAAT;
  case PLAN_CODEC_TACO_CAAT: return INFER_AR_TACO_CAAT;
  default: return INFER_AR_PLAIN;
  }
}

int infer_choose_modes(rt_nccl *w, infer_model *m, const plan_codec *c, bool codec_auto, double codec_min_bytes,
                       int prompt, double t[2][2], ts_err *e) {
  m->codec = *c;
  memset(t, 0, 4 * sizeof(double));
  for (int ph = 0; ph < 2; ph++) {
    long long rows = (long long)m->batch * (ph == 0 ? prompt : 1);
    plan_codec fb = plan_infer_fallback_codec(c);
    infer_ar_mode cm = mode_of(c->kind), fm = mode_of(fb.kind);
    /* TACO only on messages of at least codec_min_bytes after CAAT-Net, as the simulator */
    double bytes = (double)rows * m->mc.hidden * 2;
    double shared = plan_codec_has_caat(c->kind) ? bytes * (double)coll_caat_shared((size_t)m->mc.hidden, c->p) /
                                                       m->mc.hidden
                                                 : bytes;
    if (plan_codec_has_taco(c->kind) && shared < codec_min_bytes) cm = fm;
    m->ar_mode[ph] = cm;
    if (!m->team || c->kind == PLAN_CODEC_NONE || !plan_infer_has_fallback(c) || cm == fm) continue;
    /* random payload: TACO must not encode uninitialised bits */
    if (rt_fill_random_bf16(m->proj, rows * m->mc.hidden, 99 + ph, 1.0f, m->stream, e)) return -1;
    double v[2];
    if (time_ar(w, m, rows, cm, &v[0], e) || time_ar(w, m, rows, fm, &v[1], e)) return -1;
    /* every rank must take the same decision: the slowest rank's times */
    if (rt_world_max(w, v, 2, e)) return -1;
    t[ph][0] = v[0], t[ph][1] = v[1];
    m->ar_mode[ph] = plan_infer_use_codec(c, codec_auto, v[0], v[1]) ? cm : fm;
  }
  return 0;
}

#define INFER_MAX_PLANS 64

typedef struct {
  const char *plan_path, *json_out, *csv_out, *json_dir, *ops_out, *ops_dir;
  const char *plans[INFER_MAX_PLANS];
  int n_plans;
  int warmup, prefill_reps, check, timeout_s, decode_graph, decode_attn;
  double peak_gbps; /* --peak-gbps; 0: the GPU catalogue's hbm_gbps of the device */
  coll_transport transport;
  unsigned long long seed;
} infer_opts;

/* TPOT of the decode steps between events ev[0..steps]: the median of those after the first `warmup`. */
static int step_times(cudaEvent_t *ev, int steps, int warmup, double *tp, double *tpot, double *tmin, double *tmax,
                      int *nt, ts_err *e) {
  *nt = 0;
  for (int j = 0; j < steps; j++) {
    float ms;
    if (cudaEventElapsedTime(&ms, ev[j], ev[j + 1]) != cudaSuccess) return ts_fail_sys(e, "cudaEventElapsedTime failed");
    if (j >= warmup || steps <= warmup) tp[(*nt)++] = ms * 1e-3;
  }
  *tpot = *tmin = *tmax = 0;
  if (*nt) {
    *tpot = median(tp, *nt);
    *tmin = tp[0], *tmax = tp[*nt - 1];
  }
  return 0;
}

/* --decode-graph: the decode steps again from a fresh prefill, each one graph launch (infer_graph.h),
 * timed like the eager ones; their tokens (hist[steps..2 steps) x batch) against the eager steps'
 * (hist[0..steps)): *same = 1 when every token agrees; *hash: FNV-1a of the eager tokens (so that
 * runs of other kernels can be compared). */
static int graph_pass(infer_model *m, const plan_infer *p, const infer_opts *o, const int32_t *prompt_tok,
                      cudaEvent_t *ev, double *tp, int32_t *hist, double t[3], int *nt, int *same,
                      unsigned long long *hash, infer_graph *g, ts_err *e) {
  const int steps = p->generate - 1;
  const size_t nb = (size_t)p->batch;
  if (infer_forward(m, prompt_tok, p->prompt, 0, e)) return -1;
  if (cudaEventRecord(ev[0], m->stream) != cudaSuccess) return ts_fail_sys(e, "cudaEventRecord failed");
  for (int j = 0; j < steps; j++) {
    if (infer_decode_graph_step(m, p->prompt + j, g, e)) return -1;
    if (cudaEventRecord(ev[j + 1], m->stream) != cudaSuccess ||
        cudaMemcpyAsync(hist + (size_t)(steps + j) * nb, m->tok, nb * sizeof *hist, cudaMemcpyDeviceToDevice,
                        m->stream) != cudaSuccess)
      return ts_fail_sys(e, "decode graph: event or token copy failed");
  }
  if (cudaStreamSynchronize(m->stream) != cudaSuccess) return ts_fail_sys(e, "decode graph steps failed");
  if (step_times(ev, steps, o->warmup, tp, &t[0], &t[1], &t[2], nt, e)) return -1;
  int32_t *h = malloc(2 * (size_t)steps * nb * sizeof *h);
  if (!h) return ts_fail_sys(e, "out of host memory");
  if (cudaMemcpy(h, hist, 2 * (size_t)steps * nb * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
    free(h);
    return ts_fail_sys(e, "decode graph: token copy failed");
  }
  *same = 1;
  *hash = 14695981039346656037ULL;
  for (size_t i = 0; i < (size_t)steps * nb; i++) {
    if (h[i] != h[(size_t)steps * nb + i]) *same = 0;
    *hash = (*hash ^ (uint32_t)h[i]) * 1099511628211ULL;
  }
  free(h);
  return 0;
}

static int parse(int argc, char **argv, infer_opts *o) {
  *o = (infer_opts){.warmup = 2, .prefill_reps = PLAN_INFER_PREFILL_REPS, .timeout_s = 300, .seed = 1234,
                    .decode_attn = INFER_DECODE_DEFAULT};
  const ts_arg_flag flags[] = {{"--infer-check", &o->check}, {"--decode-graph", &o->decode_graph}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ts_arg_is_help(a)) {
      infer_usage(stdout);
      return 0;
    } else if (ts_arg_set_flag(a, flags, sizeof flags / sizeof *flags)) {
      continue;
    } else if (i + 1 < argc && !strcmp(a, "--decode-attention")) {
      const char *v = argv[++i];
      if (strcmp(v, "v1") && strcmp(v, "v2") && strcmp(v, "v3") && strcmp(v, "v4") && strcmp(v, "v5")) {
        fprintf(stderr, "tacorun execute: --decode-attention: '%s' must be v1, v2, v3, v4 or v5\n", v);
        return 2;
      }
      o->decode_attn = v[1] - '0';
    } else if (i + 1 < argc && (!strcmp(a, "--warmup") || !strcmp(a, "--prefill-reps") || !strcmp(a, "--timeout"))) {
      int v;
      int lo = !strcmp(a, "--warmup") ? 0 : 1;
      if (ts_arg_int(argv[++i], lo, 86400, &v)) {
        fprintf(stderr, "tacorun execute: %s: '%s' is not a valid count\n", a, argv[i]);
        return 2;
      }
      if (!strcmp(a, "--warmup")) o->warmup = v;
      else if (!strcmp(a, "--prefill-reps")) o->prefill_reps = v;
      else o->timeout_s = v;
    } else if (i + 1 < argc && !strcmp(a, "--transport")) {
      ts_err te;
      if (rt_transport_arg(argv[++i], &o->transport, &te)) {
        fprintf(stderr, "tacorun execute: %s\n", te.msg);
        return 2;
      }
    } else if (i + 1 < argc && !strcmp(a, "--peak-gbps")) {
      if (ts_arg_double(argv[++i], 1e-3, 1e6, &o->peak_gbps)) {
        fprintf(stderr, "tacorun execute: --peak-gbps: '%s' must be a rate in GB/s, > 0\n", argv[i]);
        return 2;
      }
    } else if (i + 1 < argc && !strcmp(a, "--seed")) {
      o->seed = strtoull(argv[++i], NULL, 10);
    } else if (i + 1 < argc && !strcmp(a, "--json")) {
      o->json_out = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--json-dir")) {
      o->json_dir = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--csv")) {
      o->csv_out = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--ops-csv")) {
      o->ops_out = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--ops-dir")) {
      o->ops_dir = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "tacorun execute: option '%s' does not apply to inference plans (or lacks its value)\n", a);
      infer_usage(stderr);
      return 2;
    } else if (o->n_plans < INFER_MAX_PLANS) {
      o->plans[o->n_plans++] = a;
      o->plan_path = o->plans[0];
    } else {
      fprintf(stderr, "tacorun execute: more than %d plans given ('%s')\n", INFER_MAX_PLANS, a);
      return 2;
    }
  }
  if (o->n_plans > 1 && (o->json_out || o->csv_out || o->ops_out)) {
    fprintf(stderr, "tacorun execute: with several plans use --json-dir DIR and --ops-dir DIR (a file each)\n");
    return 2;
  }
  if (!o->check && !o->plan_path) {
    infer_usage(stderr);
    return 2;
  }
  return -1; /* go on */
}

/* What the executor refuses, before any GPU is touched. */
static int plan_runnable(const plan_infer *p, const infer_opts *o, ts_err *e) {
  if (p->pp != 1)
    return ts_fail(e, p->path, "layout.pp", "%d: pipeline stages are not run by the inference executor (pp 1 only)",
                   p->pp);
  if (p->kv == PLAN_KV_FP8 && o->decode_attn < 2)
    return ts_fail(e, p->path, "kv_cache", "fp8 is read by decode attention v2 to v5 only (--decode-attention v1 "
                   "asked)");
  if (p->attention_dp || p->ep > 1)
    return ts_fail(e, p->path, p->attention_dp ? "layout.attention_dp" : "layout.ep", "the inference executor runs "
                   "tensor parallelism only; attention data parallelism and expert parallelism are predicted by tacosim "
                   "only (sim/INFERENCE.md, \"Attention data parallelism\")");
  if (p->inflight.on)
    return ts_fail(e, p->path, "inflight", "the inference executor serves one static batch (batch.size); in-flight "
                   "batching is predicted by tacosim only (sim/INFERENCE.md, \"In-flight batching\")");
  if (p->quant != PLAN_QUANT_NONE)
    return ts_fail(e, p->path, "quantization", "%s: the inference executor runs BF16 weights and GEMMs only "
                   "(tacosim predicts FP8 serving: sim/INFERENCE.md, \"FP8 weights\")", plan_infer_quant_name(p->quant));
  if (p->prefill_attention != PLAN_PREFILL_ATTN_EXECUTOR)
    return ts_fail(e, p->path, "prefill_attention", "%s: the inference executor runs its own prefill attention "
                   "(\"executor\", the default)", plan_prefill_attention_name(p->prefill_attention));
  if (p->decode_attention != PLAN_DECODE_ATTN_PER_KV_HEAD)
    return ts_fail(e, p->path, "decode_attention", "%s: the inference executor reads each KV head once for its query "
                   "heads (\"per-kv-head\", the default)", plan_decode_attention_name(p->decode_attention));
  if (infer_model_supported(&p->model, p->path, e)) return -1;
  const int g = p->model.heads / p->model.kv_heads;
  if (!infer_decode_groups_built(o->decode_attn, model_head_dim(&p->model), g))
    return ts_fail(e, p->path, "model", "%s has %d query heads per KV head: decode attention v%d is built for powers "
                   "of 2 up to 16 (v3 runs it)", p->model.name, g, o->decode_attn);
  return 0;
}

/* What the steps of one timed plan share: the TP team, the model, the
 * events and times, and the figures measured. */
typedef struct {
  rt_nccl *w;
  const plan_infer *p;
  const infer_opts *o;
  int root, steps; /* steps: decode steps (generate - 1) */
  coll_team team;
  int team_ready, model_ready;
  infer_model m;
  int32_t *prompt_tok, *hist; /* hist: --decode-graph's token history */
  infer_graph graph;
  cudaEvent_t *ev; /* [0..steps]: around the decode steps; [steps + 1], [steps + 2]: around a prefill */
  double *tp;      /* times of the prefills or of the decode steps */
  double t_ar[2][2];
  double ttft, ttft_min, ttft_max, tpot, tpot_min, tpot_max, tpot_eager;
  char prefill_order[400]; /* the timed prefills in the order they ran, ms (printed: a clock drift shows there) */
  double prefill_t0;       /* wall clock (Unix s) when the first timed prefill was issued: to align a clock log */
  int nt; /* decode steps timed */
  int graph_same;
  unsigned long long tok_hash;
  double total, tps;
  plan_infer_memory mem;
  double used_bytes; /* GPU memory in use after the timed steps (cudaMemGetInfo), the largest rank */
  /* the decode step's read floor on one GPU (plan_infer_decode_floor_bytes; floor_ok 0: not counted, an MoE
   * model) and the HBM rate it is read at (peak_gbps 0: unknown, the device not in the GPU catalogue) */
  int floor_ok;
  double floor_w, floor_kv, peak_gbps;
  char peak_src[96]; /* where peak_gbps comes from; the device's name when unknown */
} infer_timed;

/* The decode floor's bytes, and the HBM rate: --peak-gbps, else the GPU catalogue's entry whose device_names
 * holds this device's name (the compiled-in catalogue, else ./topologies/gpus, as the plans' models are found). */
static void decode_floor(infer_timed *t) {
  ts_err fe;
  t->floor_ok = plan_infer_decode_floor_bytes(t->p, &t->floor_w, &t->floor_kv, &fe) == 0;
  t->peak_gbps = 0;
  if (!t->floor_ok) return;
  if (t->o->peak_gbps > 0) {
    t->peak_gbps = t->o->peak_gbps;
    snprintf(t->peak_src, sizeof t->peak_src, "--peak-gbps");
    return;
  }
  schema_machine mc;
  rt_machine_of(t->w, &mc);
  topo_gpu g;
  if (topo_gpu_find_device(mc.gpu, NULL, &g, &fe) == 0 || topo_gpu_find_device(mc.gpu, "topologies/gpus", &g, &fe) == 0) {
    t->peak_gbps = g.hbm_gbps;
    snprintf(t->peak_src, sizeof t->peak_src, "%s's datasheet HBM rate, GPU catalogue", g.name);
  } else {
    snprintf(t->peak_src, sizeof t->peak_src, "%s", mc.gpu);
  }
}

/* The decode floor line (and the result's note): the bytes, the floor's time at the HBM rate, the GB/s the
 * TPOT reads at and the floor's time as a % of the TPOT (experiments/infer/floor.py's "% of floor"). */
static void floor_text(const infer_timed *t, char *out, size_t cap) {
  const double fl = t->floor_w + t->floor_kv;
  size_t at = (size_t)snprintf(out, cap, "decode floor: %.2f GB weights + %.2f GB KV cache a step (per GPU)",
                               t->floor_w / 1e9, t->floor_kv / 1e9);
  const double floor_s = t->peak_gbps > 0 ? fl / (t->peak_gbps * 1e9) : 0;
  if (at < cap && t->peak_gbps > 0)
    at += (size_t)snprintf(out + at, cap - at, ", %.3f ms at %.0f GB/s (%s)", floor_s * 1e3, t->peak_gbps,
                           t->peak_src);
  if (at < cap && t->tpot > 0) {
    at += (size_t)snprintf(out + at, cap - at, "; TPOT reads at %.0f GB/s", fl / t->tpot / 1e9);
    if (at < cap && t->peak_gbps > 0)
      at += (size_t)snprintf(out + at, cap - at, " = %.1f %% of the floor", 100 * floor_s / t->tpot);
  } else if (at < cap) {
    at += (size_t)snprintf(out + at, cap - at, "; no decode step timed");
  }
  if (at < cap && t->peak_gbps <= 0)
    snprintf(out + at, cap - at, "; the HBM rate is unknown (\"%s\" is not in the GPU catalogue; --peak-gbps G "
             "gives it)", t->peak_src);
}

/* The TP team, the model with its all-reduce modes, the prompt tokens and the events. */
static int timed_setup(infer_timed *t, ts_err *e) {
  rt_nccl *w = t->w;
  const plan_infer *p = t->p;
  const infer_opts *o = t->o;
  const int steps = t->steps;
  t->ev = calloc((size_t)(steps + 1) + 2, sizeof *t->ev);
  t->tp = calloc((size_t)(steps + 1) + (size_t)o->prefill_reps, sizeof *t->tp);
  if (!t->ev || !t->tp) return ts_fail_sys(e, "out of host memory");
  if (p->tp > 1) {
    if (coll_team_init(&t->team, 1, &w->comms[0], &w->devices[0], &w->streams[0]))
      return ts_fail_sys(e, "coll_team_init: %s", coll_last_error());
    t->team_ready = 1;
  }
  infer_model_opts mo = {.batch = p->batch, .max_prompt = p->prompt, .max_seq = p->prompt + p->generate,
                         .seed = o->seed, .decode_attn = o->decode_attn, .kv_fp8 = p->kv == PLAN_KV_FP8};
  if (infer_model_init(&t->m, &p->model, p->model.layers, p->tp, w->ranks[0], &mo, t->team_ready ? &t->team : NULL,
                       w->streams[0], e))
    return -1;
  t->model_ready = 1;
  if (infer_choose_modes(w, &t->m, &p->codec, p->codec_auto, p->codec_min_bytes, p->prompt, t->t_ar, e)) return -1;
  if (cudaMalloc((void **)&t->prompt_tok, (size_t)p->batch * p->prompt * sizeof(int32_t)) != cudaSuccess)
    return ts_fail_sys(e, "cannot allocate the prompt tokens");
  if (rt_fill_labels(t->prompt_tok, (long long)p->batch * p->prompt, p->model.vocab, o->seed + 7, t->m.stream, e))
    return -1;
  for (int i = 0; i < steps + 3; i++)
    if (cudaEventCreate(&t->ev[i]) != cudaSuccess) return ts_fail_sys(e, "cudaEventCreate failed");
  return 0;
}

/* Warm-up (one prefill and up to two decode steps: cuBLASLt heuristics,
 * NCCL buffers), then TTFT: prefills, each timed alone. */
static int timed_ttft(infer_timed *t, ts_err *e) {
  rt_nccl *w = t->w;
  const plan_infer *p = t->p;
  const infer_opts *o = t->o;
  infer_model *m = &t->m;
  const int steps = t->steps;
  if (infer_forward(m, t->prompt_tok, p->prompt, 0, e)) return -1;
  for (int j = 0; j < steps && j < PLAN_INFER_WARMUP_DECODE; j++)
    if (infer_forward(m, m->tok, 1, p->prompt + j, e)) return -1;
  if (rt_nccl_wait(w, e) || infer_model_check_finite(m, e)) return -1;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  t->prefill_t0 = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
  for (int r = 0; r < o->prefill_reps; r++) {
    if (cudaEventRecord(t->ev[steps + 1], m->stream) != cudaSuccess ||
        infer_forward(m, t->prompt_tok, p->prompt, 0, e) || cudaEventRecord(t->ev[steps + 2], m->stream) != cudaSuccess ||
        rt_nccl_wait(w, e) || infer_model_check_finite(m, e))
      return -1;
    float ms;
    if (cudaEventElapsedTime(&ms, t->ev[steps + 1], t->ev[steps + 2]) != cudaSuccess)
      return ts_fail_sys(e, "cudaEventElapsedTime failed");
    t->tp[r] = ms * 1e-3;
  }
  size_t at = 0;
  t->prefill_order[0] = 0;
  for (int r = 0; r < o->prefill_reps && at + 16 < sizeof t->prefill_order; r++)
    at += (size_t)snprintf(t->prefill_order + at, sizeof t->prefill_order - at, "%s%.3f", r ? " " : "", t->tp[r] * 1e3);
  t->ttft = median(t->tp, o->prefill_reps), t->ttft_min = t->tp[0], t->ttft_max = t->tp[o->prefill_reps - 1];
  return 0;
}

/* TPOT: the decode steps back to back, one event between consecutive steps;
 * with --decode-graph again as graph launches (their TPOT is the one reported). */
static int timed_tpot(infer_timed *t, ts_err *e) {
  const plan_infer *p = t->p;
  const infer_opts *o = t->o;
  infer_model *m = &t->m;
  const int steps = t->steps;
  if (o->decode_graph) {
    if (p->tp != 1) return ts_fail(e, NULL, "--decode-graph", "runs at TP 1 only (plan TP %d)", p->tp);
    if (steps < 1 || cudaMalloc((void **)&t->hist, 2 * (size_t)steps * p->batch * sizeof *t->hist) != cudaSuccess)
      return ts_fail_sys(e, "--decode-graph: no decode steps, or cannot allocate the token history");
  }
  if (cudaEventRecord(t->ev[0], m->stream) != cudaSuccess) return -1;
  for (int j = 0; j < steps; j++) {
    if (infer_forward(m, m->tok, 1, p->prompt + j, e) || cudaEventRecord(t->ev[j + 1], m->stream) != cudaSuccess)
      return -1;
    if (t->hist && cudaMemcpyAsync(t->hist + (size_t)j * p->batch, m->tok, (size_t)p->batch * sizeof *t->hist,
                                   cudaMemcpyDeviceToDevice, m->stream) != cudaSuccess)
      return ts_fail_sys(e, "--decode-graph: token copy failed");
  }
  if (rt_nccl_wait(t->w, e) || infer_model_check_finite(m, e)) return -1;
  t->nt = 0;
  t->tpot = 0, t->tpot_min = 0, t->tpot_max = 0;
  if (step_times(t->ev, steps, o->warmup, t->tp, &t->tpot, &t->tpot_min, &t->tpot_max, &t->nt, e)) return -1;
  t->tpot_eager = t->tpot;
  t->graph_same = -1;
  t->tok_hash = 0;
  if (o->decode_graph) {
    double tg[3];
    int graph_nt = 0;
    if (graph_pass(m, p, o, t->prompt_tok, t->ev, t->tp, t->hist, tg, &graph_nt, &t->graph_same, &t->tok_hash,
                   &t->graph, e))
      return -1;
    t->tpot = tg[0], t->tpot_min = tg[1], t->tpot_max = tg[2], t->nt = graph_nt;
  }
  return 0;
}

/* --ops-csv / --ops-dir: the per-op profile, after the timed passes (their figures are timed without events): 3
 * prefills, then 3 eager decode steps at the position whose KV length is the simulator's mean over the steps,
 * prompt + (generate - 1 + 1) / 2 (the step rewrites that one position each time). Every rank runs the passes;
 * rank 0 writes the file. */
#define INFER_PROF_PASSES 3
static int timed_ops(infer_timed *t, const char *path, ts_err *e) {
  const plan_infer *p = t->p;
  infer_model *m = &t->m;
  infer_prof pr;
  if (infer_prof_init(&pr, 24 * m->layers + 16, e)) return -1;
  m->prof = &pr;
  int rc = -1;
  const long long pos = (long long)p->prompt + (t->steps + 1) / 2 - 1;
  for (int r = 0; r < INFER_PROF_PASSES; r++)
    if (infer_prof_start(&pr, m->stream, e) || infer_forward(m, t->prompt_tok, p->prompt, 0, e) ||
        infer_prof_stop(&pr, "prefill", m->stream, e))
      goto out;
  for (int r = 0; t->steps > 0 && r < INFER_PROF_PASSES; r++)
    if (infer_prof_start(&pr, m->stream, e) || infer_forward(m, m->tok, 1, pos, e) ||
        infer_prof_stop(&pr, "decode", m->stream, e))
      goto out;
  if (rt_nccl_wait(t->w, e) || infer_model_check_finite(m, e)) goto out;
  char header[512];
  snprintf(header, sizeof header, "rank 0, measured, %s: one prefill of %d x %d tokens, one eager decode step at KV "
           "length %lld, decode attention v%d", p->name, p->batch, p->prompt, pos + 1, t->o->decode_attn);
  const double timed[2] = {t->ttft, t->tpot_eager};
  rc = t->root ? infer_prof_write(&pr, INFER_PROF_PASSES, header, timed, path, e) : 0;
out:
  m->prof = NULL;
  infer_prof_free(&pr);
  return rc;
}

/* Rank 0's figures on stdout. */
static void timed_print(const infer_timed *t) {
  rt_nccl *w = t->w;
  const plan_infer *p = t->p;
  const infer_opts *o = t->o;
  const infer_model *m = &t->m;
  const int steps = t->steps;
  printf("# %s: %s, TP %d, batch %d, prompt %d, generate %d, %d layers, codec %s\n", p->name, p->model.name, p->tp,
         p->batch, p->prompt, p->generate, p->model.layers, plan_codec_kind_name(p->codec.kind));
  printf("# decode attention v%d\n", o->decode_attn);
  printf("# KV cache %s: %.3f GB allocated per GPU (%s), plan's accounting %.3f GB\n", plan_kv_precision_name(p->kv),
         m->kv_bytes / 1e9, p->kv == PLAN_KV_FP8 ? "E4M3 codes + an FP32 scale per position and KV head" : "BF16",
         t->mem.kv_cache / 1e9);
  printf("# transport %s; all-reduce modes: prefill %s, decode %s", rt_nccl_transport(w),
         infer_ar_mode_name(m->ar_mode[0]), infer_ar_mode_name(m->ar_mode[1]));
  for (int ph = 0; ph < 2; ph++)
    if (t->t_ar[ph][0] > 0)
      printf("; %s codec %.1f us vs fallback %.1f us", ph ? "decode" : "prefill", t->t_ar[ph][0] * 1e6,
             t->t_ar[ph][1] * 1e6);
  printf("\n");
  printf("ttft_s %.6f (min %.6f max %.6f over %d)  tpot_s %.6f (min %.6f max %.6f over %d steps after %d)  "
         "tokens_per_s %.1f\n",
         t->ttft, t->ttft_min, t->ttft_max, o->prefill_reps, t->tpot, t->tpot_min, t->tpot_max, t->nt, steps - t->nt,
         t->tps);
  if (t->floor_ok) {
    char fl[512];
    floor_text(t, fl, sizeof fl);
    printf("%s\n", fl);
  }
  printf("prefill times in order (ms; the first issued at Unix time %.3f s): %s\n", t->prefill_t0, t->prefill_order);
  printf("memory: GPU memory in use %.3f GiB (cudaMemGetInfo, the largest rank), the plan's model %.3f GiB (weights "
         "%.3f, KV cache %.3f, activations %.3f, runtime and NCCL %.3f): %+.1f%%\n", t->used_bytes / 1073741824.0,
         t->mem.total / 1073741824.0, t->mem.weights / 1073741824.0, t->mem.kv_cache / 1073741824.0,
         t->mem.activations / 1073741824.0, t->mem.overhead / 1073741824.0,
         t->used_bytes > 0 ? 100 * (t->mem.total / t->used_bytes - 1) : 0.0);
  if (o->decode_graph)
    printf("decode graph: tpot_s %.6f (one graph launch a step; %d instantiation(s), %d update(s)) against eager "
           "tpot_s %.6f: %+.1f%%; graph tokens equal to eager: %s (%d steps x batch %d; FNV-1a %016llx)\n",
           t->tpot, t->graph.instantiations, t->graph.updates, t->tpot_eager, 100 * (t->tpot / t->tpot_eager - 1),
           t->graph_same == 1 ? "yes" : "NO", steps, p->batch, t->tok_hash);
}

/* Rank 0's result (kind "inference", source "measured"), saved where asked. */
static int timed_save(const infer_timed *t, const char *json_out, ts_err *e) {
  const plan_infer *p = t->p;
  const infer_opts *o = t->o;
  const int steps = t->steps, nt = t->nt;
  schema_result res;
  schema_result_init(&res, SCHEMA_SOURCE_MEASURED);
  snprintf(res.plan, sizeof res.plan, "%s", p->name);
  snprintf(res.kind, sizeof res.kind, "inference");
  res.ttft_s = t->ttft, res.tpot_s = t->tpot;
  res.iteration_time_s = t->total, res.tokens_per_s = t->tps;
  res.memory_per_gpu_bytes = t->used_bytes; /* measured; the model's figure goes into a note */
  res.iterations = nt > 0 ? nt : 1, res.warmup = steps - nt;
  res.min_s = nt ? t->tpot_min : 0, res.median_s = t->tpot, res.max_s = nt ? t->tpot_max : 0;
  if (res.median_s < res.min_s) res.min_s = res.median_s;
  if (res.max_s < res.median_s) res.max_s = res.median_s;
  rt_machine_of(t->w, &res.machine);
  snprintf(res.options, sizeof res.options, "--warmup %d --prefill-reps %d --seed %llu --decode-attention v%d%s",
           o->warmup, o->prefill_reps, o->seed, o->decode_attn, o->decode_graph ? " --decode-graph" : "");
  if (t->peak_gbps > 0) {
    size_t at = strlen(res.options);
    snprintf(res.options + at, sizeof res.options - at, " --peak-gbps %g", t->peak_gbps);
  }
  char note[256];
  snprintf(note, sizeof note, "all-reduce modes: prefill %s, decode %s; min/median/max are of TPOT",
           infer_ar_mode_name(t->m.ar_mode[0]), infer_ar_mode_name(t->m.ar_mode[1]));
  schema_result_add_note(&res, note);
  snprintf(note, sizeof note, "--decode-attention v%d; kv_cache %s, %.0f bytes allocated per GPU", o->decode_attn,
           plan_kv_precision_name(p->kv), t->m.kv_bytes);
  schema_result_add_note(&res, note);
  snprintf(note, sizeof note, "memory: GPU memory in use after the timed steps (cudaMemGetInfo, the largest rank) %.0f "
           "bytes; the plan's model %.0f (weights %.0f, KV cache %.0f, activations %.0f, runtime and NCCL %.0f)",
           t->used_bytes, t->mem.total, t->mem.weights, t->mem.kv_cache, t->mem.activations, t->mem.overhead);
  schema_result_add_note(&res, note);
  snprintf(note, sizeof note, "ttft over %d prefills: min %.6f s, max %.6f s", o->prefill_reps, t->ttft_min,
           t->ttft_max);
  schema_result_add_note(&res, note);
  if (o->decode_graph) {
    snprintf(note, sizeof note, "--decode-graph: TPOT of one graph launch a step; eager TPOT %.6f s; tokens equal",
             t->tpot_eager);
    schema_result_add_note(&res, note);
  }
  if (t->floor_ok) {
    char fl[512];
    floor_text(t, fl, sizeof fl);
    snprintf(note, sizeof note, "%.255s", fl);
    schema_result_add_note(&res, note);
  }
  rt_note_env(&res);
  rt_note_transport(&res, t->w);
  int bad = (json_out && schema_result_save_json(&res, json_out, e)) ||
            (o->csv_out && schema_result_save_csv(&res, o->csv_out, e));
  schema_result_free(&res);
  return bad ? -1 : 0;
}

static int run_timed(rt_nccl *w, const plan_infer *p, const infer_opts *o, ts_err *e) {
  infer_timed t;
  memset(&t, 0, sizeof t);
  t.w = w, t.p = p, t.o = o;
  t.root = rt_nccl_is_root(w);
  t.steps = p->generate - 1;
  int rc = -1;
  if (timed_setup(&t, e) || timed_ttft(&t, e) || timed_tpot(&t, e)) goto fail;
  char ops_path[1024] = "";
  if (o->ops_dir) snprintf(ops_path, sizeof ops_path, "%s/%s.ops.txt", o->ops_dir, p->name);
  else if (o->ops_out) snprintf(ops_path, sizeof ops_path, "%s", o->ops_out);
  if (ops_path[0] && timed_ops(&t, ops_path, e)) goto fail;
  /* the slowest rank's figures (they wait on each other every layer, so these agree closely) */
  double v[2] = {t.ttft, t.tpot};
  if (rt_world_max(w, v, 2, e)) goto fail;
  t.ttft = v[0], t.tpot = v[1];
  t.total = t.ttft + t.steps * t.tpot, t.tps = (double)p->batch * p->generate / t.total;
  if (plan_infer_memory_per_gpu(p, &t.mem)) memset(&t.mem, 0, sizeof t.mem);
  { /* every buffer is allocated once before the timed steps, so what is in use now is the run's peak */
    size_t free_b = 0, total_b = 0;
    RT_CUDA(e, cudaMemGetInfo(&free_b, &total_b));
    t.used_bytes = (double)(total_b - free_b);
    if (rt_world_max(w, &t.used_bytes, 1, e)) goto fail;
  }
  decode_floor(&t);
  if (t.root) timed_print(&t);
  if (o->decode_graph && t.graph_same != 1) {
    ts_fail(e, NULL, "--decode-graph", "the graph decode steps' tokens differ from the eager steps'");
    goto fail;
  }
  char dir_json[1024] = "";
  if (o->json_dir) snprintf(dir_json, sizeof dir_json, "%s/%s.json", o->json_dir, p->name);
  const char *json_out = o->json_dir ? dir_json : o->json_out;
  if (t.root && (json_out || o->csv_out) && timed_save(&t, json_out, e)) goto fail;
  rc = 0;
fail:
  if (t.ev)
    for (int i = 0; i < t.steps + 3; i++)
      if (t.ev[i]) cudaEventDestroy(t.ev[i]);
  free(t.ev), free(t.tp);
  if (t.prompt_tok) cudaFree(t.prompt_tok);
  if (t.hist) cudaFree(t.hist);
  infer_graph_free(&t.graph);
  if (t.model_ready) infer_model_free(&t.m);
  if (t.team_ready && coll_team_destroy(&t.team)) fprintf(stderr, "tacorun execute: the TP team: %s\n", coll_last_error());
  return rc;
}

int infer_execute(int argc, char **argv) {
  infer_opts o;
  int st = parse(argc, argv, &o);
  if (st >= 0) return st;
  ts_err e;
  static plan_infer plans[INFER_MAX_PLANS];
  /* every plan is read and checked before a GPU is touched */
  for (int i = 0; !o.check && i < o.n_plans; i++) {
    plan_infer *p = &plans[i];
    if (plan_infer_load(o.plans[i], NULL, NULL, p, &e) && plan_infer_load(o.plans[i], "models", "topologies", p, &e)) {
      fprintf(stderr, "tacorun execute: %s\n", e.msg);
      return ts_exit_status(&e);
    }
    if (plan_runnable(p, &o, &e)) {
      fprintf(stderr, "tacorun execute: %s\n", e.msg);
      return 2;
    }
    if (p->tp != plans[0].tp) {
      fprintf(stderr, "tacorun execute: %s: layout.tp: %d differs from the first plan's %d (one TP group per run)\n",
              p->path, p->tp, plans[0].tp);
      return 2;
    }
  }
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun execute: no CUDA device\n");
    return 1;
  }
  rt_nccl w;
  int started = rt_world_start(&w, "execute", o.timeout_s, o.transport);
  if (started) return started;
  if (!o.check && plans[0].tp != w.nranks) {
    fprintf(stderr, "tacorun execute: %s: layout.tp: %d, but %d processes were started (run mpirun -np %d)\n",
            plans[0].path, plans[0].tp, w.nranks, plans[0].tp);
    rt_nccl_finalize(&w, 0);
    return 2;
  }
  rt_watchdog_arm(&w, 4.0 * w.timeout_s, o.check ? "execute --infer-check" : "execute (inference)");
  int rc = 0;
  if (o.check)
    rc = infer_run_check(&w, &e);
  else
    for (int i = 0; i < o.n_plans && rc == 0; i++) rc = run_timed(&w, &plans[i], &o, &e);
  if (rc == 0) rt_watchdog_disarm();
  if (rc) fprintf(stderr, "tacorun execute: rank %d: %s\n", w.ranks[0], e.msg);
  rt_nccl_finalize(&w, rc != 0);
  return rc ? (ts_exit_status(&e) ? ts_exit_status(&e) : 1) : 0;
}
