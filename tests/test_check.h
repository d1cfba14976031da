/* test_check.h — the assertions and the JSON mutation that the CPU tests share:
 * NEAR (relative), NEAR_ABS (absolute), ASSERT_MSG (an error names what it should),
 * and test_json_mutate (a valid document with one member replaced or removed,
 * for the bad-input corpora). Each assertion prints both sides when it fails. */
#ifndef TEST_CHECK_H
#define TEST_CHECK_H

#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* |a - b| <= rel * |b| */
#define NEAR(a, b, rel)                                                                                        \
  do {                                                                                                         \
    double a_ = (a), b_ = (b);                                                                                 \
    if (!(fabs(a_ - b_) <= (rel) * fabs(b_))) fprintf(stderr, "\n  %s = %.9g, expected %.9g\n", #a, a_, b_);  \
    CU_ASSERT(fabs(a_ - b_) <= (rel) * fabs(b_));                                                             \
  } while (0)

/* |a - b| <= tol */
#define NEAR_ABS(a, b, tol)                                                                                    \
  do {                                                                                                         \
    double a_ = (a), b_ = (b);                                                                                 \
    if (!(fabs(a_ - b_) <= (tol))) fprintf(stderr, "\n  %s = %.12g, expected %.12g\n", #a, a_, b_);           \
    CU_ASSERT(fabs(a_ - b_) <= (tol));                                                                         \
  } while (0)

/* The error e (a ts_err) carries text in its message. */
#define ASSERT_MSG(e, text)                                                                          \
  do {                                                                                               \
    if (!strstr((e).msg, (text))) printf("\n  message \"%s\" lacks \"%s\"\n", (e).msg, (text));    \
    CU_ASSERT_PTR_NOT_NULL(strstr((e).msg, (text)));                                                 \
  } while (0)

/* A call that returned rc with its error in e (a ts_err) succeeded; its message printed when it did not. */
#define ASSERT_OK(rc, e)                                                                             \
  do {                                                                                               \
    if ((rc) != 0) fprintf(stderr, "\n  %s\n", (e).msg);                                            \
    CU_ASSERT_EQUAL_FATAL((rc), 0);                                                                  \
  } while (0)

/* The JSON text base with the member at path ("key" or "parent.key") set to
 * value (a JSON text) or removed (value NULL); the caller frees the result. */
static inline char *test_json_mutate(const char *base, const char *path, const char *value) {
  json_error_t je;
  json_t *root = json_loads(base, 0, &je);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  char parent_path[128];
  snprintf(parent_path, sizeof parent_path, "%s", path);
  char *dot = strchr(parent_path, '.');
  json_t *parent = root;
  const char *key = parent_path;
  if (dot) {
    *dot = '\0';
    parent = json_object_get(root, parent_path);
    key = dot + 1;
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
  if (value) {
    json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    json_object_set_new(parent, key, v);
  } else {
    json_object_del(parent, key);
  }
  char *text = json_dumps(root, 0);
  json_decref(root);
  return text;
}

#endif
