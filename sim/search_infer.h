/* search_infer.h — `tacosim search-infer`: the serving-layout search. Every combination of the lists
 * below is an inference plan (plan_infer.h), checked by its loader (memory included) and predicted by
 * sim_infer_predict (analytic: about a millisecond each); those within the latency limits are ranked by
 * output tokens/s per GPU. */
#ifndef SEARCH_INFER_H
#define SEARCH_INFER_H

#include <stdio.h>

#include "plan_infer.h"
#include "sim.h"
#include "sim_infer.h"
#include "sim_inflight.h"

#define SEARCH_INFER_MAX_LIST 32

typedef struct {
  const char *model, *cluster; /* zoo names or paths (required) */
  int prompt, generate;        /* tokens per sequence (required) */
  int batches[SEARCH_INFER_MAX_LIST], n_batches; /* sequences served together */
  int tps[SEARCH_INFER_MAX_LIST], n_tps;         /* 0 entries: every tp the loader accepts (1..GPUs per node) */
  int pps[SEARCH_INFER_MAX_LIST], n_pps;
  /* layout of an MoE model's experts: 0, TP attention and experts (no attention_dp); k >= 1, layout.attention_dp
   * with layout.ep k (sim/INFERENCE.md, "Attention data parallelism"); 0 entries: 0 only */
  int eps[SEARCH_INFER_MAX_LIST], n_eps;
  int kvs[2], n_kvs;       /* plan_kv_precision */
  int quants[3], n_quants; /* plan_infer_quant; 0 entries: none, fp8 where the GPU has FP8 tensor cores, nvfp4
                               where it has FP4 ones (fp4_tflops) */
  int codecs[4], n_codecs; /* plan_codec_kind of the TP all-reduces (TACO group 128, CAAT-Net p 0.5) */
  plan_prefill_attention prefill_attention;
  plan_decode_attention decode_attention; /* the plan field, passed to every candidate (default per-kv-head) */
  double tpot_max_s, ttft_max_s; /* 0: no limit */
  double headroom;               /* HBM kept free beyond the plan's memory: >= 1 GiB, < 1 a fraction (0: none) */
  const char *calibration;       /* NULL: the cluster's default (sim_default_calibration) */
  sim_transfer_mode transfer;
  /* --inflight: the candidates are served with in-flight batching (plan field "inflight", sim_inflight.c): batches[]
   * are the engine's max_batch, 0 its own heuristic (trtllm-bench's), each at most the sequences whose KV cache fits;
   * ranked by the steady state's output tokens/s per GPU, TPOT = the mean step, TTFT = the admitting step */
  bool inflight;
  double kv_fraction; /* the plan's inflight.kv_cache_fraction (0: the plan's default) */
  bool cuda_graph_set;      /* --cuda-graph-max-batch given: the plans say inflight.cuda_graph_max_batch */
  int cuda_graph_max_batch; /* its value (0: no CUDA graphs); not given, the plan's default (128) */
} search_infer_opts;

typedef struct {
  plan_infer plan;
  char json[1024]; /* the plan file's text: what --emit-plans writes, what the loader read */
  sim_infer_result r;
  double tokens_per_gpu_s;
  int gpus;
  double in_flight; /* --inflight: the steady state's sequences in flight (else the batch) */
} search_infer_row;

typedef struct {
  search_infer_row *rows; /* predicted and within the limits, best first */
  int n_rows;
  int candidates, refused, failed, over_limits; /* refused: the loader's rules (memory, divisibility) */
  int over_headroom;                            /* fit the HBM, not the HBM less --headroom */
  int duplicates; /* --inflight: a max_batch that the KV-cache fit (or the heuristic) made another candidate's */
  char first_refusal[256];                      /* the loader's message for the first refused candidate */
  char calibration[512];
} search_infer_result;

/* Runs the search; the rows are ranked by tokens/s per GPU (ties: fewer GPUs, then the lower TPOT). A
 * prediction that fails (a simulator failure, exit 3) stops the search with that error. */
int search_infer_run(const search_infer_opts *o, search_infer_result *res, ts_err *e);
void search_infer_free(search_infer_result *res);

/* The command (search_infer_main.c) and its help. */
extern const char sim_search_infer_usage[];
int sim_search_infer_main(int argc, char **argv);

#endif
