/* infer_prof.h — the inference executor's per-op profile (tacorun execute
 * --ops-csv on an inference plan): a CUDA event after each op of a forward
 * pass (infer_forward marks them while a profile is on), the time between
 * consecutive events summed by op name over the profiled passes, written in
 * the layout of `tacosim ops` ("prefill.<op>" and "decode.<op>"), so that a
 * prediction and a run can be set side by side op by op. */
#ifndef INFER_PROF_H
#define INFER_PROF_H

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "ts_error.h"

#define INFER_PROF_MAX_NAMES 48

typedef struct {
  char name[48]; /* "prefill.qkv" */
  int count;     /* launches over the profiled passes */
  double s;      /* seconds over the profiled passes */
} infer_prof_sum;

typedef struct infer_prof {
  int cap, n;         /* events of the pass in flight: ev[0] its start, ev[i] the end of op name[i] */
  cudaEvent_t *ev;
  const char **name;
  int on;             /* between infer_prof_start and infer_prof_stop */
  int nsum;
  infer_prof_sum sum[INFER_PROF_MAX_NAMES];
} infer_prof;

/* Room for `cap` ops a pass; every resource freed by infer_prof_free, also after a failed init. */
int infer_prof_init(infer_prof *p, int cap, ts_err *e);
void infer_prof_free(infer_prof *p);
/* A pass: start records ev[0] on st; each mark records the end of op `name` (a string that outlives the pass);
 * stop waits for st and adds each op's time to "<phase>.<name>". A mark while off does nothing. */
int infer_prof_start(infer_prof *p, cudaStream_t st, ts_err *e);
int infer_prof_mark(infer_prof *p, const char *name, cudaStream_t st, ts_err *e);
int infer_prof_stop(infer_prof *p, const char *phase, cudaStream_t st, ts_err *e);
/* The sums over `passes` passes of each phase as their mean a pass, slowest first: "# op count total_ms mean_us pct"
 * (pct of the phase's profiled time), then "# <phase> total" lines with `timed_s` (the phase's timed figure, TTFT or
 * TPOT, 0: not printed) beside the profiled sum. */
int infer_prof_write(const infer_prof *p, int passes, const char *header, const double timed_s[2], const char *path,
                     ts_err *e);

#endif
