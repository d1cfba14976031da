/* fp8_plain_ref.c — plain-C reference of the per-tensor FP8 codec (fp8_plain.h). */
#include "fp8_plain.h"

#include <string.h>

#include "taco_fp8.h"

/* |x| as float bits: comparing bit patterns orders non-negative floats and puts NaN above Inf. */
static uint32_t abs_bits(uint16_t h) { return ((uint32_t)h << 16) & 0x7FFFFFFFu; }

float fp8_plain_ref_absmax(const uint16_t *x, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b = abs_bits(x[i]);
    if (b > m) m = b;
  }
  return taco_bits_float(m);
}

float fp8_plain_block_scale(const uint8_t *block, size_t n) {
  float s;
  memcpy(&s, block + (n + 15) / 16 * 16, sizeof s);
  return s;
}

void fp8_plain_ref_encode(const uint16_t *x, size_t n, uint8_t *block) {
  const float s = fp8_plain_ref_absmax(x, n) / FP8_PLAIN_E4M3_MAX;
  /* Codes only for a normal, finite s: below FLT_MIN 1/s could overflow (the
   * tensor is zero for any purpose, all codes 0); a NaN/Inf s leaves zero
   * codes and the scale carries it into every decoded value. */
  const int coded = fp8_plain_scale_codes(s);
  const float inv = coded ? 1.0f / s : 0.0f;
  for (size_t i = 0; i < n; i++) block[i] = coded ? taco_fp8_e4m3_from_float(taco_bf16_to_float(x[i]) * inv) : 0;
  size_t pad = (n + 15) / 16 * 16;
  memset(block + n, 0, pad + 16 - n);
  memcpy(block + pad, &s, sizeof s);
}

void fp8_plain_ref_decode_sum(const uint8_t *blocks, int nblocks, size_t n, uint16_t *out) {
  const size_t bb = fp8_plain_block_bytes(n);
  for (size_t i = 0; i < n; i++) {
    float acc = 0.0f;
    for (int r = 0; r < nblocks; r++) {
      const uint8_t *b = blocks + (size_t)r * bb;
      float term = taco_fp8_e4m3_to_float(b[i]) * fp8_plain_block_scale(b, n);
      acc = acc + term;
    }
    out[i] = taco_bf16_from_float(acc);
  }
}
