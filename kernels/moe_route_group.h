/* moe_route_group.h — DeepSeek-V3's router on one GPU (DeepSeek-V3 Technical
 * Report, arXiv 2412.19437, section 2.1.2; Megatron-Core's sigmoid score
 * function with group-limited top-k, the top-k scaling factor and the expert
 * bias): the forward routing, its backward to the router logits, and the
 * aux-loss-free bias update. The permutation and combine around it are
 * moe_route.h's, unchanged.
 *
 * Tokens t, experts E (<= MOE_ROUTE_MAX_E), top k (<= MOE_ROUTE_MAX_K),
 * groups G (0: none; else dividing E, <= MOE_GROUP_MAX), kept groups gk.
 *
 *   sigmoid:   s = 1 / (1 + expf(-x)) element-wise (FP32; s may be x, in
 *              place). CUDA's expf is within 2 ulp, glibc's within 1: the
 *              kernel matches the reference to 1e-6 relative, not bit for bit.
 *   topk_group: s float [t x E], bias float [E] (NULL: zeros) -> idx int32
 *              [t x k], w float [t x k], sel float [t x k]. Per token:
 *              v_e = s_e + b_e (the choice only); with groups, group g holds
 *              experts g E/G .. (g+1) E/G - 1, its score is the sum of its
 *              n = k / gk largest v (from 0, largest first), the gk best
 *              groups are kept (ties: the lower group); then the k largest v
 *              among the kept groups' experts in descending order (ties: the
 *              lower expert). sel_j = s of choice j (without b); S = sel_0 +
 *              ... + sel_{k-1} (from 0, in order); w_j = (sel_j / (S + 1e-20))
 *              * scale when k > 1, sel_j * scale when k = 1 (Megatron-Core's
 *              normalisation, then routed_scaling_factor). Bits equal to the
 *              reference (only compares, adds, one division and one product).
 *   topk_group_bwd: dw float [t x k] (the gradient of w) -> dlogits bf16
 *              [t x E]: with S' = S + 1e-20, p_j = sel_j / S' and d = sum_j
 *              p_j dw_j (fmaf from 0, j = 0..k-1): g_j = scale (dw_j - d) / S'
 *              (k > 1; k = 1: scale dw_1), dlogits[idx_j] = bf16(g_j (sel_j (1
 *              - sel_j))), 0 elsewhere (the bias and the choice carry no
 *              gradient). Bits equal to the reference.
 *   bias_update: load int32 [rows x E] (tokens routed to each expert since the
 *              last update, summed over the data-parallel ranks), bias float
 *              [rows x E]: b_e += rate * sign(mean - load_e), mean = the row's
 *              sum / E (compared exactly: sign(sum - E load_e)); Megatron-Core's
 *              get_updated_expert_bias. Bits equal to the reference.
 *
 * moe_*_ref (moe_route_group_ref.c) are the plain-C references, always built;
 * the kernels (moe_route_group.cu) return a cudaError_t as int (0: launched). */
#ifndef MOE_ROUTE_GROUP_H
#define MOE_ROUTE_GROUP_H

#include <stdint.h>

#include "moe_route.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_GROUP_MAX 32

typedef struct {
  int groups, group_topk; /* groups 0: no group limit */
  float scale;            /* routed_scaling_factor (1: none) */
} moe_group_route;

/* 0 when (E, k, g) is a routing the kernels take, else -1. */
int moe_group_route_valid(int E, int k, const moe_group_route *g);

void moe_sigmoid_ref(const float *x, long long n, float *s);
void moe_topk_group_ref(const float *s, const float *bias, int t, int E, int k, const moe_group_route *g,
                        int32_t *idx, float *w, float *sel);
void moe_topk_group_bwd_ref(const int32_t *idx, const float *sel, const float *dw, int t, int E, int k, float scale,
                            uint16_t *dlogits);
void moe_bias_update_ref(const int32_t *load, float *bias, int rows, int E, float rate);

int moe_sigmoid(const float *x, long long n, float *s, void *stream);
int moe_topk_group(const float *s, const float *bias, int t, int E, int k, const moe_group_route *g, int32_t *idx,
                   float *w, float *sel, void *stream);
int moe_topk_group_bwd(const int32_t *idx, const float *sel, const float *dw, int t, int E, int k, float scale,
                       uint16_t *dlogits, void *stream);
int moe_bias_update(const int32_t *load, float *bias, int rows, int E, float rate, void *stream);

#ifdef __cplusplus
}
#endif

#endif
