/* tacosim-platform — prints the SimGrid platform of a cluster, to look at it,
 * draw it, or load it by hand: `tacosim-platform h200-1024-rail > p.xml`.
 * With --route A B it prints the links between GPUs A and B instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

static int usage(void) {
  fprintf(stderr, "usage: tacosim-platform CLUSTER [-o FILE]\n"
                  "       tacosim-platform CLUSTER --route GPU_A GPU_B\n"
                  "CLUSTER is a file, or a name in %s\n",
          topo_zoo_dir());
  return 2;
}

static int parse_gpu(const char *s, const topo_cluster *c, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < 0 || v >= topo_total_gpus(c)) {
    fprintf(stderr, "tacosim-platform: %s: not a GPU index in [0, %d)\n", s, topo_total_gpus(c));
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int print_route(const topo_cluster *c, const char *a_text, const char *b_text) {
  int a, b;
  if (parse_gpu(a_text, c, &a) || parse_gpu(b_text, c, &b)) return 2;
  topo_link links[TOPO_MAX_ROUTE_LINKS];
  int n = topo_route(c, a, b, links);
  printf("# gpu%d -> gpu%d: %d link(s), %.6g GB/s, %.6g us\n", a, b, n, topo_path_gbps(c, a, b),
         topo_path_latency_us(c, a, b));
  printf("# link gbps latency_us\n");
  for (int i = 0; i < n; i++)
    printf("%s_%s %.6g %.6g\n", links[i].name, links[i].up ? "UP" : "DOWN", links[i].gbps, links[i].latency_us);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) return usage();
  topo_cluster c;
  ts_err e = {0};
  if (topo_load(argv[1], NULL, &c, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return ts_exit_status(&e);
  }
  if (argc == 5 && strcmp(argv[2], "--route") == 0) return print_route(&c, argv[3], argv[4]);
  int rc;
  if (argc == 4 && strcmp(argv[2], "-o") == 0)
    rc = topo_write_platform_file(&c, argv[3], &e);
  else if (argc == 2)
    rc = topo_write_platform(&c, stdout, &e);
  else
    return usage();
  if (rc) {
    fprintf(stderr, "%s\n", e.msg);
    return ts_exit_status(&e);
  }
  return 0;
}
