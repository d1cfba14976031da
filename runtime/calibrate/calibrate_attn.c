/* calibrate_attn.c — the calibration's "attention_shapes": the executor's
 * own attention (exec_attention_fwd / _bwd: the fused kernels, grouped-query
 * heads read in place) timed per shape of the model zoo (head dimension,
 * sequence, micro-batch, heads and key/value heads per rank), forward and
 * backward.
 *
 * In a training step attention runs between GEMMs, which hold the GPU at its
 * power cap: its clocks there are the GEMMs' (a lone attention kernel draws
 * less and runs at higher clocks). So each shape is timed "in step": every
 * timed forward and backward follows and precedes a large GEMM of about three
 * times its length, after the GEMMs have run for a second; events around the
 * attention launch alone give its time, the median of the repetitions is
 * kept. "alone" (--attn-context alone) times it back to back instead, as the
 * FLOP-keyed tables are timed; both are printed on the progress line and in
 * --attn-tsv. The GEMM table is timed back to back at the power cap too, so
 * the clock model's reference (duty 1) is the same for both. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_progress.h"
#include "calibrate_shapes.h"
#include "calibrate_time.h"
#include "exec_core.h"
#include "exec_gemm.h"
#include "ops_variants.h"
#include "rt_ops.h"
#include "rt_ops_check.h"

#define HEAT_N 8192LL  /* the GEMM between attention launches: 8192^3 (about 1.1 TFLOP) */
#define STEP_REPS 9    /* timed repetitions per shape (median kept), after 2 untimed */

typedef struct {
  exec_attention_args a;
  exec_gemm_shape heat;
  void *ha, *hb, *hc;
  cudaEvent_t ev[4];
} attn_bench;

static int heat(attn_bench *b, int count, ts_err *e) {
  for (int i = 0; i < count; i++)
    RT_TRY(exec_gemm_run(b->a.gemm, &b->heat, 1.f, b->ha, b->hb, 0.f, b->hc, NULL, e));
  return 0;
}

static int fwd_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  return exec_attention_fwd(p, e);
}
static int bwd_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  return exec_attention_bwd(p, e);
}

/* Median forward and backward time of one shape between GEMMs; heat_per is
 * the number of GEMMs around each launch. */
static int time_in_step(attn_bench *b, int heat_per, double *fwd, double *bwd, ts_err *e) {
  double tf[STEP_REPS], tb[STEP_REPS];
  for (int r = -2; r < STEP_REPS; r++) {
    RT_TRY(heat(b, heat_per, e));
    RT_CHECK_CUDA(e, cudaEventRecord(b->ev[0], NULL));
    RT_TRY(exec_attention_fwd(&b->a, e));
    RT_CHECK_CUDA(e, cudaEventRecord(b->ev[1], NULL));
    RT_TRY(heat(b, heat_per, e));
    RT_CHECK_CUDA(e, cudaEventRecord(b->ev[2], NULL));
    RT_TRY(exec_attention_bwd(&b->a, e));
    RT_CHECK_CUDA(e, cudaEventRecord(b->ev[3], NULL));
    RT_TRY(heat(b, heat_per, e));
    RT_CHECK_CUDA(e, cudaEventSynchronize(b->ev[3]));
    float f = 0, g = 0;
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&f, b->ev[0], b->ev[1]));
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&g, b->ev[2], b->ev[3]));
    if (r >= 0) tf[r] = 1e3 * f, tb[r] = 1e3 * g;
  }
  *fwd = calib_median(tf, STEP_REPS);
  *bwd = calib_median(tb, STEP_REPS);
  return 0;
}

static int alloc_random(void **p, size_t elems, uint64_t seed, ts_err *e) {
  RT_CHECK_CUDA(e, cudaMalloc(p, elems * 2 > 0 ? elems * 2 : 2));
  return rt_fill_random_bf16(*p, (long long)elems, seed, 1.0f, NULL, e);
}

/* Whether the executor runs this shape (grouped heads need the fused kernels). */
static int runs(const calib_attn_shape *s) {
  if (s->kv_heads == s->heads) return 1;
  return exec_attention_gqa_ok(s->seq, s->heads, s->kv_heads, s->head_dim);
}

int calib_run_attention_shapes(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  size_t max_qkv = 0, max_ss = 0;
  int total = 0;
  for (int i = 0; i < sh->n_attn; i++) {
    const calib_attn_shape *s = &sh->attn[i];
    size_t qkv = (size_t)s->bh * s->seq * s->head_dim * 3, ss = (size_t)s->bh * s->seq * s->seq;
    if (qkv > max_qkv) max_qkv = qkv;
    if (ss > max_ss) max_ss = ss;
    total += runs(s);
  }
  if (total == 0) return 0;
  FILE *tsv = NULL;
  if (cfg->attn_tsv && !(tsv = fopen(cfg->attn_tsv, "w"))) return ts_fail(e, cfg->attn_tsv, NULL, "cannot open for writing");
  if (tsv) fprintf(tsv, "head_dim\tseq\tbatch\theads\tkv_heads\tfwd_step_us\tbwd_step_us\tfwd_alone_us\tbwd_alone_us\n");
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  attn_bench b;
  memset(&b, 0, sizeof b);
  b.a.lower_softmax = !ops_variant_is(OPS_V_SOFTMAX, "full"); /* as exec_model.c chooses */
  b.heat = (exec_gemm_shape){.m = HEAT_N, .n = HEAT_N, .k = HEAT_N, .lda = HEAT_N, .ldb = HEAT_N, .ldc = HEAT_N};
  void *qkv = NULL, *out = NULL, *dout = NULL, *dqkv = NULL, *scores = NULL, *P = NULL, *dP = NULL, *dS = NULL;
  void **bufs[] = {&qkv, &out, &dout, &dqkv, &scores, &P, &dP, &dS, &b.ha, &b.hb, &b.hc};
  int rc = -1, nev = 0;
  if (exec_gemm_create(&b.a.gemm, e)) goto out;
  for (int i = 0; i < 11; i++)
    if (alloc_random(bufs[i], i < 4 ? max_qkv : i < 8 ? max_ss : (size_t)(HEAT_N * HEAT_N), 200 + i, e)) goto out;
  for (; nev < 4; nev++)
    if (cudaEventCreate(&b.ev[nev]) != cudaSuccess) {
      ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
      goto out;
    }
  b.a.qkv = qkv, b.a.out = out, b.a.dout = dout, b.a.dqkv = dqkv, b.a.scores = scores, b.a.P = P, b.a.dP = dP,
  b.a.dS = dS;
  /* one heater GEMM's time, then a second of them: the clocks settle at the cap */
  cudaEvent_t *ev = b.ev;
  if (heat(&b, 2, e)) goto out;
  float ms = 0;
  if (cudaEventRecord(ev[0], NULL) != cudaSuccess || heat(&b, 4, e) || cudaEventRecord(ev[1], NULL) != cudaSuccess ||
      cudaEventSynchronize(ev[1]) != cudaSuccess || cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess) {
    if (!e->msg[0]) ts_fail_sys(e, "%s:%d: timing the heater GEMM failed", __FILE__, __LINE__);
    goto out;
  }
  double heat_us = 1e3 * ms / 4;
  if (heat(&b, (int)(1e6 / heat_us) + 1, e)) goto out;
  void *streams[1] = {NULL};
  calib_progress pr;
  calib_progress_begin(&pr, "attention shapes", total);
  for (int i = 0; i < sh->n_attn; i++) {
    const calib_attn_shape *s = &sh->attn[i];
    if (!runs(s)) continue;
    b.a.batch = s->batch, b.a.heads = s->heads, b.a.kv_heads = s->kv_heads, b.a.seq = s->seq,
    b.a.head_dim = s->head_dim;
    double af = 0, ab = 0, sf = 0, sb = 0;
    /* alone first (its launches settle the kernel choice), then in step */
    if (calib_time_us(fwd_launch, &b.a, streams, cfg->devices, 1, &cfg->budget, &af, e) ||
        calib_time_us(bwd_launch, &b.a, streams, cfg->devices, 1, &cfg->budget, &ab, e))
      goto out;
    int per = (int)ceil(3.0 * (af + ab) / 2.0 / heat_us);
    if (heat(&b, (int)(0.1e6 / heat_us) + 1, e) || time_in_step(&b, per < 1 ? 1 : per, &sf, &sb, e)) goto out;
    schema_attn_shape q = {.head_dim = s->head_dim, .seq = s->seq, .batch = s->batch, .heads = s->heads,
                           .kv_heads = s->kv_heads, .causal = true};
    bool alone = cfg->attn_alone;
    if (schema_calibration_add_attn(c, &q, alone ? af : sf, alone ? ab : sb)) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
    if (tsv)
      fprintf(tsv, "%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\n", s->head_dim, s->seq, s->batch, s->heads,
              s->kv_heads, sf, sb, af, ab);
    calib_progress_step(&pr, "b=%d heads=%d/%d seq=%d d=%d in step fwd %.1f bwd %.1f us, alone %.1f / %.1f us (%+.1f%% / %+.1f%%)",
                        s->batch, s->heads, s->kv_heads, s->seq, s->head_dim, sf, sb, af, ab, 100 * (sf / af - 1),
                        100 * (sb / ab - 1));
  }
  calib_progress_end(&pr);
  rc = 0;
out:
  for (int i = 0; i < nev; i++) cudaEventDestroy(b.ev[i]);
  for (int i = 0; i < 11; i++) cudaFree(*bufs[i]);
  exec_gemm_destroy(b.a.gemm);
  if (tsv && fclose(tsv) && !rc) rc = ts_fail(e, cfg->attn_tsv, NULL, "cannot write");
  return rc;
}
