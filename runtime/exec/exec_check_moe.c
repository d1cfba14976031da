/* exec_check_moe.c — `tacorun execute --check`, mixture-of-experts part: the
 * MoE layers (exec_moe.c) on one GPU, walked from the plan's own program,
 * against the float64 reference (exec_ref_moe.c, itself checked by finite
 * differences in tests/test_exec_ref.c): the loss, every tensor's gradient
 * (router, stacked experts, shared FFN, the dense layer and attention around
 * them) within the dense check's tolerances, then 30 AdamW steps on one batch
 * (the loss must fall); and the router top-k backward kernel against its
 * plain-C reference (bits equal, fresh random inputs, poisoned output);
 * on two ranks, EP = DP = 2 (check_ep). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_check.h"
#include "exec_model.h"
#include "exec_walk.h"
#include "gpu_check.h"
#include "moe_route.h"
#include "rt_world.h"

static const exec_ref_config moe_configs[] = {
    /* models/moe-tiny.json's shape (Qwen3 / DeepSeek-V3 in small): a dense first layer, then an MoE layer of 8
     * experts (top 2) of width 128 and one shared expert; SwiGLU, RMSNorm, RoPE, GQA, untied output weight */
    {.vocab = 512, .hidden = 256, .heads = 8, .kv_heads = 2, .ffn = 512, .layers = 2, .seq = 128, .batch = 1,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .rope_theta = 1e6, .untied = 1,
     .experts = 8, .top_k = 2, .expert_ffn = 128, .shared_ffn = 128, .dense_layers = 1},
    /* Mixtral in small: every layer MoE, 4 experts (top 2) of width 256, no shared expert */
    {.vocab = 512, .hidden = 256, .heads = 8, .kv_heads = 2, .ffn = 256, .layers = 2, .seq = 128, .batch = 1,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-5, .rope_theta = 1e6, .untied = 1,
     .experts = 4, .top_k = 2, .expert_ffn = 256},
};

/* moe_topk_bwd against moe_topk_bwd_ref: bits equal. Returns 1 when equal, 0 when not, -1 on error. */
static int check_topk_bwd(cudaStream_t s, FILE *log, ts_err *e) {
  const int t = 1000, E = 64, k = 6;
  const size_t n = (size_t)t * k;
  int32_t *idx = malloc(n * 4), *d_idx = NULL;
  float *w = malloc(n * 4), *dw = malloc(n * 4), *d_w = NULL, *d_dw = NULL;
  uint16_t *ref = malloc((size_t)t * E * 2), *got = malloc((size_t)t * E * 2), *d_out = NULL;
  int rc = -1;
  if (!idx || !w || !dw || !ref || !got) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  unsigned long long x = 88172645463325252ull ^ (unsigned long long)time(NULL); /* fresh inputs each run */
  for (int r = 0; r < t; r++)
    for (int j = 0, base = 0; j < k; j++) { /* k distinct experts per token: base + 11 j (mod 64) */
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (j == 0) base = (int)(x % (unsigned long long)E);
      idx[r * k + j] = (int32_t)((base + j * 11) % E);
      w[r * k + j] = (float)((x >> 11) % 1000) / 1000.0f;
      dw[r * k + j] = (float)((long long)((x >> 23) % 2001) - 1000) / 300.0f;
    }
  moe_topk_bwd_ref(idx, w, dw, t, E, k, ref);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d_idx, n * 4), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d_w, n * 4), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d_dw, n * 4), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d_out, (size_t)t * E * 2), out);
  CUDA_CHECK_GOTO(e, cudaMemcpyAsync(d_idx, idx, n * 4, cudaMemcpyHostToDevice, s), out);
  CUDA_CHECK_GOTO(e, cudaMemcpyAsync(d_w, w, n * 4, cudaMemcpyHostToDevice, s), out);
  CUDA_CHECK_GOTO(e, cudaMemcpyAsync(d_dw, dw, n * 4, cudaMemcpyHostToDevice, s), out);
  CUDA_CHECK_GOTO(e, cudaMemsetAsync(d_out, 0xff, (size_t)t * E * 2, s), out); /* poisoned: NaN bits */
  CUDA_CHECK_GOTO(e, (cudaError_t)moe_topk_bwd(d_idx, d_w, d_dw, t, E, k, d_out, s), out);
  CUDA_CHECK_GOTO(e, cudaMemcpyAsync(got, d_out, (size_t)t * E * 2, cudaMemcpyDeviceToHost, s), out);
  CUDA_CHECK_GOTO(e, cudaStreamSynchronize(s), out);
  rc = !memcmp(ref, got, (size_t)t * E * 2);
  fprintf(log, "  moe_topk_bwd (router top-k backward) vs its C reference, %d tokens x %d experts, top %d: %s\n", t, E,
          k, rc ? "bits equal" : "DIFFERENT  FAILED");
out:
  cudaFree(d_idx), cudaFree(d_w), cudaFree(d_dw), cudaFree(d_out);
  free(idx), free(w), free(dw), free(ref), free(got);
  return rc;
}

/* The reference's loss and gradient of batch 0, and the model loaded with the reference weights. */
typedef struct {
  double *params, *grad, *local, loss;
  int32_t *tok, *lab;
  size_t total;
} moe_ref;

static void moe_ref_free(moe_ref *r) { free(r->params), free(r->grad), free(r->local), free(r->tok), free(r->lab); }

static int moe_ref_make(const exec_ref_config *cfg, moe_ref *r, ts_err *e) {
  memset(r, 0, sizeof *r);
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  exec_ref_tensors(cfg, t, EXEC_REF_MAX_TENSORS, &r->total);
  const size_t T = (size_t)cfg->batch * cfg->seq;
  r->params = malloc(r->total * 8), r->grad = malloc(r->total * 8);
  int *ti = malloc(T * sizeof *ti), *li = malloc(T * sizeof *li);
  r->tok = malloc(T * 4), r->lab = malloc(T * 4);
  int rc = -1;
  if (!r->params || !r->grad || !ti || !li || !r->tok || !r->lab) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  exec_ref_init(cfg, 2024, 1, r->params);
  exec_ref_tokens(cfg, 100, ti, li);
  for (size_t j = 0; j < T; j++) r->tok[j] = ti[j], r->lab[j] = li[j];
  rc = exec_ref_loss_grad(cfg, r->params, ti, li, &r->loss, r->grad, e);
out:
  free(ti), free(li);
  return rc;
}

/* Relative L2 error of each tensor against the reference; prints them, returns the count out of tolerance. */
static int compare_grads(const exec_model *m, const float *g, const double *ref, double tol, FILE *log) {
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < m->ntensors; i++) {
    const exec_tensor *lt = &m->tensors[i];
    double num = 0, den = 0;
    for (size_t j = lt->offset; j < lt->offset + lt->rows * lt->cols; j++) {
      double d = (double)g[j] - ref[j];
      num += d * d, den += ref[j] * ref[j];
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = rel <= tol; /* NaN fails */
    bad += !ok;
    worst = rel > worst || !ok ? rel : worst;
    fprintf(log, "    %-20s %10.2e%s\n", lt->name, rel, ok ? "" : "  FAILED");
  }
  fprintf(log, "    %-20s %10.2e  (tolerance %.0e)\n", "worst", worst, tol);
  return bad;
}

/* One config: the walked plan's gradient and loss against float64, then 30 AdamW steps. */
static int check_one(rt_nccl *w, const exec_ref_config *cfg, FILE *log, int *failures, ts_err *e) {
  moe_ref r;
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  int rc = -1, created = 0, bad = 0;
  float *g = NULL, loss = 0, first = 0, last = 0;
  char model_path[256] = "", text[1024];
  if (moe_ref_make(cfg, &r, e)) goto out;
  if (exec_check_plan_text(cfg, 1, 1, 1, 1, NULL, NULL, NULL, model_path, sizeof model_path, text, sizeof text, e))
    goto out;
  created = 1; /* (exec_model_destroy frees what a failed create allocated) */
  if (exec_model_create(&m, cfg, 1, 1, 0, NULL, 1, 0, NULL, w->streams[0], e)) goto out;
  if (exec_model_load_ref(&m, r.params, e) || exec_model_set_data(&m, r.tok, r.lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check MoE plan", 0, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || exec_model_check_finite(&m, 0, &loss, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  r.local = malloc(m.nparams * sizeof *r.local);
  if (!g || !r.local) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e)) goto out;
  exec_model_shard_of(&m, r.grad, r.local);
  fprintf(log, "\nMoE model: hidden %d, heads %d (kv %d), %d layers (%d dense), %d experts top %d of width %d, shared "
          "FFN %d, seq %d: plan program of %d ops, one GPU (ep 1)\n", cfg->hidden, cfg->heads, cfg->kv_heads,
          cfg->layers, cfg->dense_layers, cfg->experts, cfg->top_k, cfg->expert_ffn, cfg->shared_ffn, cfg->seq,
          wk.prog.n);
  int loss_ok = fabs(loss - r.loss) <= CHECK_TOL_LOSS * r.loss;
  fprintf(log, "  loss: float64 %.6f  executor %.6f%s\n  relative L2 error of each gradient vs float64:\n", r.loss,
          loss, loss_ok ? "" : "  FAILED");
  bad += !loss_ok + compare_grads(&m, g, r.local, CHECK_TOL_GRAD, log);
  m.lr = 1e-3f;
  for (int s = 0; s < 30; s++) {
    if (exec_walk_iteration(&m, &wk, 0, e) || exec_model_check_finite(&m, s, &loss, e)) goto out;
    if (s == 0) first = loss;
    last = loss;
  }
  bad += !(last < 0.9f * first);
  fprintf(log, "  30 AdamW steps (lr 1e-3) on one batch: loss %.4f -> %.4f\n  %s\n", first, last,
          bad ? "FAILED" : "passed");
  *failures += bad;
  rc = 0;
out:
  if (model_path[0]) remove(model_path);
  exec_walk_destroy(&wk);
  if (created) exec_model_destroy(&m);
  free(g);
  moe_ref_free(&r);
  return rc;
}

/* The codec's tolerance: FP8 changes the numbers by design; the bound of the
 * compressed TP/DP checks (exec_check.c, CHECK_TOL_CODEC), here against float64. */
#define CHECK_TOL_EP_CODEC 1e-1

/* EP: each rank holds its own experts' gradients (the others' zero): the
 * expert tensors summed over the ranks, so that rank 0 compares all of them. */
static int gather_experts(rt_nccl *w, const exec_model *m, float *g, ts_err *e) {
  double *d = calloc(m->nparams, sizeof *d);
  if (!d) return ts_fail_sys(e, "exec check: out of memory");
  for (int i = 0; i < m->ntensors; i++) {
    const exec_tensor *t = &m->tensors[i];
    if (t->kind == EXEC_T_EXPERT_FC1 || t->kind == EXEC_T_EXPERT_FC2)
      for (size_t j = t->offset; j < t->offset + t->rows * t->cols; j++) d[j] = g[j];
  }
  int rc = rt_world_sum(w, d, (int)m->nparams, e);
  for (int i = 0; i < m->ntensors && !rc; i++) {
    const exec_tensor *t = &m->tensors[i];
    if (t->kind == EXEC_T_EXPERT_FC1 || t->kind == EXEC_T_EXPERT_FC2)
      for (size_t j = t->offset; j < t->offset + t->rows * t->cols; j++) g[j] = (float)d[j];
  }
  free(d);
  return rc;
}

/* EP = DP = 2 (exec_moe_ep.c) on two ranks: rank r trains on batch r (seed
 * 100 + r, as the DP checks); the dense gradients as DP reduced them, the
 * expert ones summed over the ranks (each rank holds its experts'; rank 0's
 * view counted) against the float64 mean over both batches, rank 0's loss
 * against batch 0's. Run when there are exactly two ranks. */
static int check_ep(rt_nccl *w, const exec_ref_config *cfg, int taco, FILE *log, int *failures, ts_err *e) {
  const int rank = w->ranks[0], n = 2;
  moe_ref r;
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  int rc = -1, created = 0, bad = 0;
  float *g = NULL, loss = 0;
  double *g1 = NULL, loss1 = 0;
  int *ti = NULL, *li = NULL;
  char model_path[256] = "", text[1024];
  const size_t T = (size_t)cfg->batch * cfg->seq;
  if (moe_ref_make(cfg, &r, e)) goto out; /* batch 0: its loss, its gradient */
  g1 = malloc(r.total * 8), ti = malloc(T * sizeof *ti), li = malloc(T * sizeof *li);
  if (!g1 || !ti || !li) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  exec_ref_tokens(cfg, 101, ti, li); /* batch 1 */
  if (exec_ref_loss_grad(cfg, r.params, ti, li, &loss1, g1, e)) goto out;
  for (size_t j = 0; j < r.total; j++) r.grad[j] = (r.grad[j] + g1[j]) / n;
  if (rank == 1)
    for (size_t j = 0; j < T; j++) r.tok[j] = ti[j], r.lab[j] = li[j];
  /* TACO: every token all-to-all compressed (codec_min_bytes 0), G 128, E4M3 */
  const char *codec = taco ? ", \"codec_min_bytes\": 0, \"codec\": { \"ep\": { \"kind\": \"taco\", \"group\": 128, "
                             "\"fp8\": \"e4m3\" } }"
                           : NULL;
  if (exec_check_plan_text(cfg, 1, n, 1, 1, ", \"ep\": 2", NULL, codec, model_path, sizeof model_path, text,
                           sizeof text, e))
    goto out;
  created = 1;
  if (exec_model_create(&m, cfg, 1, 1, 0, NULL, n, rank, w->comms[0], w->streams[0], e)) goto out;
  if (exec_model_load_ref(&m, r.params, e) || exec_model_set_data(&m, r.tok, r.lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check MoE EP plan", rank, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || rt_nccl_wait(w, e) || exec_model_check_finite(&m, 0, &loss, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  r.local = malloc(m.nparams * sizeof *r.local);
  if (!g || !r.local) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e) || gather_experts(w, &m, g, e)) goto out;
  exec_model_shard_of(&m, r.grad, r.local);
  int colls = 0, coded = 0;
  for (int i = 0; i < wk.prog.n; i++)
    if (wk.prog.ops[i].kind == PLAN_OP_COLLECTIVE && wk.prog.ops[i].model_op == PLAN_MOP_MOE_TOKENS)
      colls++, coded += wk.prog.ops[i].codec.kind == PLAN_CODEC_TACO;
  fprintf(log, "\nMoE EP 2%s (dp 2, ep 2, %d experts top %d, 2 ranks): plan program of %d ops, %d token all-to-alls "
          "(%d TACO-compressed; NCCL send/recv)\n", taco ? " TACO" : "", cfg->experts, cfg->top_k, wk.prog.n, colls,
          coded);
  bad += taco && coded != colls;
  int loss_ok = fabs(loss - r.loss) <= CHECK_TOL_LOSS * r.loss;
  fprintf(log, "  MoE EP loss (rank 0's batch): float64 %.6f  executor %.6f%s\n  relative L2 error of each reduced "
          "gradient vs the float64 mean over both batches:\n", r.loss, loss, loss_ok ? "" : "  FAILED");
  bad += !loss_ok + compare_grads(&m, g, r.local, taco ? CHECK_TOL_EP_CODEC : CHECK_TOL_GRAD, log);
  fprintf(log, "  MoE EP%s check: %s\n", taco ? " TACO" : "", bad ? "FAILED" : "passed");
  if (rank == 0) *failures += bad; /* rank 0 counts, as the DP checks */
  rc = 0;
out:
  if (model_path[0]) remove(model_path);
  exec_walk_destroy(&wk);
  if (created) exec_model_destroy(&m);
  free(g), free(g1), free(ti), free(li);
  moe_ref_free(&r);
  return rc;
}

int exec_check_moe(rt_nccl *w, FILE *log, int *failures, ts_err *e) {
  int ok = check_topk_bwd(w->streams[0], log, e);
  if (ok < 0) return -1;
  *failures += !ok;
  for (size_t i = 0; i < sizeof moe_configs / sizeof *moe_configs; i++)
    if (check_one(w, &moe_configs[i], log, failures, e)) return -1;
  if (w->nranks == 2 && (check_ep(w, &moe_configs[1], 0, log, failures, e) ||
                         check_ep(w, &moe_configs[1], 1, log, failures, e)))
    return -1;
  return 0;
}
