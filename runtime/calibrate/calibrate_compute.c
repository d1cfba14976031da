/* calibrate_compute.c — GEMM, attention and memory-bound kernel tables on one GPU.
 *
 * Inputs are random and non-zero (rt_fill_random_*). Memory-bound kernels
 * rotate through enough copies of their buffers that each launch reads from
 * HBM, not from the previous launch's L2 lines. Table x values are the bytes
 * each kernel really moves (or the model's FLOP count for attention); see
 * calibration/README.md for the names. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_progress.h"
#include "exec_core.h"
#include "exec_gemm.h"
#include "exec_kernels.h"
#include "ops_variants.h"
#include "rt_ops.h"
#include "rt_ops_check.h"
#include "rt_ops_layer.h"

#define ROTATE_BYTES ((size_t)256 << 20) /* > 4x the H200's 50 MB L2 */
#define MAX_SETS 16

static int alloc_random(void **p, size_t elems, uint64_t seed, ts_err *e) {
  RT_CHECK_CUDA(e, cudaMalloc(p, elems * 2 > 0 ? elems * 2 : 2));
  return rt_fill_random_bf16(*p, (long long)elems, seed, 1.0f, NULL, e);
}

/* ---- GEMMs: exec_gemm with the executor's layout and output type for each key ----
 *
 * Against the run-to-run noise of a GEMM table (calibration/README.md):
 *   - operands rotate through copies spanning >= 256 MiB (4x the 60 MB L2), so a
 *     launch reads its A and B from HBM as in an iteration, not the L2 lines
 *     the previous launch of the same shape left;
 *   - one second of the largest GEMM first, so the clocks have settled
 *     before the first shape is timed;
 *   - the algorithm is chosen once per shape (exec_gemm's cache) and kept for
 *     every pass;
 *   - interleaved passes over all shapes, alternating direction (even passes
 *     forward, odd ones in reverse), the table holding the geometric mean of
 *     the passes. The GPU's speed drifts over a pass (temperature and clocks
 *     under the power cap: the same run's forward and reverse passes differ by
 *     4.4% per shape, two forward passes of different runs by 2%), and the
 *     drift moves neighbouring shapes of the list together. A forward and a
 *     reverse pass see a linear drift in opposite directions, so their mean
 *     cancels it; the median of an odd number of passes does not (on the same
 *     3-pass data: held-out 3.08% with the median, 2.90% with the geometric
 *     mean; calibration/README.md). */

#define GEMM_ROTATE_BYTES ((size_t)256 << 20)
#define GEMM_MAX_SETS 32
#define ALIGN256(x) (((x) + (size_t)255) & ~(size_t)255) /* cuBLASLt's default operand alignment */

typedef struct {
  exec_gemm *h;
  exec_gemm_shape run; /* what the executor runs for this key */
  float beta;
  char *in, *out;      /* pools the sets rotate through */
  size_t a_bytes, in_stride, out_stride;
  int sets;
} gemm_ctx;

typedef struct {
  size_t a, b, c; /* aligned operand bytes */
  int sets;
} gemm_footprint;

static gemm_footprint gemm_fp(const calib_gemm_shape *s) {
  gemm_footprint f;
  long long m = s->swap_mn ? s->n : s->m, n = s->swap_mn ? s->m : s->n; /* as the executor runs it */
  f.a = ALIGN256((size_t)(m * s->k) * 2);
  f.b = ALIGN256((size_t)(s->k * n) * 2);
  f.c = ALIGN256((size_t)(m * n) * (s->layout == EXEC_GEMM_TN_ACC ? 4 : 2));
  size_t all = f.a + f.b + f.c;
  size_t sets = (GEMM_ROTATE_BYTES + all - 1) / all;
  f.sets = sets < 1 ? 1 : (sets > GEMM_MAX_SETS ? GEMM_MAX_SETS : (int)sets);
  return f;
}

static int gemm_launch(void *p, long long iter, ts_err *e) {
  gemm_ctx *g = p;
  int s = (int)(iter % g->sets);
  const char *a = g->in + (size_t)s * g->in_stride;
  return exec_gemm_run(g->h, &g->run, 1.0f, a, a + g->a_bytes, g->beta, g->out + (size_t)s * g->out_stride, NULL,
                       e);
}

static void gemm_select(gemm_ctx *g, const calib_gemm_shape *s) {
  gemm_footprint f = gemm_fp(s);
  g->run = s->swap_mn ? exec_gemm_packed(s->layout, s->n, s->m, s->k) : exec_gemm_packed(s->layout, s->m, s->n, s->k);
  g->beta = exec_gemm_packed_beta(s->layout);
  g->a_bytes = f.a, g->in_stride = f.a + f.b, g->out_stride = f.c, g->sets = f.sets;
}

/* Runs the largest GEMM for `seconds` so the clocks settle before timing. */
static int gemm_warm_clocks(gemm_ctx *g, const calib_shapes *sh, double seconds, ts_err *e) {
  int big = 0;
  for (int i = 1; i < sh->n_gemm; i++)
    if ((double)sh->gemm[i].m * sh->gemm[i].n * sh->gemm[i].k >
        (double)sh->gemm[big].m * sh->gemm[big].n * sh->gemm[big].k)
      big = i;
  gemm_select(g, &sh->gemm[big]);
  double t0 = calib_elapsed_s();
  long long it = 0;
  while (calib_elapsed_s() - t0 < seconds) {
    for (int k = 0; k < 8; k++) RT_TRY(gemm_launch(g, it++, e));
    RT_CHECK_CUDA(e, cudaDeviceSynchronize());
  }
  fprintf(stderr, "[%6.1fs] gemm: %lld launches of m=%lld n=%lld k=%lld to settle the clocks\n", calib_elapsed_s(), it,
          sh->gemm[big].m, sh->gemm[big].n, sh->gemm[big].k);
  return 0;
}

static int write_gemm_tsv(const char *path, const calib_shapes *sh, const double *t, int passes, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "m\tn\tk\tlayout\tswap_mn");
  for (int p = 0; p < passes; p++) fprintf(f, "\tpass%d_us", p + 1);
  fprintf(f, "\n");
  for (int i = 0; i < sh->n_gemm; i++) {
    const calib_gemm_shape *s = &sh->gemm[i];
    fprintf(f, "%lld\t%lld\t%lld\t%d\t%d", s->m, s->n, s->k, (int)s->layout, s->swap_mn);
    for (int p = 0; p < passes; p++) fprintf(f, "\t%.3f", t[(size_t)i * passes + p]);
    fprintf(f, "\n");
  }
  return fclose(f) == 0 ? 0 : ts_fail_sys(e, "%s: write failed", path);
}

int calib_run_gemms(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  if (sh->n_gemm == 0) return 0;
  size_t in_pool = 0, out_pool = 0;
  for (int i = 0; i < sh->n_gemm; i++) {
    gemm_footprint f = gemm_fp(&sh->gemm[i]);
    if ((size_t)f.sets * (f.a + f.b) > in_pool) in_pool = (size_t)f.sets * (f.a + f.b);
    if ((size_t)f.sets * f.c > out_pool) out_pool = (size_t)f.sets * f.c;
  }
  int passes = cfg->gemm_passes > 0 ? cfg->gemm_passes : 1;
  if (passes > CALIB_MAX_GEMM_PASSES) passes = CALIB_MAX_GEMM_PASSES;
  calib_budget b = cfg->budget;
  /* With several passes each is short (two batches, median = their mean) and
   * the passes, spread over the run, make up the samples: more passes cancel
   * more of the drift than more batches of one pass would. The GEMM phase's
   * time is set by the launches of the long GEMMs: 1 warm-up + 1 sizing + 2
   * timed in the first pass, 1 sizing + 2 timed after it (the shape's
   * algorithm is cached and it ran before). */
  if (passes > 1) b.warmup = 1, b.reps = 2;
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  gemm_ctx g = {0};
  int rc = -1;
  double *t = calloc((size_t)sh->n_gemm * passes, sizeof *t); /* 0: not measured */
  double pass_seconds[CALIB_MAX_GEMM_PASSES] = {0};
  if (!t) return ts_fail_sys(e, "calibrate: out of memory");
  if (exec_gemm_create(&g.h, e) || alloc_random((void **)&g.in, in_pool / 2, 11, e)) goto out;
  if (cudaMalloc((void **)&g.out, out_pool) != cudaSuccess || cudaMemset(g.out, 0, out_pool) != cudaSuccess) {
    ts_fail_sys(e, "%s:%d: cudaMalloc(%zu bytes) for GEMM outputs failed", __FILE__, __LINE__, out_pool);
    goto out;
  }
  /* 3 s: the first pass of a 1 s settle still ran 2-6% faster than later
   * passes on light shapes (calibration/raw/gemm-3-passes, commit 3d19b07) */
  if (gemm_warm_clocks(&g, sh, cfg->quick ? 0.5 : 3.0, e)) goto out;
  void *streams[1] = {NULL};
  calib_progress pr;
  calib_progress_begin(&pr, "gemm", sh->n_gemm * passes);
  for (int p = 0; p < passes; p++) {
    double pass_t0 = calib_elapsed_s();
    if (p == 1) b.warmup = 0;
    for (int j = 0; j < sh->n_gemm; j++) {
      int i = calib_gemm_pass_shape(p, j, sh->n_gemm);
      const calib_gemm_shape *s = &sh->gemm[i];
      if (p > 0 && t[(size_t)i * passes] == 0) { /* skipped in the first pass */
        calib_progress_step(&pr, "skipped");
        continue;
      }
      gemm_select(&g, s);
      double us;
      if (calib_time_us(gemm_launch, &g, streams, cfg->devices, 1, &b, &us, e)) {
        /* a shape cuBLASLt cannot run is skipped (the simulator interpolates
         * it); a broken device is not */
        if (cudaDeviceSynchronize() != cudaSuccess) goto out;
        fprintf(stderr, "\ncalibrate: warning: GEMM m=%lld n=%lld k=%lld skipped: %s\n", s->m, s->n, s->k, e->msg);
        calib_progress_step(&pr, "skipped");
        continue;
      }
      t[(size_t)i * passes + p] = us;
      calib_progress_step(&pr, "pass %d m=%lld n=%lld k=%lld %.1f us %.0f TFLOP/s", p + 1, s->m, s->n, s->k, us,
                          2.0 * s->m * s->n * s->k / us * 1e-6);
    }
    pass_seconds[p] = calib_elapsed_s() - pass_t0;
  }
  calib_progress_end(&pr);
  for (int p = 0; p < passes; p++)
    fprintf(stderr, "[%6.1fs] gemm: pass %d (%s) took %.1f s\n", calib_elapsed_s(), p + 1, p % 2 ? "reverse" : "forward",
            pass_seconds[p]);
  for (int i = 0; i < sh->n_gemm; i++) {
    double us = calib_gemm_combine_passes(t + (size_t)i * passes, passes);
    if (us <= 0) continue;
    const calib_gemm_shape *s = &sh->gemm[i];
    /* a weight gradient of a shape that is also timed with a BF16 C goes to "gemm_wgrad" */
    if ((calib_shapes_twin(sh, i) >= 0 && s->layout == EXEC_GEMM_TN_ACC
             ? schema_calibration_add_gemm_wgrad(c, s->m, s->n, s->k, us)
             : schema_calibration_add_gemm(c, s->m, s->n, s->k, us))) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
  }
  if (passes > 1) {
    int n_all, n_big;
    double all = calib_gemm_pass_difference(t, sh->n_gemm, passes, 0, &n_all),
           big = calib_gemm_pass_difference(t, sh->n_gemm, passes, 1000, &n_big);
    fprintf(stderr, "[%6.1fs] gemm: passes 1 and 2 differ by %.2f%% (median over %d shapes), %.2f%% over the %d of >= 1 ms\n",
            calib_elapsed_s(), 100 * all, n_all, 100 * big, n_big);
  }
  if (cfg->gemm_tsv && write_gemm_tsv(cfg->gemm_tsv, sh, t, passes, e)) goto out;
  rc = 0;
out:
  free(t);
  cudaFree(g.in), cudaFree(g.out);
  exec_gemm_destroy(g.h);
  return rc;
}

/* ---- attention: the executor's own attention core (exec_core.h) ---- */

static int attn_fwd_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  return exec_attention_fwd(p, e);
}

static int attn_bwd_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  return exec_attention_bwd(p, e);
}

int calib_run_attention(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  size_t max_qkv = 0, max_ss = 0;
  for (int i = 0; i < sh->n_attn; i++) {
    const calib_attn_shape *s = &sh->attn[i];
    size_t qkv = (size_t)s->bh * s->seq * s->head_dim * 3, ss = (size_t)s->bh * s->seq * s->seq;
    if (qkv > max_qkv) max_qkv = qkv;
    if (ss > max_ss) max_ss = ss;
  }
  if (sh->n_attn == 0) return 0;
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  exec_attention_args a = {.lower_softmax = !ops_variant_is(OPS_V_SOFTMAX, "full")}; /* as exec_model.c chooses */
  void *qkv = NULL, *out = NULL, *dout = NULL, *dqkv = NULL, *scores = NULL, *P = NULL, *dP = NULL, *dS = NULL;
  void **bufs[] = {&qkv, &out, &dout, &dqkv, &scores, &P, &dP, &dS};
  int rc = -1;
  if (exec_gemm_create(&a.gemm, e)) return -1;
  for (int i = 0; i < 8; i++)
    if (alloc_random(bufs[i], i < 4 ? max_qkv : max_ss, 100 + i, e)) goto out;
  a.qkv = qkv, a.out = out, a.dout = dout, a.dqkv = dqkv, a.scores = scores, a.P = P, a.dP = dP, a.dS = dS;
  void *streams[1] = {NULL};
  calib_progress pr;
  calib_progress_begin(&pr, "attention", sh->n_attn);
  for (int i = 0; i < sh->n_attn; i++) {
    const calib_attn_shape *s = &sh->attn[i];
    int twin = 0; /* these multi-head tables: one timing per (batch, heads, seq, head_dim) */
    for (int j = 0; j < i; j++)
      twin |= sh->attn[j].batch == s->batch && sh->attn[j].heads == s->heads && sh->attn[j].seq == s->seq &&
              sh->attn[j].head_dim == s->head_dim;
    if (twin) continue;
    a.batch = s->batch, a.heads = s->heads, a.seq = s->seq, a.head_dim = s->head_dim;
    double fwd, bwd;
    if (calib_time_us(attn_fwd_launch, &a, streams, cfg->devices, 1, &cfg->budget, &fwd, e)) goto out;
    if (calib_time_us(attn_bwd_launch, &a, streams, cfg->devices, 1, &cfg->budget, &bwd, e)) goto out;
    /* keyed as models/model.h counts attention: 4 b s^2 h/tp forward, 2.5x that backward */
    double flops = 4.0 * (double)s->bh * s->seq * (double)s->seq * s->head_dim;
    /* and per (head dimension, sequence): there the FLOPs fix batch x heads,
     * so no two shapes of different cost share an entry */
    char fname[48], bname[48];
    snprintf(fname, sizeof fname, "attention.d%d.s%d", s->head_dim, s->seq);
    snprintf(bname, sizeof bname, "attention_bwd.d%d.s%d", s->head_dim, s->seq);
    if (calib_add_kernel(c, "attention", true, flops, 0, fwd) ||
        calib_add_kernel(c, "attention_bwd", true, 2.5 * flops, 0, bwd) ||
        calib_add_kernel(c, fname, true, flops, 0, fwd) || calib_add_kernel(c, bname, true, 2.5 * flops, 0, bwd)) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
    calib_progress_step(&pr, "b=%d heads=%d seq=%d d=%d fwd %.1f us bwd %.1f us", s->batch, s->heads, s->seq,
                        s->head_dim, fwd, bwd);
  }
  calib_progress_end(&pr);
  rc = 0;
out:
  for (int i = 0; i < 8; i++) cudaFree(*bufs[i]);
  exec_gemm_destroy(a.gemm);
  return rc;
}

/* ---- memory-bound kernels ---- */

typedef enum { MEM_FWD, MEM_BWD } mem_dir;

/* One measurement: `sets` copies of up to 4 BF16 tensors and 2 FP32 vectors. */
typedef struct {
  calib_mem_kind kind;
  mem_dir dir;
  long long rows;
  int cols;
  int head_dim;    /* CALIB_MEM_ROPE */
  float *inv_freq; /* CALIB_MEM_ROPE: theta 1e4's frequencies, head_dim / 2 of them */
  int sets;
  void *t[MAX_SETS][4];
  float *f[MAX_SETS][2];
  int32_t *ids; /* labels or token ids (shared by the sets) */
  void *gamma, *beta;
  float *dgamma, *dbeta; /* norm weight-gradient accumulators */
} mem_ctx;

/* Element counts of the BF16 tensors t[0..3] and FP32 vectors f[0..1]. */
static void mem_sizes(const mem_ctx *m, size_t bf[4], size_t fp[2]) {
  size_t n = (size_t)m->rows * (size_t)m->cols;
  memset(bf, 0, 4 * sizeof *bf);
  memset(fp, 0, 2 * sizeof *fp);
  switch (m->kind) {
  case CALIB_MEM_LAYERNORM:
  case CALIB_MEM_RMSNORM: bf[0] = bf[1] = bf[2] = bf[3] = n, fp[0] = fp[1] = (size_t)m->rows; break; /* x, y|dy, dx, dx sum */
  case CALIB_MEM_GELU:
  case CALIB_MEM_ADD: bf[0] = bf[1] = bf[2] = n; break;
  case CALIB_MEM_SWIGLU: bf[0] = 2 * n, bf[1] = n, bf[2] = 2 * n; break; /* x, y|dy, dx */
  case CALIB_MEM_LOSS: bf[0] = n, fp[0] = (size_t)m->rows, fp[1] = 3 * (size_t)m->rows; break; /* logits, rowmax, sums */
  case CALIB_MEM_EMBEDDING: bf[0] = n, bf[1] = n; break; /* table (as many rows as tokens), y */
  case CALIB_MEM_BIAS: bf[0] = n, bf[1] = (size_t)m->cols, fp[0] = (size_t)m->cols; break; /* y|dy, bias, gradient */
  case CALIB_MEM_ROPE: bf[0] = n; break; /* the query and key heads, rotated in place */
  default: break;
  }
}

/* Bytes the kernel moves, the x of its table. */
static double mem_traffic(const mem_ctx *m) {
  double n = (double)m->rows * m->cols;
  switch (m->kind) {
  case CALIB_MEM_LAYERNORM:
  case CALIB_MEM_RMSNORM:
  case CALIB_MEM_GELU: return (m->dir == MEM_FWD ? 2 : 3) * 2.0 * n;
  case CALIB_MEM_SWIGLU: return (m->dir == MEM_FWD ? 3 : 5) * 2.0 * n;
  case CALIB_MEM_ADD: return 3 * 2.0 * n;
  case CALIB_MEM_LOSS:
  case CALIB_MEM_EMBEDDING: return 2 * 2.0 * n;
  case CALIB_MEM_BIAS: return (m->dir == MEM_FWD ? 2 : 1) * 2.0 * n; /* y read and written | dy read */
  case CALIB_MEM_ROPE: return 2 * 2.0 * n; /* read and written, both ways (models/model_layer.c's bytes) */
  default: return n;
  }
}

static int mem_launch(void *p, long long iter, ts_err *e) {
  mem_ctx *m = p;
  int s = (int)(iter % m->sets);
  void **t = m->t[s];
  float **f = m->f[s];
  long long n = m->rows * m->cols;
  switch (m->kind) {
  /* norm backward as the executor runs it: weight gradients, input gradient, residual add */
  case CALIB_MEM_LAYERNORM:
    return m->dir == MEM_FWD
               ? rt_layernorm_fwd(t[0], m->gamma, m->beta, t[1], f[0], f[1], m->rows, m->cols, 1e-5f, NULL, e)
               : exec_norm_bwd(t[1], t[0], m->gamma, f[0], f[1], m->dgamma, m->dbeta, t[2], t[3], m->rows, m->cols,
                               NULL, e);
  case CALIB_MEM_RMSNORM:
    return m->dir == MEM_FWD ? rt_rmsnorm_fwd(t[0], m->gamma, t[1], f[1], m->rows, m->cols, 1e-5f, NULL, e)
                             : exec_norm_bwd(t[1], t[0], m->gamma, NULL, f[1], m->dgamma, NULL, t[2], t[3], m->rows,
                                             m->cols, NULL, e);
  case CALIB_MEM_GELU:
    return m->dir == MEM_FWD ? rt_gelu_fwd(t[0], t[1], n, NULL, e) : rt_gelu_bwd(t[1], t[0], t[2], n, NULL, e);
  case CALIB_MEM_SWIGLU:
    return m->dir == MEM_FWD ? rt_swiglu_fwd(t[0], t[1], m->rows, m->cols, NULL, e)
                             : rt_swiglu_bwd(t[1], t[0], t[2], m->rows, m->cols, NULL, e);
  case CALIB_MEM_ADD: return rt_add(t[0], t[1], t[2], n, NULL, e);
  /* the executor's vocabulary-parallel kernels (exec_kernels.h): the loss as
   * exec_layer.c runs it (one statistics pass by default, else three passes;
   * the all-reduces between them are collectives, not in this table), the
   * logits turned into their gradient in place */
  case CALIB_MEM_LOSS:
    if (exec_ce_fused_selected(m->cols)) {
      RT_TRY(exec_ce_stats(t[0], m->ids, 0, f[0], f[1], m->rows, m->cols, m->cols, NULL, e));
      return exec_ce_finish8(t[0], m->ids, 0, f[0], f[1], m->dgamma, 1.0f, 1.0f, m->rows, m->cols, m->cols, NULL, e);
    }
    RT_TRY(exec_ce_rowmax(t[0], f[0], m->rows, m->cols, m->cols, NULL, e));
    RT_TRY(exec_ce_sums(t[0], m->ids, 0, f[0], f[1], m->rows, m->cols, m->cols, NULL, e));
    return exec_ce_finish(t[0], m->ids, 0, f[0], f[1], m->dgamma, 1.0f, 1.0f, m->rows, m->cols, m->cols, NULL, e);
  case CALIB_MEM_EMBEDDING: /* every token in this rank's slice of the vocabulary, no position table */
    return exec_embed_fwd(m->ids, t[0], 0, m->rows, NULL, 0, t[1], m->rows, (int)(m->rows < (1 << 30) ? m->rows : 1),
                          m->cols, NULL, e);
  /* the executor's unfused bias passes (exec_layer.c): the add over a GEMM's output, and the
   * gradient's column sums into an FP32 accumulator */
  case CALIB_MEM_BIAS:
    return m->dir == MEM_FWD ? rt_bias_add(t[0], t[1], m->rows, m->cols, m->cols, NULL, e)
                             : rt_bias_grad(t[0], f[0], m->rows, m->cols, m->cols, NULL, e);
  /* RoPE (rt_rope) on the query and key heads in place; the backward is the inverse rotation */
  case CALIB_MEM_ROPE:
    return rt_rope(t[0], m->rows, m->cols, m->cols / m->head_dim, m->head_dim, (int)(m->rows < 8192 ? m->rows : 8192),
                   m->inv_freq, m->dir == MEM_BWD, NULL, e);
  default: return ts_fail_sys(e, "calibrate: unknown memory-bound kernel %d", (int)m->kind);
  }
}

static void mem_free(mem_ctx *m) {
  for (int s = 0; s < MAX_SETS; s++) {
    for (int i = 0; i < 4; i++) cudaFree(m->t[s][i]);
    for (int i = 0; i < 2; i++) cudaFree(m->f[s][i]);
  }
  cudaFree(m->ids), cudaFree(m->gamma), cudaFree(m->beta), cudaFree(m->dgamma), cudaFree(m->dbeta);
  cudaFree(m->inv_freq);
  m->inv_freq = NULL;
  memset(m->t, 0, sizeof m->t), memset(m->f, 0, sizeof m->f);
  m->ids = NULL, m->gamma = m->beta = NULL, m->dgamma = m->dbeta = NULL;
}

static int mem_alloc(mem_ctx *m, ts_err *e) {
  size_t bf[4], fp[2], footprint = 0;
  mem_sizes(m, bf, fp);
  for (int i = 0; i < 4; i++) footprint += 2 * bf[i];
  for (int i = 0; i < 2; i++) footprint += 4 * fp[i];
  m->sets = (int)((ROTATE_BYTES + footprint - 1) / (footprint ? footprint : 1));
  if (m->sets < 1) m->sets = 1;
  if (m->sets > MAX_SETS) m->sets = MAX_SETS;
  for (int s = 0; s < m->sets; s++) {
    for (int i = 0; i < 4; i++)
      if (bf[i] && alloc_random(&m->t[s][i], bf[i], 1000 + 10 * s + i, e)) return -1;
    for (int i = 0; i < 2; i++)
      if (fp[i]) {
        RT_CHECK_CUDA(e, cudaMalloc((void **)&m->f[s][i], fp[i] * 4));
        /* mean, rstd (or loss): rstd in a sane positive range */
        RT_TRY(rt_fill_random_f32_range(m->f[s][i], (long long)fp[i], 2000 + 10 * s + i, 0.5f, 2.0f, NULL, e));
      }
  }
  RT_TRY(alloc_random(&m->gamma, (size_t)m->cols, 31, e));
  RT_TRY(alloc_random(&m->beta, (size_t)m->cols, 32, e));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&m->dgamma, (size_t)m->cols * 4));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&m->dbeta, (size_t)m->cols * 4));
  RT_CHECK_CUDA(e, cudaMemset(m->dgamma, 0, (size_t)m->cols * 4));
  RT_CHECK_CUDA(e, cudaMemset(m->dbeta, 0, (size_t)m->cols * 4));
  if (m->kind == CALIB_MEM_ROPE) {
    float f[1024];
    const int half = m->head_dim / 2;
    if (half < 1 || half > 1024) return ts_fail_sys(e, "calibrate: RoPE head dim %d out of range", m->head_dim);
    for (int i = 0; i < half; i++) f[i] = (float)pow(1e4, -2.0 * i / m->head_dim);
    RT_CHECK_CUDA(e, cudaMalloc((void **)&m->inv_freq, (size_t)half * sizeof *f));
    RT_CHECK_CUDA(e, cudaMemcpy(m->inv_freq, f, (size_t)half * sizeof *f, cudaMemcpyHostToDevice));
  }
  RT_CHECK_CUDA(e, cudaMalloc((void **)&m->ids, (size_t)m->rows * 4));
  return rt_fill_labels(m->ids, m->rows, m->kind == CALIB_MEM_LOSS ? m->cols : (int)m->rows, 33, NULL, e);
}

/* The generic table a kernel's points also go to (the simulator's fallback when the specific one is
 * missing), or NULL: the bias passes and RoPE have only their own (sim_costs.c falls back on
 * "elementwise" where a file lacks them, but their points would distort that table). */
static const char *generic_table(calib_mem_kind k, mem_dir d) {
  switch (k) {
  case CALIB_MEM_BIAS:
  case CALIB_MEM_ROPE: return NULL;
  case CALIB_MEM_LAYERNORM:
  case CALIB_MEM_RMSNORM: return d == MEM_FWD ? "norm" : "norm_bwd";
  case CALIB_MEM_GELU:
  case CALIB_MEM_SWIGLU: return d == MEM_FWD ? "elementwise" : "elementwise_bwd";
  case CALIB_MEM_ADD: return "elementwise";
  case CALIB_MEM_LOSS: return "loss";
  case CALIB_MEM_EMBEDDING: return "embedding";
  default: return "elementwise";
  }
}

static int has_bwd(calib_mem_kind k) {
  return k == CALIB_MEM_LAYERNORM || k == CALIB_MEM_RMSNORM || k == CALIB_MEM_GELU || k == CALIB_MEM_SWIGLU ||
         k == CALIB_MEM_BIAS || k == CALIB_MEM_ROPE;
}

/* AdamW over n parameters: FP32 master, grad, m, v and the BF16 copy. */
typedef struct {
  long long n;
  int sets;
  float *f[MAX_SETS][4];
  void *w16[MAX_SETS];
} adam_ctx;

static int adam_launch(void *p, long long iter, ts_err *e) {
  adam_ctx *a = p;
  int s = (int)(iter % a->sets);
  rt_adamw_params prm = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                         .step = 1 + (int)(iter % 1000)};
  return rt_adamw_step(a->f[s][0], a->w16[s], a->f[s][1], a->f[s][2], a->f[s][3], a->n, prm, NULL, e);
}

static int run_adamw(const calib_config *cfg, schema_calibration *c, ts_err *e) {
  /* 64 Ki .. 256 Mi (quick) or 1 Gi parameters: a whole model shard's step
   * on one GPU reaches the top of this range (1 Gi takes 18 GB) */
  int lo = 16, hi = cfg->quick ? 28 : 30;
  calib_progress pr;
  calib_progress_begin(&pr, "adamw", hi - lo + 1);
  void *streams[1] = {NULL};
  for (int b = lo; b <= hi; b++) {
    adam_ctx a = {.n = 1LL << b};
    size_t footprint = (size_t)a.n * 18;
    a.sets = (int)((ROTATE_BYTES + footprint - 1) / footprint);
    if (a.sets > MAX_SETS) a.sets = MAX_SETS;
    int rc = 0;
    for (int s = 0; s < a.sets && !rc; s++) {
      for (int i = 0; i < 4 && !rc; i++) {
        if (cudaMalloc((void **)&a.f[s][i], (size_t)a.n * 4) != cudaSuccess)
          rc = ts_fail_sys(e, "%s:%d: cudaMalloc for AdamW failed", __FILE__, __LINE__);
        else /* master, grad, m in [-1, 1]; v (a second moment) positive */
          rc = rt_fill_random_f32_range(a.f[s][i], a.n, 3000 + 10 * s + i, i == 3 ? 1e-6f : -1.0f, 1.0f, NULL, e);
      }
      if (!rc && cudaMalloc(&a.w16[s], (size_t)a.n * 2) != cudaSuccess)
        rc = ts_fail_sys(e, "%s:%d: cudaMalloc for AdamW failed", __FILE__, __LINE__);
    }
    double us = 0;
    if (!rc) rc = calib_time_us(adam_launch, &a, streams, cfg->devices, 1, &cfg->budget, &us, e);
    for (int s = 0; s < a.sets; s++) {
      for (int i = 0; i < 4; i++) cudaFree(a.f[s][i]);
      cudaFree(a.w16[s]);
    }
    if (rc) return -1;
    double bytes = 30.0 * (double)a.n; /* read 4 FP32, write 3 FP32 and one BF16 */
    if (calib_add_kernel(c, "optimizer", false, bytes, 0, us) || calib_add_kernel(c, "adamw", false, bytes, 0, us))
      return ts_fail_sys(e, "calibrate: out of memory");
    calib_progress_step(&pr, "n=%lld %.1f us %.0f GB/s", a.n, us, bytes / us * 1e-3);
  }
  calib_progress_end(&pr);
  return 0;
}

int calib_run_memops(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  int total = 0;
  for (int i = 0; i < sh->n_mem; i++) total += has_bwd(sh->mem[i].kind) ? 2 : 1;
  calib_progress pr;
  calib_progress_begin(&pr, "memory-bound kernels", total);
  void *streams[1] = {NULL};
  for (int i = 0; i < sh->n_mem; i++) {
    mem_ctx m;
    memset(&m, 0, sizeof m);
    m.kind = sh->mem[i].kind, m.rows = sh->mem[i].rows, m.cols = sh->mem[i].cols, m.head_dim = sh->mem[i].head_dim;
    if (mem_alloc(&m, e)) {
      mem_free(&m);
      return -1;
    }
    for (int d = MEM_FWD; d <= (has_bwd(m.kind) ? MEM_BWD : MEM_FWD); d++) {
      m.dir = (mem_dir)d;
      double us;
      if (calib_time_us(mem_launch, &m, streams, cfg->devices, 1, &cfg->budget, &us, e)) {
        mem_free(&m);
        return -1;
      }
      double bytes = mem_traffic(&m);
      char name[48];
      snprintf(name, sizeof name, "%s_%s", calib_mem_kind_name(m.kind), d == MEM_FWD ? "fwd" : "bwd");
      const char *generic = generic_table(m.kind, m.dir);
      if (calib_add_kernel(c, name, false, bytes, 0, us) ||
          (generic && calib_add_kernel(c, generic, false, bytes, 0, us))) {
        mem_free(&m);
        return ts_fail_sys(e, "calibrate: out of memory");
      }
      calib_progress_step(&pr, "%s %lldx%d %.1f us %.0f GB/s", name, m.rows, m.cols, us, bytes / us * 1e-3);
    }
    mem_free(&m);
  }
  calib_progress_end(&pr);
  return run_adamw(cfg, c, e);
}
