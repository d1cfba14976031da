/* plan_summary.c — what `tacosim plan PLAN.json` prints: the plan in words,
 * memory per GPU against HBM, and for one rank of each pipeline stage the
 * program's op counts and its traffic per class before and after the codec. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "plan.h"
#include "plan_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Traffic classes a report lists: "ep" only for MoE models, "cp" only with context parallelism. */
static int traffic_classes(const plan *p) { return plan_cp(p) > 1 ? PLAN_TRAFFIC_COUNT : model_is_moe(&p->model) ? PLAN_TRAFFIC_CP : PLAN_TRAFFIC_EP; }
static bool listed(const plan *p, int t) { return t != PLAN_TRAFFIC_EP || model_is_moe(&p->model); }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void print_codec(FILE *out, const char *name, const plan_codec *c) {
  fprintf(out, "  %-7s %s", name, plan_codec_kind_name(c->kind));
  if (c->kind == PLAN_CODEC_TACO || c->kind == PLAN_CODEC_TACO_CAAT)
    fprintf(out, " (group %d%s, %s)", c->group, c->group_auto ? " auto: the reshaping's choice" : "",
            c->fp8 == PLAN_FP8_E4M3 ? "e4m3" : "e5m2");
  if (c->kind == PLAN_CODEC_CAAT || c->kind == PLAN_CODEC_TACO_CAAT) fprintf(out, " (p = %g)", c->p);
  fputc('\n', out);
}

static void print_header(const plan *p, FILE *out) {
  const model_config *m = &p->model;
  const topo_cluster *c = &p->cluster;
  int mb = plan_micro_batches(p);
  fprintf(out, "plan %s (%s)\n", p->name, p->path);
  if (p->description[0]) fprintf(out, "  %s\n", p->description);
  fprintf(out, "model     %s: %d layers, hidden %d, %d heads (%d KV), ffn %d, vocab %d (padded %lld), %.2f B params\n",
          m->name, p->layers, m->hidden, m->heads, m->kv_heads, m->ffn_hidden, m->vocab,
          model_vocab_per_gpu(m, p->tp) * p->tp, model_params_total(m) / 1e9);
  fprintf(out, "cluster   %s: %d nodes x %d %s (%.0f GiB HBM, %.0f TFLOP/s bf16)\n", c->name, c->nodes,
          c->gpus_per_node, c->gpu.name, c->gpu.hbm_gib, c->gpu.bf16_tflops);
  if (plan_cp(p) > 1)
    fprintf(out, "context   cp %d (%s): %d tokens per rank in 2 chunks of %d; KV block %.1f MB per %s; "
            "gradients reduced over dp x cp = %d ranks\n", plan_cp(p),
            p->cp_allgather ? "KV all-gather, dKV reduce-scatter: allgather" : "ring of send/recv, p2p",
            plan_local_seq(p), p->seq / (2 * plan_cp(p)), plan_cp_kv_bytes(p) / 1e6,
            p->cp_allgather ? "rank" : "step", plan_dp_shards(p));
  char modules[64] = "";
  if (p->recompute == MODEL_RECOMPUTE_SELECTIVE) {
    char names[48];
    plan_recompute_modules_name(p, names, sizeof names);
    snprintf(modules, sizeof modules, " (%s)", names);
  }
  if (p->recompute == MODEL_RECOMPUTE_FULL && p->recompute_num_layers > 0)
    snprintf(modules, sizeof modules, " (the first %d layers of each chunk)", p->recompute_num_layers);
  fprintf(out, "layout    dp %d x tp %d x pp %d (vpp %d) = %d of %d GPUs, order %s, sequence parallel %s, ZeRO-1 %s, "
          "recompute %s%s\n",
          p->dp, p->tp, p->pp, p->vpp, plan_world_size(p), topo_total_gpus(c),
          p->order == PLAN_ORDER_TP_DP_PP ? "tp-dp-pp" : "tp-pp-dp", p->sequence_parallel ? "on" : "off",
          p->zero1 ? "on" : "off", plan_recompute_name(p->recompute), modules);
  if (p->fp8_recipe != PLAN_FP8_OFF)
    fprintf(out, "fp8       %s: qkv, attn_out, fc1, fc2 GEMMs in FP8 (the rest BF16)%s\n",
            plan_fp8_recipe_names[p->fp8_recipe], p->fp8_param_gather ? ", FP8 parameter all-gather" : "");
  if (p->pp > 1)
    fprintf(out, "pipeline  messages %s\n",
            p->pp_scatter_gather ? "scatter/gather: each TP rank sends its 1/tp slice, the receiver all-gathers it "
                                   "on its TP group (tp_fwd/tp_bwd traffic)"
                                 : "whole on every TP rank (no scatter/gather)");
  if (plan_uneven_stages(p)) {
    fprintf(out, "stages    uneven (decoder_first/last_pipeline_num_layers): layers per stage");
    for (int st = 0; st < p->pp; st++) fprintf(out, " %d", plan_stage_layers(p, st));
    fprintf(out, "\n");
  }
  if (p->account_embedding || p->account_loss) {
    fprintf(out, "stages    %s%s%s accounted as a layer: layers per stage", p->account_embedding ? "embedding" : "",
            p->account_embedding && p->account_loss ? " and " : "", p->account_loss ? "loss" : "");
    for (int st = 0; st < p->pp; st++) fprintf(out, " %d", plan_stage_layers(p, st));
    fprintf(out, " (model chunks of %d layer slots)\n", plan_chunk_layers(p, 0));
  }
  if (p->zero_stage >= 2 || p->overlap_param_gather || p->overlap_grad_reduce_off || p->tp_comm_overlap) {
    static const char *const zs[] = {"no_shard", "optim (ZeRO-1)", "optim_grads (ZeRO-2)", "optim_grads_params (ZeRO-3)"};
    fprintf(out, "overlaps  sharding %s%s; grad reduce %s; param gather %s; TP comm overlap %s\n",
            zs[p->zero_stage < 0 || p->zero_stage > 3 ? 0 : p->zero_stage],
            p->zero_stage == 3 ? (p->zero3_prefetch ? ", prefetch on" : ", no prefetch") : "",
            p->overlap_grad_reduce_off ? "after the backward" : "beside the backward",
            p->overlap_param_gather ? "beside the next forward" : "after the optimizer",
            p->tp_comm_overlap ? "on (userbuffers)" : "off");
  }
  if (p->tp_comm_overlap) { /* per GEMM: method, SMs of its kernel, pieces (layout.tp_comm_overlap_cfg) */
    fprintf(out, "tp overlap per GEMM (method/num_sm/pieces, * = set by layout.tp_comm_overlap_cfg, else TE's default):");
    for (int g = 0; g < PLAN_TPO_GEMMS; g++) {
      if ((g == PLAN_TPO_QKV_WGRAD || g == PLAN_TPO_FC1_WGRAD) && plan_tpo_dgrad_scatters(p, g - 1)) {
        fprintf(out, "%s %s none", g % 5 == 0 ? "\n         " : ";", plan_tpo_gemm_name(g));
        continue;
      }
      fprintf(out, "%s %s%s %s/%d/%d", g % 5 == 0 ? "\n         " : ";", plan_tpo_gemm_name(g),
              p->tpo_cfg[g].given ? "*" : "", plan_tpo_method_name(plan_tpo_method_of(p, g)), plan_tpo_num_sm(p, g),
              plan_tpo_splits(p, g));
    }
    fprintf(out, "\n");
  }
  fprintf(out, "gradients %s, %d bytes per parameter in memory and in DP reductions\n",
          p->grad_reduce_bf16 ? "bf16 (grad_reduce_in_fp32 false)" : "fp32", plan_grad_bytes(p));
  fprintf(out, "batch     %lld sequences of %d tokens = micro-batch %d x %d micro-batches x dp %d (%.2f M tokens)\n",
          p->global_batch, p->seq, p->micro_batch, mb, p->dp, (double)p->global_batch * p->seq / 1e6);
  double v = p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? p->vpp : 1;
  fprintf(out, "schedule  %s, ideal pipeline bubble (p-1)/(v*m+p-1) = %.2f %%\n", plan_schedule_name(p->schedule),
          100.0 * (p->pp - 1) / (v * mb + p->pp - 1));
  fprintf(out, "codec     messages under %.0f bytes travel uncompressed; DP buckets of %.0f MB\n", p->codec_min_bytes,
          p->dp_bucket_bytes / 1e6);
  for (int t = 0; t < traffic_classes(p); t++)
    if (listed(p, t)) print_codec(out, plan_traffic_name((plan_traffic)t), &p->codec[t]);
  if (model_is_moe(&p->model))
    fprintf(out, "experts   %d routed (top %d) + %d shared, %d dense layers; ep %d x expert_tp %d x expert-dp %d; "
                 "%s; busiest EP rank's load x%.2f of the mean (moe_imbalance %.2f); %s dispatcher, %.2f copies "
                 "a token\n",
            p->model.experts, p->model.top_k, p->model.shared_experts, p->model.dense_layers, p->ep,
            p->etp > 0 ? p->etp : p->tp, plan_edp(p), p->capacity_factor > 0 ? "capacity factor" : "dropless",
            plan_moe_max_load(p), p->moe_imbalance, p->moe_flex ? "flex (DeepEP)" : "alltoall",
            plan_moe_dispatch_copies(p));
  double flops = plan_model_flops(p);
  fprintf(out, "work      %.3f PFLOP model FLOPs per iteration (GEMMs and full-square attention, 3 passes), %.1f TFLOP per GPU\n", flops / 1e15,
          flops / plan_world_size(p) / 1e12);
}

static void print_memory(const plan *p, FILE *out) {
  fprintf(out, "\nmemory per GPU (GiB)    weights  gradients  optimizer  activations  overhead    total   of %.0f GiB HBM\n",
          p->cluster.gpu.hbm_gib);
  for (int s = 0; s < p->pp; s++) {
    plan_memory m;
    if (plan_memory_of_stage(p, s, &m)) continue;
    fprintf(out, "  stage %-4d %16.2f %10.2f %10.2f %12.2f %9.2f %8.2f   %5.1f %%\n", s, m.weights / GIB,
            m.gradients / GIB, m.optimizer / GIB, m.activations / GIB, m.overhead / GIB, m.total / GIB,
            100.0 * m.total / (p->cluster.gpu.hbm_gib * GIB));
  }
  double codec = 0;
  for (int s = 0; s < p->pp; s++) codec = fmax(codec, plan_codec_buffer_bytes(p, s));
  fprintf(out, "  overhead: CUDA context, cuBLASLt, one NCCL communicator per parallel dimension (measured on H200,\n"
               "  plan/plan_memory.c)%s\n",
          p->attention_backend != PLAN_ATTENTION_UNFUSED ? ", the fused attention backward's fp32 workspace" : "");
  if (codec > 0)
    fprintf(out, "  and the compressed collectives' encoded buffers, %.2f GiB (plan/plan_memory_codec.c)\n", codec / GIB);
  const double f = plan_alloc_reserve(p);
  fprintf(out, "  and a caching allocator's reserve, alloc_reserve %g x the activations (%s; --alloc-reserve)\n", f,
          !p->alloc_reserve_given ? "the default" : "the plan's or the command line's");
}

typedef struct {
  int ops, by_kind[4], by_stream[PLAN_STREAM_COUNT];
  double bytes[PLAN_TRAFFIC_COUNT], wire[PLAN_TRAFFIC_COUNT];
  double flops;
  double build_ms;
} stage_stats;

static int stage_program_stats(const plan *p, int stage, stage_stats *st, ts_err *e) {
  *st = (stage_stats){0};
  int rank = plan_rank_of(p, (plan_coord){0, 0, stage});
  plan_program prog;
  double t0 = now_s();
  if (plan_build_program(p, rank, &prog, e)) return -1;
  st->build_ms = 1e3 * (now_s() - t0);
  st->ops = prog.n;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    st->by_kind[op->kind]++;
    st->by_stream[op->stream]++;
    if (op->kind == PLAN_OP_COMPUTE) {
      st->flops += op->flops;
    } else if (op->kind != PLAN_OP_RECV) { /* count a message once, at its sender */
      st->bytes[op->traffic] += op->bytes;
      st->wire[op->traffic] += op->wire_bytes;
    }
  }
  plan_program_free(&prog);
  return 0;
}

int plan_print_summary(const plan *p, FILE *out, ts_err *e) {
  print_header(p, out);
  print_memory(p, out);
  stage_stats *st = calloc((size_t)p->pp, sizeof *st);
  if (!st) return ts_fail_sys(e, "plan: out of memory");
  for (int s = 0; s < p->pp; s++)
    if (stage_program_stats(p, s, &st[s], e)) {
      free(st);
      return -1;
    }
  fprintf(out, "\nprograms (rank with dp 0, tp 0 of each stage; every rank of a stage runs the same shape)\n");
  fprintf(out, "  stage   rank      ops  compute  collect     send     recv | stream: compute       tp       pp       dp"
               " | TFLOP  build ms\n");
  for (int s = 0; s < p->pp; s++)
    fprintf(out, "  %-5d %6d %8d %8d %8d %8d %8d |        %8d %8d %8d %8d | %6.1f %8.2f\n", s,
            plan_rank_of(p, (plan_coord){0, 0, s}), st[s].ops, st[s].by_kind[PLAN_OP_COMPUTE],
            st[s].by_kind[PLAN_OP_COLLECTIVE], st[s].by_kind[PLAN_OP_SEND], st[s].by_kind[PLAN_OP_RECV],
            st[s].by_stream[PLAN_STREAM_COMPUTE], st[s].by_stream[PLAN_STREAM_TP], st[s].by_stream[PLAN_STREAM_PP],
            st[s].by_stream[PLAN_STREAM_DP], st[s].flops / 1e12, st[s].build_ms);

  fprintf(out, "\ntraffic per GPU and iteration, GB: payload -> on the wire (collectives: nccl-tests buffer size;\n"
               "send/recv: counted at the sender)\n");
  fprintf(out, "  stage          tp_fwd                tp_bwd                    pp                    dp%s%s\n",
          model_is_moe(&p->model) ? "                    ep" : "", plan_cp(p) > 1 ? "                    cp" : "");
  double total_b[PLAN_TRAFFIC_COUNT] = {0}, total_w[PLAN_TRAFFIC_COUNT] = {0};
  for (int s = 0; s < p->pp; s++) {
    fprintf(out, "  %-5d", s);
    for (int t = 0; t < traffic_classes(p); t++) {
      if (!listed(p, t)) continue;
      fprintf(out, "  %9.3f -> %9.3f", st[s].bytes[t] / 1e9, st[s].wire[t] / 1e9);
      total_b[t] += st[s].bytes[t] * p->dp * p->tp * plan_cp(p);
      total_w[t] += st[s].wire[t] * p->dp * p->tp * plan_cp(p);
    }
    fputc('\n', out);
  }
  fprintf(out, "  all GPUs, TB");
  for (int t = 0; t < traffic_classes(p); t++) {
    if (!listed(p, t)) continue;
    double ratio = total_w[t] > 0 ? total_b[t] / total_w[t] : 1.0;
    fprintf(out, "  %7.3f -> %7.3f (%4.2fx)", total_b[t] / 1e12, total_w[t] / 1e12, ratio);
  }
  fputc('\n', out);
  free(st);
  return 0;
}
