/* exec_ref_mla.c — the float64 reference's multi-head latent attention
 * projections (DeepSeek-V2/V3; exec_ref.h): from the normed layer input to
 * the assembled, rotated [q | k | v] the attention reads, and back. Textbook
 * loops, each backward step under the forward it undoes. */
#include "exec_ref_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* y = x rstd g per row of `cols` (x's rows ld apart, y packed); rstd kept. */
static void rms_fwd(int rows, int cols, int ld, double eps, const double *x, const double *g, double *y, double *rstd) {
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * ld;
    double ms = 0;
    for (int j = 0; j < cols; j++) ms += xr[j] * xr[j];
    rstd[r] = 1.0 / sqrt(ms / cols + eps);
    for (int j = 0; j < cols; j++) y[(size_t)r * cols + j] = xr[j] * rstd[r] * g[j];
  }
}

/* dx (rows ld apart, overwritten) from dy (packed): xh = x rstd, dx = rstd (g dy - xh mean(g dy xh)); dg += dy xh. */
static void rms_bwd(int rows, int cols, int ld, const double *x, const double *g, const double *rstd, const double *dy,
                    double *dx, double *dg) {
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * ld, *dyr = dy + (size_t)r * cols;
    double dot = 0;
    for (int j = 0; j < cols; j++) dot += g[j] * dyr[j] * xr[j] * rstd[r];
    dot /= cols;
    for (int j = 0; j < cols; j++) {
      dg[j] += dyr[j] * xr[j] * rstd[r];
      dx[(size_t)r * ld + j] = rstd[r] * (g[j] * dyr[j] - xr[j] * rstd[r] * dot);
    }
  }
}

int exec_ref_mla_alloc(const exec_ref_config *c, int T, exec_ref_mla_saved *s, ts_err *e) {
  const size_t t = (size_t)T, ql = (size_t)c->q_lora, kl = (size_t)c->kv_lora, r = (size_t)c->qk_rope;
  const size_t kvb = (size_t)c->heads * (size_t)(c->qk_nope + c->v_head), q = (size_t)exec_ref_q_cols(c);
  memset(s, 0, sizeof *s);
  s->cq = calloc(t * ql, sizeof(double)), s->cqn = calloc(t * ql, sizeof(double)), s->rq = calloc(t, sizeof(double));
  s->kva = calloc(t * (kl + r), sizeof(double)), s->ckvn = calloc(t * kl, sizeof(double));
  s->rkv = calloc(t, sizeof(double));
  /* backward: dkvb, dckvn, dkva, dq, dcqn, dcq (the forward's kv_b output uses the first) */
  s->scratch = calloc(t * (kvb + kl + kl + r + q + ql + ql), sizeof(double));
  if (!s->cq || !s->cqn || !s->rq || !s->kva || !s->ckvn || !s->rkv || !s->scratch) {
    exec_ref_mla_free(s);
    return ts_fail_sys(e, "exec_ref: out of memory (latent attention of %d tokens)", T);
  }
  return 0;
}

void exec_ref_mla_free(exec_ref_mla_saved *s) {
  free(s->cq), free(s->cqn), free(s->rq), free(s->kva), free(s->ckvn), free(s->rkv), free(s->scratch);
  memset(s, 0, sizeof *s);
}

void exec_ref_mla_fwd(const exec_ref_config *c, int T, const double *n1, const double *const W[EXEC_REF_MLA_W],
                      const double *inv_freq, exec_ref_mla_saved *s, double *qkv) {
  const int h = c->hidden, H = c->heads, ql = c->q_lora, kl = c->kv_lora, nope = c->qk_nope, rope = c->qk_rope;
  const int dv = c->v_head, dqk = nope + rope, Qc = H * dqk, QW = exec_ref_qkv_cols(c), kw = kl + rope;
  const int bw = nope + dv; /* kv_b's columns a head: [k_nope | v] */
  double *kvb = s->scratch, *q = s->scratch; /* (both used before the other is written) */
  /* q = rms(n1 . q_a) . q_b, each head [nope | rope] */
  exec_ref_mm_nn(T, ql, h, n1, W[EXEC_REF_MLA_QA], s->cq, 0);
  rms_fwd(T, ql, ql, c->norm_eps, s->cq, W[EXEC_REF_MLA_QA_NORM], s->cqn, s->rq);
  exec_ref_mm_nn(T, Qc, ql, s->cqn, W[EXEC_REF_MLA_QB], q, 0);
  for (int r = 0; r < T; r++) memcpy(qkv + (size_t)r * QW, q + (size_t)r * Qc, sizeof(double) * Qc);
  /* [c_kv | k_rope] = n1 . kv_a; [k_nope | v] per head = rms(c_kv) . kv_b */
  exec_ref_mm_nn(T, kw, h, n1, W[EXEC_REF_MLA_KVA], s->kva, 0);
  rms_fwd(T, kl, kw, c->norm_eps, s->kva, W[EXEC_REF_MLA_KVA_NORM], s->ckvn, s->rkv);
  exec_ref_mm_nn(T, H * bw, kl, s->ckvn, W[EXEC_REF_MLA_KVB], kvb, 0);
  for (int r = 0; r < T; r++) {
    double *row = qkv + (size_t)r * QW, kr[1024];
    const double *b = kvb + (size_t)r * H * bw;
    /* RoPE: each query head's rope part; the shared key once, then copied to every key head */
    memcpy(kr, s->kva + (size_t)r * kw + kl, sizeof(double) * rope);
    if (inv_freq) {
      for (int j = 0; j < H; j++) exec_ref_rope_row(row + (size_t)j * dqk + nope, 1, rope, inv_freq, r % c->seq, 0);
      exec_ref_rope_row(kr, 1, rope, inv_freq, r % c->seq, 0);
    }
    for (int j = 0; j < H; j++) {
      double *k = row + Qc + (size_t)j * dqk, *v = row + 2 * Qc + (size_t)j * dv;
      memcpy(k, b + (size_t)j * bw, sizeof(double) * nope);
      memcpy(k + nope, kr, sizeof(double) * rope);
      memcpy(v, b + (size_t)j * bw + nope, sizeof(double) * dv);
    }
  }
}

void exec_ref_mla_bwd(const exec_ref_config *c, int T, const double *n1, const double *const W[EXEC_REF_MLA_W],
                      const double *inv_freq, const exec_ref_mla_saved *s, double *dqkv, double *dn1,
                      double *const G[EXEC_REF_MLA_W]) {
  const int h = c->hidden, H = c->heads, ql = c->q_lora, kl = c->kv_lora, nope = c->qk_nope, rope = c->qk_rope;
  const int dv = c->v_head, dqk = nope + rope, Qc = H * dqk, QW = exec_ref_qkv_cols(c), kw = kl + rope;
  const int bw = nope + dv;
  const size_t t = (size_t)T;
  double *dkvb = s->scratch, *dckvn = dkvb + t * H * bw, *dkva = dckvn + t * kl, *dq = dkva + t * kw;
  double *dcqn = dq + t * Qc, *dcq = dcqn + t * ql;
  for (int r = 0; r < T; r++) {
    double *row = dqkv + (size_t)r * QW, *dkr = dkva + (size_t)r * kw + kl;
    /* key head j = [k_nope_j | shared key]: the shared key's gradient is the sum over the heads */
    for (int i = 0; i < rope; i++) dkr[i] = 0;
    for (int j = 0; j < H; j++) {
      const double *dk = row + Qc + (size_t)j * dqk, *dvv = row + 2 * Qc + (size_t)j * dv;
      double *b = dkvb + (size_t)r * H * bw + (size_t)j * bw;
      memcpy(b, dk, sizeof(double) * nope);
      memcpy(b + nope, dvv, sizeof(double) * dv);
      for (int i = 0; i < rope; i++) dkr[i] += dk[nope + i];
    }
    /* RoPE's transpose on the shared key and on each query head's rope part */
    if (inv_freq) {
      exec_ref_rope_row(dkr, 1, rope, inv_freq, r % c->seq, 1);
      for (int j = 0; j < H; j++) exec_ref_rope_row(row + (size_t)j * dqk + nope, 1, rope, inv_freq, r % c->seq, 1);
    }
    memcpy(dq + (size_t)r * Qc, row, sizeof(double) * Qc);
  }
  /* [k_nope | v] = ckvn . kv_b; ckvn = rms(c_kv); [c_kv | k_rope] = n1 . kv_a */
  exec_ref_mm_tn(kl, H * bw, T, s->ckvn, dkvb, G[EXEC_REF_MLA_KVB], 1);
  exec_ref_mm_nt(T, kl, H * bw, dkvb, W[EXEC_REF_MLA_KVB], dckvn, 0);
  rms_bwd(T, kl, kw, s->kva, W[EXEC_REF_MLA_KVA_NORM], s->rkv, dckvn, dkva, G[EXEC_REF_MLA_KVA_NORM]);
  exec_ref_mm_tn(h, kw, T, n1, dkva, G[EXEC_REF_MLA_KVA], 1);
  exec_ref_mm_nt(T, h, kw, dkva, W[EXEC_REF_MLA_KVA], dn1, 0);
  /* q = cqn . q_b; cqn = rms(cq); cq = n1 . q_a */
  exec_ref_mm_tn(ql, Qc, T, s->cqn, dq, G[EXEC_REF_MLA_QB], 1);
  exec_ref_mm_nt(T, ql, Qc, dq, W[EXEC_REF_MLA_QB], dcqn, 0);
  rms_bwd(T, ql, ql, s->cq, W[EXEC_REF_MLA_QA_NORM], s->rq, dcqn, dcq, G[EXEC_REF_MLA_QA_NORM]);
  exec_ref_mm_tn(h, ql, T, n1, dcq, G[EXEC_REF_MLA_QA], 1);
  exec_ref_mm_nt(T, h, ql, dcq, W[EXEC_REF_MLA_QA], dn1, 1);
}
