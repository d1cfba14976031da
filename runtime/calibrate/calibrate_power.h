/* calibrate_power.h — the power phase of `tacorun calibrate` (--only power).
 *
 * The kernel tables are timed back to back, where an H100 sits at its power
 * cap at ~1,440 MHz; a training step mixes its GEMMs with memory-bound kernels
 * and idle, draws less and clocks higher. This phase measures, for patterns of
 * the clock section's two reference kernels (calibrate_refk.h: the GEMM
 * 4096x4096x2048 bf16 and the 96 MiB rt_add) and GPU-side idle, the power the
 * GPU draws (NVML's energy counter over a timed window) and the SM clock it
 * runs (NVML sampled every 10 ms), with the measured time fraction of each
 * kernel group, for a power-cap clock model in the simulator.
 *
 * Patterns, in the order they run: "idle" (nothing running), "gemm" and "mem"
 * (back to back: the references of the speeds), "mix-gXX-pYms" (k GEMMs then
 * j adds per period, GEMM time fraction XX %, period ~Y ms), "gemm-dXX" and
 * "mem-dXX" (bursts then spin-kernel idle, duty XX %, period ~2 ms).
 *
 * This header and calibrate_power_plan.c are plain C (the planner, the
 * fractions and speeds, the JSON and TSV writers), tested on a CPU
 * (tests/test_calibrate_power.c); calibrate_power.c measures on the GPU. */
#ifndef CALIBRATE_POWER_H
#define CALIBRATE_POWER_H

#include "ts_error.h"

#define CALIB_POWER_NAME_MAX 32 /* a name is at most 31 characters */
#define CALIB_POWER_MAX_PATTERNS 24
#define CALIB_POWER_B2B_BURST_US 2000.0 /* back to back: bursts of ~2 ms between event pairs */
#define CALIB_POWER_DUTY_PERIOD_US 2000.0
#define CALIB_POWER_IDLE_S 2.0 /* the idle pattern's window */
#define CALIB_POWER_MAX_SHAPES 8 /* --power-gemm shapes, and as many --power-prefill-attn ops */

/* One pattern's plan: every period runs n_gemm GEMMs, then n_add adds, then
 * idle_us of spin-kernel idle. "idle" has no launches at all. */
typedef struct {
  char name[CALIB_POWER_NAME_MAX];
  int n_gemm, n_add;
  double idle_us;
  double period_us;   /* planned: n_gemm t_gemm + n_add t_add + idle_us */
  double gemm_target; /* planned GEMM time fraction */
} calib_power_pattern;

/* The patterns from the back-to-back launch times t_gemm_us and t_add_us, in
 * run order: idle, gemm, mem, mix-g10..g90 at ~1 ms then at ~10 ms, gemm-d25,
 * d50, d75, mem-d50. A mix of target f over period P: k = max(1, round(f P /
 * t_gemm)) GEMMs, then j = max(1, round(k t_gemm (1 - f) / (f t_add))) adds, so
 * the fraction is f as closely as whole launches allow; a duty pattern is
 * calib_clock_size_burst's. Returns the count, or -1 (e filled) on times that
 * are not > 0 or more than cap patterns. */
int calib_power_plan(double t_gemm_us, double t_add_us, calib_power_pattern *p, int cap, ts_err *e);

/* One pattern as measured. */
typedef struct {
  calib_power_pattern plan;
  int periods;                      /* timed */
  double wall_s;                    /* the window, host clock, stream synchronized at both edges */
  double gemm_busy_s, add_busy_s;   /* CUDA events around each kernel group, summed */
  double energy_j;                  /* NVML energy counter: after - before */
  double gemm, mem, idle;           /* time fractions (calib_power_fractions) */
  double period_us;                 /* measured: wall / periods */
  double gemm_launch_us, add_launch_us; /* busy time per launch; 0 without such kernels */
  double gemm_speed, mem_speed;     /* against "gemm" and "mem" (calib_power_speeds); 0 without */
  double power_w;                   /* energy_j / wall_s */
  double sampled_w;                 /* mean of nvmlDeviceGetPowerUsage samples (cross-check) */
  double mhz_min, mhz_mean, mhz_max; /* nvmlDeviceGetClockInfo(SM) samples */
  int samples;
  long long m, n, k; /* a --power-gemm shape's row; 0 in the patterns' rows */
  double flops;      /* a --power-gemm or --power-prefill-attn row: FLOPs a launch; 0 in the patterns' rows */
} calib_power_row;

typedef struct {
  double cap_w, f_max_mhz, idle_w;
  char gpu[96];
  calib_power_row rows[CALIB_POWER_MAX_PATTERNS];
  int n;
  /* --power-gemm, then --power-prefill-attn: each op back to back after the
   * patterns, each attention op followed by its mix with the reference GEMM
   * ("amix-..."; TSV only: the simulator's "power" section has no per-op field) */
  calib_power_row gemms[3 * CALIB_POWER_MAX_SHAPES];
  int n_gemms;
} calib_power_result;

/* Time fractions of a window: gemm = gemm_busy / wall, mem = add_busy /
 * wall, idle = 1 - both; when the events sum to more than the wall time
 * (clock skew of a few us), gemm and mem are scaled to sum to 1, idle 0. */
void calib_power_fractions(double gemm_busy_s, double add_busy_s, double wall_s, double *gemm, double *mem,
                           double *idle);

/* Fills each row's gemm_speed and mem_speed: the "gemm" row's GEMM launch
 * time over the row's (0 where the row has none), likewise "mem" for the
 * adds. -1 (e filled) when "gemm" or "mem" is missing or not measured. */
int calib_power_speeds(calib_power_result *r, ts_err *e);

/* --power-json: {"cap_w", "f_max_mhz", "idle_w", "gpu", "gemm", "mem",
 * "samples": [one per row but "idle": name, gemm, mem, idle, period_us,
 * power_w, sm_mhz, gemm_speed, mem_speed]}. Checks first: names 1..31
 * characters and unique, fractions in [0, 1] summing to 1 within 0.02, finite
 * powers and clocks, "gemm" and "mem" present; -1 with the row and field named
 * otherwise (nothing written). */
int calib_power_check(const calib_power_result *r, ts_err *e);
int calib_power_write_json(const char *path, const calib_power_result *r, ts_err *e);
/* --power-tsv: every row (idle too) with every measured column, then the
 * --power-gemm and --power-prefill-attn rows (gemm_speed 0; the achieved
 * TFLOP/s last, from the row's flops) and the attention mixes (amix-: the
 * reference GEMMs then one attention launch a period, about half the time
 * each; gemm_speed the reference GEMM's against "gemm", mem_speed the
 * attention's against its back-to-back row, TFLOP/s the attention's). */
int calib_power_write_tsv(const char *path, const calib_power_result *r, ts_err *e);

#endif
