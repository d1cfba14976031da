/* calibrate_moe.c — the mixture-of-experts tables of `tacorun calibrate`
 * (phase "moe"): grouped expert GEMMs and the routing kernels, at the shapes
 * the MoE models of the zoo produce.
 *
 * Grouped GEMMs: G experts' GEMMs of one shape, run as the executor's GEMM
 * path runs them (exec_gemm, cuBLASLt: a loop of G products on one stream,
 * each expert's operands at their own addresses, as Transformer Engine's
 * grouped linear does), for the forward (NN), input-gradient (NT) and
 * weight-gradient (TN, FP32 accumulate) products of each expert FFN GEMM,
 * G = E / ep for ep = 1, 2, 4, ... (2 <= G <= 32) and m rows per expert in
 * MOE_ROWS (every MoE model of the zoo, moe-tiny included: its one-GPU plans run
 * in the executor). Tables "gemm_grouped.*" (schema/calibration.h). Beside the loop,
 * the forward product is also timed as one cublasGemmGroupedBatchedEx call
 * and as one dense GEMM of G x m rows (what the simulator assumed before),
 * written to --moe-tsv for comparison (not to the calibration).
 *
 * Routing (kernels/moe_route.h, calibrate_moe_route.c) for tokens t in MOE_TOKENS of each model's
 * (hidden, experts, top_k), keyed by the bytes the model's op counts
 * (models/model_layer.c), group = top_k:
 *   moe_router_topk_fwd  x = 4 t E          (topk on FP32 logits)
 *   moe_permute_fwd      x = 2 t h (1 + k)  (the map: count, scan, rows; then the row copy)
 *   moe_permute_bwd      x = 2 t h (1 + k)  (the sum of each token's k copies' gradients)
 *   moe_unpermute_fwd    x = 2 t h (1 + k)  (the weighted combine)
 *   moe_unpermute_bwd    x = 4 t h (1 + k)  (scaled scatter and the weights' gradients)
 * Before timing, each kernel is checked against its plain-C reference on
 * fresh random inputs with poisoned outputs (bits equal; topk weights 1e-6
 * relative; dw 1e-3 relative to the row's |dout| . |y|); a mismatch fails the phase. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "exec_core.h"
#include "exec_gemm.h"
#include "gpu_check.h"
#include "model.h"
#include "rt_ops.h"

static const long long MOE_ROWS[] = {128, 256, 512, 1024, 2048, 4096};
static const int MOE_TOKENS[] = {512, 1024, 2048, 4096, 8192, 16384};
/* A grouped GEMM above this is not timed. 16 TFLOP covers every point of the zoo's grid (the largest,
 * Mixtral 8x22B's fc1 at 8 experts x 4,096 rows, is 13.2 TFLOP, ~20 ms); until 2026-12-04 the cap was
 * 2 TFLOP and 8x22B's groups of 1,024 rows and more were extrapolated (runtime/RESULTS-exec.md). */
#define MOE_MAX_FLOPS 16e12
#define MOE_MAX_WEIGHTS ((size_t)8 << 30) /* bytes of one group's weights */
#define TRY_CUDA(call) CUDA_CHECK_RC(e, rc, call, done) /* common/gpu_check.h */

/* ---- grouped GEMMs ---- */

typedef struct {
  exec_gemm *h;
  cublasHandle_t blas;
  int G;
  exec_gemm_shape one;                       /* each expert's product */
  char *A, *B, *C;                           /* G operands each, back to back */
  size_t a_bytes, b_bytes, c_bytes;
  float beta;
  /* cublasGemmGroupedBatchedEx (forward only): column-major view C^T = B^T A^T */
  const void **pa, **pb; /* host copies of the pointer arrays */
  void **pc;
  void **dpa, **dpb, **dpc; /* the pointer arrays in device memory, as cuBLAS reads them */
  int mode; /* 0 loop, 1 grouped batched, 2 one dense GEMM */
  exec_gemm_shape dense;
} ggemm_ctx;

static int ggemm_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  ggemm_ctx *g = p;
  if (g->mode == 2) return exec_gemm_run(g->h, &g->dense, 1.0f, g->A, g->B, g->beta, g->C, NULL, e);
  if (g->mode == 1) {
    cublasOperation_t op = CUBLAS_OP_N;
    int m = (int)g->one.n, n = (int)g->one.m, k = (int)g->one.k, lda = m, ldb = k, ldc = m, size = g->G;
    float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(e, cublasGemmGroupedBatchedEx(g->blas, &op, &op, &m, &n, &k, &alpha, (const void *const *)g->dpb,
                                               CUDA_R_16BF, &lda, (const void *const *)g->dpa, CUDA_R_16BF, &ldb,
                                               &beta, g->dpc, CUDA_R_16BF, &ldc, 1, &size, CUBLAS_COMPUTE_32F));
    return 0;
  }
  for (int x = 0; x < g->G; x++)
    if (exec_gemm_run(g->h, &g->one, 1.0f, g->A + x * g->a_bytes, g->B + x * g->b_bytes, g->beta,
                      g->C + x * g->c_bytes, NULL, e))
      return -1;
  return 0;
}

typedef struct {
  long long n_f, k_f; /* the expert GEMM: [rows x k_f] . [k_f x n_f] */
} expert_gemm;

/* One (G, rows, expert GEMM, role): the table point, and the comparison row
 * for the forward. 1: timed, 0: above MOE_MAX_FLOPS (skipped), -1: error. */
static int time_group(ggemm_ctx *g, const calib_config *cfg, int G, long long m, expert_gemm eg, int role,
                      schema_calibration *c, FILE *tsv, ts_err *e) {
  long long M, N, K; /* the product as run */
  exec_gemm_layout lay;
  if (role == 0) lay = EXEC_GEMM_NN, M = m, N = eg.n_f, K = eg.k_f;
  else if (role == 1) lay = EXEC_GEMM_NT, M = m, N = eg.k_f, K = eg.n_f;
  else lay = EXEC_GEMM_TN_ACC, M = eg.k_f, N = eg.n_f, K = m;
  double flops = 2.0 * G * (double)M * N * K;
  if (flops > MOE_MAX_FLOPS) return 0; /* not timed */
  g->G = G;
  g->one = exec_gemm_packed(lay, M, N, K);
  g->beta = exec_gemm_packed_beta(lay);
  g->a_bytes = (size_t)(M * K) * 2, g->b_bytes = (size_t)(K * N) * 2;
  g->c_bytes = (size_t)(M * N) * (lay == EXEC_GEMM_TN_ACC ? 4 : 2);
  g->mode = 0;
  calib_budget b = cfg->budget;
  void *streams[1] = {NULL};
  double us;
  if (calib_time_us(ggemm_launch, g, streams, cfg->devices, 1, &b, &us, e)) return -1;
  char name[48];
  if (schema_grouped_gemm_name(name, sizeof name, G, role == 2, role == 2 ? M : N, role == 2 ? N : K))
    return ts_fail(e, NULL, "moe", "table name of G=%d %lldx%lldx%lld does not fit", G, M, N, K);
  /* calib_add_kernel averages a point already there: a square expert GEMM (moe-tiny's fc1, 256 -> 2 x 128)
   * gives its forward and input-gradient products one table and one FLOP count, which the simulator cannot
   * tell apart (schema/calibration.h) and the loader refuses twice */
  if (calib_add_kernel(c, name, true, flops, 0, us)) return ts_fail_sys(e, "out of memory");
  double grouped = 0, dense = 0;
  if (role == 0) {
    for (int x = 0; x < G; x++) {
      g->pa[x] = g->A + x * g->a_bytes, g->pb[x] = g->B + x * g->b_bytes, g->pc[x] = g->C + x * g->c_bytes;
    }
    CUDA_CHECK(e, cudaMemcpy(g->dpa, g->pa, (size_t)G * sizeof *g->pa, cudaMemcpyHostToDevice));
    CUDA_CHECK(e, cudaMemcpy(g->dpb, g->pb, (size_t)G * sizeof *g->pb, cudaMemcpyHostToDevice));
    CUDA_CHECK(e, cudaMemcpy(g->dpc, g->pc, (size_t)G * sizeof *g->pc, cudaMemcpyHostToDevice));
    g->mode = 1;
    ts_err ge = {0}; /* optional: a cuBLAS without this path for BF16 leaves the column empty (NaN) */
    if (calib_time_us(ggemm_launch, g, streams, cfg->devices, 1, &b, &grouped, &ge)) {
      static int told;
      if (!told++) fprintf(stderr, "calibrate: moe: cublasGemmGroupedBatchedEx not timed: %s\n", ge.msg);
      grouped = NAN;
      cudaGetLastError();
    }
    g->dense = exec_gemm_packed(EXEC_GEMM_NN, (long long)G * M, N, K); /* one weight: the old assumption */
    g->mode = 2;
    if (calib_time_us(ggemm_launch, g, streams, cfg->devices, 1, &b, &dense, e)) return -1;
  }
  if (tsv)
    fprintf(tsv, "%s\t%d\t%lld\t%lld\t%lld\t%d\t%.3f\t%.3f\t%.3f\t%.1f\n", name, G, M, N, K, role, us, grouped, dense,
            flops / us * 1e-6);
  return 1;
}

/* ---- the phase ---- */

static int moe_models(const char *models, model_config *out, int cap, ts_err *e) {
  char *names[256];
  int n = 0, found = 0;
  if (!strcmp(models, "all")) {
    DIR *d = opendir(model_zoo_dir());
    if (!d) return ts_fail(e, model_zoo_dir(), NULL, "cannot open the model zoo folder");
    struct dirent *ent;
    while ((ent = readdir(d)) && n < 256) {
      size_t len = strlen(ent->d_name);
      if (len > 5 && !strcmp(ent->d_name + len - 5, ".json") && (names[n] = strdup(ent->d_name))) names[n++][len - 5] = 0;
    }
    closedir(d);
  } else {
    char *copy = strdup(models), *save = NULL;
    if (!copy) return ts_fail_sys(e, "out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok && n < 256; tok = strtok_r(NULL, ",", &save))
      if (*tok && (names[n] = strdup(tok))) n++;
    free(copy);
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    model_config m;
    if (!rc && model_load(names[i], NULL, &m, e)) rc = -1;
    if (!rc && model_is_moe(&m) && found < cap) out[found++] = m;
    free(names[i]);
  }
  if (rc) return -1;
  /* same order every run */
  for (int i = 1; i < found; i++)
    for (int j = i; j > 0 && strcmp(out[j - 1].name, out[j].name) > 0; j--) {
      model_config s = out[j];
      out[j] = out[j - 1], out[j - 1] = s;
    }
  return found;
}

int calib_run_moe(const calib_config *cfg, const char *models, const char *tsv_path, schema_calibration *c,
                  ts_err *e) {
  model_config zoo[16];
  int nm = moe_models(models, zoo, 16, e);
  if (nm < 0) return -1;
  if (nm == 0) {
    fprintf(stderr, "[%6.1fs] moe: no mixture-of-experts model among --models: nothing to measure\n", calib_elapsed_s());
    return 0;
  }
  CUDA_CHECK(e, cudaSetDevice(cfg->devices[0]));
  FILE *tsv = NULL;
  if (tsv_path && !(tsv = fopen(tsv_path, "w"))) return ts_fail(e, tsv_path, NULL, "cannot write");
  if (tsv) fprintf(tsv, "# table\tG\tM\tN\tK\trole\tloop_us\tgrouped_batched_us\tdense_us\tloop_tflops\n");
  int rc = 0, points = 0;
  ggemm_ctx g;
  memset(&g, 0, sizeof g);
  if (!rc && exec_gemm_create(&g.h, e)) rc = -1;
  if (!rc && cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS) rc = ts_fail_sys(e, "cublasCreate failed");
  if (!rc) {
    g.pa = calloc(64, sizeof *g.pa), g.pb = calloc(64, sizeof *g.pb), g.pc = calloc(64, sizeof *g.pc);
    if (!g.pa || !g.pb || !g.pc) rc = ts_fail_sys(e, "out of memory");
  }
  if (!rc) {
    TRY_CUDA(cudaMalloc((void **)&g.dpa, 64 * sizeof(void *)));
    TRY_CUDA(cudaMalloc((void **)&g.dpb, 64 * sizeof(void *)));
    TRY_CUDA(cudaMalloc((void **)&g.dpc, 64 * sizeof(void *)));
  }
  for (int i = 0; i < nm && !rc; i++) {
    const model_config *m = &zoo[i];
    const long long fe = m->expert_ffn_hidden, h = m->hidden;
    const expert_gemm fc[2] = {{(m->activation == MODEL_ACT_SWIGLU ? 2 : 1) * fe, h}, {h, fe}};
    for (int ep = 1; ep <= 64 && !rc; ep *= 2) {
      int G = m->experts / ep;
      if (m->experts % ep || G < 2 || G > 32) continue;
      size_t wbytes = (size_t)G * (size_t)(fc[0].n_f * fc[0].k_f) * 2;
      if (wbytes > MOE_MAX_WEIGHTS) continue;
      long long maxm = MOE_ROWS[sizeof MOE_ROWS / sizeof *MOE_ROWS - 1];
      /* every operand of every role fits: weights (or their FP32 gradients), G x rows x width */
      long long wide = fc[0].n_f > fc[0].k_f ? fc[0].n_f : fc[0].k_f;
      size_t big = 2 * wbytes, rowsb = (size_t)G * (size_t)(maxm * wide) * 4;
      if (rowsb > big) big = rowsb;
      if (g.A) cudaFree(g.A), cudaFree(g.B), cudaFree(g.C), g.A = g.B = g.C = NULL;
      TRY_CUDA(cudaMalloc((void **)&g.A, big));
      TRY_CUDA(cudaMalloc((void **)&g.B, big));
      TRY_CUDA(cudaMalloc((void **)&g.C, big));
      if (rt_fill_random_bf16(g.A, (long long)(big / 2), 21, 1.0f, NULL, e) ||
          rt_fill_random_bf16(g.B, (long long)(big / 2), 22, 0.02f, NULL, e)) {
        rc = -1;
        break;
      }
      for (int f = 0; f < 2 && !rc; f++)
        for (size_t r = 0; r < sizeof MOE_ROWS / sizeof *MOE_ROWS && !rc; r++)
          for (int role = 0; role < 3 && !rc; role++) {
            int timed = time_group(&g, cfg, G, MOE_ROWS[r], fc[f], role, c, tsv, e);
            if (timed < 0) rc = -1;
            else points += timed;
          }
      TRY_CUDA(cudaMemset(g.C, 0, big)); /* FP32 accumulators stay finite */
    }
    fprintf(stderr, "[%6.1fs] moe: %s grouped GEMMs timed\n", calib_elapsed_s(), m->name);
  }
done:
  if (!rc) fprintf(stderr, "[%6.1fs] moe: %d grouped-GEMM points\n", calib_elapsed_s(), points);
  if (g.A) cudaFree(g.A), cudaFree(g.B), cudaFree(g.C);
  free(g.pa), free(g.pb), free(g.pc);
  cudaFree(g.dpa), cudaFree(g.dpb), cudaFree(g.dpc);
  if (g.blas) cublasDestroy(g.blas);
  if (g.h) exec_gemm_destroy(g.h);
  if (tsv) fflush(tsv);
  /* then the routing kernels: checked, then timed */
  if (!rc) rc = calib_moe_route_check(256, 128, 8, 1024, 11, e);
  if (!rc) rc = calib_moe_route_check(1024, 8, 2, 4096, 12, e);
  if (!rc) rc = calib_moe_route_check(512, 256, 8, 7168, 13, e);
  if (!rc) fprintf(stderr, "[%6.1fs] moe: routing kernels match their references (3 shapes)\n", calib_elapsed_s());
  if (tsv && !rc) fprintf(tsv, "# kernel\tt\tE\tk\th\tx_bytes\tus\tGB_per_s\n");
  for (int i = 0; i < nm && !rc; i++)
    for (size_t j = 0; j < sizeof MOE_TOKENS / sizeof *MOE_TOKENS && !rc; j++)
      rc = calib_moe_route_time(cfg, MOE_TOKENS[j], zoo[i].experts, zoo[i].top_k, zoo[i].hidden, c, tsv, e);
  if (!rc) fprintf(stderr, "[%6.1fs] moe: routing kernels timed\n", calib_elapsed_s());
  if (tsv) fclose(tsv);
  return rc;
}
