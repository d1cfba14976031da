/* test_topologies.c — the cluster zoo loads, the route model follows the
 * cluster's fields (intra-node ports, the GPU's own NIC, leaf uplinks tapered
 * by the oversubscription, dragonfly global links), the platform text has one
 * host per GPU, and every malformed cluster is refused with a message naming
 * the field at fault. SimGrid itself loads the platforms in
 * test_topologies_simgrid.c (one process per platform). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "test_check.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static topo_cluster load(const char *name) {
  topo_cluster c;
  ts_err e = {0};
  int rc = topo_load(name, NULL, &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return c;
}

/* ---- the zoo ---- */

static void test_every_shipped_cluster_loads(void) {
  DIR *d = opendir(topo_zoo_dir());
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  int count = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    size_t n = strlen(ent->d_name);
    if (n < 6 || strcmp(ent->d_name + n - 5, ".json")) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(n - 5), ent->d_name);
    topo_cluster c = load(name);
    CU_ASSERT_STRING_EQUAL(c.name, name); /* the file is named after the cluster */
    CU_ASSERT_TRUE(topo_total_gpus(&c) >= 1);
    count++;
  }
  closedir(d);
  CU_ASSERT_TRUE(count >= 20);
}

/* topo_path_latency_us and topo_path_gbps build their routes without link
 * names (the search asks for millions): the same figures, to the bit, as the
 * sum of latencies and the narrowest link of topo_route's named links, on
 * every shipped cluster, from GPU 0 and from a GPU mid-cluster to GPUs spread
 * over the cluster (same node, other nodes, other leaves or groups). */
static void test_path_figures_are_the_routes(void) {
  DIR *d = opendir(topo_zoo_dir());
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *ent;
  int pairs = 0;
  while ((ent = readdir(d))) {
    size_t n = strlen(ent->d_name);
    if (n < 6 || strcmp(ent->d_name + n - 5, ".json")) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(n - 5), ent->d_name);
    topo_cluster c = load(name);
    int total = topo_total_gpus(&c);
    const int from[2] = {0, total / 2 + 1 < total ? total / 2 + 1 : 0};
    for (int f = 0; f < 2; f++)
      for (int k = 0; k < 64; k++) {
        int a = from[f], b = (int)((long long)k * 2654435761u % (unsigned)total);
        if (k < 8) b = k < total ? k : total - 1;
        topo_link links[TOPO_MAX_ROUTE_LINKS];
        int nl = topo_route(&c, a, b, links);
        CU_ASSERT_FATAL(nl >= 0);
        double lat = 0.0, gbps = nl ? links[0].gbps : c.gpu.hbm_gbps;
        for (int i = 0; i < nl; i++) lat += links[i].latency_us, gbps = fmin(gbps, links[i].gbps);
        CU_ASSERT(topo_path_latency_us(&c, a, b) == lat);
        CU_ASSERT(topo_path_gbps(&c, a, b) == gbps);
        pairs++;
      }
  }
  closedir(d);
  CU_ASSERT_TRUE(pairs >= 20 * 128);
}

static void test_total_gpus(void) {
  const struct { const char *name; int gpus; } want[] = {
      {"h200x2-nvlink", 2},     {"h200x2-shm", 2},        {"h200x2-socket", 2},
      {"h200x8-nvswitch", 8},   {"h200-1024-rail", 1024}, {"h200-16384-rail", 16384},
      {"pcie-8gpu-2x100gbe", 128}, {"h200-512-fattree-2to1", 512}, {"h200-1024-dragonfly", 1024},
      {"a100x8-nvswitch", 8},   {"a100-3072-hdr", 3072},  {"h100x8-nvswitch", 8},
      {"h100-1024-ndr", 1024},  {"h100-6144-ndr", 6144},  {"b200x8-nvswitch", 8},
      {"b200-1024-ndr", 1024},  {"gb200-nvl72", 72},      {"gb200-nvl72-1152", 1152},
      {"h200-131072-rail", 131072},
      {"h100-24576-roce", 24576},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    topo_cluster c = load(want[i].name);
    CU_ASSERT_EQUAL(topo_total_gpus(&c), want[i].gpus);
  }
}

/* The three transports of the measured machine are the same GPUs, ever slower. */
static void test_measured_transports_are_ordered(void) {
  topo_cluster nv = load("h200x2-nvlink"), shm = load("h200x2-shm"), sock = load("h200x2-socket");
  CU_ASSERT_TRUE(nv.intra.gbps_per_gpu > shm.intra.gbps_per_gpu);
  CU_ASSERT_TRUE(shm.intra.gbps_per_gpu > sock.intra.gbps_per_gpu);
  CU_ASSERT_EQUAL(nv.intra.kind, TOPO_INTRA_NVLINK);
  CU_ASSERT_EQUAL(shm.intra.kind, TOPO_INTRA_SHM);
  CU_ASSERT_EQUAL(sock.intra.kind, TOPO_INTRA_SOCKET);
  CU_ASSERT_STRING_EQUAL(nv.gpu.name, sock.gpu.name);
}

static void test_load_by_path_and_missing_name(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/h200x8-nvswitch.json", topo_zoo_dir());
  topo_cluster c = load(path);
  CU_ASSERT_EQUAL(c.gpus_per_node, 8);
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_load("no-such-cluster", NULL, &c, &e), -1);
  ASSERT_MSG(e, "no cluster named \"no-such-cluster\"");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_EQUAL(topo_load("../etc", NULL, &c, &e), -1);
  CU_ASSERT_EQUAL(topo_load("", NULL, &c, &e), -1);
}

/* ---- the route model ---- */

static void test_intra_node_route_uses_the_two_ports(void) {
  topo_cluster c = load("h200-1024-rail");
  topo_link l[TOPO_MAX_ROUTE_LINKS];
  CU_ASSERT_EQUAL(topo_route(&c, 9, 14, l), 2);
  CU_ASSERT_STRING_EQUAL(l[0].name, "gpu9-port");
  CU_ASSERT_TRUE(l[0].up);
  CU_ASSERT_STRING_EQUAL(l[1].name, "gpu14-port");
  CU_ASSERT_FALSE(l[1].up);
  CU_ASSERT_TRUE(near(topo_path_gbps(&c, 9, 14), c.intra.gbps_per_gpu));
  CU_ASSERT_TRUE(near(topo_path_latency_us(&c, 9, 14), c.intra.latency_us));
  CU_ASSERT_EQUAL(topo_route(&c, 5, 5, l), 0);
  CU_ASSERT_TRUE(near(topo_path_gbps(&c, 5, 5), c.gpu.hbm_gbps));
  CU_ASSERT_EQUAL(topo_path_latency_us(&c, 5, 5), 0.0);
  CU_ASSERT_EQUAL(topo_route(&c, -1, 3, l), -1);
  CU_ASSERT_EQUAL(topo_route(&c, 0, topo_total_gpus(&c), l), -1);
}

/* Rail-optimized: GPU i of a node leaves through NIC i and arrives through the
 * destination GPU's own NIC; a transfer between nodes is NIC-bound. */
static void test_rail_gpu_uses_its_own_nic(void) {
  topo_cluster c = load("h200-1024-rail");
  CU_ASSERT_EQUAL(c.nic.per_node, c.gpus_per_node);
  topo_link l[TOPO_MAX_ROUTE_LINKS];
  int g = c.gpus_per_node;
  for (int i = 0; i < g; i++) {
    CU_ASSERT_EQUAL(topo_nic_of(&c, 3 * g + i), i);
    int n = topo_route(&c, 3 * g + i, 4 * g + (i + 1) % g, l);
    CU_ASSERT_EQUAL(n, 4); /* same leaf: NIC, node cables, node cables, NIC */
    char want[40];
    snprintf(want, sizeof want, "node3-nic%d", i);
    CU_ASSERT_STRING_EQUAL(l[0].name, want);
    snprintf(want, sizeof want, "node4-nic%d", (i + 1) % g);
    CU_ASSERT_STRING_EQUAL(l[n - 1].name, want);
  }
  CU_ASSERT_TRUE(near(topo_path_gbps(&c, 0, g), c.nic.gbps));
  CU_ASSERT_TRUE(near(topo_path_latency_us(&c, 0, g), 2 * c.nic.latency_us + c.fabric.latency_us));
}

/* Fewer NICs than GPUs: consecutive GPUs share one. */
static void test_gpus_share_nics_evenly(void) {
  topo_cluster c = load("pcie-8gpu-2x100gbe");
  int per = c.gpus_per_node / c.nic.per_node;
  for (int i = 0; i < c.gpus_per_node; i++) CU_ASSERT_EQUAL(topo_nic_of(&c, c.gpus_per_node + i), i / per);
  CU_ASSERT_TRUE(near(topo_path_gbps(&c, 0, c.gpus_per_node), c.nic.gbps));
  topo_cluster one = load("h200x8-nvswitch");
  CU_ASSERT_EQUAL(topo_nic_of(&one, 3), -1);
}

/* Between leaves a transfer also crosses both leaves' uplinks, each carrying
 * what its nodes inject divided by the oversubscription. */
static void test_fat_tree_uplinks_are_tapered(void) {
  topo_cluster c = load("h200-512-fattree-2to1");
  CU_ASSERT_TRUE(c.fabric.oversubscription > 1.0);
  int per_leaf = c.fabric.nodes_per_leaf * c.gpus_per_node;
  CU_ASSERT_TRUE(topo_leaf_count(&c) >= 2);
  topo_link l[TOPO_MAX_ROUTE_LINKS];
  int n = topo_route(&c, 1, per_leaf + 2, l);
  CU_ASSERT_EQUAL_FATAL(n, 6);
  CU_ASSERT_STRING_EQUAL(l[2].name, "leaf0-up");
  CU_ASSERT_TRUE(l[2].up);
  CU_ASSERT_STRING_EQUAL(l[3].name, "leaf1-up");
  CU_ASSERT_FALSE(l[3].up);
  double inject = c.fabric.nodes_per_leaf * c.nic.per_node * c.nic.gbps;
  CU_ASSERT_TRUE(near(l[2].gbps, inject / c.fabric.oversubscription));
  double hops = 1 + 2 * (c.fabric.levels - 1);
  CU_ASSERT_TRUE(near(topo_path_latency_us(&c, 1, per_leaf + 2), 2 * c.nic.latency_us + hops * c.fabric.latency_us));
  /* a lone transfer is still NIC-bound: the taper shows only under load */
  CU_ASSERT_TRUE(near(topo_path_gbps(&c, 1, per_leaf + 2), c.nic.gbps));
}

static void test_dragonfly_global_links(void) {
  topo_cluster c = load("h200-1024-dragonfly");
  int per_group = c.nodes / c.fabric.groups * c.gpus_per_node;
  topo_link l[TOPO_MAX_ROUTE_LINKS];
  CU_ASSERT_EQUAL(topo_leaf_count(&c), c.fabric.groups);
  int n = topo_route(&c, 3 * per_group, per_group + 5, l); /* group 3 -> group 1 */
  CU_ASSERT_EQUAL_FATAL(n, 5);
  CU_ASSERT_STRING_EQUAL(l[2].name, "group1-3");
  CU_ASSERT_FALSE(l[2].up); /* UP runs from the lower group to the higher */
  double inject = c.nodes / c.fabric.groups * c.nic.per_node * c.nic.gbps;
  CU_ASSERT_TRUE(near(l[2].gbps, inject / (c.fabric.groups - 1) / c.fabric.oversubscription));
  CU_ASSERT_EQUAL(topo_route(&c, 0, per_group - 1, l), 4); /* same group: no global link */
}

/* Routes are symmetric: b -> a crosses the same links in the other direction. */
static void test_routes_are_symmetric(void) {
  const char *names[] = {"h200-16384-rail", "h200-1024-dragonfly", "pcie-8gpu-2x100gbe"};
  for (size_t k = 0; k < 3; k++) {
    topo_cluster c = load(names[k]);
    int total = topo_total_gpus(&c);
    for (int t = 0; t < 200; t++) {
      int a = (int)((t * 7919L) % total), b = (int)((t * 104729L + 17) % total);
      topo_link ab[TOPO_MAX_ROUTE_LINKS], ba[TOPO_MAX_ROUTE_LINKS];
      int n = topo_route(&c, a, b, ab);
      CU_ASSERT_EQUAL_FATAL(topo_route(&c, b, a, ba), n);
      for (int i = 0; i < n; i++) {
        CU_ASSERT_STRING_EQUAL(ab[i].name, ba[n - 1 - i].name);
        CU_ASSERT_NOT_EQUAL(ab[i].up, ba[n - 1 - i].up);
      }
    }
  }
}

/* ---- the platform text ---- */

typedef struct {
  const char *path, *value, *field;
} mutation;
static char *mutate(const mutation *m);

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

static void test_platform_text(void) {
  const char *names[] = {"h200x2-nvlink", "h200x8-nvswitch", "pcie-8gpu-2x100gbe", "h200-1024-dragonfly",
                         "h200-512-fattree-2to1"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    topo_cluster c = load(names[k]);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ts_err e = {0};
    CU_ASSERT_EQUAL(topo_write_platform(&c, f, &e), 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "<platform version=\"4.1\">"));
    CU_ASSERT_EQUAL(count(text, "<host "), topo_total_gpus(&c));
    char last[64];
    snprintf(last, sizeof last, "<host id=\"gpu%d\" ", topo_total_gpus(&c) - 1);
    CU_ASSERT_EQUAL(count(text, last), 1);
    CU_ASSERT_EQUAL(count(text, "<link "), count(text, "sharing_policy=\"SPLITDUPLEX\""));
    CU_ASSERT_EQUAL(count(text, "<zone "), count(text, "</zone>")); /* balanced */
    free(text);
  }
}

/* Names may hold "--", which an XML comment may not. */
static void test_platform_comment_survives_odd_names(void) {
  mutation m = {"name", "\"t--x-\"", NULL};
  char *json = mutate(&m);
  topo_cluster c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_from_json_text(json, strlen(json), "t.json", &c, &e), 0);
  free(json);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(topo_write_platform(&c, f, &e), 0);
  fclose(f);
  CU_ASSERT_EQUAL(count(text, "--"), 2); /* only "<!--" and "-->" */
  free(text);
}

static void test_platform_refuses_an_unloaded_cluster(void) {
  topo_cluster c;
  memset(&c, 0, sizeof c);
  ts_err e = {0};
  FILE *f = fopen("/dev/null", "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(topo_write_platform(&c, f, &e), -1);
  fclose(f);
  CU_ASSERT_EQUAL(topo_write_platform_file(&c, "/nonexistent-dir/p.xml", &e), -1);
  ASSERT_MSG(e, "/nonexistent-dir/p.xml");
}

/* ---- malformed clusters: each is refused, and the message names the field ---- */

static const char *const base_cluster =
    "{ \"schema\": 1, \"name\": \"t\", \"notes\": \"test\","
    "  \"gpu\": { \"name\": \"H200\", \"bf16_tflops\": 989, \"hbm_gib\": 141, \"hbm_gbps\": 4800 },"
    "  \"nodes\": 16, \"gpus_per_node\": 8,"
    "  \"intra\": { \"kind\": \"nvswitch\", \"gbps_per_gpu\": 450, \"latency_us\": 2 },"
    "  \"nic\": { \"per_node\": 8, \"gbps\": 50, \"latency_us\": 2.5 },"
    "  \"fabric\": { \"kind\": \"fat_tree\", \"levels\": 2, \"oversubscription\": 2, \"nodes_per_leaf\": 4,"
    "              \"latency_us\": 0.5 } }";

/* A change to the base (struct mutation, above): set the member at a dotted
 * path to a JSON value, or remove it (value NULL); `field` must appear in the
 * error. */

static const mutation mutations[] = {
    {"schema", "2", "schema"},
    {"schema", NULL, "schema"},
    {"name", "\"a b\"", "name"},
    {"name", "\"\"", "name"},
    {"name", "7", "name"},
    {"notes", "3", "notes"},
    {"colour", "\"red\"", "colour"},
    {"gpu", NULL, "gpu"},
    {"gpu", "[]", "gpu"},
    {"gpu.name", NULL, "gpu.name"},
    {"gpu.bf16_tflops", "0", "gpu.bf16_tflops"},
    {"gpu.bf16_tflops", "-5", "gpu.bf16_tflops"},
    {"gpu.bf16_tflops", "\"989\"", "gpu.bf16_tflops"},
    {"gpu.bf16_tflops", "1e300", "gpu.bf16_tflops"},
    {"gpu.hbm_gib", "0", "gpu.hbm_gib"},
    {"gpu.hbm_gbps", NULL, "gpu.hbm_gbps"},
    {"gpu.tdp", "700", "gpu.tdp"},
    {"nodes", "0", "nodes"},
    {"nodes", "-1", "nodes"},
    {"nodes", "2.5", "nodes"},
    {"nodes", "99999999999", "nodes"},
    {"nodes", "1000000", "nodes"},
    {"gpus_per_node", "0", "gpus_per_node"},
    {"gpus_per_node", "73", "gpus_per_node"}, /* above one NVL72 rack */
    {"gpus_per_node", NULL, "gpus_per_node"},
    {"intra", NULL, "intra"},
    {"intra.kind", "\"infiniband\"", "intra.kind"},
    {"intra.kind", "\"nvlink\"", "intra.kind"}, /* direct links join exactly 2 GPUs */
    {"intra.gbps_per_gpu", "0", "intra.gbps_per_gpu"},
    {"intra.gbps_per_gpu", "1e9", "intra.gbps_per_gpu"},
    {"intra.latency_us", "-1", "intra.latency_us"},
    {"intra.latency_us", "true", "intra.latency_us"},
    {"intra.speed", "1", "intra.speed"},
    {"nic", NULL, "nic"},
    {"nic.per_node", "0", "nic.per_node"},
    {"nic.per_node", "3", "nic.per_node"},  /* does not divide 8 GPUs */
    {"nic.per_node", "16", "nic.per_node"}, /* more NICs than GPUs */
    {"nic.gbps", "0", "nic.gbps"},
    {"nic.gbps", "null", "nic.gbps"},
    {"nic.latency_us", "1e7", "nic.latency_us"},
    {"fabric", NULL, "fabric"},
    {"fabric", "\"fat_tree\"", "fabric"},
    {"fabric.kind", "\"none\"", "fabric.kind"}, /* 16 nodes need a fabric */
    {"fabric.kind", "\"torus\"", "fabric.kind"},
    {"fabric.kind", NULL, "fabric.kind"},
    {"fabric.oversubscription", "0.5", "fabric.oversubscription"},
    {"fabric.oversubscription", "\"2:1\"", "fabric.oversubscription"},
    {"fabric.levels", "0", "fabric.levels"},
    {"fabric.levels", "1", "fabric.levels"}, /* 4 leaves need a spine */
    {"fabric.levels", "9", "fabric.levels"},
    {"fabric.nodes_per_leaf", "0", "fabric.nodes_per_leaf"},
    {"fabric.nodes_per_leaf", "17", "fabric.nodes_per_leaf"},
    {"fabric.groups", "4", "fabric.groups"}, /* only for a dragonfly */
    {"fabric.latency_us", "-0.5", "fabric.latency_us"},
    {"fabric.spines", "4", "fabric.spines"},
};

/* Mutations that need a different base fabric. */
static const char *const raw_cases[][2] = {
    {"{", "line 1"},
    {"[1, 2]", "top level"},
    {"", "invalid JSON"},
    {"{\"schema\": 1, \"schema\": 1}", "invalid JSON"},
    {"{\"schema\": 1, \"name\": \"x\", \"gpu\": {\"name\": \"H\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1},"
     " \"nodes\": 4, \"gpus_per_node\": 2, \"intra\": {\"kind\": \"pcie\", \"gbps_per_gpu\": 1, \"latency_us\": 0},"
     " \"nic\": {\"per_node\": 1, \"gbps\": 1, \"latency_us\": 0}, \"fabric\": {\"kind\": \"dragonfly\", \"groups\": 3}}",
     "fabric.groups"},
    {"{\"schema\": 1, \"name\": \"x\", \"gpu\": {\"name\": \"H\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1},"
     " \"nodes\": 4, \"gpus_per_node\": 2, \"intra\": {\"kind\": \"pcie\", \"gbps_per_gpu\": 1, \"latency_us\": 0},"
     " \"nic\": {\"per_node\": 1, \"gbps\": 1, \"latency_us\": 0}, \"fabric\": {\"kind\": \"dragonfly\"}}",
     "fabric.groups"},
    {"{\"schema\": 1, \"name\": \"x\", \"gpu\": {\"name\": \"H\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1},"
     " \"nodes\": 4, \"gpus_per_node\": 2, \"intra\": {\"kind\": \"pcie\", \"gbps_per_gpu\": 1, \"latency_us\": 0},"
     " \"nic\": {\"per_node\": 1, \"gbps\": 1, \"latency_us\": 0},"
     " \"fabric\": {\"kind\": \"single_switch\", \"oversubscription\": 2}}",
     "fabric.oversubscription"},
    {"{\"schema\": 1, \"name\": \"x\", \"gpu\": {\"name\": \"H\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1},"
     " \"nodes\": 600, \"gpus_per_node\": 2, \"intra\": {\"kind\": \"pcie\", \"gbps_per_gpu\": 1, \"latency_us\": 0},"
     " \"nic\": {\"per_node\": 1, \"gbps\": 1, \"latency_us\": 0}, \"fabric\": {\"kind\": \"single_switch\"}}",
     "nodes"},
};

/* Applies one mutation to a fresh copy of the base; returns the new text. */
static char *mutate(const mutation *m) { return test_json_mutate(base_cluster, m->path, m->value); }

static void test_base_cluster_is_valid(void) {
  topo_cluster c;
  ts_err e = {0};
  int rc = topo_from_json_text(base_cluster, strlen(base_cluster), "t.json", &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(topo_leaf_count(&c), 4);
}

static void test_malformed_clusters_name_the_field(void) {
  for (size_t i = 0; i < sizeof mutations / sizeof *mutations; i++) {
    char *text = mutate(&mutations[i]);
    topo_cluster c;
    ts_err e = {0};
    int rc = topo_from_json_text(text, strlen(text), "bad.json", &c, &e);
    if (rc == 0) printf("\n  accepted: %s = %s\n", mutations[i].path, mutations[i].value);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    char want[160];
    snprintf(want, sizeof want, "bad.json: %s: ", mutations[i].field);
    ASSERT_MSG(e, want);
    free(text);
  }
  for (size_t i = 0; i < sizeof raw_cases / sizeof *raw_cases; i++) {
    topo_cluster c;
    ts_err e = {0};
    const char *text = raw_cases[i][0];
    CU_ASSERT_EQUAL(topo_from_json_text(text, strlen(text), "bad.json", &c, &e), -1);
    ASSERT_MSG(e, raw_cases[i][1]);
  }
  topo_cluster c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_from_json_text(NULL, 0, NULL, &c, &e), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("topologies", NULL, NULL);
  CU_add_test(s, "every shipped cluster loads", test_every_shipped_cluster_loads);
  CU_add_test(s, "path latency and bandwidth are the named route's", test_path_figures_are_the_routes);
  CU_add_test(s, "total GPUs", test_total_gpus);
  CU_add_test(s, "measured transports are ordered", test_measured_transports_are_ordered);
  CU_add_test(s, "load by path; unknown name", test_load_by_path_and_missing_name);
  CU_add_test(s, "intra-node route", test_intra_node_route_uses_the_two_ports);
  CU_add_test(s, "rail: GPU i uses NIC i", test_rail_gpu_uses_its_own_nic);
  CU_add_test(s, "GPUs share NICs evenly", test_gpus_share_nics_evenly);
  CU_add_test(s, "fat-tree uplinks tapered", test_fat_tree_uplinks_are_tapered);
  CU_add_test(s, "dragonfly global links", test_dragonfly_global_links);
  CU_add_test(s, "routes are symmetric", test_routes_are_symmetric);
  CU_add_test(s, "platform text", test_platform_text);
  CU_add_test(s, "platform comment survives odd names", test_platform_comment_survives_odd_names);
  CU_add_test(s, "platform refuses an unloaded cluster", test_platform_refuses_an_unloaded_cluster);
  CU_add_test(s, "base test cluster is valid", test_base_cluster_is_valid);
  CU_add_test(s, "malformed clusters name the field", test_malformed_clusters_name_the_field);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
