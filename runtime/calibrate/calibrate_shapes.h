/* calibrate_shapes.h — what `tacorun calibrate` measures, derived from the model zoo.
 *
 * Plain C (no CUDA), so the CPU tests check the enumeration. For every model,
 * tensor-parallel degree and token count, the layer and output ops of
 * models/model.h give:
 *   - GEMMs: forward (m, n, k), dgrad (m, k, n) and wgrad (k, n, m) — the
 *     keys the simulator looks up — each with the exec_gemm.h layout and
 *     output type the executor runs that product with, deduplicated by
 *     (m, n, k) and accumulation (first layout kept): a key that is a weight
 *     gradient (FP32 C) of one layer and a forward or input-gradient product
 *     (BF16 C) of another is there twice, once each way;
 *   - FP8 GEMMs (gemm_fp8): the same three keys of every linear layer FP8
 *     training runs in FP8 (plan_fp8_linear: qkv, attn_out, fc1, fc2; not the
 *     logits, the router or grouped experts), once per (m, n, k), with the
 *     roles that use each;
 *   - attention cores: (micro-batch, heads / tp, seq, head_dim), deduplicated;
 *   - memory-bound shapes: rows x cols of norms, activations, residual adds
 *     and the loss, deduplicated per op. */
#ifndef CALIBRATE_SHAPES_H
#define CALIBRATE_SHAPES_H

#include "exec_gemm.h"
#include "ts_error.h"

typedef enum { CALIB_GEMM_FWD, CALIB_GEMM_DGRAD, CALIB_GEMM_WGRAD } calib_gemm_role;

typedef struct {
  long long m, n, k;        /* the simulator's key: C[m x n], inner k */
  exec_gemm_layout layout;  /* how the executor runs it */
  int swap_mn;              /* the executor runs it as C[n x m] (the logits' weight gradient) */
  calib_gemm_role role;
} calib_gemm_shape;

/* An FP8 GEMM key: C[m x n] = A[m x k] . B[n x k]^T with E4M3 A and B scaled per tensor and a BF16 C,
 * the one layout Hopper's FP8 tensor cores take (cuBLASLt's "TN"); Transformer Engine runs a linear
 * layer's forward, data-gradient and weight-gradient GEMMs all this way, on FP8 copies of X, W and dY
 * in both orientations (runtime/ops/exec_gemm_fp8.h). */
typedef struct {
  long long m, n, k;
  unsigned roles; /* bit 1 << calib_gemm_role of every product that is this key */
} calib_gemm_fp8_shape;

typedef struct {
  long long bh; /* independent (batch, head) matrices: batch * heads */
  int batch, heads; /* micro-batch, heads on one rank (the executor's loop and batch) */
  int seq, head_dim;
  int kv_heads; /* key/value heads on one rank (= heads: multi-head) */
} calib_attn_shape;

typedef enum {
  CALIB_MEM_LAYERNORM, /* rows = tokens, cols = hidden */
  CALIB_MEM_RMSNORM,
  CALIB_MEM_GELU,      /* rows = tokens, cols = ffn / tp */
  CALIB_MEM_SWIGLU,
  CALIB_MEM_ADD,       /* rows = tokens, cols = hidden */
  CALIB_MEM_LOSS,      /* rows = tokens, cols = vocab / tp */
  CALIB_MEM_EMBEDDING, /* rows = tokens, cols = hidden (gather from vocab / tp rows) */
  CALIB_MEM_BIAS,      /* rows = tokens, cols = the biased GEMM's output columns (models with biases) */
  CALIB_MEM_ROPE,      /* rows = tokens, cols = (heads + kv_heads) / tp x head_dim (RoPE models) */
  CALIB_MEM_KINDS
} calib_mem_kind;

typedef struct {
  calib_mem_kind kind;
  long long rows;
  int cols;
  int head_dim; /* CALIB_MEM_ROPE: the rotated heads' dimension; 0 for the other kinds */
} calib_mem_shape;

typedef struct {
  int tp[8], n_tp;
  long long tokens[8]; /* micro_batch * seq of a GEMM */
  int n_tokens;
  int seq;             /* longest sequence for the GEMM token counts (seq = gcd(tokens, this)) */
  int attn_seq[4], n_attn_seq; /* sequence lengths of the attention sweep */
  long long attn_max_tokens;   /* attention: micro_batch * seq at most this */
} calib_sweep;

typedef struct {
  calib_gemm_shape *gemm;
  int n_gemm, cap_gemm;
  calib_gemm_fp8_shape *gemm_fp8;
  int n_gemm_fp8, cap_gemm_fp8;
  calib_attn_shape *attn;
  int n_attn, cap_attn;
  calib_mem_shape *mem;
  int n_mem, cap_mem;
  int models; /* models that contributed */
} calib_shapes;

/* The default sweep: TP 1, 2, 4, 8; tokens 1024 .. 8192 in steps of 1.5x or
 * less (1024, 1536, 2048, 3072, 4096, 6144, 8192), sequences up to 2048;
 * attention at seq 2048, 4096, 8192 up to 8192 tokens. */
void calib_sweep_default(calib_sweep *s);

/* Adds the shapes of one model (skipping TP degrees and token counts the
 * model cannot take, e.g. TP not dividing its heads, seq above max_seq). */
int calib_shapes_add_model(calib_shapes *sh, const char *model_name, const calib_sweep *sw, ts_err *e);
/* models: "all" (every *.json in the zoo folder) or a comma-separated list of names. */
int calib_shapes_build(calib_shapes *sh, const char *models, const char *zoo_dir, const calib_sweep *sw, ts_err *e);
void calib_shapes_free(calib_shapes *sh);
/* An FP8 key once per (m, n, k), its roles joined (calibrate_fp8.c chooses the accumulation by them). */
int calib_shapes_add_gemm_fp8(calib_shapes *sh, long long m, long long n, long long k, calib_gemm_role role,
                              ts_err *e);
/* The other entry of shape i's (m, n, k), timed in the other accumulation
 * class (add_gemm), or -1. */
int calib_shapes_twin(const calib_shapes *sh, int i);

const char *calib_mem_kind_name(calib_mem_kind k);

/* Sum of 2mnk over the GEMMs (for time estimates). */
double calib_shapes_gemm_flops(const calib_shapes *sh);
/* The same over the FP8 GEMM keys. */
double calib_shapes_gemm_fp8_flops(const calib_shapes *sh);

#endif
