/* test_sim_nccl.c — the NCCL model (sim/sim_nccl.c) at its known limits:
 * 2 ranks anchored reproduce the measured curves; NVLS needs NVSwitch and
 * the caller's consent; protocol and algorithm switch where the model's
 * own times cross (LL small, Simple large; tree small and ring large across
 * nodes); time never falls with more bytes, nor a ring's with more ranks;
 * small one-node all-reduces take NCCL's own tuning estimate (worked by hand). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "sim_edges.h"
#include "sim_nccl.h"

static sim_nccl_fabric hgx_h100(bool nvls) {
  sim_nccl_fabric f = {TOPO_INTRA_NVSWITCH, 450, 2, 4, nvls, 8, 50, 5.5};
  return f;
}
static sim_nccl_fabric dgx_a100(void) {
  sim_nccl_fabric f = {TOPO_INTRA_NVSWITCH, 300, 2, 3, true, 8, 25, 5.5};
  return f;
}

static const sim_nccl_coll all_colls[] = {SIM_NCCL_ALLREDUCE, SIM_NCCL_ALLGATHER, SIM_NCCL_REDUCESCATTER,
                                          SIM_NCCL_ALLTOALL, SIM_NCCL_SENDRECV};

static void test_two_ranks_reproduce_measured(void) {
  static const char *const transports[] = {"nvlink", "shm", "socket"};
  static const sim_nccl_fabric fabrics[] = {
      {TOPO_INTRA_NVLINK, 450, 2, 4, false, 0, 0, 0},
      {TOPO_INTRA_SHM, 28, 20, 4, false, 0, 0, 0},
      {TOPO_INTRA_SOCKET, 2.7, 50, 4, false, 0, 0, 0},
  };
  int checked = 0;
  for (int k = 0; k < 3; k++) {
    char path[600];
    snprintf(path, sizeof path, "%s/h200-%s.json", CALIBRATION_DIR, transports[k]);
    schema_calibration cal;
    ts_err e;
    CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &cal, &e), 0);
    for (int i = 0; i < cal.n_colls; i++) {
      const schema_coll_table *t = &cal.colls[i];
      sim_nccl_coll coll;
      if (t->nranks != 2 || sim_nccl_coll_from_name(t->name, &coll)) continue; /* .taco tables are not NCCL */
      for (int j = 0; j < t->n; j++) {
        sim_nccl_choice ch;
        CU_ASSERT_EQUAL_FATAL(sim_nccl_time(&fabrics[k], coll, t->pts[j].bytes, 2, 2, t, &ch, &e), 0);
        CU_ASSERT(fabs(ch.us - t->pts[j].us) <= 1e-9 * t->pts[j].us);
        checked++;
        if (j + 1 < t->n) { /* between two points: within their times (log interpolation) */
          double mid = sqrt(t->pts[j].bytes * t->pts[j + 1].bytes);
          CU_ASSERT_EQUAL(sim_nccl_time(&fabrics[k], coll, mid, 2, 2, t, &ch, &e), 0);
          double lo = fmin(t->pts[j].us, t->pts[j + 1].us), hi = fmax(t->pts[j].us, t->pts[j + 1].us);
          CU_ASSERT(ch.us >= lo * (1 - 1e-9) && ch.us <= hi * (1 + 1e-9));
        }
      }
    }
    schema_calibration_free(&cal);
  }
  CU_ASSERT(checked >= 3 * 5 * 30); /* five collectives of every file, every point */
}

/* NVLS (and NVLS-tree) only on NVSwitch of NVLink 4+, and only when enabled. */
static int nvls_chosen(const sim_nccl_fabric *f, int n, int rpn) {
  int hits = 0;
  for (double b = 1024; b <= 8.0 * (1 << 30); b *= 2)
    for (int c = 0; c < 3; c++) {
      sim_nccl_choice ch;
      ts_err e;
      if (sim_nccl_time(f, all_colls[c], b, n, rpn, NULL, &ch, &e)) return -1;
      hits += ch.algo == SIM_NCCL_NVLS || ch.algo == SIM_NCCL_NVLS_TREE;
    }
  return hits;
}

static void test_nvls_needs_nvswitch_and_consent(void) {
  sim_nccl_fabric on = hgx_h100(true), off = hgx_h100(false), direct = hgx_h100(true), a100 = dgx_a100();
  direct.intra = TOPO_INTRA_NVLINK;
  CU_ASSERT(sim_nccl_nvls_capable(TOPO_INTRA_NVSWITCH, 4));
  CU_ASSERT(!sim_nccl_nvls_capable(TOPO_INTRA_NVSWITCH, 3));
  CU_ASSERT(!sim_nccl_nvls_capable(TOPO_INTRA_NVLINK, 5));
  CU_ASSERT(!sim_nccl_nvls_capable(TOPO_INTRA_PCIE, 4));
  CU_ASSERT(nvls_chosen(&on, 8, 8) > 0);
  CU_ASSERT(nvls_chosen(&on, 64, 8) > 0); /* NVLS-tree across nodes */
  CU_ASSERT_EQUAL(nvls_chosen(&off, 8, 8), 0);
  CU_ASSERT_EQUAL(nvls_chosen(&off, 64, 8), 0);
  CU_ASSERT_EQUAL(nvls_chosen(&direct, 8, 8), 0);
  CU_ASSERT_EQUAL(nvls_chosen(&a100, 8, 8), 0); /* NVSwitch gen 2: no SHARP, even when allowed */
  /* a large 8-rank all-reduce on H100 NVSwitch goes through NVLS, ~480 GB/s busbw (NCCL's figure) */
  sim_nccl_choice ch;
  ts_err e;
  CU_ASSERT_EQUAL(sim_nccl_time(&on, SIM_NCCL_ALLREDUCE, 1 << 30, 8, 8, NULL, &ch, &e), 0);
  CU_ASSERT_EQUAL(ch.algo, SIM_NCCL_NVLS);
  CU_ASSERT_EQUAL(ch.proto, SIM_NCCL_SIMPLE);
  /* at 2 ranks NVLS moves S(1+1/2) against the ring's S: the ring wins */
  CU_ASSERT_EQUAL(sim_nccl_time(&on, SIM_NCCL_ALLREDUCE, 1 << 30, 2, 2, NULL, &ch, &e), 0);
  CU_ASSERT_EQUAL(ch.algo, SIM_NCCL_RING);
}

/* The choice is the fastest combination as the tuner ranks them (all
 * channels), and its time is that combination's on the channels it gets. */
static void check_choice_is_fastest(const sim_nccl_fabric *f, sim_nccl_coll coll, int n, int rpn) {
  for (double b = 256; b <= 4.0 * (1 << 30); b *= 2) {
    sim_nccl_choice ch;
    ts_err e;
    CU_ASSERT_EQUAL_FATAL(sim_nccl_time(f, coll, b, n, rpn, NULL, &ch, &e), 0);
    CU_ASSERT(fabs(sim_nccl_algo_us(f, coll, ch.algo, ch.proto, b, n, rpn) - ch.us) < 1e-9 * ch.us);
    double tuned = sim_nccl_tuner_us(f, coll, ch.algo, ch.proto, b, n, rpn);
    CU_ASSERT(tuned <= ch.us * (1 + 1e-12)); /* fewer channels never make it faster */
    for (int a = 0; a < SIM_NCCL_ALGO_COUNT; a++)
      for (int p = 0; p < SIM_NCCL_PROTO_COUNT; p++) {
        double t = sim_nccl_tuner_us(f, coll, (sim_nccl_algo)a, (sim_nccl_proto)p, b, n, rpn);
        if (t >= 0) CU_ASSERT(t >= tuned * (1 - 1e-12));
      }
  }
}

static void test_switch_points(void) {
  sim_nccl_fabric h = hgx_h100(false), a = dgx_a100();
  sim_nccl_choice ch;
  ts_err e;
  /* one node: LL for small messages, Simple for large, never back */
  int last = -1;
  for (double b = 1024; b <= 4.0 * (1 << 30); b *= 2) {
    CU_ASSERT_EQUAL_FATAL(sim_nccl_time(&h, SIM_NCCL_ALLREDUCE, b, 8, 8, NULL, &ch, &e), 0);
    if (b == 1024) CU_ASSERT_EQUAL(ch.proto, SIM_NCCL_LL);
    CU_ASSERT((int)ch.proto >= last);
    last = (int)ch.proto;
  }
  CU_ASSERT_EQUAL(last, SIM_NCCL_SIMPLE);
  /* across 16 nodes: tree for small all-reduces (log2 latency), ring for large (more bandwidth) */
  CU_ASSERT_EQUAL(sim_nccl_time(&h, SIM_NCCL_ALLREDUCE, 65536, 128, 8, NULL, &ch, &e), 0);
  CU_ASSERT_EQUAL(ch.algo, SIM_NCCL_TREE);
  CU_ASSERT_EQUAL(sim_nccl_time(&h, SIM_NCCL_ALLREDUCE, 4.0 * (1 << 30), 128, 8, NULL, &ch, &e), 0);
  CU_ASSERT_EQUAL(ch.algo, SIM_NCCL_RING);
  CU_ASSERT_EQUAL(ch.proto, SIM_NCCL_SIMPLE);
  /* LL128 across nodes only from Hopper on */
  for (double b = 1024; b <= 4.0 * (1 << 30); b *= 2) {
    CU_ASSERT_EQUAL(sim_nccl_time(&a, SIM_NCCL_ALLREDUCE, b, 16, 8, NULL, &ch, &e), 0);
    CU_ASSERT_NOT_EQUAL(ch.proto, SIM_NCCL_LL128);
  }
  sim_nccl_fabric hn = hgx_h100(true);
  for (int c = 0; c < 5; c++) {
    check_choice_is_fastest(&h, all_colls[c], c == 4 ? 2 : 8, c == 4 ? 2 : 8);
    check_choice_is_fastest(&hn, all_colls[c], c == 4 ? 2 : 64, c == 4 ? 1 : 8);
    check_choice_is_fastest(&a, all_colls[c], c == 4 ? 2 : 16, c == 4 ? 1 : 8);
  }
}

static void test_monotone_in_bytes(void) {
  sim_nccl_fabric fs[] = {hgx_h100(true), hgx_h100(false), dgx_a100(),
                          {TOPO_INTRA_PCIE, 25, 5, 0, false, 2, 12.5, 11},
                          {TOPO_INTRA_SHM, 28, 20, 0, false, 0, 0, 0}};
  for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++)
    for (int c = 0; c < 5; c++) {
      int n = c == 4 ? 2 : 8, rpn = fs[k].nics_per_node > 0 && c != 4 ? 4 : n;
      double prev = 0;
      for (double b = 1; b <= 8.0 * (1 << 30); b *= 1.25) {
        sim_nccl_choice ch;
        ts_err e;
        CU_ASSERT_EQUAL_FATAL(sim_nccl_time(&fs[k], all_colls[c], b, n, rpn, NULL, &ch, &e), 0);
        CU_ASSERT(ch.us >= prev * (1 - 1e-12)); /* flat where a message runs on fewer channels: rounding only */
        CU_ASSERT(isfinite(ch.us) && ch.us > 0);
        prev = ch.us;
      }
    }
}

/* At equal bus bandwidth (one fabric) a ring over more ranks is never faster. */
static void test_ring_more_ranks_never_faster(void) {
  sim_nccl_fabric fs[] = {hgx_h100(false), dgx_a100(), {TOPO_INTRA_SHM, 28, 20, 0, false, 0, 0, 0}};
  for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++)
    for (int c = 0; c < 3; c++)
      for (int p = 0; p < SIM_NCCL_PROTO_COUNT; p++)
        for (double b = 1024; b <= 4.0 * (1 << 30); b *= 4) {
          double prev = 0;
          for (int n = 2; n <= 8; n++) {
            double t = sim_nccl_algo_us(&fs[k], all_colls[c], SIM_NCCL_RING, (sim_nccl_proto)p, b, n, n);
            if (t < 0) break;
            CU_ASSERT(t >= prev);
            prev = t;
          }
        }
}

/* Anchored at other rank counts: scaled by the curve's efficiency at the
 * same per-rank chunk, i.e. the 8-rank time at 4S is the model's 8-rank time
 * times (measured / model) of 2 ranks at S. */
static void test_anchor_carries_efficiency(void) {
  schema_calibration cal;
  ts_err e;
  char path[600];
  snprintf(path, sizeof path, "%s/h200-nvlink.json", CALIBRATION_DIR);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &cal, &e), 0);
  const schema_coll_table *t = NULL;
  for (int i = 0; i < cal.n_colls; i++)
    if (!strcmp(cal.colls[i].name, "allreduce") && cal.colls[i].nranks == 2) t = &cal.colls[i];
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  sim_nccl_fabric f = hgx_h100(false);
  for (int j = 0; j < t->n; j += 5) {
    sim_nccl_choice a8, m8, a2, m2;
    double S = t->pts[j].bytes;
    CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, 4 * S, 8, 8, t, &a8, &e), 0);
    CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, 4 * S, 8, 8, NULL, &m8, &e), 0);
    CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, S, 2, 2, t, &a2, &e), 0);
    CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, S, 2, 2, NULL, &m2, &e), 0);
    CU_ASSERT(fabs(a8.us - m8.us * a2.us / m2.us) < 1e-9 * a8.us);
    CU_ASSERT(fabs(a8.anchor_scale - t->pts[j].us / m2.us) < 1e-9 * a8.anchor_scale);
  }
  schema_calibration_free(&cal);
}

static void test_bad_arguments(void) {
  sim_nccl_fabric f = hgx_h100(true), nonic = hgx_h100(true);
  nonic.nics_per_node = 0;
  sim_nccl_choice ch;
  ts_err e;
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, 1e6, 12, 8, NULL, &ch, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ranks_per_node"));
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, -1, 8, 8, NULL, &ch, &e), -1);
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, NAN, 8, 8, NULL, &ch, &e), -1);
  CU_ASSERT_EQUAL(sim_nccl_time(&nonic, SIM_NCCL_ALLREDUCE, 1e6, 16, 8, NULL, &ch, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nic"));
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_SENDRECV, 1e6, 4, 4, NULL, &ch, &e), -1);
  schema_coll_table empty = {"allreduce", 2, 0, NULL};
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, 1e6, 8, 8, &empty, &ch, &e), -1);
  CU_ASSERT_EQUAL(sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, 1e6, 1, 1, NULL, &ch, &e), 0);
  CU_ASSERT_EQUAL(ch.us, 0);
}

static void test_fabric_of_cluster(void) {
  topo_cluster cl;
  memset(&cl, 0, sizeof cl);
  snprintf(cl.gpu.name, sizeof cl.gpu.name, "H200");
  cl.intra.kind = TOPO_INTRA_NVSWITCH;
  cl.intra.gbps_per_gpu = 450;
  sim_nccl_fabric f;
  sim_nccl_fabric_of_cluster(&cl, &f);
  CU_ASSERT_EQUAL(f.nvlink_gen, 4);
  CU_ASSERT(f.nvls);
  snprintf(cl.gpu.name, sizeof cl.gpu.name, "A100-SXM4-80GB");
  sim_nccl_fabric_of_cluster(&cl, &f);
  CU_ASSERT_EQUAL(f.nvlink_gen, 3);
  CU_ASSERT(!f.nvls);
  cl.gpu.nvlink_gen = 5; /* the GPU's own figure wins over its name */
  sim_nccl_fabric_of_cluster(&cl, &f);
  CU_ASSERT_EQUAL(f.nvlink_gen, 5);
  CU_ASSERT(f.nvls);
  cl.intra.kind = TOPO_INTRA_NVLINK;
  sim_nccl_fabric_of_cluster(&cl, &f);
  CU_ASSERT(!f.nvls);
}

/* A ring over nodes holding k members each (here a DP group of TP4 ranks:
 * GPUs 0 and 4 of three 8-GPU nodes) runs as k rings, as NCCL's channels do:
 * 2 x 6 edges; each ring leaves every node once, the two rings through
 * different members (so both GPUs' NICs carry inter-node bytes), and enters
 * the next node through the member of the same local index (the same rail).
 * One member per node, or members not grouped by node: one ring. */
static void test_ring_uses_every_member_nic(void) {
  topo_cluster c;
  memset(&c, 0, sizeof c);
  c.gpus_per_node = 8;
  const int m[6] = {0, 4, 8, 12, 16, 20};
  int src[64], dst[64], depth;
  int ne = sim_edges(&c, m, 6, SIM_ALG_RING, src, dst, 64, &depth);
  CU_ASSERT_EQUAL_FATAL(ne, 12);
  CU_ASSERT_EQUAL(depth, 5);
  int exits[2][3] = {{-1, -1, -1}, {-1, -1, -1}}, out_of[24] = {0}, in_to[24] = {0};
  for (int i = 0; i < ne; i++) {
    int ring = i / 6, a = src[i] / 8, b = dst[i] / 8;
    out_of[src[i]]++, in_to[dst[i]]++;
    if (a == b) continue;
    CU_ASSERT_EQUAL(b, (a + 1) % 3);
    CU_ASSERT_EQUAL(src[i] % 8, dst[i] % 8); /* same rail */
    CU_ASSERT_EQUAL(exits[ring][a], -1);     /* one exit per node per ring */
    exits[ring][a] = src[i];
  }
  for (int x = 0; x < 3; x++) {
    CU_ASSERT(exits[0][x] >= 0 && exits[1][x] >= 0);
    CU_ASSERT_NOT_EQUAL(exits[0][x], exits[1][x]);
  }
  for (int i = 0; i < 6; i++) CU_ASSERT(out_of[m[i]] == 2 && in_to[m[i]] == 2); /* every member once per ring */
  const int one[3] = {0, 8, 16}, mixed[4] = {0, 8, 4, 12};
  CU_ASSERT_EQUAL(sim_edges(&c, one, 3, SIM_ALG_RING, src, dst, 64, &depth), 3);
  CU_ASSERT_EQUAL(sim_edges(&c, mixed, 4, SIM_ALG_RING, src, dst, 64, &depth), 4);
}

/* One node, small all-reduces: NCCL's tuner picks the ring's LL protocol, and
 * the model's time is NCCL's own estimate (src/graph/tuning.cc, NCCL 2.30.7):
 * baseLat 6.6 us + 2 (n-1) x hwLat (NVLink, ring, LL) 0.6 us, plus S over the
 * ring's LL algorithm bandwidth min(llMaxBw, busBw / 2) x n / (2 (n-1)), llMaxBw
 * 87.7 GB/s on one Ampere node and 141 on one Hopper node. Worked by hand:
 * 8 B on 2 / 4 / 8 A100: 7.8 / 10.2 / 15.0 us (the bytes add < 0.001 us);
 * 1 MiB on 8 H100: 15.0 + 1048576 / (141e3 x 8 / 14) = 15.0 + 13.01 = 28.01 us.
 * The model's fixed cost is 6.5 us, NCCL's ring 6.6: within 2 %. */
static void test_small_allreduce_is_nccl_estimate(void) {
  const struct {
    sim_nccl_fabric f;
    int n;
    double bytes, nccl_us;
  } cases[] = {{dgx_a100(), 2, 8, 7.8},
               {dgx_a100(), 4, 8, 10.2},
               {dgx_a100(), 8, 8, 15.0},
               {hgx_h100(false), 8, 1048576, 28.01},
               {hgx_h100(true), 8, 1048576, 28.01}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sim_nccl_choice ch;
    ts_err e;
    CU_ASSERT_EQUAL_FATAL(sim_nccl_time(&cases[i].f, SIM_NCCL_ALLREDUCE, cases[i].bytes, cases[i].n, cases[i].n, NULL,
                                        &ch, &e),
                          0);
    CU_ASSERT_EQUAL(ch.algo, SIM_NCCL_RING);
    CU_ASSERT_EQUAL(ch.proto, SIM_NCCL_LL);
    CU_ASSERT(fabs(ch.us - cases[i].nccl_us) <= 0.02 * cases[i].nccl_us);
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("sim_nccl", NULL, NULL);
  CU_add_test(s, "2 ranks anchored reproduce the measured curves", test_two_ranks_reproduce_measured);
  CU_add_test(s, "NVLS needs NVSwitch (NVLink 4+) and consent", test_nvls_needs_nvswitch_and_consent);
  CU_add_test(s, "switch points: LL small, Simple large, tree/ring across nodes", test_switch_points);
  CU_add_test(s, "a ring over nodes of k members runs as k rings, one exit NIC each", test_ring_uses_every_member_nic);
  CU_add_test(s, "monotone in bytes", test_monotone_in_bytes);
  CU_add_test(s, "small one-node all-reduces: NCCL's own ring/LL estimate", test_small_allreduce_is_nccl_estimate);
  CU_add_test(s, "a ring over more ranks is never faster", test_ring_more_ranks_never_faster);
  CU_add_test(s, "the anchor carries the 2-rank efficiency at the same chunk", test_anchor_carries_efficiency);
  CU_add_test(s, "bad arguments are errors", test_bad_arguments);
  CU_add_test(s, "fabric of a cluster", test_fabric_of_cluster);
  CU_basic_set_mode(CU_BRM_NORMAL);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
