/* test_moe_codec_ref.c — CPU tests of the fused MoE codec reference
 * (kernels/moe_codec.h): permute + encode equals moe_permute_ref then
 * taco_ref_encode, decode + combine equals taco_ref_decode then
 * moe_combine_ref, bit for bit, on random routings of several shapes; bad
 * arguments are rejected (CUnit). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_codec.h"
#include "moe_route.h"
#include "taco_fp8.h"
#include "taco_ref.h"

typedef struct {
  int t, h, E, k, group;
  taco_fp8 fp8;
  int special; /* 0: N(0,1) x a per-token scale; 1: plus NaN/Inf, zero rows and huge values */
} shape;

static const shape shapes[] = {
    {1, 32, 1, 1, 32, TACO_FP8_E4M3, 0},    {5, 64, 4, 2, 64, TACO_FP8_E4M3, 0},
    {17, 256, 8, 2, 128, TACO_FP8_E5M2, 0}, {33, 512, 64, 8, 256, TACO_FP8_E4M3, 0},
    {9, 1024, 128, 8, 512, TACO_FP8_E4M3, 1}, {7, 96, 3, 3, 32, TACO_FP8_E5M2, 1},
    {4, 128, 16, 16, 128, TACO_FP8_E4M3, 1}, {40, 384, 8, 2, 128, TACO_FP8_E4M3, 1},
    {2, 512, 2, 2, 512, TACO_FP8_E5M2, 0},
};

/* Random routing: top-k of random logits (moe_topk_ref), then moe_map_ref. */
static void make_routing(const shape *s, taco_rng *rng, int32_t *pos, float *w) {
  const size_t n = (size_t)s->t * s->k;
  float *logits = malloc(sizeof(float) * (size_t)s->t * s->E);
  int32_t *idx = malloc(sizeof(int32_t) * n), *count = malloc(sizeof(int32_t) * (size_t)s->E);
  for (size_t i = 0; i < (size_t)s->t * s->E; i++) logits[i] = (float)taco_rng_normal(rng);
  moe_topk_ref(logits, s->t, s->E, s->k, idx, w);
  CU_ASSERT_EQUAL(moe_map_ref(idx, s->t, s->E, s->k, pos, count), 0);
  free(count);
  free(idx);
  free(logits);
}

static void make_tokens(const shape *s, taco_rng *rng, uint16_t *x) {
  for (int r = 0; r < s->t; r++) {
    const float scale = (float)exp(4.0 * taco_rng_normal(rng));
    for (int c = 0; c < s->h; c++)
      x[(size_t)r * s->h + c] = taco_bf16_from_float(scale * (float)taco_rng_normal(rng));
  }
  if (!s->special) return;
  x[3] = taco_bf16_from_float(NAN);
  x[(size_t)(s->t - 1) * s->h + s->h - 1] = taco_bf16_from_float(INFINITY);
  if (s->t > 2) memset(x + (size_t)1 * s->h, 0, sizeof *x * (size_t)s->h); /* a zero token */
  x[(size_t)(s->t / 2) * s->h + s->group] = taco_bf16_from_float(3e38f); /* a group above the prescale bound */
}

static void test_permute_encode_equals_sequence(void) {
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const shape *s = &shapes[si];
    const taco_params p = {s->group, s->fp8};
    const size_t n = (size_t)s->t * s->k, elems = n * (size_t)s->h, wire = moe_codec_wire_bytes(s->t, s->k, s->h, s->group);
    CU_ASSERT_EQUAL(wire, taco_wire_bytes(elems, s->group));
    taco_rng rng = {0x5eed0000u + si};
    uint16_t *x = malloc(sizeof *x * (size_t)s->t * s->h), *perm = malloc(sizeof *perm * elems);
    int32_t *pos = malloc(sizeof *pos * n);
    float *w = malloc(sizeof *w * n);
    uint8_t *fused = malloc(wire), *seq = malloc(wire);
    make_routing(s, &rng, pos, w);
    make_tokens(s, &rng, x);
    memset(fused, 0xFF, wire);
    memset(seq, 0xFF, wire);
    taco_nonfinite nf_f = {0, ~0ull}, nf_s = {0, ~0ull};
    CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, s->t, s->k, s->h, p, fused, &nf_f), 0);
    moe_permute_ref(x, pos, s->t, s->k, s->h, perm);
    CU_ASSERT_EQUAL(taco_ref_encode(perm, TACO_DTYPE_BF16, elems, p, seq, &nf_s), 0);
    CU_ASSERT_EQUAL(memcmp(fused, seq, wire), 0);
    CU_ASSERT_EQUAL(nf_f.count, nf_s.count);
    CU_ASSERT_EQUAL(nf_f.first_index, nf_s.first_index);
    CU_ASSERT_EQUAL(nf_f.count, s->special ? 2ull * s->k : 0ull);

    /* decode + combine, with the weights and without (plain sums) */
    uint16_t *dec = malloc(sizeof *dec * elems), *out_f = malloc(sizeof *out_f * (size_t)s->t * s->h),
             *out_s = malloc(sizeof *out_s * (size_t)s->t * s->h);
    CU_ASSERT_EQUAL(taco_ref_decode(seq, elems, p, dec, TACO_DTYPE_BF16), 0);
    for (int wi = 0; wi < 2; wi++) {
      const float *wp = wi ? NULL : w;
      memset(out_f, 0xFF, sizeof *out_f * (size_t)s->t * s->h);
      memset(out_s, 0xFF, sizeof *out_s * (size_t)s->t * s->h);
      CU_ASSERT_EQUAL(moe_decode_combine_ref(fused, pos, wp, s->t, s->k, s->h, p, out_f), 0);
      moe_combine_ref(dec, pos, wp, s->t, s->k, s->h, out_s);
      CU_ASSERT_EQUAL(memcmp(out_f, out_s, sizeof *out_f * (size_t)s->t * s->h), 0);
    }
    /* the decode is not trivially exact: some token differs from x (FP8 error) */
    CU_ASSERT(memcmp(out_f, x, sizeof *x * (size_t)s->t * s->h) != 0);
    free(out_s);
    free(out_f);
    free(dec);
    free(seq);
    free(fused);
    free(w);
    free(pos);
    free(perm);
    free(x);
  }
}

static void test_bad_arguments(void) {
  uint16_t x[4 * 64] = {0}, out[4 * 64];
  int32_t pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static uint8_t block[8 * 64 + 1024];
  const taco_params p = {32, TACO_FP8_E4M3};
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 2, 64, p, block, NULL), 0);
  CU_ASSERT_EQUAL(moe_decode_combine_ref(block, pos, NULL, 4, 2, 64, p, out), 0);
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 0, 2, 64, p, block, NULL), -1);  /* t = 0 */
  CU_ASSERT_PTR_NOT_NULL(strstr(taco_last_error(), "t = 0"));
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 0, 64, p, block, NULL), -1);  /* k = 0 */
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 1, MOE_ROUTE_MAX_K + 1, 64, p, block, NULL), -1);
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 2, 48, p, block, NULL), -1);  /* h not a multiple of G */
  CU_ASSERT_PTR_NOT_NULL(strstr(taco_last_error(), "hidden 48"));
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 2, 16, p, block, NULL), -1);  /* h < G */
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 2, 64, (taco_params){48, TACO_FP8_E4M3}, block, NULL), -1);
  CU_ASSERT_EQUAL(moe_permute_encode_ref(NULL, pos, 4, 2, 64, p, block, NULL), -1);
  CU_ASSERT_EQUAL(moe_decode_combine_ref(block, NULL, NULL, 4, 2, 64, p, out), -1);
  CU_ASSERT_EQUAL(moe_decode_combine_ref(block, pos, NULL, 4, 2, 64, p, NULL), -1);
  pos[5] = 8; /* outside [0, t k) */
  CU_ASSERT_EQUAL(moe_permute_encode_ref(x, pos, 4, 2, 64, p, block, NULL), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(taco_last_error(), "pos[5] = 8"));
  pos[5] = -1;
  CU_ASSERT_EQUAL(moe_decode_combine_ref(block, pos, NULL, 4, 2, 64, p, out), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("moe_codec_ref", NULL, NULL);
  CU_add_test(s, "permute+encode and decode+combine equal the unfused sequence", test_permute_encode_equals_sequence);
  CU_add_test(s, "bad arguments", test_bad_arguments);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
