/* sim_infer.h — predict serving one batch of an inference plan: time to first
 * token (prefill), time per output token (decode) and tokens/s.
 *
 * An analytic walk, not SimGrid actors: one TP group runs each forward pass as
 * a chain of ops with blocking all-reduces, so its time is the sum of the ops'
 * times. Every op's time comes from the same cost functions as the training
 * simulator (sim_costs.h: GEMMs by shape, kernels by bytes or FLOPs, calibrated
 * collectives and codec kernels), on the same calibration files. */
#ifndef SIM_INFER_H
#define SIM_INFER_H

#include <stdbool.h>
#include <stdio.h>

#include "calibration.h"
#include "plan_infer.h"
#include "sim.h"
#include "ts_error.h"

/* Where one forward pass (prefill) or one output token (decode, mean over the
 * generated tokens) spends its time on the critical path. */
typedef struct {
  double compute_s; /* GEMMs, attention, norms, element-wise, embedding, head */
  double tp_s;      /* TP all-reduces and the logits all-gather, codec included (blocking: all exposed) */
  double codec_s;   /* of tp_s: codec kernel time (TACO encode/decode, CAAT-Net pack/unpack) */
  double pp_s;      /* activation sends between pipeline stages */
  double total_s;
  double gemm_s, attention_s; /* of compute_s: the layers' GEMMs (and the logits GEMM), attention; printed only */
  double experts_s;           /* of gemm_s: the routed experts' GEMMs (MoE; the plan's moe_kernel); printed only */
} sim_infer_phase;

/* What the codec policy decided for one all-reduce size. */
typedef struct {
  char what[24];          /* "prefill layer", "decode layer" */
  double bytes;           /* bf16 payload, plain NCCL */
  double wire_bytes;      /* with the plan's codec */
  double plain_s;         /* the all-reduce with plain NCCL */
  double fallback_s;      /* what the policy sends instead of the plan's codec: plain NCCL, or for a
                             CAAT-Net plan the partial all-reduce in BF16 (CAAT-Net is the model) */
  bool fallback_is_caat;  /* the fallback is the BF16 partial all-reduce */
  double codec_s;         /* the same with the plan's codec (total, codec kernels included) */
  bool compressed;        /* the policy sent it with the plan's codec */
} sim_infer_choice;

#define SIM_INFER_MAX_NOTES 8

/* One phase's price op by op (tacosim ops on an inference plan): each op of
 * the forward summed over the layers, by the names of the executor's per-op
 * profile (tacorun execute --ops-csv). */
#define SIM_INFER_MAX_OPS 40
typedef struct {
  char name[40];
  int count; /* launches of it in the phase (layers x calls) */
  double s;
} sim_infer_op_cost;
typedef struct {
  int n;
  sim_infer_op_cost op[SIM_INFER_MAX_OPS];
} sim_infer_op_costs;

/* How the decode steps run (tacosim simulate --decode): eager, kernel by
 * kernel from the host (the executor's default), or graph, each step one
 * CUDA graph launch (`tacorun execute --decode-graph`, TP 1 only). */
typedef struct {
  bool decode_graph;
  bool prefill_clock_off; /* --prefill-clock off: the prefill at the tables' sustained speed even when the
                             calibration has a burst profile (clock.burst) */
  sim_clock_model clock_model; /* --clock-model (sim.h; AUTO, the default: power with a "power" section); off
                                  also turns the burst profile off */
  bool prefill_power_off; /* --prefill-power off: no op_power prefill clock even when the calibration has the
                             section (sim/INFERENCE.md, "The prefill at one clock from its ops' power") */
} sim_infer_opts;

typedef struct {
  double ttft_s;       /* prefill of the batch: the first token of every sequence */
  double tpot_s;       /* mean time of one decode step (generate - 1 steps; 0 when generate is 1) */
  double total_s;      /* ttft + (generate - 1) x tpot */
  double tokens_per_s; /* batch x generate / total */
  sim_infer_phase prefill, decode;
  plan_infer_memory memory;
  int n_choices;
  sim_infer_choice choices[2]; /* prefill, decode */
  /* The same plan with plain NCCL (codec none), for the codec's speedups. */
  double plain_ttft_s, plain_tpot_s, plain_tokens_per_s;
  char calibration[512];
  char options[512]; /* the command's effective options (set by the caller; written by the savers) */
  bool derived_calibration;
  bool intra_calibrated; /* the calibration measured the cluster's intra-node fabric */
  bool decode_graph;     /* the decode step was priced as one CUDA graph (sim_infer_opts) */
  double graph_gap_us;   /* then: the calibration's host.graph_gap_us taken off each table-timed launch */
  int graph_launches;    /* those launches a step */
  bool prefill_clock;    /* the TTFT is the executor's, under the calibration's burst profile (sim/INFERENCE.md) */
  double prefill_sustained_s; /* then (or with prefill_power): the TTFT at the tables' sustained speed */
  bool prefill_power;    /* the prefill ran under the power-cap clock model (a "power" section; sim/INFERENCE.md) */
  bool prefill_op_power; /* or at one clock from its ops' classes' power (an "op_power" section) */
  double prefill_mhz, prefill_gemm_speed, prefill_mem_speed, prefill_x_gemm; /* then: its sustained mix */
  double prefill_attn_speed; /* under op_power: the prefill attention's speed against its table (0: none) */
  int n_notes;
  char notes[SIM_INFER_MAX_NOTES][256];
  /* a "decode_attention": "per-query-head" plan of a GQA model: what priced its decode attention, the measured
   * table ("attention_decode_pqh.g8", sim_infer_pqh_table) or "bound" (G x the bytes at the MHA shape); else "" */
  char decode_attn_source[64];
  /* [0] one prefill at the tables' sustained speed (prefill_sustained_s when prefill_clock), [1] one decode step
   * with its attention the mean over the steps: what ttft_s and tpot_s sum (plan_infer.h's phases, one pipeline
   * stage after the other); not filled under layout.attention_dp */
  sim_infer_op_costs ops[2];
} sim_infer_result;

/* The measured table of decode attention read once per query head for plan p (a "decode_attention":
 * "per-query-head" plan of a GQA model, head dim 128), "attention_decode_pqh.g<G>" or, over an FP8 KV cache,
 * "attention_decode_pqh_fp8.g<G>" (G = heads / kv_heads; `tacorun calibrate-infer --per-query-head`), named in
 * name (cap bytes; "" where p is not such a plan): true where cal has it. */
bool sim_infer_pqh_table(const schema_calibration *cal, const plan_infer *p, char *name, size_t cap);

/* The calibration an inference prediction reads: cal's tables with each
 * "<name>.infer" kernel or collective table (timed the way the inference
 * executor runs, by `tacorun calibrate-infer`) in place of "<name>"; the
 * points are cal's (free the view before cal). */
int sim_infer_calibration_view(const schema_calibration *cal, schema_calibration *view, ts_err *e);
void sim_infer_calibration_view_free(schema_calibration *view);

/* The view of one phase: each kernel table "<name>" of view joined with its
 * "<name><suffix>" twin (suffix ".eager": the small kernels of a decode step
 * timed queued in a stream, ".graph": inside a CUDA graph; calibrate-infer
 * --small-only): the twin's points, then the table's points above the twin's
 * largest (per group); lone_twins: a twin without a "<name>" table becomes
 * "<name>" (the decode step: "rope_fwd", whose sizes the twin covers; the
 * prefill keeps the generic table there, its sizes far above the twin's).
 * A twin keyed by row width (group: calibrate_small.h) of a table in widths
 * gives the points of its width nearest to the plan's (widths: the plan's
 * hidden, ffn / tp, (heads + kv heads) / tp x head_dim), as group 0.
 * Tables of the other suffix are left out. Shares the GEMMs, collectives and
 * the rest with view; its kernel tables are its own (free it before view). */
typedef struct {
  const char *table; /* "rmsnorm_fwd", ... */
  int width;         /* the plan's row width of that kernel */
} sim_infer_width;
int sim_infer_phase_view(const schema_calibration *view, const char *suffix, bool lone_twins,
                         const sim_infer_width *widths, int n_widths, schema_calibration *out, ts_err *e);
void sim_infer_phase_view_free(schema_calibration *out);

/* A plan under layout.attention_dp as one of its GPUs runs everything but the routed experts: tp 1 (attention, dense
 * and shared FFNs, embedding and head whole), one sequence, no expert parallelism (plan_infer.h). */
void sim_infer_rank_plan(const plan_infer *p, plan_infer *r);

/* Predicts p on calibration cal (through its inference view); o NULL: eager decode; warnings
 * (roofline fallbacks, naming the op) go to warn (NULL: silent). A graph decode needs tp 1 and the
 * calibration's host.graph_gap_us (exit 2 naming them otherwise). */
int sim_infer_predict(const plan_infer *p, const schema_calibration *cal, const sim_infer_opts *o, FILE *warn,
                      sim_infer_result *r, ts_err *e);

/* r's op lists (r->ops) in the layout of tacosim ops and tacorun execute --ops-csv: "# op count total_ms mean_us
 * pct" with each op named "prefill.<op>" or "decode.<op>", pct of its phase, slowest first. */
void sim_infer_print_ops(const plan_infer *p, const sim_infer_result *r, FILE *out);

/* ---- one engine step of an in-flight batch (sim_inflight.c's step price) ---- */
/* The calibration views a step of one plan is priced on: cal's inference view and the eager decode step's phase view
 * of it (the same tables sim_infer_predict's eager decode reads), and the costs of the shapes already priced (by a
 * step's tokens, and by its prompts), which a finite run's steps share. */
struct sim_infer_step_cache;
typedef struct {
  schema_calibration view, step;
  struct sim_infer_step_cache *cache;
} sim_infer_views;
int sim_infer_views_new(const plan_infer *p, const schema_calibration *cal, sim_infer_views *v, ts_err *e);
void sim_infer_views_free(sim_infer_views *v);

/* What one step carries: `tokens` new tokens through the layers (one a decoding sequence, the whole prompt of each
 * admitted request), decode attention of dec_seqs sequences over kv_len cached keys, prefill attention of ctx_seqs
 * prompts of ctx_len tokens (times ctx_scale: a fractional admission rate priced from a whole batch), and the
 * logits of out_seqs sequences (each decoding sequence and each admitted prompt's last token). */
typedef struct {
  int tokens;
  int dec_seqs;
  long long kv_len;
  int ctx_seqs, ctx_len;
  double ctx_scale;
  int out_seqs;
  /* Under layout.attention_dp the shape is one GPU's, the slowest's (the group waits for it at every MoE layer's
   * exchange): its tokens, decoding sequences, prompts and sampled sequences; group_tokens, the whole group's tokens,
   * which the routed experts and the exchange carry (0: tokens x tp, every GPU alike). Ignored without. */
  long long group_tokens;
} sim_infer_step_shape;

typedef struct {
  double layers_s;       /* the layers' ops other than attention at `tokens` rows (GEMMs, norms, element-wise) */
  double gemm_s;         /* of layers_s: the GEMMs */
  double decode_attn_s;  /* every layer's decode attention */
  double prefill_attn_s; /* every layer's prefill attention */
  double tp_s;           /* the layers' TP all-reduces of tokens x hidden, the embedding's and the logits' all-gather */
  double ends_s;         /* embedding, final norm, logits GEMM, sampling */
  double total_s;
  /* attention_dp only (0 without): */
  double experts_s;  /* of gemm_s: the routed experts' GEMMs at a GPU's share of the group's tokens */
  double exchange_s; /* the all-gather of the tokens before the experts and the reduce-scatter after (in tp_s too) */
} sim_infer_step_price;

/* Prices one step of p (the plan v was made for; tp x 1, plain all-reduces, eager: as sim_infer_predict's decode step, whose price it is when
 * ctx_seqs is 0 and tokens = out_seqs = dec_seqs) with the simulator's cost functions; warn as sim_infer_predict. */
int sim_infer_step_s(const plan_infer *p, const sim_infer_views *v, const sim_infer_step_shape *sh, FILE *warn,
                     sim_infer_step_price *out, ts_err *e);

/* ---- report (sim_infer_report.c) ---- */
void sim_infer_print(const plan_infer *p, const sim_infer_result *r, FILE *out);
/* JSON in the result schema's spirit: "schema": 1, "source": "simulated",
 * "kind": "inference", ttft_s, tpot_s, tokens_per_s, memory, per-phase breakdown. */
int sim_infer_save_json(const plan_infer *p, const sim_infer_result *r, const char *path, ts_err *e);
/* '#'-commented header and one row (gnuplot). */
int sim_infer_save_csv(const plan_infer *p, const sim_infer_result *r, const char *path, ts_err *e);

#endif
