/* fuzz_reshape.c — libFuzzer target for the reshaping file a TACO codec's
 * "group": "auto" reads (plan/plan_reshape.h): any bytes must give either a
 * choice or a "file: line N: reason" error, never a crash, a leak or undefined
 * behaviour. A choice must be a TACO group dividing the hidden size it was
 * measured on, along hidden, from at least one tensor class; the same for the
 * forward and backward classes alone. */
#include <stddef.h>
#include <stdint.h>

#include "plan_reshape.h"

static void require(int ok) {
  if (!ok) __builtin_trap();
}

static void check(const uint8_t *data, size_t size, const char *const *classes) {
  plan_reshape_choice c;
  ts_err e;
  if (plan_reshape_from_text((const char *)data, (unsigned long)size, "fuzz.csv", classes, &c, &e)) return;
  require(c.group == 32 || c.group == 64 || c.group == 128 || c.group == 256 || c.group == 512);
  require(c.cols >= 1 && c.cols % c.group == 0);
  require(c.axis == PLAN_AXIS_HIDDEN && c.classes >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(data, size, NULL);
  check(data, size, plan_reshape_fwd_classes);
  check(data, size, plan_reshape_bwd_classes);
  return 0;
}
