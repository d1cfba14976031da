/* calibrate_fit.c — latency + bandwidth fits (see calibrate_fit.h). */
#include "calibrate_fit.h"

#include <stdio.h>

int calib_fit_linear(const double *bytes, const double *us, int n, double *latency_us, double *gbps) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int used = 0;
  for (int i = 0; i < n; i++) {
    if (!(us[i] > 0) || !(bytes[i] >= 0)) continue;
    double w = 1.0 / (us[i] * us[i]);
    sw += w, sx += w * bytes[i], sy += w * us[i], sxx += w * bytes[i] * bytes[i], sxy += w * bytes[i] * us[i];
    used++;
  }
  if (used < 2) return -1;
  double det = sw * sxx - sx * sx;
  if (!(det > 0)) return -1;
  double slope = (sw * sxy - sx * sy) / det, lat = (sy - slope * sx) / sw;
  if (lat < 0) { /* through the origin */
    lat = 0;
    slope = sxy / sxx;
  }
  if (!(slope > 0)) return -1;
  *latency_us = lat;
  *gbps = 1e-3 / slope; /* bytes per microsecond -> GB/s */
  return 0;
}

int calib_add_fits(schema_calibration *c) {
  for (int t = 0; t < c->n_colls; t++) {
    const schema_coll_table *tab = &c->colls[t];
    double x[256], y[256];
    int n = 0;
    for (int i = 0; i < tab->n && n < 256; i++) x[n] = tab->pts[i].bytes, y[n] = tab->pts[i].us, n++;
    double lat, gbps;
    if (calib_fit_linear(x, y, n, &lat, &gbps)) continue; /* e.g. a flat one-rank table: no fit to give */
    char name[64];
    snprintf(name, sizeof name, "%s.%d", tab->name, tab->nranks);
    if (schema_calibration_add_fit(c, name, lat, gbps)) return -1;
  }
  return 0;
}
