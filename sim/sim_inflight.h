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
   * (which samples its first token) and generate - 1 decode steps; shares of a step are means over steps */
  double in_flight;     /* sequences in flight: the batch, or fewer where the token budget binds */
  double admitted;      /* requests admitted a step (= finished a step) */
  double decode_seqs;   /* sequences decoding a step: admitted x (generate - 1) */
  double step_tokens;   /* tokens a step: decode_seqs + admitted x prompt */
  double kv_len;        /* the decoding sequences' mean cached keys: prompt + generate / 2 */
  bool token_bound;     /* the step's token budget (max_num_tokens), not the batch, limits admissions */
  /* Prompts are admitted whole: a fraction 1 - phi of the steps admits k = floor(admitted) prompts, the rest k + 1
   * (phi = admitted - k); each kind is priced as it runs (its own tokens through the layers). */
  int k;
  double phi;
  sim_infer_step_shape shape[2]; /* k and k + 1 prompts */
  sim_infer_step_price price[2];
  sim_infer_step_price step; /* the mean step: (1 - phi) price[0] + phi price[1] */
  double step_s;
  double ttft_s;        /* the admitting step, one with k + 1 prompts where phi > 0 (queueing left out) */
  double tpot_s;        /* the mean step */
  double tokens_per_s;  /* output tokens/s of the TP group: admitted x generate / step_s */
  double tokens_per_s_per_gpu;
  double requests_per_s;
  /* inflight.requests > 0: the finite benchmark run, step by step (all requests queued at the start, as
   * trtllm-bench's throughput run sends them): each step the sequences decoding (their exact mean cached length),
   * then as many queued prompts, whole, as free slots and the token budget admit, first come first served */
  bool run;
  int run_steps;
  double run_s;            /* the last request's last token */
  double run_tokens_per_s; /* requests x generate / run_s */
  double run_ttft_mean_s;  /* from the start (queueing included), the mean over requests */
  double run_tpot_mean_s;  /* (last token - first token) / (generate - 1), the mean over requests */
  double run_in_flight_mean; /* sequences a step, the mean over steps */
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
