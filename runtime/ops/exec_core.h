/* exec_core.h — the executor's attention core and norm backward as functions
 * of plain device buffers. exec_layer.c runs them on a model's tensors;
 * `tacorun calibrate` times the same functions, so its attention and norm
 * backward tables hold what the executor runs (same kernels, same layouts). */
#ifndef EXEC_CORE_H
#define EXEC_CORE_H

#include "exec_gemm.h"
#include "ts_error.h"

/* Causal attention of `batch` sequences of `seq` tokens, `heads` heads of
 * `head_dim` on this rank (hl = heads * head_dim) over `kv_heads` key/value
 * heads (grouped-query attention when kv_heads < heads; 0 means heads; kvl =
 * kv_heads * head_dim). Q, K, V are read in place inside qkv [batch * seq x
 * hl + 2 kvl] (Q | K | V columns; query head h reads key/value head
 * h / (heads / kv_heads), no copies), the output and its
 * gradient are [batch * seq x hl]; P, scores, dP and dS are
 * [batch * heads x seq x seq] BF16 buffers.
 * Which attention runs: exec_flash_selected() (exec_flash.h) — the fused
 * kernels by default where the shape allows (they keep each row's log-sum-exp
 * in P and use dP as the backward's scratch; scores and dS are not touched),
 * else, or with --variant attn=unfused, batched GEMMs around a causal softmax
 * (P holds the probabilities; dS's upper triangle stays zero when
 * lower_softmax is set). The unfused path runs multi-head only: grouped
 * heads need the fused kernels (exec_attention_gqa_ok says whether they run).
 * Values of another head dimension than queries and keys (v_head_dim > 0 and
 * not head_dim: multi-head latent attention) run on the unfused path only: qkv
 * is then [batch * seq x 2 hl + heads * v_head_dim] (V heads v_head_dim wide),
 * the output and its gradient [batch * seq x heads * v_head_dim], the softmax
 * scale stays 1 / sqrt(head_dim).
 * `tacorun calibrate` times these two functions, so it times the attention
 * the executor runs. */
typedef struct {
  exec_gemm *gemm;
  void *stream; /* cudaStream_t */
  int batch, lower_softmax;
  long long seq, heads, kv_heads, head_dim; /* kv_heads 0: heads */
  long long v_head_dim;                      /* 0: head_dim */
  const void *qkv;
  void *scores, *P, *out;   /* forward: scratch, probabilities (kept for backward), output */
  const void *dout;         /* backward: output gradient */
  void *dP, *dS, *dqkv;     /* backward: scratch, and the gradient of qkv */
} exec_attention_args;

/* 1 when the fused kernels run attention of this shape (v_head_dim 0: head_dim): exec_flash_selected() and
 * values as wide as queries and keys */
int exec_attention_fused(long long seq, long long head_dim, long long v_head_dim);
/* 1 when attention of this shape with kv_heads < heads runs (the fused kernels are selected) */
int exec_attention_gqa_ok(long long seq, long long heads, long long kv_heads, long long head_dim);
int exec_attention_fwd(const exec_attention_args *a, ts_err *e);
int exec_attention_bwd(const exec_attention_args *a, ts_err *e);

/* Norm backward as the executor runs it: the weight gradients (dgamma, dbeta
 * FP32 accumulators) and the input gradient added to the residual stream's
 * gradient dx. mean NULL: RMSNorm. One kernel (exec_norm_bwd_fused) where
 * cols allows; with --variant norm-bwd=unfused or other cols three: the weight
 * gradients, the input gradient into dx_tmp, and its addition to dx. */
int exec_norm_bwd(const void *dy, const void *x, const void *gamma, const float *mean, const float *rstd,
                  float *dgamma, float *dbeta, void *dx_tmp, void *dx, long long rows, int cols, void *stream,
                  ts_err *e);

#endif
