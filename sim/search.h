/* search.h — capacity planning: which layout and codec trains a model fastest
 * on a cluster (`tacosim search`).
 *
 * Four passes, each cheaper than the next:
 *   1. enumerate every valid layout (TP, PP, virtual stages, DP, micro-batch,
 *      sequence parallel, ZeRO-1, recomputation) for the GPUs given;
 *   2. drop the layouts whose memory per GPU exceeds the HBM;
 *   3. rank every layout x codec policy by a closed-form estimate of the
 *      iteration time (calibrated op costs, alpha-beta collectives, bubble);
 *   4. simulate the best few layouts under every codec policy on SimGrid, in
 *      forked worker processes (SimGrid initialises once per process), and
 *      report them with each codec's speedup over the same layout uncompressed;
 *      a candidate whose lower bound (search_bound.c) cannot reach the printed
 *      rows is not simulated (search_rounds.c; --exhaustive simulates all), and
 *      under mpirun the simulations are spread over the processes (search_mpi.c).
 * The enumeration, the filter and the estimate are plain functions so the
 * tests can check them against hand-worked cases. */
#ifndef SIM_SEARCH_H
#define SIM_SEARCH_H

#include <stdbool.h>
#include <stdio.h>

#include "calibration.h"
#include "plan.h"
#include "result.h"
#include "sim.h"
#include "ts_error.h"

/* `tacosim search ...` (argv[0] = "search"); returns the exit status. */
int sim_search_main(int argc, char **argv);

/* ---- codec policies searched ---- */
typedef enum {
  SIM_SEARCH_CODEC_NONE,
  SIM_SEARCH_CODEC_TACO,      /* TACO FP8 (G = 128, E4M3) on TP forward and backward traffic */
  SIM_SEARCH_CODEC_CAAT,      /* CAAT-Net p = 0.5 */
  SIM_SEARCH_CODEC_TACO_CAAT, /* both */
  SIM_SEARCH_CODEC_COUNT
} sim_search_codec;

const char *sim_search_codec_name(sim_search_codec c); /* "none", "taco", "caat", "taco+caat" */
/* Parses "none,taco,caat,taco+caat" into a mask of (1 << sim_search_codec). */
int sim_search_parse_codecs(const char *list, unsigned *mask, ts_err *e);
/* The plan's per-traffic codec settings for a policy. */
void sim_search_apply_codec(plan *p, sim_search_codec c);

/* ---- layouts ---- */
typedef struct {
  int tp, pp, vpp, dp, micro;
  bool sequence_parallel, zero1;
  model_recompute recompute;
  int ep; /* (MoE) expert parallelism carved from DP (expert_tp = tp); 0 or 1: none */
  /* Added (issue 22; 0 / false: today's layouts): context parallelism (0 or 1: none), the data-parallel
   * sharding stage (0..3, Megatron's data_parallel_sharding_strategy; zero1 == zero_stage >= 1), the
   * distributed optimizer's overlap_param_gather, tp_comm_overlap (under SP). */
  int cp, zero_stage;
  bool overlap_param_gather, tp_comm_overlap;
  /* The embedding and the loss each in a layer's place in the pipeline split (Megatron's
   * account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split): tried where pp
   * does not divide the layers but divides layers + 2 (Llama-3 405B's 126 layers at pp 8 or 16). */
  bool account;
  /* The candidate's FP8 recipe, layout.fp8 (plan_fp8_recipe; PLAN_FP8_OFF: BF16): the enumeration lists
   * every layout in BF16, the memory filter and the estimate try it under each recipe of --fp8. */
  int fp8;
} sim_search_layout;
#define SIM_SEARCH_FP8_RECIPES (PLAN_FP8_MXFP8 + 1) /* plan_fp8_recipe's values */

typedef struct {
  const model_config *model;
  const topo_cluster *cluster;
  int gpus;                 /* dp * tp * pp * cp == gpus */
  int seq;
  long long global_batch;
  int max_micro;            /* largest micro-batch tried */
} sim_search_space;

bool sim_search_same_layout(const sim_search_layout *a, const sim_search_layout *b);
/* Context-parallel sizes a search tries: the divisors of gpus / (tp pp) up to this, with seq divisible by 2 cp. */
#define SIM_SEARCH_CP_MAX 16
/* The name suffix of the fields of issue 22 a layout sets ("-cp4-zero2-opg-tpo", "-emb-loss" for an accounted split,
 * "-fp8-tensorwise" for an FP8 recipe; "" for the plain BF16 layouts). */
void sim_search_layout_suffix(const sim_search_layout *l, char *buf, size_t cap);

/* Calls fn for every structurally valid layout of the space (TP divides the
 * heads, KV heads, FFN and the GPUs of a node; PP x VPP divides the layers,
 * or, where PP does not divide them, the layers + 2 with the embedding and
 * the loss accounted as layers;
 * DP = gpus / (TP x PP); the micro-batch divides global / DP; SP only with
 * TP > 1 and TP | seq; ZeRO-1 only with DP > 1; interleaving only with
 * PP > 1 and micro-batches a multiple of PP). Memory is not checked here.
 * Returns the number of layouts (fn may be NULL to count them). */
long sim_search_enumerate(const sim_search_space *s, void (*fn)(const sim_search_layout *, void *), void *arg);

/* Fills *p (model, cluster, layout, batch, schedule, defaults) for a layout,
 * codec none; `base` (from sim_search_base_plan) supplies model and cluster,
 * and the defaults the plan loader would set (codec threshold, DP bucket) come
 * from the loader itself. Does not validate: call sim_search_fits_memory and
 * plan_validate. */
int sim_search_make_plan(const plan *base, const sim_search_layout *l, int seq, long long global_batch, plan *p,
                         ts_err *e);
/* A plan with model and cluster loaded (no layout yet) to pass as `base`. */
int sim_search_base_plan(const char *model, const char *cluster, plan *base, ts_err *e);

/* Whether the layout's memory per GPU fits the cluster's HBM; *bytes gets it. */
bool sim_search_fits_memory(const plan *p, double *bytes);
/* The same with `reserve` bytes of the HBM kept free (--headroom). */
bool sim_search_fits_memory_reserve(const plan *p, double reserve, double *bytes);
/* --headroom's value: "G" GiB (G >= 1) or a fraction f (0 <= f < 1) of the HBM;
 * *gib or *fraction gets it, the other 0. */
int sim_search_parse_headroom(const char *s, double *gib, double *fraction, ts_err *e);

/* ---- the closed-form estimate ---- */
typedef struct {
  double iteration_s, tokens_per_s, tflops_per_gpu, mfu;
  double compute_s, tp_exposed_s, pp_exposed_s, dp_exposed_s, bubble_s, codec_s, optimizer_s;
  double cp_exposed_s; /* (added) the KV ring's steps the attention waits for */
  double clock_duty, clock_gemm_speed; /* the clock model's duty and GEMM speed (1: no clock section) */
} sim_search_estimate;

/* The estimate's clock model: the duty of a GPU as sim_clock.c measures it (the busy fraction in
 * windows around its compute, weighted by compute time) from an iteration's mean times: `busy` (compute
 * and the collectives that draw power), `steady_idle` (waits spread over the iteration: exposed pipeline
 * transfers, ZeRO-3's per-layer gathers) and `bubble` (the pipeline's fill and drain). In the fill and
 * drain each stage alternates a wait and a chunk, so the compute there is taken as much as the bubble
 * (at most all of it) and sees the GPU busy bubble / (2 bubble) of the time; the rest sees the steady
 * busy fraction. 1 when nothing waits. */
double sim_search_clock_duty(double busy, double steady_idle, double bubble);

/* Per-iteration time of a plan from its model ops: compute from the
 * calibration (roofline where it has no table), TP collectives from the
 * calibration inside a node (alpha-beta from the cluster otherwise), PP and
 * DP traffic alpha-beta over the NICs, the 1F1B / interleaved bubble. */
/* The latency (us) of one step of a cross-node ring over n members stride
 * GPUs apart from GPU 0, as the simulator charges it: the worst route among
 * the ring's edges (topo_route.c). */
double sim_search_ring_latency_us(const topo_cluster *cl, int stride, int n);
/* Members of a cross-node group on each node (k >= 2 when every node holds k of them, else 1): the
 * simulator's k rings carry its inter-node traffic through k NIC shares (sim_edges.c). */
int sim_search_ring_members_per_node(int gpus_per_node, int stride, int n);
/* tp_comm_overlap in the estimate: how long after its GEMM alone a ring-exchange gather of t - 1 steps
 * (t GEMM pieces) or a k-piece pipelined reduce-scatter ends; compressed pieces wait for the running
 * GEMM piece's SMs (sim_comm.c). Seconds in, seconds out. */
double sim_search_tpo_ring_exposed(int t, double gemm, double step, bool compressed);
double sim_search_tpo_pipeline_exposed(int k, double gemm, double piece, bool compressed);

/* Time added to n pipeline transfers (t_bw seconds of bandwidth each) that share their NIC with DP
 * collectives (search_estimate.c): a share busy of them meets one, running dp_s seconds from the
 * transfer's start (0: longer than it); beside it a transfer gets half the NIC. */
double sim_search_pp_dp_shared_s(int n, double t_bw, double busy, double dp_s);
/* ZeRO-3's wait per micro-batch on a stage (search_estimate.c): the waits at the starts of its 2 vpp
 * chunk steps (step_waits: sim_search_zero3_step_wait_s of each; the programs prefetch within a step),
 * or the DP stream's work (dp_work) beyond the compute when that is more. Seconds in, seconds out. */
double sim_search_zero3_wait_s(double step_waits, double dp_work, double compute);
/* ZeRO-3's wait at the start of one chunk step: the first unit's gather g_first in full, then the
 * second unit's g_second (queued behind it on the DP stream) beyond the first unit's compute c_first. */
double sim_search_zero3_step_wait_s(double g_first, double g_second, double c_first);
/* ZeRO-3: the time the steps that follow a backward step wait behind its last reduce-scatter (rs_last)
 * on the DP stream, over a stage's backward_steps backward steps (the last one has the tail instead). */
double sim_search_zero3_after_backward_s(int backward_steps, double rs_last);
/* ZeRO-3's reduce-scatters left after the iteration's last backward (stage 0's): the second-to-last
 * unit's (rs_prev, from the end of its backward) and the last unit's (rs_last, queued behind it) beyond
 * the last unit's backward (c_last). */
double sim_search_zero3_tail_s(double rs_prev, double rs_last, double c_last);
/* ZeRO-2's reduce-scatters left on the DP stream after the compute ends (search_estimate.c): `run`
 * backward steps of b seconds at the end (with `idle` seconds of pipeline drain among them) and `pairs`
 * forward (f) + backward pairs before them, each backward closing k buckets of DP work r in all. */
double sim_search_zero2_tail_s(int run, int pairs, double f, double b, double r, double k, double idle);
/* overlap_param_gather's wait at the start (search_estimate.c): n bucket gathers g (forward order), h[j]
 * the compute between bucket j's first use and bucket j + 1's; the first gather waited for in full. */
double sim_search_param_gather_wait_s(const double *g, const double *h, int n);
/* ZeRO-1's and plain DP's buckets left after the compute (search_estimate.c): n chunks, chunk c's work
 * r[c] in k[c] buckets closing during its last backward step of b seconds, chunk 0's last, each next
 * one `gap` earlier, `idle` seconds of drain among them. */
double sim_search_last_backward_tail_s(const double *r, const int *k, int n, double b, double gap, double idle);

int sim_search_estimate_plan(const plan *p, const schema_calibration *cal, sim_search_estimate *est, ts_err *e);
/* The estimate's time (s) of one layer's attention op of p's shard (bwd: its backward): what the tests hold
 * against the simulator's price of the same op. */
int sim_search_estimate_attention_s(const plan *p, const schema_calibration *cal, bool bwd, double *s, ts_err *e);
/* The estimate's expert all-to-alls of one MoE layer-micro-batch: the forward's dispatch + combine (returned)
 * and the backward's (*bwd), each an all-to-all of the rank's token copies over the EP group by the
 * alpha-beta model of its links; 0 without experts or EP (search_estimate.c). */
double sim_search_moe_alltoall_s(const plan *p, double *bwd);

/* ---- running a search ---- */
typedef struct {
  const char *model, *cluster, *calibration;
  int gpus;             /* 0: the whole cluster */
  int seq;              /* 0: min(2048, model max) */
  long long global_batch; /* 0: 2 x gpus sequences (every dp divides it) */
  unsigned codecs;      /* mask of sim_search_codec */
  int top;              /* rows printed */
  int simulate;         /* layouts simulated of each FP8 recipe (each under every codec) */
  int jobs;             /* worker processes */
  int max_micro;
  int sample;           /* also simulate this many candidates spread over the whole estimate
                           ranking, to measure the estimate's rank correlation on this case */
  bool progress;        /* progress bar on stderr */
  bool memory_only;     /* stop after the memory filter: no calibration, estimate or simulation
                           (which layouts fit; r->fits counts them) */
  bool estimate_only;   /* stop after the estimate: nothing simulated (`--simulate 0`) */
  double headroom_gib;   /* HBM kept free beyond the memory model (--headroom G) */
  double headroom_fraction; /* or this fraction of the HBM (--headroom 0.1) */
  const char *emit_plans; /* directory: each listed layout as a plan file (NULL: none written) */
  plan_host_framework host_framework; /* --host-framework: what issues the layers' kernels in the simulations
                                       * and the emitted plans (default: the executor) */
  unsigned fp8_recipes;   /* --fp8 LIST: mask of (1 << plan_fp8_recipe), every layout tried under each (0 or
                           * 1 << PLAN_FP8_OFF, the default: BF16 alone) */
  bool fp8_search;        /* --fp8 search: every recipe, those the cluster's GPU cannot run skipped (an explicit
                           * list refuses them) */
  bool fp8_param_gather;  /* --fp8-param-gather: layout.fp8_param_gather in every FP8 candidate with the
                           * distributed optimizer (ZeRO-1 and up; the others gather no parameters) */
  bool alloc_reserve_set;  /* --alloc-reserve F: every candidate's (and emitted plan's) alloc_reserve; */
  double alloc_reserve;    /* unset: PLAN_DEFAULT_ALLOC_RESERVE */
  bool hidden_dropout_set; /* --hidden-dropout P: every candidate's (and emitted plan's) hidden_dropout; */
  double hidden_dropout;   /* unset: the plan loader's default, Megatron-LM's 0.1 */
  bool exhaustive;        /* simulate every chosen candidate (no bound pruning; --exhaustive) */
  bool alltoall_analytic; /* --alltoall analytic: the simulations price cross-node all-to-alls without flows
                           * (sim_options.alltoall_analytic; approximate; default false: flows) */
  sim_clock_model clock_model; /* --clock-model (sim.h): the simulations' and the estimate's clock model (AUTO, the
                                * default: power with a "power" section in the calibration, else duty) */
  bool bounds_all;        /* (tests) compute every candidate's bound, even where none is needed */
  int keep_estimates;     /* (tests) the head of the estimate ranking kept in best_est (0: 48) */
} sim_search_options;

/* What the options set on every candidate's plan (host_framework, hidden_dropout, fp8_param_gather), on
 * the base plan of sim_search_base_plan, for the simulations and the emitted plans alike (each candidate's
 * recipe comes from its layout's fp8); an FP8 recipe of an explicit --fp8 list that the cluster's GPU
 * cannot run (no FP8 tensor cores, or "mxfp8" without the MXFP8 capability) is refused as the plan loader
 * refuses it (plan_fp8_check_gpu), naming --fp8. */
int sim_search_apply_options(const sim_search_options *o, plan *base, ts_err *e);
/* --fp8's value: "search" (every recipe, *search set) or a comma list of none, tensorwise, delayed,
 * mxfp8 (no repeats) into a mask of (1 << plan_fp8_recipe). */
int sim_search_parse_fp8(const char *list, unsigned *mask, bool *search, ts_err *e);
/* The recipes a search tries on GPU g: *run those of o's list g runs, *skipped those of `search` it cannot
 * (0 for a list: a recipe g cannot run is an error naming --fp8 and the GPU). */
int sim_search_fp8_recipes(const sim_search_options *o, const topo_gpu *g, unsigned *run, unsigned *skipped,
                           ts_err *e);

/* One simulated or estimated candidate. */
typedef struct {
  sim_search_layout layout;
  sim_search_codec codec;
  double memory_bytes;
  sim_search_estimate est;
  bool simulated, sim_failed;
  bool sample;    /* simulated only to check the estimate (--sample), not a top pick */
  double sim_iteration_s, sim_tokens_per_s, sim_tflops_per_gpu, sim_mfu;
  schema_breakdown sim_breakdown;
  double speedup; /* over the same layout with codec none (simulated; 0 when unknown) */
  char error[200];
  /* the bound of search_bound.c: the simulation cannot give more tokens/s than this (0: not computed) */
  double bound_tokens_per_s;
  bool pruned; /* not simulated: its bound is below the top rows' simulated figures */
  double sim_cpu_s; /* the CPU seconds (user + sys) its simulation's worker took (0: not simulated here) */
  int sim_clock_passes; /* simulations the clock model ran for it (sim_clock.c) */
} sim_search_candidate;

typedef struct {
  long enumerated, over_memory, invalid, estimated;
  long fits;                   /* layouts that fit the HBM and validate (before codec policies) */
  long dominated;              /* (added) ZeRO-2/3 layouts not tried: the stage below fits (same compute, less traffic) */
  double least_over_bytes;     /* the least memory per GPU of the layouts over the HBM (0: none was), and that layout */
  sim_search_layout least_over;
  int layouts_simulated, candidates, simulations, failures, samples; /* candidates: of the chosen layouts (and samples) */
  int pruned;                  /* candidates of the chosen layouts not simulated: their bound cannot reach the top rows */
  int processes;               /* MPI processes that shared the simulations (1 without mpirun) */
  double enumerate_s, estimate_s, bound_s, simulate_s, total_s;
  double sim_cpu_s;            /* the CPU seconds of every simulation's worker, summed */
  int clock_passes;            /* the clock passes of every simulation, summed */
  int n;                       /* simulated candidates, best first */
  sim_search_candidate *cands;
  int n_best_est;              /* top of the estimate ranking (all kept candidates, best first) */
  sim_search_candidate *best_est;
  char calibration[512];
  unsigned fp8_recipes, fp8_skipped; /* the recipes tried, those of --fp8 search the GPU cannot run */
  char gpu[64];                      /* the cluster's GPU (the report names it beside the skipped recipes) */
  int gemm_fp8_points;               /* the calibration's measured "gemm_fp8" shapes (the others transferred) */
  sim_clock_model clock_model;       /* --clock-model as run: power, duty or off (the default's choice named) */
  int gpus, seq;
  double hbm_gib; /* the cluster GPU's memory */
  long long global_batch;
} sim_search_result;

int sim_search_run(const sim_search_options *o, sim_search_result *r, ts_err *e);
void sim_search_result_free(sim_search_result *r);
void sim_search_print(const sim_search_result *r, const sim_search_options *o, FILE *out);
int sim_search_save_json(const sim_search_result *r, const sim_search_options *o, const char *path, ts_err *e);
int sim_search_save_csv(const sim_search_result *r, const char *path, ts_err *e);

/* --emit-plans: a plan's complete file (every field the loader reads, with
 * model and cluster as given, paths made absolute); the caller json_decref()s. */
#include <jansson.h>
json_t *sim_search_plan_json(const plan *p, const char *model, const char *cluster, const char *description);
/* Writes each listed row (as sim_search_print lists them: the simulated top
 * picks, or the estimate ranking when nothing was simulated) as
 * DIR/NN-<plan name>.json; prints each path on `out` when not NULL. */
int sim_search_emit_plans(const sim_search_result *r, const sim_search_options *o, const char *dir, FILE *out,
                          ts_err *e);

/* Simulates plans[i] for i < n in up to `jobs` forked workers; results[i] gets
 * each headline result (ranks/ops not kept); ok[i] says whether it ran, and
 * errors[i] (200 chars each) why not. progress: called after each finishes. */
/* The sim_options.alltoall_analytic of the simulations that follow in this process and its workers
 * (sim_search_run sets it from its options). */
void sim_search_set_alltoall_analytic(bool on);
/* The sim_options.clock_model of those simulations and of the estimate (sim_search_run sets it). */
void sim_search_set_clock_model(sim_clock_model m);
sim_clock_model sim_search_clock_model(void);
int sim_search_simulate_many(const plan *plans, int n, const schema_calibration *cal, int jobs,
                             schema_result *results, bool *ok, char (*errors)[200],
                             void (*progress)(int done, int total, void *arg), void *arg, ts_err *e);

/* Lower bound on the iteration time `tacosim simulate --mode reduced` gives a
 * plan (search_bound.c): the reduced mode's programs replayed without
 * contention, compute at the fastest clock the calibration allows,
 * communication at its calibrated (intra-node) or codec-only (cross-node) time. */
int sim_search_bound_plan(const plan *p, const schema_calibration *cal, double *lower_s, ts_err *e);

/* Simulates the candidates cands[i] (plans[i]) for i < n, filling each one's
 * simulated figures, failure or `pruned` (search_rounds.c). Unless
 * o->exhaustive, candidates go best estimate first (one process: as workers
 * free up; MPI: in rounds of o->jobs per process); a candidate whose bound is below the o->top-th best simulated
 * figure is not simulated (it cannot be printed), except the uncompressed run
 * of a layout with a printed row (its speedup needs it). Under mpirun the
 * rounds are spread over the processes (search_mpi.c); every process gets
 * every result. r->simulations, ->pruned, ->bound_s are set. */
int sim_search_run_candidates(const plan *plans, sim_search_candidate *cands, int n, const schema_calibration *cal,
                              const sim_search_options *o, sim_search_result *r,
                              void (*progress)(int done, int total, void *arg), void *arg, ts_err *e);

/* ---- MPI (search_mpi.c; without MPI at build or launch: one process) ---- */
/* MPI_Init when the process was started by an MPI launcher (mpirun sets its
 * rank in the environment); otherwise nothing, and one process. */
int sim_search_mpi_start(int *argc, char ***argv);
void sim_search_mpi_stop(void);
int sim_search_mpi_rank(void);
int sim_search_mpi_size(void);
int sim_search_mpi_local_size(void); /* processes of this job on this machine */
/* Every process gives `bytes` bytes; all[k * bytes ...] gets process k's. */
int sim_search_mpi_allgather(const void *mine, void *all, size_t bytes, ts_err *e);

/* The same for plans[index[i]], i < n (results[i], ok[i], errors[i] get plan
 * index[i]'s; index NULL: plans[i]). Hooks (each may be NULL): skip(i) before
 * starting i (true: not simulated, its results untouched; it may first move
 * entries i..n-1 of the caller's index array, none of them started yet),
 * finished(i) when its results are in, progress as above. */
typedef struct {
  bool (*skip)(int i, void *arg);
  void (*finished)(int i, void *arg);
  void (*progress)(int done, int total, void *arg);
  void *arg;
  double *cpu_s; /* (may be NULL) cpu_s[i]: the CPU seconds (user + sys) of i's worker */
} sim_search_hooks;
int sim_search_simulate_indexed(const plan *plans, const int *index, int n, const schema_calibration *cal, int jobs,
                                schema_result *results, bool *ok, char (*errors)[200], const sim_search_hooks *h,
                                ts_err *e);

/* One piece of work over `parts` processes (search_parts.c): fn(j, parts, mem[j], arg, e) for each part
 * j, part 0 in this process and the others in forked children, mem[j] `bytes` of zeroed memory shared
 * with this process, where part j leaves its answer. Returns 0 with every part done and mem[] mapped
 * (sim_search_parts_free unmaps it), or -1 with e set by the first part that failed (mem[] unmapped). */
#define SIM_SEARCH_PARTS_MAX 16
typedef int (*sim_search_part_fn)(int part, int parts, void *mem, void *arg, ts_err *e);
int sim_search_parts_run(int parts, size_t bytes, sim_search_part_fn fn, void *arg, void **mem, ts_err *e);
void sim_search_parts_free(int parts, size_t bytes, void **mem);

/* Spearman rank correlation of x and y (n >= 2); ties get their mean rank. */
double sim_search_spearman(const double *x, const double *y, int n);

#endif
