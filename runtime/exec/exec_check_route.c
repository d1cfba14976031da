/* exec_check_route.c — `tacorun execute --check` / `--check-moe`: DeepSeek-V3's
 * routing kernels (kernels/moe_route_group.h) against their plain-C references
 * on fresh random inputs each run, outputs poisoned first: the sigmoid (1e-6
 * relative: CUDA's and glibc's expf differ by an ulp or two), the
 * group-limited biased top-k (bits equal, on the kernel's own scores), its
 * backward (bits equal) and the bias update (bits equal); at DeepSeek-V3's
 * shape (256 experts in 8 groups, 4 kept, top 8, scaling 2.5) and without
 * groups, bias or scaling (64 experts, top 6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_check.h"
#include "gpu_check.h"
#include "moe_route_group.h"

typedef struct {
  int t, E, k, rows;
  moe_group_route g;
  int biased;
} route_case;

typedef struct { /* host and device copies of every input and output */
  float *x, *s, *sg, *bias, *w, *wg, *sel, *selg, *dw, *b0, *bu, *bug;
  int32_t *idx, *idxg, *load;
  uint16_t *dl, *dlg;
  float *d_x, *d_s, *d_bias, *d_w, *d_sel, *d_dw, *d_bu;
  int32_t *d_idx, *d_load;
  uint16_t *d_dl;
} route_bufs;

static unsigned long long next(unsigned long long *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}
static float uniform(unsigned long long *x, float lo, float hi) {
  return lo + (hi - lo) * (float)(next(x) >> 40) / (float)(1ull << 24);
}

static void bufs_free(route_bufs *b) {
  void *h[] = {b->x, b->s, b->sg, b->bias, b->w, b->wg, b->sel, b->selg, b->dw, b->b0, b->bu, b->bug, b->idx, b->idxg,
               b->load, b->dl, b->dlg};
  for (size_t i = 0; i < sizeof h / sizeof *h; i++) free(h[i]);
  void *d[] = {b->d_x, b->d_s, b->d_bias, b->d_w, b->d_sel, b->d_dw, b->d_bu, b->d_idx, b->d_load, b->d_dl};
  for (size_t i = 0; i < sizeof d / sizeof *d; i++) cudaFree(d[i]);
}

static int bufs_alloc(const route_case *c, route_bufs *b, ts_err *e) {
  memset(b, 0, sizeof *b);
  const size_t te = (size_t)c->t * c->E, tk = (size_t)c->t * c->k, re = (size_t)c->rows * c->E;
  b->x = malloc(te * 4), b->s = malloc(te * 4), b->sg = malloc(te * 4), b->bias = malloc((size_t)c->E * 4);
  b->w = malloc(tk * 4), b->wg = malloc(tk * 4), b->sel = malloc(tk * 4), b->selg = malloc(tk * 4);
  b->dw = malloc(tk * 4), b->b0 = malloc(re * 4), b->bu = malloc(re * 4), b->bug = malloc(re * 4);
  b->idx = malloc(tk * 4), b->idxg = malloc(tk * 4), b->load = malloc(re * 4);
  b->dl = malloc(te * 2), b->dlg = malloc(te * 2);
  if (!b->x || !b->s || !b->sg || !b->bias || !b->w || !b->wg || !b->sel || !b->selg || !b->dw || !b->b0 || !b->bu ||
      !b->bug || !b->idx || !b->idxg || !b->load || !b->dl || !b->dlg)
    return ts_fail_sys(e, "exec check: out of memory");
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_x, te * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_s, te * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_bias, (size_t)c->E * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_w, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_sel, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_dw, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_bu, re * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_idx, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_load, re * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&b->d_dl, te * 2));
  return 0;
}

/* Random inputs: logits in [-4, 4], a bias in [-0.05, 0.05], dw in [-3, 3], loads in [0, 2 t k / E], a bias to update. */
static void fill(const route_case *c, route_bufs *b, unsigned long long seed) {
  unsigned long long x = seed;
  for (size_t i = 0; i < (size_t)c->t * c->E; i++) b->x[i] = uniform(&x, -4.0f, 4.0f);
  for (int i = 0; i < c->E; i++) b->bias[i] = uniform(&x, -0.05f, 0.05f);
  for (size_t i = 0; i < (size_t)c->t * c->k; i++) b->dw[i] = uniform(&x, -3.0f, 3.0f);
  const long long top = 2LL * c->t * c->k / c->E + 1;
  for (size_t i = 0; i < (size_t)c->rows * c->E; i++)
    b->load[i] = (int32_t)(next(&x) % (unsigned long long)top), b->b0[i] = uniform(&x, -0.01f, 0.01f);
  for (int i = 0; i < c->E && c->rows > 1; i++) b->load[(size_t)c->E + i] = 7; /* row 1: every load the mean */
}

/* The sigmoid's largest relative difference from the reference. */
static double sigmoid_diff(const route_case *c, const route_bufs *b) {
  double worst = 0;
  for (size_t i = 0; i < (size_t)c->t * c->E; i++) {
    double d = fabs((double)b->sg[i] - b->s[i]) / fabs((double)b->s[i]);
    worst = d > worst || d != d ? d : worst;
  }
  return worst;
}

#define UP(dst, src, bytes) CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st))
#define DOWN(dst, src, bytes) CUDA_CHECK(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st))
#define POISON(p, bytes) CUDA_CHECK(e, cudaMemsetAsync(p, 0xff, bytes, st))
#define LAUNCH(call) CUDA_CHECK(e, (cudaError_t)(call))

/* One case; *bad counts the kernels that differ. */
static int check_case(const route_case *c, route_bufs *b, cudaStream_t st, FILE *log, int *bad, ts_err *e) {
  const size_t te = (size_t)c->t * c->E, tk = (size_t)c->t * c->k, re = (size_t)c->rows * c->E;
  const float *bias = c->biased ? b->d_bias : NULL;
  UP(b->d_x, b->x, te * 4);
  UP(b->d_bias, b->bias, (size_t)c->E * 4);
  UP(b->d_dw, b->dw, tk * 4);
  UP(b->d_load, b->load, re * 4);
  UP(b->d_bu, b->b0, re * 4);
  POISON(b->d_s, te * 4);
  POISON(b->d_idx, tk * 4);
  POISON(b->d_w, tk * 4);
  POISON(b->d_sel, tk * 4);
  POISON(b->d_dl, te * 2);
  LAUNCH(moe_sigmoid(b->d_x, (long long)te, b->d_s, st));
  LAUNCH(moe_topk_group(b->d_s, bias, c->t, c->E, c->k, &c->g, b->d_idx, b->d_w, b->d_sel, st));
  LAUNCH(moe_topk_group_bwd(b->d_idx, b->d_sel, b->d_dw, c->t, c->E, c->k, c->g.scale, b->d_dl, st));
  LAUNCH(moe_bias_update(b->d_load, b->d_bu, c->rows, c->E, 1e-3f, st));
  DOWN(b->sg, b->d_s, te * 4);
  DOWN(b->idxg, b->d_idx, tk * 4);
  DOWN(b->wg, b->d_w, tk * 4);
  DOWN(b->selg, b->d_sel, tk * 4);
  DOWN(b->dlg, b->d_dl, te * 2);
  DOWN(b->bug, b->d_bu, re * 4);
  CUDA_CHECK(e, cudaStreamSynchronize(st));
  moe_sigmoid_ref(b->x, (long long)te, b->s);
  const double sd = sigmoid_diff(c, b);
  /* the references on the kernels' own inputs: the top-k on the GPU's scores, its backward on the GPU's choice */
  moe_topk_group_ref(b->sg, c->biased ? b->bias : NULL, c->t, c->E, c->k, &c->g, b->idx, b->w, b->sel);
  const int topk_ok = !memcmp(b->idx, b->idxg, tk * 4) && !memcmp(b->w, b->wg, tk * 4) && !memcmp(b->sel, b->selg, tk * 4);
  moe_topk_group_bwd_ref(b->idxg, b->selg, b->dw, c->t, c->E, c->k, c->g.scale, b->dl);
  const int bwd_ok = !memcmp(b->dl, b->dlg, te * 2);
  memcpy(b->bu, b->b0, re * 4);
  moe_bias_update_ref(b->load, b->bu, c->rows, c->E, 1e-3f);
  const int bias_ok = !memcmp(b->bu, b->bug, re * 4);
  int moved = 0;
  for (size_t i = 0; i < re; i++) moved += b->bu[i] != b->b0[i];
  const int sig_ok = sd <= 1e-6;
  *bad += !sig_ok + !topk_ok + !bwd_ok + !bias_ok;
  fprintf(log, "  DeepSeek-V3 routing, %d tokens x %d experts, top %d, %d groups (%d kept), scaling %g, %s:\n", c->t,
          c->E, c->k, c->g.groups, c->g.group_topk, c->g.scale, c->biased ? "expert bias" : "no bias");
  fprintf(log, "    moe_sigmoid vs its C reference: worst relative difference %.2e (tolerance 1e-06)%s\n", sd,
          sig_ok ? "" : "  FAILED");
  fprintf(log, "    moe_topk_group (choice, weights, scores): %s\n", topk_ok ? "bits equal" : "DIFFERENT  FAILED");
  fprintf(log, "    moe_topk_group_bwd (to the router logits): %s\n", bwd_ok ? "bits equal" : "DIFFERENT  FAILED");
  fprintf(log, "    moe_bias_update (%d rows, %d of %zu biases moved): %s\n", c->rows, moved, re,
          bias_ok ? "bits equal" : "DIFFERENT  FAILED");
  return 0;
}

int exec_check_route_group(cudaStream_t st, FILE *log, int *failures, ts_err *e) {
  static const route_case cases[] = {
      /* DeepSeek-V3 (config.json: n_routed_experts 256, n_group 8, topk_group 4, num_experts_per_tok 8,
       * routed_scaling_factor 2.5) */
      {.t = 2048, .E = 256, .k = 8, .rows = 3, .g = {.groups = 8, .group_topk = 4, .scale = 2.5f}, .biased = 1},
      {.t = 1000, .E = 64, .k = 6, .rows = 2, .g = {.groups = 0, .group_topk = 0, .scale = 1.0f}, .biased = 0},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    route_bufs b;
    int rc = bufs_alloc(&cases[i], &b, e);
    if (!rc) {
      fill(&cases[i], &b, 0x9e3779b97f4a7c15ull ^ (unsigned long long)time(NULL) ^ (i << 20)); /* fresh each run */
      rc = check_case(&cases[i], &b, st, log, &bad, e);
    }
    bufs_free(&b);
    if (rc) return -1;
  }
  *failures += bad;
  return 0;
}
