/* fp8_plain.h — plain per-tensor FP8 (E4M3) for the TP all-reduce: one
 * absmax scale for the whole tensor, no Hadamard transform, no groups. It is
 * the baseline that shows what TACO's pieces (Hadamard, group scales) buy in
 * the loss curves of `tacorun train`.
 *
 * One rank's message (a "block") is its n FP8 codes, padded to 16 bytes, then
 * 16 bytes holding the float scale s = absmax / 448 (E4M3's largest finite):
 *   encode:     absmax = max |x_i|; s = absmax / 448; q_i = fp8(x_i * (1 / s))
 *               (round to nearest even, saturating; s == 0: every q_i = 0)
 *   decode-sum: out_i = bf16(sum over ranks r in order 0..k-1 of fp8_to_float(q_ri) * s_r),
 *               accumulated in FP32 from 0, one multiply and one add per term
 *               (no fused multiply-add), so every rank gets the same bits.
 * A NaN or Inf anywhere in x makes s non-finite, and every decoded value NaN,
 * so the executor's NaN check stops the run instead of hiding it.
 * Inputs and outputs are BF16 (uint16_t bit patterns).
 *
 * fp8_plain_ref_* is the plain-C reference (fp8_plain_ref.c, always built);
 * fp8_plain_encode/decode_sum are the CUDA kernels (fp8_plain.cu), which
 * produce the same bits as the reference. */
#ifndef FP8_PLAIN_H
#define FP8_PLAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP8_PLAIN_E4M3_MAX 448.0f

/* Bytes of one rank's block for n elements. */
static inline size_t fp8_plain_block_bytes(size_t n) { return (n + 15) / 16 * 16 + 16; }
/* Whether a scale is one the encoder codes with (a normal, finite float). */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int fp8_plain_scale_codes(float s) { return s >= 1.17549435e-38f && s <= 3.40282347e38f; }
/* The scale stored in a block (the decode multiplier). */
float fp8_plain_block_scale(const uint8_t *block, size_t n);

/* Plain-C reference. */
float fp8_plain_ref_absmax(const uint16_t *x, size_t n); /* NaN when any |x_i| is NaN */
void fp8_plain_ref_encode(const uint16_t *x, size_t n, uint8_t *block);
void fp8_plain_ref_decode_sum(const uint8_t *blocks, int nblocks, size_t n, uint16_t *out);

/* CUDA (stream is a cudaStream_t). scratch: 4 bytes of device memory for the
 * absmax. Returns 0, or -1 with the CUDA error in fp8_plain_last_error(). */
int fp8_plain_encode(const void *x, size_t n, unsigned *scratch, void *block, void *stream);
int fp8_plain_decode_sum(const void *blocks, int nblocks, size_t n, void *out, void *stream);
const char *fp8_plain_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
