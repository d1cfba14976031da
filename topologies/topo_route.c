/* topo_route.c — which links a transfer between two GPUs crosses, and how fast
 * and how far each is. The platform writer (topo_platform.c) builds its
 * SimGrid links from the same functions, so an analytic estimate made here and
 * a simulated transfer on the platform agree link for link.
 *
 * Links (each full duplex):
 *   gpu<N>-port      the GPU's port into the intra-node fabric (NVLink, NVSwitch,
 *                    PCIe, or the transport NCCL uses between the GPUs)
 *   node<k>-nic<j>   NIC j of node k
 *   node<k>-up       node k's cables to its leaf: all its NICs together
 *   leaf<l>-up       leaf l's uplinks to the spine, tapered by the oversubscription
 *   group<a>-<b>     dragonfly global link between groups a < b
 *
 * Latencies: intra.latency_us is GPU to GPU inside a node (half on each port);
 * nic.latency_us is paid at each NIC crossed (two per inter-node transfer);
 * fabric.latency_us is paid per switch crossed (half on each node-up link for
 * the leaf, the rest on the leaf uplinks or the global link). */
#include <math.h>
#include <stdio.h>

#include "topo_internal.h"

int topo_leaf_count(const topo_cluster *c) {
  if (c->nodes <= 1) return 1;
  switch (c->fabric.kind) {
  case TOPO_FABRIC_FAT_TREE:
  case TOPO_FABRIC_RAIL_FAT_TREE:
    return (c->nodes + c->fabric.nodes_per_leaf - 1) / c->fabric.nodes_per_leaf;
  case TOPO_FABRIC_DRAGONFLY:
    return c->fabric.groups;
  default:
    return 1;
  }
}

static int nodes_per_leaf(const topo_cluster *c) {
  int leaves = topo_leaf_count(c);
  if (leaves == 1) return c->nodes;
  if (c->fabric.kind == TOPO_FABRIC_DRAGONFLY) return c->nodes / c->fabric.groups;
  return c->fabric.nodes_per_leaf;
}

int topo_leaf_of_node(const topo_cluster *c, int node) { return node / nodes_per_leaf(c); }

int topo_nodes_in_leaf(const topo_cluster *c, int leaf) {
  int per = nodes_per_leaf(c);
  int left = c->nodes - leaf * per;
  return left < per ? left : per;
}

int topo_nic_of(const topo_cluster *c, int gpu) {
  if (c->nic.per_node < 1) return -1;
  int local = gpu % c->gpus_per_node;
  return local / (c->gpus_per_node / c->nic.per_node);
}

/* ---- the parameters of each kind of link (shared with the platform writer) ---- */

static void set_link(topo_link *l, bool up, double gbps, double latency_us) {
  l->up = up;
  l->gbps = gbps;
  l->latency_us = latency_us;
}

/* named false: the link's figures without its name (no formatting: the layout
 * search asks for routes' latencies and bandwidths millions of times). */
static void port_link(const topo_cluster *c, int gpu, bool up, topo_link *l, bool named) {
  if (named) snprintf(l->name, sizeof l->name, "gpu%d-port", gpu);
  else l->name[0] = 0;
  set_link(l, up, c->intra.gbps_per_gpu, c->intra.latency_us / 2);
}

static void nic_link(const topo_cluster *c, int node, int nic, bool up, topo_link *l, bool named) {
  if (named) snprintf(l->name, sizeof l->name, "node%d-nic%d", node, nic);
  else l->name[0] = 0;
  set_link(l, up, c->nic.gbps, c->nic.latency_us);
}

static void node_up_link(const topo_cluster *c, int node, bool up, topo_link *l, bool named) {
  if (named) snprintf(l->name, sizeof l->name, "node%d-up", node);
  else l->name[0] = 0;
  set_link(l, up, c->nic.per_node * c->nic.gbps, c->fabric.latency_us / 2);
}

/* A leaf's uplinks carry what its nodes can inject, divided by the taper. A
 * transfer between leaves crosses 2 (levels - 1) switches above its two leaves
 * (levels 2: leaf, spine, leaf), so each of the two uplinks carries levels - 1. */
static void leaf_up_link(const topo_cluster *c, int leaf, bool up, topo_link *l, bool named) {
  if (named) snprintf(l->name, sizeof l->name, "leaf%d-up", leaf);
  else l->name[0] = 0;
  double inject = topo_nodes_in_leaf(c, leaf) * c->nic.per_node * c->nic.gbps;
  set_link(l, up, inject / c->fabric.oversubscription, (c->fabric.levels - 1) * c->fabric.latency_us);
}

/* A balanced dragonfly: each group spreads what its nodes inject over its
 * global links to the other groups, tapered by the oversubscription; crossing
 * one costs one more switch. */
static void global_link(const topo_cluster *c, int group_a, int group_b, bool up, topo_link *l, bool named) {
  int lo = group_a < group_b ? group_a : group_b, hi = group_a < group_b ? group_b : group_a;
  if (named) snprintf(l->name, sizeof l->name, "group%d-%d", lo, hi);
  else l->name[0] = 0;
  double inject = topo_nodes_in_leaf(c, lo) * c->nic.per_node * c->nic.gbps;
  set_link(l, up, inject / (c->fabric.groups - 1) / c->fabric.oversubscription, c->fabric.latency_us);
}

void topo_port_link(const topo_cluster *c, int gpu, bool up, topo_link *l) { port_link(c, gpu, up, l, true); }
void topo_nic_link(const topo_cluster *c, int node, int nic, bool up, topo_link *l) { nic_link(c, node, nic, up, l, true); }
void topo_node_up_link(const topo_cluster *c, int node, bool up, topo_link *l) { node_up_link(c, node, up, l, true); }
void topo_leaf_up_link(const topo_cluster *c, int leaf, bool up, topo_link *l) { leaf_up_link(c, leaf, up, l, true); }
void topo_global_link(const topo_cluster *c, int group_a, int group_b, bool up, topo_link *l) {
  global_link(c, group_a, group_b, up, l, true);
}

static int route(const topo_cluster *c, int a, int b, topo_link out[TOPO_MAX_ROUTE_LINKS], bool named) {
  int total = topo_total_gpus(c);
  if (a < 0 || b < 0 || a >= total || b >= total) return -1;
  if (a == b) return 0;
  int na = topo_node_of(c, a), nb = topo_node_of(c, b), n = 0;
  if (na == nb) {
    port_link(c, a, true, &out[n++], named);
    port_link(c, b, false, &out[n++], named);
    return n;
  }
  int la = topo_leaf_of_node(c, na), lb = topo_leaf_of_node(c, nb);
  nic_link(c, na, topo_nic_of(c, a), true, &out[n++], named);
  node_up_link(c, na, true, &out[n++], named);
  if (la != lb && c->fabric.kind == TOPO_FABRIC_DRAGONFLY) {
    global_link(c, la, lb, la < lb, &out[n++], named);
  } else if (la != lb) {
    leaf_up_link(c, la, true, &out[n++], named);
    leaf_up_link(c, lb, false, &out[n++], named);
  }
  node_up_link(c, nb, false, &out[n++], named);
  nic_link(c, nb, topo_nic_of(c, b), false, &out[n++], named);
  return n;
}

int topo_route(const topo_cluster *c, int a, int b, topo_link out[TOPO_MAX_ROUTE_LINKS]) {
  return route(c, a, b, out, true);
}

double topo_path_gbps(const topo_cluster *c, int a, int b) {
  topo_link links[TOPO_MAX_ROUTE_LINKS];
  int n = route(c, a, b, links, false);
  if (n < 0) return 0.0;
  if (n == 0) return c->gpu.hbm_gbps; /* a == b: a copy in the GPU's own memory */
  double gbps = links[0].gbps;
  for (int i = 1; i < n; i++) gbps = fmin(gbps, links[i].gbps);
  return gbps;
}

double topo_path_latency_us(const topo_cluster *c, int a, int b) {
  topo_link links[TOPO_MAX_ROUTE_LINKS];
  int n = route(c, a, b, links, false);
  double us = 0.0;
  for (int i = 0; i < n; i++) us += links[i].latency_us;
  return us;
}
