/* exec_moe.c — the executor's mixture-of-experts layer ops (see exec_moe.h).
 *
 * Forward: logits[T x E] = n2 . router (FP32 out); top-k (moe_topk); the map
 * of each copy to its row in expert order and the rows per expert (moe_map,
 * copied to the host: the expert GEMMs' shapes, one stream synchronisation
 * per MoE layer and micro-batch, as Megatron-Core's dropless dispatcher
 * has); xp = the permuted rows of n2; per expert e with c_e rows:
 * eu_e = xp_e . W1_e, ea = act(eu), ey_e = ea_e . W2_e; proj = the weighted
 * combine of each token's k rows (moe_combine); the shared FFN adds
 * act(n2 . Ws1) . Ws2 into proj (beta 1). mlp_residual then adds proj as for
 * a dense layer. Backward in reverse; the input gradient of ln2 is the shared
 * FFN's (m->dtmp) plus the experts' (summed over each token's copies) plus
 * the router's, gathered in scratch dn2 and added at the router's dgrad. */
#include "exec_model_internal.h"
#include "exec_moe.h"

#include <stdlib.h>
#include <string.h>

#include "moe_route.h"
#include "moe_route_group.h"
#include "rt_ops.h"

#define EX_ROUTE(call) EX_CUDA((cudaError_t)(call)) /* moe_route.h returns a cudaError_t as int */

typedef struct {
  long long T, h, E, k, tk, fe, U, fs, Us; /* tokens, hidden, experts, top_k, copies, FFN widths */
  long long R;                             /* the expert side's rows at most: tk, or ep x tk (EP > 1) */
} moe_dims;

static moe_dims dims_of(const exec_model *m) {
  const exec_ref_config *c = &m->cfg;
  const long long g = c->act == EXEC_ACT_SWIGLU ? 2 : 1;
  moe_dims d = {.T = m->tokens, .h = c->hidden, .E = c->experts, .k = c->top_k, .fe = c->expert_ffn,
                .fs = c->shared_ffn};
  d.tk = d.T * d.k, d.U = g * d.fe, d.Us = g * d.fs;
  d.R = d.tk * (m->ep > 1 ? m->ep : 1);
  return d;
}

/* ---- memory ---- */

static int dalloc(void **p, size_t bytes, ts_err *e) {
  *p = NULL;
  EX_CUDA(cudaMalloc(p, bytes));
  return 0;
}

static int acts_alloc(const moe_dims *d, int ep_ranks, struct exec_moe_acts *a, ts_err *e) {
  const size_t ep = ep_ranks > 1 ? (size_t)ep_ranks : 1;
  a->hcount = malloc((size_t)d->E * sizeof *a->hcount);
  a->seg_ex = malloc((size_t)d->E * ep * sizeof *a->seg_ex);
  a->seg_cnt = malloc((size_t)d->E * ep * sizeof *a->seg_cnt);
  a->scnt = calloc(ep, sizeof *a->scnt), a->rcnt = calloc(ep, sizeof *a->rcnt);
  a->soff = calloc(ep, sizeof *a->soff), a->roff = calloc(ep, sizeof *a->roff);
  if (!a->hcount || !a->seg_ex || !a->seg_cnt || !a->scnt || !a->rcnt || !a->soff || !a->roff) return ts_fail_sys(e, "exec: out of memory");
  EX_TRY(dalloc((void **)&a->idx, (size_t)d->tk * 4, e));
  EX_TRY(dalloc((void **)&a->pos, (size_t)d->tk * 4, e));
  EX_TRY(dalloc((void **)&a->count, (size_t)d->E * 4, e));
  EX_TRY(dalloc((void **)&a->w, (size_t)d->tk * 4, e));
  EX_TRY(dalloc((void **)&a->sel, (size_t)d->tk * 4, e));
  EX_TRY(dalloc(&a->xp, (size_t)(d->tk * d->h) * 2, e));
  EX_TRY(dalloc(&a->eu, (size_t)(d->R * d->U) * 2, e));
  EX_TRY(dalloc(&a->ea, (size_t)(d->R * d->fe) * 2, e));
  EX_TRY(dalloc(&a->ey, (size_t)(d->tk * d->h) * 2, e));
  if (d->R == d->tk) { /* EP 1: the experts work on the permuted rows themselves */
    a->xe = a->xp, a->ye = a->ey;
    return 0;
  }
  EX_TRY(dalloc(&a->xe, (size_t)(d->R * d->h) * 2, e));
  return dalloc(&a->ye, (size_t)(d->R * d->h) * 2, e);
}

static void acts_free(struct exec_moe_acts *a) {
  if (!a) return;
  if (a->xe != a->xp) cudaFree(a->xe);
  if (a->ye != a->ey) cudaFree(a->ye);
  void *p[] = {a->idx, a->pos, a->count, a->w, a->sel, a->xp, a->eu, a->ea, a->ey};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) cudaFree(p[i]);
  free(a->hcount), free(a->seg_ex), free(a->seg_cnt), free(a->scnt), free(a->rcnt), free(a->soff), free(a->roff);
  free(a);
}

/* The balancing bias (zeros, as Megatron-Core starts it) and its loads, one row per layer. */
static int bias_alloc(const exec_ref_config *c, struct exec_moe_scratch *s, ts_err *e) {
  const size_t n = (size_t)c->layers * c->experts;
  s->load = calloc(n, sizeof *s->load);
  if (!s->load) return ts_fail_sys(e, "exec: out of memory");
  EX_CUDA(cudaMallocHost((void **)&s->load32, n * sizeof *s->load32)); /* pinned: the copy stays asynchronous */
  EX_TRY(dalloc((void **)&s->bias, n * 4, e));
  EX_TRY(dalloc((void **)&s->dload, n * 4, e));
  EX_CUDA(cudaMemset(s->bias, 0, n * 4));
  return 0;
}

static int scratch_alloc(const moe_dims *d, int ep_ranks, struct exec_moe_scratch *s, ts_err *e) {
  const size_t ep = ep_ranks > 1 ? (size_t)ep_ranks : 1;
  if (!(s->hall = malloc((size_t)d->E * ep * 4))) return ts_fail_sys(e, "exec: out of memory");
  EX_TRY(dalloc((void **)&s->allcount, (size_t)d->E * ep * 4, e));
  EX_TRY(dalloc((void **)&s->logits, (size_t)(d->T * d->E) * 4, e));
  EX_TRY(dalloc((void **)&s->dw, (size_t)d->tk * 4, e));
  EX_TRY(dalloc((void **)&s->map, (size_t)(d->E + 1) * 4, e));
  EX_TRY(dalloc(&s->dy, (size_t)(d->tk * d->h) * 2, e));
  EX_TRY(dalloc(&s->dea, (size_t)(d->R * d->fe) * 2, e));
  EX_TRY(dalloc(&s->deu, (size_t)(d->R * d->U) * 2, e));
  EX_TRY(dalloc(&s->dxp, (size_t)(d->tk * d->h) * 2, e));
  EX_TRY(dalloc(&s->dlogits, (size_t)(d->T * d->E) * 2, e));
  EX_TRY(dalloc(&s->dn2, (size_t)(d->T * d->h) * 2, e));
  if (d->R == d->tk) {
    s->dye = s->dy, s->dxe = s->dxp;
    return 0;
  }
  EX_TRY(dalloc(&s->dye, (size_t)(d->R * d->h) * 2, e));
  return dalloc(&s->dxe, (size_t)(d->R * d->h) * 2, e);
}

/* DeepSeek-V3's routing of the config (exec_ref.h's router fields). */
static moe_group_route route_of(const exec_ref_config *c) {
  return (moe_group_route){.groups = c->router_groups, .group_topk = c->router_group_topk,
                           .scale = c->router_scale > 0 ? (float)c->router_scale : 1.0f};
}
static int has_bias(const exec_model *m) { return m->cfg.router_sigmoid && m->cfg.router_bias_rate > 0; }

/* What the executor's MoE does not run, named by field. */
static int refuse(const exec_model *m, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  if (m->tp > 1 || m->pp > 1)
    return ts_fail(e, NULL, "layout", "mixture-of-experts layers run with tp 1, pp 1 only (tp %d, pp %d given; "
                   "expert TP and MoE under TP or PP: NOT IMPLEMENTED here)", m->tp, m->pp);
  if (m->dp > 1 && m->ep < 2)
    return ts_fail(e, NULL, "layout.ep", "MoE layers with dp %d and ep 1: the executor runs experts over DP only with "
                   "expert parallelism (ep 2 .. 8 dividing dp)", m->dp);
  if (c->recompute) return ts_fail(e, NULL, "layout.recompute", "MoE layers are not recomputed (NOT IMPLEMENTED here)");
  if (c->shared_ffn > c->ffn)
    return ts_fail(e, NULL, "shared_experts", "a shared FFN (%d) wider than ffn_hidden (%d) (NOT IMPLEMENTED here)",
                   c->shared_ffn, c->ffn);
  if (c->hidden % 8) return ts_fail(e, NULL, "hidden", "%d: the routing kernels need a multiple of 8", c->hidden);
  const moe_group_route g = route_of(c);
  if (c->router_sigmoid && moe_group_route_valid(c->experts, c->top_k, &g))
    return ts_fail(e, NULL, "router_num_groups", "%d experts, top %d, %d groups (%d kept): not a routing the kernels "
                   "take (moe_route_group.h: at most %d groups dividing the experts, at most %d experts, top %d)",
                   c->experts, c->top_k, c->router_groups, c->router_group_topk, MOE_GROUP_MAX, MOE_ROUTE_MAX_E,
                   MOE_ROUTE_MAX_K);
  return 0;
}

int exec_moe_create(exec_model *m, ts_err *e) {
  if (m->cfg.experts == 0) return 0;
  EX_TRY(refuse(m, e));
  const moe_dims d = dims_of(m);
  m->moe = calloc(1, sizeof *m->moe);
  if (!m->moe) return ts_fail_sys(e, "exec: out of memory");
  EX_TRY(scratch_alloc(&d, m->ep, m->moe, e));
  if (has_bias(m)) EX_TRY(bias_alloc(&m->cfg, m->moe, e));
  for (int slot = 0; slot < m->nslots; slot++)
    for (int l = 0; l < m->cfg.layers; l++) {
      if (!exec_ref_layer_is_moe(&m->cfg, l)) continue;
      exec_layer_acts *a = &m->acts[(size_t)slot * (m->cfg.layers + 1) + l];
      if (!(a->moe = calloc(1, sizeof *a->moe))) return ts_fail_sys(e, "exec: out of memory");
      EX_TRY(acts_alloc(&d, m->ep, a->moe, e));
    }
  return 0;
}

void exec_moe_destroy(exec_model *m) {
  if (m->acts)
    for (int i = 0; i < m->nslots * (m->cfg.layers + 1); i++) acts_free(m->acts[i].moe), m->acts[i].moe = NULL;
  if (!m->moe) return;
  struct exec_moe_scratch *s = m->moe;
  if (s->dye != s->dy) cudaFree(s->dye);
  if (s->dxe != s->dxp) cudaFree(s->dxe);
  void *p[] = {s->logits, s->dw, s->map, s->dy, s->dea, s->deu, s->dxp, s->dlogits, s->dn2, s->allcount,
               s->enc_send, s->enc_recv, s->bias, s->dload};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) cudaFree(p[i]);
  free(s->hall), free(s->load);
  cudaFreeHost(s->load32);
  free(s);
  m->moe = NULL;
}

/* ---- GEMMs ---- */

static int gemm(exec_model *m, exec_gemm_layout lay, long long M, long long N, long long K, const void *A,
                const void *B, float beta, void *C, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(lay, M, N, K);
  return exec_gemm_run(m->gemm, &s, 1.f, A, B, beta, C, m->stream, e);
}
/* An expert's GEMM: its rows follow the routing (exec_gemm.h rows_vary). */
static int expert_gemm_run(exec_model *m, exec_gemm_layout lay, long long M, long long N, long long K, const void *A,
                           const void *B, float beta, void *C, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(lay, M, N, K);
  s.rows_vary = 1;
  return exec_gemm_run(m->gemm, &s, 1.f, A, B, beta, C, m->stream, e);
}

static char *at(const void *base, long long elems, int esize) { return (char *)base + (size_t)elems * esize; }

/* The experts' GEMMs of one op, one per expert with rows (c_e rows from row o_e):
 *   fc1 fwd:   eu_e = xp_e . W1_e      fc2 fwd:   ey_e = ea_e . W2_e
 *   fc2 dgrad: dea_e = dy_e . W2_e^T   fc2 wgrad: dW2_e += ea_e^T . dy_e
 *   fc1 dgrad: dxp_e = deu_e . W1_e^T  fc1 wgrad: dW1_e += xp_e^T . deu_e */
enum { FC1_FWD, FC2_FWD, FC2_DGRAD, FC2_WGRAD, FC1_DGRAD, FC1_WGRAD };

static int expert_gemm(exec_model *m, int l, int which, int ex, long long o, long long c, ts_err *e) {
  const moe_dims d = dims_of(m);
  const struct exec_moe_acts *a = exec_acts(m, l)->moe;
  const struct exec_moe_scratch *s = m->moe;
  const int t1 = exec_layer_tensor(m, l, EXEC_T_EXPERT_FC1), t2 = exec_layer_tensor(m, l, EXEC_T_EXPERT_FC2);
  ex -= m->epl.expert_lo; /* the rank holds its experts only (EP > 1: exec_ep.h) */
  if (ex < 0 || ex >= m->epl.experts_local)
    return ts_fail_sys(e, "exec: expert %d is not one of EP rank %d's", ex + m->epl.expert_lo, m->epl.ep_rank);
  const void *W1 = at(exec_w16_of(m, t1), ex * d.h * d.U, 2), *W2 = at(exec_w16_of(m, t2), ex * d.fe * d.h, 2);
  float *G1 = exec_grad_of(m, t1) + ex * d.h * d.U, *G2 = exec_grad_of(m, t2) + ex * d.fe * d.h;
  /* this segment's rows of each expert-side [R x width] buffer */
  const void *xp = at(a->xe, o * d.h, 2), *ea = at(a->ea, o * d.fe, 2), *dy = at(s->dye, o * d.h, 2);
  void *eu = at(a->eu, o * d.U, 2), *ey = at(a->ye, o * d.h, 2), *dea = at(s->dea, o * d.fe, 2);
  void *deu = at(s->deu, o * d.U, 2), *dxp = at(s->dxe, o * d.h, 2);
  switch (which) {
  case FC1_FWD: return expert_gemm_run(m, EXEC_GEMM_NN, c, d.U, d.h, xp, W1, 0.f, eu, e);
  case FC2_FWD: return expert_gemm_run(m, EXEC_GEMM_NN, c, d.h, d.fe, ea, W2, 0.f, ey, e);
  case FC2_DGRAD: return expert_gemm_run(m, EXEC_GEMM_NT, c, d.fe, d.h, dy, W2, 0.f, dea, e);
  case FC2_WGRAD: return expert_gemm_run(m, EXEC_GEMM_TN_ACC, d.fe, d.h, c, ea, dy, 1.f, G2, e);
  case FC1_DGRAD: return expert_gemm_run(m, EXEC_GEMM_NT, c, d.h, d.U, deu, W1, 0.f, dxp, e);
  default: return expert_gemm_run(m, EXEC_GEMM_TN_ACC, d.h, d.U, c, xp, deu, 1.f, G1, e);
  }
}

static int experts(exec_model *m, int l, int which, ts_err *e) {
  const struct exec_moe_acts *a = exec_acts(m, l)->moe;
  long long o = 0;
  for (int i = 0; i < a->nseg; i++) {
    const long long c = a->seg_cnt[i];
    if (c > 0) EX_TRY(expert_gemm(m, l, which, a->seg_ex[i], o, c, e));
    o += c;
  }
  return 0;
}

/* ---- forward ---- */

/* The map of copies to expert rows, its row counts on the host (with the
 * balancing bias: added to the layer's loads), the permuted rows. */
static int permute_fwd(exec_model *m, int l, exec_layer_acts *la, ts_err *e) {
  const moe_dims d = dims_of(m);
  struct exec_moe_acts *a = la->moe;
  EX_ROUTE(moe_map(a->idx, (int)d.T, (int)d.E, (int)d.k, a->pos, a->count, m->moe->map, m->stream));
  EX_CUDA(cudaMemcpyAsync(a->hcount, a->count, (size_t)d.E * 4, cudaMemcpyDeviceToHost, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  long long sum = 0;
  for (int ex = 0; ex < d.E; ex++) sum += a->hcount[ex];
  if (sum != d.tk) return ts_fail_sys(e, "exec: MoE routing gave %lld rows for %lld token copies", sum, d.tk);
  if (has_bias(m))
    for (int ex = 0; ex < d.E; ex++) m->moe->load[(size_t)l * d.E + ex] += a->hcount[ex];
  a->nseg = (int)d.E, a->erows = d.tk; /* EP 1: one segment per expert (EP > 1: the dispatch redoes them) */
  for (int ex = 0; ex < d.E; ex++) a->seg_ex[ex] = ex, a->seg_cnt[ex] = a->hcount[ex];
  EX_ROUTE(moe_permute(la->n2, a->pos, (int)d.T, (int)d.k, (int)d.h, a->xp, m->stream));
  return 0;
}

static int act_fwd(exec_model *m, const void *u, void *y, long long rows, long long f, ts_err *e) {
  if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_fwd(u, y, rows, (int)f, m->stream, e);
  return rt_gelu_fwd(u, y, rows * f, m->stream, e);
}
static int act_bwd(exec_model *m, const void *dy, const void *u, void *du, long long rows, long long f, ts_err *e) {
  if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_bwd(dy, u, du, rows, (int)f, m->stream, e);
  return rt_gelu_bwd(dy, u, du, rows * f, m->stream, e);
}

/* DeepSeek-V3's top-k: the scores in place of the logits, then the group-limited choice by score + bias. */
static int topk_group_fwd(exec_model *m, int l, struct exec_moe_acts *a, ts_err *e) {
  const moe_dims d = dims_of(m);
  const moe_group_route g = route_of(&m->cfg);
  float *s = m->moe->logits;
  const float *bias = has_bias(m) ? m->moe->bias + (size_t)l * d.E : NULL;
  EX_ROUTE(moe_sigmoid(s, d.T * d.E, s, m->stream));
  EX_ROUTE(moe_topk_group(s, bias, (int)d.T, (int)d.E, (int)d.k, &g, a->idx, a->w, a->sel, m->stream));
  return 0;
}

int exec_moe_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e) {
  exec_layer_acts *la = exec_acts(m, l);
  struct exec_moe_acts *a = la->moe;
  if (!a || !m->moe) return ts_fail_sys(e, "exec: MoE op %s on layer %d, which is not an MoE layer",
                                        exec_layer_op_names[op], l);
  const moe_dims d = dims_of(m);
  exec_gemm_shape s;
  switch (op) {
  case EXEC_OP_ROUTER:
    s = exec_gemm_packed(EXEC_GEMM_NN, d.T, d.E, d.h);
    s.c_fp32 = 1;
    return exec_gemm_run(m->gemm, &s, 1.f, la->n2, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_ROUTER)), 0.f,
                         m->moe->logits, m->stream, e);
  case EXEC_OP_ROUTER_TOPK:
    if (m->cfg.router_sigmoid) return topk_group_fwd(m, l, a, e);
    EX_ROUTE(moe_topk(m->moe->logits, (int)d.T, (int)d.E, (int)d.k, a->idx, a->w, m->stream));
    return 0;
  case EXEC_OP_PERMUTE: return permute_fwd(m, l, la, e);
  case EXEC_OP_EXPERT_FC1: return experts(m, l, FC1_FWD, e);
  case EXEC_OP_EXPERT_ACT: return act_fwd(m, a->eu, a->ea, a->erows, d.fe, e);
  case EXEC_OP_EXPERT_FC2: return experts(m, l, FC2_FWD, e);
  case EXEC_OP_UNPERMUTE:
    EX_ROUTE(moe_combine(a->ey, a->pos, a->w, (int)d.T, (int)d.k, (int)d.h, m->proj, m->stream));
    return 0;
  case EXEC_OP_SHARED_FC1:
    return gemm(m, EXEC_GEMM_NN, d.T, d.Us, d.h, la->n2, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_SHARED_FC1)),
                0.f, la->u, e);
  case EXEC_OP_SHARED_ACT: return act_fwd(m, la->u, la->a, d.T, d.fs, e);
  case EXEC_OP_SHARED_FC2: /* proj (the experts' combine) += a . Ws2 */
    return gemm(m, EXEC_GEMM_NN, d.T, d.h, d.fs, la->a, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_SHARED_FC2)),
                1.f, m->proj, e);
  default: return ts_fail_sys(e, "exec: layer op %s is not an MoE op", exec_layer_op_names[op]);
  }
}

/* ---- backward ---- */

/* The router's dgrad: dn2 += dlogits . Wr^T, then ln2's input gradient
 * m->dtmp = the shared FFN's (already there) + dn2, or dn2 alone. */
static int router_dgrad(exec_model *m, int l, ts_err *e) {
  const moe_dims d = dims_of(m);
  const struct exec_moe_scratch *s = m->moe;
  EX_TRY(gemm(m, EXEC_GEMM_NT, d.T, d.h, d.E, s->dlogits, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_ROUTER)), 1.f,
              s->dn2, e));
  if (d.fs > 0) return rt_add(m->dtmp, s->dn2, m->dtmp, d.T * d.h, m->stream, e);
  EX_CUDA(cudaMemcpyAsync(m->dtmp, s->dn2, (size_t)(d.T * d.h) * 2, cudaMemcpyDeviceToDevice, m->stream));
  return 0;
}

/* A GEMM op's halves: dgrad then wgrad (the program may run them apart). */
static int gemm_bwd(exec_model *m, exec_layer_op op, int l, int dgrad, ts_err *e) {
  const moe_dims d = dims_of(m);
  exec_layer_acts *la = exec_acts(m, l);
  const struct exec_moe_scratch *s = m->moe;
  int t;
  switch (op) {
  case EXEC_OP_ROUTER:
    if (dgrad) return router_dgrad(m, l, e);
    t = exec_layer_tensor(m, l, EXEC_T_ROUTER);
    return gemm(m, EXEC_GEMM_TN_ACC, d.h, d.E, d.T, la->n2, s->dlogits, 1.f, exec_grad_of(m, t), e);
  case EXEC_OP_EXPERT_FC1: return experts(m, l, dgrad ? FC1_DGRAD : FC1_WGRAD, e);
  case EXEC_OP_EXPERT_FC2: return experts(m, l, dgrad ? FC2_DGRAD : FC2_WGRAD, e);
  case EXEC_OP_SHARED_FC1:
    t = exec_layer_tensor(m, l, EXEC_T_SHARED_FC1);
    if (dgrad) return gemm(m, EXEC_GEMM_NT, d.T, d.h, d.Us, m->du, exec_w16_of(m, t), 0.f, m->dtmp, e);
    return gemm(m, EXEC_GEMM_TN_ACC, d.h, d.Us, d.T, la->n2, m->du, 1.f, exec_grad_of(m, t), e);
  default: /* EXEC_OP_SHARED_FC2 */
    t = exec_layer_tensor(m, l, EXEC_T_SHARED_FC2);
    if (dgrad) return gemm(m, EXEC_GEMM_NT, d.T, d.fs, d.h, m->dx, exec_w16_of(m, t), 0.f, m->da, e);
    return gemm(m, EXEC_GEMM_TN_ACC, d.fs, d.h, d.T, la->a, m->dx, 1.f, exec_grad_of(m, t), e);
  }
}

int exec_moe_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e) {
  exec_layer_acts *la = exec_acts(m, l);
  const struct exec_moe_acts *a = la->moe;
  if (!a || !m->moe) return ts_fail_sys(e, "exec: MoE op %s on layer %d, which is not an MoE layer",
                                        exec_layer_op_names[op], l);
  const moe_dims d = dims_of(m);
  const struct exec_moe_scratch *s = m->moe;
  if (exec_layer_op_is_gemm(op)) {
    if (part != PLAN_PART_WGRAD) EX_TRY(gemm_bwd(m, op, l, 1, e));
    return part != PLAN_PART_DGRAD ? gemm_bwd(m, op, l, 0, e) : 0;
  }
  if (part != PLAN_PART_WHOLE)
    return ts_fail(e, NULL, "program", "layer op %s has no dgrad/wgrad halves", exec_layer_op_names[op]);
  switch (op) {
  case EXEC_OP_UNPERMUTE: /* dy = w . dout at each copy's row, dw = dout . y */
    EX_ROUTE(moe_combine_bwd(m->dx, a->ey, a->pos, a->w, (int)d.T, (int)d.k, (int)d.h, s->dy, s->dw, m->stream));
    return 0;
  case EXEC_OP_EXPERT_ACT: return act_bwd(m, s->dea, a->eu, s->deu, a->erows, d.fe, e);
  case EXEC_OP_PERMUTE: /* each token's input gradient: the sum of its copies' */
    EX_ROUTE(moe_combine(s->dxp, a->pos, NULL, (int)d.T, (int)d.k, (int)d.h, s->dn2, m->stream));
    return 0;
  case EXEC_OP_ROUTER_TOPK:
    if (m->cfg.router_sigmoid)
      EX_ROUTE(moe_topk_group_bwd(a->idx, a->sel, s->dw, (int)d.T, (int)d.E, (int)d.k, route_of(&m->cfg).scale,
                                  s->dlogits, m->stream));
    else
      EX_ROUTE(moe_topk_bwd(a->idx, a->w, s->dw, (int)d.T, (int)d.E, (int)d.k, s->dlogits, m->stream));
    return 0;
  case EXEC_OP_SHARED_ACT: return act_bwd(m, m->da, la->u, m->du, d.T, d.fs, e);
  default: return ts_fail_sys(e, "exec: layer op %s is not an MoE op", exec_layer_op_names[op]);
  }
}

/* ---- DeepSeek-V3's balancing bias ---- */

int exec_moe_bias_update(exec_model *m, ts_err *e) {
  if (!m->moe || !has_bias(m)) return 0;
  struct exec_moe_scratch *s = m->moe;
  const size_t n = (size_t)m->cfg.layers * m->cfg.experts;
  const int dp = m->dp_comm && m->dp > 1 ? m->dp : 1;
  for (size_t i = 0; i < n; i++) {
    if (s->load[i] > INT32_MAX / dp)
      return ts_fail_sys(e, "exec: %lld tokens on one expert overflow the loads", s->load[i]);
    s->load32[i] = (int32_t)s->load[i], s->load[i] = 0;
  }
  /* (the staging buffer is rewritten only at the next update, many stream waits later) */
  EX_CUDA(cudaMemcpyAsync(s->dload, s->load32, n * 4, cudaMemcpyHostToDevice, m->stream));
  if (dp > 1) EX_NCCL(ncclAllReduce(s->dload, s->dload, n, ncclInt32, ncclSum, m->dp_comm, m->stream));
  EX_ROUTE(moe_bias_update(s->dload, s->bias, m->cfg.layers, m->cfg.experts, (float)m->cfg.router_bias_rate,
                           m->stream));
  return 0;
}

int exec_moe_bias_set(exec_model *m, const double *bias, ts_err *e) {
  if (!m->moe || !has_bias(m)) return ts_fail_sys(e, "exec: the model has no router bias");
  const size_t n = (size_t)m->cfg.layers * m->cfg.experts;
  float *f = malloc(n * sizeof *f);
  if (!f) return ts_fail_sys(e, "exec: out of memory");
  for (size_t i = 0; i < n; i++) f[i] = (float)bias[i];
  cudaError_t rc = cudaMemcpy(m->moe->bias, f, n * 4, cudaMemcpyHostToDevice);
  free(f);
  EX_CUDA(rc);
  return 0;
}

int exec_moe_bias_get(exec_model *m, float *bias, ts_err *e) {
  if (!m->moe || !has_bias(m)) return ts_fail_sys(e, "exec: the model has no router bias");
  EX_CUDA(cudaStreamSynchronize(m->stream));
  EX_CUDA(cudaMemcpy(bias, m->moe->bias, (size_t)m->cfg.layers * m->cfg.experts * 4, cudaMemcpyDeviceToHost));
  return 0;
}

int exec_moe_choice_get(exec_model *m, int *choice, ts_err *e) {
  if (!m->moe) return ts_fail_sys(e, "exec: the model has no MoE layer");
  const size_t tk = (size_t)m->tokens * m->cfg.top_k;
  EX_CUDA(cudaStreamSynchronize(m->stream));
  for (int l = 0; l < m->cfg.layers; l++) {
    const exec_layer_acts *a = exec_acts(m, l);
    if (!a->moe) {
      for (size_t i = 0; i < tk; i++) choice[(size_t)l * tk + i] = -1;
      continue;
    }
    EX_CUDA(cudaMemcpy(choice + (size_t)l * tk, a->moe->idx, tk * sizeof *choice, cudaMemcpyDeviceToHost));
  }
  return 0;
}

void exec_moe_loads(const exec_model *m, long long *load) {
  const size_t n = (size_t)m->cfg.layers * m->cfg.experts;
  for (size_t i = 0; i < n; i++) load[i] = m->moe && m->moe->load ? m->moe->load[i] : 0;
}
