/* plan_reshape.c — reads the data-driven reshaping's choice for a TACO
 * codec's "group": "auto" (plan_reshape.h). */
#include "plan_reshape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_file.h"

#define RESHAPE_HEADER "tensor,samples,rows,cols,group,axis,rel_err,cost_us,chosen,runnable,chosen_runnable"

const char *const plan_reshape_fwd_classes[] = {"attn_out", "fc2_out", NULL};
const char *const plan_reshape_bwd_classes[] = {"qkv_dgrad", "fc1_dgrad", NULL};

static int listed(const char *const *classes, const char *name) {
  if (!classes) return 1;
  for (; *classes; classes++)
    if (!strcmp(*classes, name)) return 1;
  return 0;
}

/* The classes as "a, b" for a message. */
static void class_list(const char *const *classes, char *out, size_t cap) {
  out[0] = 0;
  for (size_t n = 0; classes && *classes && n < cap; classes++)
    n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", *classes);
}

/* Splits line at commas in place into at most cap fields; returns the count. */
static int split_fields(char *line, char **f, int cap) {
  int n = 0;
  for (char *s = line;; s++) {
    if (n < cap) f[n] = s;
    n++;
    s = strchr(s, ',');
    if (!s) break;
    *s = 0;
  }
  return n;
}

int plan_reshape_read(const char *path, plan_reshape_choice *c, ts_err *e) {
  return plan_reshape_read_classes(path, NULL, c, e);
}

int plan_reshape_read_classes(const char *path, const char *const *classes, plan_reshape_choice *c, ts_err *e) {
  size_t len;
  char *text = ts_read_file(path, 1u << 20, &len, e);
  if (!text) return -1;
  int rc = plan_reshape_from_text(text, len, path, classes, c, e);
  free(text);
  return rc;
}

int plan_reshape_from_text(const char *in, unsigned long len, const char *path, const char *const *classes,
                           plan_reshape_choice *c, ts_err *e) {
  char *text = malloc(len + 1);
  if (!text) return ts_fail(e, path, NULL, "out of memory");
  memcpy(text, in, len);
  text[len] = 0;
  if (strlen(text) != len) {
    free(text);
    return ts_fail(e, path, NULL, "holds a NUL byte: not the text `tacorun train --reshape` writes");
  }
  memset(c, 0, sizeof *c);
  int rc = 0, line_no = 0;
  char first_class[64] = "";
  char where[32];
  for (char *line = text, *next; line && *line && !rc; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    line[strcspn(line, "\r")] = 0;
    snprintf(where, sizeof where, "line %d", ++line_no);
    if (line_no == 1) {
      if (strcmp(line, RESHAPE_HEADER))
        rc = ts_fail(e, path, where, "not the header of `tacorun train --reshape` (" RESHAPE_HEADER ")");
      continue;
    }
    if (!*line) continue;
    char *f[12];
    if (split_fields(line, f, 12) != 11) {
      rc = ts_fail(e, path, where, "not 11 comma-separated fields as the header");
      break;
    }
    if (strcmp(f[10], "yes") || !listed(classes, f[0])) continue; /* not a runnable choice of a class asked */
    char *gend, *cend;
    long g = strtol(f[4], &gend, 10), cols = strtol(f[3], &cend, 10);
    if (*gend || (g != 32 && g != 64 && g != 128 && g != 256 && g != 512)) {
      rc = ts_fail(e, path, where, "group '%s' is not a TACO group size (32, 64, 128, 256 or 512)", f[4]);
      break;
    }
    if (*cend || cols < 1 || cols > PLAN_RESHAPE_MAX_COLS || cols % g) {
      rc = ts_fail(e, path, where, "cols '%s' is not a hidden size (1 to %d) that group %ld divides", f[3],
                   PLAN_RESHAPE_MAX_COLS, g);
      break;
    }
    if (strcmp(f[5], "hidden")) {
      rc = ts_fail(e, path, where, "axis '%s': a runnable choice groups along hidden", f[5]);
      break;
    }
    if (c->classes && (c->group != (int)g || c->cols != (int)cols)) {
      rc = ts_fail(e, path, where,
                   "%s chose group %ld on hidden %ld, %s group %d on hidden %d: a codec has one group for every "
                   "all-reduce (give the group instead of \"auto\")",
                   f[0], g, cols, first_class, c->group, c->cols);
      break;
    }
    if (!c->classes) snprintf(first_class, sizeof first_class, "%s", f[0]);
    c->group = (int)g, c->cols = (int)cols, c->axis = PLAN_AXIS_HIDDEN, c->classes++;
  }
  if (!rc && line_no == 0) rc = ts_fail(e, path, NULL, "empty (expected the output of `tacorun train --reshape`)");
  else if (!rc && !c->classes && classes) {
    char names[128];
    class_list(classes, names, sizeof names);
    rc = ts_fail(e, path, NULL, "no row chosen_runnable = yes for %s: none of these tensor classes has a choice", names);
  } else if (!rc && !c->classes)
    rc = ts_fail(e, path, NULL, "no row chosen_runnable = yes: no tensor class has a choice");
  free(text);
  return rc;
}
