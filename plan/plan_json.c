/* plan_json.c — the pieces of a plan file that training and inference plans
 * share: unknown-key checks, the names (plan, model, cluster), and the codec object. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_internal.h"
#include "plan_reshape.h"
#include "ts_json.h"

static const char *const fp8_names[] = {"e4m3", "e5m2", NULL};

void plan_json_base_name(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  snprintf(out, cap, "%s", slash ? slash + 1 : path);
  char *dot = strrchr(out, '.');
  if (dot && strcmp(dot, ".json") == 0) *dot = '\0';
  if (!*out) snprintf(out, cap, "plan");
}

int plan_json_names(json_t *root, const char *file, char *name, size_t name_cap, char *desc, size_t desc_cap,
                    char model[PLAN_JSON_NAME_LEN], char cluster[PLAN_JSON_NAME_LEN], ts_err *e) {
  char dflt_name[128];
  plan_json_base_name(file, dflt_name, sizeof dflt_name);
  if (tsj_string_opt(root, "name", dflt_name, name, name_cap, file, NULL, e) ||
      tsj_string_opt(root, "description", "", desc, desc_cap, file, NULL, e) ||
      tsj_string(root, "model", model, PLAN_JSON_NAME_LEN, file, NULL, e) ||
      tsj_string(root, "cluster", cluster, PLAN_JSON_NAME_LEN, file, NULL, e))
    return -1;
  return 0;
}

bool plan_json_is_inference(json_t *root) {
  json_t *kind = json_is_object(root) ? json_object_get(root, "kind") : NULL;
  return kind && json_is_string(kind) && strcmp(json_string_value(kind), "inference") == 0;
}

/* "group": "auto": the reshaping's choice from the file "reshape" names (relative to the plan's
 * folder), of the tensor classes the codec's all-reduces carry (plan_reshape.h); "axis" ("auto" or "hidden", the only axis the kernels group along) checked. */
static int codec_group_auto(json_t *o, const char *file, const char *path, plan_codec *c, ts_err *e) {
  char field[96], rpath[1024];
  json_t *r = json_object_get(o, "reshape");
  snprintf(field, sizeof field, "%s.reshape", path);
  if (!r) return ts_fail(e, file, field, "missing: \"group\": \"auto\" needs the reshaping file (tacorun train --reshape)");
  if (!json_is_string(r) || !*json_string_value(r)) return ts_fail(e, file, field, "must be a file name");
  const char *rv = json_string_value(r), *slash = strrchr(file, '/');
  if (rv[0] == '/' || !slash) snprintf(rpath, sizeof rpath, "%s", rv);
  else snprintf(rpath, sizeof rpath, "%.*s/%s", (int)(slash - file), file, rv);
  const char *key = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
  const char *const *classes = !strcmp(key, "tp_fwd")   ? plan_reshape_fwd_classes
                               : !strcmp(key, "tp_bwd") ? plan_reshape_bwd_classes
                                                        : NULL; /* another traffic class: every tensor class */
  plan_reshape_choice ch;
  if (plan_reshape_read_classes(rpath, classes, &ch, e)) return -1;
  c->group = ch.group, c->group_auto = true;
  return 0;
}
static int codec_axis(json_t *o, const char *file, const char *path, ts_err *e) {
  char field[96];
  json_t *a = json_object_get(o, "axis");
  if (!a) return 0;
  snprintf(field, sizeof field, "%s.axis", path);
  const char *v = json_is_string(a) ? json_string_value(a) : "";
  if (!strcmp(v, "hidden") || !strcmp(v, "auto")) return 0;
  if (!strcmp(v, "tokens"))
    return ts_fail(e, file, field, "\"tokens\" is not run: the TACO kernels group along hidden only");
  return ts_fail(e, file, field, "must be \"auto\" or \"hidden\"");
}

int plan_json_codec(json_t *o, const char *file, const char *path, plan_codec *c, ts_err *e) {
  static const char *const keys[] = {"kind", "group", "fp8", "p", "axis", "reshape", NULL};
  memset(c, 0, sizeof *c);
  c->kind = PLAN_CODEC_NONE;
  c->group = 128;
  c->fp8 = PLAN_FP8_E4M3;
  if (!o) return 0;
  if (tsj_only_keys(o, keys, file, path, e)) return -1;
  int kind;
  if (tsj_enum(o, "kind", ts_codec_names, &kind, file, path, e)) return -1;
  c->kind = (plan_codec_kind)kind;
  char field[96];
  if (plan_codec_has_taco(c->kind)) {
    long long g;
    json_t *gj = json_object_get(o, "group");
    if (gj && json_is_string(gj) && !strcmp(json_string_value(gj), "auto")) {
      if (codec_group_auto(o, file, path, c, e)) return -1;
    } else if (tsj_int(o, "group", 1, 1 << 20, &g, file, path, e)) return -1;
    else c->group = (int)g;
    if (json_object_get(o, "reshape") && !c->group_auto) {
      snprintf(field, sizeof field, "%s.reshape", path);
      return ts_fail(e, file, field, "only applies with \"group\": \"auto\"");
    }
    if (codec_axis(o, file, path, e)) return -1;
    int fp8;
    if (tsj_enum(o, "fp8", fp8_names, &fp8, file, path, e)) return -1;
    c->fp8 = (plan_fp8)fp8;
  } else {
    static const char *const taco_keys[] = {"group", "fp8", "axis", "reshape"};
    for (int i = 0; i < 4; i++)
      if (json_object_get(o, taco_keys[i])) {
        snprintf(field, sizeof field, "%s.%s", path, taco_keys[i]);
        return ts_fail(e, file, field, "only applies to the \"taco\" and \"taco+caat\" kinds");
      }
  }
  if (plan_codec_has_caat(c->kind)) {
    if (tsj_real(o, "p", 0.0, 1.0, &c->p, file, path, e)) return -1;
  } else if (json_object_get(o, "p")) {
    snprintf(field, sizeof field, "%s.p", path);
    return ts_fail(e, file, field, "only applies to the \"caat\" and \"taco+caat\" kinds");
  }
  return plan_codec_check(c, 0, file, path, e);
}

int plan_codec_check(const plan_codec *c, int hidden, const char *file, const char *path, ts_err *e) {
  char field[96];
  if (c->kind < PLAN_CODEC_NONE || c->kind > PLAN_CODEC_TACO_CAAT) {
    snprintf(field, sizeof field, "%s.kind", path);
    return ts_fail(e, file, field, "unknown kind");
  }
  if (plan_codec_has_taco(c->kind) && c->group != 32 && c->group != 64 && c->group != 128 && c->group != 256 &&
      c->group != 512) {
    snprintf(field, sizeof field, "%s.group", path);
    return ts_fail(e, file, field, "%d is not a TACO group size (32, 64, 128, 256 or 512)", c->group);
  }
  if (!plan_codec_has_caat(c->kind)) return 0;
  snprintf(field, sizeof field, "%s.p", path);
  if (!(c->p > 0.0 && c->p <= 1.0)) return ts_fail(e, file, field, "%g must be in (0, 1]", c->p);
  if (hidden > 0 && floor(c->p * hidden) < 1.0)
    return ts_fail(e, file, field, "%g x hidden %d synchronizes no channel", c->p, hidden);
  return 0;
}
