/* coll_emu.h — the TP all-reduce of k ranks computed on one GPU, for
 * `tacorun train --tp-emulate k` (issue 25): the k partial results live in k
 * buffers of the same device, and the same codec kernels run on them in the
 * same order as the real collective, so each rank's buffer ends with what the
 * real collective would leave there.
 *
 *   PLAIN        elementwise sum (or max, average) in FP32 in rank order,
 *                rounded once to the buffers' type (on two ranks this is
 *                NCCL's result bit for bit: one addition; with more ranks
 *                NCCL's ring rounds after every hop in its own order, so TP > 2
 *                plain sums are not NCCL's bits)
 *   TACO         two-shot (coll_taco.h): every rank encodes its partial, the
 *                owner of each segment decode-sum-encodes the k blocks of it
 *                in rank order, every rank decodes the reduced blocks. The
 *                codec works on self-contained groups and the segments are cut
 *                at whole groups, so this is computed per group over the
 *                whole message at once: encode k blocks, one decode-sum-
 *                encode, one decode (coll_emu_ref.c and its test check that
 *                this equals the per-rank, per-segment collective).
 *                one_shot: encode, decode-sum of the k blocks (one quantization).
 *   FP8_TENSOR   tacorun train's per-tensor FP8 (fp8_plain.h): every rank
 *                encodes its whole tensor, every rank decode-sums the k blocks
 *                in rank order (BF16 only).
 *   FP8_GROUP, FP8_HADAMARD  the ablation codecs (fp8_ablate.h), two-shot or
 *                one-shot as TACO.
 * CAAT-Net (coll_emu_caat): as coll_caat_allreduce: the first
 * floor(p cols) channels of each rank are gathered and all-reduced with the
 * codec above, the others stay private and are scaled by sqrt(k).
 *
 * GPU functions enqueue on one stream (the caller orders the ranks' streams
 * before and after); scratch: coll_emu_scratch_bytes() of device memory,
 * 256-byte aligned. Return 0, or -1 with coll_emu_last_error(). The
 * references (_ref) compute the same on host buffers with the plain-C
 * references of every kernel. */
#ifndef COLL_EMU_H
#define COLL_EMU_H

#include <stddef.h>

#include "fp8_ablate.h"
#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_EMU_MAX_RANKS 16

typedef enum {
  COLL_EMU_PLAIN,
  COLL_EMU_TACO,
  COLL_EMU_FP8_TENSOR,
  COLL_EMU_FP8_GROUP,
  COLL_EMU_FP8_HADAMARD
} coll_emu_codec;
typedef enum { COLL_EMU_SUM, COLL_EMU_MAX, COLL_EMU_AVG } coll_emu_op;

typedef struct {
  coll_emu_codec codec;
  taco_params taco; /* group and FP8 format of TACO and the ablation codecs (FP8_TENSOR: E4M3) */
  int one_shot;     /* TACO and ablation codecs: one-shot instead of two-shot */
  taco_nonfinite *nonfinite; /* TACO: the encodes count NaN/Inf inputs here (device memory; they are
                                encoded as zeros); NULL: not counted. The reference ignores it. */
} coll_emu_opts;

const char *coll_emu_last_error(void);
/* Shared channels of CAAT-Net: floor(p cols) (0 for p <= 0, cols for p >= 1). */
size_t coll_emu_caat_shared(size_t cols, double p);
/* Scratch for k ranks of n elements of elem_bytes (CAAT-Net: n = rows * cols). */
size_t coll_emu_scratch_bytes(int k, size_t n, size_t elem_bytes);

/* ---- GPU (stream: a cudaStream_t) ---- */
/* out[r] = op over in[0..k-1] (FP32 in rank order, AVG: each term times 1/k); in place allowed. */
int coll_emu_plain(const void *const *in, void *const *out, int k, size_t n, taco_dtype dt, coll_emu_op op,
                   void *stream);
/* bufs[r]: rank r's partial, in place; every buffer ends with the same values. */
int coll_emu_allreduce(void *const *bufs, int k, size_t n, taco_dtype dt, const coll_emu_opts *o, void *scratch,
                       void *stream);
int coll_emu_caat(void *const *bufs, int k, size_t rows, size_t cols, double p, taco_dtype dt, const coll_emu_opts *o,
                  void *scratch, void *stream);

/* ---- plain C ---- */
int coll_emu_plain_ref(const void *const *in, void *const *out, int k, size_t n, taco_dtype dt, coll_emu_op op);
int coll_emu_allreduce_ref(void *const *bufs, int k, size_t n, taco_dtype dt, const coll_emu_opts *o);
int coll_emu_caat_ref(void *const *bufs, int k, size_t rows, size_t cols, double p, taco_dtype dt,
                      const coll_emu_opts *o);

#ifdef __cplusplus
}
#endif
#endif
