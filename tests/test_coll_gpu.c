/* test_coll_gpu.c — compressed collectives equal the uncompressed NCCL ones
 * within the codec's error bound, on fresh random inputs, at sizes from
 * 1 KiB to 1 GiB (odd sizes included), in place and out of place, with
 * every output element written; the NCCL path and, where the GPUs reach each
 * other over NVLink, the direct path (kernels/coll_direct.h). Drives all local GPUs from one process
 * (ncclCommInitAll). Plain C, no CUnit (the GPU machine has none); exits 77
 * when there is no GPU, 1 on any failure. TEST_COLL_MAX_BYTES caps the size
 * (default 1 GiB). TEST_COLL_HOST=1 runs the direct cases on the host-memory
 * flavour (kernels/coll_host.h; coll_team_set_host ON before the set-up), and the
 * uncompressed direct path (codec NONE, direct ON) is checked as well, with
 * the plain sum kernel against its C reference bit for bit. The direct
 * two-shot all-reduce runs first in each coll_opts.direct_ar variant;
 * TEST_COLL_ONLY=direct-allreduce runs only those cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>

#include "coll_check.h"
#include "coll_direct.h"
#include "coll_host.h"
#include "coll_taco.h"
#include "rt_nccl.h"
#include "rt_nccl_check.h"

static int failures, checks;

static int run_case(rt_nccl *w, coll_team *t, rt_coll_bufs *b, const rt_coll_call *c, const coll_opts *o,
                    const char *label) {
  ts_err e = {{0}, 0};
  rt_check_result r;
  static unsigned long long seed = 1;
  if (rt_coll_check(w, t, b, c, o, seed++, &r, &e)) {
    printf("ERROR %s: %s\n", label, e.msg);
    return -1; /* NCCL or CUDA failed: the communicators are gone */
  }
  double bound = rt_coll_bound(c, w->nranks, o);
  int ok = r.max_group_rel <= bound && r.nonfinite == 0 && r.unwritten == 0;
  checks++;
  if (!ok) failures++;
  printf("%-4s %-60s max_rel %.4f (bound %.4f) rel_l2 %.4f nonfinite %.0f unwritten %.0f\n", ok ? "ok" : "FAIL",
         label, r.max_group_rel, bound, r.rel_l2, r.nonfinite, r.unwritten);
  fflush(stdout);
  return 0;
}

/* The direct two-shot all-reduce in each of its variants (kernels/coll_direct.c,
 * coll_opts.direct_ar whole|pipe|copy|auto, direct_ar_pieces, direct_ar_own_copy): sizes where the
 * pipelined one applies (checked to have run: coll_direct_pipe_calls grows)
 * and odd sizes where it falls back to the whole one; in and out of place;
 * G = 32 and 512 at one size. Returns 1 after an NCCL/CUDA error. */
static int check_direct_allreduce_variants(rt_nccl *w, coll_team *t, rt_coll_bufs *b, size_t max_bytes) {
  static const struct {
    coll_direct_ar mode;
    int pieces, own_copy; /* pieces 0: the default */
  } vs[] = {{COLL_DIRECT_AR_WHOLE, 0, 0}, {COLL_DIRECT_AR_PIPE, 2, 0}, {COLL_DIRECT_AR_PIPE, 2, 1},
            {COLL_DIRECT_AR_PIPE, 4, 0}, {COLL_DIRECT_AR_PIPE, 4, 1},
            /* round 6b: one piece, own block by the copy engine; one piece duplicated */
            {COLL_DIRECT_AR_COPY, 0, 0}, {COLL_DIRECT_AR_PIPE, 1, 0},
            /* the default: copy from COLL_DIRECT_AR_COPY_MIN_BYTES, whole under it */
            {COLL_DIRECT_AR_AUTO, 0, 0}};
  const size_t sizes[] = {1 << 20, (1 << 20) + 2 * 7, 17 * (1 << 20) + 2 * 333, 16 << 20, 64 << 20, 256 << 20};
  const int groups[] = {128, 32, 512};
  int dead = 0;
  for (size_t vi = 0; vi < sizeof vs / sizeof *vs && !dead; vi++) {
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes && !dead; si++)
      for (size_t gi = 0; gi < sizeof groups / sizeof *groups && !dead; gi++)
        for (int inplace = 0; inplace < 2 && !dead; inplace++) {
          size_t bytes = sizes[si];
          if (bytes > max_bytes || (gi && si)) continue; /* other groups at 1 MiB only */
          rt_coll_call c;
          memset(&c, 0, sizeof c);
          c.op = COLL_OP_ALLREDUCE;
          c.inplace = inplace;
          c.count = bytes / 2;
          coll_opts o = coll_opts_default();
          o.min_bytes = 0;
          o.taco.group = groups[gi];
          o.allreduce = COLL_ALLREDUCE_TWO_SHOT;
          o.direct = COLL_DIRECT_ON;
          o.direct_ar = vs[vi].mode;
          o.direct_ar_pieces = vs[vi].pieces;
          o.direct_ar_own_copy = vs[vi].own_copy;
          unsigned long long before = coll_direct_pipe_calls(t->direct);
          /* pipe applies when every piece is whole 16-group blocks per rank */
          /* (pipe's default pieces: COLL_DIRECT_AR_PIECES_DEFAULT, 2; copy and auto: one piece) */
          int pieces = vs[vi].pieces ? vs[vi].pieces : vs[vi].mode == COLL_DIRECT_AR_PIPE ? 2 : 1;
          size_t unit = (size_t)pieces * (size_t)w->nranks * 16u * (size_t)groups[gi];
          int expect_pipe = vs[vi].mode != COLL_DIRECT_AR_WHOLE && c.count % unit == 0 &&
                            (vs[vi].mode != COLL_DIRECT_AR_AUTO || bytes >= COLL_DIRECT_AR_COPY_MIN_BYTES);
          char label[160];
          snprintf(label, sizeof label, "allreduce %zu B G=%d %s DIRECT two-shot %s pieces %d own %s", bytes,
                   groups[gi], inplace ? "in-place" : "out-of-place", coll_direct_ar_name(vs[vi].mode), pieces,
                   vs[vi].mode == COLL_DIRECT_AR_COPY || vs[vi].own_copy ? "copy" : "dup");
          if (run_case(w, t, b, &c, &o, label)) dead = 1;
          unsigned long long after = coll_direct_pipe_calls(t->direct);
          if (!dead && (after > before) != expect_pipe) {
            checks++;
            failures++;
            printf("FAIL %s: pipelined calls %llu -> %llu, expected %s\n", label, before, after,
                   expect_pipe ? "the pipelined variant" : "the whole one");
          }
        }
  }
  return dead;
}

/* coll_host_sum on the GPU equals coll_host_sum_ref bit for bit (k blocks,
 * an odd element count, BF16 and FP32). Returns -1 on a CUDA error. */
static int check_host_sum(int device) {
  const size_t n = 1000003, stride = ((n * 4 + 255) / 256) * 256;
  const int k = 3;
  for (int dt = 0; dt < 2; dt++) {
    taco_dtype dtype = dt ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
    size_t es = dt ? 4 : 2;
    unsigned char *blocks = NULL, *out = NULL;
    unsigned char *hb = malloc(k * stride), *ho = malloc(n * es), *hr = malloc(n * es);
    int rc = -1;
    if (!hb || !ho || !hr) goto done;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc((void **)&blocks, k * stride) != cudaSuccess ||
        cudaMalloc((void **)&out, n * es) != cudaSuccess)
      goto done;
    for (int b = 0; b < k; b++)
      if (coll_fill_random(blocks + b * stride, dtype, n, 500 + (unsigned)b, 1.0f, NULL)) goto done;
    if (coll_host_sum(blocks, k, stride, n, dtype, out, NULL) != 0 || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(hb, blocks, k * stride, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(ho, out, n * es, cudaMemcpyDeviceToHost) != cudaSuccess)
      goto done;
    coll_host_sum_ref(hb, k, stride, n, dtype, hr);
    size_t differ = 0;
    for (size_t i = 0; i < n * es; i++) differ += ho[i] != hr[i];
    checks++;
    if (differ) failures++;
    printf("%-4s coll_host_sum %s k=%d n=%zu equals the C reference: %zu bytes differ\n", differ ? "FAIL" : "ok",
           dt ? "fp32" : "bf16", k, n, differ);
    rc = 0;
  done:
    if (rc) printf("ERROR coll_host_sum check: %s\n", cudaGetErrorString(cudaGetLastError()));
    cudaFree(out);
    cudaFree(blocks);
    free(hr);
    free(ho);
    free(hb);
    if (rc) return -1;
  }
  return 0;
}

int main(void) {
  if (rt_cuda_device_count() < 1) {
    printf("test_coll_gpu: no CUDA device: skipped\n");
    return 77;
  }
  size_t max_bytes = (size_t)1 << 30;
  const char *cap = getenv("TEST_COLL_MAX_BYTES");
  if (cap) max_bytes = strtoull(cap, NULL, 10);
  rt_nccl w;
  const char *host_env = getenv("TEST_COLL_HOST");
  int host = host_env && atoi(host_env) == 1;
  /* the host flavour runs where NCCL goes through host shared memory */
  rt_nccl_opts no = {1, 0, 120, host ? COLL_TRANSPORT_SHM : COLL_TRANSPORT_AUTO};
  ts_err e = {{0}, 0};
  if (rt_nccl_init(&w, &no, &e)) {
    printf("test_coll_gpu: %s\n", e.msg);
    return 1;
  }
  coll_team t;
  if (coll_team_init(&t, w.nlocal, w.comms, w.devices, w.streams)) {
    printf("test_coll_gpu: %s\n", coll_last_error());
    return 1;
  }
  rt_coll_bufs b;
  /* in-place reduce-scatter needs nranks x count in recv: bytes cover the largest input or output */
  if (rt_coll_bufs_alloc(&w, &b, max_bytes + 65536, &e)) {
    printf("test_coll_gpu: %s\n", e.msg);
    return 1;
  }
  coll_team_set_timeout(&t, 20); /* a stuck direct wait fails the test within 20 s */
  if (host) coll_team_set_host(&t, COLL_DIRECT_ON);
  const char *why = "";
  int direct = coll_direct_available(&t, &why);
  if (direct < 0) {
    printf("test_coll_gpu: %s\n", coll_last_error());
    return 1;
  }
  printf("test_coll_gpu: %d ranks, sizes up to %zu bytes; direct path %s%s%s\n", w.nranks, max_bytes,
         direct ? "available over " : "not available: ", direct ? coll_direct_transport(&t) : why,
         "");
  if (check_host_sum(w.devices[0])) return 1;
  int n = w.nranks;
  /* TEST_COLL_ONLY=direct-allreduce: only the direct two-shot all-reduce variants */
  const char *only = getenv("TEST_COLL_ONLY");
  if (only && strcmp(only, "direct-allreduce")) {
    printf("test_coll_gpu: TEST_COLL_ONLY must be direct-allreduce\n");
    return 2;
  }
  int dead = direct && !(host_env && atoi(host_env) == 1) ? check_direct_allreduce_variants(&w, &t, &b, max_bytes) : 0;
  if (only && !direct) printf("test_coll_gpu: TEST_COLL_ONLY=direct-allreduce without a direct path: nothing checked\n");
  /* Total uncompressed BF16 bytes of the message; odd ones are not
   * multiples of any group nor of the rank count. */
  const size_t sizes[] = {1024, 1024 + 6, 3 * 2 * 128 * 5 + 14, (1 << 20) + 2 * 7, 17 * (1 << 20) + 2 * 333,
                          64 << 20, 256 << 20, (size_t)1 << 30};
  /* 0 and 256 KiB chunks; then 256 KiB with the all-gather exchange (two-shot
   * all-reduce); then, for the all-reduce, the one-shot algorithm; these four
   * on the NCCL path. Then the direct path (when the GPUs have it): every op
   * but all-to-all (all-reduce two-shot) in 256 KiB chunks (below 256 MiB;
   * the default chunk above), the one-shot all-reduce with the default chunk
   * (16 MiB: several chunks from 64 MiB) and in 256 KiB chunks; last, the
   * direct path uncompressed (all-gather, reduce-scatter, all-reduce). */
  const size_t chunks[] = {0, 256 << 10, 256 << 10, 0, 256 << 10, 0, 256 << 10, 256 << 10};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes && !dead && !only; si++) {
    size_t bytes = sizes[si];
    if (bytes > max_bytes) continue;
    int big = bytes >= (256u << 20);
    for (int op = 0; op < COLL_OP_COUNT && !dead; op++) {
      for (int inplace = 0; inplace < 2 && !dead; inplace++) {
        if (inplace && (op == COLL_OP_ALLTOALL || op == COLL_OP_SENDRECV)) continue;
        if (big && inplace && op != COLL_OP_ALLREDUCE) continue;
        for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks && !dead; ci++) {
          if (big && ci && ci != 4 && ci != 5 && ci != 7) continue; /* many small chunks: checked at the smaller sizes */
          int plain_direct = ci == 7;
          if (plain_direct && op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE) continue;
          int xchg = ci == 2;
          if (xchg && (n != 2 || op == COLL_OP_ALLGATHER || op == COLL_OP_SENDRECV)) continue;
          if (ci == 3 && op != COLL_OP_ALLREDUCE) continue;
          int on_direct = ci >= 4;
          if (on_direct && (!direct || op == COLL_OP_ALLTOALL || (op == COLL_OP_SENDRECV && n != 2))) continue;
          if ((ci == 5 || ci == 6) && op != COLL_OP_ALLREDUCE) continue;
          if (ci == 6 && big) continue;
          rt_coll_call c;
          memset(&c, 0, sizeof c);
          c.op = (coll_op)op;
          c.inplace = inplace;
          size_t elems = bytes / 2;
          c.count = (op == COLL_OP_ALLGATHER || op == COLL_OP_REDUCESCATTER || op == COLL_OP_ALLTOALL)
                        ? (elems / (size_t)n ? elems / (size_t)n : 1)
                        : elems;
          coll_opts o = coll_opts_default();
          o.min_bytes = 0;
          o.chunk_bytes = chunks[ci];
          o.exchange = xchg ? COLL_EXCHANGE_ALLGATHER : COLL_EXCHANGE_P2P;
          /* both algorithms, named (AUTO's choice depends on the environment):
           * two-shot (the exchange variants need it), one-shot at ci 3 */
          o.allreduce = (ci == 3 || ci >= 5) && !xchg ? COLL_ALLREDUCE_ONE_SHOT : COLL_ALLREDUCE_TWO_SHOT;
          o.direct = on_direct ? COLL_DIRECT_ON : COLL_DIRECT_OFF;
          o.direct_chunk_bytes = on_direct && !big ? chunks[ci] : 0;
          if (plain_direct) o.codec = COLL_CODEC_NONE_DIRECT;
          const char *algo = c.op != COLL_OP_ALLREDUCE                ? ""
                             : o.allreduce == COLL_ALLREDUCE_ONE_SHOT ? " one-shot"
                                                                      : " two-shot";
          char label[160];
          snprintf(label, sizeof label, "%s %zu B count %zu %s %s %zu%s%s", coll_op_name(c.op), bytes, c.count,
                   inplace ? "in-place" : "out-of-place", plain_direct ? "DIRECT BF16 chunk" : on_direct ? "DIRECT chunk" : "chunk",
                   on_direct ? o.direct_chunk_bytes : chunks[ci],
                   xchg ? " exchange=allgather" : "", algo);
          if (run_case(&w, &t, &b, &c, &o, label)) dead = 1;
        }
      }
    }
    /* CAAT-Net partial all-reduce, plain and TACO-encoded shared channels. */
    for (int taco = 0; taco < 2 && !dead && bytes >= 4096 * 2; taco++)
      for (int inplace = 0; inplace < 2 && !dead; inplace++) {
        rt_coll_call c;
        memset(&c, 0, sizeof c);
        c.caat = 1;
        c.op = COLL_OP_ALLREDUCE;
        c.cols = 4096 + 24; /* shared = floor(0.5 * 4120) = 2060: not a multiple of any group */
        c.rows = bytes / 2 / c.cols ? bytes / 2 / c.cols : 1;
        c.count = c.rows * c.cols;
        c.p = 0.5;
        c.inplace = inplace;
        coll_opts o = coll_opts_default();
        o.codec = taco ? COLL_CODEC_TACO : COLL_CODEC_NONE;
        o.min_bytes = 0;
        o.exchange = inplace ? COLL_EXCHANGE_ALLGATHER : COLL_EXCHANGE_P2P;
        o.allreduce = inplace ? COLL_ALLREDUCE_TWO_SHOT : COLL_ALLREDUCE_ONE_SHOT; /* both algorithms */
        char label[160];
        snprintf(label, sizeof label, "caat%s p=0.5 %zu x %zu %s%s", taco ? "+taco" : "", c.rows, c.cols,
                 inplace ? "in-place" : "out-of-place", inplace ? " two-shot" : " one-shot");
        if (run_case(&w, &t, &b, &c, &o, label)) dead = 1;
      }
  }
  /* Other codec settings at one odd size. */
  const int gs[] = {32, 64, 256, 512};
  for (int gi = 0; gi < 4 && !dead && !only; gi++)
    for (int fp8 = 0; fp8 < 2 && !dead; fp8++)
      for (int op = 0; op < COLL_OP_COUNT && !dead; op++)
        for (int on_direct = 0; on_direct <= direct && !dead; on_direct++) {
        if (on_direct && (op == COLL_OP_ALLTOALL || (op == COLL_OP_SENDRECV && n != 2))) continue;
        rt_coll_call c;
        memset(&c, 0, sizeof c);
        c.op = (coll_op)op;
        c.count = 300007;
        coll_opts o = coll_opts_default();
        o.taco.group = gs[gi];
        o.taco.fp8 = fp8 ? TACO_FP8_E5M2 : TACO_FP8_E4M3;
        o.min_bytes = 0;
        o.chunk_bytes = 1 << 20;
        o.direct = on_direct ? COLL_DIRECT_ON : COLL_DIRECT_OFF;
        o.direct_chunk_bytes = 1 << 20;
        char label[160];
        snprintf(label, sizeof label, "%s count %zu G=%d %s%s", coll_op_name(c.op), c.count, gs[gi], fp8 ? "e5m2" : "e4m3",
                 on_direct ? " DIRECT" : "");
        if (run_case(&w, &t, &b, &c, &o, label)) dead = 1;
      }
  /* The threshold: below it the call is plain NCCL, so the result is exact. */
  if (!dead && !only) {
    rt_coll_call c;
    memset(&c, 0, sizeof c);
    c.op = COLL_OP_ALLGATHER;
    c.count = 1000;
    coll_opts o = coll_opts_default();
    o.min_bytes = 1 << 20;
    ts_err e2 = {{0}, 0};
    rt_check_result r;
    if (rt_coll_check(&w, &t, &b, &c, &o, 4242, &r, &e2)) dead = 1;
    else {
      checks++;
      int ok = r.max_group_rel == 0 && r.unwritten == 0;
      if (!ok) failures++;
      printf("%-4s allgather below the threshold is exact: max_rel %.3g\n", ok ? "ok" : "FAIL", r.max_group_rel);
    }
  }
  if (dead) {
    rt_nccl_finalize(&w, 1);
    printf("test_coll_gpu: aborted after an NCCL/CUDA error\n");
    return 1;
  }
  rt_coll_bufs_free(&w, &b);
  coll_team_destroy(&t);
  rt_nccl_finalize(&w, 0);
  printf("test_coll_gpu: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
