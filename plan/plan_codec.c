/* plan_codec.c — bytes on the wire under the TACO codec. */
#include <math.h>

#include "plan.h"

/* Each group of G elements travels as G fp8 bytes plus two fp32 scales
 * (common/ts_coll.h). */
static double taco_wire_elements(double elements, int group) { return ts_taco_wire_elements(elements, group); }

double plan_taco_wire_bytes(double bf16_bytes, int group) { return taco_wire_elements(bf16_bytes / 2.0, group); }

double plan_codec_wire_bytes(const plan_codec *c, double bytes, int elem_bytes) {
  if (!c || (c->kind != PLAN_CODEC_TACO && c->kind != PLAN_CODEC_TACO_CAAT) || elem_bytes < 1) return bytes;
  return taco_wire_elements(bytes / elem_bytes, c->group);
}
