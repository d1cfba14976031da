/* sim_engine.c — one SimGrid simulation of one iteration of a plan.
 *
 * Per simulated rank, one actor per stream walks that stream's ops in program
 * order. A dependency on another stream's op is a wait on a per-(rank,
 * stream) semaphore that the finishing actor releases (cheap: no activity is
 * created). Compute ops sleep for their calibrated time; consecutive compute
 * ops that no other stream waits on are merged into one sleep. */
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "sim_internal.h"

sim_world *sim_w;

typedef struct {
  sim_rank *rs;
  int stream;
} stream_ctx;

static const char *const stream_names[PLAN_STREAM_COUNT] = {"compute", "tp", "pp", "dp", "cp", "ep"};

/* the op at position pos of this stream's list, and the `merged` ops after it */
/* A trace's flow id (48 bits, odd: never 0) from what identifies a message or a collective call. */
static long long flow_id(long long a, long long b, long long c, long long d) {
  unsigned long long h = 1469598103934665603ull, v[4] = {(unsigned long long)a, (unsigned long long)b,
                                                        (unsigned long long)c, (unsigned long long)d};
  for (int i = 0; i < 4; i++) h = (h ^ v[i]) * 1099511628211ull, h ^= h >> 29;
  return (long long)((h & ((1ull << 48) - 1)) | 1);
}

/* The flow an op's record carries: a send and its receive share (src, dst, tag); the members of one
 * collective call share (group, stream, leader, call number) as the rendezvous of sim_comm.c does. */
static long long op_flow(const sim_rank *rs, int stream, const plan_op *op) {
  if (op->kind == PLAN_OP_SEND) return flow_id(1, rs->rank, sim_op_peer(rs, op), op->tag);
  if (op->kind == PLAN_OP_RECV) return flow_id(1, sim_op_peer(rs, op), rs->rank, op->tag);
  if (op->kind != PLAN_OP_COLLECTIVE) return 0;
  int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
  if (rs->n_members[g] <= 1) return 0; /* nothing ran */
  int leader = rs->members[g][0];
  for (int k = 1; k < rs->n_members[g]; k++)
    if (rs->members[g][k] < leader) leader = rs->members[g][k];
  /* recorded after the call, which counted itself */
  return flow_id(2 + g, stream, leader, rs->coll_seq[g][stream] - 1);
}

/* An op's name as rs runs it (the name of a send or receive says its peer). */
static void op_name(const sim_rank *rs, const plan_op *op, char *buf, size_t cap) {
  plan_op shifted = *op;
  shifted.peer = sim_op_peer(rs, op);
  plan_op_name(sim_w->p, &shifted, buf, cap);
}

/* The merged op k (1..merged) after pos on this stream: its name short of the dotted prefix it shares
 * with first (the record's own name). */
static const char *merged_name(const sim_rank *rs, int stream, int pos, int k, const char *first, char *buf,
                               size_t cap) {
  op_name(rs, &rs->prog->ops[rs->stream_ops[stream][pos + k]], buf, cap);
  size_t keep = 0; /* the shared prefix, up to and including its last dot */
  for (size_t i = 0; buf[i] && buf[i] == first[i]; i++)
    if (buf[i] == '.') keep = i + 1;
  return buf + keep;
}

/* What a merged record holds: the `merged` ops after pos, comma-separated ("qkv, attn, attn_out"); where
 * they do not all fit in out, the first and the last of them ("layer0.mb0.fwd.ln1 ... layer3.mb0.fwd.fc2":
 * every op between, in program order). */
static void merged_names(const sim_rank *rs, int stream, int pos, int merged, const char *first, char *out,
                         size_t cap) {
  out[0] = '\0';
  if (pos + merged >= rs->n_stream_ops[stream]) merged = rs->n_stream_ops[stream] - 1 - pos;
  if (merged <= 0) return;
  size_t used = 0;
  for (int k = 1; k <= merged; k++) {
    char buf[96];
    const char *part = merged_name(rs, stream, pos, k, first, buf, sizeof buf);
    int n = snprintf(out + used, cap - used, "%s%s", k > 1 ? ", " : "", part);
    if (n < 0 || used + (size_t)n >= cap) break;
    used += (size_t)n;
    if (k == merged) return; /* all of them fit */
  }
  char a[96], b[96];
  const char *lo = merged_name(rs, stream, pos, 1, first, a, sizeof a),
             *hi = merged_name(rs, stream, pos, merged, first, b, sizeof b);
  snprintf(out, cap, "%.*s ... %s", (int)(cap > 48 ? cap / 2 - 4 : 8), lo, hi);
}

static void record(sim_rank *rs, int stream, int pos, int merged, double start, double dur) {
  if (!sim_w->o->record_ops || dur <= 0) return;
  const int *mine = rs->stream_ops[stream];
  int op_index = mine[pos];
  if (sim_w->o->record_ranks && !sim_w->o->record_ranks[rs->rank]) return;
  if (rs->n_recs == rs->cap_recs) {
    rs->cap_recs = rs->cap_recs ? rs->cap_recs * 2 : 1024;
    rs->recs = realloc(rs->recs, sizeof *rs->recs * (size_t)rs->cap_recs);
    if (!rs->recs) abort();
  }
  schema_op_record *r = &rs->recs[rs->n_recs++];
  char name[96];
  op_name(rs, &rs->prog->ops[op_index], name, sizeof name);
  if (merged > 0)
    snprintf(r->name, sizeof r->name, "%.80s +%d", name, merged);
  else
    snprintf(r->name, sizeof r->name, "%s", name);
  r->rank = rs->rank;
  snprintf(r->stream, sizeof r->stream, "%s", stream_names[stream]);
  r->start_s = start;
  r->dur_s = dur;
  const plan_op *op = &rs->prog->ops[op_index];
  snprintf(r->kind, sizeof r->kind, "%s", plan_op_kind_name((plan_op_kind)op->kind));
  snprintf(r->coll, sizeof r->coll, "%s", op->kind == PLAN_OP_COLLECTIVE ? plan_coll_name((plan_coll)op->coll) : "");
  snprintf(r->codec, sizeof r->codec, "%s",
           op->kind != PLAN_OP_COMPUTE && op->codec.kind != PLAN_CODEC_NONE ? plan_codec_kind_name(op->codec.kind) : "");
  r->merged = merged > 0 ? merged : 0;
  merged_names(rs, stream, pos, r->merged, name, r->merged_names, sizeof r->merged_names);
  r->flow = op_flow(rs, stream, op);
  r->flops = r->bytes = r->wire_bytes = 0;
  r->source[0] = '\0';
  for (int k = 0; k <= r->merged && pos + k < rs->n_stream_ops[stream]; k++) {
    const plan_op *m = &rs->prog->ops[mine[pos + k]];
    r->flops += m->flops, r->bytes += m->bytes, r->wire_bytes += m->kind == PLAN_OP_COMPUTE ? 0 : m->wire_bytes;
    if (m->kind == PLAN_OP_COMPUTE) sim_compute_source(&sim_w->costs, m, r->source, sizeof r->source);
  }
  if (op->kind != PLAN_OP_COMPUTE) sim_comm_op_source(rs, op, r->source, sizeof r->source);
}

/* Attributes a wait of the compute stream on op d to its cause. */
void sim_account_wait(sim_rank *rs, int d, double t0, double t1) {
  const plan_op *op = &rs->prog->ops[d];
  double w = t1 - t0;
  if (w <= 0) return;
  if (op->traffic == PLAN_TRAFFIC_EP && op->kind == PLAN_OP_COLLECTIVE) { /* MoE token collectives */
    rs->st.ep_s += w;
    return;
  }
  switch (op->stream) {
  case PLAN_STREAM_TP: rs->st.tp_s += w; break;
  case PLAN_STREAM_DP: rs->st.dp_s += w; break;
  case PLAN_STREAM_CP: rs->st.cp_s += w; break;
  default: {
    /* Waiting on a receive: until its transfer starts the upstream stage has
     * not produced the data yet (pipeline bubble); after, the transfer is exposed. */
    double xs = t0;
    if (op->kind == PLAN_OP_RECV)
      for (int k = 0; k < SIM_XFER_SLOTS; k++)
        if (rs->xfer_op[k] == d) xs = rs->xfer_start[k];
    if (xs < t0) xs = t0;
    if (xs > t1) xs = t1;
    rs->st.bubble_s += xs - t0;
    rs->st.pp_s += t1 - xs;
  }
  }
}

/* The streams the compute stream finished ops for are woken when it blocks
 * next (launching its next block, or waiting): a stream woken at once ran
 * before the compute stream had launched that block and yielded to it to see
 * the kernel it must wait for (sim_comm.c's running_kernel_left); now it
 * finds the block launched. Same instant, one SimGrid call fewer. */
void sim_wake_pending(sim_rank *rs) {
  for (int t = 0; rs->wake_pending; t++)
    if (rs->wake_pending & 1u << t) {
      rs->wake_pending &= (uint8_t) ~(1u << t);
      sim_local_release(rs->wake[t]);
    }
}

/* A stream run by the event queue (sim_local.c) is queued at once: the queue runs the compute stream's
 * events of an instant before the others' (its next block is launched before a collective looks for it). */
void sim_finish(sim_rank *rs, int s, int i) {
  rs->done[i] = 1;
  if (!rs->cross[i]) return; /* no op of another stream depends on it: none waits on it */
  for (int t = 0; t < PLAN_STREAM_COUNT; t++)
    if (t != s && rs->waiting[t] == i) {
      rs->waiting[t] = -1;
      if (rs->local & 1u << t)
        sim_local_wake(rs, t);
      else if (s == PLAN_STREAM_COMPUTE)
        rs->wake_pending |= (uint8_t)(1u << t);
      else
        sim_local_release(rs->wake[t]);
    }
}

/* The first dependency of op i that is not done yet (-1: none), in the order the streams wait for them. */
int sim_first_undone_dep(const sim_rank *rs, int i) {
  const plan_op *op = &rs->prog->ops[i];
  for (int k = 0; k < PLAN_MAX_DEPS; k++) {
    int d = op->dep[k];
    if (d >= 0 && d < i && !rs->done[d]) return d;
  }
  return -1;
}

/* A stream's communication op at position x of its list, run by the calling actor (the stream's own, or the
 * compute stream's for it, run_for_idle_stream); returns -1 when the simulation failed. */
int sim_comm_op_done(sim_rank *rs, int s, int x, double t0, double end) {
  const plan_op *op = &rs->prog->ops[rs->stream_ops[s][x]];
  record(rs, s, x, 0, t0, end - t0);
  if (sim_w->clock && sim_comm_draws_power(rs, op) && sim_clock_comm(rs, t0, end - t0)) {
    ts_err e = {0};
    ts_fail_sys(&e, "out of memory");
    sim_fail(&e);
    return -1;
  }
  return 0;
}

static int run_comm_op(sim_rank *rs, int s, int x) {
  int i = rs->stream_ops[s][x];
  const plan_op *op = &rs->prog->ops[i];
  double t0 = rs->pending_s > 0 ? rs->pending_end : simgrid_get_clock(); /* (block_into_meeting) */
  if (op->kind == PLAN_OP_COLLECTIVE)
    sim_run_collective(rs, s, i);
  else
    sim_run_sendrecv(rs, i);
  return sim_comm_op_done(rs, s, x, t0, simgrid_get_clock());
}

/* The compute stream is about to block on op d of another stream that sits waiting, woken by the compute
 * block that just ended (its wake still pending) and ready to run d at this instant: the compute stream runs
 * d for it (an in-node collective: a calibrated time) instead of waking it and blocking until it is done. The
 * same instant and the same waits in the collective; two semaphore releases and two blocking acquires fewer
 * per call (the forward TP all-reduces of a Megatron layer). The other stream stays blocked until its next
 * op's dependency is done, or is woken when the compute stream next blocks (at this instant) if it has none. */
static bool run_for_idle_stream(sim_rank *rs, int d) {
  const plan_op *op = &rs->prog->ops[d];
  int t = op->stream;
  if (t == PLAN_STREAM_COMPUTE || !(rs->wake_pending & 1u << t)) return false;
  int x = rs->next_pos[t];
  if (x >= rs->n_stream_ops[t] || rs->stream_ops[t][x] != d) return false;
  if (sim_first_undone_dep(rs, d) >= 0 || !sim_comm_in_node(rs, op)) return false;
  rs->next_pos[t] = x + 1;
  rs->wake_pending &= (uint8_t) ~(1u << t);
  sim_wake_pending(rs); /* the other streams, as the wait would have */
  if (run_comm_op(rs, t, x)) return true;
  rs->waiting[PLAN_STREAM_COMPUTE] = -1; /* not woken by finish: this actor ran it */
  sim_finish(rs, t, d);
  int next = x + 1 < rs->n_stream_ops[t] ? sim_first_undone_dep(rs, rs->stream_ops[t][x + 1]) : -1;
  if (next >= 0)
    rs->waiting[t] = next;
  else
    rs->wake_pending |= (uint8_t)(1u << t);
  return true;
}

static void wait_for(sim_rank *rs, int s, int d) {
  if (rs->done[d]) return;
  double t0 = s == PLAN_STREAM_COMPUTE && rs->pending_s > 0 ? rs->pending_end : simgrid_get_clock();
  while (!rs->done[d]) {
    rs->waiting[s] = d;
    if (s == PLAN_STREAM_COMPUTE && run_for_idle_stream(rs, d)) continue;
    sim_wake_pending(rs);
    sg_sem_acquire(rs->wake[s]);
  }
  rs->waiting[s] = -1;
  if (s == PLAN_STREAM_COMPUTE) sim_account_wait(rs, d, t0, simgrid_get_clock());
}

static int deps_ready(const sim_rank *rs, int s, int i, int block_end) {
  const plan_op *op = &rs->prog->ops[i];
  for (int k = 0; k < PLAN_MAX_DEPS; k++) {
    int d = op->dep[k];
    if (d < 0 || rs->done[d]) continue;
    if (rs->prog->ops[d].stream == s && d <= block_end) continue;
    return 0;
  }
  return 1;
}

/* Remembers when an op of the running compute block ends, so that a
 * collective arriving meanwhile knows when the running kernel frees the SMs
 * (sim_comm.c). */
static int push_kernel_end(sim_rank *rs, double t) {
  if (sim_w->o->ideal_overlap) return 0;
  if (rs->n_kernel_end == rs->cap_kernel_end) {
    int cap = rs->cap_kernel_end ? 2 * rs->cap_kernel_end : 64;
    double *bigger = realloc(rs->kernel_end, sizeof *bigger * (size_t)cap);
    if (!bigger) {
      ts_err e;
      ts_fail_sys(&e, "out of memory");
      sim_fail(&e);
      return -1;
    }
    rs->kernel_end = bigger, rs->cap_kernel_end = cap;
  }
  rs->kernel_end[rs->n_kernel_end++] = t;
  return 0;
}

int sim_op_compute_s(sim_world *w, const plan_op *op, double *s, double *gemm_s, ts_err *e) {
  return sim_cost_memo_get(&w->memo, &w->costs, op, s, gemm_s, e);
}

/* A compute op's time; with the clock model, at the rank's speeds (and logged
 * from `start` for the rank's duty). */
static int compute_time(sim_rank *rs, const plan_op *op, double start, double *d, ts_err *e) {
  double gemm;
  if (sim_op_compute_s(sim_w, op, d, &gemm, e)) return -1;
  if (!sim_w->clock) return 0;
  *d = sim_clock_op(rs, start, *d, gemm);
  return *d < 0 ? ts_fail_sys(e, "out of memory") : 0;
}

/* A compute op from gpu_free under the host clock: its GPU time *d (clock
 * model) and how long the GPU waits for the host before and between its
 * kernels (*delay, 0 when the host is ahead, as it is with the clock off). */
static int host_op_time(sim_rank *rs, const plan_op *op, double gpu_free, double *d, double *delay, ts_err *e) {
  const sim_host *h = &sim_w->host;
  const bool issued = h->on && op->launches + op->gemm_launches + op->events > 0;
  if (issued && h->fw) { /* the framework's calls of the communication ops before this op in program order */
    const int i = (int)(op - rs->prog->ops);
    for (; rs->fw_next < i; rs->fw_next++) rs->host_t += sim_host_fw_call_s(h, &rs->prog->ops[rs->fw_next]);
    rs->fw_next = i + 1;
  }
  if (issued) sim_host_wait_before(h, &rs->host_t, gpu_free, op->host_syncs_before, op->host_calls_before);
  double start = issued && rs->host_t > gpu_free ? rs->host_t : gpu_free;
  if (compute_time(rs, op, start, d, e)) return -1;
  *delay = 0;
  if (!issued) return 0;
  const double fw_s = sim_host_fw_op_s(h, sim_w->p, sim_w->costs.mops, sim_w->costs.n_mops,
                                       (const double(*)[2][SCHEMA_FW_NPARTS])rs->fw_rate_s, op);
  double end =
      fw_s >= 0 ? sim_host_op_cost(h, &rs->host_t, op->launches + op->gemm_launches + op->events, fw_s, op->host_sync,
                                   gpu_free, *d, NULL)
                : sim_host_op(h, &rs->host_t, op->launches, op->gemm_launches, op->events, op->host_sync, gpu_free, *d,
                              NULL);
  if (end > gpu_free + *d) *delay = end - (gpu_free + *d);
  return 0;
}

/* Whether the compute block x..y of the compute stream list, launched now, can leave its sleep to the
 * in-node collective the compute stream will run for another stream when it ends (run_for_idle_stream):
 * the block's last op is waited on by that collective alone, whose stream sits blocked on it; the next compute
 * op's first dependency not done by the block's end is that collective; the collective's other dependencies
 * are done. Then nothing can observe the compute stream between the block's end and the collective: the
 * block's bookkeeping is done now, the collective joins its meeting at the block's end (sim_comm.c,
 * timed_meeting), and its meeting sleeps the block (one SimGrid sleep fewer per forward TP all-reduce and
 * member; the same instants, joins_early's bound, else the block is slept there). Not on ranks whose ops are
 * recorded: their records would be made in another order. */
static bool block_into_meeting(sim_rank *rs, int x, int y) {
  const sim_options *o = sim_w->o;
  if (o->record_ops && (!o->record_ranks || o->record_ranks[rs->rank])) return false;
  const int *mine = rs->stream_ops[PLAN_STREAM_COMPUTE];
  if (y + 1 >= rs->n_stream_ops[PLAN_STREAM_COMPUTE]) return false;
  const plan_op *ops = rs->prog->ops;
  int first = mine[x], last = mine[y], next = mine[y + 1], d = rs->dependent[last];
  if (d < 0) return false;
  const plan_op *c = &ops[d];
  int t = c->stream;
  if (t == PLAN_STREAM_COMPUTE || c->kind != PLAN_OP_COLLECTIVE || rs->waiting[t] != last) return false;
  if (c->codec.kind != PLAN_CODEC_NONE && t != PLAN_STREAM_TP && t != PLAN_STREAM_EP) return false; /* (waits for idle compute) */
  int xt = rs->next_pos[t];
  if (xt >= rs->n_stream_ops[t] || rs->stream_ops[t][xt] != d || !sim_comm_in_node(rs, c)) return false;
  if (rs->n_members[c->group < PLAN_GROUP_COUNT ? c->group : PLAN_GROUP_TP] <= 1) return false; /* (nothing runs) */
  /* done by the block's end: done now, or an op of the block */
  for (int k = 0; k < PLAN_MAX_DEPS; k++) {
    int e = c->dep[k];
    if (e >= 0 && e < d && !rs->done[e] && !(ops[e].stream == PLAN_STREAM_COMPUTE && e >= first && e <= last))
      return false;
  }
  for (int k = 0; k < PLAN_MAX_DEPS; k++) {
    int e = ops[next].dep[k];
    if (e < 0 || e >= next) continue;
    if (e == d) return !rs->done[d];
    if (!rs->done[e] && !(ops[e].stream == PLAN_STREAM_COMPUTE && e >= first && e <= last)) return false;
  }
  return false;
}

int sim_block_launch(sim_rank *rs, int x, double t0, sim_block *b) {
  const int s = PLAN_STREAM_COMPUTE;
  const plan_op *ops = rs->prog->ops;
  const int *mine = rs->stream_ops[s];
  int n_mine = rs->n_stream_ops[s], i = mine[x];
  ts_err e = {0};
  double total = 0, d, delay;
  int last = i, merged = 0;
  if (host_op_time(rs, &ops[i], t0, &d, &delay, &e)) {
    sim_fail(&e);
    return -1;
  }
  total = delay > 0 ? delay + d : d;
  double host_wait = delay > 0 ? delay : 0;
  double imbalance = ops[i].model_op == PLAN_MOP_MOE_IMBALANCE ? d : 0;
  rs->n_kernel_end = 0;
  if (push_kernel_end(rs, t0 + total)) return -1;
  /* merge the following compute ops of this stream while nobody else waits on the block */
  int y = x;
  while (!rs->cross[last]) {
    if (y + 1 >= n_mine) break;
    int j = mine[y + 1];
    if (ops[j].kind != PLAN_OP_COMPUTE || !deps_ready(rs, s, j, last)) break;
    if (host_op_time(rs, &ops[j], t0 + total, &d, &delay, &e)) {
      sim_fail(&e);
      return -1;
    }
    if (delay > 0) total += delay, host_wait += delay;
    total += d;
    if (ops[j].model_op == PLAN_MOP_MOE_IMBALANCE) imbalance += d;
    if (push_kernel_end(rs, t0 + total)) return -1;
    last = j;
    y++;
    merged++;
  }
  *b = (sim_block){.t0 = t0, .total = total, .imbalance = imbalance, .host_wait = host_wait, .x = x, .y = y,
                   .merged = merged};
  return 0;
}

void sim_block_end(sim_rank *rs, const sim_block *b) {
  const int s = PLAN_STREAM_COMPUTE;
  rs->st.compute_s += b->total - b->imbalance - b->host_wait; /* MoE: the wait for the busiest EP rank is not this
                                                              * GPU's work; nor the wait for its host */
  rs->st.imbalance_s += b->imbalance;
  rs->st.host_s += b->host_wait;
  record(rs, s, b->x, b->merged, b->t0, b->total);
  for (int k = b->x; k <= b->y; k++) sim_finish(rs, s, rs->stream_ops[s][k]);
}

void sim_progress(sim_rank *rs, int i) {
  static int shown = -1;
  FILE *prog = rs == sim_w->first ? sim_w->o->progress : NULL;
  if (!prog) return;
  if (i < 0) {
    fprintf(prog, "\r%60s\r", "");
    shown = -1;
  } else if (i * 20 / rs->prog->n != shown) {
    shown = i * 20 / rs->prog->n;
    fprintf(prog, "\rtacosim: simulating %d ranks: %3d%%", sim_w->n_simulated, shown * 5);
    fflush(prog);
  }
}

static void stream_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  stream_ctx *ctx = sg_actor_self_get_data();
  sim_rank *rs = ctx->rs;
  int s = ctx->stream;
  const plan_op *ops = rs->prog->ops;
  /* the first rank's compute stream reports progress (its ops span the iteration) */
  bool prog = s == PLAN_STREAM_COMPUTE;
  const int *mine = rs->stream_ops[s];
  int n_mine = rs->n_stream_ops[s];
  for (int x = 0; !sim_w->failed; x++) {
    /* the compute stream may have run this stream's next ops (run_for_idle_stream) */
    if (s != PLAN_STREAM_COMPUTE) x = rs->next_pos[s];
    if (x >= n_mine) break;
    int i = mine[x];
    /* the programs of all simulated ranks exceed the caches: fetch the ops ahead */
    if (x + 4 < n_mine) __builtin_prefetch(&ops[mine[x + 4]]);
    if (prog) sim_progress(rs, i);
    if (s != PLAN_STREAM_COMPUTE) {
      int d = sim_first_undone_dep(rs, i);
      if (d >= 0) { /* wait, then look again where this stream stands */
        rs->waiting[s] = d;
        sim_wake_pending(rs);
        sg_sem_acquire(rs->wake[s]);
        rs->waiting[s] = -1;
        continue;
      }
      rs->next_pos[s] = x + 1;
    } else
      for (int k = 0; k < PLAN_MAX_DEPS; k++)
        if (ops[i].dep[k] >= 0 && ops[i].dep[k] < i) wait_for(rs, s, ops[i].dep[k]);
    double t0 = simgrid_get_clock();
    if (ops[i].kind == PLAN_OP_COMPUTE) {
      sim_block b;
      if (sim_block_launch(rs, x, t0, &b)) break;
      if (b.total > 0) rs->compute_sleep_end = t0 + b.total;
      sim_wake_pending(rs);
      if (b.total > 0 && block_into_meeting(rs, x, b.y)) {
        rs->pending_s = b.total, rs->pending_end = t0 + b.total; /* (kernel_end stays: all of it is past by then) */
      } else if (b.total > 0) {
        sg_actor_sleep_for(b.total);
        rs->n_kernel_end = 0;
      }
      sim_block_end(rs, &b);
      x = b.y;
      continue;
    }
    sim_wake_pending(rs);
    if (run_comm_op(rs, s, x)) break;
    sim_finish(rs, s, i);
  }
  sim_wake_pending(rs);
  if (prog) sim_progress(rs, -1);
  double now = simgrid_get_clock();
  rs->st.stream_end_s[s] = now;
  if (s == PLAN_STREAM_COMPUTE) rs->st.compute_end_s = now;
  if (now > sim_w->end_s) sim_w->end_s = now;
  free(ctx);
}

/* ---- setup ---- */

/* rs's own program: checked, and what the actors derive from it (which ops
 * another stream waits on, each stream's op list) */
static int own_program(sim_world *w, sim_rank *rs, ts_err *e) {
  const plan *p = w->p;
  int r = rs->rank, n = rs->prog->n;
  rs->shape = rs;
  rs->cross = calloc((size_t)(n ? n : 1), 1);
  rs->dependent = malloc(sizeof *rs->dependent * (size_t)(n ? n : 1));
  if (!rs->cross || !rs->dependent) return ts_fail_sys(e, "out of memory");
  for (int i = 0; i < n; i++) rs->dependent[i] = -1;
  for (int i = 0; i < n; i++) {
    const plan_op *op = &rs->prog->ops[i];
    if (op->stream >= PLAN_STREAM_COUNT)
      return ts_fail(e, p->path, "program", "rank %d: op %d: stream %d out of range", r, i, op->stream);
    for (int k = 0; k < PLAN_MAX_DEPS; k++) {
      int d = op->dep[k];
      if (d >= i || d < -1)
        return ts_fail(e, p->path, "program", "rank %d: op %d: dependency %d is not an earlier op", r, i, d);
      if (d >= 0 && rs->prog->ops[d].stream != op->stream) {
        rs->cross[d] = 1;
        rs->dependent[d] = rs->dependent[d] == -1 || rs->dependent[d] == i ? i : -2;
      }
    }
  }
  for (int i = 0; i < n; i++) rs->n_stream_ops[rs->prog->ops[i].stream]++;
  for (int t = 0; t < PLAN_STREAM_COUNT; t++) {
    rs->stream_ops[t] = malloc(sizeof(int) * (size_t)(rs->n_stream_ops[t] ? rs->n_stream_ops[t] : 1));
    if (!rs->stream_ops[t]) return ts_fail_sys(e, "out of memory");
    rs->n_stream_ops[t] = 0;
  }
  for (int i = 0; i < n; i++) {
    int t = rs->prog->ops[i].stream;
    rs->stream_ops[t][rs->n_stream_ops[t]++] = i;
  }
  return 0;
}

/* rs runs shape's program, its peers shifted (plan_program_same_shifted) */
static void share_program(sim_rank *rs, sim_rank *shape) {
  rs->shape = shape;
  rs->prog = shape->prog;
  rs->peer_shift = rs->rank - shape->rank;
  rs->cross = shape->cross;
  rs->dependent = shape->dependent;
  for (int t = 0; t < PLAN_STREAM_COUNT; t++) {
    rs->stream_ops[t] = shape->stream_ops[t];
    rs->n_stream_ops[t] = shape->n_stream_ops[t];
  }
}

/* Programs differing beyond their peers that a stage keeps for its ranks to share (more: each keeps its own). */
#define SIM_SHAPES_PER_STAGE 4

/* rs's program, built here: one already kept for its stage when the same up to the peers, else its own */
static int program_of(sim_world *w, sim_rank *rs, sim_rank **shapes, ts_err *e) {
  plan_program built;
  if (plan_build_program(w->p, rs->rank, &built, e)) return -1;
  int k = 0;
  for (; k < SIM_SHAPES_PER_STAGE && shapes[k]; k++)
    if (plan_program_same_shifted(shapes[k]->prog, &built)) {
      plan_program_free(&built);
      share_program(rs, shapes[k]);
      return 0;
    }
  rs->prog = malloc(sizeof *rs->prog);
  if (!rs->prog) {
    plan_program_free(&built);
    return ts_fail_sys(e, "out of memory");
  }
  *rs->prog = built;
  if (own_program(w, rs, e)) return -1;
  if (k < SIM_SHAPES_PER_STAGE) shapes[k] = rs;
  return 0;
}

static int build_ranks(sim_world *w, ts_err *e) {
  const plan *p = w->p;
  /* refused before building (exit 2), not out of memory minutes later */
  if (!w->o->programs && plan_check_sim_size(p, w->o->mode == SIM_MODE_FULL ? w->world : p->pp, p->path, e)) return -1;
  w->ranks = calloc((size_t)w->world, sizeof *w->ranks);
  sim_rank **shapes = calloc((size_t)p->pp * SIM_SHAPES_PER_STAGE, sizeof *shapes);
  if (!w->ranks || !shapes) {
    free(shapes);
    return ts_fail_sys(e, "out of memory");
  }
  int rc = -1;
  for (int r = 0; r < w->world; r++) {
    plan_coord c = plan_coord_of(p, r);
    if (w->o->mode == SIM_MODE_REDUCED && (c.tp != 0 || c.dp != 0 || c.cp != 0)) continue;
    sim_rank *rs = calloc(1, sizeof *rs);
    if (!rs) {
      ts_fail_sys(e, "out of memory");
      goto done;
    }
    w->ranks[r] = rs;
    if (!w->first) w->first = rs;
    w->n_simulated++;
    rs->rank = r;
    if (w->o->programs) {
      rs->prog = &w->o->programs[r];
      if (own_program(w, rs, e)) goto done;
    } else if (c.pp < 0 || c.pp >= p->pp) {
      ts_fail(e, p->path, "layout", "rank %d: stage %d out of range", r, c.pp);
      goto done;
    } else if (program_of(w, rs, &shapes[(size_t)c.pp * SIM_SHAPES_PER_STAGE], e)) {
      goto done;
    }
    int n = rs->prog->n;
    rs->done = calloc((size_t)(n ? n : 1), 1);
    if (!rs->done) {
      ts_fail_sys(e, "out of memory");
      goto done;
    }
    for (int g = 0; g < PLAN_GROUP_COUNT; g++) {
      int cap = w->world;
      rs->members[g] = malloc(sizeof(int) * (size_t)cap);
      if (!rs->members[g]) {
        ts_fail_sys(e, "out of memory");
        goto done;
      }
      rs->n_members[g] = plan_group_members(p, r, (plan_group_kind)g, rs->members[g], cap);
      for (int k = 0; k < rs->n_members[g]; k++)
        if (rs->members[g][k] < 0 || rs->members[g][k] >= w->world) {
          ts_fail(e, p->path, "layout", "rank %d: group member %d out of range", r, rs->members[g][k]);
          goto done;
        }
    }
    for (int k = 0; k < SIM_XFER_SLOTS; k++) rs->xfer_op[k] = -1;
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) rs->waiting[s] = -1;
  }
  rc = 0;
done:
  free(shapes);
  return rc;
}

/* Every cost is looked up once before the run, so a missing or broken table
 * is reported as bad input instead of surfacing inside an actor. */
static int check_costs(sim_world *w, ts_err *e) {
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    /* in full mode the programs of one stage repeat; one rank per stage is enough */
    plan_coord c = plan_coord_of(w->p, r);
    if (w->o->mode == SIM_MODE_FULL && !w->o->programs && (c.tp != 0 || c.dp != 0 || c.cp != 0)) continue;
    for (int i = 0; i < rs->prog->n; i++) {
      const plan_op *op = &rs->prog->ops[i];
      double t;
      sim_codec_cost cc;
      int inc;
      if (op->kind == PLAN_OP_COMPUTE) {
        double gemm;
        if (sim_op_compute_s(w, op, &t, &gemm, e)) return -1;
      } else {
        const topo_cluster *cl = &w->p->cluster;
        int g = op->group < PLAN_GROUP_COUNT ? op->group : 0;
        int n = op->kind == PLAN_OP_COLLECTIVE ? rs->n_members[g] : 2;
        /* calibrated times serve transfers inside one node; the others are flows */
        int one_node = 1;
        if (op->kind == PLAN_OP_COLLECTIVE) {
          for (int k = 1; k < n; k++)
            one_node &= topo_node_of(cl, rs->members[g][k]) == topo_node_of(cl, rs->members[g][0]);
        } else {
          int peer = sim_op_peer(rs, op);
          one_node = peer >= 0 && topo_node_of(cl, peer) == topo_node_of(cl, r);
        }
        if (n > 1 && (sim_codec_cost_of(&w->costs, op, n, &cc, e) ||
                      (one_node && sim_coll_calibrated_s(&w->costs, op, n, &t, &inc, e))))
          return -1;
      }
    }
  }
  return 0;
}

static void configure_simgrid(void) {
  static int initialised;
  if (initialised) return;
  initialised = 1;
  int argc = 1;
  char arg0[] = "tacosim";
  char *argv[] = {arg0, NULL};
  xbt_log_control_set("root.thres:critical");
  simgrid_init(&argc, argv);
  /* GPU fabrics: full-duplex links, no TCP window (gamma) limit, no 5% of
   * reverse-direction traffic for acknowledgements, bandwidth and latency as
   * given (CM02 has no correction factors, unlike the default LV08). */
  sg_cfg_set_string("network/model", "CM02");
  sg_cfg_set_boolean("network/crosstraffic", "no");
  sg_cfg_set_double("network/TCP-gamma", 0.0);
  /* Small stacks without guard pages: actors here never recurse, and tens of
   * thousands of them are created (a guard page costs an mprotect each). */
#if defined(__SANITIZE_ADDRESS__)
  sg_cfg_set_int("contexts/stack-size", 1024);
#else
  sg_cfg_set_int("contexts/stack-size", 64);
#endif
  sg_cfg_set_int("contexts/guard-size", 0);
}

/* The hosts a simulated rank sends to or receives from: itself, its groups'
 * members, its peers (calloc'd, one byte per rank; NULL and *all set when
 * that is every rank). Reduced mode needs a small part of a large cluster:
 * the platform holds only these GPUs (the edge scales of the others' traffic
 * come from topo_route, sim_scale.c). */
static unsigned char *needed_hosts(sim_world *w, bool *all, ts_err *e) {
  size_t world = (size_t)(unsigned)w->world;
  unsigned char *need = calloc(world, 1);
  *all = false;
  if (!need) return ts_fail_sys(e, "out of memory"), NULL;
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    need[r] = 1;
    for (int g = 0; g < PLAN_GROUP_COUNT; g++)
      for (int k = 0; k < rs->n_members[g]; k++) need[rs->members[g][k]] = 1;
    for (int i = 0; i < rs->prog->n; i++)
      if (rs->prog->ops[i].kind == PLAN_OP_SEND || rs->prog->ops[i].kind == PLAN_OP_RECV) {
        int peer = sim_op_peer(rs, &rs->prog->ops[i]);
        if (peer < 0 || peer >= w->world) {
          free(need);
          return ts_fail(e, w->p->path, "program", "rank %d: op %d: peer %d out of range", r, i, peer), NULL;
        }
        need[peer] = 1;
      }
  }
  *all = true;
  for (int r = 0; r < w->world && *all; r++) *all = need[r];
  return need;
}

static int load_platform(sim_world *w, const unsigned char *need, bool all, ts_err *e) {
  if (w->o->platform_path) {
    if (access(w->o->platform_path, R_OK)) return ts_fail(e, w->o->platform_path, NULL, "cannot read platform");
    simgrid_load_platform(w->o->platform_path);
    return 0;
  }
  char path[] = "/tmp/tacosim-platform-XXXXXX.xml";
  int fd = mkstemps(path, 4);
  if (fd < 0) return ts_fail_sys(e, "cannot create a temporary platform file");
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(path);
    return ts_fail_sys(e, "cannot write a temporary platform file");
  }
  /* GPUs past the plan's ranks and GPUs no simulated rank talks to are left out */
  unsigned char *keep = NULL;
  int gpus = topo_total_gpus(&w->p->cluster);
  if (!all || gpus > w->world) {
    keep = calloc((size_t)gpus, 1);
    if (!keep) {
      fclose(f);
      unlink(path);
      return ts_fail_sys(e, "out of memory");
    }
    for (int r = 0; r < w->world; r++) keep[r] = need[r];
  }
  int rc = topo_write_platform_subset(&w->p->cluster, keep, f, e);
  free(keep);
  if (fclose(f) && !rc) rc = ts_fail_sys(e, "cannot write the platform file");
  if (!rc) simgrid_load_platform(path);
  unlink(path);
  return rc;
}

void sim_small_stack(sg_actor_t a) {
#if !defined(__SANITIZE_ADDRESS__)
  sg_actor_set_stacksize(a, 16); /* KiB */
#else
  (void)a;
#endif
}

static int start_actors(sim_world *w, const unsigned char *need, ts_err *e) {
  w->hosts = calloc((size_t)w->world, sizeof *w->hosts);
  w->pumps = calloc((size_t)w->world, sizeof *w->pumps);
  w->sinks = calloc((size_t)w->world, sizeof *w->sinks);
  if (!w->hosts || !w->pumps || !w->sinks) return ts_fail_sys(e, "out of memory");
  /* one pass over the host list (sg_host_by_name walks every zone: quadratic at 16k hosts) */
  sg_host_t *all = sg_host_list();
  size_t n_all = sg_host_count();
  for (size_t i = 0; i < n_all; i++) {
    const char *name = sg_host_get_name(all[i]);
    char *end;
    if (strncmp(name, "gpu", 3) != 0) continue;
    long r = strtol(name + 3, &end, 10);
    if (*end == '\0' && end != name + 3 && r >= 0 && r < w->world) w->hosts[r] = all[i];
  }
  free(all);
  for (int r = 0; r < w->world; r++)
    if (need[r] && !w->hosts[r])
      return ts_fail(e, w->p->cluster.name, "platform", "no host \"gpu%d\" for rank %d", r, r);
  if (w->o->mode == SIM_MODE_REDUCED)
    for (int r = 0; r < w->world; r++)
      if (w->ranks[r]) sim_scale_prepare(w->ranks[r]);
  if (!w->o->collapse_off) sim_collapse_prepare();
  /* reduced mode: a pump on every host whose flows a rank not simulated sends (with --collapse on, those a
   * flow that is not collapsed away leaves from: sim_collapse.c; the others get one when needed) */
  for (int r = 0; r < w->world; r++)
    if (need[r] && !w->ranks[r] && (w->o->collapse_off || sim_collapse_flows_from(r))) sim_pump_prepare(r);
  sim_sinks_prepare();
  /* the streams the simulator's own event queue runs (sim_local.c) get no actor */
  if (sim_local_setup(w, e)) return -1;
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    int has[PLAN_STREAM_COUNT] = {0};
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) has[s] = rs->n_stream_ops[s] > 0;
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) {
      rs->wake[s] = sg_sem_init(0);
      if (!has[s] || rs->local & 1u << s) continue;
      stream_ctx *ctx = malloc(sizeof *ctx);
      if (!ctx) return ts_fail_sys(e, "out of memory");
      ctx->rs = rs;
      ctx->stream = s;
      char name[48];
      snprintf(name, sizeof name, "r%d.%s", r, stream_names[s]);
      sg_actor_t a = sg_actor_init(name, w->hosts[r]);
      sg_actor_set_data(a, ctx);
      sg_actor_start(a, stream_main, 0, NULL);
    }
  }
  return 0;
}

/* ---- results ---- */

static int fill_result(sim_world *w, schema_result *out, ts_err *e) {
  const plan *p = w->p;
  schema_result_init(out, SCHEMA_SOURCE_SIMULATED);
  snprintf(out->plan, sizeof out->plan, "%s", p->path);
  snprintf(out->calibration, sizeof out->calibration, "%s", w->o->cal->path[0] ? w->o->cal->path : "(in memory)");
  snprintf(out->mode, sizeof out->mode, "%s", w->o->mode == SIM_MODE_FULL ? "full" : "reduced");
  snprintf(out->attention_backend, sizeof out->attention_backend, "%s", plan_attention_backend_name(p->attention_backend));
  out->cross_entropy_loss_fusion = p->ce_unfused ? -1 : 1;
  if (p->fp8_recipe != PLAN_FP8_OFF) snprintf(out->fp8, sizeof out->fp8, "%s", plan_fp8_recipe_names[p->fp8_recipe]);
  if (p->host_framework != PLAN_HOST_EXECUTOR)
    snprintf(out->host_framework, sizeof out->host_framework, "%s", plan_host_framework_names[p->host_framework]);
  out->hidden_dropout = p->hidden_dropout;
  out->alloc_reserve = plan_alloc_reserve(p);
  double T = w->end_s;
  out->iteration_time_s = T;
  if (T > 0) {
    out->tokens_per_s = (double)p->global_batch * p->seq / T;
    out->tflops_per_gpu = plan_model_flops(p) / T / plan_world_size(p) / 1e12;
    out->mfu = out->tflops_per_gpu / p->cluster.gpu.bf16_tflops;
  }
  if (out->mfu > 1.0) /* more model FLOPs than the GPUs can do: some op was priced below its ceiling */
    return ts_fail_sim(e,
                       "%s: predicted %.1f TFLOP/s per GPU is %.0f%% of the %s's %.0f TFLOP/s peak: the costs (%s) do "
                       "not belong to this GPU; refusing to report it",
                       p->path, out->tflops_per_gpu, 100 * out->mfu, p->cluster.gpu.name, p->cluster.gpu.bf16_tflops,
                   out->calibration);
  plan_memory mem;
  if (plan_memory_per_gpu(p, &mem) == 0) out->memory_per_gpu_bytes = mem.total;
  int n = 0;
  schema_breakdown *b = &out->breakdown;
  if (w->clock) sim_clock_duties(w);
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    sim_rank_stats *st = &rs->st;
    /* after its last compute op a rank waits for its DP reduction, then for the others */
    double tail = T - st->compute_end_s, dp_tail = st->stream_end_s[PLAN_STREAM_DP] - st->compute_end_s;
    if (dp_tail < 0) dp_tail = 0;
    if (dp_tail > tail) dp_tail = tail;
    double dp = st->dp_s + dp_tail, bubble = st->bubble_s + (tail - dp_tail);
    b->compute_s += st->compute_s;
    b->tp_exposed_s += st->tp_s;
    b->pp_exposed_s += st->pp_s;
    b->dp_exposed_s += dp;
    b->codec_s += st->codec_s;
    b->bubble_s += bubble;
    b->ep_exposed_s += st->ep_s;
    b->cp_exposed_s += st->cp_s;
    b->imbalance_s += st->imbalance_s;
    b->host_wait_s += st->host_s;
    schema_rank_stat rst = {.rank = r, .busy_s = T - bubble, .compute_s = st->compute_s, .comm_s = st->comm_s};
    if (w->clock) {
      rst.clock_duty = rs->clock_rep->clock_duty;
      rst.clock_gemm_speed = rs->gemm_speed;
      rst.clock_mem_speed = rs->mem_speed;
      rst.clock_cycle_us = rs->clock_rep->clock_cycle_us;
      if (w->clock_power) {
        rst.clock_mhz = rs->clock_rep->clock_mhz;
        rst.clock_next_gemm_speed = rs->clock_rep->clock_next_gemm_speed;
        rst.clock_next_mem_speed = rs->clock_rep->clock_next_mem_speed;
      }
    }
    if (schema_result_add_rank(out, &rst)) return ts_fail_sys(e, "out of memory");
    for (int k = 0; k < rs->n_recs; k++)
      if (schema_result_add_op(out, &rs->recs[k])) return ts_fail_sys(e, "out of memory");
    n++;
  }
  if (n) {
    b->compute_s /= n, b->tp_exposed_s /= n, b->pp_exposed_s /= n, b->dp_exposed_s /= n;
    b->codec_s /= n, b->bubble_s /= n;
    b->ep_exposed_s /= n, b->imbalance_s /= n, b->cp_exposed_s /= n, b->host_wait_s /= n;
  }
  char note[256];
  if (w->o->cal->derived && strncmp(w->o->cal->notes, "transferred", 11) != 0) /* a transfer says so in its own note */
    schema_result_add_note(out, "calibration is derived (roofline from DESIGN.md figures), not measured");
  if (!w->costs.intra_calibrated) {
    snprintf(note, sizeof note,
             "intra-node collectives use the topology's %s figures (alpha-beta): the calibration measured \"%s\"",
             sim_transport_of(p->cluster.intra.kind), w->o->cal->transport);
    schema_result_add_note(out, note);
  }
  if (w->used_platform_links)
    schema_result_add_note(out, "inter-node transfers use the topology's link bandwidths and latencies (not calibrated)");
  if (w->used_tree) schema_result_add_note(out, "some cross-node all-reduces ran as trees (NCCL's alpha-beta choice)");
  if (w->used_platform_links) {
    long long asked, run;
    sim_collapse_counts(&asked, &run);
    if (w->o->collapse_off)
      snprintf(note, sizeof note, "collapse off: every edge of a cross-node collective ran as its own flow");
    else
      snprintf(note, sizeof note,
               "collapse on: the cross-node ring and tree phases ran %lld flows for %lld edges (of the groups of "
               "flows only their own collective can meet, one of each kind; --collapse off: every edge)",
               run, asked);
    schema_result_add_note(out, note);
  }
  if (w->o->alltoall_analytic) {
    snprintf(note, sizeof note,
             "alltoall analytic (approximate): %lld cross-node all-to-all calls of the simulated ranks took the time "
             "max-min sharing gives them alone on their links, without flows (--alltoall flows: every pair's flow)",
             w->a2a_analytic);
    schema_result_add_note(out, note);
  }
  if (w->o->mode == SIM_MODE_REDUCED) {
    snprintf(note, sizeof note,
             "reduced mode: %d representative ranks (tp 0, dp 0 of each stage) stand for %d; ranks[] lists them", n,
             w->world);
    schema_result_add_note(out, note);
  }
  return 0;
}

static void free_world(sim_world *w) {
  sim_cost_memo_free(&w->memo);
  sim_local_free();
  sim_scale_free();
  sim_collapse_free();
  sim_clock_free(w);
  for (unsigned h = 0; h < sizeof w->buckets / sizeof w->buckets[0]; h++)
    while (w->buckets[h]) {
      sim_rendezvous *rv = w->buckets[h];
      w->buckets[h] = rv->next;
      free(rv);
    }
  for (int r = 0; w->ranks && r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    bool owns = rs->shape == rs || !rs->shape; /* (a rank that failed before its program was set owns nothing) */
    if (!w->o->programs && rs->prog && owns) {
      plan_program_free(rs->prog);
      free(rs->prog);
    }
    /* (with the clock model this process never ran the actors that wait on them) */
    for (int s = 0; s < PLAN_STREAM_COUNT; s++)
      if (rs->wake[s]) sg_sem_destroy(rs->wake[s]);
    free(rs->done);
    free(rs->recs);
    free(rs->kernel_end);
    for (int g = 0; g < PLAN_GROUP_COUNT; g++) free(rs->members[g]);
    if (owns) {
      free(rs->cross);
      free(rs->dependent);
      for (int t = 0; t < PLAN_STREAM_COUNT; t++) free(rs->stream_ops[t]);
    }
    free(rs);
  }
  free(w->ranks);
  free(w->hosts);
  for (size_t i = 0; w->pumps && i < (size_t)w->world; i++) sim_pump_free(w->pumps[i]);
  free(w->pumps);
  free(w->sinks); /* the mailboxes are SimGrid's */
  free(w);
}

int sim_engine_pass(sim_world *w, schema_result *out, ts_err *e) {
  const plan *p = w->p;
  simgrid_run();
  if (w->failed) {
    *e = w->err;
    return -1;
  }
  for (int r = 0; r < w->world; r++)
    if (w->ranks[r])
      for (int i = 0; i < w->ranks[r]->prog->n; i++)
        if (!w->ranks[r]->done[i]) {
          char name[96];
          op_name(w->ranks[r], &w->ranks[r]->prog->ops[i], name, sizeof name);
          return ts_fail_sim(e, "%s: rank %d never finished op %d (%s): the simulated ranks deadlock (%s)", p->path,
                             r, i, name,
                             w->o->programs ? "the programs given do not match"
                                            : "a bug in tacosim, not in the plan");
        }
  return fill_result(w, out, e);
}

int sim_run(const plan *p, const sim_options *o, schema_result *out, ts_err *e) {
  static int ran;
  schema_result_init(out, SCHEMA_SOURCE_SIMULATED);
  if (ran) return ts_fail_sys(e, "sim_run: SimGrid runs one simulation per process (use sim_run_isolated)");
  ran = 1;
  if (!o->cal) return ts_fail_sys(e, "sim_run: no calibration");
  sim_world *w = calloc(1, sizeof *w);
  if (!w) return ts_fail_sys(e, "out of memory");
  sim_w = w;
  w->p = p;
  w->o = o;
  w->world = plan_world_size(p);
  int rc = -1;
  unsigned char *need = NULL;
  if (w->world < 1 || w->world > (1 << 24)) {
    ts_fail(e, p->path, "layout", "dp x tp x pp = %d ranks is out of range", w->world);
    goto done;
  }
  if (w->world > topo_total_gpus(&p->cluster)) {
    ts_fail(e, p->path, "layout", "%d ranks but the cluster has %d GPUs", w->world, topo_total_gpus(&p->cluster));
    goto done;
  }
  if (sim_costs_init(&w->costs, p, o->cal, o->warn, e) || build_ranks(w, e) || check_costs(w, e)) goto done;
  if (sim_host_setup(&w->host, p, o->cal, e)) goto done;
  for (int r = 0; w->host.fw && r < w->world; r++)
    if (w->ranks[r])
      sim_host_fw_entry_rates(&w->host, p, w->costs.mops, w->costs.n_mops, w->ranks[r]->prog, w->ranks[r]->fw_rate_s);
  sim_clock_model model;
  if (sim_clock_model_resolve(o, &model, e)) goto done;
  w->clock = model != SIM_CLOCK_MODEL_OFF, w->clock_power = model == SIM_CLOCK_MODEL_POWER;
  if (w->clock && sim_clock_setup(w, e)) goto done;
  configure_simgrid();
  bool all_needed;
  need = needed_hosts(w, &all_needed, e);
  if (!need || load_platform(w, need, all_needed, e)) goto done;
  /* A run without actors seals the platform (routes can be asked from here
   * on) and returns at time 0; the simulations run later, from that state. */
  simgrid_run();
  if (start_actors(w, need, e)) goto done;
  /* the clock model runs the simulation set up here several times, each in a forked child */
  rc = w->clock ? sim_clock_run(w, out, e) : sim_engine_pass(w, out, e);
done:
  free(need);
  free_world(w);
  sim_w = NULL;
  return rc;
}
