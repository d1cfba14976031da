/* exec_run.h — `tacorun execute` on training plans: the pieces behind the command.
 *   exec_plan.c      the plan (plan_load) as the executor needs it, and what it refuses;
 *   exec_check.c     correctness on a tiny model (float64 reference, TP, DP, NaN stop);
 *   exec_timed.c     timed iterations of a plan, per-op breakdown, result file;
 *   exec_execute.c   the command line. */
#ifndef EXEC_RUN_H
#define EXEC_RUN_H

#include <stdbool.h>
#include <stdio.h>

#include "exec_ref.h"
#include "model.h"
#include "plan.h"
#include "result.h"
#include "rt_nccl.h"
#include "rt_world.h"
#include "ts_error.h"

typedef struct {
  char path[512], name[128];
  model_config model;
  int dp, tp, pp, vpp, micro, seq, layers_override;
  int ep; /* expert parallelism of an MoE plan (1: none; exec_ep.h) */
  long long global;
  bool sequence_parallel, zero1;
  bool dp_overlap_changed; /* overlap_param_gather true or overlap_grad_reduce false (program only) */
  bool gpipe; /* "schedule": "gpipe" (at PP = 1 every micro-batch then keeps its activations) */
  char recompute[16]; /* "none", "selective", "full" */
  plan_codec codec_tp_fwd, codec_tp_bwd, codec_pp;
} exec_plan_min;

int exec_plan_read(const char *path, exec_plan_min *p, ts_err *e);
/* What the executor refuses of a valid plan, "file: field: reason"; 0 when it runs it (exec_plan.c). */
int exec_plan_refuse(const plan *p, ts_err *e);
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
/* Runs every correctness check; returns 0 when all pass (prints the table on rank 0). */
/* which: EXEC_CHECK_ALL, or the mixture-of-experts checks alone (--check-moe; the dense checks need a world whose
 * TP fits their tiny models' 4 heads), or the multi-head latent attention checks alone (--check-mla). */
enum { EXEC_CHECK_ALL, EXEC_CHECK_MOE, EXEC_CHECK_MLA };
int exec_run_check(rt_nccl *w, const char *json_out, int which, ts_err *e);

/* The command on a training plan or --check (argv[0] is "execute"); returns the exit status.
 * tacorun.c hands inference plans to infer_execute (infer_run.h) instead. */
int exec_execute(int argc, char **argv);
/* Its usage (tacorun execute --help prints it before the inference one). */
void exec_usage(FILE *out);

#endif
