/* exec_walk.c — walks a plan_build_program() program on the GPU (see exec_walk.h). */
#include "exec_walk.h"

#include <stdlib.h>
#include <string.h>
#include "exec_run.h"
#include <stdio.h>
#include "gpu_check.h"
#include "ops_variants.h"

#define WK_CUDA(call) CUDA_CHECK(e, call)

static int walk_setup(exec_walk *w, int rank, exec_model *m, ts_err *e) {
  w->loaded = 1;
  /* plan fields the simulator prices and the executor does not run (yet): exec_plan.c */
  if (exec_plan_refuse(&w->p, e)) return -1;
  /* expert parallelism: the model holds its rank's experts, cut at creation (exec_pipeline.ep) */
  const int plan_ep = w->p.ep > 1 && model_is_moe(&w->p.model) ? w->p.ep : 1;
  if (plan_ep != m->ep)
    return ts_fail(e, w->p.path, "layout.ep", "%d: the model was made for ep %d (exec_pipeline.ep)", plan_ep, m->ep);
  if (!w->p.bias_unfused && (w->p.model.linear_bias || w->p.model.qkv_bias) && rank == 0)
    fprintf(stderr, "note: %s: bias_fusion is true (the default): tacosim prices the biases inside other kernels, "
            "while this executor adds them in passes of their own (fused biases NOT IMPLEMENTED here); set "
            "\"bias_fusion\": false for a plan whose prediction should price what this run does\n", w->p.path);
  if ((w->p.attention_backend == PLAN_ATTENTION_FUSED || w->p.attention_backend == PLAN_ATTENTION_FLASH) && rank == 0)
    fprintf(stderr, "note: %s: attention_backend is \"%s\"%s: this executor runs its own attention kernel (the result "
            "file says \"executor\"); set \"attention_backend\": \"executor\" for a plan whose prediction should price "
            "what this run does\n", w->p.path, plan_attention_backend_name(w->p.attention_backend),
            w->p.attention_backend == PLAN_ATTENTION_FUSED ? " (the default)" : "");
  if (plan_build_program(&w->p, rank, &w->prog, e)) return -1;
  if (exec_walk_check_program(&w->p, &w->prog, e)) return -1;
  if (exec_walk_layer_op_index(&w->p, m->layer_op_index, e)) return -1;
  if (plan_micro_batches(&w->p) != m->micros || w->p.tp != m->tp || w->p.dp != m->dp || w->p.pp != m->pp ||
      w->p.vpp != m->vpp)
    return ts_fail(e, w->p.path, "layout", "the program (tp %d, dp %d, pp %d, vpp %d, %d micro-batches) does not "
                   "match the model (tp %d, dp %d, pp %d, vpp %d, %d)", w->p.tp, w->p.dp, w->p.pp, w->p.vpp,
                   plan_micro_batches(&w->p), m->tp, m->dp, m->pp, m->vpp, m->micros);
  if (exec_model_enter_walker_mode(m, e)) return -1;
  if (exec_model_set_layout(m, w->p.sequence_parallel, w->p.zero1, e)) return -1;
  if (exec_model_prepare_codecs(m, w->prog.ops, w->prog.n, e)) return -1;
  /* a model that shares recomputed activations needs a program that recomputes them */
  const int plan_rc = w->p.recompute == MODEL_RECOMPUTE_FULL ? 2 : w->p.recompute == MODEL_RECOMPUTE_SELECTIVE ? 1 : 0;
  if (m->cfg.recompute > plan_rc)
    return ts_fail(e, w->p.path, "layout.recompute", "the model keeps activations for recomputation level %d, the "
                   "program recomputes at level %d", m->cfg.recompute, plan_rc);
  /* activation slots: the model holds m->nslots; this program's order needs slots_needed */
  const int M = m->micros;
  w->slot_of = malloc((size_t)M * sizeof *w->slot_of), w->prev_of = malloc((size_t)M * sizeof *w->prev_of);
  w->bslot_of = malloc((size_t)M * sizeof *w->bslot_of), w->bprev_of = malloc((size_t)M * sizeof *w->bprev_of);
  w->last_on = malloc((size_t)M * 4 * sizeof *w->last_on), w->began = malloc((size_t)M);
  if (!w->slot_of || !w->prev_of || !w->bslot_of || !w->bprev_of || !w->last_on || !w->began)
    return ts_fail_sys(e, "exec walk: out of memory");
  /* with boundary buffers a micro-batch holds its slot from its first op that is not a forward receive */
  const int slots_needed = exec_walk_slots(&w->prog, M, m->bnd_x != NULL, w->slot_of, w->prev_of, e);
  const int bslots_needed = exec_walk_slots(&w->prog, M, 0, w->bslot_of, w->bprev_of, e);
  if (slots_needed < 0 || bslots_needed < 0) return -1;
  if (slots_needed > m->nslots || (m->bnd_x && bslots_needed > m->nbslots))
    return ts_fail(e, w->p.path, "layout", "rank %d's program holds %d micro-batches at once (%d with the "
                   "received ones); the model has %d activation slots and %d boundary buffers (make it with "
                   "exec_walk_program_shape)", rank, slots_needed, bslots_needed, m->nslots, m->nbslots);
  m->slot_of = w->slot_of;
  if (m->bnd_x) m->bslot_of = w->bslot_of;
  w->done = calloc((size_t)w->prog.n, sizeof *w->done);
  w->ready = calloc((size_t)w->prog.n, sizeof *w->ready);
  if (!w->done || !w->ready) return ts_fail_sys(e, "exec walk: out of memory");
  WK_CUDA(cudaEventCreate(&w->start));
  for (int i = 0; i < w->prog.n; i++) {
    WK_CUDA(cudaEventCreate(&w->done[i]));
    WK_CUDA(cudaEventCreate(&w->ready[i]));
  }
  return 0;
}

int exec_walk_init(exec_walk *w, const char *plan_path, int rank, exec_model *m, ts_err *e) {
  memset(w, 0, sizeof *w);
  /* compiled-in zoo folders first, then ./models and ./topologies (a copy of the tree elsewhere) */
  if (plan_load(plan_path, NULL, NULL, &w->p, e) && plan_load(plan_path, "models", "topologies", &w->p, e)) return -1;
  return walk_setup(w, rank, m, e);
}

int exec_walk_init_text(exec_walk *w, const char *text, const char *what, int rank, exec_model *m, ts_err *e) {
  memset(w, 0, sizeof *w);
  if (plan_from_json_text(text, strlen(text), what, NULL, NULL, &w->p, e) &&
      plan_from_json_text(text, strlen(text), what, "models", "topologies", &w->p, e))
    return -1;
  return walk_setup(w, rank, m, e);
}

void exec_walk_destroy(exec_walk *w) {
  if (w->done)
    for (int i = 0; i < w->prog.n; i++) {
      if (w->done[i]) cudaEventDestroy(w->done[i]);
      if (w->ready && w->ready[i]) cudaEventDestroy(w->ready[i]);
    }
  if (w->start) cudaEventDestroy(w->start);
  free(w->done), free(w->ready);
  free(w->slot_of), free(w->prev_of), free(w->bslot_of), free(w->bprev_of), free(w->last_on), free(w->began);
  if (w->loaded) plan_program_free(&w->prog);
  memset(w, 0, sizeof *w);
}

static int stream_index(const exec_model *m, cudaStream_t s) {
  return s == m->stream ? 0 : s == m->tp_stream ? 1 : s == m->dp_stream ? 2 : 3;
}

/* Stream s waits for micro-batch j's last ops on the other streams (q: s's index). */
static int wait_for_micro(const exec_walk *w, int j, int q, cudaStream_t s, ts_err *e) {
  const int *last = &w->last_on[j * 4];
  for (int t = 0; t < 4; t++)
    if (t != q && last[t] >= 0) WK_CUDA(cudaStreamWaitEvent(s, w->done[last[t]], 0));
  return 0;
}

/* A micro-batch that reuses an activation slot (or boundary buffer): its first op on each stream that
 * uses it waits for the last ops of its previous holder on the other streams (the same stream keeps its
 * order itself; the previous holder's ops all come earlier in the program). */
static int slot_wait(exec_model *m, exec_walk *w, int i, cudaStream_t s, ts_err *e) {
  const plan_op *op = &w->prog.ops[i];
  const int k = op->micro, q = stream_index(m, s);
  if (k < 0) return 0;
  if (m->bnd_x && !(w->began[k] & (1u << q)) && w->bprev_of[k] >= 0 && wait_for_micro(w, w->bprev_of[k], q, s, e))
    return -1;
  w->began[k] |= (unsigned char)(1u << q);
  const int uses_slot = !(m->bnd_x && exec_walk_is_fwd_recv(op)); /* a received activation lands in its buffer */
  if (uses_slot && !(w->began[k] & (16u << q))) {
    if (w->prev_of[k] >= 0 && wait_for_micro(w, w->prev_of[k], q, s, e)) return -1;
    w->began[k] |= (unsigned char)(16u << q);
  }
  w->last_on[k * 4 + q] = i;
  return 0;
}

int exec_walk_program_shape(const char *path, const char *text, int rank, exec_pipeline *pipe, ts_err *e) {
  plan *p = malloc(sizeof *p);
  plan_program prog;
  int built = 0, rc = -1, *slot_of = NULL, *prev_of = NULL;
  if (!p) return ts_fail_sys(e, "exec walk: out of memory");
  if (path ? plan_load(path, NULL, NULL, p, e) && plan_load(path, "models", "topologies", p, e)
           : plan_from_json_text(text, strlen(text), "exec plan", NULL, NULL, p, e) &&
                 plan_from_json_text(text, strlen(text), "exec plan", "models", "topologies", p, e))
    goto out;
  if (plan_build_program(p, rank, &prog, e)) goto out;
  built = 1;
  const int M = plan_micro_batches(p);
  slot_of = malloc((size_t)M * sizeof *slot_of), prev_of = malloc((size_t)M * sizeof *prev_of);
  if (!slot_of || !prev_of) {
    ts_fail_sys(e, "exec walk: out of memory");
    goto out;
  }
  /* PP > 1: slots from the first op that is not a forward receive, boundary buffers counting those */
  const int slots = exec_walk_slots(&prog, M, p->pp > 1, slot_of, prev_of, e);
  const int bslots = exec_walk_slots(&prog, M, 0, slot_of, prev_of, e);
  if (slots < 0 || bslots < 0) goto out;
  const int per_micro = ops_variant_is(OPS_V_PP_SLOTS, "per-micro");
  pipe->slots = per_micro ? 0 : slots; /* 0: one per micro-batch */
  pipe->bslots = per_micro || p->pp == 1 ? 0 : bslots;
  const int stage = plan_coord_of(p, rank).pp;
  if (p->pp > 1 && p->vpp == 1 && (plan_uneven_stages(p) || p->account_embedding || p->account_loss)) {
    pipe->layer_lo = plan_chunk_first_layer(p, stage, 0);
    pipe->layer_hi = pipe->layer_lo + plan_vchunk_layers(p, stage, 0);
  }
  rc = 0;
out:
  if (built) plan_program_free(&prog);
  free(slot_of), free(prev_of), free(p);
  return rc;
}

int exec_walk_iteration(exec_model *m, exec_walk *w, int skip_optimizer, ts_err *e) {
  if (exec_model_zero_grad(m, e)) return -1;
  for (int k = 0; k < m->micros; k++) {
    w->began[k] = 0;
    for (int q = 0; q < 4; q++) w->last_on[k * 4 + q] = -1;
  }
  WK_CUDA(cudaEventRecord(w->start, m->stream));
  cudaStream_t side[3] = {m->tp_stream, m->dp_stream, m->pp_stream};
  for (int s = 0; s < 3; s++)
    if (side[s]) WK_CUDA(cudaStreamWaitEvent(side[s], w->start, 0));
  for (int i = 0; i < w->prog.n; i++) {
    const plan_op *op = &w->prog.ops[i];
    if (skip_optimizer && op->kind == PLAN_OP_COMPUTE && op->model_op == PLAN_MOP_OPTIMIZER) {
      WK_CUDA(cudaEventRecord(w->done[i], m->stream));
      continue;
    }
    cudaStream_t s = exec_model_op_stream(m, op);
    for (int d = 0; d < PLAN_MAX_DEPS; d++) {
      int dep = op->dep[d];
      if (dep >= 0 && exec_model_op_stream(m, &w->prog.ops[dep]) != s) WK_CUDA(cudaStreamWaitEvent(s, w->done[dep], 0));
    }
    if (slot_wait(m, w, i, s, e)) return -1;
    WK_CUDA(cudaEventRecord(w->ready[i], s));
    m->cur_op = i;
    if (exec_model_run_op(m, op, e)) return -1;
    WK_CUDA(cudaEventRecord(w->done[i], s));
  }
  if (skip_optimizer && exec_model_walker_finish(m, e)) return -1;
  /* the compute stream joins the others, so a wait on it covers the whole iteration */
  for (int s = 0; s < 3; s++)
    if (side[s]) {
      WK_CUDA(cudaEventRecord(m->ev_done, side[s]));
      WK_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
    }
  return 0;
}

int exec_walk_times(const exec_model *m, const exec_walk *w, double *op_s, double *wait_s, double *start_s,
                    ts_err *e) {
  int last[4] = {-1, -1, -1, -1}; /* previous op on the compute, TP, DP, PP stream */
  for (int i = 0; i < w->prog.n; i++) {
    cudaStream_t s = exec_model_op_stream(m, &w->prog.ops[i]);
    int k = s == m->stream ? 0 : s == m->tp_stream ? 1 : s == m->dp_stream ? 2 : 3;
    cudaEvent_t from = last[k] < 0 ? w->start : w->done[last[k]];
    float total = 0, waited = 0, begin = 0;
    WK_CUDA(cudaEventElapsedTime(&total, from, w->done[i]));
    WK_CUDA(cudaEventElapsedTime(&waited, from, w->ready[i]));
    WK_CUDA(cudaEventElapsedTime(&begin, w->start, w->ready[i]));
    op_s[i] = total * 1e-3;
    wait_s[i] = waited * 1e-3;
    start_s[i] = begin * 1e-3;
    last[k] = i;
  }
  return 0;
}
