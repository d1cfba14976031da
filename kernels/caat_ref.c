/* caat_ref.c — plain-C reference of the CAAT-Net channel kernels: the first
 * `shared` columns of a [rows x cols] tensor are synchronized across the TP
 * group, the private rest is scaled by sqrt(TP). */
#include <string.h>

#include "taco_fp8.h"
#include "taco_ref.h"

static size_t elem_size(taco_dtype dt) { return dt == TACO_DTYPE_BF16 ? 2 : 4; }

void caat_ref_gather_shared(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *out) {
  size_t es = elem_size(dt);
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)out + r * shared * es, (const char *)x + r * cols * es, shared * es);
}

void caat_ref_scatter_shared(const void *in, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *x) {
  size_t es = elem_size(dt);
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)x + r * cols * es, (const char *)in + r * shared * es, shared * es);
}

void caat_ref_scale_private(void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, float scale) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = shared; c < cols; c++) {
      size_t i = r * cols + c;
      if (dt == TACO_DTYPE_BF16) {
        uint16_t *h = (uint16_t *)x;
        h[i] = taco_bf16_from_float(taco_bf16_to_float(h[i]) * scale);
      } else {
        ((float *)x)[i] *= scale;
      }
    }
}
