/* sim_op_power.c — the clock of a window of ops under the power cap from their classes' back-to-back power and
 * clock (sim_op_power.h). */
#include "sim_op_power.h"

#include <math.h>

#define OP_POWER_BISECT 60

static sim_op_power_item item(double t0_s, double p0_w, double f0_mhz, double b, double g) {
  return (sim_op_power_item){.t0_s = t0_s, .p0_w = p0_w, .f0_mhz = f0_mhz, .b = b, .g = g};
}

sim_op_power_item sim_op_power_gemm(const schema_op_power *p, double t0_s) {
  return item(t0_s, p->gemm_w, p->gemm_mhz, p->speed_exponent, p->power_exponent);
}

sim_op_power_item sim_op_power_attention(const schema_op_power *p, double t0_s, int heads, int kv_heads,
                                         int head_dim, long long batch, long long seq) {
  const schema_op_power_attn *a = schema_op_power_attention(p, heads, kv_heads, head_dim, batch, seq);
  const double b = p->attention_speed_exponent >= 0 ? p->attention_speed_exponent : p->speed_exponent;
  return a ? item(t0_s, a->power_w, a->mhz, b, p->power_exponent) : sim_op_power_gemm(p, t0_s);
}

sim_op_power_item sim_op_power_mem(const schema_op_power *p, double t0_s) {
  return item(t0_s, p->mem_w, p->mem_mhz, 0, p->mem_power_exponent);
}

double sim_op_power_speed(const sim_op_power_item *it, double f_mhz) { return pow(f_mhz / it->f0_mhz, it->b); }

double sim_op_power_mean_w(const schema_op_power *p, const sim_op_power_item *it, int n, double f_mhz) {
  double energy = 0, time = 0;
  for (int i = 0; i < n; i++) {
    double t = it[i].t0_s / sim_op_power_speed(&it[i], f_mhz);
    energy += t * schema_op_power_w(p, it[i].p0_w, it[i].f0_mhz, it[i].g, f_mhz);
    time += t;
  }
  return time > 0 ? energy / time : p->idle_w;
}

double sim_op_power_clock(const schema_op_power *p, const sim_op_power_item *it, int n, double limit_w) {
  if (sim_op_power_mean_w(p, it, n, p->f_max_mhz) <= limit_w) return p->f_max_mhz;
  double lo = SIM_OP_POWER_MIN_SHARE * p->f_max_mhz, hi = p->f_max_mhz;
  if (sim_op_power_mean_w(p, it, n, lo) > limit_w) return lo;
  for (int i = 0; i < OP_POWER_BISECT; i++) {
    double mid = 0.5 * (lo + hi);
    *(sim_op_power_mean_w(p, it, n, mid) > limit_w ? &hi : &lo) = mid;
  }
  return lo;
}
