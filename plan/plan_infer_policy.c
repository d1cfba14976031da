/* plan_infer_policy.c — the per-size codec rule (see plan_infer_policy.h). */
#include "plan_infer_policy.h"

plan_codec plan_infer_fallback_codec(const plan_codec *c) {
  plan_codec f = *c;
  f.kind = plan_codec_has_caat(c->kind) ? PLAN_CODEC_CAAT : PLAN_CODEC_NONE;
  return f;
}

bool plan_infer_has_fallback(const plan_codec *c) { return c->kind == PLAN_CODEC_TACO || c->kind == PLAN_CODEC_TACO_CAAT; }

bool plan_infer_use_codec(const plan_codec *c, bool codec_auto, double codec_s, double fallback_s) {
  if (c->kind == PLAN_CODEC_NONE) return false;
  if (!plan_infer_has_fallback(c)) return true; /* CAAT-Net is the model */
  return !(codec_auto && codec_s > fallback_s);
}
