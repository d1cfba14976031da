/* fuzz_plan.c — libFuzzer target for the plan loader: any bytes must give a
 * plan or a "file: field: reason" error, never a crash, a leak or undefined
 * behaviour. A plan that loads must give finite memory figures and, when
 * small, a program whose deps point backward. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan p;
  ts_err e;
  if (plan_from_json_text((const char *)data, size, "fuzz.json", NULL, NULL, &p, &e)) return 0;
  plan_memory m;
  if (plan_memory_per_gpu(&p, &m) || !isfinite(m.total) || m.total <= 0) __builtin_trap();
  /* build one program when it stays small (the fuzzer must stay fast) */
  if ((long long)plan_schedule_length(&p) * plan_max_stage_layers(&p) > 20000) return 0;
  plan_program g;
  int rank = plan_world_size(&p) - 1;
  if (plan_build_program(&p, rank, &g, &e)) __builtin_trap();
  for (int i = 0; i < g.n; i++)
    for (int d = 0; d < PLAN_MAX_DEPS; d++)
      if (g.ops[i].dep[d] >= i || g.ops[i].dep[d] < -1) __builtin_trap();
  plan_program_free(&g);
  return 0;
}
