/* calibrate_small.c — `tacorun calibrate-infer --small-only`: the small
 * kernels of a decode step at decode sizes, timed the two ways a decode step
 * runs them (calibrate_small.h); the RoPE + KV scatter also at prefill sizes,
 * which no other table times (the prefill's norms, adds and SwiGLU read the
 * training calibration's tables of those kernels). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_graph.h"
#include "calibrate_small.h"
#include "gpu_check.h"
#include "infer_kernels.h"
#include "rt_ops.h"
#include "rt_ops_layer.h"
#include "taco_codec.h"

int calib_clock_spin(double us, void *stream, ts_err *e); /* calibrate_clock_spin.cu */

#define LAUNCHES 100  /* launches per timing: a graph of 100 nodes, or 100 queued launches */
#define REPS 5        /* timings per point, the median kept */
#define SPIN_US 2000.0 /* ahead of the queued launches: the host issues 100 in ~0.5 ms */
#define MAX_BATCH 64
#define EMB_VOCAB 16384
#define MAX_SEQ 2048
#define MAX_SHAPES 2048
/* the prefill's RoPE + KV scatter (infer_rope_scatter with seq > 1): batch x prompt rows up to this many */
#define PREFILL_MAX_ROWS 8192

enum { K_NORM, K_ADD, K_SWIGLU, K_EMB, K_ROPE, K_ARGMAX, K_BIAS, K_TACO_ENC, K_TACO_DEC, K_TACO_DSE, K_COUNT };
/* rope_scatter_fwd: inference's RoPE fused with the KV-cache scatter (infer_rope_scatter), not the training
 * RoPE that `tacorun calibrate` times as rope_fwd */
/* argmax: greedy sampling over the gathered logits of the step (infer_argmax) */
/* bias_fwd: the QKV bias added after the qkv GEMM (rt_bias_add, as runtime/infer/infer_model.c runs it), the
 * table the simulator's bias_us reads at decode sizes (the training calibration's starts at 1.57 MB) */
static const char *k_table[K_COUNT] = {"rmsnorm_fwd", "add_fwd",     "swiglu_fwd",  "embedding_fwd",         "rope_scatter_fwd",
                                       "argmax",      "bias_fwd",    "taco_encode", "taco_decode", "taco_decode_sum_encode"};

typedef struct {
  int kind;
  long long rows;          /* rope at prefill sizes: batch x seq */
  int seq;                 /* rope: tokens a sequence (> 1: a prefill of `seq` tokens at position 0; else a decode
                              step of one token a sequence at position MAX_SEQ / 2 - 1) */
  int cols;               /* norm/add/embedding: hidden; swiglu: ffn / tp; argmax: vocabulary words a GPU;
                           * bias: the qkv GEMM's output width a GPU */
  int hl, kvl, d;         /* rope; argmax: hl = tp (the shards gathered) */
  size_t n;               /* taco: elements of one block; argmax: the model's vocabulary (the words read) */
  int group;              /* taco */
} small_shape;

typedef struct {
  void *x, *y, *gamma, *table, *qkv, *q, *kc, *vc, *wire, *logits, *amax;
  int32_t *tok;
  float *rstd;
  int32_t *ids;
  taco_nonfinite *nf;
  cudaStream_t st;
  small_shape s;
  infer_attn_dims ad;
} small_bufs;

static int one_launch(small_bufs *b, ts_err *e) {
  const small_shape *s = &b->s;
  switch (s->kind) {
  case K_NORM: return rt_rmsnorm_fwd(b->x, b->gamma, b->y, b->rstd, s->rows, s->cols, 1e-5f, b->st, e);
  case K_ADD: return rt_add(b->x, b->y, b->y, s->rows * s->cols, b->st, e);
  case K_SWIGLU: return rt_swiglu_fwd(b->x, b->y, s->rows, s->cols, b->st, e);
  case K_EMB: return rt_embedding_fwd(b->table, b->ids, b->y, s->rows, s->cols, 0, EMB_VOCAB, b->st, e);
  case K_ROPE:
    return s->seq > 1 ? infer_rope_scatter(b->qkv, b->q, b->kc, b->vc, &b->ad, s->seq, 0, b->st, e)
                      : infer_rope_scatter(b->qkv, b->q, b->kc, b->vc, &b->ad, 1, MAX_SEQ / 2 - 1, b->st, e);
  case K_ARGMAX: return infer_argmax(b->logits, b->tok, (int)s->rows, s->hl, s->cols, (long long)s->n, b->amax, b->st, e);
  case K_BIAS: return rt_bias_add(b->y, b->gamma, s->rows, s->cols, s->cols, b->st, e);
  default: break;
  }
  taco_params p = {.group = s->group, .fp8 = TACO_FP8_E4M3};
  int rc;
  if (s->kind == K_TACO_ENC) rc = taco_encode(b->x, TACO_DTYPE_BF16, s->n, p, b->wire, b->nf, b->st);
  else if (s->kind == K_TACO_DEC) rc = taco_decode(b->wire, s->n, p, b->y, TACO_DTYPE_BF16, b->st);
  else rc = taco_decode_sum_encode(b->wire, 2, s->n, p, b->y, b->st);
  return rc ? ts_fail_sys(e, "%s: %s", k_table[s->kind], taco_last_error()) : 0;
}

/* LAUNCHES launches of the point's kernel, as calib_time_behind_spin issues them */
static int issue_launches(void *ctx, ts_err *e) {
  for (int i = 0; i < LAUNCHES; i++)
    if (one_launch(ctx, e)) return -1;
  return 0;
}

/* GPU us per launch of LAUNCHES launches behind a spin: queued from the host
 * (graph 0) or one launch of their captured graph (graph 1); median of REPS. */
static int time_mode(small_bufs *b, int graph, double *us, ts_err *e) {
  double all;
  if (calib_time_behind_spin(b->st, issue_launches, b, graph, SPIN_US, REPS, &all, e)) return -1;
  *us = all / LAUNCHES;
  return 0;
}

/* The table's key: the bytes the simulator's model op moves (models/model_layer.c:
 * norm 4 B, residual add and SwiGLU 6 B an output element, embedding 4 B, RoPE
 * 4 B a Q or K element; the bias pass 4 B an output element, as sim_costs.c's bias_us
 * counts it; argmax: the BF16 logits it reads; TACO: the BF16 bytes of one block). */
static double key_bytes(const small_shape *s) {
  switch (s->kind) {
  case K_NORM: case K_EMB: case K_BIAS: return 4.0 * (double)s->rows * s->cols;
  case K_ADD: case K_SWIGLU: return 6.0 * (double)s->rows * s->cols;
  case K_ROPE: return 4.0 * (double)s->rows * (double)(s->hl + s->kvl) * s->d;
  case K_ARGMAX: return 2.0 * (double)s->rows * (double)s->n;
  default: return 2.0 * (double)s->n;
  }
}

/* The group of a point other than TACO's: the row width whose time the kernel's
 * rows take (one block a row: equal bytes of other widths take other times),
 * the hidden size (norm, add, embedding), ffn / tp (SwiGLU), (hl + kvl) x d (RoPE), the qkv width (bias),
 * the gathered vocabulary tp x words a GPU (argmax). */
static int width(const small_shape *s) {
  return s->kind == K_ROPE ? (s->hl + s->kvl) * s->d : s->kind == K_ARGMAX ? s->hl * s->cols : s->cols;
}

static int add_shape(small_shape *sh, int *n, small_shape s) {
  for (int i = 0; i < *n; i++)
    if (sh[i].kind == s.kind && sh[i].rows == s.rows && sh[i].seq == s.seq && sh[i].cols == s.cols && sh[i].hl == s.hl &&
        sh[i].kvl == s.kvl && sh[i].d == s.d && sh[i].n == s.n && sh[i].group == s.group)
      return 0;
  if (*n >= MAX_SHAPES) return -1;
  sh[(*n)++] = s;
  return 0;
}

/* The shapes: batch 1..64 x every GQA zoo model's hidden (norm, add,
 * embedding), ffn / tp (SwiGLU) and heads / tp, kv heads / tp, head dim
 * (RoPE + KV scatter, also at four prefill sizes of up to PREFILL_MAX_ROWS rows; the QKV bias of a model with one)
 * at TP 1/2/4/8 where tp divides them; TACO blocks of 4 .. 128 KiB at groups 32 .. 512. */
static int shapes_of(const model_config *models, int nm, small_shape *sh, int *n, int *max_cols, int *max_qkv,
                     long long *max_words) {
  static const int batches[] = {1, 2, 4, 8, 16, 32, 64}, tps[] = {1, 2, 4, 8};
  *n = 0, *max_cols = 0, *max_qkv = 0, *max_words = 0;
  for (int m = 0; m < nm; m++) {
    const model_config *mc = &models[m];
    if (mc->attention != MODEL_ATTN_GQA || mc->hidden > 16384) continue;
    const int d = model_head_dim(mc);
    for (size_t t = 0; t < sizeof tps / sizeof *tps; t++)
      for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        const int tp = tps[t];
        const long long B = batches[b];
        if (t == 0) {
          for (int k = K_NORM; k <= K_EMB; k++)
            if (k != K_SWIGLU && add_shape(sh, n, (small_shape){.kind = k, .rows = B, .cols = mc->hidden})) return -1;
          if (mc->hidden > *max_cols) *max_cols = mc->hidden;
        }
        if (mc->activation == MODEL_ACT_SWIGLU && mc->ffn_hidden % tp == 0 && mc->ffn_hidden / tp <= 32768) {
          if (add_shape(sh, n, (small_shape){.kind = K_SWIGLU, .rows = B, .cols = mc->ffn_hidden / tp})) return -1;
          if (mc->ffn_hidden / tp > *max_cols) *max_cols = mc->ffn_hidden / tp;
        }
        if (mc->rope_theta > 0 && mc->heads % tp == 0 && mc->kv_heads % tp == 0 && (d == 64 || d == 128)) {
          small_shape s = {.kind = K_ROPE, .rows = B, .hl = mc->heads / tp, .kvl = mc->kv_heads / tp, .d = d};
          if (add_shape(sh, n, s)) return -1;
          if ((s.hl + 2 * s.kvl) * d > *max_qkv) *max_qkv = (s.hl + 2 * s.kvl) * d;
          /* the prefill's: one sequence of 512, 2,048 and 8,192 tokens, and 8 of 1,024, into the same table (keyed
           * by its bytes: the prefill reads it past the decode sizes) */
          static const int pb[] = {1, 1, 1, 8}, ps[] = {512, 2048, 8192, 1024};
          for (int q = 0; b == 0 && q < 4; q++) {
            small_shape pf = s;
            pf.rows = (long long)pb[q] * ps[q], pf.seq = ps[q];
            if (add_shape(sh, n, pf)) return -1;
          }
        }
        if (mc->qkv_bias && mc->heads % tp == 0 && mc->kv_heads % tp == 0) {
          const int qcl = (mc->heads + 2 * mc->kv_heads) / tp * d;
          if (add_shape(sh, n, (small_shape){.kind = K_BIAS, .rows = B, .cols = qcl})) return -1;
          if (qcl > *max_cols) *max_cols = qcl;
        }
        const long long vl = model_vocab_per_gpu(mc, tp);
        if (vl > 0 && vl <= 1 << 20) {
          small_shape s = {.kind = K_ARGMAX, .rows = B, .cols = (int)vl, .hl = tp, .n = (size_t)mc->vocab};
          if (add_shape(sh, n, s)) return -1;
          if (tp * vl > *max_words) *max_words = tp * vl;
        }
      }
  }
  static const int groups[] = {32, 64, 128, 256, 512};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
    for (int kb = 4; kb <= 128; kb *= 2)
      for (int k = K_TACO_ENC; k <= K_TACO_DSE; k++)
        if (add_shape(sh, n, (small_shape){.kind = k, .n = (size_t)kb * 1024 / 2, .group = groups[g]})) return -1;
  return 0;
}

static int dmalloc(void **p, size_t bytes, ts_err *e) {
  CUDA_CHECK(e, cudaMalloc(p, bytes));
  return 0;
}

static void free_bufs(small_bufs *b) {
  cudaFree(b->amax), cudaFree(b->tok), cudaFree(b->logits);
  cudaFree(b->nf), cudaFree(b->wire), cudaFree(b->vc), cudaFree(b->kc), cudaFree(b->q), cudaFree(b->qkv);
  cudaFree(b->ids), cudaFree(b->rstd), cudaFree(b->table), cudaFree(b->gamma), cudaFree(b->y), cudaFree(b->x);
  if (b->st) cudaStreamDestroy(b->st);
}

/* A plain-C check of one RMSNorm launch (batch 4 x 4,096) against the
 * float reference: the kernels timed are the executor's, checked by the
 * runtime tests; this only guards the buffers and arguments used here. */
static int spot_check(small_bufs *b, ts_err *e) {
  const int rows = 4, cols = 4096;
  b->s = (small_shape){.kind = K_NORM, .rows = rows, .cols = cols};
  unsigned short *hx = malloc((size_t)rows * cols * 2), *hg = malloc((size_t)cols * 2), *hy = malloc((size_t)rows * cols * 2);
  int rc = -1;
  if (!hx || !hg || !hy) {
    ts_fail_sys(e, "out of memory");
    goto out;
  }
  CUDA_CHECK_GOTO(e, cudaMemset(b->y, 0xff, (size_t)rows * cols * 2), out); /* poisoned: NaN */
  if (one_launch(b, e)) goto out;
  CUDA_CHECK_GOTO(e, cudaStreamSynchronize(b->st), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(hx, b->x, (size_t)rows * cols * 2, cudaMemcpyDeviceToHost), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(hg, b->gamma, (size_t)cols * 2, cudaMemcpyDeviceToHost), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(hy, b->y, (size_t)rows * cols * 2, cudaMemcpyDeviceToHost), out);
  double worst = 0;
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int c = 0; c < cols; c++) {
      unsigned int u = (unsigned int)hx[(size_t)r * cols + c] << 16;
      float v;
      memcpy(&v, &u, 4);
      ss += (double)v * v;
    }
    double rstd = 1.0 / sqrt(ss / cols + 1e-5);
    for (int c = 0; c < cols; c++) {
      unsigned int ux = (unsigned int)hx[(size_t)r * cols + c] << 16, ug = (unsigned int)hg[c] << 16,
                   uy = (unsigned int)hy[(size_t)r * cols + c] << 16;
      float x, g, y;
      memcpy(&x, &ux, 4), memcpy(&g, &ug, 4), memcpy(&y, &uy, 4);
      double ref = x * rstd * g, err = fabs(y - ref) / (fabs(ref) + 1e-2);
      if (!(err <= worst)) worst = err; /* NaN (a poisoned output left) counts */
    }
  }
  fprintf(stderr, "calibrate-infer: small kernels: RMSNorm 4 x 4096 against the float reference: max rel. error %.2g "
                  "(tolerance 1e-2, BF16 output)\n", worst);
  if (!(worst <= 1e-2)) {
    ts_fail_sys(e, "RMSNorm spot check failed: max relative error %g", worst);
    goto out;
  }
  rc = 0;
out:
  free(hx), free(hg), free(hy);
  return rc;
}

int calib_small_kernels(schema_calibration *cal, const model_config *models, int nm, ts_err *e) {
  static small_shape sh[MAX_SHAPES];
  int n, max_cols, max_qkv;
  long long max_words;
  if (shapes_of(models, nm, sh, &n, &max_cols, &max_qkv, &max_words)) return ts_fail_sys(e, "more than %d small-kernel shapes", MAX_SHAPES);
  small_bufs b;
  memset(&b, 0, sizeof b);
  const size_t act = (size_t)MAX_BATCH * 2 * (max_cols > 65536 ? max_cols : 65536) * 2; /* also 2 TACO blocks of 128 KiB */
  const size_t cache = (size_t)MAX_BATCH * 16 * MAX_SEQ * 128 * 2;                    /* kvl <= 16, d <= 128 */
  const size_t qkv_rows = PREFILL_MAX_ROWS > MAX_BATCH ? PREFILL_MAX_ROWS : MAX_BATCH; /* a prefill's rows */
  int rc = -1, done = 0;
  CUDA_CHECK_GOTO(e, cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking), out);
  if (dmalloc(&b.x, act, e) || dmalloc(&b.y, act, e) || dmalloc(&b.gamma, (size_t)max_cols * 2, e) ||
      dmalloc((void **)&b.rstd, MAX_BATCH * sizeof(float), e) || dmalloc((void **)&b.ids, MAX_BATCH * sizeof(int32_t), e) ||
      dmalloc(&b.table, (size_t)EMB_VOCAB * max_cols * 2, e) || dmalloc(&b.qkv, qkv_rows * max_qkv * 2 + 2, e) ||
      dmalloc(&b.q, qkv_rows * max_qkv * 2 + 2, e) || dmalloc(&b.kc, cache, e) || dmalloc(&b.vc, cache, e) ||
      dmalloc(&b.wire, act, e) || dmalloc(&b.logits, (size_t)MAX_BATCH * max_words * 2, e) ||
      dmalloc((void **)&b.tok, MAX_BATCH * sizeof(int32_t), e) ||
      dmalloc(&b.amax, infer_argmax_scratch_bytes(MAX_BATCH, 8, max_words), e))
    goto out;
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&b.nf, sizeof *b.nf), out);
  if (taco_nonfinite_reset(b.nf, b.st)) {
    ts_fail_sys(e, "taco_nonfinite_reset: %s", taco_last_error());
    goto out;
  }
  if (rt_fill_random_bf16(b.x, (long long)(act / 2), 21, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b.y, (long long)(act / 2), 22, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b.gamma, max_cols, 23, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b.table, (long long)EMB_VOCAB * max_cols, 24, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b.qkv, (long long)qkv_rows * max_qkv, 25, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b.logits, (long long)MAX_BATCH * max_words, 27, 4.0f, NULL, e) ||
      rt_fill_labels(b.ids, MAX_BATCH, EMB_VOCAB, 26, NULL, e))
    goto out;
  CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
  if (spot_check(&b, e)) goto out;
  /* real encoded blocks, so the decoders read valid scales (two blocks: decode_sum_encode sums two) */
  for (int i = 0; i < n; i++) {
    b.s = sh[i];
    if (sh[i].kind == K_ROPE) /* a prefill's cache holds its seq positions: batch x kvl x seq x d fits `cache` */
      b.ad = (infer_attn_dims){.batch = (int)(sh[i].seq > 1 ? sh[i].rows / sh[i].seq : sh[i].rows), .hl = sh[i].hl,
                               .kvl = sh[i].kvl, .head_dim = sh[i].d, .max_seq = sh[i].seq > 1 ? sh[i].seq : MAX_SEQ,
                               .rope_theta = 500000.0};
    if (sh[i].kind >= K_TACO_ENC) {
      taco_params p = {.group = sh[i].group, .fp8 = TACO_FP8_E4M3};
      size_t wire = taco_wire_bytes(sh[i].n, sh[i].group);
      for (int k = 0; k < 2; k++)
        if (taco_encode(b.x, TACO_DTYPE_BF16, sh[i].n, p, (char *)b.wire + k * wire, b.nf, b.st)) {
          ts_fail_sys(e, "taco_encode: %s", taco_last_error());
          goto out;
        }
    }
    double q_us, g_us;
    if (time_mode(&b, 0, &q_us, e) || time_mode(&b, 1, &g_us, e)) goto out;
    char eager[64], graph[64];
    snprintf(eager, sizeof eager, "%s.eager", k_table[sh[i].kind]);
    snprintf(graph, sizeof graph, "%s.graph", k_table[sh[i].kind]);
    int group = sh[i].kind >= K_TACO_ENC ? sh[i].group : width(&sh[i]);
    double x = key_bytes(&sh[i]);
    if (schema_calibration_add_kernel(cal, eager, false, x, group, q_us) ||
        schema_calibration_add_kernel(cal, graph, false, x, group, g_us)) {
      ts_fail_sys(e, "out of memory");
      goto out;
    }
    printf("small\t%s\t%.0f\t%d\t%lld\t%d\t%d\t%d\t%d\t%.3f\t%.3f\n", k_table[sh[i].kind], x, group, sh[i].rows,
           sh[i].cols, sh[i].hl, sh[i].kvl, sh[i].d, q_us, g_us);
    done++;
  }
  fprintf(stderr, "calibrate-infer: %d small-kernel points, queued (.eager) and in a graph (.graph)\n", done);
  rc = 0;
out:
  cudaDeviceSynchronize();
  free_bufs(&b);
  return rc;
}
