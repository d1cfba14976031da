/* plan_internal.h — shared between the files of plan/, not a public API. */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan.h"

/* Default gradient bucket: Megatron-LM's max(40M, 1M * dp) parameters, in
 * fp32 gradients (4 bytes each). */
double plan_default_dp_bucket_bytes(int dp);
/* Default threshold under which messages travel uncompressed: 8 MiB, the
 * threshold the TACO authors measured on their machines. */
#define PLAN_DEFAULT_CODEC_MIN_BYTES (8.0 * 1024 * 1024)

/* Finish times of every (micro, virtual stage) forward and backward step in
 * the ideal pipeline (forward 1, backward 2, zero-cost communication),
 * indexed [micro * V + v] with V = pp * vpp. Used to order PP messages. */
typedef struct {
  int V, m;
  int64_t *fwd_finish, *bwd_finish;
} plan_ideal;
int plan_ideal_build(const plan *p, plan_ideal *t, ts_err *e);
void plan_ideal_free(plan_ideal *t);
int64_t plan_ideal_step_cost(int backward);

/* The sharded layer this plan runs (tp, sequence parallel, micro, seq). */
model_shard plan_shard(const plan *p);
/* Norm parameters of one layer (replicated across TP). */
double plan_norm_params_per_layer(const plan *p);

/* ---- plan files (plan_json.c), shared by the training and inference loaders ---- */
#include <jansson.h>
/* Rejects members of obj not in `allowed` (NULL-terminated): typos do not pass silently. */
int plan_json_check_keys(json_t *obj, const char *const *allowed, const char *file, const char *path, ts_err *e);
/* "dir/gpt3-175b.json" -> "gpt3-175b" (the default plan name); "plan" when empty. */
void plan_json_base_name(const char *path, char *out, size_t cap);
/* One codec object {kind, group, fp8, p} at `path` (e.g. "codec.tp_fwd"); absent (o NULL): none.
 * Checks the TACO group size, the FP8 format, p in (0, 1], and fields that do not apply. */
int plan_json_codec(json_t *o, const char *file, const char *path, plan_codec *c, ts_err *e);
/* A codec's own rules at `path`: known kind, TACO group size, CAAT-Net p in (0, 1]
 * and, when hidden > 0, at least one synchronized channel. */
int plan_codec_check(const plan_codec *c, int hidden, const char *file, const char *path, ts_err *e);
/* Whether a plan file's root says "kind": "inference". */
bool plan_json_is_inference(json_t *root);

#endif
