/* calibrate_infer.c — `tacorun calibrate-infer`: the decode-sized tables the
 * inference prediction (sim/sim_infer.c) reads, added to an existing
 * calibration file, on one GPU:
 *   - GEMMs with m = batch 1..64 of every zoo model's layer at TP 1/2/4/8
 *     (QKV, attention output, FC1, FC2 as model_layer_ops() shapes them, and
 *     the logits GEMM of the last token), through exec_gemm with the inference
 *     executor's layouts; the weights rotate through >= 512 MiB of copies, so
 *     each launch reads them from HBM as a decode step does (a layer's weights
 *     are not in L2 when its GEMM runs);
 *   - "attention_decode" (by KV-cache bytes read: 2 x batch x length x KV
 *     heads x head_dim x 2 B): the executor's default decode attention (INFER_DECODE_DEFAULT, or the
 *     --decode-attention version), caches rotating too;
 *     "attention_decode_fp8" (by bytes of E4M3 codes + scales): the same kernel over the FP8 cache;
 *     both again per head layout of the zoo ("<table>.g<G>", grouped by batch x KV heads);
 *   - "attention_prefill" (by the model's attention FLOPs, model_layer_ops'
 *     flops_fwd): infer_prefill_attention at batch x prompt;
 *   - the norm, residual add, SwiGLU and embedding kernels at decode sizes;
 *   - with --small-only, nothing of the above but the small kernels of a decode
 *     step queued and in a CUDA graph (calibrate_small.h); with
 *     --decode-attention-only, the decode attention tables only;
 *   - with --per-query-head, the tables of decode attention read once per query head too
 *     (calibrate_infer_pqh.h; with --decode-attention-only, only they).
 * A separate command rather than a `tacorun calibrate` stage, so a training
 * calibration is not slowed; the small-message collectives are already in the
 * calibrate sweep (from 1 KiB; a decode all-reduce of batch 1 x hidden 4096
 * is 8 KiB). Shapes already in the file are kept as they are. */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_infer_fp8.h"
#include "calibrate_infer_pqh.h"
#include "calibrate_small.h"
#include "calibrate_time.h"
#include "coll_taco.h"
#include "rt_world.h"
#include "ts_env.h"
#include "calibration.h"
#include "exec_gemm.h"
#include "infer_kernels.h"
#include "infer_decode.h"
#include "infer_kv8.h"
#include "infer_model.h"
#include "model.h"
#include "rt_nccl.h"
#include "rt_ops.h"

#define POOL_BYTES ((size_t)512 << 20)
#define MAX_MODELS 64

typedef struct {
  exec_gemm *g;
  exec_gemm_shape s;
  char *a, *b, *c;
  size_t b_bytes;
  int sets;
} gemm_ctx;


/* Where an input calibration file's extended copy goes: OUT_DIR/its name, or
 * the input itself (updated in place) without --out-dir. */
static void output_path(char *out, size_t cap, const char *in, const char *out_dir) {
  const char *base = strrchr(in, '/');
  base = base ? base + 1 : in;
  if (out_dir) snprintf(out, cap, "%s/%s", out_dir, base);
  else snprintf(out, cap, "%s", in);
}

static int gemm_launch(void *ctx, long long iter, ts_err *e) {
  gemm_ctx *c = ctx;
  const char *b = c->b + (size_t)(iter % c->sets) * c->b_bytes;
  return exec_gemm_run(c->g, &c->s, 1.f, c->a, b, 0.f, c->c, NULL, e);
}

static int have_gemm(const schema_calibration *cal, long long m, long long n, long long k) {
  for (int i = 0; i < cal->n_gemm; i++)
    if (cal->gemm[i].m == m && cal->gemm[i].n == n && cal->gemm[i].k == k) return 1;
  return 0;
}

typedef struct {
  long long m, n, k;
  int nt; /* logits: A . B^T */
} gemm_key;

static int add_key(gemm_key **keys, int *n, int *cap, gemm_key k) {
  for (int i = 0; i < *n; i++)
    if ((*keys)[i].m == k.m && (*keys)[i].n == k.n && (*keys)[i].k == k.k) return 0;
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 256;
    gemm_key *p = realloc(*keys, (size_t)*cap * sizeof *p);
    if (!p) return -1;
    *keys = p;
  }
  (*keys)[(*n)++] = k;
  return 0;
}

static int zoo_models(const char *dir, model_config *out, int *n, ts_err *e) {
  DIR *d = opendir(dir);
  if (!d) return ts_fail(e, dir, NULL, "cannot open the model zoo folder");
  struct dirent *de;
  *n = 0;
  while ((de = readdir(d)) && *n < MAX_MODELS) {
    size_t len = strlen(de->d_name);
    if (len < 6 || strcmp(de->d_name + len - 5, ".json")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (model_load(path, dir, &out[*n], e)) {
      closedir(d);
      return -1;
    }
    (*n)++;
  }
  closedir(d);
  return 0;
}

/* prefill NULL: decode GEMMs (m = batch) of every model, shapes `cal` has are skipped.
 * prefill = a model: its prefill GEMMs (m = batch x prompt tokens, 128 .. 65,536 and 8,176),
 * every shape timed (the executor's pattern: weights from HBM, activations fixed). */
static int decode_gemms(schema_calibration *cal, exec_gemm *g, const model_config *models, int nm,
                        const model_config *prefill, const calib_budget *bud, int *added, ts_err *e) {
  static const int tps[] = {1, 2, 4, 8}, batches[] = {1, 2, 4, 8, 16, 32, 64};
  static const int tokens[] = {128, 256, 512, 1024, 2048, 4096, 8176, 8192, 16384, 32768, 65536};
  gemm_key *keys = NULL;
  int nk = 0, cap = 0;
  for (int i = 0; prefill && i < 4; i++)
    for (size_t b = 0; b < sizeof tokens / sizeof *tokens; b++) {
      if (prefill->heads % tps[i] || prefill->kv_heads % tps[i] || prefill->ffn_hidden % tps[i]) continue;
      model_shard sh = {tps[i], false, 1, tokens[b]};
      model_op ops[MODEL_MAX_LAYER_OPS];
      ts_err sub;
      int n = model_layer_ops(prefill, &sh, ops, MODEL_MAX_LAYER_OPS, &sub);
      for (int o = 0; o < n; o++)
        if (ops[o].kind == MODEL_OP_GEMM && add_key(&keys, &nk, &cap, (gemm_key){ops[o].m, ops[o].n, ops[o].k, 0}))
          return ts_fail_sys(e, "out of memory");
    }
  for (int i = 0; !prefill && i < nm; i++)
    for (size_t t = 0; t < sizeof tps / sizeof *tps; t++)
      for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        const model_config *mc = &models[i];
        if (mc->heads % tps[t] || mc->kv_heads % tps[t] || mc->ffn_hidden % tps[t]) continue;
        model_shard sh = {tps[t], false, batches[b], 1};
        model_op ops[MODEL_MAX_LAYER_OPS];
        ts_err sub;
        int n = model_layer_ops(mc, &sh, ops, MODEL_MAX_LAYER_OPS, &sub);
        for (int o = 0; o < n; o++)
          if (ops[o].kind == MODEL_OP_GEMM && add_key(&keys, &nk, &cap, (gemm_key){ops[o].m, ops[o].n, ops[o].k, 0}))
            return ts_fail_sys(e, "out of memory");
        gemm_key lk = {batches[b], model_vocab_per_gpu(mc, tps[t]), mc->hidden, 1};
        if (add_key(&keys, &nk, &cap, lk)) return ts_fail_sys(e, "out of memory");
      }
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (int i = 0; i < nk; i++) {
    size_t a = (size_t)(keys[i].m * keys[i].k) * 2, b = (size_t)(keys[i].k * keys[i].n) * 2,
           c = (size_t)(keys[i].m * keys[i].n) * 2;
    if (a > max_a) max_a = a;
    if (b > max_b) max_b = b;
    if (c > max_c) max_c = c;
  }
  size_t pool = max_b > POOL_BYTES ? max_b : POOL_BYTES;
  gemm_ctx c = {.g = g};
  RT_CUDA(e, cudaMalloc((void **)&c.a, max_a));
  RT_CUDA(e, cudaMalloc((void **)&c.b, pool));
  RT_CUDA(e, cudaMalloc((void **)&c.c, max_c));
  if (rt_fill_random_bf16(c.a, (long long)(max_a / 2), 1, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.b, (long long)(pool / 2), 2, 1.0f, NULL, e))
    return -1;
  int dev = 0;
  void *stream = NULL;
  RT_CUDA(e, cudaGetDevice(&dev));
  double t0 = calib_elapsed_s();
  *added = 0;
  for (int i = 0; i < nk; i++) {
    const gemm_key *k = &keys[i];
    if (!prefill && have_gemm(cal, k->m, k->n, k->k)) continue;
    c.s = exec_gemm_packed(k->nt ? EXEC_GEMM_NT : EXEC_GEMM_NN, k->m, k->n, k->k);
    c.b_bytes = (size_t)(k->k * k->n) * 2;
    c.b_bytes = (c.b_bytes + 255) & ~(size_t)255;
    c.sets = (int)(pool / c.b_bytes);
    if (c.sets < 1) c.sets = 1;
    double us;
    if (calib_time_us(gemm_launch, &c, &stream, &dev, 1, bud, &us, e)) return -1;
    if (schema_calibration_add_gemm(cal, k->m, k->n, k->k, us)) return ts_fail_sys(e, "out of memory");
    (*added)++;
  }
  fprintf(stderr, "calibrate-infer: %d %s GEMM shapes (%d timed) in %.1f s\n", nk, prefill ? "prefill" : "decode",
          *added, calib_elapsed_s() - t0);
  cudaFree(c.a), cudaFree(c.b), cudaFree(c.c);
  free(keys);
  return 0;
}

/* The decode attention tables: the plain ones by KV bytes (Llama-3 8B at TP 2: 16 query heads,
 * 4 KV heads of 128 on one GPU), and one per head layout of the zoo, "<table>.g<G>" (G query heads
 * a KV head, head dim 128: what v3 is built for), timed at 1, 2, 4 and 8 KV heads a GPU (the TP
 * splits) and grouped by the (sequence, KV head) pairs batch x KV heads (sim/sim_infer.c). */
#define DEC_MAX_KVL 8
/* In-flight batching decodes hundreds of sequences over caches of tens of thousands of tokens: the
 * tables reach batch 512 and 32,768 tokens, a point's cache at most DEC_POOL_BYTES a K or V (those
 * beyond are left out); caches up to POOL_BYTES rotate through POOL_BYTES as before, larger ones
 * (far beyond L2) through DEC_POOL_BYTES. */
#define DEC_POOL_BYTES ((size_t)4 << 30)
static const int dec_batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
static const long long dec_lens[] = {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};

/* One layout (hl query heads over kvl KV heads of 128) over batch x length, both caches, into
 * `name` / `name_fp8` (group = batch x kvl when grouped, else none). */
static int decode_attention_layout(schema_calibration *cal, infer_decode_timing *c, const calib_budget *bud, int ver,
                                   int hl, int kvl, const char *name, const char *name_fp8, bool grouped, int *n,
                                   ts_err *e) {
  int dev = 0;
  void *stream = NULL;
  RT_CUDA(e, cudaGetDevice(&dev));
  c->a.hl = hl, c->a.kvl = kvl;
  for (size_t b = 0; b < sizeof dec_batches / sizeof *dec_batches; b++)
    for (size_t l = 0; l < sizeof dec_lens / sizeof *dec_lens; l++) {
      c->a.batch = dec_batches[b], c->a.max_seq = dec_lens[l], c->len = dec_lens[l];
      c->set_bytes = (size_t)dec_batches[b] * kvl * dec_lens[l] * 128 * 2;
      if (c->set_bytes > DEC_POOL_BYTES) continue;
      c->sets = (int)((c->set_bytes <= POOL_BYTES ? POOL_BYTES : DEC_POOL_BYTES) / c->set_bytes);
      for (int fp8 = 0; fp8 < 2; fp8++) {
        c->kernel = ver == 5   ? (fp8 ? INFER_DEC_V5_FP8 : INFER_DEC_V5)
                    : ver == 4 ? (fp8 ? INFER_DEC_V4_FP8 : INFER_DEC_V4)
                               : (fp8 ? INFER_DEC_V3_FP8 : INFER_DEC_V3);
        double us;
        if (calib_time_us(infer_decode_timing_launch, c, &stream, &dev, 1, bud, &us, e)) return -1;
        /* KV bytes read: BF16 2 B an element; FP8 1 B + a 4 B scale per head vector of 128 */
        double kv_bytes = fp8 ? 2.0 * (double)c->set_bytes / 2 * (128 + 4) / 128 : 2.0 * (double)c->set_bytes;
        if (schema_calibration_add_kernel(cal, fp8 ? name_fp8 : name, false, kv_bytes,
                                          grouped ? dec_batches[b] * kvl : 0, us))
          return ts_fail_sys(e, "out of memory");
      }
      (*n)++;
    }
  return 0;
}

/* The query heads a KV head (G) of the zoo's head-dim-128 models that v3 is built for, each once. */
static int zoo_groupings(const model_config *models, int nm, int *gs, int cap) {
  int n = 0;
  for (int i = 0; i < nm; i++) {
    const model_config *m = &models[i];
    if (m->kv_heads < 1 || m->heads % m->kv_heads || model_head_dim(m) != 128) continue;
    int g = m->heads / m->kv_heads, seen = 0;
    if (g > 8 && g != 12 && g != 16) continue;
    for (int j = 0; j < n; j++) seen |= gs[j] == g;
    if (!seen && n < cap) gs[n++] = g;
  }
  return n;
}

/* --per-query-head: the per-query-head tables (calibrate_infer_pqh.h) over the grid above, for the
 * zoo's GQA groupings (G > 1) of head dim 128. */
static int decode_pqh_tables(schema_calibration *cal, const model_config *models, int nm, const calib_budget *bud,
                             ts_err *e) {
  int gs[16], ng = zoo_groupings(models, nm, gs, 16), n = 0;
  for (int i = 0; i < ng; i++)
    if (gs[i] > 1) gs[n++] = gs[i];
  const calib_dec_grid grid = {dec_batches, (int)(sizeof dec_batches / sizeof *dec_batches), dec_lens,
                               (int)(sizeof dec_lens / sizeof *dec_lens), POOL_BYTES, DEC_POOL_BYTES, DEC_MAX_KVL};
  return calib_infer_pqh_tables(cal, gs, n, &grid, bud, e);
}

static int decode_attention_table(schema_calibration *cal, const model_config *models, int nm,
                                  const calib_budget *bud, int ver, ts_err *e) {
  int gs[16], ng = zoo_groupings(models, nm, gs, 16), max_g = 4;
  for (int i = 0; i < ng; i++)
    if (gs[i] > max_g) max_g = gs[i];
  const int max_hl = max_g * DEC_MAX_KVL;
  infer_decode_timing c = {.kernel = INFER_DEC_V3, .a = {.head_dim = 128}};
  const int max_batch = dec_batches[sizeof dec_batches / sizeof *dec_batches - 1];
  const size_t pool = DEC_POOL_BYTES, qo_bytes = (size_t)max_batch * max_hl * 128 * 2;
  int rc = -1, n = 0;
  size_t part_bytes = 0;
  for (size_t b = 0; b < sizeof dec_batches / sizeof *dec_batches; b++)
    for (size_t l = 0; l < sizeof dec_lens / sizeof *dec_lens; l++) {
      infer_attn_dims a = {.batch = dec_batches[b], .hl = max_hl, .kvl = DEC_MAX_KVL, .head_dim = 128,
                           .max_seq = dec_lens[l]};
      size_t p = infer_decode3_partial_bytes(&a, dec_lens[l]);
      if (p > part_bytes) part_bytes = p;
    }
  const long long rows = (long long)(pool / 2 / 128);
  if (cudaMalloc((void **)&c.k, pool) != cudaSuccess || cudaMalloc((void **)&c.v, pool) != cudaSuccess ||
      cudaMalloc((void **)&c.q, qo_bytes) != cudaSuccess || cudaMalloc((void **)&c.out, qo_bytes) != cudaSuccess ||
      cudaMalloc((void **)&c.part, part_bytes) != cudaSuccess || cudaMalloc((void **)&c.k8, pool / 2) != cudaSuccess ||
      cudaMalloc((void **)&c.v8, pool / 2) != cudaSuccess || cudaMalloc((void **)&c.ks, (size_t)rows * 4) != cudaSuccess ||
      cudaMalloc((void **)&c.vs, (size_t)rows * 4) != cudaSuccess) {
    ts_fail_sys(e, "decode attention tables: cudaMalloc failed (%s)", cudaGetErrorString(cudaGetLastError()));
    goto fail;
  }
  if (rt_fill_random_bf16(c.k, (long long)(pool / 2), 3, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.v, (long long)(pool / 2), 4, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.q, (long long)(qo_bytes / 2), 5, 1.0f, NULL, e) ||
      infer_kv8_quantize(c.k, c.k8, c.ks, rows, 128, NULL, e) || infer_kv8_quantize(c.v, c.v8, c.vs, rows, 128, NULL, e))
    goto fail;
  if (decode_attention_layout(cal, &c, bud, ver, 16, 4, "attention_decode", "attention_decode_fp8", false, &n, e))
    goto fail;
  fprintf(stderr, "calibrate-infer: attention_decode and attention_decode_fp8 (decode attention v%d), %d points each\n",
          ver, n);
  for (int i = 0; i < ng; i++) {
    char name[64], name8[64];
    snprintf(name, sizeof name, "attention_decode.g%d", gs[i]);
    snprintf(name8, sizeof name8, "attention_decode_fp8.g%d", gs[i]);
    n = 0;
    for (int kvl = 1; kvl <= DEC_MAX_KVL; kvl *= 2)
      if (decode_attention_layout(cal, &c, bud, ver, gs[i] * kvl, kvl, name, name8, true, &n, e)) goto fail;
    fprintf(stderr, "calibrate-infer: %s and %s, %d timings each (1-%d KV heads, %.0f s)\n", name, name8, n,
            DEC_MAX_KVL, calib_elapsed_s());
  }
  rc = 0;
fail:
  cudaFree(c.vs), cudaFree(c.ks), cudaFree(c.v8), cudaFree(c.k8), cudaFree(c.part);
  cudaFree(c.out), cudaFree(c.q), cudaFree(c.v), cudaFree(c.k);
  return rc;
}

typedef struct {
  infer_prefill_args a;
} pre_ctx;

static int pre_launch(void *ctx, long long iter, ts_err *e) {
  (void)iter;
  return infer_prefill_attention(&((pre_ctx *)ctx)->a, e);
}

/* One head layout of the prefill attention table: a zoo model at a TP degree. */
typedef struct {
  const model_config *mc;
  int tp;
} pre_layout;

/* Prefill attention over batch x prompt (batch x prompt <= max_tokens) for each layout
 * (default: Llama-3 8B at TP2). Every point goes into the FLOP-keyed "attention_prefill" and
 * into "attention_prefill.d<D>.s<S>" of its head dimension and prompt, at the FLOPs
 * model_layer_ops gives that layout (what the simulator looks up). */
static int prefill_attention_table(schema_calibration *cal, exec_gemm *g, const pre_layout *lay, int nl,
                                   const int *prompts, int np, long long max_tokens, int kv_extra,
                                   const calib_budget *bud, ts_err *e) {
  static const int batches[] = {1, 2, 4, 8, 16, 32, 64};
  int max_hl = 0, max_kvl = 0, max_d = 0;
  for (int i = 0; i < nl; i++) {
    int hl = lay[i].mc->heads / lay[i].tp, kvl = lay[i].mc->kv_heads / lay[i].tp, d = model_head_dim(lay[i].mc);
    if (hl > max_hl) max_hl = hl;
    if (kvl > max_kvl) max_kvl = kvl;
    if (d > max_d) max_d = d;
  }
  pre_ctx c = {.a = {.gemm = g, .scores_bytes = (size_t)1 << 30}};
  /* kv_extra: the caches hold prompt + kv_extra positions a sequence, as the executor's hold prompt + generate */
  const size_t qb = (size_t)max_tokens * max_hl * max_d * 2,
               kb = (size_t)(max_tokens + 64LL * kv_extra) * max_kvl * max_d * 2;
  RT_CUDA(e, cudaMalloc((void **)&c.a.q, qb));
  RT_CUDA(e, cudaMalloc((void **)&c.a.o_heads, qb));
  RT_CUDA(e, cudaMalloc((void **)&c.a.out, qb));
  RT_CUDA(e, cudaMalloc((void **)&c.a.k_cache, kb));
  RT_CUDA(e, cudaMalloc((void **)&c.a.v_cache, kb));
  RT_CUDA(e, cudaMalloc(&c.a.scores, c.a.scores_bytes));
  if (rt_fill_random_bf16((void *)c.a.q, (long long)(qb / 2), 6, 1.0f, NULL, e) ||
      rt_fill_random_bf16((void *)c.a.k_cache, (long long)(kb / 2), 7, 1.0f, NULL, e) ||
      rt_fill_random_bf16((void *)c.a.v_cache, (long long)(kb / 2), 8, 1.0f, NULL, e))
    return -1;
  int dev = 0, n = 0;
  void *stream = NULL;
  RT_CUDA(e, cudaGetDevice(&dev));
  for (int l = 0; l < nl; l++) {
    const model_config *mc = lay[l].mc;
    const int tp = lay[l].tp, d = model_head_dim(mc);
    c.a.hl = mc->heads / tp, c.a.kvl = mc->kv_heads / tp, c.a.head_dim = d;
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
      for (int p = 0; p < np; p++) {
        if ((long long)batches[b] * prompts[p] > max_tokens) continue;
        /* one head's S x S scores must fit the 1 GiB workspace, as in the executor */
        if ((size_t)prompts[p] * prompts[p] * 2 > c.a.scores_bytes) continue;
        c.a.batch = batches[b], c.a.seq = prompts[p], c.a.max_seq = prompts[p] + kv_extra;
        model_shard sh = {tp, false, batches[b], prompts[p]};
        model_op ops[MODEL_MAX_LAYER_OPS];
        int nops = model_layer_ops(mc, &sh, ops, MODEL_MAX_LAYER_OPS, e);
        if (nops < 0) return -1;
        double flops = 0;
        for (int o = 0; o < nops; o++)
          if (ops[o].kind == MODEL_OP_ATTENTION) flops = ops[o].flops_fwd;
        double us;
        if (calib_time_us(pre_launch, &c, &stream, &dev, 1, bud, &us, e)) return -1;
        char keyed[64]; /* and keyed by head dimension and prompt length (batch and heads vary along FLOPs) */
        snprintf(keyed, sizeof keyed, "attention_prefill.d%d.s%d", d, prompts[p]);
        if (schema_calibration_add_kernel(cal, "attention_prefill", true, flops, 0, us) ||
            schema_calibration_add_kernel(cal, keyed, true, flops, 0, us))
          return ts_fail_sys(e, "out of memory");
        fprintf(stderr, "calibrate-infer: attention_prefill %s tp%d (%d/%d heads of %d) b%d s%d: %.1f us\n",
                mc->name, tp, c.a.hl, c.a.kvl, d, batches[b], prompts[p], us);
        n++;
      }
  }
  fprintf(stderr, "calibrate-infer: attention_prefill, %d points\n", n);
  cudaFree((void *)c.a.q), cudaFree(c.a.o_heads), cudaFree(c.a.out), cudaFree((void *)c.a.k_cache);
  cudaFree((void *)c.a.v_cache), cudaFree(c.a.scores);
  return 0;
}

typedef struct {
  int kind; /* 0 rmsnorm, 1 add, 2 swiglu, 3 embedding */
  long long rows;
  int cols;
  void *x, *y, *gamma, *table;
  float *rstd;
  int32_t *ids;
} small_ctx;

static int small_launch(void *ctx, long long iter, ts_err *e) {
  (void)iter;
  small_ctx *c = ctx;
  switch (c->kind) {
  case 0: return rt_rmsnorm_fwd(c->x, c->gamma, c->y, c->rstd, c->rows, c->cols, 1e-5f, NULL, e);
  case 1: return rt_add(c->x, c->y, c->y, c->rows * c->cols, NULL, e);
  case 2: return rt_swiglu_fwd(c->x, c->y, c->rows, c->cols, NULL, e);
  default: return rt_embedding_fwd(c->table, c->ids, c->y, c->rows, c->cols, 0, 64128, NULL, e);
  }
}

/* The memory-bound kernels of a decode step at batch 1..64 (Llama-3 8B TP2: hidden 4096, FFN
 * 7168 per GPU), in the tables and byte counts `tacorun calibrate` uses (rmsnorm_fwd and norm:
 * 4 B per element; add_fwd, swiglu_fwd and elementwise: 6; embedding_fwd and embedding: 4), below
 * the sizes training calibrates. Not rotated: a decode step's activations were just written and
 * sit in L2, as here. */
static int small_memops(schema_calibration *cal, const calib_budget *bud, ts_err *e) {
  static const int batches[] = {1, 2, 4, 8, 16, 32, 64};
  static const char *names[4][2] = {{"rmsnorm_fwd", "norm"}, {"add_fwd", "elementwise"},
                                    {"swiglu_fwd", "elementwise"}, {"embedding_fwd", "embedding"}};
  static const double per_elem[4] = {4, 6, 6, 4};
  small_ctx c;
  memset(&c, 0, sizeof c);
  const size_t big = (size_t)64 * 2 * 7168 * 2;
  RT_CUDA(e, cudaMalloc(&c.x, big));
  RT_CUDA(e, cudaMalloc(&c.y, big));
  RT_CUDA(e, cudaMalloc(&c.gamma, 4096 * 2));
  RT_CUDA(e, cudaMalloc((void **)&c.rstd, 64 * sizeof(float)));
  RT_CUDA(e, cudaMalloc((void **)&c.ids, 64 * sizeof(int32_t)));
  RT_CUDA(e, cudaMalloc(&c.table, (size_t)64128 * 4096 * 2));
  if (rt_fill_random_bf16(c.x, (long long)(big / 2), 9, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.y, (long long)(big / 2), 10, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.gamma, 4096, 11, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.table, 64128LL * 4096, 12, 1.0f, NULL, e) || rt_fill_labels(c.ids, 64, 64128, 13, NULL, e))
    return -1;
  int dev = 0, n = 0;
  void *stream = NULL;
  RT_CUDA(e, cudaGetDevice(&dev));
  for (int k = 0; k < 4; k++)
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
      c.kind = k, c.rows = batches[b], c.cols = k == 2 ? 7168 : 4096;
      double us;
      if (calib_time_us(small_launch, &c, &stream, &dev, 1, bud, &us, e)) return -1;
      double bytes = per_elem[k] * (double)c.rows * c.cols;
      if (schema_calibration_add_kernel(cal, names[k][0], false, bytes, 0, us) ||
          schema_calibration_add_kernel(cal, names[k][1], false, bytes, 0, us))
        return ts_fail_sys(e, "out of memory");
      n++;
    }
  fprintf(stderr, "calibrate-infer: %d decode-sized memory-bound points\n", n);
  cudaFree(c.x), cudaFree(c.y), cudaFree(c.gamma), cudaFree(c.rstd), cudaFree(c.ids), cudaFree(c.table);
  return 0;
}

/* ---- --collectives: the TP all-reduce as the executor runs it (one process per GPU) ---- */

#define COLL_REPS 9

/* Median over COLL_REPS calls, each between two events, after two warm-ups; the same
 * fixed number of calls on every rank (an adaptive count could differ between ranks). */
static int time_coll(rt_nccl *w, coll_team *t, void *buf, size_t count, const coll_opts *o, double *us, ts_err *e) {
  cudaEvent_t ev[COLL_REPS + 1];
  for (int i = 0; i <= COLL_REPS; i++) RT_CUDA(e, cudaEventCreate(&ev[i]));
  const void *in = buf;
  void *out = buf;
  for (int i = 0; i < 2; i++)
    if (coll_allreduce(t, &in, &out, count, o)) return ts_fail_sys(e, "all-reduce: %s", coll_last_error());
  for (int i = 0; i < COLL_REPS; i++) {
    RT_CUDA(e, cudaEventRecord(ev[i], w->streams[0]));
    if (coll_allreduce(t, &in, &out, count, o)) return ts_fail_sys(e, "all-reduce: %s", coll_last_error());
  }
  RT_CUDA(e, cudaEventRecord(ev[COLL_REPS], w->streams[0]));
  if (rt_nccl_wait(w, e)) return -1;
  double v[COLL_REPS];
  for (int i = 0; i < COLL_REPS; i++) {
    float ms;
    RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    v[i] = ms * 1e3;
  }
  for (int i = 0; i <= COLL_REPS; i++) cudaEventDestroy(ev[i]);
  *us = calib_median(v, COLL_REPS);
  return rt_world_max(w, us, 1, e);
}

/* "allreduce" and "allreduce.taco<G>" for nranks = the world, 1 KiB .. 128 MiB, replacing those
 * tables of every file: the training calibration times them from one process driving both GPUs,
 * the executor runs one process per GPU (the difference is largest over sockets). */
static int coll_tables(const char **ins, int nin, const char *out_dir, int timeout_s, coll_transport transport) {
  ts_err e;
  rt_nccl w;
  rt_nccl_opts no = {.single_process = 0, .ngpus = 1, .timeout_s = timeout_s, .transport = transport};
  if (rt_nccl_init(&w, &no, &e)) {
    fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  if (w.nlocal != 1 || w.nranks < 2) {
    fprintf(stderr, "tacorun calibrate-infer: --collectives runs one process per GPU: mpirun -np 2 ...\n");
    rt_nccl_finalize(&w, 0);
    return 2;
  }
  rt_watchdog_arm(&w, 4.0 * w.timeout_s, "calibrate-infer --collectives");
  coll_team t;
  const size_t max_bytes = (size_t)128 << 20;
  void *buf = NULL;
  schema_calibration meas;
  memset(&meas, 0, sizeof meas);
  int rc = 1, root = rt_nccl_is_root(&w);
  if (coll_team_init(&t, 1, &w.comms[0], &w.devices[0], &w.streams[0])) {
    fprintf(stderr, "tacorun calibrate-infer: coll_team_init: %s\n", coll_last_error());
    rt_nccl_finalize(&w, 1);
    return 1;
  }
  if (cudaMalloc(&buf, max_bytes) != cudaSuccess ||
      rt_fill_random_bf16(buf, (long long)(max_bytes / 2), 77 + w.ranks[0], 1.0f, w.streams[0], &e))
    goto done;
  coll_opts plain = coll_opts_default(), taco = coll_opts_default();
  plain.codec = COLL_CODEC_NONE, plain.min_bytes = 0;
  taco.min_bytes = 0; /* TACO G = 128 E4M3 at every size, as the executor sends it */
  char taco_name[48];
  snprintf(taco_name, sizeof taco_name, "allreduce.taco%d", taco.taco.group);
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
    double up, ut;
    size_t count = bytes / 2;
    if (time_coll(&w, &t, buf, count, &plain, &up, &e) || time_coll(&w, &t, buf, count, &taco, &ut, &e)) goto done;
    char taco_infer[64]; /* ".infer": read by inference predictions only, the training tables stay */
    snprintf(taco_infer, sizeof taco_infer, "%s.infer", taco_name);
    if (schema_calibration_add_coll(&meas, "allreduce.infer", w.nranks, (double)bytes, up) ||
        schema_calibration_add_coll(&meas, taco_infer, w.nranks, (double)bytes, ut)) {
      ts_fail_sys(&e, "out of memory");
      goto done;
    }
    if (root) fprintf(stderr, "calibrate-infer: allreduce %zu B: plain %.1f us, taco %.1f us\n", bytes, up, ut);
  }
  rc = 0;
  for (int i = 0; root && i < nin && rc == 0; i++) {
    schema_calibration cal;
    char out[1024];
    output_path(out, sizeof out, ins[i], out_dir);
    if (schema_calibration_load(ins[i], &cal, &e)) {
      rc = 1;
      break;
    }
    for (int c = 0; c < cal.n_colls; c++)
      if (cal.colls[c].nranks == w.nranks &&
          (!strcmp(cal.colls[c].name, "allreduce.infer") ||
           (!strncmp(cal.colls[c].name, taco_name, strlen(taco_name)) &&
            !strcmp(cal.colls[c].name + strlen(taco_name), ".infer"))))
        cal.colls[c].n = 0;
    for (int c = 0; c < meas.n_colls && rc == 0; c++)
      for (int k = 0; k < meas.colls[c].n; k++)
        if (schema_calibration_add_coll(&cal, meas.colls[c].name, meas.colls[c].nranks, meas.colls[c].pts[k].bytes,
                                        meas.colls[c].pts[k].us))
          rc = 1;
    schema_calibration_sort(&cal);
    char note[1024], env[320];
    ts_env_knobs(env, sizeof env);
    snprintf(note, sizeof note, "%.300s%sallreduce.infer and %s.infer (%d ranks) timed by tacorun calibrate-infer "
             "--collectives (one process per GPU, transport %s; env:%s)", cal.notes, cal.notes[0] ? "; " : "", taco_name,
             w.nranks, rt_nccl_transport(&w), *env ? env : " (none)");
    snprintf(cal.notes, sizeof cal.notes, "%.511s", note);
    if (rc == 0 && schema_calibration_save(&cal, out, &e)) rc = 1;
    schema_calibration_free(&cal);
    if (rc == 0) fprintf(stderr, "calibrate-infer: wrote %s\n", out);
  }
done:
  if (rc) fprintf(stderr, "tacorun calibrate-infer: rank %d: %s\n", w.ranks[0], e.msg);
  else rt_watchdog_disarm();
  if (buf) cudaFree(buf);
  coll_team_destroy(&t);
  schema_calibration_free(&meas);
  rt_nccl_finalize(&w, rc != 0);
  return rc;
}

/* --fp8-gemms-only: each file's "gemm_fp8" list gains the points of `meas` it lacks. */
static int add_fp8_points(const char *const *ins, int nin, const char *out_dir, const schema_calibration *meas, ts_err *e) {
  for (int i = 0; i < nin; i++) {
    schema_calibration cal;
    char out[1024];
    output_path(out, sizeof out, ins[i], out_dir);
    if (schema_calibration_load(ins[i], &cal, e)) return 1;
    int added = 0, bad = 0;
    for (int j = 0; j < meas->n_gemm_fp8 && !bad; j++) {
      const schema_gemm_point *g = &meas->gemm_fp8[j];
      double us;
      if (schema_gemm_fp8_us(&cal, g->m, g->n, g->k, &us)) continue;
      bad = schema_calibration_add_gemm_fp8(&cal, g->m, g->n, g->k, g->us) ? ts_fail_sys(e, "out of memory") : 0;
      added += !bad;
    }
    if (!bad) bad = schema_calibration_save(&cal, out, e);
    schema_calibration_free(&cal);
    if (bad) return 1;
    fprintf(stderr, "calibrate-infer: wrote %s (%d FP8 GEMM points added)\n", out, added);
  }
  return 0;
}

static void usage(FILE *out) {
  fprintf(out, "usage: tacorun calibrate-infer CALIBRATION.json... [--out-dir DIR] [--models DIR] [--quick]\n"
               "                                  [--prefill-layouts MODEL:TP,...] [--prefill-prompts S,...]\n"
               "                                  [--prefill-max-tokens N] [--prefill-kv-extra N]\n"
               "       mpirun -np 2 tacorun calibrate-infer CALIBRATION.json... --collectives [--out-dir DIR]\n"
               "                                              [--transport auto|p2p|shm|socket]\n"
               "Adds the decode-sized tables of inference plans to calibration files (in place, or to\n"
               "DIR/<same name> with --out-dir), timed once on GPU 0 (the tables do not depend on the\n"
               "transport): GEMMs with m = batch 1..64 of every zoo model at TP 1/2/4/8 (QKV, attention\n"
               "output, FC1, FC2, logits), \"attention_decode\" (and \"attention_decode_fp8\", the FP8 KV cache) by KV-cache bytes\n"
               "(Llama-3 8B at TP 2: 16 / 4 heads), and per head layout \"attention_decode[_fp8].g<G>\" for each G (query heads\n"
               "a KV head) of the zoo's head-dim-128 models, at 1, 2, 4 and 8 KV heads a GPU, grouped by batch x KV heads\n"
               "(batch 1..512 x KV length 128..32,768, a K or V cache of at most 4 GiB),\n"
               "\"attention_prefill\"\n"
               "by FLOPs and keyed by (head dim, prompt) (the --prefill-layouts, batch 1..64). GEMM shapes already\n"
               "in a file are kept; the attention tables are replaced.\n"
               "--collectives: the \"allreduce.infer\" and \"allreduce.taco128.infer\" tables (1 KiB .. 128 MiB; only\n"
               "inference predictions read them, in place of \"allreduce\" and \"allreduce.taco128\") timed as the\n"
               "executor runs them, one process per GPU, replace those of the files (use the file of the\n"
               "transport the run uses).\n"
               "options (defaults in brackets):\n"
               "  --out-dir DIR   write DIR/<name of each input> [the inputs are rewritten in place]\n"
               "  --models DIR    the model zoo whose GEMM shapes are timed [%s]\n"
               "  --quick         fewer repetitions [off]\n"
               "  --small-only    time only the small kernels of a decode step (norm, add, SwiGLU, embedding,\n"
               "                  RoPE + KV scatter, the QKV bias of models with one, TACO codec 4..128 KiB;\n"
               "                  the RoPE + KV scatter also at prefill sizes, 512..8,192 rows)\n"
               "                  queued in a stream and in a CUDA\n"
               "                  graph: tables \"<name>.eager\" and \"<name>.graph\" (calibrate_small.h) [off]\n"
               "  --decode-attention-only  time only the decode attention tables (plain and per head layout,\n"
               "                  replaced; the other tables as they are) [off]\n"
               "  --decode-attention v3|v4|v5  the decode attention kernel those tables time (infer_decode.h; the\n"
               "                  executor's default: `tacorun execute --decode-attention`) [v%d]\n"
               "  --per-query-head  also time decode attention read once per query head (infer_decode_pqh.h, the\n"
               "                  kernel of plans with \"decode_attention\": \"per-query-head\") into\n"
               "                  \"attention_decode_pqh[_fp8].g<G>\" for each G > 1 of the zoo's head-dim-128 models,\n"
               "                  over the same grid, keyed by the unique KV bytes, grouped by batch x KV heads\n"
               "                  (replaced); with --decode-attention-only, only these tables [off]\n"
               "  --fp8-gemms-only  time only the FP8 GEMMs of inference plans with \"quantization\": \"fp8\": the\n"
               "                  forward keys of qkv, attention output, FC1 and FC2 of every dense zoo model at TP\n"
               "                  1/2/4/8, m = 1..64 (decode) and 128..65,536 (prefill), E4M3 operands scaled per tensor,\n"
               "                  fast accumulation, as `tacorun calibrate --only gemm_fp8` times its keys; keys\n"
               "                  the first file's \"gemm_fp8\" list has are skipped; the others join every file's\n"
               "                  list (check the FP8 GEMM first: tacorun calibrate --check --only gemm_fp8) [off]\n"
               "  --gemm-passes N  passes over the FP8 keys, alternating direction, geometric mean kept (1-8) [2]\n"
               "  --gemm-fp8-tsv FILE  every pass's time of every FP8 key [not written]\n"
               "  --decode-gemms-only  time the decode GEMMs only (no prefill GEMMs, attention or small\n"
               "                  kernels; the files' attention tables are left as they are) [off]\n"
               "  --prefill-layouts MODEL:TP,...  head layouts of the prefill attention tables: zoo models at a\n"
               "                  TP degree (heads / TP, KV heads / TP, head dim) [llama3-8b:2]\n"
               "  --prefill-prompts S,...  prompt lengths of the prefill attention tables [128,256,512,1024,2048,4096,8192]\n"
               "  --prefill-max-tokens N  largest batch x prompt timed there (batch 1..64) [65536]\n"
               "  --prefill-kv-extra N    the KV caches there hold prompt + N positions a sequence (the executor's\n"
               "                  hold prompt + generate), so the keys and values of consecutive sequences are\n"
               "                  prompt + N rows apart; the table's key does not record N [0]\n"
               "  --collectives   time the two all-reduce tables instead of the GEMMs and attention [off]\n"
               RT_TRANSPORT_USAGE
               "reads:  the CALIBRATION.json files, the model zoo\n"
               "writes: the CALIBRATION.json files (or their copies in --out-dir); progress on standard error\n",
          model_zoo_dir(), INFER_DECODE_DEFAULT);
}

/* Adds what `meas` holds to `cal`: GEMM shapes it lacks, and the attention tables (replaced);
 * the prefill GEMMs of `pre` replace the file's points of the same shape. Points of one key
 * within a table are averaged (several shapes of the attention tables share a key). */
static int merge(schema_calibration *cal, const schema_calibration *meas, const schema_calibration *pre,
                 int gemms_only, int small_only, int dec_attn_only, int pqh, int pqh_only) {
  /* --small-only: its ".eager" / ".graph" tables replace the file's */
  for (int i = 0; small_only && i < cal->n_kernels; i++) {
    size_t l = strlen(cal->kernels[i].name);
    if (l > 6 && (!strcmp(cal->kernels[i].name + l - 6, ".eager") || !strcmp(cal->kernels[i].name + l - 6, ".graph")))
      cal->kernels[i].n = 0;
  }
  for (int i = 0; i < pre->n_gemm; i++) {
    const schema_gemm_point *g = &pre->gemm[i];
    int found = 0;
    for (int j = 0; j < cal->n_gemm; j++)
      if (cal->gemm[j].m == g->m && cal->gemm[j].n == g->n && cal->gemm[j].k == g->k) cal->gemm[j].us = g->us, found = 1;
    if (!found && schema_calibration_add_gemm(cal, g->m, g->n, g->k, g->us)) return -1;
  }
  for (int i = 0; !gemms_only && i < cal->n_kernels; i++) {
    const char *k = cal->kernels[i].name;
    if (!strncmp(k, "attention_decode_pqh", 20)) { /* --per-query-head's: replaced when timed */
      if (pqh) cal->kernels[i].n = 0;
      continue;
    }
    if (pqh_only) continue; /* --decode-attention-only --per-query-head: the other tables as they are */
    if (!strcmp(k, "attention_decode") || !strcmp(k, "attention_decode_fp8") || !strncmp(k, "attention_decode.", 17) ||
        !strncmp(k, "attention_decode_fp8.", 21) ||
        (!dec_attn_only && (!strcmp(k, "attention_prefill") || !strncmp(k, "attention_prefill.", 18))))
      cal->kernels[i].n = 0;
  }
  for (int i = 0; i < meas->n_gemm; i++) {
    const schema_gemm_point *g = &meas->gemm[i];
    if (!have_gemm(cal, g->m, g->n, g->k) && schema_calibration_add_gemm(cal, g->m, g->n, g->k, g->us)) return -1;
  }
  for (int t = 0; t < meas->n_kernels; t++) {
    const schema_kernel_table *mt = &meas->kernels[t];
    for (int i = 0; i < mt->n; i++) {
      const schema_kernel_point *k = &mt->pts[i];
      int seen = 0, same = 0;
      double sum = 0;
      for (int j = 0; j < mt->n; j++)
        if (mt->pts[j].x == k->x && mt->pts[j].group == k->group) {
          if (j < i) seen = 1;
          sum += mt->pts[j].us, same++;
        }
      if (seen) continue;
      /* a point the file already has (a training table) stays as it is */
      int have = 0;
      for (int c = 0; c < cal->n_kernels; c++)
        if (!strcmp(cal->kernels[c].name, mt->name))
          for (int j = 0; j < cal->kernels[c].n; j++)
            if (cal->kernels[c].pts[j].x == k->x && cal->kernels[c].pts[j].group == k->group) have = 1;
      if (!have && schema_calibration_add_kernel(cal, mt->name, mt->by_flops, k->x, k->group, sum / same)) return -1;
    }
  }
  schema_calibration_sort(cal);
  return 0;
}

/* "128,256,..." into out (1..cap values, each 2..65536); -1 when malformed. */
static int parse_ints(const char *arg, int *out, int cap, int *n) {
  *n = 0;
  const char *p = arg;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 2 || v > 65536 || *n == cap || (*end && *end != ',')) return -1;
    out[(*n)++] = (int)v;
    p = *end ? end + 1 : end;
  }
  return *n ? 0 : -1;
}

/* "MODEL:TP,..." against the zoo: each model by name, TP dividing its heads and KV heads. */
static int prefill_layouts(const char *arg, const model_config *models, int nm, pre_layout *out, int cap, int *n,
                           ts_err *e) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", arg);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(tok, ':');
    if (!colon || *n == cap) return ts_fail(e, arg, NULL, "want MODEL:TP[,MODEL:TP...] (at most 16)");
    *colon = '\0';
    char *end;
    long tp = strtol(colon + 1, &end, 10);
    const model_config *mc = NULL;
    for (int i = 0; i < nm; i++)
      if (!strcmp(models[i].name, tok)) mc = &models[i];
    if (!mc) return ts_fail(e, arg, tok, "no such model in the zoo");
    if (*end || tp < 1 || mc->heads % tp || mc->kv_heads % tp)
      return ts_fail(e, arg, tok, "TP must be a positive divisor of the model's heads and KV heads");
    out[(*n)++] = (pre_layout){mc, (int)tp};
  }
  return *n ? 0 : ts_fail(e, arg, NULL, "no layout given");
}

int cmd_calibrate_infer(int argc, char **argv) {
  const char *ins[16], *out_dir = NULL, *models_dir = NULL, *layouts_arg = "llama3-8b:2";
  int nin = 0, quick = 0, collectives = 0, gemms_only = 0, small_only = 0, dec_attn_only = 0, fp8_only = 0;
  int fp8_passes = 2, dec_ver = INFER_DECODE_DEFAULT, pqh = 0;
  const char *fp8_tsv = NULL;
  int prompts[32] = {128, 256, 512, 1024, 2048, 4096, 8192}, np = 7;
  long long max_tokens = 65536;
  int kv_extra = 0;
  coll_transport transport = COLL_TRANSPORT_AUTO;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--out-dir") && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (!strcmp(argv[i], "--models") && i + 1 < argc) {
      models_dir = argv[++i];
    } else if (!strcmp(argv[i], "--prefill-layouts") && i + 1 < argc) {
      layouts_arg = argv[++i];
    } else if (!strcmp(argv[i], "--prefill-prompts") && i + 1 < argc) {
      if (parse_ints(argv[++i], prompts, 32, &np)) {
        fprintf(stderr, "tacorun calibrate-infer: --prefill-prompts '%s': want 1..32 lengths 2..65536, comma-separated\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--prefill-max-tokens") && i + 1 < argc) {
      char *end;
      max_tokens = strtoll(argv[++i], &end, 10);
      if (*end || max_tokens < 2 || max_tokens > 1048576) {
        fprintf(stderr, "tacorun calibrate-infer: --prefill-max-tokens '%s': want 2..1048576\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--prefill-kv-extra") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 0 || v > 65536) {
        fprintf(stderr, "tacorun calibrate-infer: --prefill-kv-extra '%s': want 0..65536\n", argv[i]);
        return 2;
      }
      kv_extra = (int)v;
    } else if (!strcmp(argv[i], "--fp8-gemms-only")) {
      fp8_only = 1;
    } else if (!strcmp(argv[i], "--gemm-passes") && i + 1 < argc) {
      char *end;
      fp8_passes = (int)strtol(argv[++i], &end, 10);
      if (*end || fp8_passes < 1 || fp8_passes > CALIB_MAX_GEMM_PASSES) {
        fprintf(stderr, "tacorun calibrate-infer: --gemm-passes '%s': want 1..%d\n", argv[i], CALIB_MAX_GEMM_PASSES);
        return 2;
      }
    } else if (!strcmp(argv[i], "--gemm-fp8-tsv") && i + 1 < argc) {
      fp8_tsv = argv[++i];
    } else if (!strcmp(argv[i], "--decode-gemms-only")) {
      gemms_only = 1;
    } else if (!strcmp(argv[i], "--small-only")) {
      small_only = 1;
    } else if (!strcmp(argv[i], "--decode-attention-only")) {
      dec_attn_only = 1;
    } else if (!strcmp(argv[i], "--per-query-head")) {
      pqh = 1;
    } else if (!strcmp(argv[i], "--decode-attention") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "v3") && strcmp(v, "v4") && strcmp(v, "v5")) {
        fprintf(stderr, "tacorun calibrate-infer: --decode-attention: '%s' must be v3, v4 or v5\n", v);
        return 2;
      }
      dec_ver = v[1] - '0';
    } else if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else if (!strcmp(argv[i], "--collectives")) {
      collectives = 1;
    } else if (!strcmp(argv[i], "--transport") && i + 1 < argc) {
      ts_err te;
      if (rt_transport_arg(argv[++i], &transport, &te)) {
        fprintf(stderr, "tacorun calibrate-infer: %s\n", te.msg);
        return 2;
      }
    } else if (argv[i][0] == '-' || nin == 16) {
      fprintf(stderr, "tacorun calibrate-infer: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else {
      ins[nin++] = argv[i];
    }
  }
  if (!nin) {
    usage(stderr);
    return 2;
  }
  if (collectives) {
    ts_err e;
    for (int i = 0; i < nin; i++) { /* every file is read before the GPUs are touched */
      schema_calibration c;
      if (schema_calibration_load(ins[i], &c, &e)) {
        fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
        return ts_exit_status(&e);
      }
      schema_calibration_free(&c);
    }
    if (rt_cuda_device_count() < 1) {
      fprintf(stderr, "tacorun calibrate-infer: no CUDA device\n");
      return 1;
    }
    return coll_tables(ins, nin, out_dir, 120, transport);
  }
  ts_err e;
  schema_calibration first, meas, pre;
  memset(&meas, 0, sizeof meas);
  memset(&pre, 0, sizeof pre);
  /* every file is read before the GPU is touched */
  for (int i = nin - 1; i >= 0; i--) {
    if (schema_calibration_load(ins[i], &first, &e)) {
      fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
      return ts_exit_status(&e);
    }
    if (i) schema_calibration_free(&first);
  }
  static model_config models[MAX_MODELS];
  int nm = 0, rc = 1;
  const char *dir = models_dir ? models_dir : model_zoo_dir();
  if (zoo_models(dir, models, &nm, &e) && (models_dir || zoo_models("models", models, &nm, &e))) {
    fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
    schema_calibration_free(&first);
    return 2;
  }
  const model_config *llama = NULL;
  for (int i = 0; i < nm; i++)
    if (!strcmp(models[i].name, "llama3-8b")) llama = &models[i];
  if (!llama) {
    fprintf(stderr, "tacorun calibrate-infer: the zoo has no llama3-8b (the attention tables' head layout)\n");
    schema_calibration_free(&first);
    return 2;
  }
  pre_layout lay[16];
  int nl = 0;
  if (prefill_layouts(layouts_arg, models, nm, lay, 16, &nl, &e)) {
    fprintf(stderr, "tacorun calibrate-infer: --prefill-layouts: %s\n", e.msg);
    schema_calibration_free(&first);
    return 2;
  }
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun calibrate-infer: no CUDA device\n");
    schema_calibration_free(&first);
    return 1;
  }
  calib_budget bud = calib_budget_default(quick);
  exec_gemm *g = NULL;
  int added = 0;
  /* GEMM shapes the first file already has are not timed again */
  for (int i = 0; i < first.n_gemm; i++)
    if (schema_calibration_add_gemm(&meas, first.gemm[i].m, first.gemm[i].n, first.gemm[i].k, -1.0)) goto done;
  int known = meas.n_gemm;
  int pre_timed = 0;
  if (fp8_only) {
    if (cudaSetDevice(0) != cudaSuccess ||
        calib_infer_fp8_gemms(models, nm, &first, fp8_passes, quick, fp8_tsv, &meas, &e)) {
      fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
      goto done;
    }
    rc = add_fp8_points(ins, nin, out_dir, &meas, &e);
    if (rc) fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
    goto done;
  }
  if (small_only) {
    if (cudaSetDevice(0) != cudaSuccess || calib_small_kernels(&meas, models, nm, &e)) {
      fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
      goto done;
    }
    gemms_only = 1; /* the merge keeps the file's attention tables */
  } else if (dec_attn_only) {
    if (cudaSetDevice(0) != cudaSuccess || (!pqh && decode_attention_table(&meas, models, nm, &bud, dec_ver, &e)) ||
        (pqh && decode_pqh_tables(&meas, models, nm, &bud, &e))) {
      fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
      goto done;
    }
  } else if (cudaSetDevice(0) != cudaSuccess || exec_gemm_create(&g, &e) ||
      decode_gemms(&meas, g, models, nm, NULL, &bud, &added, &e) ||
      (!gemms_only &&
       (decode_gemms(&pre, g, models, nm, llama, &bud, &pre_timed, &e) || decode_attention_table(&meas, models, nm, &bud, dec_ver, &e) ||
        prefill_attention_table(&meas, g, lay, nl, prompts, np, max_tokens, kv_extra, &bud, &e) ||
        small_memops(&meas, &bud, &e) || (pqh && decode_pqh_tables(&meas, models, nm, &bud, &e))))) {
    fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
    goto done;
  }
  /* keep only what was timed here */
  memmove(meas.gemm, meas.gemm + known, (size_t)(meas.n_gemm - known) * sizeof *meas.gemm);
  meas.n_gemm -= known;
  for (int i = 0; i < nin; i++) {
    schema_calibration cal;
    char out[1024];
    output_path(out, sizeof out, ins[i], out_dir);
    if (schema_calibration_load(ins[i], &cal, &e)) {
      fprintf(stderr, "tacorun calibrate-infer: %s\n", e.msg);
      goto done;
    }
    int bad = merge(&cal, &meas, &pre, gemms_only, small_only, dec_attn_only, pqh && !gemms_only,
                    pqh && dec_attn_only) || schema_calibration_save(&cal, out, &e);
    schema_calibration_free(&cal);
    if (bad) {
      fprintf(stderr, "tacorun calibrate-infer: %s: %s\n", out, e.msg);
      goto done;
    }
    fprintf(stderr, "calibrate-infer: wrote %s\n", out);
  }
  fprintf(stderr, "calibrate-infer: %d models, %d GEMM shapes timed\n", nm, added);
  rc = 0;
done:
  if (g) exec_gemm_destroy(g);
  schema_calibration_free(&first);
  schema_calibration_free(&meas);
  schema_calibration_free(&pre);
  return rc;
}
