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
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/mailbox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xbt/dynar.h>

#include "topo.h"

static const char *cluster_name;
/* "subset": the platform of a part of the GPUs (topo_write_platform_subset,
 * the simulator's reduced mode), whose routes must be the whole platform's */
static int subset;
static unsigned char *keep;
static int kept_gpu(int g) { return !keep || keep[g]; }
/* simgrid_init() arguments: topo_simgrid_options(), quiet configuration, and
 * small actor stacks (the flow actors need little; ASan maps less). */
static char *sim_argv[16];
static int sim_argc;

static void set_simgrid_arguments(void) {
  sim_argv[sim_argc++] = "test_topologies_simgrid";
  for (const char *const *o = topo_simgrid_options(); *o && sim_argc < 13; o++) sim_argv[sim_argc++] = (char *)*o;
  sim_argv[sim_argc++] = "--log=xbt_cfg.thres:warning";
  sim_argv[sim_argc++] = "--cfg=contexts/stack-size:128";
  sim_argv[sim_argc] = NULL;
}

/* Shared between the CUnit tests: the cluster and its hosts by GPU index. */
static topo_cluster cluster;
static sg_host_t *hosts;

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
  if (keep) { /* every pair of kept GPUs on small clusters, a fixed sample of them on large ones */
    unsigned long long x = 88172645463325252ULL;
    for (int i = 0; i < (total <= 128 ? total * total : 20000); i++) {
      int a = i / total, b = i % total;
      if (total > 128) x ^= x << 13, x ^= x >> 7, x ^= x << 17, a = (int)(x % (unsigned long long)total),
                       b = (int)((x >> 32) % (unsigned long long)total);
      if (a != b && keep[a] && keep[b]) bad += !same_route(c, hosts, a, b), checked++;
    }
    return checked && !bad;
  }
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

  int n_kept = total;
  if (subset) {
    /* a fixed pseudo-random third of the GPUs, plus the first and the last */
    keep = calloc((size_t)total, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(keep);
    n_kept = 0;
    for (int g = 0; g < total; g++) keep[g] = g == 0 || g == total - 1 || (g * 2654435761u) % 3 == 0, n_kept += keep[g];
  }
  stamp t0 = now();
  rc = topo_write_platform_subset(&c, keep, f, &e);
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

  CU_ASSERT_EQUAL_FATAL((int)sg_host_count(), n_kept);
  /* index the hosts once: by name, SimGrid 3.32 walks the zone tree per lookup */
  sg_host_t *list = sg_host_list();
  hosts = calloc((size_t)total, sizeof *hosts);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hosts);
  int named = 0;
  for (int i = 0; i < n_kept; i++) {
    int gpu = -1;
    char tail;
    if (sscanf(sg_host_get_name(list[i]), "gpu%d%c", &gpu, &tail) == 1 && gpu >= 0 && gpu < total && !hosts[gpu] &&
        kept_gpu(gpu))
      hosts[gpu] = list[i], named++;
    CU_ASSERT_TRUE(near(sg_host_get_speed(list[i]), c.gpu.bf16_tflops * 1e12));
  }
  free(list);
  CU_ASSERT_EQUAL_FATAL(named, n_kept); /* gpu0 .. gpu<total-1> (those kept), each once */

  stamp t4 = now();
  CU_ASSERT_TRUE(check_routes(&c, hosts));
  printf("  routes checked in %.3f s (CPU)\n", now().cpu - t4.cpu);

  if (keep) {
    cluster = c;
    return;
  }
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
  cluster = c;
}

/* ---- concurrent transfers: the links are shared as designed ---- */

typedef struct {
  int src, dst;
  double bytes, done_s;
} flow;

static flow *flows;

static void send_flow(int argc, char **argv) {
  (void)argc;
  flow *f = &flows[atoi(argv[1])];
  sg_mailbox_put(sg_mailbox_by_name(argv[1]), f, (long)f->bytes);
}

static void receive_flow(int argc, char **argv) {
  (void)argc;
  flow *f = sg_mailbox_get(sg_mailbox_by_name(argv[1]));
  f->done_s = simgrid_get_clock();
}

/* Runs the flows together; returns when all are done, with each flow's
 * duration in done_s (the clock goes on from one run to the next). */
static void run_flows(flow *set, int n) {
  flows = set;
  double start = simgrid_get_clock();
  for (int i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "%d", i);
    char *args[] = {"flow", id, NULL};
    sg_actor_create("send", hosts[set[i].src], send_flow, 2, args);
    sg_actor_create("receive", hosts[set[i].dst], receive_flow, 2, args);
  }
  simgrid_run();
  for (int i = 0; i < n; i++) set[i].done_s -= start;
}

/* Every flow shares the same kind of route, so max-min fairness gives each
 * the smallest capacity / users over its links. */
static void check_times(const flow *set, int n, double rate_gbps, const char *what) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    double want = topo_path_latency_us(&cluster, set[i].src, set[i].dst) * 1e-6 + set[i].bytes / (rate_gbps * 1e9);
    if (fabs(set[i].done_s - want) > 1e-6 * want) bad++;
  }
  if (bad)
    printf("\n  %s: %d of %d flows off; first took %.9g s, expected %.9g s\n", what, bad, n, set[0].done_s,
           topo_path_latency_us(&cluster, set[0].src, set[0].dst) * 1e-6 + set[0].bytes / (rate_gbps * 1e9));
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_links_are_shared_as_designed(void) {
  const topo_cluster *c = &cluster;
  CU_ASSERT_PTR_NOT_NULL_FATAL(hosts);
  const double bytes = 1e9;
  int g = c->gpus_per_node;
  if (g > 1) { /* full duplex: both directions at full speed at once */
    flow pair[2] = {{0, 1, bytes, 0}, {1, 0, bytes, 0}};
    run_flows(pair, 2);
    check_times(pair, 2, c->intra.gbps_per_gpu, "two GPUs both ways");
  }
  if (c->nodes > 1 && topo_leaf_of_node(c, 1) == 0) { /* node 0 to node 1: GPUs sharing a NIC split it */
    flow *nodes = calloc((size_t)g, sizeof *nodes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nodes);
    for (int i = 0; i < g; i++) nodes[i] = (flow){i, g + i, bytes, 0};
    run_flows(nodes, g);
    check_times(nodes, g, c->nic.gbps * c->nic.per_node / g, "node 0 to node 1");
    free(nodes);
  }
  if (topo_leaf_count(c) < 2) return;
  /* every GPU of leaf 0 sends to the same-index GPU of leaf 1 */
  int n = topo_nodes_in_leaf(c, 0) * g, second = n;
  if (topo_nodes_in_leaf(c, 1) * g < n) n = topo_nodes_in_leaf(c, 1) * g;
  flow *set = calloc((size_t)n, sizeof *set);
  CU_ASSERT_PTR_NOT_NULL_FATAL(set);
  for (int i = 0; i < n; i++) set[i] = (flow){i, second + i, bytes, 0};
  double nic_share = c->nic.gbps * c->nic.per_node / g; /* GPUs sharing a NIC split it */
  topo_link l[TOPO_MAX_ROUTE_LINKS];
  int hops = topo_route(c, 0, second, l);
  double fabric = INFINITY; /* the link above the leaf, shared by all n flows */
  for (int i = 0; i < hops; i++)
    if (strncmp(l[i].name, "leaf", 4) == 0 || strncmp(l[i].name, "group", 5) == 0) fabric = fmin(fabric, l[i].gbps);
  run_flows(set, n);
  check_times(set, n, fmin(nic_share, fabric / n), "leaf 0 to leaf 1");
  printf("\n  %d flows leaf 0 -> leaf 1: %.4g GB/s each (NIC share %.4g, fabric share %.4g)\n", n,
         bytes / (set[0].done_s - topo_path_latency_us(c, 0, second) * 1e-6) / 1e9, nic_share, fabric / n);
  free(set);
}

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "subset") == 0)) {
    fprintf(stderr, "usage: %s CLUSTER [subset]\n", argv[0]);
    return 2;
  }
  cluster_name = argv[1];
  subset = argc == 3;
  set_simgrid_arguments();
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("topologies_simgrid", NULL, NULL);
  CU_add_test(s, "platform loads in SimGrid with topo_route's routes", test_platform_in_simgrid);
  if (!subset) CU_add_test(s, "concurrent transfers share links as designed", test_links_are_shared_as_designed);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  free(hosts);
  free(keep);
  return failures ? 1 : 0;
}
