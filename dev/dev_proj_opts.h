/* dev_proj_opts.h — the options the decode-projection drivers of dev/ share
 * (dev_decode_gemv, dev_decode_gemv_tc):
 *   PROG [--model NAME (llama3-8b)] [--batches LIST (default; at most max_m)] [--check]
 * and the zoo model the --model names. */
#ifndef DEV_PROJ_OPTS_H
#define DEV_PROJ_OPTS_H

#include <stddef.h>

#include "model.h"

#define DEV_PROJ_MAX_BATCHES 16

typedef struct {
  long long batches[DEV_PROJ_MAX_BATCHES];
  int nb;         /* entries of batches */
  int check_only; /* --check: the checks, no timing */
  model_config mc;
} dev_proj_opts;

/* A decode layer's four projections as the executor runs them (EXEC_GEMM_NN, the weight [in x out]):
 * y[m x n] = x[m x k] . W[k x n]. */
typedef struct {
  const char *name; /* "qkv", "attn_out", "fc1", "fc2" */
  long long n, k;
} dev_proj;
#define DEV_PROJ_LAYER 4

/* The model's four layer projections (qkv with its KV heads, fc1 = gate + up), in that order; the
 * largest weight's bytes (bf16) in *wmax_bytes. */
void dev_proj_layer(const model_config *mc, dev_proj out[DEV_PROJ_LAYER], size_t *wmax_bytes);

/* Parses argv and loads the model. Returns -1 to go on, else the status to exit with: 0 after
 * --help (usage on standard output), 2 for a bad option or value, the model loader's status for a
 * model it refuses (each with a message on standard error naming prog). max_m <= DEV_PROJ_MAX_BATCHES. */
int dev_proj_opts_parse(int argc, char **argv, const char *prog, const char *batches_default, int max_m,
                        dev_proj_opts *o);

#endif
