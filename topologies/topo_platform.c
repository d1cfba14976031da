/* topo_platform.c — writes a cluster as a SimGrid platform (XML, DTD 4.1).
 *
 * A shallow tree of zones, one per leaf switch, because SimGrid 3.32 pays for
 * every zone on each host it creates (a name check walks the zone tree) and
 * on each zone it seals (it lists every host): with one zone per node, 16,384
 * GPUs took 8 s to load; with one per leaf, well under 2.
 *
 *   fabric      DijkstraCache: leaves around the spine switch (fat-tree), or
 *               Full: one global link per pair of groups (dragonfly)
 *    ├─ spine           a zone holding only the router "spine-sw"
 *    └─ leaf<l>         DijkstraCache over a small graph:
 *         host gpu<N>      (speed = bf16 peak) ── gpu<N>-port ── router node<k>-nvs
 *         host gpu<N>      ── node<k>-nic<j>, node<k>-up ── router leaf<l>-sw
 *
 * Levels with a single child are left out: one node is a Full zone of its GPUs
 * with a route per pair, one leaf is the leaf zone alone. Between zones, a
 * zoneRoute joins leaf<l>-sw to spine-sw through leaf<l>-up, or two dragonfly
 * groups through their global link. Every link is full duplex (SPLITDUPLEX);
 * its parameters come from topo_route.c, and the tests check that SimGrid's
 * route between any two GPUs is the one topo_route() describes.
 *
 * Every link is declared at the top of the root zone: SimGrid 3.32 finds a link
 * named in a route by walking the zone tree depth first, so a link at the root
 * costs one hash probe. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "topo_internal.h"

/* Numbers in SimGrid's units, in a form its parser reads back exactly. */
static void write_link(FILE *out, const char *indent, const topo_link *l) {
  fprintf(out, "%s<link id=\"%s\" bandwidth=\"%.15gGBps\" latency=\"%.15gus\" sharing_policy=\"SPLITDUPLEX\"/>\n",
          indent, l->name, l->gbps, l->latency_us);
}

/* A name inside an XML comment, where "--" may not appear. */
static void write_comment_text(FILE *out, const char *s) {
  for (const char *p = s; *p; p++) fputc(*p == '-' && p > s && p[-1] == '-' ? '_' : *p, out);
}

static void write_link_ctn(FILE *out, const topo_link *l) {
  fprintf(out, "<link_ctn id=\"%s\" direction=\"%s\"/>", l->name, l->up ? "UP" : "DOWN");
}

/* A zone that holds nothing but a switch, so zoneRoutes can end at it. */
static void write_switch_zone(FILE *out, const char *indent, const char *zone, const char *router) {
  fprintf(out, "%s<zone id=\"%s\" routing=\"Full\"><router id=\"%s\"/></zone>\n", indent, zone, router);
}

static void write_zone_route(FILE *out, const char *indent, const char *src, const char *dst, const char *gw_src,
                             const char *gw_dst, const topo_link *l) {
  fprintf(out, "%s<zoneRoute src=\"%s\" dst=\"%s\" gw_src=\"%s\" gw_dst=\"%s\" symmetrical=\"YES\">", indent, src,
          dst, gw_src, gw_dst);
  write_link_ctn(out, l);
  fprintf(out, "</zoneRoute>\n");
}

/* Whether the platform holds GPU g (keep == NULL: every GPU). */
static bool kept(const unsigned char *keep, int g) { return !keep || keep[g]; }

static bool node_kept(const topo_cluster *c, const unsigned char *keep, int node) {
  for (int a = node * c->gpus_per_node; a < (node + 1) * c->gpus_per_node; a++)
    if (kept(keep, a)) return true;
  return false;
}

/* NIC j of a node is written when a kept GPU of the node uses it. */
static bool nic_kept(const topo_cluster *c, const unsigned char *keep, int node, int j) {
  for (int a = node * c->gpus_per_node; a < (node + 1) * c->gpus_per_node; a++)
    if (kept(keep, a) && topo_nic_of(c, a) == j) return true;
  return false;
}

/* The links of one node: its GPUs' ports and, when it talks to others, its NICs. */
static void write_node_links(const topo_cluster *c, const unsigned char *keep, int node, bool with_nics, FILE *out,
                             const char *indent) {
  topo_link l;
  if (c->gpus_per_node > 1)
    for (int i = 0; i < c->gpus_per_node; i++) {
      if (!kept(keep, node * c->gpus_per_node + i)) continue;
      topo_port_link(c, node * c->gpus_per_node + i, true, &l);
      write_link(out, indent, &l);
    }
  if (with_nics)
    for (int j = 0; j < c->nic.per_node; j++) {
      if (!nic_kept(c, keep, node, j)) continue;
      topo_nic_link(c, node, j, true, &l);
      write_link(out, indent, &l);
    }
}

static void write_host(const topo_cluster *c, int gpu, FILE *out, const char *indent) {
  fprintf(out, "%s<host id=\"gpu%d\" speed=\"%.15gTf\"/>\n", indent, gpu, c->gpu.bf16_tflops);
}

static void write_route(FILE *out, const char *indent, const char *src, const char *dst, const topo_link *links,
                        int n) {
  fprintf(out, "%s<route src=\"%s\" dst=\"%s\" symmetrical=\"YES\">", indent, src, dst);
  for (int i = 0; i < n; i++) write_link_ctn(out, &links[i]);
  fprintf(out, "</route>\n");
}

/* A cluster of one node: its GPUs and an explicit route for every pair. */
static void write_single_node(const topo_cluster *c, FILE *out) {
  int g = c->gpus_per_node;
  char src[32], dst[32];
  topo_link route[TOPO_MAX_ROUTE_LINKS];
  fprintf(out, "  <zone id=\"node0\" routing=\"Full\">\n");
  for (int a = 0; a < g; a++) write_host(c, a, out, "    ");
  write_node_links(c, NULL, 0, false, out, "    ");
  for (int a = 0; a < g; a++)
    for (int b = a + 1; b < g; b++) {
      snprintf(src, sizeof src, "gpu%d", a);
      snprintf(dst, sizeof dst, "gpu%d", b);
      write_route(out, "    ", src, dst, route, topo_route(c, a, b, route));
    }
  fprintf(out, "  </zone>\n");
}

static int first_node_of_leaf(const topo_cluster *c, int leaf) {
  int first = 0;
  for (int l = 0; l < leaf; l++) first += topo_nodes_in_leaf(c, l);
  return first;
}

/* The links of a leaf: those of its nodes and each node's cables to the leaf. */
static void write_leaf_links(const topo_cluster *c, const unsigned char *keep, int leaf, FILE *out,
                             const char *indent) {
  int first = first_node_of_leaf(c, leaf), count = topo_nodes_in_leaf(c, leaf);
  topo_link up;
  for (int k = first; k < first + count; k++) write_node_links(c, keep, k, true, out, indent);
  for (int k = first; k < first + count; k++) {
    if (!node_kept(c, keep, k)) continue;
    topo_node_up_link(c, k, true, &up);
    write_link(out, indent, &up);
  }
}

/* One leaf switch (or dragonfly group) with the GPUs of its nodes, routed by
 * Dijkstra over a small graph: each GPU joins its node's switch "node<k>-nvs"
 * through its port, and the leaf switch "leaf<l>-sw" through its NIC and its
 * node's cables. A path inside a node then counts 2 links and any path through
 * the leaf at least 4, so the shortest path is always the intended one. When
 * the leaf is the whole platform, its links are declared here too. */
static void write_leaf(const topo_cluster *c, const unsigned char *keep, int leaf, FILE *out, const char *indent) {
  char inner[32], sw[32], nvs[32], gpu[32];
  snprintf(inner, sizeof inner, "%s  ", indent);
  snprintf(sw, sizeof sw, "leaf%d-sw", leaf);
  int first = first_node_of_leaf(c, leaf), count = topo_nodes_in_leaf(c, leaf), g = c->gpus_per_node;
  topo_link hop[2];

  fprintf(out, "%s<zone id=\"leaf%d\" routing=\"DijkstraCache\">\n", indent, leaf);
  if (topo_leaf_count(c) == 1) write_leaf_links(c, keep, leaf, out, inner);
  fprintf(out, "%s<router id=\"%s\"/>\n", inner, sw);
  for (int k = first; k < first + count; k++) {
    if (!node_kept(c, keep, k)) continue;
    for (int a = k * g; a < (k + 1) * g; a++)
      if (kept(keep, a)) write_host(c, a, out, inner);
    if (g > 1) fprintf(out, "%s<router id=\"node%d-nvs\"/>\n", inner, k);
  }
  for (int k = first; k < first + count; k++)
    for (int a = k * g; a < (k + 1) * g; a++) {
      if (!kept(keep, a)) continue;
      snprintf(gpu, sizeof gpu, "gpu%d", a);
      if (g > 1) {
        snprintf(nvs, sizeof nvs, "node%d-nvs", k);
        topo_port_link(c, a, true, &hop[0]);
        write_route(out, inner, gpu, nvs, hop, 1);
      }
      topo_nic_link(c, k, topo_nic_of(c, a), true, &hop[0]);
      topo_node_up_link(c, k, true, &hop[1]);
      write_route(out, inner, gpu, sw, hop, 2);
    }
  fprintf(out, "%s</zone>\n", indent);
}

/* Leaves around a spine (fat-tree), or groups joined pairwise (dragonfly). */
static void write_fabric(const topo_cluster *c, const unsigned char *keep, FILE *out) {
  int leaves = topo_leaf_count(c);
  bool dragonfly = c->fabric.kind == TOPO_FABRIC_DRAGONFLY;
  char a_zone[32], b_zone[32], a_sw[32], b_sw[32];
  topo_link l;
  fprintf(out, "  <zone id=\"fabric\" routing=\"%s\">\n", dragonfly ? "Full" : "DijkstraCache");
  /* SimGrid's XML parser takes a zone whose first child is a link for a zone of
   * hosts, and then refuses sub-zones: open with a zone. A dragonfly has no
   * central switch, so an empty zone (no routes lead to it) stands in. */
  if (dragonfly)
    fprintf(out, "    <zone id=\"globals\" routing=\"None\"></zone>\n");
  else
    write_switch_zone(out, "    ", "spine", "spine-sw");
  for (int a = 0; a < leaves; a++) write_leaf_links(c, keep, a, out, "    ");
  for (int a = 0; a < leaves; a++) {
    if (dragonfly) {
      for (int b = a + 1; b < leaves; b++) {
        topo_global_link(c, a, b, true, &l);
        write_link(out, "    ", &l);
      }
    } else {
      topo_leaf_up_link(c, a, true, &l);
      write_link(out, "    ", &l);
    }
  }
  for (int a = 0; a < leaves; a++) write_leaf(c, keep, a, out, "    ");
  for (int a = 0; a < leaves; a++) {
    snprintf(a_zone, sizeof a_zone, "leaf%d", a);
    snprintf(a_sw, sizeof a_sw, "leaf%d-sw", a);
    if (!dragonfly) {
      topo_leaf_up_link(c, a, true, &l);
      write_zone_route(out, "    ", a_zone, "spine", a_sw, "spine-sw", &l);
      continue;
    }
    for (int b = a + 1; b < leaves; b++) {
      snprintf(b_zone, sizeof b_zone, "leaf%d", b);
      snprintf(b_sw, sizeof b_sw, "leaf%d-sw", b);
      topo_global_link(c, a, b, true, &l);
      write_zone_route(out, "    ", a_zone, b_zone, a_sw, b_sw, &l);
    }
  }
  fprintf(out, "  </zone>\n");
}

int topo_write_platform(const topo_cluster *c, FILE *out, ts_err *e) { return topo_write_platform_subset(c, NULL, out, e); }

int topo_write_platform_subset(const topo_cluster *c, const unsigned char *keep, FILE *out, ts_err *e) {
  if (!c || !out) return ts_fail_sys(e, "topo_write_platform: no cluster or no output");
  if (c->nodes < 1 || c->gpus_per_node < 1 || (c->nodes > 1 && c->nic.per_node < 1))
    return ts_fail(e, c->name, NULL, "cluster was not loaded or validated");
  fprintf(out, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
  fprintf(out, "<!-- ");
  write_comment_text(out, c->name);
  fprintf(out, ": %d node(s) x %d ", c->nodes, c->gpus_per_node);
  write_comment_text(out, c->gpu.name);
  fprintf(out, " GPU(s), intra %s, %d NIC(s)/node, fabric %s; written by tacosim (topologies/topo_platform.c) -->\n",
          topo_intra_kind_name(c->intra.kind), c->nic.per_node, topo_fabric_kind_name(c->fabric.kind));
  fprintf(out, "<platform version=\"4.1\">\n");
  if (c->nodes == 1)
    write_single_node(c, out);
  else if (topo_leaf_count(c) == 1)
    write_leaf(c, keep, 0, out, "  ");
  else
    write_fabric(c, keep, out);
  fprintf(out, "</platform>\n");
  if (fflush(out) || ferror(out))
    return ts_fail_sys(e, "writing the platform of %s failed (%s)", c->name, strerror(errno));
  return 0;
}

int topo_write_platform_file(const topo_cluster *c, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot create (%s)", path, strerror(errno));
  int rc = topo_write_platform(c, f, e);
  if (fclose(f) && !rc) rc = ts_fail_sys(e, "%s: cannot write (%s)", path, strerror(errno));
  return rc;
}

const char *const *topo_simgrid_options(void) {
  static const char *const options[] = {"--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                                        "--cfg=network/TCP-gamma:1e18", NULL};
  return options;
}
