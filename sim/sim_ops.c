/* sim_ops.c — `tacosim ops`: the cost the simulator gives each op of rank 0's
 * program, summed over the iteration by op name (layer and micro-batch
 * stripped), in the layout of the executor's per-op profile
 * (experiments/validation/measured/NAME.ops.txt), so the two can be set side by
 * side. Communication ops are listed at their stand-alone calibrated time
 * (codec included), not their exposed time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_costs.h"

typedef struct {
  char name[96];
  int count;
  double s;
} op_sum;

/* "layer3.mb5.bwd.fc1" -> "bwd.fc1"; "mb0.fwd.embedding.allreduce" -> "fwd.embedding.allreduce" */
static const char *strip_prefix(const char *name) {
  for (;;) {
    if (strncmp(name, "layer", 5) == 0 || strncmp(name, "mb", 2) == 0 || strncmp(name, "chunk", 5) == 0) {
      const char *dot = strchr(name, '.');
      if (!dot) return name;
      name = dot + 1;
    } else
      return name;
  }
}

static int cmp_time_desc(const void *a, const void *b) {
  double x = ((const op_sum *)a)->s, y = ((const op_sum *)b)->s;
  return x < y ? 1 : x > y ? -1 : 0;
}

int sim_print_op_costs(const plan *p, const schema_calibration *cal, FILE *out, ts_err *e) {
  static sim_costs c;
  if (sim_costs_init(&c, p, cal, stderr, e)) return -1;
  plan_program prog = {0};
  if (plan_build_program(p, 0, &prog, e)) return -1;
  int n = 0, cap = 256, rc = 0;
  op_sum *sums = calloc((size_t)cap, sizeof *sums);
  double total_compute = 0;
  for (int i = 0; i < prog.n && sums && rc == 0; i++) {
    const plan_op *op = &prog.ops[i];
    double s = 0;
    if (op->kind == PLAN_OP_COMPUTE) {
      rc = sim_compute_s(&c, op, &s, e);
      total_compute += s;
    } else {
      int per_node, nodes = plan_moe_ep_nodes(p, &per_node);
      int nranks = op->group == PLAN_GROUP_TP        ? p->tp
                   : op->group == PLAN_GROUP_DP      ? plan_dp_shards(p)
                   : op->group == PLAN_GROUP_CP      ? plan_cp(p)
                   : op->group == PLAN_GROUP_EP_RAIL ? nodes
                   : op->group == PLAN_GROUP_EP_NODE ? per_node
                   : op->group == PLAN_GROUP_EP      ? p->ep
                   : op->group == PLAN_GROUP_ETP     ? (p->etp > 0 ? p->etp : p->tp)
                   : op->group == PLAN_GROUP_EDP     ? plan_edp(p)
                                                     : 2,
          inc = 0;
      sim_codec_cost cc;
      rc = sim_coll_calibrated_s(&c, op, nranks, &s, &inc, e);
      if (rc == 0 && !inc && (rc = sim_codec_cost_of(&c, op, nranks, &cc, e)) == 0) s += cc.total_us * 1e-6;
    }
    char full[96];
    plan_op_name(p, op, full, sizeof full);
    const char *name = strip_prefix(full);
    int j = 0;
    while (j < n && strcmp(sums[j].name, name) != 0) j++;
    if (j == n) {
      if (n == cap) {
        op_sum *bigger = realloc(sums, sizeof *sums * (size_t)(cap *= 2));
        if (!bigger) {
          rc = ts_fail_sys(e, "out of memory");
          break;
        }
        sums = bigger;
      }
      memset(&sums[n], 0, sizeof sums[n]);
      snprintf(sums[n++].name, sizeof sums[0].name, "%s", name);
    }
    sums[j].count++;
    sums[j].s += s;
  }
  plan_program_free(&prog);
  if (!sums) return ts_fail_sys(e, "out of memory");
  if (rc == 0) {
    qsort(sums, (size_t)n, sizeof *sums, cmp_time_desc);
    fprintf(out, "# op count total_ms mean_us pct_of_compute (rank 0, predicted, %s)\n", cal->path);
    for (int j = 0; j < n; j++)
      fprintf(out, "%s %d %.4f %.2f %.3f\n", sums[j].name, sums[j].count, sums[j].s * 1e3, sums[j].s / sums[j].count * 1e6,
              100 * sums[j].s / total_compute);
    fprintf(out, "# compute total %.4f ms\n", total_compute * 1e3);
  }
  free(sums);
  return rc;
}
