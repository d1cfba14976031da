/* sim_inflight.h — the steady state of a serving engine with in-flight (continuous) batching: output tokens/s,
 * TTFT and TPOT of an inference plan with an "inflight" object (plan_infer.h; sim/INFERENCE.md, "In-flight
 * batching"), from the simulator's own step prices (sim_infer_step_s). No constant is fitted. */
#ifndef SIM_INFLIGHT_H
#define SIM_INFLIGHT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim_infer.h"

#define SIM_INFLIGHT_MAX_NOTES 6

typedef struct {
  /* the steady state (requests always waiting): each request holds a slot for `generate` steps, its prompt's step
   * (which samples its first token) and generate - 1 decode steps */
  double in_flight;     /* sequences in flight: the batch, or fewer where the token budget binds */
  double admitted;      /* requests admitted a step (= finished a step) */
  double decode_seqs;   /* sequences decoding a step: admitted x (generate - 1) */
  double step_tokens;   /* tokens a step: decode_seqs + admitted x prompt */
  double kv_len;        /* the decoding sequences' mean cached keys: prompt + generate / 2 */
  bool token_bound;     /* the step's token budget (max_num_tokens), not the batch, limits admissions */
  sim_infer_step_shape shape;
  sim_infer_step_price step; /* the priced step (shape rounded to whole tokens and sequences) */
  double step_s;
  double ttft_s;        /* the admitting step (queueing before admission left out) */
  double tpot_s;        /* one step */
  double tokens_per_s;  /* output tokens/s of the TP group: admitted x generate / step_s */
  double tokens_per_s_per_gpu;
  double requests_per_s;
  plan_infer_memory memory; /* at the batch, KV cache at prompt + generate a sequence */
  char calibration[512];
  char options[512];
  bool derived_calibration;
  int n_notes;
  char notes[SIM_INFLIGHT_MAX_NOTES][256];
} sim_inflight_result;

/* p->inflight.on; cal: the calibration (its inference view is taken here); warn as sim_infer_predict. */
int sim_inflight_predict(const plan_infer *p, const schema_calibration *cal, FILE *warn, sim_inflight_result *r,
                         ts_err *e);
void sim_inflight_print(const plan_infer *p, const sim_inflight_result *r, FILE *out);
/* The result schema's inference fields (ttft_s, tpot_s, tokens_per_s) with "mode": "inflight" and the engine's
 * settings and the step in an "inflight" object. */
int sim_inflight_save_json(const plan_infer *p, const sim_inflight_result *r, const char *path, ts_err *e);
int sim_inflight_save_csv(const plan_infer *p, const sim_inflight_result *r, const char *path, ts_err *e);

#endif
