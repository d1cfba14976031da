/* infer_rope.cuh — the rotary embedding of one pair (i, i + d/2) of a head
 * vector at position pos, as the RoPE scatter kernels apply it (BF16 cache:
 * infer_kernels.cu, FP8 cache: infer_kv8.cu). HF/Llama convention: angle
 * pos * theta^(-2i/d). Device code only. */
#ifndef INFER_ROPE_CUH
#define INFER_ROPE_CUH

__device__ __forceinline__ void infer_rope_rotate(float &x1, float &x2, long long pos, int i, int d,
                                                  float log2_theta) {
  float inv_freq = exp2f(-(2.f * i / d) * log2_theta), sn, cs;
  sincosf((float)pos * inv_freq, &sn, &cs);
  float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
  x1 = y1, x2 = y2;
}

#endif
