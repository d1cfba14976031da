/* sim_host.h — the host clock (sim/README.md, "The host"): each rank's host
 * issues its compute ops' kernels in program order, ahead of the GPU as
 * CUDA's asynchronous queue lets it, and waits for the GPU after an op that
 * copies to the host (plan_op.host_sync). No SimGrid here: the rule is a
 * function of numbers, tested by hand (tests/test_sim_host.c). */
#ifndef SIM_HOST_H
#define SIM_HOST_H

#include <stdbool.h>

#include "calibration.h"
#include "plan.h"

typedef struct {
  bool on;                   /* off: no host section and no plan figure; ops start when the GPU is free */
  double launch_s, gemm_s;   /* host time per kernel launch, per GEMM call */
  double event_s;            /* per event record (the calibration's event_us, else launch_s) */
  double sync_s;             /* > 0: the plan's fixed gap after a sync; 0: the calibration's points */
  const schema_calibration *cal;
} sim_host;

/* From the plan's host_launch_us / host_sync_us (when given, > 0) and the
 * calibration's "host" section; off when neither gives a launch cost. */
void sim_host_setup(sim_host *h, const plan *p, const schema_calibration *cal);

/* The GPU's gap (s) after a sync op, the host having waited wait_s for it. */
double sim_host_sync_gap_s(const sim_host *h, double wait_s);

/* One compute op of d seconds on the GPU, issued as `kernels` launches,
 * `gemms` GEMM calls and `events` event records (the op's d split evenly over
 * its n = kernels + gemms + events queue entries) by a host at
 * *host_t; the GPU is free from gpu_free. Kernel i (0-based) can start once
 * issued, at *host_t + i x (the host's cost per launch of this op), and
 * after the kernel before it; so the op ends at
 *   max(gpu_free + d, h + d, h + (n - 1) c + d / n),  h = *host_t, n launches, c each,
 * and the host moves on to h + n c. After a sync op the host waits for the
 * end and then needs the sync gap: *host_t = max(*host_t, end + gap(end - h - n c)).
 * An op of no launch starts when the GPU is free and leaves the host as it is.
 * Off: gpu_free + d. Returns the end; *start (may be NULL): its first kernel's start. */
double sim_host_op(const sim_host *h, double *host_t, int kernels, int gemms, int events, int sync, double gpu_free,
                   double d, double *start);

/* Before an op marked host_syncs_before n > 0, host_calls_before m: the host waits for the GPU to reach the
 * op (gpu_free: its dependencies and the ops before it done), then n sync gaps, the first after a wait of
 * gpu_free - *host_t, the others after none (each waits for a few small kernels whose time the program does
 * not hold), and m calls at the kernel launch cost:
 *   *host_t = max(*host_t, gpu_free) + gap(wait) + (n - 1) gap(0) + m launch.
 * Off or n <= 0: nothing. */
void sim_host_wait_before(const sim_host *h, double *host_t, double gpu_free, int n, int m);

#endif
