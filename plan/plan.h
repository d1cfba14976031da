/* plan.h — a training plan (model x cluster x layout x codec) and the ordered
 * program of ops each rank runs.
 *
 * This is the contract between the two halves: the simulator (sim/) and the
 * GPU executor (runtime/) both walk the programs built here, op by op, so a
 * prediction and a measurement differ only in how each op's time is found.
 * Plain C: no CUDA, no SimGrid. */
#ifndef PLAN_H
#define PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "topo.h"
#include "ts_error.h"

typedef enum { PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B } plan_schedule;

/* Which axis varies fastest when ranks are numbered: TP is always innermost
 * (fastest), so a TP group stays inside a node. */
typedef enum { PLAN_ORDER_TP_DP_PP, PLAN_ORDER_TP_PP_DP } plan_order;

typedef enum { PLAN_CODEC_NONE, PLAN_CODEC_TACO, PLAN_CODEC_CAAT, PLAN_CODEC_TACO_CAAT } plan_codec_kind;
typedef enum { PLAN_FP8_E4M3, PLAN_FP8_E5M2 } plan_fp8;

typedef struct {
  plan_codec_kind kind;
  int group;    /* TACO group size G (= Hadamard size): 32, 64, 128, 256, 512 */
  plan_fp8 fp8; /* TACO element format */
  double p;     /* CAAT-Net fraction of hidden channels synchronized, (0, 1] */
} plan_codec;

/* TACO wire bytes for `bytes` of bf16 payload: N fp8 elements + 8 bytes of
 * scales per group of G, where N = bytes / 2. */
double plan_taco_wire_bytes(double bf16_bytes, int group);

typedef enum { PLAN_TRAFFIC_TP_FWD, PLAN_TRAFFIC_TP_BWD, PLAN_TRAFFIC_PP, PLAN_TRAFFIC_DP, PLAN_TRAFFIC_COUNT } plan_traffic;

typedef struct {
  char path[512];     /* the plan file, as given */
  char name[128];
  model_config model;
  topo_cluster cluster;
  int dp, tp, pp;
  int vpp;            /* virtual stages per pipeline rank (interleaved 1F1B); 1 otherwise */
  bool sequence_parallel;
  plan_order order;
  bool zero1;         /* distributed optimizer: reduce-scatter grads, all-gather params */
  model_recompute recompute;
  int micro_batch;
  long long global_batch;
  int seq;
  int layers;         /* model.layers, or the plan's layers_override */
  plan_schedule schedule;
  plan_codec codec[PLAN_TRAFFIC_COUNT];
  double codec_min_bytes; /* messages smaller than this travel uncompressed */
  double dp_bucket_bytes; /* gradient bucket size for DP reduction overlap */
} plan;

/* Loads a plan file; the model and cluster it names are looked up in
 * models_dir / topologies_dir (NULL: the compiled-in defaults). Validates every
 * rule (TP divides heads and KV heads, PP <= layers, global batch divisible by
 * micro x DP, DP.TP.PP <= GPUs, memory fits in HBM, codec parameters valid). */
int plan_load(const char *path, const char *models_dir, const char *topologies_dir, plan *p, ts_err *e);
int plan_from_json_text(const char *text, size_t len, const char *what, const char *models_dir,
                        const char *topologies_dir, plan *p, ts_err *e);
int plan_validate(const plan *p, ts_err *e);

static inline int plan_world_size(const plan *p) { return p->dp * p->tp * p->pp; }
static inline int plan_micro_batches(const plan *p) {
  return (int)(p->global_batch / ((long long)p->micro_batch * p->dp));
}

/* ---- placement: rank r runs on GPU r of the cluster ---- */
typedef struct { int dp, tp, pp; } plan_coord;
plan_coord plan_coord_of(const plan *p, int rank);
int plan_rank_of(const plan *p, plan_coord c);

typedef enum { PLAN_GROUP_TP, PLAN_GROUP_DP, PLAN_GROUP_PP, PLAN_GROUP_COUNT } plan_group_kind;
/* Members of rank's group of that kind, in ring order; returns the count. */
int plan_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap);

/* ---- programs ---- */
typedef enum { PLAN_OP_COMPUTE, PLAN_OP_COLLECTIVE, PLAN_OP_SEND, PLAN_OP_RECV } plan_op_kind;

/* Streams a rank runs concurrently; ops on one stream run in program order. */
typedef enum { PLAN_STREAM_COMPUTE, PLAN_STREAM_TP, PLAN_STREAM_PP, PLAN_STREAM_DP, PLAN_STREAM_COUNT } plan_stream;

typedef enum { PLAN_COLL_ALLREDUCE, PLAN_COLL_ALLGATHER, PLAN_COLL_REDUCESCATTER, PLAN_COLL_ALLTOALL } plan_coll;

typedef enum {
  PLAN_PHASE_FWD,
  PLAN_PHASE_BWD,
  PLAN_PHASE_RECOMPUTE,
  PLAN_PHASE_OPTIMIZER,
} plan_phase;

/* Compute ops that are not one of the layer's model ops. */
enum {
  PLAN_MOP_EMBEDDING = -2,
  PLAN_MOP_LOSS = -3,      /* output GEMM + cross-entropy on the last stage */
  PLAN_MOP_OPTIMIZER = -4, /* AdamW over this rank's parameter shard */
};

#define PLAN_MAX_DEPS 3

typedef struct {
  uint8_t kind;     /* plan_op_kind */
  uint8_t stream;   /* plan_stream */
  uint8_t phase;    /* plan_phase */
  uint8_t coll;     /* plan_coll, for collectives */
  uint8_t group;    /* plan_group_kind, for collectives */
  uint8_t traffic;  /* plan_traffic, for communication */
  int16_t model_op; /* index into model_layer_ops() of this plan's shard, or PLAN_MOP_* */
  int32_t layer;    /* global layer index, or -1 */
  int32_t micro;    /* micro-batch index, or -1 */
  int32_t chunk;    /* model chunk (virtual stage) on this rank, 0..vpp-1 */
  int32_t peer;     /* send/recv: the other rank */
  int32_t tag;      /* send/recv: equal on the matching send and recv */
  int32_t dep[PLAN_MAX_DEPS]; /* indices of earlier ops of this program that must finish first, -1 = none */
  double flops;     /* compute: FLOPs on this GPU */
  double bytes;     /* compute: device-memory bytes; comm: payload bytes per rank before the codec */
  double wire_bytes;/* comm: payload bytes per rank after the codec (== bytes when uncompressed) */
  plan_codec codec; /* codec applied to this message (kind NONE when none) */
} plan_op;

typedef struct {
  int rank;
  int n, cap;
  plan_op *ops;
} plan_program;

/* Builds rank's whole program for one iteration. Free with plan_program_free. */
int plan_build_program(const plan *p, int rank, plan_program *prog, ts_err *e);
void plan_program_free(plan_program *prog);

/* "layer3.mb5.fwd.attn_out.allreduce" — for traces and reports. */
void plan_op_name(const plan *p, const plan_op *op, char *buf, size_t cap);

/* Memory per GPU (bytes), the largest over ranks, with its parts. */
typedef struct {
  double weights, gradients, optimizer, activations, total;
} plan_memory;
int plan_memory_per_gpu(const plan *p, plan_memory *m);

/* Model FLOPs of one iteration across all GPUs (Megatron-LM's count). */
double plan_model_flops(const plan *p);

/* `tacosim plan` summary: per-rank op counts, bytes per traffic class with and
 * without the codec, memory per GPU against HBM. */
int plan_print_summary(const plan *p, FILE *out, ts_err *e);

#endif
