/* test_search_feasible.c — the layout search never answers "no layout fits"
 * while one does (every zoo cluster x every zoo model, memory check only), and
 * the plans `--emit-plans` writes load unchanged and predict what the search
 * printed (issue 20). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "search.h"
#include "test_zoo_names.h"

#ifndef TACOSIM_BIN
#define TACOSIM_BIN "tacosim"
#endif


/* The direct check, through the plan loader as a hand-written plan goes: for
 * every TP (dividing the node, heads, KV heads, FFN and the GPUs) and PP
 * (dividing the GPUs left, and the layers, or where it does not, the layers +
 * 2 with the embedding and the loss accounted as layers) with DP dividing the global batch,
 * the least-memory settings: micro-batch 1, plain 1F1B, ZeRO-3 (MoE: ZeRO-1) when dp x cp > 1,
 * sequence parallel when it applies, each context-parallel size the search tries, each recomputation. */
static int direct_fits(const model_config *m, const topo_cluster *c, const char *model, const char *cluster, int gpus,
                       int seq, long long global, char *which, size_t cap) {
  static const char *const rc[] = {"none", "selective", "full"};
  static plan p;
  for (int tp = 1; tp <= c->gpus_per_node; tp++) {
    if (c->gpus_per_node % tp || m->heads % tp || m->kv_heads % tp || m->ffn_hidden % tp || gpus % tp) continue;
    for (int pp = 1; pp <= m->layers; pp++) {
      const bool account = m->layers % pp != 0;
      if ((m->layers + (account ? 2 : 0)) % pp || (account && pp < 2) || (gpus / tp) % pp) continue;
      const char *acct = account ? ",\"account_for_embedding_in_pipeline_split\":true,"
                                   "\"account_for_loss_in_pipeline_split\":true"
                                 : "";
      /* context parallelism (issue 22, dense models): cp up to 16 dividing the GPUs left, seq divisible by 2 cp */
      for (int cp = 1; cp <= (m->experts > 0 ? 1 : 16); cp++) {
        if ((gpus / tp / pp) % cp || (cp > 1 && seq % (2 * cp))) continue;
        int dp = gpus / tp / pp / cp;
        if (global % dp) continue;
        /* the least memory: ZeRO-3 for dense models (issue 22), ZeRO-1 for MoE, when dp x cp > 1 */
        const char *shard = dp * cp < 2 ? "no_shard" : m->experts > 0 ? "optim" : "optim_grads_params";
        /* MoE models: every expert-parallel degree dividing the experts and DP (EP carved from DP) */
        for (int ep = 1; ep <= (m->experts > 0 ? dp : 1); ep++) {
          if (m->experts > 0 && (m->experts % ep || dp % ep)) continue;
          for (int r = 0; r < 3; r++) {
            char text[1024], ep_field[32] = "";
            if (m->experts > 0) snprintf(ep_field, sizeof ep_field, ",\"ep\":%d", ep);
            int n = snprintf(text, sizeof text,
                             "{\"schema\":1,\"model\":\"%s\",\"cluster\":\"%s\",\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":%d,"
                             "\"context_parallel_size\":%d,\"data_parallel_sharding_strategy\":\"%s\","
                             "\"sequence_parallel\":%s,\"recompute\":\"%s\"%s%s},"
                             "\"batch\":{\"micro\":1,\"global\":%lld,\"seq\":%d},\"schedule\":\"1f1b\"}",
                             model, cluster, dp, tp, pp, cp, shard, tp > 1 && (seq / cp) % tp == 0 ? "true" : "false",
                             rc[r], ep_field, acct, global, seq);
            ts_err e = {0};
            if (plan_from_json_text(text, (size_t)n, "direct", NULL, NULL, &p, &e) == 0) {
              snprintf(which, cap, "tp%d pp%d%s cp%d dp%d ep%d %s rc=%s", tp, pp, account ? " emb loss" : "", cp, dp, ep,
                       shard, rc[r]);
              return 1;
            }
          }
        }
      }
    }
  }
  return 0;
}

static void test_feasible_every_cluster_and_model(void) {
  static char models[64][128], clusters[64][128];
  int nm = test_zoo_names(model_zoo_dir(), models, 64), nc = test_zoo_names(topo_zoo_dir(), clusters, 64);
  CU_ASSERT_TRUE_FATAL(nm >= 10 && nc >= 10);
  int pairs = 0, feasible = 0, disagree = 0;
  for (int i = 0; i < nc; i++)
    for (int j = 0; j < nm; j++) {
      sim_search_options o = {.model = models[j], .cluster = clusters[i], .codecs = 1, .memory_only = true,
                              .max_micro = 16};
      sim_search_result r;
      ts_err e = {0};
      if (sim_search_run(&o, &r, &e)) {
        fprintf(stderr, "\n  %s on %s: %s", models[j], clusters[i], e.msg);
        CU_FAIL("the search failed");
        continue;
      }
      static plan base;
      CU_ASSERT_EQUAL_FATAL(sim_search_base_plan(models[j], clusters[i], &base, &e), 0);
      char which[96] = "";
      int direct = direct_fits(&base.model, &base.cluster, models[j], clusters[i], r.gpus, r.seq, r.global_batch,
                               which, sizeof which);
      pairs++;
      feasible += direct;
      if ((r.fits > 0) != direct) {
        disagree++;
        fprintf(stderr, "\n  %s on %s: search keeps %ld of %ld layouts, direct check %s %s", models[j], clusters[i],
                r.fits, r.enumerated, direct ? "fits" : "finds none", which);
      }
      sim_search_result_free(&r);
    }
  printf("\n  %d model x cluster pairs, %d with a layout that fits, %d disagreements ", pairs, feasible, disagree);
  CU_ASSERT_EQUAL(disagree, 0);
  CU_ASSERT_TRUE(feasible > 0 && feasible < pairs); /* the check sees both answers */
}

/* Issue 20's case: the search found nothing while TP8 PP16 DP2 fits. */
static void test_llama70b_on_l40s(void) {
  sim_search_options o = {.model = "llama3-70b", .cluster = "pcie-8gpu-2x100gbe", .seq = 4096,
                          .global_batch = 512, .codecs = 1, .memory_only = true, .max_micro = 16};
  sim_search_result r;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r, &e), 0);
  printf("\n  llama3-70b on 128 L40S: %ld of %ld layouts fit ", r.fits, r.enumerated);
  CU_ASSERT_TRUE(r.fits > 0);
  sim_search_result_free(&r);
  static plan base, p;
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan("llama3-70b", "pcie-8gpu-2x100gbe", &base, &e), 0);
  sim_search_layout l = {.tp = 8, .pp = 16, .vpp = 1, .dp = 1, .micro = 1, .sequence_parallel = true,
                         .recompute = MODEL_RECOMPUTE_SELECTIVE};
  l.dp = 128 / (8 * 16);
  CU_ASSERT_EQUAL(sim_search_make_plan(&base, &l, 4096, 512, &p, &e), 0);
  double bytes;
  CU_ASSERT_TRUE(sim_search_fits_memory(&p, &bytes));
  CU_ASSERT_EQUAL(plan_validate(&p, &e), 0);
}

/* --headroom: parsing, and a reserve only ever drops layouts */
static void test_headroom(void) {
  double g, f;
  ts_err e = {0};
  CU_ASSERT_EQUAL(sim_search_parse_headroom("4", &g, &f, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(g, 4.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(f, 0.0, 0);
  CU_ASSERT_EQUAL(sim_search_parse_headroom("0.1", &g, &f, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(f, 0.1, 0);
  CU_ASSERT_DOUBLE_EQUAL(g, 0.0, 0);
  CU_ASSERT_EQUAL(sim_search_parse_headroom("-1", &g, &f, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--headroom"));
  CU_ASSERT_EQUAL(sim_search_parse_headroom("5GiB", &g, &f, &e), -1);
  long prev = -1;
  for (int i = 0; i < 3; i++) {
    sim_search_options o = {.model = "llama3-70b", .cluster = "h100-1024-ndr", .gpus = 512, .seq = 4096,
                            .global_batch = 512, .codecs = 1, .memory_only = true, .max_micro = 4,
                            .headroom_fraction = 0.1 * i};
    sim_search_result r;
    CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r, &e), 0);
    if (prev >= 0) CU_ASSERT(r.fits < prev);
    CU_ASSERT(r.fits > 0);
    prev = r.fits;
    sim_search_result_free(&r);
  }
}

/* ---- --emit-plans ---- */

static double simulated_tokens(const char *plan_path, const char *cal) {
  char out[256], cmd[1024];
  snprintf(out, sizeof out, "/tmp/test-emit-%d.json", (int)getpid());
  snprintf(cmd, sizeof cmd, "%s simulate %s --calibration %s --json %s >/dev/null 2>&1", TACOSIM_BIN, plan_path, cal,
           out);
  int st = system(cmd);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) return -1;
  json_error_t je;
  json_t *root = json_load_file(out, 0, &je);
  unlink(out);
  if (!root) return -1;
  json_t *v = json_object_get(root, "tokens_per_s");
  double t = json_is_number(v) ? json_number_value(v) : -1;
  json_decref(root);
  return t;
}

/* host: --host-framework (the plans carry it and predict the search's figure under it too); dropout < 0:
 * the default hidden dropout (Megatron-LM's 0.1), else --hidden-dropout dropout; fp8: --fp8's recipes (0:
 * BF16 alone), each emitted plan's layout.fp8 its row's */
static void emitted_plans_predict_the_search(plan_host_framework host, double dropout, unsigned fp8) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/test-emit-plans-%d", (int)getpid());
  sim_search_options o = {.model = "gpt3-1.3b", .cluster = "h200x8-nvswitch", .gpus = 8, .global_batch = 16,
                          .codecs = (1u << SIM_SEARCH_CODEC_NONE) | (1u << SIM_SEARCH_CODEC_TACO), .top = 3,
                          .simulate = 2, .jobs = 2, .max_micro = 4, .host_framework = host,
                          .hidden_dropout_set = dropout >= 0, .hidden_dropout = dropout, .fp8_recipes = fp8};
  sim_search_result r;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &r, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_search_emit_plans(&r, &o, dir, NULL, &e), 0);
  int checked = 0, checked_fp8 = 0;
  for (int i = 0; i < r.n && checked < 3; i++) {
    const sim_search_candidate *k = &r.cands[i];
    if (!k->simulated || k->sample) continue;
    checked++;
    /* find the file of row `checked` */
    DIR *d = opendir(dir);
    char path[512] = "";
    for (struct dirent *de; d && (de = readdir(d));) {
      char prefix[16];
      snprintf(prefix, sizeof prefix, "%02d-", checked);
      if (strncmp(de->d_name, prefix, 3) == 0) snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    }
    if (d) closedir(d);
    CU_ASSERT_TRUE_FATAL(path[0] != '\0');
    static plan p;
    CU_ASSERT_EQUAL(plan_load(path, NULL, NULL, &p, &e), 0); /* the loader tacosim and tacorun both use */
    CU_ASSERT_EQUAL(p.tp, k->layout.tp);
    CU_ASSERT_EQUAL(p.dp, k->layout.dp);
    CU_ASSERT_EQUAL(p.micro_batch, k->layout.micro);
    CU_ASSERT_EQUAL(p.hidden_dropout, dropout >= 0 ? dropout : 0.1); /* written (default: Megatron-LM's) */
    CU_ASSERT_EQUAL(p.host_framework, host);
    CU_ASSERT_EQUAL(p.fp8_recipe, k->layout.fp8); /* layout.fp8 written (absent: BF16) */
    checked_fp8 += k->layout.fp8 != PLAN_FP8_OFF;
    FILE *pf = fopen(path, "r");
    char text[8192] = "";
    if (pf) {
      size_t got = fread(text, 1, sizeof text - 1, pf);
      text[got] = '\0';
      fclose(pf);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(text, dropout == 0 ? "\"hidden_dropout\": 0.0" : "\"hidden_dropout\": 0.1"));
    double t = simulated_tokens(path, r.calibration);
    printf("\n  %s: search %.1f, tacosim simulate %.1f tokens/s ", path, k->sim_tokens_per_s, t);
    CU_ASSERT_DOUBLE_EQUAL(t, k->sim_tokens_per_s, 1e-6 * k->sim_tokens_per_s);
    unlink(path);
  }
  CU_ASSERT_TRUE(checked >= 2);
  if (fp8 & ~(1u << PLAN_FP8_OFF)) CU_ASSERT_TRUE(checked_fp8 >= 1);
  printf("\n  %d FP8 rows checked ", checked_fp8);
  rmdir(dir);
  sim_search_result_free(&r);
}

static void test_emitted_plans_predict_the_search(void) { emitted_plans_predict_the_search(PLAN_HOST_EXECUTOR, -1, 0); }

/* --fp8 none,tensorwise: the FP8 rows' plans carry layout.fp8 and simulate to the printed figure too */
static void test_emitted_fp8_plans(void) {
  emitted_plans_predict_the_search(PLAN_HOST_EXECUTOR, -1, (1u << PLAN_FP8_OFF) | (1u << PLAN_FP8_TENSORWISE));
}

/* --hidden-dropout 0: the plans tacorun execute runs (it runs no dropout), their figures given back too */
static void test_emitted_plans_without_dropout(void) { emitted_plans_predict_the_search(PLAN_HOST_EXECUTOR, 0, 0); }

/* Megatron-Core's host time: gpt3-1.3b's small layers run at the host's pace, so the figures differ from the
 * executor's, and the emitted plans still give them back */
static void test_emitted_plans_megatron_core_host(void) {
  emitted_plans_predict_the_search(PLAN_HOST_MEGATRON_CORE, -1, 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("search feasibility and emitted plans", NULL, NULL);
  CU_add_test(s, "feasibility agrees with the loader on every cluster x model", test_feasible_every_cluster_and_model);
  CU_add_test(s, "llama3-70b on the L40S cluster finds layouts", test_llama70b_on_l40s);
  CU_add_test(s, "headroom", test_headroom);
  CU_add_test(s, "emitted plans predict the search's figures", test_emitted_plans_predict_the_search);
  CU_add_test(s, "emitted plans with --host-framework megatron-core", test_emitted_plans_megatron_core_host);
  CU_add_test(s, "emitted plans with --hidden-dropout 0", test_emitted_plans_without_dropout);
  CU_add_test(s, "emitted plans with --fp8 none,tensorwise", test_emitted_fp8_plans);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
