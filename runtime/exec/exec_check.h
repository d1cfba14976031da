/* exec_check.h — what the --check files share (exec_check.c: the dense
 * checks; exec_check_moe.c: the mixture-of-experts checks; exec_check_mla.c: multi-head latent attention;
 * exec_check_route.c: DeepSeek-V3's routing kernels). Internal to runtime/exec. */
#ifndef EXEC_CHECK_H
#define EXEC_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "exec_model.h"
#include "exec_ref.h"
#include "rt_nccl.h"
#include "ts_error.h"

#define CHECK_TOL_GRAD 5e-2 /* relative L2 per tensor, BF16 vs float64 and TP/DP vs TP = 1 */
#define CHECK_TOL_LOSS 1e-2 /* relative error of the loss */

/* The tiny model cfg as a model file (written to model_path, a /tmp file the
 * caller removes) and a plan of it in text, so plan_build_program() can build
 * the programs the walker runs. */
int exec_check_plan_text(const exec_ref_config *cfg, int tp, int dp, int pp, int micros, const char *layout_extra,
                         const char *schedule, const char *plan_extra, char *model_path, size_t cap, char *text,
                         size_t text_cap, ts_err *e);

/* The mixture-of-experts checks on one GPU per rank (exec_check_moe.c); adds
 * the out-of-tolerance count to *failures. */
int exec_check_moe(rt_nccl *w, FILE *log, int *failures, ts_err *e);
/* Relative L2 error of each of the model's gradient tensors g against the reference's (its local shard);
 * prints one line a tensor and the worst, returns the count above tol (exec_check_moe.c). */
int exec_check_compare_grads(const exec_model *m, const float *g, const double *ref, double tol, FILE *log);
/* The multi-head latent attention checks on one GPU per rank (exec_check_mla.c); adds the out-of-tolerance
 * count to *failures. */
int exec_check_mla(rt_nccl *w, FILE *log, int *failures, ts_err *e);

/* DeepSeek-V3's routing kernels against their C references (exec_check_route.c); adds the kernels that differ
 * to *failures. */
int exec_check_route_group(cudaStream_t stream, FILE *log, int *failures, ts_err *e);

#endif
