/* test_infer_argmax_gpu.cu — greedy sampling (infer_argmax, runtime/ops/infer_kernels.cu)
 * against its plain-C reference (infer_ref_argmax): fresh random BF16 logits with
 * planted ties of the largest value, NaN words, a row of NaN only, vocabulary
 * padding (vocab_valid below tp x vocab_local), shard widths that are and are not
 * multiples of 8 (16-byte and element paths), a logits pointer off 16-byte
 * alignment, TP 1 to 8. Tokens poisoned (-1) before each call; the tokens must
 * equal the reference's exactly (an index, no tolerance). No CUDA device:
 * SKIP, exit 77. */
extern "C" {
#include "infer_kernels.h"
#include "infer_ref.h"
#include "ts_error.h"
}

#include "exec_gpu_test.h"

static int run_case(int batch, int tp, long long vl, long long valid, int offset, int plant) {
  const size_t n = (size_t)batch * tp * vl;
  std::vector<uint16_t> h(n + 8);
  uint16_t *lg = h.data() + offset;
  for (size_t i = 0; i < n; i++) lg[i] = to_bf16((float)(urand() * 8 - 4));
  const uint16_t nan = 0x7fc0, top = to_bf16(5.0f);
  for (int b = 0; b < batch; b++) {
    if (plant) /* the largest value at three random places: the smallest index wins */
      for (int k = 0; k < 3; k++) {
        long long g = (long long)(urand() * (double)(valid < tp * vl ? valid : tp * vl));
        lg[((g / vl) * batch + b) * vl + g % vl] = top;
      }
    for (int k = 0; k < 4; k++) { /* NaN words are never chosen */
      long long g = (long long)(urand() * (double)(tp * vl));
      lg[((g / vl) * batch + b) * vl + g % vl] = nan;
    }
  }
  if (batch > 2) /* a sequence of NaN only: token 0 */
    for (int r = 0; r < tp; r++)
      for (long long j = 0; j < vl; j++) lg[((long long)r * batch + 2) * vl + j] = nan;
  std::vector<int> ref(batch), got(batch);
  infer_ref_argmax(lg, ref.data(), batch, tp, vl, valid);
  void *d, *scratch;
  int32_t *tok;
  CK(cudaMalloc(&d, (n + 8) * 2));
  CK(cudaMalloc(&scratch, infer_argmax_scratch_bytes(batch, tp, vl)));
  CK(cudaMalloc((void **)&tok, batch * sizeof(int32_t)));
  CK(cudaMemcpy(d, h.data(), (n + 8) * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(tok, 0xff, batch * sizeof(int32_t)));
  ts_err e = {};
  TRY(infer_argmax((uint16_t *)d + offset, tok, batch, tp, vl, valid, scratch, NULL, &e));
  CK(cudaMemcpy(got.data(), tok, batch * sizeof(int32_t), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int b = 0; b < batch; b++) bad += got[b] != ref[b];
  printf("%s batch=%d tp=%d vocab_local=%lld valid=%lld offset=%d ties=%d: %d of %d tokens differ (first: %d vs %d)\n",
         bad ? "FAIL" : "ok  ", batch, tp, vl, valid, offset, plant, bad, batch, got[0], ref[0]);
  cudaFree(tok), cudaFree(scratch), cudaFree(d);
  return bad != 0;
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  test_seed(20261204);
  int fails = 0, cases = 0;
  struct { int batch, tp; long long vl, valid; int offset, plant; } c[] = {
      {1, 1, 128256, 128256, 0, 1},  {4, 1, 128256, 128256, 0, 0}, {16, 1, 152064, 151665, 0, 1},
      {64, 1, 32000, 32000, 0, 1},   {3, 2, 64128, 128256, 0, 1},  {5, 4, 38016, 151665, 0, 1},
      {8, 8, 16032, 128256, 0, 1},   {2, 1, 1000, 1000, 0, 1},     {3, 2, 4097, 8000, 0, 1},
      {1, 1, 128256, 128256, 1, 1},  {7, 1, 8, 8, 0, 1},           {1, 1, 1, 1, 0, 0},
      {2, 2, 4096, 4096, 0, 1},      {33, 1, 12345, 12000, 3, 1},
  };
  for (size_t i = 0; i < sizeof c / sizeof *c; i++, cases++)
    fails += run_case(c[i].batch, c[i].tp, c[i].vl, c[i].valid, c[i].offset, c[i].plant);
  printf("infer_argmax: %d of %d cases failed\n", fails, cases);
  return fails ? 1 : 0;
}
