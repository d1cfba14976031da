/* exec_check_moe.c — `tacorun execute --check`, mixture-of-experts part: the
 * MoE layers (exec_moe.c) on one GPU, walked from the plan's own program,
 * against the float64 reference (exec_ref_moe.c, itself checked by finite
 * differences in tests/test_exec_ref.c): the loss, every tensor's gradient
 * (router, stacked experts, shared FFN, the dense layer and attention around
 * them) within the dense check's tolerances, then 30 AdamW steps on one batch
 * (the loss must fall); and the router top-k backward kernel against its
 * plain-C reference (bits equal, fresh random inputs, poisoned output);
 * DeepSeek-V3's routing kernels against theirs (exec_check_route.c), and a
 * DeepSeek-V3-like router (sigmoid, groups, scaling, a random balancing bias)
 * against float64, with the bias update of the first step against its C
 * reference; on n >= 2 ranks, expert parallelism EP n = DP n and EP n / 2 < DP n (check_ep), and the
 * DeepSeek-V3-like model at EP n = DP n with its bias update over DP (ep_bias_step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_check.h"
#include "exec_ep.h"
#include "exec_model.h"
#include "exec_walk.h"
#include "gpu_check.h"
#include "exec_moe.h"
#include "moe_route.h"
#include "moe_route_group.h"
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
    /* Qwen3-30B-A3B in small (last: the EP runs take the first two): every layer MoE, 8 experts (top 2) of width
     * 128, head_dim 64 wider than hidden / heads (8 query heads of 64 on hidden 256: Q 512 wide), the QK norm;
     * seq 192, as grouped-query attention of head_dim 64 needs (a multiple of 64, >= 2 head_dim + 4) */
    {.vocab = 512, .hidden = 256, .heads = 8, .kv_heads = 2, .ffn = 512, .layers = 2, .seq = 192, .batch = 1,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .rope_theta = 1e6, .untied = 1,
     .experts = 8, .top_k = 2, .expert_ffn = 128, .head_dim = 64, .qk_norm = 1},
    /* DeepSeek-V3's router in small (its attention is the executor's GQA: MLA is not run here): a dense first
     * layer, then 16 experts in 4 groups (2 kept: a group's score the sum of its top 4 / 2 = 2), top 4, width
     * 128, one shared expert, sigmoid scores, scaling 2.5, the balancing bias (set to random values, the
     * float64 reference given the same), updated at 1e-3 a step */
    {.vocab = 512, .hidden = 256, .heads = 8, .kv_heads = 2, .ffn = 512, .layers = 2, .seq = 128, .batch = 1,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .rope_theta = 1e4, .untied = 1,
     .experts = 16, .top_k = 4, .expert_ffn = 128, .shared_ffn = 128, .dense_layers = 1, .router_sigmoid = 1,
     .router_groups = 4, .router_group_topk = 2, .router_scale = 2.5, .router_bias_rate = 1e-3},
};

/* A random balancing bias in [-0.05, 0.05] per layer and expert (float values, as the executor holds them):
 * of the order of the scores' gaps, so it changes choices. */
static double *random_bias(const exec_ref_config *cfg) {
  const size_t n = (size_t)cfg->layers * cfg->experts;
  double *b = malloc(n * sizeof *b);
  unsigned long long x = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; b && i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b[i] = (double)(float)(-0.05 + 0.1 * (double)(x >> 11) / 9007199254740992.0);
  }
  return b;
}

/* The bias update of the first training step: the loads of the check's iteration (no optimizer) and of the
 * step's forward (the same weights, batch and bias: the same choice) moved b0 to b1 as moe_bias_update_ref
 * does on twice the loads; each MoE layer's loads sum to its tokens x top_k. Returns the count of failures. */
static int check_bias_step(const exec_model *m, const long long *load, const float *b0, const float *b1, FILE *log) {
  const exec_ref_config *c = &m->cfg;
  const size_t n = (size_t)c->layers * c->experts;
  int32_t *l2 = malloc(n * sizeof *l2);
  float *want = malloc(n * sizeof *want);
  int bad = 0, moved = 0;
  if (!l2 || !want) {
    free(l2), free(want);
    fprintf(log, "  bias update: out of memory  FAILED\n");
    return 1;
  }
  for (int l = 0; l < c->layers; l++) {
    long long sum = 0;
    for (int x = 0; x < c->experts; x++) sum += load[(size_t)l * c->experts + x];
    bad += sum != (exec_ref_layer_is_moe(c, l) ? m->tokens * c->top_k : 0);
  }
  for (size_t i = 0; i < n; i++) l2[i] = (int32_t)(2 * load[i]), want[i] = b0[i];
  moe_bias_update_ref(l2, want, c->layers, c->experts, (float)c->router_bias_rate);
  for (size_t i = 0; i < n; i++) moved += b1[i] != b0[i];
  const int same = !memcmp(want, b1, n * sizeof *want);
  bad += !same;
  fprintf(log, "  balancing bias after the first step (rate %g): %d of %zu moved, %s moe_bias_update_ref on the "
          "step's loads%s\n", c->router_bias_rate, moved, n, same ? "bits equal to" : "DIFFERENT from",
          bad ? "  FAILED" : "");
  free(l2), free(want);
  return bad;
}

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

/* The sigmoid router's choice is discrete: where two experts' scores nearly tie, the BF16 executor and the
 * float64 reference can round to different sides and route a token's whole row elsewhere. The reference is
 * computed again routed as the executor routed (exec_ref.h, router_choice; its weights still its own, from
 * the float64 scores), and the tokens it would have routed otherwise are counted and printed. */
static int route_as_executor(exec_model *m, exec_ref_config *cfg, moe_ref *r, FILE *log, ts_err *e) {
  const size_t T = (size_t)cfg->batch * cfg->seq, k = (size_t)cfg->top_k, n = (size_t)cfg->layers * T * k;
  int *got = malloc(n * sizeof *got), *own = malloc(n * sizeof *own), rc = -1;
  if (!got || !own) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_moe_choice_get(m, got, e)) goto out;
  cfg->router_choice = got, cfg->router_choice_out = own;
  rc = exec_ref_loss_grad(cfg, r->params, r->tok, r->lab, &r->loss, r->grad, e);
  cfg->router_choice = NULL, cfg->router_choice_out = NULL;
  if (rc) goto out;
  for (int l = 0; l < cfg->layers; l++) {
    if (!exec_ref_layer_is_moe(cfg, l)) continue;
    size_t moved = 0;
    for (size_t t = 0; t < T; t++) { /* a token routed otherwise: its set of k experts differs */
      const int *a = got + ((size_t)l * T + t) * k, *b = own + ((size_t)l * T + t) * k;
      int same = 1;
      for (size_t i = 0; i < k && same; i++) {
        int found = 0;
        for (size_t j = 0; j < k; j++) found |= a[i] == b[j];
        same = found;
      }
      moved += !same;
    }
    fprintf(log, "  layer %d: %zu of %zu tokens routed otherwise by the float64 reference's own choice (near-ties); "
            "the reference below follows the executor's choices\n", l, moved, T);
  }
out:
  free(got), free(own);
  return rc;
}

/* Relative L2 error of each tensor against the reference; prints them, returns the count out of tolerance. */
int exec_check_compare_grads(const exec_model *m, const float *g, const double *ref, double tol, FILE *log) {
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
static int check_one(rt_nccl *w, const exec_ref_config *cfg0, FILE *log, int *failures, ts_err *e) {
  moe_ref r;
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  memset(&r, 0, sizeof r);
  int rc = -1, created = 0, bad = 0;
  float *g = NULL, loss = 0, first = 0, last = 0, *b0 = NULL, *b1 = NULL;
  long long *load = NULL;
  char model_path[256] = "", text[1024];
  exec_ref_config with_bias = *cfg0; /* the reference given the executor's bias */
  const exec_ref_config *cfg = &with_bias;
  const int biased = cfg0->router_sigmoid && cfg0->router_bias_rate > 0;
  double *bias = biased ? random_bias(cfg0) : NULL;
  const size_t nb = (size_t)cfg0->layers * cfg0->experts;
  if (biased) {
    b0 = malloc(nb * sizeof *b0), b1 = malloc(nb * sizeof *b1), load = malloc(nb * sizeof *load);
    if (!bias || !b0 || !b1 || !load) {
      ts_fail_sys(e, "exec check: out of memory");
      goto out;
    }
    with_bias.router_bias = bias;
  }
  if (moe_ref_make(cfg, &r, e)) goto out;
  if (exec_check_plan_text(cfg, 1, 1, 1, 1, NULL, NULL, NULL, model_path, sizeof model_path, text, sizeof text, e))
    goto out;
  created = 1; /* (exec_model_destroy frees what a failed create allocated) */
  if (exec_model_create(&m, cfg, 1, 1, 0, NULL, 1, 0, NULL, w->streams[0], e)) goto out;
  if (exec_model_load_ref(&m, r.params, e) || exec_model_set_data(&m, r.tok, r.lab, e)) goto out;
  if (biased && exec_moe_bias_set(&m, bias, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check MoE plan", 0, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || exec_model_check_finite(&m, 0, &loss, e)) goto out;
  if (biased) { /* the check's iteration ran no optimizer: its loads wait for the first step's update */
    exec_moe_loads(&m, load);
    if (exec_moe_bias_get(&m, b0, e)) goto out;
  }
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
  if (cfg->router_sigmoid)
    fprintf(log, "  DeepSeek-V3's router: sigmoid scores, %d groups (%d kept), scaling %g, %s\n", cfg->router_groups,
            cfg->router_group_topk, cfg->router_scale > 0 ? cfg->router_scale : 1.0,
            biased ? "random balancing bias (the reference given the same), updated each step" : "no bias");
  if (cfg->router_sigmoid) { /* the reference again, routed as the executor routed */
    if (route_as_executor(&m, &with_bias, &r, log, e)) goto out;
    exec_model_shard_of(&m, r.grad, r.local);
  }
  int loss_ok = fabs(loss - r.loss) <= CHECK_TOL_LOSS * r.loss;
  fprintf(log, "  loss: float64 %.6f  executor %.6f%s\n  relative L2 error of each gradient vs float64:\n", r.loss,
          loss, loss_ok ? "" : "  FAILED");
  bad += !loss_ok + exec_check_compare_grads(&m, g, r.local, CHECK_TOL_GRAD, log);
  m.lr = 1e-3f;
  for (int s = 0; s < 30; s++) {
    if (exec_walk_iteration(&m, &wk, 0, e) || exec_model_check_finite(&m, s, &loss, e)) goto out;
    if (s == 0 && biased) {
      if (exec_moe_bias_get(&m, b1, e)) goto out;
      bad += check_bias_step(&m, load, b0, b1, log);
    }
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
  free(g), free(bias), free(b0), free(b1), free(load);
  moe_ref_free(&r);
  return rc;
}

/* The codec's tolerance: FP8 changes the numbers by design; the bound of the
 * compressed TP/DP checks (exec_check.c, CHECK_TOL_CODEC), here against float64. */
#define CHECK_TOL_EP_CODEC 1e-1

/* The squared error and the squared reference of each tensor, summed over the
 * ranks (num[t], den[t]): each EP rank holds its experts' slice, the expert-DP
 * replicas and the dense tensors (the same on every rank) count once per rank
 * in both sums, which leaves each tensor's relative error that of the whole. */
static int sum_errors(rt_nccl *w, const exec_model *m, const float *g, const double *ref, double *num, double *den,
                      ts_err *e) {
  for (int i = 0; i < m->ntensors; i++) {
    const exec_tensor *lt = &m->tensors[i];
    num[i] = den[i] = 0;
    for (size_t j = lt->offset; j < lt->offset + lt->rows * lt->cols; j++) {
      double d = (double)g[j] - ref[j];
      num[i] += d * d, den[i] += ref[j] * ref[j];
    }
  }
  return rt_world_sum(w, num, m->ntensors, e) || rt_world_sum(w, den, m->ntensors, e) ? -1 : 0;
}

/* Prints each tensor's relative L2 error from the summed errors; returns the count out of tolerance. */
static int report_errors(const exec_model *m, const double *num, const double *den, double tol, FILE *log) {
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < m->ntensors; i++) {
    double rel = den[i] > 0 ? sqrt(num[i] / den[i]) : sqrt(num[i]);
    int ok = rel <= tol; /* NaN fails */
    bad += !ok;
    worst = rel > worst || !ok ? rel : worst;
    fprintf(log, "    %-20s %10.2e%s\n", m->tensors[i].name, rel, ok ? "" : "  FAILED");
  }
  fprintf(log, "    %-20s %10.2e  (tolerance %.0e)\n", "worst", worst, tol);
  return bad;
}

/* The balancing bias over DP (DeepSeek-V3's router, after check_ep's iteration, which ran no optimizer):
 * one training step's update from every rank's loads of both iterations (the same weights and batch: the
 * same choice twice), all-reduced over DP, against moe_bias_update_ref on twice the loads summed over the
 * ranks (from 0); the same bits on every rank. Returns the count of failures (summed over the ranks), -1 on
 * error. */
static int ep_bias_step(rt_nccl *w, exec_model *m, exec_walk *wk, FILE *log, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  const size_t n = (size_t)c->layers * c->experts;
  double *sum = malloc(n * sizeof *sum), bad = 0;
  long long *load = malloc(n * sizeof *load);
  int32_t *l2 = malloc(n * sizeof *l2);
  float *want = calloc(n, sizeof *want), *got = malloc(n * sizeof *got);
  int rc = -1, moved = 0;
  if (!sum || !load || !l2 || !want || !got) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  exec_moe_loads(m, load);
  for (size_t i = 0; i < n; i++) sum[i] = (double)load[i];
  if (rt_world_sum(w, sum, (int)n, e)) goto out;
  if (exec_walk_iteration(m, wk, 0, e) || rt_nccl_wait(w, e) || exec_moe_bias_get(m, got, e)) goto out;
  for (size_t i = 0; i < n; i++) l2[i] = (int32_t)(2 * sum[i]);
  moe_bias_update_ref(l2, want, c->layers, c->experts, (float)c->router_bias_rate);
  for (size_t i = 0; i < n; i++) moved += got[i] != 0.0f;
  bad = memcmp(want, got, n * sizeof *want) != 0;
  if (rt_world_sum(w, &bad, 1, e)) goto out;
  fprintf(log, "  balancing bias after one step, loads all-reduced over DP: %d of %zu moved, %s moe_bias_update_ref "
          "on every rank%s\n", moved, n, bad > 0 ? "NOT equal to" : "bits equal to", bad > 0 ? "  FAILED" : "");
  rc = bad > 0;
out:
  free(sum), free(load), free(l2), free(want), free(got);
  return rc;
}

/* Expert parallelism (exec_moe_ep.c) on every rank of the world: dp = ranks,
 * ep dividing it (ep < dp: expert-DP groups of dp / ep, their own
 * communicators), rank r training on batch r (seed 100 + r, as the DP
 * checks). Each rank holds only its experts: every tensor's error is summed
 * over the ranks (sum_errors) against the float64 mean gradient over all the
 * ranks' batches; each rank's loss against its batch's (rank 0's printed). */
static int check_ep(rt_nccl *w, const exec_ref_config *cfg, int ep, int taco, FILE *log, int *failures, ts_err *e) {
  const int rank = w->ranks[0], n = w->nranks;
  moe_ref r;
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  int rc = -1, created = 0, bad = 0;
  float *g = NULL, loss = 0;
  double *gb = NULL, my_loss = 0, *num = NULL, *den = NULL;
  int *ti = NULL, *li = NULL;
  ncclComm_t ep_comm = NULL, edp_comm = NULL;
  char model_path[256] = "", text[1024], layout[64];
  const size_t T = (size_t)cfg->batch * cfg->seq;
  exec_ep_place pl;
  if (moe_ref_make(cfg, &r, e)) goto out; /* batch 0: its loss, its gradient (r set whatever happens) */
  if (exec_ep_place_of(NULL, n, ep, rank, cfg->experts, &pl, e)) goto out;
  my_loss = r.loss;
  gb = malloc(r.total * 8), ti = malloc(T * sizeof *ti), li = malloc(T * sizeof *li);
  num = malloc(EXEC_REF_MAX_TENSORS * sizeof *num), den = malloc(EXEC_REF_MAX_TENSORS * sizeof *den);
  if (!gb || !ti || !li || !num || !den) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  for (int b = 1; b < n; b++) { /* batch b's gradient into the mean; this rank's batch */
    double lb = 0;
    exec_ref_tokens(cfg, 100 + (unsigned long long)b, ti, li);
    if (exec_ref_loss_grad(cfg, r.params, ti, li, &lb, gb, e)) goto out;
    for (size_t j = 0; j < r.total; j++) r.grad[j] += gb[j];
    if (b == rank) {
      my_loss = lb;
      for (size_t j = 0; j < T; j++) r.tok[j] = ti[j], r.lab[j] = li[j];
    }
  }
  for (size_t j = 0; j < r.total; j++) r.grad[j] /= n;
  /* the EP and expert-DP communicators (every rank splits, in the same order) */
  if (ep == n) ep_comm = w->comms[0];
  else if (rt_world_split(w, pl.ep_group, pl.ep_rank, &ep_comm, e) ||
           rt_world_split(w, pl.ep_rank, pl.edp_rank, &edp_comm, e))
    goto out;
  /* TACO: every token all-to-all compressed (codec_min_bytes 0), G 128, E4M3 */
  const char *codec = taco ? ", \"codec_min_bytes\": 0, \"codec\": { \"ep\": { \"kind\": \"taco\", \"group\": 128, "
                             "\"fp8\": \"e4m3\" } }"
                           : NULL;
  snprintf(layout, sizeof layout, ", \"ep\": %d", ep);
  if (exec_check_plan_text(cfg, 1, n, 1, 1, layout, NULL, codec, model_path, sizeof model_path, text, sizeof text, e))
    goto out;
  created = 1;
  const exec_pipeline pipe = {.pp = 1, .ep = ep, .ep_comm = ep_comm, .edp_comm = edp_comm};
  if (exec_model_create_pp(&m, cfg, 1, 1, 0, NULL, n, rank, w->comms[0], &pipe, w->streams[0], e)) goto out;
  if (exec_model_load_ref(&m, r.params, e) || exec_model_set_data(&m, r.tok, r.lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check MoE EP plan", rank, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || rt_nccl_wait(w, e) || exec_model_check_finite(&m, 0, &loss, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  r.local = malloc(m.nparams * sizeof *r.local);
  if (!g || !r.local) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e)) goto out;
  exec_model_shard_of(&m, r.grad, r.local); /* this rank's experts of the reference */
  if (sum_errors(w, &m, g, r.local, num, den, e)) goto out;
  int colls = 0, coded = 0, edps = 0;
  for (int i = 0; i < wk.prog.n; i++) {
    const plan_op *op = &wk.prog.ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_MOE_TOKENS)
      colls++, coded += op->codec.kind == PLAN_CODEC_TACO;
    edps += op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_EXPERT_GRADS;
  }
  fprintf(log, "\nMoE EP %d%s (dp %d, ep %d, expert-DP %d, %d experts top %d, %d per rank, %d ranks): plan program of "
          "%d ops, %d token all-to-alls (%d TACO-compressed; NCCL send/recv), %d expert-DP reductions\n", ep,
          taco ? " TACO" : "", n, ep, pl.edp, cfg->experts, cfg->top_k, pl.experts_local, n, wk.prog.n, colls, coded,
          edps);
  /* the program has what this layout needs: token all-to-alls, TACO on all of them, expert-DP reductions iff ep < dp */
  const int layers_moe = cfg->layers - cfg->dense_layers;
  int shape_bad = colls != 4 * layers_moe || (taco && coded != colls) || (ep < n) != (edps > 0);
  double loss_bad = !(fabs(loss - my_loss) <= CHECK_TOL_LOSS * my_loss) + shape_bad;
  if (rt_world_sum(w, &loss_bad, 1, e)) goto out;
  fprintf(log, "  MoE EP loss (rank 0's batch): float64 %.6f  executor %.6f%s\n  relative L2 error of each reduced "
          "gradient (each rank's experts, summed over the ranks) vs the float64 mean over the %d batches:\n", my_loss,
          loss, loss_bad > 0 ? "  FAILED (a rank's loss or program)" : "", n);
  bad += (loss_bad > 0) + report_errors(&m, num, den, taco ? CHECK_TOL_EP_CODEC : CHECK_TOL_GRAD, log);
  if (cfg->router_sigmoid && cfg->router_bias_rate > 0) {
    const int bb = ep_bias_step(w, &m, &wk, log, e);
    if (bb < 0) goto out;
    bad += bb;
  }
  fprintf(log, "  MoE EP %d%s check: %s\n", ep, taco ? " TACO" : "", bad ? "FAILED" : "passed");
  if (rank == 0) *failures += bad; /* every rank has the summed errors; rank 0 counts, as the DP checks */
  rc = 0;
out:
  if (model_path[0]) remove(model_path);
  exec_walk_destroy(&wk);
  if (created) exec_model_destroy(&m);
  if (rc == 0 && ep_comm && ep_comm != w->comms[0]) rt_nccl_comm_destroy(w, ep_comm);
  if (rc == 0 && edp_comm) rt_nccl_comm_destroy(w, edp_comm);
  free(g), free(gb), free(ti), free(li), free(num), free(den);
  moe_ref_free(&r);
  return rc;
}

/* The MoE model of check_ep at ep: the Mixtral-like one (4 experts) where ep
 * divides its experts, else the moe-tiny-like one (8); NULL when neither. */
static const exec_ref_config *ep_config(int ep) {
  if (moe_configs[1].experts % ep == 0) return &moe_configs[1];
  if (moe_configs[0].experts % ep == 0) return &moe_configs[0];
  return NULL;
}

int exec_check_moe(rt_nccl *w, FILE *log, int *failures, ts_err *e) {
  int ok = check_topk_bwd(w->streams[0], log, e);
  if (ok < 0) return -1;
  *failures += !ok;
  if (exec_check_route_group(w->streams[0], log, failures, e)) return -1; /* DeepSeek-V3's routing kernels */
  for (size_t i = 0; i < sizeof moe_configs / sizeof *moe_configs; i++)
    if (check_one(w, &moe_configs[i], log, failures, e)) return -1;
  /* on n ranks: EP n = DP n plain and TACO; with n >= 4 even, EP n / 2 < DP n (expert-DP groups of 2); and
   * DeepSeek-V3's router at EP n = DP n */
  const int n = w->nranks;
  const int cases[4][2] = {{n, 0}, {n, 1}, {n >= 4 && n % 2 == 0 ? n / 2 : 0, 0}, {n, 0}};
  const exec_ref_config *deepseek = &moe_configs[sizeof moe_configs / sizeof *moe_configs - 1];
  for (int c = 0; c < 4 && n >= 2; c++) {
    const int ep = cases[c][0];
    if (ep < 2) continue;
    /* the last case: DeepSeek-V3's router at EP n = DP n (its bias from 0, its update over DP) */
    const exec_ref_config *cfg = ep > EXEC_EP_MAX                ? NULL
                                 : c < 3                         ? ep_config(ep)
                                 : deepseek->experts % ep == 0 ? deepseek
                                                                 : NULL;
    if (!cfg) {
      fprintf(log, "\nMoE EP %d on %d ranks: not run (the check's models have 4, 8 and 16 experts; the executor runs "
              "ep 2 .. %d)\n", ep, n, EXEC_EP_MAX);
      continue;
    }
    if (check_ep(w, cfg, ep, cases[c][1], log, failures, e)) return -1;
  }
  return 0;
}
