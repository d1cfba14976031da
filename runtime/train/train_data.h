/* train_data.h — the byte-level corpus of `tacorun train`: one text file,
 * split into a training part (the first bytes) and a held-out validation part
 * (the last val_frac of the bytes), training batches drawn at seeded random
 * offsets, and the validation part cut into fixed, non-overlapping windows.
 * Tokens are bytes (vocabulary 256); a target is the next byte. Plain C. */
#ifndef TRAIN_DATA_H
#define TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ts_error.h"

typedef struct {
  unsigned char *bytes;
  size_t n, train_n; /* train: [0, train_n); validation: [train_n, n) */
  uint64_t rng;      /* the batch sampler's state (seeded) */
} train_data;

/* Reads path and splits off the last val_frac (0 < val_frac < 1) for
 * validation; both parts must hold at least one window of seq + 1 bytes
 * (and the training part at least 16 of them). Fails with `path: reason`. */
int train_data_load(train_data *d, const char *path, double val_frac, int seq, uint64_t seed, ts_err *e);
/* The data from memory (tests); takes a copy. */
int train_data_from_memory(train_data *d, const void *bytes, size_t n, double val_frac, int seq, uint64_t seed,
                           ts_err *e);
void train_data_free(train_data *d);

/* Next training batch: batch sequences of seq tokens and targets, each at a
 * uniformly random offset of the training part (the sampler's next draws). */
void train_data_next_batch(train_data *d, int batch, int seq, int32_t *tokens, int32_t *targets);

/* Validation windows of seq + 1 bytes that fit, without overlap (their count). */
size_t train_data_val_windows(const train_data *d, int seq);
/* Validation batch b: windows b*batch ... b*batch + batch - 1 (the caller
 * evaluates the full batches only: train_data_val_windows() / batch). */
void train_data_val_batch(const train_data *d, int batch, int seq, size_t b, int32_t *tokens, int32_t *targets);

#endif
