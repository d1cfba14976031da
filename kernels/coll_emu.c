/* coll_emu.c — the emulated TP all-reduce on one GPU (coll_emu.h): the codec
 * kernels of the real collective, in its order, on k buffers. */
#include "coll_emu.h"

#include <cuda_runtime_api.h>
#include <math.h>

#include "fp8_plain.h"
#include "gpu_check.h"

int coll_emu_fail(const char *fmt, ...); /* coll_emu_ref.c */

#define EMU_CK(call, what)                                                                                   \
  do {                                                                                                       \
    if ((call) != 0) return coll_emu_fail("%s:%d: %s: %s", __FILE__, __LINE__, #call, (what));            \
  } while (0)
#define EMU_CUDA(call)                                                                                       \
  GPU_CHECK(cudaError_t, cudaSuccess, call,                                                                  \
            return coll_emu_fail("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(gpu_s_)))

static size_t up256(size_t b) { return (b + 255) / 256 * 256; }

int coll_emu_allreduce(void *const *bufs, int k, size_t n, taco_dtype dt, const coll_emu_opts *o, void *scratch,
                       void *stream) {
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  if (o->codec == COLL_EMU_PLAIN) return coll_emu_plain((const void *const *)bufs, bufs, k, n, dt, COLL_EMU_SUM, stream);
  if (o->codec == COLL_EMU_FP8_TENSOR && dt != TACO_DTYPE_BF16)
    return coll_emu_fail("coll_emu: per-tensor FP8 runs on BF16 only");
  if (o->codec != COLL_EMU_FP8_TENSOR && n % (2 * (size_t)o->taco.group))
    return coll_emu_fail("coll_emu: %zu elements are not a whole, even number of groups of %d", n, o->taco.group);
  const size_t es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  const size_t bb = o->codec == COLL_EMU_TACO         ? taco_wire_bytes(n, o->taco.group)
                    : o->codec == COLL_EMU_FP8_TENSOR ? fp8_plain_block_bytes(n)
                                                      : fp8_ablate_block_bytes(n, o->taco.group);
  unsigned char *wire = scratch, *red = wire + (size_t)k * bb;
  unsigned *absmax = (unsigned *)(red + up256(bb)); /* per-tensor FP8's scratch word */
  cudaStream_t st = (cudaStream_t)stream;
  fp8_ablate_kind ak = o->codec == COLL_EMU_FP8_GROUP ? FP8_ABLATE_GROUP : FP8_ABLATE_HADAMARD;
  for (int r = 0; r < k; r++) {
    unsigned char *blk = wire + (size_t)r * bb;
    if (o->codec == COLL_EMU_TACO) EMU_CK(taco_encode(bufs[r], dt, n, o->taco, blk, o->nonfinite, stream), taco_last_error());
    else if (o->codec == COLL_EMU_FP8_TENSOR)
      EMU_CK(fp8_plain_encode(bufs[r], n, absmax, blk, stream), fp8_plain_last_error());
    else EMU_CK(fp8_ablate_encode(ak, bufs[r], dt, n, o->taco, blk, stream), fp8_ablate_last_error());
  }
  if (o->codec == COLL_EMU_FP8_TENSOR) EMU_CK(fp8_plain_decode_sum(wire, k, n, bufs[0], stream), fp8_plain_last_error());
  else if (o->codec == COLL_EMU_TACO && o->one_shot)
    EMU_CK(taco_decode_sum(wire, k, n, o->taco, bufs[0], dt, stream), taco_last_error());
  else if (o->codec == COLL_EMU_TACO) {
    EMU_CK(taco_decode_sum_encode(wire, k, n, o->taco, red, stream), taco_last_error());
    EMU_CK(taco_decode(red, n, o->taco, bufs[0], dt, stream), taco_last_error());
  } else if (o->one_shot) EMU_CK(fp8_ablate_decode_sum(ak, wire, k, n, o->taco, bufs[0], dt, stream), fp8_ablate_last_error());
  else {
    EMU_CK(fp8_ablate_decode_sum_encode(ak, wire, k, n, o->taco, red, stream), fp8_ablate_last_error());
    EMU_CK(fp8_ablate_decode_sum(ak, red, 1, n, o->taco, bufs[0], dt, stream), fp8_ablate_last_error());
  }
  for (int r = 1; r < k; r++) EMU_CUDA(cudaMemcpyAsync(bufs[r], bufs[0], n * es, cudaMemcpyDeviceToDevice, st));
  return 0;
}

int coll_emu_caat(void *const *bufs, int k, size_t rows, size_t cols, double p, taco_dtype dt, const coll_emu_opts *o,
                  void *scratch, void *stream) {
  const size_t shared = coll_emu_caat_shared(cols, p), es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  const float scale = (float)sqrt((double)k);
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  unsigned char *pack = scratch;
  void *packs[COLL_EMU_MAX_RANKS];
  for (int r = 0; r < k; r++) {
    packs[r] = pack + (size_t)r * rows * shared * es;
    if (shared) EMU_CK(caat_gather_shared(bufs[r], dt, rows, cols, shared, packs[r], stream), taco_last_error());
    if (shared < cols) EMU_CK(caat_scale_private(bufs[r], dt, rows, cols, shared, scale, stream), taco_last_error());
  }
  if (!shared) return 0;
  if (coll_emu_allreduce(packs, k, rows * shared, dt, o, pack + up256((size_t)k * rows * cols * es), stream)) return -1;
  for (int r = 0; r < k; r++)
    EMU_CK(caat_scatter_shared(packs[r], dt, rows, cols, shared, bufs[r], stream), taco_last_error());
  return 0;
}
