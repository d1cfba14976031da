/* topo_internal.h — the parameters of each kind of link, shared by the route
 * helpers (topo_route.c) and the platform writer (topo_platform.c) so both
 * describe the same network. Not part of the module's contract. */
#ifndef TOPO_INTERNAL_H
#define TOPO_INTERNAL_H

#include "topo.h"

void topo_port_link(const topo_cluster *c, int gpu, bool up, topo_link *l);
void topo_nic_link(const topo_cluster *c, int node, int nic, bool up, topo_link *l);
void topo_node_up_link(const topo_cluster *c, int node, bool up, topo_link *l);
void topo_leaf_up_link(const topo_cluster *c, int leaf, bool up, topo_link *l);
void topo_global_link(const topo_cluster *c, int group_a, int group_b, bool up, topo_link *l);

#endif
