/* calibrate_refk.h — the reference kernels of the clock section and the power
 * phase (calibrate_clock.c, calibrate_power.c), through the executor's own
 * code paths:
 *   - GEMM: exec_gemm NN CALIB_REF_GEMM_M x N x K bf16 (4096 x 4096 x 2048,
 *     the attention-output GEMM of the validation model, GPT h4096 TP2,
 *     ~90 us on an H100);
 *   - memory-bound: rt_add (the residual add) on CALIB_REF_ADD_ELEMS bf16
 *     elements, 96 MiB moved per launch;
 *   - idle: the one-thread spin kernel on %globaltimer (calibrate_clock_spin.cu).
 * Both kernels rotate through operand sets of 256-288 MiB (over 4x the L2),
 * so every launch reads from HBM as in an iteration; the inputs are random
 * and non-zero (zeros would draw less power). */
#ifndef CALIBRATE_REFK_H
#define CALIBRATE_REFK_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "calibrate_clock.h"
#include "exec_gemm.h"
#include "ts_error.h"

typedef enum { CALIB_REFK_GEMM, CALIB_REFK_ADD } calib_refk_kernel;
typedef int (*calib_refk_fn)(void *ctx, ts_err *e);

typedef struct {
  exec_gemm *gemm;
  exec_gemm_shape shape;
  float beta;
  char *gemm_pool;
  size_t a_bytes, b_bytes, c_bytes, gemm_set;
  int gemm_sets;      /* operand sets the GEMM rotates through (over 4x the L2 together) */
  char *add_pool;
  size_t add_tensor, add_set;
  cudaStream_t stream; /* non-blocking, created by calib_refk_open */
  long long iter;      /* launches so far: picks the operand set */
  calib_refk_fn fn;    /* set after calib_refk_open_bare: what CALIB_REFK_GEMM runs instead (on stream) */
  void *fn_ctx;
  calib_refk_fn add_fn; /* set by the caller: what CALIB_REFK_ADD runs instead of rt_add (on stream) */
  void *add_ctx;
} calib_refk;

/* Creates the GEMM handle and the stream, allocates and fills the operand
 * pools (on the current device); synchronizes. On failure k holds what was
 * made: calib_refk_close frees it. */
int calib_refk_open(calib_refk *k, ts_err *e);
/* The same for a GEMM of another shape, exec_gemm NN m x n x kk bf16, with
 * as many operand sets as make at least 256 MiB (2 at least) and no
 * memory-bound kernel (CALIB_REFK_ADD is refused): the power phase's
 * --power-gemm shapes. */
int calib_refk_open_gemm(calib_refk *k, long long m, long long n, long long kk, ts_err *e);
/* Only the GEMM handle and the stream: the caller sets fn and fn_ctx, which
 * CALIB_REFK_GEMM then runs (the power phase's --power-prefill-attn op). */
int calib_refk_open_bare(calib_refk *k, ts_err *e);
/* Frees in reverse order; safe on a zeroed or partly opened k. */
void calib_refk_close(calib_refk *k);
/* One launch of `which` on k->stream, the next operand set. */
int calib_refk_launch(calib_refk *k, calib_refk_kernel which, ts_err *e);
/* GPU-side idle of us microseconds on k->stream (nothing when us <= 0). */
int calib_refk_spin(calib_refk *k, double us, ts_err *e);
/* Checks that a 500 us spin takes 475-600 us by CUDA events (the GPU timer
 * in ns), after one launch that loads the kernel. */
int calib_refk_check_spin(calib_refk *k, ts_err *e);

#endif
