/* train_cmd.c — `tacorun train`: trains a small byte-level GPT on a text
 * corpus through the executor (exec_model.h), with or without compression of
 * the TP all-reduces, and logs training and validation loss to a CSV. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_model.h"
#include "exec_run.h"
#include "fp8_plain.h"
#include "rt_command.h"
#include "rt_nccl.h"
#include "train_data.h"
#include "train_fp8.h"

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
          "  --group G [128]    --p P [0.5]\n"
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
          "  --check-codec      the fp8-tensor CUDA kernels against their plain-C reference, bit for bit\n"
          "                     (exit 77 without a GPU) [off]\n"
          "  (--csv, --summary, --out-dir: not written unless given)\n"
          "reads:  the --corpus FILE\n"
          "writes: the --csv and --summary files, or DIR/loss-<codec>.csv and DIR/summary.csv of --out-dir;\n"
          "        progress and the final losses on standard output (rank 0)\n"
          "NaN or Inf in the loss or a gradient stops the run naming the step and the tensor (exit 1).\n"
          "The final validation loss is always over the whole held-out part.\n"
          "\n"
          "Not implemented: data parallelism and pipeline stages (TP only), gradient clipping, dropout,\n"
          "checkpoints, resuming, a tokenizer other than bytes, SwiGLU/RMSNorm/RoPE model variants.\n");
}

typedef struct {
  const char *corpus, *codec, *csv, *summary, *out_dir;
  int group, steps, eval_every, eval_batches, log_every, hidden, layers, heads, ffn, seq, batch, warmup, timeout_s;
  double p, lr, min_lr_frac, val_frac;
  unsigned long long seed;
  int check_codec;
} train_opts;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == 0 || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}
static int parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (*s == 0 || *end || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

/* The codec name -> the plan codec of both directions (fp8-tensor: none, the hook runs instead). */
static int codec_of(const train_opts *o, const char *name, plan_codec *c, int *fp8_tensor) {
  memset(c, 0, sizeof *c);
  *fp8_tensor = 0;
  c->group = o->group, c->fp8 = PLAN_FP8_E4M3, c->p = o->p;
  if (!strcmp(name, "none")) c->kind = PLAN_CODEC_NONE;
  else if (!strcmp(name, "taco-e4m3")) c->kind = PLAN_CODEC_TACO;
  else if (!strcmp(name, "taco-e5m2")) c->kind = PLAN_CODEC_TACO, c->fp8 = PLAN_FP8_E5M2;
  else if (!strcmp(name, "fp8-tensor")) c->kind = PLAN_CODEC_NONE, *fp8_tensor = 1;
  else if (!strcmp(name, "caat")) c->kind = PLAN_CODEC_CAAT;
  else if (!strcmp(name, "taco+caat")) c->kind = PLAN_CODEC_TACO_CAAT;
  else return -1;
  return 0;
}

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
  rt_nccl *w;
  exec_model *m;
  train_data *d;
  const train_opts *o;
  plan_op *ops, *fwd_ops;
  int nops, nfwd;
  int32_t *tok, *lab;
  FILE *csv;
  int root;
  double t0;
} trainer;

/* Runs ops as one iteration (zeroed gradients and loss first); returns the loss. */
static int run_ops(trainer *t, const plan_op *ops, int n, int step, float *loss, ts_err *e) {
  if (exec_model_set_data(t->m, t->tok, t->lab, e) || exec_model_zero_grad(t->m, e)) return -1;
  for (int i = 0; i < n; i++)
    if (exec_model_run_op(t->m, &ops[i], e)) return -1;
  if (rt_nccl_wait(t->w, e)) return -1;
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
    if (run_ops(t, t->fwd_ops, t->nfwd, step, &l, e)) return -1;
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
  if (exec_world_max(t->w, v, 2 * k, e)) return -1; /* max and -min of every checksum */
  for (int j = 0; j < k; j++) {
    double r = (v[j] + v[k + j]) / (scale[j] > 0 ? scale[j] : 1.0);
    if (r > *spread) *spread = r;
  }
  return 0;
}

static void log_row(trainer *t, int step, const char *split, double loss, double lr) {
  if (t->root && t->csv) fprintf(t->csv, "%d,%s,%.6f,%.6g,%.3f\n", step, split, loss, lr, now_s() - t->t0);
}

static int train_run(rt_nccl *w, const train_opts *o, ts_err *e) {
  const int tp = w->nranks, rank = w->ranks[0], root = rank == 0;
  plan_codec codec;
  int fp8_tensor;
  codec_of(o, o->codec, &codec, &fp8_tensor);
  exec_ref_config cfg = {.vocab = 256, .hidden = o->hidden, .heads = o->heads, .ffn = o->ffn, .layers = o->layers,
                         .seq = o->seq, .batch = o->batch, .act = EXEC_ACT_GELU, .norm = EXEC_NORM_LAYERNORM,
                         .norm_eps = 1e-5};
  train_data d;
  if (train_data_load(&d, o->corpus, o->val_frac, o->seq, o->seed * 0x9E3779B97F4A7C15ULL + 17, e)) return -1;
  exec_model m;
  train_fp8 f8;
  memset(&f8, 0, sizeof f8);
  trainer t = {.w = w, .m = &m, .d = &d, .o = o, .root = root};
  int rc = -1;
  if (exec_model_create(&m, &cfg, 1, tp, rank, tp > 1 ? w->comms[0] : NULL, 1, 0, NULL, w->streams[0], e)) {
    exec_model_destroy(&m); /* what was allocated before the failure */
    train_data_free(&d);
    return -1;
  }
  t.tok = malloc((size_t)m.tokens * sizeof *t.tok), t.lab = malloc((size_t)m.tokens * sizeof *t.lab);
  if (!t.tok || !t.lab) {
    ts_fail_sys(e, "train: out of memory");
    goto done;
  }
  if (exec_model_init_random(&m, o->seed, e) || exec_model_set_codecs(&m, codec, codec, e)) goto done;
  if (fp8_tensor && train_fp8_attach(&f8, &m, e)) goto done;
  if (exec_program_build_single_stage(&m, &t.ops, &t.nops, e)) goto done;
  /* validation: the forward ops of the same program (no backward, no optimizer) */
  t.fwd_ops = malloc((size_t)t.nops * sizeof *t.fwd_ops);
  if (!t.fwd_ops) {
    ts_fail_sys(e, "train: out of memory");
    goto done;
  }
  for (int i = 0; i < t.nops; i++)
    if (t.ops[i].phase == PLAN_PHASE_FWD) t.fwd_ops[t.nfwd++] = t.ops[i];

  /* every tensor is sharded or replicated; count the model's parameters once */
  size_t params = 0;
  {
    exec_tensor full[EXEC_REF_MAX_TENSORS];
    exec_ref_tensors(&cfg, full, EXEC_REF_MAX_TENSORS, &params);
  }
  if (o->csv && root) {
    t.csv = fopen(o->csv, "w");
    if (!t.csv) {
      ts_fail(e, o->csv, NULL, "cannot write");
      goto done;
    }
    fprintf(t.csv, "# tacorun train: codec %s, TP %d, %zu parameters (h %d, %d layers, %d heads, ffn %d), seq %d, "
                   "batch %d, %d steps, lr %g, warmup %d, seed %llu, corpus %s (%zu bytes, %zu held out)\n",
            o->codec, tp, params, o->hidden, o->layers, o->heads, o->ffn, o->seq, o->batch, o->steps, o->lr, o->warmup,
            o->seed, o->corpus, d.n, d.n - d.train_n);
    fprintf(t.csv, "step,split,loss,lr,elapsed_s\n");
  }
  if (root)
    fprintf(stderr, "train: codec %s, TP %d, %.1fM parameters, %d steps of %d x %d bytes, corpus %zu bytes "
                    "(%zu validation windows)\n",
            o->codec, tp, params / 1e6, o->steps, o->batch, o->seq, d.n, train_data_val_windows(&d, o->seq));

  double val = 0, eval_s = 0, te;
  float loss = 0;
  char what[64];
  t.t0 = now_s();
  te = now_s();
  if (evaluate(&t, 0, o->eval_batches, &val, e)) goto done;
  eval_s += now_s() - te;
  log_row(&t, 0, "val", val, 0);
  for (int step = 0; step < o->steps; step++) {
    snprintf(what, sizeof what, "train step %d", step);
    rt_watchdog_arm(w, w->timeout_s + 10, what);
    m.lr = (float)lr_at(o, step);
    train_data_next_batch(&d, o->batch, o->seq, t.tok, t.lab);
    if (run_ops(&t, t.ops, t.nops, step, &loss, e)) goto done;
    if ((step + 1) % o->log_every == 0 || step + 1 == o->steps) log_row(&t, step + 1, "train", loss, m.lr);
    if ((step + 1) % o->eval_every == 0 && step + 1 < o->steps) {
      te = now_s();
      if (evaluate(&t, step + 1, o->eval_batches, &val, e)) goto done;
      eval_s += now_s() - te;
      log_row(&t, step + 1, "val", val, m.lr);
      if (root)
        fprintf(stderr, "  step %d: train loss %.4f, validation loss %.4f, %.1f s\n", step + 1, loss, val,
                now_s() - t.t0);
    }
    rt_watchdog_disarm();
  }
  te = now_s();
  rt_watchdog_arm(w, w->timeout_s + 10, "final validation");
  if (evaluate(&t, o->steps, 0, &val, e)) goto done;
  rt_watchdog_disarm();
  eval_s += now_s() - te;
  log_row(&t, o->steps, "val", val, m.lr);
  double wall = now_s() - t.t0, train_s = wall - eval_s, spread;
  if (replica_spread(&t, &spread, e)) goto done;
  if (root) {
    printf("codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread\n");
    printf("%s,%zu,%d,%.5f,%.5f,%.2f,%.2f,%.2f,%.3g\n", o->codec, params, o->steps, loss, val, wall, train_s,
           o->steps / train_s, spread);
    if (o->summary) {
      FILE *s = fopen(o->summary, o->out_dir ? "a" : "w");
      if (!s) {
        ts_fail(e, o->summary, NULL, "cannot write");
        goto done;
      }
      fprintf(s, "%s,%zu,%d,%.5f,%.5f,%.2f,%.2f,%.2f,%.3g\n", o->codec, params, o->steps, loss, val, wall, train_s,
              o->steps / train_s, spread);
      fclose(s);
    }
  }
  rc = 0;
done:
  if (t.csv) fclose(t.csv);
  free(t.tok), free(t.lab), free(t.ops), free(t.fwd_ops);
  train_fp8_free(&f8);
  exec_model_destroy(&m);
  train_data_free(&d);
  return rc;
}

static int cmd_train(int argc, char **argv) {
  train_opts o = {.codec = "none", .group = 128, .steps = 2000, .eval_every = 200, .log_every = 1, .hidden = 512,
                  .layers = 8, .heads = 8, .ffn = 0, .seq = 256, .batch = 16, .warmup = 100, .timeout_s = 300,
                  .p = 0.5, .lr = 6e-4, .min_lr_frac = 0.1, .val_frac = 0.05, .seed = 1234};
  static const struct {
    const char *name;
    int lo, hi;
    size_t off;
  } ints[] = {
      {"--group", 32, 512, offsetof(train_opts, group)},        {"--steps", 1, 1000000, offsetof(train_opts, steps)},
      {"--eval-every", 1, 1000000, offsetof(train_opts, eval_every)},
      {"--eval-batches", 0, 1000000, offsetof(train_opts, eval_batches)},
      {"--log-every", 1, 1000000, offsetof(train_opts, log_every)},
      {"--hidden", 8, 16384, offsetof(train_opts, hidden)},     {"--layers", 1, 128, offsetof(train_opts, layers)},
      {"--heads", 1, 256, offsetof(train_opts, heads)},         {"--ffn", 8, 65536, offsetof(train_opts, ffn)},
      {"--seq", 2, 8192, offsetof(train_opts, seq)},            {"--batch", 1, 4096, offsetof(train_opts, batch)},
      {"--warmup", 1, 1000000, offsetof(train_opts, warmup)},   {"--timeout", 1, 86400, offsetof(train_opts, timeout_s)},
  };
  static const struct {
    const char *name;
    double lo, hi;
    size_t off;
  } dbls[] = {
      {"--p", 1e-6, 1.0, offsetof(train_opts, p)},
      {"--lr", 1e-9, 1.0, offsetof(train_opts, lr)},
      {"--min-lr-frac", 0.0, 1.0, offsetof(train_opts, min_lr_frac)},
      {"--val-frac", 1e-6, 0.999999, offsetof(train_opts, val_frac)},
  };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int done = 0;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--check-codec")) {
      o.check_codec = 1;
      continue;
    }
    for (size_t k = 0; k < sizeof ints / sizeof *ints && !done; k++)
      if (!strcmp(a, ints[k].name)) {
        if (i + 1 >= argc || parse_int(argv[++i], ints[k].lo, ints[k].hi, (int *)((char *)&o + ints[k].off))) {
          fprintf(stderr, "tacorun train: %s: '%s' is not an integer in [%d, %d]\n", a, i < argc ? argv[i] : "",
                  ints[k].lo, ints[k].hi);
          return 2;
        }
        done = 1;
      }
    for (size_t k = 0; k < sizeof dbls / sizeof *dbls && !done; k++)
      if (!strcmp(a, dbls[k].name)) {
        if (i + 1 >= argc || parse_double(argv[++i], dbls[k].lo, dbls[k].hi, (double *)((char *)&o + dbls[k].off))) {
          fprintf(stderr, "tacorun train: %s: '%s' is not a number in [%g, %g]\n", a, i < argc ? argv[i] : "",
                  dbls[k].lo, dbls[k].hi);
          return 2;
        }
        done = 1;
      }
    if (done) continue;
    const char **str = !strcmp(a, "--corpus")  ? &o.corpus
                       : !strcmp(a, "--codec") ? &o.codec
                       : !strcmp(a, "--csv")   ? &o.csv
                       : !strcmp(a, "--summary") ? &o.summary
                    : !strcmp(a, "--out-dir") ? &o.out_dir
                                                 : NULL;
    if (str && i + 1 < argc) {
      *str = argv[++i];
    } else if (!strcmp(a, "--seed") && i + 1 < argc) {
      char *end;
      o.seed = strtoull(argv[++i], &end, 10);
      if (!*argv[i] || *end) {
        fprintf(stderr, "tacorun train: --seed: '%s' is not a non-negative integer\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "tacorun train: unknown option or missing value: '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (o.check_codec) {
    if (rt_cuda_device_count() < 1) {
      printf("SKIP: no CUDA device\n");
      return 77;
    }
    ts_err e;
    if (train_fp8_check(&e)) {
      fprintf(stderr, "tacorun train: %s\n", e.msg);
      return 1;
    }
    return 0;
  }
  /* check everything before touching a GPU: bad input fails fast with status 2 */
  char codec_list[512], *codecs[TRAIN_MAX_CODECS];
  snprintf(codec_list, sizeof codec_list, "%s", o.codec);
  int ncodecs = split_codecs(codec_list, codecs);
  if (ncodecs < 0) {
    fprintf(stderr, "tacorun train: --codec: '%s' is not a list of 1 to %d codecs\n", o.codec, TRAIN_MAX_CODECS);
    return 2;
  }
  int any_taco = 0;
  for (int k = 0; k < ncodecs; k++) {
    plan_codec c;
    int f8;
    if (codec_of(&o, codecs[k], &c, &f8)) {
      fprintf(stderr, "tacorun train: --codec: '%s' is not none, taco-e4m3, taco-e5m2, fp8-tensor, caat or taco+caat\n",
              codecs[k]);
      return 2;
    }
    any_taco |= c.kind == PLAN_CODEC_TACO || c.kind == PLAN_CODEC_TACO_CAAT;
  }
  if (ncodecs > 1 && !o.out_dir && (o.csv || o.summary)) {
    fprintf(stderr, "tacorun train: several codecs: use --out-dir DIR instead of --csv/--summary\n");
    return 2;
  }
  if (o.group & (o.group - 1)) {
    fprintf(stderr, "tacorun train: --group: %d is not a power of two in [32, 512]\n", o.group);
    return 2;
  }
  if (!o.ffn) o.ffn = 4 * o.hidden;
  if (o.hidden % o.heads) {
    fprintf(stderr, "tacorun train: --heads: %d does not divide --hidden %d\n", o.heads, o.hidden);
    return 2;
  }
  if (any_taco && o.hidden % o.group) {
    fprintf(stderr, "tacorun train: --group: %d does not divide --hidden %d\n", o.group, o.hidden);
    return 2;
  }
  if (!o.corpus) {
    fprintf(stderr, "tacorun train: --corpus FILE is required\n");
    usage(stderr);
    return 2;
  }
  ts_err e;
  {
    train_data d; /* the corpus is read (and checked) before any GPU work */
    if (train_data_load(&d, o.corpus, o.val_frac, o.seq, 0, &e)) {
      fprintf(stderr, "tacorun train: %s\n", e.msg);
      return 2;
    }
    train_data_free(&d);
  }
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun train: no CUDA device\n");
    return 1;
  }
  rt_nccl w;
  rt_nccl_opts no = {.single_process = 0, .ngpus = 1, .timeout_s = o.timeout_s};
  if (rt_nccl_init(&w, &no, &e)) {
    fprintf(stderr, "tacorun train: %s\n", e.msg);
    return 1;
  }
  if (w.nlocal != 1) {
    fprintf(stderr, "tacorun train: run one process per GPU, e.g. mpirun -np 2 tacorun train ...\n");
    rt_nccl_finalize(&w, 0);
    return 2;
  }
  if (o.heads % w.nranks || o.ffn % w.nranks) {
    fprintf(stderr, "tacorun train: TP %d (the number of processes) must divide --heads %d and --ffn %d\n", w.nranks,
            o.heads, o.ffn);
    rt_nccl_finalize(&w, 0);
    return 2;
  }
  int rc = 0;
  char csv_path[1024], summary_path[1024];
  if (o.out_dir) {
    snprintf(summary_path, sizeof summary_path, "%s/summary.csv", o.out_dir);
    FILE *s = w.ranks[0] == 0 ? fopen(summary_path, "w") : NULL;
    if (w.ranks[0] == 0 && !s) rc = ts_fail(&e, summary_path, NULL, "cannot write");
    if (s) {
      fprintf(s, "codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread\n");
      fclose(s);
    }
    o.summary = summary_path;
  }
  for (int k = 0; k < ncodecs && !rc; k++) {
    train_opts one = o;
    one.codec = codecs[k];
    if (o.out_dir) {
      snprintf(csv_path, sizeof csv_path, "%s/loss-%s.csv", o.out_dir, codecs[k]);
      one.csv = csv_path;
    }
    rc = train_run(&w, &one, &e);
  }
  if (rc) fprintf(stderr, "tacorun train: rank %d: %s\n", w.ranks[0], e.msg);
  rt_nccl_finalize(&w, rc != 0);
  return rc ? ts_exit_status(&e) : 0;
}

RT_COMMAND("train", cmd_train, "train a small byte-level GPT on a text corpus, with or without TP compression; loss CSV")
