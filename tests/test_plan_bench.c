/* test_plan_bench.c — bench_plan PLAN.json [REPEATS]: how long building the
 * programs takes and how many ops each rank runs. Prints figures; it is a
 * benchmark, not a test (timings depend on the machine). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "plan.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLAN.json [REPEATS]\n", argv[0]);
    return 2;
  }
  int repeats = argc > 2 ? atoi(argv[2]) : 5;
  if (repeats < 1) repeats = 1;
  plan p;
  ts_err e = {0};
  if (plan_load(argv[1], NULL, NULL, &p, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return ts_exit_status(&e);
  }
  printf("# plan %s: %d ranks, %d stages, %d micro-batches, sizeof(plan_op) = %zu bytes\n", p.name,
         plan_world_size(&p), p.pp, plan_micro_batches(&p), sizeof(plan_op));
  printf("# stage rank ops first_build_ms best_build_ms program_MB\n");
  for (int s = 0; s < p.pp; s++) {
    int rank = plan_rank_of(&p, (plan_coord){0, 0, s});
    double first = 0, best = 1e30;
    int n = 0;
    for (int k = 0; k < repeats; k++) {
      plan_program g;
      double t0 = now_s();
      if (plan_build_program(&p, rank, &g, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
      }
      double ms = 1e3 * (now_s() - t0);
      if (k == 0) first = ms;
      if (ms < best) best = ms;
      n = g.n;
      plan_program_free(&g);
    }
    printf("%5d %6d %7d %10.3f %10.3f %8.2f\n", s, rank, n, first, best, n * sizeof(plan_op) / 1e6);
  }
  double t0 = now_s();
  long total = 0;
  for (int r = 0; r < plan_world_size(&p); r++) {
    plan_program g;
    if (plan_build_program(&p, r, &g, &e)) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    total += g.n;
    plan_program_free(&g);
  }
  double all = now_s() - t0;
  printf("# all %d ranks: %ld ops, built in %.3f s (%.3f ms per rank)\n", plan_world_size(&p), total, all,
         1e3 * all / plan_world_size(&p));
  return 0;
}
