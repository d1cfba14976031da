/* plan_stages.c — how many layers each pipeline stage and model chunk holds.
 *
 * Even (the default): every one of the pp * vpp virtual stages holds
 * layers / (pp * vpp) layers. Uneven (Megatron-LM's
 * --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers,
 * plan fields layout.decoder_first_pipeline_num_layers /
 * decoder_last_pipeline_num_layers): the first and/or the last stage hold the
 * layers given, the other stages share the rest evenly. With interleaving
 * each stage's layers split evenly into its vpp chunks, and virtual stage
 * v = c * pp + s follows v - 1 in layer order, as in Megatron-Core's
 * get_transformer_layer_offset. Accounted (layout.account_for_embedding_in_
 * pipeline_split / account_for_loss_in_pipeline_split): the layers plus the
 * accounted embedding and loss split evenly into the pp * vpp virtual stages,
 * the first virtual stage holding one layer fewer for the embedding, the last
 * one fewer for the loss (Megatron-Core's get_num_layers_to_build). */
#include "plan.h"

static bool accounted(const plan *p) { return p->account_embedding || p->account_loss; }

/* Layer slots (layers + accounted units) of each virtual stage. */
static int slots_per_vstage(const plan *p) {
  return (p->layers + p->account_embedding + p->account_loss) / (p->pp * p->vpp);
}

int plan_vchunk_layers(const plan *p, int stage, int chunk) {
  if (!accounted(p)) return plan_chunk_layers(p, stage);
  if (stage < 0 || stage >= p->pp || chunk < 0 || chunk >= p->vpp) return -1;
  int v = plan_virtual_stage(p, stage, chunk), n = slots_per_vstage(p);
  if (v == 0 && p->account_embedding) n--;
  if (v == p->pp * p->vpp - 1 && p->account_loss) n--;
  return n;
}

bool plan_uneven_stages(const plan *p) { return p->first_stage_layers > 0 || p->last_stage_layers > 0; }

/* Stages that share the layers left after the first and the last. */
static int middle_stages(const plan *p) {
  return p->pp - (p->first_stage_layers > 0) - (p->last_stage_layers > 0);
}

int plan_stage_layers(const plan *p, int stage) {
  if (stage < 0 || stage >= p->pp) return -1;
  if (accounted(p)) {
    int sum = 0;
    for (int c = 0; c < p->vpp; c++) sum += plan_vchunk_layers(p, stage, c);
    return sum;
  }
  if (!plan_uneven_stages(p)) return p->layers / p->pp;
  if (stage == 0 && p->first_stage_layers > 0) return p->first_stage_layers;
  if (stage == p->pp - 1 && p->last_stage_layers > 0) return p->last_stage_layers;
  int mid = middle_stages(p);
  return mid > 0 ? (p->layers - p->first_stage_layers - p->last_stage_layers) / mid : 0;
}

int plan_chunk_layers(const plan *p, int stage) {
  if (accounted(p)) return stage < 0 || stage >= p->pp ? -1 : slots_per_vstage(p); /* the most a chunk holds */
  int l = plan_stage_layers(p, stage);
  return l < 0 ? -1 : l / p->vpp;
}

int plan_chunk_first_layer(const plan *p, int stage, int chunk) {
  if (accounted(p)) {
    int first = 0, v = plan_virtual_stage(p, stage, chunk);
    for (int u = 0; u < v; u++) first += plan_vchunk_layers(p, u % p->pp, u / p->pp);
    return first;
  }
  if (!plan_uneven_stages(p)) return plan_virtual_stage(p, stage, chunk) * plan_layers_per_chunk(p);
  int first = chunk * (p->layers / p->vpp);
  for (int s = 0; s < stage; s++) first += plan_chunk_layers(p, s);
  return first;
}

int plan_max_stage_layers(const plan *p) {
  int most = 0;
  for (int s = 0; s < p->pp; s++) {
    int l = plan_stage_layers(p, s);
    if (l > most) most = l;
  }
  return most;
}

/* The rules (plan_validate): each count in 1..layers - 1, pp >= 2, the
 * middle stages get an equal share of at least one layer (none left when no
 * stage is in the middle), and each stage's count splits into vpp chunks. */
int plan_validate_stages(const plan *p, ts_err *e) {
  const char *f = p->path;
  const char *ff = "layout.decoder_first_pipeline_num_layers", *fl = "layout.decoder_last_pipeline_num_layers";
  if (accounted(p)) {
    const char *fa = p->account_embedding ? "layout.account_for_embedding_in_pipeline_split"
                                          : "layout.account_for_loss_in_pipeline_split";
    if (plan_uneven_stages(p))
      return ts_fail(e, f, fa, "with decoder_first/last_pipeline_num_layers: not modelled together");
    long long slots = (long long)p->layers + p->account_embedding + p->account_loss, V = (long long)p->pp * p->vpp;
    if (slots % V)
      return ts_fail(e, f, fa, "%d layers + %d accounted = %lld slots do not split evenly into pp %d x vpp %d model "
                     "chunks", p->layers, p->account_embedding + p->account_loss, slots, p->pp, p->vpp);
    if (slots / V < 1 + (V == 1 && p->account_embedding && p->account_loss))
      return ts_fail(e, f, fa, "pp %d x vpp %d model chunks leave no layer for the %d layers", p->pp, p->vpp,
                     p->layers);
    return 0;
  }
  if (!plan_uneven_stages(p)) {
    if ((long long)p->pp * p->vpp > p->layers || p->layers % (p->pp * p->vpp))
      return ts_fail(e, f, p->vpp > 1 ? "layout.vpp" : "layout.pp",
                     "%d layers do not split evenly into pp %d x vpp %d model chunks (uneven stages: "
                     "layout.decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers)",
                     p->layers, p->pp, p->vpp);
    return 0;
  }
  const char *which = p->first_stage_layers > 0 ? ff : fl;
  if (p->pp < 2) return ts_fail(e, f, which, "uneven pipeline stages need pp >= 2");
  if (p->first_stage_layers >= p->layers)
    return ts_fail(e, f, ff, "%d must be less than the %d layers", p->first_stage_layers, p->layers);
  if (p->last_stage_layers >= p->layers)
    return ts_fail(e, f, fl, "%d must be less than the %d layers", p->last_stage_layers, p->layers);
  int rest = p->layers - p->first_stage_layers - p->last_stage_layers, mid = middle_stages(p);
  if (rest < 0)
    return ts_fail(e, f, which, "first %d + last %d exceed the %d layers", p->first_stage_layers,
                   p->last_stage_layers, p->layers);
  if (mid == 0 && rest != 0)
    return ts_fail(e, f, which, "pp %d has no middle stage for the %d layers left after first %d + last %d", p->pp,
                   rest, p->first_stage_layers, p->last_stage_layers);
  if (mid > 0 && (rest < mid || rest % mid))
    return ts_fail(e, f, which, "the %d layers left do not split evenly into the %d middle stages (pp %d)", rest,
                   mid, p->pp);
  for (int s = 0; s < p->pp; s++)
    if (plan_stage_layers(p, s) % p->vpp)
      return ts_fail(e, f, s == 0 ? ff : s == p->pp - 1 ? fl : "layout.vpp",
                     "stage %d's %d layers do not split into vpp %d model chunks", s, plan_stage_layers(p, s),
                     p->vpp);
  return 0;
}
