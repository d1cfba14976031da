/* fuzz_plan_infer.c — libFuzzer target for the inference plan loader ("kind":
 * "inference"): any bytes must give a plan or a "file: field: reason" error,
 * never a crash, a leak or undefined behaviour. A plan that loads must pass its
 * own validation and give finite, positive memory, KV-cache bytes and wire
 * bytes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "plan_infer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan_infer p;
  ts_err e;
  if (plan_infer_from_json_text((const char *)data, size, "fuzz.json", NULL, NULL, &p, &e)) return 0;
  if (plan_infer_validate(&p, &e)) __builtin_trap();
  plan_infer_memory m;
  if (plan_infer_memory_per_gpu(&p, &m) || !isfinite(m.total) || m.total <= 0) __builtin_trap();
  double kv = plan_infer_kv_bytes(&p, (long long)p.prompt + p.generate);
  if (!isfinite(kv) || kv < 0) __builtin_trap();
  double wire = plan_infer_wire_bytes(&p.codec, 1e6, p.model.hidden, p.codec_min_bytes);
  if (!isfinite(wire) || wire <= 0) __builtin_trap();
  return 0;
}
