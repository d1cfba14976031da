/* coll_host_sum_ref.c — plain-C reference of coll_host_sum (coll_host.h):
 * the sum of k blocks in float, one rounding to the buffer's dtype. */
#include <stdint.h>

#include "coll_host.h"
#include "taco_fp8.h"

void coll_host_sum_ref(const void *blocks, int k, size_t stride_bytes, size_t n, taco_dtype dtype, void *dst) {
  const unsigned char *b = blocks;
  for (size_t i = 0; i < n; i++) {
    float s = 0.0f;
    for (int j = 0; j < k; j++) {
      const unsigned char *blk = b + (size_t)j * stride_bytes;
      s += dtype == TACO_DTYPE_BF16 ? taco_bf16_to_float(((const uint16_t *)blk)[i]) : ((const float *)blk)[i];
    }
    if (dtype == TACO_DTYPE_BF16) ((uint16_t *)dst)[i] = taco_bf16_from_float(s);
    else ((float *)dst)[i] = s;
  }
}
