/* coll_direct_team.h — what coll_taco.c and the direct path (coll_direct*.c) share (internal). */
#ifndef COLL_DIRECT_TEAM_H
#define COLL_DIRECT_TEAM_H

#include "coll_direct.h"
#include "coll_taco.h"
#include "gpu_check.h"

/* Records "file:line: what: why" as coll_last_error(); returns -1. */
int coll_set_error(const char *file, int line, const char *what, const char *why);

/* Checked calls of the collectives' C files: a failure records where and why
 * (coll_last_error) and returns -1 from the calling function. */
#define CK_CUDA(call)                                                                                        \
  GPU_CHECK(cudaError_t, cudaSuccess, call, return coll_set_error(__FILE__, __LINE__, #call, cudaGetErrorString(gpu_s_)))
#define CK_NCCL(call)                                                                                        \
  GPU_CHECK(ncclResult_t, ncclSuccess, call, return coll_set_error(__FILE__, __LINE__, #call, ncclGetErrorString(gpu_s_)))
#define CK_TACO(call)                                                                                        \
  do {                                                                                                       \
    if ((call) != 0) return coll_set_error(__FILE__, __LINE__, #call, taco_last_error());                   \
  } while (0)
#define CK(call)                                                                                             \
  do {                                                                                                       \
    if ((call) != 0) return -1;                                                                              \
  } while (0)

/* Where local rank i's encodes of this call count NaN/Inf inputs
 * (coll_opts.nonfinite, else the team's counter). */
static inline taco_nonfinite *coll_nonfinite_of(const coll_team *t, int i, const coll_opts *o) {
  return o->nonfinite && t->nlocal == 1 ? o->nonfinite : t->r[i].nonfinite;
}

/* 1: this call takes the direct path; 0: the NCCL path; -1: error (ON but
 * not possible). bytes: uncompressed size of the message (not used now:
 * AUTO takes the direct path at every size). Collective on the first call
 * that could use it (set-up). */
int coll_direct_choose(coll_team *t, coll_op op, size_t bytes, const int *send_peer, const int *recv_peer,
                       const coll_opts *o);
/* Enqueues the call on the direct path (the caller chose it). */
int coll_direct_run(coll_team *t, coll_op op, const void *const *send, void *const *recv, const int *send_peer,
                    const int *recv_peer, size_t count, const coll_opts *o);
/* Grows the staging for a call of this size now (collective when it grows). */
int coll_direct_reserve(coll_team *t, coll_op op, size_t count, const coll_opts *o);
/* Frees the direct state (closes peer mappings first). */
/* Frees the direct path's resources of the local ranks with idle[i] set (the
 * others' stay allocated: a kernel may still use them). */
void coll_direct_destroy(coll_team *t, const int *idle);
/* Waits until rank r's streams (caller's, codec, comm) are idle: at most
 * timeout_s, polling the rank's NCCL asynchronous error; 0, or -1 with the
 * reason recorded (coll_last_error). */
int coll_rank_idle(coll_rank *r, double timeout_s);
/* The team's bound on a wait (coll_team_set_timeout, else the default). */
static inline double coll_team_timeout(const coll_team *t) {
  return t->timeout_s > 0 ? t->timeout_s : COLL_DIRECT_TIMEOUT_S_DEFAULT;
}

#endif
