/* calibrate_moe_route.c — the routing kernels of the MoE phase of `tacorun
 * calibrate` (kernels/moe_route.h): checked against their plain-C reference,
 * then timed, keyed by the bytes the model's ops count (calibrate_moe.c says
 * which tables). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "gpu_check.h"
#include "moe_route.h"
#include "rt_ops.h"


typedef struct {
  int t, E, k, h, which;
  float *logits, *w, *dw;
  int32_t *idx, *pos, *count, *scratch;
  uint16_t *x, *perm, *out;
} route_ctx;

static int route_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  route_ctx *r = p;
  int rc = 0;
  switch (r->which) {
  case 0: rc = moe_topk(r->logits, r->t, r->E, r->k, r->idx, r->w, NULL); break;
  case 1:
    rc = moe_map(r->idx, r->t, r->E, r->k, r->pos, r->count, r->scratch, NULL);
    if (!rc) rc = moe_permute(r->x, r->pos, r->t, r->k, r->h, r->perm, NULL);
    break;
  case 2: rc = moe_combine(r->perm, r->pos, NULL, r->t, r->k, r->h, r->out, NULL); break;
  case 3: rc = moe_combine(r->perm, r->pos, r->w, r->t, r->k, r->h, r->out, NULL); break;
  default: rc = moe_combine_bwd(r->out, r->perm, r->pos, r->w, r->t, r->k, r->h, r->x, r->dw, NULL); break;
  }
  if (rc) return ts_fail_sys(e, "moe routing kernel %d: %s", r->which, cudaGetErrorString((cudaError_t)rc));
  return 0;
}

static void route_free(route_ctx *r) {
  cudaFree(r->logits), cudaFree(r->w), cudaFree(r->dw), cudaFree(r->idx), cudaFree(r->pos);
  cudaFree(r->count), cudaFree(r->scratch), cudaFree(r->x), cudaFree(r->perm), cudaFree(r->out);
  memset(r, 0, sizeof *r);
}

static int route_alloc(route_ctx *r, int t, int E, int k, int h, ts_err *e) {
  memset(r, 0, sizeof *r);
  r->t = t, r->E = E, r->k = k, r->h = h;
  size_t tk = (size_t)t * k;
  CUDA_CHECK(e, cudaMalloc((void **)&r->logits, (size_t)t * E * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->w, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->dw, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->idx, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->pos, tk * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->count, (size_t)E * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->scratch, (size_t)(E + 1) * 4));
  CUDA_CHECK(e, cudaMalloc((void **)&r->x, tk * h * 2)); /* t x h forward; t k x h as the backward's dy */
  CUDA_CHECK(e, cudaMalloc((void **)&r->perm, tk * h * 2));
  CUDA_CHECK(e, cudaMalloc((void **)&r->out, (size_t)t * h * 2));
  return 0;
}

/* Random logits on the host (uniform in [-4, 4)), copied up; returns the host copy (caller frees). */
static float *random_logits(route_ctx *r, uint64_t seed, ts_err *e) {
  size_t n = (size_t)r->t * r->E;
  float *l = malloc(n * sizeof *l);
  if (!l) return ts_fail_sys(e, "out of memory"), NULL;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    l[i] = (float)((s >> 11) * (1.0 / 9007199254740992.0)) * 8.0f - 4.0f;
  }
  if (cudaMemcpy(r->logits, l, n * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    free(l);
    return ts_fail_sys(e, "cudaMemcpy logits"), NULL;
  }
  return l;
}

#define DOWN(dst, src, bytes) CUDA_CHECK_GOTO(e, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), fail)

/* Every kernel against its reference at (t, E, k, h); outputs poisoned first. */
int calib_moe_route_check(int t, int E, int k, int h, unsigned long long seed, ts_err *e) {
  route_ctx r;
  int rc = -1;
  size_t tk = (size_t)t * k;
  float *l = NULL, *w = malloc(tk * 4), *wg = malloc(tk * 4), *dw = malloc(tk * 4), *dwg = malloc(tk * 4);
  int32_t *idx = malloc(tk * 4), *pos = malloc(tk * 4), *cnt = malloc((size_t)E * 4), *ig = malloc(tk * 4),
          *pg = malloc(tk * 4), *cg = malloc((size_t)E * 4);
  uint16_t *x = malloc((size_t)t * h * 2), *perm = malloc(tk * h * 2), *pgpu = malloc(tk * h * 2),
           *out = malloc((size_t)t * h * 2), *og = malloc((size_t)t * h * 2), *dy = malloc(tk * h * 2),
           *dyg = malloc(tk * h * 2);
  if (route_alloc(&r, t, E, k, h, e)) goto fail;
  if (!w || !wg || !dw || !dwg || !idx || !pos || !cnt || !ig || !pg || !cg || !x || !perm || !pgpu || !out || !og ||
      !dy || !dyg) {
    ts_fail_sys(e, "out of memory");
    goto fail;
  }
  if (!(l = random_logits(&r, seed, e))) goto fail;
  if (rt_fill_random_bf16(r.x, (long long)t * h, seed + 1, 1.0f, NULL, e) ||
      rt_fill_random_bf16(r.out, (long long)t * h, seed + 2, 1.0f, NULL, e))
    goto fail;
  CUDA_CHECK_GOTO(e, cudaMemset(r.idx, 0xff, tk * 4), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(r.w, 0xff, tk * 4), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(r.pos, 0xff, tk * 4), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(r.perm, 0xff, tk * h * 2), fail);
  r.which = 0;
  if (route_launch(&r, 0, e)) goto fail;
  r.which = 1;
  if (route_launch(&r, 0, e)) goto fail;
  DOWN(ig, r.idx, tk * 4);
  DOWN(wg, r.w, tk * 4);
  DOWN(pg, r.pos, tk * 4);
  DOWN(cg, r.count, (size_t)E * 4);
  DOWN(pgpu, r.perm, tk * h * 2);
  DOWN(x, r.x, (size_t)t * h * 2);
  moe_topk_ref(l, t, E, k, idx, w);
  for (size_t i = 0; i < tk; i++)
    if (idx[i] != ig[i] || !(fabsf(w[i] - wg[i]) <= 1e-6f * fabsf(w[i]))) {
      ts_fail(e, NULL, "moe", "topk t=%d E=%d k=%d: copy %zu: expert %d w %.9g, reference %d %.9g", t, E, k, i, ig[i],
              wg[i], idx[i], w[i]);
      goto fail;
    }
  if (moe_map_ref(idx, t, E, k, pos, cnt) || memcmp(pos, pg, tk * 4) || memcmp(cnt, cg, (size_t)E * 4)) {
    ts_fail(e, NULL, "moe", "map t=%d E=%d k=%d: rows differ from the reference", t, E, k);
    goto fail;
  }
  moe_permute_ref(x, pos, t, k, h, perm);
  if (memcmp(perm, pgpu, tk * h * 2)) {
    ts_fail(e, NULL, "moe", "permute t=%d h=%d k=%d: bits differ from the reference", t, h, k);
    goto fail;
  }
  for (int weighted = 0; weighted < 2; weighted++) {
    CUDA_CHECK_GOTO(e, cudaMemset(r.out, 0xff, (size_t)t * h * 2), fail);
    r.which = 2 + weighted;
    if (route_launch(&r, 0, e)) goto fail;
    DOWN(og, r.out, (size_t)t * h * 2);
    moe_combine_ref(perm, pos, weighted ? wg : NULL, t, k, h, out); /* the kernel's inputs: its own weights */
    if (memcmp(og, out, (size_t)t * h * 2)) {
      ts_fail(e, NULL, "moe", "combine (%s) t=%d h=%d k=%d: bits differ from the reference",
              weighted ? "weighted" : "sums", t, h, k);
      goto fail;
    }
  }
  /* backward of the combine: dout = the last combine's output (r.out), dy into r.x (t k rows) */
  CUDA_CHECK_GOTO(e, cudaMemset(r.x, 0xff, tk * h * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(r.dw, 0xff, tk * 4), fail);
  r.which = 4;
  if (route_launch(&r, 0, e)) goto fail;
  DOWN(dyg, r.x, tk * h * 2);
  DOWN(dwg, r.dw, tk * 4);
  moe_combine_bwd_ref(og, perm, pos, wg, t, k, h, dy, dw);
  if (memcmp(dy, dyg, tk * h * 2)) {
    ts_fail(e, NULL, "moe", "combine backward t=%d h=%d k=%d: dy bits differ from the reference", t, h, k);
    goto fail;
  }
  for (size_t i = 0; i < tk; i++) {
    double mag = 0; /* |dout| . |y| of the row: the scale of the rounding of a reordered sum */
    for (int c = 0; c < h; c++) {
      uint32_t a = (uint32_t)og[(i / k) * h + c] << 16, b = (uint32_t)perm[(size_t)pos[i] * h + c] << 16;
      float fa, fb;
      memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
      mag += fabs((double)fa * fb);
    }
    if (!(fabs((double)dw[i] - dwg[i]) <= 1e-3 * mag + 1e-30)) {
      ts_fail(e, NULL, "moe", "combine backward t=%d h=%d k=%d: dw[%zu] %.9g, reference %.9g (scale %.3g)", t, h, k,
              i, dwg[i], dw[i], mag);
      goto fail;
    }
  }
  rc = 0;
fail:
  route_free(&r);
  free(l), free(w), free(wg), free(dw), free(dwg), free(idx), free(pos), free(cnt), free(ig), free(pg), free(cg);
  free(x), free(perm), free(pgpu), free(out), free(og), free(dy), free(dyg);
  return rc;
}

int calib_moe_route_time(const calib_config *cfg, int t, int E, int k, int h, schema_calibration *c, FILE *tsv,
                         ts_err *e) {
  route_ctx r;
  if (route_alloc(&r, t, E, k, h, e)) return route_free(&r), -1;
  float *l = random_logits(&r, 77 + (uint64_t)t, e);
  int rc = l ? 0 : -1;
  free(l);
  if (!rc) rc = rt_fill_random_bf16(r.x, (long long)t * h, 5, 1.0f, NULL, e);
  if (!rc) rc = rt_fill_random_bf16(r.out, (long long)t * h, 6, 1.0f, NULL, e);
  static const char *const names[] = {"moe_router_topk_fwd", "moe_permute_fwd", "moe_permute_bwd",
                                      "moe_unpermute_fwd", "moe_unpermute_bwd"};
  const double rows = 2.0 * t * h * (1.0 + k);
  const double x[] = {4.0 * t * E, rows, rows, rows, 2.0 * rows};
  void *streams[1] = {NULL};
  for (int w = 0; w < 5 && !rc; w++) {
    r.which = w;
    double us;
    calib_budget b = cfg->budget;
    rc = calib_time_us(route_launch, &r, streams, cfg->devices, 1, &b, &us, e);
    if (!rc) rc = calib_add_kernel(c, names[w], false, x[w], k, us);
    if (!rc && tsv)
      fprintf(tsv, "%s\t%d\t%d\t%d\t%d\t%.0f\t%.3f\t%.1f\n", names[w], t, E, k, h, x[w], us, x[w] / us * 1e-3);
  }
  route_free(&r);
  return rc;
}

