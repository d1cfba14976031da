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

#ifdef __cplusplus
}
#endif
#endif
