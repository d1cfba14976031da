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
    if (!exec_layer_op_present(o, c->rope_theta > 0, c->experts > 0, c->dense_layers, c->shared_ffn > 0)) continue;
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
  default: what = op->model_op >= 0 && op->model_op < EXEC_OP_COUNT ? layer_op_name(op->model_op) : "grads";
  }
  if (op->kind == PLAN_OP_COLLECTIVE)
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
  char name[64];
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

int exec_run_timed(rt_nccl *w, const exec_plan_min *p, const exec_timed_opts *o, ts_err *e) {
  const int rank = w->ranks[0], world = w->nranks, root = rank == 0;
  if (w->nlocal != 1) return ts_fail(e, p->path, "layout", "run one process per GPU (mpirun -np %d)", p->tp * p->dp);
  if (world != p->tp * p->dp * p->pp)
    return ts_fail(e, p->path, "layout", "dp x tp x pp = %d, but %d processes were started", p->tp * p->dp * p->pp,
                   world);
  if (p->pp > 1 && !o->program_plan)
    return ts_fail(e, p->path, "layout.pp", "the built-in program is PP = 1 only (use --program plan)");
  /* This rank's place in the layout, as the plan numbers ranks (its order field). */
  plan_coord at = {.dp = rank / p->tp, .tp = rank % p->tp, .pp = 0};
  if (p->pp > 1) {
    plan *full = malloc(sizeof *full);
    if (!full) return ts_fail_sys(e, "exec: out of memory");
    int bad = plan_load(p->path, NULL, NULL, full, e) && plan_load(p->path, "models", "topologies", full, e);
    if (!bad) at = plan_coord_of(full, rank);
    free(full);
    if (bad) return -1;
  }
  const int tp_rank = at.tp, dp_rank = at.dp, pp_rank = at.pp;
  /* Sub-communicators: every rank makes every split in the same order (NCCL
   * splits are collective over the world); each is registered with w, so a
   * failure anywhere aborts all of them. */
  ncclComm_t tp_comm = NULL, dp_comm = NULL, pp_comm = NULL, emb_comm = NULL;
  if (p->tp > 1 && p->tp == world) tp_comm = w->comms[0];
  else if (p->tp > 1 && rt_world_split(w, dp_rank * p->pp + pp_rank, tp_rank, &tp_comm, e)) return -1;
  if (p->dp > 1 && p->dp == world) dp_comm = w->comms[0];
  else if (p->dp > 1 && rt_world_split(w, tp_rank * p->pp + pp_rank, dp_rank, &dp_comm, e)) return -1;
  if (p->pp > 1) {
    if (rt_world_split(w, dp_rank * p->tp + tp_rank, pp_rank, &pp_comm, e)) return -1;
    /* the tied embedding's first/last-stage group gets its own communicator
     * (it runs on the DP stream while sends may still run on the PP stream) */
    int ends = pp_rank == 0 || pp_rank == p->pp - 1;
    if (rt_world_split(w, ends ? dp_rank * p->tp + tp_rank : NCCL_SPLIT_NOCOLOR, pp_rank, &emb_comm, e)) return -1;
  }
  exec_pipeline pipe = {.pp = p->pp, .pp_rank = pp_rank, .pp_comm = pp_comm, .emb_comm = emb_comm,
                        .all_micros = p->pp == 1 && p->gpipe};

  exec_ref_config cfg;
  exec_plan_config(p, &cfg);
  breakdown_cfg = cfg;
  const int micros = (int)(p->global / ((long long)p->micro * p->dp));
  exec_model m;
  plan_op *builtin_ops = NULL;
  const plan_op *ops = NULL;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  int nops = 0, rc = -1, total_iters = o->warmup + o->iters;
  double *times = calloc((size_t)total_iters, sizeof *times), *op_s = NULL;
  int32_t *tok = NULL, *lab = NULL;
  cudaEvent_t *ev = NULL;
  op_bucket *buckets = NULL;
  cudaEvent_t *prof = NULL;
  double *wg_s = NULL, *tpx_s = NULL, *tpx_start = NULL;
  int nbuckets = 0;
  schema_result res;
  schema_result_init(&res, SCHEMA_SOURCE_MEASURED);
  if (!times) return ts_fail_sys(e, "exec: out of memory");
  if (exec_model_create_pp(&m, &cfg, micros, p->tp, tp_rank, tp_comm, p->dp, dp_rank, dp_comm, &pipe, w->streams[0],
                           e)) {
    free(times);
    return -1;
  }
  m.wait_timeout_s = w->timeout_s;
  if (exec_model_init_random(&m, o->seed, e) || exec_model_set_codecs(&m, p->codec_tp_fwd, p->codec_tp_bwd, e))
    goto done;
  /* Synthetic tokens: a fixed seed per data-parallel rank and micro-batch, the same on every TP rank. */
  size_t T = (size_t)m.tokens;
  tok = malloc((size_t)micros * T * sizeof *tok), lab = malloc((size_t)micros * T * sizeof *lab);
  int *ti = malloc(T * sizeof *ti), *li = malloc(T * sizeof *li);
  if (!tok || !lab || !ti || !li) {
    free(ti), free(li);
    ts_fail_sys(e, "exec: out of memory");
    goto done;
  }
  for (int mb = 0; mb < micros; mb++) {
    exec_ref_tokens(&cfg, o->seed * 1000003ULL + (unsigned long long)(dp_rank * micros + mb), ti, li);
    for (size_t j = 0; j < T; j++) tok[mb * T + j] = ti[j], lab[mb * T + j] = li[j];
  }
  free(ti), free(li);
  if (exec_model_set_data(&m, tok, lab, e)) goto done;
  if (o->program_plan) {
    if (exec_walk_init(&wk, p->path, rank, &m, e)) goto done;
    ops = wk.prog.ops, nops = wk.prog.n;
  } else {
    if (exec_program_build_single_stage(&m, &builtin_ops, &nops, e)) goto done;
    ops = builtin_ops;
  }

  ev = calloc((size_t)nops + 1, sizeof *ev);
  op_s = calloc((size_t)nops, sizeof *op_s);
  if (!ev || !op_s) {
    ts_fail_sys(e, "exec: out of memory");
    goto done;
  }
  for (int i = 0; i <= nops; i++) RT_CUDA(e, cudaEventCreate(&ev[i]));
  if (root)
    fprintf(stderr, "execute %s: %d rank(s) (TP %d, DP %d, PP %d), %d layers, %d micro-batches of %d x %d tokens, %d ops/iteration"
                    " (%s program)\n",
            p->name, world, p->tp, p->dp, p->pp, cfg.layers, micros, cfg.batch, cfg.seq, nops,
            o->program_plan ? "plan_build_program" : "built-in");
  int tty = isatty(2);
  float loss = 0;
  char what[96];
  exec_gemm_stats gemm_warm = {0}; /* the GEMM plans built before the timed iterations */
  for (int it = 0; it < total_iters; it++) {
    if (it == o->warmup) gemm_warm = exec_gemm_get_stats(m.gemm);
    if (it == o->die_at_iter) { /* fault injection (--die-at): the killed-rank test of the bounded waits */
      fprintf(stderr, "tacorun execute: rank %d: --die-at %d: killing myself\n", rank, it);
      fflush(stderr);
      raise(SIGKILL);
    }
    /* Enqueueing can block inside CUDA/NCCL once a peer is dead (full launch
     * queue); the watchdog bounds it, rt_nccl_wait bounds the wait itself. */
    snprintf(what, sizeof what, "rank %d iteration %d", rank, it);
    rt_watchdog_arm(w, w->timeout_s + 10, what);
    if (cudaEventRecord(ev[0], m.stream) != cudaSuccess) goto cuda_fail;
    if (o->program_plan) {
      if (exec_walk_iteration(&m, &wk, 0, e)) goto done;
    } else {
      if (exec_model_zero_grad(&m, e)) goto done;
      for (int i = 0; i < nops; i++)
        if (exec_model_run_op(&m, &ops[i], e)) goto done;
    }
    if (cudaEventRecord(ev[1], m.stream) != cudaSuccess) goto cuda_fail;
    if (it == o->inject_nan_step) { /* fault injection for the NaN stop (a demonstration, not a measurement) */
      float nan_f = NAN;
      if (cudaMemcpyAsync(m.grad + m.tensors[m.ntensors - 3].offset, &nan_f, 4, cudaMemcpyHostToDevice, m.stream) !=
          cudaSuccess)
        goto cuda_fail;
    }
    if (rt_nccl_wait(w, e) || exec_model_check_finite(&m, it, &loss, e)) goto done;
    rt_watchdog_disarm();
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess) goto cuda_fail;
    times[it] = ms * 1e-3;
    if (root && tty)
      fprintf(stderr, "\r  iteration %d/%d (%s): %.1f ms, loss %.4f   ", it + 1, total_iters,
              it < o->warmup ? "warm-up" : "timed", ms, loss);
  }
  if (root && tty) fprintf(stderr, "\n");

  /* profiled iteration: one event between every two ops on the compute
   * stream, plus, for each TP all-reduce, events around the transfer on the TP
   * stream and after the weight-gradient GEMM it overlaps */
  prof = calloc((size_t)nops * 3, sizeof *prof);
  wg_s = calloc((size_t)nops, sizeof *wg_s), tpx_s = calloc((size_t)nops, sizeof *tpx_s);
  tpx_start = calloc((size_t)nops, sizeof *tpx_start);
  if (!prof || !wg_s || !tpx_s || !tpx_start) {
    ts_fail_sys(e, "exec: out of memory");
    goto done;
  }
  double profiled = 0;
  rt_watchdog_arm(w, w->timeout_s + 10, "profiled iteration");
  if (o->program_plan) {
    /* walked program: per op, its time on its own stream and the part of it spent waiting for other streams */
    double *start_s = tpx_start;
    RT_CUDA(e, cudaEventRecord(ev[0], m.stream));
    if (exec_walk_iteration(&m, &wk, 0, e)) goto done;
    RT_CUDA(e, cudaEventRecord(ev[1], m.stream));
    if (rt_nccl_wait(w, e) || exec_model_check_finite(&m, total_iters, &loss, e)) goto done;
    if (exec_walk_times(&m, &wk, op_s, wg_s, start_s, e)) goto done;
    float ms = 0;
    RT_CUDA(e, cudaEventElapsedTime(&ms, ev[0], ev[1]));
    profiled = ms * 1e-3;
    goto walked_profile_done;
  }
  for (int i = 0; i < 3 * nops; i++) RT_CUDA(e, cudaEventCreate(&prof[i]));
  m.prof_wgrad_done = prof, m.prof_tp_start = prof + nops, m.prof_tp_end = prof + 2 * nops;
  RT_CUDA(e, cudaEventRecord(ev[0], m.stream));
  if (exec_model_zero_grad(&m, e)) goto done;
  for (int i = 0; i < nops; i++) {
    m.cur_op = i;
    if (exec_model_run_op(&m, &ops[i], e)) goto done;
    RT_CUDA(e, cudaEventRecord(ev[i + 1], m.stream));
  }
  if (rt_nccl_wait(w, e) || exec_model_check_finite(&m, total_iters, &loss, e)) goto done;
  m.prof_wgrad_done = m.prof_tp_start = m.prof_tp_end = NULL;
  for (int i = 0; i < nops; i++) {
    float ms = 0;
    RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    op_s[i] = ms * 1e-3;
    profiled += op_s[i];
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP && m.tp_comm) {
      RT_CUDA(e, cudaEventElapsedTime(&ms, ev[i], prof[i]));
      wg_s[i] = ms * 1e-3;
      RT_CUDA(e, cudaEventElapsedTime(&ms, prof[nops + i], prof[2 * nops + i]));
      tpx_s[i] = ms * 1e-3;
      RT_CUDA(e, cudaEventElapsedTime(&ms, ev[0], prof[nops + i]));
      tpx_start[i] = ms * 1e-3;
    }
  }

walked_profile_done:;
  rt_watchdog_disarm();
  /* statistics over the timed iterations; the slowest rank sets the figure */
  double *timed = times + o->warmup, stats[3];
  if (root) { /* in the order they ran: a transport that drifts shows as a trend, not as spread */
    printf("# timed iterations in order (rank 0, ms):");
    for (int i = 0; i < o->iters; i++) printf(" %.1f", timed[i] * 1e3);
    printf("; profiled after them %.1f\n", profiled * 1e3);
  }
  qsort(timed, (size_t)o->iters, sizeof *timed, cmp_double);
  stats[0] = timed[0], stats[1] = timed[o->iters / 2], stats[2] = timed[o->iters - 1];
  if (o->iters % 2 == 0) stats[1] = 0.5 * (timed[o->iters / 2 - 1] + timed[o->iters / 2]);
  if (rt_world_max(w, stats, 3, e)) goto done;

  /* breakdown by op kind */
  buckets = calloc((size_t)nops, sizeof *buckets);
  if (!buckets) {
    ts_fail_sys(e, "exec: out of memory");
    goto done;
  }
  /* Compute-stream time: a TP all-reduce's segment holds the overlapped
   * weight-gradient GEMM (counted with the op it belongs to, the one before)
   * and then the exposed wait for the transfer. */
  double compute_s = 0, tp_s = 0, dp_s = 0, pp_s = 0, tp_stream_s = 0;
  int n_tp = 0;
  for (int i = 0; i < nops && o->program_plan; i++) {
    /* walked: compute ops' own time; their waits count as exposed time of the collective they waited for */
    char key[64];
    const plan_op *op = &ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE) {
      if (op->group == PLAN_GROUP_TP) tp_stream_s += op_s[i] - wg_s[i], n_tp++;
      if (op->row_chunks > 1) {
        /* tp_overlap_chunks: a chunk's all-reduce from its GEMM's end (or the previous
         * transfer's) to its own end, on the TP stream: what runs beside the next chunk */
        op_kind_name(op, key, sizeof key);
        char tkey[80];
        snprintf(tkey, sizeof tkey, "tpstream.%.40s.rows%dof%d", key, op->row_chunk + 1, op->row_chunks);
        nbuckets = add_bucket(buckets, nbuckets, tkey, op_s[i] - wg_s[i], 1);
      }
      continue;
    }
    if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) continue; /* PP stream: its waits are counted below */
    double own = op_s[i] - wg_s[i];
    op_kind_name(op, key, sizeof key);
    nbuckets = add_bucket(buckets, nbuckets, key, own, 1);
    compute_s += own;
    if (wg_s[i] > 0) {
      int waited_for = -1;
      for (int d = 0; d < PLAN_MAX_DEPS && waited_for < 0; d++)
        if (op->dep[d] >= 0 && ops[op->dep[d]].kind != PLAN_OP_COMPUTE) waited_for = op->dep[d];
      if (waited_for >= 0 && ops[waited_for].kind != PLAN_OP_COLLECTIVE) {
        /* waiting for a pipeline message: the bubble and the transfer */
        nbuckets = add_bucket(buckets, nbuckets, "pp.wait", wg_s[i], 1);
        pp_s += wg_s[i];
      } else if (waited_for >= 0) {
        op_kind_name(&ops[waited_for], key, sizeof key);
        nbuckets = add_bucket(buckets, nbuckets, key, wg_s[i], 1);
        if (ops[waited_for].group == PLAN_GROUP_DP) dp_s += wg_s[i];
        else tp_s += wg_s[i];
      } else {
        compute_s += wg_s[i];
      }
    }
  }
  for (int i = 0; i < nops && !o->program_plan; i++) {
    char key[64];
    double secs = op_s[i];
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP && wg_s[i] > 0 && i > 0) {
      op_kind_name(&ops[i - 1], key, sizeof key);
      nbuckets = add_bucket(buckets, nbuckets, key, wg_s[i], 0);
      compute_s += wg_s[i];
      secs -= wg_s[i];
    }
    if (ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP) tp_stream_s += tpx_s[i], n_tp++;
    op_kind_name(&ops[i], key, sizeof key);
    nbuckets = add_bucket(buckets, nbuckets, key, secs, 1);
    if (ops[i].kind != PLAN_OP_COLLECTIVE) compute_s += secs;
    else if (ops[i].group == PLAN_GROUP_DP) dp_s += secs;
    else tp_s += secs;
  }
  qsort(buckets, (size_t)nbuckets, sizeof *buckets, bucket_cmp);

  /* per-rank figures, gathered: [busy, compute, comm] per rank */
  double *rank_stats = calloc((size_t)world * 3, sizeof *rank_stats);
  if (!rank_stats) {
    ts_fail_sys(e, "exec: out of memory");
    goto done;
  }
  rank_stats[rank * 3 + 0] = profiled, rank_stats[rank * 3 + 1] = compute_s, rank_stats[rank * 3 + 2] = tp_s + dp_s + pp_s;
  if (rt_world_sum(w, rank_stats, world * 3, e)) {
    free(rank_stats);
    goto done;
  }

  model_config mc = p->model;
  mc.layers = cfg.layers;
  double flops_megatron = model_flops_megatron_lm(&mc, p->global, p->seq, p->tp);
  double flops_model = model_flops_per_iteration(&mc, p->global, p->seq, false);
  double tflops = flops_megatron / world / stats[1] / 1e12;
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);

  if (root) {
    printf("\n# execute %s: TP %d, DP %d, PP %d, %d layers, micro %d x seq %d, global %lld, %d micro-batches/rank\n",
           p->name, p->tp, p->dp, p->pp, cfg.layers, p->micro, p->seq, p->global, micros);
    printf("# attention: %s\n", exec_flash_selected(p->seq, p->model.hidden / p->model.heads)
                                     ? "fused (runtime/ops/exec_flash.cu)"
                                     : "unfused (batched GEMMs around a causal softmax)");
    printf("# layers as published: %s, %s%s, %s output weight, norm eps %g\n",
           cfg.rope_theta > 0 ? "RoPE" : "learned positions", cfg.qkv_bias ? "QKV bias" : "no QKV bias",
           cfg.linear_bias ? ", linear biases" : "", cfg.untied ? "untied" : "tied", cfg.norm_eps);
    if (cfg.rope_theta > 0) printf("# rope theta %g\n", cfg.rope_theta);
    printf("# iteration time over %d timed iterations after %d warm-up: median %.2f ms, min %.2f, max %.2f\n",
           o->iters, o->warmup, stats[1] * 1e3, stats[0] * 1e3, stats[2] * 1e3);
    printf("# model FLOPs per iteration (Megatron-LM count): %.4g -> %.1f TFLOP/s per GPU, MFU %.1f%% of %.0f\n",
           flops_megatron, tflops, 100 * tflops / H200_BF16_PEAK_TFLOPS, H200_BF16_PEAK_TFLOPS);
    printf("# (models/ full-attention count %.4g -> %.1f TFLOP/s per GPU)\n", flops_model,
           flops_model / world / stats[1] / 1e12);
    printf("# tokens/s %.0f, loss %.4f, GPU memory in use %.1f GiB\n", (double)p->global * p->seq / stats[1], loss,
           (double)(total_b - free_b) / (1 << 30));
    printf("# profiled iteration (rank 0): %.2f ms = compute %.2f + exposed TP all-reduce %.2f + DP all-reduce %.2f"
           " + pipeline wait %.2f\n",
           profiled * 1e3, compute_s * 1e3, tp_s * 1e3, dp_s * 1e3, pp_s * 1e3);
    const exec_gemm_stats gs = exec_gemm_get_stats(m.gemm);
    printf("# cuBLASLt GEMM plans for new shapes in the timed and profiled iterations: %lld (%lld heuristic queries, "
           "%lld reused algorithms; --variant gemm-algo=%s), %.2f ms of host time (warm-up: %lld, %.2f ms)\n",
           gs.plans - gemm_warm.plans, gs.heuristics - gemm_warm.heuristics, gs.reused - gemm_warm.reused,
           ops_variant(OPS_V_GEMM_ALGO), (gs.plan_s - gemm_warm.plan_s) * 1e3, gemm_warm.plans, gemm_warm.plan_s * 1e3);
    printf("# TP stream: %d all-reduces, %.2f ms of transfers (%.2f ms of it hidden behind weight-gradient GEMMs)\n",
           n_tp, tp_stream_s * 1e3, (tp_stream_s - tp_s) * 1e3);
    printf("# %-34s %6s %10s %10s %6s\n", "op", "count", "total_ms", "mean_us", "pct");
    for (int b = 0; b < nbuckets; b++)
      printf("  %-34s %6d %10.3f %10.1f %6.2f\n", buckets[b].name, buckets[b].count, buckets[b].seconds * 1e3,
             buckets[b].seconds / (buckets[b].count ? buckets[b].count : 1) * 1e6, 100 * buckets[b].seconds / profiled);
    fflush(stdout);
    if (o->ops_csv_out) {
      FILE *f = fopen(o->ops_csv_out, "w");
      if (!f) {
        free(rank_stats);
        ts_fail(e, o->ops_csv_out, NULL, "cannot open for writing");
        goto done;
      }
      fprintf(f, "# op count total_ms mean_us pct (rank 0, profiled iteration of %s)\n", p->name);
      for (int b = 0; b < nbuckets; b++)
        fprintf(f, "%s %d %.4f %.2f %.3f\n", buckets[b].name, buckets[b].count, buckets[b].seconds * 1e3,
                buckets[b].seconds / (buckets[b].count ? buckets[b].count : 1) * 1e6, 100 * buckets[b].seconds / profiled);
      fclose(f);
    }
    snprintf(res.plan, sizeof res.plan, "%s", p->path);
    snprintf(res.attention_backend, sizeof res.attention_backend, "executor"); /* what ran, whatever the plan named */
    res.iteration_time_s = stats[1];
    res.tokens_per_s = (double)p->global * p->seq / stats[1];
    res.tflops_per_gpu = tflops;
    res.mfu = tflops / H200_BF16_PEAK_TFLOPS;
    res.memory_per_gpu_bytes = (double)(total_b - free_b);
    /* The profiled iteration's parts, scaled to the median (events add a little time). */
    double scale = stats[1] / profiled;
    res.breakdown.compute_s = compute_s * scale;
    res.breakdown.tp_exposed_s = tp_s * scale;
    res.breakdown.dp_exposed_s = dp_s * scale;
    res.breakdown.bubble_s = pp_s * scale; /* rank 0's waits for pipeline messages: bubble and transfers */
    res.iterations = o->iters, res.warmup = o->warmup;
    res.min_s = stats[0], res.median_s = stats[1], res.max_s = stats[2];
    rt_machine_of(w, &res.machine);
    for (int r = 0; r < world; r++) {
      schema_rank_stat s = {.rank = r, .busy_s = rank_stats[r * 3], .compute_s = rank_stats[r * 3 + 1],
                            .comm_s = rank_stats[r * 3 + 2]};
      schema_result_add_rank(&res, &s);
    }
    double t0 = 0;
    for (int i = 0; i < nops; i++) {
      /* compute ops and exposed waits on the compute stream; TP transfers on the TP stream */
      schema_op_record rec = {.rank = 0, .start_s = t0, .dur_s = op_s[i]};
      op_full_name(&ops[i], rec.name, sizeof rec.name);
      int tp_coll = ops[i].kind == PLAN_OP_COLLECTIVE && ops[i].group == PLAN_GROUP_TP;
      snprintf(rec.stream, sizeof rec.stream, "%s",
               (ops[i].kind == PLAN_OP_SEND || ops[i].kind == PLAN_OP_RECV) ? "pp"
               : ops[i].kind != PLAN_OP_COLLECTIVE                          ? "compute"
               : ops[i].group == PLAN_GROUP_TP                              ? "tp"
                                                                            : "dp");
      if (tp_coll && !o->program_plan) rec.start_s = tpx_start[i], rec.dur_s = tpx_s[i];
      if (o->program_plan) rec.start_s = tpx_start[i], rec.dur_s = op_s[i] - wg_s[i];
      schema_result_add_op(&res, &rec);
      t0 += op_s[i];
    }
    char note[256];
    snprintf(note, sizeof note,
             "executor: compute stream + TP stream; backward TP all-reduces overlap the weight-gradient GEMM; %s "
             "attention; %s; %s; %s output weight; program built in-process",
             exec_flash_selected(p->seq, p->model.hidden / p->model.heads) ? "fused (flash)" : "unfused",
             cfg.rope_theta > 0 ? "RoPE" : "learned positions",
             cfg.qkv_bias || cfg.linear_bias ? (cfg.linear_bias ? "QKV and linear biases" : "QKV bias") : "no biases",
             cfg.untied ? "untied" : "tied");
    schema_result_add_note(&res, note);
    snprintf(note, sizeof note, "model FLOPs: Megatron-LM count %.6g per iteration; MFU against %.0f TFLOP/s BF16",
             flops_megatron, H200_BF16_PEAK_TFLOPS);
    schema_result_add_note(&res, note);
    snprintf(note, sizeof note, "ops: rank 0, profiled iteration (an event between every two ops), not scaled");
    schema_result_add_note(&res, note);
    rt_note_env(&res);
    rt_note_transport(&res, w);
    char variants[256];
    ops_variant_note(variants, sizeof variants);
    schema_result_add_note(&res, variants);
    if (o->json_out && schema_result_save_json(&res, o->json_out, e)) {
      free(rank_stats);
      goto done;
    }
    if (o->csv_out && schema_result_save_csv(&res, o->csv_out, e)) {
      free(rank_stats);
      goto done;
    }
  }
  free(rank_stats);
  rc = 0;
  goto done;
cuda_fail:
  ts_fail_sys(e, "exec: CUDA call failed: %s", cudaGetErrorString(cudaGetLastError()));
done:
  if (ev)
    for (int i = 0; i <= nops; i++)
      if (ev[i]) cudaEventDestroy(ev[i]);
  if (prof)
    for (int i = 0; i < 3 * nops; i++)
      if (prof[i]) cudaEventDestroy(prof[i]);
  free(prof), free(wg_s), free(tpx_s), free(tpx_start);
  free(ev), free(op_s), free(builtin_ops), free(times), free(tok), free(lab), free(buckets);
  exec_walk_destroy(&wk);
  schema_result_free(&res);
  exec_model_destroy(&m);
  /* after a failure the communicators stay registered: rt_nccl_finalize aborts them all */
  if (tp_comm && tp_comm != w->comms[0] && rc == 0) rt_nccl_comm_destroy(w, tp_comm);
  if (dp_comm && dp_comm != w->comms[0] && rc == 0) rt_nccl_comm_destroy(w, dp_comm);
  if (pp_comm && rc == 0) rt_nccl_comm_destroy(w, pp_comm);
  if (emb_comm && rc == 0) rt_nccl_comm_destroy(w, emb_comm);
  return rc;
}
