/* sim_edges.h — how NCCL decomposes a collective into point-to-point flows. */
#ifndef SIM_EDGES_H
#define SIM_EDGES_H

#include "topo.h"

typedef enum {
  SIM_ALG_RING,      /* n flows i -> i+1 */
  SIM_ALG_TREE_UP,   /* reduce phase of a tree: chain inside each node, binary tree of node leaders */
  SIM_ALG_TREE_DOWN, /* broadcast phase: the same edges reversed */
  SIM_ALG_ALLTOALL,  /* every ordered pair */
  SIM_ALG_SENDRECV,  /* one flow members[0] -> members[1] */
} sim_alg;

/* Fills src[], dst[] (capacity cap) with the edges of alg over members[n];
 * returns the edge count. *depth gets the number of sequential latency steps
 * of the algorithm (ring all-reduce counts its 2(n-1) steps elsewhere). */
int sim_edges(const topo_cluster *c, const int *members, int n, sim_alg alg, int *src, int *dst, int cap,
              int *depth);

#endif
