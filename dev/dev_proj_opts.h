/* dev_proj_opts.h — the options the decode-projection drivers of dev/ share
 * (dev_decode_gemv, dev_decode_gemv_tc):
 *   PROG [--model NAME (llama3-8b)] [--batches LIST (default; at most max_m)] [--check]
 * and the zoo model the --model names. */
#ifndef DEV_PROJ_OPTS_H
#define DEV_PROJ_OPTS_H

#include "model.h"

#define DEV_PROJ_MAX_BATCHES 16

typedef struct {
  long long batches[DEV_PROJ_MAX_BATCHES];
  int nb;         /* entries of batches */
  int check_only; /* --check: the checks, no timing */
  model_config mc;
} dev_proj_opts;

/* Parses argv and loads the model. Returns -1 to go on, else the status to exit with: 0 after
 * --help (usage on standard output), 2 for a bad option or value, the model loader's status for a
 * model it refuses (each with a message on standard error naming prog). max_m <= DEV_PROJ_MAX_BATCHES. */
int dev_proj_opts_parse(int argc, char **argv, const char *prog, const char *batches_default, int max_m,
                        dev_proj_opts *o);

#endif
