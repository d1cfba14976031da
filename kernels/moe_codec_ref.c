/* moe_codec_ref.c — plain-C reference of the fused MoE codec kernels
 * (moe_codec.h): the codec's group functions (taco_ref.h) on the routing's
 * rows (moe_route.h), in the order the unfused sequence computes them. */
#include "moe_codec.h"

#include <math.h>
#include <string.h>

#include "moe_route.h"
#include "taco_fp8.h"
#include "taco_internal.h"
#include "taco_ref.h"

size_t moe_codec_wire_bytes(int t, int k, int h, int group) {
  return taco_wire_bytes((size_t)t * (size_t)k * (size_t)h, group);
}

int moe_codec_check_args(const void *in, const int32_t *pos, int t, int k, int h, taco_params p, const void *out) {
  if (!taco_params_valid(p))
    return TACO_FAIL("moe codec: group %d / fp8 %d: want group 32..512 (power of two), E4M3 or E5M2", p.group,
                     (int)p.fp8);
  if (t < 1) return TACO_FAIL("moe codec: t = %d tokens, want >= 1", t);
  if (k < 1 || k > MOE_ROUTE_MAX_K) return TACO_FAIL("moe codec: k = %d, want 1..%d", k, MOE_ROUTE_MAX_K);
  if (h < p.group || h % p.group)
    return TACO_FAIL("moe codec: hidden %d, want a positive multiple of the group size %d (token-wise groups)", h,
                     p.group);
  if ((size_t)t * (size_t)k > (size_t)INT32_MAX)
    return TACO_FAIL("moe codec: t k = %zu rows, want <= %d (int32 pos)", (size_t)t * (size_t)k, INT32_MAX);
  if (!in || !pos || !out) return TACO_FAIL("moe codec: NULL input, pos or output");
  return 0;
}

static int check_pos(const int32_t *pos, int t, int k) {
  const long long n = (long long)t * k;
  for (long long i = 0; i < n; i++)
    if (pos[i] < 0 || pos[i] >= n) return TACO_FAIL("moe codec: pos[%lld] = %d, want 0..%lld", i, pos[i], n - 1);
  return 0;
}

/* One token group read once, encoded once, its codes and scales stored at the
 * k rows it is copied to (taco_ref_encode on the permuted buffer, per group). */
int moe_permute_encode_ref(const uint16_t *x, const int32_t *pos, int t, int k, int h, taco_params p, void *block,
                           taco_nonfinite *nf) {
  if (moe_codec_check_args(x, pos, t, k, h, p, block) || check_pos(pos, t, k)) return -1;
  const int g = p.group, gpr = h / g;
  const size_t rows = (size_t)t * (size_t)k;
  uint8_t *payload = (uint8_t *)block;
  float *scales = (float *)(payload + rows * (size_t)h);
  float v[512];
  uint8_t q[512];
  for (int r = 0; r < t; r++)
    for (int c = 0; c < gpr; c++) {
      const uint16_t *src = x + (size_t)r * h + (size_t)c * g;
      int bad = 0;
      for (int i = 0; i < g; i++) {
        v[i] = taco_bf16_to_float(src[i]);
        if (!isfinite(v[i])) {
          bad = 1;
          if (nf)
            for (int j = 0; j < k; j++) { /* the element in each of its k copies */
              unsigned long long e = (unsigned long long)pos[(size_t)r * k + j] * (unsigned long long)h +
                                     (unsigned long long)c * g + (unsigned long long)i;
              if (nf->count == 0 || e < nf->first_index) nf->first_index = e;
              nf->count++;
            }
        }
      }
      float s_a = 0.0f, s_q = 0.0f;
      if (bad)
        memset(q, 0, (size_t)g);
      else
        taco_ref_encode_group(v, g, p.fp8, q, &s_a, &s_q);
      for (int j = 0; j < k; j++) {
        const size_t row = (size_t)pos[(size_t)r * k + j], gi = row * (size_t)gpr + (size_t)c;
        memcpy(payload + gi * (size_t)g, q, (size_t)g);
        scales[2 * gi] = s_a, scales[2 * gi + 1] = s_q;
      }
    }
  return 0;
}

/* Per token group: each of its k rows decoded (taco_ref_decode: codes times
 * scale from 0, then the transform), rounded to BF16, then combined with fmaf
 * in order j = 0 .. k-1 (moe_combine_ref). */
int moe_decode_combine_ref(const void *block, const int32_t *pos, const float *w, int t, int k, int h, taco_params p,
                           uint16_t *out) {
  if (moe_codec_check_args(block, pos, t, k, h, p, out) || check_pos(pos, t, k)) return -1;
  const int g = p.group, gpr = h / g;
  const size_t rows = (size_t)t * (size_t)k;
  const uint8_t *payload = (const uint8_t *)block;
  const float *scales = (const float *)(payload + rows * (size_t)h);
  float acc[512], sum[512];
  for (int r = 0; r < t; r++)
    for (int c = 0; c < gpr; c++) {
      for (int i = 0; i < g; i++) sum[i] = 0.0f;
      for (int j = 0; j < k; j++) {
        const size_t gi = (size_t)pos[(size_t)r * k + j] * (size_t)gpr + (size_t)c;
        for (int i = 0; i < g; i++) acc[i] = 0.0f;
        taco_ref_decode_group_acc(payload + gi * (size_t)g, scales[2 * gi], scales[2 * gi + 1], g, p.fp8, acc);
        taco_ref_fwht(acc, g);
        for (int i = 0; i < g; i++) {
          const float y = taco_bf16_to_float(taco_bf16_from_float(acc[i]));
          sum[i] = w ? fmaf(w[(size_t)r * k + j], y, sum[i]) : sum[i] + y;
        }
      }
      for (int i = 0; i < g; i++) out[(size_t)r * h + (size_t)c * g + (size_t)i] = taco_bf16_from_float(sum[i]);
    }
  return 0;
}
