/* train_emu_check.c — `tacorun train --check-emu`: the emulated TP all-reduce
 * on the GPU (kernels/coll_emu.h, with the ablation codecs of fp8_ablate.h)
 * against its plain-C reference, bit for bit, on random partials. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_emu.h"
#include "taco_fp8.h"
#include "taco_ref.h"
#include "train_emu.h"

int train_emu_check(ts_err *e);

typedef struct {
  const char *name;
  coll_emu_codec codec;
  taco_fp8 fp8;
  int one_shot, caat;
} emu_case;

static const emu_case cases[] = {
    {"plain", COLL_EMU_PLAIN, TACO_FP8_E4M3, 0, 0},
    {"taco-e4m3 two-shot", COLL_EMU_TACO, TACO_FP8_E4M3, 0, 0},
    {"taco-e5m2 two-shot", COLL_EMU_TACO, TACO_FP8_E5M2, 0, 0},
    {"taco-e4m3 one-shot", COLL_EMU_TACO, TACO_FP8_E4M3, 1, 0},
    {"fp8-tensor", COLL_EMU_FP8_TENSOR, TACO_FP8_E4M3, 0, 0},
    {"fp8-group two-shot", COLL_EMU_FP8_GROUP, TACO_FP8_E4M3, 0, 0},
    {"fp8-group e5m2 one-shot", COLL_EMU_FP8_GROUP, TACO_FP8_E5M2, 1, 0},
    {"fp8-hadamard two-shot", COLL_EMU_FP8_HADAMARD, TACO_FP8_E4M3, 0, 0},
    {"caat (plain)", COLL_EMU_PLAIN, TACO_FP8_E4M3, 0, 1},
    {"taco+caat", COLL_EMU_TACO, TACO_FP8_E4M3, 0, 1},
};

#define CK(call)                                                                                              \
  do {                                                                                                        \
    cudaError_t ce_ = (call);                                                                                 \
    if (ce_ != cudaSuccess) {                                                                                 \
      rc = ts_fail_sys(e, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(ce_));               \
      goto out;                                                                                               \
    }                                                                                                         \
  } while (0)

/* One case: k partials of rows x cols in dt; *bad: elements differing from the reference. */
static int run_case(const emu_case *c, int k, size_t rows, size_t cols, taco_dtype dt, long long *bad, ts_err *e) {
  const size_t n = rows * cols, es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  int rc = 0;
  void *host[COLL_EMU_MAX_RANKS] = {0}, *dev[COLL_EMU_MAX_RANKS] = {0}, *scratch = NULL;
  unsigned char *back = malloc(n * es);
  taco_rng g = {77 + (uint64_t)k * 13 + n};
  coll_emu_opts o = {c->codec, {128, c->fp8}, c->one_shot};
  for (int r = 0; r < k; r++) {
    host[r] = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
      float v = (float)taco_rng_normal(&g) * (i % 131 == 3 ? 40.0f : 1.0f);
      if (dt == TACO_DTYPE_BF16) ((uint16_t *)host[r])[i] = taco_bf16_from_float(v);
      else ((float *)host[r])[i] = v;
    }
    CK(cudaMalloc(&dev[r], n * es));
    CK(cudaMemcpy(dev[r], host[r], n * es, cudaMemcpyHostToDevice));
  }
  CK(cudaMalloc(&scratch, coll_emu_scratch_bytes(k, n, es)));
  int grc = c->caat ? coll_emu_caat(dev, k, rows, cols, 0.5, dt, &o, scratch, NULL)
                    : coll_emu_allreduce(dev, k, n, dt, &o, scratch, NULL);
  int hrc = c->caat ? coll_emu_caat_ref(host, k, rows, cols, 0.5, dt, &o) : coll_emu_allreduce_ref(host, k, n, dt, &o);
  if (grc || hrc) {
    rc = ts_fail_sys(e, "emulation check %s: %s", c->name, coll_emu_last_error());
    goto out;
  }
  CK(cudaDeviceSynchronize());
  *bad = 0;
  for (int r = 0; r < k; r++) {
    CK(cudaMemcpy(back, dev[r], n * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) *bad += memcmp(back + i * es, (unsigned char *)host[r] + i * es, es) != 0;
  }
out:
  for (int r = 0; r < k; r++) free(host[r]), cudaFree(dev[r]);
  cudaFree(scratch), free(back);
  return rc;
}

int train_emu_check(ts_err *e) {
  static const int ks[] = {2, 4, 8};
  int cases_n = 0, failures = 0;
  printf("%-26s %4s %6s %10s %12s\n", "codec", "TP", "dtype", "elements", "differing");
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (size_t ki = 0; ki < 3; ki++)
      for (int d = 0; d < 2; d++) {
        const emu_case *c = &cases[ci];
        taco_dtype dt = d ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
        if (dt == TACO_DTYPE_FP32 && c->codec == COLL_EMU_FP8_TENSOR) continue;
        long long bad = 0;
        size_t rows = 96, cols = 512;
        if (run_case(c, ks[ki], rows, cols, dt, &bad, e)) return -1;
        cases_n++, failures += bad != 0;
        printf("%-26s %4d %6s %10zu %12lld%s\n", c->name, ks[ki], d ? "fp32" : "bf16", rows * cols, bad,
               bad ? "  MISMATCH" : "");
      }
  printf("emulated all-reduce, GPU against the plain-C reference: %d of %d cases bit-identical\n", cases_n - failures,
         cases_n);
  if (failures) return ts_fail_sys(e, "emulation check: %d of %d cases differ from the reference", failures, cases_n);
  return 0;
}
