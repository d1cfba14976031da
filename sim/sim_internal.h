/* sim_internal.h — state shared by the engine's files (not a public API). */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#include <simgrid/forward.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_host.h"

/* Time the compute stream spent waiting, by cause. */
typedef struct {
  double compute_s, tp_s, pp_s, dp_s, bubble_s, codec_s, comm_s;
  double cp_s; /* (context parallelism) waits on the KV ring's exchanges */
  double ep_s, imbalance_s; /* (MoE) waits on the token all-to-alls; the imbalance wait (out of compute_s) */
  double host_s;            /* (host clock) the compute stream idle until its host issued the kernels (out of compute_s) */
  double compute_end_s, stream_end_s[PLAN_STREAM_COUNT];
} sim_rank_stats;

typedef struct sim_rank_s {
  int rank;
  /* Its program, and what is derived from it (cross, stream_ops): its own, or
   * in full mode those of `shape`, a rank of its stage whose program is the
   * same up to the peers of sends and receives, which are this rank's at
   * peer_shift from shape's (plan_program_same_shifted; read them with
   * sim_op_peer). 1,024 ranks x 33k ops of 104 bytes were 3.5 GB. */
  plan_program *prog;
  struct sim_rank_s *shape; /* whose program this is: itself when it owns it */
  int peer_shift;
  uint8_t *done;  /* per op: finished */
  uint8_t *cross; /* per op: an op of another stream depends on it */
  int32_t *dependent; /* per op: the one op of another stream that depends on it (-1: none, -2: several) */
  int32_t waiting[PLAN_STREAM_COUNT];
  sg_sem_t wake[PLAN_STREAM_COUNT];
  /* streams run by the simulator's own event queue instead of a SimGrid actor (sim_local.c), and their state */
  uint8_t local;
  struct sim_local_stream *lstream[PLAN_STREAM_COUNT];
  uint8_t wake_pending; /* streams the compute stream woke, released when it next blocks (sim_engine.c) */
  /* each stream's next op (position in stream_ops): the compute stream may run another stream's in-node
   * collective itself when that stream sits waiting for it (sim_engine.c's run_for_idle_stream) */
  int next_pos[PLAN_STREAM_COUNT];
  int coll_seq[PLAN_GROUP_COUNT][PLAN_STREAM_COUNT];
  /* when the transfers of the latest receives started (bubble vs. exposed transfer) */
#define SIM_XFER_SLOTS 8
  int xfer_op[SIM_XFER_SLOTS];
  double xfer_start[SIM_XFER_SLOTS];
  int n_xfer;
  int *stream_ops[PLAN_STREAM_COUNT]; /* indices of each stream's ops, in program order */
  int n_stream_ops[PLAN_STREAM_COUNT];
  struct sim_scale_cache *scales;     /* reduced mode: this rank's edge scale factors (sim_scale.c) */
  /* each group's collectives on each stream: the call class whose private edges collapse (sim_collapse.c) */
  struct sim_collapse_class *collapse[PLAN_GROUP_COUNT][PLAN_STREAM_COUNT];
  int *members[PLAN_GROUP_COUNT]; /* group members in ring order */
  int n_members[PLAN_GROUP_COUNT];
  /* each group's lowest member, how many members are simulated, whether all sit on one node (sim_comm.c,
   * on the group's first collective) */
  uint8_t group_known[PLAN_GROUP_COUNT], group_one_node[PLAN_GROUP_COUNT];
  int group_leader[PLAN_GROUP_COUNT], group_simulated[PLAN_GROUP_COUNT];
  /* the worst route latency and bandwidth among each group's ring edges (sim_comm.c), once known */
  uint8_t ring_route_known[PLAN_GROUP_COUNT];
  double ring_latency_s[PLAN_GROUP_COUNT], ring_bw[PLAN_GROUP_COUNT];
  /* per stream: its latest cross-node all-reduce ran NCCL's tree (else the ring; a trace event's source) */
  uint8_t flow_tree[PLAN_STREAM_COUNT];
  /* --alltoall analytic (sim_scale.c): per group, the all-to-all's seconds per byte of an edge and its latency */
  uint8_t a2a_known[PLAN_GROUP_COUNT];
  double a2a_s_per_byte[PLAN_GROUP_COUNT], a2a_latency_s[PLAN_GROUP_COUNT];
  sim_rank_stats st;
  double host_t; /* the host clock (sim_host.h): when this rank's host issues its next launch */
  /* under a framework's host time (sim_host.fw): its rates per queue entry of this program's layer ops
   * (sim_host_fw_entry_rates), and the program index up to which its communication calls were charged */
  sim_host_fw_rates fw_rate_s;
  int fw_next;
  /* the compute block running now: end time of each of its ops (in order) */
  double compute_sleep_end; /* the running compute block's end (the compute stream sleeps until then) */
  /* a compute block's sleep not slept (sim_engine.c's block_into_meeting): the in-node collective the compute
   * stream runs next joins its meeting at pending_end = launch + pending_s, and the meeting sleeps it */
  double pending_s, pending_end;
  double *kernel_end;
  int n_kernel_end, cap_kernel_end;
  schema_op_record *recs; /* trace records when asked */
  int n_recs, cap_recs;
  /* the clock model (sim_clock.c); unused when it is off */
  double gemm_speed, mem_speed;  /* this rank's compute ops run this much faster (1: calibrated) */
  double prev_gemm_speed, prev_mem_speed; /* the speeds of the simulation before (convergence estimate) */
  struct sim_rank_s *clock_rep;  /* whose duty sets the speeds: itself, or its stage's tp 0, dp 0 */
  double *clock_log;             /* (start, duration, GEMM part of the duration) of each compute op, on
                                  * clock_rep == itself (SIM_CLOCK_LOG_STRIDE doubles an op) */
  int n_clock_log, cap_clock_log;
  double *clock_comm_log;        /* (start, duration) of its collectives that copy with SMs (NVLink) */
  int n_clock_comm_log, cap_clock_comm_log;
  double clock_duty;             /* its GPU's duty, from clock_log and clock_comm_log */
  /* the power-cap clock model (a "power" section): the GPU's compute-time-weighted mean clock over its ops'
   * windows, and the speeds that timeline gives (the next simulation runs at them) */
  double clock_mhz, clock_next_gemm_speed, clock_next_mem_speed;
  double clock_cycle_us;         /* its busy/idle alternation: iteration / idle gaps */
} sim_rank;

/* The rank a send or receive of rs's program goes to (-1: none). */
static inline int sim_op_peer(const sim_rank *rs, const plan_op *op) {
  return op->peer < 0 ? op->peer : op->peer + rs->peer_shift;
}

typedef struct sim_world sim_world;


/* One instance of a collective or of a send/recv pair, shared by the
 * simulated members that take part. */
typedef struct sim_rendezvous {
  long long key[4];
  struct sim_rendezvous *next;
  int expected, arrived, left, ended;
  sg_sem_t start_sem, end_sem, flow_sem;
  sg_bar_t meet; /* timed_meeting's barrier (sim_comm.c) */
  int transient; /* flows launched by helper actors for members not simulated */
  int flows_left; /* of those, still in flight */
  double start_s;
  double xfer_start_s;
  /* a collective inside a node (sim_comm.c's timed_meeting): the time the members asked for so far, whether
   * they all asked for the same (1) or not (-1), whether the last one slept it for everyone, and the latest
   * arrival so far (a member may join before it arrives: its wait for the SMs is slept by the meeting) */
  double timed_s, meet_start;
  int timed_same, timed_slept;
  struct sim_local_stream *local_members; /* the local streams waiting in the meeting, in joining order, or the
                                           * local receive waiting for its send (sim_local.c) */
} sim_rendezvous;

struct sim_world {
  const plan *p;
  const sim_options *o;
  sim_costs costs;
  sim_cost_memo memo;
  int world;
  sim_rank **ranks;     /* [world]; NULL when the rank is not simulated */
  sim_rank *first;      /* the lowest simulated rank (reports progress) */
  int n_simulated;
  sg_host_t *hosts;     /* [world] */
  struct sim_pump **pumps; /* [world]: each host's pumps (sim_comm.c) */
  sg_mailbox_t *sinks;     /* [world]: the mailbox where all-to-all flows to the host go, or NULL (sim_comm.c) */
  sim_rendezvous *buckets[8192];
  double end_s;
  int failed;
  ts_err err;
  int used_platform_links; /* some flow crossed nodes (inter-node bandwidths from the topology) */
  int used_tree;
  long long a2a_analytic; /* cross-node all-to-alls priced by --alltoall analytic (calls of simulated ranks) */
  bool clock; /* the clock model is on: compute ops run at each rank's speeds, and are logged */
  bool clock_power; /* ... and it is the power-cap one (the calibration's "power" section), else the duty's */
  sim_host host; /* the host clock (off without a "host" section or a plan figure) */
};

extern sim_world *sim_w; /* the one simulation of this process */

/* sim_comm.c */
void sim_run_collective(sim_rank *rs, int stream, int op_index);
void sim_run_sendrecv(sim_rank *rs, int op_index);
sg_comm_t sim_sendto_async(sg_host_t from, sg_host_t to, double bytes); /* sim_sendto.cpp */
void sim_pump_main(int argc, char **argv);
typedef struct sim_pump sim_pump;
void sim_pump_free(sim_pump *pump); /* at the end, with the actors gone */
void sim_pump_prepare(int host_rank); /* the first pump of a host whose flows are sent for a rank not simulated */
void sim_sinks_prepare(void); /* a sink on every host a simulated rank's cross-node all-to-all sends to */
/* sim_engine.c: the stack of a pump actor, which only waits on SimGrid calls: 16 KiB (the contexts' 64 KiB
 * would hold 2 GB for the 32,768 of them on 131,072 GPUs in reduced mode); the sanitizer build keeps its
 * large default. */
void sim_small_stack(sg_actor_t a);
sim_rendezvous *sim_rendezvous_get(long long a, long long b, long long c, long long d, int expected);
void sim_rendezvous_leave(sim_rendezvous *rv);
void sim_fail(const ts_err *e);

/* sim_comm.c: the pieces of an in-node collective that sim_local.c shares with sim_run_collective */
typedef enum { SIM_PRE_NONE, SIM_PRE_SMS, SIM_PRE_IDLE_COMPUTE, SIM_PRE_BESIDE } sim_coll_pre;
/* what the collective op waits for before it meets: nothing, the running kernel's SMs, the compute stream
 * running dry, or (shm) a delay beside the running kernel */
sim_coll_pre sim_comm_pre(sim_rank *rs, const plan_op *op);
/* whether the compute stream cannot launch a kernel at `now` (a stream at a collective need not let it first) */
bool sim_comm_compute_cannot_launch(const sim_rank *rs, int stream, double now);
double sim_comm_kernel_left(const sim_rank *rs, double now); /* what the running compute kernel has left */
double sim_comm_head_start_s(const plan_op *op, bool one_node);
double sim_comm_beside_delay_s(double left); /* SIM_PRE_BESIDE's delay (slept when > 0) */
bool sim_comm_joins_early(double now, double wait, double t);
bool sim_comm_group_on_one_node(sim_rank *rs, int g);
/* an in-node collective's calibrated time with its codec kernels (cc from sim_codec_cost_of) */
int sim_comm_in_node_s(const plan_op *op, int n, const sim_codec_cost *cc, double *t, ts_err *e);
void sim_comm_note(sim_rank *rs, double dur, double codec);
/* send/recv, shared by sim_run_sendrecv and sim_local.c: the rendezvous (NULL: failed), an in-node move's end,
 * the mover's end (wakes a waiting receiver), the op's end (a receive's transfer start; leaves) */
sim_rendezvous *sim_comm_sendrecv_rv(sim_rank *rs, int i, bool *mover);
double sim_comm_sendrecv_in_node_end(sim_rank *rs, const plan_op *op, sim_rendezvous *rv, double t0,
                                     double *codec_s);
void sim_comm_sendrecv_moved(sim_rank *rs, sim_rendezvous *rv, double dur, double codec_s);
void sim_comm_sendrecv_leave(sim_rank *rs, int i, sim_rendezvous *rv);

/* sim_engine.c: what a stream does, shared by its SimGrid actor (stream_main) and sim_local.c */
/* A compute block launched at t0: from position x of the compute stream to y (merged ops after x). */
typedef struct {
  double t0, total, imbalance, host_wait;
  int x, y, merged;
} sim_block;
/* Merges the compute ops from position x that nobody else waits on, prices them (host clock, clock model)
 * and notes their kernels' ends; -1 when the simulation failed. */
int sim_block_launch(sim_rank *rs, int x, double t0, sim_block *b);
/* The block's end: its times in the rank's stats, its record, its ops finished. */
void sim_block_end(sim_rank *rs, const sim_block *b);
void sim_finish(sim_rank *rs, int s, int i); /* op i of stream s is done: wakes the stream waiting on it */
void sim_wake_pending(sim_rank *rs);          /* wakes the SimGrid streams the compute stream finished ops for */
int sim_first_undone_dep(const sim_rank *rs, int i);
void sim_account_wait(sim_rank *rs, int d, double t0, double t1);
/* a communication op's record and clock log once it ended, t0 when the stream reached it; -1 when failed */
int sim_comm_op_done(sim_rank *rs, int s, int x, double t0, double end);
void sim_progress(sim_rank *rs, int i); /* the first rank's compute stream reports progress */

/* sim_local.c: the simulator's own event queue for in-node work (sim/README.md, "Speed") */
/* Chooses the streams it runs (after the platform is loaded) and starts its driver actor; false when none. */
int sim_local_setup(sim_world *w, ts_err *e);
bool sim_local_runs(const sim_rank *rs, int s);
/* Stream s of rs (a local one) may go on: its dependency is done (at the driver's time, or SimGrid's). */
void sim_local_wake(sim_rank *rs, int s);
void sim_local_wake_stream(struct sim_local_stream *ls); /* (a receive waiting in a rendezvous's local_members) */
/* A SimGrid semaphore release: deferred while the driver runs an instant's events (no SimGrid call inside). */
void sim_local_release(sg_sem_t sem);
void sim_local_free(void);

/* sim_engine.c: a compute op's calibrated time and its GEMM part (memoised) */
int sim_op_compute_s(sim_world *w, const plan_op *op, double *s, double *gemm_s, ts_err *e);
/* sim_engine.c: runs the simulation set up in sim_w to its end and fills *out */
int sim_engine_pass(sim_world *w, schema_result *out, ts_err *e);

/* sim_clock.c: the clock model (sim/README.md) */
#define SIM_CLOCK_LOG_STRIDE 3
/* The power-cap model's window when the calibration has no clock section to give one (us): the shipped
 * clock sections' window, 100 ms (calibration/README.md, "clock"). */
#define SIM_POWER_WINDOW_US 100000.0
/* Chooses each rank's clock_rep and sets speeds to 1 (after build_ranks). */
int sim_clock_setup(sim_world *w, ts_err *e);
/* A compute op of d seconds (gemm_s of it in GEMMs/attention) at the rank's
 * speeds, logged from `start` when the rank keeps a log. */
double sim_clock_op(sim_rank *rs, double start, double d, double gemm_s);
/* A collective or send/recv of d seconds from `start`: logged as GPU-busy
 * time when its transport copies with SMs at full speed (sim_comm_draws_power). */
int sim_clock_comm(sim_rank *rs, double start, double d);
/* sim_comm.c: whether the op moves its data with SM or copy-engine kernels
 * at NVLink speed inside one node (its kernels draw power like compute),
 * not through host memory or a network. */
bool sim_comm_draws_power(sim_rank *rs, const plan_op *op);
/* sim_comm.c: whether the op is a collective whose group sits on one node (a calibrated time, no flows) */
bool sim_comm_in_node(sim_rank *rs, const plan_op *op);
/* What priced communication op `op` of rs, which just ran (a trace event's "source", sim_costs.h's
 * sim_comm_source): the calibrated transfer inside a node, else the SimGrid flows it ran on the platform's links
 * (ring, NCCL's tree, all-to-all, one flow a message) or the analytic all-to-all; and its codec's kernels. */
void sim_comm_op_source(sim_rank *rs, const plan_op *op, char *out, size_t cap);
/* Each logged rank's duty (after the run), for fill_result. */
void sim_clock_duties(sim_world *w);
/* Passes until the iteration time settles, each in a forked child. */
int sim_clock_run(sim_world *w, schema_result *out, ts_err *e);
void sim_clock_free(sim_world *w);

/* sim_report.c: fn(arg, out, e) in a forked child; its result comes back as JSON */
int sim_fork_result(int (*fn)(void *arg, schema_result *out, ts_err *e), void *arg, schema_result *out,
                    ts_err *e);

/* sim_scale.c: reduced-mode scale factor of a representative's edge */
double sim_edge_scale(sim_rank *rs, int gkind, int alg, int edge_src, int edge_dst, int nedges_hint);
/* Computes, before the run, the factors every cross-node op of rs may ask for
 * (so that each simulation of the clock model, a forked child, finds them). */
void sim_scale_prepare(sim_rank *rs);
/* --alltoall analytic: the time of a cross-node all-to-all of group gkind whose every edge carries edge_bytes,
 * as max-min sharing gives it to the all-to-alls of the rank's stage alone on the platform (sim_scale.c) */
double sim_alltoall_analytic_s(sim_rank *rs, int gkind, double edge_bytes);
void sim_scale_free(void);

/* sim_collapse.c: the private edges of ring and tree phases run as one flow per kind (--collapse on) */
struct sim_collapse_class;
/* Before the simulations (platform sealed): which edges of each call class are alone on their links. */
void sim_collapse_prepare(void);
/* Compacts the edges of one phase of class c's algorithm alg (a sim_alg) to those that must run; returns
 * their count (ne when nothing collapses, or with --collapse off). */
/* Whether a flow that is never collapsed away can leave from this host (its pump is made before the
 * simulations; others only if a flow needs them). */
bool sim_collapse_flows_from(int host_rank);
int sim_collapse_edges(const struct sim_collapse_class *c, int alg, int *src, int *dst, double *bytes, int ne);
/* Flows the phases asked for and flows run, in this process's simulations so far. */
void sim_collapse_counts(long long *asked, long long *run);
void sim_collapse_free(void);

#endif
