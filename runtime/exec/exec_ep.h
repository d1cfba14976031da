/* exec_ep.h — expert parallelism's host arithmetic (plain C, no CUDA: the CPU
 * tests check it), for the executor's EP (exec_moe_ep.c).
 *
 * Ranks: EP is carved from DP as Megatron-Core does (tp 1, pp 1 here; the
 * plan's plan_moe_group_index with etp = 1): DP rank d is EP rank d mod ep of
 * EP group d / ep (ep consecutive DP ranks), and expert-DP rank d / ep of the
 * expert-DP group d mod ep (the dp / ep ranks that hold the same experts).
 * EP rank r owns experts [r E/ep, (r + 1) E/ep) and holds only theirs.
 *
 * Routing: after the permutation a rank's copies lie in expert order, so the
 * rows for EP rank p's experts are one run of them; every EP rank's rows per
 * expert (all-gathered, [ep x E]) give what each rank sends to each peer and
 * receives from it, and the expert side's segments: per source rank, its rows
 * of each local expert, in expert order. */
#ifndef EXEC_EP_H
#define EXEC_EP_H

#include <stddef.h>
#include <stdint.h>

#include "ts_error.h"

#define EXEC_EP_MAX 8 /* the largest EP group the executor runs (one node's GPUs) */

typedef struct {
  int ep, ep_rank, ep_group;      /* EP group size (1: no EP), this rank's index in it, which group (dp_rank / ep) */
  int edp, edp_rank;              /* expert-DP: dp / ep ranks with the same experts; this rank's index (dp_rank / ep) */
  int expert_lo, experts_local;   /* this rank's experts [expert_lo, expert_lo + experts_local) */
} exec_ep_place;

/* The place of DP rank dp_rank (of dp) with ep (0 or 1: no EP) over `experts`
 * experts. Fails (exit-2 kind, field layout.ep, file `path` may be NULL) unless
 * ep is 1 or 2 .. EXEC_EP_MAX, divides dp and the experts. */
int exec_ep_place_of(const char *path, int dp, int ep, int dp_rank, int experts, exec_ep_place *pl, ts_err *e);
/* The EP rank that owns expert x. */
int exec_ep_owner(const exec_ep_place *pl, int x);
/* The DP rank of member k of this rank's EP group, and of member j of its expert-DP group. */
int exec_ep_member(const exec_ep_place *pl, int k);
int exec_edp_member(const exec_ep_place *pl, int j);

/* The dispatch's arithmetic of one MoE layer and micro-batch (see above).
 * all: [ep x E] rows per expert of every EP rank (row p: EP rank p's);
 * own: this rank's [E] (checked against row ep_rank; NULL: not checked).
 * Fills, per EP rank p, scnt[p] (rows sent to p) and soff[p] (their first row
 * in this rank's permuted buffer), rcnt[p] and roff[p] (rows received from p,
 * and where they start on the expert side), and the expert side's segments:
 * seg_ex[i] (the global expert) and seg_cnt[i] (rows), *nseg = ep x E/ep of
 * them (arrays of E entries); *erows the rows received in all. Returns -1
 * (no error set) on a negative count or when own disagrees with all. */
int exec_ep_route(const exec_ep_place *pl, int experts, const int32_t *all, const int32_t *own, long long *scnt,
                  long long *soff, long long *rcnt, long long *roff, int32_t *seg_ex, long long *seg_cnt, int *nseg,
                  long long *erows);

/* Bytes on the wire for `rows` rows of `hidden` BF16 values: 2 rows hidden,
 * or with TACO (taco_group > 0) the encoded block (taco_wire_bytes). */
size_t exec_ep_wire_bytes(long long rows, long long hidden, int taco_group);
/* What this rank sends to its peers in one all-to-all (its own run crosses no
 * wire): the sum over p != ep_rank of exec_ep_wire_bytes(rows_to[p], ...). */
size_t exec_ep_send_bytes(const exec_ep_place *pl, const long long *rows_to, long long hidden, int taco_group);

#endif
