/* calibrate.c — `tacorun calibrate`: measure costs on the GPUs at hand and
 * write a calibration file (through schema/calibration.h, the module the
 * simulator reads it with).
 *
 * Phases: a self-check of the kernels against their C references, GEMMs at
 * every shape of the model zoo, attention, memory-bound kernels, the clock
 * section (speeds at compute duty cycles below 1), the TACO and CAAT-Net
 * kernels, then NCCL and compressed collectives, and the latency + bandwidth
 * fits. --compute-from copies the compute tables (decode GEMMs and attention
 * per shape of every backend among them), the clock section and the
 * host section of an earlier file (same GPUs and host) so another transport
 * needs only its collectives measured.
 *
 * Under mpirun (one process per GPU, as the executor runs) rank 0 measures
 * the compute phases on its GPU while the other ranks wait for the
 * collectives, which every rank then runs over the world communicator; rank
 * 0 writes the file. Without mpirun one process drives every GPU. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef TACOSIM_HAVE_MPI
#include <mpi.h>
#endif

#include "calibrate.h"
#include "ts_env.h"
#include "calibrate_fit.h"
#include "ops_variants.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_nccl.h"

enum { PH_GEMM = 1, PH_ATTN = 2, PH_MEM = 4, PH_CODEC = 8, PH_COMM = 16, PH_CLOCK = 32, PH_MOE = 64, PH_HOST = 128,
       PH_GEMM_FP8 = 256, PH_ALL = 511,
       PH_POWER = 512 /* not among the default phases: --only power */ };

typedef struct {
  const char *out, *transport, *models, *compute_from, *spread_tsv, *moe_tsv;
  int phases, only, check_only, gpus; /* only: --only given */
  double time_limit_s;
  calib_sweep sweep;
  calib_config cfg;
  long long max_bytes; /* 0: default (1 GiB) */
  int comm_reps;       /* 0: default */
  int coll_groups[8], n_coll_groups; /* --coll-groups: TACO group sizes of the compressed collectives (0: default) */
  long long comm_batch_us; /* 0: default */
} calib_args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: tacorun calibrate [--out FILE] [--transport auto|p2p|shm|socket] [--transport-name NAME]\n"
          "                         [--tp 1,2,4,8] [--quick]\n"
          "                         [--models all|NAME,...] [--tokens 1024,1536,...,8192] [--gpus N]\n"
          "                         [--only gemm,gemm_fp8,attention,memory,clock,codec,comm,moe,host,power]\n"
          "                         [--compute-from FILE] [--power-json FILE] [--power-tsv FILE]\n"
          "                         [--power-settle-s S] [--power-timed-s S] [--power-gemm MxNxK ...]\n"
          "                         [--power-prefill-attn HLxKVLxDxBxS ...]\n"
          "                         [--time-limit SECONDS] [--check] [--max-bytes B] [--comm-reps N]\n"
          "                         [--comm-passes N] [--comm-batch-us T] [--coll-groups G,...]\n"
          "                         [--gemm-passes N] [--gemm-tsv FILE] [--gemm-fp8-tsv FILE] [--spread-tsv FILE]\n"
          "                         [--moe-tsv FILE]\n"
          "                         [--no-clock] [--clock-tsv FILE] [--attn-context step|alone] [--attn-tsv FILE]\n"
          "       mpirun -np N tacorun calibrate ...   (one process per GPU for the collectives)\n\n"
          "Measures GEMMs (every shape of the model zoo: forward, dgrad, wgrad; in BF16, and in FP8 for the\n"
          "linear layers FP8 training runs in FP8), attention,\n"
          "memory-bound kernels, TACO/CAAT-Net kernels and NCCL plus compressed collectives\n"
          "(1 KiB .. 1 GiB) on the GPUs of this machine, and writes a calibration file.\n"
          "options (defaults in brackets):\n"
          "  --out FILE           output [calibration-TRANSPORT.json]\n"
          "  --transport-name N   recorded transport [the --transport decision: nvlink, pcie, shm, socket; none\n"
          "                       with one GPU]\n"
          RT_TRANSPORT_USAGE
          "  --tp LIST            tensor-parallel degrees whose GEMM shapes are measured [1,2,4,8]\n"
          "  --models all|LIST    zoo models whose GEMM shapes are measured [all]\n"
          "  --tokens LIST        tokens per micro-batch of the GEMM shapes [1024,1536,2048,3072,4096,6144,8192]\n"
          "  --gpus N             GPUs used by the single-process collectives [all local GPUs]\n"
          "  --only LIST          phases among gemm,gemm_fp8,attention,memory,clock,codec,comm,moe,host,power [all of them\n"
          "                       but power; gemm_fp8 left out on a GPU without FP8 tensor cores]\n"
          "                       (power: the power drawn and the SM clock, from NVML, of patterns of the clock\n"
          "                       section's GEMM and add: idle, each back to back, GEMM + add mixes at GEMM time\n"
          "                       fractions 0.1 .. 0.9 and periods ~1 and ~10 ms, GEMM bursts at duty 0.25, 0.5,\n"
          "                       0.75 and adds at duty 0.5 between GPU-side idle, ~40 s; writes --power-json\n"
          "                       (and --power-tsv), and with --only power no calibration file; needs the\n"
          "                       driver's libnvidia-ml.so.1; calibrate_power.c, calibration/power/README.md)\n"
          "                       (gemm_fp8: the \"gemm_fp8\" list, FP8 GEMMs of E4M3 A and B scaled per tensor, FP32\n"
          "                       accumulation, BF16 C, at the forward, dgrad and wgrad keys of the linear layers\n"
          "                       qkv, attn_out, fc1, fc2 (plan_fp8_linear), each key once, timed as the BF16 GEMMs\n"
          "                       (--gemm-passes); fast accumulation for a key only forward GEMMs use, split\n"
          "                       accumulation for one a dgrad or wgrad uses, as Transformer Engine's recipes;\n"
          "                       the FP8 GEMM is checked against its C reference first; calibrate_fp8.c)\n"
          "                       (host: the executor's launch and synchronisation costs, ~1 s, and graph_gap_us,\n"
          "                       bench-graph's decode-layer timing of Llama-3 8B from the zoo, ~5 s; calibrate_host.c)\n"
          "  --time-limit SECONDS the run stops with an error after this long [1200]\n"
          "  --quick              fewer repetitions and group sizes (fits the 8-minute budget) [off]\n"
          "  --compute-from FILE  copy GEMM and kernel tables, decode GEMMs, attention per shape (every\n"
          "                       backend), the clock and the host section (graph_gap_us among it) from\n"
          "                       FILE; measure only collectives [none: every table measured]\n"
          "  --check              run the kernel self-check only: the rt_ops kernels, and the FP8 GEMM on a GPU\n"
          "                       with FP8 (6 odd shapes, both accumulations, relative L2 error against a C\n"
          "                       reference in double <= 1e-2, fast accumulation 5e-2, output poisoned with NaN\n"
          "                       first; calibrate_fp8.h) [off]\n"
          "  --max-bytes B        largest collective size (default 1073741824)\n"
          "  --comm-reps N        timed batches per collective size, median kept (default 7; 3 over 100 ms)\n"
          "  --coll-groups LIST   TACO group sizes of the compressed collectives, powers of two in 32..512\n"
          "                       (default 128,256; --quick 128); each is the table <op>.taco<G>\n"
          "  --comm-passes N      sweep every collective size N times (1-8, default 1), median of the\n"
          "                       passes kept: a transport that wanders over seconds (loopback sockets)\n"
          "                       is then sampled across the whole run, not in one second per size\n"
          "  --comm-batch-us T    a timed batch of one collective size lasts at least T us (100-1000000,\n"
          "                       default 1000; at most 20 launches back to back): long transfers are\n"
          "                       then timed back to back, as a plan's run them, not one after a sync\n"
          "  --gemm-passes N      passes over the GEMM shapes (BF16 and FP8), alternating direction, geometric\n"
          "                       mean kept (1-8; default 4; --quick 1)\n"
          "  --gemm-tsv FILE      every pass's time of every GEMM (a table to study their noise) [not written]\n"
          "  --gemm-fp8-tsv FILE  the same for every FP8 GEMM key, with its roles and accumulation [not written]\n"
          "  --spread-tsv FILE    per-size spread of the collectives' timed batches [not written]\n"
          "  --moe-tsv FILE       every MoE point: grouped GEMMs as the table's loop of GEMMs, as one\n"
          "                       cublasGemmGroupedBatchedEx call and as one dense GEMM; routing kernels [not written]\n"
          "  --no-clock           skip the clock section (on by default with the compute tables, ~35 s;\n"
          "                       --quick ~25 s): a 4096x4096x2048 GEMM and a 96 MiB add run in bursts\n"
          "                       with GPU-side idle between them at duty cycles 0.8 .. 0.15 and periods\n"
          "                       1 .. 100 ms; their speed against back to back and the power\n"
          "                       controller's window go to the file's \"clock\" section\n"
          "  --clock-tsv FILE     every point of the clock section (sizes, measured periods, speeds) [not written]\n"
          "  --power-json FILE    the power phase's output, the calibration section \"power\" [required by it]\n"
          "  --power-tsv FILE     every measured column of every power pattern [not written]\n"
          "  --power-settle-s S   each power pattern first runs untimed this long, 0-60 [0.5]\n"
          "  --power-timed-s S    then its timed window (idle: 2 s), 0.1-60 [1.5]\n"
          "  --power-gemm MxNxK   also run this GEMM shape (exec_gemm NN bf16, operands over 256 MiB) back to back\n"
          "                       after the patterns: its power, clock and TFLOP/s, in --power-tsv only\n"
          "                       (calibration/merge_op_power.py makes the \"op_power\" section of them);\n"
          "                       repeatable, up to 8 [none]\n"
          "  --power-prefill-attn HLxKVLxDxBxS  also run the inference executor's prefill attention of HL query and\n"
          "                       KVL KV heads of D, batch B, prompt S back to back after the shapes, likewise,\n"
          "                       then mixed with the reference GEMM (amix- rows: its speed at the mix's\n"
          "                       clock) (TSV only); repeatable, up to 8 [none]\n"
          "  --attn-context C     how the \"attention_shapes\" section times each shape (runtime/calibrate/calibrate_attn.c):\n"
          "                       step = between large GEMMs, at the clocks of a training step; alone = back\n"
          "                       to back [step]\n"
          "  --attn-tsv FILE      both timings (in step, alone) of every attention shape [not written]\n"
          "Under mpirun (or TACORUN_RANK/TACORUN_NRANKS/TACORUN_ID_FILE) each process takes one GPU:\n"
          "rank 0 measures the compute tables and writes the file, every rank runs the collectives\n"
          "over the world communicator (its size only; smaller groups need the single-process mode).\n"
          "  (the attention, cross-entropy and norm tables time the executor's kernels as --variant sets them)\n");
  ops_variant_usage(f);
  fprintf(f,
          "reads:  the model zoo (%s), the --compute-from FILE\n"
          "writes: the calibration (--out, its notes name every variant; none with --only power), the --gemm-tsv,\n"
          "        --gemm-fp8-tsv, --spread-tsv, --clock-tsv and --power-tsv tables, --power-json; progress on\n"
          "        standard error\n",
          model_zoo_dir());
}

/* Parses "1,2,4" into v (at most cap values in [lo, hi]). */
static int parse_list(const char *opt, const char *s, long long lo, long long hi, long long *v, int cap, int *n,
                      ts_err *e) {
  *n = 0;
  const char *p = s;
  while (*p) {
    char *end;
    long long x = strtoll(p, &end, 10);
    if (end == p || (*end && *end != ',') || x < lo || x > hi)
      return ts_fail(e, NULL, opt, "'%s' must be a comma-separated list of integers in [%lld, %lld]", s, lo, hi);
    if (*n == cap) return ts_fail(e, NULL, opt, "at most %d values", cap);
    v[(*n)++] = x;
    p = *end ? end + 1 : end;
  }
  if (*n == 0) return ts_fail(e, NULL, opt, "empty list");
  return 0;
}

static int parse_seconds(const char *opt, const char *s, double lo, double hi, double *out, ts_err *e) {
  char *end;
  double x = strtod(s, &end);
  if (end == s || *end || !(x >= lo && x <= hi))
    return ts_fail(e, NULL, opt, "'%s' must be a number of seconds in [%g, %g]", s, lo, hi);
  *out = x;
  return 0;
}

static int parse_phases(const char *s, int *out, ts_err *e) {
  static const char *names[] = {"gemm",  "attention", "memory", "codec",   "comm",
                                "clock", "moe",       "host",   "gemm_fp8", "power"};
  *out = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < 10; i++)
      if (!strcmp(t, names[i])) *out |= 1 << i, found = 1;
    if (!found)
      return ts_fail(e, NULL, "--only", "unknown phase '%s' (gemm, gemm_fp8, attention, memory, clock, codec, comm, moe, host, power)",
                     t);
  }
  return *out ? 0 : ts_fail(e, NULL, "--only", "no phase given");
}

/* --power-gemm MxNxK (repeatable): a shape the power phase also runs back to back. */
static int parse_power_gemm(const char *v, calib_config *c, ts_err *e) {
  long long m, n, k;
  char end;
  if (c->n_power_gemms == CALIB_POWER_MAX_SHAPES)
    return ts_fail(e, NULL, "--power-gemm", "at most %d shapes", CALIB_POWER_MAX_SHAPES);
  if (sscanf(v, "%lldx%lldx%lld%c", &m, &n, &k, &end) != 3 || m < 1 || n < 1 || k < 1 || m > 65536 || n > 262144 ||
      k > 262144)
    return ts_fail(e, NULL, "--power-gemm", "'%s' is not MxNxK (M 1..65536, N and K 1..262144)", v);
  long long *s = c->power_gemms[c->n_power_gemms++];
  s[0] = m, s[1] = n, s[2] = k;
  return 0;
}

/* --power-prefill-attn HLxKVLxDxBxS (repeatable): a prefill attention the power phase also runs back to back. */
static int parse_power_attn(const char *v, calib_config *c, ts_err *e) {
  long long d[5];
  char end;
  if (c->n_power_attns == CALIB_POWER_MAX_SHAPES)
    return ts_fail(e, NULL, "--power-prefill-attn", "at most %d ops", CALIB_POWER_MAX_SHAPES);
  if (sscanf(v, "%lldx%lldx%lldx%lldx%lld%c", &d[0], &d[1], &d[2], &d[3], &d[4], &end) != 5 || d[0] < 1 ||
      d[0] > 256 || d[1] < 1 || d[1] > d[0] || d[0] % d[1] || (d[2] != 64 && d[2] != 128) || d[3] < 1 || d[3] > 64 ||
      d[4] < 2 || d[4] > 16384)
    return ts_fail(e, NULL, "--power-prefill-attn",
                   "'%s' is not HLxKVLxDxBxS (query heads 1..256, KV heads dividing them, head dim 64 or 128, batch "
                   "1..64, prompt 2..16384)", v);
  memcpy(c->power_attns[c->n_power_attns++], d, sizeof d);
  return 0;
}

static int parse_args(int argc, char **argv, calib_args *a, ts_err *e) {
  memset(a, 0, sizeof *a);
  a->models = "all";
  a->phases = PH_ALL;
  a->time_limit_s = 1200;
  a->cfg.power_settle_s = 0.5;
  a->cfg.power_timed_s = 1.5;
  calib_sweep_default(&a->sweep);
  long long v[8];
  int n, no_clock = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(o, "--quick")) a->cfg.quick = 1;
    else if (!strcmp(o, "--check")) a->check_only = 1;
    else if (!strcmp(o, "--no-clock")) no_clock = 1;
    else if (!strcmp(o, "--help") || !strcmp(o, "-h")) return 1;
    else if (!has) return ts_fail(e, NULL, o, "unknown option or missing value");
    else if (!strcmp(o, "--out")) a->out = argv[++i];
    else if (!strcmp(o, "--variant")) {
      if (ops_variant_set(argv[++i], e)) return -1;
    }
    else if (!strcmp(o, "--transport-name")) a->transport = argv[++i];
    else if (!strcmp(o, "--transport")) {
      coll_transport t;
      if (rt_transport_arg(argv[++i], &t, e)) return -1;
      a->cfg.transport = (int)t;
    }
    else if (!strcmp(o, "--models")) a->models = argv[++i];
    else if (!strcmp(o, "--compute-from")) a->compute_from = argv[++i];
    else if (!strcmp(o, "--gemm-tsv")) a->cfg.gemm_tsv = argv[++i];
    else if (!strcmp(o, "--gemm-fp8-tsv")) a->cfg.gemm_fp8_tsv = argv[++i];
    else if (!strcmp(o, "--clock-tsv")) a->cfg.clock_tsv = argv[++i];
    else if (!strcmp(o, "--power-json")) a->cfg.power_json = argv[++i];
    else if (!strcmp(o, "--power-tsv")) a->cfg.power_tsv = argv[++i];
    else if (!strcmp(o, "--power-gemm")) {
      if (parse_power_gemm(argv[++i], &a->cfg, e)) return -1;
    } else if (!strcmp(o, "--power-prefill-attn")) {
      if (parse_power_attn(argv[++i], &a->cfg, e)) return -1;
    }
    else if (!strcmp(o, "--power-settle-s")) {
      if (parse_seconds(o, argv[++i], 0, 60, &a->cfg.power_settle_s, e)) return -1;
    } else if (!strcmp(o, "--power-timed-s")) {
      if (parse_seconds(o, argv[++i], 0.1, 60, &a->cfg.power_timed_s, e)) return -1;
    }
    else if (!strcmp(o, "--attn-tsv")) a->cfg.attn_tsv = argv[++i];
    else if (!strcmp(o, "--attn-context")) {
      const char *v = argv[++i];
      if (strcmp(v, "step") && strcmp(v, "alone")) return ts_fail(e, NULL, o, "'%s' must be step or alone", v);
      a->cfg.attn_alone = !strcmp(v, "alone");
    }
    else if (!strcmp(o, "--spread-tsv")) a->spread_tsv = argv[++i];
    else if (!strcmp(o, "--moe-tsv")) a->moe_tsv = argv[++i];
    else if (!strcmp(o, "--max-bytes")) {
      if (parse_list(o, argv[++i], 4096, 1LL << 34, v, 1, &n, e)) return -1;
      a->max_bytes = v[0];
    } else if (!strcmp(o, "--comm-passes")) {
      if (parse_list(o, argv[++i], 1, 8, v, 1, &n, e)) return -1;
      a->cfg.comm_passes = (int)v[0];
    } else if (!strcmp(o, "--comm-batch-us")) {
      if (parse_list(o, argv[++i], 100, 1000000, v, 1, &n, e)) return -1;
      a->comm_batch_us = v[0];
    } else if (!strcmp(o, "--comm-reps")) {
      if (parse_list(o, argv[++i], 3, 15, v, 1, &n, e)) return -1;
      a->comm_reps = (int)v[0];
    } else if (!strcmp(o, "--coll-groups")) {
      if (parse_list(o, argv[++i], 32, 512, v, 8, &n, e)) return -1;
      for (int j = 0; j < n; j++)
        if (v[j] & (v[j] - 1)) return ts_fail(e, NULL, o, "%lld is not a power of two (TACO groups are 32..512)", v[j]);
      a->n_coll_groups = n;
      for (int j = 0; j < n; j++) a->coll_groups[j] = (int)v[j];
    } else if (!strcmp(o, "--gemm-passes")) {
      if (parse_list(o, argv[++i], 1, CALIB_MAX_GEMM_PASSES, v, 1, &n, e)) return -1;
      a->cfg.gemm_passes = (int)v[0];
    }
    else if (!strcmp(o, "--only")) {
      if (parse_phases(argv[++i], &a->phases, e)) return -1;
      a->only = 1;
    } else if (!strcmp(o, "--tp")) {
      if (parse_list(o, argv[++i], 1, 64, v, 8, &n, e)) return -1;
      a->sweep.n_tp = n;
      for (int j = 0; j < n; j++) a->sweep.tp[j] = (int)v[j];
    } else if (!strcmp(o, "--tokens")) {
      if (parse_list(o, argv[++i], 1, 1 << 20, v, 8, &n, e)) return -1;
      a->sweep.n_tokens = n;
      for (int j = 0; j < n; j++) a->sweep.tokens[j] = v[j];
    } else if (!strcmp(o, "--gpus")) {
      if (parse_list(o, argv[++i], 1, CALIB_MAX_GPUS, v, 1, &n, e)) return -1;
      a->gpus = (int)v[0];
    } else if (!strcmp(o, "--time-limit")) {
      if (parse_list(o, argv[++i], 10, 86400, v, 1, &n, e)) return -1;
      a->time_limit_s = (double)v[0];
    } else return ts_fail(e, NULL, o, "unknown option");
  }
  if (a->transport && (!*a->transport || strlen(a->transport) >= 32))
    return ts_fail(e, NULL, "--transport-name", "must be 1-31 characters");
  if (no_clock) {
    if (a->phases == PH_CLOCK) return ts_fail(e, NULL, "--no-clock", "contradicts --only clock");
    a->phases &= ~PH_CLOCK;
  }
  if (a->compute_from && (a->phases & (PH_GEMM | PH_GEMM_FP8 | PH_ATTN | PH_MEM | PH_CODEC | PH_CLOCK | PH_MOE | PH_HOST)) &&
      (a->phases | PH_CLOCK) != PH_ALL)
    return ts_fail(e, NULL, "--compute-from", "replaces the compute phases; use --only comm or no --only");
  if (a->compute_from) a->phases = PH_COMM;
  if ((a->phases & PH_POWER) && !a->cfg.power_json)
    return ts_fail(e, NULL, "--power-json", "required by the power phase (--only power)");
  if (!(a->phases & PH_POWER) && (a->cfg.n_power_gemms || a->cfg.n_power_attns))
    return ts_fail(e, NULL, a->cfg.n_power_gemms ? "--power-gemm" : "--power-prefill-attn",
                   "only the power phase runs it (add power to --only)");
  if (!(a->phases & PH_POWER) && (a->cfg.power_json || a->cfg.power_tsv))
    return ts_fail(e, NULL, a->cfg.power_json ? "--power-json" : "--power-tsv",
                   "only the power phase writes it (add power to --only)");
  if (a->phases == PH_POWER && a->out)
    return ts_fail(e, NULL, "--out", "--only power writes no calibration file (its output is --power-json)");
  return 0;
}

static void config_budgets(calib_config *cfg, const calib_args *a) {
  cfg->budget = calib_budget_default(cfg->quick);
  cfg->comm_budget = calib_budget_default(cfg->quick);
  /* collectives are noisier than kernels (the socket transport most): seven
   * batches even in --quick, and only transfers over 100 ms get fewer */
  cfg->comm_budget.warmup = 2;
  cfg->comm_budget.reps = a->comm_reps ? a->comm_reps : 7;
  cfg->comm_budget.target_us = a->comm_batch_us ? (double)a->comm_batch_us : 1000.0;
  cfg->comm_budget.max_batch = 20;
  cfg->comm_budget.long_us = 100000.0;
  cfg->comm_max_bytes = a->max_bytes ? (size_t)a->max_bytes : (size_t)1 << 30;
  if (!cfg->gemm_passes) cfg->gemm_passes = cfg->quick ? 1 : 4;
  static const int all[] = {32, 64, 128, 256, 512}, quick[] = {64, 128, 256};
  cfg->n_groups = cfg->quick ? 3 : 5;
  for (int i = 0; i < cfg->n_groups; i++) cfg->groups[i] = cfg->quick ? quick[i] : all[i];
  cfg->n_coll_groups = cfg->quick ? 1 : 2;
  cfg->coll_groups[0] = 128;
  cfg->coll_groups[1] = 256;
  if (a->n_coll_groups) { /* --coll-groups */
    cfg->n_coll_groups = a->n_coll_groups;
    for (int i = 0; i < a->n_coll_groups; i++) cfg->coll_groups[i] = a->coll_groups[i];
  }
}

/* ---- what the file records about the machine ---- */

/* The kernel module's version: the first token of the form N.N[.N] in
 * /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX [Open] Kernel
 * Module [for x86_64]  580.159.04  Release Build ..."). */
static void driver_version(char *out, size_t n) {
  snprintf(out, n, "unknown");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[512];
  if (fgets(line, sizeof line, f)) {
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
      size_t digits = strspn(t, "0123456789."), len = strlen(t);
      if (len > 2 && digits == len && t[0] != '.' && strchr(t, '.') && len < n) {
        snprintf(out, n, "%s", t);
        break;
      }
    }
  }
  fclose(f);
}

/* The recorded transport: the --transport decision (kernels/coll_transport.h)
 * for the GPUs the collectives use, which are taken to be on this host (one
 * process per GPU: the first nranks local GPUs); "none" with one GPU. */
static int transport_recorded(const calib_args *a, int ndev, char *out, size_t n, ts_err *e) {
  int devs[CALIB_MAX_GPUS], k = a->cfg.multi ? a->cfg.nranks : a->cfg.ndev;
  if (k > CALIB_MAX_GPUS) k = CALIB_MAX_GPUS;
  for (int i = 0; i < k; i++) devs[i] = a->cfg.multi ? i % ndev : a->cfg.devices[i];
  coll_transport_facts f;
  coll_transport t;
  char why[256];
  rt_transport_local(devs, k, &f);
  if (coll_transport_decide((coll_transport)a->cfg.transport, &f, &t, why, sizeof why))
    return ts_fail(e, NULL, "--transport", "%s", why);
  snprintf(out, n, "%s", coll_transport_record(t, &f));
  return 0;
}

static int fill_metadata(schema_calibration *c, const calib_args *a, int ndev, ts_err *e) {
  struct cudaDeviceProp prop;
  cudaError_t ce = cudaGetDeviceProperties(&prop, a->cfg.devices[0]);
  if (ce != cudaSuccess) return ts_fail_sys(e, "%s:%d: cudaGetDeviceProperties: %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  snprintf(c->gpu, sizeof c->gpu, "%.63s", prop.name);
  driver_version(c->driver, sizeof c->driver);
  int rtv = 0, nv = 0;
  cudaRuntimeGetVersion(&rtv);
  ncclGetVersion(&nv);
  snprintf(c->cuda, sizeof c->cuda, "%d.%d", rtv / 1000, (rtv % 1000) / 10);
  snprintf(c->nccl, sizeof c->nccl, "%d.%d.%d", nv / 10000, (nv % 10000) / 100, nv % 100);
  if (a->transport) snprintf(c->transport, sizeof c->transport, "%s", a->transport);
  else if (transport_recorded(a, ndev, c->transport, sizeof c->transport, e)) return -1;
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(c->measured_at, sizeof c->measured_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
  c->derived = false;
  return 0;
}

static void fill_notes(schema_calibration *c, const calib_args *a, double wall_s) {
  char prefix[220];
  snprintf(prefix, sizeof prefix, "%.200s%s", c->notes, *c->notes ? "; " : "");
  char env[320]; /* every NCCL_*, EXEC_* variable set (common/ts_env.h) */
  ts_env_knobs(env, sizeof env);
  char src[200];
  if (a->compute_from) snprintf(src, sizeof src, "GEMM and kernel tables copied from %.120s (same GPUs, measured just before)", a->compute_from);
  else if (a->phases & (PH_GEMM | PH_GEMM_FP8))
    snprintf(src, sizeof src, "all tables measured in this run (%s: geometric mean of %d passes, alternating direction)",
             (a->phases & PH_GEMM) && (a->phases & PH_GEMM_FP8) ? "GEMMs, FP8 GEMMs"
             : a->phases & PH_GEMM                               ? "GEMMs"
                                                                 : "FP8 GEMMs",
             a->cfg.gemm_passes);
  else snprintf(src, sizeof src, "all tables measured in this run");
  char how[96];
  if (a->cfg.multi) snprintf(how, sizeof how, "collectives one process per GPU (%d ranks)", a->cfg.nranks);
  else snprintf(how, sizeof how, "collectives from one process");
  if (a->cfg.comm_passes > 1)
    snprintf(how + strlen(how), sizeof how - strlen(how), ", median of %d passes", a->cfg.comm_passes);
  char spread[120] = "";
  if (a->cfg.spread && a->cfg.spread->n) calib_spread_summary(a->cfg.spread, spread, sizeof spread);
  char all[1536]; /* then cut to the schema's notes (a long note is truncated, never an error) */
  char variants[320];
  ops_variant_note(variants, sizeof variants);
  snprintf(all, sizeof all, "%stacorun calibrate%s --transport %s on %d GPU(s), %.0f s; %s; %s; %s%s%s; env:%s", prefix,
           a->cfg.quick ? " --quick" : "", coll_transport_name((coll_transport)a->cfg.transport),
           a->cfg.multi ? a->cfg.nranks : a->cfg.ndev, wall_s, variants, src, how, *spread ? ", " : "", spread,
           *env ? env : " (none)");
  snprintf(c->notes, sizeof c->notes, "%.511s", all);
}

static int copy_compute_tables(const char *path, schema_calibration *c, ts_err *e) {
  schema_calibration src;
  if (schema_calibration_load(path, &src, e)) return -1;
  int rc = schema_calibration_copy_compute(c, &src);
  schema_calibration_free(&src);
  return rc ? ts_fail_sys(e, "calibrate: out of memory") : 0;
}

/* Reports a failed optional phase and appends its name to `missing`. */
static void optional_phase(int rc, const char *what, const ts_err *e, char *missing, size_t n) {
  if (rc == 0) return;
  fprintf(stderr, "calibrate: warning: %s not measured: %s\n", what, e->msg);
  snprintf(missing + strlen(missing), n - strlen(missing), "%s%s", *missing ? ", " : "", what);
}

/* Fits, notes and save; called again after each addition (fits are redone). */
static int finish(schema_calibration *c, const calib_args *a, const char *missing, const char *out, ts_err *e) {
  c->n_fits = 0;
  if (calib_add_fits(c)) return ts_fail_sys(e, "calibrate: out of memory");
  if (*missing) snprintf(c->notes, sizeof c->notes, "NOT MEASURED or FAILED: %.300s", missing);
  else c->notes[0] = '\0';
  fill_notes(c, a, calib_elapsed_s());
  return schema_calibration_save(c, out, e);
}

static void on_time_limit(int sig) {
  (void)sig;
  static const char msg[] = "tacorun calibrate: time limit reached; stopping (raise --time-limit)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

/* FP8 tensor cores: compute capability 8.9 (Ada) and later; -1 when the properties cannot be read. */
static int gpu_has_fp8(int dev, ts_err *e) {
  struct cudaDeviceProp prop;
  cudaError_t ce = cudaGetDeviceProperties(&prop, dev);
  if (ce != cudaSuccess) return ts_fail_sys(e, "%s:%d: cudaGetDeviceProperties: %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  return prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
}

/* The FP8 phase on this GPU: kept where it has FP8; else an error when --only asked for it, and left out
 * (said on standard error) when it came with the default phases. */
static int fp8_phase_possible(calib_args *a, ts_err *e) {
  if (!(a->phases & PH_GEMM_FP8)) return 0;
  int fp8 = gpu_has_fp8(a->cfg.devices[0], e);
  if (fp8 < 0) return -1;
  if (fp8) return 0;
  if (a->only && (a->phases & PH_GEMM_FP8))
    return ts_fail(e, NULL, "--only", "gemm_fp8: GPU %d has no FP8 tensor cores (compute capability below 8.9)",
                   a->cfg.devices[0]);
  a->phases &= ~PH_GEMM_FP8;
  fprintf(stderr, "calibrate: GPU %d has no FP8 tensor cores: no FP8 GEMM check or \"gemm_fp8\" list\n", a->cfg.devices[0]);
  return 0;
}

/* The rank and size of a one-process-per-GPU launch (mpirun, or the
 * TACORUN_* variables rt_nccl reads); 0 when this is a single process. */
static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

static int multi_launch(int *rank, int *size, int *local) {
  if (getenv("TACORUN_ID_FILE")) {
    *rank = env_int("TACORUN_RANK", -1), *size = env_int("TACORUN_NRANKS", -1);
    *local = env_int("TACORUN_LOCAL_RANK", *rank);
  } else if (getenv("OMPI_COMM_WORLD_SIZE")) {
    *rank = env_int("OMPI_COMM_WORLD_RANK", -1), *size = env_int("OMPI_COMM_WORLD_SIZE", -1);
    *local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", *rank);
  } else if (getenv("PMI_SIZE")) {
    *rank = env_int("PMI_RANK", -1), *size = env_int("PMI_SIZE", -1);
    *local = *rank;
  } else {
    return 0;
  }
  return 1;
}

/* The collectives in multi-process mode: every rank opens the world
 * communicator, runs both phases, closes it. codec_first: rank 0 measured
 * the codec kernels before (so the collectives run back to back). */
static int run_multi_comm(calib_args *a, schema_calibration *c, int root, const char *missing_in, const char *out,
                          ts_err *e);

static int run(calib_args *a, ts_err *e) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return ts_fail_sys(e, "no CUDA device");
  if (a->gpus > ndev) return ts_fail(e, NULL, "--gpus", "%d requested, %d present", a->gpus, ndev);
  int local = 0;
  a->cfg.multi = multi_launch(&a->cfg.rank, &a->cfg.nranks, &local);
  if (a->cfg.multi && (a->cfg.rank < 0 || a->cfg.nranks < 1 || a->cfg.rank >= a->cfg.nranks))
    return ts_fail(e, NULL, "environment", "rank %d of %d: not a valid multi-process launch", a->cfg.rank,
                   a->cfg.nranks);
  if (a->cfg.multi && a->gpus)
    return ts_fail(e, NULL, "--gpus", "one process per GPU: the number of ranks is the group (drop --gpus)");
  if (a->cfg.multi) {
    a->cfg.ndev = 1;
    a->cfg.devices[0] = local % ndev; /* the GPU rt_nccl gives this rank */
  } else {
    a->cfg.ndev = a->gpus ? a->gpus : (ndev < CALIB_MAX_GPUS ? ndev : CALIB_MAX_GPUS);
    for (int i = 0; i < a->cfg.ndev; i++) a->cfg.devices[i] = i;
  }
#ifdef TACOSIM_HAVE_MPI
  /* Every rank joins MPI now: the ranks other than 0 then wait in an
   * ordinary broadcast (of the NCCL id) while rank 0 measures the compute
   * tables, and a rank that fails ends the whole job (cmd_calibrate). */
  if (a->cfg.multi && !getenv("TACORUN_ID_FILE")) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) return ts_fail_sys(e, "calibrate: MPI_Init failed");
  }
#endif
  static calib_spread spread;
  a->cfg.spread = &spread;
  config_budgets(&a->cfg, a);
  calib_elapsed_s();
  if (a->cfg.multi && a->cfg.rank != 0) {
    /* not rank 0: no file, no compute phases; wait for rank 0 in the
     * communicator's set-up, then run the collectives */
    if (a->check_only) return 0;
    if (cudaSetDevice(a->cfg.devices[0]) != cudaSuccess) return ts_fail_sys(e, "calibrate: cannot use GPU %d", a->cfg.devices[0]);
    if (!(a->phases & PH_COMM) || a->cfg.nranks < 2) return 0;
    schema_calibration scratch; /* the tables of this rank, not saved (every rank times the same) */
    memset(&scratch, 0, sizeof scratch);
    int rc = run_multi_comm(a, &scratch, 0, "", NULL, e);
    schema_calibration_free(&scratch);
    calib_spread_free(&spread);
    return rc;
  }

  if (cudaSetDevice(a->cfg.devices[0]) != cudaSuccess) return ts_fail_sys(e, "calibrate: cannot use GPU 0");
  /* A kernel that disagrees with its reference is reported (and recorded in
   * the file's notes), but its timing is still worth having. */
  ts_err check_err = {{0}, 0};
  if (fp8_phase_possible(a, e)) return -1;
  const int fp8_check = (a->phases & PH_GEMM_FP8) != 0; /* --check: unless --only leaves gemm_fp8 out */
  int check_rc = rt_ops_selfcheck(stderr, &check_err);
  if (!check_rc && fp8_check) check_rc = calib_gemm_fp8_check(stderr, &check_err);
  if (a->check_only) {
    if (check_rc) *e = check_err;
    else fprintf(stderr, "kernel self-check against the C references: ok%s\n", fp8_check ? " (the FP8 GEMM too)" : "");
    return check_rc;
  }
  if (check_rc) fprintf(stderr, "calibrate: WARNING: kernel self-check failed: %s\n", check_err.msg);
  else fprintf(stderr, "[%6.1fs] kernel self-check against the C references: ok\n", calib_elapsed_s());
  schema_calibration c;
  memset(&c, 0, sizeof c);
  int rc = fill_metadata(&c, a, a->cfg.multi ? a->cfg.nranks : a->cfg.ndev, e);
  char out_default[64];
  snprintf(out_default, sizeof out_default, "calibration-%s.json", c.transport);
  const char *out = a->out ? a->out : out_default;
  fprintf(stderr, "tacorun calibrate: %s x %d%s, driver %s, CUDA %s, NCCL %s, transport %s -> %s\n", c.gpu,
          a->cfg.multi ? a->cfg.nranks : a->cfg.ndev, a->cfg.multi ? " (one process per GPU)" : "", c.driver, c.cuda,
          c.nccl, c.transport, a->phases == PH_POWER ? a->cfg.power_json : out);

  calib_shapes sh;
  memset(&sh, 0, sizeof sh);
  if (!rc && (a->phases & (PH_GEMM | PH_GEMM_FP8 | PH_ATTN | PH_MEM))) {
    rc = calib_shapes_build(&sh, a->models, NULL, &a->sweep, e);
    if (!rc)
      fprintf(stderr, "[%6.1fs] %d models: %d GEMM shapes (%.0f TFLOP per pass), %d FP8 GEMM keys (%.0f TFLOP per pass), "
              "%d attention shapes, %d memory-bound shapes\n", calib_elapsed_s(), sh.models, sh.n_gemm,
              calib_shapes_gemm_flops(&sh) * 1e-12, sh.n_gemm_fp8, calib_shapes_gemm_fp8_flops(&sh) * 1e-12, sh.n_attn,
              sh.n_mem);
  }
  if (!rc && a->compute_from) rc = copy_compute_tables(a->compute_from, &c, e);
  if (!rc && (a->phases & PH_GEMM)) rc = calib_run_gemms(&a->cfg, &sh, &c, e);
  /* the FP8 GEMMs: an addition to the BF16 tables, so a failure there is reported and recorded in the
   * notes unless they were asked for alone */
  char missing[200] = "";
  if (!rc && (a->phases & PH_GEMM_FP8)) {
    if (a->phases == PH_GEMM_FP8) rc = calib_run_gemm_fp8(&a->cfg, &sh, &c, e);
    else optional_phase(calib_run_gemm_fp8(&a->cfg, &sh, &c, e), "FP8 GEMMs (gemm_fp8)", e, missing, sizeof missing);
  }
  if (!rc && (a->phases & PH_ATTN)) rc = calib_run_attention(&a->cfg, &sh, &c, e);
  if (!rc && (a->phases & PH_ATTN)) rc = calib_run_attention_shapes(&a->cfg, &sh, &c, e);
  if (!rc && (a->phases & PH_MEM)) rc = calib_run_memops(&a->cfg, &sh, &c, e);
  if (!rc && (a->phases & PH_MOE)) rc = calib_run_moe(&a->cfg, a->models, a->moe_tsv, &c, e);
  if (!rc && (a->phases & PH_HOST)) rc = calib_run_host(&a->cfg, &c, e);
  /* the power phase writes its own file; asked for alone, it writes no calibration file */
  if (!rc && (a->phases & PH_POWER)) {
    if (a->phases == PH_POWER) rc = calib_run_power(&a->cfg, e);
    else optional_phase(calib_run_power(&a->cfg, e), "power phase", e, missing, sizeof missing);
  }
  if (a->phases == PH_POWER) goto done;
  /* the clock section is an addition to the compute tables: a failure there
   * is reported and recorded in the notes, the tables are kept */
  if (!rc && (a->phases & PH_CLOCK))
    optional_phase(calib_run_clock(&a->cfg, &c, e), "clock section", e, missing, sizeof missing);
  int comm = (a->phases & PH_COMM) && (a->cfg.multi ? a->cfg.nranks : a->cfg.ndev) >= 2;
  if ((a->phases & PH_COMM) && !comm) fprintf(stderr, "calibrate: one GPU: no collectives to measure\n");
  if (check_rc)
    snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%skernel self-check FAILED (%.120s)",
             *missing ? ", " : "", check_err.msg);
  if (a->cfg.multi) {
    /* the other ranks wait in the communicator's set-up: measure the codec
     * kernels first so that the collectives run back to back */
    if (!rc && (a->phases & PH_CODEC)) {
      rc = finish(&c, a, missing, out, e);
      if (!rc) optional_phase(calib_run_codec(&a->cfg, &c, e), "codec kernels", e, missing, sizeof missing);
    }
    if (!rc && comm) rc = run_multi_comm(a, &c, 1, missing, out, e);
    else if (!rc) rc = finish(&c, a, missing, out, e);
    goto done;
  }
  if (!rc && comm) rc = calib_run_comm(&a->cfg, 0, &c, e);
  /* The TACO kernels and compressed collectives come last and are optional:
   * a failure there is reported and recorded, and what was measured is kept.
   * The file is saved before them too, so even a crash there leaves it. */
  int optional = (a->phases & PH_CODEC) || comm;
  if (!rc && optional) rc = finish(&c, a, missing, out, e);
  if (!rc && (a->phases & PH_CODEC))
    optional_phase(calib_run_codec(&a->cfg, &c, e), "codec kernels", e, missing, sizeof missing);
  int device_ok = cudaDeviceSynchronize() == cudaSuccess; /* a sticky error ends GPU work */
  if (!device_ok) optional_phase(-1, "compressed collectives (device in error state)", e, missing, sizeof missing);
  if (!rc && comm && device_ok)
    optional_phase(calib_run_comm(&a->cfg, 1, &c, e), "compressed collectives", e, missing, sizeof missing);
  if (!rc) rc = finish(&c, a, missing, out, e);
done:
  if (!rc && a->spread_tsv && spread.n) rc = calib_spread_write(&spread, a->spread_tsv, e);
  if (!rc && a->phases != PH_POWER)
    fprintf(stderr, "[%6.1fs] wrote %s: %d GEMMs, %d FP8 GEMMs, %d kernel tables, %d collective tables, %d fits\n",
            calib_elapsed_s(), out, c.n_gemm, c.n_gemm_fp8, c.n_kernels, c.n_colls, c.n_fits);
  calib_shapes_free(&sh);
  schema_calibration_free(&c);
  calib_spread_free(&spread);
  return rc;
}

/* root: this rank writes the file (c); the others time into c and drop it. */
static int run_multi_comm(calib_args *a, schema_calibration *c, int root, const char *missing_in, const char *out,
                          ts_err *e) {
  char missing[200];
  snprintf(missing, sizeof missing, "%s", missing_in);
  if (calib_world_open(&a->cfg, e)) return -1;
  /* the world's decision (its ranks' hosts and GPUs, gathered over NCCL) replaces
   * the one fill_metadata took from this host's GPUs alone */
  if (!a->transport) snprintf(c->transport, sizeof c->transport, "%s", rt_nccl_transport((const rt_nccl *)a->cfg.world));
  int rc = calib_run_comm(&a->cfg, 0, c, e);
  if (!rc && root) rc = finish(c, a, missing, out, e); /* kept even if the compressed ones fail */
  if (!rc && (a->phases & PH_COMM)) {
    ts_err ce = {{0}, 0};
    int crc = calib_run_comm(&a->cfg, 1, c, &ce);
    /* a rank whose compressed collectives failed has aborted the world: all
     * ranks end with the error, rank 0 after recording it */
    if (crc && root) optional_phase(crc, "compressed collectives", &ce, missing, sizeof missing);
    if (crc && !root) *e = ce, rc = -1;
    if (crc) {
      if (root) finish(c, a, missing, out, e);
      calib_world_close(&a->cfg, 1);
      return root ? 0 : -1;
    }
  }
  if (!rc && root) rc = finish(c, a, missing, out, e);
  calib_world_close(&a->cfg, rc != 0);
  return rc;
}

int cmd_calibrate(int argc, char **argv) {
  calib_args a;
  ts_err e = {{0}, 0};
  int p = parse_args(argc, argv, &a, &e);
  if (p > 0) {
    usage(stdout);
    return 0;
  }
  if (p < 0) {
    fprintf(stderr, "tacorun calibrate: %s\n", e.msg);
    usage(stderr);
    return ts_exit_status(&e);
  }
  signal(SIGALRM, on_time_limit);
  alarm((unsigned)a.time_limit_s);
  int rc = run(&a, &e);
  alarm(0);
#ifdef TACOSIM_HAVE_MPI
  /* a rank that ends before the collectives (or fails) still ends MPI: a
   * failure takes the other ranks down instead of leaving them waiting */
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) {
    if (rc) {
      fprintf(stderr, "tacorun calibrate: %s\n", e.msg);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
  }
#endif
  if (rc) {
    fprintf(stderr, "tacorun calibrate: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  return 0;
}
