/* tacosim — plan, simulate and compare training iterations.
 *
 *   tacosim plan PLAN.json
 *   tacosim simulate PLAN.json [--calibration FILE] [--json OUT] [--csv OUT] [--trace OUT] [--mode full|reduced]
 *   tacosim compare PREDICTED.json MEASURED.json
 *   tacosim derive-calibration --transport nvlink|shm|socket OUT.json
 *   tacosim search --model M --cluster C [options]   (sim/search_main.c)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search.h"
#include "sim.h"
#include "sim_infer.h"

#ifndef TACOSIM_CALIBRATION_DIR
#define TACOSIM_CALIBRATION_DIR "calibration"
#endif

static int fail(const ts_err *e) {
  fprintf(stderr, "tacosim: %s\n", e->msg);
  return ts_exit_status(e);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "tacosim: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(tacosim --help lists the commands)\n");
  return TS_EXIT_BAD_INPUT;
}

static void help(FILE *out) {
  fprintf(out,
          "usage: tacosim COMMAND [ARGS]\n"
          "\n"
          "commands:\n"
          "  plan PLAN.json              summary of a plan: op counts per rank, bytes per traffic class\n"
          "                              with and without the codec, memory per GPU against HBM\n"
          "  simulate PLAN.json          predict one training iteration on SimGrid; an inference plan\n"
          "                              (\"kind\": \"inference\") gets TTFT, TPOT, tokens/s, memory (weights +\n"
          "                              KV cache) and the codec's speedups over plain NCCL, from an analytic\n"
          "                              walk over the same costs (sim/INFERENCE.md; --calibration, --json and\n"
          "                              --csv apply; tacorun execute runs the same plan on GPUs, validation in\n"
          "                              experiments/infer/README.md)\n"
          "      --calibration FILE      costs (default: the measured " TACOSIM_CALIBRATION_DIR "/h200-<transport>.json\n"
          "                              of the cluster's intra-node fabric when present, else the derived\n"
          "                              h200-derived.json (NVLink), h200-shm-derived.json, h200-socket-derived.json)\n"
          "      --transfer roofline|off a calibration measured on another GPU than the cluster's is moved\n"
          "                              onto that GPU's ceilings (default roofline: sim/README.md), or\n"
          "                              refused (off); the report names the GPU the costs were measured on\n"
          "      --mode full|reduced     every rank, or one per pipeline stage (default reduced)\n"
          "      --overlap sm-wait|ideal a collective reaching a GPU busy with a compute kernel starts when\n"
          "                              the kernel ends (default, as measured), or runs beside it (ideal)\n"
          "      --clock on|off          with a calibration that has a clock section: compute runs at the\n"
          "                              clocks its duty allows (the GPU leaves its power cap when it idles\n"
          "                              often; up to 4 simulations to a fixed point; default on), or at the\n"
          "                              calibrated back-to-back times (off); without the section: no effect\n"
          "      --json OUT --csv OUT    result files (the schema tacorun execute also writes)\n"
          "      --trace OUT             Chrome trace of the iteration (opens in Perfetto)\n"
          "  compare PRED.json MEAS.json side by side, with the error of each figure\n"
          "  ops PLAN.json [--calibration FILE]\n"
          "                              each op's simulated cost on rank 0, summed by op name (the layout\n"
          "                              of tacorun execute's per-op profile)\n"
          "  derive-calibration --transport nvlink|shm|socket OUT.json\n"
          "                              write the roofline calibration derived from the measured\n"
          "                              H200 figures (labelled \"derived\")\n"
          "  derive-calibration --gpu NAME [--from FILE] [--link-gbps X] OUT.json\n"
          "                              write FILE (default " TACOSIM_CALIBRATION_DIR "/h200-<transport>.json,\n"
          "                              measured) transferred onto the catalogue GPU NAME (topologies/gpus/),\n"
          "                              NVLink collectives at X GB/s per GPU (default: NAME's NVLink figure);\n"
          "                              what simulate does by itself for a cluster of that GPU\n"
          "  search --model M --cluster C [options]\n"
          "                              layout search: every valid layout and codec policy, pruned by\n"
          "                              memory and a closed-form estimate, the best simulated in parallel\n"
          "                              (tacosim search --help lists the options)\n"
          "\n"
          "Models and clusters named in a plan come from the zoo folders compiled in, or from\n"
          "$TACOSIM_MODELS_DIR and $TACOSIM_TOPOLOGIES_DIR when set (a copy of the binary elsewhere).\n"
          "Bad input exits with status 2 and names the file, the field and the reason.\n"
          "A failure of the simulator itself (its ranks deadlock: a rank never finishes an op) exits\n"
          "with status 3 and a message \"simulator failure: ...\" naming the rank and the op.\n");
}

static int parse_transfer(const char *v, sim_transfer_mode *m) {
  if (strcmp(v, "roofline") == 0) *m = SIM_TRANSFER_ROOFLINE;
  else if (strcmp(v, "off") == 0) *m = SIM_TRANSFER_OFF;
  else return -1;
  return 0;
}

static int cmd_plan(int argc, char **argv) {
  if (argc != 2) return usage_error("plan: expected one plan file%s", "");
  static plan p;
  ts_err e = {0};
  bool inference = false;
  if (plan_file_is_inference(argv[1], &inference, &e)) return fail(&e);
  if (inference) {
    static plan_infer pi;
    if (plan_infer_load(argv[1], NULL, NULL, &pi, &e) || plan_infer_print_summary(&pi, stdout, &e)) return fail(&e);
    return 0;
  }
  if (plan_load(argv[1], NULL, NULL, &p, &e) || plan_print_summary(&p, stdout, &e)) return fail(&e);
  return 0;
}

/* An inference plan: the analytic prefill/decode walk of sim_infer.c. */
static int simulate_inference(const char *plan_path, const char *cal_path, sim_transfer_mode transfer,
                              const char *json, const char *csv) {
  static plan_infer p;
  static plan fwd;
  schema_calibration cal;
  ts_err e = {0};
  if (plan_infer_load(plan_path, NULL, NULL, &p, &e)) return fail(&e);
  plan_infer_forward_plan(&p, 1, &fwd);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &fwd.cluster, transfer, &cal, &src, &e)) return fail(&e);
  sim_infer_result r;
  int rc = sim_infer_predict(&p, &cal, stderr, &r, &e);
  if (rc == 0) {
    sim_infer_print(&p, &r, stdout);
    if ((json && sim_infer_save_json(&p, &r, json, &e)) || (csv && sim_infer_save_csv(&p, &r, csv, &e))) rc = -1;
  }
  schema_calibration_free(&cal);
  return rc ? fail(&e) : 0;
}

static int cmd_simulate(int argc, char **argv) {
  const char *plan_path = NULL, *cal_path = NULL, *json = NULL, *csv = NULL, *trace = NULL;
  sim_mode mode = SIM_MODE_REDUCED;
  sim_transfer_mode transfer = SIM_TRANSFER_ROOFLINE;
  bool ideal_overlap = false, clock_off = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "--calibration") == 0 && has_value)
      cal_path = argv[++i];
    else if (strcmp(a, "--transfer") == 0 && has_value) {
      if (parse_transfer(argv[++i], &transfer)) return usage_error("simulate: --transfer: \"%s\" is not one of roofline, off", argv[i]);
    } else if (strcmp(a, "--clock") == 0 && has_value) {
      const char *v = argv[++i];
      if (strcmp(v, "off") == 0)
        clock_off = true;
      else if (strcmp(v, "on") == 0)
        clock_off = false;
      else
        return usage_error("simulate: --clock: \"%s\" is not one of on, off", v);
    } else if (strcmp(a, "--overlap") == 0 && has_value) {
      const char *v = argv[++i];
      if (strcmp(v, "ideal") == 0)
        ideal_overlap = true;
      else if (strcmp(v, "sm-wait") == 0)
        ideal_overlap = false;
      else
        return usage_error("simulate: --overlap: \"%s\" is not one of sm-wait, ideal", v);
    }
    else if (strcmp(a, "--json") == 0 && has_value)
      json = argv[++i];
    else if (strcmp(a, "--csv") == 0 && has_value)
      csv = argv[++i];
    else if (strcmp(a, "--trace") == 0 && has_value)
      trace = argv[++i];
    else if (strcmp(a, "--mode") == 0 && has_value) {
      const char *m = argv[++i];
      if (strcmp(m, "full") == 0)
        mode = SIM_MODE_FULL;
      else if (strcmp(m, "reduced") == 0)
        mode = SIM_MODE_REDUCED;
      else
        return usage_error("simulate: --mode: \"%s\" is not one of full, reduced", m);
    } else if (a[0] == '-' && a[1] == '-')
      return usage_error("simulate: unknown option or missing value: %s", a);
    else if (!plan_path)
      plan_path = a;
    else
      return usage_error("simulate: unexpected argument %s", a);
  }
  if (!plan_path) return usage_error("simulate: expected a plan file%s", "");
  static plan p;
  schema_calibration cal;
  ts_err e = {0};
  bool inference = false;
  if (plan_file_is_inference(plan_path, &inference, &e)) return fail(&e);
  if (inference) {
    if (trace) return usage_error("simulate: --trace: an inference plan is predicted analytically, without a trace%s", "");
    return simulate_inference(plan_path, cal_path, transfer, json, csv);
  }
  if (plan_load(plan_path, NULL, NULL, &p, &e)) return fail(&e);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &p.cluster, transfer, &cal, &src, &e)) return fail(&e);
  sim_options o = {.mode = mode, .cal = &cal, .record_ops = trace != NULL, .warn = stderr,
                   .progress = isatty(STDERR_FILENO) ? stderr : NULL, .ideal_overlap = ideal_overlap, .clock_off = clock_off};
  schema_result r;
  int rc = sim_run(&p, &o, &r, &e);
  if (rc == 0) {
    char line[256];
    sim_cost_source_line(&src, line, sizeof line);
    if (schema_result_add_note(&r, line)) rc = ts_fail_sys(&e, "out of memory");
  }
  if (rc == 0) {
    sim_print_result(&r, &p, stdout);
    if ((json && schema_result_save_json(&r, json, &e)) || (csv && schema_result_save_csv(&r, csv, &e)) ||
        (trace && sim_write_trace(&r, trace, &e)))
      rc = -1;
  }
  schema_result_free(&r);
  schema_calibration_free(&cal);
  return rc ? fail(&e) : 0;
}

static int cmd_ops(int argc, char **argv) {
  const char *plan_path = NULL, *cal_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--calibration") == 0 && i + 1 < argc)
      cal_path = argv[++i];
    else if (argv[i][0] == '-')
      return usage_error("ops: unknown option or missing value: %s", argv[i]);
    else if (!plan_path)
      plan_path = argv[i];
    else
      return usage_error("ops: unexpected argument %s", argv[i]);
  }
  if (!plan_path) return usage_error("ops: expected a plan file%s", "");
  static plan p;
  schema_calibration cal;
  ts_err e = {0};
  if (plan_load(plan_path, NULL, NULL, &p, &e)) return fail(&e);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &p.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e)) return fail(&e);
  int rc = sim_print_op_costs(&p, &cal, stdout, &e);
  schema_calibration_free(&cal);
  return rc ? fail(&e) : 0;
}

static void compare_row(const char *name, double pred, double meas, const char *unit) {
  if (meas != 0)
    printf("%-18s %14.6g %14.6g  %-6s %+8.2f%%\n", name, pred, meas, unit, 100.0 * (pred - meas) / meas);
  else
    printf("%-18s %14.6g %14.6g  %-6s %9s\n", name, pred, meas, unit, pred == 0 ? "0" : "n/a");
}

static int cmd_compare(int argc, char **argv) {
  if (argc != 3) return usage_error("compare: expected PREDICTED.json MEASURED.json%s", "");
  schema_result a, b;
  ts_err e = {0};
  if (schema_result_load(argv[1], &a, &e)) return fail(&e);
  if (schema_result_load(argv[2], &b, &e)) {
    schema_result_free(&a);
    return fail(&e);
  }
  printf("%-18s %14s %14s  %-6s %9s\n", "", a.source == SCHEMA_SOURCE_SIMULATED ? "predicted" : "measured",
         b.source == SCHEMA_SOURCE_SIMULATED ? "predicted" : "measured", "", "error");
  if (a.kind[0] || b.kind[0]) {
    compare_row("ttft", a.ttft_s, b.ttft_s, "s");
    compare_row("tpot", a.tpot_s, b.tpot_s, "s");
  }
  compare_row("iteration_time", a.iteration_time_s, b.iteration_time_s, "s");
  compare_row("tokens_per_s", a.tokens_per_s, b.tokens_per_s, "tok/s");
  compare_row("tflops_per_gpu", a.tflops_per_gpu, b.tflops_per_gpu, "TF/s");
  compare_row("mfu", a.mfu, b.mfu, "");
  compare_row("memory_per_gpu", a.memory_per_gpu_bytes, b.memory_per_gpu_bytes, "B");
  compare_row("compute", a.breakdown.compute_s, b.breakdown.compute_s, "s");
  compare_row("tp_exposed", a.breakdown.tp_exposed_s, b.breakdown.tp_exposed_s, "s");
  compare_row("pp_exposed", a.breakdown.pp_exposed_s, b.breakdown.pp_exposed_s, "s");
  compare_row("dp_exposed", a.breakdown.dp_exposed_s, b.breakdown.dp_exposed_s, "s");
  compare_row("codec", a.breakdown.codec_s, b.breakdown.codec_s, "s");
  compare_row("bubble", a.breakdown.bubble_s, b.breakdown.bubble_s, "s");
  if (strcmp(a.plan, b.plan) != 0) printf("note: the plans differ (%s vs %s)\n", a.plan, b.plan);
  const schema_result *both[2] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    const schema_result *r = both[i];
    if (!r->clock_passes || !r->n_ranks) continue;
    double duty = 0, gemm = 0, mem = 0;
    for (int k = 0; k < r->n_ranks; k++)
      duty += r->ranks[k].clock_duty, gemm += r->ranks[k].clock_gemm_speed, mem += r->ranks[k].clock_mem_speed;
    printf("note: %s: clock model, compute duty %.3f, GEMM speed x%.3f, memory-bound x%.3f (means over its ranks), "
           "%d simulations\n",
           i ? "second" : "first", duty / r->n_ranks, gemm / r->n_ranks, mem / r->n_ranks, r->clock_passes);
  }
  if (b.source == SCHEMA_SOURCE_MEASURED)
    printf("measured: %d iterations after %d warm-up, min %.6g median %.6g max %.6g s on %s (%s)\n", b.iterations,
           b.warmup, b.min_s, b.median_s, b.max_s, b.machine.gpu, b.machine.transport);
  schema_result_free(&a);
  schema_result_free(&b);
  return 0;
}

static int cmd_derive(int argc, char **argv) {
  const char *transport = "nvlink", *out = NULL, *gpu = NULL, *from = NULL;
  double link_gbps = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc)
      transport = argv[++i];
    else if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc)
      gpu = argv[++i];
    else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
      from = argv[++i];
    else if (strcmp(argv[i], "--link-gbps") == 0 && i + 1 < argc) {
      char *end;
      link_gbps = strtod(argv[++i], &end);
      if (*end || !(link_gbps > 0)) return usage_error("derive-calibration: --link-gbps: \"%s\" is not a positive number", argv[i]);
    } else if (argv[i][0] == '-')
      return usage_error("derive-calibration: unknown option %s", argv[i]);
    else if (!out)
      out = argv[i];
    else
      return usage_error("derive-calibration: unexpected argument %s", argv[i]);
  }
  if (!out) return usage_error("derive-calibration: expected an output file%s", "");
  schema_calibration c;
  ts_err e = {0};
  if (gpu) {
    static char def[600];
    if (!from) {
      snprintf(def, sizeof def, "%s/h200-%s.json", TACOSIM_CALIBRATION_DIR, transport);
      from = def;
    }
    if (sim_derive_for_gpu(from, gpu, link_gbps, &c, &e)) return fail(&e);
  } else if (sim_derive_calibration(transport, &c, &e))
    return fail(&e);
  int rc = schema_calibration_save(&c, out, &e);
  schema_calibration_free(&c);
  return rc ? fail(&e) : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    help(stderr);
    return TS_EXIT_BAD_INPUT;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    help(stdout);
    return 0;
  }
  if (strcmp(cmd, "plan") == 0) return cmd_plan(argc - 1, argv + 1);
  if (strcmp(cmd, "simulate") == 0) return cmd_simulate(argc - 1, argv + 1);
  if (strcmp(cmd, "compare") == 0) return cmd_compare(argc - 1, argv + 1);
  if (strcmp(cmd, "ops") == 0) return cmd_ops(argc - 1, argv + 1);
  if (strcmp(cmd, "derive-calibration") == 0) return cmd_derive(argc - 1, argv + 1);
  if (strcmp(cmd, "search") == 0) return sim_search_main(argc - 1, argv + 1);
  return usage_error("unknown command \"%s\"", cmd);
}
