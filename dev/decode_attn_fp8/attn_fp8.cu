/* attn_fp8.cu — decode attention over the FP8 KV cache, positions as the mma's rows
 * (attn_fp8.h; README.md beside this says why).
 *
 * Block (split, KV head j, sequence b) of 4 warps; warp w takes the 16-position tiles
 * t0 = p0 + 16 w, + 64, ... of its split, the next tile's loads in flight in registers
 * while it computes the one in hand. Lane (r = lane / 4, c = lane % 4):
 *  - S^T = K Q^T, m16n8k16 (FP16 in, FP32 sums): A = 16 positions x 16 dims of K, B = Q^T
 *    (16 dims x the G query heads as columns, zero past G). The lane loads 32 bytes of
 *    the K rows t0 + r and t0 + 8 + r (16-byte words 64 i + 16 c, the quad's four side by
 *    side: v3's order), converts them to FP16 pairs (one cvt a pair) and k-step s takes
 *    its words 2s, 2s+1 as A's k slots; Q's B fragments hold the same dims. 8 mma a tile.
 *    S^T's C fragment gives the lane positions r, r + 8 x heads 2c, 2c + 1.
 *  - the online softmax (base 2) per head: each score times qscale and its key's scale;
 *    a head's max over the tile by 3 shuffles across the 8 lanes of equal c; as in v3 the
 *    value weights 2^(s + log2 vs - mv) keep a running max mv of their own (in [0, 1], so
 *    FP16 holds them) and the sum of weights l keeps the scores' max m.
 *  - O^T = V^T P^T, m16n8k16: A = 16 dims x 16 positions of V^T, B = P^T (16 positions x
 *    8 heads). The lane loads 16 bytes (dims 16 r .. 16 r + 15) of the V rows t0 + 2c,
 *    2c + 1, 2c + 8, 2c + 9 (the 8 lanes of equal c read a whole 128-byte row), and one
 *    byte permute of two rows' words puts the codes of positions 2c, 2c + 1 of one dim side
 *    by side, so that one cvt gives an A register: no movmatrix for V. m-tile t takes dims
 *    16 r + 2t (row r) and 16 r + 2t + 1 (row r + 8). P^T's B fragment is S^T's C fragment
 *    transposed: two movmatrix. 8 mma a tile.
 * The warps merge through shared memory into v3's partials (output at the scores' max;
 * max, sum), combined by a copy of v3's combine kernel; one split writes the output. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_fp8.h"
#include "gpu_check.h"
#include "infer_decode_split.cuh"

typedef __nv_bfloat16 bf16;

#define AF_WARPS 4
#define AF_TILE 16
#define AF_D 128

static int af_sm_count(void) {
  static int sms;
  if (!sms) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        sms < 1)
      sms = 132;
  }
  return sms;
}

/* Positions per block: v3's rule (about 8 blocks an SM, whole rounds of the warps' tiles). */
static long long af_chunk(const infer_attn_dims *a, long long len) {
  const long long step = (long long)AF_WARPS * AF_TILE;
  long long units = (long long)a->batch * a->kvl, want = (8LL * af_sm_count() + units - 1) / units;
  long long chunk = (len + want - 1) / want;
  chunk = (chunk + step - 1) / step * step;
  return chunk < step ? step : chunk;
}

extern "C" size_t dev_attn_fp8_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk = af_chunk(a, len), nsplit = (len + chunk - 1) / chunk;
  return (size_t)a->batch * a->hl * nsplit * (a->head_dim + 2) * sizeof(float);
}

__device__ __forceinline__ void mma_f16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t movtrans(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
/* The two E4M3 codes in the low 16 bits of x -> an FP16 pair (low code in the low half; exact). */
__device__ __forceinline__ uint32_t cvt_lo(uint32_t x) {
  uint32_t y;
  asm("{.reg .b16 t; cvt.u16.u32 t, %1; cvt.rn.f16x2.e4m3x2 %0, t;}" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ uint32_t cvt_hi(uint32_t x) {
  uint32_t y;
  asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(y) : "r"(x));
  return y;
}
/* The same conversion by integer ops (ALU true), off the conversion unit: E4M3 bits
 * s eeee mmm -> FP16 bits s 0eeee mmm 0000000 is the value times 2^-8 for every finite code,
 * subnormals included (both formats put the binary point alike; the biases differ by 8).
 * `even` takes codes 0 and 2 of x (low, high half), `odd` codes 1 and 3. */
__device__ __forceinline__ uint32_t alu_even(uint32_t x) { return ((x << 7) & 0x3f803f80u) | ((x << 8) & 0x80008000u); }
__device__ __forceinline__ uint32_t alu_odd(uint32_t x) { return ((x >> 1) & 0x3f803f80u) | (x & 0x80008000u); }
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t y;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(y) : "r"(a), "r"(b), "r"(sel));
  return y;
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

/* One tile as a lane loads it: K rows r, 8 + r (two 16-byte words each), V rows 2c, 2c + 1,
 * 2c + 8, 2c + 9 (one 16-byte word each), the key and value scales of positions r, 8 + r. */
struct af_tile {
  uint4 k[2][2], v[4];
  float ks[2], vs[2];
};
struct af_state {
  float acc[8][4]; /* O^T's C fragments: m-tile t, dims 16 r + 2t (+1) x heads 2c, 2c + 1 */
  float m[2], mv[2], l[2]; /* per head 2c + h */
};

__device__ __forceinline__ void af_load(const uint8_t *kb, const uint8_t *vb, const float *ks, const float *vs,
                                        long long t0, long long p1, int r, int c, af_tile &t) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long p = t0 + 8 * h + r;
    const bool ok = p < p1;
#pragma unroll
    for (int i = 0; i < 2; i++)
      t.k[h][i] = ok ? __ldg((const uint4 *)(kb + p * AF_D + 64 * i + 16 * c)) : make_uint4(0, 0, 0, 0);
    t.ks[h] = ok ? __ldg(ks + p) : 1.f;
    t.vs[h] = ok ? __ldg(vs + p) : 1.f;
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const long long p = t0 + 2 * c + (i & 1) + 8 * (i >> 1);
    t.v[i] = p < p1 ? __ldg((const uint4 *)(vb + p * AF_D + 16 * r)) : make_uint4(0, 0, 0, 0);
  }
}

template <bool ALU>
__device__ __forceinline__ void af_step(const uint32_t (&qb)[8][2], const af_tile &tl, long long t0, long long p1,
                                        int r, float qscale, af_state &st) {
  /* S^T = K Q^T: rows r (h 0) and 8 + r (h 1) */
  float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const uint32_t x0[4] = {tl.k[0][i].x, tl.k[0][i].y, tl.k[0][i].z, tl.k[0][i].w};
    const uint32_t x1[4] = {tl.k[1][i].x, tl.k[1][i].y, tl.k[1][i].z, tl.k[1][i].w};
#pragma unroll
    for (int w = 0; w < 4; w++) /* word w of 16-byte word i: 4 codes = k-step 4 i + w's two A words */
      if (ALU) /* dims (+0, +2) and (+1, +3): Q's fragments follow */
        mma_f16(s, alu_even(x0[w]), alu_even(x1[w]), alu_odd(x0[w]), alu_odd(x1[w]), qb[4 * i + w][0], qb[4 * i + w][1]);
      else
        mma_f16(s, cvt_lo(x0[w]), cvt_lo(x1[w]), cvt_hi(x0[w]), cvt_hi(x1[w]), qb[4 * i + w][0], qb[4 * i + w][1]);
  }
  /* scores sc[pos h][head e], log2 of the value scales */
  float sc[2][2], lv[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const bool ok = t0 + 8 * h + r < p1;
    const float f = qscale * tl.ks[h];
    lv[h] = ok ? __log2f(tl.vs[h]) : 0.f;
    sc[h][0] = ok ? s[2 * h] * f : -INFINITY;
    sc[h][1] = ok ? s[2 * h + 1] * f : -INFINITY;
  }
  float pw[2][2];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    float tm = fmaxf(sc[0][e], sc[1][e]), tv = fmaxf(sc[0][e] + lv[0], sc[1][e] + lv[1]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
      tv = fmaxf(tv, __shfl_xor_sync(0xffffffffu, tv, o));
    }
    const float mn = fmaxf(st.m[e], tm), mref = mn == -INFINITY ? 0.f : mn;
    const float vn = fmaxf(st.mv[e], tv), vref = vn == -INFINITY ? 0.f : vn;
    const float corr = exp2f(st.m[e] - mref), vcorr = exp2f(st.mv[e] - vref);
    const float pe0 = exp2f(sc[0][e] - mref), pe1 = exp2f(sc[1][e] - mref);
    pw[0][e] = exp2f(sc[0][e] + lv[0] - vref), pw[1][e] = exp2f(sc[1][e] + lv[1] - vref);
    st.l[e] = st.l[e] * corr + (pe0 + pe1);
    st.m[e] = mn, st.mv[e] = vn;
#pragma unroll
    for (int t = 0; t < 8; t++) st.acc[t][e] *= vcorr, st.acc[t][2 + e] *= vcorr;
  }
  /* P^T's B fragment: positions 2c, 2c + 1 (b0) and 2c + 8, 2c + 9 (b1) of head r */
  const uint32_t b0 = movtrans(pack_f16(pw[0][0], pw[0][1])), b1 = movtrans(pack_f16(pw[1][0], pw[1][1]));
  /* O^T += V^T P^T: V words of positions (2c, 2c + 1) and (2c + 8, 2c + 9) interleaved by byte */
  const uint32_t v0[4] = {tl.v[0].x, tl.v[0].y, tl.v[0].z, tl.v[0].w}, v1[4] = {tl.v[1].x, tl.v[1].y, tl.v[1].z, tl.v[1].w},
                 v2[4] = {tl.v[2].x, tl.v[2].y, tl.v[2].z, tl.v[2].w}, v3[4] = {tl.v[3].x, tl.v[3].y, tl.v[3].z, tl.v[3].w};
#pragma unroll
  for (int w = 0; w < 4; w++) { /* dims 16 r + 4 w .. + 3: m-tiles 2w (dims +0, +1) and 2w + 1 (+2, +3) */
    if (ALU) { /* bytes (x1 x0 of dims +0 +1 of rows 2c: y of 2c + 1) as [y1 y0 x1 x0]: even = dim +0, odd = +1 */
      const uint32_t lo01 = prmt(v0[w], v1[w], 0x5410), hi01 = prmt(v0[w], v1[w], 0x7632);
      const uint32_t lo89 = prmt(v2[w], v3[w], 0x5410), hi89 = prmt(v2[w], v3[w], 0x7632);
      mma_f16(st.acc[2 * w], alu_even(lo01), alu_odd(lo01), alu_even(lo89), alu_odd(lo89), b0, b1);
      mma_f16(st.acc[2 * w + 1], alu_even(hi01), alu_odd(hi01), alu_even(hi89), alu_odd(hi89), b0, b1);
      continue;
    }
    const uint32_t lo01 = prmt(v0[w], v1[w], 0x5140), hi01 = prmt(v0[w], v1[w], 0x7362);
    const uint32_t lo89 = prmt(v2[w], v3[w], 0x5140), hi89 = prmt(v2[w], v3[w], 0x7362);
    mma_f16(st.acc[2 * w], cvt_lo(lo01), cvt_hi(lo01), cvt_lo(lo89), cvt_hi(lo89), b0, b1);
    mma_f16(st.acc[2 * w + 1], cvt_lo(hi01), cvt_hi(hi01), cvt_lo(hi89), cvt_hi(hi89), b0, b1);
  }
}

/* PIPE: the next tile's loads in flight in registers (two buffers, 3 blocks an SM); else one
 * buffer, each tile loaded then computed, 4 blocks an SM (more warps in flight instead). */
template <int G, bool ALU, bool PIPE>
__global__ void __launch_bounds__(AF_WARPS * 32, PIPE ? 3 : 4)
    af_kernel(const bf16 *q, const uint8_t *kc, const uint8_t *vc, const float *ksc, const float *vsc, float *part,
              bf16 *out, int hl, int kvl, long long max_seq, long long len, long long chunk, int nsplit, float qscale) {
  constexpr long long STRIDE = AF_WARPS * AF_TILE;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = lane >> 2, c = lane & 3;
  const long long srow = ((long long)b * kvl + j) * max_seq;
  const uint8_t *kb = kc + srow * AF_D, *vb = vc + srow * AF_D;
  const float *ks = ksc + srow, *vs = vsc + srow;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  long long t0 = p0 + (long long)warp * AF_TILE;
  af_tile ta, tb;
  if (PIPE) af_load(kb, vb, ks, vs, t0, p1, r, c, ta); /* in flight while Q is read */
  /* Q^T's B fragments: head j G + r (zero past G); k-step s = 4 i + w holds the dims of K's
   * word w of 16-byte word i, codes 4 w .. 4 w + 3 of dims 64 i + 16 c: (+0, +1) in b0, (+2, +3) in b1 */
  uint32_t qb[8][2];
  {
    const bf16 *src = q + ((long long)b * hl + j * G + r) * AF_D;
#pragma unroll
    for (int s = 0; s < 8; s++)
#pragma unroll
      for (int x = 0; x < 2; x++) {
        const int dim = 64 * (s >> 2) + 16 * c + 4 * (s & 3) + (ALU ? x : 2 * x), step = ALU ? 2 : 1;
        float f0 = 0.f, f1 = 0.f;
        if (r < G) f0 = __bfloat162float(src[dim]), f1 = __bfloat162float(src[dim + step]);
        qb[s][x] = pack_f16(f0, f1);
      }
  }
  af_state st;
#pragma unroll
  for (int t = 0; t < 8; t++) st.acc[t][0] = st.acc[t][1] = st.acc[t][2] = st.acc[t][3] = 0.f;
#pragma unroll
  for (int e = 0; e < 2; e++) st.m[e] = st.mv[e] = -INFINITY, st.l[e] = 0.f;
  while (!PIPE && t0 < p1) {
    af_load(kb, vb, ks, vs, t0, p1, r, c, ta);
    af_step<ALU>(qb, ta, t0, p1, r, qscale, st);
    t0 += STRIDE;
  }
  while (PIPE && t0 < p1) { /* two buffers by name (a register array indexed at run time would go to local memory) */
    af_load(kb, vb, ks, vs, t0 + STRIDE, p1, r, c, tb);
    af_step<ALU>(qb, ta, t0, p1, r, qscale, st);
    t0 += STRIDE;
    if (t0 >= p1) break;
    af_load(kb, vb, ks, vs, t0 + STRIDE, p1, r, c, ta);
    af_step<ALU>(qb, tb, t0, p1, r, qscale, st);
    t0 += STRIDE;
  }
  /* the sums over the 8 lanes of equal c; then the warps through shared memory */
#pragma unroll
  for (int e = 0; e < 2; e++)
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) st.l[e] += __shfl_xor_sync(0xffffffffu, st.l[e], o);
  const float vfix = ALU ? 256.f : 1.f; /* the integer conversion's 2^-8 on V (K's is in qscale) */
  __shared__ float sm_m[AF_WARPS][8], sm_mv[AF_WARPS][8], sm_l[AF_WARPS][8], sm_acc[AF_WARPS][8][AF_D];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int head = 2 * c + e;
    if (head < G) {
      if (r == 0) sm_m[warp][head] = st.m[e], sm_mv[warp][head] = st.mv[e], sm_l[warp][head] = st.l[e];
#pragma unroll
      for (int t = 0; t < 8; t++) {
        sm_acc[warp][head][16 * r + 2 * t] = st.acc[t][e] * vfix;
        sm_acc[warp][head][16 * r + 2 * t + 1] = st.acc[t][2 + e] * vfix;
      }
    }
  }
  __syncthreads();
  decode3_merge_warps<AF_WARPS, AF_D, 8, true>(sm_m, sm_mv, sm_l, sm_acc, G, b, j, hl, split, nsplit, part, out);
}

/* v3's combine (runtime/ops/infer_decode.cu, decode3_combine_kernel), copied for head_dim 128. */
__device__ __forceinline__ float af_block_reduce(float v, bool is_max, float *red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); w++) v = is_max ? fmaxf(v, red[w]) : v + red[w];
  return v;
}

#define AF_COMBINE_THREADS 128

__global__ void __launch_bounds__(AF_COMBINE_THREADS) af_combine_kernel(const float *part, bf16 *out, int nsplit,
                                                                        long long rows) {
  constexpr int TPR = AF_D / 4, GROUPS = AF_COMBINE_THREADS / TPR;
  __shared__ float red[32];
  __shared__ float4 sacc[GROUPS][TPR];
  const long long bh = blockIdx.x;
  const float *pa = part + bh * nsplit * AF_D, *ml = part + rows * nsplit * AF_D + bh * nsplit * 2;
  float M = -INFINITY, L = 0.f;
  for (int s = threadIdx.x; s < nsplit; s += blockDim.x) M = fmaxf(M, ml[2 * s]);
  M = af_block_reduce(M, true, red);
  for (int s = threadIdx.x; s < nsplit; s += blockDim.x)
    L += ml[2 * s] == -INFINITY ? 0.f : ml[2 * s + 1] * exp2f(ml[2 * s] - M);
  L = af_block_reduce(L, false, red);
  const int g = threadIdx.x / TPR, x = threadIdx.x % TPR;
  float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int s = g; s < nsplit; s += GROUPS) {
    const float m = ml[2 * s], f = m == -INFINITY ? 0.f : exp2f(m - M);
    const float4 v = *(const float4 *)(pa + (long long)s * AF_D + 4 * x);
    A.x += v.x * f, A.y += v.y * f, A.z += v.z * f, A.w += v.w * f;
  }
  sacc[g][x] = A;
  __syncthreads();
  if (g == 0) {
    for (int k = 1; k < GROUPS; k++) {
      const float4 v = sacc[k][x];
      A.x += v.x, A.y += v.y, A.z += v.z, A.w += v.w;
    }
    const float inv = 1.f / L;
    __nv_bfloat162 *o = (__nv_bfloat162 *)(out + bh * AF_D + 4 * x);
    o[0] = __floats2bfloat162_rn(A.x * inv, A.y * inv);
    o[1] = __floats2bfloat162_rn(A.z * inv, A.w * inv);
  }
}

static int af_run(bool alu, bool pipe, const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                  long long len, void *stream, ts_err *e) {
  if (!c || !c->k || !c->v || !c->ks || !c->vs) return ts_fail_sys(e, "dev_attn_fp8%s: the FP8 cache or its scales are missing", alu ? "_alu" : "");
  if (a->kvl < 1 || a->hl % a->kvl || len < 1 || len > a->max_seq)
    return ts_fail_sys(e, "dev_attn_fp8%s: bad shape (heads %d, kv heads %d, len %lld, max_seq %lld)", alu ? "_alu" : "", a->hl, a->kvl, len,
                       a->max_seq);
  const int G = a->hl / a->kvl;
  if (a->head_dim != AF_D || (G != 4 && G != 8))
    return ts_fail_sys(e, "dev_attn_fp8%s: head_dim %d with %d query heads per KV head is not built (head_dim 128 with 4 or 8)", alu ? "_alu" : "",
                       a->head_dim, G);
  const long long chunk = af_chunk(a, len);
  const int nsplit = (int)((len + chunk - 1) / chunk);
  const dim3 grid((unsigned)nsplit, (unsigned)a->kvl, (unsigned)a->batch);
  const cudaStream_t st = (cudaStream_t)stream;
  const float qscale = (float)(1.4426950408889634 / sqrt((double)AF_D)) * (alu ? 256.f : 1.f); /* base 2 */
  const bf16 *qq = (const bf16 *)q;
#define AF_LAUNCH(g_, alu_, pipe_)                                                                                   \
  af_kernel<g_, alu_, pipe_><<<grid, AF_WARPS * 32, 0, st>>>(qq, (const uint8_t *)c->k, (const uint8_t *)c->v, c->ks, c->vs, \
                                                      (float *)partial, (bf16 *)out, a->hl, a->kvl, a->max_seq, len,  \
                                                      chunk, nsplit, qscale)
  if (G == 4 && alu) AF_LAUNCH(4, true, true);
  else if (G == 4 && pipe) AF_LAUNCH(4, false, true);
  else if (G == 4) AF_LAUNCH(4, false, false);
  else if (alu) AF_LAUNCH(8, true, true);
  else if (pipe) AF_LAUNCH(8, false, true);
  else AF_LAUNCH(8, false, false);
#undef AF_LAUNCH
  CUDA_CHECK(e, cudaGetLastError());
  if (nsplit > 1) {
    const long long rows = (long long)a->batch * a->hl;
    af_combine_kernel<<<(unsigned)rows, AF_COMBINE_THREADS, 0, st>>>((const float *)partial, (bf16 *)out, nsplit, rows);
    CUDA_CHECK(e, cudaGetLastError());
  }
  return 0;
}

extern "C" int dev_attn_fp8(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                            long long len, void *stream, ts_err *e) {
  return af_run(false, true, q, c, out, partial, a, len, stream, e);
}
extern "C" int dev_attn_fp8_alu(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                                long long len, void *stream, ts_err *e) {
  return af_run(true, true, q, c, out, partial, a, len, stream, e);
}
extern "C" int dev_attn_fp8_b4(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                               long long len, void *stream, ts_err *e) {
  return af_run(false, false, q, c, out, partial, a, len, stream, e);
}

/* ---- timing inputs ---- */

__device__ __forceinline__ uint64_t af_mix(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void af_fill_kernel(uint8_t *codes, float *scales, long long rows, int d, uint64_t seed) {
  const long long n = rows * d;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n / 8; i += (long long)gridDim.x * blockDim.x) {
    uint64_t x = af_mix(seed ^ (uint64_t)i);
    for (int k = 0; k < 8; k++) { /* 0x7f / 0xff are NaN: one step down */
      const uint8_t b = (uint8_t)(x >> (8 * k));
      x = (x & ~(0xffULL << (8 * k))) | ((uint64_t)((b & 0x7f) == 0x7f ? b - 1 : b) << (8 * k));
    }
    ((uint64_t *)codes)[i] = x;
  }
  for (long long rr = (long long)blockIdx.x * blockDim.x + threadIdx.x; rr < rows; rr += (long long)gridDim.x * blockDim.x)
    scales[rr] = ldexpf(1.f / 448.f, (int)(af_mix(seed * 3 + (uint64_t)rr) % 9) - 4);
}

extern "C" int dev_attn_fp8_fill(void *codes, float *scales, long long rows, int head_dim, unsigned long long seed,
                                 void *stream, ts_err *e) {
  if (head_dim % 8) return ts_fail_sys(e, "dev_attn_fp8_fill: head_dim %d is not a multiple of 8", head_dim);
  af_fill_kernel<<<4096, 256, 0, (cudaStream_t)stream>>>((uint8_t *)codes, scales, rows, head_dim, seed);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}
