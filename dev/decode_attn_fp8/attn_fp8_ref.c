/* attn_fp8_ref.c — float64 decode attention over the FP8 cache (attn_fp8_ref.h). */
#include "attn_fp8_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_ref.h"

int dev_attn_fp8_ref(const float *q, const unsigned char *kc, const unsigned char *vc, const float *ks, const float *vs,
                     double *out, int batch, int hl, int kvl, int d, long long max_seq, long long len) {
  double *s = malloc((size_t)len * sizeof *s), *lut = malloc(256 * sizeof *lut);
  if (!s || !lut) {
    free(s), free(lut);
    return -1;
  }
  for (int i = 0; i < 256; i++) lut[i] = (i & 0x7f) == 0x7f ? NAN : (double)infer_ref_e4m3_to_float((unsigned char)i);
  const int g = hl / kvl;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < hl; h++) {
      const float *qq = q + ((size_t)b * hl + h) * d;
      const size_t row0 = ((size_t)b * kvl + h / g) * (size_t)max_seq;
      double mx = -INFINITY, sum = 0;
      for (long long p = 0; p < len; p++) {
        const unsigned char *k = kc + (row0 + (size_t)p) * d;
        double dot = 0;
        for (int x = 0; x < d; x++) dot += (double)qq[x] * lut[k[x]];
        s[p] = dot * ks[row0 + (size_t)p] / sqrt((double)d);
        if (s[p] > mx) mx = s[p];
      }
      for (long long p = 0; p < len; p++) sum += s[p] = exp(s[p] - mx);
      double *o = out + ((size_t)b * hl + h) * d;
      memset(o, 0, (size_t)d * sizeof *o);
      for (long long p = 0; p < len; p++) {
        const unsigned char *v = vc + (row0 + (size_t)p) * d;
        const double w = s[p] / sum * vs[row0 + (size_t)p];
        for (int x = 0; x < d; x++) o[x] += w * lut[v[x]];
      }
    }
  free(s), free(lut);
  return 0;
}
