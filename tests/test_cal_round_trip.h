/* test_cal_round_trip.h — a calibration written by schema_calibration_write
 * and read back by the loader, as `name`: the round trip each section's test
 * makes. 0, or the writer's or the loader's error in e. */
#ifndef TEST_CAL_ROUND_TRIP_H
#define TEST_CAL_ROUND_TRIP_H

#include <stdio.h>
#include <stdlib.h>

#include "calibration.h"

static inline int test_cal_round_trip(const schema_calibration *c, const char *name, schema_calibration *out,
                                      ts_err *e) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return -1;
  int rc = schema_calibration_write(c, f, e);
  fclose(f);
  if (!rc) rc = schema_calibration_from_json_text(buf, len, name, out, e);
  free(buf);
  return rc;
}

#endif
