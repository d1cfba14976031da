/* result.h — one schema for a predicted (tacosim simulate) and a measured
 * (tacorun execute) iteration, so `tacosim compare` and every plot read both
 * the same way. Plain C + jansson.
 *
 * JSON: { "schema": 1, "source": "simulated"|"measured", "plan": "...",
 *   "calibration": "...", "mode": "full"|"reduced"|"",   (mode: simulated only)
 *   "attention_backend": "fused"|"flash"|"executor"|"unfused",   (optional: the plan's)
 *   "cross_entropy_loss_fusion": true|false,   (optional: the plan's)
 *   "host_framework": "megatron-core",         (optional: the plan's, when not the executor)
 *   "fp8": "tensorwise",                       (optional: the plan's layout.fp8, when set)
 *   "hidden_dropout": p,                       (optional: the plan's; measured: what ran, 0)
 *   "alloc_reserve": f,                        (optional: the plan's caching-allocator reserve, a fraction
 *                                               of the activations in memory_per_gpu_bytes; simulated only)
 *   "iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "memory_per_gpu_bytes",
 *   "breakdown": { compute_s, tp_exposed_s, pp_exposed_s, dp_exposed_s, codec_s, bubble_s },
 *   "ranks": [ {rank, busy_s, compute_s, comm_s,
 *               clock_duty, clock_gemm_speed, clock_mem_speed, clock_cycle_us (optional: the clock model)} ],
 *   "clock_passes": n                        (optional: simulations the clock model ran)
 *   "ops": [ {name, rank, stream, start_s, dur_s} ]                  (optional)
 *   "notes": [ "..." ]                                               (optional)
 *   "kind": "inference", "ttft_s", "tpot_s"                          (inference only)
 *   measured only: "iterations", "warmup", "min_s", "median_s", "max_s",
 *   "machine": { gpu, driver, cuda, nccl, transport } }
 * CSV (gnuplot): '#'-commented header, one row of the headline figures, two
 * blank lines, then one row per rank (gnuplot `index 1`). */
#ifndef SCHEMA_RESULT_H
#define SCHEMA_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ts_error.h"

#define SCHEMA_RESULT_VERSION 1

typedef struct {
  double compute_s;    /* time the compute stream was busy (incl. codec kernels it ran) */
  double tp_exposed_s; /* time the compute stream waited on TP communication */
  double pp_exposed_s; /* ... on pipeline sends/receives (excluding the bubble) */
  double dp_exposed_s; /* ... on data-parallel gradient/parameter communication */
  double codec_s;      /* TACO/CAAT codec kernel time inside compressed collectives */
  double bubble_s;     /* pipeline fill and drain idle time */
  /* Added (MoE; written only when non-zero, optional when read): */
  double ep_exposed_s; /* ... waited on the expert token all-to-alls (and expert-TP gathers / scatters) */
  double imbalance_s;  /* ... waited for the busiest EP rank's expert GEMMs (routing imbalance) */
  /* Added (context parallelism; written only when non-zero, optional when read): */
  double cp_exposed_s; /* ... waited on the CP ring's KV / dKV exchanges */
  /* Added (the simulator's host clock; written only when non-zero, optional when read): */
  double host_wait_s;  /* ... waited for its host to issue the next kernels (after a sync, launch-bound ops) */
} schema_breakdown;

typedef struct {
  int rank;
  double busy_s, compute_s, comm_s;
  /* the simulator's clock model (sim/README.md), 0 when it was off: the
   * compute stream's duty over the calibration's window and the speeds its
   * GEMM/attention and memory-bound kernels ran at (x the back-to-back time) */
  double clock_duty, clock_gemm_speed, clock_mem_speed;
  double clock_cycle_us; /* its busy/idle alternation: iteration / idle gaps (which period's speeds it took) */
  /* the power-cap clock model only (0 otherwise; written only when non-zero, optional when read): the GPU's
   * mean SM clock (MHz, compute-time weighted over its ops' windows) in this timeline, and the speeds that
   * clock gives (what a next simulation runs at) */
  double clock_mhz, clock_next_gemm_speed, clock_next_mem_speed;
} schema_rank_stat;

typedef struct {
  char name[96];
  int rank;
  char stream[8]; /* a plan stream's name: compute, tp, pp, dp, cp */
  double start_s, dur_s;
  /* what the op was (simulated records; written as the trace's args, not into
   * the result file): its kind (compute, collective, send, recv), the
   * collective, the codec on its message ("" when none), FLOPs and
   * device-memory bytes of a compute op or payload bytes before / after the
   * codec of a communication op, summed over the merged ops; merged: how many
   * ops after the named one this record covers (the name's "+N") */
  char kind[12], coll[16], codec[16];
  double flops, bytes, wire_bytes;
  int merged;
  /* what the merged ops were: the names of the `merged` ops after the named one, each short of the
   * dotted prefix it shares with the named op, comma-separated ("qkv, attn, attn_out"); where they do not
   * all fit, the first and the last of them ("layer0.mb0.fwd.ln1 ... layer3.mb0.fwd.fc2", every op
   * between in program order); "" when nothing was merged */
  char merged_names[96];
  /* what priced it: (compute ops) the calibration tables read, or the roofline where there was none, and
   * the floors applied ("gemm; kernels.rmsnorm_fwd"), over the merged ops; (communication) the measured
   * collective table ("collectives.allreduce.2 (nvlink)"), the NCCL model, or the SimGrid flows it ran on the
   * platform's links, and its codec's kernel tables (sim_costs.h's sim_comm_source) */
  char source[160];
  /* (trace flow arrows) the message or collective call this op took part in:
   * a send and its receive share it, and so do the members' records of one
   * collective call; 0: none (compute). Written only where set. */
  long long flow;
} schema_op_record;

typedef struct {
  char gpu[64], driver[32], cuda[16], nccl[16], transport[32];
} schema_machine;

typedef enum { SCHEMA_SOURCE_SIMULATED, SCHEMA_SOURCE_MEASURED } schema_source;

typedef struct {
  schema_source source;
  char plan[512];
  char calibration[512];
  char mode[16];
  /* the producing command's effective options, defaults included, as it would be given them
   * (e.g. "--mode reduced --overlap sm-wait ..."); "" in older files */
  char options[512];
  char attention_backend[16]; /* the plan's attention implementation ("" in older files) */
  int cross_entropy_loss_fusion; /* the plan's: 1 true, -1 false, 0 not recorded (older files, measured results) */
  char host_framework[24];        /* the plan's host_framework when not the executor ("" otherwise) */
  char fp8[16];                   /* the plan's layout.fp8 recipe when set ("" for BF16) */
  /* the plan's hidden dropout probability (tacorun execute: 0, it runs none); < 0 not recorded (older
   * files, inference results). schema_result_init sets -1. */
  double hidden_dropout;
  /* the plan's alloc_reserve (plan_alloc_reserve: in memory_per_gpu_bytes); < 0 not recorded (older files,
   * measured and inference results). schema_result_init sets -1. */
  double alloc_reserve;
  /* "" for a training iteration; "inference" for serving one batch (tacosim
   * simulate / tacorun execute on an inference plan): then ttft_s and tpot_s
   * hold the time to first token and per output token, iteration_time_s the
   * whole batch (TTFT + (generate - 1) x TPOT). */
  char kind[16];
  double ttft_s, tpot_s;
  double iteration_time_s, tokens_per_s, tflops_per_gpu, mfu;
  double memory_per_gpu_bytes;
  schema_breakdown breakdown;
  int clock_passes; /* simulations the clock model ran (0: no clock model) */
  int n_ranks;
  schema_rank_stat *ranks;
  int n_ops;
  schema_op_record *ops;
  int n_notes;
  char (*notes)[256];
  /* measured only */
  int iterations, warmup;
  double min_s, median_s, max_s;
  schema_machine machine;
} schema_result;

void schema_result_init(schema_result *r, schema_source source);
void schema_result_free(schema_result *r);
int schema_result_add_rank(schema_result *r, const schema_rank_stat *s);
int schema_result_add_op(schema_result *r, const schema_op_record *op);
int schema_result_add_note(schema_result *r, const char *note);

int schema_result_write_json(const schema_result *r, FILE *out, ts_err *e);
int schema_result_write_csv(const schema_result *r, FILE *out, ts_err *e);
/* Writes to a path (JSON or CSV by the function chosen). */
int schema_result_save_json(const schema_result *r, const char *path, ts_err *e);
int schema_result_save_csv(const schema_result *r, const char *path, ts_err *e);

/* Strict reader (for `tacosim compare` and the figures). */
int schema_result_load(const char *path, schema_result *r, ts_err *e);
int schema_result_from_json_text(const char *text, size_t len, const char *what, schema_result *r, ts_err *e);

#endif
