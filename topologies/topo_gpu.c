/* topo_gpu.c — the GPU catalogue: topologies/gpus/<name>.json, one GPU's
 * published figures each, read strictly (every figure present and in range,
 * unknown keys refused, a source named for every figure), looked up by
 * catalogue name or by the CUDA device name the runtime reports. */
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_gpu_internal.h"
#include "ts_json.h"

#ifndef TACOSIM_TOPOLOGIES_DIR
#define TACOSIM_TOPOLOGIES_DIR "topologies"
#endif

const char *topo_gpus_dir(void) {
  static char dir[4096];
  const char *env = getenv("TACOSIM_TOPOLOGIES_DIR");
  snprintf(dir, sizeof dir, "%s/gpus", env && *env ? env : TACOSIM_TOPOLOGIES_DIR);
  return dir;
}

/* Every figure of topo_gpu: its JSON key (the field's name), where it lives,
 * its range when present, and whether an inline block must give it. */
typedef enum { FIG_REAL, FIG_INT, FIG_BOOL } figure_kind;
typedef struct {
  const char *key;
  size_t offset;
  figure_kind kind;
  double lo, hi;
  bool inline_required;
} figure;

#define REAL(k, lo, hi, req) {#k, offsetof(topo_gpu, k), FIG_REAL, lo, hi, req}
#define INT(k, lo, hi) {#k, offsetof(topo_gpu, k), FIG_INT, lo, hi, false}
#define BOOL(k) {#k, offsetof(topo_gpu, k), FIG_BOOL, 0, 1, false}
static const figure figures[] = {
    REAL(bf16_tflops, 1e-3, 1e5, true), /* dense, no sparsity */
    REAL(fp16_tflops, 1e-3, 1e5, false),
    REAL(fp8_tflops, 0, 1e5, false), /* 0: no FP8 tensor cores */
    REAL(fp4_tflops, 0, 1e5, false), /* dense NVFP4; 0: no FP4 tensor cores (an inline block without it: 0) */
    REAL(fp32_tflops, 1e-3, 1e5, false),
    REAL(bf16_mamf_tflops, 0, 1e5, false), /* measured; 0: none published */
    REAL(flash2_bf16_util, 0, 1, false),   /* published FlashAttention-2 utilisation; 0: none */
    REAL(hbm_gib, 1e-3, 1e6, true),
    REAL(hbm_gbps, 1e-3, 1e5, true),
    INT(sms, 1, 100000),
    REAL(l2_mib, 1e-3, 1e5, false),
    REAL(base_mhz, 0, 1e5, false), /* 0: not published */
    REAL(boost_mhz, 0, 1e5, false),
    REAL(power_w, 1, 1e5, false),
    INT(nvlink_gen, 0, 20), /* 0: no NVLink */
    REAL(nvlink_gbps, 0, 1e5, false),
    INT(pcie_gen, 1, 20),
    BOOL(mxfp8), /* MXFP8 block scaling in the tensor cores (an inline block without it: false) */
    REAL(mxfp8_gemm_ratio, 0, 10, false), /* measured MXFP8 / per-tensor FP8 GEMM time; 0: none (or no MXFP8) */
    BOOL(fp8_non_tn_gemm), /* FP8 GEMMs in any operand layout (an inline block without it: false) */
};
#undef REAL
#undef INT
#undef BOOL
enum { N_FIGURES = sizeof figures / sizeof *figures };

bool topo_gpu_is_figure(const char *key) {
  for (int i = 0; i < N_FIGURES; i++)
    if (strcmp(key, figures[i].key) == 0) return true;
  return false;
}

static int read_figure(json_t *obj, const figure *f, bool required, const char *file, const char *path,
                       topo_gpu *g, ts_err *e) {
  char *at = (char *)g + f->offset;
  if (f->kind == FIG_BOOL) {
    bool v = false;
    int rc = required ? tsj_bool(obj, f->key, &v, file, path, e) : tsj_bool_opt(obj, f->key, false, &v, file, path, e);
    *(bool *)at = v;
    return rc;
  }
  if (f->kind == FIG_INT) {
    long long v = 0;
    int rc = required ? tsj_int(obj, f->key, (long long)f->lo, (long long)f->hi, &v, file, path, e)
                      : tsj_int_opt(obj, f->key, (long long)f->lo, (long long)f->hi, 0, &v, file, path, e);
    *(int *)at = (int)v;
    return rc;
  }
  double v = 0;
  int rc = required ? tsj_real(obj, f->key, f->lo, f->hi, &v, file, path, e)
                    : tsj_real_opt(obj, f->key, f->lo, f->hi, 0.0, &v, file, path, e);
  *(double *)at = v;
  return rc;
}

static const char *field(char *buf, size_t cap, const char *path, const char *key) {
  snprintf(buf, cap, "%s%s%s", path ? path : "", path ? "." : "", key);
  return buf;
}

int topo_gpu_read_figures(json_t *obj, bool catalogue, const char *file, const char *path, topo_gpu *g,
                          ts_err *e) {
  for (int i = 0; i < N_FIGURES; i++)
    if (read_figure(obj, &figures[i], catalogue || figures[i].inline_required, file, path, g, e)) return -1;
  char f[256];
  /* Figures that must agree, checked where both are given. */
  if (g->base_mhz > 0 && g->boost_mhz > 0 && g->boost_mhz < g->base_mhz)
    return ts_fail(e, file, field(f, sizeof f, path, "boost_mhz"), "%g is below base_mhz %g", g->boost_mhz,
                   g->base_mhz);
  if (json_object_get(obj, "nvlink_gen") && json_object_get(obj, "nvlink_gbps") &&
      (g->nvlink_gen == 0) != (g->nvlink_gbps == 0))
    return ts_fail(e, file, field(f, sizeof f, path, "nvlink_gbps"),
                   "%g with nvlink_gen %d (0 and 0 mean no NVLink; a generation needs a bandwidth)", g->nvlink_gbps,
                   g->nvlink_gen);
  if (g->mxfp8_gemm_ratio > 0 && !g->mxfp8)
    return ts_fail(e, file, field(f, sizeof f, path, "mxfp8_gemm_ratio"),
                   "%g for a GPU without MXFP8 (mxfp8 false): a ratio of MXFP8 to per-tensor FP8 GEMM times needs "
                   "MXFP8 tensor cores; give 0", g->mxfp8_gemm_ratio);
  if (g->fp8_non_tn_gemm && g->fp8_tflops <= 0)
    return ts_fail(e, file, field(f, sizeof f, path, "fp8_non_tn_gemm"),
                   "true for a GPU without FP8 tensor cores (fp8_tflops 0): give false");
  if (g->fp4_tflops > 0 && g->fp8_tflops <= 0)
    return ts_fail(e, file, field(f, sizeof f, path, "fp4_tflops"),
                   "%g for a GPU without FP8 tensor cores (fp8_tflops 0): an NVFP4 GEMM is priced from the FP8 one "
                   "(its E4M3 block scales are FP8); give 0", g->fp4_tflops);
  if (g->mxfp8_gemm_ratio > 0 && g->mxfp8_gemm_ratio < 0.1)
    return ts_fail(e, file, field(f, sizeof f, path, "mxfp8_gemm_ratio"),
                   "%g: 0 (not published) or a time ratio of 0.1 to 10", g->mxfp8_gemm_ratio);
  return 0;
}

/* ---- an entry ---- */

static const char *const entry_keys[] = {"schema", "name", "notes", "device_names", "sources", NULL};

static bool is_entry_key(const char *key) {
  for (int i = 0; entry_keys[i]; i++)
    if (strcmp(key, entry_keys[i]) == 0) return true;
  return topo_gpu_is_figure(key);
}

static int check_identifier(const char *s, const char *file, const char *fld, ts_err *e) {
  for (const char *c = s; *c; c++) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
             *c == '_' || *c == '-';
    if (!ok) return ts_fail(e, file, fld, "\"%s\": only letters, digits, '.', '_' and '-' are allowed", s);
  }
  return 0;
}

enum { MAX_DEVICE_NAMES = 16, DEVICE_NAME_CAP = 96 };

static int check_device_names(json_t *root, const char *file, ts_err *e) {
  json_t *names = json_object_get(root, "device_names");
  if (!names) return ts_fail(e, file, "device_names", "missing (an array of CUDA device names is required)");
  if (!json_is_array(names) || json_array_size(names) == 0)
    return ts_fail(e, file, "device_names", "must be a non-empty array of strings");
  if (json_array_size(names) > MAX_DEVICE_NAMES)
    return ts_fail(e, file, "device_names", "%zu names (at most %d)", json_array_size(names), MAX_DEVICE_NAMES);
  size_t i;
  json_t *v;
  json_array_foreach(names, i, v) {
    char f[64];
    snprintf(f, sizeof f, "device_names[%zu]", i);
    if (!json_is_string(v) || json_string_length(v) == 0)
      return ts_fail(e, file, f, "must be a non-empty string");
    if (json_string_length(v) >= DEVICE_NAME_CAP)
      return ts_fail(e, file, f, "is %zu characters long (at most %d)", json_string_length(v), DEVICE_NAME_CAP - 1);
    if (strlen(json_string_value(v)) != json_string_length(v))
      return ts_fail(e, file, f, "must not contain NUL characters");
  }
  return 0;
}

/* A source for every figure, and nothing that is not a figure. */
static int check_sources(json_t *root, const char *file, ts_err *e) {
  json_t *src = json_object_get(root, "sources");
  if (!src) return ts_fail(e, file, "sources", "missing (an object naming each figure's source is required)");
  if (!json_is_object(src)) return ts_fail(e, file, "sources", "must be an object");
  char f[256];
  const char *key;
  json_t *v;
  json_object_foreach(src, key, v) {
    if (!topo_gpu_is_figure(key) && strcmp(key, "device_names"))
      return ts_fail(e, file, field(f, sizeof f, "sources", key), "not a figure of the entry (a typo?)");
    if (!json_is_string(v) || json_string_length(v) == 0)
      return ts_fail(e, file, field(f, sizeof f, "sources", key), "must be a non-empty string");
  }
  for (int i = 0; i < N_FIGURES; i++)
    if (!json_object_get(src, figures[i].key))
      return ts_fail(e, file, field(f, sizeof f, "sources", figures[i].key),
                     "missing (every figure names its source, or says it could not be confirmed)");
  return 0;
}

static int parse_entry(json_t *root, const char *file, topo_gpu *g, ts_err *e) {
  memset(g, 0, sizeof *g);
  if (tsj_schema(root, 1, file, e)) return -1;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    (void)v;
    if (!is_entry_key(key)) return ts_fail(e, file, key, "unknown field (a typo?)");
  }
  json_t *notes = json_object_get(root, "notes");
  if (notes && !json_is_null(notes) && !json_is_string(notes)) return ts_fail(e, file, "notes", "must be a string");
  if (tsj_string(root, "name", g->name, sizeof g->name, file, NULL, e)) return -1;
  if (check_identifier(g->name, file, "name", e)) return -1;
  if (check_device_names(root, file, e)) return -1;
  if (topo_gpu_read_figures(root, true, file, NULL, g, e)) return -1;
  if (check_sources(root, file, e)) return -1;
  g->from_catalogue = true;
  return 0;
}

int topo_gpu_from_json_text(const char *text, unsigned long len, const char *what, topo_gpu *g, ts_err *e) {
  const char *file = what && *what ? what : "<gpu>";
  memset(g, 0, sizeof *g);
  if (!text) return ts_fail(e, file, NULL, "no text");
  json_t *root = tsj_load_string(text, (size_t)len, file, e);
  if (!root) return -1;
  int rc = parse_entry(root, file, g, e);
  json_decref(root);
  if (rc) memset(g, 0, sizeof *g);
  return rc;
}

/* ---- the folder ---- */

enum { MAX_ENTRIES = 256, ENTRY_NAME_CAP = 64 };

static int compare_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* The base names of dir's *.json files, sorted; -1 when dir cannot be read. */
static int scan(const char *dir, char names[][ENTRY_NAME_CAP], int cap) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *ent;
  while ((ent = readdir(d)) && n < cap) {
    size_t len = strlen(ent->d_name);
    if (len < 6 || strcmp(ent->d_name + len - 5, ".json") || len - 5 >= ENTRY_NAME_CAP) continue;
    snprintf(names[n++], ENTRY_NAME_CAP, "%.*s", (int)(len - 5), ent->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, ENTRY_NAME_CAP, compare_names);
  return n;
}

void topo_list_names(const char *dir, char *out, size_t cap) {
  char names[MAX_ENTRIES][ENTRY_NAME_CAP];
  if (!cap) return;
  int n = scan(dir, names, MAX_ENTRIES);
  if (n < 0) {
    snprintf(out, cap, "cannot read the folder");
    return;
  }
  if (n == 0) {
    snprintf(out, cap, "none");
    return;
  }
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "", names[i]);
}

static const char *dir_or_default(const char *gpus_dir) {
  return gpus_dir && *gpus_dir ? gpus_dir : topo_gpus_dir();
}

/* Loads and parses one file; by name, the entry must carry that name. The
 * parsed root comes back in *root_out when asked for (caller decrefs). */
static int load_file(const char *path, const char *want_name, topo_gpu *g, ts_err *e, json_t **root_out) {
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  int rc = parse_entry(root, path, g, e);
  if (!rc && want_name && strcmp(g->name, want_name))
    rc = ts_fail(e, path, "name", "\"%s\" differs from the file name (\"%s\")", g->name, want_name);
  if (!rc && root_out)
    *root_out = root;
  else
    json_decref(root);
  if (rc) memset(g, 0, sizeof *g);
  return rc;
}

int topo_gpu_load_for(const char *name, const char *gpus_dir, const char *file, const char *fld, topo_gpu *g,
                      ts_err *e) {
  memset(g, 0, sizeof *g);
  if (!name || !*name) return ts_fail(e, file, fld, "no GPU name given");
  if (check_identifier(name, file, fld, e)) return -1;
  const char *dir = dir_or_default(gpus_dir);
  char path[4096];
  int w = snprintf(path, sizeof path, "%s/%s.json", dir, name);
  if (w < 0 || (size_t)w >= sizeof path) return ts_fail(e, file, fld, "path of GPU \"%s\" is too long", name);
  FILE *probe = fopen(path, "r");
  if (!probe) {
    char list[700];
    topo_list_names(dir, list, sizeof list);
    return ts_fail(e, file, fld, "no GPU named \"%s\" in the catalogue %s (there: %s)", name, dir, list);
  }
  fclose(probe);
  return load_file(path, name, g, e, NULL);
}

int topo_gpu_load(const char *name_or_path, const char *gpus_dir, topo_gpu *g, ts_err *e) {
  memset(g, 0, sizeof *g);
  if (!name_or_path || !*name_or_path) return ts_fail(e, NULL, "gpu", "no GPU name or path given");
  size_t n = strlen(name_or_path);
  int is_path = strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0);
  if (is_path) return load_file(name_or_path, NULL, g, e, NULL);
  return topo_gpu_load_for(name_or_path, gpus_dir, NULL, "gpu", g, e);
}

static bool answers_to(json_t *root, const char *device) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(root, "device_names"), i, v) {
    if (strcmp(json_string_value(v), device) == 0) return true;
  }
  return false;
}

int topo_gpu_find_device(const char *cuda_device_name, const char *gpus_dir, topo_gpu *g, ts_err *e) {
  char names[MAX_ENTRIES][ENTRY_NAME_CAP];
  memset(g, 0, sizeof *g);
  if (!cuda_device_name || !*cuda_device_name) return ts_fail(e, NULL, "device name", "no CUDA device name given");
  const char *dir = dir_or_default(gpus_dir);
  int n = scan(dir, names, MAX_ENTRIES);
  if (n < 0) return ts_fail(e, dir, NULL, "cannot read the GPU catalogue folder");
  int found = -1;
  for (int i = 0; i < n; i++) {
    char path[4096];
    int w = snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
    if (w < 0 || (size_t)w >= sizeof path) return ts_fail(e, dir, NULL, "path of \"%s\" is too long", names[i]);
    topo_gpu entry;
    json_t *root = NULL;
    if (load_file(path, names[i], &entry, e, &root)) return -1; /* a broken entry is reported, not skipped */
    bool match = answers_to(root, cuda_device_name);
    json_decref(root);
    if (!match) continue;
    if (found >= 0) {
      memset(g, 0, sizeof *g);
      return ts_fail(e, dir, NULL, "CUDA device name \"%s\" is listed by two entries, %s and %s", cuda_device_name,
                     names[found], names[i]);
    }
    found = i;
    *g = entry;
  }
  if (found < 0) {
    char list[700];
    topo_list_names(dir, list, sizeof list);
    return ts_fail(e, dir, NULL,
                   "no GPU in the catalogue answers to the CUDA device name \"%s\" (entries: %s; each lists its "
                   "names in \"device_names\")",
                   cuda_device_name, list);
  }
  return 0;
}
