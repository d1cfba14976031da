/* calibrate_infer_fp8.h — `tacorun calibrate-infer --fp8-gemms-only`: the FP8 GEMMs of inference plans
 * with "quantization": "fp8" (sim/INFERENCE.md, "FP8 weights"), timed into the "gemm_fp8" list. */
#ifndef CALIBRATE_INFER_FP8_H
#define CALIBRATE_INFER_FP8_H

#include "calibration.h"
#include "model.h"
#include "ts_error.h"

/* The forward GEMMs of the linear layers (plan_fp8_linear: qkv, attn_out, fc1, fc2) of every model at
 * TP 1, 2, 4, 8 (where the TP degree divides the model) with m = the decode batches 1..64 and the prefill
 * token counts 128..65,536, each key the file `have` lacks timed once by calib_run_gemm_fp8 (fast
 * accumulation: a forward-only key; weights rotating through HBM as a decode step reads them), `passes`
 * alternating passes; the points go to meas's "gemm_fp8" list. tsv: every pass of every key, or NULL. */
int calib_infer_fp8_gemms(const model_config *models, int nm, const schema_calibration *have, int passes,
                          int quick, const char *tsv, schema_calibration *meas, ts_err *e);

#endif
