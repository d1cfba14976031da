/* bench_decode_step.c — `tacorun bench-decode-step`: the inference executor's whole decode step timed over a
 * batch x KV-length grid on one GPU against its read floor (issue 24; the per-kernel view is bench-decode's).
 *
 * The step is the executor's own: infer_model_init builds the model (max_prompt 1: no prefill buffers) and
 * infer_forward runs one token a sequence at position L - 1, attending over L cached positions, eagerly or as one
 * CUDA graph launch (infer_decode_graph_step, what `execute --decode-graph` runs). The cache is filled with random
 * head vectors instead of a prefill: a step's time does not depend on the values it reads. The options, the fit in
 * memory, the floor and the rows are plain C (bench_decode_step_grid.h). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_decode_step_grid.h"
#include "infer_graph.h"
#include "infer_kv8.h"
#include "infer_model.h"
#include "rt_ops.h"
#include "rt_ops_check.h"
#include "topo.h"

#define CMD "tacorun bench-decode-step"
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
  const dgrid_opts *o;
  const model_config *mc;
  cudaStream_t st;
  infer_model m;
  int model_ready;
  infer_graph g;
  cudaEvent_t *ev; /* [steps + 1] */
  double *t;       /* [steps] */
  void *scratch;   /* FP8 cache: DGRID_FILL_ROWS BF16 head vectors */
} step_bench;

/* The HBM rate the floor is read at: --peak-gbps, else the GPU catalogue's entry for this device, as
 * `execute` finds it (the compiled-in catalogue, else ./topologies/gpus); 0 when unknown. */
static double peak_rate(const dgrid_opts *o, const char *dev, char *src, size_t cap) {
  if (o->peak_gbps > 0) {
    snprintf(src, cap, "--peak-gbps");
    return o->peak_gbps;
  }
  topo_gpu g;
  ts_err fe;
  if (topo_gpu_find_device(dev, NULL, &g, &fe) == 0 || topo_gpu_find_device(dev, "topologies/gpus", &g, &fe) == 0) {
    snprintf(src, cap, "%s's datasheet HBM rate, GPU catalogue", g.name);
    return g.hbm_gbps;
  }
  snprintf(src, cap, "unknown: \"%.160s\" is not in the GPU catalogue; --peak-gbps G gives it", dev);
  return 0;
}

/* Every layer's K and V at all max_seq positions: random BF16 in [-1, 1], or those quantized on the way in by the
 * executor's quantizer (infer_kv8_quantize) DGRID_FILL_ROWS head vectors at a time. */
static int fill_cache(step_bench *b, ts_err *e) {
  infer_model *m = &b->m;
  const long long rows = (long long)m->batch * m->kvl * m->max_seq, d = m->d;
  uint64_t seed = b->o->seed * 1000003ULL + 11;
  for (int l = 0; l < m->layers; l++)
    for (int kv = 0; kv < 2; kv++) {
      void *codes = kv ? m->vc[l] : m->kc[l];
      if (!m->kv_fp8) {
        if (rt_fill_random_bf16(codes, rows * d, seed++, 1.0f, b->st, e)) return -1;
        continue;
      }
      float *scales = kv ? m->vs[l] : m->ks[l];
      for (long long r0 = 0; r0 < rows; r0 += DGRID_FILL_ROWS) {
        const long long nr = rows - r0 < DGRID_FILL_ROWS ? rows - r0 : DGRID_FILL_ROWS;
        if (rt_fill_random_bf16(b->scratch, nr * d, seed++, 1.0f, b->st, e) ||
            infer_kv8_quantize(b->scratch, (char *)codes + r0 * d, scales + r0, nr, (int)d, b->st, e))
          return -1;
      }
    }
  RT_CHECK_CUDA(e, cudaStreamSynchronize(b->st));
  return 0;
}

static int one_step(step_bench *b, long long pos, ts_err *e) {
  return b->o->eager ? infer_forward(&b->m, b->m.tok, 1, pos, e) : infer_decode_graph_step(&b->m, pos, &b->g, e);
}

/* --warmup steps, then --steps steps with an event after each (as `execute` times its TPOT): the median, s. */
static int time_point(step_bench *b, long long kv, double *median_s, ts_err *e) {
  const long long pos = kv - 1; /* the step writes position kv - 1 and attends over kv positions */
  for (int j = 0; j < b->o->warmup; j++)
    if (one_step(b, pos, e)) return -1;
  RT_CHECK_CUDA(e, cudaEventRecord(b->ev[0], b->st));
  for (int j = 0; j < b->o->steps; j++) {
    if (one_step(b, pos, e)) return -1;
    RT_CHECK_CUDA(e, cudaEventRecord(b->ev[j + 1], b->st));
  }
  RT_CHECK_CUDA(e, cudaStreamSynchronize(b->st));
  for (int j = 0; j < b->o->steps; j++) {
    float ms;
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, b->ev[j], b->ev[j + 1]));
    b->t[j] = ms * 1e-3;
  }
  *median_s = dgrid_median(b->t, b->o->steps);
  return 0;
}

static void print_skip(const dgrid_opts *o, const model_config *mc, int batch, long long kv, int sms, double free_b) {
  dgrid_need n;
  ts_err e;
  if (dgrid_need_bytes(mc, batch, kv, o->kv_fp8, sms, &n, &e)) return;
  printf("# skipped batch %d kv %lld: needs %.2f GiB (weights %.2f, KV cache %.2f, buffers %.2f, runtime %.2f, "
         "scratch %.2f), %.2f GiB free\n", batch, kv, n.total / GIB, n.weights / GIB, n.kv_cache / GIB,
         n.buffers / GIB, n.runtime / GIB, (n.init_scratch + n.fill_scratch) / GIB, free_b / GIB);
}

/* One batch: the model at the largest KV length that fits, then every KV length up to it. */
static int run_batch(step_bench *b, int batch, int sms, double peak, dgrid_point *pts, int *np, ts_err *e) {
  const dgrid_opts *o = b->o;
  size_t free_b = 0, total_b = 0;
  RT_CHECK_CUDA(e, cudaMemGetInfo(&free_b, &total_b));
  dgrid_need need;
  const int fit = dgrid_fit(b->mc, batch, o->kv, o->nkv, o->kv_fp8, sms, (double)free_b, &need, e);
  if (fit == -2) return -1;
  for (int i = fit + 1; i < o->nkv; i++) print_skip(o, b->mc, batch, o->kv[i], sms, (double)free_b);
  if (fit < 0) return 0;
  const long long max_seq = o->kv[fit];
  printf("# batch %d: the model built for %lld positions: %.2f GiB needed, %.2f GiB free\n", batch, max_seq,
         need.total / GIB, free_b / GIB);
  fflush(stdout);
  infer_model_opts mo = {.batch = batch, .max_prompt = 1, .max_seq = max_seq, .seed = o->seed,
                         .decode_attn = o->decode_attn, .kv_fp8 = o->kv_fp8};
  if (infer_model_init(&b->m, b->mc, b->mc->layers, 1, 0, &mo, NULL, b->st, e)) {
    infer_model_free(&b->m);
    return -1;
  }
  b->model_ready = 1;
  if (fill_cache(b, e) || rt_fill_labels(b->m.tok, batch, b->mc->vocab, o->seed + 7, b->st, e)) return -1;
  for (int i = 0; i <= fit; i++) {
    dgrid_point *p = &pts[*np];
    *p = (dgrid_point){.batch = batch, .kv = o->kv[i]};
    if (time_point(b, o->kv[i], &p->step_s, e) ||
        dgrid_floor_bytes(b->mc, batch, o->kv[i], o->kv_fp8, &p->weight_bytes, &p->kv_bytes, e))
      return -1;
    char row[256];
    dgrid_row(p, peak, row, sizeof row);
    printf("%s\n", row);
    fflush(stdout);
    (*np)++;
  }
  infer_graph_free(&b->g);
  infer_model_free(&b->m);
  b->model_ready = 0;
  return 0;
}

/* What the executor refuses, before any GPU is touched (exit 2). */
static int runnable(const dgrid_opts *o, const model_config *mc, ts_err *e) {
  if (infer_model_supported(mc, mc->name, e)) return -1;
  const int g = mc->heads / mc->kv_heads;
  if (!infer_decode_groups_built(o->decode_attn, model_head_dim(mc), g))
    return ts_fail(e, mc->name, "--decode-attention", "v%d is not built for %d query heads per KV head", o->decode_attn,
                   g);
  double w, kv;
  return dgrid_floor_bytes(mc, 1, o->kv[0], o->kv_fp8, &w, &kv, e);
}

static int run(const dgrid_opts *o, const model_config *mc, ts_err *e) {
  step_bench b = {.o = o, .mc = mc};
  dgrid_point *pts = calloc((size_t)o->nb * o->nkv, sizeof *pts);
  b.ev = calloc((size_t)o->steps + 1, sizeof *b.ev);
  b.t = calloc((size_t)o->steps, sizeof *b.t);
  int rc = -1, np = 0;
  if (!pts || !b.ev || !b.t) {
    ts_fail_sys(e, CMD ": out of host memory");
    goto out;
  }
  struct cudaDeviceProp prop;
  if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking) != cudaSuccess) {
    ts_fail_sys(e, CMD ": cannot start on device 0");
    goto out;
  }
  for (int i = 0; i <= o->steps; i++)
    if (cudaEventCreate(&b.ev[i]) != cudaSuccess) {
      ts_fail_sys(e, CMD ": cudaEventCreate failed");
      goto out;
    }
  if (o->kv_fp8 && cudaMalloc(&b.scratch, (size_t)(2 * DGRID_FILL_ROWS * model_head_dim(mc))) != cudaSuccess) {
    ts_fail_sys(e, CMD ": cannot allocate the cache fill's scratch");
    goto out;
  }
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK_GOTO(e, cudaMemGetInfo(&free_b, &total_b), out);
  char src[256];
  const double peak = peak_rate(o, prop.name, src, sizeof src);
  printf("# %s: device %s, %d SMs, %.2f GiB free of %.2f GiB\n", CMD, prop.name, prop.multiProcessorCount,
         free_b / GIB, total_b / GIB);
  printf("# model %s: %d layers, hidden %d, heads %d / %d KV, head_dim %d, ffn %d, vocab %d; TP 1\n", mc->name,
         mc->layers, mc->hidden, mc->heads, mc->kv_heads, model_head_dim(mc), mc->ffn_hidden, mc->vocab);
  printf("# KV cache %s; decode attention v%d; %s; %d warm-up + %d timed steps a point, the median\n",
         o->kv_fp8 ? "fp8 (E4M3 codes + an FP32 scale a position and KV head)" : "bf16", o->decode_attn,
         o->eager ? "eager (one launch a kernel)" : "CUDA graph (one launch a step, infer_graph.h)", o->warmup,
         o->steps);
  if (peak > 0) printf("# HBM rate %.0f GB/s (%s)\n", peak, src);
  else printf("# HBM rate %s\n", src);
  dgrid_header(stdout);
  for (int bi = 0; bi < o->nb; bi++)
    if (run_batch(&b, (int)o->batches[bi], prop.multiProcessorCount, peak, pts, &np, e)) goto out;
  char sum[256];
  dgrid_summary(pts, np, peak, sum, sizeof sum);
  printf("%s\n", sum);
  if (o->csv && dgrid_csv_write(o->csv, pts, np, peak, e)) goto out;
  rc = 0;
out:
  infer_graph_free(&b.g);
  if (b.model_ready) infer_model_free(&b.m);
  if (b.ev)
    for (int i = 0; i <= o->steps; i++)
      if (b.ev[i]) cudaEventDestroy(b.ev[i]);
  if (b.scratch) cudaFree(b.scratch);
  if (b.st) cudaStreamDestroy(b.st);
  free(pts), free(b.ev), free(b.t);
  return rc;
}

int bench_decode_step_main(int argc, char **argv) {
  dgrid_opts o;
  const int st = dgrid_parse(argc, argv, &o, stdout, stderr);
  if (st >= 0) return st;
  ts_err e = {{0}, 0};
  model_config mc;
  if (model_load(o.model, NULL, &mc, &e) || runnable(&o, &mc, &e)) {
    fprintf(stderr, CMD ": %s\n", e.msg);
    return e.bad_input ? 2 : 1;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    fprintf(stderr, CMD ": no CUDA device\n");
    return 1;
  }
  if (run(&o, &mc, &e)) {
    fprintf(stderr, CMD ": %s\n", e.msg);
    return ts_exit_status(&e);
  }
  return 0;
}
