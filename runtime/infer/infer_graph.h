/* infer_graph.h — a decode step as one CUDA graph launch.
 *
 * The step's ~12 kernels a layer (norms, GEMMs, RoPE/cache scatter, decode
 * attention, residual adds, the head and arg max) are captured from the
 * model's stream into a graph and launched as one. The position and the KV
 * length change every step, so each step is captured again and the
 * executable graph updated in place (cudaGraphExecUpdate: the same kernels
 * with new parameters); the first step, or one whose update is refused,
 * instantiates it. The kernels are those of infer_forward(): a graph step
 * computes what an eager step computes. TP 1 only (the TP collectives stay
 * outside graphs). */
#ifndef INFER_GRAPH_H
#define INFER_GRAPH_H

#include "infer_model.h"
#include "ts_error.h"

typedef struct {
  cudaGraphExec_t exec;     /* NULL until the first step */
  int instantiations, updates;
} infer_graph;

/* infer_forward(m, m->tok, 1, pos) as one graph launch on m->stream. */
int infer_decode_graph_step(infer_model *m, long long pos, infer_graph *g, ts_err *e);
void infer_graph_free(infer_graph *g);

#endif
