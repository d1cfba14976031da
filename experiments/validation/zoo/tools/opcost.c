/* opcost.c — the simulator's price of every compute op of rank 0's program (sim_compute_s), one
 * line per op: "NAME<TAB>us". For comparing with the measured per-op profile
 * (tools/cmpops.py). Build (from the repository root, after a CPU build in build/):
 *   gcc -O1 -o opcost experiments/validation/zoo/tools/opcost.c -Isim -Iplan -Imodels -Ischema -Icommon \
 *       -Itopologies build/sim/libts_sim.a build/plan/libts_plan.a build/models/libts_models.a \
 *       build/topologies/libts_topo.a build/schema/libts_schema.a build/common/libts_common.a \
 *       $(pkg-config --libs simgrid) -ljansson -lm
 * usage: opcost PLAN.json CALIBRATION.json > ops.txt */
#include <stdio.h>
#include <string.h>
#include "sim_costs.h"
#include "plan.h"
int main(int argc, char **argv) {
  plan p; ts_err e = {0}; schema_calibration c; sim_costs costs;
  if (plan_load(argv[1], NULL, NULL, &p, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
  if (schema_calibration_load(argv[2], &c, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
  if (sim_costs_init(&costs, &p, &c, NULL, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
  plan_program prog = {0};
  if (plan_build_program(&p, 0, &prog, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE) continue;
    double s; if (sim_compute_s(&costs, op, &s, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    char name[128]; plan_op_name(&p, op, name, sizeof name);
    printf("%s\t%.3f\n", name, s * 1e6);
  }
  return 0;
}
