/* search_report.c — the search's table, JSON and CSV. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

/* A recipe as --fp8 names it ("none": BF16). */
static const char *fp8_name(int recipe) { return recipe == PLAN_FP8_OFF ? "none" : plan_fp8_recipe_names[recipe]; }

/* "none,tensorwise" of a mask of recipes. */
static void fp8_list(unsigned mask, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++)
    if (mask & (1u << f) && n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "," : "", fp8_name(f));
}

/* Whether FP8 is in play (a recipe other than BF16 tried or skipped): the tables then get an fp8 column. */
static bool fp8_shown(const sim_search_result *r) {
  return ((r->fp8_recipes | r->fp8_skipped) & ~(1u << PLAN_FP8_OFF)) != 0;
}

/* The layout in the tables: the FP8 recipe has a column of its own (fp8_shown), not the text. */
static void layout_text(const sim_search_layout *lv, char *buf, size_t cap) {
  sim_search_layout bf16 = *lv;
  bf16.fp8 = PLAN_FP8_OFF;
  const sim_search_layout *l = &bf16;
  snprintf(buf, cap, "tp%d pp%d vpp%d dp%d mb%d%s%s rc=%s", l->tp, l->pp, l->vpp, l->dp, l->micro,
           l->sequence_parallel ? " sp" : "", l->zero1 && l->zero_stage < 2 ? " zero1" : "", plan_recompute_name(l->recompute));
  if (l->ep > 1) { /* MoE */
    size_t used = strlen(buf);
    if (used < cap) snprintf(buf + used, cap - used, " ep%d", l->ep);
  }
  size_t used = strlen(buf);
  if (used < cap) sim_search_layout_suffix(l, buf + used, cap - used);
  for (char *c = buf + used; *c; c++) /* " cp4 zero2 opg tpo" in the table, "-cp4-zero2-opg-tpo" in plan names */
    if (*c == '-') *c = ' ';
}

/* The layout column's width: the longest layout the report prints (candidates and, with nothing simulated, the
 * estimate ranking), at least 46 characters. */
static int layout_width(const sim_search_result *r) {
  int w = 46;
  char lt[96];
  for (int i = 0; i < r->n; i++) {
    layout_text(&r->cands[i].layout, lt, sizeof lt);
    if ((int)strlen(lt) > w) w = (int)strlen(lt);
  }
  for (int i = 0; i < r->n_best_est; i++) {
    layout_text(&r->best_est[i].layout, lt, sizeof lt);
    if ((int)strlen(lt) > w) w = (int)strlen(lt);
  }
  return w;
}

/* The best simulated row of FP8 recipe f (any codec), or NULL. */
static const sim_search_candidate *best_of_recipe(const sim_search_result *r, int f) {
  for (int i = 0; i < r->n; i++) /* (r->cands best simulated first) */
    if (r->cands[i].simulated && !r->cands[i].sample && r->cands[i].layout.fp8 == f) return &r->cands[i];
  return NULL;
}

/* What FP8 buys: each recipe's best simulated layout against the best BF16 one. */
static void print_fp8_bests(const sim_search_result *r, FILE *out) {
  if (r->n == 0) return;
  const int lw = layout_width(r);
  const sim_search_candidate *bf16 = best_of_recipe(r, PLAN_FP8_OFF);
  fprintf(out, "\nbest simulated layout of each FP8 recipe, and its speed-up over the best BF16 (fp8 none) layout\n");
  fprintf(out, "%-10s %-*s %-9s %11s %8s\n", "fp8", lw, "layout", "codec", "sim tok/s", "speed-up");
  for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++) {
    if (!(r->fp8_recipes & (1u << f))) continue;
    const sim_search_candidate *k = best_of_recipe(r, f);
    if (!k) {
      fprintf(out, "%-10s %-*s\n", fp8_name(f), lw, "(none simulated)");
      continue;
    }
    char lt[96];
    layout_text(&k->layout, lt, sizeof lt);
    fprintf(out, "%-10s %-*s %-9s %11.0f", fp8_name(f), lw, lt, sim_search_codec_name(k->codec), k->sim_tokens_per_s);
    if (bf16)
      fprintf(out, " %7.3fx\n", k->sim_tokens_per_s / bf16->sim_tokens_per_s);
    else
      fprintf(out, " %8s\n", "-");
  }
}

void sim_search_print(const sim_search_result *r, const sim_search_options *o, FILE *out) {
  const int lw = layout_width(r);
  fprintf(out, "search        %s on %d GPUs of %s, seq %d, global batch %lld\n", o->model, r->gpus, o->cluster,
          r->seq, r->global_batch);
  fprintf(out, "calibration   %s\n", r->calibration);
  if (o->host_framework != PLAN_HOST_EXECUTOR)
    fprintf(out, "host          %s's measured host time (the calibration's framework_host section)\n",
            plan_host_framework_names[o->host_framework]);
  bool show_fp8 = fp8_shown(r);
  if (show_fp8) {
    char tried[64], skipped[64];
    fp8_list(r->fp8_recipes, tried, sizeof tried);
    fp8_list(r->fp8_skipped, skipped, sizeof skipped);
    fprintf(out, "fp8           every layout under each recipe of %s (--fp8%s; the linear GEMMs in FP8)%s\n", tried,
            o->fp8_search ? " search" : "", o->fp8_param_gather ? ", FP8 parameter all-gather under ZeRO" : "");
    if (r->fp8_skipped)
      fprintf(out, "              skipped: %s, which the %s cannot run (no FP8 tensor cores, or no MXFP8 in its "
                   "catalogue entry)\n", skipped, r->gpu);
    if (r->calibration[0] && (r->fp8_recipes & ~(1u << PLAN_FP8_OFF))) {
      if (r->gemm_fp8_points > 0)
        fprintf(out, "              FP8 GEMMs: the calibration's %d measured \"gemm_fp8\" shapes; every other shape its "
                     "time interpolated in m between two of them of the same n, k, else its BF16 time times the FP8 / BF16 ratio measured at "
                     "the nearest m of the same n, k (or k of the same m, n), else moved to the FP8 peak (datasheet ratio, not "
                     "measured)\n", r->gemm_fp8_points);
      else
        fprintf(out, "              FP8 GEMMs: no \"gemm_fp8\" table in the calibration: the BF16 GEMM times moved to the "
                     "FP8 peak (datasheet ratio, not measured; an optimistic bound on small shapes)\n");
      if (r->fp8_recipes & (1u << PLAN_FP8_MXFP8))
        fprintf(out, "              MXFP8 GEMMs: those per-tensor FP8 prices times the %s's measured mxfp8_gemm_ratio "
                     "(GPU catalogue; none: as per-tensor)\n", r->gpu);
    }
  }
  fprintf(out, "allocator     a caching allocator's reserve of %g x the activations in every candidate's memory (%s)\n",
          o->alloc_reserve_set ? o->alloc_reserve : PLAN_DEFAULT_ALLOC_RESERVE,
          o->alloc_reserve_set ? "--alloc-reserve" : "the default; --alloc-reserve");
  if (o->hidden_dropout_set)
    fprintf(out, "dropout       hidden dropout %g in every candidate (--hidden-dropout; default 0.1)\n", o->hidden_dropout);
  if (r->clock_model == SIM_CLOCK_MODEL_POWER || o->clock_model != SIM_CLOCK_MODEL_AUTO)
    fprintf(out, "clock         --clock-model %s%s\n", sim_clock_model_name(r->clock_model),
            r->clock_model == SIM_CLOCK_MODEL_POWER ? ": each window's clock under the power cap, from the calibration's "
                                                      "power section (sim/README.md \"The power-cap clock\")" : "");
  if (o->alltoall_analytic)
    fprintf(out, "alltoall      analytic (APPROXIMATE): cross-node all-to-alls priced without flows, alone on "
                 "their links (--alltoall flows: every pair's flow)\n");
  if (o->headroom_gib > 0 || o->headroom_fraction > 0)
    fprintf(out, "headroom      %.1f GiB + %.0f %% of the HBM kept free beyond the memory model\n", o->headroom_gib,
            100 * o->headroom_fraction);
  if (show_fp8)
    fprintf(out, "layouts       %ld enumerated; of those x FP8 recipes, %ld over HBM, %ld invalid; %ld layout x "
                 "recipe x codec candidates estimated\n", r->enumerated, r->over_memory, r->invalid, r->estimated);
  else
    fprintf(out, "layouts       %ld enumerated, %ld over HBM, %ld invalid; %ld layout x codec candidates estimated\n",
            r->enumerated, r->over_memory, r->invalid, r->estimated);
  if (r->dominated)
    fprintf(out, "              %ld ZeRO-2/3 layouts not tried: ZeRO-1 (or ZeRO-2) fits them with less traffic\n",
            r->dominated);
  fprintf(out, "simulated     %d layouts%s under each codec%s: %d candidates, %d simulations (%d failed), %d workers",
          r->layouts_simulated, show_fp8 ? " (the best of each FP8 recipe)" : "", r->samples ? " + samples across the ranking" : "", r->candidates, r->simulations,
          r->failures, o->jobs);
  if (r->processes > 1) fprintf(out, " in each of %d MPI processes", r->processes);
  fputc('\n', out);
  if (r->candidates == 0)
    ; /* nothing simulated (--simulate 0) */
  else if (o->exhaustive)
    fprintf(out, "              --exhaustive: every candidate simulated\n");
  else
    fprintf(out,
            "              %d simulations avoided: their bound (programs replayed without contention, compute at the fastest "
            "clock) is below row %d's simulated tokens/s%s (--exhaustive runs them)\n",
            r->pruned, o->top > 0 ? o->top : 10, show_fp8 ? " and their FP8 recipe's best" : "");
  fprintf(out, "time          %.2f s (enumerate %.2f, memory + estimate %.2f, simulate %.2f of which bounds %.2f)\n",
          r->total_s, r->enumerate_s, r->estimate_s, r->simulate_s, r->bound_s);
  if (r->simulations > 0)
    fprintf(out, "              simulations: %.1f s CPU in all (workers' user + sys), %.2f s each, %d clock passes\n",
            r->sim_cpu_s, r->sim_cpu_s / r->simulations, r->clock_passes);
  fputc('\n', out);
  int top = o->top > 0 ? o->top : 10;
  fprintf(out, "%3s  %-*s ", "#", lw, "layout");
  if (show_fp8) fprintf(out, "%-10s ", "fp8");
  fprintf(out, "%-9s %11s %11s %9s %8s %6s %8s %8s\n", "codec", "est tok/s", "sim tok/s", "tok/s/GPU", "TFLOP/s", "MFU",
          "mem GiB", "speedup");
  int shown = 0;
  for (int i = 0; i < r->n && shown < top; i++) {
    const sim_search_candidate *k = &r->cands[i];
    char lt[96];
    layout_text(&k->layout, lt, sizeof lt);
    if (!k->simulated || k->sample) continue;
    shown++;
    fprintf(out, "%3d  %-*s ", shown, lw, lt);
    if (show_fp8) fprintf(out, "%-10s ", fp8_name(k->layout.fp8));
    fprintf(out, "%-9s %11.0f %11.0f %9.1f %8.1f %5.1f%% %8.1f", sim_search_codec_name(k->codec),
            k->est.tokens_per_s, k->sim_tokens_per_s, k->sim_tokens_per_s / r->gpus, k->sim_tflops_per_gpu,
            100 * k->sim_mfu, k->memory_bytes / 1073741824.0);
    if (k->speedup > 0)
      fprintf(out, " %7.3fx\n", k->speedup);
    else
      fprintf(out, " %8s\n", "-");
  }
  /* a candidate whose simulation failed: its row says why */
  for (int i = 0; i < r->n; i++) {
    const sim_search_candidate *k = &r->cands[i];
    if (!k->sim_failed) continue;
    char lt[96];
    layout_text(&k->layout, lt, sizeof lt);
    fprintf(out, "%3s  %-*s ", "x", lw, lt);
    if (show_fp8) fprintf(out, "%-10s ", fp8_name(k->layout.fp8));
    fprintf(out, "%-9s %11.0f  simulation failed: %s\n", sim_search_codec_name(k->codec), k->est.tokens_per_s, k->error);
  }
  if (r->n == 0) /* nothing simulated (--simulate 0): the estimate ranking */
    for (int i = 0; i < r->n_best_est && shown < top; i++) {
      const sim_search_candidate *k = &r->best_est[i];
      char lt[96];
      layout_text(&k->layout, lt, sizeof lt);
      shown++;
      fprintf(out, "%3d  %-*s ", shown, lw, lt);
      if (show_fp8) fprintf(out, "%-10s ", fp8_name(k->layout.fp8));
      fprintf(out, "%-9s %11.0f %11s %9s %8.1f %5.1f%% %8.1f %8s\n", sim_search_codec_name(k->codec), k->est.tokens_per_s, "not run", "-", k->est.tflops_per_gpu,
              100 * k->est.mfu, k->memory_bytes / 1073741824.0, "-");
    }
  /* each simulated layout once, with every policy's speedup over none */
  if (r->n > 0) fprintf(out, "\ncodec speedup over the same layout uncompressed (simulated)\n");
  if (r->n > 0) {
    fprintf(out, "%-*s ", lw, "layout");
    if (show_fp8) fprintf(out, "%-10s ", "fp8");
    fprintf(out, "%11s", "none tok/s");
    for (int c = 1; c < SIM_SEARCH_CODEC_COUNT; c++)
      if (o->codecs & (1u << c)) fprintf(out, " %10s", sim_search_codec_name((sim_search_codec)c));
    fputc('\n', out);
  }
  for (int i = 0; i < r->n; i++) {
    const sim_search_candidate *k = &r->cands[i];
    if (k->sample) continue;
    bool first = true;
    for (int j = 0; j < i; j++) first &= !sim_search_same_layout(&r->cands[j].layout, &k->layout);
    if (!first) continue;
    char lt[96];
    layout_text(&k->layout, lt, sizeof lt);
    double none = 0;
    bool none_failed = false;
    for (int j = 0; j < r->n; j++)
      if (sim_search_same_layout(&r->cands[j].layout, &k->layout) && r->cands[j].codec == SIM_SEARCH_CODEC_NONE &&
          !r->cands[j].sample) {
        if (r->cands[j].simulated) none = r->cands[j].sim_tokens_per_s;
        none_failed |= r->cands[j].sim_failed;
      }
    fprintf(out, "%-*s ", lw, lt);
    if (show_fp8) fprintf(out, "%-10s ", fp8_name(k->layout.fp8));
    bool none_pruned = false;
    for (int j = 0; j < r->n; j++)
      none_pruned |= sim_search_same_layout(&r->cands[j].layout, &k->layout) &&
                     r->cands[j].codec == SIM_SEARCH_CODEC_NONE && r->cands[j].pruned;
    if (none > 0)
      fprintf(out, "%11.0f", none);
    else
      fprintf(out, "%11s", none_failed ? "failed" : none_pruned ? "pruned" : "-");
    for (int c = 1; c < SIM_SEARCH_CODEC_COUNT; c++) {
      if (!(o->codecs & (1u << c))) continue;
      double s = 0;
      bool failed = false, pruned = false;
      for (int j = 0; j < r->n; j++)
        if (sim_search_same_layout(&r->cands[j].layout, &k->layout) && r->cands[j].codec == (sim_search_codec)c &&
            !r->cands[j].sample) {
          s = r->cands[j].speedup;
          failed |= r->cands[j].sim_failed;
          pruned |= r->cands[j].pruned;
        }
      if (s > 0)
        fprintf(out, " %9.3fx", s);
      else
        fprintf(out, " %10s", failed ? "failed" : pruned ? "pruned" : none_failed || none_pruned ? "-" : "n/a");
    }
    fputc('\n', out);
  }
  if (r->failures)
    fprintf(out, "failed: %d simulations (rows marked x above, each with its reason)\n", r->failures);
  if (show_fp8) print_fp8_bests(r, out);
  /* how far the estimate is from the simulation: over the top picks, and
   * over the candidates sampled across the whole ranking (--sample) */
  size_t cap = r->n > 0 ? (size_t)r->n : 1;
  double *est = malloc(sizeof(double) * cap), *sim = malloc(sizeof(double) * cap);
  for (int pass = 0; est && sim && pass < 2; pass++) {
    int m = 0;
    double err = 0;
    for (int i = 0; i < r->n; i++)
      if (r->cands[i].simulated && r->cands[i].sample == (pass == 1)) {
        est[m] = r->cands[i].est.tokens_per_s;
        sim[m] = r->cands[i].sim_tokens_per_s;
        err += fabs(est[m] / sim[m] - 1);
        m++;
      }
    if (m >= 2)
      fprintf(out, "%sestimate vs simulation over %d %s: Spearman %.2f, mean |error| %.1f%%\n", pass ? "" : "\n", m,
              pass ? "candidates sampled across the whole ranking" : "top candidates simulated",
              sim_search_spearman(est, sim, m), 100 * err / m);
  }
  free(est);
  free(sim);
  fprintf(out, "note: TACO G=128 E4M3 and CAAT-Net p=0.5 on tensor-parallel traffic (TACO also on the expert all-to-alls "
               "of MoE layouts with ep > 1); CAAT-Net excludes sequence "
               "parallel (n/a); \"-\": no uncompressed figure to compare with; \"pruned\": not simulated, it cannot "
               "reach the rows printed\n");
}

/* ---- JSON ---- */

static json_t *layout_json(const sim_search_layout *l) {
  json_t *o = json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:s}", "tp", l->tp, "pp", l->pp, "vpp", l->vpp, "dp", l->dp,
                        "micro", l->micro, "sequence_parallel", l->sequence_parallel, "zero1", l->zero1, "recompute",
                        plan_recompute_name(l->recompute));
  if (o && l->ep > 1) json_object_set_new(o, "ep", json_integer(l->ep)); /* MoE only: dense files keep their keys */
  /* the fields of issue 22, only when set: today's layouts keep their keys */
  if (o && l->cp > 1) json_object_set_new(o, "context_parallel_size", json_integer(l->cp));
  if (o && l->zero_stage >= 2) json_object_set_new(o, "zero_stage", json_integer(l->zero_stage));
  if (o && l->overlap_param_gather) json_object_set_new(o, "overlap_param_gather", json_true());
  if (o && l->tp_comm_overlap) json_object_set_new(o, "tp_comm_overlap", json_true());
  if (o && l->fp8 != PLAN_FP8_OFF) json_object_set_new(o, "fp8", json_string(fp8_name(l->fp8))); /* layout.fp8 */
  return o;
}

static json_t *candidate_json(const sim_search_candidate *k) {
  json_t *o = json_object();
  json_object_set_new(o, "layout", layout_json(&k->layout));
  json_object_set_new(o, "codec", json_string(sim_search_codec_name(k->codec)));
  json_object_set_new(o, "memory_per_gpu_bytes", json_real(k->memory_bytes));
  if (k->sample) json_object_set_new(o, "sample", json_true());
  json_object_set_new(o, "estimate",
                      json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "iteration_time_s", k->est.iteration_s,
                                "tokens_per_s", k->est.tokens_per_s, "tflops_per_gpu", k->est.tflops_per_gpu, "mfu",
                                k->est.mfu, "compute_s", k->est.compute_s, "tp_exposed_s", k->est.tp_exposed_s,
                                "pp_exposed_s", k->est.pp_exposed_s, "dp_exposed_s", k->est.dp_exposed_s,
                                "bubble_s", k->est.bubble_s, "codec_s", k->est.codec_s));
  if (k->simulated) {
    const schema_breakdown *b = &k->sim_breakdown;
    json_object_set_new(
        o, "simulated",
        json_pack("{s:f,s:f,s:f,s:f,s:{s:f,s:f,s:f,s:f,s:f,s:f}}", "iteration_time_s", k->sim_iteration_s,
                  "tokens_per_s", k->sim_tokens_per_s, "tflops_per_gpu", k->sim_tflops_per_gpu, "mfu", k->sim_mfu,
                  "breakdown", "compute_s", b->compute_s, "tp_exposed_s", b->tp_exposed_s, "pp_exposed_s",
                  b->pp_exposed_s, "dp_exposed_s", b->dp_exposed_s, "codec_s", b->codec_s, "bubble_s", b->bubble_s));
    if (k->speedup > 0) json_object_set_new(o, "speedup_vs_none", json_real(k->speedup));
    if (k->sim_cpu_s > 0) json_object_set_new(o, "sim_cpu_s", json_real(k->sim_cpu_s));
    if (k->sim_clock_passes > 0) json_object_set_new(o, "clock_passes", json_integer(k->sim_clock_passes));
  } else if (k->sim_failed) {
    json_object_set_new(o, "error", json_string(k->error));
  } else if (k->pruned) {
    json_object_set_new(o, "pruned", json_true());
  }
  if (k->bound_tokens_per_s > 0) json_object_set_new(o, "bound_tokens_per_s", json_real(k->bound_tokens_per_s));
  return o;
}

int sim_search_save_json(const sim_search_result *r, const sim_search_options *o, const char *path, ts_err *e) {
  json_t *root = json_object();
  json_object_set_new(root, "schema", json_integer(1));
  json_object_set_new(root, "model", json_string(o->model));
  json_object_set_new(root, "cluster", json_string(o->cluster));
  json_object_set_new(root, "gpus", json_integer(r->gpus));
  json_object_set_new(root, "seq", json_integer(r->seq));
  json_object_set_new(root, "global_batch", json_integer(r->global_batch));
  json_object_set_new(root, "calibration", json_string(r->calibration));
  json_object_set_new(root, "counts",
                      json_pack("{s:I,s:I,s:I,s:I,s:i,s:i,s:i}", "enumerated", (json_int_t)r->enumerated,
                                "over_memory", (json_int_t)r->over_memory, "invalid", (json_int_t)r->invalid,
                                "estimated", (json_int_t)r->estimated, "layouts_simulated", r->layouts_simulated,
                                "simulations", r->simulations, "failures", r->failures, "samples", r->samples));
  json_t *counts = json_object_get(root, "counts");
  json_object_set_new(counts, "candidates", json_integer(r->candidates));
  json_object_set_new(counts, "pruned", json_integer(r->pruned));
  json_object_set_new(counts, "processes", json_integer(r->processes > 0 ? r->processes : 1));
  json_object_set_new(root, "exhaustive", json_boolean(o->exhaustive));
  json_object_set_new(root, "alltoall", json_string(o->alltoall_analytic ? "analytic" : "flows"));
  json_object_set_new(root, "clock_model", json_string(sim_clock_model_name(r->clock_model)));
  json_object_set_new(root, "alloc_reserve", json_real(o->alloc_reserve_set ? o->alloc_reserve : PLAN_DEFAULT_ALLOC_RESERVE));
  if (fp8_shown(r)) { /* --fp8: the recipes tried, "tensorwise,delayed" (absent: BF16 alone), and skipped */
    char list[64];
    fp8_list(r->fp8_recipes, list, sizeof list);
    json_object_set_new(root, "fp8", json_string(list));
    fp8_list(r->fp8_skipped, list, sizeof list);
    json_object_set_new(root, "fp8_skipped", json_string(list));
    json_object_set_new(root, "fp8_param_gather", json_boolean(o->fp8_param_gather));
    /* the calibration's measured FP8 GEMM shapes; every other FP8 GEMM is priced by sim_gemm_fp8_unmeasured_us */
    json_object_set_new(root, "gemm_fp8_points", json_integer(r->gemm_fp8_points));
  }
  json_object_set_new(root, "time_s",
                      json_pack("{s:f,s:f,s:f,s:f,s:f}", "total", r->total_s, "enumerate", r->enumerate_s, "estimate",
                                r->estimate_s, "simulate", r->simulate_s, "bounds", r->bound_s));
  json_object_set_new(json_object_get(root, "time_s"), "simulations_cpu", json_real(r->sim_cpu_s));
  json_object_set_new(counts, "clock_passes", json_integer(r->clock_passes));
  json_t *sim = json_array(), *est = json_array();
  for (int i = 0; i < r->n; i++) json_array_append_new(sim, candidate_json(&r->cands[i]));
  for (int i = 0; i < r->n_best_est; i++) json_array_append_new(est, candidate_json(&r->best_est[i]));
  json_object_set_new(root, "simulated", sim);
  json_object_set_new(root, "best_estimates", est);
  int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
  json_decref(root);
  if (rc) return ts_fail_sys(e, "%s: cannot write the search result", path);
  return 0;
}

int sim_search_save_csv(const sim_search_result *r, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: %s", path, strerror(errno));
  fprintf(f, "# rank tp pp vpp dp micro sp zero1 recompute codec est_tokens_per_s sim_tokens_per_s "
             "tokens_per_s_per_gpu tflops_per_gpu mfu memory_gib speedup_vs_none fp8\n");
  int rank = 0;
  for (int i = 0; i < r->n; i++) {
    const sim_search_candidate *k = &r->cands[i];
    if (!k->simulated || k->sample) continue;
    const sim_search_layout *l = &k->layout;
    fprintf(f, "%d %d %d %d %d %d %d %d %s %s %.6g %.6g %.6g %.6g %.6g %.6g %.6g %s\n", ++rank, l->tp, l->pp, l->vpp,
            l->dp, l->micro, l->sequence_parallel, l->zero1, plan_recompute_name(l->recompute),
            sim_search_codec_name(k->codec), k->est.tokens_per_s, k->sim_tokens_per_s, k->sim_tokens_per_s / r->gpus,
            k->sim_tflops_per_gpu, k->sim_mfu, k->memory_bytes / 1073741824.0, k->speedup, fp8_name(l->fp8));
  }
  if (fclose(f)) return ts_fail_sys(e, "%s: %s", path, strerror(errno));
  return 0;
}
