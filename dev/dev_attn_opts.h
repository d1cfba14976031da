/* dev_attn_opts.h — what the decode-attention drivers of dev/ share (dev_decode_attn_fp8,
 * dev_decode_attn_pqh): their options
 *   PROG [--check] [--peak-gbps X] [--reps N] [--batches LIST] [--kv LIST] [--max-gib X] [--help],
 * the random BF16 inputs and the relative L2 error of their checks, the alternating median timer
 * and the device line. */
#ifndef DEV_ATTN_OPTS_H
#define DEV_ATTN_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ts_error.h"

#define DEV_ATTN_MAX_LIST 16

typedef struct {
  int check, reps;
  double peak_gbps, max_gib;
  long long batches[DEV_ATTN_MAX_LIST], kv[DEV_ATTN_MAX_LIST];
  int nb, nkv;
} dev_attn_opts;

/* Parses argv into o, whose fields hold the defaults on entry; --help prints usage(stdout) and exits 0.
 * A bad value or an unknown option: a message naming it (prefixed by prog), usage(stderr) for the
 * latter, -1. */
int dev_attn_parse(int argc, char **argv, const char *prog, void (*usage)(FILE *), dev_attn_opts *o);

/* splitmix64 */
uint64_t dev_attn_rng(uint64_t *s);
/* a BF16 value, uniform in [-scale, scale) before rounding, as a float */
float dev_attn_rand_bf16(uint64_t *s, float scale);
/* ||got - ref|| / ||ref|| over n BF16 outputs; -1 when one is not finite */
double dev_attn_rel_error(const uint16_t *got, const float *ref, size_t n);

/* launch(ctx, which, iter, e): one call of kernel `which` on the iter-th cache set, 0 or -1 with e. */
typedef int (*dev_attn_launch)(const void *ctx, int which, long long iter, ts_err *e);
/* Median us per call of each of the nk kernels (nk <= 8) on the default stream, taking turns (the
 * order rotated every rep); after a warm-up each kernel's timed span repeats it enough times to last
 * >= ~300 us (at most 200), each call on the next cache set. 0, or -1 with e. */
int dev_attn_time(int nk, dev_attn_launch launch, const void *ctx, int reps, double *us, const char *prog, ts_err *e);

/* The GPU: prints "# device: NAME, N SMs, L2 M MiB"; without one a message naming prog and 2. */
int dev_attn_device(const char *prog);

#endif
