/* search_main.c — `tacosim search`: the command line of the layout search. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search.h"

/* The help of `tacosim search` (tacosim.c lists it among the commands from this string). */
const char sim_search_usage[] =
    "usage: tacosim search --model M --cluster C [options]\n"
    "  Layout search: every valid data x tensor x pipeline x context layout, micro-batch and codec policy is\n"
    "  enumerated (context parallelism: every cp up to 16 dividing the GPUs left with seq divisible by\n"
    "  2 cp; sharding: none, ZeRO-1 without and with overlap_param_gather, ZeRO-2 and ZeRO-3 where the\n"
    "  stage below does not fit; tp_comm_overlap on and off under SP with TE's defaults per GEMM\n"
    "  (layout.tp_comm_overlap_cfg is not searched); overlap_grad_reduce on; pipeline:\n"
    "  pp dividing the layers, or where it does not but divides layers + 2, the embedding and the loss\n"
    "  each in a layer's place, Megatron's account_for_{embedding,loss}_in_pipeline_split, \"emb loss\"),\n"
    "  pruned by memory and ranked by a closed-form estimate; the best are simulated in\n"
    "  parallel (SimGrid, reduced mode) and printed best first. Every candidate trains in BF16, or under\n"
    "  each FP8 recipe of --fp8 (a searched dimension: every layout tried under each recipe listed).\n"
    "options:\n"
    "  --model M           model: a zoo name (models/M.json) or a path (required)\n"
    "  --cluster C         cluster: a zoo name (topologies/C.json) or a path (required)\n"
    "  --gpus N            GPUs used (default: the whole cluster); dp x tp x pp x cp = N\n"
    "  --seq S             sequence length (default: min(2048, the model's maximum))\n"
    "  --global-batch B    sequences per iteration (default: 2 x N)\n"
    "  --codecs LIST       policies among none,taco,caat,taco+caat (default: all four); for an MoE model\n"
    "                      the layouts also try every EP degree that divides the experts and DP (expert_tp\n"
    "                      = tp, dropless, the default imbalance) and taco compresses the expert all-to-alls\n"
    "                      too; the estimate prices the all-to-alls by the alpha-beta model of the EP\n"
    "                      group's links (the simulations by its flows)\n"
    "  --top K             rows printed (default 10)\n"
    "  --simulate L        layouts simulated of each FP8 recipe, each under every policy (default 8; 0:\n"
    "                      none, the estimate ranking is listed)\n"
    "  --jobs J            simulation worker processes (default: the CPU cores; under mpirun, the cores\n"
    "                      over the MPI processes on the machine)\n"
    "  --exhaustive        simulate every candidate of the layouts chosen (default: off; the search then\n"
    "                      skips a candidate whose bound, its programs replayed without contention at\n"
    "                      the fastest clock the calibration allows, is below the --top-th best simulated\n"
    "                      tokens/s: the printed rows are the same; such candidates show as \"pruned\" in\n"
    "                      the speedup table)\n"
    "  --max-micro M       largest micro-batch tried (default 16)\n"
    "  --sample N          also simulate N candidates spread over the whole estimate ranking and\n"
    "                      report the estimate's rank correlation with the simulation (default 0)\n"
    "  --calibration FILE  op costs (default, as tacosim simulate: calibration/<gpu>-<transport>.json\n"
    "                      measured on the cluster's GPU, else h200-<transport>.json, else its derived file)\n"
    "  --json OUT          write the ranked layouts as JSON (default: not written)\n"
    "  --csv OUT           write them as gnuplot columns (default: not written)\n"
    "  --headroom H        HBM kept free beyond the memory model (which counts the CUDA context,\n"
    "                      cuBLASLt, NCCL buffers and attention workspace measured on H200): H >= 1 in\n"
    "                      GiB, H < 1 a fraction of the HBM (default 0)\n"
    "  --alloc-reserve F   a caching allocator's reserve beyond the live tensors at the memory peak, a\n"
    "                      fraction F in [0, 1) of the activations, in every candidate's memory and\n"
    "                      written into the emitted plans' alloc_reserve (default " PLAN_DEFAULT_ALLOC_RESERVE_TEXT ", as\n"
    "                      PyTorch with expandable segments; measured 0.22-0.73 under its default\n"
    "                      allocator: plan/README.md \"Memory per GPU\")\n"
    "  --emit-plans DIR    write each listed layout as a complete plan file DIR/NN-<name>.json that\n"
    "                      tacosim simulate and tacorun execute read unchanged (default: not written;\n"
    "                      simulate it with the calibration the search used to get its figure; tacorun\n"
    "                      execute runs no dropout and refuses plans with hidden_dropout > 0: search\n"
    "                      with --hidden-dropout 0 for plans it runs)\n"
    "  --fp8 LIST          FP8 recipes tried, each a searched dimension: a comma list of none (BF16),\n"
    "                      tensorwise, delayed, mxfp8, or search (all four, those the cluster's GPU cannot\n"
    "                      run skipped and said); every layout is tried under each (memory with the\n"
    "                      recipe's FP8 weight copies, estimate, simulations), the best --simulate\n"
    "                      layouts of each recipe are simulated (up to that many times the simulations;\n"
    "                      the bound drops a candidate only below both the --top-th row and its recipe's\n"
    "                      best) and a last table gives each recipe's best against the best BF16 layout;\n"
    "                      the candidate's layout.fp8 is written into the emitted plans (Transformer\n"
    "                      Engine's recipes on the four linear GEMMs of each layer; FP8 needs a GPU with\n"
    "                      FP8 tensor cores, mxfp8 one whose catalogue entry has \"mxfp8\": true,\n"
    "                      Blackwell: a recipe of a list the GPU cannot run is an error; the estimate\n"
    "                      prices the FP8 GEMMs and the casts of their inputs and gradients, not the\n"
    "                      weights' casts) (default none)\n"
    "  --fp8-param-gather  with an FP8 recipe: layout.fp8_param_gather in every FP8 candidate with the\n"
    "                      distributed optimizer (ZeRO-1 and up), FP8 parameters all-gathered; not a\n"
    "                      searched dimension (default: off)\n"
    "  --hidden-dropout P  the hidden dropout probability of every candidate, simulated and written into\n"
    "                      the emitted plans (default 0.1, Megatron-LM's and the plan loader's default)\n"
    "  --host-framework F  what issues the layers' kernels, for the simulations' host clock and the\n"
    "                      emitted plans' host_framework: executor (tacorun's calls) or megatron-core\n"
    "                      (Megatron-Core's measured host time, the calibration's framework_host\n"
    "                      section; the estimate takes it as a floor per layer-micro-batch) (default\n"
    "                      executor)\n"
    "  --alltoall flows|analytic\n"
    "                      the simulations run a cross-node all-to-all as every ordered pair's flow\n"
    "                      (flows, the default), or, APPROXIMATE, price it as max-min sharing gives it\n"
    "                      alone on its links, without flows (analytic: seconds instead of minutes a\n"
    "                      simulation where EP crosses nodes; as tacosim simulate --alltoall)\n"
    "  --clock-model power|duty|off\n"
    "                      the clock model of the simulations and the estimate, as tacosim simulate's (power:\n"
    "                      each window's clock under the power cap from the calibration's \"power\" section,\n"
    "                      exit 2 without it; duty: the \"clock\" section's speeds by idle share; off: the\n"
    "                      calibrated times) (default: power when the calibration has a power section, else\n"
    "                      duty; no shipped calibration has the section: power is unfinished, see simulate)\n"
    "  --no-progress       no progress bar (it is shown only on a terminal anyway)\n"
    "MPI: started by mpirun (mpirun -np N tacosim search ...), the processes share the simulations\n"
    "  (each its part of every round, --jobs workers each) and process 0 prints the same ranking as\n"
    "  one process; started alone, no MPI is used.\n"
    "reads:  the model, the cluster, the calibration\n"
    "writes: the ranking on standard output; OUT of --json and --csv; the plans of --emit-plans; progress on standard error\n";

static void usage(FILE *out) { fputs(sim_search_usage, out); }

static int bad(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tacosim: search: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n(tacosim search --help lists the options)\n");
  return TS_EXIT_BAD_INPUT;
}

/* A whole decimal number in [lo, hi]. */
static int parse_num(const char *flag, const char *s, long long lo, long long hi, long long *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end || x < lo || x > hi) {
    char range[64];
    snprintf(range, sizeof range, "%lld and %lld", lo, hi);
    fprintf(stderr, "tacosim: search: %s: \"%s\" is not a whole number between %s\n", flag, s, range);
    return -1;
  }
  *v = x;
  return 0;
}

static int run(int argc, char **argv, sim_search_options *op, long cores);

int sim_search_main(int argc, char **argv) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  sim_search_options o = {.codecs = (1u << SIM_SEARCH_CODEC_COUNT) - 1, .top = 10, .simulate = 8,
                          .jobs = cores > 0 ? (int)cores : 1, .max_micro = 16, .progress = isatty(STDERR_FILENO)};
  for (int i = 1; i < argc; i++) /* --help answers without MPI */
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
  if (sim_search_mpi_start(&argc, &argv)) {
    fprintf(stderr, "tacosim: search: MPI_Init failed\n");
    return TS_EXIT_FAILURE;
  }
  int rc = run(argc, argv, &o, cores);
  sim_search_mpi_stop();
  return rc;
}

static int run(int argc, char **argv, sim_search_options *op, long cores) {
  sim_search_options o = *op;
  int local = sim_search_mpi_local_size();
  if (local > 1) o.jobs = cores / local > 0 ? (int)(cores / local) : 1;
  bool root = sim_search_mpi_rank() == 0;
  const char *json = NULL, *csv = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--no-progress") == 0) {
      o.progress = false;
      continue;
    }
    if (strcmp(a, "--exhaustive") == 0) {
      o.exhaustive = true;
      continue;
    }
    if (strcmp(a, "--fp8-param-gather") == 0) {
      o.fp8_param_gather = true;
      continue;
    }
    if (strncmp(a, "--", 2) != 0) return bad("unexpected argument \"%s\"%s", a, "");
    if (i + 1 >= argc) return bad("%s needs a value%s", a, "");
    const char *v = argv[++i];
    long long n;
    if (strcmp(a, "--model") == 0)
      o.model = v;
    else if (strcmp(a, "--cluster") == 0)
      o.cluster = v;
    else if (strcmp(a, "--calibration") == 0)
      o.calibration = v;
    else if (strcmp(a, "--json") == 0)
      json = v;
    else if (strcmp(a, "--csv") == 0)
      csv = v;
    else if (strcmp(a, "--headroom") == 0) {
      ts_err e = {0};
      if (sim_search_parse_headroom(v, &o.headroom_gib, &o.headroom_fraction, &e)) return bad("%s%s", e.msg, "");
    } else if (strcmp(a, "--emit-plans") == 0)
      o.emit_plans = v;
    else if (strcmp(a, "--clock-model") == 0) {
      if (sim_clock_model_parse(v, &o.clock_model)) return bad("--clock-model: \"%s\" is not power, duty or off%s", v, "");
    } else if (strcmp(a, "--alltoall") == 0) {
      if (strcmp(v, "analytic") == 0)
        o.alltoall_analytic = true;
      else if (strcmp(v, "flows") == 0)
        o.alltoall_analytic = false;
      else
        return bad("--alltoall: \"%s\" is not flows or analytic%s", v, "");
    } else if (strcmp(a, "--alloc-reserve") == 0) {
      ts_err e = {0};
      if (plan_parse_alloc_reserve("search", v, &o.alloc_reserve, &e)) return bad("%s%s", e.msg, "");
      o.alloc_reserve_set = true;
    } else if (strcmp(a, "--hidden-dropout") == 0) {
      char *end;
      errno = 0;
      double x = strtod(v, &end);
      if (errno || end == v || *end || !(x >= 0.0 && x < 1.0))
        return bad("--hidden-dropout: \"%s\" is not a probability in [0, 1)%s", v, "");
      o.hidden_dropout = x;
      o.hidden_dropout_set = true;
    } else if (strcmp(a, "--fp8") == 0) {
      ts_err e = {0};
      if (sim_search_parse_fp8(v, &o.fp8_recipes, &o.fp8_search, &e)) return bad("%s%s", e.msg, "");
    } else if (strcmp(a, "--host-framework") == 0) {
      int k = 0;
      while (plan_host_framework_names[k] && strcmp(plan_host_framework_names[k], v) != 0) k++;
      if (!plan_host_framework_names[k])
        return bad("--host-framework: \"%s\" is not executor or megatron-core%s", v, "");
      o.host_framework = (plan_host_framework)k;
    }
    else if (strcmp(a, "--codecs") == 0) {
      ts_err e = {0};
      if (sim_search_parse_codecs(v, &o.codecs, &e)) return bad("%s%s", e.msg, "");
    } else if (strcmp(a, "--gpus") == 0) {
      if (parse_num(a, v, 1, 1 << 24, &n)) return TS_EXIT_BAD_INPUT;
      o.gpus = (int)n;
    } else if (strcmp(a, "--seq") == 0) {
      if (parse_num(a, v, 1, 1 << 24, &n)) return TS_EXIT_BAD_INPUT;
      o.seq = (int)n;
    } else if (strcmp(a, "--global-batch") == 0) {
      if (parse_num(a, v, 1, 1LL << 40, &n)) return TS_EXIT_BAD_INPUT;
      o.global_batch = n;
    } else if (strcmp(a, "--top") == 0) {
      if (parse_num(a, v, 1, 100000, &n)) return TS_EXIT_BAD_INPUT;
      o.top = (int)n;
    } else if (strcmp(a, "--simulate") == 0) {
      if (parse_num(a, v, 0, 4096, &n)) return TS_EXIT_BAD_INPUT;
      o.simulate = (int)n;
      o.estimate_only = n == 0;
    } else if (strcmp(a, "--jobs") == 0) {
      if (parse_num(a, v, 1, 256, &n)) return TS_EXIT_BAD_INPUT;
      o.jobs = (int)n;
    } else if (strcmp(a, "--sample") == 0) {
      if (parse_num(a, v, 0, 4096, &n)) return TS_EXIT_BAD_INPUT;
      o.sample = (int)n;
    } else if (strcmp(a, "--max-micro") == 0) {
      if (parse_num(a, v, 1, 4096, &n)) return TS_EXIT_BAD_INPUT;
      o.max_micro = (int)n;
    } else
      return bad("unknown option \"%s\"%s", a, "");
  }
  if (!o.model) return bad("--model is required%s%s", "", "");
  if (!o.cluster) return bad("--cluster is required%s%s", "", "");

  sim_search_result r;
  ts_err e = {0};
  if (sim_search_run(&o, &r, &e)) {
    fprintf(stderr, "tacosim: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  int rc = 0;
  if (!root) { /* process 0 prints and writes */
    sim_search_result_free(&r);
    return r.estimated == 0 ? TS_EXIT_BAD_INPUT : 0;
  }
  if (r.estimated == 0) {
    fprintf(stderr,
            "tacosim: search: no layout of %s fits %d GPUs of %s (%ld enumerated, %ld over HBM%s); every layout "
            "uses all %d GPUs with dp dividing --global-batch: try another --gpus or --global-batch\n",
            o.model, r.gpus, o.cluster, r.enumerated, r.over_memory,
            o.headroom_gib > 0 || o.headroom_fraction > 0 ? " with the --headroom asked" : "", r.gpus);
    if (r.least_over_bytes > 0) {
      const sim_search_layout *l = &r.least_over;
      fprintf(stderr,
              "tacosim: search: the least memory any layout needs is %.1f GiB per GPU (tp %d, pp %d, dp %d, cp %d, ep %d, "
              "micro-batch %d, ZeRO stage %d, recompute %s), against the GPU's %.0f GiB\n",
              r.least_over_bytes / 1073741824.0, l->tp, l->pp, l->dp, l->cp, l->ep, l->micro, l->zero_stage,
              plan_recompute_name(l->recompute), r.hbm_gib);
    }
    rc = TS_EXIT_BAD_INPUT;
  }
  sim_search_print(&r, &o, stdout);
  if ((json && sim_search_save_json(&r, &o, json, &e)) || (csv && sim_search_save_csv(&r, csv, &e)) ||
      (o.emit_plans && r.estimated > 0 && sim_search_emit_plans(&r, &o, o.emit_plans, stdout, &e))) {
    fprintf(stderr, "tacosim: %s\n", e.msg);
    rc = ts_exit_status(&e);
  }
  sim_search_result_free(&r);
  return rc;
}
