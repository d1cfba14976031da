/* infer_graph.c — a decode step as one CUDA graph launch (infer_graph.h). */
#include "infer_graph.h"

#include <cuda_runtime.h>

int infer_decode_graph_step(infer_model *m, long long pos, infer_graph *g, ts_err *e) {
  if (m->tp != 1) return ts_fail(e, NULL, "decode graph", "runs at TP 1 only (TP %d)", m->tp);
  cudaStream_t st = m->stream;
  cudaError_t ce = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  if (ce != cudaSuccess) return ts_fail_sys(e, "decode graph: begin capture: %s", cudaGetErrorString(ce));
  const int rc = infer_forward(m, m->tok, 1, pos, e);
  cudaGraph_t graph = NULL;
  ce = cudaStreamEndCapture(st, &graph); /* always ended, also after a failed step */
  if (rc) {
    if (graph) cudaGraphDestroy(graph);
    return -1;
  }
  if (ce != cudaSuccess) return ts_fail_sys(e, "decode graph: end capture: %s", cudaGetErrorString(ce));
  if (g->exec) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(g->exec, graph, &info) == cudaSuccess) {
      g->updates++;
    } else {
      (void)cudaGetLastError(); /* the refused update's error; instantiate instead */
      cudaGraphExecDestroy(g->exec);
      g->exec = NULL;
    }
  }
  if (!g->exec) {
    ce = cudaGraphInstantiate(&g->exec, graph, 0);
    if (ce != cudaSuccess) {
      cudaGraphDestroy(graph);
      g->exec = NULL;
      return ts_fail_sys(e, "decode graph: instantiate: %s", cudaGetErrorString(ce));
    }
    g->instantiations++;
  }
  cudaGraphDestroy(graph);
  ce = cudaGraphLaunch(g->exec, st);
  if (ce != cudaSuccess) return ts_fail_sys(e, "decode graph: launch: %s", cudaGetErrorString(ce));
  return 0;
}

void infer_graph_free(infer_graph *g) {
  if (g->exec) cudaGraphExecDestroy(g->exec);
  g->exec = NULL;
}
