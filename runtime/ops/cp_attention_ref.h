/* cp_attention_ref.h — float64 reference of context parallelism's attention
 * math (Megatron-Core / Transformer Engine ring attention, cp_comm_type p2p):
 * the sequence is cut into 2 cp chunks, CP rank i holds chunks i and
 * 2 cp - 1 - i; at ring step s it attends its queries to the KV block of rank
 * (i - s) mod cp under the causal mask of the global positions, keeping the
 * block's output and per-row log-sum-exp; the steps are combined by their
 * log-sum-exps. Plain C, for checks against full causal attention (and, on a
 * GPU, for a kernel's share to be held against). */
#ifndef CP_ATTENTION_REF_H
#define CP_ATTENTION_REF_H

#ifdef __cplusplus
extern "C" {
#endif

/* Global position of local token t (0 .. 2c - 1, c = seq / (2 cp)) of CP rank r. */
int cp_ref_position(int seq, int cp, int r, int t);

/* Causal attention of one head, full sequence: q, k, v, out are [seq x d]
 * row-major; scale = 1 / sqrt(d) usually. lse (optional, [seq]) gets each
 * row's log-sum-exp of the scaled scores. */
void cp_ref_full_attention(int seq, int d, double scale, const double *q, const double *k, const double *v,
                           double *out, double *lse);

/* Rank r's share: its seq / cp query rows (in its local order) attended over
 * the cp KV blocks of the ring, block by block, combined by log-sum-exp.
 * q_loc [seq/cp x d] are this rank's rows; k, v [seq x d] the whole sequence
 * (the ring brings rank (r - s) mod cp's rows at step s). pairs (optional,
 * [cp]) gets the unmasked (query, key) pairs of each step. Returns 0, or -1
 * if seq is not divisible by 2 cp. */
int cp_ref_rank_attention(int seq, int d, int cp, int r, double scale, const double *q_loc, const double *k,
                          const double *v, double *out_loc, long long *pairs);

/* Backward of cp_ref_full_attention for the upstream gradient dout [seq x d]:
 * dq, dk, dv [seq x d] (written). */
void cp_ref_full_attention_bwd(int seq, int d, double scale, const double *q, const double *k, const double *v,
                               const double *dout, double *dq, double *dk, double *dv);

/* Backward of rank r's share, ring step by ring step (Megatron-Core /
 * Transformer Engine: at step s the KV block of rank (r - s) mod cp is in
 * hand, and its dK, dV accumulator travels with it, one hop behind, back to
 * its owner after cp steps). q_loc, dout_loc [seq/cp x d] are the rank's rows
 * (local order), k, v [seq x d] the whole sequence (global order). Writes
 * dq_loc [seq/cp x d]; ADDS the rank's contributions to dk, dv [seq x d]
 * (global order: summed over the ranks they are the gradients the ring hands
 * back). The softmax weights use the combined log-sum-exp of the forward
 * (computed here by cp_ref_rank_attention's ring). Returns 0, or -1 as
 * cp_ref_rank_attention (or out of memory). */
int cp_ref_rank_attention_bwd(int seq, int d, int cp, int r, double scale, const double *q_loc, const double *k,
                              const double *v, const double *dout_loc, double *dq_loc, double *dk, double *dv);

#ifdef __cplusplus
}
#endif
#endif
