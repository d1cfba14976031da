/* sim_trace_ranks.c — `tacosim simulate --trace-ranks LIST`: which ranks a
 * trace records (a full-mode trace of every rank of a 1,024-GPU plan is over a
 * gigabyte; Perfetto opens a few hundred megabytes). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

const char *sim_default_trace_ranks(const plan *p) {
  return plan_world_size(p) > SIM_TRACE_ALL_RANKS_MAX ? "stages" : "all";
}

int sim_parse_trace_ranks(const char *list, const plan *p, unsigned char *sel, ts_err *e) {
  int world = plan_world_size(p);
  memset(sel, 0, (size_t)world);
  if (strcmp(list, "all") == 0) {
    memset(sel, 1, (size_t)world);
    return 0;
  }
  if (strcmp(list, "stages") == 0) { /* tp 0, dp 0 of each stage: what reduced mode simulates */
    for (int s = 0; s < p->pp; s++) sel[plan_rank_of(p, (plan_coord){0, 0, s})] = 1;
    return 0;
  }
  const char *s = list;
  for (;;) {
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || errno) break;
    if (*end == '-') {
      const char *t = end + 1;
      b = strtol(t, &end, 10);
      if (end == t || errno) break;
    }
    if (a < 0 || b < a || b >= world)
      return ts_fail(e, "simulate", "--trace-ranks", "\"%s\": %ld-%ld is not a range of ranks 0..%d", list, a, b,
                     world - 1);
    for (long r = a; r <= b; r++) sel[r] = 1;
    if (*end == '\0') return 0;
    if (*end != ',') break;
    s = end + 1;
  }
  return ts_fail(e, "simulate", "--trace-ranks", "\"%s\" is not \"stages\" or a list of ranks and ranges (0,8,16-23)",
                 list);
}
