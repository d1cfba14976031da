/* sim_local.c — the simulator's own event queue for in-node work (sim/README.md, "Speed").
 *
 * The compute stream of every simulated rank, and each stream whose ops are all collectives inside one node
 * (Megatron's TP and CP streams), run here instead of as SimGrid actors: a binary heap of events (time, class,
 * sequence) -> stream, class 0 for compute streams and 1 for the others, so that at one instant a compute
 * stream launches its next block before a collective looks for the running kernel (what the SimGrid actors
 * get from their yield and the compute stream's deferred wakes); the sequence keeps insertion order. Each
 * stream is a continuation: its position and a phase. The times are the expressions the actors sleep to
 * (a sleep of d from t ends at t + d: SimGrid ends every one there, sim/RESULTS.md, seventh part).
 *
 * One SimGrid actor drives the queue: it runs every event of the earliest time, then waits in SimGrid until
 * the next event's time or until a SimGrid actor (a PP receive, a DP collective) finishes an op that a local
 * stream waits on. It makes no SimGrid call while it runs an instant's events: the semaphores it releases
 * for SimGrid streams waiting on local ops are released after them, so a SimGrid stream woken at that
 * instant sees every compute block launched at it. */
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

enum {
  PH_NEXT,       /* at the op at x: its dependencies, then the op */
  PH_WAIT,       /* waiting for a dependency (rs->waiting) */
  PH_BLOCK,      /* compute: a block runs until the event */
  PH_PRE,        /* a collective: what it waits for before it meets (after a yield when `yielded`) */
  PH_IDLE_CHECK, /* a collective that waits for the compute stream to run dry: look after the yield */
  PH_IDLE_SLEPT, /* ... slept to the last kernel's end: yield, then look again */
  PH_JOIN,       /* the collective's rendezvous and time; it joins the meeting (or sleeps its wait first) */
  PH_MEET_JOIN,  /* its wait slept: it joins the meeting */
  PH_END_OP,     /* in the meeting, or the collective ends at the event */
  PH_SR_MOVED,   /* a send (or a receive whose sender is not simulated) has moved its data at the event */
  PH_SR_WAIT,    /* a receive waits for its send (rv->local_members) */
  PH_DONE
};

typedef struct sim_local_stream {
  sim_rank *rs;
  int s, phase, x;
  int wait_dep; /* compute: the op waited on, since wait_t0 */
  double wait_t0;
  sim_block blk;
  /* the collective or send/recv at x: reached at t0, its wait for the SMs, arrival at the meeting, time,
   * codec time */
  double t0, wait, arrive, t, codec_s;
  sim_rendezvous *rv;
  bool yielded;
  bool chain; /* its event also ends the members after it in next_member (one meeting, one event) */
  struct sim_local_stream *next_member; /* in rv->local_members */
} sim_local_stream;

/* (time, class, sequence) as one unsigned 128-bit key: a time >= 0's bits order as the time does */
typedef unsigned __int128 sim_event_key;
typedef struct {
  sim_event_key key;
  sim_local_stream *ls;
} sim_event;

static struct {
  sim_local_stream *streams;
  int n_streams, live;
  sim_event *heap;                /* the events after the instant running */
  int n_heap, cap_heap;
  /* the events queued at the instant running, by class, in order (what the heap would give them) */
  sim_local_stream **fifo[2]; /* rings of n_streams (a stream has one event at most) */
  int fifo_head[2], fifo_n[2];
  uint64_t seq;
  sg_sem_t sem;                   /* the driver waits on it; a SimGrid actor that queues a stream releases it */
  bool sleeping, signalled, in_batch;
  double now;                     /* the instant whose events the driver runs */
  sg_sem_t *deferred;             /* releases asked for during an instant's events */
  int n_deferred, cap_deferred;
  long long off_clock;            /* waits that ended off the next event's time (none measured; see driver_main) */
#ifdef SIM_LOCAL_STATS
  long long n_waits, n_timeouts, n_events, n_releases, n_now, n_chained;
#endif
} L;

/* ---- the heap ---- */

static bool before(const sim_event *a, const sim_event *b) { return a->key < b->key; }

static double time_of(const sim_event *ev) {
  uint64_t bits = (uint64_t)(ev->key >> 64);
  double t;
  memcpy(&t, &bits, sizeof t);
  return t;
}

static int class_of(const sim_event *ev) { return (int)((uint64_t)ev->key >> 62); }

static void push(sim_local_stream *ls, double t) {
  int cls = ls->s == PLAN_STREAM_COMPUTE ? 0 : 1;
  if (L.in_batch && t == L.now) { /* after the heap's events of this instant and class, before the next instant's */
#ifdef SIM_LOCAL_STATS
    L.n_now++;
#endif
    L.fifo[cls][(L.fifo_head[cls] + L.fifo_n[cls]++) % L.n_streams] = ls;
    return;
  }
  if (!(t >= 0)) abort(); /* (times start at 0 and grow) */
  t += 0.0;               /* (no -0.0) */
  uint64_t bits;
  memcpy(&bits, &t, sizeof bits);
  if (L.n_heap == L.cap_heap) {
    int cap = L.cap_heap ? 2 * L.cap_heap : 256;
    sim_event *bigger = realloc(L.heap, sizeof *bigger * (size_t)cap);
    if (!bigger) abort(); /* out of memory inside the simulation */
    L.heap = bigger, L.cap_heap = cap;
  }
  sim_event ev = {(sim_event_key)bits << 64 | ((uint64_t)cls << 62 | L.seq++), ls};
  int k = L.n_heap++;
  while (k > 0 && before(&ev, &L.heap[(k - 1) / 2])) {
    L.heap[k] = L.heap[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  L.heap[k] = ev;
}

static sim_event pop(void) {
  sim_event top = L.heap[0], last = L.heap[--L.n_heap];
  int k = 0;
  for (;;) {
    int c = 2 * k + 1;
    if (c >= L.n_heap) break;
    if (c + 1 < L.n_heap && before(&L.heap[c + 1], &L.heap[c])) c++;
    if (!before(&L.heap[c], &last)) break;
    L.heap[k] = L.heap[c];
    k = c;
  }
  if (L.n_heap) L.heap[k] = last;
  return top;
}

/* ---- what SimGrid's side calls ---- */

bool sim_local_runs(const sim_rank *rs, int s) { return rs->local & 1u << s; }

void sim_local_wake(sim_rank *rs, int s) { sim_local_wake_stream(rs->lstream[s]); }

void sim_local_wake_stream(sim_local_stream *ls) {
  push(ls, L.in_batch ? L.now : simgrid_get_clock());
  if (!L.in_batch && L.sleeping && !L.signalled) {
    L.signalled = true;
    sg_sem_release(L.sem);
  }
}

void sim_local_release(sg_sem_t sem) {
  if (!L.in_batch) {
    sg_sem_release(sem);
    return;
  }
  if (L.n_deferred == L.cap_deferred) {
    int cap = L.cap_deferred ? 2 * L.cap_deferred : 64;
    sg_sem_t *bigger = realloc(L.deferred, sizeof *bigger * (size_t)cap);
    if (!bigger) abort();
    L.deferred = bigger, L.cap_deferred = cap;
  }
  L.deferred[L.n_deferred++] = sem;
}

/* ---- the streams ---- */

static void stream_end(sim_local_stream *ls, double now) {
  sim_rank *rs = ls->rs;
  sim_wake_pending(rs);
  if (ls->s == PLAN_STREAM_COMPUTE) sim_progress(rs, -1);
  rs->st.stream_end_s[ls->s] = now;
  if (ls->s == PLAN_STREAM_COMPUTE) rs->st.compute_end_s = now;
  if (now > sim_w->end_s) sim_w->end_s = now;
  ls->phase = PH_DONE;
  L.live--;
}

/* The compute stream: stream_main's compute path (sim_engine.c) with its blocking points as phases. */
static void compute_step(sim_local_stream *ls, double now) {
  sim_rank *rs = ls->rs;
  const int s = PLAN_STREAM_COMPUTE;
  const plan_op *ops = rs->prog->ops;
  const int *mine = rs->stream_ops[s];
  if (ls->phase == PH_BLOCK) {
    rs->n_kernel_end = 0;
    sim_block_end(rs, &ls->blk);
    ls->x = ls->blk.y + 1;
  } else if (ls->phase == PH_WAIT) {
    rs->waiting[s] = -1;
    sim_account_wait(rs, ls->wait_dep, ls->wait_t0, now);
  }
  ls->phase = PH_NEXT;
  while (!sim_w->failed && ls->x < rs->n_stream_ops[s]) {
    int i = mine[ls->x];
    sim_progress(rs, i);
    for (int k = 0; k < PLAN_MAX_DEPS; k++) {
      int d = ops[i].dep[k];
      if (d >= 0 && d < i && !rs->done[d]) {
        rs->waiting[s] = d;
        ls->wait_dep = d, ls->wait_t0 = now, ls->phase = PH_WAIT;
        sim_wake_pending(rs);
        return;
      }
    }
    if (sim_block_launch(rs, ls->x, now, &ls->blk)) break;
    double total = ls->blk.total;
    if (total > 0) rs->compute_sleep_end = now + total;
    sim_wake_pending(rs);
    if (total > 0) {
      ls->phase = PH_BLOCK;
      push(ls, now + total);
      return;
    }
    sim_block_end(rs, &ls->blk);
    ls->x = ls->blk.y + 1;
  }
  stream_end(ls, now);
}

static const plan_op *op_at(const sim_local_stream *ls) {
  return &ls->rs->prog->ops[ls->rs->stream_ops[ls->s][ls->x]];
}

static int group_of(const plan_op *op) { return op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP; }

/* The op at x is done at `end` (reached at t0): its record, clock log, and the streams waiting on it. */
static void op_done(sim_local_stream *ls, double end) {
  ls->phase = PH_NEXT; /* (which ends the stream when the simulation failed) */
  if (sim_comm_op_done(ls->rs, ls->s, ls->x, ls->t0, end)) return;
  sim_finish(ls->rs, ls->s, ls->rs->stream_ops[ls->s][ls->x]);
  ls->x++;
}

/* What the collective waits for before it meets (sim_run_collective's first part); true when the stream
 * waits for an event. */
static bool coll_pre(sim_local_stream *ls, double now) {
  sim_rank *rs = ls->rs;
  const plan_op *op = op_at(ls);
  ls->wait = 0;
  if (rs->n_members[group_of(op)] <= 1) { /* nothing runs */
    op_done(ls, now);
    return false;
  }
  sim_coll_pre pre = sim_comm_pre(rs, op);
  if (pre == SIM_PRE_IDLE_COMPUTE) { /* wait_for_idle_compute: yield first */
    ls->phase = PH_IDLE_CHECK;
    push(ls, now);
    return true;
  }
  if (pre != SIM_PRE_NONE) {
    /* running_kernel_left: the compute stream may launch a block at this instant first */
    if (!ls->yielded && !sim_comm_compute_cannot_launch(rs, ls->s, now)) {
      ls->yielded = true;
      push(ls, now);
      return true;
    }
    double left = sim_comm_kernel_left(rs, now);
    if (pre == SIM_PRE_SMS)
      ls->wait = left - sim_comm_head_start_s(op, true);
    else if (sim_comm_beside_delay_s(left) > 0) {
      ls->phase = PH_JOIN;
      push(ls, now + sim_comm_beside_delay_s(left));
      return true;
    }
  }
  ls->phase = PH_JOIN;
  return false;
}

/* wait_for_idle_compute after its yield: sleeps to the compute stream's last kernel end, yields, looks again */
static bool idle_check(sim_local_stream *ls, double now) {
  const sim_rank *rs = ls->rs;
  double end = now;
  for (int k = 0; k < rs->n_kernel_end; k++)
    if (rs->kernel_end[k] > end) end = rs->kernel_end[k];
  if (end <= now) {
    ls->phase = PH_JOIN;
    return false;
  }
  ls->phase = PH_IDLE_SLEPT;
  push(ls, now + (end - now));
  return true;
}

/* timed_meeting (sim_comm.c) as a count: the last member to join queues every member at the instant its
 * actor would have woken (the last one's sleep from its `join`, then each member's own time when they differ). */
static void meet(sim_local_stream *ls, double join) {
  sim_rendezvous *rv = ls->rv;
  double t = ls->t, arrive = ls->arrive;
  ls->phase = PH_END_OP;
  if (rv->expected <= 1) {
    push(ls, join + t);
    return;
  }
  if (rv->arrived == 0)
    rv->timed_s = t, rv->timed_same = 1, rv->timed_slept = 0, rv->meet_start = arrive;
  else {
    if (t != rv->timed_s) rv->timed_same = -1;
    if (arrive > rv->meet_start) rv->meet_start = arrive;
  }
  if (++rv->arrived < rv->expected) {
    sim_local_stream **tail = &rv->local_members;
    while (*tail) tail = &(*tail)->next_member;
    ls->next_member = NULL;
    *tail = ls;
    return;
  }
  rv->arrived = 0;
  double start = rv->meet_start;
  sim_local_stream *m = rv->local_members;
  rv->local_members = NULL;
  if (rv->timed_same == 1) { /* one event: the members in joining order, then this one */
    double end = start > join ? join + (start + t - join) : join + t;
    ls->next_member = NULL;
    if (m) {
      sim_local_stream *tail = m;
      while (tail->next_member) tail = tail->next_member;
      tail->next_member = ls;
    } else
      m = ls;
    m->chain = true;
    push(m, end);
  } else {
    double s0 = start > join ? join + (start - join) : join;
    for (; m; m = m->next_member) push(m, s0 + m->t);
    push(ls, s0 + t);
  }
}

/* The collective's rendezvous and calibrated time (sim_run_collective's in-node path); it joins the meeting
 * now (its wait for the SMs, if any, absorbed when joins_early allows) or after sleeping the wait. */
static bool coll_join(sim_local_stream *ls, double now) {
  sim_rank *rs = ls->rs;
  const plan_op *op = op_at(ls);
  int g = group_of(op), n = rs->n_members[g];
  ts_err e = {0};
  sim_codec_cost cc;
  if (sim_codec_cost_of(&sim_w->costs, op, n, &cc, &e)) {
    sim_fail(&e);
    return false;
  }
  sim_rendezvous *rv = sim_rendezvous_get(1, (long long)g << 8 | ls->s, rs->group_leader[g],
                                          rs->coll_seq[g][ls->s]++, rs->group_simulated[g]);
  if (sim_comm_in_node_s(op, n, &cc, &ls->t, &e)) {
    sim_fail(&e);
    sim_rendezvous_leave(rv);
    return false;
  }
  ls->rv = rv;
  ls->codec_s = cc.total_us * 1e-6;
  ls->arrive = now;
  if (ls->wait > 0) {
    ls->arrive = now + ls->wait;
    if (!(rv->expected > 1 && sim_comm_joins_early(now, ls->wait, ls->t))) {
      ls->phase = PH_MEET_JOIN;
      push(ls, now + ls->wait);
      return true;
    }
  }
  meet(ls, now);
  return true;
}

/* A send or receive inside a node (sim_run_sendrecv's in-node path): the mover's sleeps added up to one
 * event; the other side waits for it unless it already ended. */
static void sendrecv_start(sim_local_stream *ls, double now) {
  int i = ls->rs->stream_ops[ls->s][ls->x];
  bool mover;
  ls->rv = sim_comm_sendrecv_rv(ls->rs, i, &mover);
  if (!ls->rv) {
    ls->phase = PH_NEXT; /* (failed: the stream ends) */
    return;
  }
  if (mover) {
    ls->phase = PH_SR_MOVED;
    push(ls, sim_comm_sendrecv_in_node_end(ls->rs, &ls->rs->prog->ops[i], ls->rv, now, &ls->codec_s));
  } else if (!ls->rv->ended) {
    ls->rv->arrived = 1;
    ls->rv->local_members = ls;
    ls->phase = PH_SR_WAIT;
  } else {
    sim_comm_note(ls->rs, now - ls->t0, 0);
    sim_comm_sendrecv_leave(ls->rs, i, ls->rv);
    op_done(ls, now);
  }
}

static void sendrecv_end(sim_local_stream *ls, double now) {
  int i = ls->rs->stream_ops[ls->s][ls->x];
  if (ls->phase == PH_SR_MOVED)
    sim_comm_sendrecv_moved(ls->rs, ls->rv, now - ls->t0, ls->codec_s);
  else
    sim_comm_note(ls->rs, now - ls->t0, 0);
  sim_comm_sendrecv_leave(ls->rs, i, ls->rv);
  ls->rv = NULL;
  op_done(ls, now);
}

static void coll_end(sim_local_stream *ls, double now) {
  sim_comm_note(ls->rs, now - ls->arrive, ls->codec_s);
  sim_rendezvous_leave(ls->rv);
  ls->rv = NULL;
  op_done(ls, now);
}

/* A stream of in-node collectives and sends/receives: stream_main's other path (sim_engine.c), and
 * sim_run_collective's and sim_run_sendrecv's. */
static void coll_step(sim_local_stream *ls, double now) {
  sim_rank *rs = ls->rs;
  int s = ls->s;
  for (;;) {
    switch (ls->phase) {
    case PH_WAIT:
      rs->waiting[s] = -1;
      ls->phase = PH_NEXT;
      break;
    case PH_NEXT: {
      if (sim_w->failed || ls->x >= rs->n_stream_ops[s]) {
        stream_end(ls, now);
        return;
      }
      int d = sim_first_undone_dep(rs, rs->stream_ops[s][ls->x]);
      if (d >= 0) {
        rs->waiting[s] = d;
        ls->phase = PH_WAIT;
        sim_wake_pending(rs);
        return;
      }
      rs->next_pos[s] = ls->x + 1;
      sim_wake_pending(rs);
      ls->t0 = now, ls->yielded = false, ls->phase = PH_PRE;
      break;
    }
    case PH_PRE:
      if (op_at(ls)->kind != PLAN_OP_COLLECTIVE) {
        sendrecv_start(ls, now);
        if (ls->phase != PH_NEXT) return;
      } else if (coll_pre(ls, now))
        return;
      break;
    case PH_IDLE_CHECK:
      if (idle_check(ls, now)) return;
      break;
    case PH_IDLE_SLEPT:
      ls->phase = PH_IDLE_CHECK;
      push(ls, now);
      return;
    case PH_JOIN:
      if (sim_w->failed || coll_join(ls, now)) return;
      ls->phase = PH_NEXT; /* (failed: the stream ends) */
      break;
    case PH_MEET_JOIN:
      meet(ls, now);
      return;
    case PH_END_OP:
      coll_end(ls, now);
      break;
    case PH_SR_MOVED:
    case PH_SR_WAIT:
      sendrecv_end(ls, now);
      break;
    default: return;
    }
  }
}

/* ---- the driver ---- */

static void flush_releases(void) {
#ifdef SIM_LOCAL_STATS
  L.n_releases += L.n_deferred;
#endif
  for (int k = 0; k < L.n_deferred; k++) sg_sem_release(L.deferred[k]);
  L.n_deferred = 0;
}

/* Waits until the next event's time, or until a SimGrid actor queued a stream; *now: the instant to run. */
static void wait_next(double *now) {
  L.sleeping = true, L.signalled = false;
  if (!L.n_heap) {
    sg_sem_acquire(L.sem);
    *now = simgrid_get_clock();
  } else {
    double next = time_of(&L.heap[0]), clock = simgrid_get_clock();
    if (next <= clock) {
      /* SimGrid's clock is already past the next event: the wait to the event before it ended late (SimGrid
       * ends a timeout or sleep shorter than about 1 ns about 1 ns late). No wait: one with a timeout <= 0
       * never times out, and the driver would sleep until some actor queued a stream (a deadlock when none
       * does). The event runs at its own time, as after a late timeout below. */
      L.off_clock++;
      *now = next;
    } else if (sg_sem_acquire_timeout(L.sem, next - clock) == 0) {
      *now = simgrid_get_clock();
    } else {
      /* the wait ends at clock + (next - clock): next itself when next <= 2 clock (Sterbenz), else it may
       * miss by a rounding; one more (exact) sleep reaches it from below */
      clock = simgrid_get_clock();
      if (clock < next) sg_actor_sleep_for(next - clock);
      if (simgrid_get_clock() != next) L.off_clock++;
#ifdef SIM_LOCAL_STATS
      L.n_timeouts++;
#endif
      *now = next;
    }
  }
  L.sleeping = false;
#ifdef SIM_LOCAL_STATS
  L.n_waits++;
#endif
}

static void run(sim_local_stream *ls, double now) {
#ifdef SIM_LOCAL_STATS
  L.n_events++;
#endif
  if (ls->s == PLAN_STREAM_COMPUTE) {
    compute_step(ls, now);
    return;
  }
  if (!ls->chain) {
    coll_step(ls, now);
    return;
  }
  ls->chain = false;
  while (ls) { /* a meeting's members (each may join another meeting, which sets its next_member) */
    sim_local_stream *next = ls->next_member;
#ifdef SIM_LOCAL_STATS
    L.n_chained += next != NULL;
#endif
    coll_step(ls, now);
    ls = next;
  }
}

/* The next stream to run at `now`, in (time, class, sequence) order; NULL when none. */
static sim_local_stream *next_at(double now) {
  bool heap_now = L.n_heap && time_of(&L.heap[0]) <= now;
  for (int cls = 0; cls < 2; cls++) {
    if (heap_now && class_of(&L.heap[0]) == cls) return pop().ls;
    if (L.fifo_n[cls]) {
      L.fifo_n[cls]--;
      sim_local_stream *ls = L.fifo[cls][L.fifo_head[cls]];
      L.fifo_head[cls] = (L.fifo_head[cls] + 1) % L.n_streams;
      return ls;
    }
  }
  return NULL;
}

static void driver_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  for (int k = 0; k < L.n_streams; k++) push(&L.streams[k], 0);
  double now = 0;
  while (!sim_w->failed) {
    L.in_batch = true;
    L.now = now;
    for (sim_local_stream *ls; !sim_w->failed && (ls = next_at(now));) run(ls, now);
    L.in_batch = false;
    flush_releases(); /* (SimGrid actors run meanwhile and may queue streams at this instant) */
    if (L.n_heap && time_of(&L.heap[0]) <= now) continue;
    if (!L.live) break;
    wait_next(&now);
  }
#ifdef SIM_LOCAL_STATS
  fprintf(stderr,
          "local: %lld events (%lld queued at the instant running), %lld meeting members ended by another's event, "
          "%lld waits (%lld to the next event; %lld off its time), %lld deferred releases\n",
          L.n_events, L.n_now, L.n_chained, L.n_waits, L.n_timeouts, L.off_clock, L.n_releases);
#endif
}

/* ---- setup ---- */

/* Whether a send or receive of rs goes to a rank on its node. */
static bool peer_in_node(const sim_rank *rs, const plan_op *op) {
  int peer = sim_op_peer(rs, op);
  const topo_cluster *c = &sim_w->p->cluster;
  return peer >= 0 && peer < sim_w->world && topo_node_of(c, peer) == topo_node_of(c, rs->rank);
}

/* Which streams of rs's program could run here: the compute stream when it holds only compute ops, another
 * when it holds only collectives of groups that sit on one node for rs and sends and receives to its node. */
static uint8_t eligible(sim_rank *rs) {
  const plan_op *ops = rs->prog->ops;
  unsigned groups[PLAN_STREAM_COUNT] = {0};
  uint8_t ok = (uint8_t)((1u << PLAN_STREAM_COUNT) - 1);
  for (int i = 0; i < rs->prog->n; i++) {
    const plan_op *op = &ops[i];
    bool fits = op->stream == PLAN_STREAM_COMPUTE ? op->kind == PLAN_OP_COMPUTE
                : op->kind == PLAN_OP_COLLECTIVE  ? true
                                                  : op->kind != PLAN_OP_COMPUTE && peer_in_node(rs, op);
    if (!fits)
      ok &= (uint8_t) ~(1u << op->stream);
    else if (op->kind == PLAN_OP_COLLECTIVE)
      groups[op->stream] |= 1u << group_of(op);
  }
  for (int s = 1; s < PLAN_STREAM_COUNT; s++)
    for (int g = 0; g < PLAN_GROUP_COUNT; g++)
      if (groups[s] & 1u << g && !sim_comm_group_on_one_node(rs, g)) ok &= (uint8_t) ~(1u << s);
  return ok;
}

int sim_local_setup(sim_world *w, ts_err *e) {
  memset(&L, 0, sizeof L);
  if (w->o->local_off || !w->first) return 0;
  /* a stream runs here on every rank or on none (the members of a collective meet on one side); the
   * other streams only beside a compute stream that runs here */
  uint8_t ok = (uint8_t)((1u << PLAN_STREAM_COUNT) - 1);
  for (int r = 0; r < w->world && ok & 1; r++)
    if (w->ranks[r]) ok &= eligible(w->ranks[r]);
#ifdef SIM_LOCAL_STATS
  fprintf(stderr, "local: streams on the queue: mask 0x%x\n", ok & 1 ? ok : 0);
#endif
  if (!(ok & 1)) return 0;
  int n = 0;
  for (int r = 0; r < w->world; r++)
    for (int s = 0; w->ranks[r] && s < PLAN_STREAM_COUNT; s++) n += ok >> s & 1 && w->ranks[r]->n_stream_ops[s] > 0;
  L.streams = calloc((size_t)(n ? n : 1), sizeof *L.streams);
  L.fifo[0] = malloc(sizeof *L.fifo[0] * (size_t)(n ? n : 1));
  L.fifo[1] = malloc(sizeof *L.fifo[1] * (size_t)(n ? n : 1));
  if (!L.streams || !L.fifo[0] || !L.fifo[1]) return ts_fail_sys(e, "out of memory");
  for (int r = 0; r < w->world; r++)
    for (int s = 0; w->ranks[r] && s < PLAN_STREAM_COUNT; s++) {
      sim_rank *rs = w->ranks[r];
      if (!(ok >> s & 1) || rs->n_stream_ops[s] == 0) continue;
      sim_local_stream *ls = &L.streams[L.n_streams++];
      ls->rs = rs, ls->s = s, ls->phase = PH_NEXT;
      rs->local |= (uint8_t)(1u << s);
      rs->lstream[s] = ls;
    }
  L.live = L.n_streams;
  L.sem = sg_sem_init(0);
  sg_actor_t a = sg_actor_init("local-queue", w->hosts[w->first->rank]);
  sg_actor_start(a, driver_main, 0, NULL);
  return 0;
}

void sim_local_free(void) {
  free(L.streams);
  free(L.fifo[0]);
  free(L.fifo[1]);
  free(L.heap);
  free(L.deferred);
  if (L.sem) sg_sem_destroy(L.sem);
  memset(&L, 0, sizeof L);
}
