/* calibrate_infer_fp8.c — the FP8 GEMMs an inference plan with "quantization": "fp8" runs (see
 * calibrate_infer_fp8.h): the keys of decode steps and prefills, timed by the training calibration's
 * FP8 GEMM runner (calibrate_fp8.c), which checks nothing itself: `tacorun calibrate --check --only
 * gemm_fp8` checks the FP8 GEMM against its C reference. */
#include <stdio.h>

#include "calibrate.h"
#include "calibrate_infer_fp8.h"
#include "calibrate_shapes.h"
#include "plan.h"

static const int fp8_tps[] = {1, 2, 4, 8};
static const long long fp8_tokens[] = {1, 2, 4, 8, 16, 32, 64, /* decode: m = the batch */
                                       128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}; /* prefill */

static int add_model_keys(const model_config *mc, const schema_calibration *have, calib_shapes *sh, ts_err *e) {
  for (size_t t = 0; t < sizeof fp8_tps / sizeof *fp8_tps; t++) {
    if (mc->heads % fp8_tps[t] || mc->kv_heads % fp8_tps[t] || mc->ffn_hidden % fp8_tps[t]) continue;
    for (size_t j = 0; j < sizeof fp8_tokens / sizeof *fp8_tokens; j++) {
      model_shard s = {.tp = fp8_tps[t], .sequence_parallel = false, .micro_batch = (int)fp8_tokens[j], .seq = 1};
      model_op ops[MODEL_MAX_LAYER_OPS];
      int n = model_layer_ops(mc, &s, ops, MODEL_MAX_LAYER_OPS, e);
      if (n < 0) return -1;
      for (int i = 0; i < n; i++) {
        double us;
        if (!plan_fp8_linear(&ops[i]) || schema_gemm_fp8_us(have, ops[i].m, ops[i].n, ops[i].k, &us)) continue;
        if (calib_shapes_add_gemm_fp8(sh, ops[i].m, ops[i].n, ops[i].k, CALIB_GEMM_FWD, e)) return -1;
      }
    }
  }
  return 0;
}

int calib_infer_fp8_gemms(const model_config *models, int nm, const schema_calibration *have, int passes,
                          int quick, const char *tsv, schema_calibration *meas, ts_err *e) {
  calib_shapes sh = {0};
  int rc = -1;
  for (int i = 0; i < nm; i++) {
    if (model_is_moe(&models[i])) continue; /* quantization fp8 is refused for MoE models (plan_infer_load.c) */
    if (add_model_keys(&models[i], have, &sh, e)) goto out;
  }
  fprintf(stderr, "calibrate-infer: %d FP8 GEMM keys of inference plans the file lacks\n", sh.n_gemm_fp8);
  calib_config cfg = {.quick = quick, .budget = calib_budget_default(quick), .ndev = 1, .gemm_passes = passes,
                      .gemm_fp8_tsv = tsv};
  cfg.devices[0] = 0;
  rc = calib_run_gemm_fp8(&cfg, &sh, meas, e);
out:
  calib_shapes_free(&sh);
  return rc;
}
