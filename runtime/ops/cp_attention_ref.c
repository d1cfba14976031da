/* cp_attention_ref.c — float64 ring attention of context parallelism (see cp_attention_ref.h). */
#include "cp_attention_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cp_ref_position(int seq, int cp, int r, int t) {
  int c = seq / (2 * cp);
  return t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

void cp_ref_full_attention(int seq, int d, double scale, const double *q, const double *k, const double *v,
                           double *out, double *lse) {
  for (int i = 0; i < seq; i++) {
    double mx = -INFINITY;
    for (int j = 0; j <= i; j++) {
      double s = 0;
      for (int x = 0; x < d; x++) s += q[(size_t)i * d + x] * k[(size_t)j * d + x];
      if (s * scale > mx) mx = s * scale;
    }
    double sum = 0;
    for (int x = 0; x < d; x++) out[(size_t)i * d + x] = 0;
    for (int j = 0; j <= i; j++) {
      double s = 0;
      for (int x = 0; x < d; x++) s += q[(size_t)i * d + x] * k[(size_t)j * d + x];
      double w = exp(s * scale - mx);
      sum += w;
      for (int x = 0; x < d; x++) out[(size_t)i * d + x] += w * v[(size_t)j * d + x];
    }
    for (int x = 0; x < d; x++) out[(size_t)i * d + x] /= sum;
    if (lse) lse[i] = mx + log(sum);
  }
}

/* One step: query row (global position qp) against the rows of block `src`
 * (rank src's 2 chunks); returns the block's log-sum-exp (-inf: all masked)
 * and writes its normalised output in o. */
static double block_row(int seq, int d, int cp, int src, double scale, const double *qrow, int qp, const double *k,
                        const double *v, double *o, long long *pairs) {
  const int n = seq / cp;
  double mx = -INFINITY;
  for (int t = 0; t < n; t++) {
    int kp = cp_ref_position(seq, cp, src, t);
    if (kp > qp) continue;
    double s = 0;
    for (int x = 0; x < d; x++) s += qrow[x] * k[(size_t)kp * d + x];
    if (s * scale > mx) mx = s * scale;
  }
  for (int x = 0; x < d; x++) o[x] = 0;
  if (mx == -INFINITY) return -INFINITY;
  double sum = 0;
  for (int t = 0; t < n; t++) {
    int kp = cp_ref_position(seq, cp, src, t);
    if (kp > qp) continue;
    (*pairs)++;
    double s = 0;
    for (int x = 0; x < d; x++) s += qrow[x] * k[(size_t)kp * d + x];
    double w = exp(s * scale - mx);
    sum += w;
    for (int x = 0; x < d; x++) o[x] += w * v[(size_t)kp * d + x];
  }
  for (int x = 0; x < d; x++) o[x] /= sum;
  return mx + log(sum);
}

/* The ring's forward; acc_lse [seq / cp] gets each row's combined log-sum-exp. */
static int rank_forward(int seq, int d, int cp, int r, double scale, const double *q_loc, const double *k,
                        const double *v, double *out_loc, double *acc_lse, long long *pairs) {
  const int n = seq / cp;
  double *o = malloc(sizeof(double) * (size_t)d);
  if (!o) return -1;
  if (pairs) memset(pairs, 0, sizeof *pairs * (size_t)cp);
  for (int t = 0; t < n; t++) acc_lse[t] = -INFINITY;
  memset(out_loc, 0, sizeof(double) * (size_t)n * d);
  for (int s = 0; s < cp; s++) {
    int src = ((r - s) % cp + cp) % cp;
    long long got = 0;
    for (int t = 0; t < n; t++) {
      double l = block_row(seq, d, cp, src, scale, q_loc + (size_t)t * d, cp_ref_position(seq, cp, r, t), k, v, o,
                           &got);
      if (l == -INFINITY) continue;
      /* out = (e^L out + e^l o) / (e^L + e^l), L += log(1 + e^(l - L)), in a stable form */
      double L = acc_lse[t], m = L > l ? L : l;
      double a = L == -INFINITY ? 0 : exp(L - m), b = exp(l - m);
      for (int x = 0; x < d; x++) out_loc[(size_t)t * d + x] = (a * out_loc[(size_t)t * d + x] + b * o[x]) / (a + b);
      acc_lse[t] = m + log(a + b);
    }
    if (pairs) pairs[s] = got;
  }
  free(o);
  return 0;
}

int cp_ref_rank_attention(int seq, int d, int cp, int r, double scale, const double *q_loc, const double *k,
                          const double *v, double *out_loc, long long *pairs) {
  if (cp < 1 || seq % (2 * cp) || r < 0 || r >= cp) return -1;
  double *acc_lse = malloc(sizeof(double) * (size_t)(seq / cp));
  if (!acc_lse) return -1;
  int rc = rank_forward(seq, d, cp, r, scale, q_loc, k, v, out_loc, acc_lse, pairs);
  free(acc_lse);
  return rc;
}

static double dot(const double *a, const double *b, int d) {
  double s = 0;
  for (int x = 0; x < d; x++) s += a[x] * b[x];
  return s;
}

/* One (query, key) pair of the backward: p = e^(scale q.k - lse), ds = p (dout.v - delta);
 * dq += scale ds k, dk += scale ds q, dv += p dout. */
static void bwd_pair(int d, double scale, const double *qr, const double *kr, const double *vr, const double *dor,
                     double lse, double delta, double *dqr, double *dkr, double *dvr) {
  const double p = exp(scale * dot(qr, kr, d) - lse), ds = p * (dot(dor, vr, d) - delta);
  for (int x = 0; x < d; x++) {
    dqr[x] += scale * ds * kr[x];
    dkr[x] += scale * ds * qr[x];
    dvr[x] += p * dor[x];
  }
}

void cp_ref_full_attention_bwd(int seq, int d, double scale, const double *q, const double *k, const double *v,
                               const double *dout, double *dq, double *dk, double *dv) {
  double *out = malloc(sizeof(double) * (size_t)seq * d), *lse = malloc(sizeof(double) * (size_t)seq);
  if (!out || !lse) {
    free(out), free(lse);
    for (size_t i = 0; i < (size_t)seq * d; i++) dq[i] = dk[i] = dv[i] = NAN; /* no memory: no gradient */
    return;
  }
  cp_ref_full_attention(seq, d, scale, q, k, v, out, lse);
  memset(dq, 0, sizeof(double) * (size_t)seq * d);
  memset(dk, 0, sizeof(double) * (size_t)seq * d);
  memset(dv, 0, sizeof(double) * (size_t)seq * d);
  for (int i = 0; i < seq; i++) {
    const size_t ri = (size_t)i * d;
    const double delta = dot(dout + ri, out + ri, d);
    for (int j = 0; j <= i; j++) {
      const size_t rj = (size_t)j * d;
      bwd_pair(d, scale, q + ri, k + rj, v + rj, dout + ri, lse[i], delta, dq + ri, dk + rj, dv + rj);
    }
  }
  free(out), free(lse);
}

int cp_ref_rank_attention_bwd(int seq, int d, int cp, int r, double scale, const double *q_loc, const double *k,
                              const double *v, const double *dout_loc, double *dq_loc, double *dk, double *dv) {
  if (cp < 1 || seq % (2 * cp) || r < 0 || r >= cp) return -1;
  const int n = seq / cp;
  double *out = malloc(sizeof(double) * (size_t)n * d), *lse = malloc(sizeof(double) * (size_t)n);
  if (!out || !lse || rank_forward(seq, d, cp, r, scale, q_loc, k, v, out, lse, NULL)) {
    free(out), free(lse);
    return -1;
  }
  memset(dq_loc, 0, sizeof(double) * (size_t)n * d);
  for (int s = 0; s < cp; s++) {
    const int src = ((r - s) % cp + cp) % cp; /* the KV block (and its travelling dKV) in hand at step s */
    for (int t = 0; t < n; t++) {
      const size_t rt = (size_t)t * d;
      const int qp = cp_ref_position(seq, cp, r, t);
      const double delta = dot(dout_loc + rt, out + rt, d);
      for (int j = 0; j < n; j++) {
        const int kp = cp_ref_position(seq, cp, src, j);
        if (kp > qp) continue;
        const size_t rk = (size_t)kp * d;
        bwd_pair(d, scale, q_loc + rt, k + rk, v + rk, dout_loc + rt, lse[t], delta, dq_loc + rt, dk + rk, dv + rk);
      }
    }
  }
  free(out), free(lse);
  return 0;
}
