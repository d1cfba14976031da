/* coll_check.h — GPU helpers to check compressed collectives: fresh random
 * inputs, poison, and the error of a result against the uncompressed one.
 * Used by the GPU test and by `tacorun bench-comm --check`. */
#ifndef COLL_CHECK_H
#define COLL_CHECK_H

#include <stddef.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Accumulated on the device; zero it (cudaMemsetAsync) before a compare. */
typedef struct {
  unsigned int max_group_rel_bits; /* float bits of max over groups of |out-ref|_2 / |ref|_2 */
  unsigned int unwritten;          /* elements still holding the poison */
  unsigned long long nonfinite;    /* NaN or Inf in out */
  double err2, ref2;               /* sums of squares over the whole array */
} coll_err_acc;

const char *coll_check_last_error(void);

/* x[i] = stddev * N(0,1) from a counter-based hash of (seed, i); every 97th
 * group of 128 gets a positive outlier channel of about 100 stddev, so the
 * adaptive scale is exercised and sums over ranks do not cancel. */
int coll_fill_random(void *x, taco_dtype dt, size_t n, unsigned long long seed, float stddev, void *stream);
/* x[i] = NaN (the poison that coll_compare counts as unwritten). */
int coll_fill_poison(void *x, taco_dtype dt, size_t n, void *stream);
/* Accumulates the error of out against ref over windows of `group` elements. */
int coll_compare(const void *out, const void *ref, taco_dtype dt, size_t n, int group, coll_err_acc *acc,
                 void *stream);
/* Host side: max group relative error and global relative L2 from an acc. */
double coll_err_max_group_rel(const coll_err_acc *acc);
double coll_err_rel_l2(const coll_err_acc *acc);
/* x[r, c] *= scale for c in [from_col, cols): the reference for CAAT-Net's private channels. */
int coll_scale_cols_ref(void *x, taco_dtype dt, size_t rows, size_t cols, size_t from_col, float scale, void *stream);

#ifdef __cplusplus
}
#endif
#endif
