/* plan_infer.h — an inference plan: one batch of requests served by one
 * tensor x pipeline parallel group (prefill of the prompts, then decode of the
 * generated tokens), with a codec policy for the TP all-reduces.
 *
 * Plain C, no SimGrid. The simulator predicts it (sim/sim_infer.h); `tacorun
 * execute` runs it on GPUs (runtime/infer/infer_run.h); see sim/INFERENCE.md. */
#ifndef PLAN_INFER_H
#define PLAN_INFER_H

#include <stdbool.h>
#include <stddef.h>

#include "plan.h"

typedef enum { PLAN_KV_BF16, PLAN_KV_FP8 } plan_kv_precision;
/* "moe_kernel" (MoE models): how the routed experts' GEMMs run. fused (default): one kernel over every
 * active expert, as serving engines run them (vLLM's and SGLang's fused_moe, TensorRT-LLM's MoE plugin);
 * per-expert: one GEMM an expert that gets rows, as the training executor runs an MoE layer. */
typedef enum { PLAN_MOE_KERNEL_PER_EXPERT, PLAN_MOE_KERNEL_FUSED } plan_moe_kernel;
const char *plan_moe_kernel_name(plan_moe_kernel k);
/* "quantization": none (default): BF16 weights and GEMMs. fp8: the linear layers' weights held in E4M3 (1 byte
 * a parameter) and their GEMMs run in FP8 with per-tensor scales (W8A8, as TensorRT-LLM's --use_fp8 /
 * --enable_fp8 and vLLM's --quantization fp8 serve them), the activations quantized inside the kernel that
 * produces them (TensorRT-LLM fuses it into the norm and activation kernels: no op of its own); the embedding,
 * the output layer and attention stay BF16. On an MoE model the routed and shared experts' GEMMs (and MLA's
 * projections) are FP8 too, the router BF16 (plan_fp8_serving_linear). The KV cache is the "kv_cache" field's.
 * GPUs with FP8 tensor cores only. */
/* nvfp4 (sim/INFERENCE.md, "NVFP4 weights"): the same GEMMs held in NVFP4 (E2M1 values, an E4M3 scale per 16
 * elements and an FP32 scale per tensor: PLAN_NVFP4_BYTES_PER_PARAM) and run W4A4 on the FP4 tensor cores, as
 * TensorRT-LLM serves ModelOpt's NVFP4 checkpoints (QuantAlgo.NVFP4); each GEMM's BF16 input quantized by a kernel
 * of its own (fp4_quantize); GPUs with FP4 tensor cores only (GPU catalogue: fp4_tflops). */
typedef enum { PLAN_QUANT_NONE, PLAN_QUANT_FP8, PLAN_QUANT_NVFP4 } plan_infer_quant;
const char *plan_infer_quant_name(plan_infer_quant q);
/* "prefill_attention": the kernel a prefill's causal attention runs in. executor (default): the inference
 * executor's own (unfused: batched GEMMs around a causal softmax; tacorun execute runs it), priced from the
 * calibration's "attention_prefill" tables; fused (cuDNN's flash attention, as Transformer Engine runs it) or
 * flash (FlashAttention-2), the fused kernels serving engines run (TensorRT-LLM's context FMHA, vLLM's
 * FlashAttention), priced from the calibration's "attention_backends" tables of that kernel by shape, as a
 * training plan's attention_backend. fused-fp8: a fused Hopper kernel run with FP8 (E4M3) Q, K, V, as
 * TensorRT-LLM runs its context FMHA over an FP8 KV cache (its FP8 context FMHA): the "fused" table's price moved
 * by the calibration's "attention_fp8" ratio (FP8 over BF16 speed of one kernel) at the prompt's length; needs
 * "kv_cache": "fp8", a GPU with FP8 tensor cores and a model without MLA. Decode attention is the executor's
 * kernel's table either way. */
typedef enum {
  PLAN_PREFILL_ATTN_EXECUTOR, PLAN_PREFILL_ATTN_FUSED, PLAN_PREFILL_ATTN_FLASH, PLAN_PREFILL_ATTN_FUSED_FP8
} plan_prefill_attention;
const char *plan_prefill_attention_name(plan_prefill_attention a);
/* "decode_attention" (sim/INFERENCE.md, "Decode attention read per query head"): how a decode step's attention reads
 * the KV cache of a GQA model (G = heads / kv_heads query heads a KV head). per-kv-head (default): once per KV head
 * for its whole group of query heads, as the inference executor's kernel runs it (and TensorRT-LLM's XQA);
 * per-query-head: once per query head, G times the bytes, as a kernel of one thread block a (sequence, query head)
 * runs it (TensorRT-LLM's masked multi-head attention before XQA). Priced from that kernel's measured table,
 * "attention_decode_pqh[_fp8].g<G>", where the calibration has it (sim_infer_pqh_table), else by an upper bound: the
 * decode attention table at the shape such a kernel runs without L2's help, MHA with heads / tp KV heads (the ".g1"
 * table, heads / tp (sequence, head) pairs, G times the bytes). On an MHA model the two are one; an MLA model (one latent head) takes per-kv-head only. */
typedef enum { PLAN_DECODE_ATTN_PER_KV_HEAD, PLAN_DECODE_ATTN_PER_QUERY_HEAD } plan_decode_attention;
const char *plan_decode_attention_name(plan_decode_attention a);

/* "inflight" (plan/plan_inflight.c, sim/sim_inflight.c): the requests are served by a serving engine with in-flight
 * (continuous) batching, each of batch.prompt tokens in and batch.generate tokens out, requests always waiting (a
 * throughput benchmark); each engine step runs the decode tokens of the sequences in flight with the prompts of newly
 * admitted requests (whole: no chunked prefill). The prediction is the steady state's output tokens/s, TTFT (the
 * admitting step, queueing left out) and TPOT (one step). batch.size is not given: the batch is resolved here. */
typedef struct {
  bool on;
  int max_batch_given;      /* "max_batch": the engine's maximum number of sequences in flight; 0: not given (the engine's
                               heuristic, engine_max_batch) */
  int max_num_tokens_given; /* "max_num_tokens": the most tokens one step may carry; 0: not given (the heuristic) */
  double kv_fraction;       /* "kv_cache_fraction": of the HBM left after weights and runtime, what the KV cache gets
                               (default 0.90, trtllm-bench's --kv_cache_free_gpu_mem_fraction) */
  int tokens_per_block;     /* "tokens_per_block": the paged KV cache's block (default 32, TensorRT-LLM's); a sequence
                               reserves whole blocks for prompt + generate (the guaranteed-no-evict scheduler) */
  int requests;             /* "requests": also simulate a finite benchmark run of this many requests, all queued at
                               the start, step by step (0, the default: the steady state only) */
  int cuda_graph_max_batch; /* "cuda_graph_max_batch": the largest decode batch the engine captures a CUDA graph of
                               (default 128, TensorRT-LLM 1.0's CudaGraphConfig when the run gives none; 0: no graphs),
                               capped by the engine's max_batch and max_num_tokens; its memory pool is taken before the
                               KV cache (sim/INFERENCE.md, "The engine's memory before the KV cache") */
  int moe_max_num_tokens;   /* "moe_max_num_tokens" (MoE models): the most tokens one MoE forward holds buffers for,
                               larger steps run in chunks (0, the default: max_num_tokens x tp under attention_dp, else
                               max_num_tokens, TensorRT-LLM's moe_max_num_tokens default) */
  /* resolved by plan_inflight_resolve */
  int engine_max_batch, engine_max_num_tokens; /* trtllm-bench's heuristic (tensorrt_llm/bench/build/tuning.py) */
  int kv_fit_batch;   /* sequences whose KV cache (prompt + generate, whole blocks) fits kv_fraction of the free HBM */
  int max_batch;      /* sequences in flight at most: min(max_batch_given or engine_max_batch, kv_fit_batch) */
  int max_num_tokens; /* max_num_tokens_given or engine_max_num_tokens */
  /* the engine's memory before its KV cache (plan_inflight_resolve; sim/INFERENCE.md, "The engine's memory before the
   * KV cache"): TensorRT-LLM sizes the cache at kv_fraction of the HBM free after a profiling forward of
   * max_num_tokens tokens, with the CUDA graphs captured before it */
  int moe_tokens;            /* the tokens one MoE forward's buffers hold: moe_max_num_tokens or its default */
  double profile_peak_bytes; /* the activations at the peak of the profiling forward of max_num_tokens tokens */
  int cuda_graph_batch;      /* the largest captured decode batch: min(cuda_graph_max_batch, the engine's max_batch,
                                max_num_tokens); 0 without graphs */
  double cuda_graph_bytes;   /* the graphs' memory pool: the activations of a decode step of cuda_graph_batch */
  double kv_free_bytes;      /* HBM less the weights, the runtime, profile_peak_bytes and cuda_graph_bytes: what
                                kv_fraction is applied to */
} plan_infer_inflight;

typedef struct {
  char path[512];
  char name[128];
  char description[256];
  model_config model; /* model.layers is the layers actually run (layers_override applied) */
  topo_cluster cluster;
  int tp, pp;
  /* "layout.attention_dp" (MoE models; default false): TensorRT-LLM's enable_attention_dp (PyTorch backend), SGLang's DP
   * attention. Each of the tp ranks runs attention, the norms, the router, the shared experts, the dense layers, the
   * embedding and the output head with their FULL weights on its own 1/tp share of the requests (its own KV cache, all
   * KV heads); the routed experts are split over the same tp GPUs, ep ways by expert and tp / ep ways within an expert
   * (moe_tp), and the tokens are exchanged around them: an all-gather of the hidden states (with the routing) before,
   * a reduce-scatter of the experts' outputs after (sim/INFERENCE.md, "Attention data parallelism"). */
  bool attention_dp;
  int ep; /* "layout.ep": expert-parallel ways of the routed experts within the tp GPUs (default 1; > 1 needs
             attention_dp), TensorRT-LLM's moe_expert_parallel_size (trtllm-bench --ep); moe_tp = tp / ep */
  int batch;      /* sequences decoded together (under attention_dp: the whole group's, tp divides it; in flight,
                     tp x the per-rank batch) */
  int prompt;     /* prompt tokens per sequence (prefill) */
  int generate;   /* tokens generated per sequence (the first comes out of the prefill) */
  plan_kv_precision kv;
  plan_codec codec;       /* codec of the forward TP all-reduces (attn_out, fc2, embedding) */
  double codec_min_bytes; /* messages smaller than this travel uncompressed (default 0: the calibration decides) */
  bool codec_auto;        /* true (default): a message travels plain when the calibration says the codec is slower */
  plan_moe_kernel moe_kernel; /* "moe_kernel" (MoE models only; default fused) */
  plan_infer_quant quant;     /* "quantization" (default none) */
  plan_prefill_attention prefill_attention; /* "prefill_attention" (default executor) */
  plan_decode_attention decode_attention;   /* "decode_attention" (default per-kv-head) */
  plan_infer_inflight inflight;             /* "inflight" (default: off, one static batch) */
} plan_infer;

/* Under attention_dp, the ways attention (and every weight but the routed experts') is split: 1; else tp. */
static inline int plan_infer_attn_tp(const plan_infer *p) { return p->attention_dp ? 1 : p->tp; }
/* The sequences one GPU attends over: batch / tp under attention_dp, else batch. */
static inline int plan_infer_rank_batch(const plan_infer *p) { return p->attention_dp ? p->batch / p->tp : p->batch; }
/* The ways each routed expert's FFN is split: tp / ep (TensorRT-LLM's moe_tp_size). */
static inline int plan_infer_moe_tp(const plan_infer *p) { return p->tp / (p->ep > 0 ? p->ep : 1); }

/* Whether a plan file says "kind": "inference" (a training plan has no "kind").
 * Fails only when the file cannot be read or parsed. */
int plan_file_is_inference(const char *path, bool *is_inference, ts_err *e);

/* Strict loader: unknown fields, wrong types and broken rules are errors
 * naming the file, the field and the reason. */
int plan_infer_load(const char *path, const char *models_dir, const char *topologies_dir, plan_infer *p,
                    ts_err *e);
int plan_infer_from_json_text(const char *text, size_t len, const char *what, const char *models_dir,
                              const char *topologies_dir, plan_infer *p, ts_err *e);
/* tp divides heads, KV heads, ffn_hidden and the GPUs per node; pp <= layers
 * and divides them; tp x pp <= GPUs; prompt + generate <= max_seq; codec
 * parameters valid; weights + KV cache fit in HBM. */
int plan_infer_validate(const plan_infer *p, ts_err *e);

/* Bytes of KV cache one GPU of a stage holds for `tokens` tokens of every
 * sequence of the batch: 2 (K and V) x layers of the stage x batch x tokens x
 * kv_heads/tp x head_dim x (2 bytes bf16; fp8: 1 byte + an FP32 scale per
 * head vector, 1 + 4 / head_dim bytes an element). */
double plan_infer_kv_bytes(const plan_infer *p, long long tokens);

/* The KV cache of an MLA model (DeepSeek-V2/V3: "attention": "mla"), as the serving engines keep it
 * (sim/INFERENCE.md, "MLA"): the compressed latent, kv_lora_rank + qk_rope_head_dim elements a token a
 * layer (576 for DeepSeek-V3), one vector for all heads, not split by TP (every TP rank holds the whole
 * latent cache of its stage's layers); 2 bytes an element, fp8: 1 (E4M3 with a per-tensor scale).
 * plan_infer_kv_bytes returns it for an MLA model. */
double plan_infer_mla_kv_bytes(const plan_infer *p, long long tokens);

typedef struct {
  double weights;  /* parameters of the stage's layers (+ embedding / head): 2 B each, 1 B the FP8 linear layers' */
  double kv_cache; /* at the end of generation: prompt + generate tokens */
  /* The inference executor's working buffers (runtime/infer/infer_model.c, infer_model_create): the prefill's
   * activations of batch x prompt tokens, its attention scores, the FP8 cache's prefill K/V stage, the decode
   * attention's partials, the last tokens' rows and logits. 0 for a plan naming a serving engine's fused prefill
   * attention (prefill_attention fused, flash or fused-fp8), which the executor does not run: an engine plans its own
   * workspace (chunked prefills, activation memory shared between layers), not modelled. */
  double activations;
  double overhead; /* beyond the tensors: the runtime (CUDA context, cuBLASLt) and an NCCL communicator per parallel
                      dimension, as measured under tacorun execute (plan_memory.c's figures) */
  double total;
} plan_infer_memory;
/* The largest over stages. */
int plan_infer_memory_per_gpu(const plan_infer *p, plan_infer_memory *m);

/* The read floor of one decode step on one GPU (issue 24; plan_infer_floor.c), counted as
 * experiments/infer/floor.py counts it: *weight_bytes, the weights the step streams (every layer's linear
 * weights, biases and norms, the final norm and the output head of vocab x hidden, BF16, the linear layers and
 * the head split over tp; the embedding reads only the batch's rows, not counted), and *kv_bytes, the KV cache
 * at the mean decode length prompt + generate / 2 (BF16 2 bytes an element, fp8 1 + 4 / head_dim), split over
 * tp. Under pp > 1 the stages run one after another in a step, so this is the step's whole read over one
 * GPU's share of tp. Dense BF16-weight models only: an MoE or MLA model (a step reads only its routed experts)
 * and quantization other than none are refused (-1, naming the file and the field). */
int plan_infer_decode_floor_bytes(const plan_infer *p, double *weight_bytes, double *kv_bytes, ts_err *e);

/* A training plan with the same model, cluster, tp and pp (dp 1, one
 * micro-batch of `batch` sequences of `seq` tokens, no codec), so that the
 * shapes and costs of the training code (model_layer_ops, sim_costs,
 * plan_params_of_stage) apply to one forward pass of the inference plan. */
void plan_infer_forward_plan(const plan_infer *p, int seq, plan *out);

/* The inference executor's prefill attention scores are held for as many (sequence, KV head) groups at once
 * as fit this many bytes (runtime/infer/infer_model.c, its default scores budget; the memory model counts it). */
#define PLAN_INFER_SCORES_BUDGET ((size_t)1 << 30)

/* How `tacorun execute` times the TTFT of an inference plan
 * (runtime/infer/infer_run.c, timed_ttft), which the simulator's prefill
 * clock follows (sim/sim_infer.c): one warm-up prefill and
 * PLAN_INFER_WARMUP_DECODE decode steps, then PLAN_INFER_PREFILL_REPS
 * (--prefill-reps' default) prefills back to back; the TTFT is their median. */
#define PLAN_INFER_WARMUP_DECODE 2
#define PLAN_INFER_PREFILL_REPS 3

/* Bytes on the wire of a forward TP all-reduce of `bytes` bf16 under codec c
 * (CAAT-Net: floor(p*h)/h of the channels; TACO: fp8 + scales, when the
 * message after CAAT-Net is at least min_bytes). */
double plan_infer_wire_bytes(const plan_codec *c, double bytes, int hidden, double min_bytes);

const char *plan_kv_precision_name(plan_kv_precision k);

/* ---- in-flight batching (plan_inflight.c) ---- */
/* Reads the optional "inflight" object of an inference plan's root (fields above; unknown ones are errors). */
struct json_t;
int plan_inflight_load(struct json_t *root, const char *file, plan_infer *p, ts_err *e);
/* With model and cluster loaded: the engine's heuristic, the KV-cache fit and p->batch = inflight.max_batch; the
 * rules (pp 1, a whole prompt fits max_num_tokens, at least one sequence fits) exit 2 naming the field. */
int plan_inflight_resolve(plan_infer *p, ts_err *e);
/* Bytes one GPU holds at the peak of one engine forward of `tokens` tokens (its own: under attention_dp its rank's),
 * `logit_rows` of them with logits, and the MoE layers' buffers sized for `moe_rows` tokens (sim/INFERENCE.md, "The
 * engine's memory before the KV cache"): the hidden states and the residual, plus the largest op's input and
 * output (an MoE layer's: the gathered tokens, the fused MoE's workspace of moe_rows x top_k rows and its output),
 * or the logits. */
double plan_inflight_forward_peak_bytes(const plan_infer *p, double tokens, double logit_rows, double moe_rows);

/* `tacosim plan INFER_PLAN.json`: layout, memory per GPU against HBM, and the
 * TP all-reduces of one prefill and one decode step with and without the codec. */
int plan_infer_print_summary(const plan_infer *p, FILE *out, ts_err *e);

#endif
