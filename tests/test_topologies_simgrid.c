/* test_topologies_simgrid.c CLUSTER — writes the cluster's platform, loads it
 * in SimGrid, and checks that SimGrid sees what topo.h describes: one host
 * "gpu<N>" per GPU at the bf16 peak, and between any two GPUs the very links of
 * topo_route(), hence the same bandwidth (intra-node port, NIC, fabric) and
 * latency. Prints how long writing and loading took (a figure, not a check).
 *
 * SimGrid can be initialised once per process, so each cluster runs as its own
 * test process (see tests/topologies.cmake). */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen, clock_gettime */
#include <CUnit/Basic.h>
#include <math.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xbt/dynar.h>

#include "topo.h"

static const char *cluster_name;
static int sim_argc = 1;
static char *sim_argv[] = {"test_topologies_simgrid", NULL};

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
  double wall, cpu;
} stamp;
static stamp now(void) { return (stamp){seconds(CLOCK_MONOTONIC), seconds(CLOCK_PROCESS_CPUTIME_ID)}; }

static int compare_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* SimGrid's route and topo_route() must hold the same directed links; the
 * order may differ (SimGrid's Dijkstra assembles a route back to front), and
 * the order does not matter to a flow. */
static int same_route(const topo_cluster *c, sg_host_t *hosts, int a, int b) {
  topo_link want[TOPO_MAX_ROUTE_LINKS];
  int n = topo_route(c, a, b, want);
  char want_names[TOPO_MAX_ROUTE_LINKS][64], got_names[TOPO_MAX_ROUTE_LINKS][64];
  for (int i = 0; i < n; i++)
    snprintf(want_names[i], sizeof want_names[i], "%s_%s", want[i].name, want[i].up ? "UP" : "DOWN");

  xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(hosts[a], hosts[b], links);
  int got = (int)xbt_dynar_length(links);
  int ok = got == n;
  for (int i = 0; ok && i < n; i++)
    snprintf(got_names[i], sizeof got_names[i], "%.63s", sg_link_get_name(xbt_dynar_get_as(links, i, sg_link_t)));
  xbt_dynar_free(&links);
  if (ok) {
    qsort(want_names, (size_t)n, sizeof want_names[0], compare_names);
    qsort(got_names, (size_t)n, sizeof got_names[0], compare_names);
    for (int i = 0; ok && i < n; i++) ok = strcmp(want_names[i], got_names[i]) == 0;
  }
  double bw = sg_host_get_route_bandwidth(hosts[a], hosts[b]);
  double lat = sg_host_get_route_latency(hosts[a], hosts[b]);
  ok = ok && near(bw, topo_path_gbps(c, a, b) * 1e9) && near(lat, topo_path_latency_us(c, a, b) * 1e-6);
  if (!ok)
    printf("\n  gpu%d -> gpu%d: SimGrid has %d link(s), %g B/s, %g s; topo_route %d link(s), %g B/s, %g s\n", a, b,
           got, bw, lat, n, topo_path_gbps(c, a, b) * 1e9, topo_path_latency_us(c, a, b) * 1e-6);
  return ok;
}

/* Pairs to check: all of them on small clusters; on large ones, GPUs of one
 * node, of one leaf, of different leaves, plus a fixed pseudo-random sample. */
static int check_routes(const topo_cluster *c, sg_host_t *hosts) {
  int total = topo_total_gpus(c), bad = 0, checked = 0;
  if (total <= 128) {
    for (int a = 0; a < total; a++)
      for (int b = 0; b < total; b++)
        if (a != b) bad += !same_route(c, hosts, a, b), checked++;
    return checked && !bad;
  }
  int g = c->gpus_per_node;
  int structured[][2] = {{0, 1}, {0, g - 1}, {0, g}, {g + 1, 2 * g + 3}, {0, total - 1}, {total - 1, 0},
                         {total / 2, total / 2 + g}, {3, total - g + 3}};
  for (size_t i = 0; i < sizeof structured / sizeof *structured; i++)
    bad += !same_route(c, hosts, structured[i][0], structured[i][1]), checked++;
  unsigned long long x = 88172645463325252ULL; /* xorshift: the same sample every run */
  for (int i = 0; i < 3000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int a = (int)(x % (unsigned long long)total), b = (int)((x >> 32) % (unsigned long long)total);
    if (a != b) bad += !same_route(c, hosts, a, b), checked++;
  }
  return checked && !bad;
}

static void test_platform_in_simgrid(void) {
  topo_cluster c;
  ts_err e = {0};
  int rc = topo_load(cluster_name, NULL, &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  int total = topo_total_gpus(&c);

  const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/tacosim-platform-XXXXXX", dir);
  int fd = mkstemp(path);
  CU_ASSERT_TRUE_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);

  stamp t0 = now();
  rc = topo_write_platform(&c, f, &e);
  fclose(f);
  stamp t1 = now();
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  struct stat st;
  stat(path, &st);

  simgrid_init(&sim_argc, sim_argv);
  simgrid_load_platform(path);
  stamp t2 = now();
  simgrid_run(); /* no actors: this only seals the platform, which routes need */
  stamp t3 = now();
  unlink(path);
  printf("\n  %s: %d GPUs; platform written in %.3f s (%.1f MB), parsed by SimGrid in %.3f s, sealed in %.3f s "
         "(CPU time; wall %.3f s in all)\n",
         c.name, total, t1.cpu - t0.cpu, (double)st.st_size / 1e6, t2.cpu - t1.cpu, t3.cpu - t2.cpu,
         t3.wall - t0.wall);

  CU_ASSERT_EQUAL_FATAL((int)sg_host_count(), total);
  /* index the hosts once: by name, SimGrid 3.32 walks the zone tree per lookup */
  sg_host_t *list = sg_host_list();
  sg_host_t *hosts = calloc((size_t)total, sizeof *hosts);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hosts);
  int named = 0;
  for (int i = 0; i < total; i++) {
    int gpu = -1;
    char tail;
    if (sscanf(sg_host_get_name(list[i]), "gpu%d%c", &gpu, &tail) == 1 && gpu >= 0 && gpu < total && !hosts[gpu])
      hosts[gpu] = list[i], named++;
    CU_ASSERT_TRUE(near(sg_host_get_speed(list[i]), c.gpu.bf16_tflops * 1e12));
  }
  free(list);
  CU_ASSERT_EQUAL_FATAL(named, total); /* gpu0 .. gpu<total-1>, each once */

  stamp t4 = now();
  CU_ASSERT_TRUE(check_routes(&c, hosts));
  printf("  routes checked in %.3f s (CPU)\n", now().cpu - t4.cpu);

  /* the figures the brief names: a node's GPUs meet at the intra-node bandwidth,
   * GPUs of two nodes at the NIC's */
  if (c.gpus_per_node > 1)
    CU_ASSERT_TRUE(near(sg_host_get_route_bandwidth(hosts[0], hosts[1]), c.intra.gbps_per_gpu * 1e9));
  if (c.nodes > 1 && topo_leaf_of_node(&c, 1) == 0) {
    int other = c.gpus_per_node; /* first GPU of node 1, under the same leaf */
    CU_ASSERT_TRUE(near(sg_host_get_route_bandwidth(hosts[0], hosts[other]), c.nic.gbps * 1e9));
    CU_ASSERT_TRUE(near(sg_host_get_route_latency(hosts[0], hosts[other]),
                        (2 * c.nic.latency_us + c.fabric.latency_us) * 1e-6));
  }
  /* tapered leaf uplinks carry their computed capacity */
  if (topo_leaf_count(&c) > 1 && c.fabric.kind != TOPO_FABRIC_DRAGONFLY) {
    sg_link_t link = sg_link_by_name("leaf0-up_UP");
    CU_ASSERT_PTR_NOT_NULL_FATAL(link);
    CU_ASSERT_TRUE(near(sg_link_get_bandwidth(link),
                        c.fabric.nodes_per_leaf * c.nic.per_node * c.nic.gbps / c.fabric.oversubscription * 1e9));
  }
  free(hosts);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CLUSTER\n", argv[0]);
    return 2;
  }
  cluster_name = argv[1];
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("topologies_simgrid", NULL, NULL);
  CU_add_test(s, "platform loads in SimGrid with topo_route's routes", test_platform_in_simgrid);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
