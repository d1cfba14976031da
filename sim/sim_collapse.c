/* sim_collapse.c — `--collapse on`: of the flows of a cross-node ring or tree
 * phase, those that no other call's flow can meet run once per kind.
 *
 * Under SimGrid's max-min sharing (CM02, no TCP window, sim_engine.c) flows
 * interact only through the links they share. The flows of one phase of a
 * collective start at one instant; take the components of the graph "two of
 * these flows share a link". A component whose links no other call class uses
 * evolves from its start on by itself: its flows' rates and ends depend only on
 * their bytes, their routes' bandwidths and latencies and which links they
 * share. Two such components with the same signature (their flows in edge
 * order, with the same route lengths, link bandwidths and latencies, links
 * shared in the same pattern, and, at each call, the same bytes) end at the same
 * instant, so only the first is simulated: the phase ends when it would, and
 * nothing else on the platform changes. The 2,048-member DP ring of a
 * 16,384-GPU rail cluster (TP 8: one flow a component) runs a few flows
 * instead of 2,048; NCCL's k rings of a TP 1/2/4 layout share each node's
 * links (a component a node, the same on every node); a tree's components are
 * a parent and its children.
 *
 * Which links only one class uses is decided once, before the simulations, from
 * every flow that any simulated rank's program can start. A class is a group's
 * collectives on one stream: its calls run one at a time, each ending with all
 * its flows delivered (sim_comm.c), so its ring and tree phases never overlap
 * each other. Send/recv and all-to-all flows are never collapsed and make the
 * links they use public. In reduced mode the flows of groups that are not
 * simulated are not on the platform (sim_scale.c prices them into the bytes), so
 * they do not count here either. */
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>

#include "sim_edges.h"
#include "sim_internal.h"

#define ALGS 3 /* SIM_ALG_RING, SIM_ALG_TREE_UP, SIM_ALG_TREE_DOWN */
#define MAX_COMPONENT 512 /* edges: a larger component is kept whole (its signature costs its size squared) */

typedef struct {
  int ne;
  int *src, *dst;
  int ncomp;
  int *comp;    /* per edge: its component (flows coupled through links they share) */
  int *partner; /* per edge: the edge at the same place in the component that stands for its own, or -1 */
} alg_edges;

struct sim_collapse_class {
  struct sim_collapse_class *next;
  int id, g, stream, leader, n;
  sim_rank *rs;   /* a simulated member (its members array, its reduced-mode scale factors) */
  bool allreduce; /* some call is an all-reduce: the tree phases may run too */
  alg_edges a[ALGS];
};

typedef struct {
  sg_link_t link;
  int owner; /* class id; -1: several classes, or a send/recv or all-to-all */
} link_use;

typedef struct {
  link_use *slots;
  size_t cap, n;
} link_table;

static link_table links;
static uint8_t *flows_from; /* per host: a flow never collapsed away leaves from there */
static struct sim_collapse_class *classes;
static long long flows_asked, flows_run;

static size_t ptr_hash(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h ^ (h >> 29));
}

/* The slot of link l (a new one with owner -2: unused so far). */
static link_use *link_get(link_table *t, sg_link_t l) {
  if (2 * (t->n + 1) > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    link_use *s = calloc(cap, sizeof *s);
    if (!s) abort(); /* out of memory while preparing the simulation */
    for (size_t i = 0; i < t->cap; i++)
      if (t->slots[i].link) {
        size_t j = ptr_hash(t->slots[i].link) & (cap - 1);
        while (s[j].link) j = (j + 1) & (cap - 1);
        s[j] = t->slots[i];
      }
    free(t->slots);
    t->slots = s, t->cap = cap;
  }
  size_t j = ptr_hash(l) & (t->cap - 1);
  while (t->slots[j].link && t->slots[j].link != l) j = (j + 1) & (t->cap - 1);
  if (!t->slots[j].link) {
    t->slots[j].link = l;
    t->slots[j].owner = -2;
    t->n++;
  }
  return &t->slots[j];
}

/* The links of the route src -> dst into route; false when a host is not on the platform. */
static bool route_links(int src, int dst, xbt_dynar_t route) {
  xbt_dynar_reset(route);
  if (!sim_w->hosts[src] || !sim_w->hosts[dst]) return false;
  sg_host_get_route(sim_w->hosts[src], sim_w->hosts[dst], route);
  return true;
}

/* Each shared link of the route src -> dst is used by class `owner` (owner < 0: by a flow that is never
 * collapsed). */
static void use_route(int src, int dst, int owner, xbt_dynar_t route) {
  if (!route_links(src, dst, route)) return; /* not on the platform: no flow can run there */
  unsigned long len = xbt_dynar_length(route);
  for (unsigned long i = 0; i < len; i++) {
    sg_link_t l = xbt_dynar_get_as(route, i, sg_link_t);
    if (!sg_link_is_shared(l)) continue; /* a fat pipe gives every flow its whole bandwidth */
    link_use *u = link_get(&links, l);
    if (u->owner == -2) u->owner = owner;
    else if (u->owner != owner) u->owner = -1;
  }
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

static struct sim_collapse_class *class_of(sim_rank *rs, int g, int stream) {
  const int *m = rs->members[g];
  int n = rs->n_members[g], leader = m[0];
  for (int k = 1; k < n; k++)
    if (m[k] < leader) leader = m[k];
  for (struct sim_collapse_class *c = classes; c; c = c->next)
    if (c->g == g && c->stream == stream && c->leader == leader) return c;
  struct sim_collapse_class *c = calloc(1, sizeof *c);
  if (!c) abort();
  *c = (struct sim_collapse_class){classes, classes ? classes->id + 1 : 0, g, stream, leader, n, rs, false, {{0}}};
  classes = c;
  return c;
}

static int uf_find(int *parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

/* A growing vector of doubles: a component's signature. */
typedef struct {
  double *v;
  int n, cap;
} dvec;
static void dvec_push(dvec *d, double x) {
  if (d->n == d->cap) {
    d->cap = d->cap ? 2 * d->cap : 64;
    d->v = realloc(d->v, sizeof(double) * (size_t)d->cap);
    if (!d->v) abort();
  }
  d->v[d->n++] = x;
}

/* The components of one phase (alg) of class c and, for each component whose flows are alone on the class's
 * links, whether an earlier one has the same signature: its flows, in edge order, with the same route
 * lengths, link bandwidths and latencies, and links shared in the same pattern. Such a component, started
 * at the same instant with the same bytes, evolves as the earlier one does (SimGrid shares a link only among
 * the flows on it), so its flows end when the earlier one's do. */
static void components(struct sim_collapse_class *c, int a, xbt_dynar_t route) {
  alg_edges *e = &c->a[a];
  int ne = e->ne, nn = ne ? ne : 1;
  /* reduced mode: each edge's bytes are the call's times its scale factor (sim_scale.c) */
  double *scale = malloc(sizeof(double) * (size_t)nn);
  if (!scale) abort();
  for (int i = 0; i < ne; i++)
    scale[i] = sim_w->o->mode == SIM_MODE_REDUCED ? sim_edge_scale(c->rs, c->g, a, e->src[i], e->dst[i], ne) : 1.0;
  int *off = malloc(sizeof(int) * (size_t)(nn + 1)), *parent = malloc(sizeof(int) * (size_t)nn);
  uint8_t *pub = calloc((size_t)nn, 1);
  sg_link_t *lk = NULL;
  int nlk = 0, caplk = 0;
  e->comp = malloc(sizeof(int) * (size_t)nn), e->partner = malloc(sizeof(int) * (size_t)nn);
  if (!off || !parent || !pub || !e->comp || !e->partner) abort();
  link_table first = {0}; /* per link: the first edge on it (in owner) */
  for (int i = 0; i < ne; i++) {
    parent[i] = i;
    off[i] = nlk;
    if (!route_links(e->src[i], e->dst[i], route)) {
      pub[i] = 1;
      continue;
    }
    unsigned long len = xbt_dynar_length(route);
    for (unsigned long k = 0; k < len; k++) {
      sg_link_t l = xbt_dynar_get_as(route, k, sg_link_t);
      if (nlk == caplk) {
        caplk = caplk ? 2 * caplk : 1024;
        lk = realloc(lk, sizeof *lk * (size_t)caplk);
        if (!lk) abort();
      }
      lk[nlk++] = l;
      if (!sg_link_is_shared(l)) continue;
      if (link_get(&links, l)->owner != c->id) pub[i] = 1;
      link_use *f = link_get(&first, l);
      if (f->owner < 0) f->owner = i;
      else parent[uf_find(parent, i)] = uf_find(parent, f->owner);
    }
  }
  off[ne] = nlk;
  free(first.slots);
  /* components numbered by their first edge; public ones (a link another class uses) are kept whole */
  int *root_comp = malloc(sizeof(int) * (size_t)nn), *size = calloc((size_t)nn, sizeof(int));
  if (!root_comp || !size) abort();
  for (int i = 0; i < ne; i++) root_comp[i] = -1;
  e->ncomp = 0;
  for (int i = 0; i < ne; i++) {
    int r = uf_find(parent, i);
    if (root_comp[r] < 0) root_comp[r] = e->ncomp++;
    e->comp[i] = root_comp[r];
    size[e->comp[i]]++;
    e->partner[i] = -1;
  }
  uint8_t *cpub = calloc((size_t)(e->ncomp ? e->ncomp : 1), 1);
  int *start = calloc((size_t)e->ncomp + 1, sizeof(int)), *order = malloc(sizeof(int) * (size_t)nn);
  if (!cpub || !start || !order) abort();
  for (int i = 0; i < ne; i++) cpub[e->comp[i]] |= pub[i];
  for (int k = 0; k < e->ncomp; k++) start[k + 1] = start[k] + size[k];
  int *fill = calloc((size_t)e->ncomp + 1, sizeof(int));
  if (!fill) abort();
  for (int i = 0; i < ne; i++) order[start[e->comp[i]] + fill[e->comp[i]]++] = i; /* edges in index order */
  /* signatures; a representative per signature (linear list: a ring has a handful of kinds) */
  dvec *reps = NULL;
  int *rep_comp = NULL, nrep = 0;
  for (int k = 0; k < e->ncomp; k++) {
    if (cpub[k] || size[k] > MAX_COMPONENT) continue;
    dvec sig = {0};
    sg_link_t local[2 * MAX_COMPONENT];
    int nlocal = 0;
    for (int p = start[k]; p < start[k + 1]; p++) {
      int i = order[p];
      dvec_push(&sig, scale[i]);
      dvec_push(&sig, off[i + 1] - off[i]);
      for (int q = off[i]; q < off[i + 1]; q++) {
        int id = 0;
        while (id < nlocal && local[id] != lk[q]) id++;
        if (id == nlocal && nlocal < 2 * MAX_COMPONENT) local[nlocal++] = lk[q];
        dvec_push(&sig, id);
        dvec_push(&sig, sg_link_get_bandwidth(lk[q]));
        dvec_push(&sig, sg_link_get_latency(lk[q]));
        dvec_push(&sig, sg_link_is_shared(lk[q]));
      }
    }
    int r = 0;
    while (r < nrep && !(reps[r].n == sig.n && memcmp(reps[r].v, sig.v, sizeof(double) * (size_t)sig.n) == 0)) r++;
    if (r < nrep) {
      for (int p = 0; p < size[k]; p++) e->partner[order[start[k] + p]] = order[start[rep_comp[r]] + p];
      free(sig.v);
    } else {
      reps = realloc(reps, sizeof *reps * (size_t)(nrep + 1));
      rep_comp = realloc(rep_comp, sizeof *rep_comp * (size_t)(nrep + 1));
      if (!reps || !rep_comp) abort();
      reps[nrep] = sig, rep_comp[nrep] = k, nrep++;
    }
  }
  for (int r = 0; r < nrep; r++) free(reps[r].v);
  free(reps), free(rep_comp), free(fill), free(order), free(start), free(cpub), free(size), free(root_comp);
  for (int i = 0; i < ne; i++)
    if (e->partner[i] < 0) flows_from[e->src[i]] = 1;
  free(lk), free(pub), free(parent), free(off), free(scale);
}

bool sim_collapse_flows_from(int host_rank) { return flows_from && flows_from[host_rank]; }

void sim_collapse_prepare(void) {
  xbt_dynar_t route = xbt_dynar_new(sizeof(sg_link_t), NULL);
  flows_from = calloc((size_t)sim_w->world, 1);
  if (!flows_from) abort();
  for (int r = 0; r < sim_w->world; r++) {
    sim_rank *rs = sim_w->ranks[r];
    if (!rs) continue;
    bool a2a_routed[PLAN_GROUP_COUNT] = {0}; /* a group's all-to-all flows are the same at every call */
    for (int i = 0; i < rs->prog->n; i++) {
      const plan_op *op = &rs->prog->ops[i];
      if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
        int peer = sim_op_peer(rs, op);
        if (peer < 0 || peer >= sim_w->world) continue;
        int pair[2] = {op->kind == PLAN_OP_SEND ? r : peer, op->kind == PLAN_OP_SEND ? peer : r};
        if (!one_node(pair, 2)) {
          use_route(pair[0], pair[1], -1, route);
          flows_from[pair[0]] = 1;
        }
      } else if (op->kind == PLAN_OP_COLLECTIVE) {
        int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
        int n = rs->n_members[g];
        if (n <= 1 || one_node(rs->members[g], n)) continue;
        if (rs->collapse[g][op->stream]) {
          rs->collapse[g][op->stream]->allreduce |= op->coll == PLAN_COLL_ALLREDUCE;
          continue;
        }
        if (op->coll == PLAN_COLL_ALLTOALL) {
          /* --alltoall analytic: an all-to-all starts no flow, its links stay as the others leave them */
          if (a2a_routed[g] || sim_w->o->alltoall_analytic) continue;
          a2a_routed[g] = true;
          int depth, ne = sim_edges(&sim_w->p->cluster, rs->members[g], n, SIM_ALG_ALLTOALL, NULL, NULL, 0, &depth);
          int *s = malloc(sizeof(int) * (size_t)ne), *d = malloc(sizeof(int) * (size_t)ne);
          if (!s || !d) abort();
          sim_edges(&sim_w->p->cluster, rs->members[g], n, SIM_ALG_ALLTOALL, s, d, ne, &depth);
          for (int k = 0; k < ne; k++) {
            use_route(s[k], d[k], -1, route);
            flows_from[s[k]] = 1;
          }
          free(s);
          free(d);
          continue;
        }
        rs->collapse[g][op->stream] = class_of(rs, g, op->stream);
        rs->collapse[g][op->stream]->allreduce |= op->coll == PLAN_COLL_ALLREDUCE;
      }
    }
  }
  /* the ring, and the trees of a class with all-reduces (NCCL's choice: either) */
  for (struct sim_collapse_class *c = classes; c; c = c->next)
    for (int a = 0; a < (c->allreduce ? ALGS : 1); a++) {
      fill_edges(c, c->rs->members[c->g], a);
      for (int i = 0; i < c->a[a].ne; i++) use_route(c->a[a].src[i], c->a[a].dst[i], c->id, route);
    }
  for (struct sim_collapse_class *c = classes; c; c = c->next)
    for (int a = 0; a < (c->allreduce ? ALGS : 1); a++) components(c, a, route);
  xbt_dynar_free(&route);
}

int sim_collapse_edges(const struct sim_collapse_class *c, int alg, int *src, int *dst, double *bytes, int ne) {
  if (sim_w->o->collapse_off || !c || alg < 0 || alg >= ALGS) return ne;
  const alg_edges *e = &c->a[alg];
  if (!e->comp || e->ne != ne || memcmp(e->src, src, sizeof(int) * (size_t)ne) || memcmp(e->dst, dst, sizeof(int) * (size_t)ne))
    return ne;
  /* a component stands in for another only with the same bytes, edge for edge */
  uint8_t *differs = calloc((size_t)(e->ncomp ? e->ncomp : 1), 1);
  if (!differs) abort();
  for (int i = 0; i < ne; i++)
    if (e->partner[i] >= 0 && bytes[i] != bytes[e->partner[i]]) differs[e->comp[i]] = 1;
  int out = 0;
  for (int i = 0; i < ne; i++)
    if (e->partner[i] < 0 || differs[e->comp[i]]) src[out] = src[i], dst[out] = dst[i], bytes[out] = bytes[i], out++;
  free(differs);
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
    for (int a = 0; a < ALGS; a++) free(c->a[a].src), free(c->a[a].dst), free(c->a[a].comp), free(c->a[a].partner);
    free(c);
  }
  free(flows_from);
  flows_from = NULL;
  free(links.slots);
  links.slots = NULL, links.cap = links.n = 0;
  flows_asked = flows_run = 0;
}
