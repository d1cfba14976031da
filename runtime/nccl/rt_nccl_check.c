/* rt_nccl_check.c — compressed collective vs the uncompressed one on fresh
 * random inputs (see rt_nccl_check.h). */
#include "rt_nccl_check.h"

#include <math.h>
#include <string.h>

#define RT_TACO(e, call)                                                                                     \
  do {                                                                                                       \
    if ((call) != 0) return ts_fail_sys(e, "%s:%d: %s: %s", __FILE__, __LINE__, #call, taco_last_error());  \
  } while (0)
#define RT_CHECKK(e, call)                                                                                   \
  do {                                                                                                       \
    if ((call) != 0) return ts_fail_sys(e, "%s", coll_check_last_error());                                  \
  } while (0)

int rt_coll_bufs_alloc(rt_nccl *w, rt_coll_bufs *b, size_t bytes, ts_err *e) {
  memset(b, 0, sizeof *b);
  b->bytes = bytes;
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaMalloc(&b->send[i], bytes));
    RT_CUDA(e, cudaMalloc(&b->recv[i], bytes));
    RT_CUDA(e, cudaMalloc(&b->ref[i], bytes));
    RT_CUDA(e, cudaMalloc((void **)&b->acc[i], sizeof *b->acc[i]));
  }
  return 0;
}

void rt_coll_bufs_free(rt_nccl *w, rt_coll_bufs *b) {
  for (int i = 0; i < w->nlocal; i++) {
    if (cudaSetDevice(w->devices[i]) != cudaSuccess) continue;
    cudaFree(b->send[i]);
    cudaFree(b->recv[i]);
    cudaFree(b->ref[i]);
    cudaFree(b->acc[i]);
  }
  memset(b, 0, sizeof *b);
}

size_t rt_coll_in_elems(const rt_coll_call *c, int nranks) {
  if (c->caat) return c->rows * c->cols;
  switch (c->op) {
  case COLL_OP_REDUCESCATTER:
  case COLL_OP_ALLTOALL: return c->count * (size_t)nranks;
  default: return c->count;
  }
}

size_t rt_coll_out_elems(const rt_coll_call *c, int nranks) {
  if (c->caat) return c->rows * c->cols;
  switch (c->op) {
  case COLL_OP_ALLGATHER:
  case COLL_OP_ALLTOALL: return c->count * (size_t)nranks;
  default: return c->count;
  }
}

int rt_coll_enqueue(rt_nccl *w, coll_team *t, const rt_coll_call *c, void *const *send, void *const *recv,
                    const coll_opts *o, ts_err *e) {
  const void *s[RT_MAX_LOCAL];
  void *r[RT_MAX_LOCAL];
  size_t es = coll_dtype_bytes(o->dtype);
  for (int i = 0; i < w->nlocal; i++) {
    s[i] = send[i];
    r[i] = recv[i];
    if (!c->inplace) continue;
    char *base = recv[i];
    size_t mine = (size_t)w->ranks[i] * c->count * es;
    if (c->caat || c->op == COLL_OP_ALLREDUCE) s[i] = base;
    else if (c->op == COLL_OP_ALLGATHER) s[i] = base + mine;
    else if (c->op == COLL_OP_REDUCESCATTER) {
      s[i] = base;
      r[i] = base + mine;
    } else {
      return ts_fail(e, NULL, "--inplace", "in-place is defined for allreduce, allgather and reducescatter only");
    }
  }
  int rc = c->caat ? coll_caat_allreduce(t, s, r, c->rows, c->cols, c->p, o) : coll_run(t, c->op, s, r, c->count, o);
  if (rc) return ts_fail_sys(e, "%s", coll_last_error());
  return 0;
}

/* Reference: the same call through plain NCCL, out of place, into ref. */
static int enqueue_reference(rt_nccl *w, coll_team *t, rt_coll_bufs *b, const rt_coll_call *c, const coll_opts *o,
                             ts_err *e) {
  coll_opts plain = *o;
  plain.codec = COLL_CODEC_NONE;
  rt_coll_call full = *c;
  full.inplace = 0;
  if (!c->caat) return rt_coll_enqueue(w, t, &full, b->send, b->ref, &plain, e);
  /* CAAT-Net: ref = all-reduce of everything, then the private columns put
   * back from the input and scaled by sqrt(TP). */
  size_t es = coll_dtype_bytes(o->dtype), shared = coll_caat_shared(c->cols, c->p);
  full.caat = 0;
  full.op = COLL_OP_ALLREDUCE;
  full.count = c->rows * c->cols;
  if (rt_coll_enqueue(w, t, &full, b->send, b->ref, &plain, e)) return -1;
  for (int i = 0; i < w->nlocal && shared < c->cols; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaMemcpy2DAsync((char *)b->ref[i] + shared * es, c->cols * es, (char *)b->send[i] + shared * es,
                                 c->cols * es, (c->cols - shared) * es, c->rows, cudaMemcpyDeviceToDevice,
                                 w->streams[i]));
    RT_CHECKK(e, coll_scale_cols_ref(b->ref[i], o->dtype, c->rows, c->cols, shared, (float)sqrt((double)w->nranks),
                                     w->streams[i]));
  }
  return 0;
}

/* CAAT-Net: the shared channels of out and ref packed side by side in the
 * (no longer needed) send buffer and compared in the codec's groups; then
 * the shared channels zeroed in both, and the private ones compared. */
static int compare_caat(rt_nccl *w, rt_coll_bufs *b, int i, const rt_coll_call *c, const coll_opts *o, ts_err *e) {
  size_t es = coll_dtype_bytes(o->dtype), shared = coll_caat_shared(c->cols, c->p), pitch = c->cols * es;
  size_t packed = c->rows * shared * es;
  cudaStream_t st = w->streams[i];
  if (shared && 2 * packed <= b->bytes) {
    char *po = b->send[i], *pr = (char *)b->send[i] + (packed + 255) / 256 * 256;
    if ((size_t)(pr - po) + packed > b->bytes) return ts_fail_sys(e, "compare_caat: scratch too small");
    RT_CUDA(e, cudaMemcpy2DAsync(po, shared * es, b->recv[i], pitch, shared * es, c->rows, cudaMemcpyDeviceToDevice, st));
    RT_CUDA(e, cudaMemcpy2DAsync(pr, shared * es, b->ref[i], pitch, shared * es, c->rows, cudaMemcpyDeviceToDevice, st));
    RT_CHECKK(e, coll_compare(po, pr, o->dtype, c->rows * shared, o->taco.group, b->acc[i], (void *)st));
    RT_CUDA(e, cudaMemset2DAsync(b->recv[i], pitch, 0, shared * es, c->rows, st));
    RT_CUDA(e, cudaMemset2DAsync(b->ref[i], pitch, 0, shared * es, c->rows, st));
  }
  RT_CHECKK(e, coll_compare(b->recv[i], b->ref[i], o->dtype, c->rows * c->cols, o->taco.group, b->acc[i], (void *)st));
  return 0;
}

int rt_coll_check(rt_nccl *w, coll_team *t, rt_coll_bufs *b, const rt_coll_call *c, const coll_opts *o,
                  unsigned long long seed, rt_check_result *res, ts_err *e) {
  size_t es = coll_dtype_bytes(o->dtype);
  size_t nin = rt_coll_in_elems(c, w->nranks), nout = rt_coll_out_elems(c, w->nranks);
  if ((nin > nout ? nin : nout) * es > b->bytes) return ts_fail_sys(e, "rt_coll_check: buffers too small");
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    void *st = (void *)w->streams[i];
    RT_CHECKK(e, coll_fill_random(b->send[i], o->dtype, nin, seed * 1000003ull + (unsigned long long)w->ranks[i], 1.0f, st));
    RT_CHECKK(e, coll_fill_poison(b->recv[i], o->dtype, b->bytes / es, st));
    RT_CHECKK(e, coll_fill_poison(b->ref[i], o->dtype, b->bytes / es, st));
  }
  if (enqueue_reference(w, t, b, c, o, e)) return -1;
  /* The compressed call: out of place from send, or in place in recv. */
  size_t out_off = 0;
  for (int i = 0; i < w->nlocal && c->inplace; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    size_t mine = (size_t)w->ranks[i] * c->count * es;
    size_t at = (!c->caat && c->op == COLL_OP_ALLGATHER) ? mine : 0;
    RT_CUDA(e, cudaMemcpyAsync((char *)b->recv[i] + at, b->send[i], nin * es, cudaMemcpyDeviceToDevice, w->streams[i]));
  }
  if (c->inplace && !c->caat && c->op == COLL_OP_REDUCESCATTER) out_off = 1;
  if (rt_coll_enqueue(w, t, c, b->send, b->recv, o, e)) return -1;
  /* The codec's error bound holds per codec group, so windows follow the
   * codec's groups: per received segment for all-gather and all-to-all,
   * over the packed shared channels for CAAT-Net. */
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    cudaStream_t st = w->streams[i];
    const char *out = (const char *)b->recv[i] + (out_off ? (size_t)w->ranks[i] * c->count * es : 0);
    RT_CUDA(e, cudaMemsetAsync(b->acc[i], 0, sizeof *b->acc[i], st));
    if (c->caat) {
      if (compare_caat(w, b, i, c, o, e)) return -1;
      continue;
    }
    int segs = (c->op == COLL_OP_ALLGATHER || c->op == COLL_OP_ALLTOALL) ? w->nranks : 1;
    size_t len = nout / (size_t)segs;
    for (int r = 0; r < segs; r++)
      RT_CHECKK(e, coll_compare(out + (size_t)r * len * es, (const char *)b->ref[i] + (size_t)r * len * es, o->dtype,
                                len, o->taco.group, b->acc[i], (void *)st));
  }
  coll_err_acc host[RT_MAX_LOCAL];
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaMemcpyAsync(&host[i], b->acc[i], sizeof host[i], cudaMemcpyDeviceToHost, w->streams[i]));
  }
  if (rt_nccl_wait(w, e)) return -1;
  double v[RT_MAX_LOCAL * 4];
  for (int i = 0; i < w->nlocal; i++) {
    v[i * 4 + 0] = coll_err_max_group_rel(&host[i]);
    v[i * 4 + 1] = coll_err_rel_l2(&host[i]);
    v[i * 4 + 2] = (double)host[i].nonfinite;
    v[i * 4 + 3] = (double)host[i].unwritten;
  }
  if (rt_nccl_max(w, v, 4, e)) return -1;
  res->max_group_rel = v[0];
  res->rel_l2 = v[1];
  res->nonfinite = v[2];
  res->unwritten = v[3];
  return 0;
}

double rt_coll_bound(const rt_coll_call *c, int nranks, const coll_opts *o) {
  int mbits = o->taco.fp8 == TACO_FP8_E5M2 ? 2 : 3;
  if (o->codec != COLL_CODEC_TACO) return ldexp(1.0, -8); /* plain NCCL (CAAT-Net shared part): BF16 order only */
  return coll_error_bound(c->caat ? COLL_OP_ALLREDUCE : c->op, nranks, mbits);
}
