/* sim_op_power.h — the one clock a window of ops runs at under the power cap, from each op's class power and
 * clock back to back (the calibration's "op_power" section, schema/calibration.h; sim/INFERENCE.md, "The prefill
 * at one clock from its ops' power"). Each item is time t0 priced by a table timed back to back at clock f0,
 * where the op drew p0: at clock f it takes t0 / (f / f0)^b and draws idle + (p0 - idle) (f / f0)^g. */
#ifndef SIM_OP_POWER_H
#define SIM_OP_POWER_H

#include "calibration.h"

typedef struct {
  double t0_s;         /* the op's time at its table's price */
  double p0_w, f0_mhz; /* its power and clock back to back (the table's state) */
  double b, g;         /* speed and power exponents against the clock */
} sim_op_power_item;

/* The item's class as the section holds it: a compute-bound GEMM, the prefill attention of the nearest row to
 * (heads, kv_heads, head_dim, batch, seq) a GPU (at the section's attention_speed_exponent where measured, else
 * its speed_exponent), or memory-bound work (norms, element-wise ops, memory-bound GEMMs,
 * the TP all-reduces: speed 1). */
sim_op_power_item sim_op_power_gemm(const schema_op_power *p, double t0_s);
sim_op_power_item sim_op_power_attention(const schema_op_power *p, double t0_s, int heads, int kv_heads,
                                         int head_dim, long long batch, long long seq);
sim_op_power_item sim_op_power_mem(const schema_op_power *p, double t0_s);

/* The item's speed at clock f against its table: (f / f0)^b. */
double sim_op_power_speed(const sim_op_power_item *it, double f_mhz);
/* The window's mean power (W) at clock f: sum t(f) P(f) / sum t(f). */
double sim_op_power_mean_w(const schema_op_power *p, const sim_op_power_item *it, int n, double f_mhz);
/* The largest clock <= f_max at which the window's mean power is <= limit_w (bisection; SIM_OP_POWER_MIN_SHARE of
 * f_max where even that draws more). */
#define SIM_OP_POWER_MIN_SHARE 0.25
double sim_op_power_clock(const schema_op_power *p, const sim_op_power_item *it, int n, double limit_w);

#endif
