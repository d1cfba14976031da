/* sim_collapse.c — `--collapse on`: the flows of a cross-node ring or tree
 * phase that cannot meet any other flow run as one flow per distinct kind.
 *
 * Under SimGrid's max-min sharing (CM02, no TCP window, sim_engine.c) a flow
 * alone on every shared link of its route runs at its route's bottleneck
 * bandwidth from its start to its end, whatever else happens on the
 * platform: its completion depends only on its start, its bytes and its
 * route. A phase of a collective ends when its last flow is delivered. So the
 * flows of a phase that are alone on their links ("private" edges) and have
 * the same bytes, route latency, bottleneck bandwidth and route length end at
 * the same instant, and one of them stands for all: the phase's end, and
 * everything else, is unchanged. The 2,048-member DP ring of a 16,384-GPU
 * rail cluster has a handful of such kinds instead of 2,048 flows.
 *
 * Private is decided once, before the simulations, from every flow that any
 * simulated rank's program can start: an edge is private when each shared
 * link of its route carries no edge of another call class (a group's
 * collectives on one stream: they run one at a time, each ending with all its
 * flows delivered, sim_comm.c) and no other edge of its own algorithm's phase.
 * Send/recv and all-to-all edges are never collapsed and make their links
 * public. Tree phases (up, down) and the ring of one class are sequential, so
 * each is counted on its own. In reduced mode the flows of groups that are not
 * simulated are not on the platform (sim_scale.c prices them into the bytes),
 * so they do not count here either. */
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>

#include "sim_edges.h"
#include "sim_internal.h"

#define ALGS 3 /* SIM_ALG_RING, SIM_ALG_TREE_UP, SIM_ALG_TREE_DOWN */
#define MAX_KINDS 32

typedef struct {
  int ne;
  int *src, *dst;
  uint8_t *priv;   /* per edge: alone on its shared links */
  double *lat, *bw; /* per edge: the route's latency and bottleneck, as SimGrid gives them */
  int *len;         /* per edge: links on the route */
} alg_edges;

struct sim_collapse_class {
  struct sim_collapse_class *next;
  int id, g, stream, leader, n;
  alg_edges a[ALGS];
};

typedef struct {
  sg_link_t link;
  int owner;     /* class id; -1: several classes, or a send/recv or all-to-all */
  int cnt[ALGS]; /* the owner's edges on it, per algorithm */
} link_use;

static struct {
  link_use *slots;
  size_t cap, n;
} links;

static struct sim_collapse_class *classes;
static long long flows_asked, flows_run;

static size_t ptr_hash(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h ^ (h >> 29));
}

static link_use *link_get(sg_link_t l) {
  if (2 * (links.n + 1) > links.cap) {
    size_t cap = links.cap ? 2 * links.cap : 1024;
    link_use *s = calloc(cap, sizeof *s);
    if (!s) abort(); /* out of memory while preparing the simulation */
    for (size_t i = 0; i < links.cap; i++)
      if (links.slots[i].link) {
        size_t j = ptr_hash(links.slots[i].link) & (cap - 1);
        while (s[j].link) j = (j + 1) & (cap - 1);
        s[j] = links.slots[i];
      }
    free(links.slots);
    links.slots = s, links.cap = cap;
  }
  size_t j = ptr_hash(l) & (links.cap - 1);
  while (links.slots[j].link && links.slots[j].link != l) j = (j + 1) & (links.cap - 1);
  if (!links.slots[j].link) {
    links.slots[j].link = l;
    links.slots[j].owner = -2; /* unused so far */
    links.n++;
  }
  return &links.slots[j];
}

/* Each shared link of the route src -> dst is used once more by class `owner`
 * in algorithm `alg` (owner < 0: by a flow that is never collapsed). */
static void use_route(int src, int dst, int owner, int alg, xbt_dynar_t route) {
  if (!sim_w->hosts[src] || !sim_w->hosts[dst]) return; /* not on the platform: no flow can run there */
  xbt_dynar_reset(route);
  sg_host_get_route(sim_w->hosts[src], sim_w->hosts[dst], route);
  unsigned long len = xbt_dynar_length(route);
  for (unsigned long i = 0; i < len; i++) {
    sg_link_t l = xbt_dynar_get_as(route, i, sg_link_t);
    if (!sg_link_is_shared(l)) continue; /* a fat pipe gives every flow its whole bandwidth */
    link_use *u = link_get(l);
    if (u->owner == -2) u->owner = owner;
    else if (u->owner != owner) u->owner = -1;
    if (owner >= 0 && u->owner == owner) u->cnt[alg]++;
  }
}

static bool route_private(int src, int dst, int owner, int alg, xbt_dynar_t route, int *len) {
  *len = 0;
  if (!sim_w->hosts[src] || !sim_w->hosts[dst]) return false;
  xbt_dynar_reset(route);
  sg_host_get_route(sim_w->hosts[src], sim_w->hosts[dst], route);
  *len = (int)xbt_dynar_length(route);
  for (int i = 0; i < *len; i++) {
    sg_link_t l = xbt_dynar_get_as(route, i, sg_link_t);
    if (!sg_link_is_shared(l)) continue;
    const link_use *u = link_get(l);
    if (u->owner != owner || u->cnt[alg] != 1) return false;
  }
  return true;
}

static bool one_node(const int *m, int n) {
  for (int i = 1; i < n; i++)
    if (topo_node_of(&sim_w->p->cluster, m[i]) != topo_node_of(&sim_w->p->cluster, m[0])) return false;
  return true;
}

static void fill_edges(struct sim_collapse_class *c, const int *m, int a) {
  int depth, ne = sim_edges(&sim_w->p->cluster, m, c->n, (sim_alg)a, NULL, NULL, 0, &depth);
  alg_edges *e = &c->a[a];
  e->ne = ne;
  e->src = malloc(sizeof(int) * (size_t)(ne ? ne : 1));
  e->dst = malloc(sizeof(int) * (size_t)(ne ? ne : 1));
  if (!e->src || !e->dst) abort();
  sim_edges(&sim_w->p->cluster, m, c->n, (sim_alg)a, e->src, e->dst, ne, &depth);
}

static struct sim_collapse_class *class_of(sim_rank *rs, int g, int stream, xbt_dynar_t route) {
  const int *m = rs->members[g];
  int n = rs->n_members[g], leader = m[0];
  for (int k = 1; k < n; k++)
    if (m[k] < leader) leader = m[k];
  for (struct sim_collapse_class *c = classes; c; c = c->next)
    if (c->g == g && c->stream == stream && c->leader == leader) return c;
  struct sim_collapse_class *c = calloc(1, sizeof *c);
  if (!c) abort();
  *c = (struct sim_collapse_class){classes, classes ? classes->id + 1 : 0, g, stream, leader, n, {{0}}};
  classes = c;
  for (int a = 0; a < ALGS; a++) {
    fill_edges(c, m, a);
    for (int i = 0; i < c->a[a].ne; i++) use_route(c->a[a].src[i], c->a[a].dst[i], c->id, a, route);
  }
  return c;
}

void sim_collapse_prepare(void) {
  xbt_dynar_t route = xbt_dynar_new(sizeof(sg_link_t), NULL);
  for (int r = 0; r < sim_w->world; r++) {
    sim_rank *rs = sim_w->ranks[r];
    if (!rs) continue;
    for (int i = 0; i < rs->prog->n; i++) {
      const plan_op *op = &rs->prog->ops[i];
      if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
        if (op->peer < 0 || op->peer >= sim_w->world) continue;
        int pair[2] = {op->kind == PLAN_OP_SEND ? r : op->peer, op->kind == PLAN_OP_SEND ? op->peer : r};
        if (!one_node(pair, 2)) use_route(pair[0], pair[1], -1, 0, route);
      } else if (op->kind == PLAN_OP_COLLECTIVE) {
        int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
        int n = rs->n_members[g];
        if (n <= 1 || rs->collapse[g][op->stream] || one_node(rs->members[g], n)) continue;
        if (op->coll == PLAN_COLL_ALLTOALL) {
          int depth, ne = sim_edges(&sim_w->p->cluster, rs->members[g], n, SIM_ALG_ALLTOALL, NULL, NULL, 0, &depth);
          int *s = malloc(sizeof(int) * (size_t)ne), *d = malloc(sizeof(int) * (size_t)ne);
          if (!s || !d) abort();
          sim_edges(&sim_w->p->cluster, rs->members[g], n, SIM_ALG_ALLTOALL, s, d, ne, &depth);
          for (int k = 0; k < ne; k++) use_route(s[k], d[k], -1, 0, route);
          free(s);
          free(d);
          continue;
        }
        rs->collapse[g][op->stream] = class_of(rs, g, op->stream, route);
      }
    }
  }
  for (struct sim_collapse_class *c = classes; c; c = c->next)
    for (int a = 0; a < ALGS; a++) {
      alg_edges *e = &c->a[a];
      int ne = e->ne ? e->ne : 1;
      e->priv = malloc((size_t)ne), e->lat = malloc(sizeof(double) * (size_t)ne);
      e->bw = malloc(sizeof(double) * (size_t)ne), e->len = malloc(sizeof(int) * (size_t)ne);
      if (!e->priv || !e->lat || !e->bw || !e->len) abort();
      for (int i = 0; i < e->ne; i++) {
        e->priv[i] = route_private(e->src[i], e->dst[i], c->id, a, route, &e->len[i]);
        sg_host_t s = sim_w->hosts[e->src[i]], d = sim_w->hosts[e->dst[i]];
        e->lat[i] = e->priv[i] ? sg_host_get_route_latency(s, d) : 0;
        e->bw[i] = e->priv[i] ? sg_host_get_route_bandwidth(s, d) : 0;
      }
    }
  xbt_dynar_free(&route);
}

int sim_collapse_edges(const struct sim_collapse_class *c, int alg, int *src, int *dst, double *bytes, int ne) {
  if (sim_w->o->collapse_off || !c || alg < 0 || alg >= ALGS) return ne;
  const alg_edges *e = &c->a[alg];
  if (e->ne != ne || memcmp(e->src, src, sizeof(int) * (size_t)ne) || memcmp(e->dst, dst, sizeof(int) * (size_t)ne))
    return ne;
  /* the kinds of private edge kept so far: bytes, route latency, bottleneck, links */
  double kb[MAX_KINDS], kl[MAX_KINDS], kw[MAX_KINDS];
  int kn[MAX_KINDS], kinds = 0, out = 0;
  for (int i = 0; i < ne; i++) {
    bool keep = true;
    if (e->priv[i]) {
      int k = 0;
      while (k < kinds && !(kb[k] == bytes[i] && kl[k] == e->lat[i] && kw[k] == e->bw[i] && kn[k] == e->len[i])) k++;
      if (k < kinds)
        keep = false; /* a flow of the same kind, started at the same instant, ends when it would */
      else if (kinds < MAX_KINDS)
        kb[kinds] = bytes[i], kl[kinds] = e->lat[i], kw[kinds] = e->bw[i], kn[kinds] = e->len[i], kinds++;
    }
    if (keep) src[out] = src[i], dst[out] = dst[i], bytes[out] = bytes[i], out++;
  }
  flows_asked += ne;
  flows_run += out;
  return out;
}

void sim_collapse_counts(long long *asked, long long *run) {
  *asked = flows_asked;
  *run = flows_run;
}

void sim_collapse_free(void) {
  while (classes) {
    struct sim_collapse_class *c = classes;
    classes = c->next;
    for (int a = 0; a < ALGS; a++) {
      free(c->a[a].src), free(c->a[a].dst), free(c->a[a].priv);
      free(c->a[a].lat), free(c->a[a].bw), free(c->a[a].len);
    }
    free(c);
  }
  free(links.slots);
  links.slots = NULL, links.cap = links.n = 0;
  flows_asked = flows_run = 0;
}
