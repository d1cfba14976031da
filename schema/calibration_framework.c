/* calibration_framework.c — the calibration's "framework_host" section: a training framework's own host
 * time per transformer layer (forward, backward; dense and MoE layers) and per collective call, measured
 * where the GPU waits for the host (experiments/published/moe/host/layer_host.py --host-blocks). Strict
 * loader and writer (calibration.h). */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "calibration.h"
#include "ts_json.h"

#define FW_MAX_US 1e6 /* one layer's host time: under a second */

static const char *const layer_names[SCHEMA_FW_NLAYERS] = {"dense", "moe"};
const char *const schema_fw_part_names[SCHEMA_FW_NPARTS] = {"attention", "mlp",     "router",
                                                            "dispatch",  "experts", "combine"};

/* The blocks a layer kind's "parts" may name. */
static bool part_of_kind(int part, int kind) {
  if (part == SCHEMA_FW_ATTENTION) return true;
  return kind == SCHEMA_FW_LAYER_DENSE ? part == SCHEMA_FW_MLP : part != SCHEMA_FW_MLP;
}

static int load_parts(json_t *obj, const char *file, const char *path, int kind, schema_framework_host *f,
                      ts_err *e) {
  if (!obj) return 0;
  char p[96];
  snprintf(p, sizeof p, "%s.parts", path);
  if (!json_is_object(obj)) return ts_fail(e, file, p, "must be an object");
  const char *k;
  json_t *v;
  json_object_foreach(obj, k, v) {
    int part = -1;
    for (int i = 0; i < SCHEMA_FW_NPARTS; i++)
      if (!strcmp(k, schema_fw_part_names[i])) part = i;
    char q[128];
    snprintf(q, sizeof q, "%s.%.24s", p, k);
    if (part < 0 || !part_of_kind(part, kind))
      return ts_fail(e, file, q, "unknown block for a %s layer (%s)", layer_names[kind],
                     kind == SCHEMA_FW_LAYER_DENSE ? "attention, mlp" : "attention, router, dispatch, experts, combine");
    if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= FW_MAX_US))
      return ts_fail(e, file, q, "must be a number in (0, %g] microseconds", FW_MAX_US);
    f->part_us[kind][part] = json_number_value(v);
  }
  return 0;
}
static const char *const frameworks[] = {"megatron-core", NULL};

static int load_layers(json_t *obj, const char *file, schema_framework_host *f, ts_err *e) {
  const char *sec = "framework_host.layers";
  if (!obj) return ts_fail(e, file, sec, "missing (an object with \"dense\" and/or \"moe\" is required)");
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const lkeys[] = {"dense", "moe", NULL};
  if (tsj_only_keys(obj, lkeys, file, sec, e)) return -1;
  int n = 0;
  for (int l = 0; l < SCHEMA_FW_NLAYERS; l++) {
    json_t *v = json_object_get(obj, layer_names[l]);
    if (!v) continue;
    char p[64];
    snprintf(p, sizeof p, "%s.%s", sec, layer_names[l]);
    if (!json_is_object(v)) return ts_fail(e, file, p, "must be an object");
    static const char *const keys[] = {"fwd_us", "bwd_us", "parts", NULL};
    if (tsj_only_keys(v, keys, file, p, e) || tsj_real(v, "fwd_us", 1e-3, FW_MAX_US, &f->layer_fwd_us[l], file, p, e) ||
        tsj_real(v, "bwd_us", 1e-3, FW_MAX_US, &f->layer_bwd_us[l], file, p, e) ||
        load_parts(json_object_get(v, "parts"), file, p, l, f, e))
      return -1;
    n++;
  }
  if (!n) return ts_fail(e, file, sec, "must give \"dense\" or \"moe\" (or both)");
  return 0;
}

static int load_calls(json_t *obj, const char *file, schema_framework_host *f, ts_err *e) {
  const char *sec = "framework_host.calls";
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  const char *k;
  json_t *v;
  json_object_foreach(obj, k, v) {
    ts_coll c;
    char p[64];
    snprintf(p, sizeof p, "%s.%.24s", sec, k);
    if (ts_coll_parse(k, &c) || c == TS_COLL_SENDRECV)
      return ts_fail(e, file, p, "unknown collective (allreduce, allgather, reducescatter or alltoall)");
    if (!json_is_number(v)) return ts_fail(e, file, p, "must be a number (microseconds per call)");
    double us = json_number_value(v);
    if (!(us > 0 && us <= FW_MAX_US)) return ts_fail(e, file, p, "must be in (0, %g] microseconds", FW_MAX_US);
    f->call_us[c] = us;
  }
  return 0;
}

int schema_framework_host_load(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  const char *sec = "framework_host";
  json_t *obj = json_object_get(root, sec);
  schema_framework_host *f = &c->fw_host;
  memset(f, 0, sizeof *f);
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const keys[] = {"framework", "measured_on", "source", "layers", "calls", NULL};
  int which;
  if (tsj_only_keys(obj, keys, file, sec, e) || tsj_enum(obj, "framework", frameworks, &which, file, sec, e) ||
      tsj_string(obj, "measured_on", f->measured_on, sizeof f->measured_on, file, sec, e) ||
      tsj_string(obj, "source", f->source, sizeof f->source, file, sec, e) ||
      load_layers(json_object_get(obj, "layers"), file, f, e) || load_calls(json_object_get(obj, "calls"), file, f, e)) {
    memset(f, 0, sizeof *f);
    return -1;
  }
  snprintf(f->framework, sizeof f->framework, "%s", frameworks[which]);
  return 0;
}

json_t *schema_framework_host_json(const schema_calibration *c) {
  const schema_framework_host *f = &c->fw_host;
  if (!f->framework[0]) return NULL;
  json_t *layers = json_object(), *calls = json_object();
  for (int l = 0; l < SCHEMA_FW_NLAYERS; l++) {
    if (!(f->layer_fwd_us[l] > 0)) continue;
    json_t *o = json_pack("{s:o,s:o}", "fwd_us", tsj_number(f->layer_fwd_us[l]), "bwd_us",
                          tsj_number(f->layer_bwd_us[l]));
    json_t *parts = json_object();
    for (int k = 0; k < SCHEMA_FW_NPARTS; k++)
      if (f->part_us[l][k] > 0) json_object_set_new(parts, schema_fw_part_names[k], tsj_number(f->part_us[l][k]));
    if (json_object_size(parts)) json_object_set_new(o, "parts", parts);
    else json_decref(parts);
    json_object_set_new(layers, layer_names[l], o);
  }
  for (int k = 0; k < TS_COLL_COUNT; k++)
    if (f->call_us[k] > 0) json_object_set_new(calls, ts_coll_name((ts_coll)k), tsj_number(f->call_us[k]));
  json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "framework", f->framework, "measured_on", f->measured_on, "source",
                        f->source, "layers", layers);
  if (json_object_size(calls)) json_object_set_new(o, "calls", calls);
  else json_decref(calls);
  return o;
}
