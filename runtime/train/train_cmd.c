/* train_cmd.c — `tacorun train`: trains a small byte-level GPT on a text
 * corpus through the executor (exec_model.h), with or without compression of
 * the TP all-reduces, and logs training and validation loss to a CSV. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ts_args.h"
#include "exec_model.h"
#include "exec_run.h"
#include "ops_variants.h"
#include "fp8_plain.h"
#include "plan_reshape.h"
#include "rt_nccl.h"
#include "train_data.h"
#include "train_emu.h"
#include "train_fp8.h"

int train_emu_check(ts_err *e); /* train_emu_check.c */
int train_reshape_report(const char *dir, double max_err, double link_gbps, ts_err *e); /* train_reshape.c */

static void usage(FILE *out) {
  fprintf(out,
          "usage: mpirun -np TP tacorun train --corpus FILE [options]     (TP = 1: tacorun train ... alone)\n"
          "       tacorun train --check-codec\n"
          "\n"
          "Trains a small GPT (byte-level: vocabulary 256, learned positions, LayerNorm, GELU, tied\n"
          "embeddings, no biases) on a text file for real, on GPUs, through the executor of `tacorun\n"
          "execute`: BF16 compute, FP32 master weights, AdamW (beta 0.9/0.95, weight decay 0.01), linear\n"
          "warm-up then cosine decay of the learning rate, Megatron-style tensor parallelism over the\n"
          "processes (TP = the number of processes, one GPU each). The corpus is split into a training\n"
          "part and a held-out validation part (the last --val-frac of the bytes); training batches are\n"
          "drawn at random offsets from a fixed seed (the same batches for every codec), validation\n"
          "runs the forward pass over fixed windows of the held-out part.\n"
          "\n"
          "Codecs of the layer TP all-reduces (attention output and FC2 forward, QKV and FC1 input\n"
          "gradients backward; the embedding and loss all-reduces stay plain):\n"
          "  none        NCCL BF16 all-reduce (the baseline)\n"
          "  taco-e4m3   TACO, G = --group (128), E4M3      taco-e5m2   TACO, G = --group, E5M2\n"
          "  fp8-tensor  plain FP8 E4M3 with one absmax scale per tensor, no Hadamard (kernels/fp8_plain.h:\n"
          "              encode, all-gather, decode-sum in rank order)\n"
          "  caat        CAAT-Net partial all-reduce, p = --p (0.5)\n"
          "  taco+caat   both (TACO E4M3 G = --group on the shared channels)\n"
          "Validation uses the run's own forward path (its codec), as the trained model would run.\n"
          "\n"
          "Options (defaults in brackets):\n"
          "  --corpus FILE      text file (e.g. the King James Bible: `bible gen1:1-rev22:21` from the\n"
          "                     Debian packages bible-kjv and bible-kjv-text)\n"
          "  --codec C[,C...] [none]  one run per codec, one after the other in the same processes\n"
          "  --group G|auto [128]  TACO's (and the ablation codecs') group size; auto: the data-driven\n"
          "                     reshaping's choice read from --reshape-file FILE (the output of --reshape below:\n"
          "                     every tensor class's chosen_runnable row, which must agree; plan/plan_reshape.h)\n"
          "  --reshape-file FILE  with --group auto [none]\n"
          "  --p P [0.5]\n"
          "  --steps N [2000]   --eval-every N [200]   --eval-batches N [0 = the whole held-out part]\n"
          "  --log-every N [1]  --hidden H [512]  --layers L [8]  --heads A [8]  --ffn F [4H]\n"
          "  --seq S [256]      --batch B [16] (sequences per step)\n"
          "  --lr X [6e-4]      --warmup N [100]  --min-lr-frac X [0.1]  --val-frac X [0.05]\n"
          "  --seed S [1234]    (weights and batch order)\n"
          "  --csv OUT          per-step log: step,split,loss,lr,elapsed_s (split: train or val)\n"
          "  --summary OUT      one CSV line: codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,\n"
          "                     replica_spread (how far the replicated norm gains and biases drifted\n"
          "                     apart over the TP ranks: their largest relative checksum spread; 0: none)\n"
          "  --out-dir DIR      DIR/loss-<codec>.csv per run and DIR/summary.csv (header and one line per\n"
          "                     run) instead of --csv/--summary\n"
          "  --timeout S [300]  bound on every wait (a dead peer aborts the run)\n"
          RT_TRANSPORT_USAGE
          "  --inject-nan STEP [off]  fault test: at training step STEP a NaN enters the run: with --tp-emulate\n"
          "                     into rank 0's partial of the step's first layer all-reduce (what a compressed\n"
          "                     all-reduce must not hide), else into a gradient. The run must stop at that\n"
          "                     step naming it (exit 1); a demonstration, not a measurement.\n"
          "  --tp-emulate K [off]  TP = K on one GPU, in one process (no mpirun): K ranks as threads, each\n"
          "                     with its own shards, initial weights and GEMMs (the row-parallel ones are\n"
          "                     the K partial GEMMs over slices of the inner dimension); every TP all-reduce\n"
          "                     runs on one GPU with the codec kernels of the real collective in its order\n"
          "                     (kernels/coll_emu.h; CAAT-Net's shared/private split and sqrt(K) included).\n"
          "                     Adds the ablation codecs fp8-group (per-group absmax FP8 E4M3, G = --group,\n"
          "                     no Hadamard) and fp8-hadamard (Hadamard + per-group absmax, no adaptive\n"
          "                     scale), kernels/fp8_ablate.h. Plain sums: FP32 in rank order, one rounding\n"
          "                     (NCCL's bits at K = 2, not above). Its wall times and steps/s are not a\n"
          "                     speed of TP: K ranks share one GPU\n"
          "  --tp-emulate-allreduce two-shot|one-shot [two-shot]  the compressed all-reduce emulated\n"
          "  --stats-every N [0 = off]  with --tp-emulate and --out-dir: at every N-th training step (and\n"
          "                     the last) the tensors the layer all-reduces carry (rank 0's partial):\n"
          "                     rms, max |x|, max/rms, kurtosis E x^4 / (E x^2)^2, per layer, in\n"
          "                     DIR/stats-<codec>.csv\n"
          "  --dump-at STEP [off]  with --stats-every: at training step STEP, the first --dump-rows [256] rows\n"
          "                     of rank 0's partial of layers 0, L/2, L-1 (each layer all-reduce) as FP32 files\n"
          "                     in DIR/dump-<codec>/ with dump-index.csv\n"
          "  --reshape DUMPDIR  (no training, no GPU) the data-driven reshaping (kernels/taco_reshape.h) on a\n"
          "                     dump: per tensor class the measured error (per channel) and cost (bandwidth\n"
          "                     model, NVLink 450 GB/s) of every group size and axis, and the choice: the\n"
          "                     cheapest within --reshape-max-err [0.04], over all candidates and over those\n"
          "                     the executor runs (groups along hidden dividing it), as CSV: save it to a file\n"
          "                     and give it to --group auto --reshape-file FILE, or to a plan's TACO codec as\n"
          "                     \"group\": \"auto\", \"reshape\": \"FILE\" (plan/README.md)\n"
          "  --check-emu        the emulated all-reduce of --tp-emulate on the GPU (every codec, TP 2/4/8, BF16\n"
          "                     and FP32), then the ablation codecs' kernels alone (G 32-512, E4M3/E5M2, a\n"
          "                     partial group, NaN and Inf groups) against their plain-C reference, bit for\n"
          "                     bit (exit 77 without a GPU) [off]\n"
          "  --check-codec      the fp8-tensor CUDA kernels against their plain-C reference, bit for bit\n"
          "                     (exit 77 without a GPU) [off]\n"
          "  (--csv, --summary, --out-dir: not written unless given)\n");
  ops_variant_usage(out);
  fprintf(out,
          "reads:  the --corpus FILE\n"
          "writes: the --csv and --summary files, or DIR/loss-<codec>.csv and DIR/summary.csv of --out-dir;\n"
          "        progress and the final losses on standard output (rank 0)\n"
          "NaN or Inf in the loss or a gradient stops the run naming the step and the tensor (exit 1); so does\n"
          "NaN or Inf that a TACO encode met (the codec sends them as zeros): step, layer, tensor, count.\n"
          "The final validation loss is always over the whole held-out part.\n"
          "\n"
          "Not implemented: data parallelism and pipeline stages (TP only), gradient clipping, dropout,\n"
          "checkpoints, resuming, a tokenizer other than bytes, SwiGLU/RMSNorm/RoPE model variants.\n");
}

typedef struct {
  const char *corpus, *codec, *csv, *summary, *out_dir, *emu_allreduce;
  int group, steps, eval_every, eval_batches, log_every, hidden, layers, heads, ffn, seq, batch, warmup, timeout_s;
  int tp_emulate, stats_every, dump_at, dump_rows, inject_nan;
  const char *reshape_dir, *reshape_file, *group_arg;
  double p, lr, min_lr_frac, val_frac, reshape_err;
  unsigned long long seed;
  int check_codec;
  coll_transport transport;
} train_opts;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The codec name -> the plan codec of both directions (fp8-tensor: none, the hook runs instead),
 * and the same codec for the emulated TP all-reduce (--tp-emulate). fp8-group and fp8-hadamard
 * exist in the emulation only (*emu_only). */
static int codec_of(const train_opts *o, const char *name, plan_codec *c, int *fp8_tensor, train_emu_codec *ec,
                    int *emu_only) {
  memset(c, 0, sizeof *c);
  memset(ec, 0, sizeof *ec);
  *fp8_tensor = 0, *emu_only = 0;
  c->group = o->group, c->fp8 = PLAN_FP8_E4M3, c->p = o->p;
  ec->ar.taco.group = o->group, ec->ar.taco.fp8 = TACO_FP8_E4M3, ec->p = o->p;
  ec->ar.one_shot = o->emu_allreduce && !strcmp(o->emu_allreduce, "one-shot");
  if (!strcmp(name, "none")) c->kind = PLAN_CODEC_NONE, ec->ar.codec = COLL_EMU_PLAIN;
  else if (!strcmp(name, "taco-e4m3")) c->kind = PLAN_CODEC_TACO, ec->ar.codec = COLL_EMU_TACO;
  else if (!strcmp(name, "taco-e5m2"))
    c->kind = PLAN_CODEC_TACO, c->fp8 = PLAN_FP8_E5M2, ec->ar.codec = COLL_EMU_TACO, ec->ar.taco.fp8 = TACO_FP8_E5M2;
  else if (!strcmp(name, "fp8-tensor")) c->kind = PLAN_CODEC_NONE, *fp8_tensor = 1, ec->ar.codec = COLL_EMU_FP8_TENSOR;
  else if (!strcmp(name, "fp8-group")) *emu_only = 1, ec->ar.codec = COLL_EMU_FP8_GROUP;
  else if (!strcmp(name, "fp8-hadamard")) *emu_only = 1, ec->ar.codec = COLL_EMU_FP8_HADAMARD;
  else if (!strcmp(name, "caat")) c->kind = PLAN_CODEC_CAAT, ec->caat = 1, ec->ar.codec = COLL_EMU_PLAIN;
  else if (!strcmp(name, "taco+caat")) c->kind = PLAN_CODEC_TACO_CAAT, ec->caat = 1, ec->ar.codec = COLL_EMU_TACO;
  else return -1;
  return 0;
}

/* One TP rank of a run: a process of its own (w), or a thread of the emulation (emu). */
typedef struct {
  int tp, rank;
  ncclComm_t comm;
  cudaStream_t stream;
  rt_nccl *w;     /* NULL when emulated */
  train_emu *emu; /* NULL when not */
} train_rank;

#define TRAIN_MAX_CODECS 16
/* Splits the comma list of codecs (in place); returns the count, -1 when too many or empty. */
static int split_codecs(char *list, char **names) {
  int n = 0;
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    if (n == TRAIN_MAX_CODECS) return -1;
    names[n++] = tok;
  }
  return n ? n : -1;
}

static double lr_at(const train_opts *o, int step) {
  if (step < o->warmup) return o->lr * (step + 1) / o->warmup;
  double t = o->steps > o->warmup ? (double)(step - o->warmup) / (o->steps - o->warmup) : 1.0;
  double lo = o->lr * o->min_lr_frac;
  return lo + 0.5 * (o->lr - lo) * (1.0 + cos(3.141592653589793 * t));
}

typedef struct {
  const train_rank *rk;
  exec_model *m;
  train_data *d;
  const train_opts *o;
  plan_op *ops, *fwd_ops;
  int nops, nfwd;
  int32_t *tok, *lab;
  FILE *csv, *stats;
  char *dump_dir;
  int root, caat_emu;
  double t0;
  exec_ref_config cfg;
  plan_codec codec;         /* the executor's codec of both directions */
  train_emu_codec ecodec;   /* the emulation's (--tp-emulate) */
  int fp8_tensor;           /* fp8-tensor: the hook (train_fp8.h) instead of the executor's codec */
  train_fp8 f8;
  size_t params;            /* the model's parameters, counted once */
  float loss;               /* the last training step's */
  double val, eval_s;       /* the last validation loss; seconds spent validating */
} trainer;

/* Runs ops as one iteration (zeroed gradients and loss first); returns the
 * loss. inject (--inject-nan): a NaN into the step, where the emulated TP's
 * first layer all-reduce carries it (train_emu.h), else into a gradient. The
 * TACO encodes' NaN/Inf counts are checked before the loss and gradients. */
static int run_ops(trainer *t, const plan_op *ops, int n, int step, int inject, float *loss, ts_err *e) {
  train_emu *emu = t->rk->emu;
  if (exec_model_set_data(t->m, t->tok, t->lab, e) || exec_model_zero_grad(t->m, e)) return -1;
  if (emu && t->root) train_emu_step_begin(emu, step, t->o->layers, inject);
  for (int i = 0; i < n; i++) {
    /* emulated CAAT-Net: the replicated gradients averaged as the executor does over NCCL */
    if (t->caat_emu && ops[i].kind == PLAN_OP_COMPUTE && ops[i].model_op == PLAN_MOP_OPTIMIZER &&
        train_emu_sync_replicated(emu, t->rk->rank, t->m, e))
      return -1;
    if (exec_model_run_op(t->m, &ops[i], e)) return -1;
  }
  if (t->rk->w && rt_nccl_wait(t->rk->w, e)) return -1;
  if (emu && t->root && train_emu_step_check(emu, e)) return -1;
  if (inject && !emu) { /* fault injection (--inject-nan), a demonstration, not a measurement */
    exec_model *m = t->m;
    float nan_f = NAN;
    CUDA_CHECK(e, cudaMemcpyAsync(m->grad + m->tensors[m->ntensors - 3].offset, &nan_f, 4, cudaMemcpyHostToDevice, m->stream));
  }
  return exec_model_check_finite(t->m, step, loss, e);
}

/* Mean validation loss over the first `batches` validation batches (0: all). */
static int evaluate(trainer *t, int step, int batches, double *val, ts_err *e) {
  const int B = t->o->batch, S = t->o->seq;
  int nb = (int)(train_data_val_windows(t->d, S) / (size_t)B);
  if (batches > 0 && batches < nb) nb = batches;
  double sum = 0;
  for (int b = 0; b < nb; b++) {
    float l;
    train_data_val_batch(t->d, B, S, (size_t)b, t->tok, t->lab);
    if (run_ops(t, t->fwd_ops, t->nfwd, step, 0, &l, e)) return -1;
    sum += l;
  }
  *val = sum / nb;
  return 0;
}

/* The replicated tensors (norm gains and biases) should stay equal on every
 * TP rank. (The position embedding is left out: the executor adds it on TP
 * rank 0 only and initialises it per rank, so the copies differ by design.) Per tensor, a weighted checksum of the FP32
 * master weights, compared over the ranks: returns the largest spread
 * relative to the tensor's weighted absolute sum (0: the same checksums). */
static int replica_spread(trainer *t, double *spread, ts_err *e) {
  exec_model *m = t->m;
  static double v[2 * EXEC_REF_MAX_TENSORS], scale[EXEC_REF_MAX_TENSORS];
  int k = 0;
  float *host = NULL;
  *spread = 0;
  cudaError_t ce = cudaStreamSynchronize(m->stream);
  for (int ti = 0; ti < m->ntensors && ce == cudaSuccess; ti++) {
    exec_tensor_kind kind = m->tensors[ti].kind;
    if (kind == EXEC_T_WTE || kind == EXEC_T_WPE || kind == EXEC_T_QKV || kind == EXEC_T_ATTN_OUT || kind == EXEC_T_FC1 ||
        kind == EXEC_T_FC2)
      continue; /* sharded over TP */
    size_t n = m->tensors[ti].rows * m->tensors[ti].cols;
    float *nh = realloc(host, n * sizeof *host);
    if (!nh) {
      free(host);
      return ts_fail_sys(e, "train: out of memory");
    }
    host = nh;
    ce = cudaMemcpy(host, m->master + m->tensors[ti].offset, n * sizeof *host, cudaMemcpyDeviceToHost);
    double s = 0, a = 0;
    for (size_t i = 0; i < n; i++) {
      double wgt = 1.0 + (double)(i % 13);
      s += wgt * host[i], a += wgt * fabs(host[i]);
    }
    v[k] = s, scale[k] = a;
    k++;
  }
  free(host);
  if (ce != cudaSuccess) return ts_fail_sys(e, "train: copying the master weights: %s", cudaGetErrorString(ce));
  for (int j = 0; j < k; j++) v[k + j] = -v[j];
  if (t->rk->emu) train_emu_max(t->rk->emu, t->rk->rank, v, 2 * k);
  else if (rt_world_max(t->rk->w, v, 2 * k, e)) return -1; /* max and -min of every checksum */
  for (int j = 0; j < k; j++) {
    double r = (v[j] + v[k + j]) / (scale[j] > 0 ? scale[j] : 1.0);
    if (r > *spread) *spread = r;
  }
  return 0;
}

static void log_row(trainer *t, int step, const char *split, double loss, double lr) {
  if (t->root && t->csv) {
    fprintf(t->csv, "%d,%s,%.6f,%.6g,%.3f\n", step, split, loss, lr, now_s() - t->t0);
    if (split[0] == 'v') fflush(t->csv); /* a run stopped by a time limit keeps its curve */
  }
}

/* The model of the run (random weights, the run's codec: through the
 * emulation, or the executor's own with the fp8-tensor hook), its program and
 * the forward ops of that program for validation. */
static int trainer_model(trainer *t, ts_err *e) {
  const train_rank *rk = t->rk;
  const train_opts *o = t->o;
  exec_model *m = t->m;
  if (exec_model_create(m, &t->cfg, 1, rk->tp, rk->rank, rk->tp > 1 ? rk->comm : NULL, 1, 0, NULL, rk->stream, e))
    return -1; /* exec_model_destroy frees what was allocated before the failure */
  m->tp_comm_foreign = rk->emu != NULL;
  if (rk->w) m->wait_timeout_s = rk->w->timeout_s;
  t->tok = malloc((size_t)m->tokens * sizeof *t->tok), t->lab = malloc((size_t)m->tokens * sizeof *t->lab);
  if (!t->tok || !t->lab) return ts_fail_sys(e, "train: out of memory");
  if (rk->emu) {
    /* every layer all-reduce through the emulation, with the run's codec */
    plan_codec none = {.kind = PLAN_CODEC_NONE};
    if (exec_model_init_random(m, o->seed, e) || exec_model_set_codecs(m, none, none, e)) return -1;
    if (train_emu_agree(rk->emu, rk->rank, 0)) return -1;
    if (t->root) train_emu_set_codec(rk->emu, &t->ecodec);
    if (train_emu_agree(rk->emu, rk->rank, 0)) return -1;
    m->tp_allreduce_hook = train_emu_hook;
    m->tp_allreduce_hook_ctx = train_emu_hook_ctx(rk->emu, rk->rank);
    t->caat_emu = t->ecodec.caat;
  } else {
    if (exec_model_init_random(m, o->seed, e) || exec_model_set_codecs(m, t->codec, t->codec, e)) return -1;
    if (t->fp8_tensor && train_fp8_attach(&t->f8, m, e)) return -1;
  }
  if (exec_program_build_single_stage(m, &t->ops, &t->nops, e)) return -1;
  /* validation: the forward ops of the same program (no backward, no optimizer) */
  t->fwd_ops = malloc((size_t)t->nops * sizeof *t->fwd_ops);
  if (!t->fwd_ops) return ts_fail_sys(e, "train: out of memory");
  for (int i = 0; i < t->nops; i++)
    if (t->ops[i].phase == PLAN_PHASE_FWD) t->fwd_ops[t->nfwd++] = t->ops[i];
  return 0;
}

/* Rank 0's files: the loss CSV (--csv), and with the emulation the tensor
 * statistics and dumps (--stats-every, --dump-at, under --out-dir). */
static int trainer_open_logs(trainer *t, ts_err *e) {
  const train_rank *rk = t->rk;
  const train_opts *o = t->o;
  const train_data *d = t->d;
  if (o->csv && t->root) {
    t->csv = fopen(o->csv, "w");
    if (!t->csv) return ts_fail(e, o->csv, NULL, "cannot write");
    char variants[320];
    ops_variant_note(variants, sizeof variants);
    fprintf(t->csv, "# tacorun train: codec %s, TP %d%s, %zu parameters (h %d, %d layers, %d heads, ffn %d), seq %d, "
                    "batch %d, %d steps, lr %g, warmup %d, seed %llu, corpus %s (%zu bytes, %zu held out), group %d%s%s%s; %s\n",
            o->codec, rk->tp, rk->emu ? (t->ecodec.ar.one_shot ? " (emulated on one GPU, one-shot)" : " (emulated on one GPU, two-shot)") : "", t->params, o->hidden, o->layers, o->heads, o->ffn, o->seq, o->batch, o->steps, o->lr, o->warmup,
            o->seed, o->corpus, d->n, d->n - d->train_n, o->group, o->group_arg ? " (auto, from " : "",
            o->group_arg ? o->reshape_file : "", o->group_arg ? ")" : "", variants);
    fprintf(t->csv, "step,split,loss,lr,elapsed_s\n");
  }
  if (t->root && rk->emu && o->stats_every && o->out_dir) {
    char sp[1100];
    snprintf(sp, sizeof sp, "%s/stats-%s.csv", o->out_dir, o->codec);
    t->stats = fopen(sp, "w");
    if (!t->stats) return ts_fail(e, sp, NULL, "cannot write");
    fprintf(t->stats, "# tensors of the layer TP all-reduces (rank 0's partial, before the codec), codec %s\n", o->codec);
    fprintf(t->stats, "step,layer,tensor,elements,rms,max_abs,max_over_rms,kurtosis\n");
    if (o->dump_at >= 0) {
      char dd[1100];
      snprintf(dd, sizeof dd, "%s/dump-%s", o->out_dir, o->codec);
      if (mkdir(dd, 0755) && errno != EEXIST) return ts_fail(e, dd, NULL, "cannot create");
      t->dump_dir = strdup(dd);
      if (!t->dump_dir || train_emu_dump(rk->emu, t->dump_dir, o->dump_at, o->dump_rows, e)) return -1;
    }
  }
  return 0;
}

/* One training step (under the watchdog), its log row and, every
 * --eval-every steps, a validation. */
static int trainer_step(trainer *t, int step, ts_err *e) {
  const train_rank *rk = t->rk;
  const train_opts *o = t->o;
  rt_nccl *w = rk->w;
  char what[64];
  snprintf(what, sizeof what, "train step %d", step);
  if (w) rt_watchdog_arm(w, w->timeout_s + 10, what);
  t->m->lr = (float)lr_at(o, step);
  train_data_next_batch(t->d, o->batch, o->seq, t->tok, t->lab);
  int stats_now = t->stats && (step % o->stats_every == 0 || step + 1 == o->steps || step == o->dump_at);
  if (stats_now) train_emu_stats(rk->emu, t->stats, step, o->layers);
  int rs = run_ops(t, t->ops, t->nops, step, step == o->inject_nan, &t->loss, e);
  if (stats_now) train_emu_stats(rk->emu, NULL, -1, 0), fflush(t->stats);
  if (rk->emu && train_emu_agree(rk->emu, rk->rank, rs) && !rs) rs = ts_fail_sys(e, "another emulated rank failed at step %d", step);
  if (rs) return -1;
  if ((step + 1) % o->log_every == 0 || step + 1 == o->steps) log_row(t, step + 1, "train", t->loss, t->m->lr);
  if ((step + 1) % o->eval_every == 0 && step + 1 < o->steps) {
    double te = now_s();
    if (evaluate(t, step + 1, o->eval_batches, &t->val, e)) return -1;
    t->eval_s += now_s() - te;
    log_row(t, step + 1, "val", t->val, t->m->lr);
    if (t->root)
      fprintf(stderr, "  step %d: train loss %.4f, validation loss %.4f, %.1f s\n", step + 1, t->loss, t->val,
              now_s() - t->t0);
  }
  rt_watchdog_disarm();
  return 0;
}

/* Validation before the first step, the steps, and the final validation over the whole held-out part. */
static int trainer_train(trainer *t, ts_err *e) {
  const train_opts *o = t->o;
  rt_nccl *w = t->rk->w;
  double te;
  t->val = 0, t->eval_s = 0, t->loss = 0;
  t->t0 = now_s();
  te = now_s();
  if (evaluate(t, 0, o->eval_batches, &t->val, e)) return -1;
  t->eval_s += now_s() - te;
  log_row(t, 0, "val", t->val, 0);
  for (int step = 0; step < o->steps; step++)
    if (trainer_step(t, step, e)) return -1;
  te = now_s();
  if (w) rt_watchdog_arm(w, w->timeout_s + 10, "final validation");
  if (evaluate(t, o->steps, 0, &t->val, e)) return -1;
  rt_watchdog_disarm();
  t->eval_s += now_s() - te;
  log_row(t, o->steps, "val", t->val, t->m->lr);
  return 0;
}

/* The run's summary row: on stdout (rank 0) and appended to --summary. */
static int trainer_summary(trainer *t, ts_err *e) {
  const train_opts *o = t->o;
  double wall = now_s() - t->t0, train_s = wall - t->eval_s, spread;
  if (replica_spread(t, &spread, e)) return -1;
  if (!t->root) return 0;
  printf("codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread\n");
  printf("%s,%zu,%d,%.5f,%.5f,%.2f,%.2f,%.2f,%.3g\n", o->codec, t->params, o->steps, t->loss, t->val, wall, train_s,
         o->steps / train_s, spread);
  if (o->summary) {
    FILE *s = fopen(o->summary, o->out_dir ? "a" : "w");
    if (!s) return ts_fail(e, o->summary, NULL, "cannot write");
    fprintf(s, "%s,%zu,%d,%.5f,%.5f,%.2f,%.2f,%.2f,%.3g\n", o->codec, t->params, o->steps, t->loss, t->val, wall,
            train_s, o->steps / train_s, spread);
    fclose(s);
  }
  return 0;
}

static int train_run(const train_rank *rk, const train_opts *o, ts_err *e) {
  train_data d;
  exec_model m;
  trainer t = {.rk = rk, .m = &m, .d = &d, .o = o, .root = rk->rank == 0};
  int emu_only;
  codec_of(o, o->codec, &t.codec, &t.fp8_tensor, &t.ecodec, &emu_only);
  t.cfg = (exec_ref_config){.vocab = 256, .hidden = o->hidden, .heads = o->heads, .ffn = o->ffn, .layers = o->layers,
                            .seq = o->seq, .batch = o->batch, .act = EXEC_ACT_GELU, .norm = EXEC_NORM_LAYERNORM,
                            .norm_eps = 1e-5};
  if (train_data_load(&d, o->corpus, o->val_frac, o->seq, o->seed * 0x9E3779B97F4A7C15ULL + 17, e)) return -1;
  int rc = -1;
  if (trainer_model(&t, e)) goto fail;
  /* every tensor is sharded or replicated; count the model's parameters once */
  {
    exec_tensor full[EXEC_REF_MAX_TENSORS];
    exec_ref_tensors(&t.cfg, full, EXEC_REF_MAX_TENSORS, &t.params);
  }
  if (trainer_open_logs(&t, e)) goto fail;
  if (t.root)
    fprintf(stderr, "train: codec %s, TP %d, %.1fM parameters, %d steps of %d x %d bytes, corpus %zu bytes "
                    "(%zu validation windows)\n",
            o->codec, rk->tp, t.params / 1e6, o->steps, o->batch, o->seq, d.n, train_data_val_windows(&d, o->seq));
  if (trainer_train(&t, e) || trainer_summary(&t, e)) goto fail;
  rc = 0;
fail:
  if (t.csv) fclose(t.csv);
  if (t.stats) fclose(t.stats);
  free(t.dump_dir);
  free(t.tok), free(t.lab), free(t.ops), free(t.fwd_ops);
  train_fp8_free(&t.f8);
  exec_model_destroy(&m);
  train_data_free(&d);
  return rc;
}

/* ---- --tp-emulate K: K ranks as threads on one GPU (train_emu.h) ---- */

typedef struct {
  const train_opts *o;
  char **codecs;
  int ncodecs, rank, rc;
  train_emu *emu;
  ts_err e;
} emu_thread;

static void *emu_thread_main(void *arg) {
  emu_thread *th = arg;
  const train_opts *o = th->o;
  train_rank rk = {.tp = o->tp_emulate, .rank = th->rank, .comm = train_emu_comm(th->emu, th->rank), .emu = th->emu};
  th->rc = 0;
  if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&rk.stream, cudaStreamNonBlocking) != cudaSuccess)
    th->rc = ts_fail_sys(&th->e, "train: emulated rank %d: no stream", th->rank);
  char csv_path[1024];
  for (int k = 0; k < th->ncodecs; k++) {
    if (train_emu_agree(th->emu, th->rank, th->rc)) break; /* every rank stops together */
    train_opts one = *o;
    one.codec = th->codecs[k];
    if (o->out_dir) {
      snprintf(csv_path, sizeof csv_path, "%s/loss-%s.csv", o->out_dir, th->codecs[k]);
      one.csv = csv_path;
    }
    th->rc = train_run(&rk, &one, &th->e);
  }
  train_emu_agree(th->emu, th->rank, th->rc);
  if (rk.stream) cudaStreamDestroy(rk.stream);
  return NULL;
}

static int train_emulated(train_opts *o, char **codecs, int ncodecs) {
  const int k = o->tp_emulate;
  ts_err e;
  if (o->heads % k || o->ffn % k) {
    fprintf(stderr, "tacorun train: --tp-emulate %d must divide --heads %d and --ffn %d\n", k, o->heads, o->ffn);
    return 2;
  }
  train_emu *emu;
  if (train_emu_create(&emu, k, (size_t)o->batch * (size_t)o->seq * (size_t)o->hidden, &e)) {
    fprintf(stderr, "tacorun train: %s\n", e.msg);
    train_emu_destroy(emu);
    return ts_exit_status(&e);
  }
  char summary_path[1024];
  if (o->out_dir) {
    snprintf(summary_path, sizeof summary_path, "%s/summary.csv", o->out_dir);
    FILE *s = fopen(summary_path, "w");
    if (!s) {
      fprintf(stderr, "tacorun train: %s: cannot write\n", summary_path);
      train_emu_destroy(emu);
      return 2;
    }
    fprintf(s, "codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread\n");
    fclose(s);
    o->summary = summary_path;
  }
  emu_thread th[COLL_EMU_MAX_RANKS];
  pthread_t tid[COLL_EMU_MAX_RANKS];
  for (int r = 0; r < k; r++) {
    th[r] = (emu_thread){.o = o, .codecs = codecs, .ncodecs = ncodecs, .rank = r, .emu = emu};
    pthread_create(&tid[r], NULL, emu_thread_main, &th[r]);
  }
  int rc = 0;
  for (int r = 0; r < k; r++) {
    pthread_join(tid[r], NULL);
    if (th[r].rc && !rc) {
      fprintf(stderr, "tacorun train: emulated rank %d: %s\n", r, th[r].e.msg);
      rc = ts_exit_status(&th[r].e);
    }
  }
  train_emu_destroy(emu);
  return rc;
}

static const struct {
  const char *name;
  int lo, hi;
  size_t off;
} train_int_opts[] = {
    {"--group", 32, 512, offsetof(train_opts, group)},        {"--steps", 1, 1000000, offsetof(train_opts, steps)},
    {"--eval-every", 1, 1000000, offsetof(train_opts, eval_every)},
    {"--eval-batches", 0, 1000000, offsetof(train_opts, eval_batches)},
    {"--log-every", 1, 1000000, offsetof(train_opts, log_every)},
    {"--hidden", 8, 16384, offsetof(train_opts, hidden)},     {"--layers", 1, 128, offsetof(train_opts, layers)},
    {"--heads", 1, 256, offsetof(train_opts, heads)},         {"--ffn", 8, 65536, offsetof(train_opts, ffn)},
    {"--seq", 2, 8192, offsetof(train_opts, seq)},            {"--batch", 1, 4096, offsetof(train_opts, batch)},
    {"--warmup", 1, 1000000, offsetof(train_opts, warmup)},   {"--timeout", 1, 86400, offsetof(train_opts, timeout_s)},
    {"--tp-emulate", 2, COLL_EMU_MAX_RANKS, offsetof(train_opts, tp_emulate)},
    {"--stats-every", 0, 1000000, offsetof(train_opts, stats_every)},
    {"--dump-at", 0, 1000000, offsetof(train_opts, dump_at)},
    {"--inject-nan", 0, 1000000, offsetof(train_opts, inject_nan)},
    {"--dump-rows", 1, 1 << 20, offsetof(train_opts, dump_rows)},
};

static const struct {
  const char *name;
  double lo, hi;
  size_t off;
} train_dbl_opts[] = {
    {"--p", 1e-6, 1.0, offsetof(train_opts, p)},
    {"--lr", 1e-9, 1.0, offsetof(train_opts, lr)},
    {"--min-lr-frac", 0.0, 1.0, offsetof(train_opts, min_lr_frac)},
    {"--val-frac", 1e-6, 0.999999, offsetof(train_opts, val_frac)},
    {"--reshape-max-err", 1e-6, 1.0, offsetof(train_opts, reshape_err)},
};

/* A numeric option at argv[*i] (its value after it): 1 taken, 0 not a
 * numeric option, 2 a bad value (said on stderr). */
static int parse_number(int argc, char **argv, int *i, train_opts *o) {
  const char *a = argv[*i];
  for (size_t k = 0; k < sizeof train_int_opts / sizeof *train_int_opts; k++)
    if (!strcmp(a, train_int_opts[k].name)) {
      if (*i + 1 >= argc ||
          ts_arg_int(argv[++*i], train_int_opts[k].lo, train_int_opts[k].hi, (int *)((char *)o + train_int_opts[k].off))) {
        fprintf(stderr, "tacorun train: %s: '%s' is not an integer in [%d, %d]\n", a, *i < argc ? argv[*i] : "",
                train_int_opts[k].lo, train_int_opts[k].hi);
        return 2;
      }
      return 1;
    }
  for (size_t k = 0; k < sizeof train_dbl_opts / sizeof *train_dbl_opts; k++)
    if (!strcmp(a, train_dbl_opts[k].name)) {
      if (*i + 1 >= argc || ts_arg_double(argv[++*i], train_dbl_opts[k].lo, train_dbl_opts[k].hi,
                                          (double *)((char *)o + train_dbl_opts[k].off))) {
        fprintf(stderr, "tacorun train: %s: '%s' is not a number in [%g, %g]\n", a, *i < argc ? argv[*i] : "",
                train_dbl_opts[k].lo, train_dbl_opts[k].hi);
        return 2;
      }
      return 1;
    }
  return 0;
}

/* Any other option with a value at argv[*i]: 0 taken, 2 bad or unknown (said on stderr). */
static int parse_other(int argc, char **argv, int *i, train_opts *o) {
  const char *a = argv[*i];
  const char **str = !strcmp(a, "--corpus")  ? &o->corpus
                     : !strcmp(a, "--reshape-file") ? &o->reshape_file
                     : !strcmp(a, "--codec") ? &o->codec
                     : !strcmp(a, "--csv")   ? &o->csv
                     : !strcmp(a, "--summary") ? &o->summary
                  : !strcmp(a, "--out-dir") ? &o->out_dir
                  : !strcmp(a, "--tp-emulate-allreduce") ? &o->emu_allreduce
                  : !strcmp(a, "--reshape") ? &o->reshape_dir
                                               : NULL;
  if (str && *i + 1 < argc) {
    *str = argv[++*i];
  } else if (!strcmp(a, "--transport") && *i + 1 < argc) {
    ts_err te;
    if (rt_transport_arg(argv[++*i], &o->transport, &te)) {
      fprintf(stderr, "tacorun train: %s\n", te.msg);
      return 2;
    }
  } else if (!strcmp(a, "--variant") && *i + 1 < argc) {
    ts_err ve;
    if (ops_variant_set(argv[++*i], &ve)) {
      fprintf(stderr, "tacorun train: %s\n", ve.msg);
      return 2;
    }
  } else if (!strcmp(a, "--seed") && *i + 1 < argc) {
    char *end;
    o->seed = strtoull(argv[++*i], &end, 10);
    if (!*argv[*i] || *end) {
      fprintf(stderr, "tacorun train: --seed: '%s' is not a non-negative integer\n", argv[*i]);
      return 2;
    }
  } else {
    fprintf(stderr, "tacorun train: unknown option or missing value: '%s'\n", a);
    usage(stderr);
    return 2;
  }
  return 0;
}

/* The command line into o: -1 to go on, else the exit status (--help: 0, a bad option: 2). */
static int parse_args(int argc, char **argv, train_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--check-codec")) {
      o->check_codec = 1;
      continue;
    }
    if (!strcmp(a, "--check-emu")) {
      o->check_codec = 2;
      continue;
    }
    if (!strcmp(a, "--group") && i + 1 < argc && !strcmp(argv[i + 1], "auto")) {
      o->group_arg = argv[++i];
      continue;
    }
    int num = parse_number(argc, argv, &i, o);
    if (num == 2) return 2;
    if (num == 1) continue;
    if (parse_other(argc, argv, &i, o)) return 2;
  }
  return -1;
}

/* The commands that train nothing: --reshape (CPU only), --check-codec and
 * --check-emu. -1 when none was asked, else the exit status. */
static int run_report_or_check(const train_opts *o) {
  if (o->reshape_dir) { /* CPU only */
    ts_err e;
    if (train_reshape_report(o->reshape_dir, o->reshape_err, 450.0, &e)) {
      fprintf(stderr, "tacorun train: %s\n", e.msg);
      return ts_exit_status(&e);
    }
    return 0;
  }
  if (o->check_codec) {
    if (rt_cuda_device_count() < 1) {
      printf("SKIP: no CUDA device\n");
      return 77;
    }
    ts_err e;
    if (o->check_codec == 2 ? train_emu_check(&e) : train_fp8_check(&e)) {
      fprintf(stderr, "tacorun train: %s\n", e.msg);
      return 1;
    }
    return 0;
  }
  return -1;
}

/* --group auto: the group size from --reshape-file. 0, or 2 on bad input (said on stderr). */
static int group_auto(train_opts *o) {
  if (o->group_arg && !o->reshape_file) {
    fprintf(stderr, "tacorun train: --group auto needs --reshape-file FILE (the output of tacorun train --reshape)\n");
    return 2;
  }
  if (o->reshape_file && !o->group_arg) {
    fprintf(stderr, "tacorun train: --reshape-file only applies with --group auto\n");
    return 2;
  }
  if (o->group_arg) {
    ts_err re;
    plan_reshape_choice ch;
    if (plan_reshape_read(o->reshape_file, &ch, &re)) {
      fprintf(stderr, "tacorun train: --reshape-file: %s\n", re.msg);
      return 2;
    }
    o->group = ch.group;
    fprintf(stderr, "train: --group auto: group %d along hidden, the reshaping's choice for %d tensor classes (%s)\n",
            ch.group, ch.classes, o->reshape_file);
  }
  return 0;
}

/* The codecs of the list and the options that go with them: 0, or 2 on bad
 * input (said on stderr); *any_taco: some codec needs --group to divide --hidden. */
static int check_codecs(const train_opts *o, char **codecs, int ncodecs, int *any_taco) {
  if (ncodecs < 0) {
    fprintf(stderr, "tacorun train: --codec: '%s' is not a list of 1 to %d codecs\n", o->codec, TRAIN_MAX_CODECS);
    return 2;
  }
  if (o->emu_allreduce && strcmp(o->emu_allreduce, "two-shot") && strcmp(o->emu_allreduce, "one-shot")) {
    fprintf(stderr, "tacorun train: --tp-emulate-allreduce: '%s' is not two-shot or one-shot\n", o->emu_allreduce);
    return 2;
  }
  if (o->dump_at >= 0 && (!o->stats_every || !o->out_dir)) {
    fprintf(stderr, "tacorun train: --dump-at needs --stats-every N and --out-dir DIR\n");
    return 2;
  }
  if (o->dump_at >= o->steps) { /* steps count from 0: a dump past the last one would write nothing */
    fprintf(stderr, "tacorun train: --dump-at %d: the run's training steps are 0 to %d (--steps %d)\n", o->dump_at,
            o->steps - 1, o->steps);
    return 2;
  }
  if ((o->emu_allreduce || o->stats_every || o->dump_at >= 0) && !o->tp_emulate) {
    fprintf(stderr, "tacorun train: --tp-emulate-allreduce and --stats-every need --tp-emulate K\n");
    return 2;
  }
  *any_taco = 0;
  for (int k = 0; k < ncodecs; k++) {
    plan_codec c;
    train_emu_codec ec;
    int f8, emu_only;
    if (codec_of(o, codecs[k], &c, &f8, &ec, &emu_only)) {
      fprintf(stderr, "tacorun train: --codec: '%s' is not none, taco-e4m3, taco-e5m2, fp8-tensor, fp8-group, "
                      "fp8-hadamard, caat or taco+caat\n", codecs[k]);
      return 2;
    }
    if (emu_only && !o->tp_emulate) {
      fprintf(stderr, "tacorun train: --codec: '%s' runs only in the emulation (--tp-emulate K)\n", codecs[k]);
      return 2;
    }
    *any_taco |= ec.ar.codec != COLL_EMU_PLAIN && ec.ar.codec != COLL_EMU_FP8_TENSOR;
  }
  if (ncodecs > 1 && !o->out_dir && (o->csv || o->summary)) {
    fprintf(stderr, "tacorun train: several codecs: use --out-dir DIR instead of --csv/--summary\n");
    return 2;
  }
  return 0;
}

/* The model's shape (--ffn defaults to 4 x --hidden) and the corpus, read
 * and checked before any GPU work: 0, or 2 on bad input (said on stderr). */
static int check_model(train_opts *o, int any_taco) {
  if (o->group & (o->group - 1)) {
    fprintf(stderr, "tacorun train: --group: %d is not a power of two in [32, 512]\n", o->group);
    return 2;
  }
  if (!o->ffn) o->ffn = 4 * o->hidden;
  if (o->hidden % o->heads) {
    fprintf(stderr, "tacorun train: --heads: %d does not divide --hidden %d\n", o->heads, o->hidden);
    return 2;
  }
  if (any_taco && o->hidden % o->group) {
    fprintf(stderr, "tacorun train: --group: %d does not divide --hidden %d\n", o->group, o->hidden);
    return 2;
  }
  if (!o->corpus) {
    fprintf(stderr, "tacorun train: --corpus FILE is required\n");
    usage(stderr);
    return 2;
  }
  ts_err e;
  train_data d; /* the corpus is read (and checked) before any GPU work */
  if (train_data_load(&d, o->corpus, o->val_frac, o->seq, 0, &e)) {
    fprintf(stderr, "tacorun train: %s\n", e.msg);
    return 2;
  }
  train_data_free(&d);
  return 0;
}

/* One process per TP rank (mpirun, or alone for TP 1): every codec in turn. */
static int train_world(train_opts *o, char **codecs, int ncodecs) {
  ts_err e;
  rt_nccl w;
  int started = rt_world_start(&w, "train", o->timeout_s, o->transport);
  if (started) return started;
  if (o->heads % w.nranks || o->ffn % w.nranks) {
    fprintf(stderr, "tacorun train: TP %d (the number of processes) must divide --heads %d and --ffn %d\n", w.nranks,
            o->heads, o->ffn);
    rt_nccl_finalize(&w, 0);
    return 2;
  }
  int rc = 0;
  char csv_path[1024], summary_path[1024];
  if (o->out_dir) {
    snprintf(summary_path, sizeof summary_path, "%s/summary.csv", o->out_dir);
    FILE *s = w.ranks[0] == 0 ? fopen(summary_path, "w") : NULL;
    if (w.ranks[0] == 0 && !s) rc = ts_fail(&e, summary_path, NULL, "cannot write");
    if (s) {
      fprintf(s, "codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread\n");
      fclose(s);
    }
    o->summary = summary_path;
  }
  train_rank rk = {.tp = w.nranks, .rank = w.ranks[0], .comm = w.comms[0], .stream = w.streams[0], .w = &w};
  for (int k = 0; k < ncodecs && !rc; k++) {
    train_opts one = *o;
    one.codec = codecs[k];
    if (o->out_dir) {
      snprintf(csv_path, sizeof csv_path, "%s/loss-%s.csv", o->out_dir, codecs[k]);
      one.csv = csv_path;
    }
    rc = train_run(&rk, &one, &e);
  }
  if (rc) fprintf(stderr, "tacorun train: rank %d: %s\n", w.ranks[0], e.msg);
  rt_nccl_finalize(&w, rc != 0);
  return rc ? ts_exit_status(&e) : 0;
}

int cmd_train(int argc, char **argv) {
  train_opts o = {.codec = "none", .group = 128, .steps = 2000, .eval_every = 200, .log_every = 1, .hidden = 512,
                  .layers = 8, .heads = 8, .ffn = 0, .seq = 256, .batch = 16, .warmup = 100, .timeout_s = 300,
                  .p = 0.5, .lr = 6e-4, .min_lr_frac = 0.1, .val_frac = 0.05, .seed = 1234, .dump_at = -1, .inject_nan = -1,
                  .dump_rows = 256, .reshape_err = 0.04};
  int st = parse_args(argc, argv, &o);
  if (st < 0) st = run_report_or_check(&o);
  if (st >= 0) return st;
  /* check everything before touching a GPU: bad input fails fast with status 2 */
  if (group_auto(&o)) return 2;
  char codec_list[512], *codecs[TRAIN_MAX_CODECS];
  snprintf(codec_list, sizeof codec_list, "%s", o.codec);
  int ncodecs = split_codecs(codec_list, codecs), any_taco = 0;
  if (check_codecs(&o, codecs, ncodecs, &any_taco) || check_model(&o, any_taco)) return 2;
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun train: no CUDA device\n");
    return 1;
  }
  if (o.tp_emulate) return train_emulated(&o, codecs, ncodecs);
  return train_world(&o, codecs, ncodecs);
}
