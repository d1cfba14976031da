/* infer_run.h — `tacorun execute` on an inference plan (and the inference
 * correctness checks). exec_execute.c hands over when infer_wants() says so. */
#ifndef INFER_RUN_H
#define INFER_RUN_H

#include <stdio.h>

#include "infer_model.h"
#include "rt_nccl.h"

/* True when the command line names an inference plan or --infer-check. */
int infer_wants(int argc, char **argv);
/* The usage of `tacorun execute` on inference plans (tacorun execute --help prints it after the training one). */
void infer_usage(FILE *out);
/* The whole command (argv[0] is "execute"); returns the exit status. */
int infer_execute(int argc, char **argv);

/* The correctness checks (infer_check.c): decode attention and RoPE against
 * the plain-C reference, TP = nranks against TP = 1 logits on a tiny model,
 * prefill of S + 1 tokens against prefill of S then one decode step, and the
 * codec paths. Prints one line per check on rank 0; 0 when all pass. */
int infer_run_check(rt_nccl *w, ts_err *e);

/* Chooses how each layer all-reduce size travels (prefill: batch x prompt
 * rows, decode: batch rows): times the plan's codec and its fallback on this
 * TP group (the slowest rank's median) and applies plan_infer_policy.h's rule,
 * the simulator's. Records the times in t[phase][0 codec, 1 fallback]. */
int infer_choose_modes(rt_nccl *w, infer_model *m, const plan_codec *c, bool codec_auto, double codec_min_bytes,
                       int prompt, double t[2][2], ts_err *e);

#endif
