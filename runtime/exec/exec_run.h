/* exec_run.h — `tacorun execute`: the pieces behind the command.
 *   exec_plan_min.c  reads what the executor needs from a plan file;
 *   exec_check.c     correctness on a tiny model (float64 reference, TP, DP, NaN stop);
 *   exec_timed.c     timed iterations of a plan, per-op breakdown, result file;
 *   exec_execute.c   the command line. */
#ifndef EXEC_RUN_H
#define EXEC_RUN_H

#include <stdbool.h>

#include "exec_ref.h"
#include "model.h"
#include "plan.h"
#include "result.h"
#include "rt_nccl.h"
#include "ts_error.h"

typedef struct {
  char path[512], name[128];
  model_config model;
  int dp, tp, pp, vpp, micro, seq, layers_override;
  long long global;
  bool sequence_parallel, zero1;
  bool gpipe; /* "schedule": "gpipe" (at PP = 1 every micro-batch then keeps its activations) */
  char recompute[16]; /* "none", "selective", "full" */
  plan_codec codec_tp_fwd, codec_tp_bwd, codec_pp;
} exec_plan_min;

int exec_plan_read(const char *path, exec_plan_min *p, ts_err *e);
/* The executor's model configuration (micro-batch, sequence, layers after the override). */
void exec_plan_config(const exec_plan_min *p, exec_ref_config *c);

typedef struct {
  int iters, warmup;
  const char *json_out, *csv_out, *ops_csv_out;
  unsigned long long seed;
  int inject_nan_step; /* -1: none */
  int die_at_iter;     /* fault injection: this process SIGKILLs itself at the start of that iteration; -1: none */
  int program_plan;    /* walk plan_build_program()'s program instead of the built-in one */
} exec_timed_opts;

int exec_run_timed(rt_nccl *w, const exec_plan_min *p, const exec_timed_opts *o, ts_err *e);
/* The result schema's machine block (GPU, driver, CUDA, NCCL, transport) of this run;
 * shared by the training and inference executors. */
void exec_machine_of(const rt_nccl *w, schema_machine *mc);
/* Adds the note "environment: NAME=value ..." (every NCCL_*, EXEC_*
 * variable set, common/ts_env.h), so a result says which knobs it ran with. */
void exec_note_env(schema_result *r);
/* Runs every correctness check; returns 0 when all pass (prints the table on rank 0). */
int exec_run_check(rt_nccl *w, const char *json_out, ts_err *e);

/* Sub-communicators of the world: ranks with the same color, ordered by key. */
int exec_comm_split(rt_nccl *w, int color, int key, ncclComm_t *out, ts_err *e);
/* Element-wise max / sum of doubles over all ranks (MPI), in place. */
int exec_world_max(rt_nccl *w, double *vals, int n, ts_err *e);
int exec_world_sum(rt_nccl *w, double *vals, int n, ts_err *e);

#endif
