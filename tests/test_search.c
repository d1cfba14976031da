/* test_search.c — the layout search: enumeration counts worked by hand, the
 * memory filter, the estimate's ranking against simulation, rank
 * correlation, and `tacosim search`'s answers to bad flags. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "search.h"
#include "sim_costs.h"
#include "test_power_section.h"

#ifndef SEARCH_CLI
#define SEARCH_CLI "search_cli"
#endif

/* ---- enumeration ---- */

/* The hand case: 4 layers, 4 heads, 4 GPUs in one node, global batch 4,
 * micro-batches up to 2, seq 8. Worked out (sp: 2 choices when tp > 1;
 * zero1: 2 when dp > 1; recompute: 3):
 *   tp1 pp1 dp4: micro 1                              -> 1 x 1 x 2 x 3 = 6
 *   tp1 pp2 dp2: (vpp1,mb1) (vpp2,mb1) (vpp1,mb2)     -> 3 x 1 x 2 x 3 = 18
 *       (vpp2 with micro 2 leaves 1 micro-batch, not a multiple of pp 2)
 *   tp1 pp4 dp1: vpp1, micro 1 or 2                   -> 2 x 1 x 1 x 3 = 6
 *   tp2 pp1 dp2: micro 1 or 2                         -> 2 x 2 x 2 x 3 = 24
 *   tp2 pp2 dp1: vpp 1 or 2 x micro 1 or 2            -> 4 x 2 x 1 x 3 = 24
 *   tp4 pp1 dp1: micro 1 or 2                         -> 2 x 2 x 1 x 3 = 12
 *   total 90; tp3 never (it divides neither 4 heads nor 4 GPUs). */
/* The report sim_search_print writes, as a string (free it), or NULL. */
static char *printed_report(const sim_search_result *r, const sim_search_options *o) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  sim_search_print(r, o, f);
  fclose(f);
  return text;
}

static model_config hand_model(void) {
  model_config m;
  memset(&m, 0, sizeof m);
  snprintf(m.name, sizeof m.name, "hand");
  m.layers = 4, m.hidden = 64, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 256, m.vocab = 128, m.max_seq = 8;
  return m;
}

static topo_cluster hand_cluster(void) {
  topo_cluster c;
  memset(&c, 0, sizeof c);
  c.nodes = 1, c.gpus_per_node = 4;
  return c;
}

typedef struct {
  int by_tp[9], interleaved, sp, zero1, selective;
  int bad;
} tally;

/* The layouts of issue 22's dimensions (context parallelism, ZeRO-2/3, overlap_param_gather,
 * tp_comm_overlap), their rules, and the count with cp 2 and cp 4 in the hand-worked space:
 *   cp 4: tp1 pp1 dp1, micro 1 or 2, 3 recompute x 5 sharding variants           -> 30
 *   cp 2: tp1 pp1 dp2, micro 1 or 2                        -> 2 x 3 x 5           = 30
 *         tp1 pp2 dp1, (vpp, micro) in (1,1) (2,1) (1,2) (2,2) -> 4 x 3 x 5       = 60
 *         tp2 pp1 dp1: micro 1 (sp off, on), micro 2 (sp off, on, on + tp_comm_overlap: 2 x 4 rows
 *         divide into 4 x tp) -> 5 x 3 x 5                                        = 75
 * (sharding variants: none, ZeRO-1, ZeRO-1 + overlap_param_gather, ZeRO-2, ZeRO-3; dp x cp >= 2 here). */
typedef struct {
  int cp2, cp4, bad;
} tally22;

static void count_new(const sim_search_layout *l, void *arg) {
  tally22 *t = arg;
  int cp = l->cp > 1 ? l->cp : 1;
  t->cp2 += cp == 2;
  t->cp4 += cp == 4;
  if (l->dp * l->tp * l->pp * cp != 4 || 8 % (2 * cp) || (l->zero_stage >= 1) != l->zero1 ||
      (l->zero_stage >= 1 && l->dp * cp < 2) || (l->tp_comm_overlap && !l->sequence_parallel) ||
      (l->overlap_param_gather && l->zero_stage < 1) || (l->zero_stage == 3 && !l->overlap_param_gather))
    t->bad++;
}

static void test_enumeration_issue22(void) {
  model_config m = hand_model();
  topo_cluster c = hand_cluster();
  sim_search_space s = {.model = &m, .cluster = &c, .gpus = 4, .seq = 8, .global_batch = 4, .max_micro = 2};
  tally22 t = {0};
  sim_search_enumerate(&s, count_new, &t);
  CU_ASSERT_EQUAL(t.cp4, 30);
  CU_ASSERT_EQUAL(t.cp2, 165);
  CU_ASSERT_EQUAL(t.bad, 0);
}

/* Today's dimensions only (the layouts of issue 22 are counted above). */
static void count_layout(const sim_search_layout *l, void *arg) {
  tally *t = arg;
  if (l->cp > 1 || l->zero_stage > 1 || l->overlap_param_gather || l->tp_comm_overlap || l->account) return;
  if (l->tp >= 1 && l->tp <= 8) t->by_tp[l->tp]++;
  t->interleaved += l->vpp > 1;
  t->sp += l->sequence_parallel;
  t->zero1 += l->zero1;
  t->selective += l->recompute == MODEL_RECOMPUTE_SELECTIVE;
  if (l->dp * l->tp * l->pp != 4 || 4 % (l->dp * l->micro) || (l->sequence_parallel && l->tp < 2) ||
      (l->zero1 && l->dp < 2))
    t->bad++;
}

static void test_enumeration_hand_case(void) {
  model_config m = hand_model();
  topo_cluster c = hand_cluster();
  sim_search_space s = {.model = &m, .cluster = &c, .gpus = 4, .seq = 8, .global_batch = 4, .max_micro = 2};
  tally t = {0};
  long all = sim_search_enumerate(&s, count_layout, &t);
  CU_ASSERT_EQUAL(t.by_tp[1] + t.by_tp[2] + t.by_tp[4], 90);
  CU_ASSERT_EQUAL(sim_search_enumerate(&s, NULL, NULL), all);
  CU_ASSERT_EQUAL(t.by_tp[1], 30);
  CU_ASSERT_EQUAL(t.by_tp[2], 48);
  CU_ASSERT_EQUAL(t.by_tp[3], 0);
  CU_ASSERT_EQUAL(t.by_tp[4], 12);
  /* interleaved: tp1 pp2 (vpp2, mb1) x 2 zero1 x 3 = 6; tp2 pp2 (vpp2, mb 1 or 2) x 2 sp x 3 = 12 */
  CU_ASSERT_EQUAL(t.interleaved, 18);
  CU_ASSERT_EQUAL(t.sp, (48 + 12) / 2);
  CU_ASSERT_EQUAL(t.selective, 30);
  CU_ASSERT_EQUAL(t.bad, 0);
}

static void test_enumeration_rules(void) {
  model_config m = hand_model();
  topo_cluster c = hand_cluster();
  /* seq 7: no TP divides it, so no sequence parallel at all */
  sim_search_space s = {.model = &m, .cluster = &c, .gpus = 4, .seq = 7, .global_batch = 4, .max_micro = 2};
  tally t = {0};
  sim_search_enumerate(&s, count_layout, &t);
  CU_ASSERT_EQUAL(t.sp, 0);
  CU_ASSERT_EQUAL(t.by_tp[1] + t.by_tp[2] + t.by_tp[4], 90 - 30); /* the sp half of the tp2 and tp4 layouts */
  /* a global batch no dp > 1 divides leaves only dp 1 */
  s.seq = 8;
  s.global_batch = 1;
  memset(&t, 0, sizeof t);
  sim_search_enumerate(&s, count_layout, &t);
  CU_ASSERT_EQUAL(t.zero1, 0);
  CU_ASSERT_EQUAL(t.interleaved, 0); /* one micro-batch is never a multiple of pp 2 */
  /* 3 GPUs: only tp1 (tp3 does not divide the node of 4), pp1 (3 does not divide 4 layers), dp 3 */
  s.gpus = 3;
  s.global_batch = 3;
  memset(&t, 0, sizeof t);
  sim_search_enumerate(&s, count_layout, &t);
  CU_ASSERT_EQUAL(t.by_tp[1] + t.by_tp[2] + t.by_tp[4], 1 * 2 * 3);
}

/* The embedding and the loss accounted as layers where pp does not divide the
 * layers but divides layers + 2. Hand case, 3 GPUs (tp 1; tp 2 and 4 do not
 * divide 3), global batch 3, micro 1 (3 is over max_micro 2): pp 3 splits 4
 * layers only as 6 slots, 2 a stage, vpp 1 or 2 (3 micro-batches are a
 * multiple of pp 3), dp 1 (no ZeRO), 3 recompute settings -> 6 layouts, every
 * one pp 3; pp 1 (dp 3) and pp 2 (does not divide 3 GPUs) stay plain. */
typedef struct {
  int accounted, pp3, plain_pp3;
} tally_account;

static void count_account(const sim_search_layout *l, void *arg) {
  tally_account *t = arg;
  t->accounted += l->account;
  t->pp3 += l->account && l->pp == 3;
  t->plain_pp3 += !l->account && l->pp == 3;
}

static void test_enumeration_accounted(void) {
  model_config m = hand_model();
  topo_cluster c = hand_cluster();
  sim_search_space s = {.model = &m, .cluster = &c, .gpus = 3, .seq = 8, .global_batch = 3, .max_micro = 2};
  tally_account t = {0};
  sim_search_enumerate(&s, count_account, &t);
  CU_ASSERT_EQUAL(t.accounted, 6);
  CU_ASSERT_EQUAL(t.pp3, 6);
  CU_ASSERT_EQUAL(t.plain_pp3, 0);
  /* 4 GPUs: every pp (1, 2, 4) divides the 4 layers, nothing is accounted */
  s.gpus = 4, s.global_batch = 4;
  memset(&t, 0, sizeof t);
  sim_search_enumerate(&s, count_account, &t);
  CU_ASSERT_EQUAL(t.accounted, 0);
}

static plan base;
static int have_base;
static int accounted_plans, accounted_bad;

/* Every accounted layout of Llama-3 405B (126 layers) that fits in memory is a
 * plan the loader's rules accept, with 126 layers over its stages, the first
 * and the last a layer short of the others. */
static void check_accounted_plan(const sim_search_layout *l, void *arg) {
  (void)arg;
  if (!l->account) return;
  static plan p;
  ts_err e = {0};
  double bytes;
  if (sim_search_make_plan(&base, l, 8192, 2048, &p, &e)) {
    accounted_bad++;
    return;
  }
  if (!sim_search_fits_memory(&p, &bytes)) return;
  if (plan_validate(&p, &e)) {
    if (accounted_bad++ < 3) fprintf(stderr, "\n  %s", e.msg);
    return;
  }
  int sum = 0;
  for (int st = 0; st < p.pp; st++) sum += plan_stage_layers(&p, st);
  if (sum != 126 || plan_stage_layers(&p, 0) != plan_max_stage_layers(&p) - 1 ||
      plan_stage_layers(&p, p.pp - 1) != plan_max_stage_layers(&p) - 1)
    accounted_bad++;
  accounted_plans++;
}

static int load_base(const char *model, const char *cluster);

typedef struct {
  const sim_search_layout *want;
  bool *found;
} find_arg;

static void find_layout(const sim_search_layout *l, void *arg) {
  find_arg *f = arg;
  if (sim_search_same_layout(l, f->want)) *f->found = true;
}

static void test_search_accounted_llama3(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("llama3-405b", "h100-24576-roce"), 0);
  sim_search_space s = {.model = &base.model, .cluster = &base.cluster, .gpus = 8192, .seq = 8192,
                        .global_batch = 2048, .max_micro = 1};
  tally_account t = {0};
  sim_search_enumerate(&s, count_account, &t);
  CU_ASSERT(t.accounted > 0);
  accounted_plans = accounted_bad = 0;
  sim_search_enumerate(&s, check_accounted_plan, NULL);
  CU_ASSERT(accounted_plans > 0);
  CU_ASSERT_EQUAL(accounted_bad, 0);
  /* Meta's layout (TP 8, PP 16, vpp 8, ZeRO-2) is among them, as 128 slots of 8 a stage */
  sim_search_layout l = {.tp = 8, .pp = 16, .vpp = 8, .dp = 64, .micro = 1, .sequence_parallel = true,
                         .zero1 = true, .zero_stage = 2, .overlap_param_gather = true, .account = true};
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 8192, 2048, &p, &e), 0);
  p.hidden_dropout = 0; /* as Meta's plans (experiments/published/llama3/): no dropout */
  int rc = plan_validate(&p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(plan_stage_layers(&p, 1), 8);
  CU_ASSERT_EQUAL(plan_vchunk_layers(&p, 0, 0), 0); /* the embedding's slot */
  bool found = false;
  /* and enumerated */
  sim_search_enumerate(&s, find_layout, &(find_arg){&l, &found});
  CU_ASSERT(found);
}

/* ---- plans and memory ---- */

static int load_base(const char *model, const char *cluster) {
  ts_err e = {0};
  int rc = sim_search_base_plan(model, cluster, &base, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  have_base = rc == 0;
  return rc;
}

static void test_memory_filter(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("gpt3-175b", "h200-1024-rail"), 0);
  static plan p;
  ts_err e = {0};
  double bytes;
  /* the Megatron-LM setting fits (the shipped example plan validates) */
  sim_search_layout fits = {.tp = 8, .pp = 8, .vpp = 1, .dp = 16, .micro = 1, .zero1 = true};
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &fits, 2048, 1536, &p, &e), 0);
  CU_ASSERT_TRUE(sim_search_fits_memory(&p, &bytes));
  CU_ASSERT_TRUE(bytes > 40.0 * 1073741824.0 && bytes < 141.0 * 1073741824.0);
  CU_ASSERT_EQUAL(plan_validate(&p, &e), 0);
  /* 175B parameters on 8 GPUs of one pipeline stage: 18 bytes each cannot fit */
  sim_search_layout big = {.tp = 8, .pp = 1, .vpp = 1, .dp = 128, .micro = 1, .zero1 = false};
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &big, 2048, 1536, &p, &e), 0);
  CU_ASSERT_FALSE(sim_search_fits_memory(&p, &bytes));
  CU_ASSERT_TRUE(bytes > 141.0 * 1073741824.0);
  CU_ASSERT_NOT_EQUAL(plan_validate(&p, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GiB"));
  /* ZeRO-1 shrinks the optimizer state; full recompute shrinks activations */
  double a, b;
  sim_search_layout l = fits;
  l.zero1 = false;
  sim_search_make_plan(&base, &l, 2048, 1536, &p, &e);
  sim_search_fits_memory(&p, &a);
  l.zero1 = true;
  sim_search_make_plan(&base, &l, 2048, 1536, &p, &e);
  sim_search_fits_memory(&p, &b);
  CU_ASSERT_TRUE(b < a);
  l.recompute = MODEL_RECOMPUTE_FULL;
  sim_search_make_plan(&base, &l, 2048, 1536, &p, &e);
  sim_search_fits_memory(&p, &a);
  CU_ASSERT_TRUE(a < b);
}

/* The filter and the plan loader's own memory rule agree on every layout. */
typedef struct {
  long fit, over, disagree;
} agree;

static void check_agreement(const sim_search_layout *l, void *arg) {
  agree *g = arg;
  static plan p;
  ts_err e = {0};
  if (sim_search_make_plan(&base, l, 2048, 128, &p, &e)) {
    g->disagree++;
    return;
  }
  double bytes;
  bool fits = sim_search_fits_memory(&p, &bytes);
  p.hidden_dropout = 0; /* as Meta's plans (experiments/published/llama3/): no dropout */
  int rc = plan_validate(&p, &e);
  if (fits) g->fit++;
  else g->over++;
  if (fits != (rc == 0)) g->disagree++;
}

static void test_memory_filter_agrees_with_loader(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("gpt3-13b", "h200-1024-rail"), 0);
  sim_search_space s = {.model = &base.model, .cluster = &base.cluster, .gpus = 64, .seq = 2048,
                        .global_batch = 128, .max_micro = 4};
  agree g = {0};
  long n = sim_search_enumerate(&s, check_agreement, &g);
  printf("\n  gpt3-13b on 64 GPUs: %ld layouts, %ld fit, %ld over HBM ", n, g.fit, g.over);
  CU_ASSERT_EQUAL(g.disagree, 0);
  CU_ASSERT_TRUE(g.fit > 0 && g.over > 0);
  CU_ASSERT_EQUAL(g.fit + g.over, n);
}

/* A shipped calibration file (calibration/NAME) into cal. */
static int load_shipped_calibration(const char *name, schema_calibration *cal, ts_err *e) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", TACOSIM_CALIBRATION_DIR, name);
  return schema_calibration_load(path, cal, e);
}

/* ---- the estimate against simulation ---- */

static void test_estimate_ranks_like_simulation(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("gpt3-1.3b", "h200x8-nvswitch"), 0);
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_shipped_calibration("h200-derived.json", &cal, &e), 0);
  /* layouts that differ in what the estimate must weigh: TP traffic, bubble,
   * micro-batch efficiency, recomputation, SP and the codecs */
  struct {
    sim_search_layout l;
    sim_search_codec c;
  } cases[] = {
      {{1, 1, 1, 8, 2, false, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
      {{2, 1, 1, 4, 2, false, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
      {{2, 1, 1, 4, 2, false, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_TACO},
      {{4, 1, 1, 2, 4, true, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
      {{8, 1, 1, 1, 8, false, false, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
      {{8, 1, 1, 1, 8, false, false, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_TACO_CAAT},
      {{1, 4, 1, 2, 1, false, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
      {{1, 8, 1, 1, 1, false, false, MODEL_RECOMPUTE_FULL}, SIM_SEARCH_CODEC_NONE},
      {{2, 4, 1, 1, 1, false, false, MODEL_RECOMPUTE_SELECTIVE}, SIM_SEARCH_CODEC_CAAT},
      {{2, 2, 3, 2, 1, true, true, MODEL_RECOMPUTE_NONE}, SIM_SEARCH_CODEC_NONE},
  };
  enum { N = sizeof cases / sizeof cases[0] };
  static plan plans[N];
  double est[N], sim[N];
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &cases[i].l, 2048, 16, &plans[i], &e), 0);
    sim_search_apply_codec(&plans[i], cases[i].c);
    if (plan_validate(&plans[i], &e)) fprintf(stderr, "\n  case %d: %s\n", i, e.msg);
    CU_ASSERT_EQUAL_FATAL(plan_validate(&plans[i], &e), 0);
    sim_search_estimate x;
    CU_ASSERT_EQUAL_FATAL(sim_search_estimate_plan(&plans[i], &cal, &x, &e), 0);
    CU_ASSERT_TRUE(x.iteration_s > 0 && isfinite(x.iteration_s));
    CU_ASSERT_TRUE(x.mfu > 0 && x.mfu < 1);
    est[i] = x.tokens_per_s;
  }
  static schema_result results[N];
  bool ok[N];
  char errors[N][200];
  CU_ASSERT_EQUAL_FATAL(sim_search_simulate_many(plans, N, &cal, 2, results, ok, errors, NULL, NULL, &e), 0);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    if (!ok[i]) fprintf(stderr, "\n  case %d: %s\n", i, errors[i]);
    CU_ASSERT_TRUE_FATAL(ok[i]);
    sim[i] = results[i].tokens_per_s;
    worst = fmax(worst, fabs(est[i] / sim[i] - 1));
  }
  /* the estimate's lookup memo never answers for another calibration */
  schema_calibration slow;
  CU_ASSERT_EQUAL_FATAL(load_shipped_calibration("h200-derived.json", &slow, &e), 0);
  for (int i = 0; i < slow.n_gemm; i++) slow.gemm[i].us *= 2;
  sim_search_estimate a, b, c;
  CU_ASSERT_EQUAL(sim_search_estimate_plan(&plans[1], &cal, &a, &e), 0);
  CU_ASSERT_EQUAL(sim_search_estimate_plan(&plans[1], &slow, &b, &e), 0);
  CU_ASSERT_EQUAL(sim_search_estimate_plan(&plans[1], &cal, &c, &e), 0);
  CU_ASSERT_TRUE(b.compute_s > 1.5 * a.compute_s);
  CU_ASSERT_DOUBLE_EQUAL(a.iteration_s, c.iteration_s, 0);
  schema_calibration_free(&slow);
  /* the estimate under the power-cap model (the hand "power" section, test_power_section.h): every mix of it runs
   * between its GEMM's 1,732 MHz and f_max 2,000 MHz, so the GEMMs gain up to 2000 / 1732 = 1.155; under
   * --clock-model off the tables' times */
  sim_search_estimate pw, none;
  test_power_section(&cal.power, &TEST_POWER_HAND);
  CU_ASSERT_EQUAL_FATAL(schema_power_fit_run(&cal.power, "hand", &e), 0);
  CU_ASSERT_EQUAL(sim_search_estimate_plan(&plans[1], &cal, &pw, &e), 0);
  sim_search_set_clock_model(SIM_CLOCK_MODEL_OFF);
  CU_ASSERT_EQUAL(sim_search_estimate_plan(&plans[1], &cal, &none, &e), 0);
  sim_search_set_clock_model(SIM_CLOCK_MODEL_AUTO);
  memset(&cal.power, 0, sizeof cal.power);
  CU_ASSERT_TRUE(pw.clock_gemm_speed > 1.0 && pw.clock_gemm_speed <= 2000 / (2000 * sqrt(0.75)) + 1e-9);
  CU_ASSERT_EQUAL(none.clock_gemm_speed, 1.0);
  CU_ASSERT_TRUE(pw.iteration_s != none.iteration_s);

  double rho = sim_search_spearman(est, sim, N);
  printf("\n  estimate vs simulation, gpt3-1.3b on 8 H200, %d layouts: Spearman %.3f, worst error %.1f%% ", N, rho,
         100 * worst);
  CU_ASSERT_TRUE(rho >= 0.8);
  CU_ASSERT_TRUE(worst < 0.5);
  schema_calibration_free(&cal);
}

/* The estimate's cross-node ring latency (issue 20): the worst route of the
 * ring, by hand on 4 nodes of 2 GPUs (one NIC each, 2.5 us), leaves of 2
 * nodes, a 3-level rail fat-tree with 0.5 us per switch level:
 *   same leaf:   NIC 2.5 + node uplink 0.25, both ends         = 5.5 us
 *   other leaf:  5.5 + leaf uplinks (levels - 1) x 0.5, both ends = 7.5 us
 * DP over 2 members (GPUs 0, 2: nodes 0, 1) stays in leaf 0; over 4
 * (GPUs 0, 2, 4, 6) the wrap-around edge crosses leaves. */
/* The estimate prices a layer's attention as the simulator does (sim_costs.c's attention_us): the plan's
 * backend's measured shapes ("attention_backends"), the executor's ("attention_shapes"), and with CP the
 * FLOP-keyed tables under the roofline floor. Held equal to the simulator's own price of the same op. */
static void test_estimate_attention_as_simulator(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("gpt3-1.3b", "h200x8-nvswitch"), 0);
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_shipped_calibration("h200-nvlink.json", &cal, &e), 0);
  struct {
    sim_search_layout l;
    int seq;
    plan_attention_backend be;
  } cases[] = {
      {{1, 1, 1, 8, 2, false, true, MODEL_RECOMPUTE_NONE}, 2048, PLAN_ATTENTION_FUSED},
      {{2, 1, 1, 4, 1, false, true, MODEL_RECOMPUTE_NONE}, 1024, PLAN_ATTENTION_FUSED},
      {{4, 1, 1, 2, 4, true, true, MODEL_RECOMPUTE_NONE}, 2048, PLAN_ATTENTION_FLASH},
      {{1, 1, 1, 8, 2, false, true, MODEL_RECOMPUTE_NONE}, 2048, PLAN_ATTENTION_EXECUTOR},
      {{1, 1, 1, 4, 1, false, true, MODEL_RECOMPUTE_NONE, .cp = 2}, 2048, PLAN_ATTENTION_FUSED},
  };
  double fused_fwd = 0, exec_fwd = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    static plan p;
    CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &cases[i].l, cases[i].seq, 16, &p, &e), 0);
    p.attention_backend = cases[i].be;
    if (plan_validate(&p, &e)) fprintf(stderr, "\n  case %zu: %s\n", i, e.msg);
    CU_ASSERT_EQUAL_FATAL(plan_validate(&p, &e), 0);
    sim_costs c;
    CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
    int a = -1;
    for (int j = 0; j < c.n_mops; j++)
      if (c.mops[j].kind == MODEL_OP_ATTENTION) a = j;
    CU_ASSERT_FATAL(a >= 0);
    for (int bwd = 0; bwd < 2; bwd++) {
      plan_op op = {.kind = PLAN_OP_COMPUTE, .phase = (uint8_t)(bwd ? PLAN_PHASE_BWD : PLAN_PHASE_FWD),
                    .part = PLAN_PART_WHOLE, .model_op = (int16_t)a,
                    .flops = bwd ? c.mops[a].flops_bwd : c.mops[a].flops_fwd,
                    .bytes = bwd ? c.mops[a].bytes_bwd : c.mops[a].bytes_fwd};
      double sim_s = 0, est_s = 0;
      CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c, &op, &sim_s, &e), 0);
      CU_ASSERT_EQUAL_FATAL(sim_search_estimate_attention_s(&p, &cal, bwd, &est_s, &e), 0);
      CU_ASSERT_TRUE(sim_s > 0);
      if (fabs(est_s - sim_s) > 1e-12 * sim_s)
        fprintf(stderr, "\n  case %zu %s: estimate %.6g s, simulator %.6g s\n", i, bwd ? "bwd" : "fwd", est_s, sim_s);
      CU_ASSERT_DOUBLE_EQUAL(est_s, sim_s, 1e-12 * sim_s);
      if (i == 0 && !bwd) fused_fwd = sim_s;
      if (i == 3 && !bwd) exec_fwd = sim_s;
    }
  }
  /* the cases differ: cuDNN's points are not the executor's (calibration/README.md: cuDNN is faster) */
  CU_ASSERT_TRUE(fused_fwd > 0 && fused_fwd < exec_fwd);
  schema_calibration_free(&cal);
}

/* A framework's host time is the estimate's floor per layer-micro-batch: gpt3-1.3b (24 layers) at TP 1,
 * PP 1, DP 8, micro-batch 1 of 16 sequences (2 a rank) with the layers' host time set to 100 ms forward and
 * 200 ms backward: the iteration is at least 2 x 24 x 300 ms and the host's time dominates it. */
static void test_estimate_host_floor(void) {
  CU_ASSERT_EQUAL_FATAL(load_base("gpt3-1.3b", "h200x8-nvswitch"), 0);
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_shipped_calibration("h200-nvlink.json", &cal, &e), 0);
  static plan p;
  sim_search_layout l = {1, 1, 1, 8, 1, false, true, MODEL_RECOMPUTE_NONE};
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 2048, 16, &p, &e), 0);
  sim_search_estimate gpu, host;
  CU_ASSERT_EQUAL_FATAL(sim_search_estimate_plan(&p, &cal, &gpu, &e), 0);
  p.host_framework = PLAN_HOST_MEGATRON_CORE;
  cal.fw_host.layer_fwd_us[SCHEMA_FW_LAYER_DENSE] = 100e3, cal.fw_host.layer_bwd_us[SCHEMA_FW_LAYER_DENSE] = 200e3;
  CU_ASSERT_EQUAL_FATAL(sim_search_estimate_plan(&p, &cal, &host, &e), 0);
  const double floor = 2 * 24 * 0.3;
  CU_ASSERT_TRUE(gpu.iteration_s < 0.1 * floor);
  CU_ASSERT_TRUE(host.iteration_s >= floor);
  CU_ASSERT_TRUE(host.iteration_s <= floor + gpu.iteration_s);
  /* the executor's calls: no floor */
  p.host_framework = PLAN_HOST_EXECUTOR;
  CU_ASSERT_EQUAL_FATAL(sim_search_estimate_plan(&p, &cal, &host, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(host.iteration_s, gpu.iteration_s, 1e-12 * gpu.iteration_s);
  schema_calibration_free(&cal);
}

static void test_ring_latency(void) {
  topo_cluster c;
  memset(&c, 0, sizeof c);
  c.nodes = 4, c.gpus_per_node = 2;
  c.nic.per_node = 2, c.nic.gbps = 50, c.nic.latency_us = 2.5;
  c.intra.gbps_per_gpu = 450, c.intra.latency_us = 2;
  c.fabric.kind = TOPO_FABRIC_RAIL_FAT_TREE, c.fabric.levels = 3, c.fabric.nodes_per_leaf = 2;
  c.fabric.oversubscription = 1, c.fabric.latency_us = 0.5;
  CU_ASSERT_DOUBLE_EQUAL(sim_search_ring_latency_us(&c, 2, 2), 5.5, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_ring_latency_us(&c, 2, 4), 7.5, 1e-9);
}

/* tp_comm_overlap pieces, worked by hand. Ring exchange, t = 4, GEMM 8 (pieces 2):
 *   steps of 1: piece s starts at max(end of piece s - 1, s): ends 2, 4, 6, 8 -> 0 exposed;
 *   steps of 3: ends 2, 3+2=5, 6+2=8, 9+2=11 -> 3 exposed; compressed: 3 steps alternate -> 3 x 3 = 9.
 * Pipeline, k = 4, GEMM 8 (pieces 2), reduce-scatter pieces of 1: ready 2, 4, 6, 8, each done 1
 *   later -> ends 9 -> 1 exposed; pieces of 3: 2+3=5, 8, 11, 14 -> 6; compressed (start when the
 *   next piece ends, the last at once): ready 4, 6, 8, 8 -> 4+3=7, 10, 13, 16 -> 8. */
static void test_tpo_pieces(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_ring_exposed(4, 8, 1, false), 0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_ring_exposed(4, 8, 3, false), 3, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_ring_exposed(4, 8, 3, true), 9, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_pipeline_exposed(4, 8, 1, false), 1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_pipeline_exposed(4, 8, 3, false), 6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_tpo_pipeline_exposed(4, 8, 3, true), 8, 1e-12);
}

/* The estimate's clock duty, worked by hand. busy 8, steady idle 1, bubble 2:
 * the fill's compute 2 sees 2 / (2 + 2) = 0.5, the other 6 see 6 / 7:
 * (6 x 6/7 + 2 x 0.5) / 8 = 0.7678571...; nothing waiting: 1; a bubble
 * larger than all compute (busy 1, bubble 3): 1 / 4. */
static void test_clock_duty(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_clock_duty(8, 1, 2), (6.0 * 6.0 / 7.0 + 1.0) / 8.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_clock_duty(8, 0, 0), 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_clock_duty(1, 0, 3), 0.25, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_clock_duty(0, 1, 1), 1.0, 1e-12);
}

/* ZeRO-3's wait per micro-batch, by hand: DP work 10, compute 5. Step
 * waits 6 > 10 - 5: 6; step waits 2 < 5: 5; DP work inside the compute: the
 * step waits, 2.
 * A step's start, on the in-order DP stream (prefetch 1): the first unit's
 * gather (2 s) and the second's (3 s) leave at 0 and end at 2 and 5; the
 * first unit computes 2-3 (c_first 1), the second waits to 5: 4 s waited in
 * all (2 + 3 - 1). With c_first 4 the second's gather is done when the first
 * unit ends (at 6): only the first gather, 2 s. The embedding before a layer
 * (Llama-3 405B TP4 PP1 DP4096, as simulated: 41.2 ms, 47.2 ms gathers, a
 * 0.9 ms forward): 87.5 ms, the simulation's 87.9 ms wait at the forward's
 * start.
 * The tail: the first layer's reduce-scatter (3 s) leaves when its backward
 * ends (0), the embedding's (2 s) queues behind it (3-5); the embedding's
 * backward takes 1 s: the stream ends 4 s after the compute. With a backward
 * longer than both (6 s): the last reduce-scatter alone is left, 2 s (it
 * leaves when its backward ends). The 405B case: 63.4 + 51.8 - 0.8 = 114.4 ms
 * (simulated: 114.3 ms from the embedding's backward to the optimizer). */
static void test_zero3_wait(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_wait_s(6, 10, 5), 6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_wait_s(2, 10, 5), 5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_wait_s(2, 4, 5), 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_step_wait_s(2, 3, 1), 4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_step_wait_s(2, 3, 4), 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_step_wait_s(41.2, 47.2, 0.9), 87.5, 1e-9);
}

/* Pipeline transfers beside DP collectives on their NIC, by hand: 16
 * transfers of 3 ms alone. Beside a 19 ms reduce-scatter each gets half the
 * NIC: 6 ms, 48 ms added. Beside one that ends 4 ms after a transfer starts:
 * 2 ms of its bytes in those 4 ms, the last 1 ms alone: 5 ms, 2 ms added
 * each, 32 in all. With the DP stream busy half the time (ZeRO-2/3, a long
 * collective whenever it is): 8 of them meet one, 24 ms. Nothing when no
 * transfer meets one. (The nocp case of RESULTS-search.md: the simulated
 * hop of the last micro-batch's backward is 5.95 ms against 3.0 ms
 * alone.) */
static void test_pp_dp_shared(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_pp_dp_shared_s(16, 3, 1, 19), 48, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_pp_dp_shared_s(16, 3, 1, 0), 48, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_pp_dp_shared_s(16, 3, 1, 4), 32, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_pp_dp_shared_s(16, 3, 0.5, 0), 24, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_pp_dp_shared_s(16, 3, 0, 0), 0, 1e-12);
}

/* After a backward step, by hand: a stage with 14 backward steps (2
 * micro-batches x vpp 7), each ending with its first layer's 63.4 ms
 * reduce-scatter; the 13 steps that follow them find their first gather
 * queued behind it: 13 x 63.4 = 824.2 ms (Llama-3 405B TP2 PP2 vpp7 CP2
 * ZeRO-3, traced: every backward step of the cool-down waited 114.6 ms, the
 * 63 ms reduce-scatter and a layer's 47-52 ms gather). One backward step:
 * nothing (the tail counts it). */
static void test_zero3_after_backward(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_after_backward_s(14, 63.4), 824.2, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_after_backward_s(1, 63.4), 0, 1e-12);
}

static void test_zero3_tail(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_tail_s(3, 2, 1), 4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_tail_s(3, 2, 6), 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero3_tail_s(63.4, 51.8, 0.8), 114.4, 1e-9);
}

/* ZeRO-2's tail, worked by hand as a queue. Steps F (f = 1 s), B (b = 2 s), each B closing k = 2
 * buckets at its middle and end. run 3, pairs 2, idle 0.5 (before the run's second B):
 * F 0-1, B 1-3, F 3-4, B 4-6, F 6-7, B 7-9, idle, B 9.5-11.5, B 11.5-13.5; buckets at 2, 3, 5, 6, 8,
 * 9, 10.5, 11.5, 12.5, 13.5. With r = 4 (2 s a bucket) the stream is busy from 2 on: 2 + 10 x 2 = 22,
 * 8.5 s after the compute ends at 13.5. With r = 3 (1.5 s a bucket) it keeps up through the pairs
 * and ends at 17: 3.5 s after. With r = 1 only the last bucket (0.5 s) is left. pp = 1 (run 1,
 * pairs 1, k = 3, r = 3): F 0-1, B 1-3, F 3-4, B 4-6, buckets of 1 s at 5/3, 7/3, 3, 14/3, 16/3, 6:
 * the stream ends at 23/3, 5/3 s after the compute. */
static void test_zero2_tail(void) {
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero2_tail_s(3, 2, 1, 2, 4, 2, 0.5), 8.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero2_tail_s(3, 2, 1, 2, 3, 2, 0.5), 3.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero2_tail_s(3, 2, 1, 2, 1, 2, 0.5), 0.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero2_tail_s(1, 1, 1, 2, 3, 3, 0), 5.0 / 3.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_zero2_tail_s(3, 2, 1, 2, 0, 2, 0.5), 0, 1e-12); /* no DP work */
}

/* overlap_param_gather's chain, worked by hand: gathers g = 1, 3, 2, 4 s, compute between first uses
 * h = 2, 1, 5 s. Gathers 0 and 1 leave at 0 (ending 1 and 4); the compute starts at 1, reaches bucket
 * 1 at 3 and waits to 4 (gather 2 dispatched at 3, behind gather 1: ends 6), reaches bucket 2 at 5 and
 * waits to 6 (gather 3 dispatched at 5, ends 10), reaches bucket 3 at 11: 11 - 8 of compute = 3 s
 * waited. */
static void test_param_gather_wait(void) {
  const double g[] = {1, 3, 2, 4}, h[] = {2, 1, 5, 0};
  CU_ASSERT_DOUBLE_EQUAL(sim_search_param_gather_wait_s(g, h, 4), 3, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_param_gather_wait_s(g, h, 1), 1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_param_gather_wait_s(g, h, 0), 0, 1e-12);
}

/* ZeRO-1's buckets after the last backward, worked by hand: 3 chunks, chunk 0's step last (b = 1.5 s,
 * buckets of 1 s at 9, 9.5, 10, the compute ending at 10), chunk 1's one bucket of 2 s at 5.5
 * (gap 4 + the drain's idle 0.5 before chunk 0's step end), chunk 2's two of 1 s at 0.75 and 1.5:
 * the stream runs 0.75-2.75, 5.5-7.5, 9-12: 2 s after the compute. */
static void test_last_backward_tail(void) {
  const double r[] = {3, 2, 2};
  const int k[] = {3, 1, 2};
  CU_ASSERT_DOUBLE_EQUAL(sim_search_last_backward_tail_s(r, k, 3, 1.5, 4, 0.5), 2, 1e-12);
  /* one chunk (vpp 1): the work beyond the step from its first bucket on, or the last bucket alone */
  CU_ASSERT_DOUBLE_EQUAL(sim_search_last_backward_tail_s(r, k, 1, 1.5, 4, 0.5), 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_last_backward_tail_s(r, k, 1, 6, 4, 0.5), 1, 1e-12);
  /* the simulator's rings (sim_edges.c): k members of the group on each node, on at least two nodes */
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 4, 32), 2);
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 1, 16), 8);
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 8, 16), 1);
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 2, 4), 1); /* one node */
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 3, 16), 1);
  CU_ASSERT_EQUAL(sim_search_ring_members_per_node(8, 2, 6), 1); /* 4 on the first node, 2 on the next */
}

static void test_spearman(void) {
  double a[] = {1, 2, 3, 4, 5}, up[] = {10, 20, 30, 40, 50}, down[] = {5, 4, 3, 2, 1};
  CU_ASSERT_DOUBLE_EQUAL(sim_search_spearman(a, up, 5), 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_search_spearman(a, down, 5), -1.0, 1e-12);
  /* d = (0, 0, 1, -1, 0): 1 - 6 * 2 / (5 * 24) = 0.9 */
  double swap[] = {1, 2, 4, 3, 5};
  CU_ASSERT_DOUBLE_EQUAL(sim_search_spearman(a, swap, 5), 0.9, 1e-12);
  double flat[] = {7, 7, 7, 7, 7};
  CU_ASSERT_TRUE(isnan(sim_search_spearman(a, flat, 5)));
}

static void test_codec_policies(void) {
  unsigned mask;
  ts_err e = {0};
  CU_ASSERT_EQUAL(sim_search_parse_codecs("none,taco+caat", &mask, &e), 0);
  CU_ASSERT_EQUAL(mask, (1u << SIM_SEARCH_CODEC_NONE) | (1u << SIM_SEARCH_CODEC_TACO_CAAT));
  CU_ASSERT_NOT_EQUAL(sim_search_parse_codecs("taco,fp4", &mask, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fp4"));
  CU_ASSERT_NOT_EQUAL(sim_search_parse_codecs("", &mask, &e), 0);
  CU_ASSERT_NOT_EQUAL(sim_search_parse_codecs("taco,", &mask, &e), 0);
  plan p;
  memset(&p, 0, sizeof p);
  sim_search_apply_codec(&p, SIM_SEARCH_CODEC_TACO_CAAT);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_TP_FWD].kind, PLAN_CODEC_TACO_CAAT);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_TP_BWD].group, 128);
  CU_ASSERT_DOUBLE_EQUAL(p.codec[PLAN_TRAFFIC_TP_BWD].p, 0.5, 0);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_PP].kind, PLAN_CODEC_NONE);
}

/* ---- a whole small search ---- */

static void test_small_search(void) {
  sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h200x8-nvswitch", .gpus = 8, .global_batch = 16,
                          .codecs = (1u << SIM_SEARCH_CODEC_NONE) | (1u << SIM_SEARCH_CODEC_TACO), .top = 5,
                          .simulate = 2, .jobs = 2, .max_micro = 4, .sample = 3};
  sim_search_result r;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r, &e), 0);
  CU_ASSERT_TRUE(r.enumerated > 0);
  CU_ASSERT_EQUAL(r.layouts_simulated, 2);
  CU_ASSERT_EQUAL(r.simulations, r.n);
  CU_ASSERT_EQUAL(r.samples, 3);
  CU_ASSERT_TRUE(r.n >= 2 + 3 && r.n <= 4 + 3);
  CU_ASSERT_EQUAL(r.failures, 0);
  int samples = 0;
  for (int i = 0; i < r.n; i++) {
    CU_ASSERT_TRUE(r.cands[i].simulated);
    samples += r.cands[i].sample;
    if (i) CU_ASSERT_TRUE(r.cands[i - 1].sim_tokens_per_s >= r.cands[i].sim_tokens_per_s);
    if (r.cands[i].codec == SIM_SEARCH_CODEC_NONE && !r.cands[i].sample)
      CU_ASSERT_DOUBLE_EQUAL(r.cands[i].speedup, 1.0, 1e-12);
    CU_ASSERT_TRUE(r.cands[i].memory_bytes <= 141.0 * 1073741824.0);
  }
  CU_ASSERT_EQUAL(samples, 3);
  for (int i = 1; i < r.n_best_est; i++)
    CU_ASSERT_TRUE(r.best_est[i - 1].est.tokens_per_s >= r.best_est[i].est.tokens_per_s);
  char path[64];
  snprintf(path, sizeof path, "/tmp/test-search-%d.json", (int)getpid());
  CU_ASSERT_EQUAL(sim_search_save_json(&r, &o, path, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL(f);
  if (f) fclose(f);
  unlink(path);
  sim_search_result_free(&r);
}

/* --fp8 RECIPE: every candidate trains with the recipe; the best candidate's emitted plan names it and
 * loads, and its simulated iteration is shorter than the best of the same search in BF16 (the FP8 GEMMs at
 * the FP8 peak, less their casts). Without the flag nothing FP8 reaches a candidate. --fp8-param-gather: only
 * the candidates with the distributed optimizer gather FP8 parameters. */
static void test_fp8_search(void) {
  sim_search_result r[2];
  ts_err e = {0};
  char dir[2][64];
  static plan p;
  for (int j = 0; j < 2; j++) {
    sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h200x8-nvswitch", .gpus = 8, .global_batch = 16,
                            .codecs = 1u << SIM_SEARCH_CODEC_NONE, .top = 1, .simulate = 2, .jobs = 2,
                            .max_micro = 2, .fp8_recipes = 1u << (j ? PLAN_FP8_TENSORWISE : PLAN_FP8_OFF)};
    CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r[j], &e), 0);
    CU_ASSERT_TRUE_FATAL(r[j].n > 0 && r[j].cands[0].simulated);
    snprintf(dir[j], sizeof dir[j], "/tmp/test-search-fp8-%d-%d", (int)getpid(), j);
    FILE *quiet = fopen("/dev/null", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(quiet);
    CU_ASSERT_EQUAL_FATAL(sim_search_emit_plans(&r[j], &o, dir[j], quiet, &e), 0);
    fclose(quiet);
  }
  for (int j = 0; j < 2; j++) {
    char cmd[160], path[256] = "";
    snprintf(cmd, sizeof cmd, "ls %s/01-*.json", dir[j]);
    FILE *ls = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
    CU_ASSERT_PTR_NOT_NULL(fgets(path, sizeof path, ls));
    pclose(ls);
    path[strcspn(path, "\n")] = '\0';
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    const char *fp8 = json_string_value(json_object_get(json_object_get(root, "layout"), "fp8"));
    if (j) {
      CU_ASSERT_TRUE(fp8 && strcmp(fp8, "tensorwise") == 0);
    } else {
      CU_ASSERT_PTR_NULL(fp8); /* BF16: no layout.fp8 written */
    }
    json_decref(root);
    CU_ASSERT_EQUAL(plan_load(path, NULL, NULL, &p, &e), 0);
    CU_ASSERT_EQUAL(p.fp8_recipe, j ? PLAN_FP8_TENSORWISE : PLAN_FP8_OFF);
    snprintf(cmd, sizeof cmd, "rm -r %s", dir[j]);
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  printf("\n  best simulated iteration: BF16 %.4f s, tensorwise FP8 %.4f s ", r[0].cands[0].sim_iteration_s,
         r[1].cands[0].sim_iteration_s);
  CU_ASSERT_TRUE(r[1].cands[0].sim_iteration_s < r[0].cands[0].sim_iteration_s);
  /* the estimate prices the FP8 GEMMs and their casts too: its best is above BF16's best (both printed beside
   * the simulation of the best simulated candidate) */
  printf("\n  best estimate: BF16 %.0f tokens/s (simulated %.0f), tensorwise FP8 %.0f (simulated %.0f) ",
         r[0].best_est[0].est.tokens_per_s, r[0].cands[0].sim_tokens_per_s, r[1].best_est[0].est.tokens_per_s,
         r[1].cands[0].sim_tokens_per_s);
  CU_ASSERT_TRUE(r[1].best_est[0].est.tokens_per_s > r[0].best_est[0].est.tokens_per_s);
  for (int j = 0; j < 2; j++) sim_search_result_free(&r[j]);
  /* --fp8-param-gather: on the candidates with the distributed optimizer only */
  sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h200x8-nvswitch",
                          .fp8_recipes = 1u << PLAN_FP8_DELAYED, .fp8_param_gather = true};
  static plan base;
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan(o.model, o.cluster, &base, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_search_apply_options(&o, &base, &e), 0);
  for (int z = 0; z <= 1; z++) {
    sim_search_layout l = {.tp = 1, .pp = 1, .vpp = 1, .dp = 8, .micro = 1, .zero1 = z, .zero_stage = z,
                           .fp8 = PLAN_FP8_DELAYED};
    CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 2048, 16, &p, &e), 0);
    CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_DELAYED);
    CU_ASSERT_EQUAL(p.fp8_param_gather, z == 1);
    CU_ASSERT_EQUAL(plan_validate_fp8(&p, &e), 0);
    l.fp8 = PLAN_FP8_OFF; /* a BF16 candidate of the same search: no FP8 parameters */
    CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 2048, 16, &p, &e), 0);
    CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_OFF);
    CU_ASSERT_FALSE(p.fp8_param_gather);
    CU_ASSERT_EQUAL(plan_validate_fp8(&p, &e), 0);
  }
}

/* --fp8 as a searched dimension, counted by hand: GPT-3 1.3B on the 8 GPUs of one node, global batch 16,
 * micro-batches up to 2, codec none: every layout fits the HBM of an H100 in BF16 and in FP8 (the FP8
 * weight copies of 1.3B parameters are a few GiB at most), so a second recipe doubles every count of the
 * memory filter and the estimate while the enumeration stays; `search` on the H100 tries none, tensorwise
 * and delayed (3x) and skips mxfp8; on the A100 (no FP8 tensor cores) it is the BF16 search. */
static void test_fp8_searched_dimension(void) {
  const unsigned none = 1u << PLAN_FP8_OFF, tw = 1u << PLAN_FP8_TENSORWISE, dl = 1u << PLAN_FP8_DELAYED,
                 mx = 1u << PLAN_FP8_MXFP8;
  struct {
    const char *cluster;
    unsigned recipes;
    bool search;
    unsigned expect_run, expect_skipped;
    int times; /* counts of the BF16 search on the same cluster */
  } cases[] = {
      {"h100x8-nvswitch", none, false, none, 0, 1},
      {"h100x8-nvswitch", none | tw, false, none | tw, 0, 2},
      {"h100x8-nvswitch", 0, true, none | tw | dl, mx, 3},
      {"a100x8-nvswitch", none, false, none, 0, 1},
      {"a100x8-nvswitch", 0, true, none, tw | dl | mx, 1},
  };
  sim_search_result r[5];
  ts_err e = {0};
  for (int j = 0; j < 5; j++) {
    sim_search_options o = {.model = "gpt3-1.3b", .cluster = cases[j].cluster, .gpus = 8, .global_batch = 16,
                            .codecs = 1u << SIM_SEARCH_CODEC_NONE, .top = 10, .jobs = 1, .max_micro = 2,
                            .estimate_only = true, .keep_estimates = 1 << 30, .fp8_recipes = cases[j].recipes,
                            .fp8_search = cases[j].search};
    if (cases[j].search) CU_ASSERT_EQUAL(sim_search_parse_fp8("search", &o.fp8_recipes, &o.fp8_search, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r[j], &e), 0);
    CU_ASSERT_EQUAL(r[j].fp8_recipes, cases[j].expect_run);
    CU_ASSERT_EQUAL(r[j].fp8_skipped, cases[j].expect_skipped);
    const sim_search_result *b = &r[cases[j].cluster[0] == 'a' ? 3 : 0]; /* the BF16 search on that cluster */
    if (j == 0 || j == 3) {
      CU_ASSERT_TRUE(b->enumerated > 0 && b->fits > 0);
      CU_ASSERT_EQUAL(b->over_memory, 0); /* (what makes the doubling exact) */
      CU_ASSERT_EQUAL(b->estimated, b->fits); /* one codec: a candidate a layout */
    }
    int t = cases[j].times;
    printf("\n  %s, fp8 mask %#x: %ld enumerated, %ld fit, %ld estimated ", cases[j].cluster, r[j].fp8_recipes,
           r[j].enumerated, r[j].fits, r[j].estimated);
    CU_ASSERT_EQUAL(r[j].enumerated, b->enumerated);
    CU_ASSERT_EQUAL(r[j].fits, t * b->fits);
    CU_ASSERT_EQUAL(r[j].over_memory, t * b->over_memory);
    CU_ASSERT_EQUAL(r[j].invalid, t * b->invalid);
    CU_ASSERT_EQUAL(r[j].dominated, t * b->dominated);
    CU_ASSERT_EQUAL(r[j].estimated, t * b->estimated);
    CU_ASSERT_EQUAL_FATAL(r[j].n_best_est, r[j].estimated);
    long per[SIM_SEARCH_FP8_RECIPES] = {0};
    for (int i = 0; i < r[j].n_best_est; i++) per[r[j].best_est[i].layout.fp8]++;
    for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++)
      CU_ASSERT_EQUAL(per[f], r[j].fp8_recipes & (1u << f) ? b->estimated : 0);
  }
  /* FP8 candidates estimate faster than BF16 ones on the H100 (the FP8 GEMMs) */
  CU_ASSERT_TRUE(r[1].best_est[0].layout.fp8 == PLAN_FP8_TENSORWISE);
  for (int j = 0; j < 5; j++) sim_search_result_free(&r[j]);
  /* an explicit recipe the GPU cannot run: the search refuses it, naming --fp8 and the GPU */
  sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h100x8-nvswitch", .gpus = 8, .global_batch = 16,
                          .codecs = 1, .top = 1, .jobs = 1, .max_micro = 2, .estimate_only = true,
                          .fp8_recipes = none | mx};
  sim_search_result x;
  CU_ASSERT_NOT_EQUAL(sim_search_run(&o, &x, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--fp8"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "H100"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mxfp8"));
  /* the list's syntax */
  unsigned mask;
  bool search;
  CU_ASSERT_EQUAL(sim_search_parse_fp8("none,tensorwise,mxfp8", &mask, &search, &e), 0);
  CU_ASSERT_EQUAL(mask, none | tw | mx);
  CU_ASSERT_FALSE(search);
  CU_ASSERT_EQUAL(sim_search_parse_fp8("delayed", &mask, &search, &e), 0);
  CU_ASSERT_EQUAL(mask, dl);
  CU_ASSERT_EQUAL(sim_search_parse_fp8("search", &mask, &search, &e), 0);
  CU_ASSERT_EQUAL(mask, none | tw | dl | mx);
  CU_ASSERT_TRUE(search);
  CU_ASSERT_NOT_EQUAL(sim_search_parse_fp8("none,none", &mask, &search, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "twice"));
  CU_ASSERT_NOT_EQUAL(sim_search_parse_fp8("none,", &mask, &search, &e), 0);
  CU_ASSERT_NOT_EQUAL(sim_search_parse_fp8("bf16", &mask, &search, &e), 0);
  CU_ASSERT_NOT_EQUAL(sim_search_parse_fp8("none,search", &mask, &search, &e), 0);
}

/* Each FP8 recipe gets its own simulated layouts and top rows: --simulate 1 with none,tensorwise simulates
 * one layout of each (2 simulations under codec none), each recipe's row kept against the bound, and the
 * report prints each recipe's best with its speed-up over BF16's. */
static void test_fp8_recipes_simulated(void) {
  sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h100x8-nvswitch", .gpus = 8, .global_batch = 16,
                          .codecs = 1u << SIM_SEARCH_CODEC_NONE, .top = 1, .simulate = 1, .jobs = 2, .max_micro = 2,
                          .fp8_recipes = (1u << PLAN_FP8_OFF) | (1u << PLAN_FP8_TENSORWISE)};
  sim_search_result r;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r, &e), 0);
  CU_ASSERT_EQUAL(r.layouts_simulated, 2);
  CU_ASSERT_EQUAL(r.candidates, 2);
  CU_ASSERT_EQUAL(r.simulations, 2); /* top 1 of each recipe: neither pruned by the other's figure */
  CU_ASSERT_EQUAL_FATAL(r.n, 2);
  CU_ASSERT_TRUE(r.cands[0].simulated && r.cands[1].simulated);
  CU_ASSERT_NOT_EQUAL(r.cands[0].layout.fp8, r.cands[1].layout.fp8);
  /* the FP8 layout first (faster), the BF16 one still simulated */
  CU_ASSERT_EQUAL(r.cands[0].layout.fp8, PLAN_FP8_TENSORWISE);
  char *buf = printed_report(&r, &o);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "best simulated layout of each FP8 recipe"));
  char want[64];
  snprintf(want, sizeof want, "%.3fx", r.cands[0].sim_tokens_per_s / r.cands[1].sim_tokens_per_s);
  printf("\n  best BF16 %.0f, best tensorwise %.0f tokens/s: %s ", r.cands[1].sim_tokens_per_s,
         r.cands[0].sim_tokens_per_s, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
  free(buf);
  sim_search_result_free(&r);
}

/* The memory filter and the estimate spread over processes (search.c, blocks of layouts round robin,
 * joined in order) give what one process gives: the same counts and the same ranking. Llama-3 70B on 32
 * GPUs of h200-1024-rail (13,746 layouts: some over the HBM, some ZeRO-2/3 dominated) with 1, 2 and 3
 * processes. */
static void test_estimate_over_processes(void) {
  sim_search_result r[3];
  ts_err e = {0};
  for (int j = 0; j < 3; j++) {
    sim_search_options o = {.model = "llama3-70b", .cluster = "h200-1024-rail", .gpus = 32, .codecs = 0xF,
                            .top = 10, .jobs = j + 1, .max_micro = 2, .estimate_only = true,
                            .keep_estimates = 1 << 30 /* the whole ranking */};
    CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r[j], &e), 0);
  }
  CU_ASSERT_TRUE(r[0].enumerated > 4096); /* (split only above 4,096 layouts) */
  CU_ASSERT_TRUE(r[0].over_memory > 0 && r[0].dominated > 0);
  for (int j = 1; j < 3; j++) {
    CU_ASSERT_EQUAL(r[j].enumerated, r[0].enumerated);
    CU_ASSERT_EQUAL(r[j].over_memory, r[0].over_memory);
    CU_ASSERT_EQUAL(r[j].invalid, r[0].invalid);
    CU_ASSERT_EQUAL(r[j].fits, r[0].fits);
    CU_ASSERT_EQUAL(r[j].dominated, r[0].dominated);
    CU_ASSERT_EQUAL(r[j].estimated, r[0].estimated);
    CU_ASSERT_EQUAL_FATAL(r[j].n_best_est, r[0].n_best_est);
    CU_ASSERT_EQUAL(r[j].n_best_est, r[j].estimated);
    int differ = 0;
    for (int i = 0; i < r[0].n_best_est; i++) {
      const sim_search_candidate *a = &r[0].best_est[i], *b = &r[j].best_est[i];
      differ += !sim_search_same_layout(&a->layout, &b->layout) || a->codec != b->codec ||
                a->est.tokens_per_s != b->est.tokens_per_s || a->memory_bytes != b->memory_bytes;
    }
    CU_ASSERT_EQUAL(differ, 0);
  }
  for (int j = 0; j < 3; j++) sim_search_result_free(&r[j]);
}

/* ---- the command line ---- */

static int run_cli(const char *args, char *out, size_t cap) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", SEARCH_CLI, args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect_bad(const char *args, const char *needle) {
  char out[8192];
  int rc = run_cli(args, out, sizeof out);
  if (rc != 2 || !strstr(out, needle))
    fprintf(stderr, "\n  search %s -> %d: %s (expected status 2 naming \"%s\")\n", args, rc, out, needle);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, needle));
}

/* A candidate whose simulation failed is a row of its own with the simulator's reason (table and JSON),
 * and the speedup table says "failed" where its figure would be, never a bare "-" (issue 20). Two
 * layouts: A simulated uncompressed and its TACO run failed; B's uncompressed run failed and its TACO
 * run simulated. */
static void test_failed_rows_name_their_reason(void) {
  sim_search_options o = {.model = "m", .cluster = "c",
                          .codecs = (1u << SIM_SEARCH_CODEC_NONE) | (1u << SIM_SEARCH_CODEC_TACO), .top = 10,
                          .jobs = 1};
  static sim_search_candidate c[4];
  const sim_search_layout a = {.tp = 2, .pp = 1, .vpp = 1, .dp = 4, .micro = 1},
                          b = {.tp = 1, .pp = 2, .vpp = 1, .dp = 4, .micro = 1};
  c[0] = (sim_search_candidate){.layout = a, .codec = SIM_SEARCH_CODEC_NONE, .simulated = true,
                                .sim_tokens_per_s = 1000, .speedup = 1.0};
  c[1] = (sim_search_candidate){.layout = b, .codec = SIM_SEARCH_CODEC_TACO, .simulated = true,
                                .sim_tokens_per_s = 900};
  c[2] = (sim_search_candidate){.layout = a, .codec = SIM_SEARCH_CODEC_TACO, .sim_failed = true};
  snprintf(c[2].error, sizeof c[2].error, "simulator failure: rank 3 never finished op layer0.mb0.fwd.qkv");
  c[3] = (sim_search_candidate){.layout = b, .codec = SIM_SEARCH_CODEC_NONE, .sim_failed = true};
  snprintf(c[3].error, sizeof c[3].error, "simulator failure: fwd.attn priced below the GPU's ceiling");
  sim_search_result r = {.n = 4, .cands = c, .candidates = 4, .simulations = 4, .failures = 2, .gpus = 8,
                         .layouts_simulated = 2, .seq = 8, .global_batch = 8};
  char *text = printed_report(&r, &o);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  /* each failure a row marked x, with its reason */
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "simulation failed: simulator failure: rank 3 never finished op layer0.mb0.fwd.qkv"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "simulation failed: simulator failure: fwd.attn priced below the GPU's ceiling"));
  int x_rows = 0;
  for (const char *p = text; (p = strstr(p, "\n  x  ")); p++) x_rows++;
  CU_ASSERT_EQUAL(x_rows, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "failed: 2 simulations (rows marked x above, each with its reason)"));
  /* the speedup table: A's taco column and B's uncompressed column say failed */
  const char *table = strstr(text, "codec speedup over the same layout uncompressed");
  CU_ASSERT_PTR_NOT_NULL_FATAL(table);
  const char *row_a = strstr(table, "\ntp2 pp1"), *row_b = strstr(table, "\ntp1 pp2");
  CU_ASSERT_PTR_NOT_NULL_FATAL(row_a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row_b);
  char line_a[256], line_b[256];
  snprintf(line_a, sizeof line_a, "%.*s", (int)strcspn(row_a + 1, "\n"), row_a + 1);
  snprintf(line_b, sizeof line_b, "%.*s", (int)strcspn(row_b + 1, "\n"), row_b + 1);
  printf("\n  %s\n  %s ", line_a, line_b);
  CU_ASSERT_PTR_NOT_NULL(strstr(line_a, "1000"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line_a, "failed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line_b, "failed"));
  CU_ASSERT_PTR_NULL(strstr(line_a, " - "));
  free(text);
  /* the JSON names the reason too */
  char path[64];
  snprintf(path, sizeof path, "/tmp/test-search-failed-%d.json", (int)getpid());
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_save_json(&r, &o, path, &e), 0);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  unlink(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  int named = 0;
  json_t *rows = json_object_get(root, "simulated"), *row;
  size_t i;
  json_array_foreach(rows, i, row) {
    const char *why = json_string_value(json_object_get(row, "error"));
    named += why && strstr(why, "simulator failure: ") == why;
  }
  CU_ASSERT_EQUAL(named, 2);
  json_decref(root);
}

static void test_bad_flags(void) {
  expect_bad("--cluster h200x8-nvswitch", "--model is required");
  expect_bad("--model gpt3-1.3b", "--cluster is required");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --gpus 0", "--gpus");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --gpus 8x", "--gpus");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --gpus 16", "--gpus");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --seq 4096", "--seq");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --global-batch -3", "--global-batch");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --codecs taco,fp4", "fp4");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --jobs 0", "--jobs");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --sample -1", "--sample");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --frobnicate 1", "--frobnicate");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --host-framework pytorch", "--host-framework");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --hidden-dropout 1", "--hidden-dropout");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --hidden-dropout 0.1x", "--hidden-dropout");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --hidden-dropout -0.5", "--hidden-dropout");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --top", "--top needs a value");
  expect_bad("--model no-such-model --cluster h200x8-nvswitch", "--model");
  expect_bad("--model gpt3-1.3b --cluster no-such-cluster", "--cluster");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --calibration /nonexistent.json", "nonexistent");
  expect_bad("--model gpt3-175b --cluster h200x8-nvswitch --simulate 1", "no layout");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --fp8 e4m3", "--fp8: \"e4m3\" is not none, tensorwise");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --fp8 none,e4m3", "--fp8: \"e4m3\" is not none, tensorwise");
  /* an explicit list with a recipe the GPU cannot run: the error names the option, the recipe and the GPU */
  expect_bad("--model gpt3-1.3b --cluster h100x8-nvswitch --fp8 none,tensorwise,mxfp8",
             "search: --fp8: \"mxfp8\" needs a GPU whose tensor cores take MXFP8 block scales");
  expect_bad("--model gpt3-1.3b --cluster a100x8-nvswitch --fp8 none,delayed",
             "search: --fp8: \"delayed\": the A100-SXM4-80GB has no FP8 tensor cores");
  expect_bad("--model gpt3-1.3b --cluster a100x8-nvswitch --fp8 search --fp8-param-gather",
             "--fp8-param-gather: needs --fp8 with a recipe the A100-SXM4-80GB runs");
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --fp8-param-gather", "--fp8-param-gather: needs --fp8");
  /* the plan loader's message, naming --fp8: the H200's catalogue entry has no MXFP8, the A100's no FP8 */
  expect_bad("--model gpt3-1.3b --cluster h200x8-nvswitch --fp8 mxfp8",
             "search: --fp8: \"mxfp8\" needs a GPU whose tensor cores take MXFP8 block scales (Blackwell: B200, "
             "GB200); the H200-SXM has none (its catalogue entry's mxfp8 is false)");
  expect_bad("--model gpt3-1.3b --cluster a100x8-nvswitch --fp8 tensorwise",
             "search: --fp8: \"tensorwise\": the A100-SXM4-80GB has no FP8 tensor cores");
  char out[16384]; /* the whole help: a reader that stops early leaves the writer a SIGPIPE once it passes 4 KiB */
  CU_ASSERT_EQUAL(run_cli("--help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tp_comm_overlap_cfg is not searched"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--fp8 LIST          FP8 recipes tried, each a searched dimension"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(default none)"));
  CU_ASSERT_PTR_NULL(strstr(out, "is not searched; set it in an emitted plan")); /* FP8 is searched now */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("search", NULL, NULL);
  CU_add_test(s, "enumeration: hand-worked case", test_enumeration_hand_case);
  CU_add_test(s, "enumeration: rules", test_enumeration_rules);
  CU_add_test(s, "enumeration: context parallelism, ZeRO-2/3, the overlaps (issue 22)", test_enumeration_issue22);
  CU_add_test(s, "enumeration: embedding and loss accounted as layers", test_enumeration_accounted);
  CU_add_test(s, "accounted layouts of Llama-3 405B are valid plans", test_search_accounted_llama3);
  CU_add_test(s, "memory filter", test_memory_filter);
  CU_add_test(s, "memory filter agrees with the plan loader", test_memory_filter_agrees_with_loader);
  CU_add_test(s, "spearman", test_spearman);
  CU_add_test(s, "estimate: attention priced as the simulator prices it", test_estimate_attention_as_simulator);
  CU_add_test(s, "estimate: cross-node ring latency", test_ring_latency);
  CU_add_test(s, "estimate: a framework's host time as a floor", test_estimate_host_floor);
  CU_add_test(s, "estimate: tp_comm_overlap pieces", test_tpo_pieces);
  CU_add_test(s, "estimate: clock duty", test_clock_duty);
  CU_add_test(s, "estimate: ZeRO-3 wait", test_zero3_wait);
  CU_add_test(s, "estimate: ZeRO-3 tail", test_zero3_tail);
  CU_add_test(s, "estimate: ZeRO-3 after a backward step", test_zero3_after_backward);
  CU_add_test(s, "estimate: pipeline transfers beside DP collectives", test_pp_dp_shared);
  CU_add_test(s, "estimate: ZeRO-2 tail", test_zero2_tail);
  CU_add_test(s, "estimate: overlap_param_gather chain", test_param_gather_wait);
  CU_add_test(s, "estimate: ZeRO-1 buckets after the last backward, DP rings", test_last_backward_tail);
  CU_add_test(s, "codec policies", test_codec_policies);
  CU_add_test(s, "estimate ranks like the simulation", test_estimate_ranks_like_simulation);
  CU_add_test(s, "small search end to end", test_small_search);
  CU_add_test(s, "estimate over processes: the same ranking", test_estimate_over_processes);
  CU_add_test(s, "--fp8: every candidate in FP8, faster than BF16's best", test_fp8_search);
  CU_add_test(s, "--fp8 as a searched dimension: counts by hand, skipped and refused recipes",
              test_fp8_searched_dimension);
  CU_add_test(s, "--fp8 none,tensorwise: each recipe's best simulated", test_fp8_recipes_simulated);
  CU_add_test(s, "a failed simulation is a row with its reason", test_failed_rows_name_their_reason);
  CU_add_test(s, "bad flags exit 2", test_bad_flags);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
