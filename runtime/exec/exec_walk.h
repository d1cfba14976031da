/* exec_walk.h — runs the program plan_build_program() builds for this rank,
 * op by op, on the executor's streams: compute ops on the compute stream, TP
 * collectives on the TP stream, DP buckets on the DP stream; an op waits for
 * its deps on other streams through CUDA events, so overlap is exactly what
 * the plan (and the simulator) assume. */
#ifndef EXEC_WALK_H
#define EXEC_WALK_H

#include "exec_model.h"

typedef struct {
  plan p;
  plan_program prog;
  cudaEvent_t start, *done, *ready; /* per op: finished on its stream; its cross-stream waits satisfied */
  /* activation slots (exec_walk_slots): each micro-batch's slot and the one that held it before, the same
   * for its boundary buffer; per micro-batch and stream (compute, TP, DP, PP) its last op walked so far and
   * whether it began there (bits 0-3: any op; 4-7: one that uses the slot) */
  int *slot_of, *prev_of, *bslot_of, *bprev_of, *last_on; /* (b: boundary buffers, exec_model.h's bnd_x) */
  unsigned char *began;
  int loaded;
} exec_walk;

/* Loads the plan, builds rank's program, checks the executor runs every op,
 * and puts m in walker mode with the plan's layer-op numbering. */
int exec_walk_init(exec_walk *w, const char *plan_path, int rank, exec_model *m, ts_err *e);
/* Same from a plan text (tests and --check). */
int exec_walk_init_text(exec_walk *w, const char *text, const char *what, int rank, exec_model *m, ts_err *e);
void exec_walk_destroy(exec_walk *w);

/* Before the model is made: from the plan (a file, or text when path is NULL) and rank's program, the
 * activation slots it needs (pipe->slots: the most micro-batches it holds at once from their first op that
 * is not a forward receive, exec_walk_slots; pipe->bslots: counting those receives, for the boundary
 * buffers they land in) and,
 * with uneven stages (vpp 1), this stage's layers (pipe->layer_lo/hi). */
int exec_walk_program_shape(const char *path, const char *text, int rank, exec_pipeline *pipe, ts_err *e);

/* One iteration: zero the gradients, walk every op (skip_optimizer: leave the
 * weights unchanged, for gradient checks); returns when it is enqueued. */
int exec_walk_iteration(exec_model *m, exec_walk *w, int skip_optimizer, ts_err *e);

/* After a finished iteration: op_s[i] = time from the previous op's end on
 * the same stream to op i's end; wait_s[i] = the part of it op i's stream
 * spent waiting for deps on other streams; start_s[i] = when op i's own work
 * could begin, from the iteration's start. */
int exec_walk_times(const exec_model *m, const exec_walk *w, double *op_s, double *wait_s, double *start_s,
                    ts_err *e);

#endif
