/* fuzz_topo.c — libFuzzer target for the cluster loader: any bytes must give
 * either a cluster or a "file: field: reason" error, never a crash, a leak or
 * undefined behaviour. A cluster that loads must give routes of positive,
 * finite bandwidth and finite latency, and (when small enough to write
 * quickly) a platform. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "topo.h"

static void require(int ok) {
  if (!ok) __builtin_trap();
}

static void exercise(const topo_cluster *c) {
  int total = topo_total_gpus(c);
  require(total >= 1);
  int pairs[][2] = {{0, total - 1}, {total - 1, 0}, {0, c->gpus_per_node % total}, {total / 2, total / 3}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
    topo_link l[TOPO_MAX_ROUTE_LINKS];
    int n = topo_route(c, pairs[i][0], pairs[i][1], l);
    require(n >= 0 && n <= TOPO_MAX_ROUTE_LINKS);
    double gbps = topo_path_gbps(c, pairs[i][0], pairs[i][1]);
    double us = topo_path_latency_us(c, pairs[i][0], pairs[i][1]);
    require(isfinite(gbps) && gbps > 0 && isfinite(us) && us >= 0);
  }
  if (total <= 4096) {
    FILE *sink = fopen("/dev/null", "w");
    if (!sink) return;
    ts_err e;
    require(topo_write_platform(c, sink, &e) == 0);
    fclose(sink);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  topo_cluster c;
  ts_err e;
  if (topo_from_json_text((const char *)data, (unsigned long)size, "fuzz.json", &c, &e) == 0) exercise(&c);
  return 0;
}
