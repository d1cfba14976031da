/* bench_codec_moe.c — `tacorun bench-codec --moe`: the fused MoE codec kernels
 * (kernels/moe_codec.h) against the unfused sequences they replace, at
 * mixture-of-experts shapes.
 *
 * Per (tokens t, hidden h, experts E, top k): a routing from random logits
 * (moe_topk, moe_map on the GPU: near-balanced experts), random BF16 tokens,
 * then the median time (CUDA events, launches rotating over enough buffer
 * slots that the data does not stay in L2) of
 *   permute+encode:  moe_permute_encode        vs  moe_permute + taco_encode
 *   decode+combine:  moe_decode_combine        vs  taco_decode + moe_combine
 * GB/s counts the bytes each must move at least once (fused permute+encode:
 * x, pos and the encoded block; fused decode+combine: the block, pos, w and
 * the output; the unfused rows add their BF16 intermediate [t k x h], written
 * and read back); % is of the 4,276 GB/s HBM copy ceiling of the H200. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_check.h"
#include "moe_codec.h"
#include "moe_route.h"
#include "taco_codec.h"
#include "taco_testdata.h"
#include "ts_args.h"

#define MOE_CEILING_GBPS 4276.0
#define MOE_MAX_LIST 8

typedef struct {
  long long tokens[MOE_MAX_LIST], hidden[MOE_MAX_LIST], experts[MOE_MAX_LIST], topk[MOE_MAX_LIST];
  int nt, nh, ne, nk;
  int group, reps;
  taco_fp8 fp8;
} moe_opts;

static void moe_usage(FILE *out) {
  fprintf(out,
          "usage: tacorun bench-codec --moe [--tokens LIST] [--hidden LIST] [--experts LIST] [--topk LIST]\n"
          "                                 [--group G] [--fp8 e4m3|e5m2] [--reps N]\n"
          "  the fused mixture-of-experts codec kernels (kernels/moe_codec.h) beside the unfused sequences:\n"
          "    permute+encode  moe_permute_encode  vs  moe_permute + taco_encode\n"
          "    decode+combine  moe_decode_combine  vs  taco_decode + moe_combine (weighted, FP32 fmaf)\n"
          "  routing: top-k of random logits (near-balanced experts); tokens random BF16.\n"
          "  GB/s = bytes the kernel must read + write once / time (the unfused rows add the BF16\n"
          "  intermediate t*k*h, written then read); %%ceil of 4276 GB/s (H200 HBM copy); speedup =\n"
          "  unfused time / fused time. Every shape runs every combination of the lists.\n"
          "options (defaults in brackets):\n"
          "  --tokens LIST   tokens t [4096,16384]\n"
          "  --hidden LIST   hidden sizes h, multiples of G [4096,7168]\n"
          "  --experts LIST  experts E, 1..%d [8,64,128]\n"
          "  --topk LIST     experts per token k, 1..%d, <= E [2,8]\n"
          "  --group G       TACO group size 32, 64, 128, 256 or 512 [128]\n"
          "  --fp8 e4m3|e5m2 FP8 format [e4m3]\n"
          "  --reps N        timed repetitions per point, median kept [15]\n"
          "reads:  nothing\n"
          "writes: the table on standard output\n"
          "not done: the executor does not run these kernels yet; no multi-GPU all-to-all is timed here.\n",
          MOE_ROUTE_MAX_E, MOE_ROUTE_MAX_K);
}

static int moe_list(const char *opt, const char *v, long long lo, long long hi, long long *dst, int *n) {
  int c = ts_arg_ll_list(v, lo, hi, dst, MOE_MAX_LIST);
  if (c <= 0) {
    fprintf(stderr, "bench-codec --moe: %s: '%s' is not a list of at most %d integers in %lld..%lld\n", opt, v,
            MOE_MAX_LIST, lo, hi);
    return -1;
  }
  *n = c;
  return 0;
}

/* 1: help printed; 0: ok; -1: bad option (message printed) */
static int moe_parse(int argc, char **argv, moe_opts *o) {
  memset(o, 0, sizeof *o);
  o->tokens[0] = 4096, o->tokens[1] = 16384, o->nt = 2;
  o->hidden[0] = 4096, o->hidden[1] = 7168, o->nh = 2;
  o->experts[0] = 8, o->experts[1] = 64, o->experts[2] = 128, o->ne = 3;
  o->topk[0] = 2, o->topk[1] = 8, o->nk = 2;
  o->group = 128, o->reps = 15, o->fp8 = TACO_FP8_E4M3;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--moe")) continue;
    if (ts_arg_is_help(a)) {
      moe_usage(stdout);
      return 1;
    }
    int bad = 0;
    if (v && !strcmp(a, "--tokens")) bad = moe_list(a, v, 1, 1 << 20, o->tokens, &o->nt);
    else if (v && !strcmp(a, "--hidden")) bad = moe_list(a, v, 32, 65536, o->hidden, &o->nh);
    else if (v && !strcmp(a, "--experts")) bad = moe_list(a, v, 1, MOE_ROUTE_MAX_E, o->experts, &o->ne);
    else if (v && !strcmp(a, "--topk")) bad = moe_list(a, v, 1, MOE_ROUTE_MAX_K, o->topk, &o->nk);
    else if (v && !strcmp(a, "--group")) {
      taco_params p = {0, TACO_FP8_E4M3};
      if (ts_arg_int(v, 32, 512, &p.group) || !taco_params_valid(p)) {
        fprintf(stderr, "bench-codec --moe: --group: '%s' is not one of 32, 64, 128, 256, 512\n", v);
        return -1;
      }
      o->group = p.group;
    } else if (v && !strcmp(a, "--fp8")) {
      if (!strcmp(v, "e4m3")) o->fp8 = TACO_FP8_E4M3;
      else if (!strcmp(v, "e5m2")) o->fp8 = TACO_FP8_E5M2;
      else {
        fprintf(stderr, "bench-codec --moe: --fp8: '%s' is not e4m3 or e5m2\n", v);
        return -1;
      }
    } else if (v && !strcmp(a, "--reps")) {
      if (ts_arg_int(v, 1, 100000, &o->reps)) {
        fprintf(stderr, "bench-codec --moe: --reps: '%s' is not an integer in 1..100000\n", v);
        return -1;
      }
    } else {
      fprintf(stderr, "bench-codec --moe: unknown or incomplete option '%s'\n", a);
      moe_usage(stderr);
      return -1;
    }
    if (bad) return -1;
    i++;
  }
  for (int i = 0; i < o->nh; i++)
    if (o->hidden[i] % o->group) {
      fprintf(stderr, "bench-codec --moe: --hidden: %lld is not a multiple of the group size %d\n", o->hidden[i],
              o->group);
      return -1;
    }
  return 0;
}

#define MCK(call)                                                                                                  \
  GPU_CHECK(cudaError_t, cudaSuccess, call,                                                                        \
            fprintf(stderr, "bench-codec --moe: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(gpu_s_)); \
            goto fail)
#define MTACO(call)                                                                                                \
  do {                                                                                                             \
    if ((call) != 0) {                                                                                             \
      fprintf(stderr, "bench-codec --moe: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, taco_last_error());         \
      goto fail;                                                                                                   \
    }                                                                                                              \
  } while (0)

/* One shape's buffers: nbuf slots of x, block, out (rotated); one permuted /
 * decoded BF16 intermediate per slot for the unfused sequences; one routing. */
typedef struct {
  int t, h, k, nbuf;
  taco_params p;
  size_t xb, wire, wire_stride, permb; /* wire_stride: wire rounded up to 256 bytes (slot alignment) */
  char *x, *block, *out, *perm;
  int32_t *pos;
  float *w;
} moe_pool;

enum moe_op { OP_PE_FUSED, OP_PE_UNFUSED, OP_DC_FUSED, OP_DC_UNFUSED, OP_COUNT };

static int moe_launch(const moe_pool *b, enum moe_op op, int i, cudaStream_t s) {
  char *x = b->x + (size_t)i * b->xb, *blk = b->block + (size_t)i * b->wire_stride, *out = b->out + (size_t)i * b->xb;
  char *perm = b->perm + (size_t)i * b->permb;
  const size_t n = (size_t)b->t * b->k * b->h;
  switch (op) {
  case OP_PE_FUSED: return moe_permute_encode((const uint16_t *)x, b->pos, b->t, b->k, b->h, b->p, blk, NULL, s);
  case OP_PE_UNFUSED:
    if (moe_permute((const uint16_t *)x, b->pos, b->t, b->k, b->h, (uint16_t *)perm, s)) return -1;
    return taco_encode(perm, TACO_DTYPE_BF16, n, b->p, blk, NULL, s);
  case OP_DC_FUSED: return moe_decode_combine(blk, b->pos, b->w, b->t, b->k, b->h, b->p, (uint16_t *)out, s);
  case OP_DC_UNFUSED:
    if (taco_decode(blk, n, b->p, perm, TACO_DTYPE_BF16, s)) return -1;
    return moe_combine((const uint16_t *)perm, b->pos, b->w, b->t, b->k, b->h, (uint16_t *)out, s);
  default: return -1;
  }
}

/* bytes each must move once (see the file comment) */
static double moe_bytes(const moe_pool *b, enum moe_op op) {
  const double rows = (double)b->t * b->k, perm = (double)b->permb, route = rows * 4;
  switch (op) {
  case OP_PE_FUSED: return (double)b->xb + route + (double)b->wire;
  case OP_PE_UNFUSED: return (double)b->xb + route + 2 * perm + (double)b->wire;
  case OP_DC_FUSED: return (double)b->wire + 2 * route + (double)b->xb;
  case OP_DC_UNFUSED: return (double)b->wire + 2 * perm + 2 * route + (double)b->xb;
  default: return 0;
  }
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int moe_time(const moe_pool *b, enum moe_op op, int reps, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1,
                    double *us) {
  const int per_rep = b->nbuf < 4 ? 4 : b->nbuf;
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return -1;
  for (int i = 0; i < b->nbuf; i++) MTACO(moe_launch(b, op, i, s)); /* warm-up */
  for (int r = 0; r < reps; r++) {
    MCK(cudaEventRecord(e0, s));
    for (int i = 0; i < per_rep; i++) MTACO(moe_launch(b, op, i % b->nbuf, s));
    MCK(cudaEventRecord(e1, s));
    MCK(cudaEventSynchronize(e1));
    float ms;
    MCK(cudaEventElapsedTime(&ms, e0, e1));
    t[r] = 1000.0 * (double)ms / per_rep;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_dbl);
  *us = t[reps / 2];
  free(t);
  return 0;
fail:
  free(t);
  return -1;
}

static void moe_pool_free(moe_pool *b) {
  cudaFree(b->w);
  cudaFree(b->pos);
  cudaFree(b->perm);
  cudaFree(b->out);
  cudaFree(b->block);
  cudaFree(b->x);
  memset(b, 0, sizeof *b);
}

static int moe_pool_make(moe_pool *b, int t, int h, int E, int k, taco_params p, size_t l2, cudaStream_t s) {
  float *logits = NULL;
  int32_t *idx = NULL, *count = NULL, *scratch = NULL;
  memset(b, 0, sizeof *b);
  b->t = t, b->h = h, b->k = k, b->p = p;
  b->xb = (size_t)t * h * 2;
  b->permb = (size_t)t * k * h * 2;
  b->wire = moe_codec_wire_bytes(t, k, h, p.group);
  b->wire_stride = (b->wire + 255) / 256 * 256;
  const size_t slot = b->xb + b->wire + b->permb;
  const size_t want = (4 * l2 + slot - 1) / slot; /* one rotation: 4x the L2 */
  b->nbuf = (int)(want < 1 ? 1 : want > 16 ? 16 : want);
  MCK(cudaMalloc((void **)&b->x, b->xb * (size_t)b->nbuf));
  MCK(cudaMalloc((void **)&b->block, b->wire_stride * (size_t)b->nbuf));
  MCK(cudaMalloc((void **)&b->out, b->xb * (size_t)b->nbuf));
  MCK(cudaMalloc((void **)&b->perm, b->permb * (size_t)b->nbuf));
  MCK(cudaMalloc((void **)&b->pos, sizeof(int32_t) * (size_t)t * k));
  MCK(cudaMalloc((void **)&b->w, sizeof(float) * (size_t)t * k));
  MCK(cudaMalloc((void **)&logits, sizeof(float) * (size_t)t * E));
  MCK(cudaMalloc((void **)&idx, sizeof(int32_t) * (size_t)t * k));
  MCK(cudaMalloc((void **)&count, sizeof(int32_t) * (size_t)E));
  MCK(cudaMalloc((void **)&scratch, sizeof(int32_t) * (size_t)(E + 1)));
  MTACO(taco_fill_random(logits, TACO_DTYPE_FP32, (size_t)t * E, 777, 1.0f, s));
  MCK((cudaError_t)moe_topk(logits, t, E, k, idx, b->w, s));
  MCK((cudaError_t)moe_map(idx, t, E, k, b->pos, count, scratch, s));
  MTACO(taco_fill_random(b->x, TACO_DTYPE_BF16, (size_t)t * h * b->nbuf, 12345, 1.0f, s));
  for (int i = 0; i < b->nbuf; i++) MTACO(moe_launch(b, OP_PE_FUSED, i, s)); /* real encoded blocks */
  MCK(cudaStreamSynchronize(s));
  cudaFree(scratch);
  cudaFree(count);
  cudaFree(idx);
  cudaFree(logits);
  return 0;
fail:
  cudaFree(scratch);
  cudaFree(count);
  cudaFree(idx);
  cudaFree(logits);
  moe_pool_free(b);
  return -1;
}

int bench_codec_moe_main(int argc, char **argv) {
  moe_opts o;
  int rc = moe_parse(argc, argv, &o);
  if (rc) return rc > 0 ? 0 : 2;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "bench-codec --moe: no CUDA device: the benchmark needs one\n");
    return 1;
  }
  struct cudaDeviceProp prop;
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaStream_t s = NULL;
  moe_pool b;
  memset(&b, 0, sizeof b);
  MCK(cudaGetDeviceProperties(&prop, 0));
  MCK(cudaEventCreate(&e0));
  MCK(cudaEventCreate(&e1));
  MCK(cudaStreamCreate(&s));
  printf("# bench-codec --moe: %s, %d SMs, L2 %d MiB; TACO G=%d %s; median of %d reps\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize >> 20, o.group, o.fp8 == TACO_FP8_E4M3 ? "e4m3" : "e5m2", o.reps);
  printf("# GB/s = bytes moved once / time; %%ceil of %.0f GB/s; unfused = permute + encode, or decode + combine\n",
         MOE_CEILING_GBPS);
  printf("# %-15s %6s %5s %4s %3s %10s %8s %6s %12s %8s %6s %8s\n", "op", "t", "h", "E", "k", "fused(us)", "GB/s",
         "%ceil", "unfused(us)", "GB/s", "%ceil", "speedup");
  for (int ti = 0; ti < o.nt; ti++)
    for (int hi = 0; hi < o.nh; hi++)
      for (int ei = 0; ei < o.ne; ei++)
        for (int ki = 0; ki < o.nk; ki++) {
          const int t = (int)o.tokens[ti], h = (int)o.hidden[hi], E = (int)o.experts[ei], k = (int)o.topk[ki];
          if (k > E) continue;
          taco_params p = {o.group, o.fp8};
          if (moe_pool_make(&b, t, h, E, k, p, (size_t)prop.l2CacheSize, s)) goto fail;
          double us[OP_COUNT];
          for (int op = 0; op < OP_COUNT; op++)
            if (moe_time(&b, (enum moe_op)op, o.reps, s, e0, e1, &us[op])) goto fail;
          for (int f = 0; f < 2; f++) {
            const enum moe_op fo = f ? OP_DC_FUSED : OP_PE_FUSED, uo = f ? OP_DC_UNFUSED : OP_PE_UNFUSED;
            const double gf = moe_bytes(&b, fo) / (us[fo] * 1e3), gu = moe_bytes(&b, uo) / (us[uo] * 1e3);
            printf("  %-15s %6d %5d %4d %3d %10.1f %8.0f %6.1f %12.1f %8.0f %6.1f %8.2f\n",
                   f ? "decode+combine" : "permute+encode", t, h, E, k, us[fo], gf, 100 * gf / MOE_CEILING_GBPS,
                   us[uo], gu, 100 * gu / MOE_CEILING_GBPS, us[uo] / us[fo]);
          }
          fflush(stdout);
          moe_pool_free(&b);
        }
  cudaStreamDestroy(s);
  cudaEventDestroy(e1);
  cudaEventDestroy(e0);
  return 0;
fail:
  moe_pool_free(&b);
  if (s) cudaStreamDestroy(s);
  if (e1) cudaEventDestroy(e1);
  if (e0) cudaEventDestroy(e0);
  return 1;
}
