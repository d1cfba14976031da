/* exec_check.c — `tacorun execute --check`: the executor's gradients on a tiny
 * model against the float64 reference (exec_ref.c, itself checked by finite
 * differences), tensor parallel against TP = 1, data parallel against the mean
 * of the reference gradients, the NaN/Inf stop, and a short training run.
 *
 * Tolerances (relative L2 error per tensor, ||g - g_ref|| / ||g_ref||): BF16
 * weights, activations and GEMM outputs carry 8 significant bits (relative
 * rounding 2^-9 = 0.2%), and the errors of two layers, attention and the
 * cross-entropy compound, so a tensor within 5% of the float64 gradient is
 * correct and a wrong index or a missing all-reduce (errors of order 1) is not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_model.h"
#include "exec_run.h"
#include "exec_walk.h"

#include "exec_check.h"

static const exec_ref_config check_configs[] = {
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 512, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_GELU, .norm = EXEC_NORM_LAYERNORM, .norm_eps = 1e-5},
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 256, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-5},
    /* grouped-query attention: 4 query heads over 2 key/value heads (one of each per rank at TP 2) */
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 256, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-5, .kv_heads = 2},
    /* the zoo's families in small (models/: llama3-*, qwen2.5-*, gpt3-*): Llama (RoPE, GQA, untied output
     * weight; theta 1e4 so that 128 positions turn every frequency pair noticeably), Qwen2.5 (RoPE theta 1e6,
     * QKV bias, GQA, untied, eps 1e-6), GPT (learned positions, biases on every linear layer, tied) */
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 256, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-5, .kv_heads = 2, .rope_theta = 1e4,
     .untied = 1},
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 256, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .kv_heads = 2, .rope_theta = 1e6,
     .qkv_bias = 1, .untied = 1},
    {.vocab = 512, .hidden = 128, .heads = 4, .ffn = 512, .layers = 2, .seq = 128, .batch = 2,
     .act = EXEC_ACT_GELU, .norm = EXEC_NORM_LAYERNORM, .norm_eps = 1e-5, .qkv_bias = 1, .linear_bias = 1},
    /* grouped-query attention on the zoo's kernel shapes (the models above have head_dim 32 and seq 128, which
     * run the 64-row kernels): Llama-like, 8 query heads over 2 key/value heads (groups of 4) of head_dim 64 at
     * seq 256, and Qwen-like with QKV bias, 4 over 2 of head_dim 128 at seq 384: the 128-row forward and the
     * 128-key backward, which sums dK and dV over each group's query heads (runtime/ops/exec_flash.h) */
    {.vocab = 512, .hidden = 512, .heads = 8, .ffn = 512, .layers = 2, .seq = 256, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-5, .kv_heads = 2, .rope_theta = 1e4,
     .untied = 1},
    {.vocab = 512, .hidden = 512, .heads = 4, .ffn = 512, .layers = 2, .seq = 384, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .kv_heads = 2, .rope_theta = 1e6,
     .qkv_bias = 1, .untied = 1},
    /* Qwen3 (models/qwen3-30b-a3b, qwen3-235b-a22b; dense: models/qwen3-tiny): head_dim 128 wider than hidden /
     * heads (4 query heads of 128 on hidden 256: Q and the output projection's input 512 wide), 2 key/value
     * heads, the QK norm (q_norm / k_norm before RoPE), theta 1e6, eps 1e-6, untied */
    {.vocab = 512, .hidden = 256, .heads = 4, .ffn = 512, .layers = 2, .seq = 384, .batch = 2,
     .act = EXEC_ACT_SWIGLU, .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .kv_heads = 2, .rope_theta = 1e6,
     .untied = 1, .head_dim = 128, .qk_norm = 1},
};

enum { CMP_TP1_REF, CMP_TPN_REF, CMP_TPN_TP1, CMP_DPN_REF, CMP_TPN_PLAN_REF, CMP_DPN_PLAN_REF, CMP_PP2_PLAN_REF,
       CMP_PP2_PP1, CMP_SP_REF, CMP_SP_TP, CMP_RCF_TP, CMP_RCS_TP, CMP_SPRC_TP, CMP_Z1_REF, CMP_Z1_STEP, CMP_GPIPE_REF, CMP_GPIPE_PP1,
       CMP_OVL_REF, CMP_OVL_TP, CMP_GPIPE1_REF, CMP_GPIPE1_DP2, CMP_DPLATE_REF, CMP_Z1LATE_STEP, CMP_Z1PG_STEP,
       CMP_COUNT };
/* "plan": the same layout run from plan_build_program()'s program (exec_walk.c).
 * PP2: two stages (1F1B) over two micro-batches (batches 0 and 1) against the
 * float64 mean gradient and against the PP = 1 run of the same two batches
 * (the DP2 run: its all-reduced gradient is the two-micro-batch gradient). */
/* Layout features (2 ranks), each from the plan's own program:
 *   sp/f64, sp/tp2: TP2 with sequence parallelism against the float64
 *     gradient and the TP2 plan run without SP;
 *   rcfull/tp2, rcsel/tp2, sp+rc/tp2: full and selective recomputation, and
 *     SP with full recomputation, against the TP2 plan run (the same numbers
 *     are expected: recomputation reruns the same kernels);
 *   z1/f64: DP2 with ZeRO-1, each rank's reduce-scattered gradient shard
 *     against the float64 mean gradient;
 *   z1step/dp2: the weight update of 3 AdamW steps (master weights, each
 *     rank's shard) against the DP2 plan run without ZeRO-1;
 *   gpipe2/f64, gpipe vs pp1: PP = 2 with the GPipe schedule, like the 1F1B rows;
 *   ovl2/f64, ovl2/tp2: TP2 with tp_overlap_chunks 2 (attn_out and fc2 as two
 *     GEMMs over token rows, each all-reduced on its own) against the float64
 *     gradient and the TP2 plan run without the split;
 *   gpipe1/f64, gpipe1/dp2: GPipe at PP = 1 over two micro-batches (batches 0
 *     and 1, both forwards before either backward, so each keeps its own
 *     activations) on one GPU, against the float64 mean gradient and the DP2
 *     run of the same two batches;
 *   dplate/f64: DP2 with overlap_grad_reduce false (every bucket reduced
 *     after the backward, as the program orders them) against the float64
 *     mean gradient;
 *   z1late/dp2, z1pg/dp2: like z1step/dp2, ZeRO-1 with overlap_grad_reduce
 *     false, and ZeRO-1 with overlap_param_gather, both with one bucket per
 *     layer (dp_bucket_bytes 1) so that each layer is gathered on its own (the all-gathers of the
 *     updated weights before the next step's forward; the last step's
 *     gathered after it), against the DP2 plan run. */
static const char *const cmp_names[CMP_COUNT] = {"tp1 vs f64", "tpN vs f64", "tpN vs tp1", "dpN vs f64",
                                                 "tpN-plan/f64", "dpN-plan/f64", "pp2-plan/f64", "pp2 vs pp1",
                                                 "sp/f64", "sp/tp2", "rcfull/tp2", "rcsel/tp2", "sp+rc/tp2",
                                                 "z1/f64", "z1step/dp2", "gpipe2/f64", "gpipe vs pp1",
                                                 "ovl2/f64", "ovl2/tp2", "gpipe1/f64", "gpipe1/dp2",
                                                 "dplate/f64", "z1late/dp2", "z1pg/dp2"};

typedef struct {
  int ntensors;
  char names[EXEC_REF_MAX_TENSORS][32];
  double num[CMP_COUNT][EXEC_REF_MAX_TENSORS], den[CMP_COUNT][EXEC_REF_MAX_TENSORS]; /* per comparison (CMP_COUNT rows) */
} error_table;

/* Runs the program's ops (without the optimizer step unless with_optimizer). */
static int run_iteration(exec_model *m, const plan_op *ops, int nops, int with_optimizer, rt_nccl *w, ts_err *e) {
  if (exec_model_zero_grad(m, e)) return -1;
  for (int i = 0; i < nops; i++) {
    if (!with_optimizer && ops[i].model_op == PLAN_MOP_OPTIMIZER && ops[i].kind == PLAN_OP_COMPUTE) continue;
    if (exec_model_run_op(m, &ops[i], e)) return -1;
  }
  return rt_nccl_wait(w, e);
}

/* Adds ||g - r||^2 and ||r||^2 of each tensor (local layout) into the table row. */
static void accumulate(const exec_model *m, const float *g, const double *r, error_table *t, int cmp) {
  for (int i = 0; i < m->ntensors; i++) {
    if (!exec_model_holds_tensor(m, i)) continue; /* another pipeline stage's tensor */
    const exec_tensor *lt = &m->tensors[i];
    double num = 0, den = 0;
    for (size_t j = lt->offset; j < lt->offset + lt->rows * lt->cols; j++) {
      double d = (double)g[j] - r[j];
      num += d * d;
      den += r[j] * r[j];
    }
    t->num[cmp][i] += num;
    t->den[cmp][i] += den;
  }
}

/* A TP = 1 model's local arrays are the full tensors with aligned offsets: back to the reference layout. */
static void local_to_full(const exec_model *m, const float *g, double *full) {
  exec_tensor ft[EXEC_REF_MAX_TENSORS];
  size_t total;
  exec_ref_tensors(&m->cfg, ft, EXEC_REF_MAX_TENSORS, &total);
  for (int i = 0; i < m->ntensors; i++)
    for (size_t j = 0; j < ft[i].rows * ft[i].cols; j++) full[ft[i].offset + j] = g[m->tensors[i].offset + j];
}

typedef struct {
  exec_ref_config cfg;
  size_t total;
  double *params, *grad_a, *grad_mean, loss_a;
  int32_t *tok_a, *lab_a, *tok_rank, *lab_rank;
} check_data;

static void check_data_free(check_data *d) {
  free(d->params), free(d->grad_a), free(d->grad_mean);
  free(d->tok_a), free(d->lab_a), free(d->tok_rank), free(d->lab_rank);
}

static int check_data_make(check_data *d, const exec_ref_config *cfg, int rank, int nranks, ts_err *e) {
  memset(d, 0, sizeof *d);
  d->cfg = *cfg;
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  exec_ref_tensors(cfg, t, EXEC_REF_MAX_TENSORS, &d->total);
  int T = cfg->batch * cfg->seq;
  d->params = malloc(d->total * sizeof(double));
  d->grad_a = malloc(d->total * sizeof(double));
  d->grad_mean = calloc(d->total, sizeof(double));
  double *g = malloc(d->total * sizeof(double));
  int *ti = malloc((size_t)T * sizeof(int)), *li = malloc((size_t)T * sizeof(int));
  d->tok_a = malloc((size_t)T * 4), d->lab_a = malloc((size_t)T * 4);
  d->tok_rank = malloc((size_t)T * 4), d->lab_rank = malloc((size_t)T * 4);
  if (!d->params || !d->grad_a || !d->grad_mean || !g || !ti || !li || !d->tok_a || !d->lab_a || !d->tok_rank ||
      !d->lab_rank) {
    free(g), free(ti), free(li);
    return ts_fail_sys(e, "exec check: out of memory");
  }
  exec_ref_init(cfg, 2024, 1, d->params);
  int rc = 0;
  for (int r = 0; r < nranks && !rc; r++) {
    /* batch r is what data-parallel rank r trains on; batch 0 is also the TP runs' batch */
    exec_ref_tokens(cfg, 100 + (unsigned long long)r, ti, li);
    double loss;
    rc = exec_ref_loss_grad(cfg, d->params, ti, li, &loss, r == 0 ? d->grad_a : g, e);
    if (rc) break;
    const double *src = r == 0 ? d->grad_a : g;
    for (size_t j = 0; j < d->total; j++) d->grad_mean[j] += src[j] / nranks;
    for (int j = 0; j < T; j++) {
      if (r == 0) d->tok_a[j] = ti[j], d->lab_a[j] = li[j];
      if (r == rank) d->tok_rank[j] = ti[j], d->lab_rank[j] = li[j];
    }
    if (r == 0) d->loss_a = loss;
  }
  free(g), free(ti), free(li);
  return rc;
}

/* One model on this rank, loaded with the reference weights, with its program. */
typedef struct {
  exec_model m;
  plan_op *ops;
  int nops;
  int created;
} check_run;

static int check_run_make(check_run *c, const check_data *d, int tp, int tp_rank, ncclComm_t tp_comm, int dp,
                          int dp_rank, ncclComm_t dp_comm, const int32_t *tok, const int32_t *lab, rt_nccl *w,
                          ts_err *e) {
  memset(c, 0, sizeof *c);
  if (exec_model_create(&c->m, &d->cfg, 1, tp, tp_rank, tp_comm, dp, dp_rank, dp_comm, w->streams[0], e)) return -1;
  c->created = 1;
  if (exec_model_load_ref(&c->m, d->params, e) || exec_model_set_data(&c->m, tok, lab, e)) return -1;
  return exec_program_build_single_stage(&c->m, &c->ops, &c->nops, e);
}
static void check_run_free(check_run *c) {
  if (c->created) exec_model_destroy(&c->m);
  free(c->ops);
  memset(c, 0, sizeof *c);
}

static int get_grads(check_run *c, float **out, ts_err *e) {
  *out = malloc(c->m.nparams * sizeof(float));
  if (!*out) return ts_fail_sys(e, "exec check: out of memory");
  return exec_model_grads_to_host(&c->m, *out, e);
}

/* The NaN stop: a NaN written into one gradient tensor, and one into a weight
 * (so the loss itself becomes NaN), must each end the step with a message
 * naming the step and the tensor (or the loss). Returns 1 when both are caught. */
static int check_nan_stop(check_run *c, const check_data *d, rt_nccl *w, FILE *log, ts_err *e) {
  int caught = 0, victim = c->m.ntensors - 3; /* a layer tensor of the last layer */
  ts_err stop;
  if (run_iteration(&c->m, c->ops, c->nops, 0, w, e)) return -1;
  float nan_f = NAN;
  RT_CUDA(e, cudaMemcpyAsync(c->m.grad + c->m.tensors[victim].offset + 1, &nan_f, 4, cudaMemcpyHostToDevice,
                             c->m.stream));
  RT_CUDA(e, cudaStreamSynchronize(c->m.stream));
  if (exec_model_check_finite(&c->m, 7, NULL, &stop) != 0 && strstr(stop.msg, c->m.tensors[victim].name) &&
      strstr(stop.msg, "step 7")) {
    caught++;
    fprintf(log, "  NaN in a gradient stops the run: \"%s\"\n", stop.msg);
  } else {
    fprintf(log, "  NaN in gradient %s NOT caught\n", c->m.tensors[victim].name);
  }
  uint16_t nan_bf16 = 0x7fc0;
  RT_CUDA(e, cudaMemcpyAsync((uint16_t *)c->m.w16 + c->m.tensors[2].offset, &nan_bf16, 2, cudaMemcpyHostToDevice,
                             c->m.stream));
  RT_CUDA(e, cudaStreamSynchronize(c->m.stream));
  if (run_iteration(&c->m, c->ops, c->nops, 0, w, e)) return -1;
  if (exec_model_check_finite(&c->m, 8, NULL, &stop) != 0 && strstr(stop.msg, "step 8")) {
    caught++;
    fprintf(log, "  NaN in a weight stops the run: \"%s\"\n", stop.msg);
  } else {
    fprintf(log, "  NaN in weight %s NOT caught\n", c->m.tensors[2].name);
  }
  if (exec_model_load_ref(&c->m, d->params, e)) return -1;
  return caught == 2;
}

/* A few AdamW steps on one batch: the loss must fall (the optimizer and the
 * master-weight update work end to end). Returns the first and last loss. */
static int train_steps(check_run *c, int steps, rt_nccl *w, float *first, float *last, ts_err *e) {
  c->m.lr = 1e-3f;
  for (int s = 0; s < steps; s++) {
    float loss;
    if (run_iteration(&c->m, c->ops, c->nops, 1, w, e) || exec_model_check_finite(&c->m, s, &loss, e)) return -1;
    if (s == 0) *first = loss;
    *last = loss;
  }
  return 0;
}

/* Compressed TP all-reduces change the numbers by design: report how far each
 * codec's gradients are from the uncompressed TP run (relative L2 over all
 * tensors, and the worst tensor) and where 30 AdamW steps end, next to the
 * uncompressed run's final loss. Fails only on a non-finite value or a loss
 * that does not fall. */
static int check_codecs(rt_nccl *w, const check_data *d, const float *g_plain, float loss_plain, FILE *log,
                        int *failures, ts_err *e) {
  const int rank = w->ranks[0], n = w->nranks;
  const plan_codec codecs[] = {
      {.kind = PLAN_CODEC_TACO, .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 1.0},
      {.kind = PLAN_CODEC_TACO, .group = 32, .fp8 = PLAN_FP8_E4M3, .p = 1.0},
      {.kind = PLAN_CODEC_CAAT, .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 0.5},
      {.kind = PLAN_CODEC_TACO_CAAT, .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 0.5},
  };
  const char *names[] = {"taco G128 e4m3", "taco G32 e4m3", "caat p0.5", "taco+caat"};
  for (size_t k = 0; k < sizeof codecs / sizeof *codecs; k++) {
    check_run c;
    float *g = NULL, first = 0, last = 0;
    int rc = -1;
    if (check_run_make(&c, d, n, rank, w->comms[0], 1, 0, NULL, d->tok_a, d->lab_a, w, e) ||
        exec_model_set_codecs(&c.m, codecs[k], codecs[k], e))
      goto next;
    /* the program carries the codec on each TP collective */
    free(c.ops);
    c.ops = NULL;
    if (exec_program_build_single_stage(&c.m, &c.ops, &c.nops, e)) goto next;
    if (run_iteration(&c.m, c.ops, c.nops, 0, w, e) || exec_model_check_finite(&c.m, 0, NULL, e) ||
        get_grads(&c, &g, e))
      goto next;
    double sums[2 * EXEC_REF_MAX_TENSORS] = {0};
    for (int t = 0; t < c.m.ntensors; t++) {
      const exec_tensor *lt = &c.m.tensors[t];
      for (size_t j = lt->offset; j < lt->offset + lt->rows * lt->cols; j++) {
        double dd = (double)g[j] - g_plain[j];
        sums[2 * t] += dd * dd;
        sums[2 * t + 1] += (double)g_plain[j] * g_plain[j];
      }
    }
    if (rt_world_sum(w, sums, 2 * c.m.ntensors, e)) goto next;
    double num = 0, den = 0, worst = 0;
    int worst_t = 0;
    for (int t = 0; t < c.m.ntensors; t++) {
      num += sums[2 * t], den += sums[2 * t + 1];
      double rel = sums[2 * t + 1] > 0 ? sqrt(sums[2 * t] / sums[2 * t + 1]) : 0;
      if (rel > worst) worst = rel, worst_t = t;
    }
    if (train_steps(&c, 30, w, &first, &last, e)) goto next;
    fprintf(log, "  codec %-15s grads vs uncompressed TP%d: rel L2 %.3e overall, worst %s %.3e; 30 steps: %.4f -> %.4f "
                 "(uncompressed %.4f, %+.2f%%)\n",
            names[k], n, sqrt(num / den), c.m.tensors[worst_t].name, worst, first, last, loss_plain,
            100.0 * (last - loss_plain) / loss_plain);
    if (!(last < 0.9f * first)) (*failures)++;
    rc = 0;
  next:
    free(g);
    check_run_free(&c);
    if (rc) return -1;
  }
  return 0;
}

/* The tiny model as a model file, and a plan of it, so plan_build_program()
 * can build the programs the walker runs (on a cluster with GPUs for every
 * rank: 2, one 8-GPU node, or more nodes). */
int exec_check_plan_text(const exec_ref_config *cfg, int tp, int dp, int pp, int micros, const char *layout_extra,
                         const char *schedule, const char *plan_extra, char *model_path, size_t cap, char *text,
                         size_t text_cap, ts_err *e) {
  snprintf(model_path, cap, "/tmp/tacorun-exec-check-%d.json", (int)getpid());
  FILE *f = fopen(model_path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", model_path);
  fprintf(f,
          "{ \"schema\": 1, \"name\": \"exec-check-tiny\", \"family\": \"gpt\", \"layers\": %d, \"hidden\": %d,\n"
          "  \"heads\": %d, \"kv_heads\": %d, \"ffn_hidden\": %d, \"activation\": \"%s\", \"norm\": \"%s\",\n"
          "  \"vocab\": %d, \"tied_embeddings\": %s, \"max_seq\": %d, \"position\": \"%s\", \"rope_theta\": %.17g,\n"
          "  \"qkv_bias\": %s, \"linear_bias\": %s, \"norm_eps\": %.17g",
          cfg->layers, cfg->hidden, cfg->heads, exec_ref_kv_heads(cfg), cfg->ffn, cfg->act == EXEC_ACT_GELU ? "gelu" : "swiglu",
          cfg->norm == EXEC_NORM_LAYERNORM ? "layernorm" : "rmsnorm", cfg->vocab, cfg->untied ? "false" : "true",
          cfg->seq, cfg->rope_theta > 0 ? "rope" : "learned", cfg->rope_theta, cfg->qkv_bias ? "true" : "false",
          cfg->linear_bias ? "true" : "false", cfg->norm_eps);
  if (cfg->experts > 0) /* (the reference's shared FFN is whole shared experts of expert_ffn each) */
    fprintf(f, ",\n  \"experts\": %d, \"top_k\": %d, \"expert_ffn_hidden\": %d, \"shared_experts\": %d, "
               "\"dense_layers\": %d", cfg->experts, cfg->top_k, cfg->expert_ffn, cfg->shared_ffn / cfg->expert_ffn,
            cfg->dense_layers);
  if (cfg->experts > 0 && cfg->router_sigmoid) { /* DeepSeek-V3's router */
    fprintf(f, ",\n  \"router\": \"sigmoid\", \"router_topk_scaling_factor\": %.17g",
            cfg->router_scale > 0 ? cfg->router_scale : 1.0);
    if (cfg->router_groups > 0)
      fprintf(f, ", \"router_num_groups\": %d, \"router_group_topk\": %d", cfg->router_groups, cfg->router_group_topk);
    if (cfg->router_bias_rate > 0)
      fprintf(f, ", \"router_expert_bias\": true, \"router_bias_update_rate\": %.17g", cfg->router_bias_rate);
  }
  if (cfg->head_dim > 0) fprintf(f, ",\n  \"head_dim\": %d", cfg->head_dim); /* Qwen3: heads x head_dim != hidden */
  if (cfg->qk_norm) fprintf(f, ", \"qk_norm\": true");
  if (exec_ref_is_mla(cfg)) /* DeepSeek-V3's multi-head latent attention in small */
    fprintf(f, ",\n  \"attention\": \"mla\", \"q_lora_rank\": %d, \"kv_lora_rank\": %d, \"qk_nope_head_dim\": %d, "
               "\"qk_rope_head_dim\": %d, \"v_head_dim\": %d", cfg->q_lora, cfg->kv_lora, cfg->qk_nope, cfg->qk_rope,
            cfg->v_head);
  fprintf(f, " }\n");
  if (fclose(f)) return ts_fail_sys(e, "%s: cannot write", model_path);
  snprintf(text, text_cap,
           "{ \"schema\": 1, \"name\": \"exec-check\", \"model\": \"%s\", \"cluster\": \"%s\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d%s },\n"
           "  \"batch\": { \"micro\": %d, \"global\": %d, \"seq\": %d }, \"schedule\": \"%s\",\n"
           "  \"hidden_dropout\": 0%s }\n", /* the executor runs no dropout (exec_plan_refuse) */
           model_path, tp * dp * pp <= 2 ? "h200x2-nvlink" : tp * dp * pp <= 8 ? "h200x8-nvswitch" : "h200-1024-rail", dp,
           tp, pp, layout_extra ? layout_extra : "", cfg->batch, cfg->batch * dp * micros,
           cfg->seq, schedule ? schedule : "1f1b", plan_extra ? plan_extra : "");
  return 0;
}

/* Adds, like accumulate(), the elements of this rank's ZeRO-1 shards only
 * (the shards of all ranks cover every element once). */
static void accumulate_zero1(const exec_model *m, const float *g, const double *r, error_table *t, int cmp) {
  for (int i = 0; i < m->ntensors; i++) {
    if (!exec_model_holds_tensor(m, i)) continue;
    const exec_tensor *lt = &m->tensors[i];
    size_t lo, hi;
    exec_model_zero1_shard(m, exec_model_group_of_tensor(m, i), &lo, &hi);
    size_t a = lt->offset > lo ? lt->offset : lo, b = lt->offset + lt->rows * lt->cols;
    b = b < hi ? b : hi;
    for (size_t j = a; j < b; j++) {
      double d = (double)g[j] - r[j];
      t->num[cmp][i] += d * d;
      t->den[cmp][i] += r[j] * r[j];
    }
  }
}

/* A walked run of the tiny model from a plan (layout_extra: more layout
 * fields, e.g. sequence parallelism). */
typedef struct {
  int tp, dp;
  const char *layout_extra;
  const int32_t *tok, *lab;
  int recompute; /* the model shares recomputed activations (exec_ref_config.recompute) */
  const char *plan_extra; /* more top-level plan fields (e.g. a codec), or NULL */
} walked_case;

/* One gradient of the tiny model through the plan's own program; adds the
 * comparison with ref_full (full reference gradient) to row cmp (< 0: none)
 * and with base (a gradient of the same local layout, e.g. the run without
 * the feature; NULL: none) to row cmp_base, printing the largest absolute
 * difference from base. *keep (if not NULL) receives the gradient. */
static int check_walked(rt_nccl *w, const check_data *d, const walked_case *wc, const double *ref_full,
                        error_table *tab, int cmp, const float *base, int cmp_base, float **keep, size_t *keep_n,
                        FILE *log, ts_err *e) {
  const int rank = w->ranks[0], tp = wc->tp, dp = wc->dp;
  char model_path[256], text[1024];
  if (exec_check_plan_text(&d->cfg, tp, dp, 1, 1, wc->layout_extra, NULL, wc->plan_extra, model_path, sizeof model_path, text,
                     sizeof text, e))
    return -1;
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  float *g = NULL;
  double *ref = NULL;
  int rc = -1;
  exec_ref_config cfg = d->cfg;
  cfg.recompute = wc->recompute;
  if (exec_model_create(&m, &cfg, 1, tp, tp > 1 ? rank : 0, tp > 1 ? w->comms[0] : NULL, dp, dp > 1 ? rank : 0,
                        dp > 1 ? w->comms[0] : NULL, w->streams[0], e))
    goto out;
  if (exec_model_load_ref(&m, d->params, e) || exec_model_set_data(&m, wc->tok, wc->lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check plan", rank, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || rt_nccl_wait(w, e) || exec_model_check_finite(&m, 0, NULL, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  ref = malloc(m.nparams * sizeof *ref);
  if (!g || !ref) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e)) goto out;
  /* TP: shards add up over ranks; DP: every rank holds the same reduced
   * gradient, count rank 0; ZeRO-1: each rank its reduce-scattered shards */
  const int counted = tp > 1 || rank == 0;
  if (cmp >= 0) {
    exec_model_shard_of(&m, ref_full, ref);
    if (m.zero1) accumulate_zero1(&m, g, ref, tab, cmp);
    else if (counted) accumulate(&m, g, ref, tab, cmp);
  }
  double maxdiff = 0;
  if (base) {
    for (size_t j = 0; j < m.nparams; j++) {
      ref[j] = base[j];
      double dd = fabs((double)g[j] - base[j]);
      maxdiff = dd > maxdiff ? dd : maxdiff;
    }
    if (counted) accumulate(&m, g, ref, tab, cmp_base);
    if (rt_world_max(w, &maxdiff, 1, e)) goto out;
  }
  int colls = 0;
  for (int i = 0; i < wk.prog.n; i++) colls += wk.prog.ops[i].kind == PLAN_OP_COLLECTIVE;
  fprintf(log, "  plan program (tp %d, dp %d%s): %d ops (%d collectives) on rank 0", tp, dp,
          wc->layout_extra ? wc->layout_extra : "", wk.prog.n, colls);
  if (base) fprintf(log, "; largest |gradient difference| from the run without it: %.3g", maxdiff);
  fprintf(log, "\n");
  if (keep_n) *keep_n = m.nparams;
  if (keep) *keep = g, g = NULL;
  rc = 0;
out:
  remove(model_path);
  exec_walk_destroy(&wk);
  exec_model_destroy(&m);
  free(g), free(ref);
  return rc;
}

/* ZeRO-1 against plain data parallelism, both from the plan's program (DP2,
 * rank r on batch r): 3 AdamW steps each from the same weights; the update of
 * each rank's master-weight shard must match (row CMP_Z1_STEP), and the BF16
 * weights the all-gathers rebuild must equal the plain run's everywhere. */
static int check_zero1_steps(rt_nccl *w, const check_data *d, int dp, const char *layout, const char *plan_extra,
                             int cmp, error_table *tab, FILE *log, ts_err *e) {
  const int rank = w->ranks[0], steps = 3;
  float *master[2] = {NULL, NULL};
  uint16_t *w16[2] = {NULL, NULL};
  double *init = NULL;
  size_t nparams = 0;
  exec_model m;
  int rc = -1, created = 0;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  char model_path[256], text[1024];
  for (int z = 0; z < 2; z++) {
    if (exec_check_plan_text(&d->cfg, 1, dp, 1, 1, z ? layout : NULL, NULL, z ? plan_extra : NULL, model_path, sizeof model_path, text,
                       sizeof text, e))
      goto out;
    if (exec_model_create(&m, &d->cfg, 1, 1, 0, NULL, dp, rank, w->comms[0], w->streams[0], e)) goto out;
    created = 1;
    if (exec_model_load_ref(&m, d->params, e) || exec_model_set_data(&m, d->tok_rank, d->lab_rank, e)) goto out;
    if (exec_walk_init_text(&wk, text, "exec-check zero1 plan", rank, &m, e)) goto out;
    if (z && !m.zero1) {
      ts_fail_sys(e, "exec check: the ZeRO-1 plan did not switch the model to ZeRO-1");
      goto out;
    }
    m.lr = 1e-3f;
    for (int s = 0; s < steps; s++)
      if (exec_walk_iteration(&m, &wk, 0, e) || rt_nccl_wait(w, e) || exec_model_check_finite(&m, s, NULL, e))
        goto out;
    /* overlap_param_gather: the program gathers the last step's weights before a next forward */
    if (wk.p.overlap_param_gather && (exec_model_zero1_gather_all(&m, e) || rt_nccl_wait(w, e))) goto out;
    nparams = m.nparams;
    master[z] = malloc(nparams * sizeof(float));
    w16[z] = malloc(nparams * sizeof(uint16_t));
    if (!master[z] || !w16[z]) {
      ts_fail_sys(e, "exec check: out of memory");
      goto out;
    }
    RT_CUDA(e, cudaMemcpyAsync(w16[z], m.w16, nparams * 2, cudaMemcpyDeviceToHost, m.stream));
    if (!z) {
      RT_CUDA(e, cudaMemcpyAsync(master[z], m.master, nparams * 4, cudaMemcpyDeviceToHost, m.stream));
      RT_CUDA(e, cudaStreamSynchronize(m.stream));
    } else {
      /* ZeRO-1 keeps only this rank's master shards: put them at their places in the full layout */
      float *shards = malloc(m.zero1_params * sizeof *shards);
      if (!shards) {
        ts_fail_sys(e, "exec check: out of memory");
        goto out;
      }
      cudaError_t ce = cudaMemcpyAsync(shards, m.master, m.zero1_params * 4, cudaMemcpyDeviceToHost, m.stream);
      if (ce == cudaSuccess) ce = cudaStreamSynchronize(m.stream);
      memset(master[z], 0, nparams * sizeof(float));
      for (int g = 0; g < m.cfg.layers + 2 && ce == cudaSuccess; g++) {
        size_t lo, hi;
        exec_model_zero1_shard(&m, g, &lo, &hi);
        memcpy(master[z] + lo, shards + m.zero1_off[g], (hi - lo) * sizeof(float));
      }
      free(shards);
      if (ce != cudaSuccess) {
        ts_fail_sys(e, "exec check: ZeRO-1 master shards: %s", cudaGetErrorString(ce));
        goto out;
      }
    }
    if (z) {
      /* updates (master after - initial weights) of this rank's shards */
      init = malloc(nparams * sizeof *init);
      double *upd = malloc(nparams * sizeof *upd);
      float *updz = malloc(nparams * sizeof *updz);
      if (!init || !upd || !updz) {
        free(upd), free(updz);
        ts_fail_sys(e, "exec check: out of memory");
        goto out;
      }
      exec_model_shard_of(&m, d->params, init);
      for (size_t j = 0; j < nparams; j++) upd[j] = master[0][j] - init[j], updz[j] = (float)(master[1][j] - init[j]);
      accumulate_zero1(&m, updz, upd, tab, cmp);
      free(upd), free(updz);
      double differ = 0;
      for (size_t j = 0; j < nparams; j++) differ += w16[0][j] != w16[1][j];
      if (rt_world_sum(w, &differ, 1, e)) goto out;
      fprintf(log, "  zero1 (dp %d%s): %d AdamW steps; BF16 weights that differ from plain DP after the all-gathers: "
                   "%.0f of %zu x %d ranks; optimizer states %zu of %zu parameters per rank\n", dp, layout, steps,
              differ, nparams, w->nranks, m.zero1_params, nparams);
      if (differ > 0.001 * (double)nparams * w->nranks) tab->num[cmp][0] += 1e30; /* fails the row */
    }
    exec_walk_destroy(&wk);
    exec_model_destroy(&m);
    created = 0;
    remove(model_path);
  }
  rc = 0;
out:
  if (created) {
    exec_walk_destroy(&wk);
    exec_model_destroy(&m);
    remove(model_path);
  }
  for (int z = 0; z < 2; z++) free(master[z]), free(w16[z]);
  free(init);
  return rc;
}

/* PP = 2 (ranks 0 and 1 are the two stages) over two micro-batches, batch 0
 * then batch 1, walked from the plan's program: gradients against the float64
 * mean (ref_mean) and against pp1 (the PP = 1 gradient of the same two
 * batches, local layout of a TP = 1 model). pp = 1 (GPipe only): the whole
 * model on every rank alone, both forwards before either backward, so each
 * micro-batch keeps its own activations (a rank's sums count every tensor
 * once per rank in numerator and denominator: the ratio is one rank's). */
static int check_pipeline(rt_nccl *w, const check_data *d, const float *pp1, int pp, const char *schedule, int vpp,
                          const char *layout_extra, const char *plan_extra, int cmp_ref, int cmp_pp1, error_table *tab, float **keep,
                          size_t *keep_n, FILE *log, ts_err *e) {
  const int rank = pp > 1 ? w->ranks[0] : 0;
  char model_path[256], text[1024];
  if (exec_check_plan_text(&d->cfg, 1, 1, pp, 2, layout_extra ? layout_extra : vpp > 1 ? ", \"vpp\": 2" : NULL, schedule,
                           plan_extra, model_path,
                     sizeof model_path, text, sizeof text, e))
    return -1;
  exec_ref_config cfg = d->cfg;
  cfg.vpp = vpp;
  const size_t T = (size_t)d->cfg.batch * d->cfg.seq;
  int32_t *tok = malloc(2 * T * sizeof *tok), *lab = malloc(2 * T * sizeof *lab);
  int *ti = malloc(T * sizeof *ti), *li = malloc(T * sizeof *li);
  exec_model m;
  memset(&m, 0, sizeof m);
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  ncclComm_t emb = NULL;
  float *g = NULL;
  double *ref = NULL, *pp1d = NULL;
  int rc = -1, created = 0;
  if (!tok || !lab || !ti || !li) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  for (int b = 0; b < 2; b++) { /* the same batches check_data_make gave DP ranks 0 and 1 */
    exec_ref_tokens(&d->cfg, 100 + (unsigned long long)b, ti, li);
    for (size_t j = 0; j < T; j++) tok[b * T + j] = ti[j], lab[b * T + j] = li[j];
  }
  if (pp > 1 && rt_world_split(w, 0, rank, &emb, e)) goto out;
  exec_pipeline pipe = {.pp = pp, .pp_rank = rank, .pp_comm = pp > 1 ? w->comms[0] : NULL, .emb_comm = emb,
                        .all_micros = pp == 1};
  /* the activation slots the program holds at once and (uneven stages) this stage's layers */
  if (exec_walk_program_shape(NULL, text, rank, &pipe, e)) goto out;
  if (exec_model_create_pp(&m, &cfg, 2, 1, 0, NULL, 1, 0, NULL, &pipe, w->streams[0], e)) goto out;
  created = 1;
  if (exec_model_load_ref(&m, d->params, e) || exec_model_set_data(&m, tok, lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check pipeline plan", rank, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || rt_nccl_wait(w, e) || exec_model_check_finite(&m, 0, NULL, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  ref = malloc(m.nparams * sizeof *ref);
  pp1d = malloc(m.nparams * sizeof *pp1d);
  if (!g || !ref || !pp1d) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e)) goto out;
  exec_model_shard_of(&m, d->grad_mean, ref);
  if (cmp_ref >= 0) accumulate(&m, g, ref, tab, cmp_ref); /* each stage adds the tensors it holds */
  if (pp1) {
    for (size_t j = 0; j < m.nparams; j++) pp1d[j] = pp1[j];
    accumulate(&m, g, pp1d, tab, cmp_pp1);
  }
  int sends = 0;
  for (int i = 0; i < wk.prog.n; i++) sends += wk.prog.ops[i].kind == PLAN_OP_SEND;
  double shape[6] = {0, 0, 0, 0, 0, 0}; /* per stage: activation slots, layers, boundary buffers */
  if (pp > 1) {
    shape[rank] = m.nslots, shape[2 + rank] = m.layer_hi - m.layer_lo, shape[4 + rank] = m.nbslots;
    if (rt_world_sum(w, shape, 6, e)) goto out;
  }
  if (pp > 1)
    fprintf(log, "  plan program (pp 2, %s, vpp %d, %d layers%s, 2 micro-batches): %d ops on rank 0 (%d sends), stages on "
                 "ranks 0/1 with %d/%d layers, %d/%d activation slots, %d/%d boundary buffers\n", schedule, vpp,
            cfg.layers, layout_extra ? layout_extra : "", wk.prog.n, sends, (int)shape[2], (int)shape[3],
            (int)shape[0], (int)shape[1], (int)shape[4], (int)shape[5]);
  else
    fprintf(log, "  plan program (pp 1, %s, 2 micro-batches): %d ops, %d activation slots\n", schedule, wk.prog.n,
            m.nslots);
  if (keep_n) *keep_n = m.nparams;
  if (keep) *keep = g, g = NULL;
  rc = 0;
out:
  remove(model_path);
  exec_walk_destroy(&wk);
  if (created) exec_model_destroy(&m);
  if (emb && rc == 0) rt_nccl_comm_destroy(w, emb);
  free(tok), free(lab), free(ti), free(li), free(g), free(ref), free(pp1d);
  return rc;
}

/* Interleaved 1F1B needs layers divisible by PP x chunks: the model of cfg
 * with 4 layers, PP = 2 with 2 chunks per stage (virtual stages 0..3 on
 * stages 0, 1, 0, 1) over two micro-batches, and the 1F1B PP2 run of the same
 * model, each against the float64 mean gradient of the two batches (the two
 * runs cannot be compared rank by rank: a rank holds layers 0, 1 under 1F1B
 * and 0, 2 interleaved; the first GPU run compared them so and failed).
 * Returns the number of tensors out of tolerance (2 ranks only). */
static int check_interleaved(rt_nccl *w, const exec_ref_config *cfg, FILE *log, ts_err *e) {
  exec_ref_config c4 = *cfg;
  c4.layers = 4;
  check_data d4;
  error_table *tab = calloc(1, sizeof *tab);
  int bad = -1;
  if (!tab) return ts_fail_sys(e, "exec check: out of memory");
  if (check_data_make(&d4, &c4, w->ranks[0], 2, e)) goto out;
  /* uneven stages (1F1B): 1 + 3 and 3 + 1 layers */
  if (check_pipeline(w, &d4, NULL, 2, "1f1b", 1, NULL, NULL, 0, -1, tab, NULL, NULL, log, e) ||
      check_pipeline(w, &d4, NULL, 2, "interleaved-1f1b", 2, NULL, NULL, 1, -1, tab, NULL, NULL, log, e) ||
      check_pipeline(w, &d4, NULL, 2, "1f1b", 1, ", \"decoder_first_pipeline_num_layers\": 1", NULL, 2, -1, tab, NULL,
                     NULL, log, e) ||
      check_pipeline(w, &d4, NULL, 2, "1f1b", 1, ", \"decoder_last_pipeline_num_layers\": 1", NULL, 3, -1, tab, NULL,
                     NULL, log, e))
    goto out;
  if (rt_world_sum(w, &tab->num[0][0], 4 * EXEC_REF_MAX_TENSORS, e) ||
      rt_world_sum(w, &tab->den[0][0], 4 * EXEC_REF_MAX_TENSORS, e))
    goto out;
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int nt = exec_ref_tensors(&c4, t, EXEC_REF_MAX_TENSORS, &total);
  double worst[4] = {0, 0, 0, 0};
  int worst_t[4] = {0, 0, 0, 0};
  bad = 0;
  for (int c = 0; c < 4; c++)
    for (int i = 0; i < nt; i++) {
      double rel = tab->den[c][i] > 0 ? sqrt(tab->num[c][i] / tab->den[c][i]) : sqrt(tab->num[c][i]);
      if (!(rel <= CHECK_TOL_GRAD)) bad++;
      if (!(rel <= worst[c])) worst[c] = rel, worst_t[c] = i; /* NaN counts as worst */
    }
  fprintf(log, "  4 layers, pp 2, worst tensor vs float64: 1F1B %.2e (%s), interleaved 1F1B (vpp 2) %.2e (%s)%s\n",
          worst[0], t[worst_t[0]].name, worst[1], t[worst_t[1]].name, bad ? "  FAILED" : "");
  fprintf(log, "  4 layers, pp 2 1F1B, uneven stages vs float64: first stage 1 layer %.2e (%s), last stage 1 layer "
          "%.2e (%s)%s\n", worst[2], t[worst_t[2]].name, worst[3], t[worst_t[3]].name,
          worst[2] <= CHECK_TOL_GRAD && worst[3] <= CHECK_TOL_GRAD ? "" : "  FAILED");
out:
  check_data_free(&d4);
  free(tab);
  return bad;
}

/* Relative L2 distance, over all ranks, of a compressed run's gradient from
 * the uncompressed run of the same layout (same local layout on each rank). */
static int codec_distance(rt_nccl *w, const float *g, const float *base, size_t n, double *rel, ts_err *e) {
  double sums[2] = {0, 0};
  for (size_t j = 0; j < n; j++) {
    double dd = (double)g[j] - base[j];
    sums[0] += dd * dd;
    sums[1] += (double)base[j] * base[j];
  }
  if (rt_world_sum(w, sums, 2, e)) return -1;
  *rel = sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
  return 0;
}

/* TACO where the plan puts it besides the TP all-reduces (2 ranks): on the
 * sequence-parallel all-gathers/reduce-scatters (TP 2 + SP) and on the
 * pipeline messages (PP 2, 1F1B), each against the same layout uncompressed;
 * on the DP gradient buckets (DP 2, plain and ZeRO-1) against float64.
 * FP8 changes the numbers by design: the bound is CHECK_TOL_CODEC (the TP
 * all-reduce codec measured 3.0e-2 overall on this model, 2026-11-29). */
#define CHECK_TOL_CODEC 1e-1
static int check_codec_layouts(rt_nccl *w, const check_data *d, FILE *log, int *failures, ts_err *e) {
  const char *taco_tp = ", \"codec_min_bytes\": 0, \"codec\": { \"tp_fwd\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" }, "
                        "\"tp_bwd\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } }";
  const char *taco_pp = ", \"codec_min_bytes\": 0, \"codec\": { \"pp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } }";
  const walked_case sp = {2, 1, ", \"sequence_parallel\": true", d->tok_a, d->lab_a, 0, NULL},
                    sp_taco = {2, 1, ", \"sequence_parallel\": true", d->tok_a, d->lab_a, 0, taco_tp};
  float *g[4] = {NULL, NULL, NULL, NULL};
  size_t n[4] = {0, 0, 0, 0};
  int rc = -1;
  double rel[4];
  error_table *tab = NULL;
  if (check_walked(w, d, &sp, NULL, NULL, -1, NULL, 0, &g[0], &n[0], log, e) ||
      check_walked(w, d, &sp_taco, NULL, NULL, -1, NULL, 0, &g[1], &n[1], log, e) ||
      check_pipeline(w, d, NULL, 2, "1f1b", 1, NULL, NULL, -1, -1, NULL, &g[2], &n[2], log, e) ||
      check_pipeline(w, d, NULL, 2, "1f1b", 1, NULL, taco_pp, -1, -1, NULL, &g[3], &n[3], log, e))
    goto out;
  if (n[0] != n[1] || n[2] != n[3]) {
    ts_fail_sys(e, "exec check: compressed and uncompressed runs hold different parameter counts");
    goto out;
  }
  if (codec_distance(w, g[1], g[0], n[0], &rel[0], e) || codec_distance(w, g[3], g[2], n[2], &rel[1], e)) goto out;
  /* DP2 (rank r on batch r) with TACO on the FP32 gradient buckets, all-reduced
   * and ZeRO-1 reduce-scattered: against the float64 mean gradient (each
   * rank's reduced part; the uncompressed DP2 runs are within 7.5e-3 of it) */
  const char *taco_dp = ", \"codec_min_bytes\": 0, \"codec\": { \"dp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } }";
  const walked_case dp_taco = {1, 2, NULL, d->tok_rank, d->lab_rank, 0, taco_dp},
                    z1_taco = {1, 2, ", \"zero1\": true", d->tok_rank, d->lab_rank, 0, taco_dp};
  tab = calloc(1, sizeof *tab);
  if (!tab) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (check_walked(w, d, &dp_taco, d->grad_mean, tab, 0, NULL, 0, NULL, NULL, log, e) ||
      check_walked(w, d, &z1_taco, d->grad_mean, tab, 1, NULL, 0, NULL, NULL, log, e) ||
      rt_world_sum(w, &tab->num[0][0], 2 * EXEC_REF_MAX_TENSORS, e) ||
      rt_world_sum(w, &tab->den[0][0], 2 * EXEC_REF_MAX_TENSORS, e))
    goto out;
  for (int k = 0; k < 2; k++) {
    double num = 0, den = 0;
    for (int i = 0; i < EXEC_REF_MAX_TENSORS; i++) num += tab->num[k][i], den += tab->den[k][i];
    rel[2 + k] = den > 0 ? sqrt(num / den) : NAN;
  }
  const char *what[4] = {"TP2 + SP, TACO on the all-gathers/reduce-scatters", "PP2 1F1B, TACO on the pipeline messages",
                         "DP2, TACO on the gradient all-reduces", "DP2 ZeRO-1, TACO on the reduce-scatters"};
  for (int k = 0; k < 4; k++) {
    int ok = rel[k] <= CHECK_TOL_CODEC; /* NaN fails */
    fprintf(log, "  codec %-50s grads vs %-12s rel L2 %.3e (bound %.0e)%s\n", what[k], k < 2 ? "uncompressed" : "float64", rel[k],
            CHECK_TOL_CODEC, ok ? "" : "  FAILED");
    if (!ok) (*failures)++;
  }
  rc = 0;
out:
  for (int k = 0; k < 4; k++) free(g[k]);
  free(tab);
  return rc;
}

static int check_config(rt_nccl *w, const exec_ref_config *cfg, FILE *log, int *failures, ts_err *e) {
  const int rank = w->ranks[0], n = w->nranks;
  check_data d;
  error_table *tab = calloc(1, sizeof *tab);
  float *g1 = NULL, *gn = NULL, *gd = NULL, *gtp_plan = NULL;
  double *ref_local = NULL, *tp1_full = NULL, *tp1_local = NULL;
  check_run c1 = {0}, cn = {0}, cd = {0};
  int rc = -1;
  if (!tab) return ts_fail_sys(e, "exec check: out of memory");
  if (check_data_make(&d, cfg, rank, n, e)) goto done;

  /* TP = 1 on every rank alone. */
  if (check_run_make(&c1, &d, 1, 0, NULL, 1, 0, NULL, d.tok_a, d.lab_a, w, e)) goto done;
  if (run_iteration(&c1.m, c1.ops, c1.nops, 0, w, e)) goto done;
  float loss1, lossn, lossd;
  if (exec_model_check_finite(&c1.m, 0, &loss1, e) || get_grads(&c1, &g1, e)) goto done;
  ref_local = malloc(c1.m.nparams * sizeof(double));
  tp1_full = malloc(d.total * sizeof(double));
  if (!ref_local || !tp1_full) goto oom;
  exec_model_shard_of(&c1.m, d.grad_a, ref_local);
  if (rank == 0) accumulate(&c1.m, g1, ref_local, tab, CMP_TP1_REF);
  local_to_full(&c1.m, g1, tp1_full);
  tab->ntensors = c1.m.ntensors;
  for (int i = 0; i < c1.m.ntensors; i++) snprintf(tab->names[i], sizeof tab->names[i], "%s", c1.m.tensors[i].name);

  /* TP = world, every rank on batch 0. */
  if (check_run_make(&cn, &d, n, rank, w->comms[0], 1, 0, NULL, d.tok_a, d.lab_a, w, e)) goto done;
  if (run_iteration(&cn.m, cn.ops, cn.nops, 0, w, e)) goto done;
  if (exec_model_check_finite(&cn.m, 0, &lossn, e) || get_grads(&cn, &gn, e)) goto done;
  free(ref_local);
  ref_local = malloc(cn.m.nparams * sizeof(double));
  tp1_local = malloc(cn.m.nparams * sizeof(double));
  if (!ref_local || !tp1_local) goto oom;
  exec_model_shard_of(&cn.m, d.grad_a, ref_local);
  exec_model_shard_of(&cn.m, tp1_full, tp1_local);
  /* Shards add up over ranks; replicated tensors are counted once per rank in
   * both numerator and denominator, which leaves the ratio unchanged. */
  accumulate(&cn.m, gn, ref_local, tab, CMP_TPN_REF);
  accumulate(&cn.m, gn, tp1_local, tab, CMP_TPN_TP1);

  /* DP = world, TP = 1: rank r on batch r; the all-reduced gradient is the mean. */
  if (check_run_make(&cd, &d, 1, 0, NULL, n, rank, w->comms[0], d.tok_rank, d.lab_rank, w, e)) goto done;
  if (run_iteration(&cd.m, cd.ops, cd.nops, 0, w, e)) goto done;
  if (exec_model_check_finite(&cd.m, 0, &lossd, e) || get_grads(&cd, &gd, e)) goto done;
  free(ref_local);
  ref_local = malloc(cd.m.nparams * sizeof(double));
  if (!ref_local) goto oom;
  exec_model_shard_of(&cd.m, d.grad_mean, ref_local);
  if (rank == 0) accumulate(&cd.m, gd, ref_local, tab, CMP_DPN_REF);

  /* The same TP and DP runs from plan_build_program()'s programs. */
  const walked_case tpn = {n, 1, NULL, d.tok_a, d.lab_a, 0, NULL}, dpn = {1, n, NULL, d.tok_rank, d.lab_rank, 0, NULL};
  if (n > 1 && (check_walked(w, &d, &tpn, d.grad_a, tab, CMP_TPN_PLAN_REF, NULL, 0, &gtp_plan, NULL, log, e) ||
                check_walked(w, &d, &dpn, d.grad_mean, tab, CMP_DPN_PLAN_REF, NULL, 0, NULL, NULL, log, e)))
    goto done;
  /* Layout features on 2 ranks (see cmp_names): sequence parallelism,
   * recomputation, ZeRO-1, each against the run without it. */
  if (n == 2) {
    /* the recomputation cases share the recomputed activations between layers, as a timed run does */
    const walked_case sp = {n, 1, ", \"sequence_parallel\": true", d.tok_a, d.lab_a, 0, NULL},
                      rcf = {n, 1, ", \"recompute\": \"full\"", d.tok_a, d.lab_a, 2, NULL},
                      rcs = {n, 1, ", \"recompute\": \"selective\"", d.tok_a, d.lab_a, 1, NULL},
                      sprc = {n, 1, ", \"sequence_parallel\": true, \"recompute\": \"full\"", d.tok_a, d.lab_a, 2, NULL},
                      z1 = {1, n, ", \"zero1\": true", d.tok_rank, d.lab_rank, 0, NULL},
                      ovl = {n, 1, ", \"tp_overlap_chunks\": 2", d.tok_a, d.lab_a, 0, NULL},
                      dplate = {1, n, ", \"overlap_grad_reduce\": false", d.tok_rank, d.lab_rank, 0, NULL};
    /* one bucket per unit (layer, embedding, head): the buckets and the gathers that follow them are many */
    const char *one_unit_buckets = ", \"dp_bucket_bytes\": 1";
    if (check_walked(w, &d, &sp, d.grad_a, tab, CMP_SP_REF, gtp_plan, CMP_SP_TP, NULL, NULL, log, e) ||
        check_walked(w, &d, &rcf, NULL, tab, -1, gtp_plan, CMP_RCF_TP, NULL, NULL, log, e) ||
        check_walked(w, &d, &rcs, NULL, tab, -1, gtp_plan, CMP_RCS_TP, NULL, NULL, log, e) ||
        check_walked(w, &d, &sprc, NULL, tab, -1, gtp_plan, CMP_SPRC_TP, NULL, NULL, log, e) ||
        check_walked(w, &d, &z1, d.grad_mean, tab, CMP_Z1_REF, NULL, 0, NULL, NULL, log, e) ||
        check_walked(w, &d, &ovl, d.grad_a, tab, CMP_OVL_REF, gtp_plan, CMP_OVL_TP, NULL, NULL, log, e) ||
        check_walked(w, &d, &dplate, d.grad_mean, tab, CMP_DPLATE_REF, NULL, 0, NULL, NULL, log, e) ||
        check_zero1_steps(w, &d, n, ", \"zero1\": true", NULL, CMP_Z1_STEP, tab, log, e) ||
        check_zero1_steps(w, &d, n, ", \"zero1\": true, \"overlap_grad_reduce\": false", one_unit_buckets,
                          CMP_Z1LATE_STEP, tab, log, e) ||
        check_zero1_steps(w, &d, n, ", \"zero1\": true, \"overlap_param_gather\": true", one_unit_buckets,
                          CMP_Z1PG_STEP, tab, log, e))
      goto done;
  }
  /* PP = 2 on two ranks (the DP run above is its PP = 1 counterpart) */
  /* (the executor's pipeline needs tied embeddings: untied models run at PP = 1) */
  if (n == 2 && !cfg->untied && (check_pipeline(w, &d, gd, 2, "1f1b", 1, NULL, NULL, CMP_PP2_PLAN_REF, CMP_PP2_PP1, tab, NULL, NULL, log, e) ||
                 check_pipeline(w, &d, gd, 2, "gpipe", 1, NULL, NULL, CMP_GPIPE_REF, CMP_GPIPE_PP1, tab, NULL, NULL, log, e) ||
                 check_pipeline(w, &d, gd, 1, "gpipe", 1, NULL, NULL, CMP_GPIPE1_REF, CMP_GPIPE1_DP2, tab, NULL, NULL, log, e)))
    goto done;

  if (rt_world_sum(w, &tab->num[0][0], CMP_COUNT * EXEC_REF_MAX_TENSORS, e) ||
      rt_world_sum(w, &tab->den[0][0], CMP_COUNT * EXEC_REF_MAX_TENSORS, e))
    goto done;

  fprintf(log, "\nmodel: vocab %d, hidden %d, heads %d (kv %d), ffn %d, layers %d, seq %d, micro-batch %d, %s, %s "
          "(eps %g), %s%s%s%s; %d rank(s)\n",
          cfg->vocab, cfg->hidden, cfg->heads, exec_ref_kv_heads(cfg), cfg->ffn, cfg->layers, cfg->seq, cfg->batch,
          cfg->act == EXEC_ACT_GELU ? "GELU" : "SwiGLU", cfg->norm == EXEC_NORM_LAYERNORM ? "LayerNorm" : "RMSNorm",
          cfg->norm_eps, cfg->rope_theta > 0 ? "RoPE" : "learned positions", cfg->qkv_bias ? ", QKV bias" : "",
          cfg->linear_bias ? ", linear biases" : "", cfg->untied ? ", untied output weight" : ", tied", n);
  if (cfg->rope_theta > 0) fprintf(log, "  rope theta %g\n", cfg->rope_theta);
  fprintf(log, "  loss: float64 %.6f  tp1 %.6f  tp%d %.6f  (dp%d rank-0 share %.6f)\n", d.loss_a, loss1, n, lossn, n,
          lossd);
  int bad = 0;
  if (fabs(loss1 - d.loss_a) > CHECK_TOL_LOSS * d.loss_a || fabs(lossn - d.loss_a) > CHECK_TOL_LOSS * d.loss_a) bad++;
  fprintf(log, "  %-18s", "relative L2 error");
  for (int c = 0; c < CMP_COUNT; c++) fprintf(log, " %12s", cmp_names[c]);
  fprintf(log, "\n");
  double worst[CMP_COUNT] = {0};
  for (int i = 0; i < tab->ntensors; i++) {
    fprintf(log, "  %-18s", tab->names[i]);
    for (int c = 0; c < CMP_COUNT; c++) {
      if (n == 1 && c >= CMP_TPN_PLAN_REF) continue; /* the plan runs need 2 ranks */
      if (n != 2 && c >= CMP_PP2_PLAN_REF) continue;  /* the pipeline check needs exactly 2 */
      double rel = tab->den[c][i] > 0 ? sqrt(tab->num[c][i] / tab->den[c][i]) : sqrt(tab->num[c][i]);
      worst[c] = rel > worst[c] ? rel : worst[c];
      if (!(rel <= CHECK_TOL_GRAD)) bad++;
      fprintf(log, " %12.2e%s", rel, rel <= CHECK_TOL_GRAD ? " " : "!");
    }
    fprintf(log, "\n");
  }
  fprintf(log, "  %-18s", "worst");
  for (int c = 0; c < CMP_COUNT; c++) fprintf(log, " %12.2e ", worst[c]);
  fprintf(log, "  (tolerance %.0e)\n", CHECK_TOL_GRAD);

  if (n == 2 && !cfg->untied) {
    int il_bad = check_interleaved(w, cfg, log, e);
    if (il_bad < 0) goto done;
    bad += il_bad;
  }

  int nan_ok = check_nan_stop(&cn, &d, w, log, e);
  if (nan_ok < 0) goto done;
  if (!nan_ok) bad++;

  float f1 = 0, l1 = 0, fn = 0, ln = 0;
  if (train_steps(&c1, 30, w, &f1, &l1, e) || train_steps(&cn, 30, w, &fn, &ln, e)) goto done;
  fprintf(log, "  30 AdamW steps (lr 1e-3) on one batch: tp1 loss %.4f -> %.4f, tp%d loss %.4f -> %.4f\n", f1, l1, n,
          fn, ln);
  if (!(l1 < 0.9f * f1) || !(ln < 0.9f * fn) || fabsf(l1 - ln) > 0.05f * l1) bad++;
  *failures += bad;
  fprintf(log, "  %s\n", bad ? "FAILED" : "passed");
  if (n > 1 && cfg == &check_configs[0] && check_codecs(w, &d, gn, ln, log, failures, e)) goto done;
  if (n == 2 && cfg == &check_configs[0] && check_codec_layouts(w, &d, log, failures, e)) goto done;
  rc = 0;
  goto done;
oom:
  ts_fail_sys(e, "exec check: out of memory");
done:
  check_run_free(&c1), check_run_free(&cn), check_run_free(&cd);
  free(g1), free(gn), free(gd), free(gtp_plan), free(ref_local), free(tp1_full), free(tp1_local), free(tab);
  check_data_free(&d);
  return rc;
}

int exec_run_check(rt_nccl *w, const char *json_out, int which, ts_err *e) {
  const int dense = which == EXEC_CHECK_ALL, moe = which != EXEC_CHECK_MLA, mla = which != EXEC_CHECK_MOE;
  (void)json_out;
  int failures = 0;
  FILE *log = w->ranks[0] == 0 ? stdout : fopen("/dev/null", "w");
  if (!log) return ts_fail_sys(e, "exec check: cannot open /dev/null");
  int rc = 0;
  for (size_t i = 0; i < sizeof check_configs / sizeof *check_configs && !rc && dense; i++)
    rc = check_config(w, &check_configs[i], log, &failures, e);
  if (!rc && moe) rc = exec_check_moe(w, log, &failures, e); /* mixture-of-experts layers, one GPU (exec_check_moe.c) */
  if (!rc && mla) rc = exec_check_mla(w, log, &failures, e); /* latent attention, one GPU (exec_check_mla.c) */
  if (!rc) fprintf(log, "\nexecute --check: %s (%d failure(s))\n", failures ? "FAILED" : "all passed", failures);
  fflush(log);
  if (log != stdout) fclose(log);
  if (!rc && failures) return ts_fail_sys(e, "execute --check: %d check(s) out of tolerance", failures);
  return rc;
}
