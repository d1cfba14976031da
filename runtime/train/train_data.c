/* train_data.c — the byte-level corpus of `tacorun train` (train_data.h). */
#include "train_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: a fixed, portable sequence for a given seed */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static int split(train_data *d, const char *what, double val_frac, int seq, uint64_t seed, ts_err *e) {
  if (!(val_frac > 0.0 && val_frac < 1.0))
    return ts_fail(e, what, "val_frac", "%g is not in (0, 1)", val_frac);
  if (seq < 1) return ts_fail(e, what, "seq", "%d is not a positive length", seq);
  size_t val_n = (size_t)((double)d->n * val_frac);
  d->train_n = d->n - val_n;
  const size_t w = (size_t)seq + 1;
  if (d->train_n < 16 * w || val_n < w)
    return ts_fail(e, what, "size",
                   "%zu bytes are too few: the training part (%zu) needs 16 windows of %zu bytes and the "
                   "validation part (%zu) one",
                   d->n, d->train_n, w, val_n);
  d->rng = seed;
  return 0;
}

int train_data_from_memory(train_data *d, const void *bytes, size_t n, double val_frac, int seq, uint64_t seed,
                           ts_err *e) {
  memset(d, 0, sizeof *d);
  d->bytes = malloc(n ? n : 1);
  if (!d->bytes) return ts_fail_sys(e, "train data: out of memory (%zu bytes)", n);
  if (n) memcpy(d->bytes, bytes, n);
  d->n = n;
  if (split(d, "corpus", val_frac, seq, seed, e)) {
    train_data_free(d);
    return -1;
  }
  return 0;
}

int train_data_load(train_data *d, const char *path, double val_frac, int seq, uint64_t seed, ts_err *e) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(path, "rb");
  if (!f) return ts_fail(e, path, NULL, "cannot open: %s", strerror(errno));
  size_t cap = 1 << 20, n = 0;
  unsigned char *b = malloc(cap);
  while (b) {
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n == cap) {
      unsigned char *nb = realloc(b, cap * 2);
      if (!nb) free(b);
      b = nb, cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!b) return ts_fail_sys(e, "%s: out of memory", path);
  if (bad) {
    free(b);
    return ts_fail(e, path, NULL, "read error");
  }
  d->bytes = b, d->n = n;
  if (split(d, path, val_frac, seq, seed, e)) {
    train_data_free(d);
    return -1;
  }
  return 0;
}

void train_data_free(train_data *d) {
  free(d->bytes);
  memset(d, 0, sizeof *d);
}

void train_data_next_batch(train_data *d, int batch, int seq, int32_t *tokens, int32_t *targets) {
  const size_t starts = d->train_n - (size_t)seq; /* offsets whose window of seq + 1 fits */
  for (int b = 0; b < batch; b++) {
    size_t off = (size_t)(next_u64(&d->rng) % starts);
    for (int i = 0; i < seq; i++) {
      tokens[(size_t)b * seq + i] = d->bytes[off + i];
      targets[(size_t)b * seq + i] = d->bytes[off + i + 1];
    }
  }
}

size_t train_data_val_windows(const train_data *d, int seq) { return (d->n - d->train_n - 1) / (size_t)seq; }

void train_data_val_batch(const train_data *d, int batch, int seq, size_t b, int32_t *tokens, int32_t *targets) {
  const size_t nw = train_data_val_windows(d, seq);
  for (int k = 0; k < batch; k++) {
    size_t w = ((size_t)b * batch + k) % nw;
    const unsigned char *p = d->bytes + d->train_n + w * (size_t)seq;
    for (int i = 0; i < seq; i++) {
      tokens[(size_t)k * seq + i] = p[i];
      targets[(size_t)k * seq + i] = p[i + 1];
    }
  }
}
