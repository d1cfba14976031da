/* test_exec_ref.c — the float64 reference GPT stack (runtime/ops/exec_ref.c) is
 * trusted because its analytic gradients match central finite differences on
 * every parameter, for each activation and norm. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_ref.h"
#include "rt_ops_ref.h"

static exec_ref_config tiny(exec_act act, exec_norm norm) {
  exec_ref_config c = {.vocab = 11, .hidden = 8, .heads = 2, .ffn = 12, .layers = 2, .seq = 5, .batch = 2,
                       .act = act, .norm = norm, .norm_eps = 1e-5};
  return c;
}

/* Relative L2 distance between the analytic and the finite-difference
 * gradient of each tensor; returns the worst over tensors. */
static double worst_fd_error(exec_ref_config c, char *worst_name) {
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int nt = exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
  double *p = malloc(sizeof(double) * total), *g = malloc(sizeof(double) * total);
  int *tok = malloc(sizeof(int) * c.batch * c.seq), *tgt = malloc(sizeof(int) * c.batch * c.seq);
  CU_ASSERT_FATAL(p && g && tok && tgt);
  exec_ref_init(&c, 42, 0, p);
  /* Larger weights than the default init so every path carries signal, small
   * enough that the softmax stays smooth at this step. */
  for (int i = 0; i < nt; i++) /* (the router's init already spreads its logits; x4 would saturate the top-k softmax) */
    for (size_t j = t[i].offset; j < t[i].offset + t[i].rows * t[i].cols && t[i].kind != EXEC_T_ROUTER; j++) p[j] *= 4.0;
  exec_ref_tokens(&c, 7, tok, tgt);
  ts_err e;
  double loss, lp, lm, worst = 0;
  CU_ASSERT_FATAL(exec_ref_loss_grad(&c, p, tok, tgt, &loss, g, &e) == 0);
  const double step = 1e-6; /* truncation error ~ step^2, rounding ~ 1e-16 / step */
  for (int i = 0; i < nt; i++) {
    double num = 0, den = 0;
    for (size_t j = t[i].offset; j < t[i].offset + t[i].rows * t[i].cols; j++) {
      double keep = p[j];
      p[j] = keep + step;
      exec_ref_loss_grad(&c, p, tok, tgt, &lp, NULL, &e);
      p[j] = keep - step;
      exec_ref_loss_grad(&c, p, tok, tgt, &lm, NULL, &e);
      p[j] = keep;
      double fd = (lp - lm) / (2 * step);
      num += (fd - g[j]) * (fd - g[j]);
      den += fd * fd;
    }
    double rel = sqrt(num / (den > 1e-300 ? den : 1e-300));
    if (den == 0 && num == 0) rel = 0;
    if (rel > worst) {
      worst = rel;
      snprintf(worst_name, 32, "%.31s", t[i].name); /* names are short; say so to the compiler */
    }
  }
  free(p); free(g); free(tok); free(tgt);
  return worst;
}

static void check_fd(exec_act act, exec_norm norm) {
  char name[32] = "-";
  double worst = worst_fd_error(tiny(act, norm), name);
  if (worst > 1e-6) fprintf(stderr, "\n  worst tensor %s: rel L2 %.3g\n", name, worst);
  CU_ASSERT(worst < 1e-6);
}
static void test_fd_gelu_layernorm(void) { check_fd(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM); }
static void test_fd_swiglu_rmsnorm(void) { check_fd(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM); }
static void test_fd_gelu_rmsnorm(void) { check_fd(EXEC_ACT_GELU, EXEC_NORM_RMSNORM); }
static void test_fd_swiglu_layernorm(void) { check_fd(EXEC_ACT_SWIGLU, EXEC_NORM_LAYERNORM); }

/* Grouped-query attention: 4 query heads over 2 key/value heads, and over one
 * (multi-query); the key/value gradients sum over the heads of a group. */
static void test_fd_gqa(void) {
  for (int kv = 2; kv >= 1; kv--) {
    exec_ref_config c = tiny(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM);
    c.heads = 4;
    c.kv_heads = kv;
    char name[32] = "-";
    double worst = worst_fd_error(c, name);
    if (worst > 1e-6) fprintf(stderr, "\n  kv_heads %d: worst tensor %s: rel L2 %.3g\n", kv, name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* The zoo's families in small: Llama (RoPE, GQA, untied output weight, and
 * Llama 3.1's frequency scaling), Qwen2.5 (RoPE, QKV bias, GQA, untied, eps
 * 1e-6) and GPT (learned positions, biases on every linear layer, tied). */
static exec_ref_config family(int which) {
  exec_ref_config c = tiny(which == 2 ? EXEC_ACT_GELU : EXEC_ACT_SWIGLU,
                           which == 2 ? EXEC_NORM_LAYERNORM : EXEC_NORM_RMSNORM);
  c.hidden = 16;
  c.heads = 4;
  if (which == 0) { /* llama */
    c.kv_heads = 2, c.rope_theta = 10000.0, c.untied = 1;
    c.rope_factor = 8.0, c.rope_low_freq = 1.0, c.rope_high_freq = 4.0, c.rope_orig_max = 16;
  } else if (which == 1) { /* qwen */
    c.kv_heads = 2, c.rope_theta = 1e6, c.untied = 1, c.qkv_bias = 1, c.norm_eps = 1e-6;
  } else { /* gpt */
    c.qkv_bias = 1, c.linear_bias = 1;
  }
  return c;
}
static void test_fd_families(void) {
  const char *names[] = {"llama (rope, gqa, untied, scaled)", "qwen (rope, qkv bias, gqa, untied)",
                         "gpt (biases, tied)"};
  for (int f = 0; f < 3; f++) {
    char name[32] = "-";
    double worst = worst_fd_error(family(f), name);
    if (worst > 1e-6) fprintf(stderr, "\n  %s: worst tensor %s: rel L2 %.3g\n", names[f], name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* Qwen3's attention: 4 query heads over 2 key/value heads of head_dim 8 on
 * hidden 16 (Q 32 wide: attn_out maps 32 columns back to 16), the QK norm's
 * RMSNorm of each query and key head (its weights 1 + normal(0, 0.1)) before
 * RoPE; dense, and as Qwen3-30B-A3B is (every layer MoE, top-2 of 4). */
static void test_fd_qwen3(void) {
  for (int which = 0; which < 2; which++) {
    exec_ref_config c = tiny(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM);
    c.hidden = 16, c.heads = 4, c.kv_heads = 2, c.head_dim = 8, c.qk_norm = 1;
    c.rope_theta = 1e6, c.untied = 1, c.norm_eps = 1e-6;
    if (which == 1) c.experts = 4, c.top_k = 2, c.expert_ffn = 6;
    CU_ASSERT_EQUAL(exec_ref_qkv_cols(&c), 32 + 2 * 16);
    exec_tensor t[EXEC_REF_MAX_TENSORS];
    size_t total;
    int nt = exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
    int qn = exec_ref_tensor_index(&c, 1, EXEC_T_Q_NORM), kn = exec_ref_tensor_index(&c, 1, EXEC_T_K_NORM),
        ao = exec_ref_tensor_index(&c, 1, EXEC_T_ATTN_OUT);
    CU_ASSERT_FATAL(qn > 0 && kn == qn + 1 && ao == kn + 1 && ao < nt);
    CU_ASSERT_STRING_EQUAL(t[qn].name, "layer1.q_norm");
    CU_ASSERT_EQUAL(t[qn].cols, 8);
    CU_ASSERT_EQUAL(t[ao].rows, 32);
    char name[32] = "-";
    double worst = worst_fd_error(c, name);
    if (worst > 1e-6) fprintf(stderr, "\n  qwen3 %d: worst tensor %s: rel L2 %.3g\n", which, name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* Multi-head latent attention (exec_ref_mla.c), DeepSeek-V3's shape in small: 2 heads over hidden 16,
 * q_lora 6, kv_lora 5, qk_nope 4, qk_rope 4 (the one rotated key every head shares), v_head 3 (so the
 * attention output, 2 x 3, is neither hidden nor heads x (nope + rope)); with RoPE and a dense FFN, with
 * RoPE and MoE layers after a dense one (DeepSeek-V3's layout), and with learned positions. */
static void test_fd_mla(void) {
  for (int which = 0; which < 3; which++) {
    exec_ref_config c = tiny(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM);
    c.hidden = 16, c.heads = 2, c.untied = 1, c.norm_eps = 1e-6;
    c.q_lora = 6, c.kv_lora = 5, c.qk_nope = 4, c.qk_rope = 4, c.v_head = 3;
    if (which < 2) c.rope_theta = 1e4;
    if (which == 1) c.experts = 4, c.top_k = 2, c.expert_ffn = 6, c.shared_ffn = 6, c.dense_layers = 1;
    CU_ASSERT_EQUAL(exec_ref_head_dim(&c), 8);
    CU_ASSERT_EQUAL(exec_ref_qkv_cols(&c), 2 * 8 + 2 * 8 + 2 * 3);
    CU_ASSERT_EQUAL(exec_ref_attn_cols(&c), 6);
    exec_tensor t[EXEC_REF_MAX_TENSORS];
    size_t total;
    exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
    const int qa = exec_ref_tensor_index(&c, 1, EXEC_T_Q_A), kvb = exec_ref_tensor_index(&c, 1, EXEC_T_KV_B);
    const int ao = exec_ref_tensor_index(&c, 1, EXEC_T_ATTN_OUT);
    CU_ASSERT_FATAL(qa > 0 && kvb == qa + 5 && ao == kvb + 1);
    CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, 1, EXEC_T_QKV), -1);
    CU_ASSERT_STRING_EQUAL(t[qa + 3].name, "layer1.kv_a");
    CU_ASSERT(t[qa].rows == 16 && t[qa].cols == 6);          /* q_a */
    CU_ASSERT(t[qa + 2].rows == 6 && t[qa + 2].cols == 16);  /* q_b: 2 heads x (4 + 4) */
    CU_ASSERT(t[qa + 3].rows == 16 && t[qa + 3].cols == 9);  /* kv_a: kv_lora + rope */
    CU_ASSERT(t[qa + 4].cols == 5);                          /* kv_a_norm */
    CU_ASSERT(t[kvb].rows == 5 && t[kvb].cols == 14);        /* kv_b: 2 heads x (4 + 3) */
    CU_ASSERT(t[ao].rows == 6 && t[ao].cols == 16);
    char name[32] = "-";
    double worst = worst_fd_error(c, name);
    if (worst > 1e-6) fprintf(stderr, "\n  mla %d: worst tensor %s: rel L2 %.3g\n", which, name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* rt_mla.h's references (rt_ops_ref.c), which the GPU kernels are checked against: each backward is its
 * forward's transpose, <F x, y> = <x, B y>. RoPE: F takes the query heads' rope parts and the shared key to
 * the rotated query parts and every key head's rope columns; B (rt_ref_mla_rope_bwd) sums the key heads.
 * The kv scatter's transpose is the gather. 3 heads of nope 2 + rope 4, v 3, 5 rows past a sequence of 3. */
static void test_mla_kernel_refs(void) {
  enum { R = 5, H = 3, NOPE = 2, ROPE = 4, DV = 3, DQK = NOPE + ROPE, LD = 2 * H * DQK + H * DV + 1, KW = 7 };
  float x[R * LD], fx[R * LD], y[R * LD], by[R * LD], kr[R * KW], dkr[R * KW], f[ROPE / 2];
  unsigned s = 12345;
  for (int i = 0; i < R * LD; i++) x[i] = (float)((s = s * 1103515245u + 12345u) >> 16) / 32768.f - 1.f;
  for (int i = 0; i < R * LD; i++) y[i] = (float)((s = s * 1103515245u + 12345u) >> 16) / 32768.f - 1.f;
  for (int i = 0; i < R * KW; i++) kr[i] = (float)((s = s * 1103515245u + 12345u) >> 16) / 32768.f - 1.f;
  for (int i = 0; i < ROPE / 2; i++) f[i] = (float)pow(1e4, -2.0 * i / ROPE);
  memcpy(fx, x, sizeof x), memcpy(by, y, sizeof y), memset(dkr, 0, sizeof dkr);
  rt_ref_mla_rope_fwd(fx, LD, kr + 3, KW, R, H, NOPE, ROPE, 3, f);
  rt_ref_mla_rope_bwd(by, LD, dkr + 3, KW, R, H, NOPE, ROPE, 3, f);
  double lhs = 0, rhs = 0;
  for (int r = 0; r < R; r++) {
    for (int j = 0; j < 2 * H; j++) /* the query heads' and the key heads' rope columns */
      for (int i = 0; i < ROPE; i++) lhs += (double)fx[r * LD + j * DQK + NOPE + i] * y[r * LD + j * DQK + NOPE + i];
    for (int j = 0; j < H; j++)
      for (int i = 0; i < ROPE; i++) rhs += (double)x[r * LD + j * DQK + NOPE + i] * by[r * LD + j * DQK + NOPE + i];
    for (int i = 0; i < ROPE; i++) rhs += (double)kr[r * KW + 3 + i] * dkr[r * KW + 3 + i];
  }
  CU_ASSERT(fabs(lhs - rhs) < 1e-5 * (fabs(lhs) + 1));
  /* the rotation is not the identity (position 1's angles are not 0), and the key's copies are equal */
  CU_ASSERT(fabs(fx[LD + NOPE] - x[LD + NOPE]) > 1e-3);
  CU_ASSERT_EQUAL(fx[LD + H * DQK + NOPE], fx[LD + (H + 2) * DQK + NOPE]);
  /* kv scatter and gather */
  float kvb[R * H * (NOPE + DV)], g[R * H * (NOPE + DV)];
  for (int i = 0; i < R * H * (NOPE + DV); i++) kvb[i] = (float)((s = s * 1103515245u + 12345u) >> 16) / 32768.f - 1.f;
  memset(fx, 0, sizeof fx);
  rt_ref_mla_kv_scatter(kvb, fx, R, LD, H, NOPE, ROPE, DV);
  rt_ref_mla_kv_gather(y, g, R, LD, H, NOPE, ROPE, DV);
  lhs = rhs = 0;
  for (int i = 0; i < R * LD; i++) lhs += (double)fx[i] * y[i];
  for (int i = 0; i < R * H * (NOPE + DV); i++) rhs += (double)kvb[i] * g[i];
  CU_ASSERT(fabs(lhs - rhs) < 1e-5 * (fabs(lhs) + 1));
  CU_ASSERT_EQUAL(fx[LD + H * DQK + DQK + 1], kvb[(H + 1) * (NOPE + DV) + 1]);      /* row 1, head 1's k_nope[1] */
  CU_ASSERT_EQUAL(fx[LD + 2 * H * DQK + DV + 2], kvb[(H + 1) * (NOPE + DV) + NOPE + 2]); /* its v[2] */
}

/* Mixture-of-experts layers (exec_ref_moe.c): router, top-2 of 4 experts
 * with the softmax over the chosen logits, the experts' FFNs, the weighted
 * sum; Qwen3/DeepSeek-like (a dense first layer, a shared FFN, SwiGLU,
 * RMSNorm) and Mixtral-like (every layer MoE, no shared FFN; here GELU and
 * LayerNorm). Central differences at step 1e-6 never cross a routing
 * boundary at these weights (the logits' gaps are far larger). */
static exec_ref_config moe(int which) {
  exec_ref_config c = which == 0 ? tiny(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM) : tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  c.experts = 4, c.top_k = 2, c.expert_ffn = 6;
  if (which == 0) c.shared_ffn = 6, c.dense_layers = 1, c.rope_theta = 1e4, c.kv_heads = 1, c.untied = 1;
  return c;
}
static void test_fd_moe(void) {
  for (int which = 0; which < 2; which++) {
    char name[32] = "-";
    double worst = worst_fd_error(moe(which), name);
    if (worst > 1e-6) fprintf(stderr, "\n  moe %d: worst tensor %s: rel L2 %.3g\n", which, name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* DeepSeek-V3's router (exec_ref_moe.c): sigmoid scores, the choice by score
 * + a fixed random bias, group-limited (12 experts in 3 groups, 2 kept, top
 * 4: a group's score the sum of its top 2), the weights normalised over the
 * chosen scores and scaled by 2.5, a shared FFN, a dense first layer; and top
 * 1 without groups (the weight is the scaled score itself). The bias takes
 * part in the choice only: no gradient, and the finite differences see the
 * same choice (step 1e-6, far inside the score gaps). */
static void test_fd_deepseek_router(void) {
  static double bias[2 * 12];
  unsigned long long x = 88172645463325252ull;
  for (int i = 0; i < 2 * 12; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bias[i] = -0.05 + 0.1 * (double)(x >> 11) / 9007199254740992.0;
  }
  for (int which = 0; which < 2; which++) {
    exec_ref_config c = moe(0);
    c.router_sigmoid = 1, c.router_scale = 2.5;
    if (which == 0) c.experts = 12, c.top_k = 4, c.router_groups = 3, c.router_group_topk = 2, c.router_bias = bias;
    else c.experts = 4, c.top_k = 1;
    ts_err e;
    CU_ASSERT_FATAL(exec_ref_config_check(&c, &e) == 0);
    char name[32] = "-";
    double worst = worst_fd_error(c, name);
    printf("\n    %s: worst tensor %s, relative L2 %.2e", which ? "top 1, no groups" : "12 experts, 3 groups, top 4, bias",
           name, worst);
    CU_ASSERT(worst < 1e-6);
  }
}

/* The sigmoid router routed from outside (router_choice, as `execute --check-moe` routes the reference as the
 * executor did): given its own choices (router_choice_out of a first pass) the loss and every gradient are the
 * same bits; given them with one token moved to an expert it did not choose, the loss differs; and the
 * gradients of a given routing still pass the finite differences. */
static void test_deepseek_given_choice(void) {
  exec_ref_config c = moe(0);
  c.router_sigmoid = 1, c.router_scale = 2.5, c.experts = 12, c.top_k = 4, c.router_groups = 3, c.router_group_topk = 2;
  ts_err e;
  CU_ASSERT_FATAL(exec_ref_config_check(&c, &e) == 0);
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
  const int T = c.batch * c.seq;
  const size_t n = (size_t)c.layers * T * c.top_k;
  double *p = malloc(total * 8), *g0 = malloc(total * 8), *g1 = malloc(total * 8), l0, l1;
  int *tok = malloc(T * sizeof *tok), *lab = malloc(T * sizeof *lab), *own = malloc(n * sizeof *own),
      *given = malloc(n * sizeof *given);
  CU_ASSERT_FATAL(p && g0 && g1 && tok && lab && own && given);
  exec_ref_init(&c, 7, 0, p);
  exec_ref_tokens(&c, 3, tok, lab);
  c.router_choice_out = own;
  CU_ASSERT_EQUAL_FATAL(exec_ref_loss_grad(&c, p, tok, lab, &l0, g0, &e), 0);
  memcpy(given, own, n * sizeof *own);
  c.router_choice_out = NULL, c.router_choice = given;
  CU_ASSERT_EQUAL_FATAL(exec_ref_loss_grad(&c, p, tok, lab, &l1, g1, &e), 0);
  CU_ASSERT_EQUAL(l0, l1);
  CU_ASSERT_EQUAL(memcmp(g0, g1, total * 8), 0);
  int l = 0;
  while (!exec_ref_layer_is_moe(&c, l)) l++;
  int *row = given + (size_t)l * T * c.top_k; /* token 0 of the first MoE layer: its last choice to a free expert */
  int other = 0;
  for (int found = 1; found; other += found) {
    found = 0;
    for (int j = 0; j < c.top_k; j++) found |= row[j] == other;
  }
  row[c.top_k - 1] = other;
  CU_ASSERT_EQUAL_FATAL(exec_ref_loss_grad(&c, p, tok, lab, &l1, g1, &e), 0);
  CU_ASSERT_NOT_EQUAL(l0, l1);
  char name[32] = "-";
  double worst = worst_fd_error(c, name);
  printf("\n    given routing (one token moved): worst tensor %s, relative L2 %.2e", name, worst);
  CU_ASSERT(worst < 1e-6);
  free(p), free(g0), free(g1), free(tok), free(lab), free(own), free(given);
}

/* The routing of one token by hand: 8 experts in 4 groups of 2, 2 groups
 * kept, top 2 (a group's score: its top 1); scores = sigmoid(logits). */
static void test_deepseek_route_by_hand(void) {
  exec_ref_config c = moe(0);
  c.experts = 8, c.top_k = 2, c.router_sigmoid = 1, c.router_groups = 4, c.router_group_topk = 2, c.router_scale = 2.5;
  /* groups {0,1} {2,3} {4,5} {6,7}: the best score per group 3.0, 2.5, 2.9, 1.0 -> groups 0 and 2 kept */
  const double logit[8] = {3.0, -1.0, 2.5, 2.4, 2.9, 2.8, 1.0, 0.0};
  const double nobias[8] = {0};
  int idx[2];
  double w[2], sel[2], s[8], dl[8];
  for (int i = 0; i < 8; i++) s[i] = 1 / (1 + exp(-logit[i]));
  exec_ref_moe_route(&c, logit, nobias, idx, w, sel);
  CU_ASSERT_EQUAL(idx[0], 0); /* among experts 0, 1, 4, 5 only: 2.5 (expert 2, group 1 dropped) is not a choice */
  CU_ASSERT_EQUAL(idx[1], 4);
  CU_ASSERT_DOUBLE_EQUAL(w[0], 2.5 * s[0] / (s[0] + s[4]), 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(w[1], 2.5 * s[4] / (s[0] + s[4]), 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(sel[1], s[4], 1e-15);
  /* a bias of +0.2 on expert 3 lifts group 1 (2.4's score + 0.2 beats group 2's best) and picks expert 3; its
   * weight is still its unbiased score */
  const double bias[8] = {0, 0, 0, 0.2, 0, 0, 0, 0};
  exec_ref_moe_route(&c, logit, bias, idx, w, sel);
  CU_ASSERT_EQUAL(idx[0], 3);
  CU_ASSERT_EQUAL(idx[1], 0);
  CU_ASSERT_DOUBLE_EQUAL(w[0], 2.5 * s[3] / (s[3] + s[0]), 1e-15);
  /* the backward: dL/dlogit_j = 2.5 (dw_j - sum_i p_i dw_i) / S  s_j (1 - s_j), 0 for the others */
  const double dw[2] = {1.0, -0.5};
  exec_ref_moe_route_bwd(&c, idx, w, sel, dw, dl);
  const double S = s[3] + s[0], d = (s[3] * 1.0 + s[0] * -0.5) / S;
  CU_ASSERT_DOUBLE_EQUAL(dl[3], 2.5 * (1.0 - d) / S * s[3] * (1 - s[3]), 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(dl[0], 2.5 * (-0.5 - d) / S * s[0] * (1 - s[0]), 1e-15);
  for (int i = 0; i < 8; i++)
    if (i != 0 && i != 3) CU_ASSERT_EQUAL(dl[i], 0.0);
}

/* The MoE layout: a dense first layer keeps fc1/fc2, MoE layers have the
 * router, the stacked experts and (when set) the shared FFN, every tensor
 * found again by kind and layer; bad MoE fields are refused by name. */
static void test_moe_layout(void) {
  exec_ref_config c = moe(0);
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int n = exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, t[i].layer, t[i].kind), i);
  CU_ASSERT(exec_ref_tensor_index(&c, 0, EXEC_T_FC1) >= 0);
  CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, 0, EXEC_T_ROUTER), -1);
  CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, 1, EXEC_T_FC1), -1);
  int fc1 = exec_ref_tensor_index(&c, 1, EXEC_T_EXPERT_FC1), fc2 = exec_ref_tensor_index(&c, 1, EXEC_T_EXPERT_FC2);
  CU_ASSERT_FATAL(fc1 >= 0 && fc2 >= 0);
  CU_ASSERT_EQUAL(t[fc1].rows, 4u * 8u); /* experts x hidden */
  CU_ASSERT_EQUAL(t[fc1].cols, 12u);     /* SwiGLU: [gate | up] of 6 */
  CU_ASSERT_EQUAL(t[fc2].rows, 4u * 6u);
  CU_ASSERT(exec_ref_tensor_index(&c, 1, EXEC_T_SHARED_FC2) >= 0);
  CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, -1, EXEC_T_LM_HEAD), n - 1);
  ts_err e;
  exec_ref_config bad = c;
  bad.top_k = 5;
  CU_ASSERT(exec_ref_config_check(&bad, &e) != 0 && strstr(e.msg, "top_k") != NULL);
  bad = c, bad.linear_bias = 1;
  CU_ASSERT(exec_ref_config_check(&bad, &e) != 0 && strstr(e.msg, "linear_bias") != NULL);
  bad = c, bad.router_groups = 2, bad.router_group_topk = 1; /* groups without the sigmoid router */
  CU_ASSERT(exec_ref_config_check(&bad, &e) != 0 && strstr(e.msg, "router") != NULL);
  bad = c, bad.router_sigmoid = 1, bad.router_groups = 3, bad.router_group_topk = 1; /* 3 does not divide 4 */
  CU_ASSERT(exec_ref_config_check(&bad, &e) != 0 && strstr(e.msg, "router_num_groups") != NULL);
  bad = c, bad.router_sigmoid = 1, bad.router_groups = 2, bad.router_group_topk = 1; /* top 2 of one group of 2 */
  CU_ASSERT(exec_ref_config_check(&bad, &e) == 0);
}

/* Every tensor the layout lists is found again by kind and layer; the
 * optional ones are there exactly when the model has them. */
static void test_tensor_index_families(void) {
  for (int f = 0; f < 3; f++) {
    exec_ref_config c = family(f);
    exec_tensor t[EXEC_REF_MAX_TENSORS];
    size_t total;
    int n = exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, t[i].layer, t[i].kind), i);
    CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, -1, EXEC_T_WPE) >= 0, f == 2);
    CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, 1, EXEC_T_QKV_B) >= 0, f != 0);
    CU_ASSERT_EQUAL(exec_ref_tensor_index(&c, 0, EXEC_T_FC2_B) >= 0, f == 2);
    CU_ASSERT_EQUAL(exec_ref_head_tensor(&c) != 0, f != 2);
    if (f != 2) CU_ASSERT_EQUAL(t[exec_ref_head_tensor(&c)].rows, (size_t)c.vocab);
  }
  exec_ref_config g = family(0);
  CU_ASSERT_EQUAL(exec_ref_tensor_index(&g, 0, EXEC_T_QKV_B), -1);
  CU_ASSERT_EQUAL(exec_ref_tensor_index(&g, 2, EXEC_T_QKV), -1); /* no third layer */
}

/* RoPE: a rotation (norm kept, inverse undoes it, position 0 is the
 * identity), and q . k after it depends on the positions only through their
 * difference. Llama 3.1 scaling keeps short wavelengths, divides long ones
 * by the factor, and ramps between. */
static void test_rope_properties(void) {
  exec_ref_config c = family(1);
  const int d = 8;
  double f[4], q[8], k[8], x[8];
  exec_ref_rope_inv_freq(&c, d, f);
  CU_ASSERT_DOUBLE_EQUAL(f[0], 1.0, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(f[1], pow(1e6, -2.0 / 8), 1e-15);
  for (int i = 0; i < d; i++) q[i] = sin(1.0 + i), k[i] = cos(2.0 * i);
  memcpy(x, q, sizeof x);
  exec_ref_rope_row(x, 1, d, f, 0, 0);
  for (int i = 0; i < d; i++) CU_ASSERT_DOUBLE_EQUAL(x[i], q[i], 1e-15);
  double n0 = 0, n1 = 0;
  exec_ref_rope_row(x, 1, d, f, 37, 0);
  for (int i = 0; i < d; i++) n0 += q[i] * q[i], n1 += x[i] * x[i];
  CU_ASSERT_DOUBLE_EQUAL(n1, n0, 1e-12);
  exec_ref_rope_row(x, 1, d, f, 37, 1);
  for (int i = 0; i < d; i++) CU_ASSERT_DOUBLE_EQUAL(x[i], q[i], 1e-12);
  double dots[2];
  for (int r = 0; r < 2; r++) { /* positions (5, 2) and (13, 10) */
    double qq[8], kk[8], s = 0;
    memcpy(qq, q, sizeof qq), memcpy(kk, k, sizeof kk);
    exec_ref_rope_row(qq, 1, d, f, 5 + 8 * r, 0);
    exec_ref_rope_row(kk, 1, d, f, 2 + 8 * r, 0);
    for (int i = 0; i < d; i++) s += qq[i] * kk[i];
    dots[r] = s;
  }
  CU_ASSERT_DOUBLE_EQUAL(dots[0], dots[1], 1e-12);
  exec_ref_config l = family(0); /* theta 1e4, factor 8, low 1, high 4, original 16: wavelengths 4 .. 16 ramp */
  double fs[2], fu[2];
  exec_ref_rope_inv_freq(&l, 4, fs);
  l.rope_factor = 0;
  exec_ref_rope_inv_freq(&l, 4, fu);
  CU_ASSERT_DOUBLE_EQUAL(fu[1], 0.01, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(fs[1], 0.01 / 8, 1e-15); /* wavelength 628 > 16: divided by the factor */
  double smooth = (16.0 / (2 * 3.141592653589793) - 1.0) / 3.0; /* wavelength 2 pi: on the ramp */
  CU_ASSERT_DOUBLE_EQUAL(fs[0], (1 - smooth) / 8 + smooth, 1e-12);
}

/* The plain-C references of the GPU kernels (rt_ops_ref.c, what
 * rt_ops_selfcheck holds the kernels to) against the float64 model's own
 * RoPE and bias arithmetic: the same rotation of the query and key heads of
 * a qkv row (and its inverse), the same bias row and column sums. */
static void test_kernel_refs(void) {
  exec_ref_config c = family(0);
  const int d = 4, heads = 6, ld = 27, rows = 11, seq = 5; /* 4 query + 2 key heads; ld past them */
  double f64[2], xd[27];
  float f32[2], x[11 * 27], y[11 * 27], b[20], db[20] = {0};
  exec_ref_rope_inv_freq(&c, d, f64);
  for (int i = 0; i < 2; i++) f32[i] = (float)f64[i], f64[i] = f32[i]; /* both from the same float frequencies */
  for (int i = 0; i < rows * ld; i++) x[i] = y[i] = (float)sin(0.37 * i);
  for (int inverse = 0; inverse < 2; inverse++) {
    memcpy(y, x, sizeof y);
    rt_ref_rope(y, rows, ld, heads, d, seq, f32, inverse);
    for (int r = 0; r < rows; r++) {
      for (int j = 0; j < ld; j++) xd[j] = x[r * ld + j];
      exec_ref_rope_row(xd, heads, d, f64, r % seq, inverse);
      for (int j = 0; j < ld; j++) CU_ASSERT_DOUBLE_EQUAL(y[r * ld + j], xd[j], 1e-6);
    }
  }
  for (int j = 0; j < 20; j++) b[j] = 0.1f * j - 1.0f;
  memcpy(y, x, sizeof y);
  rt_ref_bias_add(y, b, rows, 20, ld);
  rt_ref_bias_grad(x, db, rows, 20, ld);
  for (int j = 0; j < ld; j++) {
    double s = 0;
    for (int r = 0; r < rows; r++) {
      CU_ASSERT_DOUBLE_EQUAL(y[r * ld + j], x[r * ld + j] + (j < 20 ? b[j] : 0.f), 1e-6);
      s += x[r * ld + j];
    }
    if (j < 20) CU_ASSERT_DOUBLE_EQUAL(db[j], s, 1e-5);
  }
}

/* rt_ops_ref.c's QK norm (the GPU kernels' reference): 3 heads of 8 columns of rows 40 wide (the rest untouched);
 * forward y = x g / sqrt(mean(x^2) + eps) per head, the input kept; backward against central differences of
 * L = sum c . y in double, for dx and dgamma (accumulated onto a non-zero start). */
static void test_qk_norm_ref(void) {
  enum { R = 5, LD = 40, H = 3, D = 8 };
  const float eps = 1e-6f;
  float x[R * LD], y[R * LD], sv[R * H * D], rs[R * H], g[D], dx[R * LD], dg[D];
  double c[R * LD];
  for (int i = 0; i < R * LD; i++) x[i] = (float)sin(0.37 * i + 0.1), c[i] = cos(0.23 * i), dx[i] = (float)c[i];
  for (int i = 0; i < D; i++) g[i] = 1.0f + 0.1f * (float)i, dg[i] = 0.5f;
  memcpy(y, x, sizeof y);
  rt_ref_qk_norm_fwd(y, LD, sv, g, rs, R, H, D, eps);
  for (int r = 0; r < R; r++) {
    for (int j = 0; j < H; j++) {
      double ms = 0;
      for (int i = 0; i < D; i++) ms += (double)x[r * LD + j * D + i] * x[r * LD + j * D + i];
      const double rsd = 1.0 / sqrt(ms / D + eps);
      CU_ASSERT_DOUBLE_EQUAL(rs[r * H + j], rsd, 1e-6 * rsd);
      for (int i = 0; i < D; i++) {
        CU_ASSERT_EQUAL(sv[(r * H + j) * D + i], x[r * LD + j * D + i]);
        CU_ASSERT_DOUBLE_EQUAL(y[r * LD + j * D + i], x[r * LD + j * D + i] * rsd * g[i], 1e-5);
      }
    }
    for (int i = H * D; i < LD; i++) CU_ASSERT_EQUAL(y[r * LD + i], x[r * LD + i]); /* past the heads: untouched */
  }
  rt_ref_qk_norm_bwd(dx, LD, sv, g, rs, dg, R, H, D);
  /* L(x, g) in double; central differences */
  double xd[R * LD], gd[D];
  for (int i = 0; i < R * LD; i++) xd[i] = x[i];
  for (int i = 0; i < D; i++) gd[i] = g[i];
#define QK_LOSS(out)                                                                                     \
  do {                                                                                                  \
    double l_ = 0;                                                                                      \
    for (int r_ = 0; r_ < R; r_++)                                                                      \
      for (int j_ = 0; j_ < H; j_++) {                                                                  \
        const double *v_ = xd + r_ * LD + j_ * D;                                                       \
        double ms_ = 0;                                                                                 \
        for (int i_ = 0; i_ < D; i_++) ms_ += v_[i_] * v_[i_];                                          \
        for (int i_ = 0; i_ < D; i_++) l_ += c[r_ * LD + j_ * D + i_] * v_[i_] * gd[i_] / sqrt(ms_ / D + eps); \
      }                                                                                                 \
    (out) = l_;                                                                                         \
  } while (0)
  const double step = 1e-6;
  for (int r = 0; r < R; r++)
    for (int i = 0; i < H * D; i++) {
      double keep = xd[r * LD + i], lp, lm;
      xd[r * LD + i] = keep + step;
      QK_LOSS(lp);
      xd[r * LD + i] = keep - step;
      QK_LOSS(lm);
      xd[r * LD + i] = keep;
      CU_ASSERT_DOUBLE_EQUAL(dx[r * LD + i], (lp - lm) / (2 * step), 1e-4);
    }
  for (int i = 0; i < D; i++) {
    double keep = gd[i], lp, lm;
    gd[i] = keep + step;
    QK_LOSS(lp);
    gd[i] = keep - step;
    QK_LOSS(lm);
    gd[i] = keep;
    CU_ASSERT_DOUBLE_EQUAL(dg[i], 0.5 + (lp - lm) / (2 * step), 1e-4);
  }
#undef QK_LOSS
  for (int r = 0; r < R; r++)
    for (int i = H * D; i < LD; i++) CU_ASSERT_EQUAL(dx[r * LD + i], (float)c[r * LD + i]); /* untouched */
}

/* A GQA model whose query heads of a group all read equal keys and values is
 * the multi-head model with those keys and values repeated: same loss. */
static void test_gqa_equals_repeated_mha(void) {
  exec_ref_config g = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM), m = g;
  g.heads = m.heads = 4;
  g.kv_heads = 2;
  exec_tensor tg[EXEC_REF_MAX_TENSORS], tm[EXEC_REF_MAX_TENSORS];
  size_t ng, nm;
  int n = exec_ref_tensors(&g, tg, EXEC_REF_MAX_TENSORS, &ng);
  exec_ref_tensors(&m, tm, EXEC_REF_MAX_TENSORS, &nm);
  CU_ASSERT_EQUAL(tg[4].cols, (size_t)(g.hidden + 2 * 2 * 2)); /* layer0.qkv: 8 + 2 x (2 heads x 2) */
  double *pg = malloc(sizeof(double) * ng), *pm = malloc(sizeof(double) * nm);
  exec_ref_init(&g, 7, 0, pg);
  const int h = g.hidden, d = h / g.heads, G = g.heads / g.kv_heads, Wg = h + 2 * g.kv_heads * d, Wm = 3 * h;
  for (int i = 0; i < n; i++) {
    if (tg[i].kind != EXEC_T_QKV) {
      memcpy(pm + tm[i].offset, pg + tg[i].offset, sizeof(double) * tg[i].rows * tg[i].cols);
      continue;
    }
    for (size_t r = 0; r < tg[i].rows; r++)
      for (int col = 0; col < Wm; col++) {
        int block = col / h, j = col % h, src; /* j: column inside q, k or v; head j / d */
        if (block == 0) src = j;
        else src = h + (block - 1) * g.kv_heads * d + (j / d / G) * d + j % d;
        pm[tm[i].offset + r * Wm + col] = pg[tg[i].offset + r * Wg + src];
      }
  }
  int tok[10], tgt[10];
  exec_ref_tokens(&g, 3, tok, tgt);
  double lg, lm;
  ts_err e;
  CU_ASSERT_FATAL(exec_ref_loss_grad(&g, pg, tok, tgt, &lg, NULL, &e) == 0);
  CU_ASSERT_FATAL(exec_ref_loss_grad(&m, pm, tok, tgt, &lm, NULL, &e) == 0);
  CU_ASSERT(fabs(lg - lm) < 1e-12 * fabs(lm));
  free(pg), free(pm);
}

/* With small initial weights the logits are near zero, so the loss is close
 * to log(vocab): a check of the forward pass that needs no second implementation. */
static void test_initial_loss_near_log_vocab(void) {
  exec_ref_config c = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  c.vocab = 64;
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
  double *p = malloc(sizeof(double) * total);
  int tok[10], tgt[10];
  exec_ref_init(&c, 1, 1, p);
  exec_ref_tokens(&c, 1, tok, tgt);
  double loss;
  ts_err e;
  CU_ASSERT_FATAL(exec_ref_loss_grad(&c, p, tok, tgt, &loss, NULL, &e) == 0);
  CU_ASSERT(fabs(loss - log(64.0)) < 0.01 * log(64.0));
  for (int i = 0; i < 10; i++) CU_ASSERT(tok[i] >= 0 && tok[i] < 64 && tgt[i] >= 0 && tgt[i] < 64);
  CU_ASSERT(tgt[0] == tok[1]); /* next-token targets */
  free(p);
}

static void test_tensor_layout(void) {
  exec_ref_config c = tiny(EXEC_ACT_SWIGLU, EXEC_NORM_RMSNORM);
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int n = exec_ref_tensors(&c, t, EXEC_REF_MAX_TENSORS, &total);
  CU_ASSERT_EQUAL(n, 2 + 6 * c.layers + 1); /* no norm biases under RMSNorm */
  size_t expect = 0;
  for (int i = 0; i < n; i++) {
    CU_ASSERT_EQUAL(t[i].offset, expect);
    expect += t[i].rows * t[i].cols;
    if (!strcmp(t[i].name, "layer1.fc1")) CU_ASSERT_EQUAL(t[i].cols, (size_t)(2 * c.ffn));
  }
  CU_ASSERT_EQUAL(total, expect);
}

static void test_round_bf16(void) {
  CU_ASSERT_EQUAL(exec_ref_round_bf16(1.0 + ldexp(1, -8)), 1.0);               /* tie to even */
  CU_ASSERT_EQUAL(exec_ref_round_bf16(1.0 + 3 * ldexp(1, -8)), 1.0 + ldexp(1, -6)); /* tie to even */
  CU_ASSERT_EQUAL(exec_ref_round_bf16(-2.0), -2.0);
  CU_ASSERT(isinf(exec_ref_round_bf16(INFINITY)));
}

static void test_config_rejected(void) {
  exec_ref_config c = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  ts_err e;
  c.heads = 3;
  CU_ASSERT_EQUAL(exec_ref_config_check(&c, &e), -1);
  CU_ASSERT(strstr(e.msg, "heads") != NULL);
  c = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  c.kv_heads = 3; /* does not divide 2 heads */
  CU_ASSERT_EQUAL(exec_ref_config_check(&c, &e), -1);
  CU_ASSERT(strstr(e.msg, "kv_heads") != NULL);
  c = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  c.layers = 0;
  CU_ASSERT_EQUAL(exec_ref_config_check(&c, &e), -1);
  c = tiny(EXEC_ACT_GELU, EXEC_NORM_LAYERNORM);
  c.heads = 8, c.rope_theta = 1e4; /* head dimension 1: RoPE needs pairs */
  CU_ASSERT_EQUAL(exec_ref_config_check(&c, &e), -1);
  CU_ASSERT(strstr(e.msg, "rope_theta") != NULL);
  double loss;
  CU_ASSERT_EQUAL(exec_ref_loss_grad(&c, NULL, NULL, NULL, &loss, NULL, &e), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("exec_ref", NULL, NULL);
  CU_add_test(s, "finite differences, GELU + LayerNorm", test_fd_gelu_layernorm);
  CU_add_test(s, "finite differences, SwiGLU + RMSNorm", test_fd_swiglu_rmsnorm);
  CU_add_test(s, "finite differences, GELU + RMSNorm", test_fd_gelu_rmsnorm);
  CU_add_test(s, "finite differences, mixture of experts (router, top-k, experts, shared)", test_fd_moe);
  CU_add_test(s, "DeepSeek-V3 router: gradients match finite differences", test_fd_deepseek_router);
  CU_add_test(s, "DeepSeek-V3 router: one token by hand", test_deepseek_route_by_hand);
  CU_add_test(s, "MoE tensor layout and field checks", test_moe_layout);
  CU_add_test(s, "finite differences, SwiGLU + LayerNorm", test_fd_swiglu_layernorm);
  CU_add_test(s, "finite differences, grouped-query attention (kv 2 and 1 of 4 heads)", test_fd_gqa);
  CU_add_test(s, "finite differences, llama / qwen / gpt family models", test_fd_families);
  CU_add_test(s, "finite differences, Qwen3 attention (head_dim != hidden / heads, QK norm), dense and MoE", test_fd_qwen3);
  CU_add_test(s, "finite differences, multi-head latent attention (DeepSeek-V3's, small), dense and MoE", test_fd_mla);
  CU_add_test(s, "kernel references (rt_ops_ref.c): MLA's kv scatter / gather and RoPE, each backward the transpose",
              test_mla_kernel_refs);
  CU_add_test(s, "tensor index of the family models", test_tensor_index_families);
  CU_add_test(s, "rope: rotation, relative positions, llama3 scaling", test_rope_properties);
  CU_add_test(s, "kernel references (rt_ops_ref.c): rope, bias add, bias gradient", test_kernel_refs);
  CU_add_test(s, "kernel references (rt_ops_ref.c): the QK norm against finite differences", test_qk_norm_ref);
  CU_add_test(s, "GQA equals MHA with repeated keys/values", test_gqa_equals_repeated_mha);
  CU_add_test(s, "initial loss near log(vocab)", test_initial_loss_near_log_vocab);
  CU_add_test(s, "tensor layout", test_tensor_layout);
  CU_add_test(s, "bf16 rounding", test_round_bf16);
  CU_add_test(s, "bad configuration rejected", test_config_rejected);
  CU_add_test(s, "DeepSeek-V3's router routed from outside (the executor's choices)", test_deepseek_given_choice);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
