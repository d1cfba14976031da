/* test_sim_attn_ceiling.c — every shipped cluster x every zoo model: the
 * attention of the layouts the search builds (TP dividing the node and the
 * heads, sequences 2,048-8,192 up to the model's maximum, micro-batches 1 and
 * 4, CP 1, 2, 4 and 16 (the search tries up to 16), each attention backend), priced from the calibration
 * `tacosim simulate` uses for that cluster (measured, or transferred onto the
 * cluster's GPU), is never below that GPU's ceilings: the FLOPs the kernel
 * does at the BF16 peak and the op's bytes at the HBM rate. The kernel's
 * FLOPs are counted here from the shape (causal kernels skip the tiles above
 * the diagonal: half the s x s square; the unfused program multiplies all of
 * it), not from the simulator's helper. A shape the costs cannot price must
 * be refused as bad input (exit 2), never as a simulator failure. Before
 * 2026-12-04 this failed on the H200's own measured costs (the check's floor
 * was the full square) and, at CP 4 and 16 on the L40S, found pieces priced
 * below their bytes at its HBM rate (the FLOP-keyed tables' transfer knows
 * no bytes; sim/README.md, "Ceiling refusal"). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "test_zoo_names.h"

#define MAX_NAMES 64


/* The FLOPs of one attention of this shard: forward Q K^T and P V over the
 * scores the kernel computes (causal: half the square; unfused: all of it),
 * backward 2.5x the forward for the recomputing causal kernels, and the four
 * GEMMs of the unfused backward (2x its forward). */
static double kernel_flops(const model_config *m, int tp, int micro, int local_seq, plan_attention_backend be,
                           bool bwd) {
  double H = (double)(m->heads / tp), s = local_seq;
  double dim = m->attention == MODEL_ATTN_MLA ? (double)(m->qk_nope_head_dim + m->qk_rope_head_dim + m->v_head_dim)
                                              : 2.0 * model_head_dim(m); /* Q K^T width + P V width */
  double full = 2.0 * micro * H * s * s * dim;                             /* the whole square, forward */
  if (be == PLAN_ATTENTION_UNFUSED) return bwd ? 2.0 * full : full;
  return bwd ? 2.5 * 0.5 * full : 0.5 * full;
}

typedef struct {
  int priced, refused, sim_failures, below;
  double worst; /* least priced time / ceiling seen */
  char worst_what[256];
} tally;

static void check_shape(sim_costs *c, const plan *p, const char *cluster, const char *model, tally *t) {
  int a = -1;
  for (int i = 0; i < c->n_mops; i++)
    if (c->mops[i].kind == MODEL_OP_ATTENTION) a = i;
  CU_ASSERT_TRUE_FATAL(a >= 0);
  const model_op *mo = &c->mops[a];
  for (int bwd = 0; bwd < 2; bwd++) {
    plan_op op = {.kind = PLAN_OP_COMPUTE, .stream = PLAN_STREAM_COMPUTE,
                  .phase = bwd ? PLAN_PHASE_BWD : PLAN_PHASE_FWD, .part = PLAN_PART_WHOLE,
                  .model_op = (int16_t)a, .layer = 0, .micro = 0,
                  .flops = bwd ? mo->flops_bwd : mo->flops_fwd, .bytes = bwd ? mo->bytes_bwd : mo->bytes_fwd};
    ts_err e = {0};
    double s;
    char what[256];
    snprintf(what, sizeof what, "%.64s %.64s tp%d mb%d seq%d cp%d backend %d %s", cluster, model, p->tp, p->micro_batch,
             p->seq, plan_cp(p), (int)p->attention_backend, bwd ? "bwd" : "fwd");
    if (sim_compute_s(c, &op, &s, &e)) {
      if (ts_exit_status(&e) == TS_EXIT_BAD_INPUT && e.msg[0]) {
        t->refused++;
      } else {
        t->sim_failures++;
        fprintf(stderr, "\n  %s: %s", what, e.msg);
      }
      continue;
    }
    t->priced++;
    double f = kernel_flops(&p->model, p->tp, p->micro_batch, plan_local_seq(p), p->attention_backend, bwd);
    double tf = f / c->lk.roof.peak_flops, tb = op.bytes / c->lk.roof.hbm_bytes_per_s;
    double ceiling = tf > tb ? tf : tb;
    CU_ASSERT_TRUE(ceiling > 0);
    if (s < ceiling) {
      t->below++;
      fprintf(stderr, "\n  %s: %.4g us, below the ceiling %.4g us", what, s * 1e6, ceiling * 1e6);
    }
    if (ceiling > 0 && s / ceiling < t->worst) {
      t->worst = s / ceiling;
      snprintf(t->worst_what, sizeof t->worst_what, "%s", what);
    }
  }
}

static void test_every_cluster_model(void) {
  static char clusters[MAX_NAMES][128], models[MAX_NAMES][128];
  int nc = test_zoo_names(topo_zoo_dir(), clusters, MAX_NAMES), nm = test_zoo_names(model_zoo_dir(), models, MAX_NAMES);
  CU_ASSERT_TRUE_FATAL(nc >= 10 && nm >= 10);
  static plan base;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-1gpu.json", NULL, NULL, &base, &e), 0);
  static const int seqs[] = {2048, 4096, 8192}, micros[] = {1, 4}, cps[] = {1, 2, 4, 16};
  static const plan_attention_backend backends[] = {PLAN_ATTENTION_FUSED, PLAN_ATTENTION_FLASH,
                                                    PLAN_ATTENTION_EXECUTOR, PLAN_ATTENTION_UNFUSED};
  tally all = {.worst = INFINITY};
  for (int ci = 0; ci < nc; ci++) {
    static plan p;
    p = base;
    if (topo_load(clusters[ci], NULL, &p.cluster, &e)) {
      CU_FAIL("a shipped cluster does not load");
      fprintf(stderr, "\n  %s: %s", clusters[ci], e.msg);
      continue;
    }
    schema_calibration cal;
    sim_cost_source src;
    CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &p.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
    tally t = {.worst = INFINITY};
    for (int mi = 0; mi < nm; mi++) {
      CU_ASSERT_EQUAL_FATAL(model_load(models[mi], NULL, &p.model, &e), 0);
      const model_config *m = &p.model;
      for (int tp = 1; tp <= p.cluster.gpus_per_node && tp <= 8; tp *= 2) {
        if (m->heads % tp || m->kv_heads % tp) continue;
        for (size_t si = 0; si < sizeof seqs / sizeof seqs[0]; si++)
          for (size_t ki = 0; ki < sizeof cps / sizeof cps[0]; ki++)
            for (size_t bi = 0; bi < sizeof micros / sizeof micros[0]; bi++)
              for (size_t be = 0; be < sizeof backends / sizeof backends[0]; be++) {
                if (seqs[si] > m->max_seq) continue;
                p.tp = tp, p.seq = seqs[si], p.cp = cps[ki], p.micro_batch = micros[bi];
                p.sequence_parallel = false, p.ep = 1, p.etp = 1;
                p.attention_backend = backends[be];
                static sim_costs c;
                if (sim_costs_init(&c, &p, &cal, NULL, &e)) continue; /* a shard the model refuses */
                check_shape(&c, &p, clusters[ci], models[mi], &t);
              }
      }
    }
    printf("\n  %-22s %-16s %5d priced, %d refused; least priced / ceiling %.3f (%s)", clusters[ci],
           p.cluster.gpu.name, t.priced, t.refused, t.worst, t.worst_what);
    CU_ASSERT_EQUAL(t.sim_failures, 0);
    CU_ASSERT_EQUAL(t.below, 0);
    CU_ASSERT_TRUE(t.priced > 0);
    all.priced += t.priced, all.refused += t.refused;
    schema_calibration_free(&cal);
  }
  printf("\n  %d attention costs priced, %d refused as bad input ", all.priced, all.refused);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_attn_ceiling", NULL, NULL);
  CU_add_test(s, "attention of every shipped cluster x zoo model at or above the GPU's ceilings",
              test_every_cluster_model);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
