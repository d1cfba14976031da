/* bench_decode_step_grid.c — the plain-C half of `tacorun bench-decode-step` (bench_decode_step_grid.h). */
#include "bench_decode_step_grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_decode.h" /* INFER_DECODE_DEFAULT only (a macro; nothing of CUDA) */
#include "plan_infer.h"
#include "ts_args.h"

#define CMD "tacorun bench-decode-step"

void dgrid_usage(FILE *out) {
  fprintf(out,
          "usage: tacorun bench-decode-step [--model NAME] [--tp 1] [--kv-cache bf16|fp8] [--batches LIST]\n"
          "                                 [--kv LIST] [--steps N] [--warmup N] [--decode-attention v1..v5]\n"
          "                                 [--eager] [--peak-gbps G] [--csv FILE] [--seed S]\n"
          "\n"
          "Times the inference executor's whole decode step (runtime/infer/infer_model.c, infer_forward of one\n"
          "token a sequence, as `tacorun execute` runs it) over a batch x KV-length grid on one GPU, against the\n"
          "step's read floor (issue 24: time per output token >= %.0f %% of the weight + KV-cache read floor at\n"
          "batch 1-64 and KV lengths 128-8,192). For each batch the executor's model is built once, at the\n"
          "largest KV length of the list that fits the GPU's free memory (the executor's memory model plus this\n"
          "benchmark's scratch, computed first: points that do not fit are skipped with a line saying so), its\n"
          "cache filled with random head vectors (BF16, or FP8 through the executor's quantizer); at each KV\n"
          "length L the step runs at position L - 1, so its attention reads exactly L positions. Each point:\n"
          "--warmup steps, then --steps steps, a CUDA event after each; the median step time.\n"
          "Per point (one row, nccl-tests' columns): batch, kv, step_us, floor_gb (plan_infer_decode_floor_bytes\n"
          "at that batch and KV length: the weights streamed + the KV cache read, the count `execute` prints),\n"
          "GB/s (floor bytes / step time), %% of floor (the floor's time at the HBM rate / the step time) and\n"
          "whether it is >= %.0f %%; then a summary (min / median / max %% of floor, points >= %.0f %%).\n"
          "\n"
          "options (defaults in brackets):\n"
          "  --model NAME        a zoo model or a model file; dense, as `execute` runs it [llama3-8b]\n"
          "  --tp N              tensor-parallel degree: 1 only (one GPU; others exit 2) [1]\n"
          "  --kv-cache bf16|fp8 the KV cache: BF16, or E4M3 codes + an FP32 scale a position and KV head [bf16]\n"
          "  --batches LIST      batch sizes, strictly increasing, each in [1, 4096] [1,2,4,8,16,32,64]\n"
          "  --kv LIST           KV lengths, strictly increasing, each in [1, 1048576]\n"
          "                      [128,256,512,1024,2048,4096,8192]\n"
          "  --steps N           timed decode steps a point, >= 1 [20]\n"
          "  --warmup N          decode steps before them, untimed [5]\n"
          "  --decode-attention v1|v2|v3|v4|v5  the decode attention (as `execute`; fp8 needs v2 to v5) [v%d]\n"
          "  --eager             one launch a kernel [off: each step one CUDA graph launch, captured and updated\n"
          "                      every step as `execute --decode-graph` does, infer_graph.h]\n"
          "  --peak-gbps G       the HBM rate the floor is read at, GB/s [the GPU catalogue's hbm_gbps of the\n"
          "                      device found (topologies/gpus, its device_names); a device not in the\n"
          "                      catalogue: GB/s only, %% of floor \"n/a\"]\n"
          "  --csv FILE          the same rows as CSV [not written]\n"
          "  --seed S            weights, cache contents and first tokens [1234]\n"
          "reads:  the model zoo (--model), the GPU catalogue (topologies/gpus)\n"
          "writes: the table and the summary on standard output; FILE of --csv\n",
          DGRID_TARGET_PCT, DGRID_TARGET_PCT, DGRID_TARGET_PCT, INFER_DECODE_DEFAULT);
}

/* A strictly increasing comma list in [lo, hi]; the count, or -1. */
static int increasing_list(const char *s, long long lo, long long hi, long long *v) {
  int n = ts_arg_ll_list(s, lo, hi, v, DGRID_MAX_POINTS);
  for (int i = 1; i < n; i++)
    if (v[i] <= v[i - 1]) return -1;
  return n;
}

static int bad(FILE *err, const char *opt, const char *val, const char *what) {
  fprintf(err, CMD ": %s: '%s' %s\n", opt, val, what);
  return 2;
}

int dgrid_parse(int argc, char **argv, dgrid_opts *o, FILE *out, FILE *err) {
  *o = (dgrid_opts){.model = "llama3-8b", .tp = 1, .steps = 20, .warmup = 5, .decode_attn = INFER_DECODE_DEFAULT,
                    .seed = 1234};
  const char *batches = "1,2,4,8,16,32,64", *kv = "128,256,512,1024,2048,4096,8192";
  const ts_arg_flag flags[] = {{"--eager", &o->eager}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (ts_arg_is_help(a)) {
      dgrid_usage(out);
      return 0;
    }
    if (ts_arg_set_flag(a, flags, 1)) continue;
    if (!v || a[0] != '-' || a[1] != '-') {
      fprintf(err, CMD ": unknown option or missing value: %s\n", a);
      dgrid_usage(err);
      return 2;
    }
    i++;
    if (!strcmp(a, "--model")) {
      o->model = v;
    } else if (!strcmp(a, "--tp")) {
      if (ts_arg_int(v, 1, 1 << 20, &o->tp)) return bad(err, a, v, "is not a whole number >= 1");
      if (o->tp != 1)
        return bad(err, a, v, "is not 1: the decode step is timed on one GPU (TP > 1: `tacorun execute` on a plan)");
    } else if (!strcmp(a, "--kv-cache")) {
      if (strcmp(v, "bf16") && strcmp(v, "fp8")) return bad(err, a, v, "must be bf16 or fp8");
      o->kv_fp8 = !strcmp(v, "fp8");
    } else if (!strcmp(a, "--batches")) {
      batches = v;
    } else if (!strcmp(a, "--kv")) {
      kv = v;
    } else if (!strcmp(a, "--steps") || !strcmp(a, "--warmup")) {
      int n;
      if (ts_arg_int(v, !strcmp(a, "--steps"), 100000, &n)) return bad(err, a, v, "is not a valid count");
      *(!strcmp(a, "--steps") ? &o->steps : &o->warmup) = n;
    } else if (!strcmp(a, "--decode-attention")) {
      if (strlen(v) != 2 || v[0] != 'v' || v[1] < '1' || v[1] > '5') return bad(err, a, v, "must be v1, v2, v3, v4 or v5");
      o->decode_attn = v[1] - '0';
    } else if (!strcmp(a, "--peak-gbps")) {
      if (ts_arg_double(v, 1e-3, 1e6, &o->peak_gbps)) return bad(err, a, v, "must be a rate in GB/s, > 0");
    } else if (!strcmp(a, "--csv")) {
      o->csv = v;
    } else if (!strcmp(a, "--seed")) {
      long long s;
      if (ts_arg_ll(v, 0, (long long)(~0ULL >> 1), &s)) return bad(err, a, v, "is not a whole number >= 0");
      o->seed = (unsigned long long)s;
    } else {
      fprintf(err, CMD ": unknown option: %s\n", a);
      dgrid_usage(err);
      return 2;
    }
  }
  o->nb = increasing_list(batches, 1, 4096, o->batches);
  if (o->nb < 1) return bad(err, "--batches", batches, "is not a strictly increasing comma list of batch sizes in [1, 4096]");
  o->nkv = increasing_list(kv, 1, 1 << 20, o->kv);
  if (o->nkv < 1) return bad(err, "--kv", kv, "is not a strictly increasing comma list of KV lengths in [1, 1048576]");
  if (o->kv_fp8 && o->decode_attn < 2) {
    fprintf(err, CMD ": --kv-cache fp8 is read by decode attention v2 to v5 only (--decode-attention v1 asked)\n");
    return 2;
  }
  return -1;
}

/* A one-GPU plan of the model: batch sequences, prompt + generate positions, the cache's precision; everything
 * else as `execute` runs it (no codec, BF16 weights, the executor's prefill and per-KV-head decode attention). */
static void plan_of(plan_infer *p, const model_config *mc, int batch, long long prompt, long long generate,
                    int kv_fp8, int sms) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "bench-decode-step");
  p->model = *mc;
  p->cluster.gpu.sms = sms;
  p->tp = 1, p->pp = 1, p->ep = 1;
  p->batch = batch, p->prompt = (int)prompt, p->generate = (int)generate;
  p->kv = kv_fp8 ? PLAN_KV_FP8 : PLAN_KV_BF16;
  p->codec = (plan_codec){.kind = PLAN_CODEC_NONE, .group = 128};
  p->quant = PLAN_QUANT_NONE;
  p->prefill_attention = PLAN_PREFILL_ATTN_EXECUTOR;
  p->decode_attention = PLAN_DECODE_ATTN_PER_KV_HEAD;
}

int dgrid_need_bytes(const model_config *mc, int batch, long long max_seq, int kv_fp8, int sms, dgrid_need *n,
                     ts_err *e) {
  static _Thread_local plan_infer p; /* large (the cluster's tables): not on the stack */
  plan_of(&p, mc, batch, 1, max_seq - 1, kv_fp8, sms);
  plan_infer_memory mem;
  if (max_seq < 1 || plan_infer_memory_per_gpu(&p, &mem))
    return ts_fail(e, mc->name, "model", "the memory of a decode step of batch %d over %lld positions cannot be "
                   "counted", batch, max_seq);
  const double h = mc->hidden, d = model_head_dim(mc), qkv = (double)(mc->heads + 2 * mc->kv_heads) * d;
  double biggest = (double)model_vocab_per_gpu(mc, 1) * h; /* init_weights: the largest full tensor, BF16 */
  if (qkv * h > biggest) biggest = qkv * h;
  if (2.0 * mc->ffn_hidden * h > biggest) biggest = 2.0 * mc->ffn_hidden * h;
  *n = (dgrid_need){.weights = mem.weights, .kv_cache = mem.kv_cache, .buffers = mem.activations,
                    .runtime = mem.overhead, .init_scratch = 2.0 * biggest,
                    .fill_scratch = kv_fp8 ? 2.0 * DGRID_FILL_ROWS * d : 0.0};
  n->total = n->weights + n->kv_cache + n->buffers + n->runtime + n->init_scratch + n->fill_scratch;
  return 0;
}

int dgrid_fit(const model_config *mc, int batch, const long long *kv, int nkv, int kv_fp8, int sms, double free_bytes,
              dgrid_need *n, ts_err *e) {
  for (int i = nkv - 1; i >= 0; i--) {
    if (dgrid_need_bytes(mc, batch, kv[i], kv_fp8, sms, n, e)) return -2;
    if (n->total <= free_bytes) return i;
  }
  return -1;
}

int dgrid_floor_bytes(const model_config *mc, int batch, long long kv, int kv_fp8, double *weight_bytes,
                      double *kv_bytes, ts_err *e) {
  static _Thread_local plan_infer p;
  plan_of(&p, mc, batch, kv, 0, kv_fp8, 0);
  return plan_infer_decode_floor_bytes(&p, weight_bytes, kv_bytes, e);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double dgrid_median(double *v, int n) {
  if (n < 1) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double dgrid_gbps(const dgrid_point *p) {
  return p->step_s > 0 ? (p->weight_bytes + p->kv_bytes) / p->step_s / 1e9 : 0;
}

double dgrid_pct(const dgrid_point *p, double peak_gbps) {
  if (!(peak_gbps > 0) || !(p->step_s > 0)) return 0;
  return 100.0 * (p->weight_bytes + p->kv_bytes) / (peak_gbps * 1e9) / p->step_s;
}

void dgrid_header(FILE *out) {
  fprintf(out, "#%7s %8s %11s %9s %9s %8s %6s\n", "batch", "kv", "step_us", "floor_gb", "GB/s", "%floor", ">=80%");
  fprintf(out, "#%7s %8s %11s %9s %9s %8s %6s\n", "", "(pos)", "(median)", "(w+kv)", "(floor)", "(peak)", "");
}

void dgrid_row(const dgrid_point *p, double peak_gbps, char *buf, size_t cap) {
  const double pct = dgrid_pct(p, peak_gbps);
  if (peak_gbps > 0)
    snprintf(buf, cap, " %7d %8lld %11.2f %9.3f %9.1f %8.1f %6s", p->batch, p->kv, p->step_s * 1e6,
             (p->weight_bytes + p->kv_bytes) / 1e9, dgrid_gbps(p), pct, pct >= DGRID_TARGET_PCT ? "yes" : "no");
  else
    snprintf(buf, cap, " %7d %8lld %11.2f %9.3f %9.1f %8s %6s", p->batch, p->kv, p->step_s * 1e6,
             (p->weight_bytes + p->kv_bytes) / 1e9, dgrid_gbps(p), "n/a", "n/a");
}

void dgrid_summary(const dgrid_point *pts, int n, double peak_gbps, char *buf, size_t cap) {
  if (n < 1) {
    snprintf(buf, cap, "# no point measured");
    return;
  }
  double *v = malloc((size_t)n * sizeof *v);
  if (!v) {
    snprintf(buf, cap, "# %d points (out of host memory for the summary)", n);
    return;
  }
  int meet = 0;
  for (int i = 0; i < n; i++) {
    v[i] = peak_gbps > 0 ? dgrid_pct(&pts[i], peak_gbps) : dgrid_gbps(&pts[i]);
    meet += peak_gbps > 0 && v[i] >= DGRID_TARGET_PCT;
  }
  const double med = dgrid_median(v, n); /* sorts v */
  if (peak_gbps > 0)
    snprintf(buf, cap, "# %d points: %% of floor min %.1f / median %.1f / max %.1f; %d of %d >= %.0f %%", n, v[0], med,
             v[n - 1], meet, n, DGRID_TARGET_PCT);
  else
    snprintf(buf, cap, "# %d points: GB/s min %.1f / median %.1f / max %.1f; %% of floor unknown (no HBM rate)", n,
             v[0], med, v[n - 1]);
  free(v);
}

int dgrid_csv_write(const char *path, const dgrid_point *pts, int n, double peak_gbps, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail(e, path, "--csv", "cannot be written");
  fprintf(f, "batch,kv,step_us,floor_gb,weights_gb,kv_gb,gbps,pct_floor,meets_%.0f,peak_gbps\n", DGRID_TARGET_PCT);
  for (int i = 0; i < n; i++) {
    const dgrid_point *p = &pts[i];
    fprintf(f, "%d,%lld,%.3f,%.6f,%.6f,%.6f,%.2f,", p->batch, p->kv, p->step_s * 1e6,
            (p->weight_bytes + p->kv_bytes) / 1e9, p->weight_bytes / 1e9, p->kv_bytes / 1e9, dgrid_gbps(p));
    if (peak_gbps > 0) {
      const double pct = dgrid_pct(p, peak_gbps);
      fprintf(f, "%.2f,%s,%g\n", pct, pct >= DGRID_TARGET_PCT ? "yes" : "no", peak_gbps);
    } else {
      fprintf(f, ",,\n");
    }
  }
  if (fclose(f)) return ts_fail(e, path, "--csv", "cannot be written");
  return 0;
}
