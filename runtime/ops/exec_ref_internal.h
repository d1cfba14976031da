/* exec_ref_internal.h — what the float64 reference's files share (exec_ref.c:
 * the stack; exec_ref_moe.c: the mixture-of-experts block). Not for other modules. */
#ifndef EXEC_REF_INTERNAL_H
#define EXEC_REF_INTERNAL_H

#include "exec_ref.h"

/* C[m x n] (+)= A[m x k] . B[k x n];  A . B[n x k]^T;  A[k x m]^T . B[k x n] */
void exec_ref_mm_nn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate);
void exec_ref_mm_nt(int m, int n, int k, const double *A, const double *B, double *C, int accumulate);
void exec_ref_mm_tn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate);
/* a[rows x f] = act(u), u [rows x f] (GELU) or [rows x 2f] = [gate | up] (SwiGLU); and its backward. */
void exec_ref_act_fwd(const exec_ref_config *c, int rows, int f, const double *u, double *a);
void exec_ref_act_bwd(const exec_ref_config *c, int rows, int f, const double *u, const double *da, double *du);

/* What an MoE block keeps for its backward (T tokens, k = top_k copies each). */
typedef struct {
  int *idx;      /* [T k] chosen experts, descending logits */
  double *w;     /* [T k] their weights */
  double *sel;   /* [T k] the chosen experts' sigmoid scores (DeepSeek-V3's router; else unused) */
  double *u, *a; /* [T k x (1|2) expert_ffn], [T k x expert_ffn]: each copy's expert FFN */
  double *y;     /* [T k x h] each copy's expert output */
  double *su, *sa; /* the shared FFN's [T x (1|2) shared_ffn], [T x shared_ffn] (NULL: none) */
  double *scratch; /* the block's working rows (logits, backward temporaries) */
} exec_ref_moe_saved;

/* The block's weights: router, expert_fc1, expert_fc2, shared_fc1, shared_fc2 (NULL when no shared FFN). */
enum { EXEC_REF_MOE_ROUTER, EXEC_REF_MOE_FC1, EXEC_REF_MOE_FC2, EXEC_REF_MOE_SFC1, EXEC_REF_MOE_SFC2, EXEC_REF_MOE_W };

int exec_ref_moe_alloc(const exec_ref_config *c, int T, exec_ref_moe_saved *s, ts_err *e);
void exec_ref_moe_free(exec_ref_moe_saved *s);
/* x[T x h] += moe(n2) (exec_ref.h); bias: the layer's router bias [experts] (NULL: zeros); choice_in / choice_out:
 * the layer's rows of the config's router_choice / router_choice_out (NULL: none). */
void exec_ref_moe_fwd(const exec_ref_config *c, int T, const double *n2, const double *const W[EXEC_REF_MOE_W],
                      const double *bias, exec_ref_moe_saved *s, double *x,
                      const int *choice_in, int *choice_out);
/* dx: the gradient of the block's output; dn2 (overwritten): of its input;
 * the weight gradients G[] accumulate. */
void exec_ref_moe_bwd(const exec_ref_config *c, int T, const double *n2, const double *const W[EXEC_REF_MOE_W],
                      const exec_ref_moe_saved *s, const double *dx, double *dn2, double *const G[EXEC_REF_MOE_W]);

/* Multi-head latent attention (exec_ref_mla.c; exec_ref.h): what a layer keeps for its backward (T tokens). */
typedef struct {
  double *cq, *cqn, *rq;    /* q_a's output [T x q_lora], it RMS-normed, its 1/rms [T] */
  double *kva, *ckvn, *rkv; /* kv_a's output [T x (kv_lora + qk_rope)] (the shared key not rotated), c_kv RMS-normed
                               [T x kv_lora], its 1/rms [T] */
  double *scratch;          /* the forward's kv_b output, the backward's temporaries */
} exec_ref_mla_saved;

/* The latent attention's weights: q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b. */
enum { EXEC_REF_MLA_QA, EXEC_REF_MLA_QA_NORM, EXEC_REF_MLA_QB, EXEC_REF_MLA_KVA, EXEC_REF_MLA_KVA_NORM,
       EXEC_REF_MLA_KVB, EXEC_REF_MLA_W };

int exec_ref_mla_alloc(const exec_ref_config *c, int T, exec_ref_mla_saved *s, ts_err *e);
void exec_ref_mla_free(exec_ref_mla_saved *s);
/* qkv [T x exec_ref_qkv_cols] = [q | k | v] from n1 [T x h], RoPE applied (inv_freq: qk_rope / 2 frequencies;
 * NULL: no RoPE). */
void exec_ref_mla_fwd(const exec_ref_config *c, int T, const double *n1, const double *const W[EXEC_REF_MLA_W],
                      const double *inv_freq, exec_ref_mla_saved *s, double *qkv);
/* dqkv: the gradient of that qkv (overwritten: scratch); dn1 [T x h] (overwritten): of n1; G[] accumulate. */
void exec_ref_mla_bwd(const exec_ref_config *c, int T, const double *n1, const double *const W[EXEC_REF_MLA_W],
                      const double *inv_freq, const exec_ref_mla_saved *s, double *dqkv, double *dn1,
                      double *const G[EXEC_REF_MLA_W]);

#endif
