/* sim_scale.c — reduced mode: the traffic of ranks that are not simulated.
 *
 * In reduced mode one rank per pipeline stage stands for every rank of that
 * stage (all run the same program). Its flows (its own group's edges) run on
 * the platform; the identical flows of the other groups of the stage are not
 * launched, but where they would share a link with a representative flow
 * they would slow it down. So each representative edge carries its bytes
 * times k = min_l(B_l / r_l) / min_l(B_l / c_l) over the links l of its route,
 * where c_l counts the flows of the whole class (every group of the stage) on
 * l and r_l those of the representative group alone: with k, the edge takes
 * as long alone as it would in the crowd. On a rail-optimised fabric the
 * groups use disjoint rails and k = 1; on an oversubscribed one k > 1. */
#include <math.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>

#include "sim_edges.h"
#include "sim_internal.h"

struct sim_scale_cache {
  struct sim_scale_cache *next;
  int gkind, alg, peer, rep_sends; /* peer, rep_sends: send/recv classes only */
  int n;
  int *src, *dst; /* the representative group's edges, sorted by (src, dst) */
  double *k;
};

/* Edges sorted by (src, dst) so that a lookup is a binary search: a DP ring
 * of thousands of members has as many edges, each looked up per collective. */
typedef struct {
  int src, dst;
} edge_key;

static int cmp_edge(const void *a, const void *b) {
  const edge_key *x = a, *y = b;
  if (x->src != y->src) return x->src < y->src ? -1 : 1;
  return (x->dst > y->dst) - (x->dst < y->dst);
}

/* Flows per directed link, keyed by the link's platform name and direction
 * (topo_route's links are the platform's, link for link: topologies/topo.h).
 * Counted from the topology rather than from SimGrid's routes, so the
 * platform need not hold the GPUs that are not simulated. */
typedef struct {
  char name[40];
  bool up, used, shared;
  int real, all;
  double bw; /* bytes/s as the platform declares it (topo_platform.c writes %.15g GBps) */
} link_count;

typedef struct {
  link_count *slots;
  size_t cap; /* a power of two */
  size_t n;
} link_table;

static unsigned long name_hash(const char *s, bool up) {
  unsigned long h = 1469598103934665603ul;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ul;
  return h ^ up;
}

/* A route's links: topo_route's, or SimGrid's for a platform file given by
 * the caller (tests), whose links topo_route does not know. */
#define ROUTE_MAX 32
typedef struct {
  topo_link l;
  double bw; /* bytes/s, when from SimGrid */
  bool shared;
} route_link;

static int route_of(int src, int dst, route_link out[ROUTE_MAX]) {
  if (!sim_w->o->platform_path) {
    topo_link r[TOPO_MAX_ROUTE_LINKS];
    int n = topo_route(&sim_w->p->cluster, src, dst, r);
    for (int i = 0; i < n; i++) {
      out[i].l = r[i];
      /* the bandwidth as the platform declares it (topo_platform.c writes %.15g GBps); a cluster has a few
       * distinct figures, each printed once */
      static double last_gbps = NAN, last_bw;
      if (r[i].gbps != last_gbps) {
        char text[64];
        snprintf(text, sizeof text, "%.15g", r[i].gbps);
        last_gbps = r[i].gbps, last_bw = strtod(text, NULL) * 1e9;
      }
      out[i].bw = last_bw;
      out[i].shared = true; /* every link is SPLITDUPLEX */
    }
    return n < 0 ? 0 : n;
  }
  xbt_dynar_t route = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(sim_w->hosts[src], sim_w->hosts[dst], route);
  unsigned long len = xbt_dynar_length(route);
  int n = 0;
  for (unsigned long i = 0; i < len && n < ROUTE_MAX; i++, n++) {
    sg_link_t l = xbt_dynar_get_as(route, i, sg_link_t);
    snprintf(out[n].l.name, sizeof out[n].l.name, "%s", sg_link_get_name(l));
    out[n].l.up = false; /* SimGrid names each direction of a link */
    out[n].bw = sg_link_get_bandwidth(l);
    out[n].shared = sg_link_is_shared(l);
  }
  xbt_dynar_free(&route);
  return n;
}

static link_count *link_slot(link_table *t, const route_link *rl) {
  const topo_link *l = &rl->l;
  if (2 * (t->n + 1) > t->cap) {
    link_table bigger = {calloc(t->cap ? 2 * t->cap : 1024, sizeof(link_count)), t->cap ? 2 * t->cap : 1024, 0};
    if (!bigger.slots) abort(); /* out of memory while preparing the simulation */
    for (size_t i = 0; i < t->cap; i++)
      if (t->slots[i].used) {
        size_t j = name_hash(t->slots[i].name, t->slots[i].up) & (bigger.cap - 1);
        while (bigger.slots[j].used) j = (j + 1) & (bigger.cap - 1);
        bigger.slots[j] = t->slots[i];
        bigger.n++;
      }
    free(t->slots);
    *t = bigger;
  }
  size_t j = name_hash(l->name, l->up) & (t->cap - 1);
  while (t->slots[j].used) {
    if (t->slots[j].up == l->up && strcmp(t->slots[j].name, l->name) == 0) return &t->slots[j];
    j = (j + 1) & (t->cap - 1);
  }
  link_count *lc = &t->slots[j];
  lc->used = true;
  lc->up = l->up;
  snprintf(lc->name, sizeof lc->name, "%s", l->name);
  lc->bw = rl->bw;
  lc->shared = rl->shared;
  t->n++;
  return lc;
}

/* Adds the route of one edge to the per-link counts. */
static void count_route(int src, int dst, int is_real, link_table *t) {
  route_link route[ROUTE_MAX];
  int len = route_of(src, dst, route);
  for (int i = 0; i < len; i++) {
    link_count *lc = link_slot(t, &route[i]);
    lc->all++;
    lc->real += is_real;
  }
}

static double edge_k(int src, int dst, link_table *t) {
  route_link route[ROUTE_MAX];
  int len = route_of(src, dst, route);
  double alone = INFINITY, crowd = INFINITY;
  for (int i = 0; i < len; i++) {
    const link_count *lc = link_slot(t, &route[i]);
    double b = lc->bw;
    double a = b / (lc->shared && lc->real > 0 ? lc->real : 1), c = b / (lc->shared && lc->all > 0 ? lc->all : 1);
    if (a < alone) alone = a;
    if (c < crowd) crowd = c;
  }
  return len > 0 && crowd > 0 && crowd < alone ? alone / crowd : 1.0;
}

static struct sim_scale_cache *build(sim_rank *rs, int gkind, int alg, int peer, int rep_sends) {
  const plan *p = sim_w->p;
  const topo_cluster *c = &p->cluster;
  plan_coord me = plan_coord_of(p, rs->rank);
  struct sim_scale_cache *sc = calloc(1, sizeof *sc);
  if (!sc) abort();
  sc->gkind = gkind, sc->alg = alg, sc->peer = peer, sc->rep_sends = rep_sends;
  int world = sim_w->world, cap = world > 64 ? world : 64;
  /* edges: up to 8 rings of a group to start with; grown to what sim_edges returns (an all-to-all of n members
   * has n(n - 1), more than 8 x world once n(n - 1) > 8 max(world, 64)), so that no edge is dropped */
  int ecap = cap * 8;
  int *members = malloc(sizeof(int) * (size_t)cap), *src = malloc(sizeof(int) * (size_t)ecap),
      *dst = malloc(sizeof(int) * (size_t)ecap);
  unsigned char *seen = calloc((size_t)world, 1);
  if (!members || !src || !dst || !seen) abort();
  link_table links = {0};
  int depth;
  plan_coord peer_c = peer >= 0 ? plan_coord_of(p, peer) : me;
  /* the whole class: the same op on every rank of this stage */
  for (int r = 0; r < world; r++) {
    plan_coord rc = plan_coord_of(p, r);
    if (rc.pp != me.pp || seen[r]) continue;
    int is_real;
    int ne;
    if (alg == SIM_ALG_SENDRECV) {
      plan_coord pc = {rc.dp, rc.tp, peer_c.pp, rc.cp};
      int pr = plan_rank_of(p, pc);
      /* the representative sends (src = rep) or receives (dst = rep) */
      src[0] = rep_sends ? r : pr;
      dst[0] = rep_sends ? pr : r;
      ne = 1;
      is_real = r == rs->rank;
      seen[r] = 1;
    } else {
      int n = plan_group_members(p, r, (plan_group_kind)gkind, members, cap);
      for (int i = 0; i < n; i++)
        if (members[i] >= 0 && members[i] < world) seen[members[i]] = 1;
      is_real = 0;
      for (int i = 0; i < n; i++) is_real |= members[i] == rs->rank;
      ne = sim_edges(c, members, n, (sim_alg)alg, src, dst, ecap, &depth);
      if (ne > ecap) {
        ecap = ne;
        src = realloc(src, sizeof(int) * (size_t)ecap), dst = realloc(dst, sizeof(int) * (size_t)ecap);
        if (!src || !dst) abort();
        sim_edges(c, members, n, (sim_alg)alg, src, dst, ecap, &depth);
      }
    }
    for (int i = 0; i < ne; i++) count_route(src[i], dst[i], is_real, &links);
    if (is_real) {
      sc->n = ne;
      sc->src = malloc(sizeof(int) * (size_t)(ne ? ne : 1));
      sc->dst = malloc(sizeof(int) * (size_t)(ne ? ne : 1));
      sc->k = malloc(sizeof(double) * (size_t)(ne ? ne : 1));
      edge_key *e = malloc(sizeof *e * (size_t)(ne ? ne : 1));
      if (!sc->src || !sc->dst || !sc->k || !e) abort();
      for (int i = 0; i < ne; i++) e[i] = (edge_key){src[i], dst[i]};
      qsort(e, (size_t)ne, sizeof *e, cmp_edge);
      for (int i = 0; i < ne; i++) sc->src[i] = e[i].src, sc->dst[i] = e[i].dst;
      free(e);
    }
  }
  for (int i = 0; i < sc->n; i++) sc->k[i] = edge_k(sc->src[i], sc->dst[i], &links);
  free(links.slots);
  free(members);
  free(src);
  free(dst);
  free(seen);
  return sc;
}

double sim_edge_scale(sim_rank *rs, int gkind, int alg, int edge_src, int edge_dst, int nedges_hint) {
  (void)nedges_hint;
  int peer = -1, sends = 0;
  if (alg == SIM_ALG_SENDRECV) {
    sends = edge_src == rs->rank;
    peer = sends ? edge_dst : edge_src;
  }
  struct sim_scale_cache *sc;
  for (sc = rs->scales; sc; sc = sc->next)
    if (sc->gkind == gkind && sc->alg == alg && sc->peer == peer && sc->rep_sends == sends) break;
  if (!sc) {
    sc = build(rs, gkind, alg, peer, sends);
    sc->next = rs->scales;
    rs->scales = sc;
  }
  /* binary search; an edge listed twice (two rings) has one k: it depends on the route alone */
  int lo = 0, hi = sc->n;
  edge_key want = {edge_src, edge_dst};
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cmp_edge(&(edge_key){sc->src[mid], sc->dst[mid]}, &want) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < sc->n && sc->src[lo] == edge_src && sc->dst[lo] == edge_dst ? sc->k[lo] : 1.0;
}

/* --alltoall analytic (approximate, off by default): a cross-node all-to-all priced without flows. Every
 * group of the kind at this rank's pipeline stage runs its all-to-all (every rank of a stage runs the same
 * program), each edge with the same bytes b. Under max-min sharing with nothing else on the links, the
 * flows through the link l* with the most flows per bandwidth, c_l / B_l, get B / c each from the start
 * (the first link progressive filling saturates) and carry c b bytes: they end b c / B after their
 * latency, and every other flow ends before or with them. So t = latency + b max_l (c_l / B_l), the latency the
 * largest of the representative group's routes. What it leaves out: every other flow (DP rings and trees,
 * pipeline sends) that shares those links while the all-to-all runs, in both directions: the all-to-all
 * neither slows them nor is slowed by them. The error against the flows: experiments/RESULTS-search.md. */
double sim_alltoall_analytic_s(sim_rank *rs, int gkind, double edge_bytes) {
  if (!rs->a2a_known[gkind]) {
    const plan *p = sim_w->p;
    const topo_cluster *c = &p->cluster;
    int world = sim_w->world;
    plan_coord me = plan_coord_of(p, rs->rank);
    int *members = malloc(sizeof(int) * (size_t)world);
    unsigned char *seen = calloc((size_t)world, 1);
    if (!members || !seen) abort(); /* out of memory inside the simulation */
    link_table links = {0};
    int *src = NULL, *dst = NULL, cap = 0, depth;
    for (int r = 0; r < world; r++) {
      plan_coord rc = plan_coord_of(p, r);
      if (rc.pp != me.pp || seen[r]) continue;
      int n = plan_group_members(p, r, (plan_group_kind)gkind, members, world);
      for (int i = 0; i < n; i++)
        if (members[i] >= 0 && members[i] < world) seen[members[i]] = 1;
      int ne = sim_edges(c, members, n, SIM_ALG_ALLTOALL, NULL, NULL, 0, &depth);
      if (ne > cap) {
        cap = ne;
        src = realloc(src, sizeof(int) * (size_t)cap), dst = realloc(dst, sizeof(int) * (size_t)cap);
        if (!src || !dst) abort();
      }
      sim_edges(c, members, n, SIM_ALG_ALLTOALL, src, dst, cap, &depth);
      for (int i = 0; i < ne; i++) count_route(src[i], dst[i], 0, &links);
    }
    /* the representative group's routes: the busiest link per bandwidth on them, and the largest latency */
    const int *m = rs->members[gkind];
    int n = rs->n_members[gkind];
    double s_per_byte = 0, latency = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        if (i == j) continue;
        route_link route[ROUTE_MAX];
        int len = route_of(m[i], m[j], route);
        for (int k = 0; k < len; k++) {
          const link_count *lc = link_slot(&links, &route[k]);
          double per = (lc->shared && lc->all > 0 ? lc->all : 1) / lc->bw;
          if (per > s_per_byte) s_per_byte = per;
        }
        double l = sg_host_get_route_latency(sim_w->hosts[m[i]], sim_w->hosts[m[j]]);
        if (l > latency) latency = l;
      }
    free(links.slots);
    free(members), free(seen), free(src), free(dst);
    rs->a2a_s_per_byte[gkind] = s_per_byte, rs->a2a_latency_s[gkind] = latency;
    rs->a2a_known[gkind] = 1;
  }
  return rs->a2a_latency_s[gkind] + edge_bytes * rs->a2a_s_per_byte[gkind];
}

static bool one_node(const int *m, int n) {
  for (int i = 1; i < n; i++)
    if (topo_node_of(&sim_w->p->cluster, m[i]) != topo_node_of(&sim_w->p->cluster, m[0])) return false;
  return true;
}

void sim_scale_prepare(sim_rank *rs) {
  unsigned done[PLAN_GROUP_COUNT] = {0}; /* per group: the algorithms prepared (bit per sim_alg) */
  for (int i = 0; i < rs->prog->n; i++) {
    const plan_op *op = &rs->prog->ops[i];
    if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
      /* the side that moves the data asks (sim_comm.c): the sender, or the receiver of a sender not simulated */
      bool send = op->kind == PLAN_OP_SEND;
      int peer = sim_op_peer(rs, op);
      if (peer < 0 || peer >= sim_w->world || (!send && sim_w->ranks[peer])) continue;
      int pair[2] = {send ? rs->rank : peer, send ? peer : rs->rank};
      if (!one_node(pair, 2)) sim_edge_scale(rs, PLAN_GROUP_PP, SIM_ALG_SENDRECV, pair[0], pair[1], 1);
    } else if (op->kind == PLAN_OP_COLLECTIVE) {
      int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
      if (rs->n_members[g] <= 1 || one_node(rs->members[g], rs->n_members[g])) continue;
      /* the algorithms this collective may run as (sim_comm.c's transfer_edges) */
      unsigned want = op->coll == PLAN_COLL_ALLTOALL ? 1u << SIM_ALG_ALLTOALL
                      : op->coll == PLAN_COLL_ALLREDUCE
                          ? 1u << SIM_ALG_RING | 1u << SIM_ALG_TREE_UP | 1u << SIM_ALG_TREE_DOWN
                          : 1u << SIM_ALG_RING;
      for (int a = 0; a <= SIM_ALG_SENDRECV; a++)
        if ((want & ~done[g]) & 1u << a) sim_edge_scale(rs, g, a, -1, -1, 0);
      done[g] |= want;
    }
  }
}

void sim_scale_free(void) {
  for (int r = 0; sim_w->ranks && r < sim_w->world; r++) {
    sim_rank *rs = sim_w->ranks[r];
    while (rs && rs->scales) {
      struct sim_scale_cache *sc = rs->scales;
      rs->scales = sc->next;
      free(sc->src);
      free(sc->dst);
      free(sc->k);
      free(sc);
    }
  }
}
