/* exec_timed.c — timed iterations of a plan on the GPUs: warm-up, N timed
 * iterations (CUDA events around each whole iteration, so per-op events do not
 * disturb the figure), then one profiled iteration with an event between every
 * two ops for the per-op breakdown. Writes the result in the simulator's
 * schema (schema/result.h, source "measured"). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_core.h"
#include "exec_flash.h"
#include "exec_model.h"
#include "exec_run.h"
#include "exec_walk.h"
#include "ops_variants.h"
#include "result.h"

#define H200_BF16_PEAK_TFLOPS 989.0 /* datasheet dense BF16, the MFU denominator */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static const char *phase_name(int phase) {
  switch (phase) {
  case PLAN_PHASE_FWD: return "fwd";
  case PLAN_PHASE_BWD: return "bwd";
  case PLAN_PHASE_RECOMPUTE: return "recompute";
  default: return "optimizer";
  }
}

/* The executor's name of layer op index i of the plan's model (the ops the
 * model has, in forward order: rope, the dense FFN's and the MoE ops shift the later ones). */
static exec_ref_config breakdown_cfg; /* set once per run, before the breakdown is built */
static const char *layer_op_name(int i) {
  const exec_ref_config *c = &breakdown_cfg;
  for (int k = 0, next = 0; k < EXEC_OP_COUNT; k++) {
    exec_layer_op o = exec_layer_fwd_order[k];
    if (!exec_layer_op_present(o, c->rope_theta > 0, c->qk_norm, c->experts > 0, c->dense_layers, c->shared_ffn > 0,
                               exec_ref_is_mla(c)))
      continue;
    if (next++ == i) return exec_layer_op_names[o];
  }
  return "grads";
}

/* Name without layer and micro-batch ("fwd.attn_out.allreduce"): the key of the breakdown. */
static void op_kind_name(const plan_op *op, char *buf, size_t cap) {
  const char *what;
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING: what = "embedding"; break;
  case PLAN_MOP_LOSS: what = "output_loss"; break;
  case PLAN_MOP_OPTIMIZER: what = "adamw"; break;
  case PLAN_MOP_MLA_KV_SCATTER: what = "kv_scatter"; break;
  default: what = op->model_op >= 0 && op->model_op < EXEC_OP_COUNT ? layer_op_name(op->model_op) : "grads";
  }
  if (op->kind == PLAN_OP_COLLECTIVE && (op->group == PLAN_GROUP_EP || op->group == PLAN_GROUP_EDP))
    snprintf(buf, cap, "%s.%s.%s", phase_name(op->phase), op->group == PLAN_GROUP_EP ? "moe_tokens" : "expert_grads",
             op->group == PLAN_GROUP_EP ? "ep_alltoall" : "edp_allreduce"); /* MoE: the token exchange, expert-DP */
  else if (op->kind == PLAN_OP_COLLECTIVE)
    snprintf(buf, cap, "%s.%s.%s_allreduce", phase_name(op->phase), what, op->group == PLAN_GROUP_DP ? "dp" : "tp");
  else if (op->row_chunks > 1) /* tp_overlap_chunks: each chunk's GEMM apart (the first runs alone) */
    snprintf(buf, cap, "%s.%s.rows%dof%d", phase_name(op->phase), what, op->row_chunk + 1, op->row_chunks);
  else
    snprintf(buf, cap, "%s.%s", phase_name(op->phase), what);
}

static void op_full_name(const plan_op *op, char *buf, size_t cap) {
  char kind[64];
  op_kind_name(op, kind, sizeof kind);
  if (op->layer >= 0) snprintf(buf, cap, "layer%d.mb%d.%s", op->layer, op->micro, kind);
  else if (op->micro >= 0) snprintf(buf, cap, "mb%d.%s", op->micro, kind);
  else snprintf(buf, cap, "%s", kind);
}

typedef struct {
  char name[96];
  int count;
  double seconds;
  int is_comm, is_dp;
} op_bucket;

/* Adds seconds to the bucket named key (creating it); counts an op when count_op. */
static int add_bucket(op_bucket *b, int n, const char *key, double seconds, int count_op) {
  int i = 0;
  while (i < n && strcmp(b[i].name, key)) i++;
  if (i == n) {
    memset(&b[i], 0, sizeof b[i]);
    snprintf(b[i].name, sizeof b[i].name, "%s", key);
    n++;
  }
  b[i].count += count_op;
  b[i].seconds += seconds;
  return n;
}

static int bucket_cmp(const void *a, const void *b) {
  double x = ((const op_bucket *)a)->seconds, y = ((const op_bucket *)b)->seconds;
  return (x < y) - (x > y);
}

/* What the steps of one timed run share: the layout, the model and its
 * program, the iteration times, the profiled iteration and its breakdown. */
typedef struct {
  rt_nccl *w;
  const exec_plan_min *p;
  const exec_timed_opts *o;
  int rank, world, root, micros, total_iters;
  int tp_rank, dp_rank, pp_rank;
  ncclComm_t tp_comm, dp_comm, pp_comm, emb_comm;
  ncclComm_t ep_comm, edp_comm; /* expert parallelism: the EP group (dp_comm when ep = dp), expert-DP */
  exec_ref_config cfg;
  exec_model m;
  int model_made;
  exec_walk wk;
  plan_op *builtin_ops;
  const plan_op *ops;
  int nops;
  int32_t *tok, *lab;
  cudaEvent_t *ev, *prof;
  double *times, *op_s, *wg_s, *tpx_s, *tpx_start;
  float loss;
  exec_gemm_stats gemm_warm; /* the GEMM plans built before the timed iterations */
  double profiled, stats[3]; /* profiled iteration; min, median, max of the timed ones (slowest rank) */
  op_bucket *buckets;
  int nbuckets;
  /* compute-stream time of the profiled iteration and its exposed waits */
  double compute_s, tp_s, dp_s, pp_s, tp_stream_s;
  int n_tp;
  double *rank_stats; /* [busy, compute, comm] per rank */
  double *rank_mem;   /* [stage, activation slots, activation bytes, GPU memory in use, boundary buffers] per rank */
  double flops_megatron, flops_model, tflops; /* per iteration; TFLOP/s per GPU at the median */
  size_t free_b, total_b;                     /* GPU memory */
  schema_result res;
} timed_run;

/* The layout's checks and this rank's place in it, as the plan numbers ranks (its order field). */
static int timed_place(timed_run *t, ts_err *e) {
  const exec_plan_min *p = t->p;
  if (t->w->nlocal != 1) return ts_fail(e, p->path, "layout", "run one process per GPU (mpirun -np %d)", p->tp * p->dp);
  if (t->world != p->tp * p->dp * p->pp)
    return ts_fail(e, p->path, "layout", "dp x tp x pp = %d, but %d processes were started", p->tp * p->dp * p->pp,
                   t->world);
  if (p->pp > 1 && !t->o->program_plan)
    return ts_fail(e, p->path, "layout.pp", "the built-in program is PP = 1 only (use --program plan)");
  plan_coord at = {.dp = t->rank / p->tp, .tp = t->rank % p->tp, .pp = 0};
  if (p->pp > 1) {
    plan *full = malloc(sizeof *full);
    if (!full) return ts_fail_sys(e, "exec: out of memory");
    int bad = plan_load(p->path, NULL, NULL, full, e) && plan_load(p->path, "models", "topologies", full, e);
    if (!bad) at = plan_coord_of(full, t->rank);
    free(full);
    if (bad) return -1;
  }
  t->tp_rank = at.tp, t->dp_rank = at.dp, t->pp_rank = at.pp;
  return 0;
}

/* Sub-communicators: every rank makes every split in the same order (NCCL
 * splits are collective over the world); each is registered with w, so a
 * failure anywhere aborts all of them. */
static int timed_comms(timed_run *t, ts_err *e) {
  const exec_plan_min *p = t->p;
  rt_nccl *w = t->w;
  const int tp_rank = t->tp_rank, dp_rank = t->dp_rank, pp_rank = t->pp_rank;
  if (p->tp > 1 && p->tp == t->world) t->tp_comm = w->comms[0];
  else if (p->tp > 1 && rt_world_split(w, dp_rank * p->pp + pp_rank, tp_rank, &t->tp_comm, e)) return -1;
  if (p->dp > 1 && p->dp == t->world) t->dp_comm = w->comms[0];
  else if (p->dp > 1 && rt_world_split(w, tp_rank * p->pp + pp_rank, dp_rank, &t->dp_comm, e)) return -1;
  if (p->ep > 1) { /* MoE: tp = pp = 1 (exec_plan_refuse), so the DP rank is the world rank */
    exec_ep_place pl;
    if (exec_ep_place_of(p->path, p->dp, p->ep, dp_rank, p->model.experts, &pl, e)) return -1;
    if (p->ep == p->dp) t->ep_comm = t->dp_comm;
    else if (rt_world_split(w, pl.ep_group, pl.ep_rank, &t->ep_comm, e) ||
             rt_world_split(w, pl.ep_rank, pl.edp_rank, &t->edp_comm, e))
      return -1;
  }
  if (p->pp > 1) {
    if (rt_world_split(w, dp_rank * p->tp + tp_rank, pp_rank, &t->pp_comm, e)) return -1;
    /* the tied embedding's first/last-stage group gets its own communicator
     * (it runs on the DP stream while sends may still run on the PP stream) */
    int ends = pp_rank == 0 || pp_rank == p->pp - 1;
    if (rt_world_split(w, ends ? dp_rank * p->tp + tp_rank : NCCL_SPLIT_NOCOLOR, pp_rank, &t->emb_comm, e)) return -1;
  }
  return 0;
}

/* Synthetic tokens: a fixed seed per data-parallel rank and micro-batch, the same on every TP rank. */
static int timed_tokens(timed_run *t, ts_err *e) {
  const int micros = t->micros;
  size_t T = (size_t)t->m.tokens;
  t->tok = malloc((size_t)micros * T * sizeof *t->tok), t->lab = malloc((size_t)micros * T * sizeof *t->lab);
  int *ti = malloc(T * sizeof *ti), *li = malloc(T * sizeof *li);
  if (!t->tok || !t->lab || !ti || !li) {
    free(ti), free(li);
    return ts_fail_sys(e, "exec: out of memory");
  }
  for (int mb = 0; mb < micros; mb++) {
    exec_ref_tokens(&t->cfg, t->o->seed * 1000003ULL + (unsigned long long)(t->dp_rank * micros + mb), ti, li);
    for (size_t j = 0; j < T; j++) t->tok[mb * T + j] = ti[j], t->lab[mb * T + j] = li[j];
  }
  free(ti), free(li);
  return exec_model_set_data(&t->m, t->tok, t->lab, e);
}

/* The model with random weights, its data and the program it runs: the
 * plan's (walked) or the built-in single-stage one. */
static int timed_model(timed_run *t, ts_err *e) {
  const exec_plan_min *p = t->p;
  exec_pipeline pipe = {.pp = p->pp, .pp_rank = t->pp_rank, .pp_comm = t->pp_comm, .emb_comm = t->emb_comm,
                        .all_micros = p->pp == 1 && p->gpipe, .ep = p->ep, .ep_comm = t->ep_comm,
                        .edp_comm = t->edp_comm};
  /* the plan's program: its activation slots and (uneven stages) this stage's layers */
  if (t->o->program_plan && exec_walk_program_shape(p->path, NULL, t->rank, &pipe, e)) return -1;
  if (exec_model_create_pp(&t->m, &t->cfg, t->micros, p->tp, t->tp_rank, t->tp_comm, p->dp, t->dp_rank, t->dp_comm,
                           &pipe, t->w->streams[0], e))
    return -1;
  t->model_made = 1;
  t->m.wait_timeout_s = t->w->timeout_s;
  if (exec_model_init_random(&t->m, t->o->seed, e) ||
      exec_model_set_codecs(&t->m, p->codec_tp_fwd, p->codec_tp_bwd, e))
    return -1;
  if (timed_tokens(t, e)) return -1;
  if (t->o->program_plan) {
    if (exec_walk_init(&t->wk, p->path, t->rank, &t->m, e)) return -1;
    t->ops = t->wk.prog.ops, t->nops = t->wk.prog.n;
  } else {
    if (exec_program_build_single_stage(&t->m, &t->builtin_ops, &t->nops, e)) return -1;
    t->ops = t->builtin_ops;
  }
  return 0;
}

static int cuda_failed(ts_err *e) {
  return ts_fail_sys(e, "exec: CUDA call failed: %s", cudaGetErrorString(cudaGetLastError()));
}

/* Iteration it (warm-up or timed), CUDA events around the whole of it; *ms its time. */
static int timed_iteration(timed_run *t, int it, float *ms, ts_err *e) {
  const exec_timed_opts *o = t->o;
  exec_model *m = &t->m;
  rt_nccl *w = t->w;
  if (it == o->warmup) t->gemm_warm = exec_gemm_get_stats(m->gemm);
  if (it == o->die_at_iter) { /* fault injection (--die-at): the killed-rank test of the bounded waits */
    fprintf(stderr, "tacorun execute: rank %d: --die-at %d: killing myself\n", t->rank, it);
    fflush(stderr);
    raise(SIGKILL);
  }
  /* Enqueueing can block inside CUDA/NCCL once a peer is dead (full launch
   * queue); the watchdog bounds it, rt_nccl_wait bounds the wait itself. */
  char what[96];
  snprintf(what, sizeof what, "rank %d iteration %d", t->rank, it);
  rt_watchdog_arm(w, w->timeout_s + 10, what);
  if (cudaEventRecord(t->ev[0], m->stream) != cudaSuccess) return cuda_failed(e);
  if (o->program_plan) {
    if (exec_walk_iteration(m, &t->wk, 0, e)) return -1;
  } else {
    if (exec_model_zero_grad(m, e)) return -1;
    for (int i = 0; i < t->nops; i++)
      if (exec_model_run_op(m, &t->ops[i], e)) return -1;
  }
  if (cudaEventRecord(t->ev[1], m->stream) != cudaSuccess) return cuda_failed(e);
  if (it == o->inject_nan_step) { /* fault injection for the NaN stop (a demonstration, not a measurement) */
    float nan_f = NAN;
    if (cudaMemcpyAsync(m->grad + m->tensors[m->ntensors - 3].offset, &nan_f, 4, cudaMemcpyHostToDevice, m->stream) !=
        cudaSuccess)
      return cuda_failed(e);
  }
  if (rt_nccl_wait(w, e) || exec_model_check_finite(m, it, &t->loss, e)) return -1;
  rt_watchdog_disarm();
  if (cudaEventElapsedTime(ms, t->ev[0], t->ev[1]) != cudaSuccess) return cuda_failed(e);
  t->times[it] = *ms * 1e-3;
  return 0;
}

/* Warm-up and timed iterations (events ev[0], ev[1] around each). */
static int timed_iterations(timed_run *t, ts_err *e) {
  const exec_timed_opts *o = t->o;
  const exec_plan_min *p = t->p;
  const int nops = t->nops;
  t->ev = calloc((size_t)nops + 1, sizeof *t->ev);
  t->op_s = calloc((size_t)nops, sizeof *t->op_s);
  if (!t->ev || !t->op_s) return ts_fail_sys(e, "exec: out of memory");
  for (int i = 0; i <= nops; i++) RT_CUDA(e, cudaEventCreate(&t->ev[i]));
  if (t->root)
    fprintf(stderr, "execute %s: %d rank(s) (TP %d, DP %d, PP %d), %d layers, %d micro-batches of %d x %d tokens, %d ops/iteration"
                    " (%s program)\n",
            p->name, t->world, p->tp, p->dp, p->pp, t->cfg.layers, t->micros, t->cfg.batch, t->cfg.seq, nops,
            o->program_plan ? "plan_build_program" : "built-in");
  int tty = isatty(2);
  for (int it = 0; it < t->total_iters; it++) {
    float ms = 0;
    if (timed_iteration(t, it, &ms, e)) return -1;
    if (t->root && tty)
      fprintf(stderr, "\r  iteration %d/%d (%s): %.1f ms, loss %.4f   ", it + 1, t->total_iters,
              it < o->warmup ? "warm-up" : "timed", ms, t->loss);
  }
  if (t->root && tty) fprintf(stderr, "\n");
  return 0;
}

/* Walked program: per op, its time on its own stream and the part of it spent waiting for other streams. */
static int profile_walked(timed_run *t, ts_err *e) {
  exec_model *m = &t->m;
  double *start_s = t->tpx_start;
  RT_CUDA(e, cudaEventRecord(t->ev[0], m->stream));
  if (exec_walk_iteration(m, &t->wk, 0, e)) return -1;
  RT_CUDA(e, cudaEventRecord(t->ev[1], m->stream));
  if (rt_nccl_wait(t->w, e) || exec_model_check_finite(m, t->total_iters, &t->loss, e)) return -1;
  if (exec_walk_times(m, &t->wk, t->op_s, t->wg_s, start_s, e)) return -1;
  float ms = 0;
  RT_CUDA(e, cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]));
  t->profiled = ms * 1e-3;
  return 0;
}

/* Built-in program: one event between every two ops on the compute stream,
 * plus, for each TP all-reduce, events around the transfer on the TP stream
 * and after the weight-gradient GEMM it overlaps. */
static int profile_builtin(timed_run *t, ts_err *e) {
  exec_model *m = &t->m;
  const int nops = t->nops;
  const plan_op *ops = t->ops;
  cudaEvent_t *ev = t->ev, *prof = t->prof;
  for (int i = 0; i < 3 * nops; i++) RT_CUDA(e, cudaEventCreate(&prof[i]));
  m->prof_wgrad_done = prof, m->prof_tp_start = prof + nops, m->prof_tp_end = prof + 2 * nops;
  RT_CUDA(e, cudaEventRecord(ev[0], m->stream));
  if (exec_model_zero_grad(m, e)) return -1;
  for (int i = 0; i < nops; i++) {
    m->cur_op = i;
    if (exec_model_run_op(m, &ops[i], e)) return -1;
    RT_CUDA(e, cudaEventRecord(ev[i + 1], m->stream));
  }
  if (rt_nccl_wait(t->w, e) || exec_model_check_finite(m, t->total_iters, &t->loss, e)) return -1;
  m->prof_wgrad_done = m->prof_tp_start = m->prof_tp_end = NULL;
  for (int i = 0; i < nops; i++) {
    float ms = 0;
    RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    t->op_s[i] = ms * 1e-3;
    t->profiled += t->op_s[i];
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP && m->tp_comm) {
      RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], prof[i]));
      t->wg_s[i] = ms * 1e-3;
      RT_CUDA(e, cudaEventElapsedTime(&ms, prof[nops + i], prof[2 * nops + i]));
      t->tpx_s[i] = ms * 1e-3;
      RT_CUDA(e, cudaEventElapsedTime(&ms, ev[0], prof[nops + i]));
      t->tpx_start[i] = ms * 1e-3;
    }
  }
  return 0;
}

/* The profiled iteration after the timed ones, under the watchdog. */
static int timed_profile(timed_run *t, ts_err *e) {
  const int nops = t->nops;
  t->prof = calloc((size_t)nops * 3, sizeof *t->prof);
  t->wg_s = calloc((size_t)nops, sizeof *t->wg_s), t->tpx_s = calloc((size_t)nops, sizeof *t->tpx_s);
  t->tpx_start = calloc((size_t)nops, sizeof *t->tpx_start);
  if (!t->prof || !t->wg_s || !t->tpx_s || !t->tpx_start) return ts_fail_sys(e, "exec: out of memory");
  t->profiled = 0;
  rt_watchdog_arm(t->w, t->w->timeout_s + 10, "profiled iteration");
  if (t->o->program_plan ? profile_walked(t, e) : profile_builtin(t, e)) return -1;
  rt_watchdog_disarm();
  return 0;
}

/* Statistics over the timed iterations; the slowest rank sets the figure. */
static int timed_stats(timed_run *t, ts_err *e) {
  const int iters = t->o->iters;
  double *timed = t->times + t->o->warmup, *stats = t->stats;
  if (t->root) { /* in the order they ran: a transport that drifts shows as a trend, not as spread */
    printf("# timed iterations in order (rank 0, ms):");
    for (int i = 0; i < iters; i++) printf(" %.1f", timed[i] * 1e3);
    printf("; profiled after them %.1f\n", t->profiled * 1e3);
  }
  qsort(timed, (size_t)iters, sizeof *timed, cmp_double);
  stats[0] = timed[0], stats[1] = timed[iters / 2], stats[2] = timed[iters - 1];
  if (iters % 2 == 0) stats[1] = 0.5 * (timed[iters / 2 - 1] + timed[iters / 2]);
  return rt_world_max(t->w, stats, 3, e);
}

/* Walked: compute ops' own time; their waits count as exposed time of the collective they waited for. */
static void breakdown_walked(timed_run *t) {
  const plan_op *ops = t->ops;
  const double *op_s = t->op_s, *wg_s = t->wg_s;
  for (int i = 0; i < t->nops; i++) {
    char key[64];
    const plan_op *op = &ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE) {
      if (op->group == PLAN_GROUP_TP) t->tp_stream_s += op_s[i] - wg_s[i], t->n_tp++;
      if (op->row_chunks > 1) {
        /* tp_overlap_chunks: a chunk's all-reduce from its GEMM's end (or the previous
         * transfer's) to its own end, on the TP stream: what runs beside the next chunk */
        op_kind_name(op, key, sizeof key);
        char tkey[80];
        snprintf(tkey, sizeof tkey, "tpstream.%.40s.rows%dof%d", key, op->row_chunk + 1, op->row_chunks);
        t->nbuckets = add_bucket(t->buckets, t->nbuckets, tkey, op_s[i] - wg_s[i], 1);
      }
      continue;
    }
    if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) continue; /* PP stream: its waits are counted below */
    double own = op_s[i] - wg_s[i];
    op_kind_name(op, key, sizeof key);
    t->nbuckets = add_bucket(t->buckets, t->nbuckets, key, own, 1);
    t->compute_s += own;
    if (wg_s[i] > 0) {
      int waited_for = -1;
      for (int d = 0; d < PLAN_MAX_DEPS && waited_for < 0; d++)
        if (op->dep[d] >= 0 && ops[op->dep[d]].kind != PLAN_OP_COMPUTE) waited_for = op->dep[d];
      if (waited_for >= 0 && ops[waited_for].kind != PLAN_OP_COLLECTIVE) {
        /* waiting for a pipeline message: the bubble and the transfer */
        t->nbuckets = add_bucket(t->buckets, t->nbuckets, "pp.wait", wg_s[i], 1);
        t->pp_s += wg_s[i];
      } else if (waited_for >= 0) {
        op_kind_name(&ops[waited_for], key, sizeof key);
        t->nbuckets = add_bucket(t->buckets, t->nbuckets, key, wg_s[i], 1);
        if (ops[waited_for].group == PLAN_GROUP_DP || ops[waited_for].group == PLAN_GROUP_EDP) t->dp_s += wg_s[i];
        else t->tp_s += wg_s[i];
      } else {
        t->compute_s += wg_s[i];
      }
    }
  }
}

/* Built-in: a TP all-reduce's segment holds the overlapped weight-gradient
 * GEMM (counted with the op it belongs to, the one before) and then the
 * exposed wait for the transfer. */
static void breakdown_builtin(timed_run *t) {
  const plan_op *ops = t->ops;
  const double *wg_s = t->wg_s;
  for (int i = 0; i < t->nops; i++) {
    char key[64];
    double secs = t->op_s[i];
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP && wg_s[i] > 0 && i > 0) {
      op_kind_name(&ops[i - 1], key, sizeof key);
      t->nbuckets = add_bucket(t->buckets, t->nbuckets, key, wg_s[i], 0);
      t->compute_s += wg_s[i];
      secs -= wg_s[i];
    }
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP) t->tp_stream_s += t->tpx_s[i], t->n_tp++;
    op_kind_name(&ops[i], key, sizeof key);
    t->nbuckets = add_bucket(t->buckets, t->nbuckets, key, secs, 1);
    if (ops[i].kind != PLAN_OP_COLLECTIVE) t->compute_s += secs;
    else if (ops[i].group == PLAN_GROUP_DP) t->dp_s += secs;
    else t->tp_s += secs;
  }
}

/* The profiled iteration's breakdown by op kind, and the per-rank figures
 * [busy, compute, comm], gathered. */
static int timed_breakdown(timed_run *t, ts_err *e) {
  t->buckets = calloc((size_t)t->nops, sizeof *t->buckets);
  if (!t->buckets) return ts_fail_sys(e, "exec: out of memory");
  t->compute_s = t->tp_s = t->dp_s = t->pp_s = t->tp_stream_s = 0;
  t->n_tp = 0;
  if (t->o->program_plan) breakdown_walked(t);
  else breakdown_builtin(t);
  qsort(t->buckets, (size_t)t->nbuckets, sizeof *t->buckets, bucket_cmp);
  t->rank_stats = calloc((size_t)t->world * 3, sizeof *t->rank_stats);
  if (!t->rank_stats) return ts_fail_sys(e, "exec: out of memory");
  double *rs = t->rank_stats + t->rank * 3;
  rs[0] = t->profiled, rs[1] = t->compute_s, rs[2] = t->tp_s + t->dp_s + t->pp_s;
  return rt_world_sum(t->w, t->rank_stats, t->world * 3, e);
}

/* The model's FLOPs and the GPU memory in use (every rank). */
static void timed_figures(timed_run *t) {
  model_config mc = t->p->model;
  mc.layers = t->cfg.layers;
  t->flops_megatron = model_flops_megatron_lm(&mc, t->p->global, t->p->seq, t->p->tp);
  t->flops_model = model_flops_per_iteration(&mc, t->p->global, t->p->seq, false);
  t->tflops = t->flops_megatron / t->world / t->stats[1] / 1e12;
  t->free_b = 0, t->total_b = 0;
  cudaMemGetInfo(&t->free_b, &t->total_b);
}

/* Every rank's stage, activation slots, activation bytes and GPU memory in use (cudaMemGetInfo), summed
 * into rank_mem so rank 0 prints them all. */
static int timed_memory(timed_run *t, ts_err *e) {
  t->rank_mem = calloc((size_t)t->world * 5, sizeof *t->rank_mem);
  if (!t->rank_mem) return ts_fail_sys(e, "exec: out of memory");
  double *r = t->rank_mem + t->rank * 5;
  r[0] = t->pp_rank, r[1] = t->m.nslots, r[2] = (double)t->m.act_bytes, r[3] = (double)(t->total_b - t->free_b);
  r[4] = t->m.nbslots;
  return rt_world_sum(t->w, t->rank_mem, t->world * 5, e);
}

/* Rank 0's summary and breakdown table on stdout. */
static void timed_print(const timed_run *t) {
  const exec_plan_min *p = t->p;
  const exec_timed_opts *o = t->o;
  const exec_ref_config cfg = t->cfg;
  const double *stats = t->stats, profiled = t->profiled;
  const op_bucket *buckets = t->buckets;
  printf("\n# execute %s: TP %d, DP %d, PP %d, %d layers, micro %d x seq %d, global %lld, %d micro-batches/rank\n",
         p->name, p->tp, p->dp, p->pp, cfg.layers, p->micro, p->seq, p->global, t->micros);
  printf("# attention: %s\n", exec_attention_fused(p->seq, exec_ref_head_dim(&cfg), exec_ref_v_dim(&cfg))
                                   ? "fused (runtime/ops/exec_flash.cu)"
                                   : "unfused (batched GEMMs around a causal softmax)");
  printf("# layers as published: %s, %s%s, %s output weight, norm eps %g\n",
         cfg.rope_theta > 0 ? "RoPE" : "learned positions", cfg.qkv_bias ? "QKV bias" : "no QKV bias",
         cfg.linear_bias ? ", linear biases" : "", cfg.untied ? "untied" : "tied", cfg.norm_eps);
  if (cfg.rope_theta > 0) printf("# rope theta %g\n", cfg.rope_theta);
  printf("# iteration time over %d timed iterations after %d warm-up: median %.2f ms, min %.2f, max %.2f\n",
         o->iters, o->warmup, stats[1] * 1e3, stats[0] * 1e3, stats[2] * 1e3);
  printf("# model FLOPs per iteration (Megatron-LM count): %.4g -> %.1f TFLOP/s per GPU, MFU %.1f%% of %.0f\n",
         t->flops_megatron, t->tflops, 100 * t->tflops / H200_BF16_PEAK_TFLOPS, H200_BF16_PEAK_TFLOPS);
  printf("# (models/ full-attention count %.4g -> %.1f TFLOP/s per GPU)\n", t->flops_model,
         t->flops_model / t->world / stats[1] / 1e12);
  printf("# tokens/s %.0f, loss %.4f, GPU memory in use %.1f GiB\n", (double)p->global * p->seq / stats[1], t->loss,
         (double)(t->total_b - t->free_b) / (1 << 30));
  for (int r = 0; r < t->world; r++) {
    const double *rm = t->rank_mem + r * 5;
    printf("# memory rank %d (stage %d): %d activation slots of %d micro-batches (+%d received-activation buffers), "
           "activations %.2f GiB, GPU memory in use %.2f GiB (cudaMemGetInfo)\n", r, (int)rm[0], (int)rm[1],
           t->micros, (int)rm[4], rm[2] / (1 << 30), rm[3] / (1 << 30));
  }
  printf("# profiled iteration (rank 0): %.2f ms = compute %.2f + exposed TP all-reduce %.2f + DP all-reduce %.2f"
         " + pipeline wait %.2f\n",
         profiled * 1e3, t->compute_s * 1e3, t->tp_s * 1e3, t->dp_s * 1e3, t->pp_s * 1e3);
  const exec_gemm_stats gs = exec_gemm_get_stats(t->m.gemm), gemm_warm = t->gemm_warm;
  printf("# cuBLASLt GEMM plans for new shapes in the timed and profiled iterations: %lld (%lld heuristic queries, "
         "%lld reused algorithms; --variant gemm-algo=%s), %.2f ms of host time (warm-up: %lld, %.2f ms)\n",
         gs.plans - gemm_warm.plans, gs.heuristics - gemm_warm.heuristics, gs.reused - gemm_warm.reused,
         ops_variant(OPS_V_GEMM_ALGO), (gs.plan_s - gemm_warm.plan_s) * 1e3, gemm_warm.plans, gemm_warm.plan_s * 1e3);
  if (gs.calls > gemm_warm.calls)
    printf("# GEMM calls in the timed and profiled iterations: %lld, host time %.2f us a call (cache lookup, plans of "
           "new shapes, enqueue; --variant gemm-cache=%s), %lld plans cached at the end\n",
           gs.calls - gemm_warm.calls, (gs.call_s - gemm_warm.call_s) * 1e6 / (double)(gs.calls - gemm_warm.calls),
           ops_variant(OPS_V_GEMM_CACHE), gs.plans);
  printf("# TP stream: %d all-reduces, %.2f ms of transfers (%.2f ms of it hidden behind weight-gradient GEMMs)\n",
         t->n_tp, t->tp_stream_s * 1e3, (t->tp_stream_s - t->tp_s) * 1e3);
  printf("# %-34s %6s %10s %10s %6s\n", "op", "count", "total_ms", "mean_us", "pct");
  for (int b = 0; b < t->nbuckets; b++)
    printf("  %-34s %6d %10.3f %10.1f %6.2f\n", buckets[b].name, buckets[b].count, buckets[b].seconds * 1e3,
           buckets[b].seconds / (buckets[b].count ? buckets[b].count : 1) * 1e6, 100 * buckets[b].seconds / profiled);
  fflush(stdout);
}

/* The breakdown table as a file (--ops-csv). */
static int timed_ops_csv(const timed_run *t, ts_err *e) {
  const op_bucket *buckets = t->buckets;
  FILE *f = fopen(t->o->ops_csv_out, "w");
  if (!f) return ts_fail(e, t->o->ops_csv_out, NULL, "cannot open for writing");
  fprintf(f, "# op count total_ms mean_us pct (rank 0, profiled iteration of %s)\n", t->p->name);
  for (int b = 0; b < t->nbuckets; b++)
    fprintf(f, "%s %d %.4f %.2f %.3f\n", buckets[b].name, buckets[b].count, buckets[b].seconds * 1e3,
            buckets[b].seconds / (buckets[b].count ? buckets[b].count : 1) * 1e6,
            100 * buckets[b].seconds / t->profiled);
  fclose(f);
  return 0;
}

/* The result's ops: compute ops and exposed waits on the compute stream; TP transfers on the TP stream. */
static void timed_result_ops(timed_run *t) {
  const plan_op *ops = t->ops;
  const int walked = t->o->program_plan;
  double t0 = 0;
  for (int i = 0; i < t->nops; i++) {
    schema_op_record rec = {.rank = 0, .start_s = t0, .dur_s = t->op_s[i]};
    op_full_name(&ops[i], rec.name, sizeof rec.name);
    int tp_coll = ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP;
    snprintf(rec.stream, sizeof rec.stream, "%s",
             (ops[i].kind == PLAN_OP_SEND || ops[i].kind == PLAN_OP_RECV) ? "pp"
             : ops[i].kind != PLAN_OP_COLLECTIVE                          ? "compute"
             : ops[i].group == PLAN_GROUP_TP                              ? "tp"
                                                                          : "dp");
    if (tp_coll && !walked) rec.start_s = t->tpx_start[i], rec.dur_s = t->tpx_s[i];
    if (walked) rec.start_s = t->tpx_start[i], rec.dur_s = t->op_s[i] - t->wg_s[i];
    schema_result_add_op(&t->res, &rec);
    t0 += t->op_s[i];
  }
}

/* The result's notes: what ran, the FLOP count, how the ops were timed, the environment and transport. */
static void timed_result_notes(timed_run *t) {
  const exec_plan_min *p = t->p;
  const exec_ref_config *cfg = &t->cfg;
  schema_result *res = &t->res;
  char note[256];
  snprintf(note, sizeof note,
           "executor: compute stream + TP stream; backward TP all-reduces overlap the weight-gradient GEMM; %s "
           "attention; %s; %s; %s output weight; program built in-process",
           exec_attention_fused(p->seq, exec_ref_head_dim(cfg), exec_ref_v_dim(cfg)) ? "fused (flash)" : "unfused",
           cfg->rope_theta > 0 ? "RoPE" : "learned positions",
           cfg->qkv_bias || cfg->linear_bias ? (cfg->linear_bias ? "QKV and linear biases" : "QKV bias") : "no biases",
           cfg->untied ? "untied" : "tied");
  schema_result_add_note(res, note);
  snprintf(note, sizeof note, "model FLOPs: Megatron-LM count %.6g per iteration; MFU against %.0f TFLOP/s BF16",
           t->flops_megatron, H200_BF16_PEAK_TFLOPS);
  schema_result_add_note(res, note);
  snprintf(note, sizeof note, "ops: rank 0, profiled iteration (an event between every two ops), not scaled");
  schema_result_add_note(res, note);
  rt_note_env(res);
  rt_note_transport(res, t->w);
  char variants[320];
  ops_variant_note(variants, sizeof variants);
  schema_result_add_note(res, variants);
  for (int r = 0; r < t->world; r++) {
    const double *rm = t->rank_mem + r * 5;
    snprintf(note, sizeof note, "memory rank %d (stage %d): %d activation slots of %d micro-batches (+%d "
             "received-activation buffers), activations %.0f bytes, GPU memory in use %.0f bytes (cudaMemGetInfo)",
             r, (int)rm[0], (int)rm[1], t->micros, (int)rm[4], rm[2], rm[3]);
    schema_result_add_note(res, note);
  }
}

/* Rank 0's result in the simulator's schema, saved where asked (--json, --csv). */
static int timed_result(timed_run *t, ts_err *e) {
  const exec_plan_min *p = t->p;
  const exec_timed_opts *o = t->o;
  const double *stats = t->stats;
  schema_result *res = &t->res;
  snprintf(res->plan, sizeof res->plan, "%s", p->path);
  snprintf(res->attention_backend, sizeof res->attention_backend, "executor"); /* what ran, whatever the plan named */
  snprintf(res->options, sizeof res->options, "--iters %d --warmup %d --seed %llu --program %s", o->iters, o->warmup,
           o->seed, o->program_plan ? "plan" : "builtin");
  res->hidden_dropout = 0.0; /* what ran: no dropout (exec_plan_refuse turns a plan's > 0 away) */
  res->iteration_time_s = stats[1];
  res->tokens_per_s = (double)p->global * p->seq / stats[1];
  res->tflops_per_gpu = t->tflops;
  res->mfu = t->tflops / H200_BF16_PEAK_TFLOPS;
  res->memory_per_gpu_bytes = (double)(t->total_b - t->free_b);
  /* The profiled iteration's parts, scaled to the median (events add a little time). */
  double scale = stats[1] / t->profiled;
  res->breakdown.compute_s = t->compute_s * scale;
  res->breakdown.tp_exposed_s = t->tp_s * scale;
  res->breakdown.dp_exposed_s = t->dp_s * scale;
  res->breakdown.bubble_s = t->pp_s * scale; /* rank 0's waits for pipeline messages: bubble and transfers */
  res->iterations = o->iters, res->warmup = o->warmup;
  res->min_s = stats[0], res->median_s = stats[1], res->max_s = stats[2];
  rt_machine_of(t->w, &res->machine);
  for (int r = 0; r < t->world; r++) {
    schema_rank_stat s = {.rank = r, .busy_s = t->rank_stats[r * 3], .compute_s = t->rank_stats[r * 3 + 1],
                          .comm_s = t->rank_stats[r * 3 + 2]};
    schema_result_add_rank(res, &s);
  }
  timed_result_ops(t);
  timed_result_notes(t);
  if (o->json_out && schema_result_save_json(res, o->json_out, e)) return -1;
  if (o->csv_out && schema_result_save_csv(res, o->csv_out, e)) return -1;
  return 0;
}

/* Frees what the run holds, in reverse order of making it. After a failure
 * the communicators stay registered: rt_nccl_finalize aborts them all. */
static void timed_free(timed_run *t, int rc) {
  rt_nccl *w = t->w;
  free(t->rank_stats), free(t->rank_mem);
  if (t->ev)
    for (int i = 0; i <= t->nops; i++)
      if (t->ev[i]) cudaEventDestroy(t->ev[i]);
  if (t->prof)
    for (int i = 0; i < 3 * t->nops; i++)
      if (t->prof[i]) cudaEventDestroy(t->prof[i]);
  free(t->prof), free(t->wg_s), free(t->tpx_s), free(t->tpx_start);
  free(t->ev), free(t->op_s), free(t->builtin_ops), free(t->times), free(t->tok), free(t->lab), free(t->buckets);
  exec_walk_destroy(&t->wk);
  schema_result_free(&t->res);
  if (t->model_made) exec_model_destroy(&t->m);
  if (t->tp_comm && t->tp_comm != w->comms[0] && rc == 0) rt_nccl_comm_destroy(w, t->tp_comm);
  if (t->dp_comm && t->dp_comm != w->comms[0] && rc == 0) rt_nccl_comm_destroy(w, t->dp_comm);
  if (t->ep_comm && t->ep_comm != t->dp_comm && rc == 0) rt_nccl_comm_destroy(w, t->ep_comm);
  if (t->edp_comm && rc == 0) rt_nccl_comm_destroy(w, t->edp_comm);
  if (t->pp_comm && rc == 0) rt_nccl_comm_destroy(w, t->pp_comm);
  if (t->emb_comm && rc == 0) rt_nccl_comm_destroy(w, t->emb_comm);
}

int exec_run_timed(rt_nccl *w, const exec_plan_min *p, const exec_timed_opts *o, ts_err *e) {
  timed_run *t = calloc(1, sizeof *t);
  if (!t) return ts_fail_sys(e, "exec: out of memory");
  int rc = -1;
  t->w = w, t->p = p, t->o = o;
  t->rank = w->ranks[0], t->world = w->nranks, t->root = t->rank == 0;
  schema_result_init(&t->res, SCHEMA_SOURCE_MEASURED);
  if (timed_place(t, e) || timed_comms(t, e)) goto fail;
  exec_plan_config(p, &t->cfg);
  breakdown_cfg = t->cfg;
  t->micros = (int)(p->global / ((long long)p->micro * p->dp));
  t->total_iters = o->warmup + o->iters;
  t->times = calloc((size_t)t->total_iters, sizeof *t->times);
  if (!t->times) {
    ts_fail_sys(e, "exec: out of memory");
    goto fail;
  }
  if (timed_model(t, e) || timed_iterations(t, e) || timed_profile(t, e) || timed_stats(t, e) ||
      timed_breakdown(t, e))
    goto fail;
  timed_figures(t);
  if (timed_memory(t, e)) goto fail;
  if (t->root) {
    timed_print(t);
    if (o->ops_csv_out && timed_ops_csv(t, e)) goto fail;
    if (timed_result(t, e)) goto fail;
  }
  rc = 0;
fail:
  timed_free(t, rc);
  free(t);
  return rc;
}
