/* plan_reshape.h — a TACO codec's "group": "auto": the setting the data-driven
 * reshaping chose, read from the file `tacorun train --reshape DUMPDIR` writes
 * (CSV: tensor,samples,rows,cols,group,axis,rel_err,cost_us,chosen,runnable,
 * chosen_runnable; one row per tensor class and candidate).
 *
 * The codec takes the `chosen_runnable` row of every tensor class (the
 * cheapest setting within the error bound among those the executor runs:
 * groups along hidden that divide it). A codec has one group for every TP
 * all-reduce, so the classes must agree; when they do not, the file is
 * rejected naming two that differ (set the group by hand). */
#ifndef PLAN_RESHAPE_H
#define PLAN_RESHAPE_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PLAN_AXIS_HIDDEN, PLAN_AXIS_TOKENS } plan_axis;

typedef struct {
  int group;      /* 32 .. 512 */
  plan_axis axis; /* always hidden for a runnable choice */
  int classes;    /* tensor classes that chose it */
  int cols;       /* the hidden size the samples had */
} plan_reshape_choice;

/* Reads the reshaping file at path; 0, or -1 with "PATH: line N: reason" / "PATH: reason" (bad input). */
int plan_reshape_read(const char *path, plan_reshape_choice *c, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif
