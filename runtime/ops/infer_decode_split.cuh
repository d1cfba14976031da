/* infer_decode_split.cuh — the ends of the split decode attention blocks, CUDA only.
 * What v1 (infer_kernels.cu) and v2 (infer_decode.cu) share: the end of a block whose W warps each hold
 * an online-softmax state (base 2: max m, sum l, output acc of E values a lane)
 * per query head over their own positions, merged through shared memory into
 * the block's FP32 partial (max, sum, output[D]) of each of its G query heads
 * for its split; and the kernel that combines the splits' partials into the
 * BF16 output. And v3 / v5's warp merge (decode3_merge_warps), which
 * dev/decode_attn_fp8's variants share. */
#ifndef INFER_DECODE_SPLIT_CUH
#define INFER_DECODE_SPLIT_CUH

#include <cuda_bf16.h>
#include <math.h>

/* part [batch x hl x nsplit x (D + 2)]: (max, sum, output[D]) of query head j G + i of sequence b, split
 * `split`; the block is (split, KV head j, sequence b). */
template <int W, int G, int D, int E>
__device__ __forceinline__ void decode_warps_to_partial(const float (&m)[G], const float (&l)[G],
                                                        const float (&acc)[G][E], int warp, int lane, int b, int j,
                                                        int hl, int split, int nsplit, float *part) {
  __shared__ float sm_m[W][G], sm_l[W][G], sm_acc[W][G][D];
#pragma unroll
  for (int i = 0; i < G; i++) {
    if (lane == 0) sm_m[warp][i] = m[i], sm_l[warp][i] = l[i];
#pragma unroll
    for (int x = 0; x < E; x++) sm_acc[warp][i][lane * E + x] = acc[i][x];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int i = idx / D, dd = idx % D;
    float M = -INFINITY;
    for (int w = 0; w < W; w++) M = fmaxf(M, sm_m[w][i]);
    float L = 0.f, A = 0.f;
    for (int w = 0; w < W; w++) {
      const float f = sm_m[w][i] == -INFINITY ? 0.f : exp2f(sm_m[w][i] - M);
      L += sm_l[w][i] * f, A += sm_acc[w][i][dd] * f;
    }
    float *pp = part + (((long long)b * hl + j * G + i) * nsplit + split) * (D + 2);
    if (dd == 0) pp[0] = M, pp[1] = L;
    pp[2 + dd] = A;
  }
}

/* One block a (sequence, query head) row bh of part, D threads: out[bh][:] = the splits' outputs weighted by
 * 2^(max - overall max), over their weighted sums. */
static __global__ void decode_combine_kernel(const float *part, __nv_bfloat16 *out, int nsplit, int D) {
  const long long bh = blockIdx.x; /* b * hl + h */
  const float *pp = part + bh * nsplit * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < nsplit; s++) M = fmaxf(M, pp[s * (D + 2)]);
  for (int dd = threadIdx.x; dd < D; dd += blockDim.x) {
    float L = 0.f, A = 0.f;
    for (int s = 0; s < nsplit; s++) {
      const float *q = pp + s * (D + 2);
      const float f = q[0] == -INFINITY ? 0.f : exp2f(q[0] - M);
      L += q[1] * f, A += q[2 + dd] * f;
    }
    out[bh * D + dd] = __float2bfloat16(A / L);
  }
}

/* The end of a v3 / v5 block (and of dev/decode_attn_fp8's variants) of W warps: its warps' (max, value max,
 * sum, output) per query head, in shared memory rows 0..g-1, merged; each head's output written (one split) or
 * its split's partial (output at the scores' max: an FP8 cache's value weights kept a max of their own, SCALED;
 * max, sum). */
template <int W, int D, int R, bool SCALED>
__device__ __forceinline__ void decode3_merge_warps(const float (&sm_m)[W][R], const float (&sm_mv)[W][R],
                                                    const float (&sm_l)[W][R],
                                                    const float (&sm_acc)[W][R][D], int g, int b, int j,
                                                    int hl, int split, int nsplit, float *part, __nv_bfloat16 *out) {
  for (int idx = threadIdx.x; idx < g * D; idx += blockDim.x) {
    const int i = idx / D, dd = idx % D;
    float M = -INFINITY, MV = -INFINITY;
    for (int w = 0; w < W; w++) M = fmaxf(M, sm_m[w][i]), MV = fmaxf(MV, sm_mv[w][i]);
    float L = 0.f, A = 0.f;
    for (int w = 0; w < W; w++) {
      L += sm_m[w][i] == -INFINITY ? 0.f : sm_l[w][i] * exp2f(sm_m[w][i] - M);
      A += sm_mv[w][i] == -INFINITY ? 0.f : sm_acc[w][i][dd] * exp2f(sm_mv[w][i] - MV);
    }
    if (SCALED) A *= MV == -INFINITY ? 0.f : exp2f(MV - M); /* to the scores' max, as v2's partials */
    const long long bh = (long long)b * hl + j * g + i;
    if (nsplit == 1) {
      out[bh * D + dd] = __float2bfloat16(A / L);
    } else { /* partials: outputs [b hl x nsplit x D], then (max, sum) [b hl x nsplit x 2] */
      part[(bh * nsplit + split) * D + dd] = A;
      if (dd == 0) {
        float *ml = part + (long long)gridDim.z * hl * nsplit * D + (bh * nsplit + split) * 2;
        ml[0] = M, ml[1] = L;
      }
    }
  }
}

#endif
