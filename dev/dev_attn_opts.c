/* dev_attn_opts.c — options, check inputs and the timer of the decode-attention drivers
 * (dev_attn_opts.h). */
#include "dev_attn_opts.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "infer_ref.h"
#include "rt_ops_ref.h"

static int parse_list(const char *s, long long *v, int max) {
  int n = 0;
  while (*s) {
    char *end;
    long long x = strtoll(s, &end, 10);
    if (end == s || x < 1 || n == max) return -1;
    v[n++] = x;
    s = end;
    if (*s == ',') s++;
    else if (*s) return -1;
  }
  return n;
}

int dev_attn_parse(int argc, char **argv, const char *prog, void (*usage)(FILE *), dev_attn_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--check")) {
      o->check = 1;
    } else if (!strcmp(a, "--peak-gbps") && v) {
      o->peak_gbps = strtod(v, &end), i++;
      if (*end || !(o->peak_gbps > 0)) return fprintf(stderr, "%s: --peak-gbps: '%s' is not a positive number\n", prog, v), -1;
    } else if (!strcmp(a, "--max-gib") && v) {
      o->max_gib = strtod(v, &end), i++;
      if (*end || !(o->max_gib > 0)) return fprintf(stderr, "%s: --max-gib: '%s' is not a positive number\n", prog, v), -1;
    } else if (!strcmp(a, "--reps") && v) {
      o->reps = (int)strtol(v, &end, 10), i++;
      if (*end || o->reps < 1 || o->reps > 10000) return fprintf(stderr, "%s: --reps: '%s' is not 1..10000\n", prog, v), -1;
    } else if (!strcmp(a, "--batches") && v) {
      if ((o->nb = parse_list(v, o->batches, DEV_ATTN_MAX_LIST)) < 1)
        return fprintf(stderr, "%s: --batches: '%s' is not a list of up to 16 positive integers\n", prog, v), -1;
      i++;
    } else if (!strcmp(a, "--kv") && v) {
      if ((o->nkv = parse_list(v, o->kv, DEV_ATTN_MAX_LIST)) < 1)
        return fprintf(stderr, "%s: --kv: '%s' is not a list of up to 16 positive integers\n", prog, v), -1;
      i++;
    } else {
      fprintf(stderr, "%s: unknown option or missing value: '%s'\n", prog, a);
      usage(stderr);
      return -1;
    }
  }
  return 0;
}

uint64_t dev_attn_rng(uint64_t *s) {
  uint64_t x = *s += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float dev_attn_rand_bf16(uint64_t *s, float scale) {
  float u = (float)((dev_attn_rng(s) >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
  return rt_ref_bf16_to_float(infer_ref_to_bf16(u * scale));
}

double dev_attn_rel_error(const uint16_t *got, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double g = rt_ref_bf16_to_float(got[i]);
    if (!isfinite(g)) return -1;
    const double r = ref[i];
    num += (g - r) * (g - r), den += r * r;
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

#define DEV_ATTN_MAX_KERNELS 8

int dev_attn_time(int nk, dev_attn_launch launch, const void *ctx, int reps, double *us, const char *prog, ts_err *e) {
  cudaEvent_t ev[2] = {NULL, NULL};
  double *t[DEV_ATTN_MAX_KERNELS] = {NULL};
  long long iter = 0;
  int rc = -1, inner[DEV_ATTN_MAX_KERNELS];
  if (nk < 1 || nk > DEV_ATTN_MAX_KERNELS) return ts_fail(e, prog, "kernels", "%d: 1..%d kernels", nk, DEV_ATTN_MAX_KERNELS);
  for (int k = 0; k < nk; k++)
    if (!(t[k] = malloc((size_t)reps * sizeof(double)))) {
      ts_fail_sys(e, "%s: out of host memory", prog);
      goto out;
    }
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[0]), out);
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[1]), out);
  for (int w = 0; w < nk; w++) { /* warm-up, and calls per timed span of each kernel */
    float ms = 0;
    for (int i = 0; i < 3; i++)
      if (launch(ctx, w, iter++, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[0], NULL), out);
    for (int i = 0; i < 4; i++)
      if (launch(ctx, w, iter++, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[1], NULL), out);
    CUDA_CHECK_GOTO(e, cudaEventSynchronize(ev[1]), out);
    CUDA_CHECK_GOTO(e, cudaEventElapsedTime(&ms, ev[0], ev[1]), out);
    const double one = ms * 1e3 / 4;
    inner[w] = one >= 300 ? 1 : (int)ceil(300 / (one > 1 ? one : 1));
    if (inner[w] > 200) inner[w] = 200;
  }
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < nk; k++) {
      const int w = (r + k) % nk;
      float ms = 0;
      CUDA_CHECK_GOTO(e, cudaEventRecord(ev[0], NULL), out);
      for (int i = 0; i < inner[w]; i++)
        if (launch(ctx, w, iter++, e)) goto out;
      CUDA_CHECK_GOTO(e, cudaEventRecord(ev[1], NULL), out);
      CUDA_CHECK_GOTO(e, cudaEventSynchronize(ev[1]), out);
      CUDA_CHECK_GOTO(e, cudaEventElapsedTime(&ms, ev[0], ev[1]), out);
      t[w][r] = ms * 1e3 / inner[w];
    }
  for (int w = 0; w < nk; w++) {
    qsort(t[w], (size_t)reps, sizeof(double), cmp_double);
    us[w] = reps % 2 ? t[w][reps / 2] : 0.5 * (t[w][reps / 2 - 1] + t[w][reps / 2]);
  }
  rc = 0;
out:
  if (ev[0]) cudaEventDestroy(ev[0]);
  if (ev[1]) cudaEventDestroy(ev[1]);
  for (int k = 0; k < nk; k++) free(t[k]);
  return rc;
}

int dev_attn_device(const char *prog) {
  int ndev = 0;
  cudaError_t ce = cudaGetDeviceCount(&ndev);
  if (ce != cudaSuccess || ndev < 1) {
    fprintf(stderr, "%s: no CUDA device (%s)\n", prog, ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
    return 2;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("# device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  return 0;
}
