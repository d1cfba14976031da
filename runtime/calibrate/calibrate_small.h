/* calibrate_small.h — the small kernels of a decode step at decode sizes
 * (`tacorun calibrate-infer --small-only`): RMSNorm, residual add, SwiGLU,
 * embedding, the RoPE + KV-cache scatter of the decode step
 * (infer_rope_scatter), the greedy sampling over the step's gathered logits
 * (infer_argmax), the QKV bias pass (rt_bias_add, models with a QKV bias) and the TACO codec kernels of 4 .. 128 KiB blocks,
 * each timed two ways, GPU time per launch of 100 launches behind a 2 ms
 * spin kernel (the host is ahead of the GPU), median of 5:
 *   "<table>.eager"  queued back to back on a stream, as an eager decode
 *                    step runs them;
 *   "<table>.graph"  the 100 launches captured in one CUDA graph, replayed.
 * Tables rmsnorm_fwd, add_fwd, swiglu_fwd, embedding_fwd, rope_scatter_fwd (keyed by
 * the bytes the simulator's model op moves: models/model_layer.c; group: the
 * row width, hidden, ffn / tp or (heads + kv heads) / tp x head_dim, since a
 * row's time depends on it), argmax (the BF16 logits read, batch x vocabulary;
 * group: tp x the vocabulary words a GPU holds) and taco_encode, taco_decode,
 * taco_decode_sum_encode (the BF16 bytes of one block, group G), bias_fwd (4 B an output element, group: the
 * qkv GEMM's output width a GPU). Shapes: batch 1..64 x every GQA zoo model's hidden,
 * ffn / tp and heads / tp at TP 1/2/4/8. Only the inference simulator's decode
 * step reads them (sim/sim_infer_cal.c). Prints one "small" line per point on
 * standard output. */
#ifndef CALIBRATE_SMALL_H
#define CALIBRATE_SMALL_H

#include "calibration.h"
#include "model.h"
#include "ts_error.h"

int calib_small_kernels(schema_calibration *cal, const model_config *models, int nm, ts_err *e);

#endif
