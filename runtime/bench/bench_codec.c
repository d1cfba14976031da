/* bench_codec.c — `tacorun bench-codec`: speed of the TACO kernels on the GPU
 * (fused next to unfused), and the codec's error against simpler FP8 codecs.
 *
 * Speed: per kernel, group size and tensor size, the median time of many
 * launches measured with CUDA events, rotating among enough buffers that the
 * data does not stay in L2; GB/s counts bytes read plus bytes written once;
 * % is against the measured HBM copy ceiling (4276 GB/s on the H200).
 * Quality: computed with the plain-C reference (bit-identical to the kernels,
 * see tests/test_kernels_gpu.cu), so it runs without a GPU too. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "ts_args.h"
#include "taco_codec.h"
#include "taco_internal.h"
#include "taco_ref.h"
#include "taco_testdata.h"
#include "gpu_check.h"

#define CEILING_GBPS 4276.0
#define MAX_LIST 16
#define MAX_VARIANTS 8

typedef struct {
  taco_hadamard h;
  taco_loads l;
  taco_dse d;
  int per_thread;
  taco_tiling tiling;
  int stages;    /* bulk copies in flight per warp (TACO_TILING_BULK) */
  unsigned opts; /* round-5 options of the tiled and streaming kernels (TACO_TILED_*) */
  char name[96];
} bench_variant;

typedef struct {
  int quality, fp32, reps;
  size_t sizes[MAX_LIST];
  int nsizes, groups[MAX_LIST], ngroups;
  taco_fp8 fp8;
  size_t rows, cols;
  bench_variant variants[MAX_VARIANTS]; /* kernel variants timed side by side */
  int nvariants;
  int graph; /* --graph: each rep's launches captured once into a CUDA graph, then replayed */
  int blocks_per_sm; /* --blocks-per-sm: persistent blocks per SM (-1: occupancy, the library's default) */
} bench_opts;

static const char *hadamard_name(taco_hadamard h) {
  return h == TACO_HADAMARD_SMEM ? "smem" : h == TACO_HADAMARD_AUTO ? "auto" : "shuffle";
}
static const char *loads_name(taco_loads l) { return l == TACO_LOADS_L2PF ? "l2pf" : l == TACO_LOADS_DEEP ? "deep" : "stream"; }
static const char *dse_name(taco_dse d) { return d == TACO_DSE_TRANSFORM ? "transform" : "direct"; }

/* "hadamard:loads:dse:per_thread:tiling:options", each part optional from the right (default: the library's) */
static int parse_variant(const char *s, bench_variant *v) {
  char buf[96], *parts[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  snprintf(buf, sizeof buf, "%s", s);
  int np = 1;
  parts[0] = buf;
  for (char *c = buf; *c; c++)
    if (*c == ':') {
      if (np == 6) return -1; /* more than six parts */
      *c = '\0';
      parts[np++] = c + 1;
    }
  v->h = TACO_HADAMARD_DEFAULT, v->l = TACO_LOADS_DEFAULT, v->d = TACO_DSE_DEFAULT, v->per_thread = TACO_PER_THREAD_DEFAULT;
  v->tiling = TACO_TILING_DEFAULT, v->stages = TACO_BULK_STAGES_DEFAULT, v->opts = TACO_TILED_OPTS_DEFAULT;
  if (parts[0] && *parts[0]) {
    if (!strcmp(parts[0], "smem")) v->h = TACO_HADAMARD_SMEM;
    else if (!strcmp(parts[0], "shuffle")) v->h = TACO_HADAMARD_SHUFFLE;
    else if (!strcmp(parts[0], "auto")) v->h = TACO_HADAMARD_AUTO;
    else return -1;
  }
  if (parts[1] && *parts[1]) {
    if (!strcmp(parts[1], "stream")) v->l = TACO_LOADS_STREAM;
    else if (!strcmp(parts[1], "l2pf")) v->l = TACO_LOADS_L2PF;
    else if (!strcmp(parts[1], "deep")) v->l = TACO_LOADS_DEEP;
    else return -1;
  }
  if (parts[2] && *parts[2]) {
    if (!strcmp(parts[2], "direct")) v->d = TACO_DSE_DIRECT;
    else if (!strcmp(parts[2], "transform")) v->d = TACO_DSE_TRANSFORM;
    else return -1;
  }
  if (parts[3] && *parts[3]) {
    if (!strcmp(parts[3], "auto")) v->per_thread = 0;
    else if (!strcmp(parts[3], "32")) v->per_thread = 32;
    else if (!strcmp(parts[3], "64")) v->per_thread = 64;
    else return -1;
  }
  if (parts[4] && *parts[4]) {
    char *end;
    if (!strcmp(parts[4], "grid")) v->tiling = TACO_TILING_GRID;
    else if (!strcmp(parts[4], "warp")) v->tiling = TACO_TILING_WARP;
    else if (!strcmp(parts[4], "auto")) v->tiling = TACO_TILING_AUTO;
    else if (!strncmp(parts[4], "bulk", 4)) {
      v->tiling = TACO_TILING_BULK;
      if (parts[4][4]) {
        long n = strtol(parts[4] + 4, &end, 10);
        if (*end || n < 1 || n > 16) return -1;
        v->stages = (int)n;
      }
    } else return -1;
  }
  if (parts[5] && *parts[5] && taco_parse_tiled_options(parts[5], &v->opts)) return -1;
  char pt[8], tl[16], op[32];
  snprintf(pt, sizeof pt, "%d", v->per_thread);
  if (v->tiling == TACO_TILING_BULK) snprintf(tl, sizeof tl, "bulk%d", v->stages);
  else snprintf(tl, sizeof tl, "%s", v->tiling == TACO_TILING_WARP ? "warp" : v->tiling == TACO_TILING_AUTO ? "auto" : "grid");
  taco_format_tiled_options(v->opts, op, sizeof op);
  snprintf(v->name, sizeof v->name, "%s:%s:%s:%s:%s:%s", hadamard_name(v->h), loads_name(v->l), dse_name(v->d),
           v->per_thread ? pt : "auto", tl, op);
  return 0;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: tacorun bench-codec [--quality] [--sizes 1M,64M,1G] [--groups 32,128,...] [--fp8 e4m3|e5m2]\n"
          "                           [--reps N] [--fp32] [--rows R --cols C] [--variants H:L:D:P:T:O,...] [--graph]\n"
          "                           [--blocks-per-sm N]\n"
          "       tacorun bench-codec --moe [...]   the fused MoE permute+encode and decode+combine kernels\n"
          "                           beside the unfused sequences (tacorun bench-codec --moe --help)\n"
          "  speed (default): encode, unfused encode, decode, decode-sum and decode-sum-encode of k=2 blocks;\n"
          "    copy rows: cudaMemcpyAsync and a plain copy kernel of the same BF16 buffer (the same-size ceiling);\n"
          "    stream rows (per variant: they follow its options): streaming kernels of the same traffic,\n"
          "    r1w1 = the copy, r2w1 = the encode's mix (reads the input, writes half), r1w2 = the decode's;\n"
          "    encode and decode rows end with copy%%= (of cudaMemcpy's GB/s) and mix%%= (of r2w1 / r1w2).\n"
          "  --quality: relative L2 error, SNR and max abs error of per-tensor FP8, per-group FP8,\n"
          "    per-group + Hadamard and TACO, E4M3 and E5M2, G = --groups, four distributions (CPU, no GPU).\n"
          "options (defaults in brackets):\n"
          "  --sizes LIST     BF16 input bytes of the speed rows, K/M/G suffixes, 64 bytes to 64G\n"
          "                   [1M,4M,16M,64M,256M,1G]\n"
          "  --groups LIST    TACO group sizes among 32, 64, 128, 256, 512 [all five]\n"
          "  --fp8 e4m3|e5m2  FP8 format of the speed rows [e4m3]\n"
          "  --reps N         timed repetitions per point, median kept [15]\n"
          "  --fp32           add FP32-input/output rows [off]\n"
          "  --rows R         rows of the --quality tensors [256]\n"
          "  --cols C         columns (hidden channels) of the --quality tensors [4096]\n"
          "  --graph          the launches of each timed rep are captured once into a CUDA graph and replayed [off]\n"
          "  --variants LIST  kernel variants to time side by side in one run (at most 8) [the library's default],\n"
          "    each hadamard:loads:dse:per_thread:tiling:options with hadamard smem|shuffle|auto, loads stream|l2pf|deep,\n"
          "    dse direct|transform, per_thread 32|64|auto (64: shuffles, deep runs as l2pf),\n"
          "    tiling grid|warp|bulkN|auto (encode and decode of k = 1; N bulk copies in flight per warp,\n"
          "    1..16; auto: warp for the encode, grid for the decode), options none or d2+ef+pdl+full\n"
          "    (warp tiles and stream rows: d2 two tiles of loads in flight, ef L2 evict-first hints,\n"
          "    pdl programmatic dependent launch, full a grid of exactly blocks-per-SM x SMs)\n"
          "    (parts left out: the library's default)\n"
          "  --blocks-per-sm N  persistent blocks per SM of every variant: 0 one tile per thread (no\n"
          "                   persistence), 1..64 a cap, -1 the occupancy [-1]\n"
          "  --hadamard LIST  the same as --variants (--hadamard smem,shuffle is --variants smem,shuffle) [as\n"
          "                   --variants]\n"
          "  --quality        the error table instead of the speed rows [off]\n"
          "reads:  nothing\n"
          "writes: the table on standard output; progress on standard error when it is a terminal\n");
}

static int parse_list(const char *arg, const char *what, int is_size, bench_opts *o) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", arg);
  int count = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (count == MAX_LIST) {
      fprintf(stderr, "bench-codec: %s: at most %d values\n", what, MAX_LIST);
      return -1;
    }
    if (is_size) {
      if (ts_arg_bytes(tok, &o->sizes[count]) || o->sizes[count] < 64 || o->sizes[count] > ((size_t)64 << 30)) {
        fprintf(stderr, "bench-codec: --sizes: '%s' is not a size from 64 bytes to 64G (e.g. 64M)\n", tok);
        return -1;
      }
    } else {
      char *end;
      long g = strtol(tok, &end, 10);
      taco_params p = {(int)g, TACO_FP8_E4M3};
      if (*end || !taco_params_valid(p)) {
        fprintf(stderr, "bench-codec: --groups: '%s' is not one of 32, 64, 128, 256, 512\n", tok);
        return -1;
      }
      o->groups[count] = (int)g;
    }
    count++;
  }
  if (count == 0) {
    fprintf(stderr, "bench-codec: %s: empty list\n", what);
    return -1;
  }
  if (is_size) o->nsizes = count;
  else o->ngroups = count;
  return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
  static const size_t default_sizes[] = {1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20, 1u << 30};
  static const int default_groups[] = {32, 64, 128, 256, 512};
  memset(o, 0, sizeof *o);
  o->reps = 15;
  o->fp8 = TACO_FP8_E4M3;
  o->rows = 256;
  o->cols = 4096;
  o->nsizes = 6;
  memcpy(o->sizes, default_sizes, sizeof default_sizes);
  o->ngroups = 5;
  memcpy(o->groups, default_groups, sizeof default_groups);
  parse_variant("", &o->variants[0]);
  o->nvariants = 1;
  o->blocks_per_sm = -1;
  const ts_arg_flag flags[] = {{"--quality", &o->quality}, {"--fp32", &o->fp32}, {"--graph", &o->graph}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (ts_arg_is_help(a)) {
      usage(stdout);
      return 1;
    } else if (ts_arg_set_flag(a, flags, sizeof flags / sizeof *flags)) {
      continue;
    } else if (v && !strcmp(a, "--sizes")) {
      if (parse_list(v, "--sizes", 1, o)) return -1;
      i++;
    } else if (v && !strcmp(a, "--groups")) {
      if (parse_list(v, "--groups", 0, o)) return -1;
      i++;
    } else if (v && (!strcmp(a, "--hadamard") || !strcmp(a, "--variants"))) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      o->nvariants = 0;
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->nvariants == MAX_VARIANTS || parse_variant(tok, &o->variants[o->nvariants])) {
          fprintf(stderr, "bench-codec: %s: '%s' is not a list of at most %d variants hadamard[:loads[:dse[:per_thread[:tiling[:options]]]]]\n", a, v,
                  MAX_VARIANTS);
          return -1;
        }
        o->nvariants++;
      }
      if (o->nvariants == 0) {
        fprintf(stderr, "bench-codec: %s: empty list\n", a);
        return -1;
      }
      i++;
    } else if (v && !strcmp(a, "--blocks-per-sm")) {
      char *end;
      long n = strtol(v, &end, 10);
      if (*v == 0 || *end || n < -1 || n > 64) {
        fprintf(stderr, "bench-codec: --blocks-per-sm: '%s' is not -1, 0 or 1..64\n", v);
        return -1;
      }
      o->blocks_per_sm = (int)n;
      i++;
    } else if (v && !strcmp(a, "--fp8")) {
      if (!strcmp(v, "e4m3")) o->fp8 = TACO_FP8_E4M3;
      else if (!strcmp(v, "e5m2")) o->fp8 = TACO_FP8_E5M2;
      else {
        fprintf(stderr, "bench-codec: --fp8: '%s' is not e4m3 or e5m2\n", v);
        return -1;
      }
      i++;
    } else if (v && (!strcmp(a, "--reps") || !strcmp(a, "--rows") || !strcmp(a, "--cols"))) {
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 100000000) {
        fprintf(stderr, "bench-codec: %s: '%s' is not a positive integer\n", a, v);
        return -1;
      }
      if (!strcmp(a, "--reps")) o->reps = (int)n;
      else if (!strcmp(a, "--rows")) o->rows = (size_t)n;
      else o->cols = (size_t)n;
      i++;
    } else {
      fprintf(stderr, "bench-codec: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return -1;
    }
  }
  return 0;
}

static int progress_on;
static void progress(const char *what, int done, int total) {
  if (!progress_on) return;
  fprintf(stderr, "\r[bench-codec] %-40s %d/%d", what, done, total);
  if (done == total) fprintf(stderr, "\n");
  fflush(stderr);
}

/* ---------------- quality (CPU reference) ---------------- */

static int run_quality(const bench_opts *o) {
  size_t n = o->rows * o->cols;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  if (!x || !y) {
    free(x);
    free(y);
    fprintf(stderr, "bench-codec: out of memory for %zu elements\n", n);
    return 1;
  }
  int total = TACO_DIST_COUNT * 2 * (1 + 3 * o->ngroups), done = 0, rc = 0;
  printf("# bench-codec --quality: %zu x %zu tensors (cols = hidden channels), seed 1 per distribution;\n", o->rows,
         o->cols);
  printf("# computed with the CPU reference, bit-identical to the CUDA kernels. fp8-tensor does not depend on G.\n");
  printf("# %-20s %-5s %-20s %4s %12s %9s %12s\n", "distribution", "fp8", "codec", "G", "rel_l2", "snr_db",
         "max_abs");
  for (int d = 0; d < TACO_DIST_COUNT && !rc; d++) {
    taco_fill_dist(x, o->rows, o->cols, (taco_dist)d, 1);
    for (int f = 0; f < 2 && !rc; f++) {
      taco_fp8 fp8 = f ? TACO_FP8_E5M2 : TACO_FP8_E4M3;
      for (int k = 0; k < TACO_CODEC_COUNT && !rc; k++)
        for (int gi = 0; gi < (k == TACO_CODEC_FP8_TENSOR ? 1 : o->ngroups) && !rc; gi++) {
          taco_params p = {o->groups[gi], fp8};
          taco_error_stats st;
          if (taco_ref_roundtrip((taco_codec_kind)k, x, n, p, y)) {
            fprintf(stderr, "bench-codec: %s\n", taco_last_error());
            rc = 1;
            break;
          }
          taco_error_measure(x, y, n, &st);
          char g[8];
          snprintf(g, sizeof g, "%d", p.group);
          printf("  %-20s %-5s %-20s %4s %12.4e %9.2f %12.4e\n", taco_dist_name((taco_dist)d),
                 f ? "e5m2" : "e4m3", taco_codec_name((taco_codec_kind)k), k == TACO_CODEC_FP8_TENSOR ? "-" : g,
                 st.rel_l2, st.snr_db, st.max_abs);
          fflush(stdout);
          progress("quality", ++done, total);
        }
    }
  }
  free(x);
  free(y);
  return rc;
}

/* ---------------- speed (GPU) ---------------- */

#define CK(call)                                                                                              \
  GPU_CHECK(cudaError_t, cudaSuccess, call,                                                                   \
            fprintf(stderr, "bench-codec: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(gpu_s_)); \
            goto fail)

enum kernel { K_COPY, K_COPYK, K_R1W1, K_R2W1, K_R1W2, K_ENCODE, K_UNFUSED, K_DECODE, K_DSUM2, K_DSE2, K_COUNT };
static const char *kernel_names[] = {"copy(cudaMemcpy)", "copy(kernel)", "stream(r1w1)", "stream(r2w1)", "stream(r1w2)",
                                     "encode", "encode-unfused", "decode", "decode-sum(k=2)", "decode-sum-encode(k=2)"};
static cudaStream_t bench_stream; /* every timed launch (a created stream, so that --graph can capture it) */

typedef struct {
  size_t n, in_bytes, wire, out_bytes, work_bytes;
  int nbuf;
  taco_params p;
  taco_dtype dt;
  char *x, *blocks, *y, *work; /* pools of nbuf slots */
} bench_pool;

static int launch(const bench_pool *b, enum kernel k, int i) {
  char *x = b->x + (size_t)i * b->in_bytes, *blk = b->blocks + (size_t)i * 2 * b->wire;
  char *y = b->y + (size_t)i * b->out_bytes, *work = b->work + (size_t)i * b->work_bytes;
  cudaStream_t s = bench_stream;
  switch (k) {
  case K_COPY: /* the same bytes as a plain device copy: the ceiling on this machine */
    if (cudaMemcpyAsync(y, x, b->in_bytes, cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
      fprintf(stderr, "bench-codec: cudaMemcpyAsync failed\n");
      return -1;
    }
    return 0;
  case K_COPYK: return taco_copy_device(y, x, b->in_bytes, s);
  /* 16-byte units: r1w1 in_bytes each way; r2w1 reads in_bytes, writes half; r1w2 reads half, writes in_bytes */
  case K_R1W1: return taco_stream_device(y, x, 1, 1, b->in_bytes / 16, s);
  case K_R2W1: return taco_stream_device(y, x, 2, 1, b->in_bytes / 32, s);
  case K_R1W2: return taco_stream_device(y, x, 1, 2, b->in_bytes / 32, s);
  case K_ENCODE: return taco_encode(x, b->dt, b->n, b->p, blk, NULL, s);
  case K_UNFUSED: return taco_encode_unfused(x, b->dt, b->n, b->p, blk, work, s);
  case K_DECODE: return taco_decode(blk, b->n, b->p, y, b->dt, s);
  case K_DSUM2: return taco_decode_sum(blk, 2, b->n, b->p, y, b->dt, s);
  case K_DSE2: return taco_decode_sum_encode(blk, 2, b->n, b->p, y, s);
  default: return -1;
  }
}

static double bytes_moved(const bench_pool *b, enum kernel k) {
  switch (k) {
  case K_COPY:
  case K_COPYK:
  case K_R1W1: return 2.0 * (double)b->in_bytes;
  case K_R2W1:
  case K_R1W2: return 1.5 * (double)(b->in_bytes / 32 * 32);
  case K_ENCODE:
  case K_UNFUSED: return (double)b->in_bytes + (double)b->wire;
  case K_DECODE: return (double)b->wire + (double)b->out_bytes;
  case K_DSUM2: return 2.0 * (double)b->wire + (double)b->out_bytes;
  case K_DSE2: return 3.0 * (double)b->wire;
  default: return 0;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* median over reps of (time of L launches rotating over the pool) / L, in us;
 * graph: the L launches captured once into a CUDA graph, each rep replays it */
static int time_kernel(const bench_pool *b, enum kernel k, int reps, int graph, cudaEvent_t e0, cudaEvent_t e1,
                       double *us) {
  int per_rep = b->nbuf < 8 ? 8 : b->nbuf;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return -1;
  for (int i = 0; i < b->nbuf; i++) /* warm-up (and the kernels' one-time set-up, outside any capture) */
    if (launch(b, k, i)) goto taco_fail;
  if (graph) {
    CK(cudaStreamBeginCapture(bench_stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_rep; i++)
      if (launch(b, k, i % b->nbuf)) {
        cudaStreamEndCapture(bench_stream, &g);
        goto taco_fail;
      }
    CK(cudaStreamEndCapture(bench_stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, bench_stream)); /* the first replay uploads the graph */
  }
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(e0, bench_stream));
    if (graph) {
      CK(cudaGraphLaunch(ge, bench_stream));
    } else {
      for (int i = 0; i < per_rep; i++)
        if (launch(b, k, i % b->nbuf)) goto taco_fail;
    }
    CK(cudaEventRecord(e1, bench_stream));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t[r] = 1000.0 * (double)ms / per_rep;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_double);
  *us = t[reps / 2];
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  free(t);
  return 0;
taco_fail:
  fprintf(stderr, "bench-codec: %s\n", taco_last_error());
fail:
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  free(t);
  return -1;
}

static void pool_free(bench_pool *b) {
  cudaFree(b->x);
  cudaFree(b->blocks);
  cudaFree(b->y);
  cudaFree(b->work);
  b->x = b->blocks = b->y = b->work = NULL;
}

static int pool_make(bench_pool *b, size_t in_bytes, taco_dtype dt, taco_params p, size_t l2) {
  memset(b, 0, sizeof *b);
  size_t es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  b->n = in_bytes / es;
  b->in_bytes = b->n * es;
  b->out_bytes = b->in_bytes;
  b->wire = taco_wire_bytes(b->n, p.group);
  b->work_bytes = taco_unfused_workspace_bytes(b->n, p.group);
  b->p = p;
  b->dt = dt;
  /* enough slots that one rotation is 4x the L2 */
  size_t want = (4 * l2 + b->in_bytes - 1) / b->in_bytes;
  b->nbuf = (int)(want < 1 ? 1 : (want > 256 ? 256 : want));
  CK(cudaMalloc((void **)&b->x, b->in_bytes * (size_t)b->nbuf));
  CK(cudaMalloc((void **)&b->blocks, 2 * b->wire * (size_t)b->nbuf));
  CK(cudaMalloc((void **)&b->y, b->out_bytes * (size_t)b->nbuf));
  CK(cudaMalloc((void **)&b->work, b->work_bytes * (size_t)b->nbuf));
  if (taco_fill_random(b->x, dt, b->n * (size_t)b->nbuf, 12345, 1.0f, NULL)) goto taco_fail;
  /* every slot holds two real encoded blocks (its own input and the next slot's) */
  for (int i = 0; i < b->nbuf; i++)
    for (int j = 0; j < 2; j++)
      if (taco_encode(b->x + (size_t)((i + j) % b->nbuf) * b->in_bytes, dt, b->n, p,
                      b->blocks + (size_t)i * 2 * b->wire + (size_t)j * b->wire, NULL, NULL))
        goto taco_fail;
  CK(cudaDeviceSynchronize());
  return 0;
taco_fail:
  fprintf(stderr, "bench-codec: %s\n", taco_last_error());
fail:
  pool_free(b);
  return -1;
}

static int run_speed(const bench_opts *o) {
  int dev = 0, driver = 0, runtime = 0;
  struct cudaDeviceProp prop;
  cudaEvent_t e0 = NULL, e1 = NULL;
  bench_pool b;
  memset(&b, 0, sizeof b);
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaStreamCreate(&bench_stream));
  printf("# bench-codec: %s, %d SMs, L2 %d MiB, driver API %d.%d, runtime %d.%d; fp8 %s; median of %d reps\n",
         prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, driver / 1000, (driver % 1000) / 10,
         runtime / 1000, (runtime % 1000) / 10, o->fp8 == TACO_FP8_E4M3 ? "e4m3" : "e5m2", o->reps);
  printf("# GB/s = (bytes read + bytes written) / time; %% of the %.0f GB/s HBM copy ceiling.\n", CEILING_GBPS);
  printf("# encode rows also show the unfused encode (scale, Hadamard, cast passes) and fused speedup over it;\n");
  printf("# encode and decode rows end with copy%%= (of cudaMemcpy's GB/s at the size) and mix%%= (of the variant's\n");
  printf("# stream(r2w1) for the encode, stream(r1w2) for the decode). Launches: %s.\n",
         o->graph ? "each rep's launches captured once into a CUDA graph, replayed" : "back to back on one stream");
  {
    bench_variant def;
    parse_variant("", &def);
    printf("# library default: %s; blocks per SM: %d (-1: occupancy)\n", def.name, o->blocks_per_sm);
  }
  if (taco_set_blocks_per_sm(o->blocks_per_sm)) { /* checked by the parser; the library checks again */
    fprintf(stderr, "bench-codec: %s\n", taco_last_error());
    goto fail;
  }
  printf("# variants (hadamard:loads:dse:per_thread:tiling:options), each timed right after the other on the same buffers:");
  for (int vi = 0; vi < o->nvariants; vi++) printf(" %s", o->variants[vi].name);
  printf("\n# %-22s %-34s %-5s %4s %12s %11s %10s %8s %7s %12s %8s\n", "kernel", "variant", "dtype", "G", "size(B)", "n",
         "time(us)", "GB/s", "%ceil", "unfused(us)", "speedup");
  int ndt = o->fp32 ? 2 : 1, total = o->nsizes * o->ngroups * ndt, done = 0;
  for (int di = 0; di < ndt; di++)
    for (int si = 0; si < o->nsizes; si++)
      for (int gi = 0; gi < o->ngroups; gi++) {
        taco_dtype dt = di ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
        taco_params p = {o->groups[gi], o->fp8};
        size_t in_bytes = o->sizes[si] * (dt == TACO_DTYPE_FP32 ? 2 : 1); /* same element count */
        if (pool_make(&b, in_bytes, dt, p, (size_t)prop.l2CacheSize)) goto fail;
        double t[MAX_VARIANTS][K_COUNT];
        /* kernel by kernel, the variants back to back, so that they see the same machine state */
        for (int k = 0; k < K_COUNT; k++)
          for (int vi = 0; vi < o->nvariants; vi++) {
            if (taco_set_hadamard(o->variants[vi].h) || taco_set_loads(o->variants[vi].l) ||
                taco_set_dse(o->variants[vi].d) || taco_set_per_thread(o->variants[vi].per_thread) ||
                taco_set_tiling(o->variants[vi].tiling, o->variants[vi].stages) ||
                taco_set_tiled_options(o->variants[vi].opts))
              goto taco_fail;
            if ((k == K_COPY || k == K_COPYK || k == K_UNFUSED) && vi > 0) { /* no variant: timed once */
              t[vi][k] = t[0][k];
              continue;
            }
            if (time_kernel(&b, (enum kernel)k, o->reps, o->graph, e0, e1, &t[vi][k])) goto fail;
          }
        for (int k = 0; k < K_COUNT; k++)
          for (int vi = 0; vi < o->nvariants; vi++) {
            if (k == K_UNFUSED || ((k == K_COPY || k == K_COPYK) && vi > 0)) continue;
            double gbps = bytes_moved(&b, (enum kernel)k) / (t[vi][k] * 1e3);
            printf("  %-22s %-34s %-5s %4d %12zu %11zu %10.2f %8.1f %7.1f", kernel_names[k],
                   k == K_COPY || k == K_COPYK ? "-" : o->variants[vi].name, dt == TACO_DTYPE_BF16 ? "bf16" : "fp32",
                   p.group, b.in_bytes, b.n, t[vi][k], gbps, 100.0 * gbps / CEILING_GBPS);
            if (k == K_ENCODE) printf(" %12.2f %8.2f", t[vi][K_UNFUSED], t[vi][K_UNFUSED] / t[vi][K_ENCODE]);
            if (k == K_ENCODE || k == K_DECODE) {
              const enum kernel mix = k == K_ENCODE ? K_R2W1 : K_R1W2;
              const double copy_gbps = bytes_moved(&b, K_COPY) / (t[0][K_COPY] * 1e3);
              const double mix_gbps = bytes_moved(&b, mix) / (t[vi][mix] * 1e3);
              printf(" copy%%=%.1f mix%%=%.1f", 100.0 * gbps / copy_gbps, 100.0 * gbps / mix_gbps);
            }
            printf("\n");
          }
        fflush(stdout);
        pool_free(&b);
        progress("speed", ++done, total);
      }
  taco_set_tiled_options(TACO_TILED_OPTS_DEFAULT);
  cudaStreamDestroy(bench_stream);
  cudaEventDestroy(e1);
  cudaEventDestroy(e0);
  return 0;
taco_fail:
  fprintf(stderr, "bench-codec: %s\n", taco_last_error());
fail:
  pool_free(&b);
  if (bench_stream) cudaStreamDestroy(bench_stream);
  if (e1) cudaEventDestroy(e1);
  if (e0) cudaEventDestroy(e0);
  return 1;
}

int bench_codec_main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--moe")) return bench_codec_moe_main(argc, argv); /* bench_codec_moe.c */
  bench_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc > 0 ? 0 : 2;
  progress_on = isatty(2);
  if (o.quality) return run_quality(&o);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "bench-codec: no CUDA device: the speed benchmark needs one (--quality runs on the CPU)\n");
    return 1;
  }
  return run_speed(&o);
}
