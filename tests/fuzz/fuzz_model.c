/* fuzz_model.c — libFuzzer target for the model loader: any bytes must give
 * either a model or a "file: field: reason" error, never a crash, a leak or
 * undefined behaviour; a model that loads must give finite figures. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

static void require_finite(double x) {
  if (!isfinite(x)) __builtin_trap();
}

static void exercise(const model_config *m) {
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int seq = m->max_seq < 4096 ? m->max_seq : 4096;
  int tps[] = {1, 2, m->kv_heads};
  for (int i = 0; i < 3; i++) {
    for (int sp = 0; sp <= 1; sp++) {
      model_shard s = {tps[i], sp, 2, seq};
      int n = model_layer_ops(m, &s, ops, MODEL_MAX_LAYER_OPS, &e);
      for (int k = 0; k < n; k++) {
        require_finite(ops[k].flops_fwd + ops[k].flops_bwd + ops[k].bytes_fwd + ops[k].bytes_bwd + ops[k].params);
        if (ops[k].m < 0 || ops[k].n < 0 || ops[k].k < 0) __builtin_trap();
      }
      if (n > 0) {
        for (int r = MODEL_RECOMPUTE_NONE; r <= MODEL_RECOMPUTE_FULL; r++)
          require_finite(model_activation_bytes_per_layer(m, &s, (model_recompute)r));
        require_finite(model_activation_tensor_bytes(m, &s));
      }
      n = model_embedding_ops(m, &s, ops, MODEL_MAX_LAYER_OPS, &e);
      n = model_output_ops(m, &s, ops, MODEL_MAX_LAYER_OPS, &e);
      for (int k = 0; k < n; k++) require_finite(ops[k].flops_fwd + ops[k].params);
    }
  }
  require_finite(model_params_total(m));
  require_finite(model_flops_per_iteration(m, 1536, seq, true));
  require_finite(model_flops_megatron_closed_form(m, 1536, seq, false));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  model_config m;
  ts_err e;
  if (model_from_json_text((const char *)data, (unsigned long)size, "fuzz.json", &m, &e) == 0) exercise(&m);
  return 0;
}
