/* main.c — dev_decode_argmax: greedy sampling, the one-pass kernel (argmax_one_pass.h)
 * against the library's two-pass infer_argmax, both checked against
 * infer_ref_argmax and timed side by side at the zoo's vocabulary sizes.
 *
 *   dev_decode_argmax [--vocab LIST (128256,152064)] [--batches LIST (1,4,16,64)] [--tp N (1)]
 *
 * Checks: fresh random BF16 logits per point (seeded), tokens poisoned (-1)
 * before each kernel, tokens equal to the reference's (no tolerance: an index).
 * Timing: calib_time_us (median of batches of back-to-back launches; the logits,
 * 0.25-19 MB, stay in L2 as they do after the logits GEMM); GB/s counts the
 * logits read once. Exit 1 when a check fails. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax_one_pass.h"
#include "calibrate_time.h"
#include "gpu_check.h"
#include "infer_kernels.h"
#include "infer_ref.h"
#include "rt_ops.h"
#include "ts_args.h"

typedef struct {
  const void *logits;
  int32_t *tok;
  void *scratch;
  int batch, tp, two_pass;
  long long vl, valid;
} point;

static int launch(void *ctx, long long iter, ts_err *e) {
  (void)iter;
  const point *p = ctx;
  return p->two_pass ? infer_argmax(p->logits, p->tok, p->batch, p->tp, p->vl, p->valid, p->scratch, NULL, e)
                     : dev_argmax_one_pass(p->logits, p->tok, p->batch, p->tp, p->vl, p->valid, NULL, e);
}

/* runs p once over poisoned tokens and compares with ref; *bad += differing tokens */
static int check(point *p, const int *ref, int *bad, ts_err *e) {
  int32_t got[64];
  CUDA_CHECK(e, cudaMemset(p->tok, 0xff, (size_t)p->batch * 4));
  if (launch(p, 0, e)) return -1;
  CUDA_CHECK(e, cudaMemcpy(got, p->tok, (size_t)p->batch * 4, cudaMemcpyDeviceToHost));
  for (int b = 0; b < p->batch; b++) *bad += got[b] != ref[b];
  return 0;
}

static int run_point(long long vocab, int batch, int tp, unsigned long long seed, int *fails, ts_err *e) {
  const long long vl = (vocab + tp - 1) / tp;
  const size_t n = (size_t)batch * tp * vl;
  void *d = NULL, *scratch = NULL;
  int32_t *tok = NULL;
  uint16_t *h = malloc(n * 2);
  int ref[64], rc = -1;
  if (!h) return ts_fail_sys(e, "out of memory");
  CUDA_CHECK_GOTO(e, cudaMalloc(&d, n * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&scratch, infer_argmax_scratch_bytes(batch, tp, vl)), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&tok, (size_t)batch * 4), out);
  if (rt_fill_random_bf16(d, (long long)n, seed, 4.0f, NULL, e)) goto out;
  CUDA_CHECK_GOTO(e, cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost), out);
  infer_ref_argmax(h, ref, batch, tp, vl, vocab);
  point p = {d, tok, scratch, batch, tp, 0, vl, vocab};
  int bad[2] = {0, 0};
  double us[2];
  calib_budget bud = calib_budget_default(0);
  for (int k = 0; k < 2; k++) {
    p.two_pass = k;
    if (check(&p, ref, &bad[k], e)) goto out;
    void *st = NULL;
    int dev = 0;
    CUDA_CHECK_GOTO(e, cudaGetDevice(&dev), out);
    if (calib_time_us(launch, &p, &st, &dev, 1, &bud, &us[k], e)) goto out;
  }
  const double gb = 2.0 * (double)batch * vocab / 1e9;
  printf("%8lld %5d %3d | %9.2f %7.1f | %9.2f %7.1f | %6.2f | %s\n", vocab, batch, tp, us[0], gb / (us[0] * 1e-6),
         us[1], gb / (us[1] * 1e-6), us[0] / us[1], bad[0] || bad[1] ? "FAIL" : "ok");
  *fails += (bad[0] != 0) + (bad[1] != 0);
  rc = 0;
out:
  cudaFree(tok), cudaFree(scratch), cudaFree(d);
  free(h);
  return rc;
}

int main(int argc, char **argv) {
  long long vocab[8] = {128256, 152064}, batches[8] = {1, 4, 16, 64};
  int nv = 2, nb = 4, tp = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && !strcmp(a, "--vocab") && (nv = ts_arg_ll_list(argv[++i], 1, 1LL << 22, vocab, 8)) > 0) continue;
    if (i + 1 < argc && !strcmp(a, "--batches") && (nb = ts_arg_ll_list(argv[++i], 1, 64, batches, 8)) > 0) continue;
    if (i + 1 < argc && !strcmp(a, "--tp") && !ts_arg_int(argv[++i], 1, 8, &tp)) continue;
    fprintf(stderr, "usage: dev_decode_argmax [--vocab LIST (128256,152064)] [--batches LIST of 1..64 (1,4,16,64)] "
                    "[--tp N (1)]\n");
    return ts_arg_is_help(a) ? 0 : 2;
  }
  printf("#  vocab batch  tp | one-pass us    GB/s | two-pass us    GB/s | ratio | tokens\n");
  int fails = 0;
  ts_err e;
  for (int v = 0; v < nv; v++)
    for (int b = 0; b < nb; b++)
      if (run_point(vocab[v], (int)batches[b], tp, 1000 + 10 * v + b, &fails, &e)) {
        fprintf(stderr, "dev_decode_argmax: %s\n", e.msg);
        return 1;
      }
  printf("# %d failed checks\n", fails);
  return fails ? 1 : 0;
}
