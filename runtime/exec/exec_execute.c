/* exec_execute.c — `tacorun execute`: real training steps of a plan on GPUs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_args.h"
#include "exec_run.h"
#include "ops_variants.h"

void exec_usage(FILE *out) {
  fprintf(out,
          "usage: tacorun execute PLAN.json [--iters N] [--warmup N] [--json OUT] [--csv OUT] [--ops-csv OUT]\n"
          "                                 [--seed S] [--inject-nan STEP] [--die-at ITER] [--program plan|builtin]\n"
          "                                 [--timeout S] [--transport auto|p2p|shm|socket]\n"
          "       tacorun execute --check | --check-moe | --check-mla\n"
          "One process per GPU: mpirun -np DPxTPxPP tacorun execute PLAN.json (NCCL ids over MPI).\n"
          "\n"
          "Runs training iterations of the plan's model for real: BF16 compute with FP32 master\n"
          "weights and AdamW, Megatron-style tensor parallelism (column-parallel QKV/FC1, row-parallel\n"
          "attention output/FC2 with an all-reduce, vocabulary-parallel embedding and cross-entropy),\n"
          "data parallelism (gradient all-reduce), GELU or SwiGLU, LayerNorm or RMSNorm, on synthetic\n"
          "tokens from a fixed seed. Prints the median/min/max iteration time of the timed iterations\n"
          "after warm-up, TFLOP/s per GPU and MFU (Megatron-LM's FLOP count, 989 TFLOP/s peak), and a\n"
          "per-op breakdown from CUDA events; --json/--csv write the simulator's result schema\n"
          "(source \"measured\"), which `tacosim compare` reads. NaN or Inf in the loss or a gradient\n"
          "stops the run naming the step and the tensor (--inject-nan STEP demonstrates it).\n"
          "\n"
          "--check runs the correctness checks on a tiny model (1 or more ranks): gradients against a\n"
          "float64 CPU reference, TP = nranks against TP = 1, DP = nranks against the mean reference\n"
          "gradient, the TP/DP plan programs, PP = 2 (2 ranks) with 1F1B and GPipe against the float64\n"
          "reference and the PP = 1 run, interleaved 1F1B (4 layers, 2 chunks per stage) against the\n"
          "float64 reference, sequence parallelism, full/selective recomputation and ZeRO-1 (2 ranks)\n"
          "against the float64 reference and the runs without them, the NaN stop, and 30 AdamW steps, on a\n"
          "GELU/LayerNorm, a SwiGLU/RMSNorm and a grouped-query (4 heads, 2 KV heads) model; tolerance 5%%\n"
          "relative L2 per tensor; then four small mixture-of-experts models (below) walked from their plan's\n"
          "program on one GPU against the float64 reference (loss, every gradient, 30 AdamW steps), the\n"
          "router top-k backward kernel against its C reference, DeepSeek-V3's routing kernels against\n"
          "theirs (sigmoid to 1e-6, the group-limited top-k, its backward and the bias update bits equal; 256\n"
          "experts in 8 groups, 4 kept, top 8, scaling 2.5, and 64 experts top 6 without groups) and a\n"
          "DeepSeek-V3-like router (16 experts in 4 groups, 2 kept, top 4, scaling 2.5, one shared expert, a\n"
          "random balancing bias) against float64, its first bias update against the C reference; on N >= 2\n"
          "ranks also EP N = DP N (plain and TACO token all-to-alls) and, N >= 4 even, EP N/2 < DP N\n"
          "(expert-DP groups of 2), each rank its own batch, against the float64 mean over the N batches\n"
          "(5%% per tensor plain, the codec's 10%% with TACO), and the DeepSeek-V3-like model at EP N = DP N\n"
          "(N dividing 16) with one bias update from the loads all-reduced over DP; --check-moe runs the MoE\n"
          "checks alone (the dense ones put TP = N on 4-head models).\n"
          "\n"
          "Mixture of experts (\"experts\" in the model file), on one GPU at EP 1 (expert_tp 1, tp = dp = pp\n"
          "= 1, --program plan) or with EP (below): router GEMM (FP32 logits), top-k with the softmax over the\n"
          "chosen logits (Mixtral, Qwen3) or DeepSeek-V3's router (model router \"sigmoid\": scores s =\n"
          "sigmoid(logits), the choice by s + b, group-limited with router_num_groups / router_group_topk (a\n"
          "group's score the sum of its top_k / router_group_topk best), the weights s over the sum of the\n"
          "chosen s times router_topk_scaling_factor; the backward through the chosen s to the logits; with\n"
          "router_expert_bias the per-expert bias b, no gradient, moved after each step by\n"
          "router_bias_update_rate x sign(mean load - load), the loads summed over DP), permutation into\n"
          "expert order, each expert's FFN as cuBLASLt GEMMs in\n"
          "a loop over the experts that received rows (what the calibration's gemm_grouped tables time; the row\n"
          "counts are copied to the host: one synchronisation per MoE layer and micro-batch), the weighted\n"
          "combine, the shared experts as a dense FFN, dense first layers (dense_layers), and the backward of\n"
          "all of it; dropless. Expert parallelism at ep 2 .. 8 dividing dp (one process per GPU; EP carved\n"
          "from DP as Megatron-Core does: EP groups of ep consecutive DP ranks, expert-DP groups of the dp / ep\n"
          "ranks with the same experts): the program's dispatch all-to-all (the rows per expert all-gathered\n"
          "over the EP group first, then ncclSend/ncclRecv in one group) sends each rank's permuted copies to\n"
          "the rank owning their expert (EP rank r owns experts r E/ep .. (r+1) E/ep - 1 and holds only their\n"
          "weights, gradients and AdamW state), its experts' GEMMs run on the rows received, the combine\n"
          "all-to-all returns them, then the un-permutation and weighted combine; the backward's two\n"
          "all-to-alls likewise; dense gradients reduced over DP, expert gradients over expert-DP by the\n"
          "program's expert-DP all-reduces (none when ep = dp). codec.ep taco: each run of rows bound for\n"
          "another rank TACO-encoded (FP8 and group scales), sent as bytes and decoded on arrival (encode +\n"
          "all-to-all + decode; the fused MoE codec kernels are not used). Refused with exit 2, naming the\n"
          "field: ep > 8, ep not dividing dp or the experts, ep 1 with dp > 1 (layout.ep), zero1 with ep > 1,\n"
          "codec.dp other than none with ep < dp (the expert-DP reduction runs uncompressed), expert_tp > 1,\n"
          "tp or pp > 1 with experts, the flex (DeepEP) dispatcher (layout.moe_token_dispatcher_type),\n"
          "groups or scaling with the softmax router (model.router_num_groups), capacity_factor > 0,\n"
          "recompute other than none, linear biases with experts (not run here).\n"
          "Qwen3's attention (dense and MoE models): head_dim other than hidden / heads (Q and the output\n"
          "projection's input heads x head_dim wide) and the QK norm (model qk_norm: each query and key head\n"
          "RMS-normed before RoPE, rt_qk_norm_fwd / _bwd; its weights' gradients summed over TP); the QK\n"
          "norm needs head_dim a multiple of 32 up to 256 (model.head_dim, exit 2). --check and --check-moe\n"
          "hold it against float64 (a Qwen3-like configuration each).\n"
          "Multi-head latent attention (model attention \"mla\": DeepSeek-V3), at tp 1, dense or MoE layers, as\n"
          "the plan lays its ops out: q_a (hidden -> q_lora), q_a_norm (RMSNorm), q_b (-> heads x (nope + rope),\n"
          "written into the attention's Q columns), kv_a (hidden -> kv_lora + rope: the latent c_kv and one rope\n"
          "key shared by every head), kv_a_norm (RMSNorm of c_kv), kv_b (-> heads x (nope + v), copied into\n"
          "the K and V heads), rope (the queries' rope parts; the shared key rotated once into every K head,\n"
          "its gradient summed over the heads), attention with q/k heads of nope + rope and v heads of v_head\n"
          "(scale 1/sqrt(nope + rope); values narrower than keys run on the unfused path: batched GEMMs around\n"
          "the causal softmax, the probabilities kept per layer), attn_out (heads x v_head -> hidden).\n"
          "Not modelled: DeepSeek's YaRN rope scaling and its softmax mscale (the model file has no rope\n"
          "scaling). Refused (exit 2): tp > 1 with MLA (layout.tp; needs several GPUs to check, NOT\n"
          "IMPLEMENTED here), MLA with learned positions (model.position). --check (and --check-mla alone)\n"
          "holds it against float64: a dense model, the same with full recomputation, a MoE one.\n"
          "\n"
          "Programs: --program plan (default) walks plan_build_program()'s program for this rank (the one\n"
          "the simulator predicts), op by op, on compute/TP/PP/DP streams ordered by its deps (TP\n"
          "all-reduce overlapping the wgrad GEMM, DP buckets overlapping the backward, pipeline\n"
          "send/recv on the PP stream); --program builtin runs the executor's own PP = 1 program (the\n"
          "fallback, same op vocabulary).\n"
          "\n"
          "Faults: every wait is bounded by --timeout S (default 300): a NCCL error or no completion\n"
          "in time aborts every communicator the process holds (world, TP, DP, PP) and exits 1; a\n"
          "watchdog bounds calls that block inside CUDA/NCCL the same way (S + 10 s).\n"
          "\n"
          "Layout features, from the plan's program only: sequence parallelism (Megatron-LM: all-gather\n"
          "before the column-parallel GEMMs, reduce-scatter after the row-parallel ones, norms and residuals\n"
          "on the row shard; buffers stay full size, so activation memory is not reduced), recomputation\n"
          "(full: each layer's forward rerun before its backward, only layer inputs kept; selective: the\n"
          "attention core rerun, one softmax buffer for all layers), ZeRO-1 (reduce-scattered gradient\n"
          "buckets, AdamW on this rank's shard, parameter all-gathers; only this rank's shards of the master\n"
          "weights and Adam moments are kept). layout.tp_overlap_chunks = k splits each forward\n"
          "row-parallel GEMM into k token-row chunks, each all-reduced beside the next chunk (correct, but\n"
          "slower on 2 x H200 NVLink: NCCL gets no SMs until the next GEMM ends; runtime/RESULTS-exec.md;\n"
          "--program builtin ignores it; --variant tp-overlap-sm-margin=N, experimental, leaves N SMs free).\n"
          "\n"
          "Pipelines: 1F1B, GPipe and interleaved 1F1B (vpp chunks per stage). Each rank allocates as many\n"
          "activation slots as its program holds micro-batches at once (forwards begun minus backwards done:\n"
          "pp - stage under 1F1B, all of them under GPipe; printed with the activation bytes per rank), a\n"
          "micro-batch taking a free slot at its first op. Uneven stages (decoder_first/last_pipeline_num_layers,\n"
          "account_for_embedding/loss_in_pipeline_split) run with vpp 1. Grouped-query attention (kv_heads < heads) runs on the fused attention\n"
          "kernels, which read each group's key/value head in place (no copies) and sum its key/value\n"
          "gradients over the group's query heads inside the backward kernel (no extra GEMMs); it needs\n"
          "their shapes (seq a multiple of 64, >= 2 head_dim + 4; head_dim 32, 64 or 128), else exit 2.\n"
          "\n"
          "Codecs: the plan's codec.tp_fwd/tp_bwd on the TP all-reduces (TACO, CAAT-Net, both) and, with\n"
          "TACO, on the sequence-parallel all-gathers/reduce-scatters; codec.pp (TACO) on pipeline\n"
          "send/recv; codec.dp (TACO, FP32 gradients) on the DP buckets (all-reduce, or ZeRO-1's\n"
          "reduce-scatter; --check holds both cases against float64).\n"
          "Messages under the plan's codec_min_bytes travel uncompressed, as predicted.\n"
          "\n"
          "Layers as the model file publishes them: RoPE (rope_theta, and rope_scaling: Llama 3.1's\n"
          "frequencies), QKV bias, linear biases, untied output\n"
          "weight (PP > 1 needs tied embeddings), norm epsilon. Attention runs on the executor's own kernel\n"
          "whatever the plan's attention_backend names: \"fused\" (the default) and \"flash\" run with a note\n"
          "(the result says \"executor\"). Refused (exit 2): attention_backend \"unfused\",\n"
          "cross_entropy_loss_fusion false (Megatron's unfused fp32 cross-entropy; the executor's loss is fused) and\n"
          "attention_dropout > 0 and hidden_dropout > 0 (hidden_dropout's default is Megatron-LM's 0.1: a plan\n"
          "for this executor says \"hidden_dropout\": 0; the simulator prices the dropout, the executor runs none);\n"
          "uneven stages with vpp > 1 (layout.decoder_first/last_pipeline_num_layers, account_for_*), data_parallel_sharding_strategy\n"
          "optim_grads / optim_grads_params (ZeRO-2/3), tp_comm_overlap true, context_parallel_size > 1 (priced by\n"
          "tacosim simulate; NOT IMPLEMENTED here: the ring attention's forward and backward kernels are checked on\n"
          "one GPU by test_cp_attention_gpu, the 2-rank KV ring is not run; with TACO on the KV exchanges the field\n"
          "named is codec.cp.kind). Run from the program: overlap_param_gather true (ZeRO-1's all-gathers on the DP\n"
          "stream before the next forward, each waited for by the first op that reads it) and overlap_grad_reduce\n"
          "false (the buckets reduced after the backward; the executor reduces every finished gradient at the first\n"
          "of them, the rest carry nothing).\n"
          "Biases are added in passes of their own: a plan's \"bias_fusion\": true (the default, Megatron-LM's\n"
          "fused bias kernels, priced at no cost of their own) is run unfused here (NOT IMPLEMENTED), with a note.\n"
          "\n"
          "options, training plans (defaults in brackets):\n"
          "  --iters N               timed iterations [10]\n"
          "  --warmup N              iterations before them, not timed [3]\n"
          "  --seed S                weights and synthetic tokens [1234]\n"
          "  --json OUT              the result (schema/result.h, source \"measured\") [not written]\n"
          "  --csv OUT               the result as gnuplot columns [not written]\n"
          "  --ops-csv OUT           the per-op profile from CUDA events, by op name (the layout of\n"
          "                          tacosim ops) [not written]\n"
          "  --inject-nan STEP       a NaN written into one gradient at iteration STEP, to show the NaN stop [none]\n"
          "                          (NaN/Inf that a TACO encode meets stop the run too, naming the step, the\n"
          "                          collective op and the count: the codec would send them as zeros)\n"
          "  --die-at ITER           fault injection: this process kills itself (SIGKILL) at the start of\n"
          "                          iteration ITER, so that its peers' bounded waits can be tested; give it\n"
          "                          to one rank's command only [none]\n"
          "  --program plan|builtin  the plan's program or the executor's own PP = 1 program [plan]\n"
          "  --timeout S             bound on every wait, seconds [300]\n"
          RT_TRANSPORT_USAGE
          "  --check                 the correctness checks above instead of a plan [off]\n"
          "  --check-moe             the mixture-of-experts checks alone (any rank count; the dense ones need\n"
          "                          TP = ranks to divide their 4 heads) [off]\n"
          "  --check-mla             the multi-head latent attention checks alone (one GPU each rank) [off]\n");
  ops_variant_usage(out);
  fprintf(out,
          "reads:  PLAN.json, the model and cluster it names\n"
          "writes: the timings and the per-op breakdown on standard output (rank 0); OUT of --json, --csv,\n"
          "        --ops-csv\n");
}

int exec_execute(int argc, char **argv) {
  exec_timed_opts o = {.iters = 10, .warmup = 3, .seed = 1234, .inject_nan_step = -1, .die_at_iter = -1,
                        .program_plan = 1};
  int timeout_s = 300;
  coll_transport transport = COLL_TRANSPORT_AUTO;
  const char *plan_path = NULL;
  int check = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int v;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      exec_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--check")) {
      check = 1;
    } else if (!strcmp(a, "--check-moe")) {
      check = 2;
    } else if (!strcmp(a, "--check-mla")) {
      check = 3;
    } else if (i + 1 < argc && (!strcmp(a, "--iters") || !strcmp(a, "--warmup") || !strcmp(a, "--inject-nan") ||
                               !strcmp(a, "--die-at"))) {
      if (ts_arg_int(argv[++i], !strcmp(a, "--iters") ? 1 : 0, 100000, &v)) {
        fprintf(stderr, "tacorun execute: %s: '%s' is not a valid count\n", a, argv[i]);
        return 2;
      }
      if (!strcmp(a, "--iters")) o.iters = v;
      else if (!strcmp(a, "--warmup")) o.warmup = v;
      else if (!strcmp(a, "--die-at")) o.die_at_iter = v;
      else o.inject_nan_step = v;
    } else if (i + 1 < argc && !strcmp(a, "--timeout")) {
      if (ts_arg_int(argv[++i], 1, 86400, &timeout_s)) {
        fprintf(stderr, "tacorun execute: --timeout: '%s' is not a number of seconds in [1, 86400]\n", argv[i]);
        return 2;
      }
    } else if (i + 1 < argc && !strcmp(a, "--program")) {
      const char *v = argv[++i];
      if (strcmp(v, "plan") && strcmp(v, "builtin")) {
        fprintf(stderr, "tacorun execute: --program: '%s' is not builtin or plan\n", v);
        return 2;
      }
      o.program_plan = !strcmp(v, "plan");
    } else if (i + 1 < argc && !strcmp(a, "--variant")) {
      ts_err ve;
      if (ops_variant_set(argv[++i], &ve)) {
        fprintf(stderr, "tacorun execute: %s\n", ve.msg);
        return 2;
      }
    } else if (i + 1 < argc && !strcmp(a, "--transport")) {
      ts_err te;
      if (rt_transport_arg(argv[++i], &transport, &te)) {
        fprintf(stderr, "tacorun execute: %s\n", te.msg);
        return 2;
      }
    } else if (i + 1 < argc && !strcmp(a, "--seed")) {
      o.seed = strtoull(argv[++i], NULL, 10);
    } else if (i + 1 < argc && !strcmp(a, "--json")) {
      o.json_out = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--csv")) {
      o.csv_out = argv[++i];
    } else if (i + 1 < argc && !strcmp(a, "--ops-csv")) {
      o.ops_csv_out = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "tacorun execute: unknown option '%s'\n", a);
      exec_usage(stderr);
      return 2;
    } else if (!plan_path) {
      plan_path = a;
    } else {
      fprintf(stderr, "tacorun execute: more than one plan given ('%s')\n", a);
      return 2;
    }
  }
  if (!check && !plan_path) {
    exec_usage(stderr);
    return 2;
  }
  ts_err e;
  exec_plan_min p;
  /* Read and check the plan before touching a GPU, so bad input fails fast with status 2. */
  if (!check && exec_plan_read(plan_path, &p, &e)) {
    fprintf(stderr, "tacorun execute: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  /* the built-in program is plain TP/DP: the layout features run only from the plan's program */
  if (!check && !o.program_plan &&
      (p.sequence_parallel || p.zero1 || p.dp_overlap_changed || strcmp(p.recompute, "none"))) {
    fprintf(stderr, "tacorun execute: %s: layout: --program builtin runs neither sequence parallelism, ZeRO-1, "
                    "overlap_param_gather true, overlap_grad_reduce false nor recomputation; use --program plan\n",
            p.path);
    return 2;
  }
  if (!check && !o.program_plan && p.model.experts > 0) {
    fprintf(stderr, "tacorun execute: %s: model: --program builtin runs dense layers only; MoE layers run from the "
                    "plan's program (--program plan)\n", p.path);
    return 2;
  }
  if (rt_cuda_device_count() < 1) {
    fprintf(stderr, "tacorun execute: no CUDA device\n");
    return 1;
  }
  rt_nccl w;
  int started = rt_world_start(&w, "execute", timeout_s, transport);
  if (started) return started;
  /* The checks run many small programs with bounded waits; the watchdog
   * also bounds any enqueue that blocks inside CUDA/NCCL (a dead peer). */
  if (check) rt_watchdog_arm(&w, 4.0 * w.timeout_s, "execute --check");
  const int which = check == 2 ? EXEC_CHECK_MOE : check == 3 ? EXEC_CHECK_MLA : EXEC_CHECK_ALL;
  int rc = check ? exec_run_check(&w, o.json_out, which, &e) : exec_run_timed(&w, &p, &o, &e);
  if (check && rc == 0) rt_watchdog_disarm();
  if (rc) fprintf(stderr, "tacorun execute: rank %d: %s\n", w.ranks[0], e.msg);
  rt_nccl_finalize(&w, rc != 0);
  return rc ? ts_exit_status(&e) : 0;
}
