/* train_emu_check.c — `tacorun train --check-emu`: the emulated TP all-reduce
 * on the GPU (kernels/coll_emu.h, with the ablation codecs of fp8_ablate.h)
 * against its plain-C reference, bit for bit, on random partials; then the
 * ablation kernels alone at every group size, with a partial last group and
 * NaN/Inf groups, into poisoned outputs. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_emu.h"
#include "gpu_check.h"
#include "taco_fp8.h"
#include "taco_ref.h"
#include "train_emu.h"

int train_emu_check(ts_err *e);

typedef struct {
  const char *name;
  coll_emu_codec codec;
  taco_fp8 fp8;
  int one_shot, caat;
} emu_case;

static const emu_case cases[] = {
    {"plain", COLL_EMU_PLAIN, TACO_FP8_E4M3, 0, 0},
    {"taco-e4m3 two-shot", COLL_EMU_TACO, TACO_FP8_E4M3, 0, 0},
    {"taco-e5m2 two-shot", COLL_EMU_TACO, TACO_FP8_E5M2, 0, 0},
    {"taco-e4m3 one-shot", COLL_EMU_TACO, TACO_FP8_E4M3, 1, 0},
    {"fp8-tensor", COLL_EMU_FP8_TENSOR, TACO_FP8_E4M3, 0, 0},
    {"fp8-group two-shot", COLL_EMU_FP8_GROUP, TACO_FP8_E4M3, 0, 0},
    {"fp8-group e5m2 one-shot", COLL_EMU_FP8_GROUP, TACO_FP8_E5M2, 1, 0},
    {"fp8-hadamard two-shot", COLL_EMU_FP8_HADAMARD, TACO_FP8_E4M3, 0, 0},
    {"caat (plain)", COLL_EMU_PLAIN, TACO_FP8_E4M3, 0, 1},
    {"taco+caat", COLL_EMU_TACO, TACO_FP8_E4M3, 0, 1},
};

#define CK(call) CUDA_CHECK_RC(e, rc, call, out) /* common/gpu_check.h */

/* One case: k partials of rows x cols in dt; *bad: elements differing from the reference. */
static int run_case(const emu_case *c, int k, size_t rows, size_t cols, taco_dtype dt, long long *bad, ts_err *e) {
  const size_t n = rows * cols, es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  int rc = 0;
  void *host[COLL_EMU_MAX_RANKS] = {0}, *dev[COLL_EMU_MAX_RANKS] = {0}, *scratch = NULL;
  unsigned char *back = malloc(n * es);
  taco_rng g = {77 + (uint64_t)k * 13 + n};
  coll_emu_opts o = {c->codec, {128, c->fp8}, c->one_shot};
  for (int r = 0; r < k; r++) {
    host[r] = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
      float v = (float)taco_rng_normal(&g) * (i % 131 == 3 ? 40.0f : 1.0f);
      if (dt == TACO_DTYPE_BF16) ((uint16_t *)host[r])[i] = taco_bf16_from_float(v);
      else ((float *)host[r])[i] = v;
    }
    CK(cudaMalloc(&dev[r], n * es));
    CK(cudaMemcpy(dev[r], host[r], n * es, cudaMemcpyHostToDevice));
  }
  CK(cudaMalloc(&scratch, coll_emu_scratch_bytes(k, n, es)));
  int grc = c->caat ? coll_emu_caat(dev, k, rows, cols, 0.5, dt, &o, scratch, NULL)
                    : coll_emu_allreduce(dev, k, n, dt, &o, scratch, NULL);
  int hrc = c->caat ? coll_emu_caat_ref(host, k, rows, cols, 0.5, dt, &o) : coll_emu_allreduce_ref(host, k, n, dt, &o);
  if (grc || hrc) {
    rc = ts_fail_sys(e, "emulation check %s: %s", c->name, coll_emu_last_error());
    goto out;
  }
  CK(cudaDeviceSynchronize());
  *bad = 0;
  for (int r = 0; r < k; r++) {
    CK(cudaMemcpy(back, dev[r], n * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) *bad += memcmp(back + i * es, (unsigned char *)host[r] + i * es, es) != 0;
  }
out:
  for (int r = 0; r < k; r++) free(host[r]), cudaFree(dev[r]);
  cudaFree(scratch), free(back);
  return rc;
}

/* Same bits, or both NaN (a NaN's payload is the one thing the GPU's arithmetic may choose). */
static int same_value(const unsigned char *a, const unsigned char *b, taco_dtype dt) {
  float x, y;
  if (dt == TACO_DTYPE_BF16) {
    uint16_t u, v;
    memcpy(&u, a, 2), memcpy(&v, b, 2);
    x = taco_bf16_to_float(u), y = taco_bf16_to_float(v);
  } else memcpy(&x, a, 4), memcpy(&y, b, 4);
  return memcmp(a, b, dt == TACO_DTYPE_BF16 ? 2 : 4) == 0 || (isnan(x) && isnan(y));
}

/* One ablation kernel case: nb partials of n elements (group 3 NaN, group 4 Inf when poison):
 * encode each, decode-sum, decode-sum-encode, on the GPU and in C; *bad: differing bytes/values. */
static int ablate_case(fp8_ablate_kind kind, taco_params p, size_t n, taco_dtype dt, int poison, long long *bad,
                       ts_err *e) {
  const int nb = 3;
  const size_t es = dt == TACO_DTYPE_BF16 ? 2 : 4, bb = fp8_ablate_block_bytes(n, p.group);
  int rc = 0;
  unsigned char *x = malloc(nb * n * es), *blk = malloc(nb * bb), *y = malloc(n * es), *red = malloc(bb);
  unsigned char *back = malloc(nb * bb + n * es);
  void *dx = NULL, *dblk = NULL, *dy = NULL, *dred = NULL;
  taco_rng g = {991 + (uint64_t)p.group * 7 + n + (uint64_t)kind};
  if (!x || !blk || !y || !red || !back) {
    rc = ts_fail_sys(e, "ablation check: out of memory");
    goto out;
  }
  for (size_t i = 0; i < nb * n; i++) {
    float v = (float)taco_rng_normal(&g) * (i % 97 == 5 ? 60.0f : 1.0f);
    size_t gi = (i % n) / (size_t)p.group;
    if (poison && i < n && gi == 3 && i % 5 == 0) v = NAN;
    if (poison && i >= n && i < 2 * n && gi == 4 && i % 7 == 0) v = -INFINITY;
    if (dt == TACO_DTYPE_BF16) ((uint16_t *)x)[i] = taco_bf16_from_float(v);
    else ((float *)x)[i] = v;
  }
  CK(cudaMalloc(&dx, nb * n * es));
  CK(cudaMalloc(&dblk, nb * bb));
  CK(cudaMalloc(&dy, n * es));
  CK(cudaMalloc(&dred, bb));
  CK(cudaMemcpy(dx, x, nb * n * es, cudaMemcpyHostToDevice));
  CK(cudaMemset(dblk, 0xA5, nb * bb));
  CK(cudaMemset(dy, 0xA5, n * es));
  CK(cudaMemset(dred, 0xA5, bb));
  /* the host outputs start from the same poison: padding codes are written, nothing stays unwritten */
  memset(blk, 0xA5, nb * bb), memset(y, 0xA5, n * es), memset(red, 0xA5, bb);
  for (int b = 0; b < nb; b++) {
    if (fp8_ablate_encode(kind, (unsigned char *)dx + b * n * es, dt, n, p, (unsigned char *)dblk + b * bb, NULL)) {
      rc = ts_fail_sys(e, "ablation check: %s", fp8_ablate_last_error());
      goto out;
    }
    fp8_ablate_ref_encode(kind, x + b * n * es, dt, n, p, blk + b * bb);
  }
  if (fp8_ablate_decode_sum(kind, dblk, nb, n, p, dy, dt, NULL) ||
      fp8_ablate_decode_sum_encode(kind, dblk, nb, n, p, dred, NULL)) {
    rc = ts_fail_sys(e, "ablation check: %s", fp8_ablate_last_error());
    goto out;
  }
  fp8_ablate_ref_decode_sum(kind, blk, nb, n, p, y, dt);
  fp8_ablate_ref_decode_sum_encode(kind, blk, nb, n, p, red);
  CK(cudaDeviceSynchronize());
  *bad = 0;
  CK(cudaMemcpy(back, dblk, nb * bb, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < nb * bb; i++) *bad += back[i] != blk[i];
  CK(cudaMemcpy(back, dred, bb, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bb; i++) *bad += back[i] != red[i];
  CK(cudaMemcpy(back, dy, n * es, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) *bad += !same_value(back + i * es, y + i * es, dt);
out:
  cudaFree(dx), cudaFree(dblk), cudaFree(dy), cudaFree(dred);
  free(x), free(blk), free(y), free(red), free(back);
  return rc;
}

/* The ablation kernels alone: both kinds, G 32..512, E4M3/E5M2, BF16/FP32, a partial last group. */
static int ablate_check(int *cases_n, int *failures, ts_err *e) {
  static const int groups[] = {32, 64, 128, 256, 512};
  printf("\n%-26s %5s %5s %6s %10s %12s\n", "ablation kernel", "G", "fp8", "dtype", "elements", "differing");
  for (int kind = 0; kind < 2; kind++)
    for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++)
      for (int f = 0; f < 2; f++)
        for (int d = 0; d < 2; d++) {
          taco_params p = {groups[gi], f ? TACO_FP8_E5M2 : TACO_FP8_E4M3};
          taco_dtype dt = d ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
          size_t n = (size_t)groups[gi] * 37 + 11; /* 38 groups, the last one partial */
          long long bad = 0;
          if (ablate_case((fp8_ablate_kind)kind, p, n, dt, 1, &bad, e)) return -1;
          (*cases_n)++, *failures += bad != 0;
          printf("%-26s %5d %5s %6s %10zu %12lld%s\n", kind ? "fp8-hadamard (NaN, Inf)" : "fp8-group (NaN, Inf)",
                 groups[gi], f ? "e5m2" : "e4m3", d ? "fp32" : "bf16", n, bad, bad ? "  MISMATCH" : "");
        }
  return 0;
}

int train_emu_check(ts_err *e) {
  static const int ks[] = {2, 4, 8};
  int cases_n = 0, failures = 0;
  printf("%-26s %4s %6s %10s %12s\n", "codec", "TP", "dtype", "elements", "differing");
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (size_t ki = 0; ki < 3; ki++)
      for (int d = 0; d < 2; d++) {
        const emu_case *c = &cases[ci];
        taco_dtype dt = d ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
        if (dt == TACO_DTYPE_FP32 && c->codec == COLL_EMU_FP8_TENSOR) continue;
        long long bad = 0;
        size_t rows = 96, cols = 512;
        if (run_case(c, ks[ki], rows, cols, dt, &bad, e)) return -1;
        cases_n++, failures += bad != 0;
        printf("%-26s %4d %6s %10zu %12lld%s\n", c->name, ks[ki], d ? "fp32" : "bf16", rows * cols, bad,
               bad ? "  MISMATCH" : "");
      }
  printf("emulated all-reduce, GPU against the plain-C reference: %d of %d cases bit-identical\n", cases_n - failures,
         cases_n);
  int an = 0, af = 0;
  if (ablate_check(&an, &af, e)) return -1;
  printf("ablation kernels, GPU against the plain-C reference: %d of %d cases bit-identical (NaN payloads aside)\n",
         an - af, an);
  cases_n += an, failures += af;
  if (failures) return ts_fail_sys(e, "emulation check: %d of %d cases differ from the reference", failures, cases_n);
  return 0;
}
