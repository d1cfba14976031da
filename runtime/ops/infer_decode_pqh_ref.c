/* infer_decode_pqh_ref.c — float64 decode attention (infer_decode_pqh_ref.h). */
#include "infer_decode_pqh_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int infer_ref_decode_pqh(const float *q, const float *k, const float *v, double *out, int batch, int hl, int kvl,
                         int d, long long max_seq, long long len) {
  double *s = malloc((size_t)len * sizeof *s);
  if (!s) return -1;
  const int g = hl / kvl;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < hl; h++) {
      const float *qq = q + ((size_t)b * hl + h) * d;
      const size_t row0 = ((size_t)b * kvl + h / g) * (size_t)max_seq;
      double mx = -INFINITY, sum = 0;
      for (long long p = 0; p < len; p++) {
        const float *kk = k + (row0 + (size_t)p) * d;
        double dot = 0;
        for (int x = 0; x < d; x++) dot += (double)qq[x] * kk[x];
        s[p] = dot / sqrt((double)d);
        if (s[p] > mx) mx = s[p];
      }
      for (long long p = 0; p < len; p++) sum += s[p] = exp(s[p] - mx);
      double *o = out + ((size_t)b * hl + h) * d;
      memset(o, 0, (size_t)d * sizeof *o);
      for (long long p = 0; p < len; p++) {
        const float *vv = v + (row0 + (size_t)p) * d;
        const double w = s[p] / sum;
        for (int x = 0; x < d; x++) o[x] += w * vv[x];
      }
    }
  free(s);
  return 0;
}
