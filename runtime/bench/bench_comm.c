/* bench_comm.c — `tacorun bench-comm`: NCCL BF16 vs TACO / CAAT-Net
 * compressed collectives over a size sweep, in nccl-tests' columns.
 *
 * Sizes are the uncompressed BF16 bytes of the whole message (all-gather:
 * the gathered output; reduce-scatter and all-to-all: the input). For each
 * size the plain NCCL BF16 call is timed first, then every codec, and the
 * speedup is their ratio. --chunk-sweep times each compressed call with
 * several chunk sizes and keeps the fastest; the table's last column is
 * the chunk used, and a '#' line per op and codec gives the size from which
 * the codec wins (the threshold to pass as coll_opts.min_bytes). */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ts_args.h"
#include "coll_taco.h"
#include "rt_nccl.h"
#include "rt_nccl_check.h"

/* taco: the NCCL path (coll_opts.direct = OFF); taco-direct: the codec writing
 * into the peer GPU over NVLink (kernels/coll_direct.h), or through host
 * shared memory into the peer's pinned host staging (kernels/coll_host.h;
 * rows only where the team has a direct path, and not with --graph);
 * bf16-direct: the same direct path uncompressed (what the transport alone
 * gives; all-gather, reduce-scatter, all-reduce); taco-auto: the library's
 * defaults (coll_opts_default(): what the executor and calibrate run, no
 * tuning); CAAT-Net rows take the NCCL path. */
enum { CODEC_NONE, CODEC_TACO, CODEC_CAAT, CODEC_TACO_CAAT, CODEC_TACO_DIRECT, CODEC_TACO_AUTO, CODEC_BF16_DIRECT,
       CODEC_KINDS };
static const char *const codec_names[CODEC_KINDS] = {"none",        "taco",      "caat",       "taco+caat",
                                                     "taco-direct", "taco-auto", "bf16-direct"};

#define MAX_SIZES 64
#define MAX_CHUNKS 16

typedef struct {
  int ops[COLL_OP_COUNT], codecs[CODEC_KINDS];
  int group;
  taco_fp8 fp8;
  size_t minbytes, maxbytes;
  double step;
  int iters, warmup;
  double target_s; /* per timed batch: iterations are cut to fit */
  int check, inplace, single, ngpus;
  int graph; /* time CUDA-graph launches of one captured call */
  size_t chunks[MAX_CHUNKS];
  int nchunks;
  int exchanges[2]; /* coll_exchange candidates to try (two ranks) */
  coll_allreduce_algo allreduce; /* compressed all-reduce: AUTO tries both on two ranks */
  size_t threshold;
  double caat_p;
  size_t hidden;
  double timeout_s;
  int die_rank, die_after;
  /* the direct path's variants (kernels/coll_taco.h), for every compressed call */
  coll_direct_mode host;
  coll_direct_ar direct_ar;
  int direct_ar_pieces, direct_ar_own_copy;
  coll_push push;
  coll_transport transport;
} bench_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: tacorun bench-comm [options]  (defaults in brackets or parentheses)\n"
          "  --op allreduce|allgather|reducescatter|alltoall|sendrecv|all  (comma list; default all)\n"
          "  --codec none,taco,caat,taco+caat,taco-direct,taco-auto,bf16-direct   codecs besides NCCL BF16\n"
          "                   (default none,taco,taco-direct,taco-auto)\n"
          "                   taco: TACO over NCCL; taco-direct: TACO written straight into the peer GPU over\n"
          "                   NVLink, or, through host shared memory (--transport shm), into the peer's pinned\n"
          "                   host staging (--host); bf16-direct: that direct path uncompressed\n"
          "                   (the transport alone; all-gather, reduce-scatter, one-shot all-reduce)\n"
          "                   (--chunk sizes tried as coll_opts.direct_chunk_bytes; the two-shot all-reduce and\n"
          "                   send/recv are not chunked; all-reduce tries one- and two-shot; send/recv\n"
          "                   as a two-rank exchange; no all-to-all); its rows appear only where peer access\n"
          "                   over NVLink exists, and not with --graph; taco-auto: coll_opts_default() (direct path\n"
          "                   where AUTO takes it, default chunk and all-reduce algorithm; nothing tried)\n"
          "  --group G        TACO group / Hadamard size: 32..512 (default 128)\n"
          "  --fp8 e4m3|e5m2  (default e4m3)\n"
          "  --minbytes B --maxbytes B --step-factor F   size sweep (default 1M .. 64M, x2); K/M/G suffixes\n"
          "  --iters N --warmup N   timed and warm-up iterations per point (default 20, 5)\n"
          "  --target-ms T    cut iterations so one timed batch takes about T ms (default 300)\n"
          "  --chunk B[,B...] chunk sizes to try per point (uncompressed bytes per pipeline step; default 8M)\n"
          "  --exchange p2p,allgather  all-to-all step of reduce-scatter/all-reduce on 2 ranks: try these (default both)\n"
          "  --allreduce auto|one-shot|two-shot  compressed all-reduce algorithm (default auto: on two ranks\n"
          "                   both are tried, like the chunk sizes; else two-shot)\n"
          "  --threshold B    below B the compressed call falls back to NCCL BF16 (default 0: always compress)\n"
          "  --caat-p P --hidden H   CAAT-Net shared fraction and row length (default 0.5, 4096)\n"
          "  --check          compare every compressed call with NCCL on fresh random inputs (default off)\n"
          "  --graph          capture one call (NCCL BF16 and compressed alike) in a CUDA graph and time\n"
          "                   launches of it: no host enqueue per chunk (one GPU per process only; default off)\n"
          "  --inplace        time and check in place (allreduce, allgather, reducescatter; default out of place)\n"
          "  --single-process drive the local GPUs from one process (ncclCommInitAll; default one process per GPU)\n"
          "  --ngpus N        with --single-process: the first N GPUs (default all of them)\n"
          "  --timeout-s S    a collective not done after S seconds aborts NCCL and fails (default 60)\n"
          RT_TRANSPORT_USAGE
          "  --host auto|off|on   host-memory flavour of the direct path: where NCCL runs over host shared\n"
          "                   memory, never, or wherever the ranks share a host (also instead of NVLink) [auto]\n"
          "  --direct-ar auto|whole|pipe|copy   the direct two-shot all-reduce (kernels/coll_direct.c) [auto:\n"
          "                   copy from 64 MiB of bf16, else whole]\n"
          "  --direct-ar-pieces K   pipe: pieces, 1..4 [2]\n"
          "  --direct-ar-own dup|copy   pipe: the own reduced block encoded twice, or pushed by the copy engine [dup]\n"
          "  --push auto|encode|copy   how the direct path's blocks reach the peers [auto: copy engine through\n"
          "                   host memory, the encode's stores over NVLink]\n"
          "  --die-rank R --die-after N   fault test: rank R kills itself before its N-th timed call\n"
          "                   (default: no rank dies)\n"
          "Run one process per GPU under mpirun, or with TACORUN_RANK/TACORUN_NRANKS/TACORUN_ID_FILE set.\n"
          "reads:  nothing (with TACORUN_ID_FILE: rank 0 writes the NCCL id there, the other ranks read it)\n"
          "writes: the nccl-tests columns on standard output (rank 0), one gnuplot block per op\n");
}

static int parse_list(char *s, int *flags, const char *const *names, int n, int all_ok) {
  for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    if (all_ok && !strcmp(tok, "all")) {
      for (int i = 0; i < n; i++) flags[i] = 1;
      continue;
    }
    int found = 0;
    for (int i = 0; i < n; i++)
      if (!strcmp(tok, names[i])) flags[i] = found = 1;
    if (!found) return -1;
  }
  return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o, ts_err *e) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < COLL_OP_COUNT; i++) o->ops[i] = 1;
  o->codecs[CODEC_NONE] = o->codecs[CODEC_TACO] = o->codecs[CODEC_TACO_DIRECT] = o->codecs[CODEC_TACO_AUTO] = 1;
  o->group = 128;
  o->fp8 = TACO_FP8_E4M3;
  o->minbytes = 1 << 20;
  o->maxbytes = 64 << 20;
  o->step = 2;
  o->iters = 20;
  o->warmup = 5;
  o->target_s = 0.3;
  o->chunks[0] = COLL_DEFAULT_CHUNK_BYTES;
  o->nchunks = 1;
  o->exchanges[COLL_EXCHANGE_P2P] = o->exchanges[COLL_EXCHANGE_ALLGATHER] = 1;
  o->caat_p = 0.5;
  o->hidden = 4096;
  o->timeout_s = 60;
  o->die_rank = -1;
  static const char *op_names[COLL_OP_COUNT];
  for (int i = 0; i < COLL_OP_COUNT; i++) op_names[i] = coll_op_name((coll_op)i);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (!strcmp(a, "--check")) o->check = 1, takes = 0;
    else if (!strcmp(a, "--inplace")) o->inplace = 1, takes = 0;
    else if (!strcmp(a, "--graph")) o->graph = 1, takes = 0;
    else if (!strcmp(a, "--single-process")) o->single = 1, takes = 0;
    else if (!v) return ts_fail(e, "bench-comm", a, "needs a value (or unknown option)");
    else if (!strcmp(a, "--op")) {
      memset(o->ops, 0, sizeof o->ops);
      if (parse_list(v, o->ops, op_names, COLL_OP_COUNT, 1)) return ts_fail(e, "bench-comm", a, "unknown op in '%s'", v);
    } else if (!strcmp(a, "--codec")) {
      memset(o->codecs, 0, sizeof o->codecs);
      if (parse_list(v, o->codecs, codec_names, CODEC_KINDS, 0)) return ts_fail(e, "bench-comm", a, "unknown codec in '%s'", v);
      o->codecs[CODEC_NONE] = 1; /* the baseline every speedup is measured against */
    } else if (!strcmp(a, "--group")) {
      if (ts_arg_int(v, 32, 512, &o->group) || (o->group & (o->group - 1)))
        return ts_fail(e, "bench-comm", a, "must be 32, 64, 128, 256 or 512");
    } else if (!strcmp(a, "--fp8")) {
      if (!strcmp(v, "e4m3")) o->fp8 = TACO_FP8_E4M3;
      else if (!strcmp(v, "e5m2")) o->fp8 = TACO_FP8_E5M2;
      else return ts_fail(e, "bench-comm", a, "must be e4m3 or e5m2");
    } else if (!strcmp(a, "--minbytes")) {
      if (ts_arg_bytes(v, &o->minbytes) || !o->minbytes) return ts_fail(e, "bench-comm", a, "bad size '%s'", v);
    } else if (!strcmp(a, "--maxbytes")) {
      if (ts_arg_bytes(v, &o->maxbytes)) return ts_fail(e, "bench-comm", a, "bad size '%s'", v);
    } else if (!strcmp(a, "--step-factor")) {
      char *end;
      o->step = strtod(v, &end);
      if (*end || !(o->step > 1.0)) return ts_fail(e, "bench-comm", a, "must be a number > 1");
    } else if (!strcmp(a, "--iters")) {
      if (ts_arg_int(v, 1, 1000000, &o->iters)) return ts_fail(e, "bench-comm", a, "must be >= 1");
    } else if (!strcmp(a, "--warmup")) {
      if (ts_arg_int(v, 0, 1000000, &o->warmup)) return ts_fail(e, "bench-comm", a, "must be >= 0");
    } else if (!strcmp(a, "--target-ms")) {
      int ms;
      if (ts_arg_int(v, 1, 1000000, &ms)) return ts_fail(e, "bench-comm", a, "must be >= 1");
      o->target_s = ms / 1000.0;
    } else if (!strcmp(a, "--chunk")) {
      o->nchunks = 0;
      for (char *tok = strtok(v, ","); tok; tok = strtok(NULL, ",")) {
        if (o->nchunks == MAX_CHUNKS || ts_arg_bytes(tok, &o->chunks[o->nchunks]) || !o->chunks[o->nchunks])
          return ts_fail(e, "bench-comm", a, "bad chunk size '%s' (at most %d sizes)", tok, MAX_CHUNKS);
        o->nchunks++;
      }
      if (!o->nchunks) return ts_fail(e, "bench-comm", a, "empty list");
    } else if (!strcmp(a, "--exchange")) {
      static const char *const xn[2] = {"p2p", "allgather"};
      memset(o->exchanges, 0, sizeof o->exchanges);
      if (parse_list(v, o->exchanges, xn, 2, 0)) return ts_fail(e, "bench-comm", a, "must be p2p and/or allgather");
    } else if (!strcmp(a, "--allreduce")) {
      if (!strcmp(v, "auto")) o->allreduce = COLL_ALLREDUCE_AUTO;
      else if (!strcmp(v, "one-shot")) o->allreduce = COLL_ALLREDUCE_ONE_SHOT;
      else if (!strcmp(v, "two-shot")) o->allreduce = COLL_ALLREDUCE_TWO_SHOT;
      else return ts_fail(e, "bench-comm", a, "must be auto, one-shot or two-shot");
    } else if (!strcmp(a, "--threshold")) {
      if (ts_arg_bytes(v, &o->threshold)) return ts_fail(e, "bench-comm", a, "bad size '%s'", v);
    } else if (!strcmp(a, "--caat-p")) {
      char *end;
      o->caat_p = strtod(v, &end);
      if (*end || !(o->caat_p >= 0 && o->caat_p <= 1)) return ts_fail(e, "bench-comm", a, "must be in [0, 1]");
    } else if (!strcmp(a, "--hidden")) {
      if (ts_arg_bytes(v, &o->hidden) || !o->hidden) return ts_fail(e, "bench-comm", a, "must be >= 1");
    } else if (!strcmp(a, "--ngpus")) {
      if (ts_arg_int(v, 1, RT_MAX_LOCAL, &o->ngpus)) return ts_fail(e, "bench-comm", a, "must be 1..%d", RT_MAX_LOCAL);
    } else if (!strcmp(a, "--timeout-s")) {
      char *end;
      o->timeout_s = strtod(v, &end);
      if (*end || !(o->timeout_s > 0)) return ts_fail(e, "bench-comm", a, "must be > 0");
    } else if (!strcmp(a, "--transport")) {
      if (rt_transport_arg(v, &o->transport, e)) return -1;
    } else if (!strcmp(a, "--host")) {
      if (!strcmp(v, "auto")) o->host = COLL_DIRECT_AUTO;
      else if (!strcmp(v, "off")) o->host = COLL_DIRECT_OFF;
      else if (!strcmp(v, "on")) o->host = COLL_DIRECT_ON;
      else return ts_fail(e, "bench-comm", a, "must be auto, off or on");
    } else if (!strcmp(a, "--direct-ar")) {
      if (coll_direct_ar_parse(v, &o->direct_ar)) return ts_fail(e, "bench-comm", a, "must be auto, whole, pipe or copy");
    } else if (!strcmp(a, "--direct-ar-pieces")) {
      if (ts_arg_int(v, 1, COLL_EVENT_SLOTS, &o->direct_ar_pieces))
        return ts_fail(e, "bench-comm", a, "must be 1..%d", COLL_EVENT_SLOTS);
    } else if (!strcmp(a, "--direct-ar-own")) {
      if (strcmp(v, "dup") && strcmp(v, "copy")) return ts_fail(e, "bench-comm", a, "must be dup or copy");
      o->direct_ar_own_copy = !strcmp(v, "copy");
    } else if (!strcmp(a, "--push")) {
      if (coll_push_parse(v, &o->push)) return ts_fail(e, "bench-comm", a, "must be auto, encode or copy");
    } else if (!strcmp(a, "--die-rank")) {
      if (ts_arg_int(v, 0, 1 << 20, &o->die_rank)) return ts_fail(e, "bench-comm", a, "must be a rank");
    } else if (!strcmp(a, "--die-after")) {
      if (ts_arg_int(v, 1, 1 << 30, &o->die_after)) return ts_fail(e, "bench-comm", a, "must be >= 1");
    } else return ts_fail(e, "bench-comm", a, "unknown option (see --help)");
    i += takes;
  }
  if (o->maxbytes < o->minbytes) return ts_fail(e, "bench-comm", "--maxbytes", "smaller than --minbytes");
  return 0;
}

/* coll_opts_default() with the direct path's variants of the command line. */
static coll_opts variants_of(const bench_opts *o) {
  coll_opts co = coll_opts_default();
  co.direct_ar = o->direct_ar;
  co.direct_ar_pieces = o->direct_ar_pieces;
  co.direct_ar_own_copy = o->direct_ar_own_copy;
  co.push = o->push;
  return co;
}

/* ---- one measured point -------------------------------------------------- */

typedef struct {
  rt_nccl *w;
  coll_team *t;
  rt_coll_bufs *b;
  const bench_opts *o;
  long calls; /* timed calls so far, for --die-after */
  int direct; /* the team has the direct path */
} bench;

static void maybe_die(bench *B) {
  B->calls++;
  if (B->o->die_rank < 0 || B->calls != B->o->die_after) return;
  for (int i = 0; i < B->w->nlocal; i++)
    if (B->w->ranks[i] == B->o->die_rank) {
      fprintf(stderr, "bench-comm: rank %d: --die-rank: killing myself now (call %ld)\n", B->o->die_rank, B->calls);
      fflush(stderr);
      raise(SIGKILL);
    }
}

/* Average time of one call over a batch, maximum over ranks (microseconds). */
static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --graph: one call captured on the (single) local stream, the codec and comm
 * streams forked into the capture by the library's events; the graph is then
 * launched `iters` times. us: GPU time per launch; host_us: host time per launch. */
static int time_batch_graph(bench *B, const rt_coll_call *c, const coll_opts *co, int iters, double *us,
                            double *host_us, ts_err *e) {
  rt_nccl *w = B->w;
  if (w->nlocal != 1) return ts_fail(e, "bench-comm", "--graph", "needs one GPU per process (run under mpirun)");
  cudaStream_t st = w->streams[0];
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  cudaEvent_t t0, t1;
  RT_CUDA(e, cudaSetDevice(w->devices[0]));
  /* one call outside the capture first: scratch buffers grow (synchronously) there, never in a capture */
  if (rt_coll_enqueue(w, B->t, c, B->b->send, B->b->recv, co, e) || rt_nccl_wait(w, e)) return -1;
  RT_CUDA(e, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  int rc = rt_coll_enqueue(w, B->t, c, B->b->send, B->b->recv, co, e);
  cudaError_t ce = cudaStreamEndCapture(st, &g);
  if (rc) {
    if (g) cudaGraphDestroy(g);
    return -1;
  }
  if (ce != cudaSuccess) return ts_fail_sys(e, "cudaStreamEndCapture: %s", cudaGetErrorString(ce));
  ce = cudaGraphInstantiate(&ge, g, 0);
  cudaGraphDestroy(g);
  if (ce != cudaSuccess) return ts_fail_sys(e, "cudaGraphInstantiate: %s", cudaGetErrorString(ce));
  RT_CUDA(e, cudaGraphUpload(ge, st));
  RT_CUDA(e, cudaEventCreate(&t0));
  RT_CUDA(e, cudaEventCreate(&t1));
  RT_CUDA(e, cudaEventRecord(t0, st));
  rt_watchdog_arm(w, w->timeout_s + 30, "a timed batch of graph launches");
  double h0 = wall_s();
  for (int k = 0; k < iters; k++) {
    maybe_die(B);
    ce = cudaGraphLaunch(ge, st);
    if (ce != cudaSuccess) {
      rt_watchdog_disarm();
      return ts_fail_sys(e, "cudaGraphLaunch: %s", cudaGetErrorString(ce));
    }
  }
  double host = (wall_s() - h0) * 1e6 / iters;
  RT_CUDA(e, cudaEventRecord(t1, st));
  rc = rt_nccl_wait(w, e);
  rt_watchdog_disarm();
  if (rc) return -1;
  float ms = 0;
  RT_CUDA(e, cudaEventElapsedTime(&ms, t0, t1));
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaGraphExecDestroy(ge);
  double v[2] = {1000.0 * ms / iters, host};
  if (rt_nccl_max(w, v, 2, e)) return -1;
  *us = v[0];
  if (host_us) *host_us = v[1];
  return 0;
}

/* us: GPU time per call; host_us: time the host took to enqueue one call. */
static int time_batch(bench *B, const rt_coll_call *c, const coll_opts *co, int iters, double *us, double *host_us,
                      ts_err *e) {
  rt_nccl *w = B->w;
  if (B->o->graph) return time_batch_graph(B, c, co, iters, us, host_us, e);
  cudaEvent_t t0[RT_MAX_LOCAL], t1[RT_MAX_LOCAL];
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaEventCreate(&t0[i]));
    RT_CUDA(e, cudaEventCreate(&t1[i]));
    RT_CUDA(e, cudaEventRecord(t0[i], w->streams[i]));
  }
  rt_watchdog_arm(w, w->timeout_s + 30, "a timed batch of collectives");
  double h0 = wall_s();
  for (int k = 0; k < iters; k++) {
    maybe_die(B);
    if (rt_coll_enqueue(w, B->t, c, B->b->send, B->b->recv, co, e)) return -1;
  }
  double host = (wall_s() - h0) * 1e6 / iters;
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaEventRecord(t1[i], w->streams[i]));
  }
  int rc = rt_nccl_wait(w, e);
  rt_watchdog_disarm();
  if (rc) return -1;
  double v[RT_MAX_LOCAL * 2];
  for (int i = 0; i < w->nlocal; i++) {
    float ms = 0;
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaEventElapsedTime(&ms, t0[i], t1[i]));
    v[2 * i] = 1000.0 * ms / iters;
    v[2 * i + 1] = host;
    cudaEventDestroy(t0[i]);
    cudaEventDestroy(t1[i]);
  }
  if (rt_nccl_max(w, v, 2, e)) return -1;
  *us = v[0];
  if (host_us) *host_us = v[1];
  return 0;
}

static int time_call(bench *B, const rt_coll_call *c, const coll_opts *co, double *us, double *host_us, ts_err *e) {
  double est = 0;
  if (B->o->warmup > 0 && time_batch(B, c, co, B->o->warmup, &est, NULL, e)) return -1;
  int iters = B->o->iters;
  if (est > 0 && est * 1e-6 * iters > B->o->target_s) iters = (int)(B->o->target_s / (est * 1e-6));
  if (iters < 3) iters = 3;
  return time_batch(B, c, co, iters, us, host_us, e);
}

/* ---- the sweep ----------------------------------------------------------- */

typedef struct {
  size_t bytes[MAX_SIZES];
  double us[CODEC_KINDS][MAX_SIZES];
  size_t chunk[CODEC_KINDS][MAX_SIZES];
  int x[CODEC_KINDS][MAX_SIZES]; /* candidate: coll_exchange of a two-shot, or X_ONE_SHOT */
  int n;
} sweep_table;

/* the candidates besides the chunk size: the two exchanges of a two-shot
 * reduce-scatter / all-reduce / all-to-all, and the one-shot all-reduce */
#define X_ONE_SHOT 2
static const char *candidate_name(int x) { return x == X_ONE_SHOT ? "1shot" : x ? "allgather" : "p2p"; }

static void make_call(const bench_opts *o, coll_op op, int codec, size_t bytes, int nranks, rt_coll_call *c) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->inplace = o->inplace;
  size_t elems = bytes / 2;
  if (codec == CODEC_CAAT || codec == CODEC_TACO_CAAT) {
    c->caat = 1;
    c->cols = o->hidden;
    c->rows = elems / o->hidden ? elems / o->hidden : 1;
    c->p = o->caat_p;
    c->count = c->rows * c->cols;
    return;
  }
  c->count = (op == COLL_OP_ALLGATHER || op == COLL_OP_REDUCESCATTER || op == COLL_OP_ALLTOALL) ? elems / (size_t)nranks
                                                                                                 : elems;
  if (!c->count) c->count = 1;
}

static size_t call_bytes(const rt_coll_call *c, int nranks) {
  return 2 * (c->caat ? c->rows * c->cols : coll_total_elems(c->op, c->count, nranks));
}

static int run_op(bench *B, coll_op op, int *check_failed, ts_err *e) {
  const bench_opts *o = B->o;
  rt_nccl *w = B->w;
  int root = rt_nccl_is_root(w), n = w->nranks;
  sweep_table T;
  memset(&T, 0, sizeof T);
  if (root) {
    printf("# op: %s  (busbw factor %.3f)\n", coll_op_name(op), coll_busbw_factor(op, n));
    printf("# %10s %12s %6s %10s %10s %11s %11s %9s %12s %10s %9s\n", "size(B)", "count", "type", "codec", "time(us)",
           "algbw(GB/s)", "busbw(GB/s)", "speedup", "max_rel_err", "chunk(B)", "exchange");
    fflush(stdout);
  }
  for (double s = (double)o->minbytes; s <= (double)o->maxbytes * 1.0001 && T.n < MAX_SIZES; s *= o->step) {
    size_t bytes = (size_t)s;
    T.bytes[T.n] = bytes;
    for (int k = 0; k < CODEC_KINDS; k++) {
      if (!o->codecs[k]) continue;
      int caat = k == CODEC_CAAT || k == CODEC_TACO_CAAT, dk = k == CODEC_TACO_DIRECT, pk = k == CODEC_BF16_DIRECT;
      if (caat && op != COLL_OP_ALLREDUCE) continue;
      if ((dk || pk) && (!B->direct || o->graph || op == COLL_OP_ALLTOALL || (op == COLL_OP_SENDRECV && n != 2))) continue;
      if (pk && op == COLL_OP_SENDRECV) continue;
      if (o->inplace && (op == COLL_OP_ALLTOALL || op == COLL_OP_SENDRECV)) continue;
      rt_coll_call c;
      make_call(o, op, k, bytes, n, &c);
      coll_opts co = variants_of(o);
      int ak = k == CODEC_TACO_AUTO;
      co.codec = (k == CODEC_TACO || k == CODEC_TACO_CAAT || dk || ak) ? COLL_CODEC_TACO
                 : pk                                                  ? COLL_CODEC_NONE_DIRECT
                                                                       : COLL_CODEC_NONE;
      co.direct = ak ? COLL_DIRECT_AUTO : dk || pk ? COLL_DIRECT_ON : COLL_DIRECT_OFF;
      co.taco.group = o->group;
      co.taco.fp8 = o->fp8;
      co.min_bytes = o->threshold;
      double best = INFINITY;
      size_t best_chunk = 0;
      int best_x = COLL_EXCHANGE_P2P;
      /* no tuning for the plain NCCL calls and the defaults */
      int tries = (co.codec == COLL_CODEC_TACO && !ak) || pk ? o->nchunks : 0;
      /* the exchange matters only where blocks go all-to-all between two ranks;
       * a compressed all-reduce also tries the one-shot algorithm (--allreduce) */
      int xchg_matters = co.codec == COLL_CODEC_TACO && !dk && n == 2 && op != COLL_OP_ALLGATHER && op != COLL_OP_SENDRECV;
      int cand[3] = {0, 0, 0};
      if (co.codec != COLL_CODEC_TACO) cand[0] = 1;
      else {
        int two = op != COLL_OP_ALLREDUCE || o->allreduce != COLL_ALLREDUCE_ONE_SHOT;
        int one = op == COLL_OP_ALLREDUCE && o->allreduce != COLL_ALLREDUCE_TWO_SHOT &&
                  !(o->allreduce == COLL_ALLREDUCE_AUTO && n != 2 && !dk);
        cand[0] = two && (!xchg_matters || o->exchanges[0]);
        cand[1] = two && xchg_matters && o->exchanges[1];
        cand[X_ONE_SHOT] = one;
      }
      int nx = cand[0] + cand[1] + cand[2];
      if (tries * nx == 1) { /* one candidate: nothing to choose */
        best_chunk = o->chunks[0];
        best_x = cand[X_ONE_SHOT] ? X_ONE_SHOT : cand[1] ? COLL_EXCHANGE_ALLGATHER : COLL_EXCHANGE_P2P;
        tries = 0;
      }
      for (int x = 0; x < 3 && tries; x++) {
        if (!cand[x]) continue;
        co.exchange = x == X_ONE_SHOT ? COLL_EXCHANGE_P2P : (coll_exchange)x;
        co.allreduce = x == X_ONE_SHOT ? COLL_ALLREDUCE_ONE_SHOT : COLL_ALLREDUCE_TWO_SHOT;
        for (int ci = 0; ci < tries; ci++) {
          co.chunk_bytes = co.direct_chunk_bytes = o->chunks[ci];
          if (ci > 0 && o->chunks[ci - 1] >= call_bytes(&c, n)) break; /* larger chunks: one chunk, same call */
          double us, host_us;
          if ((co.codec == COLL_CODEC_TACO || pk) && coll_team_reserve(B->t, op, c.count, &co))
            return ts_fail_sys(e, "%s", coll_last_error());
          if (time_call(B, &c, &co, &us, &host_us, e)) return -1;
          if (root)
            printf("# try: %s %s %zu B chunk %zu exchange %s: %.1f us (host enqueue %.1f us)\n", coll_op_name(op),
                   codec_names[k], call_bytes(&c, n), co.chunk_bytes, candidate_name(x), us, host_us);
          if (us < best) best = us, best_chunk = co.codec == COLL_CODEC_TACO || pk ? co.chunk_bytes : 0, best_x = x;
        }
      }
      co.exchange = best_x == X_ONE_SHOT ? COLL_EXCHANGE_P2P : (coll_exchange)best_x;
      co.allreduce = ak                          ? COLL_ALLREDUCE_AUTO
                     : co.codec != COLL_CODEC_TACO ? o->allreduce
                     : best_x == X_ONE_SHOT      ? COLL_ALLREDUCE_ONE_SHOT
                     : op == COLL_OP_ALLREDUCE   ? COLL_ALLREDUCE_TWO_SHOT
                                                 : o->allreduce;
      T.x[k][T.n] = best_x;
      co.chunk_bytes = best_chunk ? best_chunk : co.chunk_bytes;
      co.direct_chunk_bytes = dk || pk ? co.chunk_bytes : 0;
      if (ak) co = variants_of(o), co.taco.group = o->group, co.taco.fp8 = o->fp8, co.min_bytes = o->threshold;
      /* The reported time: the chosen setting timed afresh, best of two, as
       * the baseline is (so picking the best of many tries biases nothing). */
      if ((co.codec == COLL_CODEC_TACO || pk) && coll_team_reserve(B->t, op, c.count, &co))
        return ts_fail_sys(e, "%s", coll_last_error());
      best = INFINITY;
      for (int rep = 0; rep < 2; rep++) {
        double us;
        if (time_call(B, &c, &co, &us, NULL, e)) return -1;
        if (us < best) best = us;
      }
      co.chunk_bytes = best_chunk ? best_chunk : co.chunk_bytes;
      double err = 0;
      if (o->check && k != CODEC_NONE) {
        rt_check_result res;
        if (rt_coll_check(w, B->t, B->b, &c, &co, (unsigned long long)T.n * 16 + (unsigned)k, &res, e)) return -1;
        double bound = rt_coll_bound(&c, n, &co);
        err = res.max_group_rel;
        if (!(err <= bound) || res.nonfinite > 0 || res.unwritten > 0) {
          *check_failed = 1;
          if (root)
            printf("# CHECK FAILED: %s %s %zu B: max_rel_err %.3g > bound %.3g or %g non-finite, %g unwritten\n",
                   coll_op_name(op), codec_names[k], bytes, err, bound, res.nonfinite, res.unwritten);
        }
      }
      T.us[k][T.n] = best;
      T.chunk[k][T.n] = best_chunk;
      size_t b = call_bytes(&c, n);
      double algbw = (double)b / (best * 1e-6) / 1e9;
      /* CAAT-Net rows compare with NCCL BF16 on the same full tensor. */
      double base = T.us[CODEC_NONE][T.n];
      if (root) {
        printf("  %10zu %12zu %6s %10s %10.1f %11.2f %11.2f %9.3f %12.3g %10zu %9s\n", b, c.count, "bf16",
               codec_names[k], best, algbw, algbw * coll_busbw_factor(op, n), base > 0 ? base / best : 1.0, err,
               best_chunk, pk ? "direct" : co.codec != COLL_CODEC_TACO ? "-" : ak ? "auto" : dk ? (best_x == X_ONE_SHOT ? "1shot" : "direct") : candidate_name(best_x));
        fflush(stdout);
      }
      if (root && isatty(2)) fprintf(stderr, "\rbench-comm: %s %s %zu B done      ", coll_op_name(op), codec_names[k], b);
    }
    T.n++;
  }
  if (root && isatty(2)) fprintf(stderr, "\n");
  for (int k = 1; k < CODEC_KINDS && root; k++) {
    if (!o->codecs[k] || ((k == CODEC_CAAT || k == CODEC_TACO_CAAT) && op != COLL_OP_ALLREDUCE)) continue;
    size_t th = coll_threshold_from_sweep(T.bytes, T.us[CODEC_NONE], T.us[k], T.n);
    printf("# tuned: op=%s codec=%s transport=%s threshold_bytes=", coll_op_name(op), codec_names[k], rt_nccl_transport(B->w));
    if (th == SIZE_MAX) printf("never");
    else printf("%zu", th);
    printf(" best_chunk_bytes_by_size=");
    for (int i = 0; i < T.n; i++) printf("%s%zu:%zu", i ? "," : "", T.bytes[i], T.chunk[k][i]);
    printf(" exchange_by_size=");
    for (int i = 0; i < T.n; i++) printf("%s%zu:%s", i ? "," : "", T.bytes[i], candidate_name(T.x[k][i]));
    printf("\n");
  }
  if (root) printf("\n\n"); /* gnuplot: one data block per op (index) */
  fflush(stdout);
  return 0;
}

int bench_comm_main(int argc, char **argv) {
  ts_err e = {{0}, 0};
  bench_opts o;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  if (parse_args(argc, argv, &o, &e)) {
    fprintf(stderr, "tacorun: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun bench-comm: no CUDA device\n");
    return TS_EXIT_FAILURE;
  }
  rt_nccl w;
  rt_nccl_opts no = {o.single, o.ngpus, o.timeout_s, o.transport};
  if (rt_nccl_init(&w, &no, &e)) {
    fprintf(stderr, "tacorun bench-comm: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  int failed = 0, check_failed = 0;
  coll_team t;
  rt_coll_bufs b;
  memset(&b, 0, sizeof b);
  size_t need = o.maxbytes + (size_t)o.hidden * 2 + 4096; /* a CAAT-Net row at least */
  if (coll_team_init(&t, w.nlocal, w.comms, w.devices, w.streams)) {
    fprintf(stderr, "tacorun bench-comm: %s\n", coll_last_error());
    rt_nccl_finalize(&w, 1);
    return TS_EXIT_FAILURE;
  }
  if (rt_coll_bufs_alloc(&w, &b, need, &e)) failed = 1;
  bench B = {&w, &t, &b, &o, 0, 0};
  if (!failed && coll_team_set_timeout(&t, o.timeout_s)) failed = 1;
  if (!failed) coll_team_set_host(&t, o.host);
  if (!failed && (o.codecs[CODEC_TACO_DIRECT] || o.codecs[CODEC_BF16_DIRECT])) {
    const char *why = "";
    int a = coll_direct_available(&t, &why); /* collective: every rank asks here */
    if (a < 0) {
      snprintf(e.msg, sizeof e.msg, "%s", coll_last_error());
      failed = 1;
    }
    B.direct = a > 0;
    if (!B.direct && rt_nccl_is_root(&w)) printf("# taco-direct, bf16-direct: no rows: %s\n", why);
    if (B.direct && rt_nccl_is_root(&w))
      printf("# taco-direct, bf16-direct: the direct path runs over %s\n",
             !strcmp(coll_direct_transport(&t), "host") ? "pinned host memory (PCIe; kernels/coll_host.h)"
                                                         : "GPU peer memory (NVLink)");
  }
  if (!failed && rt_nccl_is_root(&w)) {
    char desc[2048];
    rt_nccl_describe(&w, desc, sizeof desc);
    printf("# tacorun bench-comm: NCCL BF16 vs compressed collectives; sizes are uncompressed BF16 bytes\n%s", desc);
    printf("# codec: TACO G=%d %s; chunk candidates:", o.group, o.fp8 == TACO_FP8_E5M2 ? "e5m2" : "e4m3");
    for (int i = 0; i < o.nchunks; i++) printf(" %zu", o.chunks[i]);
    printf("; threshold %zu; iters %d warmup %d; %s; CAAT-Net p=%.3f hidden=%zu%s\n", o.threshold, o.iters, o.warmup,
           o.inplace ? "in place" : "out of place", o.caat_p, o.hidden,
           o.graph ? "; every call (NCCL BF16 too) timed as launches of a captured CUDA graph" : "");
    /* the direct path's variants (kernels/coll_taco.h), so raw files say which ran */
    static const char *const host_names[] = {"auto", "off", "on"};
    printf("# direct path: --host %s --direct-ar %s --direct-ar-pieces %d --direct-ar-own %s --push %s\n",
           host_names[o.host], coll_direct_ar_name(o.direct_ar),
           o.direct_ar_pieces ? o.direct_ar_pieces : COLL_DIRECT_AR_PIECES_DEFAULT, o.direct_ar_own_copy ? "copy" : "dup",
           coll_push_name(o.push));
    printf("# speedup = time(NCCL BF16) / time(codec) at the same uncompressed size; max_rel_err = max over "
           "groups of |out-ref|/|ref| (with --check)\n\n");
    fflush(stdout);
  }
  for (int i = 0; i < w.nlocal && !failed; i++) {
    if (cudaSetDevice(w.devices[i]) != cudaSuccess ||
        coll_fill_random(b.send[i], TACO_DTYPE_BF16, need / 2, 77 + (unsigned)w.ranks[i], 1.0f, (void *)w.streams[i]) ||
        coll_fill_random(b.recv[i], TACO_DTYPE_BF16, need / 2, 99 + (unsigned)w.ranks[i], 1.0f, (void *)w.streams[i])) {
      snprintf(e.msg, sizeof e.msg, "filling inputs: %s", coll_check_last_error());
      failed = 1;
    }
  }
  for (int op = 0; op < COLL_OP_COUNT && !failed; op++)
    if (o.ops[op] && run_op(&B, (coll_op)op, &check_failed, &e)) failed = 1;
  if (failed) fprintf(stderr, "tacorun bench-comm: rank %d: %s\n", w.ranks[0], e.msg);
  if (!failed) {
    rt_coll_bufs_free(&w, &b);
    coll_team_destroy(&t);
  }
  rt_nccl_finalize(&w, failed);
  if (check_failed && !failed) {
    fprintf(stderr, "tacorun bench-comm: some results exceeded the codec's error bound (see '# CHECK FAILED')\n");
    return TS_EXIT_FAILURE;
  }
  return failed ? ts_exit_status(&e) : 0;
}
