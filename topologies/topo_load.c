/* topo_load.c — reads a cluster file strictly: every field is checked for
 * presence, type and range, then the fields are checked against each other,
 * so that the platform writer and the path helpers never see a cluster they
 * cannot build (no NIC-less multi-node cluster, no empty leaf, no zero
 * bandwidth). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_gpu_internal.h"
#include "ts_json.h"

#ifndef TACOSIM_TOPOLOGIES_DIR
#define TACOSIM_TOPOLOGIES_DIR "topologies"
#endif

/* The environment's TACOSIM_TOPOLOGIES_DIR first (as model_zoo_dir). */
const char *topo_zoo_dir(void) {
  const char *env = getenv("TACOSIM_TOPOLOGIES_DIR");
  return env && *env ? env : TACOSIM_TOPOLOGIES_DIR;
}

/* Same order as the enums in topo.h. */
static const char *const intra_names[] = {"nvswitch", "nvlink", "pcie", "shm", "socket", NULL};
static const char *const fabric_names[] = {"none", "single_switch", "fat_tree", "rail_fat_tree", "dragonfly", NULL};

const char *topo_intra_kind_name(topo_intra_kind k) {
  return (unsigned)k < sizeof intra_names / sizeof *intra_names - 1 ? intra_names[k] : "?";
}
const char *topo_fabric_kind_name(topo_fabric_kind k) {
  return (unsigned)k < sizeof fabric_names / sizeof *fabric_names - 1 ? fabric_names[k] : "?";
}

/* Every key each object may hold; anything else is a typo worth reporting. */
static const char *const root_keys[] = {"schema", "name", "notes", "gpu", "nodes", "gpus_per_node",
                                        "intra",  "nic",  "fabric", NULL};
/* An inline "gpu" block: its name and any of topo_gpu's figures (topo_gpu.c). */
static const char *const intra_keys[] = {"kind", "gbps_per_gpu", "latency_us", "notes", NULL};
static const char *const nic_keys[] = {"per_node", "gbps", "latency_us", "notes", NULL};
static const char *const fabric_keys[] = {"kind",   "levels",     "oversubscription", "nodes_per_leaf",
                                          "groups", "latency_us", "notes",            NULL};

/* Bounds: far above any real machine, low enough that every count fits an
 * int and every platform stays writable. */
enum {
  MAX_GPUS_PER_NODE = 72, /* one GB200 NVL72 rack is one NVLink domain, modelled as one node */
  MAX_GPUS = 1 << 20,
  MAX_LEAF_GROUPS = 4096, /* vertices of the top routing zone (Dijkstra) */
  MAX_NODES_PER_LEAF = 512, /* a leaf is one Dijkstra zone of its GPUs: keep route searches small */
  MAX_DRAGONFLY_GROUPS = 256, /* the top zone lists every pair of groups */
  MAX_LEVELS = 5,
};
static const double MAX_GBPS = 1e5;       /* 100 TB/s per link */
static const double MIN_GBPS = 1e-3;      /* 1 MB/s: anything slower is a unit mistake */
static const double MAX_LATENCY_US = 1e6; /* 1 s */

static int check_keys(json_t *obj, const char *const *known, const char *file, const char *path, ts_err *e) {
  const char *key;
  json_t *value;
  json_object_foreach(obj, key, value) {
    (void)value;
    int ok = 0;
    for (int i = 0; known[i]; i++) ok |= strcmp(key, known[i]) == 0;
    if (!ok) {
      char field[256];
      snprintf(field, sizeof field, "%s%s%s", path ? path : "", path ? "." : "", key);
      return ts_fail(e, file, field, "unknown field (a typo?)");
    }
  }
  return 0;
}

/* A free-text "notes" member, when present, must be a string. */
static int check_notes(json_t *obj, const char *file, const char *path, ts_err *e) {
  json_t *v = json_object_get(obj, "notes");
  if (!v || json_is_null(v) || json_is_string(v)) return 0;
  char field[256];
  snprintf(field, sizeof field, "%s%snotes", path ? path : "", path ? "." : "");
  return ts_fail(e, file, field, "must be a string");
}

/* Names end up in file names, platform ids and reports: keep them to [A-Za-z0-9._-]. */
static int check_identifier(const char *s, const char *file, const char *field, ts_err *e) {
  for (const char *c = s; *c; c++) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
             *c == '_' || *c == '-';
    if (!ok) return ts_fail(e, file, field, "\"%s\": only letters, digits, '.', '_' and '-' are allowed", s);
  }
  return 0;
}

/* "gpu": the name of a catalogue entry (gpus_dir/<name>.json), or an inline
 * block with name, bf16_tflops, hbm_gib, hbm_gbps and optionally the other
 * figures of topo_gpu (0 when left out). */
static int read_gpu(json_t *root, const char *file, const char *gpus_dir, topo_cluster *c, ts_err *e) {
  json_t *gpu = json_object_get(root, "gpu");
  if (!gpu || json_is_null(gpu))
    return ts_fail(e, file, "gpu", "missing (the name of a catalogue GPU, e.g. \"H200-SXM\", or an object)");
  if (json_is_string(gpu)) return topo_gpu_load_for(json_string_value(gpu), gpus_dir, file, "gpu", &c->gpu, e);
  if (!json_is_object(gpu))
    return ts_fail(e, file, "gpu", "must be the name of a catalogue GPU (a string) or an object");
  const char *key;
  json_t *v;
  json_object_foreach(gpu, key, v) {
    (void)v;
    if (strcmp(key, "name") && !topo_gpu_is_figure(key)) {
      char field[256];
      snprintf(field, sizeof field, "gpu.%s", key);
      return ts_fail(e, file, field, "unknown field (a typo?)");
    }
  }
  if (tsj_string(gpu, "name", c->gpu.name, sizeof c->gpu.name, file, "gpu", e)) return -1;
  if (check_identifier(c->gpu.name, file, "gpu.name", e)) return -1;
  return topo_gpu_read_figures(gpu, false, file, "gpu", &c->gpu, e);
}

static int read_intra(json_t *root, const char *file, topo_cluster *c, ts_err *e) {
  int idx;
  json_t *intra = tsj_object(root, "intra", file, NULL, e);
  if (!intra) return -1;
  if (check_keys(intra, intra_keys, file, "intra", e) || check_notes(intra, file, "intra", e)) return -1;
  if (tsj_enum(intra, "kind", intra_names, &idx, file, "intra", e)) return -1;
  c->intra.kind = (topo_intra_kind)idx;
  if (tsj_real(intra, "gbps_per_gpu", MIN_GBPS, MAX_GBPS, &c->intra.gbps_per_gpu, file, "intra", e)) return -1;
  if (tsj_real(intra, "latency_us", 0, MAX_LATENCY_US, &c->intra.latency_us, file, "intra", e)) return -1;
  return 0;
}

/* The NIC block is required as soon as there is more than one node. */
static int read_nic(json_t *root, const char *file, topo_cluster *c, ts_err *e) {
  long long v;
  bool failed;
  json_t *nic = tsj_object_opt(root, "nic", file, NULL, e, &failed);
  if (failed) return -1;
  if (!nic) {
    if (c->nodes > 1) return ts_fail(e, file, "nic", "missing (an object is required when nodes > 1)");
    c->nic.per_node = 0;
    return 0;
  }
  if (check_keys(nic, nic_keys, file, "nic", e) || check_notes(nic, file, "nic", e)) return -1;
  if (tsj_int(nic, "per_node", 0, MAX_GPUS_PER_NODE, &v, file, "nic", e)) return -1;
  c->nic.per_node = (int)v;
  if (tsj_real(nic, "gbps", MIN_GBPS, MAX_GBPS, &c->nic.gbps, file, "nic", e)) return -1;
  if (tsj_real(nic, "latency_us", 0, MAX_LATENCY_US, &c->nic.latency_us, file, "nic", e)) return -1;
  return 0;
}

static int read_fabric(json_t *root, const char *file, topo_cluster *c, ts_err *e) {
  long long v;
  int idx;
  bool failed;
  json_t *fab = tsj_object_opt(root, "fabric", file, NULL, e, &failed);
  if (failed) return -1;
  if (!fab) {
    if (c->nodes > 1) return ts_fail(e, file, "fabric", "missing (an object is required when nodes > 1)");
    c->fabric.kind = TOPO_FABRIC_NONE;
    c->fabric.levels = 1;
    c->fabric.oversubscription = 1.0;
    c->fabric.nodes_per_leaf = 1;
    c->fabric.groups = 1;
    return 0;
  }
  if (check_keys(fab, fabric_keys, file, "fabric", e) || check_notes(fab, file, "fabric", e)) return -1;
  if (tsj_enum(fab, "kind", fabric_names, &idx, file, "fabric", e)) return -1;
  c->fabric.kind = (topo_fabric_kind)idx;
  int tree = c->fabric.kind == TOPO_FABRIC_FAT_TREE || c->fabric.kind == TOPO_FABRIC_RAIL_FAT_TREE;
  if (tsj_int_opt(fab, "levels", 1, MAX_LEVELS, tree ? 2 : 1, &v, file, "fabric", e)) return -1;
  c->fabric.levels = (int)v;
  if (tsj_real_opt(fab, "oversubscription", 1.0, 1000.0, 1.0, &c->fabric.oversubscription, file, "fabric", e))
    return -1;
  if (tsj_int_opt(fab, "nodes_per_leaf", 1, MAX_GPUS, c->nodes, &v, file, "fabric", e)) return -1;
  c->fabric.nodes_per_leaf = (int)v;
  if (tsj_int_opt(fab, "groups", 1, MAX_DRAGONFLY_GROUPS, 1, &v, file, "fabric", e)) return -1;
  c->fabric.groups = (int)v;
  if (tsj_real_opt(fab, "latency_us", 0, MAX_LATENCY_US, 0.0, &c->fabric.latency_us, file, "fabric", e))
    return -1;
  return 0;
}

static int read_fields(json_t *root, const char *file, const char *gpus_dir, topo_cluster *c, ts_err *e) {
  long long v;
  if (tsj_schema(root, 1, file, e)) return -1;
  if (check_keys(root, root_keys, file, NULL, e) || check_notes(root, file, NULL, e)) return -1;
  if (tsj_string(root, "name", c->name, sizeof c->name, file, NULL, e)) return -1;
  if (check_identifier(c->name, file, "name", e)) return -1;
  if (read_gpu(root, file, gpus_dir, c, e)) return -1;
  if (tsj_int(root, "nodes", 1, MAX_GPUS, &v, file, NULL, e)) return -1;
  c->nodes = (int)v;
  if (tsj_int(root, "gpus_per_node", 1, MAX_GPUS_PER_NODE, &v, file, NULL, e)) return -1;
  c->gpus_per_node = (int)v;
  if ((long long)c->nodes * c->gpus_per_node > MAX_GPUS)
    return ts_fail(e, file, "nodes", "%d nodes of %d GPUs exceed %d GPUs in all", c->nodes, c->gpus_per_node,
                   MAX_GPUS);
  if (read_intra(root, file, c, e)) return -1;
  if (read_nic(root, file, c, e)) return -1;
  if (read_fabric(root, file, c, e)) return -1;
  return 0;
}

/* Rules that tie fields together. */
static int check_consistency(json_t *root, const char *file, const topo_cluster *c, ts_err *e) {
  json_t *fab = json_object_get(root, "fabric");
  int multi = c->nodes > 1;
  if (c->intra.kind == TOPO_INTRA_NVLINK && c->gpus_per_node != 2)
    return ts_fail(e, file, "intra.kind", "\"nvlink\" (direct GPU-to-GPU links) needs gpus_per_node 2, not %d; "
                   "use \"nvswitch\" for more GPUs", c->gpus_per_node);
  if (multi && c->nic.per_node < 1)
    return ts_fail(e, file, "nic.per_node", "must be at least 1 when nodes > 1 (got %d)", c->nic.per_node);
  if (c->nic.per_node > c->gpus_per_node)
    return ts_fail(e, file, "nic.per_node", "%d NICs for %d GPUs: at most one NIC per GPU is modelled",
                   c->nic.per_node, c->gpus_per_node);
  if (c->nic.per_node > 0 && c->gpus_per_node % c->nic.per_node)
    return ts_fail(e, file, "nic.per_node", "%d does not divide gpus_per_node %d (GPUs share NICs evenly)",
                   c->nic.per_node, c->gpus_per_node);
  if (multi && c->fabric.kind == TOPO_FABRIC_NONE)
    return ts_fail(e, file, "fabric.kind", "\"none\" is only for one node (this cluster has %d)", c->nodes);
  if (!fab) return 0;

  int tree = c->fabric.kind == TOPO_FABRIC_FAT_TREE || c->fabric.kind == TOPO_FABRIC_RAIL_FAT_TREE;
  int dragonfly = c->fabric.kind == TOPO_FABRIC_DRAGONFLY;
  if (!tree && json_object_get(fab, "nodes_per_leaf"))
    return ts_fail(e, file, "fabric.nodes_per_leaf", "only meaningful for \"fat_tree\" and \"rail_fat_tree\"");
  if (!tree && json_object_get(fab, "levels"))
    return ts_fail(e, file, "fabric.levels", "only meaningful for \"fat_tree\" and \"rail_fat_tree\"");
  if (!dragonfly && json_object_get(fab, "groups"))
    return ts_fail(e, file, "fabric.groups", "only meaningful for \"dragonfly\"");
  if (!tree && !dragonfly && c->fabric.oversubscription != 1.0)
    return ts_fail(e, file, "fabric.oversubscription", "must be 1 for \"%s\" (no tapered level)",
                   topo_fabric_kind_name(c->fabric.kind));
  if (tree) {
    if (c->fabric.nodes_per_leaf > c->nodes)
      return ts_fail(e, file, "fabric.nodes_per_leaf", "%d exceeds nodes %d", c->fabric.nodes_per_leaf, c->nodes);
    int leaves = (c->nodes + c->fabric.nodes_per_leaf - 1) / c->fabric.nodes_per_leaf;
    if (leaves > MAX_LEAF_GROUPS)
      return ts_fail(e, file, "fabric.nodes_per_leaf", "%d gives %d leaf switches (at most %d)",
                     c->fabric.nodes_per_leaf, leaves, MAX_LEAF_GROUPS);
    if (leaves > 1 && c->fabric.levels < 2)
      return ts_fail(e, file, "fabric.levels", "1 level means one switch, but %d nodes at %d per leaf need %d "
                     "leaves; use levels >= 2", c->nodes, c->fabric.nodes_per_leaf, leaves);
    if (leaves == 1 && c->fabric.oversubscription != 1.0)
      return ts_fail(e, file, "fabric.oversubscription", "all %d nodes sit under one leaf: nothing to taper",
                     c->nodes);
  }
  if (dragonfly) {
    if (!json_object_get(fab, "groups"))
      return ts_fail(e, file, "fabric.groups", "missing (an integer is required for \"dragonfly\")");
    if (c->fabric.groups < 2)
      return ts_fail(e, file, "fabric.groups", "a dragonfly needs at least 2 groups (got %d)", c->fabric.groups);
    if (c->nodes % c->fabric.groups)
      return ts_fail(e, file, "fabric.groups", "%d does not divide nodes %d (groups are equal)", c->fabric.groups,
                     c->nodes);
  }
  int all_leaves = topo_leaf_count(c);
  int under_leaf = c->nodes / all_leaves + (c->nodes % all_leaves != 0);
  if (multi && under_leaf > MAX_NODES_PER_LEAF)
    return ts_fail(e, file, tree ? "fabric.nodes_per_leaf" : dragonfly ? "fabric.groups" : "nodes",
                   "%d nodes under one %s (at most %d)", under_leaf, dragonfly ? "group" : "switch",
                   MAX_NODES_PER_LEAF);
  return 0;
}

static int parse(json_t *root, const char *file, const char *gpus_dir, topo_cluster *c, ts_err *e) {
  memset(c, 0, sizeof *c);
  int rc = read_fields(root, file, gpus_dir, c, e);
  if (!rc) rc = check_consistency(root, file, c, e);
  return rc;
}

int topo_from_json_text(const char *text, unsigned long len, const char *what, topo_cluster *c, ts_err *e) {
  const char *file = what && *what ? what : "<cluster>";
  memset(c, 0, sizeof *c);
  if (!text) return ts_fail(e, file, NULL, "no text");
  json_t *root = tsj_load_string(text, (size_t)len, file, e);
  if (!root) return -1;
  int rc = parse(root, file, NULL, c, e);
  json_decref(root);
  return rc;
}

int topo_load(const char *name_or_path, const char *topologies_dir, topo_cluster *c, ts_err *e) {
  memset(c, 0, sizeof *c);
  if (!name_or_path || !*name_or_path) return ts_fail(e, NULL, "cluster", "no cluster name or path given");
  char path[4096];
  size_t n = strlen(name_or_path);
  int is_path = strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0);
  if (is_path) {
    if (n >= sizeof path) return ts_fail(e, NULL, "cluster", "path is too long (%zu characters)", n);
    memcpy(path, name_or_path, n + 1);
  } else {
    if (check_identifier(name_or_path, NULL, "cluster", e)) return -1;
    const char *dir = topologies_dir && *topologies_dir ? topologies_dir : topo_zoo_dir();
    int w = snprintf(path, sizeof path, "%s/%s.json", dir, name_or_path);
    if (w < 0 || (size_t)w >= sizeof path) return ts_fail(e, NULL, "cluster", "path is too long");
  }
  json_t *root = tsj_load_file(path, e);
  if (!root) {
    if (!is_path && strstr(e->msg, "cannot read")) { /* say which folder was searched, and what it holds */
      char list[700];
      topo_list_names(topologies_dir && *topologies_dir ? topologies_dir : topo_zoo_dir(), list, sizeof list);
      return ts_fail(e, path, NULL, "no cluster named \"%s\" in the topologies folder (there: %s)", name_or_path,
                     list);
    }
    return -1;
  }
  char gpus_dir[4096];
  if (topologies_dir && *topologies_dir) snprintf(gpus_dir, sizeof gpus_dir, "%s/gpus", topologies_dir);
  int rc = parse(root, path, topologies_dir && *topologies_dir ? gpus_dir : NULL, c, e);
  json_decref(root);
  return rc;
}
