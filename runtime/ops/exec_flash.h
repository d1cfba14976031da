/* exec_flash.h — fused causal attention (flash-style) on BF16 tensor cores:
 * Q.K^T, the causal mask, an online softmax and P.V in one kernel, tiles in
 * shared memory, no seq x seq tensor in memory. The backward recomputes the
 * probabilities from the saved log-sum-exp of each row.
 *
 * Layouts are the executor's (exec_core.h): for `batch` sequences of `seq`
 * tokens, Q, K and V of head h are columns [h*d, (h+1)*d) of the Q | K | V
 * blocks of qkv [batch*seq x 3*hl] (hl = heads*d); the output and its
 * gradient are [batch*seq x hl]; dqkv has qkv's layout. The log-sum-exp
 * `lse` holds batch*heads*seq floats (base 2, of the scaled scores); the
 * backward's `scratch` at least exec_flash_bwd_scratch_floats() floats (row
 * sums of dO*O, and dQ accumulated in FP32; grouped heads use more where
 * given, see below). Softmax scale is 1/sqrt(d).
 *
 * Grouped-query attention (the _gqa functions): `kv_heads` key/value heads,
 * each shared by heads / kv_heads consecutive query heads (a group); qkv is
 * [batch*seq x hl + 2 kvl] (kvl = kv_heads*d: Q | K | V columns, K and V
 * kv_heads heads wide) and dqkv has its layout. Query head h reads key/value
 * head h / (heads / kv_heads) in place (no copies). The backward's key-block
 * kernels run one CTA per (batch, key/value head, key block) over the query
 * steps of every head of the group, so dK and dV are summed over the group
 * in FP32 registers and written once (no atomics, no extra GEMMs); dQ as in
 * multi-head. Where that grid is small (one key/value head a rank: seq / 128
 * x batch x kv_heads CTAs, e.g. 32 on 132 SMs), the default 128-key kernel
 * splits each group's query heads over P CTAs (exec_flash_bwd_parts; P = 1,
 * the kernel above, where the grid is large enough): each sums dK and dV over
 * its G / P heads and writes them in FP32 to the scratch after its first
 * exec_flash_bwd_scratch_floats() floats; a small kernel adds the P parts in
 * a fixed order (deterministic) and writes dK, dV as BF16.
 * kv_heads == heads is the multi-head layout above, and exec_flash_fwd/bwd
 * are the _gqa functions with kv_heads = heads. Every kernel variant below
 * runs grouped heads.
 *
 * Supported: head_dim 32, 64 or 128, seq a multiple of 64
 * (exec_flash_supported says so); otherwise the caller keeps the unfused
 * path. All functions launch on `stream` and return 0 or -1 with e. */
#ifndef EXEC_FLASH_H
#define EXEC_FLASH_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

int exec_flash_supported(long long seq, long long head_dim);

int exec_flash_fwd(const void *qkv, void *out, float *lse, int batch, long long seq, long long heads,
                   long long head_dim, void *stream, ts_err *e);
/* kv_heads divides heads, and exec_flash_supported(seq, head_dim) */
int exec_flash_gqa_supported(long long seq, long long heads, long long kv_heads, long long head_dim);
int exec_flash_fwd_gqa(const void *qkv, void *out, float *lse, int batch, long long seq, long long heads,
                       long long kv_heads, long long head_dim, void *stream, ts_err *e);

/* Writes every element of dqkv's Q, K and V blocks (no accumulation).
 * One pass over key blocks computes dK, dV and adds dQ's shares atomically
 * in FP32: 128-key blocks on 8 warps (head_dim 64/128, seq a multiple of 128;
 * the default), or 64-key blocks on 4 warps (--variant flash-bwd=v1, and the other
 * shapes); --variant flash-bwd=split runs two passes instead (dK/dV, then dQ,
 * recomputing the probabilities; no atomics, 7 GEMM-sized products instead of 5).
 * --variant flash-bwd=v4 adds dQ with float4 atomics (half the atomic instructions);
 * --variant flash-bwd=fa128 is the 128-key kernel with exp2f (the default until
 * 2026-11-30 05:15 UTC; now exp2 flushed to zero below 2^-126), and with the
 * backward's small kernels of that time (row sums by 4-byte loads, a memset
 * of the dQ accumulator, a 2-wide dQ store; now one 16-byte row-sum kernel
 * that also clears the accumulator, and a 4-wide store).
 * The forward uses 128-query tiles where seq is a multiple of 128: 4 warps of
 * 32 rows with K and V blocks in two buffers (one barrier per block) by
 * default, in one buffer (two barriers a block, exp2f) with --variant flash-fwd=fa128,
 * 8 warps of 16 rows with --variant flash-fwd=w8; 64-query tiles otherwise, or
 * everywhere with --variant flash-fwd=v1.
 * Every kernel launches its tiles longest first across all heads (tile t of
 * every head before tile t + 1 of any); --variant flash-order=head launches one
 * head's tiles together (the order until 2026-11-30 05:15 UTC, whose last
 * wave held the longest tiles of the last heads). */
int exec_flash_bwd(const void *qkv, const void *out, const void *dout, const float *lse, float *scratch, void *dqkv,
                   int batch, long long seq, long long heads, long long head_dim, void *stream, ts_err *e);
/* scratch holds scratch_floats floats: at least exec_flash_bwd_scratch_floats()
 * (else -1 with e), exec_flash_bwd_gqa_scratch_floats() for the split of the
 * query heads at its full P; P is limited to what fits (P = 1 at the minimum). */
int exec_flash_bwd_gqa(const void *qkv, const void *out, const void *dout, const float *lse, float *scratch,
                       long long scratch_floats, void *dqkv, int batch, long long seq, long long heads,
                       long long kv_heads, long long head_dim, void *stream, ts_err *e);
/* for the query heads: the same with or without grouping (the backward's minimum; P = 1) */
long long exec_flash_bwd_scratch_floats(int batch, long long seq, long long heads, long long head_dim);
/* the minimum plus P slices of dK | dV partials (batch x seq x 2 kv_heads x
 * head_dim floats each) at the P the shape gets with unlimited scratch: what
 * an allocation for exec_flash_bwd_gqa provides (asks the current device's SM count) */
long long exec_flash_bwd_gqa_scratch_floats(int batch, long long seq, long long heads, long long kv_heads,
                                           long long head_dim);
/* P, the CTAs that share each group's query heads in exec_flash_bwd_gqa with
 * scratch_floats of scratch (16-byte aligned buffers): by default the
 * smallest divisor of G = heads / kv_heads whose longest CTA (the first key
 * block's, seq / 128 x G / P steps) is within 5/4 of all CTAs' steps spread
 * evenly over the current device's SMs (G where none is); the largest divisor
 * at most N with --variant flash-bwd-parts=N (N > 0; 1: one CTA a group); cut
 * to the partials that fit in the scratch; 1 on the paths other than the
 * default 128-key kernel (head_dim 64/128, seq a multiple of 128). */
int exec_flash_bwd_parts(int batch, long long seq, long long heads, long long kv_heads, long long head_dim,
                         long long scratch_floats);

/* Which attention the executor (and `tacorun calibrate`, through exec_core.c)
 * runs: 1 for the fused kernels, 0 for the unfused batched-GEMM path. The
 * fused one by default where supported; --variant attn=unfused selects the
 * unfused one. The executor lends the fused backward its seq x seq score scratch,
 * which holds the backward's minimum scratch when seq >= 2 head_dim + 4 (also
 * required here), and the split of grouped query heads at any P when seq >=
 * 6 head_dim + 2 (at shorter seq, P is limited to what fits). */
int exec_flash_selected(long long seq, long long head_dim);

#ifdef __cplusplus
}
#endif
#endif
