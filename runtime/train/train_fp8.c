/* train_fp8.c — the per-tensor FP8 TP all-reduce and its check against the
 * plain-C reference (train_fp8.h). */
#include "train_fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_plain.h"
#include "taco_fp8.h"
#include "gpu_check.h"

#define TF_CUDA(call) CUDA_CHECK(e, call)

static int fp8_allreduce(void *ctx, void *buf, size_t rows, size_t cols, int backward, cudaStream_t stream, ts_err *e) {
  (void)backward;
  train_fp8 *f = ctx;
  const size_t n = rows * cols;
  if (n > f->cap_n) return ts_fail_sys(e, "fp8 all-reduce: %zu elements, buffers for %zu", n, f->cap_n);
  if (fp8_plain_encode(buf, n, f->scratch, f->send, stream))
    return ts_fail_sys(e, "fp8 all-reduce: %s", fp8_plain_last_error());
  ncclResult_t nr = ncclAllGather(f->send, f->recv, fp8_plain_block_bytes(n), ncclUint8, f->comm, stream);
  if (nr != ncclSuccess) return ts_fail_sys(e, "fp8 all-reduce: ncclAllGather: %s", ncclGetErrorString(nr));
  if (fp8_plain_decode_sum(f->recv, f->nranks, n, buf, stream))
    return ts_fail_sys(e, "fp8 all-reduce: %s", fp8_plain_last_error());
  return 0;
}

int train_fp8_attach(train_fp8 *f, exec_model *m, ts_err *e) {
  memset(f, 0, sizeof *f);
  if (!m->tp_comm) return 0; /* TP = 1: nothing travels */
  f->comm = m->tp_comm, f->nranks = m->tp;
  f->cap_n = (size_t)(m->tokens * m->cfg.hidden);
  const size_t bb = fp8_plain_block_bytes(f->cap_n);
  TF_CUDA(cudaMalloc(&f->send, bb));
  TF_CUDA(cudaMalloc(&f->recv, bb * (size_t)f->nranks));
  TF_CUDA(cudaMalloc((void **)&f->scratch, sizeof *f->scratch));
  m->tp_allreduce_hook = fp8_allreduce;
  m->tp_allreduce_hook_ctx = f;
  return 0;
}

void train_fp8_free(train_fp8 *f) {
  cudaFree(f->send), cudaFree(f->recv), cudaFree(f->scratch);
  memset(f, 0, sizeof *f);
}

/* ---- check ---- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static float gauss(uint64_t *s) { /* Box-Muller */
  double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0, u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

typedef enum { CASE_GAUSS, CASE_OUTLIER, CASE_ZERO, CASE_NAN, CASE_TINY } check_case;
static const char *case_name[] = {"gaussian", "gaussian+outlier", "zeros", "one NaN", "tiny (1e-39)"};

static void fill(uint16_t *x, size_t n, check_case c, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    float v = c == CASE_ZERO ? 0.0f : c == CASE_TINY ? 1e-39f * gauss(&s) : gauss(&s);
    x[i] = taco_bf16_from_float(v);
  }
  if (c == CASE_OUTLIER) x[n / 2] = taco_bf16_from_float(300.0f);
  if (c == CASE_NAN) x[n / 3] = 0x7FC0;
}

/* One case on two "ranks": GPU and reference blocks and sums; mismatches counted. */
static int check_one(size_t n, check_case c, uint64_t seed, long long *bad_codes, long long *bad_sums, double *rel_l2,
                     ts_err *e) {
  const size_t bb = fp8_plain_block_bytes(n);
  uint16_t *x = malloc(2 * n * 2), *ref_out = malloc(n * 2), *gpu_out = malloc(n * 2);
  uint8_t *ref_b = malloc(2 * bb), *gpu_b = malloc(2 * bb);
  void *dx = NULL, *db = NULL, *dout = NULL;
  unsigned *dscr = NULL;
  int rc = -1;
  if (!x || !ref_out || !gpu_out || !ref_b || !gpu_b) {
    ts_fail_sys(e, "fp8 check: out of memory");
    goto out;
  }
  fill(x, n, c, seed), fill(x + n, n, c == CASE_NAN ? CASE_GAUSS : c, seed + 1);
  fp8_plain_ref_encode(x, n, ref_b), fp8_plain_ref_encode(x + n, n, ref_b + bb);
  fp8_plain_ref_decode_sum(ref_b, 2, n, ref_out);
#define CK(call) CUDA_CHECK_GOTO(e, call, out)
  CK(cudaMalloc(&dx, 2 * n * 2));
  CK(cudaMalloc(&db, 2 * bb));
  CK(cudaMalloc(&dout, n * 2));
  CK(cudaMalloc((void **)&dscr, 4));
  CK(cudaMemcpy(dx, x, 2 * n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(db, 0xAB, 2 * bb)); /* the kernels must write every byte of a block */
  for (int r = 0; r < 2; r++)
    if (fp8_plain_encode((uint16_t *)dx + (size_t)r * n, n, dscr, (uint8_t *)db + (size_t)r * bb, NULL)) {
      ts_fail_sys(e, "fp8 check: %s", fp8_plain_last_error());
      goto out;
    }
  if (fp8_plain_decode_sum(db, 2, n, dout, NULL)) {
    ts_fail_sys(e, "fp8 check: %s", fp8_plain_last_error());
    goto out;
  }
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(gpu_b, db, 2 * bb, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gpu_out, dout, n * 2, cudaMemcpyDeviceToHost));
#undef CK
  *bad_codes = *bad_sums = 0;
  const size_t pad = (n + 15) / 16 * 16;
  for (int r = 0; r < 2; r++) {
    const uint8_t *rb = ref_b + (size_t)r * bb, *gb = gpu_b + (size_t)r * bb;
    for (size_t i = 0; i < bb; i++)
      if (i < pad || i >= pad + 4) *bad_codes += rb[i] != gb[i];
    /* the scale: the same bits, or NaN on both sides (the division's NaN payload may differ) */
    float rs = fp8_plain_block_scale(rb, n), gs = fp8_plain_block_scale(gb, n);
    if (memcmp(rb + pad, gb + pad, 4) && !(isnan(rs) && isnan(gs))) *bad_codes += 4;
  }
  double err2 = 0, norm2 = 0;
  for (size_t i = 0; i < n; i++) {
    float g = taco_bf16_to_float(gpu_out[i]), r = taco_bf16_to_float(ref_out[i]);
    if (isnan(g) || isnan(r)) *bad_sums += !(isnan(g) && isnan(r)); /* NaN payloads may differ */
    else *bad_sums += gpu_out[i] != ref_out[i];
    double exact = (double)taco_bf16_to_float(x[i]) + taco_bf16_to_float(x[n + i]);
    err2 += (r - exact) * (r - exact), norm2 += exact * exact;
  }
  *rel_l2 = norm2 > 0 ? sqrt(err2 / norm2) : 0.0;
  rc = 0;
out:
  free(x), free(ref_out), free(gpu_out), free(ref_b), free(gpu_b);
  cudaFree(dx), cudaFree(db), cudaFree(dout), cudaFree(dscr);
  return rc;
}

int train_fp8_check(ts_err *e) {
  static const size_t sizes[] = {1, 7, 8, 1000, 4097, 1 << 20, (1 << 21) + 3};
  int failures = 0, cases = 0;
  printf("%-10s %-18s %12s %12s %14s\n", "elements", "data", "bad bytes", "bad sums", "rel L2 (ref)");
  /* (rel L2: the reference sum against the exact sum of the two BF16 inputs) */
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
    for (int c = 0; c < 5; c++) {
      long long bc, bs;
      double rl;
      if (check_one(sizes[si], (check_case)c, 1000 + si * 10 + (uint64_t)c, &bc, &bs, &rl, e)) return -1;
      cases++;
      failures += bc || bs;
      printf("%-10zu %-18s %12lld %12lld %14.3e%s\n", sizes[si], case_name[c], bc, bs, rl, bc || bs ? "  MISMATCH" : "");
    }
  printf("fp8 per-tensor codec, GPU against the plain-C reference: %d of %d cases bit-identical\n", cases - failures,
         cases);
  if (failures) return ts_fail_sys(e, "fp8 check: %d of %d cases differ from the reference", failures, cases);
  return 0;
}
