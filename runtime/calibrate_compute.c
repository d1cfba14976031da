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
#include "rt_ops.h"
#include "rt_ops_check.h"

#define ROTATE_BYTES ((size_t)256 << 20) /* > 4x the H200's 50 MB L2 */
#define MAX_SETS 16

static int alloc_random(void **p, size_t elems, uint64_t seed, ts_err *e) {
  RT_CHECK_CUDA(e, cudaMalloc(p, elems * 2 > 0 ? elems * 2 : 2));
  return rt_fill_random_bf16(*p, (long long)elems, seed, 1.0f, NULL, e);
}

/* ---- GEMMs: exec_gemm with the executor's layout and output type for each key ---- */

typedef struct {
  exec_gemm *h;
  exec_gemm_shape run; /* what the executor runs for this key */
  float beta;
  void *a, *b, *c;
} gemm_ctx;

static int gemm_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  gemm_ctx *g = p;
  return exec_gemm_run(g->h, &g->run, 1.0f, g->a, g->b, g->beta, g->c, NULL, e);
}

int calib_run_gemms(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  size_t max_a = 0, max_b = 0, max_c_bytes = 0;
  for (int i = 0; i < sh->n_gemm; i++) {
    const calib_gemm_shape *s = &sh->gemm[i];
    if ((size_t)(s->m * s->k) > max_a) max_a = (size_t)(s->m * s->k);
    if ((size_t)(s->k * s->n) > max_b) max_b = (size_t)(s->k * s->n);
    size_t cb = (size_t)(s->m * s->n) * (s->layout == EXEC_GEMM_TN_ACC ? 4 : 2);
    if (cb > max_c_bytes) max_c_bytes = cb;
  }
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  gemm_ctx g = {0};
  int rc = -1;
  if (exec_gemm_create(&g.h, e) || alloc_random(&g.a, max_a, 11, e) || alloc_random(&g.b, max_b, 12, e)) goto out;
  if (cudaMalloc(&g.c, max_c_bytes) != cudaSuccess || cudaMemset(g.c, 0, max_c_bytes) != cudaSuccess) {
    ts_fail_sys(e, "%s:%d: cudaMalloc(%zu bytes) for GEMM outputs failed", __FILE__, __LINE__, max_c_bytes);
    goto out;
  }
  void *streams[1] = {NULL};
  calib_progress pr;
  calib_progress_begin(&pr, "gemm", sh->n_gemm);
  for (int i = 0; i < sh->n_gemm; i++) {
    const calib_gemm_shape *s = &sh->gemm[i];
    g.run = s->swap_mn ? exec_gemm_packed(s->layout, s->n, s->m, s->k) : exec_gemm_packed(s->layout, s->m, s->n, s->k);
    g.beta = exec_gemm_packed_beta(s->layout);
    double us;
    if (calib_time_us(gemm_launch, &g, streams, cfg->devices, 1, &cfg->budget, &us, e)) {
      /* a shape cuBLASLt cannot run is skipped (the simulator interpolates
       * it); a broken device is not */
      if (cudaDeviceSynchronize() != cudaSuccess) goto out;
      fprintf(stderr, "\ncalibrate: warning: GEMM m=%lld n=%lld k=%lld skipped: %s\n", s->m, s->n, s->k, e->msg);
      calib_progress_step(&pr, "skipped");
      continue;
    }
    if (schema_calibration_add_gemm(c, s->m, s->n, s->k, us)) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
    calib_progress_step(&pr, "m=%lld n=%lld k=%lld %.1f us %.0f TFLOP/s", s->m, s->n, s->k, us,
                        2.0 * s->m * s->n * s->k / us * 1e-6);
  }
  calib_progress_end(&pr);
  rc = 0;
out:
  cudaFree(g.a), cudaFree(g.b), cudaFree(g.c);
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
  exec_attention_args a = {.lower_softmax = getenv("EXEC_FULL_SOFTMAX") == NULL}; /* as exec_model.c chooses */
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
    a.batch = s->batch, a.heads = s->heads, a.seq = s->seq, a.head_dim = s->head_dim;
    double fwd, bwd;
    if (calib_time_us(attn_fwd_launch, &a, streams, cfg->devices, 1, &cfg->budget, &fwd, e)) goto out;
    if (calib_time_us(attn_bwd_launch, &a, streams, cfg->devices, 1, &cfg->budget, &bwd, e)) goto out;
    /* keyed as models/model.h counts attention: 4 b s^2 h/tp forward, 2.5x that backward */
    double flops = 4.0 * (double)s->bh * s->seq * (double)s->seq * s->head_dim;
    if (calib_add_kernel(c, "attention", true, flops, 0, fwd) ||
        calib_add_kernel(c, "attention_bwd", true, 2.5 * flops, 0, bwd)) {
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
  case CALIB_MEM_LOSS: bf[0] = bf[1] = n, fp[0] = (size_t)m->rows; break;
  case CALIB_MEM_EMBEDDING: bf[0] = n, bf[1] = n; break; /* table (as many rows as tokens), y */
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
  case CALIB_MEM_LOSS: return rt_cross_entropy(t[0], m->ids, f[0], t[1], m->rows, m->cols, NULL, e);
  case CALIB_MEM_EMBEDDING: return rt_embedding_fwd(t[0], m->ids, t[1], m->rows, m->cols, 0, m->rows, NULL, e);
  default: return ts_fail_sys(e, "calibrate: unknown memory-bound kernel %d", (int)m->kind);
  }
}

static void mem_free(mem_ctx *m) {
  for (int s = 0; s < MAX_SETS; s++) {
    for (int i = 0; i < 4; i++) cudaFree(m->t[s][i]);
    for (int i = 0; i < 2; i++) cudaFree(m->f[s][i]);
  }
  cudaFree(m->ids), cudaFree(m->gamma), cudaFree(m->beta), cudaFree(m->dgamma), cudaFree(m->dbeta);
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
  RT_CHECK_CUDA(e, cudaMalloc((void **)&m->ids, (size_t)m->rows * 4));
  return rt_fill_labels(m->ids, m->rows, m->kind == CALIB_MEM_LOSS ? m->cols : (int)m->rows, 33, NULL, e);
}

static const char *generic_table(calib_mem_kind k, mem_dir d) {
  switch (k) {
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
  return k == CALIB_MEM_LAYERNORM || k == CALIB_MEM_RMSNORM || k == CALIB_MEM_GELU || k == CALIB_MEM_SWIGLU;
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
    m.kind = sh->mem[i].kind, m.rows = sh->mem[i].rows, m.cols = sh->mem[i].cols;
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
      if (calib_add_kernel(c, name, false, bytes, 0, us) ||
          calib_add_kernel(c, generic_table(m.kind, m.dir), false, bytes, 0, us)) {
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
