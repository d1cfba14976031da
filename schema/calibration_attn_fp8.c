/* calibration_attn_fp8.c — the calibration's "attention_fp8" section: one fused causal attention kernel's
 * forward speed with FP8 (E4M3) operands against its BF16 speed, by sequence length (a published or measured
 * pair; calibration/attn-fp8/README.md). Strict loader, writer and the ratio's lookup (calibration.h). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "calibration.h"
#include "ts_json.h"

#define FP8_MAX_SEQ (1 << 24)
#define FP8_MAX_TFLOPS 1e5

static int load_points(json_t *arr, const char *file, schema_attn_fp8 *a, ts_err *e) {
  const char *sec = "attention_fp8.points";
  if (!arr) return ts_fail(e, file, sec, "missing (a list of {\"seq\", \"bf16_tflops\", \"fp8_tflops\"})");
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > SCHEMA_ATTN_FP8_POINTS)
    return ts_fail(e, file, sec, "must be a list of 1 to %d points", SCHEMA_ATTN_FP8_POINTS);
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char p[64];
    snprintf(p, sizeof p, "%s[%zu]", sec, i);
    if (!json_is_object(v)) return ts_fail(e, file, p, "must be an object");
    static const char *const keys[] = {"seq", "bf16_tflops", "fp8_tflops", NULL};
    long long seq;
    if (tsj_only_keys(v, keys, file, p, e) || tsj_int(v, "seq", 1, FP8_MAX_SEQ, &seq, file, p, e) ||
        tsj_real(v, "bf16_tflops", 1e-3, FP8_MAX_TFLOPS, &a->bf16_tflops[i], file, p, e) ||
        tsj_real(v, "fp8_tflops", 1e-3, FP8_MAX_TFLOPS, &a->fp8_tflops[i], file, p, e))
      return -1;
    if (i > 0 && seq <= a->seq[i - 1])
      return ts_fail(e, file, p, "seq %lld: points must be sorted by seq, growing (the one before is %d)", seq,
                     a->seq[i - 1]);
    a->seq[i] = (int)seq;
  }
  a->n = (int)json_array_size(arr);
  return 0;
}

int schema_attn_fp8_load(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  const char *sec = "attention_fp8";
  json_t *obj = json_object_get(root, sec);
  schema_attn_fp8 *a = &c->attn_fp8;
  memset(a, 0, sizeof *a);
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const keys[] = {"measured_on", "source", "points", NULL};
  if (tsj_only_keys(obj, keys, file, sec, e) ||
      tsj_string(obj, "measured_on", a->measured_on, sizeof a->measured_on, file, sec, e) ||
      tsj_string(obj, "source", a->source, sizeof a->source, file, sec, e) ||
      load_points(json_object_get(obj, "points"), file, a, e)) {
    memset(a, 0, sizeof *a);
    return -1;
  }
  return 0;
}

json_t *schema_attn_fp8_json(const schema_calibration *c) {
  const schema_attn_fp8 *a = &c->attn_fp8;
  if (a->n < 1) return NULL;
  json_t *pts = json_array();
  for (int i = 0; i < a->n; i++)
    json_array_append_new(pts, json_pack("{s:i,s:o,s:o}", "seq", a->seq[i], "bf16_tflops",
                                         tsj_number(a->bf16_tflops[i]), "fp8_tflops", tsj_number(a->fp8_tflops[i])));
  return json_pack("{s:s,s:s,s:o}", "measured_on", a->measured_on, "source", a->source, "points", pts);
}

double schema_attn_fp8_speedup(const schema_calibration *c, int seq) {
  const schema_attn_fp8 *a = &c->attn_fp8;
  if (a->n < 1) return 0;
  if (seq <= a->seq[0]) return a->fp8_tflops[0] / a->bf16_tflops[0];
  for (int i = 1; i < a->n; i++) {
    if (seq > a->seq[i]) continue;
    double r0 = a->fp8_tflops[i - 1] / a->bf16_tflops[i - 1], r1 = a->fp8_tflops[i] / a->bf16_tflops[i];
    double t = log((double)seq / a->seq[i - 1]) / log((double)a->seq[i] / a->seq[i - 1]);
    return r0 + (r1 - r0) * t;
  }
  return a->fp8_tflops[a->n - 1] / a->bf16_tflops[a->n - 1];
}
