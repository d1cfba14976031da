/* sim_host.h — the host clock (sim/README.md, "The host"): each rank's host
 * issues its compute ops' kernels in program order, ahead of the GPU as
 * CUDA's asynchronous queue lets it, and waits for the GPU after an op that
 * copies to the host (plan_op.host_sync). No SimGrid here: the rule is a
 * function of numbers, tested by hand (tests/test_sim_host.c). */
#ifndef SIM_HOST_H
#define SIM_HOST_H

#include <stdbool.h>

#include "calibration.h"
#include "model.h"
#include "plan.h"

typedef struct {
  bool on;                   /* off: no host section and no plan figure; ops start when the GPU is free */
  double launch_s, gemm_s;   /* host time per kernel launch, per GEMM call */
  double event_s;            /* per event record (the calibration's event_us, else launch_s) */
  double sync_s;             /* > 0: the plan's fixed gap after a sync; 0: the calibration's points */
  const schema_calibration *cal;
  /* the plan's host_framework "megatron-core": its layers' host time from the calibration's "framework_host"
   * section, per layer and micro-batch ([dense or MoE][0 forward, 1 backward]), and per collective call */
  bool fw;
  double fw_layer_s[SCHEMA_FW_NLAYERS][2];
  double fw_part_us[SCHEMA_FW_NLAYERS][SCHEMA_FW_NPARTS]; /* the forward's split by block (all 0: none) */
  double fw_call_s[TS_COLL_COUNT];
} sim_host;

/* From the plan's host_launch_us / host_sync_us (when given, > 0) and the
 * calibration's "host" section; off when neither gives a launch cost nor the
 * plan names a host_framework other than the executor. A plan naming
 * "megatron-core" needs the calibration's "framework_host" section of that
 * framework with the layer kinds its model has (dense, MoE): else -1 and
 * `file: framework_host: reason` in e. */
int sim_host_setup(sim_host *h, const plan *p, const schema_calibration *cal, ts_err *e);

/* Which block of a layer (schema_fw_part) a layer op of model op `name`
 * belongs to, in a dense or an MoE layer: fc1, act, fc2 -> mlp; router,
 * router_topk -> router; permute -> dispatch; expert_* and shared_* ->
 * experts; unpermute -> combine; mlp_residual -> mlp (dense) or combine
 * (MoE); every other op -> attention. */
schema_fw_part sim_host_fw_part(const char *name, bool moe);

typedef double sim_host_fw_rates[SCHEMA_FW_NLAYERS][2][SCHEMA_FW_NPARTS];

/* Under a framework's host time (h->fw): the host time per queue entry (kernel
 * launch, GEMM call, event record: plan_op.launches + gemm_launches + events)
 * of the layer ops of a program, per layer kind, phase (0 forward, 1
 * backward) and block, so that one layer-micro-batch costs the section's
 * time, each block its share: rate[kind][ph][b] = fw_layer_s[kind][ph] x
 * share(b) / (entries of block b in the first layer-micro-batch of that kind
 * in the program's phase ph). share(b) = part_us(b) / the sum of part_us
 * over the blocks that have entries there; without parts every entry of the
 * layer-micro-batch costs the same. 0 where the program has none.
 * Recomputation re-runs the forward: its ops cost the forward's rates.
 * mops[0..n_mops-1]: the layer's model ops (plan_op.model_op indexes them). */
void sim_host_fw_entry_rates(const sim_host *h, const plan *p, const model_op *mops, int n_mops,
                             const plan_program *prog, sim_host_fw_rates rate_s);

/* A layer op's host time under the framework's rates (entries x rate), or -1
 * for an op the framework section does not price (outside the layers: the
 * executor's launch costs apply). */
double sim_host_fw_op_s(const sim_host *h, const plan *p, const model_op *mops, int n_mops,
                        const sim_host_fw_rates rate_s, const plan_op *op);

/* The host time of the framework's call that issues a communication op (a
 * collective: the section's "calls"; 0 for send/recv and when off). */
double sim_host_fw_call_s(const sim_host *h, const plan_op *op);

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
/* The same for n queue entries that cost the host `cost` seconds in all (the framework's rates). */
double sim_host_op_cost(const sim_host *h, double *host_t, int n, double cost, int sync, double gpu_free, double d,
                        double *start);

/* Before an op marked host_syncs_before n > 0, host_calls_before m: the host waits for the GPU to reach the
 * op (gpu_free: its dependencies and the ops before it done), then n sync gaps, the first after a wait of
 * gpu_free - *host_t, the others after none (each waits for a few small kernels whose time the program does
 * not hold), and m calls at the kernel launch cost:
 *   *host_t = max(*host_t, gpu_free) + gap(wait) + (n - 1) gap(0) + m launch.
 * Off or n <= 0: nothing. */
void sim_host_wait_before(const sim_host *h, double *host_t, double gpu_free, int n, int m);

#endif
