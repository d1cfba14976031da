#include "ts_json.h"

#include "ts_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "layout" + "tp" -> "layout.tp" for error messages. */
static const char *field_name(char *buf, size_t cap, const char *path, const char *key) {
  if (path && *path)
    snprintf(buf, cap, "%s.%s", path, key);
  else
    snprintf(buf, cap, "%s", key);
  return buf;
}

json_t *tsj_load_file(const char *path, ts_err *e) {
  size_t len;
  char *text = ts_read_file(path, 0, &len, e);
  if (!text) return NULL;
  if (len == 0) {
    free(text);
    ts_fail(e, path, NULL, "is empty (a JSON object is expected)");
    return NULL;
  }
  json_t *root = tsj_load_string(text, len, path, e);
  free(text);
  return root;
}

json_t *tsj_load_string(const char *text, size_t len, const char *what, ts_err *e) {
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    ts_fail(e, what, NULL, "invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
    return NULL;
  }
  if (!json_is_object(root)) {
    json_decref(root);
    ts_fail(e, what, NULL, "top level must be a JSON object");
    return NULL;
  }
  return root;
}

static json_t *member(json_t *obj, const char *key) {
  json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
  return (v && json_is_null(v)) ? NULL : v;
}

json_t *tsj_object(json_t *parent, const char *key, const char *file, const char *path, ts_err *e) {
  char f[256];
  json_t *v = member(parent, key);
  if (!v) {
    ts_fail(e, file, field_name(f, sizeof f, path, key), "missing (an object is required)");
    return NULL;
  }
  if (!json_is_object(v)) {
    ts_fail(e, file, field_name(f, sizeof f, path, key), "must be an object");
    return NULL;
  }
  return v;
}

json_t *tsj_object_opt(json_t *parent, const char *key, const char *file, const char *path, ts_err *e,
                       bool *failed) {
  char f[256];
  json_t *v = member(parent, key);
  *failed = false;
  if (v && !json_is_object(v)) {
    ts_fail(e, file, field_name(f, sizeof f, path, key), "must be an object");
    *failed = true;
    return NULL;
  }
  return v;
}

static int int_value(json_t *v, const char *key, long long lo, long long hi, long long *out, const char *file,
                     const char *path, ts_err *e) {
  char f[256];
  if (!json_is_integer(v))
    return ts_fail(e, file, field_name(f, sizeof f, path, key), "must be an integer");
  long long x = json_integer_value(v);
  if (x < lo || x > hi)
    return ts_fail(e, file, field_name(f, sizeof f, path, key), "%lld is out of range [%lld, %lld]", x, lo, hi);
  *out = x;
  return 0;
}

int tsj_int(json_t *obj, const char *key, long long lo, long long hi, long long *out, const char *file,
            const char *path, ts_err *e) {
  char f[256];
  json_t *v = member(obj, key);
  if (!v) return ts_fail(e, file, field_name(f, sizeof f, path, key), "missing (an integer is required)");
  return int_value(v, key, lo, hi, out, file, path, e);
}

int tsj_int_opt(json_t *obj, const char *key, long long lo, long long hi, long long dflt, long long *out,
                const char *file, const char *path, ts_err *e) {
  json_t *v = member(obj, key);
  if (!v) {
    *out = dflt;
    return 0;
  }
  return int_value(v, key, lo, hi, out, file, path, e);
}

static int real_value(json_t *v, const char *key, double lo, double hi, double *out, const char *file,
                      const char *path, ts_err *e) {
  char f[256];
  if (!json_is_number(v)) return ts_fail(e, file, field_name(f, sizeof f, path, key), "must be a number");
  double x = json_number_value(v);
  if (!isfinite(x) || x < lo || x > hi)
    return ts_fail(e, file, field_name(f, sizeof f, path, key), "%g is out of range [%g, %g]", x, lo, hi);
  *out = x;
  return 0;
}

int tsj_real(json_t *obj, const char *key, double lo, double hi, double *out, const char *file,
             const char *path, ts_err *e) {
  char f[256];
  json_t *v = member(obj, key);
  if (!v) return ts_fail(e, file, field_name(f, sizeof f, path, key), "missing (a number is required)");
  return real_value(v, key, lo, hi, out, file, path, e);
}

int tsj_real_opt(json_t *obj, const char *key, double lo, double hi, double dflt, double *out,
                 const char *file, const char *path, ts_err *e) {
  json_t *v = member(obj, key);
  if (!v) {
    *out = dflt;
    return 0;
  }
  return real_value(v, key, lo, hi, out, file, path, e);
}

int tsj_bool(json_t *obj, const char *key, bool *out, const char *file, const char *path, ts_err *e) {
  char f[256];
  json_t *v = member(obj, key);
  if (!v) return ts_fail(e, file, field_name(f, sizeof f, path, key), "missing (true or false is required)");
  if (!json_is_boolean(v)) return ts_fail(e, file, field_name(f, sizeof f, path, key), "must be true or false");
  *out = json_is_true(v);
  return 0;
}

int tsj_bool_opt(json_t *obj, const char *key, bool dflt, bool *out, const char *file, const char *path,
                 ts_err *e) {
  if (!member(obj, key)) {
    *out = dflt;
    return 0;
  }
  return tsj_bool(obj, key, out, file, path, e);
}

int tsj_string(json_t *obj, const char *key, char *out, size_t cap, const char *file, const char *path,
               ts_err *e) {
  char f[256];
  json_t *v = member(obj, key);
  if (!v) return ts_fail(e, file, field_name(f, sizeof f, path, key), "missing (a string is required)");
  if (!json_is_string(v)) return ts_fail(e, file, field_name(f, sizeof f, path, key), "must be a string");
  size_t n = json_string_length(v);
  if (n == 0) return ts_fail(e, file, field_name(f, sizeof f, path, key), "must not be empty");
  if (n >= cap)
    return ts_fail(e, file, field_name(f, sizeof f, path, key), "is %zu characters long (at most %zu)", n,
                   cap - 1);
  if (strlen(json_string_value(v)) != n)
    return ts_fail(e, file, field_name(f, sizeof f, path, key), "must not contain NUL characters");
  memcpy(out, json_string_value(v), n + 1);
  return 0;
}

int tsj_string_opt(json_t *obj, const char *key, const char *dflt, char *out, size_t cap, const char *file,
                   const char *path, ts_err *e) {
  if (!member(obj, key)) {
    snprintf(out, cap, "%s", dflt ? dflt : "");
    return 0;
  }
  return tsj_string(obj, key, out, cap, file, path, e);
}

int tsj_enum(json_t *obj, const char *key, const char *const *names, int *out, const char *file,
             const char *path, ts_err *e) {
  char buf[128], f[256], allowed[512];
  if (tsj_string(obj, key, buf, sizeof buf, file, path, e)) return -1;
  size_t used = 0;
  allowed[0] = '\0';
  for (int i = 0; names[i]; i++) {
    if (strcmp(buf, names[i]) == 0) {
      *out = i;
      return 0;
    }
    used += (size_t)snprintf(allowed + used, used < sizeof allowed ? sizeof allowed - used : 0, "%s\"%s\"",
                             i ? ", " : "", names[i]);
    if (used >= sizeof allowed) used = sizeof allowed - 1;
  }
  return ts_fail(e, file, field_name(f, sizeof f, path, key), "\"%s\" is not one of %s", buf, allowed);
}

int tsj_enum_opt(json_t *obj, const char *key, const char *const *names, int dflt, int *out,
                 const char *file, const char *path, ts_err *e) {
  if (!member(obj, key)) {
    *out = dflt;
    return 0;
  }
  return tsj_enum(obj, key, names, out, file, path, e);
}

int tsj_only_keys(json_t *obj, const char *const *allowed, const char *file, const char *path, ts_err *e) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
    if (!ok) {
      char f[256];
      snprintf(f, sizeof f, "%s%s%s", path && *path ? path : "", path && *path ? "." : "", key);
      return ts_fail(e, file, f, "unknown field");
    }
  }
  return 0;
}

json_t *tsj_number(double v) {
  if (v == (double)(long long)v && v < 9e15) return json_integer((json_int_t)v);
  return json_real(v);
}

int tsj_schema(json_t *root, int supported, const char *file, ts_err *e) {
  long long v;
  if (tsj_int(root, "schema", 1, 1000000, &v, file, NULL, e)) return -1;
  if (v != supported)
    return ts_fail(e, file, "schema", "version %lld is not supported (this build reads version %d)", v,
                   supported);
  return 0;
}

/* ---- writing data files ---- */

static int is_flat(const json_t *v) {
  if (json_is_object(v)) {
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m) if (json_is_object(m) || json_is_array(m)) return 0;
    return 1;
  }
  if (json_is_array(v)) {
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m) if (json_is_object(m) || json_is_array(m)) return 0;
    return 1;
  }
  return 1;
}

static int dump_data(const json_t *v, FILE *out, size_t flags, int depth) {
  if (is_flat(v)) {
    /* a scalar, or a point: one line (JSON_ENCODE_ANY: scalars too) */
    return json_dumpf(v, out, (flags & ~(size_t)JSON_INDENT(0x1F)) | JSON_COMPACT | JSON_ENCODE_ANY);
  }
  int obj = json_is_object(v);
  fputs(obj ? "{\n" : "[\n", out);
  size_t n = obj ? json_object_size(v) : json_array_size(v), i = 0;
  int rc = 0;
  if (obj) {
    /* jansson's iteration order is the insertion order with JSON_PRESERVE_ORDER's objects */
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m) {
      json_t *key = json_string(k);
      fprintf(out, "%*s", depth + 1, "");
      rc |= json_dumpf(key, out, JSON_ENCODE_ANY);
      json_decref(key);
      fputs(": ", out);
      rc |= dump_data(m, out, flags, depth + 1);
      fputs(++i < n ? ",\n" : "\n", out);
    }
  } else {
    json_t *m;
    size_t j;
    json_array_foreach(v, j, m) {
      fprintf(out, "%*s", depth + 1, "");
      rc |= dump_data(m, out, flags, depth + 1);
      fputs(++i < n ? ",\n" : "\n", out);
    }
  }
  fprintf(out, "%*s%s", depth, "", obj ? "}" : "]");
  return rc ? -1 : 0;
}

int tsj_dump_data(const json_t *v, FILE *out, size_t flags) {
  int rc = dump_data(v, out, flags, 0);
  fputc('\n', out);
  return rc || ferror(out) ? -1 : 0;
}
