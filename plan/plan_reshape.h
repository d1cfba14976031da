/* plan_reshape.h — a TACO codec's "group": "auto": the setting the data-driven
 * reshaping chose, read from the file `tacorun train --reshape DUMPDIR` writes
 * (CSV: tensor,samples,rows,cols,group,axis,rel_err,cost_us,chosen,runnable,
 * chosen_runnable; one row per tensor class and candidate).
 *
 * The codec takes the `chosen_runnable` row of each tensor class it carries
 * (the cheapest setting within the error bound among those the executor runs:
 * groups along hidden that divide it): the forward TP all-reduces carry the
 * row-parallel outputs (attn_out, fc2_out), the backward ones the input
 * gradients of the column-parallel GEMMs (qkv_dgrad, fc1_dgrad); any other
 * codec, and `tacorun train --group auto` (one group for every all-reduce),
 * takes every class. A codec has one group for all its all-reduces, so its
 * classes must agree; when they do not, the file is rejected naming two that
 * differ (set the group by hand). */
#ifndef PLAN_RESHAPE_H
#define PLAN_RESHAPE_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest hidden size a reshaping file may name (a choice's cols is an int). */
#define PLAN_RESHAPE_MAX_COLS (1 << 24)

typedef enum { PLAN_AXIS_HIDDEN, PLAN_AXIS_TOKENS } plan_axis;

typedef struct {
  int group;      /* 32 .. 512 */
  plan_axis axis; /* always hidden for a runnable choice */
  int classes;    /* tensor classes that chose it */
  int cols;       /* the hidden size the samples had */
} plan_reshape_choice;

/* The tensor classes of the forward and of the backward TP all-reduces (NULL-terminated). */
extern const char *const plan_reshape_fwd_classes[];
extern const char *const plan_reshape_bwd_classes[];

/* Reads the reshaping file at path, the rows of the classes listed (NULL: every class);
 * 0, or -1 with "PATH: line N: reason" / "PATH: reason" (bad input). */
int plan_reshape_read_classes(const char *path, const char *const *classes, plan_reshape_choice *c, ts_err *e);

/* The same on the file's text (len bytes, NUL-terminated or not), path naming it in errors. */
int plan_reshape_from_text(const char *text, unsigned long len, const char *path, const char *const *classes,
                           plan_reshape_choice *c, ts_err *e);

/* plan_reshape_read_classes over every class. */
int plan_reshape_read(const char *path, plan_reshape_choice *c, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif
