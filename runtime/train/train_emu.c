/* train_emu.c — TP of k ranks emulated on one GPU (train_emu.h). */
#include "train_emu.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec_kernels.h"
#include "gpu_check.h"
#include "taco_fp8.h"
#include "exec_model_internal.h"

typedef struct {
  train_emu *w;
  int rank;
} emu_rank;

struct train_emu {
  int k;
  pthread_barrier_t bar;
  emu_rank ranks[COLL_EMU_MAX_RANKS];
  cudaStream_t red;                          /* where rank 0 runs every reduction */
  cudaEvent_t ev_in[COLL_EMU_MAX_RANKS], ev_out;
  const void *in[COLL_EMU_MAX_RANKS];        /* this collective's buffers, per rank */
  void *out[COLL_EMU_MAX_RANKS];
  float *f32[COLL_EMU_MAX_RANKS];            /* CAAT-Net backward: FP32 copies */
  void *scratch;
  size_t max_elems;
  train_emu_codec codec;
  int rc;                                    /* rank 0's result of the reduction */
  char msg[256];
  double vals[COLL_EMU_MAX_RANKS][64];       /* train_emu_max */
  int rcs[COLL_EMU_MAX_RANKS];
  /* statistics */
  FILE *stats;
  int stats_step, stats_layers, stats_call;
  double *stats_dev;
  /* tensor dump for the reshaping (train_emu_dump) */
  const char *dump_dir;
  int dump_step, dump_rows;
  FILE *dump_index;
  /* NaN/Inf met by the TACO encodes: one counter per layer all-reduce of the step */
  taco_nonfinite *nf_dev;
  int nf_calls, nf_step, nf_layers, nf_inject;
};

#define EMU_NF_CALLS 1024 /* layer all-reduces of one step with a counter of their own (4 a layer) */

static train_emu *active; /* the world whose handles train_emu_nccl_allreduce recognizes */

#define EMU_CUDA(call) CUDA_CHECK(e, call) /* common/gpu_check.h */

/* count = 0, first_index = ULLONG_MAX in the counters of the calls made since the last reset. */
static int nf_reset(train_emu *w) {
  const size_t pitch = sizeof(taco_nonfinite), wd = sizeof(unsigned long long);
  int n = w->nf_calls < EMU_NF_CALLS ? w->nf_calls : EMU_NF_CALLS;
  w->nf_calls = 0;
  if (n == 0) return 0;
  if (cudaMemset2DAsync(w->nf_dev, pitch, 0, wd, (size_t)n, w->red) != cudaSuccess ||
      cudaMemset2DAsync((char *)w->nf_dev + wd, pitch, 0xff, wd, (size_t)n, w->red) != cudaSuccess)
    return -1;
  return 0;
}

int train_emu_create(train_emu **out, int k, size_t max_elems, ts_err *e) {
  *out = NULL;
  if (k < 2 || k > COLL_EMU_MAX_RANKS) return ts_fail(e, NULL, "--tp-emulate", "%d is not in [2, %d]", k, COLL_EMU_MAX_RANKS);
  train_emu *w = calloc(1, sizeof *w);
  if (!w) return ts_fail_sys(e, "train: out of memory");
  *out = w;
  w->k = k, w->max_elems = max_elems, w->stats_step = -1;
  pthread_barrier_init(&w->bar, NULL, (unsigned)k);
  for (int r = 0; r < k; r++) w->ranks[r] = (emu_rank){w, r};
  EMU_CUDA(cudaStreamCreateWithFlags(&w->red, cudaStreamNonBlocking));
  for (int r = 0; r < k; r++) {
    EMU_CUDA(cudaEventCreateWithFlags(&w->ev_in[r], cudaEventDisableTiming));
    EMU_CUDA(cudaMalloc((void **)&w->f32[r], max_elems * sizeof(float)));
  }
  EMU_CUDA(cudaEventCreateWithFlags(&w->ev_out, cudaEventDisableTiming));
  EMU_CUDA(cudaMalloc(&w->scratch, coll_emu_scratch_bytes(k, max_elems, 4)));
  EMU_CUDA(cudaMalloc((void **)&w->stats_dev, 4 * sizeof(double)));
  EMU_CUDA(cudaMalloc((void **)&w->nf_dev, EMU_NF_CALLS * sizeof(taco_nonfinite)));
  w->nf_calls = EMU_NF_CALLS, w->nf_step = -1;
  if (nf_reset(w)) return ts_fail_sys(e, "train: clearing the NaN/Inf counters failed");
  active = w;
  return 0;
}

void train_emu_destroy(train_emu *w) {
  if (!w) return;
  if (active == w) active = NULL;
  for (int r = 0; r < w->k; r++) {
    if (w->ev_in[r]) cudaEventDestroy(w->ev_in[r]);
    cudaFree(w->f32[r]);
  }
  if (w->ev_out) cudaEventDestroy(w->ev_out);
  if (w->red) cudaStreamDestroy(w->red);
  cudaFree(w->scratch), cudaFree(w->stats_dev), cudaFree(w->nf_dev);
  if (w->dump_index) fclose(w->dump_index);
  pthread_barrier_destroy(&w->bar);
  free(w);
}

void train_emu_set_codec(train_emu *w, const train_emu_codec *c) { w->codec = *c; }
ncclComm_t train_emu_comm(train_emu *w, int rank) { return (ncclComm_t)(void *)&w->ranks[rank]; }
void *train_emu_hook_ctx(train_emu *w, int rank) { return &w->ranks[rank]; }

static void barrier(train_emu *w) { pthread_barrier_wait(&w->bar); }

typedef int (*emu_fn)(train_emu *w, const void *arg);

/* One collective: every rank's input ready on its stream -> rank 0 runs fn on
 * w->red -> every rank's stream waits for it. Returns fn's result on every rank. */
static int emu_run(emu_rank *rk, const void *in, void *out, cudaStream_t st, emu_fn fn, const void *arg) {
  train_emu *w = rk->w;
  const int r = rk->rank;
  w->in[r] = in, w->out[r] = out;
  cudaError_t ce = cudaEventRecord(w->ev_in[r], st);
  barrier(w);
  if (r == 0) {
    w->rc = 0;
    for (int i = 0; i < w->k && ce == cudaSuccess; i++) ce = cudaStreamWaitEvent(w->red, w->ev_in[i], 0);
    if (ce != cudaSuccess) {
      w->rc = -1;
      snprintf(w->msg, sizeof w->msg, "emulated collective: %s", cudaGetErrorString(ce));
    } else if (fn(w, arg)) {
      w->rc = -1;
    }
    if (cudaEventRecord(w->ev_out, w->red) != cudaSuccess) w->rc = -1;
  }
  barrier(w);
  int rc = w->rc;
  if (cudaStreamWaitEvent(st, w->ev_out, 0) != cudaSuccess) rc = -1;
  barrier(w); /* ev_out is recorded again by the next collective only after every rank waited on this one */
  return rc;
}

/* ---- plain all-reduces (the executor's ncclAllReduce on our handles) ---- */

typedef struct {
  size_t count;
  taco_dtype dt;
  coll_emu_op op;
} plain_arg;

static int plain_fn(train_emu *w, const void *a) {
  const plain_arg *p = a;
  if (coll_emu_plain(w->in, w->out, w->k, p->count, p->dt, p->op, w->red)) {
    snprintf(w->msg, sizeof w->msg, "%s", coll_emu_last_error());
    return -1;
  }
  return 0;
}

ncclResult_t train_emu_nccl_allreduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t stream, int *mine) {
  train_emu *w = active;
  *mine = 0;
  if (!w || (void *)comm < (void *)&w->ranks[0] || (void *)comm >= (void *)&w->ranks[w->k]) return ncclSuccess;
  *mine = 1;
  plain_arg a = {count, TACO_DTYPE_BF16, COLL_EMU_SUM};
  if (type == ncclFloat32) a.dt = TACO_DTYPE_FP32;
  else if (type != ncclBfloat16) return ncclInvalidArgument;
  if (op == ncclMax) a.op = COLL_EMU_MAX;
  else if (op == ncclAvg) a.op = COLL_EMU_AVG;
  else if (op != ncclSum) return ncclInvalidArgument;
  return emu_run((emu_rank *)(void *)comm, send, recv, stream, plain_fn, &a) ? ncclInternalError : ncclSuccess;
}

/* ---- the layer all-reduces ---- */

typedef struct {
  size_t rows, cols;
  int backward;
} layer_arg;

static const char *tensor_name(int backward, int second) {
  return backward ? (second ? "qkv_dgrad" : "fc1_dgrad") : (second ? "fc2_out" : "attn_out");
}

/* The layer and tensor of a step's call-th layer all-reduce (forward: attn_out,
 * fc2_out a layer; backward: fc1_dgrad, qkv_dgrad, last layer first). */
static const char *call_site(int call, int L, int *layer) {
  int bwd = call >= 2 * L, c = bwd ? call - 2 * L : call;
  *layer = bwd ? L - 1 - c / 2 : c / 2;
  return tensor_name(bwd, c % 2);
}

/* The first dump_rows rows of rank 0's partial as FP32 (DIR/<tensor>-l<layer>-s<step>.f32) and a
 * line of DIR/dump-index.csv. */
static int dump_tensor(train_emu *w, const layer_arg *a, int layer, const char *tensor) {
  size_t rows = a->rows < (size_t)w->dump_rows ? a->rows : (size_t)w->dump_rows, n = rows * a->cols;
  uint16_t *h = malloc(n * 2);
  float *f = malloc(n * 4);
  char path[1200], name[128];
  int rc = -1;
  snprintf(name, sizeof name, "%s-l%d-s%d.f32", tensor, layer, w->stats_step);
  snprintf(path, sizeof path, "%s/%s", w->dump_dir, name);
  FILE *out = NULL;
  if (h && f && cudaMemcpyAsync(h, w->out[0], n * 2, cudaMemcpyDeviceToHost, w->red) == cudaSuccess &&
      cudaStreamSynchronize(w->red) == cudaSuccess && (out = fopen(path, "wb"))) {
    for (size_t i = 0; i < n; i++) f[i] = taco_bf16_to_float(h[i]);
    if (fwrite(f, 4, n, out) == n) rc = 0;
  }
  if (out) fclose(out);
  if (rc) snprintf(w->msg, sizeof w->msg, "%.200s: cannot write the tensor dump", path);
  else fprintf(w->dump_index, "%s,%d,%d,%s,%zu,%zu\n", name, w->stats_step, layer, tensor, rows, a->cols),
         fflush(w->dump_index);
  free(h), free(f);
  return rc;
}

static int stats_row(train_emu *w, const layer_arg *a) {
  const size_t n = a->rows * a->cols;
  int layer;
  const char *tensor = call_site(w->stats_call++, w->stats_layers, &layer);
  double h[4];
  if (train_stats_bf16(w->out[0], n, w->stats_dev, w->red) ||
      cudaMemcpyAsync(h, w->stats_dev, sizeof h, cudaMemcpyDeviceToHost, w->red) != cudaSuccess ||
      cudaStreamSynchronize(w->red) != cudaSuccess) {
    snprintf(w->msg, sizeof w->msg, "tensor statistics: a CUDA call failed");
    return -1;
  }
  double mean = h[0] / n, m2 = h[1] / n, rms = sqrt(m2);
  /* kurtosis about zero (the tensors are centred near zero): E x^4 / (E x^2)^2; 3 for a Gaussian */
  double kurt = m2 > 0 ? (h[2] / n) / (m2 * m2) : 0;
  (void)mean;
  fprintf(w->stats, "%d,%d,%s,%zu,%.6g,%.6g,%.4f,%.4f\n", w->stats_step, layer, tensor, n, rms, h[3],
          rms > 0 ? h[3] / rms : 0, kurt);
  if (w->dump_dir && w->stats_step == w->dump_step && (layer == 0 || layer == w->stats_layers / 2 || layer == w->stats_layers - 1))
    return dump_tensor(w, a, layer, tensor);
  return 0;
}

/* --inject-nan: a NaN into rank 0's partial of the step's first layer all-reduce. */
static int inject_nan(train_emu *w) {
  static const uint16_t bf16_nan = 0x7fc0;
  w->nf_inject = 0;
  if (cudaMemcpyAsync(w->out[0], &bf16_nan, sizeof bf16_nan, cudaMemcpyHostToDevice, w->red) != cudaSuccess ||
      cudaStreamSynchronize(w->red) != cudaSuccess) {
    snprintf(w->msg, sizeof w->msg, "--inject-nan: a CUDA call failed");
    return -1;
  }
  return 0;
}

static int layer_fn(train_emu *w, const void *av) {
  const layer_arg *a = av;
  const size_t n = a->rows * a->cols;
  const train_emu_codec *c = &w->codec;
  if (w->stats && stats_row(w, a)) return -1;
  if (w->nf_inject && inject_nan(w)) return -1;
  coll_emu_opts ar = c->ar; /* this call's NaN/Inf counter */
  if (ar.codec == COLL_EMU_TACO && w->nf_calls < EMU_NF_CALLS) ar.nonfinite = w->nf_dev + w->nf_calls;
  w->nf_calls++;
  int rc = 0;
  if (!c->caat) {
    rc = coll_emu_allreduce(w->out, w->k, n, TACO_DTYPE_BF16, &ar, w->scratch, w->red);
  } else if (!a->backward) {
    rc = coll_emu_caat(w->out, w->k, a->rows, a->cols, c->p, TACO_DTYPE_BF16, &ar, w->scratch, w->red);
  } else {
    /* as the executor: CAAT-Net's backward reduces the shared channels in FP32 */
    ts_err e;
    void *f[COLL_EMU_MAX_RANKS];
    for (int r = 0; r < w->k && !rc; r++) f[r] = w->f32[r], rc = exec_bf16_to_f32(w->out[r], w->f32[r], (long long)n, w->red, &e);
    if (!rc) rc = coll_emu_caat(f, w->k, a->rows, a->cols, c->p, TACO_DTYPE_FP32, &ar, w->scratch, w->red);
    for (int r = 0; r < w->k && !rc; r++) rc = exec_f32_to_bf16(w->f32[r], w->out[r], (long long)n, w->red, &e);
    if (rc) snprintf(w->msg, sizeof w->msg, "%s", coll_emu_last_error());
    return rc;
  }
  if (rc) snprintf(w->msg, sizeof w->msg, "%s", coll_emu_last_error());
  return rc;
}

int train_emu_hook(void *ctx, void *buf, size_t rows, size_t cols, int backward, cudaStream_t stream, ts_err *e) {
  emu_rank *rk = ctx;
  if (rows * cols > rk->w->max_elems)
    return ts_fail_sys(e, "emulated all-reduce: %zu elements, buffers for %zu", rows * cols, rk->w->max_elems);
  layer_arg a = {rows, cols, backward};
  if (emu_run(rk, buf, buf, stream, layer_fn, &a)) return ts_fail_sys(e, "emulated TP all-reduce: %s", rk->w->msg);
  return 0;
}

/* ---- helpers over the ranks ---- */

int train_emu_agree(train_emu *w, int rank, int rc) {
  w->rcs[rank] = rc;
  barrier(w);
  int worst = 0;
  for (int r = 0; r < w->k; r++) worst = w->rcs[r] < worst ? w->rcs[r] : worst;
  barrier(w);
  return worst;
}

void train_emu_max(train_emu *w, int rank, double *vals, int n) {
  for (int base = 0; base < n; base += 64) {
    int m = n - base < 64 ? n - base : 64;
    memcpy(w->vals[rank], vals + base, (size_t)m * sizeof *vals);
    barrier(w);
    for (int i = 0; i < m; i++)
      for (int r = 0; r < w->k; r++) vals[base + i] = w->vals[r][i] > vals[base + i] ? w->vals[r][i] : vals[base + i];
    barrier(w);
  }
}

int train_emu_sync_replicated(train_emu *w, int rank, exec_model *m, ts_err *e) {
  ncclComm_t comm = train_emu_comm(w, rank);
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor_kind k = m->tensors[t].kind;
    if (k == EXEC_T_WTE || k == EXEC_T_QKV || k == EXEC_T_ATTN_OUT || k == EXEC_T_FC1 || k == EXEC_T_FC2) continue;
    int mine;
    float *g = exec_grad_of(m, t);
    if (train_emu_nccl_allreduce(g, g, m->tensors[t].rows * m->tensors[t].cols, ncclFloat, ncclAvg, comm, m->stream,
                                 &mine) != ncclSuccess)
      return ts_fail_sys(e, "emulated CAAT-Net gradient average: %s", w->msg);
  }
  return 0;
}

int train_emu_dump(train_emu *w, const char *dir, int step, int rows, ts_err *e) {
  char path[1100];
  snprintf(path, sizeof path, "%s/dump-index.csv", dir);
  w->dump_index = fopen(path, "w");
  if (!w->dump_index) return ts_fail(e, path, NULL, "cannot write");
  fprintf(w->dump_index, "file,step,layer,tensor,rows,cols\n");
  w->dump_dir = dir, w->dump_step = step, w->dump_rows = rows;
  return 0;
}

void train_emu_step_begin(train_emu *w, int step, int layers, int inject) {
  w->nf_step = step, w->nf_layers = layers, w->nf_inject = inject;
}

int train_emu_step_check(train_emu *w, ts_err *e) {
  static taco_nonfinite host[EMU_NF_CALLS];
  int n = w->nf_calls < EMU_NF_CALLS ? w->nf_calls : EMU_NF_CALLS;
  if (n > 0) {
    EMU_CUDA(cudaMemcpyAsync(host, w->nf_dev, (size_t)n * sizeof *host, cudaMemcpyDeviceToHost, w->red));
    EMU_CUDA(cudaStreamSynchronize(w->red));
  }
  if (nf_reset(w)) return ts_fail_sys(e, "train: clearing the NaN/Inf counters failed");
  for (int i = 0; i < n; i++) {
    if (!host[i].count) continue;
    int layer;
    const char *tensor = call_site(i, w->nf_layers, &layer);
    return ts_fail_sys(e, "step %d: TP all-reduce of layer %d %s (emulated TP %d): the TACO encode met %llu NaN/Inf "
                          "values (first at element %llu of a rank's partial; the codec sent them as zeros)",
                       w->nf_step, layer, tensor, w->k, host[i].count, host[i].first_index);
  }
  return 0;
}

void train_emu_stats(train_emu *w, FILE *out, int step, int layers) {
  w->stats = out, w->stats_step = step, w->stats_layers = layers, w->stats_call = 0;
}
