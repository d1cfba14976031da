/* rt_nccl_check.h — checks a compressed collective against the
 * uncompressed NCCL one on fresh random inputs (bench-comm --check and the
 * GPU test share it). */
#ifndef RT_NCCL_CHECK_H
#define RT_NCCL_CHECK_H

#include "coll_check.h"
#include "coll_taco.h"
#include "rt_nccl.h"

/* Device buffers per local rank, each `bytes` long (send, recv, ref), plus
 * one error accumulator. */
typedef struct {
  void *send[RT_MAX_LOCAL], *recv[RT_MAX_LOCAL], *ref[RT_MAX_LOCAL];
  coll_err_acc *acc[RT_MAX_LOCAL];
  size_t bytes;
} rt_coll_bufs;

int rt_coll_bufs_alloc(rt_nccl *w, rt_coll_bufs *b, size_t bytes, ts_err *e);
void rt_coll_bufs_free(rt_nccl *w, rt_coll_bufs *b);

/* What one collective call is: op with its per-op count, or a CAAT-Net
 * partial all-reduce of rows x cols with fraction p (caat != 0). */
typedef struct {
  coll_op op;
  size_t count;
  int caat;
  size_t rows, cols;
  double p;
  int inplace;
} rt_coll_call;

typedef struct {
  double max_group_rel, rel_l2;
  double nonfinite, unwritten; /* element counts, maximum over ranks */
} rt_check_result;

/* Elements of the input and of the output of one call on one rank. */
size_t rt_coll_in_elems(const rt_coll_call *c, int nranks);
size_t rt_coll_out_elems(const rt_coll_call *c, int nranks);

/* Enqueues one call with the given buffers (no wait). */
int rt_coll_enqueue(rt_nccl *w, coll_team *t, const rt_coll_call *c, void *const *send, void *const *recv,
                    const coll_opts *o, ts_err *e);
/* Fresh random inputs (seeded per rank), reference = the same call through
 * plain NCCL, output poisoned, compressed call, compare; results are the
 * maximum over all ranks. */
int rt_coll_check(rt_nccl *w, coll_team *t, rt_coll_bufs *b, const rt_coll_call *c, const coll_opts *o,
                  unsigned long long seed, rt_check_result *res, ts_err *e);
/* The bound a check's max_group_rel must stay under. */
double rt_coll_bound(const rt_coll_call *c, int nranks, const coll_opts *o);

#endif
