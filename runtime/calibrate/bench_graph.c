/* bench_graph.c — `tacorun bench-graph`: what each kernel of the inference
 * executor's decode step costs on the GPU when it is timed alone (as the
 * calibration times it), when it runs in a stream the host keeps ahead of (as
 * the executor's eager steps run), and inside a CUDA graph (as
 * `tacorun execute --decode-graph` runs the step: infer_graph.c), and what the
 * whole step costs in the last two. The measurement is calibrate_graph.c
 * (shared with the host section of `tacorun calibrate`, which writes its graph
 * gap); this file is the command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_graph.h"
#include "model.h"
#include "ts_args.h"

int bench_graph_main(int argc, char **argv) {
  const char *model = "llama3-8b", *models_dir = NULL, *batch_s = "1,16,64", *len_s = "4096,1024,2048";
  calib_graph_opts o = calib_graph_defaults();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: tacorun bench-graph [--model NAME|FILE (llama3-8b)] [--models DIR] [--batch LIST (1,16,64)]\n"
             "         [--len LIST (4096,1024,2048: one KV length per batch)] [--layers N (32)] [--reps N (5)]\n"
             "         [--spin-us US (4000)] [--ref-us US (20)]\n"
             "Times each kernel of the inference executor's decode layer (TP 1, no bias, decode attention v3)\n"
             "alone (the calibration's timing), queued behind a spin kernel (the GPU's time in a stream the\n"
             "host is ahead of: the eager steps) and in one CUDA graph (the --decode-graph steps), and the\n"
             "layers as one sequence both ways; a spin kernel of --ref-us is the reference. Timing only.\n"
             "The last line is the graph gap (the median of queued - graph over the GEMM and decode-attention\n"
             "launches), what `tacorun calibrate --only host` writes as host.graph_gap_us by the same code.\n"
             "reads:  the model zoo (the --model's shapes)\n"
             "writes: one table per batch on standard output (experiments/infer/v3/graph/bench-graph.txt keeps one run)\n");
      return 0;
    }
    if (!v) {
      fprintf(stderr, "bench-graph: %s: missing value or unknown option (--help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--models")) models_dir = v;
    else if (!strcmp(a, "--batch")) batch_s = v;
    else if (!strcmp(a, "--len")) len_s = v;
    else if (!strcmp(a, "--layers")) o.layers = atoi(v);
    else if (!strcmp(a, "--reps")) o.reps = atoi(v);
    else if (!strcmp(a, "--spin-us")) o.spin_us = atof(v);
    else if (!strcmp(a, "--ref-us")) o.ref_us = atof(v);
    else {
      fprintf(stderr, "bench-graph: unknown option %s (--help)\n", a);
      return 2;
    }
    i++;
  }
  const int nb = ts_arg_ll_list(batch_s, 1, 1024, o.batch, CALIB_GRAPH_MAX_POINTS),
            nl = ts_arg_ll_list(len_s, 2, 1 << 20, o.len, CALIB_GRAPH_MAX_POINTS);
  o.n_points = nb;
  if (nb < 1 || nl != nb || o.layers < 1 || o.layers > CALIB_GRAPH_MAX_LAYERS || o.reps < 1 ||
      o.reps > CALIB_GRAPH_MAX_REPS || o.spin_us <= 0 || o.ref_us <= 0) {
    fprintf(stderr, "bench-graph: --batch and --len: lists of equal length (batch 1..1024, length >= 2, at most %d); "
                    "--layers 1..%d; --reps 1..%d; --spin-us, --ref-us > 0\n", CALIB_GRAPH_MAX_POINTS,
            CALIB_GRAPH_MAX_LAYERS, CALIB_GRAPH_MAX_REPS);
    return 2;
  }
  model_config mc;
  ts_err e = {{0}, 0};
  if (model_load(model, models_dir, &mc, &e)) {
    fprintf(stderr, "bench-graph: %s\n", e.msg);
    return 2;
  }
  o.mc = &mc;
  double gap = 0;
  int n = 0;
  if (calib_graph_run(&o, stdout, &gap, &n, &e)) {
    fprintf(stderr, "bench-graph: %s\n", e.msg);
    return 1;
  }
  printf("graph gap: %.4f us (median of queued - graph over %d GEMM and decode-attention launches)\n", gap, n);
  return 0;
}
