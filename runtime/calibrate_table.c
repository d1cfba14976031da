/* calibrate_table.c — adding measured points to a calibration being built. */
#include <string.h>

#include "calibrate.h"

int calib_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x, int group, double us) {
  for (int t = 0; t < c->n_kernels; t++) {
    schema_kernel_table *tab = &c->kernels[t];
    if (strcmp(tab->name, name)) continue;
    for (int i = 0; i < tab->n; i++)
      if (tab->pts[i].x == x && tab->pts[i].group == group) { /* two shapes moving the same bytes */
        tab->pts[i].us = 0.5 * (tab->pts[i].us + us);
        return 0;
      }
  }
  return schema_calibration_add_kernel(c, name, by_flops, x, group, us);
}
