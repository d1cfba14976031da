/* plan_infer_policy.h — the per-size codec rule of an inference plan's TP
 * all-reduces, one copy for both halves: the simulator (sim/sim_infer.c)
 * applies it to calibrated times, the executor (runtime/infer_*.c) to times it
 * measures on its own communicator before the timed run.
 *
 * The fallback of a TACO plan is plain NCCL. CAAT-Net changes the model (its
 * private channels are never summed across the TP group), so a TACO + CAAT-Net
 * plan can only drop TACO: its fallback is the partial all-reduce of the shared
 * channels in BF16; a CAAT-Net plan has no fallback at all. */
#ifndef PLAN_INFER_POLICY_H
#define PLAN_INFER_POLICY_H

#include <stdbool.h>

#include "plan.h"

/* The codec a message travels with when the plan's codec is dropped. */
plan_codec plan_infer_fallback_codec(const plan_codec *c);
/* Whether the plan's codec has a fallback (none and CAAT-Net have none). */
bool plan_infer_has_fallback(const plan_codec *c);
/* The rule: true = send with the plan's codec, false = with the fallback.
 * codec_s and fallback_s are the all-reduce's times either way. */
bool plan_infer_use_codec(const plan_codec *c, bool codec_auto, double codec_s, double fallback_s);

#endif
