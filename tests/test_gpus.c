/* test_gpus.c — the GPU catalogue (topologies/gpus/): every entry loads and is
 * named after its file, the figures the zoo depends on are the datasheet's,
 * CUDA device names find their entry, clusters name catalogue GPUs (and inline
 * blocks still load), and every malformed entry or unknown name is refused
 * with a message naming the file, the field and, for names, what there is. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo.h"
#include "test_check.h"

static const char *const catalogue[] = {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM", "H100-PCIe", "H200-SXM",
                                        "H20",            "B200",           "GB200",    "L40S"};
enum { N_CATALOGUE = sizeof catalogue / sizeof *catalogue };

static topo_gpu load_gpu(const char *name) {
  topo_gpu g;
  ts_err e = {0};
  int rc = topo_gpu_load(name, NULL, &g, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return g;
}

static void test_every_entry_loads(void) {
  for (int i = 0; i < N_CATALOGUE; i++) {
    topo_gpu g = load_gpu(catalogue[i]);
    CU_ASSERT_STRING_EQUAL(g.name, catalogue[i]);
    CU_ASSERT_TRUE(g.from_catalogue);
    CU_ASSERT_TRUE(g.bf16_tflops > 0 && g.fp16_tflops > 0 && g.fp32_tflops > 0);
    CU_ASSERT_TRUE(g.bf16_tflops > g.fp32_tflops); /* tensor cores beat the FP32 pipes on every one */
    CU_ASSERT_TRUE(g.fp8_tflops == 0 || g.fp8_tflops >= g.bf16_tflops);
    CU_ASSERT_TRUE(g.hbm_gib > 0 && g.hbm_gbps > 0 && g.sms > 0 && g.l2_mib > 0 && g.power_w > 0);
    CU_ASSERT_TRUE(g.pcie_gen >= 4);
  }
}

/* The figures the brief and the zoo's earlier inline blocks fix. */
static void test_datasheet_figures(void) {
  topo_gpu h = load_gpu("H200-SXM");
  CU_ASSERT_EQUAL(h.bf16_tflops, 989);
  CU_ASSERT_EQUAL(h.hbm_gib, 141);
  CU_ASSERT_EQUAL(h.hbm_gbps, 4800);
  CU_ASSERT_EQUAL(h.nvlink_gbps, 450);
  topo_gpu a = load_gpu("A100-SXM4-80GB");
  CU_ASSERT_EQUAL(a.bf16_tflops, 312);
  CU_ASSERT_EQUAL(a.hbm_gbps, 2039);
  CU_ASSERT_EQUAL(a.nvlink_gen, 3);
  CU_ASSERT_EQUAL(a.nvlink_gbps, 300); /* 600 GB/s both directions */
  CU_ASSERT_EQUAL(a.fp8_tflops, 0);    /* no FP8 on Ampere */
  CU_ASSERT_EQUAL(a.flash2_bf16_util, 0.73); /* FlashAttention-2's paper; H100 / H200 0.35 by FlashAttention-3's */
  CU_ASSERT_EQUAL(h.flash2_bf16_util, 0.35);
  topo_gpu a40 = load_gpu("A100-SXM4-40GB");
  CU_ASSERT_EQUAL(a40.bf16_tflops, a.bf16_tflops);
  CU_ASSERT_EQUAL(a40.hbm_gbps, 1555);
  topo_gpu gb = load_gpu("GB200");
  CU_ASSERT_EQUAL(gb.nvlink_gen, 5);
  CU_ASSERT_EQUAL(gb.nvlink_gbps, 900);
  topo_gpu l = load_gpu("L40S");
  CU_ASSERT_EQUAL(l.nvlink_gen, 0);
  CU_ASSERT_EQUAL(l.nvlink_gbps, 0);
  /* MXFP8 block scaling: Blackwell (compute capability 10.0) only, Transformer Engine's support matrix */
  const char *const with_mxfp8[] = {"B200", "GB200"};
  for (int i = 0; i < N_CATALOGUE; i++) {
    bool want = false;
    for (size_t k = 0; k < sizeof with_mxfp8 / sizeof *with_mxfp8; k++) want |= !strcmp(catalogue[i], with_mxfp8[k]);
    topo_gpu g = load_gpu(catalogue[i]);
    if (g.mxfp8 != want) printf("\n  %s: mxfp8 %d\n", catalogue[i], g.mxfp8);
    CU_ASSERT_EQUAL(g.mxfp8, want);
    CU_ASSERT_TRUE(!g.mxfp8 || g.fp8_tflops > 0); /* MXFP8 is an FP8 format */
    /* the measured MXFP8 / per-tensor FP8 GEMM time (TE's GEMM profiling guide, B300: 7.161 / 6.812 ms a layer);
     * 0 where the GPU has no MXFP8 */
    CU_ASSERT_EQUAL(g.mxfp8_gemm_ratio, want ? 1.0512 : 0.0);
    /* FP8 GEMMs in any operand layout: compute capability 10.x (TE's nvte_is_non_tn_fp8_gemm_supported), the same
     * two entries */
    CU_ASSERT_EQUAL(g.fp8_non_tn_gemm, want);
    /* NVFP4 tensor cores: the same two entries, dense FP4 at twice the FP8 peak (HGX B200: 144 / 72 PFLOPS, GB200
     * NVL72: 1,440 / 720, both with sparsity); 0 on Ampere, Hopper and Ada */
    CU_ASSERT_EQUAL(g.fp4_tflops, want ? 2.0 * g.fp8_tflops : 0.0);
  }
}

static void test_find_by_device_name(void) {
  const struct { const char *device, *entry; } want[] = {
      {"NVIDIA H200", "H200-SXM"},
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
      {"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"},
      {"NVIDIA L40S", "L40S"},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    topo_gpu g;
    ts_err e = {0};
    int rc = topo_gpu_find_device(want[i].device, NULL, &g, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(g.name, want[i].entry);
  }
  topo_gpu g;
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_gpu_find_device("Tesla V100-SXM2-32GB", NULL, &g, &e), -1);
  ASSERT_MSG(e, "\"Tesla V100-SXM2-32GB\"");
  ASSERT_MSG(e, "H200-SXM"); /* the catalogue is listed */
  ASSERT_MSG(e, "A100-SXM4-80GB");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_EQUAL(topo_gpu_find_device("NVIDIA H20", NULL, &g, &e), 0); /* exact match: not H200 */
  CU_ASSERT_STRING_EQUAL(g.name, "H20");
  CU_ASSERT_EQUAL(topo_gpu_find_device("", NULL, &g, &e), -1);
}

static void test_unknown_names_list_what_there_is(void) {
  topo_gpu g;
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_gpu_load("H300", NULL, &g, &e), -1);
  ASSERT_MSG(e, "no GPU named \"H300\"");
  ASSERT_MSG(e, "A100-SXM4-40GB, A100-SXM4-80GB, B200"); /* sorted */
  ASSERT_MSG(e, "L40S");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_EQUAL(topo_gpu_load("../H200-SXM", NULL, &g, &e), -1); /* a path, and not there */
  CU_ASSERT_EQUAL(topo_gpu_load("a b", NULL, &g, &e), -1);
  CU_ASSERT_EQUAL(topo_gpu_load("", NULL, &g, &e), -1);

  topo_cluster c;
  CU_ASSERT_EQUAL(topo_load("h200-1024-rial", NULL, &c, &e), -1);
  ASSERT_MSG(e, "no cluster named \"h200-1024-rial\"");
  ASSERT_MSG(e, "h200-1024-rail"); /* the zoo is listed */
  ASSERT_MSG(e, "gb200-nvl72-1152");
}

/* ---- clusters naming catalogue GPUs ---- */

static const char *const cluster_text =
    "{ \"schema\": 1, \"name\": \"t\", \"gpu\": %s, \"nodes\": 1, \"gpus_per_node\": 8,"
    "  \"intra\": { \"kind\": \"nvswitch\", \"gbps_per_gpu\": 450, \"latency_us\": 2 } }";

static int load_cluster_with(const char *gpu, topo_cluster *c, ts_err *e) {
  char text[2048];
  snprintf(text, sizeof text, cluster_text, gpu);
  return topo_from_json_text(text, strlen(text), "t.json", c, e);
}

static void test_cluster_names_a_catalogue_gpu(void) {
  topo_cluster c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_cluster_with("\"A100-SXM4-80GB\"", &c, &e), 0);
  CU_ASSERT_STRING_EQUAL(c.gpu.name, "A100-SXM4-80GB");
  CU_ASSERT_TRUE(c.gpu.from_catalogue);
  CU_ASSERT_EQUAL(c.gpu.sms, 108);
  CU_ASSERT_EQUAL(load_cluster_with("\"H300\"", &c, &e), -1);
  ASSERT_MSG(e, "t.json: gpu: no GPU named \"H300\"");
  ASSERT_MSG(e, "H200-SXM");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_EQUAL(load_cluster_with("5", &c, &e), -1);
  ASSERT_MSG(e, "t.json: gpu: ");
  CU_ASSERT_EQUAL(load_cluster_with("\"\"", &c, &e), -1);
  ASSERT_MSG(e, "t.json: gpu: ");
  CU_ASSERT_EQUAL(load_cluster_with("\"../gpus/H200-SXM\"", &c, &e), -1);
  ASSERT_MSG(e, "t.json: gpu: ");
}

static void test_inline_block_still_loads(void) {
  topo_cluster c;
  ts_err e = {0};
  int rc = load_cluster_with("{ \"name\": \"X1\", \"bf16_tflops\": 500, \"hbm_gib\": 64, \"hbm_gbps\": 3000 }", &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(c.gpu.name, "X1");
  CU_ASSERT_EQUAL(c.gpu.bf16_tflops, 500);
  CU_ASSERT_FALSE(c.gpu.from_catalogue);
  CU_ASSERT_EQUAL(c.gpu.sms, 0); /* not given: unknown */
  CU_ASSERT_EQUAL(c.gpu.fp8_tflops, 0);
  CU_ASSERT_FALSE(c.gpu.mxfp8); /* not given: false */
  /* more figures may be given; each is checked */
  rc = load_cluster_with("{ \"name\": \"X2\", \"bf16_tflops\": 500, \"hbm_gib\": 64, \"hbm_gbps\": 3000, \"sms\": 100,"
                         " \"power_w\": 600, \"nvlink_gen\": 4, \"nvlink_gbps\": 450 }", &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(c.gpu.sms, 100);
  CU_ASSERT_EQUAL(c.gpu.power_w, 600);
  const char *const bad[][2] = {
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"sms\": 0 }", "t.json: gpu.sms: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"sms\": 1.5 }", "t.json: gpu.sms: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"power\": 5 }", "t.json: gpu.power: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"sources\": {} }",
       "t.json: gpu.sources: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"base_mhz\": 1500, \"boost_mhz\": 1000 }",
       "t.json: gpu.boost_mhz: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"nvlink_gen\": 4, \"nvlink_gbps\": 0 }",
       "t.json: gpu.nvlink_gbps: "},
      {"{ \"name\": \"X\", \"hbm_gib\": 1, \"hbm_gbps\": 1 }", "t.json: gpu.bf16_tflops: "},
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"flash2_bf16_util\": 1.5 }",
       "t.json: gpu.flash2_bf16_util: "}, /* a fraction of the peak */
      {"{ \"name\": \"X\", \"bf16_tflops\": 1, \"hbm_gib\": 1, \"hbm_gbps\": 1, \"mxfp8\": \"yes\" }",
       "t.json: gpu.mxfp8: must be true or false"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CU_ASSERT_EQUAL(load_cluster_with(bad[i][0], &c, &e), -1);
    ASSERT_MSG(e, bad[i][1]);
  }
}

/* The zoo's H200 clusters name the catalogue entry and keep the figures
 * their inline blocks had (989 TFLOP/s, 141 GiB, 4,800 GB/s). */
static void test_h200_clusters_use_the_catalogue(void) {
  const char *const names[] = {"h200x2-nvlink", "h200x2-shm", "h200x2-socket", "h200x8-nvswitch", "h200-1024-rail",
                               "h200-16384-rail", "h200-512-fattree-2to1", "h200-1024-dragonfly"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    topo_cluster c;
    ts_err e = {0};
    int rc = topo_load(names[i], NULL, &c, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(c.gpu.name, "H200-SXM");
    CU_ASSERT_TRUE(c.gpu.from_catalogue);
    CU_ASSERT_EQUAL(c.gpu.bf16_tflops, 989);
    CU_ASSERT_EQUAL(c.gpu.hbm_gib, 141);
    CU_ASSERT_EQUAL(c.gpu.hbm_gbps, 4800);
  }
}

/* The new zoo clusters: their GPU from the catalogue, their shape as the notes say. */
static void test_new_zoo_clusters(void) {
  const struct { const char *name, *gpu; int nodes, per_node; double intra, nic; } want[] = {
      {"a100x8-nvswitch", "A100-SXM4-80GB", 1, 8, 300, 0},  {"a100-3072-hdr", "A100-SXM4-80GB", 384, 8, 300, 25},
      {"h100x8-nvswitch", "H100-SXM", 1, 8, 450, 0},        {"h100-1024-ndr", "H100-SXM", 128, 8, 450, 50},
      {"h100-6144-ndr", "H100-SXM", 768, 8, 450, 50},       {"b200x8-nvswitch", "B200", 1, 8, 900, 0},
      {"b200-1024-ndr", "B200", 128, 8, 900, 50},           {"gb200-nvl72", "GB200", 1, 72, 900, 0},
      {"gb200-nvl72-1152", "GB200", 16, 72, 900, 50},
      {"h100-24576-roce", "H100-SXM", 3072, 8, 450, 50},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    topo_cluster c;
    ts_err e = {0};
    int rc = topo_load(want[i].name, NULL, &c, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(c.gpu.name, want[i].gpu);
    CU_ASSERT_TRUE(c.gpu.from_catalogue);
    CU_ASSERT_EQUAL(c.nodes, want[i].nodes);
    CU_ASSERT_EQUAL(c.gpus_per_node, want[i].per_node);
    CU_ASSERT_EQUAL(c.intra.gbps_per_gpu, want[i].intra);
    CU_ASSERT_EQUAL(c.intra.gbps_per_gpu, c.gpu.nvlink_gbps); /* the datasheet's NVLink per direction */
    if (want[i].nic > 0) {
      CU_ASSERT_EQUAL(c.nic.per_node, c.gpus_per_node); /* one NIC per GPU */
      CU_ASSERT_EQUAL(c.nic.gbps, want[i].nic);
    }
  }
  topo_cluster c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_load("a100-3072-hdr", NULL, &c, &e), 0);
  CU_ASSERT_EQUAL(c.fabric.levels, 3); /* leaf, spine, core (SC'21) */
  CU_ASSERT_EQUAL(topo_total_gpus(&c), 3072);
}

/* ---- folders: the dir arguments and the environment ---- */

static char tmp_root[64];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* A small catalogue entry: H200-SXM.json's text with a new name. */
static char *entry_named(const char *name, const char *devices_json) {
  char path[4096];
  snprintf(path, sizeof path, "%s/H200-SXM.json", topo_gpus_dir());
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_object_set_new(root, "name", json_string(name));
  json_object_set_new(root, "device_names", json_loads(devices_json, JSON_DECODE_ANY, &je));
  char *text = json_dumps(root, 0);
  json_decref(root);
  return text;
}

static void test_folders(void) {
  snprintf(tmp_root, sizeof tmp_root, "/tmp/test_gpus_XXXXXX");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp_root));
  char dir[128], path[256];
  snprintf(dir, sizeof dir, "%s/gpus", tmp_root);
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
  char *zed = entry_named("Zed", "[\"Zed GPU\", \"NVIDIA H200\"]");
  snprintf(path, sizeof path, "%s/Zed.json", dir);
  write_file(path, zed);
  char *other = entry_named("Other", "[\"Other GPU\"]");
  snprintf(path, sizeof path, "%s/Wrong.json", dir); /* named unlike its file */
  write_file(path, other);
  free(zed);
  free(other);

  topo_gpu g;
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_gpu_load("Zed", dir, &g, &e), 0);
  CU_ASSERT_STRING_EQUAL(g.name, "Zed");
  CU_ASSERT_EQUAL(topo_gpu_load("Wrong", dir, &g, &e), -1);
  ASSERT_MSG(e, "Wrong.json: name: \"Other\" differs from the file name");
  /* a broken entry is reported by the device lookup, not skipped */
  CU_ASSERT_EQUAL(topo_gpu_find_device("Zed GPU", dir, &g, &e), -1);
  ASSERT_MSG(e, "Wrong.json: name: ");
  unlink(path);
  CU_ASSERT_EQUAL(topo_gpu_find_device("Zed GPU", dir, &g, &e), 0);
  CU_ASSERT_STRING_EQUAL(g.name, "Zed");

  /* a cluster loaded from a topologies folder takes its GPUs from <folder>/gpus */
  snprintf(path, sizeof path, "%s/zc.json", tmp_root);
  char text[1024];
  snprintf(text, sizeof text, cluster_text, "\"Zed\"");
  write_file(path, text);
  topo_cluster c;
  /* the text says "name": "t"; by path the name need not match the file */
  CU_ASSERT_EQUAL(topo_load(path, tmp_root, &c, &e), 0);
  CU_ASSERT_STRING_EQUAL(c.gpu.name, "Zed");
  CU_ASSERT_EQUAL(topo_load(path, NULL, &c, &e), -1); /* the shipped catalogue has no Zed */
  ASSERT_MSG(e, "gpu: no GPU named \"Zed\"");

  /* the environment moves both folders */
  const char *old = getenv("TACOSIM_TOPOLOGIES_DIR");
  char *saved = old ? strdup(old) : NULL;
  setenv("TACOSIM_TOPOLOGIES_DIR", tmp_root, 1);
  snprintf(path, sizeof path, "%s/gpus", tmp_root);
  CU_ASSERT_STRING_EQUAL(topo_gpus_dir(), path);
  CU_ASSERT_EQUAL(topo_gpu_load("Zed", NULL, &g, &e), 0);
  CU_ASSERT_EQUAL(topo_gpu_find_device("NVIDIA H200", NULL, &g, &e), 0);
  CU_ASSERT_STRING_EQUAL(g.name, "Zed");
  if (saved) {
    setenv("TACOSIM_TOPOLOGIES_DIR", saved, 1);
    free(saved);
  } else {
    unsetenv("TACOSIM_TOPOLOGIES_DIR");
  }
  snprintf(path, sizeof path, "%s/Zed.json", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/zc.json", tmp_root);
  unlink(path);
  rmdir(dir);
  rmdir(tmp_root);
}

/* ---- malformed entries: each is refused, and the message names the field ---- */

typedef struct {
  const char *path;  /* dotted: "sms", "sources.sms" */
  const char *value; /* JSON, or NULL to remove the member */
  const char *field; /* must appear as "bad.json: FIELD: " */
} mutation;

static const mutation mutations[] = {
    {"schema", "2", "schema"},
    {"schema", NULL, "schema"},
    {"name", NULL, "name"},
    {"name", "\"H 200\"", "name"},
    {"name", "7", "name"},
    {"notes", "[]", "notes"},
    {"smss", "132", "smss"}, /* a typo */
    {"sms", NULL, "sms"},    /* every figure is required in the catalogue */
    {"l2_mib", NULL, "l2_mib"},
    {"boost_mhz", NULL, "boost_mhz"},
    {"sms", "0", "sms"},
    {"sms", "132.5", "sms"},
    {"sms", "\"132\"", "sms"},
    {"bf16_tflops", "\"989\"", "bf16_tflops"},
    {"bf16_tflops", "0", "bf16_tflops"},
    {"bf16_tflops", "-1", "bf16_tflops"},
    {"fp8_tflops", "-1", "fp8_tflops"},
    {"hbm_gbps", "1e9", "hbm_gbps"},
    {"hbm_gib", "true", "hbm_gib"},
    {"power_w", "0", "power_w"},
    {"pcie_gen", "0", "pcie_gen"},
    {"nvlink_gen", "-1", "nvlink_gen"},
    {"nvlink_gbps", "0", "nvlink_gbps"}, /* generation 4 without a bandwidth */
    {"base_mhz", "2500", "boost_mhz"},   /* boost below base */
    {"device_names", NULL, "device_names"},
    {"device_names", "[]", "device_names"},
    {"device_names", "\"NVIDIA H200\"", "device_names"},
    {"device_names", "[3]", "device_names[0]"},
    {"device_names", "[\"NVIDIA H200\", \"\"]", "device_names[1]"},
    {"sources", NULL, "sources"},
    {"sources", "[]", "sources"},
    {"sources.sms", NULL, "sources.sms"},
    {"sources.sms", "\"\"", "sources.sms"},
    {"sources.sms", "5", "sources.sms"},
    {"sources.colour", "\"x\"", "sources.colour"},
    {"mxfp8", NULL, "mxfp8"},           /* the MXFP8 capability: required, true or false */
    {"mxfp8", "1", "mxfp8"},
    {"mxfp8", "\"true\"", "mxfp8"},
    {"mxfp8", "null", "mxfp8"},
    {"sources.mxfp8", NULL, "sources.mxfp8"},
    {"mxfp8_gemm_ratio", NULL, "mxfp8_gemm_ratio"},   /* required in the catalogue */
    {"mxfp8_gemm_ratio", "1.05", "mxfp8_gemm_ratio"}, /* the H200 has no MXFP8: only 0 */
    {"mxfp8_gemm_ratio", "-1", "mxfp8_gemm_ratio"},
    {"sources.mxfp8_gemm_ratio", NULL, "sources.mxfp8_gemm_ratio"},
    {"fp8_non_tn_gemm", NULL, "fp8_non_tn_gemm"}, /* required in the catalogue, true or false */
    {"fp8_non_tn_gemm", "1", "fp8_non_tn_gemm"},
    {"sources.fp8_non_tn_gemm", NULL, "sources.fp8_non_tn_gemm"},
};

static char *base_entry_text(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/H200-SXM.json", topo_gpus_dir());
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static char *mutate(const mutation *m) { return test_json_mutate(base_entry_text(), m->path, m->value); }

static void test_base_entry_is_valid(void) {
  const char *text = base_entry_text();
  topo_gpu g;
  ts_err e = {0};
  int rc = topo_gpu_from_json_text(text, strlen(text), "bad.json", &g, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(g.name, "H200-SXM");
}

static void test_malformed_entries_name_the_field(void) {
  for (size_t i = 0; i < sizeof mutations / sizeof *mutations; i++) {
    char *text = mutate(&mutations[i]);
    topo_gpu g;
    ts_err e = {0};
    int rc = topo_gpu_from_json_text(text, strlen(text), "bad.json", &g, &e);
    if (rc == 0) printf("\n  accepted: %s = %s\n", mutations[i].path, mutations[i].value);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    CU_ASSERT_FALSE(g.from_catalogue);
    char want[160];
    snprintf(want, sizeof want, "bad.json: %s: ", mutations[i].field);
    ASSERT_MSG(e, want);
    free(text);
  }
  { /* any-layout FP8 GEMMs on a GPU without FP8 */
    char *no_fp8 = test_json_mutate(base_entry_text(), "fp8_tflops", "0");
    char *text = test_json_mutate(no_fp8, "fp8_non_tn_gemm", "true");
    topo_gpu g;
    ts_err e = {0};
    CU_ASSERT_EQUAL(topo_gpu_from_json_text(text, strlen(text), "bad.json", &g, &e), -1);
    ASSERT_MSG(e, "bad.json: fp8_non_tn_gemm: true for a GPU without FP8 tensor cores");
    free(text);
    free(no_fp8);
  }
  topo_gpu g;
  ts_err e = {0};
  CU_ASSERT_EQUAL(topo_gpu_from_json_text("{", 1, "bad.json", &g, &e), -1);
  ASSERT_MSG(e, "bad.json");
  CU_ASSERT_EQUAL(topo_gpu_from_json_text(NULL, 0, NULL, &g, &e), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("gpu catalogue", NULL, NULL);
  CU_add_test(s, "every entry loads", test_every_entry_loads);
  CU_add_test(s, "datasheet figures", test_datasheet_figures);
  CU_add_test(s, "find by CUDA device name", test_find_by_device_name);
  CU_add_test(s, "unknown names list what there is", test_unknown_names_list_what_there_is);
  CU_add_test(s, "cluster names a catalogue GPU", test_cluster_names_a_catalogue_gpu);
  CU_add_test(s, "inline block still loads", test_inline_block_still_loads);
  CU_add_test(s, "H200 clusters use the catalogue", test_h200_clusters_use_the_catalogue);
  CU_add_test(s, "new zoo clusters", test_new_zoo_clusters);
  CU_add_test(s, "folders: arguments and environment", test_folders);
  CU_add_test(s, "base entry is valid", test_base_entry_is_valid);
  CU_add_test(s, "malformed entries name the field", test_malformed_entries_name_the_field);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
