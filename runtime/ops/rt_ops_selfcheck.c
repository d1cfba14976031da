/* rt_ops_selfcheck.c — compares every rt_ops kernel with its plain-C reference.
 *
 * Inputs are random BF16 values; the reference runs on exactly those values
 * (converted to FP32). Outputs are poisoned with NaN first, so an element the
 * kernel forgot to write fails the check. Tolerance: BF16 output rounding
 * (2^-8 relative) plus FP32 reduction order and fast exp:
 *     |gpu - ref| <= 2^-7 * |ref| + 1e-3 * max|ref|. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ops.h"
#include "rt_ops_check.h"
#include "rt_ops_layer.h"
#include "rt_mla.h"
#include "rt_ops_ref.h"

typedef struct {
  long long n;
  float *host;   /* FP32 copy of the BF16 values (for the reference) */
  uint16_t *raw; /* BF16 bits */
  void *dev;
} tensor;

static uint64_t rng_state = 0x1234abcdULL;
static float rng_uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return (float)((rng_state * 0x2545F4914F6CDD1DULL) >> 40) / 8388608.f - 1.f;
}

static void tensor_free(tensor *t) {
  free(t->host);
  free(t->raw);
  if (t->dev) cudaFree(t->dev);
  memset(t, 0, sizeof *t);
}

/* scale 0: output tensor, poisoned with NaN on the device. */
static int tensor_make(tensor *t, long long n, float scale, float offset, ts_err *e) {
  memset(t, 0, sizeof *t);
  t->n = n;
  t->host = malloc((size_t)n * sizeof *t->host);
  t->raw = malloc((size_t)n * sizeof *t->raw);
  if (!t->host || !t->raw) return ts_fail_sys(e, "selfcheck: out of memory");
  for (long long i = 0; i < n; i++) {
    t->raw[i] = scale == 0.f ? 0xffffu : rt_ref_bf16_from_float(offset + scale * rng_uniform());
    t->host[i] = rt_ref_bf16_to_float(t->raw[i]);
  }
  RT_CHECK_CUDA(e, cudaMalloc(&t->dev, (size_t)n * 2));
  RT_CHECK_CUDA(e, cudaMemcpy(t->dev, t->raw, (size_t)n * 2, cudaMemcpyHostToDevice));
  return 0;
}

static int tensor_fetch(tensor *t, ts_err *e) {
  RT_CHECK_CUDA(e, cudaDeviceSynchronize());
  RT_CHECK_CUDA(e, cudaMemcpy(t->raw, t->dev, (size_t)t->n * 2, cudaMemcpyDeviceToHost));
  for (long long i = 0; i < t->n; i++) t->host[i] = rt_ref_bf16_to_float(t->raw[i]);
  return 0;
}

static int compare(const char *op, const float *gpu, const float *ref, long long n, FILE *log, ts_err *e) {
  double mx = 0, worst = 0;
  long long worst_i = 0;
  for (long long i = 0; i < n; i++) mx = fmax(mx, fabs(ref[i]));
  for (long long i = 0; i < n; i++) {
    if (!isfinite(gpu[i])) return ts_fail_sys(e, "selfcheck: %s: element %lld not written or not finite", op, i);
    double excess = fabs(gpu[i] - ref[i]) - (fabs(ref[i]) / 128.0 + 1e-3 * mx);
    if (excess > worst) worst = excess, worst_i = i;
  }
  if (mx == 0) return ts_fail_sys(e, "selfcheck: %s: reference output is all zero (bad test input)", op);
  if (worst > 0)
    return ts_fail_sys(e, "selfcheck: %s: element %lld is %g, reference %g (beyond tolerance)", op, worst_i,
                       gpu[worst_i], ref[worst_i]);
  if (log) fprintf((FILE *)log, "  selfcheck %-22s ok (%lld elements, max |ref| %.3g)\n", op, n, mx);
  return 0;
}

static int check_norms(int rows, int cols, FILE *log, ts_err *e) {
  tensor x, g, b, y, dy, dx;
  int rc = -1;
  float *mean = NULL, *rstd = NULL, *hm = NULL, *hr = NULL, *ref = malloc((size_t)rows * cols * sizeof *ref);
  float *dmean = NULL, *drstd = NULL;
  char name[64];
  if (tensor_make(&x, (long long)rows * cols, 2.f, 0.5f, e) || tensor_make(&g, cols, 1.f, 1.f, e) ||
      tensor_make(&b, cols, 0.5f, 0.f, e) || tensor_make(&y, (long long)rows * cols, 0.f, 0.f, e) ||
      tensor_make(&dy, (long long)rows * cols, 1.f, 0.f, e) || tensor_make(&dx, (long long)rows * cols, 0.f, 0.f, e))
    goto out;
  hm = malloc(rows * sizeof *hm), hr = malloc(rows * sizeof *hr);
  if (!ref || !hm || !hr || cudaMalloc((void **)&dmean, rows * 4) || cudaMalloc((void **)&drstd, rows * 4)) {
    ts_fail_sys(e, "selfcheck: out of memory");
    goto out;
  }
  mean = dmean, rstd = drstd;
  for (int rms = 0; rms <= 1; rms++) {
    if (cudaMemset(dmean, 0xff, rows * 4) || cudaMemset(drstd, 0xff, rows * 4)) { /* NaN: poisoned */
      ts_fail_sys(e, "selfcheck: norm statistics poison");
      goto out;
    }
    if (rms ? rt_rmsnorm_fwd(x.dev, g.dev, y.dev, rstd, rows, cols, 1e-5f, NULL, e)
            : rt_layernorm_fwd(x.dev, g.dev, b.dev, y.dev, mean, rstd, rows, cols, 1e-5f, NULL, e))
      goto out;
    if (tensor_fetch(&y, e)) goto out;
    if (rms) rt_ref_rmsnorm_fwd(x.host, g.host, ref, hr, rows, cols, 1e-5f);
    else rt_ref_layernorm_fwd(x.host, g.host, b.host, ref, hm, hr, rows, cols, 1e-5f);
    snprintf(name, sizeof name, "%s_fwd[%dx%d]", rms ? "rmsnorm" : "layernorm", rows, cols);
    if (compare(name, y.host, ref, y.n, log, e)) goto out;
    /* the statistics the forward keeps for the backward */
    for (int k = rms; k <= 1; k++) {
      if (cudaMemcpy(ref, k ? drstd : dmean, rows * 4, cudaMemcpyDeviceToHost)) {
        ts_fail_sys(e, "selfcheck: norm statistics copy");
        goto out;
      }
      snprintf(name, sizeof name, "%s_%s[%dx%d]", rms ? "rmsnorm" : "layernorm", k ? "rstd" : "mean", rows, cols);
      if (compare(name, ref, k ? hr : hm, rows, log, e)) goto out;
    }
    /* backward from the GPU's own statistics, which the reference recomputed (hm, hr) */
    if (rms ? rt_rmsnorm_bwd_dx(dy.dev, x.dev, g.dev, rstd, dx.dev, rows, cols, NULL, e)
            : rt_layernorm_bwd_dx(dy.dev, x.dev, g.dev, mean, rstd, dx.dev, rows, cols, NULL, e))
      goto out;
    if (tensor_fetch(&dx, e)) goto out;
    if (rms) rt_ref_rmsnorm_bwd_dx(dy.host, x.host, g.host, hr, ref, rows, cols);
    else rt_ref_layernorm_bwd_dx(dy.host, x.host, g.host, hm, hr, ref, rows, cols);
    snprintf(name, sizeof name, "%s_bwd_dx[%dx%d]", rms ? "rmsnorm" : "layernorm", rows, cols);
    if (compare(name, dx.host, ref, dx.n, log, e)) goto out;
  }
  rc = 0;
out:
  tensor_free(&x), tensor_free(&g), tensor_free(&b), tensor_free(&y), tensor_free(&dy), tensor_free(&dx);
  free(ref), free(hm), free(hr);
  if (dmean) cudaFree(dmean);
  if (drstd) cudaFree(drstd);
  return rc;
}

static int check_elementwise(int rows, int f, FILE *log, ts_err *e) {
  long long n = (long long)rows * f;
  tensor x, x2, dy, y, y2, dx2;
  int rc = -1;
  float *ref = malloc((size_t)(2 * n) * sizeof *ref);
  char name[64];
  if (!ref) return ts_fail_sys(e, "selfcheck: out of memory");
  if (tensor_make(&x, n, 3.f, 0.f, e) || tensor_make(&x2, 2 * n, 3.f, 0.f, e) || tensor_make(&dy, n, 1.f, 0.f, e) ||
      tensor_make(&y, n, 0.f, 0.f, e) || tensor_make(&y2, n, 0.f, 0.f, e) || tensor_make(&dx2, 2 * n, 0.f, 0.f, e))
    goto out;
  if (rt_gelu_fwd(x.dev, y.dev, n, NULL, e) || tensor_fetch(&y, e)) goto out;
  rt_ref_gelu_fwd(x.host, ref, n);
  snprintf(name, sizeof name, "gelu_fwd[%lld]", n);
  if (compare(name, y.host, ref, n, log, e)) goto out;
  if (rt_gelu_bwd(dy.dev, x.dev, y.dev, n, NULL, e) || tensor_fetch(&y, e)) goto out;
  rt_ref_gelu_bwd(dy.host, x.host, ref, n);
  snprintf(name, sizeof name, "gelu_bwd[%lld]", n);
  if (compare(name, y.host, ref, n, log, e)) goto out;
  if (rt_add(x.dev, dy.dev, y2.dev, n, NULL, e) || tensor_fetch(&y2, e)) goto out;
  rt_ref_add(x.host, dy.host, ref, n);
  snprintf(name, sizeof name, "add[%lld]", n);
  if (compare(name, y2.host, ref, n, log, e)) goto out;
  if (rt_swiglu_fwd(x2.dev, y.dev, rows, f, NULL, e) || tensor_fetch(&y, e)) goto out;
  rt_ref_swiglu_fwd(x2.host, ref, rows, f);
  snprintf(name, sizeof name, "swiglu_fwd[%dx%d]", rows, f);
  if (compare(name, y.host, ref, n, log, e)) goto out;
  if (rt_swiglu_bwd(dy.dev, x2.dev, dx2.dev, rows, f, NULL, e) || tensor_fetch(&dx2, e)) goto out;
  rt_ref_swiglu_bwd(dy.host, x2.host, ref, rows, f);
  snprintf(name, sizeof name, "swiglu_bwd[%dx%d]", rows, f);
  if (compare(name, dx2.host, ref, 2 * n, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&x), tensor_free(&x2), tensor_free(&dy), tensor_free(&y), tensor_free(&y2), tensor_free(&dx2);
  free(ref);
  return rc;
}

static int check_softmax(int batch, int seq, FILE *log, ts_err *e) {
  long long n = (long long)batch * seq * seq;
  tensor s, p, dp, ds;
  int rc = -1;
  float *ref = malloc((size_t)n * sizeof *ref);
  char name[64];
  if (!ref) return ts_fail_sys(e, "selfcheck: out of memory");
  if (tensor_make(&s, n, 4.f, 0.f, e) || tensor_make(&p, n, 0.f, 0.f, e) || tensor_make(&dp, n, 1.f, 0.f, e) ||
      tensor_make(&ds, n, 0.f, 0.f, e))
    goto out;
  if (rt_softmax_causal_fwd(s.dev, p.dev, batch, seq, 0.125f, NULL, e) || tensor_fetch(&p, e)) goto out;
  rt_ref_softmax_causal_fwd(s.host, ref, batch, seq, 0.125f);
  snprintf(name, sizeof name, "softmax_causal[%dx%d^2]", batch, seq);
  if (compare(name, p.host, ref, n, log, e)) goto out;
  /* backward from the GPU's P (BF16), as the executor would */
  if (rt_softmax_bwd(p.dev, dp.dev, ds.dev, (long long)batch * seq, seq, 0.125f, NULL, e) || tensor_fetch(&ds, e))
    goto out;
  rt_ref_softmax_bwd(p.host, dp.host, ref, (long long)batch * seq, seq, 0.125f);
  snprintf(name, sizeof name, "softmax_bwd[%dx%d^2]", batch, seq);
  if (compare(name, ds.host, ref, n, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&s), tensor_free(&p), tensor_free(&dp), tensor_free(&ds);
  free(ref);
  return rc;
}

static int check_cross_entropy(int rows, int vocab, FILE *log, ts_err *e) {
  long long n = (long long)rows * vocab;
  tensor lg, dl;
  int rc = -1;
  float *ref = malloc((size_t)n * sizeof *ref), *loss_ref = malloc(rows * sizeof(float));
  float *loss_gpu = malloc(rows * sizeof(float)), *dloss = NULL;
  int32_t *labels = malloc(rows * sizeof *labels), *dlabels = NULL;
  char name[64];
  memset(&lg, 0, sizeof lg), memset(&dl, 0, sizeof dl);
  if (!ref || !loss_ref || !loss_gpu || !labels) {
    ts_fail_sys(e, "selfcheck: out of memory");
    goto out;
  }
  for (int r = 0; r < rows; r++) labels[r] = (int32_t)((rng_uniform() * 0.5f + 0.5f) * (vocab - 1));
  if (tensor_make(&lg, n, 6.f, 0.f, e) || tensor_make(&dl, n, 0.f, 0.f, e)) goto out;
  if (cudaMalloc((void **)&dlabels, rows * 4) || cudaMalloc((void **)&dloss, rows * 4) ||
      cudaMemcpy(dlabels, labels, rows * 4, cudaMemcpyHostToDevice)) {
    ts_fail_sys(e, "selfcheck: cross-entropy buffers");
    goto out;
  }
  if (rt_cross_entropy(lg.dev, dlabels, dloss, dl.dev, rows, vocab, NULL, e) || tensor_fetch(&dl, e)) goto out;
  if (cudaMemcpy(loss_gpu, dloss, rows * 4, cudaMemcpyDeviceToHost)) {
    ts_fail_sys(e, "selfcheck: cross-entropy loss copy");
    goto out;
  }
  rt_ref_cross_entropy(lg.host, labels, loss_ref, ref, rows, vocab);
  snprintf(name, sizeof name, "cross_entropy_loss[%dx%d]", rows, vocab);
  if (compare(name, loss_gpu, loss_ref, rows, log, e)) goto out;
  snprintf(name, sizeof name, "cross_entropy_grad[%dx%d]", rows, vocab);
  if (compare(name, dl.host, ref, n, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&lg), tensor_free(&dl);
  free(ref), free(loss_ref), free(loss_gpu), free(labels);
  if (dlabels) cudaFree(dlabels);
  if (dloss) cudaFree(dloss);
  return rc;
}

static int check_embedding(int rows, int cols, FILE *log, ts_err *e) {
  const long long table_rows = 50, first_id = 20; /* ids 0..99: some fall outside this shard */
  tensor tab, y;
  int rc = -1;
  int32_t ids[64], *dids = NULL;
  float *ref = malloc((size_t)rows * cols * sizeof *ref);
  char name[64];
  memset(&tab, 0, sizeof tab), memset(&y, 0, sizeof y);
  if (!ref || rows > 64) {
    free(ref);
    return ts_fail_sys(e, "selfcheck: embedding setup");
  }
  for (int r = 0; r < rows; r++) ids[r] = (int32_t)((rng_uniform() * 0.5f + 0.5f) * 99.f);
  if (tensor_make(&tab, table_rows * cols, 1.f, 0.f, e) || tensor_make(&y, (long long)rows * cols, 0.f, 0.f, e))
    goto out;
  if (cudaMalloc((void **)&dids, sizeof ids) || cudaMemcpy(dids, ids, sizeof ids, cudaMemcpyHostToDevice)) {
    ts_fail_sys(e, "selfcheck: embedding ids");
    goto out;
  }
  if (rt_embedding_fwd(tab.dev, dids, y.dev, rows, cols, first_id, table_rows, NULL, e) || tensor_fetch(&y, e))
    goto out;
  rt_ref_embedding_fwd(tab.host, ids, ref, rows, cols, first_id, table_rows);
  snprintf(name, sizeof name, "embedding_fwd[%dx%d]", rows, cols);
  if (compare(name, y.host, ref, y.n, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&tab), tensor_free(&y);
  free(ref);
  if (dids) cudaFree(dids);
  return rc;
}

/* The arrays start `off` elements into their allocations (grad `grad_off`):
 * the offsets pick the update's paths (16-byte vector body with per-element
 * head and tail, or the per-element kernel when the arrays' alignments differ). */
static int check_adamw(long long n, int off, int grad_off, FILE *log, ts_err *e) {
  size_t bytes = (size_t)n * sizeof(float), room = (size_t)(n + 4) * sizeof(float);
  float *h[4], *d[4] = {NULL, NULL, NULL, NULL}, *ref16 = malloc(bytes), *gpu = malloc(bytes);
  uint16_t *w16raw = malloc((size_t)n * 2);
  void *w16 = NULL;
  char name[64];
  int rc = -1;
  for (int i = 0; i < 4; i++) h[i] = malloc(bytes);
  if (!ref16 || !gpu || !w16raw || !h[0] || !h[1] || !h[2] || !h[3]) {
    ts_fail_sys(e, "selfcheck: out of memory");
    goto out;
  }
  /* master, grad, m, v (v >= 0) */
  for (long long i = 0; i < n; i++) {
    h[0][i] = rng_uniform(), h[1][i] = 0.1f * rng_uniform(), h[2][i] = 0.01f * rng_uniform();
    h[3][i] = 1e-4f * (1.f + rng_uniform());
  }
  for (int i = 0; i < 4; i++)
    if (cudaMalloc((void **)&d[i], room) ||
        cudaMemcpy(d[i] + (i == 1 ? grad_off : off), h[i], bytes, cudaMemcpyHostToDevice)) {
      ts_fail_sys(e, "selfcheck: adamw buffers");
      goto out;
    }
  if (cudaMalloc(&w16, (size_t)(n + 4) * 2) || cudaMemset(w16, 0xff, (size_t)(n + 4) * 2)) { /* NaN: poisoned */
    ts_fail_sys(e, "selfcheck: adamw buffers");
    goto out;
  }
  rt_adamw_params p = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 3};
  if (rt_adamw_step(d[0] + off, (uint16_t *)w16 + off, d[1] + grad_off, d[2] + off, d[3] + off, n, p, NULL, e))
    goto out;
  if (cudaDeviceSynchronize() || cudaMemcpy(gpu, d[0] + off, bytes, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(w16raw, (uint16_t *)w16 + off, (size_t)n * 2, cudaMemcpyDeviceToHost)) {
    ts_fail_sys(e, "selfcheck: adamw copy");
    goto out;
  }
  rt_ref_adamw_step(h[0], ref16, h[1], h[2], h[3], n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step);
  snprintf(name, sizeof name, "adamw_master[%lld+%d,%d]", n, off, grad_off);
  if (compare(name, gpu, h[0], n, log, e)) goto out;
  for (long long i = 0; i < n; i++) gpu[i] = rt_ref_bf16_to_float(w16raw[i]);
  snprintf(name, sizeof name, "adamw_bf16[%lld+%d,%d]", n, off, grad_off);
  if (compare(name, gpu, ref16, n, log, e)) goto out;
  /* m and v as the reference left them */
  for (int k = 2; k <= 3; k++) {
    if (cudaMemcpy(gpu, d[k] + off, bytes, cudaMemcpyDeviceToHost)) {
      ts_fail_sys(e, "selfcheck: adamw copy");
      goto out;
    }
    snprintf(name, sizeof name, "adamw_%s[%lld+%d,%d]", k == 2 ? "m" : "v", n, off, grad_off);
    if (compare(name, gpu, h[k], n, log, e)) goto out;
  }
  rc = 0;
out:
  for (int i = 0; i < 4; i++) {
    free(h[i]);
    if (d[i]) cudaFree(d[i]);
  }
  if (w16) cudaFree(w16);
  free(ref16), free(gpu), free(w16raw);
  return rc;
}

/* RoPE (forward, and inverse back to the input), bias add and bias gradient
 * (FP32 sums, accumulated onto a non-zero start) on rows of ld columns of
 * which the first heads x d (RoPE) or cols (biases) are used; the rest must
 * stay as it was. theta 1e4, positions up to seq - 1. The bias add takes its 16-byte path where
 * cols and ld are multiples of 8, its element path otherwise; RoPE its 16-byte path where d / 2 and
 * ld are multiples of 8 (d 16 and 128 here), its element path otherwise (d 12). */
static int check_layer(int rows, int ld, int heads, int d, int seq, int cols, FILE *log, ts_err *e) {
  const long long n = (long long)rows * ld;
  tensor x, b;
  int rc = -1;
  float *ref = malloc((size_t)n * sizeof *ref), *f = malloc((size_t)(d / 2) * sizeof *f);
  float *db = malloc((size_t)cols * sizeof *db), *db_ref = malloc((size_t)cols * sizeof *db_ref);
  float *f_dev = NULL, *db_dev = NULL;
  char name[64];
  memset(&x, 0, sizeof x), memset(&b, 0, sizeof b);
  if (!ref || !f || !db || !db_ref) {
    free(ref), free(f), free(db), free(db_ref);
    return ts_fail_sys(e, "selfcheck: out of memory");
  }
  for (int i = 0; i < d / 2; i++) f[i] = (float)pow(1e4, -2.0 * i / d);
  for (int c = 0; c < cols; c++) db_ref[c] = 0.5f + 0.01f * c;
  if (tensor_make(&x, n, 2.f, 0.f, e) || tensor_make(&b, cols, 1.f, 0.f, e)) goto out;
  if (cudaMalloc((void **)&f_dev, (size_t)(d / 2) * sizeof *f) != cudaSuccess ||
      cudaMalloc((void **)&db_dev, (size_t)cols * sizeof *db) != cudaSuccess ||
      cudaMemcpy(f_dev, f, (size_t)(d / 2) * sizeof *f, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(db_dev, db_ref, (size_t)cols * sizeof *db, cudaMemcpyHostToDevice) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: layer ops: CUDA allocation or copy failed");
    goto out;
  }
  for (int inverse = 0; inverse < 2; inverse++) {
    memcpy(ref, x.host, (size_t)n * sizeof *ref);
    rt_ref_rope(ref, rows, ld, heads, d, seq, f, inverse);
    if (rt_rope(x.dev, rows, ld, heads, d, seq, f_dev, inverse, NULL, e) || tensor_fetch(&x, e)) goto out;
    snprintf(name, sizeof name, "rope%s[%dx%d,%dh,d%d]", inverse ? "_bwd" : "", rows, ld, heads, d);
    if (compare(name, x.host, ref, n, log, e)) goto out;
  }
  memcpy(ref, x.host, (size_t)n * sizeof *ref);
  rt_ref_bias_add(ref, b.host, rows, cols, ld);
  if (rt_bias_add(x.dev, b.dev, rows, cols, ld, NULL, e) || tensor_fetch(&x, e)) goto out;
  snprintf(name, sizeof name, "bias_add[%dx%d,ld%d]", rows, cols, ld);
  if (compare(name, x.host, ref, n, log, e)) goto out;
  rt_ref_bias_grad(x.host, db_ref, rows, cols, ld);
  if (rt_bias_grad(x.dev, db_dev, rows, cols, ld, NULL, e)) goto out;
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(db, db_dev, (size_t)cols * sizeof *db, cudaMemcpyDeviceToHost) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: bias_grad: CUDA copy failed");
    goto out;
  }
  snprintf(name, sizeof name, "bias_grad[%dx%d,ld%d]", rows, cols, ld);
  if (compare(name, db, db_ref, cols, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&x), tensor_free(&b);
  if (f_dev) cudaFree(f_dev);
  if (db_dev) cudaFree(db_dev);
  free(ref), free(f), free(db), free(db_ref);
  return rc;
}

/* The QK norm (rt_qk_norm_fwd / _bwd) on `heads` heads of d columns at the start of rows of ld
 * columns (the rest must stay as it was): the normed rows, the kept input, the 1/rms, the input
 * gradient and the weight gradient (accumulated onto a non-zero start) against rt_ops_ref.c; then
 * the forward without saved / rstd (the inference executor's) on the same input: the training
 * forward's output bits. */
static int check_qk_norm(int rows, int ld, int heads, int d, FILE *log, ts_err *e) {
  const long long n = (long long)rows * ld, ns = (long long)rows * heads * d, nr = (long long)rows * heads;
  tensor x, g, dy, sv;
  int rc = -1;
  float *ref = malloc((size_t)n * sizeof *ref), *sref = malloc((size_t)ns * sizeof *sref);
  float *rs = malloc((size_t)nr * sizeof *rs), *rs_ref = malloc((size_t)nr * sizeof *rs_ref);
  float *dg = malloc((size_t)d * sizeof *dg), *dg_ref = malloc((size_t)d * sizeof *dg_ref);
  float *rs_dev = NULL, *dg_dev = NULL;
  uint16_t *raw0 = malloc((size_t)n * sizeof *raw0), *out1 = malloc((size_t)n * sizeof *out1);
  char name[64];
  memset(&x, 0, sizeof x), memset(&g, 0, sizeof g), memset(&dy, 0, sizeof dy), memset(&sv, 0, sizeof sv);
  if (!ref || !sref || !rs || !rs_ref || !dg || !dg_ref || !raw0 || !out1) {
    ts_fail_sys(e, "selfcheck: out of memory");
    goto out;
  }
  for (int i = 0; i < d; i++) dg_ref[i] = 0.25f + 0.01f * i;
  if (tensor_make(&x, n, 2.f, -1.f, e) || tensor_make(&g, d, 0.5f, 0.75f, e) || tensor_make(&dy, n, 2.f, -1.f, e) ||
      tensor_make(&sv, ns, 0.f, 0.f, e))
    goto out;
  if (cudaMalloc((void **)&rs_dev, (size_t)nr * sizeof *rs) != cudaSuccess ||
      cudaMalloc((void **)&dg_dev, (size_t)d * sizeof *dg) != cudaSuccess ||
      cudaMemcpy(dg_dev, dg_ref, (size_t)d * sizeof *dg, cudaMemcpyHostToDevice) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: qk_norm: CUDA allocation or copy failed");
    goto out;
  }
  memcpy(ref, x.host, (size_t)n * sizeof *ref);
  memcpy(raw0, x.raw, (size_t)n * sizeof *raw0);
  rt_ref_qk_norm_fwd(ref, ld, sref, g.host, rs_ref, rows, heads, d, 1e-6f);
  if (rt_qk_norm_fwd(x.dev, ld, sv.dev, g.dev, rs_dev, rows, heads, d, 1e-6f, NULL, e) || tensor_fetch(&x, e) ||
      tensor_fetch(&sv, e))
    goto out;
  if (cudaMemcpy(rs, rs_dev, (size_t)nr * sizeof *rs, cudaMemcpyDeviceToHost) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: qk_norm: CUDA copy failed");
    goto out;
  }
  snprintf(name, sizeof name, "qk_norm[%dx%d,%dh,d%d]", rows, ld, heads, d);
  if (compare(name, x.host, ref, n, log, e)) goto out;
  snprintf(name, sizeof name, "qk_norm_saved[%dh,d%d]", heads, d);
  if (compare(name, sv.host, sref, ns, log, e)) goto out;
  snprintf(name, sizeof name, "qk_norm_rstd[%dh,d%d]", heads, d);
  if (compare(name, rs, rs_ref, nr, log, e)) goto out;
  memcpy(out1, x.raw, (size_t)n * sizeof *out1);
  if (cudaMemcpy(x.dev, raw0, (size_t)n * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: qk_norm: CUDA copy failed");
    goto out;
  }
  if (rt_qk_norm_fwd(x.dev, ld, NULL, g.dev, NULL, rows, heads, d, 1e-6f, NULL, e) || tensor_fetch(&x, e)) goto out;
  snprintf(name, sizeof name, "qk_norm_nosave[%dx%d,%dh,d%d]", rows, ld, heads, d);
  if (compare(name, x.host, ref, n, log, e)) goto out;
  if (memcmp(x.raw, out1, (size_t)n * sizeof *out1)) {
    ts_fail_sys(e, "selfcheck: %s: output bits differ from the saving forward's", name);
    goto out;
  }
  /* backward from the reference's own saved input and 1/rms (the GPU's are checked above) */
  memcpy(ref, dy.host, (size_t)n * sizeof *ref);
  rt_ref_qk_norm_bwd(ref, ld, sref, g.host, rs_ref, dg_ref, rows, heads, d);
  if (rt_qk_norm_bwd(dy.dev, ld, sv.dev, g.dev, rs_dev, dg_dev, rows, heads, d, NULL, e) || tensor_fetch(&dy, e))
    goto out;
  if (cudaMemcpy(dg, dg_dev, (size_t)d * sizeof *dg, cudaMemcpyDeviceToHost) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: qk_norm_bwd: CUDA copy failed");
    goto out;
  }
  snprintf(name, sizeof name, "qk_norm_bwd[%dx%d,%dh,d%d]", rows, ld, heads, d);
  if (compare(name, dy.host, ref, n, log, e)) goto out;
  snprintf(name, sizeof name, "qk_norm_dgamma[d%d]", d);
  if (compare(name, dg, dg_ref, d, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&x), tensor_free(&g), tensor_free(&dy), tensor_free(&sv);
  if (rs_dev) cudaFree(rs_dev);
  if (dg_dev) cudaFree(dg_dev);
  free(ref), free(sref), free(rs), free(rs_ref), free(dg), free(dg_ref), free(raw0), free(out1);
  return rc;
}

/* Multi-head latent attention's kernels (rt_mla.h) on `rows` tokens of `heads` heads (nope + rope query/key
 * columns, dv value columns) in a qkv row of ld columns, the shared key at column kl of a kv_a row of kl + rope:
 * kv scatter (qkv starts random: a column left unwritten keeps a value the reference replaced), kv gather
 * (into a NaN-poisoned buffer), RoPE forward (query parts in place, the shared key into every key head)
 * and backward (the key heads' gradients summed over the heads into the shared key's, which starts random). */
static int check_mla(int rows, int heads, int nope, int rope, int dv, int kl, int seq, FILE *log, ts_err *e) {
  const int ld = 2 * heads * (nope + rope) + heads * dv + 8, kw = kl + rope, bw = nope + dv;
  const long long n = (long long)rows * ld, nb = (long long)rows * heads * bw, nk = (long long)rows * kw;
  tensor q, b, k;
  int rc = -1;
  float *ref = malloc((size_t)n * sizeof *ref), *bref = malloc((size_t)nb * sizeof *bref);
  float *kref = malloc((size_t)nk * sizeof *kref), *f = malloc((size_t)(rope / 2) * sizeof *f), *f_dev = NULL;
  char name[80];
  memset(&q, 0, sizeof q), memset(&b, 0, sizeof b), memset(&k, 0, sizeof k);
  if (!ref || !bref || !kref || !f) {
    ts_fail_sys(e, "selfcheck: out of memory");
    goto out;
  }
  for (int i = 0; i < rope / 2; i++) f[i] = (float)pow(1e4, -2.0 * i / rope);
  if (tensor_make(&q, n, 2.f, 0.f, e) || tensor_make(&b, nb, 2.f, 0.f, e) || tensor_make(&k, nk, 2.f, 0.f, e)) goto out;
  if (cudaMalloc((void **)&f_dev, (size_t)(rope / 2) * sizeof *f) != cudaSuccess ||
      cudaMemcpy(f_dev, f, (size_t)(rope / 2) * sizeof *f, cudaMemcpyHostToDevice) != cudaSuccess) {
    ts_fail_sys(e, "selfcheck: mla: CUDA allocation or copy failed");
    goto out;
  }
  memcpy(ref, q.host, (size_t)n * sizeof *ref);
  rt_ref_mla_kv_scatter(b.host, ref, rows, ld, heads, nope, rope, dv);
  if (rt_mla_kv_scatter(b.dev, q.dev, rows, ld, heads, nope, rope, dv, NULL, e) || tensor_fetch(&q, e)) goto out;
  snprintf(name, sizeof name, "mla_kv_scatter[%dx%d,%dh,%d+%d,v%d]", rows, ld, heads, nope, rope, dv);
  if (compare(name, q.host, ref, n, log, e)) goto out;
  tensor_free(&b);
  if (tensor_make(&b, nb, 0.f, 0.f, e)) goto out; /* poisoned */
  rt_ref_mla_kv_gather(q.host, bref, rows, ld, heads, nope, rope, dv);
  if (rt_mla_kv_gather(q.dev, b.dev, rows, ld, heads, nope, rope, dv, NULL, e) || tensor_fetch(&b, e)) goto out;
  snprintf(name, sizeof name, "mla_kv_gather[%dx%d,%dh,%d+%d,v%d]", rows, ld, heads, nope, rope, dv);
  if (compare(name, b.host, bref, nb, log, e)) goto out;
  memcpy(ref, q.host, (size_t)n * sizeof *ref);
  rt_ref_mla_rope_fwd(ref, ld, k.host + kl, kw, rows, heads, nope, rope, seq, f);
  if (rt_mla_rope_fwd(q.dev, ld, (uint16_t *)k.dev + kl, kw, rows, heads, nope, rope, seq, f_dev, NULL, e) ||
      tensor_fetch(&q, e))
    goto out;
  snprintf(name, sizeof name, "mla_rope[%dx%d,%dh,%d+%d]", rows, ld, heads, nope, rope);
  if (compare(name, q.host, ref, n, log, e)) goto out;
  memcpy(ref, q.host, (size_t)n * sizeof *ref);
  memcpy(kref, k.host, (size_t)nk * sizeof *kref);
  rt_ref_mla_rope_bwd(ref, ld, kref + kl, kw, rows, heads, nope, rope, seq, f);
  if (rt_mla_rope_bwd(q.dev, ld, (uint16_t *)k.dev + kl, kw, rows, heads, nope, rope, seq, f_dev, NULL, e) ||
      tensor_fetch(&q, e) || tensor_fetch(&k, e))
    goto out;
  snprintf(name, sizeof name, "mla_rope_bwd[%dx%d,%dh,%d+%d]", rows, ld, heads, nope, rope);
  if (compare(name, q.host, ref, n, log, e)) goto out;
  snprintf(name, sizeof name, "mla_rope_bwd_key[%dx%d,%dh]", rows, kw, heads);
  if (compare(name, k.host, kref, nk, log, e)) goto out;
  rc = 0;
out:
  tensor_free(&q), tensor_free(&b), tensor_free(&k);
  if (f_dev) cudaFree(f_dev);
  free(ref), free(bref), free(kref), free(f);
  return rc;
}

int rt_ops_selfcheck(void *log_file, ts_err *e) {
  FILE *log = log_file;
  /* each op twice: a width that takes the 16-byte path and an odd one that does not (norms also
   * at 4096 and 4104 columns, the widest row the forward holds in registers and one past it;
   * AdamW with aligned arrays, with arrays one element in, and with grad out of step with the rest) */
  RT_TRY(check_norms(37, 264, log, e));
  RT_TRY(check_norms(5, 1031, log, e));
  RT_TRY(check_norms(9, 4096, log, e)); /* the forward's row-in-registers kernel at its widest */
  RT_TRY(check_norms(3, 4104, log, e)); /* just past it: the 16-byte three-pass kernel */
  RT_TRY(check_elementwise(13, 136, log, e));
  RT_TRY(check_elementwise(7, 97, log, e));
  RT_TRY(check_softmax(3, 72, log, e));
  RT_TRY(check_softmax(2, 45, log, e));
  RT_TRY(check_cross_entropy(9, 1024, log, e));
  RT_TRY(check_cross_entropy(4, 1001, log, e));
  RT_TRY(check_embedding(40, 256, log, e));
  RT_TRY(check_embedding(33, 77, log, e));
  RT_TRY(check_adamw(4099, 0, 0, log, e));
  RT_TRY(check_adamw(4099, 1, 1, log, e));
  RT_TRY(check_adamw(4099, 0, 1, log, e));
  RT_TRY(check_layer(300, 96, 5, 16, 128, 77, log, e));   /* rows past one sequence; ld wider than the heads */
  RT_TRY(check_layer(300, 96, 5, 16, 128, 80, log, e));   /* the biases' 16-byte path, ld wider than cols */
  RT_TRY(check_layer(300, 96, 5, 12, 128, 80, log, e));   /* RoPE's element path (d / 2 = 6) */
  RT_TRY(check_layer(517, 640, 5, 128, 512, 637, log, e)); /* head dim 128, 517 rows: three bias-gradient row blocks */
  RT_TRY(check_layer(517, 640, 5, 128, 512, 640, log, e)); /* the 16-byte path over every column */
  RT_TRY(check_qk_norm(300, 640, 4, 128, log, e));  /* Qwen3's head_dim: 4 query heads of a 640-wide qkv row */
  RT_TRY(check_qk_norm(77, 200, 3, 64, log, e));    /* 3 heads of 64, ld not a multiple of 8 */
  RT_TRY(check_qk_norm(2000, 256, 1, 256, log, e)); /* the widest head, many rows per block's dgamma */
  RT_TRY(check_mla(130, 4, 32, 32, 32, 32, 64, log, e));   /* the executor check's small MLA, rows past a sequence */
  RT_TRY(check_mla(37, 3, 128, 64, 128, 512, 16, log, e)); /* DeepSeek-V3's head and latent widths, 3 heads */
  RT_TRY(check_mla(9, 2, 5, 6, 7, 3, 4, log, e));          /* odd widths everywhere */
  return 0;
}
