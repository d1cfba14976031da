/* calibrate_codec.c — TACO codec and CAAT-Net kernel tables on one GPU.
 *
 * Keys (bytes, group): taco_encode, taco_decode, taco_decode_sum and
 * taco_decode_sum_encode by the BF16 bytes of one uncompressed block (the
 * sums read two blocks, as the reduce step of a 2-rank reduce-scatter);
 * caat_gather, caat_scatter and caat_scale_private by the BF16 bytes of the
 * channels they move (shared ones for gather/scatter, private ones for the
 * scaling), measured at p = 0.5 on rows x 4096. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_progress.h"
#include "rt_ops.h"
#include "rt_ops_check.h"
#include "taco_codec.h"

#define ROTATE_BYTES ((size_t)256 << 20)
#define MAX_SETS 16

typedef enum { K_ENCODE, K_DECODE, K_DECODE_SUM, K_DECODE_SUM_ENCODE, K_COUNT } codec_kernel;
static const char *codec_names[K_COUNT] = {"taco_encode", "taco_decode", "taco_decode_sum", "taco_decode_sum_encode"};

typedef struct {
  codec_kernel k;
  size_t n;
  taco_params p;
  int sets;
  void *x[MAX_SETS];    /* BF16 n elements */
  void *wire[MAX_SETS]; /* two encoded blocks */
  taco_nonfinite *nf;
} codec_ctx;

static int codec_fail(ts_err *e, const char *what) {
  return ts_fail_sys(e, "%s: %s", what, taco_last_error());
}

static int codec_launch(void *p, long long iter, ts_err *e) {
  codec_ctx *c = p;
  int s = (int)(iter % c->sets);
  switch (c->k) {
  case K_ENCODE:
    if (taco_encode(c->x[s], TACO_DTYPE_BF16, c->n, c->p, c->wire[s], c->nf, NULL)) return codec_fail(e, "taco_encode");
    return 0;
  case K_DECODE:
    if (taco_decode(c->wire[s], c->n, c->p, c->x[s], TACO_DTYPE_BF16, NULL)) return codec_fail(e, "taco_decode");
    return 0;
  case K_DECODE_SUM:
    if (taco_decode_sum(c->wire[s], 2, c->n, c->p, c->x[s], TACO_DTYPE_BF16, NULL))
      return codec_fail(e, "taco_decode_sum");
    return 0;
  default: {
    /* writes into the x buffer, big enough for one block (wire of n <= 2n bytes for G >= 8) */
    if (taco_decode_sum_encode(c->wire[s], 2, c->n, c->p, c->x[s], NULL)) return codec_fail(e, "taco_decode_sum_encode");
    return 0;
  }
  }
}

static void codec_free(codec_ctx *c) {
  for (int s = 0; s < MAX_SETS; s++) cudaFree(c->x[s]), cudaFree(c->wire[s]);
  memset(c->x, 0, sizeof c->x), memset(c->wire, 0, sizeof c->wire);
}

static int codec_alloc(codec_ctx *c, ts_err *e) {
  size_t wire = taco_wire_bytes(c->n, c->p.group);
  size_t footprint = 2 * c->n + 2 * wire;
  c->sets = (int)((ROTATE_BYTES + footprint - 1) / footprint);
  if (c->sets > MAX_SETS) c->sets = MAX_SETS;
  for (int s = 0; s < c->sets; s++) {
    RT_CHECK_CUDA(e, cudaMalloc(&c->x[s], 2 * c->n));
    RT_CHECK_CUDA(e, cudaMalloc(&c->wire[s], 2 * wire));
    RT_TRY(rt_fill_random_bf16(c->x[s], (long long)c->n, 500 + (uint64_t)s, 1.0f, NULL, e));
    /* real encoded blocks, so the decoders read valid scales */
    for (int b = 0; b < 2; b++)
      if (taco_encode(c->x[s], TACO_DTYPE_BF16, c->n, c->p, (char *)c->wire[s] + b * wire, c->nf, NULL))
        return codec_fail(e, "taco_encode");
  }
  RT_CHECK_CUDA(e, cudaDeviceSynchronize());
  return 0;
}

typedef enum { C_GATHER, C_SCATTER, C_SCALE } caat_kernel;

typedef struct {
  caat_kernel k;
  size_t rows, cols, shared;
  int sets;
  void *x[MAX_SETS], *packed[MAX_SETS];
} caat_ctx;

static int caat_launch(void *p, long long iter, ts_err *e) {
  caat_ctx *c = p;
  int s = (int)(iter % c->sets);
  int rc;
  if (c->k == C_GATHER) rc = caat_gather_shared(c->x[s], TACO_DTYPE_BF16, c->rows, c->cols, c->shared, c->packed[s], NULL);
  else if (c->k == C_SCATTER)
    rc = caat_scatter_shared(c->packed[s], TACO_DTYPE_BF16, c->rows, c->cols, c->shared, c->x[s], NULL);
  else rc = caat_scale_private(c->x[s], TACO_DTYPE_BF16, c->rows, c->cols, c->shared, 1.0f, NULL); /* 1: values stay put */
  return rc ? codec_fail(e, "caat kernel") : 0;
}

static int run_caat(const calib_config *cfg, schema_calibration *cal, ts_err *e) {
  static const char *names[3] = {"caat_gather", "caat_scatter", "caat_scale_private"};
  const size_t cols = 4096;
  int lo = 4, hi = cfg->quick ? 15 : 17; /* rows 16 .. 32 Ki (quick) or 128 Ki */
  calib_progress pr;
  calib_progress_begin(&pr, "caat kernels", 3 * (hi - lo + 1));
  void *streams[1] = {NULL};
  for (int b = lo; b <= hi; b++) {
    caat_ctx c;
    memset(&c, 0, sizeof c);
    c.rows = (size_t)1 << b, c.cols = cols, c.shared = cols / 2;
    size_t footprint = c.rows * c.cols * 2 + c.rows * c.shared * 2;
    c.sets = (int)((ROTATE_BYTES + footprint - 1) / footprint);
    if (c.sets > MAX_SETS) c.sets = MAX_SETS;
    int rc = 0;
    for (int s = 0; s < c.sets && !rc; s++) {
      if (cudaMalloc(&c.x[s], c.rows * c.cols * 2) != cudaSuccess ||
          cudaMalloc(&c.packed[s], c.rows * c.shared * 2) != cudaSuccess)
        rc = ts_fail_sys(e, "%s:%d: cudaMalloc for CAAT-Net kernels failed", __FILE__, __LINE__);
      else if (rt_fill_random_bf16(c.x[s], (long long)(c.rows * c.cols), 600 + (uint64_t)s, 1.0f, NULL, e) ||
               rt_fill_random_bf16(c.packed[s], (long long)(c.rows * c.shared), 700 + (uint64_t)s, 1.0f, NULL, e))
        rc = -1;
    }
    for (int k = 0; k < 3 && !rc; k++) {
      c.k = (caat_kernel)k;
      double us;
      rc = calib_time_us(caat_launch, &c, streams, cfg->devices, 1, &cfg->budget, &us, e);
      double bytes = (double)c.rows * (double)c.shared * 2.0; /* shared and private halves are equal at p = 0.5 */
      if (!rc && calib_add_kernel(cal, names[k], false, bytes, 0, us)) rc = ts_fail_sys(e, "calibrate: out of memory");
      if (!rc) calib_progress_step(&pr, "%s rows=%zu %.1f us", names[k], c.rows, us);
    }
    for (int s = 0; s < MAX_SETS; s++) cudaFree(c.x[s]), cudaFree(c.packed[s]);
    if (rc) return -1;
  }
  calib_progress_end(&pr);
  return 0;
}

int calib_run_codec(const calib_config *cfg, schema_calibration *cal, ts_err *e) {
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  int lo = 16, hi = 30; /* 64 KiB .. 1 GiB of BF16 input */
  codec_ctx c;
  memset(&c, 0, sizeof c);
  RT_CHECK_CUDA(e, cudaMalloc((void **)&c.nf, sizeof *c.nf));
  if (taco_nonfinite_reset(c.nf, NULL)) {
    cudaFree(c.nf);
    return codec_fail(e, "taco_nonfinite_reset");
  }
  calib_progress pr;
  calib_progress_begin(&pr, "taco kernels", cfg->n_groups * (hi - lo + 1) * K_COUNT);
  void *streams[1] = {NULL};
  int rc = 0;
  for (int g = 0; g < cfg->n_groups && !rc; g++) {
    for (int b = lo; b <= hi && !rc; b++) {
      c.n = ((size_t)1 << b) / 2;
      c.p = (taco_params){.group = cfg->groups[g], .fp8 = TACO_FP8_E4M3};
      if (!taco_params_valid(c.p)) {
        rc = ts_fail(e, NULL, "group", "%d is not a TACO group size", c.p.group);
        break;
      }
      rc = codec_alloc(&c, e);
      for (int k = 0; k < K_COUNT && !rc; k++) {
        c.k = (codec_kernel)k;
        double us;
        rc = calib_time_us(codec_launch, &c, streams, cfg->devices, 1, &cfg->budget, &us, e);
        double bytes = 2.0 * (double)c.n;
        if (!rc && calib_add_kernel(cal, codec_names[k], false, bytes, c.p.group, us))
          rc = ts_fail_sys(e, "calibrate: out of memory");
        if (!rc)
          calib_progress_step(&pr, "%s G=%d %.0f KiB %.1f us %.0f GB/s", codec_names[k], c.p.group, bytes / 1024, us,
                              bytes / us * 1e-3);
      }
      codec_free(&c);
    }
  }
  cudaFree(c.nf);
  if (rc) return -1;
  calib_progress_end(&pr);
  return run_caat(cfg, cal, e);
}
