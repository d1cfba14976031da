/* sim_comm.c — collectives and send/recv as SimGrid flows or calibrated times.
 *
 * A collective whose members share one node runs for the calibrated time of
 * that collective (the calibration measured those links). One that crosses
 * nodes is decomposed as NCCL does it (ring, or tree when the alpha-beta cost
 * says so) into concurrent flows on the platform, so it shares links with
 * every other flow in flight. A flow goes host to host (sim_sendto.cpp): it
 * starts at once and completes when its bytes are delivered. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "sim_edges.h"
#include "sim_internal.h"

#define MAX_EDGES (1 << 20)

void sim_fail(const ts_err *e) {
  if (!sim_w->failed) sim_w->err = *e;
  sim_w->failed = 1;
}

/* ---- rendezvous table ---- */

static unsigned rv_hash(long long a, long long b, long long c, long long d) {
  unsigned long long h = (unsigned long long)a * 0x9E3779B97F4A7C15ull;
  h ^= (unsigned long long)b * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  h ^= (unsigned long long)c * 0x165667B19E3779F9ull + (h >> 31);
  h ^= (unsigned long long)d * 0x27D4EB2F165667C5ull + (h >> 27);
  return (unsigned)(h % (sizeof sim_w->buckets / sizeof sim_w->buckets[0]));
}

sim_rendezvous *sim_rendezvous_get(long long a, long long b, long long c, long long d, int expected) {
  unsigned h = rv_hash(a, b, c, d);
  for (sim_rendezvous *rv = sim_w->buckets[h]; rv; rv = rv->next)
    if (rv->key[0] == a && rv->key[1] == b && rv->key[2] == c && rv->key[3] == d) return rv;
  sim_rendezvous *rv = calloc(1, sizeof *rv);
  if (!rv) abort(); /* out of memory inside the simulation: nothing sensible to do */
  rv->key[0] = a, rv->key[1] = b, rv->key[2] = c, rv->key[3] = d;
  rv->expected = expected;
  rv->xfer_start_s = -1;
  rv->next = sim_w->buckets[h];
  sim_w->buckets[h] = rv;
  return rv;
}

static sg_sem_t lazy_sem(sg_sem_t *s) {
  if (!*s) *s = sg_sem_init(0);
  return *s;
}

void sim_rendezvous_leave(sim_rendezvous *rv) {
  if (++rv->left < rv->expected) return;
  unsigned h = rv_hash(rv->key[0], rv->key[1], rv->key[2], rv->key[3]);
  sim_rendezvous **pp = &sim_w->buckets[h];
  while (*pp != rv) pp = &(*pp)->next;
  *pp = rv->next;
  if (rv->start_sem) sg_sem_destroy(rv->start_sem);
  if (rv->end_sem) sg_sem_destroy(rv->end_sem);
  if (rv->flow_sem) sg_sem_destroy(rv->flow_sem);
  if (rv->meet) sg_barrier_destroy(rv->meet);
  free(rv);
}

/* ---- flows ----
 *
 * A flow goes host to host (sim_sendto.cpp): no mailbox, and no actor takes it.
 * Until 2026-12-05 each flow was a message into a "sink" mailbox of the
 * destination host (an actor that received forever): the same network actions
 * at the same instants, one actor's wake-up more a flow (every plan of
 * experiments/ predicts the same to 9 digits; experiments/RESULTS-search.md).
 * The pumps below stay: the member that waits for a pump's flow wakes after the
 * pump does, and that order among the actors woken at one instant is part of
 * the results (waiting for the flows directly moved dgxc-h100-70b-64 by
 * 0.006 %). */

/* Flows whose source rank is not simulated (reduced mode) are sent by a
 * "pump" actor on the source host (an actor per flow would cost a stack per
 * flow); each such host gets its first pump before the simulations fork, so
 * the forked passes do not each create thousands of actors. A pump takes the jobs queued on it at once, starts their flows, and
 * counts each one down as it is delivered; the pump that delivers a phase's last helper flow signals the
 * phase's semaphore, so the member that waits for them wakes once, when it would have taken the last of
 * one signal a flow (exact: every shipped plan predicts the same to 9 digits, 7 % less CPU on an EP-32
 * all-to-all across nodes, experiments/RESULTS-search.md). A job must start
 * when it is queued: a pump whose flows are in flight cannot start new ones,
 * so a job goes to an idle pump of its host, and a new pump is
 * created when every one is busy (a node leader of a tree sends to its chain
 * neighbour and two children in one phase: queued on one busy pump, the
 * later flows waited for the first and reduced mode ran slower than full).
 *
 * The queue is detached whole before the pump's next SimGrid call: every call
 * lets other actors run, and one that queues a job meanwhile must find an
 * empty queue (and wake the pump with a token of its own), not append to a
 * job already taken (which lost the job and deadlocked large DP trees in
 * reduced mode). The pump has a token exactly when its queue went from empty
 * to not empty and has not been detached since. */
typedef struct flow_job {
  struct flow_job *next;
  sg_host_t from, to;
  sg_mailbox_t sink; /* an all-to-all's flow goes into the destination's sink (below); NULL: host to host */
  double bytes;
  int *left;     /* the phase's helper flows still in flight: the last one delivered releases done */
  sg_sem_t done;
} flow_job;

/* ---- sinks: where an all-to-all's flows go ----
 *
 * SimGrid 3.32 keeps every host-to-host flow (Comm::sendto_async, a detached
 * comm) in one list of the engine's and drops each finished one by a scan of
 * that whole list: the cost of a flow's end grows with the flows in flight.
 * An all-to-all puts n(n - 1) flows in flight at once (992 at EP 32, several
 * thousand with the all-to-alls of four stages overlapping), and that scan
 * was 40-45 % of the CPU of an EP-32-across-nodes simulation
 * (experiments/RESULTS-search.md, "all-to-all flows into sinks"). So an
 * all-to-all's flow is a put_async into a "sink" mailbox of the destination
 * host, whose permanent receiver (an actor receiving forever) starts the
 * transfer at once: the same network action (route, bytes, instant) as
 * sendto_async, kept in the list of the actor that sends it (its own few
 * flows), at the cost of the sink's wake-up when the flow ends. Until
 * 2026-12-05 every flow went this way; every plan of experiments/ predicted
 * the same to 9 digits either way (sim/README.md, "Flows"). The other flows
 * (rings, trees, send/recv: few in flight) stay host to host, without a sink's
 * wake-up. Each host that receives an all-to-all's flow gets its sink before
 * the simulations start (sim_sinks_prepare). */
static char flow_payload; /* SimGrid refuses NULL payloads; the sinks ignore it */

static void sim_sink_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sg_mailbox_t mb = sg_actor_self_get_data();
  sg_mailbox_set_receiver(sg_mailbox_get_name(mb));
  for (;;) sg_mailbox_get(mb);
}

static void sink_prepare(int host_rank) {
  if (sim_w->sinks[host_rank]) return;
  char name[32];
  snprintf(name, sizeof name, "sink%d", host_rank);
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  sg_actor_t a = sg_actor_init(name, sim_w->hosts[host_rank]);
  sim_small_stack(a);
  sg_actor_set_data(a, mb);
  sg_actor_start(a, sim_sink_main, 0, NULL);
  sg_actor_daemonize(a);
  sim_w->sinks[host_rank] = mb;
}

static int all_on_one_node(const int *m, int n);

void sim_sinks_prepare(void) {
  if (sim_w->o->alltoall_analytic) return; /* no all-to-all flows */
  for (int r = 0; r < sim_w->world; r++) {
    sim_rank *rs = sim_w->ranks[r];
    if (!rs) continue;
    bool done[PLAN_GROUP_COUNT] = {0};
    for (int i = 0; i < rs->prog->n; i++) {
      const plan_op *op = &rs->prog->ops[i];
      if (op->kind != PLAN_OP_COLLECTIVE || op->coll != PLAN_COLL_ALLTOALL) continue;
      int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
      const int *m = rs->members[g];
      int n = rs->n_members[g];
      if (done[g] || n <= 1 || all_on_one_node(m, n)) continue;
      done[g] = true;
      for (int k = 0; k < n; k++)
        if (sim_w->hosts[m[k]]) sink_prepare(m[k]);
    }
  }
}

static sg_comm_t start_flow(sg_host_t from, sg_host_t to, sg_mailbox_t sink, double bytes) {
  return sink ? sg_mailbox_put_async(sink, &flow_payload, (long)bytes) : sim_sendto_async(from, to, bytes);
}

struct sim_pump {
  struct sim_pump *next; /* the other pumps of this host */
  sg_sem_t go;
  flow_job *head, *tail; /* queued, not started */
  int busy;              /* its flows are in flight */
  sg_comm_t *comms;
  flow_job **jobs;
  int cap;
};

void sim_pump_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_pump *pump = sg_actor_self_get_data();
  for (;;) {
    sg_sem_acquire(pump->go);
    flow_job *batch = pump->head;
    pump->head = pump->tail = NULL;
    pump->busy = 1;
    int n = 0;
    for (flow_job *j = batch; j; j = j->next) n++;
    if (n > pump->cap) {
      pump->cap = n > 2 * pump->cap ? n : 2 * pump->cap;
      pump->comms = realloc(pump->comms, sizeof *pump->comms * (size_t)pump->cap);
      pump->jobs = realloc(pump->jobs, sizeof *pump->jobs * (size_t)pump->cap);
      if (!pump->comms || !pump->jobs) abort(); /* out of memory inside the simulation */
    }
    n = 0;
    for (flow_job *j = batch; j; j = j->next) pump->jobs[n++] = j;
    for (int i = 0; i < n; i++) pump->comms[i] = start_flow(pump->jobs[i]->from, pump->jobs[i]->to, pump->jobs[i]->sink, pump->jobs[i]->bytes);
    while (n > 0) {
      ssize_t k = n == 1 ? 0 : sg_comm_wait_any(pump->comms, (size_t)n);
      if (n == 1) sg_comm_wait(pump->comms[0]);
      if (k < 0 || k >= n) abort(); /* no timeout was given */
      flow_job *j = pump->jobs[k];
      pump->comms[k] = pump->comms[n - 1];
      pump->jobs[k] = pump->jobs[n - 1];
      n--;
      if (--*j->left == 0) sg_sem_release(j->done);
      free(j);
    }
    pump->busy = 0;
  }
}

void sim_pump_free(sim_pump *pump) {
  while (pump) {
    sim_pump *next = pump->next;
    free(pump->comms);
    free(pump->jobs);
    free(pump);
    pump = next;
  }
}

static sim_pump *new_pump(int src, int index) {
  sim_pump *pump = calloc(1, sizeof *pump);
  if (!pump) abort();
  pump->go = sg_sem_init(0);
  char name[48];
  snprintf(name, sizeof name, "pump%d.%d", src, index);
  sg_actor_t a = sg_actor_init(name, sim_w->hosts[src]);
  sim_small_stack(a);
  sg_actor_set_data(a, pump);
  sg_actor_start(a, sim_pump_main, 0, NULL);
  sg_actor_daemonize(a);
  return pump;
}

void sim_pump_prepare(int src) {
  if (!sim_w->pumps[src]) sim_w->pumps[src] = new_pump(src, 0);
}

static void start_helper_flow(int src, int dst, bool sink, double bytes, int *left, sg_sem_t done) {
  sim_pump **slot = &sim_w->pumps[src];
  int index = 0;
  while (*slot && (*slot)->busy) slot = &(*slot)->next, index++;
  if (!*slot) *slot = new_pump(src, index);
  sim_pump *pump = *slot;
  flow_job *j = malloc(sizeof *j);
  if (!j) abort();
  *j = (flow_job){NULL, sim_w->hosts[src], sim_w->hosts[dst], sink ? sim_w->sinks[dst] : NULL, bytes, left, done};
  bool wake = !pump->head;
  if (pump->tail)
    pump->tail->next = j;
  else
    pump->head = j;
  pump->tail = j;
  if (wake) sg_sem_release(pump->go);
}

/* ---- barriers among the simulated members of a rendezvous ---- */

static void barrier(sim_rendezvous *rv, int *count, sg_sem_t *sem) {
  if (rv->expected <= 1) return;
  if (++*count < rv->expected) {
    sg_sem_acquire(lazy_sem(sem));
  } else {
    for (int i = 0; i < rv->expected - 1; i++) sg_sem_release(lazy_sem(sem));
    *count = 0; /* ready for the next phase */
  }
}

/* The members meet, then each is busy for t (a collective inside a node at
 * its calibrated time). When every member asks for the same t, the last to
 * arrive sleeps it and then wakes the others, who leave at the same instant
 * as if each had slept t itself: one timed wait per call instead of one per
 * member (n - 1 fewer SimGrid activities).
 *
 * A member may join before it arrives: `arrive` is when it would have
 * arrived (now + the wait for the SMs it did not sleep, sim_run_collective);
 * the meeting starts at the latest arrival, and the last member to join
 * sleeps from its `now` to that start + t in one sleep, so the member's own
 * wait costs no SimGrid activity. SimGrid ends a sleep of d begun at now at
 * now + d, to the bit (every sleep of the 1,024-GPU benchmark, sim/RESULTS.md,
 * seventh part), and a member joins early only when now >= 2 (wait + t)
 * (joins_early), which makes start + t - now exact (Sterbenz): the same
 * instants as when each member slept its wait itself. */
static void timed_meeting(sim_rendezvous *rv, double now, double arrive, double t) {
  if (rv->expected <= 1) {
    sg_actor_sleep_for(t);
    return;
  }
  if (rv->arrived == 0) rv->timed_s = t, rv->timed_same = 1, rv->timed_slept = 0, rv->meet_start = arrive;
  else {
    if (t != rv->timed_s) rv->timed_same = -1;
    if (arrive > rv->meet_start) rv->meet_start = arrive;
  }
  /* a SimGrid barrier: the last member's wait releases the others in one call (a semaphore took one per member) */
  if (!rv->meet) rv->meet = sg_barrier_init((unsigned)rv->expected);
  if (++rv->arrived < rv->expected) {
    sg_barrier_wait(rv->meet);
    if (!rv->timed_slept) sg_actor_sleep_for(t);
    return;
  }
  rv->arrived = 0;
  double start = rv->meet_start;
  if (rv->timed_same == 1) {
    /* (start == now: the sleep of t the meeting always slept) */
    sg_actor_sleep_for(start > now ? start + t - now : t);
    rv->timed_slept = 1;
  } else if (start > now) {
    sg_actor_sleep_for(start - now);
  }
  sg_barrier_wait(rv->meet);
  if (!rv->timed_slept) sg_actor_sleep_for(t);
}

/* One phase of flows (all edges concurrently): every simulated member sends
 * its own out-edges; the last to arrive starts, through helper actors, the
 * edges whose source is not simulated (reduced mode); everyone leaves when
 * all flows of the phase are delivered. Returns the phase's duration. */
static double flow_phase(sim_rank *rs, sim_rendezvous *rv, const int *src, const int *dst,
                         const double *bytes, int ne, bool sink) {
  double t0 = simgrid_get_clock();
  int last = rv->expected <= 1 || rv->arrived + 1 == rv->expected;
  if (last) {
    rv->transient = 0;
    for (int i = 0; i < ne; i++) rv->transient += !sim_w->ranks[src[i]] && bytes[i] > 0;
    rv->flows_left = rv->transient;
    for (int i = 0; i < ne; i++)
      if (!sim_w->ranks[src[i]] && bytes[i] > 0)
        start_helper_flow(src[i], dst[i], sink, bytes[i], &rv->flows_left, lazy_sem(&rv->flow_sem));
  }
  barrier(rv, &rv->arrived, &rv->start_sem);
  int n_own = 0;
  for (int i = 0; i < ne; i++) n_own += src[i] == rs->rank && bytes[i] > 0;
  if (n_own) {
    sg_comm_t *own = malloc(sizeof *own * (size_t)n_own);
    if (!own) abort();
    n_own = 0;
    for (int i = 0; i < ne; i++)
      if (src[i] == rs->rank && bytes[i] > 0)
        own[n_own++] = start_flow(sim_w->hosts[rs->rank], sim_w->hosts[dst[i]], sink ? sim_w->sinks[dst[i]] : NULL,
                                  bytes[i]);
    sg_comm_wait_all(own, (size_t)n_own);
    free(own);
  }
  /* the last member out waits for the helper flows (one signal when the last is delivered), then releases the
   * rest */
  if (rv->ended + 1 == rv->expected || rv->expected <= 1) {
    if (rv->transient) sg_sem_acquire(rv->flow_sem);
    rv->transient = 0;
  }
  barrier(rv, &rv->ended, &rv->end_sem);
  return simgrid_get_clock() - t0;
}

/* ---- choosing the algorithm ---- */

typedef struct {
  double latency_s, bw; /* worst route among the edges */
} route_figures;

static route_figures route_of_edges(const int *src, const int *dst, int ne) {
  route_figures r = {0, INFINITY};
  for (int i = 0; i < ne; i++) {
    double l = sg_host_get_route_latency(sim_w->hosts[src[i]], sim_w->hosts[dst[i]]);
    double b = sg_host_get_route_bandwidth(sim_w->hosts[src[i]], sim_w->hosts[dst[i]]);
    if (l > r.latency_s) r.latency_s = l;
    if (b < r.bw) r.bw = b;
  }
  return r;
}

static int all_on_one_node(const int *m, int n) {
  const topo_cluster *c = &sim_w->p->cluster;
  for (int i = 1; i < n; i++)
    if (topo_node_of(c, m[i]) != topo_node_of(c, m[0])) return 0;
  return 1;
}


/* Runs a cross-node transfer of `wire` bytes per rank over members with the
 * given collective name; returns the time spent in flows plus latency steps. */
static double transfer_edges(sim_rank *rs, sim_rendezvous *rv, int gkind, const struct sim_collapse_class *cls,
                             const char *coll, const int *m, int n, double wire, int *e_src, int *e_dst,
                             double *e_bytes, int cap, uint8_t *tree_used) {
  const topo_cluster *c = &sim_w->p->cluster;
  bool reduced = sim_w->o->mode == SIM_MODE_REDUCED;
  double t = 0;
  int depth, ne;
  if (strcmp(coll, "sendrecv") == 0 || strcmp(coll, "alltoall") == 0) {
    sim_alg alg = coll[0] == 's' ? SIM_ALG_SENDRECV : SIM_ALG_ALLTOALL;
    if (alg == SIM_ALG_ALLTOALL && sim_w->o->alltoall_analytic) {
      /* --alltoall analytic: no flows; the members meet and leave together when the all-to-all alone on the
       * platform would end (sim_scale.c), as flow_phase's members leave when its flows end */
      double t0 = simgrid_get_clock();
      sim_w->a2a_analytic++;
      timed_meeting(rv, t0, t0, sim_alltoall_analytic_s(rs, gkind, wire / n));
      return simgrid_get_clock() - t0;
    }
    ne = sim_edges(c, m, n, alg, e_src, e_dst, cap, &depth);
    if (ne > cap) ne = cap;
    for (int i = 0; i < ne; i++) {
      e_bytes[i] = alg == SIM_ALG_SENDRECV ? wire : wire / n;
      if (reduced) e_bytes[i] *= sim_edge_scale(rs, gkind, alg, e_src[i], e_dst[i], ne);
    }
    return flow_phase(rs, rv, e_src, e_dst, e_bytes, ne, alg == SIM_ALG_ALLTOALL);
  }
  bool allreduce = strcmp(coll, "allreduce") == 0;
  ne = sim_edges(c, m, n, SIM_ALG_RING, e_src, e_dst, cap, &depth);
  /* the same members every time: the ring's routes are looked up once per rank and group */
  route_figures rf;
  if (m == rs->members[gkind] && rs->ring_route_known[gkind]) {
    rf.latency_s = rs->ring_latency_s[gkind], rf.bw = rs->ring_bw[gkind];
  } else {
    rf = route_of_edges(e_src, e_dst, ne < cap ? ne : cap);
    if (m == rs->members[gkind]) {
      rs->ring_route_known[gkind] = 1;
      rs->ring_latency_s[gkind] = rf.latency_s, rs->ring_bw[gkind] = rf.bw;
    }
  }
  double rings = (double)ne / n; /* channels: one per member of a node (sim_edges) */
  if (ne > cap) ne = cap;
  double ring_steps = allreduce ? 2.0 * (n - 1) : (double)(n - 1);
  double ring_factor = allreduce ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  int tdepth = 1;
  if (allreduce) {
    /* NCCL's choice: the cheaper of ring and tree under an alpha-beta model
     * (tree: two passes of the full message, 2 x depth latency steps). */
    int tsrc[4], tdst[4];
    sim_edges(c, m, n, SIM_ALG_TREE_UP, tsrc, tdst, 0, &tdepth);
    double ring = ring_steps * rf.latency_s + ring_factor * wire / (rf.bw * rings);
    double tree = 2.0 * tdepth * rf.latency_s + 2.0 * wire / rf.bw;
    if (tree < ring) {
      sim_w->used_tree = 1;
      *tree_used = 1;
      for (int phase = 0; phase < 2; phase++) {
        sim_alg alg = phase ? SIM_ALG_TREE_DOWN : SIM_ALG_TREE_UP;
        ne = sim_edges(c, m, n, alg, e_src, e_dst, cap, &depth);
        if (ne > cap) ne = cap;
        /* NCCL runs two complementary binary trees, each with half the message:
         * one tree whose edges carry S/2 loads every node's links as the pair does. */
        for (int i = 0; i < ne; i++)
          e_bytes[i] = 0.5 * wire * (reduced ? sim_edge_scale(rs, gkind, alg, e_src[i], e_dst[i], ne) : 1.0);
        ne = sim_collapse_edges(cls, alg, e_src, e_dst, e_bytes, ne);
        t += flow_phase(rs, rv, e_src, e_dst, e_bytes, ne, false);
        /* a flow pays one route latency; the tree's other levels pay theirs */
        if (depth > 1) sg_actor_sleep_for((depth - 1) * rf.latency_s), t += (depth - 1) * rf.latency_s;
      }
      return t;
    }
  }
  for (int i = 0; i < ne; i++)
    e_bytes[i] = ring_factor * wire / rings *
                 (reduced ? sim_edge_scale(rs, gkind, SIM_ALG_RING, e_src[i], e_dst[i], ne) : 1.0);
  ne = sim_collapse_edges(cls, SIM_ALG_RING, e_src, e_dst, e_bytes, ne);
  t = flow_phase(rs, rv, e_src, e_dst, e_bytes, ne, false);
  /* NCCL's ring moves the message in ring_steps steps, each paying the route
   * latency; the flows above paid it once. */
  if (ring_steps > 1) {
    sg_actor_sleep_for((ring_steps - 1) * rf.latency_s);
    t += (ring_steps - 1) * rf.latency_s;
  }
  return t;
}

/* Edge arrays are private to each call: the actor blocks inside, and other
 * actors run collectives of their own meanwhile. */
static double network_transfer(sim_rank *rs, sim_rendezvous *rv, int gkind, int stream, const char *coll,
                               const int *m, int n, double wire) {
  size_t cap = (size_t)n * (size_t)n + 2; /* all-to-all has n(n-1) edges */
  if (cap > MAX_EDGES) cap = MAX_EDGES;
  int *e_src = malloc(sizeof(int) * cap), *e_dst = malloc(sizeof(int) * cap);
  double *e_bytes = malloc(sizeof(double) * cap);
  if (!e_src || !e_dst || !e_bytes) abort();
  rs->flow_tree[stream] = 0;
  double t = transfer_edges(rs, rv, gkind, rs->collapse[gkind][stream], coll, m, n, wire, e_src, e_dst, e_bytes,
                            (int)cap, &rs->flow_tree[stream]);
  free(e_src);
  free(e_dst);
  free(e_bytes);
  return t;
}

static int count_simulated(const int *m, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) k += sim_w->ranks[m[i]] != NULL;
  return k;
}

void sim_comm_note(sim_rank *rs, double dur, double codec) {
  rs->st.comm_s += dur;
  rs->st.codec_s += codec;
}

/* How much of a collective gets done before the compute kernel it meets
 * ends, net of what the kernel loses to it (seconds). The executor gives the
 * TP stream the higher priority, so the collective's blocks take SMs as the
 * GEMM's blocks of its last waves retire; the collective then moves data and
 * the GEMM runs slower. Per backward TP all-reduce of 32 MiB beside the
 * weight-gradient GEMM, executor profiles of GPT h4096 TP2 on 2 x H200:
 * hidden = the forward all-reduce's time (nothing beside it) minus the
 * backward one's exposed wait, slowdown = the backward GEMM row minus the
 * forward one (same FLOPs); net = hidden - slowdown, QKV / FC1:
 *   NVLink  run of 29 Nov 22:53: 22 / 24 us; run of 30 Nov 00:56: 24 / 29 us
 *   shm     run of 29 Nov 22:53: 63 / 30 us; run of 30 Nov 00:56: 36 / 0 us
 *   sockets no hidden time above the run-to-run spread of the 12 ms transfer.
 * Taken as the means: 25 us (NVLink, and PCIe, whose NCCL kernels also copy
 * with SMs), 32 us (shm), 0 (sockets; and across nodes, never measured). */
double sim_comm_head_start_s(const plan_op *op, bool one_node) {
  if (!one_node) return 0;
  /* tp_overlap_chunks: the forward row chunk's all-reduce ends as long after
   * the next chunk's GEMM as it takes alone (measured 2026-11-30 07:32, GPT
   * h4096 TP2 NVLink, k = 2, 3 profiles: 81 / 87 us after fc2 / attn_out's
   * second chunk, the 16 MiB all-reduce alone 87-88 us;
   * runtime/results/tpoverlap/ of commit 3d19b07): no head start */
  if (op->row_chunks > 1) return 0;
  switch (sim_w->p->cluster.intra.kind) {
  case TOPO_INTRA_SHM: return 32e-6;
  case TOPO_INTRA_SOCKET: return 0;
  default: return 25e-6;
  }
}

/* A collective's kernel (and its codec kernels) need SMs: reaching the GPU
 * while a compute kernel holds them, it starts when that kernel ends, less
 * the head start above. The executor's per-op profile on 2 x H200 shows it:
 * the backward TP all-reduce launched beside the weight-gradient GEMM
 * finishes ~150 us after the GEMM ends over NVLink (the all-reduce alone:
 * 138-185 us), little of it hidden (sim/RESULTS.md). Later kernels do not
 * take the SMs back. */
/* What the compute kernel running on this rank has left (0 when none runs).
 * This rank's compute stream, woken at the same instant, launches its next
 * kernel first (its stream needs no cross-stream event): yield to it. */
bool sim_comm_compute_cannot_launch(const sim_rank *rs, int stream, double now) {
  /* asleep in a block that ends later: its kernels are all in kernel_end */
  if (rs->compute_sleep_end > now) return true;
  /* blocked on an op of the calling stream, which only the caller finishes */
  int d = rs->waiting[PLAN_STREAM_COMPUTE];
  return d >= 0 && !rs->done[d] && rs->prog->ops[d].stream == stream;
}

double sim_comm_kernel_left(const sim_rank *rs, double now) {
  for (int k = 0; k < rs->n_kernel_end; k++)
    if (rs->kernel_end[k] > now) return rs->kernel_end[k] - now;
  return 0;
}

static double running_kernel_left(sim_rank *rs, int stream) {
  double now = simgrid_get_clock();
  /* (the yield is a simcall; skipped when the compute stream cannot launch anything at this instant) */
  if (!sim_comm_compute_cannot_launch(rs, stream, now)) {
    sg_actor_yield();
    now = simgrid_get_clock();
  }
  return sim_comm_kernel_left(rs, now);
}

/* Whether the collective waits for the SMs of the running compute kernel at all. */
static bool waits_for_sms(const plan_op *op) {
  if (sim_w->o->ideal_overlap) return false;
  /* tp_comm_overlap: a layer's uncompressed TP collective runs as a userbuffer kernel on SMs of its own (the
   * GEMM beside it is priced without them, sim_costs.c; plan_program_tpo.c) */
  if (sim_w->p->tp_comm_overlap && op->stream == PLAN_STREAM_TP && op->model_op >= 0 &&
      op->codec.kind == PLAN_CODEC_NONE)
    return false;
  /* context parallelism: Transformer Engine launches each ring step's send/recv before the attention piece it
   * overlaps (plan_program_cp.c), so its few NCCL blocks hold SMs first; the piece is not priced without them
   * (assumption: a p2p kernel's channels are few of the 132 SMs). A compressed step's codec kernels wait. */
  if (op->stream == PLAN_STREAM_CP && op->codec.kind == PLAN_CODEC_NONE) return false;
  return true;
}

/* How long the collective waits for the SMs of the running compute kernel (<= 0: none); not slept here. */
static double sms_wait_s(sim_rank *rs, int stream, const plan_op *op, bool one_node) {
  if (!waits_for_sms(op)) return 0;
  return running_kernel_left(rs, stream) - sim_comm_head_start_s(op, one_node);
}

/* Whether a member that must wait `wait` for the SMs at `now` may join the meeting of a collective of t seconds
 * at once, its wait absorbed by the meeting (timed_meeting): when the sleep that ends the meeting, start + t -
 * now for the last member to join (now >= this member's now, start <= its arrival), is exactly representable.
 * now >= 2 (wait + t) makes start + t <= 1.5 now, within a factor 2 of now: the subtraction is exact. */
bool sim_comm_joins_early(double now, double wait, double t) {
  return now >= 2 * (wait + t);
}

/* Over host memory (NCCL's shm and socket transports inside a node) a plain
 * collective's kernel is a few blocks copying to and from pinned host
 * buffers at host-memory speed: it runs beside a GEMM instead of waiting for
 * its SMs. Validation run 5 (experiments/validation/README.md): with the
 * wait, every shm row with TP collectives was over-predicted, most under
 * sequence parallelism, where the backward re-gather runs beside the
 * input-gradient GEMM on the GPUs. A codec's kernels (TACO, CAAT-Net) need
 * SMs like any kernel, so a compressed collective still waits. */
static bool runs_beside_compute(const plan_op *op, bool one_node) {
  if (!one_node || op->codec.kind != PLAN_CODEC_NONE) return false;
  topo_intra_kind k = sim_w->p->cluster.intra.kind;
  return k == TOPO_INTRA_SHM || k == TOPO_INTRA_SOCKET;
}

/* Over host shared memory the plain collective does not wait for the SMs,
 * but one that starts while a compute kernel is already running is slowed
 * by it: `tacorun probe-interleave` on 2 x H200 (2026-11-30 07:26,
 * experiments/validation/clock/RESULTS.md), a 32 MiB NCCL all-reduce through
 * shm took 1184-1215 us back to back, +301 us when it started beside a
 * running 430 us weight-gradient GEMM, +38 us beside a 105 us one, and was
 * not delayed when it started first (the GEMM ran slower instead; a GEMM
 * made ready at the same instant, by the same kernel's end, starts first);
 * validation run 8's backward all-reduces show +217 / +313 us beside
 * 341 / 437 us GEMMs. Taken as a delay of max(k - 125 us, k / 3), k = what
 * the running kernel has left; kernels launched after it do not add to it.
 * Over sockets the same probe moved +715 us in one call and -100 us in
 * the next on a ~10 ms all-reduce: no delay is modelled there. */
#define SHM_BESIDE_HEAD_START_S 125e-6
static bool delays_beside(bool one_node) {
  return !sim_w->o->ideal_overlap && one_node && sim_w->p->cluster.intra.kind == TOPO_INTRA_SHM;
}

double sim_comm_beside_delay_s(double left) {
  double delay = left - SHM_BESIDE_HEAD_START_S;
  if (delay < left / 3) delay = left / 3;
  return delay;
}

static void delay_beside_running_kernel(sim_rank *rs, int stream, bool one_node) {
  if (!delays_beside(one_node)) return;
  double delay = sim_comm_beside_delay_s(running_kernel_left(rs, stream));
  if (delay > 0) sg_actor_sleep_for(delay);
}

/* what sim_run_collective asks of a group on every call, found once */
static void know_group(sim_rank *rs, int g) {
  const int *m = rs->members[g];
  int n = rs->n_members[g];
  int leader = n > 0 ? m[0] : -1;
  for (int k = 1; k < n; k++)
    if (m[k] < leader) leader = m[k];
  rs->group_leader[g] = leader;
  rs->group_simulated[g] = count_simulated(m, n);
  rs->group_one_node[g] = (uint8_t)all_on_one_node(m, n);
  rs->group_known[g] = 1;
}

bool sim_comm_group_on_one_node(sim_rank *rs, int g) {
  if (!rs->group_known[g]) know_group(rs, g);
  return rs->group_one_node[g];
}

bool sim_comm_in_node(sim_rank *rs, const plan_op *op) {
  return op->kind == PLAN_OP_COLLECTIVE && sim_comm_group_on_one_node(rs, op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP);
}

void sim_comm_op_source(sim_rank *rs, const plan_op *op, char *out, size_t cap) {
  int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP, n = 2;
  bool in_node;
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
    int pair[2] = {rs->rank, sim_op_peer(rs, op)};
    in_node = all_on_one_node(pair, 2);
  } else {
    in_node = sim_comm_group_on_one_node(rs, g);
    n = rs->n_members[g];
  }
  const char *flows = "SimGrid flows: ring on the platform's links";
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV)
    flows = "SimGrid flow on the platform's links";
  else if (op->coll == PLAN_COLL_ALLTOALL)
    flows = sim_w->o->alltoall_analytic ? "analytic all-to-all on the platform's links"
                                        : "SimGrid flows: all-to-all on the platform's links";
  else if (op->coll == PLAN_COLL_ALLREDUCE && op->stream < PLAN_STREAM_COUNT && rs->flow_tree[op->stream])
    flows = "SimGrid flows: NCCL's tree on the platform's links";
  /* a flex token all-to-all across nodes: the flows, then the rest of its kernel's time (sim_run_collective) */
  char flex[SIM_COST_SRC_LEN];
  double share = op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_MOE_TOKENS &&
                         op->coll == PLAN_COLL_ALLTOALL && op->tag >= 0
                     ? plan_moe_flex_link_share(sim_w->p, PLAN_GROUP_EP_RAIL, op->tag == PLAN_MOE_TAG_COMBINE)
                     : 0;
  if (share > 0 && share < 1) {
    snprintf(flex, sizeof flex, "%s, at the flex kernel's published link share", flows);
    flows = flex;
  }
  sim_comm_source(&sim_w->costs, op, n, in_node, flows, out, cap);
}

bool sim_comm_draws_power(sim_rank *rs, const plan_op *op) {
  int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
    int pair[2] = {rs->rank, sim_op_peer(rs, op)};
    if (!all_on_one_node(pair, 2)) return false;
  } else if (!sim_comm_group_on_one_node(rs, g))
    return false;
  topo_intra_kind k = sim_w->p->cluster.intra.kind;
  return k == TOPO_INTRA_NVLINK || k == TOPO_INTRA_NVSWITCH;
}

/* The executor gives only the TP stream a higher priority than compute. On
 * the DP and PP streams a codec's kernels queue behind the GEMMs already
 * enqueued on the compute stream and get SMs when that stream runs dry, not
 * when the kernel they meet ends. Validation run 7: with TACO on the DP2
 * buckets through shm the compute ops kept their uncompressed times (331 vs
 * 329 ms) while the buckets' exposed time (76 ms) was about their whole
 * calibrated time (87 ms): nothing ran beside the backward. */
static bool waits_for_idle_compute(const plan_op *op) {
  return op->codec.kind != PLAN_CODEC_NONE && op->stream != PLAN_STREAM_TP && op->stream != PLAN_STREAM_EP;
}

sim_coll_pre sim_comm_pre(sim_rank *rs, const plan_op *op) {
  bool one_node = sim_comm_in_node(rs, op);
  if (waits_for_idle_compute(op)) return SIM_PRE_IDLE_COMPUTE;
  if (!runs_beside_compute(op, one_node)) return waits_for_sms(op) ? SIM_PRE_SMS : SIM_PRE_NONE;
  return delays_beside(one_node) ? SIM_PRE_BESIDE : SIM_PRE_NONE;
}

/* Until the compute stream has no kernel running: after each of its blocks
 * ends, the next one may start at the same instant (yield, look again). */
static void wait_for_idle_compute(sim_rank *rs) {
  for (;;) {
    sg_actor_yield();
    double now = simgrid_get_clock(), end = now;
    for (int k = 0; k < rs->n_kernel_end; k++)
      if (rs->kernel_end[k] > end) end = rs->kernel_end[k];
    if (end <= now) return;
    sg_actor_sleep_for(end - now);
  }
}

int sim_comm_in_node_s(const plan_op *op, int n, const sim_codec_cost *cc, double *t, ts_err *e) {
  int codec_included;
  if (sim_coll_calibrated_s(&sim_w->costs, op, n, t, &codec_included, e)) return -1;
  if (!codec_included && cc->total_us > 0) {
    double mid = cc->mid_us * 1e-6;
    *t = cc->pre_us * 1e-6 + (*t > mid ? *t : mid) + cc->post_us * 1e-6;
  } else if (codec_included) {
    *t += cc->caat_us * 1e-6; /* a measured TACO collective does not pack CAAT-Net channels */
  }
  return 0;
}

void sim_run_collective(sim_rank *rs, int stream, int i) {
  const plan_op *op = &rs->prog->ops[i];
  int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
  const int *m = rs->members[g];
  int n = rs->n_members[g];
  if (n <= 1) return;
  bool one_node = sim_comm_group_on_one_node(rs, g);
  double wait = 0; /* for the SMs of the running kernel (wait_for_sms): slept below, or by the meeting */
  if (rs->pending_s > 0) {
    /* the compute stream's block is not slept yet (sim_engine.c, block_into_meeting): this collective arrives at
     * its end, when no kernel runs (nothing to wait for) */
    wait = rs->pending_s;
    rs->pending_s = 0;
  } else if (waits_for_idle_compute(op)) wait_for_idle_compute(rs);
  else if (!runs_beside_compute(op, one_node)) wait = sim_w->o->ideal_overlap ? 0 : sms_wait_s(rs, stream, op, one_node);
  else delay_beside_running_kernel(rs, stream, one_node);
  ts_err e = {0};
  sim_codec_cost cc;
  if (sim_codec_cost_of(&sim_w->costs, op, n, &cc, &e)) {
    sim_fail(&e);
    return;
  }
  sim_rendezvous *rv = sim_rendezvous_get(1, (long long)g << 8 | stream, rs->group_leader[g],
                                          rs->coll_seq[g][stream]++, rs->group_simulated[g]);
  double t0;
  if (one_node) {
    double t;
    if (sim_comm_in_node_s(op, n, &cc, &t, &e)) {
      sim_fail(&e);
      sim_rendezvous_leave(rv);
      return;
    }
    double now = simgrid_get_clock();
    t0 = now;
    if (wait > 0) {
      if (rv->expected > 1 && sim_comm_joins_early(now, wait, t)) {
        t0 = now + wait; /* where the sleep would have ended (SimGrid ends a sleep of d at now + d) */
      } else {
        sg_actor_sleep_for(wait);
        now = t0 = simgrid_get_clock();
      }
    }
    timed_meeting(rv, now, t0, t);
  } else {
    if (wait > 0) sg_actor_sleep_for(wait);
    t0 = simgrid_get_clock();
    sim_w->used_platform_links = 1;
    /* flow_phase starts the flows together, as NCCL collectives do */
    if (cc.pre_us > 0) sg_actor_sleep_for(cc.pre_us * 1e-6);
    double xfer = network_transfer(rs, rv, g, op->stream, sim_coll_name(op), m, n, op->wire_bytes);
    /* a flex token all-to-all across nodes: its kernel drives the NIC at its published share of the line
     * (plan_moe_flex_link_share); the flows ran at the links' rate, the rest of the kernel's time follows */
    double share = op->model_op == PLAN_MOP_MOE_TOKENS && op->coll == PLAN_COLL_ALLTOALL && op->tag >= 0
                       ? plan_moe_flex_link_share(sim_w->p, PLAN_GROUP_EP_RAIL, op->tag == PLAN_MOE_TAG_COMBINE)
                       : 0;
    if (share > 0 && share < 1) {
      double slow = xfer * (1.0 / share - 1.0);
      sg_actor_sleep_for(slow);
      xfer += slow;
    }
    double rest = cc.mid_us * 1e-6 - xfer;
    if (rest > 0) sg_actor_sleep_for(rest);
    if (cc.post_us > 0) sg_actor_sleep_for(cc.post_us * 1e-6);
  }
  sim_comm_note(rs, simgrid_get_clock() - t0, cc.total_us * 1e-6);
  sim_rendezvous_leave(rv);
}

/* Send/recv: the sender starts its flow when it reaches the send (NCCL's
 * grouped isend/irecv of Megatron's pipeline never blocks on the peer); the
 * receive completes when the bytes have arrived. */

/* The rendezvous of op i (a send or receive) of rs, and whether rs moves the data (the sender, or the receiver
 * when the sender is not simulated); NULL when the peer is out of range (the simulation failed). */
sim_rendezvous *sim_comm_sendrecv_rv(sim_rank *rs, int i, bool *mover) {
  const plan_op *op = &rs->prog->ops[i];
  bool is_send = op->kind == PLAN_OP_SEND;
  int peer = sim_op_peer(rs, op);
  int src = is_send ? rs->rank : peer, dst = is_send ? peer : rs->rank;
  if (src < 0 || dst < 0 || src >= sim_w->world || dst >= sim_w->world) {
    ts_err e;
    ts_fail(&e, sim_w->p->path, "program", "rank %d: op %d: peer %d out of range", rs->rank, i, peer);
    sim_fail(&e);
    return NULL;
  }
  int pair[2] = {src, dst};
  *mover = is_send || !sim_w->ranks[src];
  return sim_rendezvous_get(2, src, dst, op->tag, count_simulated(pair, 2));
}

/* When an in-node send/recv moved from t0 ends: its codec's first part, the calibrated transfer, the codec's
 * rest beyond it and its last part, one after the other (the sleeps of sim_run_sendrecv); *codec_s: the
 * codec's time. */
double sim_comm_sendrecv_in_node_end(sim_rank *rs, const plan_op *op, sim_rendezvous *rv, double t0,
                                     double *codec_s) {
  (void)rs;
  ts_err e = {0};
  sim_codec_cost cc;
  *codec_s = 0;
  if (sim_codec_cost_of(&sim_w->costs, op, 2, &cc, &e)) {
    sim_fail(&e);
    return t0;
  }
  rv->xfer_start_s = t0;
  double t = t0, xfer;
  if (cc.pre_us > 0) t = t + cc.pre_us * 1e-6;
  int codec_included;
  if (sim_coll_calibrated_s(&sim_w->costs, op, 2, &xfer, &codec_included, &e)) {
    sim_fail(&e);
    xfer = 0;
  }
  t = t + xfer;
  double rest = cc.mid_us * 1e-6 - xfer;
  if (rest > 0) t = t + rest;
  if (cc.post_us > 0) t = t + cc.post_us * 1e-6;
  *codec_s = cc.total_us * 1e-6;
  return t;
}

/* The mover is done after dur: the other side, if it waits, goes on (a stream of the event queue is queued). */
void sim_comm_sendrecv_moved(sim_rank *rs, sim_rendezvous *rv, double dur, double codec_s) {
  sim_comm_note(rs, dur, codec_s);
  rv->ended = 1;
  if (!rv->arrived) return; /* the receiver is not waiting */
  if (rv->local_members) {
    sim_local_wake_stream(rv->local_members);
    rv->local_members = NULL;
  } else
    sim_local_release(lazy_sem(&rv->end_sem));
}

/* Op i's end (after its note): a receive remembers when its transfer started (bubble vs. exposed). */
void sim_comm_sendrecv_leave(sim_rank *rs, int i, sim_rendezvous *rv) {
  if (rs->prog->ops[i].kind != PLAN_OP_SEND) {
    int slot = rs->n_xfer++ % SIM_XFER_SLOTS;
    rs->xfer_op[slot] = i;
    rs->xfer_start[slot] = rv->xfer_start_s;
  }
  sim_rendezvous_leave(rv);
}

void sim_run_sendrecv(sim_rank *rs, int i) {
  const plan_op *op = &rs->prog->ops[i];
  bool mover;
  sim_rendezvous *rv = sim_comm_sendrecv_rv(rs, i, &mover);
  if (!rv) return;
  bool is_send = op->kind == PLAN_OP_SEND;
  int peer = sim_op_peer(rs, op);
  int src = is_send ? rs->rank : peer, dst = is_send ? peer : rs->rank;
  int pair[2] = {src, dst};
  double t0 = simgrid_get_clock();
  if (mover) {
    ts_err e = {0};
    sim_codec_cost cc;
    if (sim_codec_cost_of(&sim_w->costs, op, 2, &cc, &e)) {
      sim_fail(&e);
      sim_rendezvous_leave(rv);
      return;
    }
    rv->xfer_start_s = t0;
    if (cc.pre_us > 0) sg_actor_sleep_for(cc.pre_us * 1e-6);
    double xfer;
    if (all_on_one_node(pair, 2)) {
      int codec_included;
      if (sim_coll_calibrated_s(&sim_w->costs, op, 2, &xfer, &codec_included, &e)) {
        sim_fail(&e);
        xfer = 0;
      }
      sg_actor_sleep_for(xfer);
    } else {
      sim_w->used_platform_links = 1;
      /* a private rendezvous for the flow itself: only this actor takes part */
      sim_rendezvous solo = {.expected = 1};
      double scale = sim_w->o->mode == SIM_MODE_REDUCED
                         ? sim_edge_scale(rs, PLAN_GROUP_PP, SIM_ALG_SENDRECV, src, dst, 1)
                         : 1.0;
      double b = op->wire_bytes * scale;
      xfer = flow_phase(rs, &solo, &src, &dst, &b, 1, false);
      if (solo.flow_sem) sg_sem_destroy(solo.flow_sem);
    }
    double rest = cc.mid_us * 1e-6 - xfer;
    if (rest > 0) sg_actor_sleep_for(rest);
    if (cc.post_us > 0) sg_actor_sleep_for(cc.post_us * 1e-6);
    sim_comm_sendrecv_moved(rs, rv, simgrid_get_clock() - t0, cc.total_us * 1e-6);
  } else {
    if (!rv->ended) {
      rv->arrived = 1;
      sg_sem_acquire(lazy_sem(&rv->end_sem));
    }
    sim_comm_note(rs, simgrid_get_clock() - t0, 0);
  }
  sim_comm_sendrecv_leave(rs, i, rv);
}
