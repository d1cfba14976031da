/* tpo_sm.cu — what a GEMM loses beside a communication kernel that holds n SMs (tp_comm_overlap).
 *
 * The simulator prices a GEMM that runs beside one of Transformer Engine's userbuffer kernels at
 * time x sms / (sms - n), n from TE's defaults (pipeline and bulk 16 SMs, ring exchange 1;
 * plan/plan_program_tpo.c, plan/README.md). This program measures the ratio on one GPU:
 *
 *   t_all      the GEMM alone on every SM (cuBLASLt's heuristic, as exec_gemm runs it)
 *   t_margin   the GEMM with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = sms - n (what TE's set_sm_margin
 *              asks cuBLASLt for), nothing beside it
 *   t_idle     the same beside a persistent kernel of n blocks, one per SM (each takes the most shared
 *              memory a block may have, so no other block fits on its SM), that only spins: the SMs taken,
 *              no memory traffic
 *   t_copy     the same beside n blocks that copy 256 MiB round and round: the SMs taken and HBM traffic
 *              at what n SMs can copy (an upper bound on a userbuffer kernel's, which moves NVLink data)
 *
 * and prints each ratio against sms / (sms - n). Shapes: the four forward GEMMs of a GPT layer (qkv, proj,
 * fc1, fc2) at hidden h, TP t, T tokens gathered (the rows of an SP micro-batch): --hidden 12288 --tp 8
 * --tokens 2048 by default (GPT-3 175B, micro 1, seq 2048). Row-major BF16, FP32 accumulate.
 *
 *   nvcc -O2 -arch=sm_90 -o tpo_sm calibration/tpo-sm/tpo_sm.cu -lcublasLt
 *   ./tpo_sm [--hidden H] [--tp T] [--tokens M] [--sms-held 16,1] [--reps 30]
 *
 * Exit 1 on a CUDA or cuBLASLt error, 2 on bad options. Written and compiled on a CPU machine; not run there. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                                      \
  do {                                                                                                             \
    cudaError_t err_ = (x);                                                                                        \
    if (err_ != cudaSuccess) {                                                                                     \
      fprintf(stderr, "tpo_sm: %s: %s (line %d)\n", #x, cudaGetErrorString(err_), __LINE__);                    \
      exit(1);                                                                                                     \
    }                                                                                                              \
  } while (0)
#define CB(x)                                                                                                      \
  do {                                                                                                             \
    cublasStatus_t st_ = (x);                                                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                            \
      fprintf(stderr, "tpo_sm: %s: status %d (line %d)\n", #x, (int)st_, __LINE__);                              \
      exit(1);                                                                                                     \
    }                                                                                                              \
  } while (0)

#define WORKSPACE ((size_t)32 << 20)
#define COPY_BYTES ((size_t)256 << 20)

/* n blocks, one per SM, until *stop: spin (copy 0) or copy src -> dst round and round (copy 1).
 * The flag lives in device memory and is set by a copy on a stream of its own: a first version polled a
 * flag in mapped host memory from every thread, which filled the PCIe link with the GPU's reads and
 * slowed the launches of the GEMM timed beside it (up to 140x, 2026-12-05, H100; still 5-15x with one
 * thread polling every 10 us); a userbuffer kernel polls flags in device memory. Thread 0 reads it. */
__global__ void holder(volatile int *stop, const float4 *src, float4 *dst, size_t n4, int copy) {
  extern __shared__ float4 pin[]; /* sized by the launch so that no second block fits on the SM */
  volatile int *done = (volatile int *)pin; /* the flag's copy for the block: no static shared memory, the dynamic takes all */
  if (threadIdx.x == 0) pin[0] = make_float4(0, 0, 0, 0);
  if (!copy) {
    if (threadIdx.x == 0)
      while (!*stop) __nanosleep(10000);
    return; /* the block, and its shared memory, stays on the SM while thread 0 spins */
  }
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
  for (;;) {
    if (threadIdx.x == 0) *done = *stop;
    __syncthreads();
    if (*done) return;
    for (size_t j = i; j < n4; j += step) dst[j] = src[j];
    __syncthreads();
  }
}

typedef struct {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *ws, *A, *B, *C;
} gemm;

/* C[m x n] = A[m x k] . B[k x n], row-major BF16, as column-major C^T = B^T . A^T; sm_count > 0: the SM
 * count target. */
static void gemm_make(gemm *g, cublasLtHandle_t h, long long m, long long n, long long k, int sm_count, void *A,
                      void *B, void *C, void *ws) {
  memset(g, 0, sizeof *g);
  g->h = h, g->A = A, g->B = B, g->C = C, g->ws = ws;
  cublasOperation_t nop = CUBLAS_OP_N;
  CB(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &nop, sizeof nop));
  CB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop));
  if (sm_count > 0)
    CB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_count, sizeof sm_count));
  CB(cublasLtMatrixLayoutCreate(&g->la, CUDA_R_16BF, (uint64_t)n, (uint64_t)k, n)); /* B^T: n x k */
  CB(cublasLtMatrixLayoutCreate(&g->lb, CUDA_R_16BF, (uint64_t)k, (uint64_t)m, k)); /* A^T: k x m */
  CB(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, (uint64_t)n, (uint64_t)m, n)); /* C^T: n x m */
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = WORKSPACE;
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t r;
  int found = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(h, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &r, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found < 1) {
    fprintf(stderr, "tpo_sm: no cuBLASLt algorithm for %lld x %lld x %lld\n", m, n, k);
    exit(1);
  }
  g->algo = r.algo;
}

static void gemm_run(const gemm *g, cudaStream_t s) {
  const float one = 1.f, zero = 0.f;
  CB(cublasLtMatmul(g->h, g->op, &one, g->B, g->la, g->A, g->lb, &zero, g->C, g->lc, g->C, g->lc, &g->algo, g->ws,
                    WORKSPACE, s));
}

static void gemm_free(gemm *g) {
  cublasLtMatrixLayoutDestroy(g->lc);
  cublasLtMatrixLayoutDestroy(g->lb);
  cublasLtMatrixLayoutDestroy(g->la);
  cublasLtMatmulDescDestroy(g->op);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median over reps of the GEMM's time on stream s (events around each launch), after 5 warm-up launches. */
static double time_us(const gemm *g, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; i++) gemm_run(g, s);
  float *t = (float *)malloc(sizeof(float) * reps);
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(a, s));
    gemm_run(g, s);
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&t[i], a, b));
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_float);
  double us = 1000.0 * t[reps / 2];
  free(t);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return us;
}

static int g_cga = 2; /* --cga: the holders' cluster size (TE's comm_cga_size; 1 = no clusters) */

/* The GEMM's median time beside `held` holder blocks (copy 0: spinning, 1: copying). */
static double time_beside(const gemm *g, cudaStream_t s, int reps, int held, int copy, size_t smem,
                          const int *one_host, int *stop_dev, const float4 *src, float4 *dst) {
  cudaStream_t side;
  CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaStream_t setter;
  CK(cudaStreamCreateWithFlags(&setter, cudaStreamNonBlocking));
  CK(cudaMemset(stop_dev, 0, sizeof(int)));
  /* in clusters of g_cga blocks, as TE launches its userbuffer kernels (comm_cga_size, default 2): a cluster
   * takes SMs side by side, so the holders leave the GEMM's own clusters whole SM pairs */
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3(held), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = smem, cfg.stream = side;
  const int cga = held % g_cga == 0 ? g_cga : 1;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cga, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, holder, (volatile int *)stop_dev, src, dst, COPY_BYTES / sizeof(float4), copy));
  double us = time_us(g, s, reps);
  CK(cudaMemcpyAsync(stop_dev, one_host, sizeof(int), cudaMemcpyHostToDevice, setter));
  CK(cudaStreamSynchronize(side));
  CK(cudaStreamSynchronize(setter));
  CK(cudaStreamDestroy(setter));
  CK(cudaStreamDestroy(side));
  return us;
}

int main(int argc, char **argv) {
  long long h = 12288, tp = 8, T = 2048;
  int reps = 30, held_list[8] = {16, 1}, n_held = 2;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--hidden") && i + 1 < argc) h = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--tp") && i + 1 < argc) tp = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) T = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cga") && i + 1 < argc) g_cga = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sms-held") && i + 1 < argc) {
      n_held = 0;
      for (char *t = strtok(argv[++i], ","); t && n_held < 8; t = strtok(NULL, ",")) held_list[n_held++] = atoi(t);
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tpo_sm [--hidden H] [--tp T] [--tokens M] [--sms-held 16,1] [--reps N] [--cga 2]\n");
      return 0;
    } else {
      fprintf(stderr, "usage: tpo_sm [--hidden H] [--tp T] [--tokens M] [--sms-held 16,1] [--reps N] [--cga 2]\n");
      return 2;
    }
  }
  if (h < 1 || tp < 1 || T < 1 || reps < 3 || n_held < 1 || h % tp || g_cga < 1 || g_cga > 8) {
    fprintf(stderr, "tpo_sm: --hidden must divide by --tp; all positive, --reps >= 3, --cga 1..8\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  /* one holder block per SM, and no GEMM block beside it: the most shared memory a block may have */
  const size_t smem = prop.sharedMemPerBlockOptin;
  CK(cudaFuncSetAttribute(holder, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int *one_host, *stop_dev;
  CK(cudaMallocHost((void **)&one_host, sizeof(int)));
  *one_host = 1;
  CK(cudaMalloc((void **)&stop_dev, sizeof(int)));
  float4 *src, *dst;
  CK(cudaMalloc((void **)&src, COPY_BYTES));
  CK(cudaMalloc((void **)&dst, COPY_BYTES));
  CK(cudaMemset(src, 0, COPY_BYTES));
  /* qkv [T x h] . [h x 3h/tp], proj [T x h/tp] . [h/tp x h], fc1 [T x h] . [h x 4h/tp], fc2 [T x 4h/tp] . [4h/tp x h] */
  struct {
    const char *name;
    long long m, n, k;
  } shapes[4] = {{"qkv", T, 3 * h / tp, h}, {"proj", T, h, h / tp}, {"fc1", T, 4 * h / tp, h}, {"fc2", T, h, 4 * h / tp}};
  size_t most = 0;
  for (int i = 0; i < 4; i++) {
    size_t a = (size_t)(shapes[i].m * shapes[i].k), b = (size_t)(shapes[i].k * shapes[i].n),
           c = (size_t)(shapes[i].m * shapes[i].n);
    if (a > most) most = a;
    if (b > most) most = b;
    if (c > most) most = c;
  }
  void *A, *B, *C, *ws;
  CK(cudaMalloc(&A, most * 2));
  CK(cudaMalloc(&B, most * 2));
  CK(cudaMalloc(&C, most * 2));
  CK(cudaMalloc(&ws, WORKSPACE));
  CK(cudaMemset(A, 0x3c, most * 2)); /* bf16 ~1.1e0: finite inputs */
  CK(cudaMemset(B, 0x3c, most * 2));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("# tpo_sm: %s, %d SMs; hidden %lld, tp %lld, tokens %lld; median of %d launches (us); holders in clusters "
         "of %d (odd counts: 1)\n", prop.name, sms, h, tp, T, reps, g_cga);
  printf("# gemm m n k held t_all t_margin t_idle t_copy margin/all idle/all copy/all model=sms/(sms-held) "
         "t_nomargin nomargin/all\n");
  for (int i = 0; i < 4; i++) {
    gemm all;
    gemm_make(&all, lt, shapes[i].m, shapes[i].n, shapes[i].k, 0, A, B, C, ws);
    const double t_all = time_us(&all, s, reps);
    for (int j = 0; j < n_held; j++) {
      const int held = held_list[j];
      if (held < 1 || held >= sms) continue;
      gemm margin;
      gemm_make(&margin, lt, shapes[i].m, shapes[i].n, shapes[i].k, sms - held, A, B, C, ws);
      const double t_margin = time_us(&margin, s, reps);
      const double t_idle = time_beside(&margin, s, reps, held, 0, smem, one_host, stop_dev, src, dst);
      const double t_copy = time_beside(&margin, s, reps, held, 1, smem, one_host, stop_dev, src, dst);
      /* TE's set_sm_margin false: the GEMM asks for every SM while the holders keep `held` of them */
      const double t_nomargin = time_beside(&all, s, reps, held, 0, smem, one_host, stop_dev, src, dst);
      printf("%s %lld %lld %lld %d %.1f %.1f %.1f %.1f %.4f %.4f %.4f %.4f %.1f %.4f\n", shapes[i].name, shapes[i].m,
             shapes[i].n, shapes[i].k, held, t_all, t_margin, t_idle, t_copy, t_margin / t_all, t_idle / t_all,
             t_copy / t_all, (double)sms / (sms - held), t_nomargin, t_nomargin / t_all);
      gemm_free(&margin);
    }
    gemm_free(&all);
  }
  cublasLtDestroy(lt);
  CK(cudaFree(stop_dev));
  CK(cudaFreeHost(one_host));
  return 0;
}
