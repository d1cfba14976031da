/* tacosim — plan, simulate and compare training iterations.
 *
 * Each command's help is one static string next to its option parser
 * (plan_usage, simulate_usage, ...; search's in sim/search_main.c); `tacosim
 * COMMAND --help` prints it, and `tacosim --help` lists the commands and
 * prints every usage from the same table, so the two cannot drift.
 * tests/test_cli.c runs every command with --help and checks that each option
 * its parser accepts is in the text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search.h"
#include "sim.h"
#include "sim_infer.h"
#include "sim_inflight.h"
#include "ts_file.h"

#ifndef TACOSIM_CALIBRATION_DIR
#define TACOSIM_CALIBRATION_DIR "calibration"
#endif

static int fail(const ts_err *e) {
  fprintf(stderr, "tacosim: %s\n", e->msg);
  return ts_exit_status(e);
}

/* A command's own error: names the command and where its options are listed. */
static int command_error(const char *cmd, const char *fmt, const char *arg) {
  fprintf(stderr, "tacosim: %s: ", cmd);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(tacosim %s --help lists its options)\n", cmd);
  return TS_EXIT_BAD_INPUT;
}

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* An on|off option's value into *off: 0, or the bad-input status with the option named. */
/* An option of two values: *second = whether v is the second. */
static int parse_choice(const char *cmd, const char *opt, const char *v, const char *first, const char *second,
                        bool *is_second) {
  if (strcmp(v, first) == 0 || strcmp(v, second) == 0) {
    *is_second = strcmp(v, second) == 0;
    return 0;
  }
  fprintf(stderr, "tacosim: %s: %s: \"%s\" is not one of %s, %s\n(tacosim %s --help lists its options)\n", cmd, opt,
          v, first, second, cmd);
  return TS_EXIT_BAD_INPUT;
}

static int parse_on_off(const char *cmd, const char *opt, const char *v, bool *off) {
  return parse_choice(cmd, opt, v, "on", "off", off);
}

/* Folders the names in plans are looked up in, and the calibration folder, as this build has them. */
static void print_folders(FILE *out) {
  fprintf(out,
          "\nfolders of this build:\n"
          "  models        %s   ($TACOSIM_MODELS_DIR replaces it when set)\n"
          "  clusters      %s   ($TACOSIM_TOPOLOGIES_DIR replaces it when set)\n"
          "  calibrations  %s\n"
          "A model or cluster name (in a plan, --model, --cluster) is NAME.json in its folder; a path is read as\n"
          "given. Input files over %lu MiB are refused. Bad input exits with status 2 naming the file, the field\n"
          "and the reason. A failure of the simulator itself (its ranks deadlock, an op priced below the GPU's\n"
          "ceiling) exits with status 3 and a message \"simulator failure: ...\" naming the rank or the op.\n",
          model_zoo_dir(), topo_zoo_dir(), TACOSIM_CALIBRATION_DIR, (unsigned long)(TS_MAX_INPUT_BYTES >> 20));
}

/* `tacosim CMD --help` (or -h) anywhere among CMD's arguments: its usage on stdout. */
static int wants_help(int argc, char **argv, const char *usage) {
  for (int i = 1; i < argc; i++)
    if (is_help(argv[i])) {
      fputs(usage, stdout);
      print_folders(stdout);
      return 1;
    }
  return 0;
}

/* --alloc-reserve, as `tacosim plan` and `tacosim simulate` take it (training plans) */
#define ALLOC_RESERVE_HELP                                                                                   \
  "  --alloc-reserve F       a caching allocator's reserve beyond the live tensors at the memory peak, as a\n" \
  "                          fraction F in [0, 1) of the activations, in the overhead (the plan's\n"            \
  "                          \"alloc_reserve\", which this sets over the file's; default the file's, else\n"    \
  "                          " PLAN_DEFAULT_ALLOC_RESERVE_TEXT ", as PyTorch with expandable segments; measured\n"          \
  "                          0.22-0.73 under its default allocator: plan/README.md \"Memory per GPU\")\n"

static const char plan_usage[] =
    "usage: tacosim plan PLAN.json [--alloc-reserve F]\n"
    "  What a plan does, without simulating it: op counts per rank, bytes per traffic class with and\n"
    "  without the codec, memory per GPU against the GPU's HBM (training plans); weights and KV cache per\n"
    "  GPU (inference plans, \"kind\": \"inference\").\n"
    "options:\n"
    ALLOC_RESERVE_HELP
    "reads:  PLAN.json (plan/README.md), the model and cluster it names\n"
    "writes: the summary on standard output; nothing else\n";

static const char simulate_usage[] =
    "usage: tacosim simulate PLAN.json [options]\n"
    "  Predicts one training iteration on SimGrid, every rank's op program on the cluster's network with\n"
    "  op costs from a calibration file. An inference plan (\"kind\": \"inference\") gets TTFT, TPOT,\n"
    "  tokens/s, memory (weights + KV cache) and the codec's speedups over plain NCCL, from an analytic walk\n"
    "  over the same costs (sim/INFERENCE.md; --calibration, --json and --csv apply, --trace does not).\n"
    "  An inference plan with an \"inflight\" object (in-flight batching: max_batch, default trtllm-bench's\n"
    "  heuristic capped by the sequences whose KV cache fits; max_num_tokens, default the heuristic's;\n"
    "  kv_cache_fraction 0.90 of the HBM left after the weights, the runtime, a profiling forward of\n"
    "  max_num_tokens tokens and the CUDA graphs; cuda_graph_max_batch 128 (0: no graphs); moe_max_num_tokens,\n"
    "  default max_num_tokens x tp under attention_dp, else max_num_tokens; tokens_per_block 32; requests,\n"
    "  default none; no chunked prefill) gets the steady state's output tokens/s, TPOT and TTFT from its\n"
    "  engine steps' prices, and with requests N the finite run of N requests queued at once, step by step\n"
    "  (sim/INFERENCE.md \"In-flight batching\"; eager only; the resolved settings and the options go into\n"
    "  the result).\n"
    "  An inference plan of an MoE model may say layout.attention_dp true (default false: TensorRT-LLM's\n"
    "  enable_attention_dp, SGLang's DP attention: each of the tp GPUs attends over its own share of the\n"
    "  requests with the whole attention weights; tp >= 2) and layout.ep (default 1; > 1 needs attention_dp):\n"
    "  the routed experts split ep ways by expert and tp / ep within one, the tokens all-gathered before them and\n"
    "  reduce-scattered after; in flight max_batch and max_num_tokens are a GPU's (sim/INFERENCE.md \"Attention\n"
    "  data parallelism and expert parallelism\"; tacorun execute refuses both).\n"
    "  A training plan's layout.fp8 (tensorwise | delayed | mxfp8; default null, BF16) runs its qkv, attn_out,\n"
    "  fc1 and fc2 GEMMs in FP8 with Transformer Engine's casts (plan/README.md \"FP8 training\"); without a\n"
    "  \"gemm_fp8\" table in the calibration they are the BF16 times moved to the FP8 peak, not measured (warned).\n"
    "  mxfp8 GEMMs are those per-tensor FP8 prices times the GPU catalogue's measured mxfp8_gemm_ratio.\n"
    "  FP8 training is priced by the simulator only: tacorun execute refuses such a plan.\n"
    "options:\n"
    "  --calibration FILE      op costs (default: " TACOSIM_CALIBRATION_DIR "/<gpu>-<transport>.json, a file\n"
    "                          measured on the cluster's own GPU (its catalogue name in lower case, e.g.\n"
    "                          h100-sxm-nvlink.json) when present, else h200-<transport>.json, the H200's measured\n"
    "                          file of the cluster's intra-node fabric (nvlink, shm, socket; pcie reads nvlink),\n"
    "                          else its derived h200-derived.json, h200-shm-derived.json or h200-socket-derived.json)\n"
    "  --transfer roofline|mamf|off\n"
    "                          costs measured on another GPU than the cluster's are moved onto its ceilings\n"
    "                          (default roofline: datasheet peaks, sim/README.md \"Calibration transfer\"), onto\n"
    "                          its measured maximum achievable matmul rate instead of the peak (mamf: both\n"
    "                          GPUs need bf16_mamf_tflops in the catalogue, else exit 2), or refused (off,\n"
    "                          exit 2 naming both GPUs); the result names where its costs come from\n"
    "  --mode full|reduced     every rank, or one rank per pipeline stage (default reduced)\n"
    "  --overlap sm-wait|ideal a collective reaching a GPU busy with a compute kernel starts when the kernel\n"
    "                          ends (sm-wait, the default, as measured), or runs beside it (ideal)\n"
    "  --clock on|off          the clock model (--clock-model) on (the default), or off: a training plan's\n"
    "                          compute at the calibrated back-to-back times (as --clock-model off; no effect\n"
    "                          on an inference plan)\n"
    "  --clock-model power|duty|off\n"
    "                          power: each window's clock is the highest its mix of GEMM, other and idle time\n"
    "                          allows under the power cap, from the calibration's fitted \"power\" section\n"
    "                          (sim/README.md \"The power-cap clock\"; exit 2 without the section; an inference\n"
    "                          plan's prefill runs at its op mix's clock, under the burst profile as extra\n"
    "                          power); duty: the speeds of the GPU's idle share from the \"clock\" section (no\n"
    "                          effect without it; inference: the burst profile alone); off: calibrated times.\n"
    "                          Training runs up to 4 simulations to a fixed point (default: power when the\n"
    "                          calibration has a power section, else duty)\n"
    "                          No shipped calibration has a power section: the one measured (one H100,\n"
    "                          2026-12-07) is refused by its fit, so power is unfinished and duty runs.\n"
    "  --collapse on|off       the flows of a cross-node ring or tree phase that no other flow can meet on\n"
    "                          a link run as one flow per kind (bytes, route), which ends when each would:\n"
    "                          the same prediction with fewer flows (on, the default; sim/README.md), or\n"
    "                          every edge as its own flow (off); the result's notes say which\n"
    "  --alltoall flows|analytic\n"
    "                          a cross-node all-to-all (the expert dispatch and combine) runs as every ordered\n"
    "                          pair's flow on the platform (flows, the default), or, APPROXIMATE, takes the\n"
    "                          time max-min sharing gives it alone on its links, latency + bytes x max over\n"
    "                          links of flows / bandwidth, without flows (analytic: much faster where EP\n"
    "                          crosses nodes; the all-to-all neither slows nor is slowed by the DP and\n"
    "                          pipeline traffic on those links; error measured in experiments/RESULTS-search.md)\n"
    "  --local-queue on|off    the compute streams, and the streams whose ops all stay inside a node, run on\n"
    "                          the simulator's own event queue (on, the default: the same prediction with far\n"
    "                          fewer SimGrid calls; sim/README.md \"Speed\"), or each stream as a SimGrid\n"
    "                          actor (off)\n"
    "  --decode eager|graph    inference plans: the decode steps launched kernel by kernel (eager, the\n"
    "                          default, as tacorun execute runs them), or each step one CUDA graph launch\n"
    "                          (graph, as tacorun execute --decode-graph; TP 1, PP 1; needs the calibration's\n"
    "                          host.graph_gap_us: each GEMM and decode-attention launch priced that much\n"
    "                          below its stream-timed table, sim/INFERENCE.md)\n"
    "  --prefill-clock on|off  inference plans whose calibration has a burst profile (clock.burst): the TTFT\n"
    "                          as tacorun execute times it, its prefills' GEMMs and attention at the\n"
    "                          profile's speed since the GPU left idle (on, the default: the plan starts\n"
    "                          from an idle GPU, as only the first plan of a tacorun execute process\n"
    "                          after idle does), or every prefill at the tables' sustained speed (off: the\n"
    "                          GPU already ran, e.g. a later plan of the same process); without the\n"
    "                          profile: no effect\n"
    "  --prefill-power on|off  inference plans whose calibration has an \"op_power\" section (each op class's\n"
    "                          power and clock back to back, calibration/merge_op_power.py): the prefill's\n"
    "                          ops at the one clock their mix allows under the power cap, each table moved\n"
    "                          from the clock it was timed at (on, the default; sim/INFERENCE.md), or at the\n"
    "                          tables' speed (off); without the section, or under --clock-model power or off:\n"
    "                          no effect\n"
    ALLOC_RESERVE_HELP
    "  --json OUT              write the result (schema/result.h, the schema tacorun execute also writes;\n"
    "                          default: not written)\n"
    "  --csv OUT               write the result as gnuplot columns (default: not written)\n"
    "  --trace OUT             write a Chrome trace of the iteration, opens in Perfetto (default: not written;\n"
    "                          training plans only)\n"
    "  --trace-ranks LIST      the ranks the trace records: \"all\", \"stages\" (tp 0, dp 0 of each stage) or\n"
    "                          ranks and ranges, e.g. 0,8,16-23 (default: all up to 256 GPUs, stages above:\n"
    "                          a full-mode trace of every rank of GPT-3 175B on 1,024 GPUs is over 1 GB,\n"
    "                          Perfetto opens a few hundred MB; reduced mode records its simulated ranks)\n"
    "reads:  PLAN.json, the model and cluster it names, the calibration\n"
    "writes: the prediction on standard output; OUT of --json, --csv, --trace; progress on standard error\n"
    "        when it is a terminal\n";

static const char compare_usage[] =
    "usage: tacosim compare PREDICTED.json MEASURED.json\n"
    "  Two results side by side (tacosim simulate --json, tacorun execute --json; either order, or two of\n"
    "  one kind), with the error of each figure relative to the second file.\n"
    "options: none besides --help.\n"
    "reads:  the two result files (schema/result.h; unknown fields are refused)\n"
    "writes: the table on standard output\n";

static const char ops_usage[] =
    "usage: tacosim ops PLAN.json [--calibration FILE]\n"
    "  Each op's simulated cost on rank 0, summed by op name (the layout of tacorun execute's per-op\n"
    "  profile, --ops-csv). A training plan: its iteration. An inference plan: one prefill (\"prefill.\"\n"
    "  ops, at the tables' sustained speed: the prefill clock of simulate's TTFT is not applied) and one\n"
    "  eager decode step (\"decode.\" ops, its attention the mean over the steps), each op summed over the\n"
    "  layers; communication at its calibrated time; not for layout.attention_dp or in-flight plans.\n"
    "options:\n"
    "  --calibration FILE      op costs (default: as tacosim simulate: " TACOSIM_CALIBRATION_DIR "/<gpu>-<transport>.json\n"
    "                          measured on the cluster's GPU, else h200-<transport>.json, else the derived file)\n"
    "reads:  PLAN.json, the model and cluster it names, the calibration\n"
    "writes: the table on standard output\n";

static const char derive_usage[] =
    "usage: tacosim derive-calibration [--transport nvlink|shm|socket] [--gpu NAME [--from FILE] [--link-gbps X]] OUT.json\n"
    "  Without --gpu: writes the roofline calibration derived from the H200's published and measured\n"
    "  figures (labelled \"derived\": true), the fallback when no measured file is at hand.\n"
    "  With --gpu: writes FILE, a measured calibration, transferred onto the catalogue GPU NAME\n"
    "  (topologies/gpus/NAME.json) as tacosim simulate does for a cluster of that GPU (sim/README.md,\n"
    "  \"Calibration transfer\"; labelled derived, with both GPUs and the method in its notes).\n"
    "options:\n"
    "  --transport nvlink|shm|socket   the intra-node fabric (default nvlink)\n"
    "  --gpu NAME              the target GPU from the catalogue (default: none, the H200 roofline file)\n"
    "  --from FILE             the measured calibration to transfer (default " TACOSIM_CALIBRATION_DIR "/h200-<transport>.json)\n"
    "  --link-gbps X           the target's intra-node GB/s per GPU (default: NAME's NVLink figure)\n"
    "reads:  FILE and the GPU catalogue with --gpu; nothing without\n"
    "writes: OUT.json (the calibration schema, schema/calibration.h)\n";

static const char fit_usage[] =
    "usage: tacosim calibration-fit FILE.json\n"
    "  The power-cap clock model's fit of a calibration's \"power\" section (schema/calibration.h; the loader\n"
    "  makes the same fit): P_c(f) = s + d_c (f / f_max)^a per class (gemm, mem), idle time at idle_w, the\n"
    "  exponent a the best of 1 .. 4 by 0.05 and (s, d_gemm, d_mem) linear least squares; the speed laws\n"
    "  (f / f_ref)^b against the back-to-back samples' clocks; then each sample: its power against the fit's at\n"
    "  its own clock (the residual), the clock the model gives its mix under the cap, its speeds against the laws'.\n"
    "  A section the fit cannot determine (fewer than 4 samples that ran kernels, a singular system, a negative\n"
    "  dynamic power, no speed at another clock) is refused naming why (exit 2), as simulate refuses it.\n"
    "options: none besides --help.\n"
    "reads:  FILE.json: a calibration file with a power section (calibration/merge_power.py adds one), or a\n"
    "        file holding the section alone (merge_power.py's --from input)\n"
    "writes: the fit and the residuals on standard output\n";

/* search's usage lives with its parser (sim/search_main.c), search-infer's with its own (sim/search_infer_main.c). */
extern const char sim_search_usage[];
extern const char sim_search_infer_usage[];
int sim_search_infer_main(int argc, char **argv);

static int cmd_plan(int, char **);
static int cmd_simulate(int, char **);
static int cmd_compare(int, char **);
static int cmd_ops(int, char **);
static int cmd_derive(int, char **);
static int cmd_fit(int, char **);

static const struct {
  const char *name, *summary, *usage;
  int (*run)(int argc, char **argv);
} commands[] = {
    {"plan", "summary of a plan: op counts, bytes per traffic class, memory per GPU", plan_usage, cmd_plan},
    {"simulate", "predict one training iteration (SimGrid), or an inference batch", simulate_usage, cmd_simulate},
    {"compare", "a prediction and a measurement side by side, with the error of each figure", compare_usage,
     cmd_compare},
    {"ops", "each op's simulated cost on rank 0, by op name", ops_usage, cmd_ops},
    {"derive-calibration", "write the roofline calibration derived from the H200 figures", derive_usage, cmd_derive},
    {"calibration-fit", "the power-cap clock model's fit of a calibration's power section, sample by sample",
     fit_usage, cmd_fit},
    {"search", "layout search: every valid layout and codec policy, best first", sim_search_usage, sim_search_main},
    {"search-infer", "serving-layout search: tp, pp, batch, KV cache, FP8 weights and codec of an inference batch",
     sim_search_infer_usage, sim_search_infer_main},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

/* The synopsis is the first line of a command's usage, after "usage: tacosim ". */
static void print_synopsis(FILE *out, const char *usage) {
  const char *s = strncmp(usage, "usage: tacosim ", 15) == 0 ? usage + 15 : usage;
  const char *nl = strchr(s, '\n');
  fprintf(out, "  %.*s\n", nl ? (int)(nl - s) : (int)strlen(s), s);
}

/* The list of commands, then each command's usage: the same strings COMMAND --help prints. */
static void help(FILE *out) {
  fprintf(out, "usage: tacosim COMMAND [ARGS]   (tacosim COMMAND --help prints that command's part below)\n\ncommands:\n");
  for (int i = 0; i < N_COMMANDS; i++) {
    print_synopsis(out, commands[i].usage);
    fprintf(out, "      %s\n", commands[i].summary);
  }
  for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "\n%s", commands[i].usage);
  print_folders(out);
}

static int parse_transfer(const char *v, sim_transfer_mode *m) {
  if (strcmp(v, "roofline") == 0) *m = SIM_TRANSFER_ROOFLINE;
  else if (strcmp(v, "off") == 0) *m = SIM_TRANSFER_OFF;
  else if (strcmp(v, "mamf") == 0) *m = SIM_TRANSFER_MAMF;
  else return -1;
  return 0;
}

static int cmd_plan(int argc, char **argv) {
  if (wants_help(argc, argv, plan_usage)) return 0;
  const char *path = NULL;
  plan_load_options lo = {0};
  ts_err e = {0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--alloc-reserve") == 0 && i + 1 < argc) {
      if (plan_parse_alloc_reserve("plan", argv[++i], &lo.alloc_reserve, &e)) return fail(&e);
      lo.alloc_reserve_set = true;
    } else if (argv[i][0] == '-' && argv[i][1])
      return command_error("plan", i + 1 < argc ? "unknown option %s" : "unknown option or missing value: %s", argv[i]);
    else if (!path)
      path = argv[i];
    else
      return command_error("plan", "expected one plan file%s", "");
  }
  if (!path) return command_error("plan", "expected one plan file%s", "");
  static plan p;
  bool inference = false;
  if (plan_file_is_inference(path, &inference, &e)) return fail(&e);
  if (inference) {
    if (lo.alloc_reserve_set) return command_error("plan", "--alloc-reserve: applies to training plans only%s", "");
    static plan_infer pi;
    if (plan_infer_load(path, NULL, NULL, &pi, &e) || plan_infer_print_summary(&pi, stdout, &e)) return fail(&e);
    return 0;
  }
  if (plan_load_opts(path, NULL, NULL, &lo, &p, &e) || plan_print_summary(&p, stdout, &e)) return fail(&e);
  return 0;
}

/* An inference plan: the analytic prefill/decode walk of sim_infer.c; `options` goes into the result. */
/* --clock-model as the command ran it, for the result's options: the one given, else its default for cal
 * (power with a "power" section, else duty); off under --clock off. */
static sim_clock_model clock_model_given(sim_clock_model m, bool clock_off, const schema_calibration *cal) {
  if (clock_off) return SIM_CLOCK_MODEL_OFF;
  if (m != SIM_CLOCK_MODEL_AUTO) return m;
  return cal->power.n > 0 ? SIM_CLOCK_MODEL_POWER : SIM_CLOCK_MODEL_DUTY;
}

static int simulate_inference(const char *plan_path, const char *cal_path, sim_transfer_mode transfer,
                              const sim_infer_opts *o, const char *options, const char *json, const char *csv) {
  static plan_infer p;
  static plan fwd;
  schema_calibration cal;
  ts_err e = {0};
  if (plan_infer_load(plan_path, NULL, NULL, &p, &e)) return fail(&e);
  plan_infer_forward_plan(&p, 1, &fwd);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &fwd.cluster, transfer, &cal, &src, &e)) return fail(&e);
  if (p.inflight.on) { /* in-flight batching: the steady state (sim_inflight.c) */
    if (o->decode_graph) {
      schema_calibration_free(&cal);
      return command_error("simulate", "--decode graph: an in-flight plan's steps are priced eager%s", "");
    }
    static sim_inflight_result ir;
    int rc = sim_inflight_predict(&p, &cal, stderr, &ir, &e);
    if (rc == 0) {
      snprintf(ir.options, sizeof ir.options, "%s", options);
      sim_inflight_print(&p, &ir, stdout);
      if ((json && sim_inflight_save_json(&p, &ir, json, &e)) || (csv && sim_inflight_save_csv(&p, &ir, csv, &e)))
        rc = -1;
    }
    schema_calibration_free(&cal);
    return rc ? fail(&e) : 0;
  }
  sim_infer_result r;
  int rc = sim_infer_predict(&p, &cal, o, stderr, &r, &e);
  if (rc == 0) {
    snprintf(r.options, sizeof r.options, "%s --clock-model %s", options,
             sim_clock_model_name(clock_model_given(o->clock_model, false, &cal)));
    sim_infer_print(&p, &r, stdout);
    if ((json && sim_infer_save_json(&p, &r, json, &e)) || (csv && sim_infer_save_csv(&p, &r, csv, &e))) rc = -1;
  }
  schema_calibration_free(&cal);
  return rc ? fail(&e) : 0;
}

static int cmd_simulate(int argc, char **argv) {
  const char *plan_path = NULL, *cal_path = NULL, *json = NULL, *csv = NULL, *trace = NULL, *trace_ranks = NULL;
  sim_mode mode = SIM_MODE_REDUCED;
  sim_transfer_mode transfer = SIM_TRANSFER_ROOFLINE;
  bool ideal_overlap = false, clock_off = false, collapse_off = false, local_off = false, decode_set = false;
  bool a2a_analytic = false;
  sim_infer_opts io = {.decode_graph = false};
  sim_clock_model clock_model = SIM_CLOCK_MODEL_AUTO;
  plan_load_options lo = {0};
  if (wants_help(argc, argv, simulate_usage)) return 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "--calibration") == 0 && has_value)
      cal_path = argv[++i];
    else if (strcmp(a, "--alloc-reserve") == 0 && has_value) {
      ts_err ae = {0};
      if (plan_parse_alloc_reserve("simulate", argv[++i], &lo.alloc_reserve, &ae)) return fail(&ae);
      lo.alloc_reserve_set = true;
    }
    else if (strcmp(a, "--transfer") == 0 && has_value) {
      if (parse_transfer(argv[++i], &transfer))
        return command_error("simulate", "--transfer: \"%s\" is not one of roofline, mamf, off", argv[i]);
    } else if (strcmp(a, "--clock") == 0 && has_value) {
      int rc = parse_on_off("simulate", "--clock", argv[++i], &clock_off);
      if (rc) return rc;
    } else if (strcmp(a, "--clock-model") == 0 && has_value) {
      if (sim_clock_model_parse(argv[++i], &clock_model))
        return command_error("simulate", "--clock-model: \"%s\" is not one of power, duty, off", argv[i]);
    } else if (strcmp(a, "--collapse") == 0 && has_value) {
      int rc = parse_on_off("simulate", "--collapse", argv[++i], &collapse_off);
      if (rc) return rc;
    } else if (strcmp(a, "--alltoall") == 0 && has_value) {
      int rc = parse_choice("simulate", "--alltoall", argv[++i], "flows", "analytic", &a2a_analytic);
      if (rc) return rc;
    } else if (strcmp(a, "--local-queue") == 0 && has_value) {
      int rc = parse_on_off("simulate", "--local-queue", argv[++i], &local_off);
      if (rc) return rc;
    } else if (strcmp(a, "--decode") == 0 && has_value) {
      int rc = parse_choice("simulate", "--decode", argv[++i], "eager", "graph", &io.decode_graph);
      if (rc) return rc;
      decode_set = true;
    } else if (strcmp(a, "--prefill-clock") == 0 && has_value) {
      int rc = parse_on_off("simulate", "--prefill-clock", argv[++i], &io.prefill_clock_off);
      if (rc) return rc;
      decode_set = true;
    } else if (strcmp(a, "--prefill-power") == 0 && has_value) {
      int rc = parse_on_off("simulate", "--prefill-power", argv[++i], &io.prefill_power_off);
      if (rc) return rc;
      decode_set = true;
    } else if (strcmp(a, "--overlap") == 0 && has_value) {
      int rc = parse_choice("simulate", "--overlap", argv[++i], "sm-wait", "ideal", &ideal_overlap);
      if (rc) return rc;
    }
    else if (strcmp(a, "--json") == 0 && has_value)
      json = argv[++i];
    else if (strcmp(a, "--csv") == 0 && has_value)
      csv = argv[++i];
    else if (strcmp(a, "--trace") == 0 && has_value)
      trace = argv[++i];
    else if (strcmp(a, "--trace-ranks") == 0 && has_value)
      trace_ranks = argv[++i];
    else if (strcmp(a, "--mode") == 0 && has_value) {
      const char *m = argv[++i];
      if (strcmp(m, "full") == 0)
        mode = SIM_MODE_FULL;
      else if (strcmp(m, "reduced") == 0)
        mode = SIM_MODE_REDUCED;
      else
        return command_error("simulate", "--mode: \"%s\" is not one of full, reduced", m);
    } else if (a[0] == '-' && a[1])
      return command_error("simulate", has_value ? "unknown option %s" : "unknown option or missing value: %s", a);
    else if (!plan_path)
      plan_path = a;
    else
      return command_error("simulate", "unexpected argument %s", a);
  }
  if (!plan_path) return command_error("simulate", "expected a plan file%s", "");
  char options[512]; /* the effective options, defaults included, recorded in the result (the
                       * calibration file it read has a field of its own) */
  snprintf(options, sizeof options, "--transfer %s", sim_transfer_mode_name(transfer));
  static plan p;
  schema_calibration cal;
  ts_err e = {0};
  bool inference = false;
  if (plan_file_is_inference(plan_path, &inference, &e)) return fail(&e);
  if (inference) {
    if (trace) return command_error("simulate", "--trace: an inference plan is predicted analytically, without a trace%s", "");
    if (lo.alloc_reserve_set) return command_error("simulate", "--alloc-reserve: applies to training plans only%s", "");
    size_t n = strlen(options);
    snprintf(options + n, sizeof options - n, " --decode %s --prefill-clock %s --prefill-power %s",
             io.decode_graph ? "graph" : "eager", io.prefill_clock_off ? "off" : "on", io.prefill_power_off ? "off" : "on");
    io.clock_model = clock_model; /* (--clock applies to training plans, as before) */
    return simulate_inference(plan_path, cal_path, transfer, &io, options, json, csv);
  }
  if (decode_set) return command_error("simulate", "--decode, --prefill-clock, --prefill-power: apply to inference plans only%s", "");
  if (plan_load_opts(plan_path, NULL, NULL, &lo, &p, &e)) return fail(&e);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &p.cluster, transfer, &cal, &src, &e)) return fail(&e);
  unsigned char *sel = NULL;
  if (trace && !trace_ranks) {
    trace_ranks = sim_default_trace_ranks(&p);
    if (strcmp(trace_ranks, "all"))
      fprintf(stderr, "note: --trace records the ranks of --trace-ranks %s (%d GPUs; --trace-ranks all for every rank)\n",
              trace_ranks, plan_world_size(&p));
  }
  if (trace_ranks && !trace) {
    schema_calibration_free(&cal);
    return command_error("simulate", "--trace-ranks: needs --trace OUT%s", "");
  }
  if (trace_ranks && strcmp(trace_ranks, "all")) { /* all: every rank simulated, no selection */
    sel = malloc((size_t)plan_world_size(&p));
    if (!sel || sim_parse_trace_ranks(trace_ranks, &p, sel, &e)) {
      bool parsed = sel != NULL;
      schema_calibration_free(&cal);
      free(sel);
      return parsed ? fail(&e) : command_error("simulate", "--trace-ranks: out of memory%s", "");
    }
  }
  sim_options o = {.mode = mode, .cal = &cal, .record_ops = trace != NULL, .warn = stderr,
                   .progress = isatty(STDERR_FILENO) ? stderr : NULL, .ideal_overlap = ideal_overlap, .clock_off = clock_off,
                   .clock_model = clock_model,
                   .collapse_off = collapse_off, .local_off = local_off, .alltoall_analytic = a2a_analytic};
  o.record_ranks = sel;
  schema_result r;
  int rc = sim_run(&p, &o, &r, &e);
  if (rc == 0) {
    size_t n = strlen(options);
    snprintf(options + n, sizeof options - n, " --mode %s --overlap %s --clock %s --collapse %s --local-queue %s%s%.64s",
             mode == SIM_MODE_FULL ? "full" : "reduced", ideal_overlap ? "ideal" : "sm-wait", clock_off ? "off" : "on",
             collapse_off ? "off" : "on", local_off ? "off" : "on", trace_ranks ? " --trace-ranks " : "",
             trace_ranks ? trace_ranks : "");
    n = strlen(options);
    snprintf(options + n, sizeof options - n, " --alltoall %s --clock-model %s", a2a_analytic ? "analytic" : "flows",
             sim_clock_model_name(clock_model_given(clock_model, clock_off, &cal)));
    memcpy(r.options, options, sizeof r.options);
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
  free(sel);
  return rc ? fail(&e) : 0;
}

/* tacosim ops on an inference plan: the eager prediction's op lists (sim_infer_result.ops). */
static int ops_inference(const char *plan_path, const char *cal_path) {
  static plan_infer p;
  static plan fwd;
  static sim_infer_result r;
  schema_calibration cal;
  ts_err e = {0};
  if (plan_infer_load(plan_path, NULL, NULL, &p, &e)) return fail(&e);
  if (p.inflight.on || p.attention_dp)
    return command_error("ops", "%s: in-flight and attention-DP plans are priced step by step, not op by op", plan_path);
  plan_infer_forward_plan(&p, 1, &fwd);
  sim_cost_source src;
  if (sim_load_costs(cal_path, &fwd.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e)) return fail(&e);
  const sim_infer_opts o = {.decode_graph = false, .prefill_clock_off = true};
  int rc = sim_infer_predict(&p, &cal, &o, stderr, &r, &e);
  if (rc == 0) sim_infer_print_ops(&p, &r, stdout);
  schema_calibration_free(&cal);
  return rc ? fail(&e) : 0;
}

static int cmd_ops(int argc, char **argv) {
  const char *plan_path = NULL, *cal_path = NULL;
  if (wants_help(argc, argv, ops_usage)) return 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--calibration") == 0 && i + 1 < argc)
      cal_path = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1])
      return command_error("ops", i + 1 < argc ? "unknown option %s" : "unknown option or missing value: %s", argv[i]);
    else if (!plan_path)
      plan_path = argv[i];
    else
      return command_error("ops", "unexpected argument %s", argv[i]);
  }
  if (!plan_path) return command_error("ops", "expected a plan file%s", "");
  static plan p;
  schema_calibration cal;
  ts_err e = {0};
  bool inference = false;
  if (plan_file_is_inference(plan_path, &inference, &e)) return fail(&e);
  if (inference) return ops_inference(plan_path, cal_path);
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

static int cmd_fit(int argc, char **argv) {
  if (wants_help(argc, argv, fit_usage)) return 0;
  for (int i = 1; i < argc; i++)
    if (argv[i][0] == '-' && argv[i][1]) return command_error("calibration-fit", "unknown option %s", argv[i]);
  if (argc != 2) return command_error("calibration-fit", "expected one calibration file%s", "");
  static schema_power pw;
  ts_err e = {0};
  if (schema_power_load_file(argv[1], &pw, &e)) return fail(&e);
  schema_power_print_fit(&pw, stdout);
  return 0;
}

static int cmd_compare(int argc, char **argv) {
  if (wants_help(argc, argv, compare_usage)) return 0;
  for (int i = 1; i < argc; i++)
    if (argv[i][0] == '-' && argv[i][1]) return command_error("compare", "unknown option %s", argv[i]);
  if (argc != 3) return command_error("compare", "expected PREDICTED.json MEASURED.json%s", "");
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
  if (wants_help(argc, argv, derive_usage)) return 0;
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
      if (*end || !(link_gbps > 0))
        return command_error("derive-calibration", "--link-gbps: \"%s\" is not a positive number", argv[i]);
    } else if (argv[i][0] == '-' && argv[i][1])
      return command_error("derive-calibration", i + 1 < argc ? "unknown option %s" : "unknown option or missing value: %s",
                           argv[i]);
    else if (!out)
      out = argv[i];
    else
      return command_error("derive-calibration", "unexpected argument %s", argv[i]);
  }
  if (!out) return command_error("derive-calibration", "expected an output file%s", "");
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
  for (int i = 0; i < N_COMMANDS; i++)
    if (strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  char names[256] = "";
  for (int i = 0; i < N_COMMANDS; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", commands[i].name);
  fprintf(stderr, "tacosim: unknown command \"%s\" (the commands: %s; tacosim --help describes them)\n", cmd, names);
  return TS_EXIT_BAD_INPUT;
}
