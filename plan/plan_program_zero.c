/* plan_program_zero.c — data-parallel sharding (ZeRO-1/2/3) and the
 * distributed optimizer's overlaps: the plan fields, their rules, and what
 * each model chunk's parameters are and how they fall into buckets. The ops
 * themselves are emitted by plan_program.c at the points these describe.
 *
 * Megatron-LM's names (megatron/training/arguments.py): --use-distributed-
 * optimizer is "optim" (ZeRO-1); --data-parallel-sharding-strategy
 * {no_shard, optim, optim_grads, optim_grads_params} (Megatron-FSDP);
 * --overlap-grad-reduce; --overlap-param-gather, which Megatron accepts only
 * with the distributed optimizer (or FSDP) and with --overlap-grad-reduce;
 * optim_grads turns on overlap-grad-reduce, optim_grads_params both. */
#include <string.h>

#include "plan.h"
#include "plan_internal.h"
#include "ts_json.h"

static const char *const strategy_names[] = {"no_shard", "optim", "optim_grads", "optim_grads_params", NULL};

int plan_load_zero_fields(json_t *layout, const char *file, plan *p, ts_err *e) {
  int strategy;
  if (tsj_enum_opt(layout, "data_parallel_sharding_strategy", strategy_names, p->zero1 ? 1 : 0, &strategy, file,
                   "layout", e))
    return -1;
  if (json_object_get(layout, "zero1") && (strategy >= 1) != p->zero1)
    return ts_fail(e, file, "layout.data_parallel_sharding_strategy",
                   "\"%s\" contradicts \"zero1\": %s (every strategy but no_shard shards the optimizer)",
                   strategy_names[strategy], p->zero1 ? "true" : "false");
  p->zero_stage = strategy;
  p->zero1 = strategy >= 1;
  /* Megatron turns the overlaps on for the FSDP strategies */
  bool grad_overlap;
  if (tsj_bool_opt(layout, "overlap_grad_reduce", true, &grad_overlap, file, "layout", e)) return -1;
  p->overlap_grad_reduce_off = !grad_overlap;
  if (tsj_bool_opt(layout, "overlap_param_gather", strategy == 3, &p->overlap_param_gather, file, "layout", e))
    return -1;
  long long v;
  if (tsj_int_opt(layout, "zero3_prefetch_layers", 0, 64, 1, &v, file, "layout", e)) return -1;
  p->zero3_prefetch = (int)v;
  if (json_object_get(layout, "zero3_prefetch_layers") && strategy != 3)
    return ts_fail(e, file, "layout.zero3_prefetch_layers",
                   "applies to data_parallel_sharding_strategy \"optim_grads_params\" only");
  return 0;
}

int plan_validate_zero(const plan *p, ts_err *e) {
  const char *f = p->path;
  if (p->zero_stage < 0 || p->zero_stage > 3)
    return ts_fail(e, f, "layout.data_parallel_sharding_strategy", "stage %d is not 0..3", p->zero_stage);
  /* a plan built in code (the layout search) may set zero1 alone: that is "optim" */
  if (p->zero_stage >= 1 && !p->zero1)
    return ts_fail(e, f, "layout.zero1", "false does not match data_parallel_sharding_strategy (stage %d)",
                   p->zero_stage);
  if (p->overlap_param_gather && !p->zero1)
    return ts_fail(e, f, "layout.overlap_param_gather",
                   "true needs the distributed optimizer (\"zero1\": true or a sharding strategy), as in Megatron-LM");
  if (p->overlap_param_gather && p->overlap_grad_reduce_off)
    return ts_fail(e, f, "layout.overlap_param_gather",
                   "true needs overlap_grad_reduce true (Megatron-LM: \"Must use --overlap-param-gather with "
                   "--overlap-grad-reduce\")");
  if (p->zero_stage >= 2 && p->overlap_grad_reduce_off)
    return ts_fail(e, f, "layout.overlap_grad_reduce",
                   "false with data_parallel_sharding_strategy \"%s\": sharded gradients are reduce-scattered "
                   "during the backward of every micro-batch (Megatron turns the overlap on)",
                   strategy_names[p->zero_stage]);
  return 0;
}

/* ---- parameters of the units of a chunk ---- */

/* Parameters of this rank's shard of the ops one model lister returns. */
typedef int (*ops_lister)(const model_config *, const model_shard *, model_op *, int, ts_err *);
static double listed_params(const plan *p, ops_lister list) {
  model_shard s = plan_shard(p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = list(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  if (n < 0) return -1;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += ops[i].params;
  return sum;
}

double plan_layer_params(const plan *p) { return listed_params(p, model_layer_ops); }

double plan_embedding_params(const plan *p) { return listed_params(p, model_embedding_ops); }

double plan_head_params(const plan *p) {
  double head = listed_params(p, model_output_ops);
  if (head < 0) return -1;
  if (p->model.tied_embeddings && p->pp > 1) head += (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
  return head;
}

/* Buckets close as plan_program.c's bucket_add closes them: walking the units
 * backward, a bucket closes once grad_bytes x its parameters reach
 * dp_bucket_bytes, and the chunk's last one closes at the end. One unit of
 * the walk: adds its parameters to the open bucket; returns 1 when that
 * closes it. */
static int bucket_walk(const plan *p, double params, double *open) {
  *open += params;
  if (plan_grad_bytes(p) * *open < p->dp_bucket_bytes) return 0;
  *open = 0;
  return 1;
}

/* One bucket closed by the walk: stored at out[n] when it fits. */
static void bucket_store(plan_zero_bucket *out, int cap, int n, double params, int layers, int chunk) {
  if (out && n < cap) out[n] = (plan_zero_bucket){.params = params, .layers = layers, .chunk = chunk};
}

int plan_zero_stage_bucket_list(const plan *p, int stage, plan_zero_bucket *out, int cap) {
  double layer = plan_layer_params(p), emb = plan_embedding_params(p), head = plan_head_params(p);
  if (layer < 0 || emb < 0 || head < 0) return -1;
  return plan_zero_bucket_list_of(p, stage, layer, emb, head, out, cap);
}

int plan_zero_bucket_list_of(const plan *p, int stage, double layer, double emb, double head, plan_zero_bucket *out,
                             int cap) {
  const int V = p->pp * p->vpp;
  int n = 0;
  for (int chunk = 0; chunk < p->vpp; chunk++) {
    /* the chunk's own layers: accounted embedding / loss leave the first and last chunk one fewer */
    const int layers = plan_vchunk_layers(p, stage, chunk);
    const int v = plan_virtual_stage(p, stage, chunk), first = n, units = (v == V - 1) + layers + (v == 0);
    double open = 0, sum = 0;
    int in = 0; /* layers in the open bucket */
    for (int k = 0; k < units; k++) { /* backward: the head, the layers, the embedding */
      const bool is_head = v == V - 1 && k == 0, is_emb = v == 0 && k == units - 1;
      const double params = is_head ? head : is_emb ? emb : layer;
      sum += params;
      in += !is_head && !is_emb;
      if (bucket_walk(p, params, &open)) bucket_store(out, cap, n++, sum, in, chunk), sum = 0, in = 0;
    }
    if (open > 0) bucket_store(out, cap, n++, sum, in, chunk);
    if (!out || n > cap) continue;
    for (int x = first, y = n - 1; x < y; x++, y--) { /* forward order */
      plan_zero_bucket t = out[x];
      out[x] = out[y], out[y] = t;
    }
    if (n > first) out[n - 1].chunk_last = true;
  }
  return n;
}

int plan_zero_stage_buckets(const plan *p, int stage) { return plan_zero_stage_bucket_list(p, stage, NULL, 0); }

int plan_zero_chunk_units(const plan *p, int stage, int chunk, plan_zero_chunk *z, ts_err *e) {
  memset(z, 0, sizeof *z);
  const int v = plan_virtual_stage(p, stage, chunk), V = p->pp * p->vpp, layers = plan_vchunk_layers(p, stage, chunk);
  z->emb = v == 0;
  z->head = v == V - 1;
  z->n = z->emb + layers + z->head;
  z->first_layer = plan_chunk_first_layer(p, stage, chunk);
  if (z->n > PLAN_ZERO_MAX_UNITS)
    return ts_fail(e, p->path, "layout", "%d layers in one model chunk: more than the %d data-parallel sharding "
                   "handles", layers, PLAN_ZERO_MAX_UNITS - 2);
  double layer = plan_layer_params(p), emb = plan_embedding_params(p), head = plan_head_params(p);
  if (layer < 0 || emb < 0 || head < 0) return ts_fail_sys(e, "plan: the model's ops cannot be listed");
  for (int u = 0; u < z->n; u++) z->params[u] = layer;
  if (z->emb) z->params[0] = emb;
  if (z->head) z->params[z->n - 1] = head;
  /* backward order: bucket k (0 = first closed) */
  double open = 0;
  int k = 0;
  for (int u = z->n - 1; u >= 0; u--) {
    z->bucket[u] = k;
    k += bucket_walk(p, z->params[u], &open);
  }
  z->buckets = open > 0 ? k + 1 : k;
  for (int u = 0; u < z->n; u++) z->bucket[u] = z->buckets - 1 - z->bucket[u];
  return 0;
}

/* ---- memory ---- */

/* ZeRO-2 keeps the gradient shard plus the bucket being filled and the one
 * being reduce-scattered; ZeRO-3 keeps the parameter shard plus the layer in
 * use and the prefetched ones, gathered, and for the gradients the shard plus
 * a layer's full gradient being computed and one being reduce-scattered.
 * `params` is what the stage holds unsharded. */
void plan_zero_memory(const plan *p, int stage, double params, plan_memory *m) {
  if (p->zero_stage < 2 || plan_dp_shards(p) < 2) return;
  const int gb = plan_grad_bytes(p);
  double unit = plan_layer_params(p);
  if (stage == 0 && plan_embedding_params(p) > unit) unit = plan_embedding_params(p);
  if (stage == p->pp - 1 && plan_head_params(p) > unit) unit = plan_head_params(p);
  if (unit > params) unit = params;
  if (p->zero_stage == 2) {
    double bucket = p->dp_bucket_bytes < gb * params ? p->dp_bucket_bytes : gb * params;
    m->gradients = gb * params / plan_dp_shards(p) + 2.0 * bucket;
  } else {
    m->weights = 2.0 * params / plan_dp_shards(p) + (p->zero3_prefetch + 1.0) * 2.0 * unit;
    m->gradients = gb * params / plan_dp_shards(p) + 2.0 * gb * unit;
  }
  if (m->gradients > gb * params) m->gradients = gb * params;
  if (m->weights > 2.0 * params) m->weights = 2.0 * params;
}
