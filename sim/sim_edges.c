/* sim_edges.c — the flows of ring, tree, all-to-all and send/recv. */
#include "sim_edges.h"

/* Members per node when every node holds the same number k >= 2 of them,
 * contiguous in ring order, on at least two nodes; else 1. */
static int ring_members_per_node(const topo_cluster *c, const int *m, int n) {
  int k = 1;
  while (k < n && topo_node_of(c, m[k]) == topo_node_of(c, m[0])) k++;
  if (k < 2 || k == n || n % k) return 1;
  for (int i = 0; i < n; i++)
    if (topo_node_of(c, m[i]) != topo_node_of(c, m[i - i % k])) return 1;
  for (int x = k; x < n; x += k)
    if (topo_node_of(c, m[x]) == topo_node_of(c, m[x - k])) return 1;
  return k;
}

int sim_edges(const topo_cluster *c, const int *m, int n, sim_alg alg, int *src, int *dst, int cap, int *depth) {
  int ne = 0;
  *depth = 1;
#define EDGE(a, b)                                                                                            \
  do {                                                                                                        \
    if (ne < cap) {                                                                                           \
      src[ne] = (a);                                                                                          \
      dst[ne] = (b);                                                                                          \
    }                                                                                                         \
    ne++;                                                                                                     \
  } while (0)
  switch (alg) {
  case SIM_ALG_RING: {
    /* k members on each node, contiguous in ring order: NCCL runs k rings
     * (channels), ring j leaving node X through the NIC of its local member
     * (j + X + 1) mod k and entering node X + 1 through the same rail, so the
     * node's k NICs all carry the ring's inter-node traffic, 1/k each (the
     * caller splits the bytes over ne / n rings). Otherwise one ring. */
    int k = ring_members_per_node(c, m, n);
    if (k <= 1) {
      for (int i = 0; i < n; i++) EDGE(m[i], m[(i + 1) % n]);
    } else {
      int nodes = n / k;
      for (int j = 0; j < k; j++)
        for (int x = 0; x < nodes; x++) {
          const int *b = m + x * k, enter = (j + x) % k;
          /* enter, enter - 1, ..., enter + 1 (mod k): ends at the exit member */
          for (int s = 0; s < k - 1; s++) EDGE(b[(enter - s + k) % k], b[(enter - s - 1 + 2 * k) % k]);
          int exit = (enter + 1) % k;
          const int *nb = m + ((x + 1) % nodes) * k;
          EDGE(b[exit], nb[(j + x + 1) % k]);
        }
    }
    *depth = n - 1;
    break;
  }
  case SIM_ALG_ALLTOALL:
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (i != j) EDGE(m[i], m[j]);
    *depth = 1;
    break;
  case SIM_ALG_SENDRECV:
    EDGE(m[0], m[1]);
    *depth = 1;
    break;
  case SIM_ALG_TREE_UP:
  case SIM_ALG_TREE_DOWN: {
    /* Members of one node are contiguous in ring order: chain them towards
     * the first (the node's leader); leaders form a binary heap. */
    int leaders = 0, chain = 0, run = 0, leader_idx[4096];
    for (int i = 0; i < n; i++) {
      bool first = i == 0 || topo_node_of(c, m[i]) != topo_node_of(c, m[i - 1]);
      if (first) {
        if (leaders < 4096) leader_idx[leaders] = i;
        leaders++;
        run = 0;
      } else {
        if (alg == SIM_ALG_TREE_UP)
          EDGE(m[i], m[i - 1]);
        else
          EDGE(m[i - 1], m[i]);
        run++;
        if (run > chain) chain = run;
      }
    }
    if (leaders > 4096) leaders = 4096;
    int levels = 0;
    for (int j = 1; j < leaders; j++) {
      int parent = (j - 1) / 2;
      if (alg == SIM_ALG_TREE_UP)
        EDGE(m[leader_idx[j]], m[leader_idx[parent]]);
      else
        EDGE(m[leader_idx[parent]], m[leader_idx[j]]);
    }
    while ((1 << levels) < leaders + 1) levels++;
    *depth = chain + (levels > 1 ? levels - 1 : 0);
    if (*depth < 1) *depth = 1;
    break;
  }
  }
#undef EDGE
  return ne;
}
