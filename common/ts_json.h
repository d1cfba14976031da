/* ts_json.h — strict typed getters over jansson, shared by every JSON loader.
 *
 * Each getter checks presence, type and range and, on failure, fills the
 * ts_err with "FILE: FIELD: reason" (FIELD is the dotted path the caller
 * passes, e.g. "layout.tp"). Integers must be JSON integers; reals accept
 * integers too; NaN and infinities cannot occur in JSON. */
#ifndef TS_JSON_H
#define TS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a file read by ts_read_file (ts_file.h: a directory, an empty file and
 * a file over TS_MAX_INPUT_BYTES are refused by name); a syntax error names
 * the line and column. Caller json_decref()s. */
json_t *tsj_load_file(const char *path, ts_err *e);
/* Parses a string (for tests and fuzzers); `what` stands in for the file name. */
json_t *tsj_load_string(const char *text, size_t len, const char *what, ts_err *e);

/* Required object member / optional member (NULL when absent or JSON null). */
json_t *tsj_object(json_t *parent, const char *key, const char *file, const char *path, ts_err *e);
json_t *tsj_object_opt(json_t *parent, const char *key, const char *file, const char *path, ts_err *e,
                       bool *failed);

int tsj_int(json_t *obj, const char *key, long long lo, long long hi, long long *out, const char *file,
            const char *path, ts_err *e);
int tsj_int_opt(json_t *obj, const char *key, long long lo, long long hi, long long dflt, long long *out,
                const char *file, const char *path, ts_err *e);
int tsj_real(json_t *obj, const char *key, double lo, double hi, double *out, const char *file,
             const char *path, ts_err *e);
int tsj_real_opt(json_t *obj, const char *key, double lo, double hi, double dflt, double *out,
                 const char *file, const char *path, ts_err *e);
int tsj_bool(json_t *obj, const char *key, bool *out, const char *file, const char *path, ts_err *e);
int tsj_bool_opt(json_t *obj, const char *key, bool dflt, bool *out, const char *file, const char *path,
                 ts_err *e);
/* Copies a string of length 1..cap-1 into out. */
int tsj_string(json_t *obj, const char *key, char *out, size_t cap, const char *file, const char *path,
               ts_err *e);
int tsj_string_opt(json_t *obj, const char *key, const char *dflt, char *out, size_t cap, const char *file,
                   const char *path, ts_err *e);
/* Maps a string member onto one of `names` (NULL-terminated); stores its index. */
int tsj_enum(json_t *obj, const char *key, const char *const *names, int *out, const char *file,
             const char *path, ts_err *e);
int tsj_enum_opt(json_t *obj, const char *key, const char *const *names, int dflt, int *out,
                 const char *file, const char *path, ts_err *e);
/* Writes v as the data files are written: an object or array whose members
 * are all scalars on one line (a table point: {"bytes":4096,"us":9.1}), the
 * rest one member per line, indented by one space per level; `flags` are
 * jansson's (JSON_PRESERVE_ORDER, JSON_REAL_PRECISION(n)). Ends with a
 * newline. Returns 0, or -1 when writing failed. */
int tsj_dump_data(const json_t *v, FILE *out, size_t flags);
/* Refuses a member of obj that `allowed` (NULL-terminated) does not list: field "path.key" (or "key" when path
 * is NULL or empty), "unknown field". */
int tsj_only_keys(json_t *obj, const char *const *allowed, const char *file, const char *path, ts_err *e);
/* A number for a data file: an integral value as an integer (sizes stay readable), else a real. */
json_t *tsj_number(double v);

/* Checks "schema": 1 (or another supported version). */
int tsj_schema(json_t *root, int supported, const char *file, ts_err *e);

#ifdef __cplusplus
}
#endif

#endif
