/* calibration.h — measured (or derived) costs of kernels and collectives.
 *
 * The one module that reads and writes calibration files: `tacorun calibrate`
 * writes them on GPUs, the simulator reads them. Plain C + jansson.
 *
 * File layout (all times in microseconds, sizes in bytes):
 *   { "schema": 1, "gpu": "...", "driver": "...", "cuda": "...", "nccl": "...",
 *     "transport": "nvlink|shm|socket|...", "measured_at": "...", "derived": false,
 *     "notes": "...",                                   (optional)
 *     "gemm": [ {"m":..,"n":..,"k":..,"us":..} ],
 *     "gemm_infer": [ {"m":..,"n":..,"k":..,"us":..} ],   (optional: decode GEMMs, inference only)
 *     "gemm_wgrad": [ {"m":..,"n":..,"k":..,"us":..} ],   (optional: weight gradients of shapes "gemm"
 *                    holds as forward / input-gradient products)
 *     "gemm_fp8": [ {"m":..,"n":..,"k":..,"us":..} ],     (optional: FP8 GEMMs, FP8 A and B, BF16 C)
 *     "attention_shapes": [ {"head_dim":..,"seq":..,"batch":..,"heads":..,"kv_heads":..,
 *                            "causal":true,"fwd_us":..,"bwd_us":..} ],   (optional: below)
 *     "attention_backends": { "fused"|"flash": [ points as attention_shapes ] },
 *                            (optional: other implementations than the executor's, below)
 *     "attention_fp8": { "measured_on": "...", "source": "...",
 *               "points": [ {"seq":..,"bf16_tflops":..,"fp8_tflops":..} ] },   (optional: below)
 *     "kernels": { "<name>": [ {"bytes":..,"group":..,"us":..} or {"flops":..,"us":..} ] },
 *     "collectives": { "<coll>[.taco<G>]": { "<nranks>": [ {"bytes":..,"us":..} ] } },
 *     "fits": { "<coll>.<nranks>": {"latency_us":..,"gbps":..} },
 *     "clock": { "window_us":.., "points": [ {"duty":..,"period_us":..,
 *                "gemm_speed":..,"mem_speed":..} ],
 *                "burst": [ {"from_us":..,"to_us":..,"gemm_speed":..} ] (optional) },   (optional)
 *     "power": { "cap_w":.., "f_max_mhz":.., "idle_w":.., "gpu": "...", "gemm": "...", "mem": "...",
 *                "samples": [ {"name": "...", "gemm":.., "mem":.., "idle":.., "period_us":..,
 *                              "power_w":.., "sm_mhz":.., "gemm_speed":.., "mem_speed":..} ] },   (optional)
 *     "host": { "launch_us":.., "gemm_launch_us":.., "event_us":.. (optional),
 *               "graph_gap_us":.. (optional),
 *               "sync": [ {"wait_us":..,"gap_us":..} ] },                (optional)
 *     "tp_comm_overlap_sm": { "measured_on": "...", "sms":.., "source": "...",
 *               "points": [ {"held":..,"margin":..,"nomargin":..} ] },     (optional)
 *     "framework_host": { "framework": "megatron-core", "measured_on": "...", "source": "...",
 *               "layers": { "dense": {"fwd_us":..,"bwd_us":.., "parts": {"attention":..,"mlp":..}},
 *                           "moe": {"fwd_us":..,"bwd_us":.., "parts": {"attention":..,"router":..,
 *                                   "dispatch":..,"experts":..,"combine":..}} },
 *               "calls": { "<coll>": us, ... } (optional) } }              (optional)
 * <coll> is allreduce, allgather, reducescatter, alltoall or sendrecv; bytes of
 * a collective are the nccl-tests "size" (the whole buffer, bf16 payload even
 * for the compressed ".taco<G>" variants). Kernel tables are keyed by bytes
 * (memory-bound: taco_encode, taco_decode, taco_decode_sum_encode, caat_gather,
 * caat_scatter, elementwise, norm, optimizer, embedding, loss; bytes = bf16
 * input bytes for codec kernels, device-memory traffic otherwise) or by flops
 * (attention).
 * "clock" describes how the GPU's clocks follow its load: a kernel run back
 * to back sits at the power cap, one that alternates with idle time runs at
 * higher clocks. Each point is a GEMM (and a memory-bound kernel) run with
 * the compute stream busy a fraction `duty` of every `period_us`; the speeds
 * are the back-to-back time over the time measured there (> 1: faster).
 * window_us is the time scale of the power controller: the simulator takes a
 * kernel's duty over a window of that width around it. Points are written
 * sorted by period, then duty. "burst" (optional) is one burst of GEMMs from
 * a long idle, launch by launch (`tacorun bench-burst`, then
 * calibration/merge_burst.py): the mean speed of the launches that started
 * from_us .. to_us after the burst began, against the burst's sustained end
 * (the state the back-to-back tables are timed in); bins sorted, not
 * overlapping, the first from 0; after the last the speed is 1. Only the
 * inference prefill reads it (sim/INFERENCE.md, "The prefill clock").
 * "power" (optional; 2026-12-07) is the GPU's board power against its SM clock, measured through NVML: each
 * sample is a repeating pattern of `period_us` whose measured time fractions are gemm (a GEMM, the
 * section's "gemm" kernel), mem (its memory-bound "mem" kernel) and idle (sum 1 within 0.02), with its
 * mean power_w and sm_mhz, and where measured the kernels' speeds (back-to-back launch time over the
 * pattern's; 0 where absent; a fraction up to 0.02 outside [0, 1] is taken as the bound). Samples "gemm" and "mem" (each kernel back to back) are required, names
 * unique. cap_w is the power limit, f_max_mhz the highest SM clock, idle_w the idle board power. The
 * loader fits P_c(f) = s + d_c (f / f_max)^a per class and the speed laws (f / f_ref)^b
 * (calibration_power.c) and refuses a section the fit cannot determine (fewer than 4 samples that ran
 * kernels, a singular system, a negative dynamic power, no speed at another clock). With it the
 * simulator's clock model is the power-cap one (sim/README.md, "The power-cap clock").
 * "host" is the host side of the executor that ran the tables (tacorun
 * calibrate --only host, runtime/calibrate/calibrate_host.c), measured with
 * the GPU idle so that the host is the bottleneck: launch_us, host time per
 * launch of a small kernel issued back to back (the rate at which a
 * host-bound phase feeds the GPU); gemm_launch_us, the same for a small
 * cuBLASLt GEMM through the executor's GEMM path (its algorithm cached);
 * event_us (optional: files before it lack it), the same for cudaEventRecord
 * (the executor's walker records two events around every op);
 * graph_gap_us (optional), the GPU time a kernel of the tables (a GEMM, a
 * decode-attention kernel) takes more in a stream the host keeps ahead of
 * (how the tables were timed) than inside a CUDA graph, per launch
 * (`tacorun calibrate`'s host section and `tacorun bench-graph` by the same
 * code, runtime/calibrate/calibrate_graph.c: the median of its
 * queued - graph over those launches; the inference simulator's
 * `--decode graph` takes it off each such launch of a decode step);
 * sync, the GPU's idle time (gap_us) from the end of a device-to-host copy
 * that the host waits for to the start of the next kernel the host then
 * launches, against how long the host waited (wait_us: the GPU work queued
 * ahead of the copy when the host began to wait; the executor's wait polls
 * with growing naps, so the gap grows with the wait). Points sorted by wait.
 * The simulator's host clock (sim/README.md) reads them.
 * "tp_comm_overlap_sm" is what a GEMM loses beside a communication kernel that
 * holds `held` of the GPU's SMs for the GEMM's whole duration (Transformer
 * Engine's userbuffer kernels under tp_comm_overlap; calibration/tpo-sm/):
 * margin, the GEMM's time told sms - held SMs (TE's set_sm_margin true) over
 * its time alone on every SM; nomargin, the same GEMM asking for every SM
 * (set_sm_margin false). measured_on names the GPU, sms its SM count (the
 * simulator uses the table only for a GPU of that many SMs), source the raw
 * run. Points sorted by held (1 .. sms - 1, growing), ratios in 0.5 .. 10. priced (optional, default true):
 * false keeps the table as data only and the simulator prices by sms / (sms - held) (the shipped files: the
 * table is an upper bound, a communication kernel as long as the GEMM; calibration/tpo-sm/README.md).
 * "framework_host" is the host time of a training framework's own layer code (calibration_framework.c;
 * experiments/published/moe/host/): one transformer layer's forward and backward, dense or MoE, timed at
 * shapes small enough that the GPU waits for the host (the host's floor per layer and micro-batch), and
 * one call of each collective the framework issues (`calls`, keyed like the collective tables, allreduce
 * .. alltoall). parts (optional): the forward's host time by block (its module breakdown); the simulator
 * takes them as the shares of the layer's forward and backward time each block's ops get (the backward is
 * not split by the measurement). framework names the framework (plans ask for it by `host_framework`), measured_on the host
 * and software, source the raw run. A plan that names the framework has its layers' host time priced by
 * it (sim/README.md, "The host").
 * "attention_fp8" is a fused causal attention kernel's forward speed with FP8 (E4M3) Q, K, V against the same
 * kernel's BF16 speed, by sequence length (calibration_attn_fp8.c; calibration/attn-fp8/README.md): an
 * implementation's published or measured pair, measured_on naming the GPU and kernel, source where the
 * figures are. Points sorted by seq (growing), TFLOP/s in (0, 1e5]. The simulator moves the "fused" table's
 * price of a serving engine's FP8 context attention (plan prefill_attention "fused-fp8") by their ratio at the
 * prompt's length (schema_attn_fp8_speedup). */
#ifndef SCHEMA_CALIBRATION_H
#define SCHEMA_CALIBRATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ts_error.h"
#include "ts_coll.h"

#define SCHEMA_CALIBRATION_VERSION 1

typedef struct {
  long long m, n, k;
  double us;
} schema_gemm_point;

/* One attention shape as the executor runs it on one GPU (heads and kv_heads
 * per rank: kv_heads divides heads, grouped-query attention when smaller),
 * forward and backward timed between GEMMs as a training step runs it
 * (runtime/calibrate/calibrate_attn.c). */
typedef struct {
  int head_dim, seq, batch, heads, kv_heads;
  bool causal;
} schema_attn_shape;

/* Which implementation of attention a time is of: the executor's own kernel
 * ("attention_shapes") or one of Megatron-LM's --attention-backend choices
 * ("attention_backends"): fused = Transformer Engine's FusedAttention (cuDNN),
 * flash = FlashAttention-2; fused_dropout / flash_dropout the same kernels with
 * attention dropout (the mask drawn inside the kernel; calibration/attn_cudnn.py
 * --dropout). (Unfused attention is priced from GEMMs and the softmax, not
 * from a table.) */
typedef enum {
  SCHEMA_ATTN_EXECUTOR,
  SCHEMA_ATTN_FUSED,
  SCHEMA_ATTN_FLASH,
  SCHEMA_ATTN_FUSED_DROPOUT,
  SCHEMA_ATTN_FLASH_DROPOUT,
  SCHEMA_ATTN_NBACKENDS
} schema_attn_backend;
const char *schema_attn_backend_name(schema_attn_backend b);
/* 0 and *b set when name is one of executor, fused, flash, fused_dropout, flash_dropout; else -1. */
int schema_attn_backend_parse(const char *name, schema_attn_backend *b);

typedef struct {
  schema_attn_shape s;
  double fwd_us, bwd_us;
} schema_attn_point;

typedef struct {
  double x;  /* bytes or flops, see schema_kernel_table.by_flops */
  int group; /* codec group size, 0 when not applicable */
  double us;
} schema_kernel_point;

typedef struct {
  char name[48];
  bool by_flops; /* entries carry "flops" instead of "bytes" */
  int n;
  schema_kernel_point *pts; /* sorted by (group, x) */
} schema_kernel_table;

typedef struct {
  double bytes, us;
} schema_size_point;

typedef struct {
  char name[48]; /* "allreduce", "allgather.taco128", ... */
  int nranks;
  int n;
  schema_size_point *pts; /* sorted by bytes */
} schema_coll_table;

typedef struct {
  char name[48]; /* "allreduce.2" */
  double latency_us, gbps;
} schema_fit;

typedef struct {
  double duty;       /* fraction of time the compute stream runs kernels, (0, 1] */
  double period_us;  /* one busy + idle cycle */
  double gemm_speed; /* reference GEMM time back to back / its time at this duty and period (> 0) */
  double mem_speed;  /* the same for a memory-bound kernel (> 0) */
} schema_clock_point;

/* One bin of the clock section's "burst" profile. */
typedef struct {
  double from_us, to_us; /* since the burst from idle began */
  double gemm_speed;     /* sustained launch time / mean launch time of the bin (> 1: faster) */
} schema_burst_bin;

/* "framework_host": a training framework's host time per transformer layer (dense, MoE) and per
 * collective call; 0 = not measured. */
typedef enum { SCHEMA_FW_LAYER_DENSE, SCHEMA_FW_LAYER_MOE, SCHEMA_FW_NLAYERS } schema_fw_layer;
/* The blocks of a layer whose forward host time the section splits it by ("parts", by the framework's
 * modules: attention = the norms, self-attention and residual before the MLP; mlp = a dense layer's MLP;
 * router, dispatch (the token dispatcher's permutation and its host sync), experts, combine (the
 * un-permutation and what follows in the MoE block) of an MoE layer). */
typedef enum {
  SCHEMA_FW_ATTENTION, SCHEMA_FW_MLP, SCHEMA_FW_ROUTER, SCHEMA_FW_DISPATCH, SCHEMA_FW_EXPERTS, SCHEMA_FW_COMBINE,
  SCHEMA_FW_NPARTS
} schema_fw_part;
extern const char *const schema_fw_part_names[SCHEMA_FW_NPARTS];
typedef struct {
  char framework[24]; /* "megatron-core"; empty: no section */
  char measured_on[160], source[160];
  double layer_fwd_us[SCHEMA_FW_NLAYERS], layer_bwd_us[SCHEMA_FW_NLAYERS];
  double part_us[SCHEMA_FW_NLAYERS][SCHEMA_FW_NPARTS]; /* forward host time by block; all 0: not split */
  double call_us[TS_COLL_COUNT]; /* by collective (ts_coll); sendrecv not accepted */
} schema_framework_host;
#define SCHEMA_BURST_MAX 32

/* "power": the GPU's board power and SM clock under kernel mixes (see the file layout above), and the fit the
 * power-cap clock model reads (calibration_power.c); n 0 = no section. */
#define SCHEMA_POWER_SAMPLES 64
typedef struct {
  char name[32];                 /* unique; "gemm" and "mem" are the back-to-back kernels */
  double gemm, mem, idle;        /* measured time fractions of the pattern (sum 1 within 0.02) */
  double period_us;              /* one repetition of the pattern */
  double power_w, sm_mhz;        /* mean board power and SM clock over the pattern */
  double gemm_speed, mem_speed;  /* back-to-back launch time / this pattern's (0: not measured) */
} schema_power_sample;
typedef struct {
  bool fitted;
  double a, s_w, d_gemm_w, d_mem_w; /* P_c(f) = s + d_c (f / f_max)^a, c in {gemm, mem} */
  double rms_w;                     /* the power fit's rms residual over its samples */
  int used;                         /* samples in the power fit (gemm + mem > 0) */
  double bg, bm;                    /* speed = (f / f_ref)^b, GEMM and memory-bound */
  int n_gemm_speed, n_mem_speed;    /* samples each law was fitted on */
  double f_gemm_ref_mhz, f_mem_ref_mhz;     /* the measured clocks of the "gemm" and "mem" samples */
  double f_gemm_model_mhz, f_mem_model_mhz; /* the model's clocks of the two back-to-back mixes (speed 1) */
} schema_power_fit;
typedef struct {
  int n; /* samples; 0 = no section */
  double cap_w, f_max_mhz, idle_w;
  char gpu[64], gemm[160], mem[160]; /* the GPU, and what the two kernels are */
  schema_power_sample s[SCHEMA_POWER_SAMPLES];
  schema_power_fit fit; /* set by the loader (schema_power_fit_run) */
} schema_power;

/* "op_power": the board power and SM clock each class of a prefill's ops draws and runs at back to back (the
 * power phase's --power-gemm and --power-prefill-attn rows, calibration/merge_op_power.py), from which the
 * simulator finds the one clock a prefill's mix runs at under the cap (sim/INFERENCE.md, "The prefill at one
 * clock from its ops' power"); n_attn 0 = no section. */
#define SCHEMA_OP_POWER_ATTN 32
typedef struct {
  int heads, kv_heads, head_dim, batch, seq; /* a GPU's query and KV heads, the head dim, batch x sequence */
  double power_w, mhz;
} schema_op_power_attn;
typedef struct {
  char gpu[64], source[160];
  double cap_w, f_max_mhz, idle_w;
  double power_exponent;     /* a tensor-core class's power above idle: (f / f0)^g */
  double mem_power_exponent; /* the memory-bound class's, the same way */
  double speed_exponent;     /* a tensor-core op's speed against its table's: (f / f_table)^b */
  double attention_speed_exponent; /* the prefill attention's, from its mixes with the reference GEMM; < 0: not
                                      measured, the attention takes speed_exponent */
  double gemm_w, gemm_mhz;   /* the prefill-sized GEMMs back to back (the GEMM tables' state) */
  double mem_w, mem_mhz;     /* the memory-bound add back to back (the small kernels' tables' state) */
  int n_attn;
  schema_op_power_attn attn[SCHEMA_OP_POWER_ATTN]; /* the prefill attention back to back, by shape */
} schema_op_power;

/* "attention_fp8": FP8 against BF16 forward speed of one fused attention kernel, by sequence length; n 0 =
 * no section. */
#define SCHEMA_ATTN_FP8_POINTS 16
typedef struct {
  int n;
  int seq[SCHEMA_ATTN_FP8_POINTS];
  double bf16_tflops[SCHEMA_ATTN_FP8_POINTS], fp8_tflops[SCHEMA_ATTN_FP8_POINTS];
  char measured_on[160], source[240];
} schema_attn_fp8;

typedef struct {
  char path[512]; /* where it was loaded from ("" when built in memory) */
  char gpu[64], driver[32], cuda[16], nccl[16], transport[32], measured_at[40];
  char notes[512];
  bool derived; /* true: computed from datasheet/roofline figures, not measured */
  int n_gemm;
  schema_gemm_point *gemm;
  /* "gemm_infer" (optional): decode-sized GEMMs (m = the batch of one decode
   * step) timed for inference. Only inference predictions read them (sim
   * joins them to "gemm" in its inference view); training lookups, and the
   * transfer of training GEMMs to another GPU, never see them. */
  int n_gemm_infer;
  schema_gemm_point *gemm_infer;
  /* "gemm_wgrad" (optional): the product C[m x n] += A^T B as a weight
   * gradient runs it (C accumulated in FP32: read and written, 8 bytes an
   * element) for the shapes whose (m, n, k) is also a forward or
   * input-gradient product of some layer (C written in BF16), which "gemm"
   * holds. The two cost differently; a weight gradient's exact shape is priced
   * from here (schema_gemm_wgrad_us), any other lookup from "gemm". A shape
   * only weight gradients use is in "gemm" alone. Sorted like "gemm". */
  int n_gemm_wgrad;
  schema_gemm_point *gemm_wgrad;
  /* "gemm_fp8" (optional): GEMMs with FP8 operands (E4M3 / E5M2, scaled per tensor) and a BF16 C, as
   * Transformer Engine runs the linear layers under layout.fp8. An FP8 GEMM's exact shape is priced from
   * here (schema_gemm_fp8_us), a shape between two points of the same (n, k) in m by interpolation
   * (schema_gemm_fp8_between_us); others from the BF16 time (sim_gemm_fp8_unmeasured_us). Sorted like
   * "gemm". */
  int n_gemm_fp8;
  schema_gemm_point *gemm_fp8;
  int n_attn;
  schema_attn_point *attn; /* "attention_shapes" (optional), sorted by shape */
  struct {
    int n;
    schema_attn_point *pts;
  } attn_by[SCHEMA_ATTN_NBACKENDS]; /* "attention_backends" (optional), sorted; [SCHEMA_ATTN_EXECUTOR] unused */
  int n_kernels;
  schema_kernel_table *kernels;
  int n_colls;
  schema_coll_table *colls;
  int n_fits;
  schema_fit *fits;
  double clock_window_us; /* 0 = no clock section */
  int n_clock;
  schema_clock_point *clock; /* sorted by (period_us, duty) */
  int n_burst;               /* "clock"."burst" bins (0: none; only with a clock section) */
  schema_burst_bin burst[SCHEMA_BURST_MAX];
  /* "host" (optional): has_host false = no section; then the simulator has no host clock */
  bool has_host;
  double host_launch_us, host_gemm_launch_us;
  double host_event_us; /* 0: not measured */
  double host_graph_gap_us; /* 0: not measured (see "host" above) */
#define SCHEMA_HOST_SYNC_POINTS 16
  int n_host_sync;
  double host_sync_wait_us[SCHEMA_HOST_SYNC_POINTS], host_sync_gap_us[SCHEMA_HOST_SYNC_POINTS];
  /* "tp_comm_overlap_sm" (optional): n_tpo_sm 0 = no section (the simulator keeps sms / (sms - n)) */
#define SCHEMA_TPO_SM_POINTS 32
  int n_tpo_sm, tpo_sm_sms;
  bool tpo_sm_priced; /* "priced" (default true): false = the table is kept as data, the simulator uses the rule */
  char tpo_sm_measured_on[64], tpo_sm_source[160];
  int tpo_sm_held[SCHEMA_TPO_SM_POINTS];
  double tpo_sm_margin[SCHEMA_TPO_SM_POINTS], tpo_sm_nomargin[SCHEMA_TPO_SM_POINTS];
  /* "framework_host" (optional): fw_host.framework[0] == 0 = no section */
  schema_framework_host fw_host;
  /* "attention_fp8" (optional): attn_fp8.n == 0 = no section */
  schema_attn_fp8 attn_fp8;
  /* "power" (optional): power.n == 0 = no section (then the clock model is the duty-keyed "clock" one) */
  schema_power power;
  /* "op_power" (optional): op_power.n_attn == 0 = no section */
  schema_op_power op_power;
  /* The "gemm" points ordered by log m, for the nearest-shape search of
   * schema_lookup_gemm; built by schema_calibration_sort (the loader and the
   * writer call it), owned and freed with the calibration. A lookup uses it
   * only while it still describes `gemm` and `n_gemm` (else it scans every
   * point, same result); after changing points in place, sort again. */
  struct schema_gemm_index *gemm_index;
} schema_calibration;

/* Strict loader: every field's presence, type and range checked, unknown keys
 * rejected; errors read "FILE: FIELD: reason". On failure *c is left empty. */
int schema_calibration_load(const char *path, schema_calibration *c, ts_err *e);
int schema_calibration_from_json_text(const char *text, size_t len, const char *what,
                                      schema_calibration *c, ts_err *e);
void schema_calibration_free(schema_calibration *c);

/* Writer (the inverse of the loader; tables written sorted). */
int schema_calibration_write(const schema_calibration *c, FILE *out, ts_err *e);
/* The "attention_shapes" section alone (calibration_attn.c; the loader and writer call them). */
struct json_t;
int schema_attn_load(struct json_t *root, const char *file, schema_calibration *c, ts_err *e);
struct json_t *schema_attn_json(const schema_calibration *c);
struct json_t *schema_attn_backends_json(const schema_calibration *c); /* NULL when it has none */
void schema_attn_sort(schema_calibration *c);
void schema_attn_free(schema_calibration *c);
int schema_calibration_save(const schema_calibration *c, const char *path, ts_err *e);

/* Building a calibration in memory (tacorun calibrate, the derived generator).
 * Each adds one point, creating its table on first use; return -1 on OOM. */
int schema_calibration_add_gemm(schema_calibration *c, long long m, long long n, long long k, double us);
int schema_calibration_add_gemm_infer(schema_calibration *c, long long m, long long n, long long k, double us);
int schema_calibration_add_gemm_wgrad(schema_calibration *c, long long m, long long n, long long k, double us);
int schema_calibration_add_gemm_fp8(schema_calibration *c, long long m, long long n, long long k, double us);
int schema_calibration_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x,
                                  int group, double us);
int schema_calibration_add_attn(schema_calibration *c, const schema_attn_shape *s, double fwd_us, double bwd_us);
int schema_calibration_add_attn_backend(schema_calibration *c, schema_attn_backend b, const schema_attn_shape *s,
                                        double fwd_us, double bwd_us);
/* One backend's points (the executor's: "attention_shapes"), sorted once loaded. */
const schema_attn_point *schema_attn_points(const schema_calibration *c, schema_attn_backend b, int *n);
int schema_calibration_add_coll(schema_calibration *c, const char *name, int nranks, double bytes,
                                double us);
int schema_calibration_add_fit(schema_calibration *c, const char *name, double latency_us, double gbps);
/* One point of the clock section; set c->clock_window_us (> 0) too, or the
 * writer refuses the section. */
int schema_calibration_add_clock(schema_calibration *c, double duty, double period_us, double gemm_speed,
                                 double mem_speed);
/* The "host" section of `src` into `dst` (launch, GEMM launch, event, sync gaps, graph_gap_us), replacing
 * dst's; nothing when src has none. The host's costs belong to the machine, not to the transport:
 * `tacorun calibrate --compute-from` carries them into the other transports' files. */
void schema_calibration_copy_host(schema_calibration *dst, const schema_calibration *src);
/* The "tp_comm_overlap_sm" section of `src` into `dst`, replacing dst's; nothing when src has none
 * (a property of the GPU: carried by --compute-from like the host's costs). */
void schema_calibration_copy_tpo_sm(schema_calibration *dst, const schema_calibration *src);
/* The "framework_host" section alone (calibration_framework.c): loader (nothing when absent), writer (NULL
 * when c has none). Copied with the host's costs (schema_calibration_copy_host: the same machine). */
int schema_framework_host_load(struct json_t *root, const char *file, schema_calibration *c, ts_err *e);
struct json_t *schema_framework_host_json(const schema_calibration *c);
/* The "attention_fp8" section alone (calibration_attn_fp8.c): loader (nothing when absent), writer (NULL when
 * c has none). Not carried by a transfer to another GPU (a kernel's ratio on the GPU it was measured on). */
int schema_attn_fp8_load(struct json_t *root, const char *file, schema_calibration *c, ts_err *e);
struct json_t *schema_attn_fp8_json(const schema_calibration *c);
/* The "power" section alone (calibration_power.c): loader (nothing when absent; fits it, and refuses a section
 * the fit cannot determine), writer (NULL when c has none). Carried by --compute-from like the clock section;
 * not by a transfer to another GPU. */
int schema_power_load(struct json_t *root, const char *file, schema_calibration *c, ts_err *e);
struct json_t *schema_power_json(const schema_calibration *c);
/* The fit of p's samples into p->fit (the loader calls it; a section built in memory calls it once its samples
 * are in): 0, or -1 naming file, the field and why the samples do not determine it. */
int schema_power_fit_run(schema_power *p, const char *file, ts_err *e);
/* The fitted board power (W) of a window whose time fractions are x_gemm, x_mem, x_idle at SM clock f_mhz. */
double schema_power_w(const schema_power *p, double x_gemm, double x_mem, double x_idle, double f_mhz);
/* The clock (MHz) such a window runs at: the largest f <= f_max whose power is <= cap_w (bisection). */
double schema_power_clock(const schema_power *p, double x_gemm, double x_mem, double x_idle);
/* The same under another power limit than cap_w (the burst's extra power, sim/INFERENCE.md). */
double schema_power_clock_under(const schema_power *p, double x_gemm, double x_mem, double x_idle, double limit_w);
/* The speeds at clock f_mhz against the tables: (f / f_gemm_model)^bg for GEMM-class work, (f / f_mem_model)^bm
 * for memory-bound work (1 at the model's own clock of each back-to-back kernel, the tables' state). */
void schema_power_speeds(const schema_power *p, double f_mhz, double *gemm_speed, double *mem_speed);
/* A power section from path: a calibration file's (the whole file checked), or a file holding the section alone
 * (merge_power.py's input: the section itself, or {"power": section}); checked and fitted as the loader does. */
int schema_power_load_file(const char *path, schema_power *p, ts_err *e);
/* The fit and each sample's residual, for `tacosim calibration-fit`. */
void schema_power_print_fit(const schema_power *p, FILE *out);
/* The "op_power" section alone (calibration_op_power.c): loader (nothing when absent), writer (NULL when c has
 * none). Carried by --compute-from like the power section; not by a transfer to another GPU. */
int schema_op_power_load(struct json_t *root, const char *file, schema_calibration *c, ts_err *e);
struct json_t *schema_op_power_json(const schema_calibration *c);
/* The attention row nearest a GPU's prefill attention: the nearest head layout (|ln| of the query heads', KV
 * heads' and head dim's ratios, summed), then among its rows the nearest shape (|ln| of the tokens' ratio, batch x
 * sequence, plus the sequence's); NULL when the section has none. */
const schema_op_power_attn *schema_op_power_attention(const schema_op_power *p, int heads, int kv_heads, int head_dim,
                                                      long long batch, long long seq);
/* The power (W) of a class measured at p0_w and f0_mhz, at clock f_mhz: idle + (p0 - idle) (f / f0)^g. */
double schema_op_power_w(const schema_op_power *p, double p0_w, double f0_mhz, double g, double f_mhz);
/* The section's FP8 over BF16 speed at a sequence of `seq` tokens: linear in log(seq) between its points,
 * the nearest end's ratio outside them; 0 when c has no section. */
double schema_attn_fp8_speedup(const schema_calibration *c, int seq);
/* The measured time ratio of a GEMM beside a kernel holding `held` SMs on a GPU of `sms` SMs (margin:
 * TE's set_sm_margin): linear between the table's points, the measured ratio at a point; 1 for
 * held <= 0; sms / (sms - held) (the proportional rule) without a section, for a GPU of another SM
 * count than the table's, or for held outside the table's points (below the first or beyond the last). */
double schema_tpo_sm_ratio(const schema_calibration *c, int sms, int held, bool margin);
/* Adds src's compute side to dst (tacorun calibrate --compute-from): GEMM, decode-GEMM and kernel
 * tables, attention per shape of every backend, the clock section and burst profile, the power section,
 * the host section; not the collectives or fits. 0, or -1 when out of memory. */
int schema_calibration_copy_compute(schema_calibration *dst, const schema_calibration *src);
/* Sorts every table and rebuilds the GEMM index (the loader and writer call it). */
void schema_calibration_sort(schema_calibration *c);
/* Sorts a GEMM list by (n, k, m), the order every GEMM list of a calibration keeps (the exact-shape lookups
 * search it by halves): for a list built outside the loader, such as the inference view's joined one. */
void schema_gemm_list_sort(schema_gemm_point *pts, int n);
/* (Re)builds c->gemm_index over c->gemm; -1 on OOM (no index: lookups scan). */
int schema_gemm_index_build(schema_calibration *c);
void schema_gemm_index_free(schema_calibration *c);

/* Grouped GEMMs (a mixture of experts' routed experts: `groups` GEMMs of the
 * same shape, one per local expert, each on its own rows) are kernel tables
 * keyed by the FLOPs of the whole group (2 x groups x m x n x k), one table
 * per family of the two dimensions that do not count tokens:
 *   "gemm_grouped.g<G>.n<N>.k<K>"  each expert's C[m x N], inner K; m = its
 *                                  rows (forward and input-gradient keys);
 *   "gemm_grouped.g<G>.m<M>.n<N>"  each expert's C[M x N] over K = its rows
 *                                  (weight-gradient keys, FP32 accumulate).
 * The (m, n, k) keys are those of the dense "gemm" list (forward (m, n, k),
 * dgrad (m, k, n), wgrad (k, n, m)); G >= 2. The loader refuses a table of
 * that prefix whose name does not parse or whose points are not FLOPs.
 * schema_grouped_gemm_name writes a name (-1: it would not fit 48 bytes);
 * schema_grouped_gemm_parse reads one (-1: not such a name). token_k selects
 * the second form; (a, b) are its two numbers in order. */
int schema_grouped_gemm_name(char *out, size_t n, int groups, bool token_k, long long a, long long b);
int schema_grouped_gemm_parse(const char *name, int *groups, bool *token_k, long long *a, long long *b);
/* The device-memory bytes of a grouped point of `flops` in the family (groups, token_k, a, b) of the names
 * above: each expert reads A and B (BF16) and writes C, BF16 for the forward and input-gradient families,
 * FP32 read and written (accumulated, beta 1) for the weight-gradient ones, as the executor runs them. */
double schema_grouped_gemm_bytes(int groups, bool token_k, long long a, long long b, double flops);

/* The parsers' step over a table name (calibration_moe.c): `tag`, then a positive decimal integer (no sign or
 * leading zero, at most 1e9) into *v, then `end` (a '.' or the string's end); returns what follows `end`
 * (the string's end itself when end is '\0'), or NULL. */
const char *schema_name_field(const char *s, char tag, long long *v, char end);

/* The inference executor's prefill attention tables keyed by head dimension and prompt length,
 * "attention_prefill.d<D>.s<S>" (points by the op's FLOPs, batch x heads varying along them; `tacorun
 * calibrate-infer`). schema_prefill_attention_parse reads D and S from a name (-1: not such a name, the
 * FLOP-keyed "attention_prefill" among them). */
int schema_prefill_attention_parse(const char *name, int *head_dim, long long *seq);

/* ---- lookups ----
 * Inside a table's measured range: log-space interpolation (log time against
 * log size). Outside: the roofline below, anchored to the nearest measured
 * point so the curve is continuous, and a one-time warning naming the op on
 * the warning stream. A missing table is an error naming it. */
typedef struct {
  double peak_flops;       /* bf16 FLOP/s the roofline assumes (cluster figure) */
  double hbm_bytes_per_s;  /* memory-bound ops */
  double link_bytes_per_s; /* collectives (per direction, per GPU) */
  double launch_us;        /* fixed cost of a kernel */
  double coll_latency_us;  /* fixed cost of a collective step */
} schema_roofline;

typedef struct {
  const schema_calibration *cal;
  schema_roofline roof;
  FILE *warn;         /* NULL: no warnings */
  int warned_n;       /* names already warned about */
  char warned[64][64];
  /* the GEMM list's latency floor under `roof`, cached for the list it was
   * computed over (schema_lookup_gemm's nearest-shape rule) */
  const schema_gemm_point *floor_of;
  int floor_n;
  double gemm_floor_us;
} schema_lookup;

void schema_lookup_init(schema_lookup *l, const schema_calibration *cal, const schema_roofline *roof,
                        FILE *warn);

/* GEMM of shape m x n x k (2mnk FLOPs): exact match, else log-space
 * interpolation along one dimension between the nearest measured neighbours
 * that share the other two (m first, then k, then n: the token count is m for
 * forward and dgrad GEMMs, k for wgrad); else the roofline anchored at the
 * end of the largest such family (warned); else (no measured shape shares two
 * dimensions with it: a model the calibration never saw) the list's latency
 * floor plus the shape's roofline time (compute or HBM bound, whichever is
 * longer) over the efficiency of the SCHEMA_GEMM_NEIGHBOURS nearest measured
 * shapes in (ln m, ln n, ln k), weighted by 1 / distance^2 (warned once). */
#define SCHEMA_GEMM_NEIGHBOURS 16
int schema_lookup_gemm(schema_lookup *l, long long m, long long n, long long k, double *us, ts_err *e);
/* A weight gradient's own timing of (m, n, k) from "gemm_wgrad" (exact shape
 * only): 1 and *us when the calibration has it, else 0 (price it by
 * schema_lookup_gemm). */
int schema_gemm_wgrad_us(const schema_calibration *c, long long m, long long n, long long k, double *us);
/* An FP8 GEMM's timing of (m, n, k) from "gemm_fp8" (exact shape only): 1 and *us when the calibration has
 * it, else 0. */
int schema_gemm_fp8_us(const schema_calibration *c, long long m, long long n, long long k, double *us);
/* An FP8 shape "gemm_fp8" lacks whose m lies between two of its points of the same (n, k): log(time)
 * interpolated against log(m) between the nearest point below m and the nearest above (the interpolation
 * schema_lookup_gemm makes along m); 1, *us and the two points' m (*lo_m, *hi_m); else 0 (m below the first
 * point of (n, k), above the last, or no point of (n, k)). */
int schema_gemm_fp8_between_us(const schema_calibration *c, long long m, long long n, long long k, double *us,
                               long long *lo_m, long long *hi_m);
/* For an FP8 shape "gemm_fp8" lacks: the FP8 / BF16 time ratio measured at the "gemm_fp8" point of the same
 * (n, k) whose m is nearest to m (in ln m, within a factor max_m_factor) and whose exact shape "gemm" also
 * holds, else (a weight gradient's tokens being its k) at the point of the same (m, n) whose k is nearest
 * within that factor: 1, *ratio and that point's m (*at_m); else 0. */
int schema_gemm_fp8_ratio(const schema_calibration *c, long long m, long long n, long long k, double max_m_factor,
                          double *ratio, long long *at_m);
/* A kernel table by name: x is bytes (or flops for flops-keyed tables); group
 * selects the points of that group (nearest group when absent, with a warning). */
int schema_lookup_kernel(schema_lookup *l, const char *name, double x, int group, double *us, ts_err *e);
/* Whether a table exists (lets callers fall back without an error). */
bool schema_has_kernel(const schema_calibration *c, const char *name);
/* The kernel table of that name, or NULL. */
const schema_kernel_table *schema_kernel_table_of(const schema_calibration *c, const char *name);
bool schema_has_coll(const schema_calibration *c, const char *name);
/* A collective of `bytes` (nccl-tests size) over nranks. Without a table for
 * nranks, the nearest nranks' table is used through bus bandwidth (busbw is
 * ~independent of n on one fabric), with a warning. */
int schema_lookup_coll(schema_lookup *l, const char *name, int nranks, double bytes, double *us, ts_err *e);

/* Attention of shape q (bwd: the backward) from "attention_shapes"
 * (schema/calibration_attn.c): the measured time of that exact shape, else
 * launch_us plus the shape's roofline time (its causal FLOPs at the peak or
 * its Q, K, V and output bytes at the HBM bandwidth, whichever is longer)
 * over the efficiency of the SCHEMA_ATTN_NEIGHBOURS nearest measured shapes
 * of the same causality in (ln head_dim, ln seq, ln batch*heads,
 * ln heads/kv_heads), weighted by 1 / distance^2 (a shape at distance 0,
 * the same work split differently between batch and heads, is taken alone).
 * Returns 1 (and *us untouched) when the calibration has no point of that
 * causality: the caller falls back to its FLOP-keyed tables. */
#define SCHEMA_ATTN_NEIGHBOURS 16
int schema_lookup_attn(schema_lookup *l, const schema_attn_shape *q, bool bwd, double *us);
/* The same over one backend's points (SCHEMA_ATTN_EXECUTOR: schema_lookup_attn). */
int schema_lookup_attn_backend(schema_lookup *l, schema_attn_backend be, const schema_attn_shape *q, bool bwd,
                               double *us);
/* The roofline time (us, no launch cost) lookups and transfers use for a shape. */
double schema_attn_roof_us(const schema_roofline *r, const schema_attn_shape *q, bool bwd);
double schema_attn_flops(const schema_attn_shape *q, bool bwd);
double schema_attn_bytes(const schema_attn_shape *q, bool bwd);

/* Clock speeds at a compute duty (0, 1]: linear interpolation in duty over
 * the points of the measured period nearest (in log scale) to cycle_us, the
 * length of one busy + idle alternation of the plan's GPU (the smallest
 * period when cycle_us <= 0), clamped to that period's duty range: bursts
 * of a 1 ms period pay a start-up cost after each idle that longer ones
 * spread out, and 100 us GEMMs reach the boost clock less than 1 ms ones.
 * Without a clock section both speeds are 1. */
void schema_clock_speed(const schema_calibration *c, double duty, double cycle_us, double *gemm_speed,
                        double *mem_speed);

/* The end (s since the burst began) of work_s seconds of GEMM work, timed
 * at the sustained speed, that starts at t_s seconds into a burst from idle:
 * inside a bin of the "burst" profile the work runs gemm_speed times faster,
 * outside every bin at speed 1. Without bins: t_s + work_s. */
double schema_burst_advance(const schema_calibration *c, double t_s, double work_s);

/* The "host" section's sync gap (us) after a wait of wait_us: linear
 * interpolation between its points, clamped to the first and last. 0 when
 * the calibration has no host section. */
double schema_host_sync_gap(const schema_calibration *c, double wait_us);

/* nccl-tests bus-bandwidth factor of a calibration key (common/ts_coll.h's
 * table: 2(n-1)/n all-reduce, (n-1)/n all-gather, reduce-scatter, all-to-all,
 * 1 for sendrecv); `name` may carry a ".codec" suffix. 0 for nranks < 2 or an
 * unknown name. */
double schema_busbw_factor(const char *name, int nranks);

#endif
