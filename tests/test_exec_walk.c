/* test_exec_walk.c — the executor runs plan_build_program()'s programs: every
 * op of every rank of the shipped 2 x H200 plans it supports is one it knows
 * (runtime/exec/exec_walk_map.c), and the plans it does not support are refused
 * with the field that says why. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_walk_map.h"

#define PLANS TACOSIM_SOURCE_DIR "/experiments/plans/"

static int check_plan(const char *name, ts_err *e) {
  char path[512];
  snprintf(path, sizeof path, PLANS "%s.json", name);
  plan p;
  if (plan_load(path, NULL, NULL, &p, e)) return -2;
  for (int r = 0; r < plan_world_size(&p); r++) {
    plan_program prog;
    if (plan_build_program(&p, r, &prog, e)) return -2;
    int rc = exec_walk_check_program(&p, &prog, e);
    plan_program_free(&prog);
    if (rc) return -1;
  }
  return 0;
}

static void test_supported_plans(void) {
  const char *names[] = {"gpt-h4096-tp2-none", "gpt-h4096-tp2-taco", "gpt-h4096-tp2-caat", "gpt-h4096-tp2-taco-caat",
                         "gpt-h4096-dp2", "gpt-h4096-1gpu", "gpt-h4096-tp2-none-shm", "gpt-h4096-tp2-caat-socket",
                         "gpt-h4096-pp2", "qwen3-tiny-1gpu", "qwen3-tiny-tp2-sp"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    ts_err e = {{0}, 0};
    int rc = check_plan(names[i], &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
  }
}

/* The validation plans (experiments/validation/plans/, their model named by a
 * path from the source root, where this test runs). */
static void test_validation_plans(void) {
  const char *names[] = {"swiglu-h4096-tp2-none", "swiglu-h4096-pp2", "swiglu-h4096-dp2-shm",
                         "swiglu-h4096-tp2-taco-socket", "gpt-h4096-pp2-taco-shm", "gpt-h4096-tp2-sp-taco-shm",
                         "gpt-h4096-pp2-none-shm", "gpt-h4096-tp2-sp-none-shm", "gpt-h4096-dp2-none-shm",
                         "gpt-h4096-dp2-taco-shm"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[512];
    snprintf(path, sizeof path, TACOSIM_SOURCE_DIR "/experiments/validation/plans/%s.json", names[i]);
    plan p;
    ts_err e = {{0}, 0};
    int rc = plan_load(path, NULL, NULL, &p, &e);
    for (int r = 0; rc == 0 && r < plan_world_size(&p); r++) {
      plan_program prog;
      if ((rc = plan_build_program(&p, r, &prog, &e)) == 0) {
        rc = exec_walk_check_program(&p, &prog, &e);
        plan_program_free(&prog);
      }
    }
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
  }
}

static void test_dp_codec_plans(void) {
  /* TACO on the DP gradient buckets maps (FP32 gradients through coll_taco) */
  const char *text =
      "{ \"schema\": 1, \"name\": \"dp2-taco\", \"model\": \"gpt-h4096\", \"cluster\": \"h200x2-nvlink\",\n"
      "  \"layout\": { \"dp\": 2, \"tp\": 1, \"pp\": 1 }, \"batch\": { \"micro\": 2, \"global\": 16, \"seq\": 2048 },\n"
      "  \"schedule\": \"1f1b\", \"codec_min_bytes\": 0, \"codec\": { \"dp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } } }";
  plan p;
  ts_err e = {{0}, 0};
  int rc = plan_from_json_text(text, strlen(text), "dp2-taco", NULL, NULL, &p, &e);
  if (rc) rc = plan_from_json_text(text, strlen(text), "dp2-taco", TACOSIM_SOURCE_DIR "/models",
                                   TACOSIM_SOURCE_DIR "/topologies", &p, &e);
  if (rc) fprintf(stderr, "\n  dp2-taco: %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int buckets = 0;
  for (int i = 0; i < prog.n; i++)
    buckets += prog.ops[i].group == PLAN_GROUP_DP && prog.ops[i].codec.kind == PLAN_CODEC_TACO;
  CU_ASSERT_TRUE(buckets > 0);
  rc = exec_walk_check_program(&p, &prog, &e);
  if (rc) fprintf(stderr, "\n  dp2-taco: %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  plan_program_free(&prog);
}

/* layout.fp8 (priced by the simulator only): the program's FP8 casts are ops the executor does not run, so
 * the walker refuses the program, naming the cast (tacorun execute refuses the plan before, naming
 * layout.fp8: exec_plan_refuse, GPU builds). */
static void test_fp8_program_refused(void) {
  const char *text =
      "{ \"schema\": 1, \"name\": \"fp8\", \"model\": \"gpt-h4096\", \"cluster\": \"h200x2-nvlink\",\n"
      "  \"layout\": { \"dp\": 1, \"tp\": 1, \"pp\": 1, \"fp8\": \"tensorwise\" }, \"hidden_dropout\": 0,\n"
      "  \"batch\": { \"micro\": 2, \"global\": 16, \"seq\": 2048 }, \"schedule\": \"1f1b\" }";
  plan p;
  ts_err e = {{0}, 0};
  int rc = plan_from_json_text(text, strlen(text), "fp8", NULL, NULL, &p, &e);
  if (rc) rc = plan_from_json_text(text, strlen(text), "fp8", TACOSIM_SOURCE_DIR "/models",
                                   TACOSIM_SOURCE_DIR "/topologies", &p, &e);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  CU_ASSERT_NOT_EQUAL(exec_walk_check_program(&p, &prog, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fp8_cast"));
  plan_program_free(&prog);
}

/* TACO on the sequence-parallel all-gathers/reduce-scatters and on the
 * pipeline messages maps op by op. */
static void test_compressed_sp_pp_plans(void) {
  ts_err e = {{0}, 0};
  int rc = check_plan("gpt-h4096-tp2-sp-taco", &e);
  if (rc) fprintf(stderr, "\n  gpt-h4096-tp2-sp-taco: %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

/* Rank r's program of p, built, and every op of it one the executor runs
 * (the reason printed when not). */
static void build_mapped(const plan *p, int r, plan_program *prog, const char *path) {
  ts_err e = {{0}, 0};
  CU_ASSERT_FATAL(plan_build_program(p, r, prog, &e) == 0);
  int rc = exec_walk_check_program(p, prog, &e);
  if (rc) fprintf(stderr, "\n  %s: %s\n", path, e.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

/* Sequence parallelism, recomputation, ZeRO-1 and grouped-query attention
 * plans map op by op (experiments/exec-feat/plans/ and the shipped SP plan),
 * and their programs hold the ops the executor runs for them. */
static void test_layout_feature_plans(void) {
  const char *paths[] = {PLANS "gpt-h4096-tp2-sp.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-tp2-rcfull.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-tp2-rcsel.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-dp2-zero1.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/swiglu-h4096-gqa-tp2.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-pp2-gpipe.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-tp2-gpipe.json"};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    plan p;
    ts_err e = {{0}, 0};
    CU_ASSERT_FATAL(plan_load(paths[i], NULL, NULL, &p, &e) == 0);
    for (int r = 0; r < plan_world_size(&p); r++) {
      plan_program prog;
      build_mapped(&p, r, &prog, paths[i]);
      int ag = 0, rs = 0, recompute = 0, gathers = 0, last_fwd = -1, first_bwd = prog.n;
      for (int k = 0; k < prog.n; k++) {
        const plan_op *op = &prog.ops[k];
        if (op->kind == PLAN_OP_COMPUTE && op->phase == PLAN_PHASE_FWD) last_fwd = k;
        if (op->kind == PLAN_OP_COMPUTE && op->phase == PLAN_PHASE_BWD && k < first_bwd) first_bwd = k;
        ag += op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP && op->coll == PLAN_COLL_ALLGATHER;
        rs += op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP && op->coll == PLAN_COLL_REDUCESCATTER;
        recompute += op->phase == PLAN_PHASE_RECOMPUTE;
        gathers += op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_PARAM_GATHER;
      }
      const int micros = plan_micro_batches(&p), L = p.layers;
      /* GPipe at PP = 1 (the executor gives each micro-batch its own activations): every forward first */
      if (p.pp == 1 && p.schedule == PLAN_SCHED_GPIPE) {
        CU_ASSERT(micros > 1);
        CU_ASSERT(last_fwd >= 0 && last_fwd < first_bwd);
      }
      if (p.sequence_parallel) {
        /* per layer and micro-batch: 2 forward + 4 backward all-gathers, 2 + 2
         * reduce-scatters; the embedding and the head one of each per direction */
        CU_ASSERT_EQUAL(ag, micros * (6 * L + 2));
        CU_ASSERT_EQUAL(rs, micros * (4 * L + 2));
      }
      if (p.recompute == MODEL_RECOMPUTE_FULL) CU_ASSERT_EQUAL(recompute, micros * L * (EXEC_OP_ROPE + 2)); /* the 10 layer ops of a learned-position model (no rope), 2 all-reduces */
      if (p.recompute == MODEL_RECOMPUTE_SELECTIVE) CU_ASSERT_EQUAL(recompute, micros * L);
      if (p.zero1) CU_ASSERT(gathers > 0);
      plan_program_free(&prog);
    }
  }
}

/* experiments/FOLDER/NAME.json loaded into *p (its path in path); the test stops if it does not load. */
static void load_experiment_plan(const char *folder, const char *name, char *path, size_t cap, plan *p) {
  ts_err e = {{0}, 0};
  snprintf(path, cap, TACOSIM_SOURCE_DIR "/experiments/%s/%s.json", folder, name);
  int rc = plan_load(path, NULL, NULL, p, &e);
  if (rc) fprintf(stderr, "\n  %s: %s\n", path, e.msg);
  CU_ASSERT_FATAL(rc == 0);
}

/* The DP = 2 ZeRO-1 plans of run_2gpu_zero.sh map op by op, and their programs
 * order the DP ops as the executor runs them: with overlap_param_gather every
 * parameter all-gather is a forward-phase op before the first backward that
 * some compute op waits for; with overlap_grad_reduce false every gradient
 * bucket comes after the last backward compute op; otherwise the gathers follow
 * the optimizer and some bucket is issued before the backward ends. */
static void test_zero_layout_plans(void) {
  const char *tags[] = {"zero1", "zero1-pg", "zero1-reduce-after"};
  for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) {
    char path[512];
    plan p;
    load_experiment_plan("exec-feat/zero/plans", tags[i], path, sizeof path, &p);
    CU_ASSERT(p.zero1 && p.dp == 2 && p.zero_stage == 1);
    for (int r = 0; r < plan_world_size(&p); r++) {
      plan_program prog;
      build_mapped(&p, r, &prog, path);
      int last_bwd = -1, first_bwd = prog.n, optimizer = -1, gathers = 0, gathers_fwd = 0, gathers_waited = 0;
      int buckets = 0, buckets_late = 0;
      for (int k = 0; k < prog.n; k++) {
        const plan_op *op = &prog.ops[k];
        if (op->kind == PLAN_OP_COMPUTE && op->phase == PLAN_PHASE_BWD) {
          last_bwd = k;
          if (k < first_bwd) first_bwd = k;
        }
        if (op->kind == PLAN_OP_COMPUTE && op->model_op == PLAN_MOP_OPTIMIZER) optimizer = k;
      }
      for (int k = 0; k < prog.n; k++) {
        const plan_op *op = &prog.ops[k];
        if (op->kind != PLAN_OP_COLLECTIVE || op->group != PLAN_GROUP_DP) continue;
        if (op->model_op == PLAN_MOP_PARAM_GATHER) {
          gathers++;
          gathers_fwd += op->phase == PLAN_PHASE_FWD && k < first_bwd;
          if (!p.overlap_param_gather) CU_ASSERT(k > optimizer);
          for (int j = k + 1; j < prog.n && j < first_bwd; j++)
            for (int d = 0; d < PLAN_MAX_DEPS; d++)
              if (prog.ops[j].kind == PLAN_OP_COMPUTE && prog.ops[j].dep[d] == k) gathers_waited++, j = prog.n, d = PLAN_MAX_DEPS;
        }
        if (op->model_op == PLAN_MOP_GRAD_BUCKET) buckets++, buckets_late += k > last_bwd;
      }
      CU_ASSERT(gathers > 0 && buckets > 0);
      if (p.overlap_param_gather) {
        CU_ASSERT_EQUAL(gathers_fwd, gathers);
        CU_ASSERT_EQUAL(gathers_waited, gathers);
      }
      if (p.overlap_grad_reduce_off) CU_ASSERT_EQUAL(buckets_late, buckets);
      if (!p.overlap_grad_reduce_off) CU_ASSERT(buckets_late < buckets);
      plan_program_free(&prog);
    }
  }
}

/* tp_overlap_chunks 2 and 4 on the MFU plan: every op maps, and the split
 * forward row-parallel GEMMs and their all-reduces are ones the executor runs
 * by rows (2 per layer and micro-batch, k chunks each). */
static void test_tp_overlap_plans(void) {
  const char *paths[] = {TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-tp2-none-ovl2.json",
                         TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-tp2-none-ovl4.json"};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    plan p;
    ts_err e = {{0}, 0};
    CU_ASSERT_FATAL(plan_load(paths[i], NULL, NULL, &p, &e) == 0);
    CU_ASSERT_EQUAL(p.tp_overlap_chunks, (int)(2 * (i + 1)));
    for (int r = 0; r < plan_world_size(&p); r++) {
      plan_program prog;
      build_mapped(&p, r, &prog, paths[i]);
      int gemms = 0, reduces = 0;
      for (int k = 0; k < prog.n; k++) {
        gemms += prog.ops[k].row_chunks > 1 && prog.ops[k].kind == PLAN_OP_COMPUTE;
        reduces += prog.ops[k].row_chunks > 1 && prog.ops[k].kind == PLAN_OP_COLLECTIVE;
      }
      CU_ASSERT_EQUAL(gemms, 2 * p.layers * plan_micro_batches(&p) * p.tp_overlap_chunks);
      CU_ASSERT_EQUAL(reduces, gemms);
      /* a row-split op the executor cannot run by rows is refused */
      for (int k = 0; k < prog.n; k++)
        if (prog.ops[k].row_chunks > 1 && prog.ops[k].kind == PLAN_OP_COLLECTIVE) {
          prog.ops[k].phase = PLAN_PHASE_BWD;
          CU_ASSERT_NOT_EQUAL(exec_walk_check_program(&p, &prog, &e), 0);
          CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "row-split"));
          break;
        }
      plan_program_free(&prog);
    }
  }
}

/* PP = 2: every send/recv goes to the stage the executor derives
 * (exec_walk_pp_peer_stage), and the messages pair up: rank r's k-th send to
 * rank q carries the same tag as q's k-th recv from r (blocking pairs meet). */
/* Every rank's program of p maps onto the executor. */
static int exec_walk_check_program_all(const plan *p, ts_err *e) {
  for (int r = 0; r < plan_world_size(p); r++) {
    plan_program prog;
    if (plan_build_program(p, r, &prog, e)) return -1;
    int rc = exec_walk_check_program(p, &prog, e);
    plan_program_free(&prog);
    if (rc) return -1;
  }
  return 0;
}

static void pipeline_messages(const char *path) {
  plan p;
  ts_err e;
  CU_ASSERT_FATAL(plan_load(path, NULL, NULL, &p, &e) == 0);
  CU_ASSERT_FATAL(exec_walk_check_program_all(&p, &e) == 0);
  plan_program prog[2];
  for (int r = 0; r < 2; r++) CU_ASSERT_FATAL(plan_build_program(&p, r, &prog[r], &e) == 0);
  int tags[2][2][128], counts[2][2] = {{0}}; /* [rank][send, recv][k] */
  for (int r = 0; r < 2; r++) {
    int stage = plan_coord_of(&p, r).pp;
    for (int i = 0; i < prog[r].n; i++) {
      const plan_op *op = &prog[r].ops[i];
      if (op->kind != PLAN_OP_SEND && op->kind != PLAN_OP_RECV) continue;
      CU_ASSERT_EQUAL(plan_coord_of(&p, op->peer).pp, exec_walk_pp_peer_stage(stage, p.pp, op));
      int k = op->kind == PLAN_OP_SEND ? 0 : 1;
      if (counts[r][k] < 128) tags[r][k][counts[r][k]++] = op->tag;
    }
  }
  /* 8 micro-batches: 8 activations one way, 8 gradients the other (per chunk
   * boundary; interleaved with 2 chunks on 2 stages: 3 boundaries, 3 sends per rank and micro-batch) */
  CU_ASSERT_EQUAL(counts[0][0], plan_micro_batches(&p) * (p.pp * p.vpp - 1) * 2 / p.pp);
  for (int r = 0; r < 2; r++) {
    CU_ASSERT_EQUAL(counts[r][0], counts[1 - r][1]);
    for (int k = 0; k < counts[r][0] && k < counts[1 - r][1]; k++) CU_ASSERT_EQUAL(tags[r][0][k], tags[1 - r][1][k]);
  }
  for (int r = 0; r < 2; r++) plan_program_free(&prog[r]);
}
static void test_pipeline_messages(void) {
  pipeline_messages(PLANS "gpt-h4096-pp2.json");
  pipeline_messages(TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-pp2-gpipe.json");
  pipeline_messages(PLANS "gpt-h4096-pp2-interleaved.json"); /* wraps: stage 1's chunk 0 sends to stage 0's chunk 1 */
}

/* Activation slots (exec_walk_slots): two micro-batches held at once never
 * share a slot, the count is the program's in-flight peak (forwards begun
 * minus backwards done, counted here from each micro-batch's first and last
 * op), pp - stage (+1, below) under 1F1B and every micro-batch under GPipe; a slot's previous holder
 * ended before its next one begins. */
static void slots_of_skip(const char *path, int gpipe, int skip) {
  plan p;
  ts_err e;
  CU_ASSERT_FATAL(plan_load(path, NULL, NULL, &p, &e) == 0);
  const int M = plan_micro_batches(&p);
  for (int r = 0; r < plan_world_size(&p); r++) {
    plan_program prog;
    CU_ASSERT_FATAL(plan_build_program(&p, r, &prog, &e) == 0);
    int slot_of[64], prev_of[64], first[64], last[64];
    CU_ASSERT_FATAL(M <= 64);
    const int n = exec_walk_slots(&prog, M, skip, slot_of, prev_of, &e);
    for (int k = 0; k < M; k++) first[k] = last[k] = -1;
    for (int i = 0; i < prog.n; i++) {
      int k = prog.ops[i].micro;
      if (k < 0) continue;
      if (first[k] < 0 && !(skip && prog.ops[i].kind == PLAN_OP_RECV && prog.ops[i].phase == PLAN_PHASE_FWD))
        first[k] = i;
      last[k] = i;
    }
    int held = 0, peak = 0; /* micro-batches begun and not yet ended, walking the ops */
    for (int i = 0; i < prog.n; i++)
      for (int k = 0; k < M; k++) {
        if (first[k] == i) held++, peak = held > peak ? held : peak;
        if (last[k] == i) held--;
      }
    CU_ASSERT_EQUAL(n, peak);
    const int stage = plan_coord_of(&p, r).pp;
    /* 1F1B: pp - stage from the first op that is not a forward receive; counting those, one more where the
     * program posts the next forward's receive before the backward in hand (plan_build_program does on the
     * last stage; the executor lands it in a boundary buffer) */
    if (p.vpp == 1 && gpipe) CU_ASSERT_EQUAL(n, M);
    if (p.vpp == 1 && !gpipe && skip) CU_ASSERT_EQUAL(n, p.pp - stage < M ? p.pp - stage : M);
    if (p.vpp == 1 && !gpipe && !skip) CU_ASSERT(n >= p.pp - stage && n <= p.pp - stage + 1 && n <= M);
    for (int a = 0; a < M; a++) {
      CU_ASSERT(slot_of[a] >= 0 && slot_of[a] < n);
      if (prev_of[a] >= 0) {
        CU_ASSERT_EQUAL(slot_of[prev_of[a]], slot_of[a]);
        CU_ASSERT(last[prev_of[a]] < first[a]);
      }
      for (int b = a + 1; b < M; b++) /* lifetimes that overlap hold different slots */
        if (first[a] <= last[b] && first[b] <= last[a]) CU_ASSERT_NOT_EQUAL(slot_of[a], slot_of[b]);
    }
    plan_program_free(&prog);
  }
}
static void slots_of(const char *path, int gpipe) {
  slots_of_skip(path, gpipe, 0);
  slots_of_skip(path, gpipe, 1);
}
static void test_activation_slots(void) {
  slots_of(PLANS "gpt-h4096-pp2.json", 0);
  slots_of(TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-pp2-gpipe.json", 1);
  slots_of(PLANS "gpt-h4096-pp2-interleaved.json", 0);
  slots_of(TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/gpt-h4096-pp2-last3.json", 0);
  slots_of(PLANS "gpt-h4096-tp2-none.json", 0); /* PP = 1, 1F1B: one slot */
}

/* Uneven stages: every rank's program maps onto the executor, and its stage holds the plan's layers. */
static void test_uneven_plans(void) {
  const char *names[] = {"gpt-h4096-pp2-last3", "gpt-h4096-pp2-first3", "gpt-h4096-l9-pp2-acct-loss"};
  const int stage0[] = {5, 3, 5};
  for (int i = 0; i < 3; i++) {
    char path[512];
    snprintf(path, sizeof path, TACOSIM_SOURCE_DIR "/experiments/exec-feat/plans/%s.json", names[i]);
    plan p;
    ts_err e;
    CU_ASSERT_FATAL(plan_load(path, NULL, NULL, &p, &e) == 0);
    CU_ASSERT_EQUAL(exec_walk_check_program_all(&p, &e), 0);
    CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 0, 0), 0);
    CU_ASSERT_EQUAL(plan_vchunk_layers(&p, 0, 0), stage0[i]);
    CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 1, 0), stage0[i]);
    CU_ASSERT_EQUAL(plan_vchunk_layers(&p, 1, 0) + stage0[i], p.layers);
  }
}

/* The layer ops are found by name: GPT's learned positions give the identity. */
static void test_layer_op_index(void) {
  plan p;
  ts_err e;
  CU_ASSERT_FATAL(plan_load(PLANS "gpt-h4096-tp2-none.json", NULL, NULL, &p, &e) == 0);
  int index[EXEC_OP_COUNT];
  CU_ASSERT_FATAL(exec_walk_layer_op_index(&p, index, &e) == 0);
  for (int i = 0; i < EXEC_OP_ROPE; i++) CU_ASSERT_EQUAL(index[i], i);
  CU_ASSERT_EQUAL(index[EXEC_OP_ROPE], -1); /* learned positions: no rope op */
}

/* The zoo's models as published (experiments/validation/zoo/plans/: RoPE,
 * QKV bias, linear biases, untied output weights; recomputation, GPipe and
 * 1F1B at PP = 1) run op by op; a RoPE model's rope op sits between qkv and
 * attn, and the executor's forward order is model_layer_ops()'s. */
static void test_zoo_plans(void) {
  const char *names[] = {"llama3-8b-l4-m1-s4096", "llama3-70b-l2-m1-s4096-full", "qwen2.5-7b-l4-m4-s2048-full-gpipe",
                         "qwen2.5-32b-l2-m1-s4096-sel", "gpt3-6.7b-l4-m2-s2048", "gpt3-13b-l4-m1-s2048-full-gpipe"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[512];
    snprintf(path, sizeof path, TACOSIM_SOURCE_DIR "/experiments/validation/zoo/plans/%s.json", names[i]);
    plan p;
    ts_err e = {{0}, 0};
    int rc = plan_load(path, NULL, NULL, &p, &e);
    for (int r = 0; rc == 0 && r < plan_world_size(&p); r++) {
      plan_program prog;
      if ((rc = plan_build_program(&p, r, &prog, &e)) == 0) {
        rc = exec_walk_check_program(&p, &prog, &e);
        plan_program_free(&prog);
      }
    }
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) continue;
    int index[EXEC_OP_COUNT];
    CU_ASSERT_FATAL(exec_walk_layer_op_index(&p, index, &e) == 0);
    if (p.model.position == MODEL_POS_ROPE) {
      CU_ASSERT_EQUAL(index[EXEC_OP_ROPE], index[EXEC_OP_QKV] + 1);
      CU_ASSERT_EQUAL(index[EXEC_OP_ATTN], index[EXEC_OP_ROPE] + 1);
    } else {
      CU_ASSERT_EQUAL(index[EXEC_OP_ROPE], -1);
    }
    for (int k = 1, prev = -1; k < EXEC_OP_COUNT; k++) { /* exec_layer_fwd_order is the model's order */
      int ix = index[exec_layer_fwd_order[k - 1]];
      if (ix >= 0) {
        CU_ASSERT(ix > prev);
        prev = ix;
      }
    }
  }
}

/* Mixture-of-experts plans on one GPU (experiments/exec-moe/plans/): every op
 * is one the executor runs (router, top-k, permutation, the expert GEMMs in
 * dgrad/wgrad halves, the combine, the shared FFN); no token collective at
 * EP = 1; the MoE ops are found by name in the model's order, the dense FFN's
 * only when the model has dense layers. */
static void test_moe_plans(void) {
  const char *names[] = {"moe-tiny-1gpu", "mixtral-8x7b-l1-1gpu", "mixtral-8x7b-l2-1gpu", "mixtral-8x22b-l1-1gpu",
                         "mixtral-8x7b-l2-m2-1gpu"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[512];
    snprintf(path, sizeof path, TACOSIM_SOURCE_DIR "/experiments/exec-moe/plans/%s.json", names[i]);
    plan p;
    ts_err e = {{0}, 0};
    int rc = plan_load(path, NULL, NULL, &p, &e), colls = 0, experts = 0;
    plan_program prog;
    if (rc == 0 && (rc = plan_build_program(&p, 0, &prog, &e)) == 0) {
      rc = exec_walk_check_program(&p, &prog, &e);
      for (int j = 0; j < prog.n; j++) colls += prog.ops[j].kind == PLAN_OP_COLLECTIVE;
      plan_program_free(&prog);
    }
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(colls, 0); /* one GPU: no TP, DP or token collectives */
    int index[EXEC_OP_COUNT];
    CU_ASSERT_FATAL(exec_walk_layer_op_index(&p, index, &e) == 0);
    for (int k = EXEC_OP_ROUTER; k < EXEC_OP_COUNT; k++) experts += index[k] >= 0;
    const int shared = p.model.shared_experts > 0;
    CU_ASSERT_EQUAL(experts, shared ? 10 : 7);
    CU_ASSERT_EQUAL(index[EXEC_OP_FC1] >= 0, p.model.dense_layers > 0);
    CU_ASSERT_EQUAL(index[EXEC_OP_ROUTER], index[EXEC_OP_LN2] + 1 + (p.model.dense_layers > 0 ? 3 : 0));
    CU_ASSERT_EQUAL(index[EXEC_OP_MLP_RESIDUAL], index[shared ? EXEC_OP_SHARED_FC2 : EXEC_OP_UNPERMUTE] + 1);
  }
}

/* EP 2 = DP 2 (experiments/exec-moe/plans/mixtral-8x7b-l1-ep2 and the others): every op of both ranks
 * is one the executor runs; per MoE layer and micro-batch, four token
 * all-to-alls (dispatch and combine, forward and backward) and the imbalance
 * op; the TACO variant's all-to-alls all compressed (exec_moe_ep.c). */
static void test_moe_ep_plans(void) {
  const char *names[] = {"mixtral-8x7b-l1-ep2", "mixtral-8x7b-l2-ep2", "mixtral-8x7b-l2-ep2-taco"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[512];
    plan p;
    ts_err e = {{0}, 0};
    load_experiment_plan("exec-moe/plans", names[i], path, sizeof path, &p);
    CU_ASSERT_EQUAL_FATAL(p.ep, 2);
    const int taco = strstr(names[i], "taco") != NULL;
    for (int r = 0; r < plan_world_size(&p); r++) {
      plan_program prog;
      CU_ASSERT_FATAL(plan_build_program(&p, r, &prog, &e) == 0);
      int tokens = 0, waits = 0;
      for (int j = 0; j < prog.n; j++) {
        tokens += prog.ops[j].kind == PLAN_OP_COLLECTIVE && prog.ops[j].model_op == PLAN_MOP_MOE_TOKENS;
        waits += prog.ops[j].kind == PLAN_OP_COMPUTE && prog.ops[j].model_op == PLAN_MOP_MOE_IMBALANCE;
      }
      const int rc = exec_walk_check_program(&p, &prog, &e);
      if (rc) fprintf(stderr, "\n  %s rank %d: %s\n", names[i], r, e.msg);
      CU_ASSERT_EQUAL(rc, 0);
      int coded = 0;
      for (int j = 0; j < prog.n; j++)
        coded += prog.ops[j].model_op == PLAN_MOP_MOE_TOKENS && prog.ops[j].codec.kind == PLAN_CODEC_TACO;
      CU_ASSERT_EQUAL(coded, taco ? tokens : 0);
      CU_ASSERT_EQUAL(tokens, 4 * p.layers * plan_micro_batches(&p));
      CU_ASSERT(waits > 0);
      plan_program_free(&prog);
    }
  }
}

/* Every model of the zoo (each JSON file of models/) as published, in a one-GPU
 * training plan of 1 layer (TP = PP = DP = 1, no dropout, the executor's attention):
 * every op of its program is one the executor runs, its layer ops found by
 * name in the model's order: DeepSeek-V3's multi-head latent attention too
 * (ln1 q_a q_a_norm q_b kv_a kv_a_norm kv_b rope attn, exec_mla.c; no qkv),
 * whose plan exec_plan_refuse accepts at TP 1 with its sigmoid router (a CUDA
 * build's `cli` test). Qwen3's
 * QK norm (qwen3-*: q_norm and k_norm between qkv and rope) maps to the
 * executor's ops of those names. A model added to the zoo enters this list or fails it. */
static int zoo_plan_layout(const char *model, int layers, const char *cluster, const char *layout, int global, plan *p,
                           ts_err *e);
static int zoo_plan(const char *model, plan *p, ts_err *e) {
  return zoo_plan_layout(model, 1, "h200x2-nvlink", "\"dp\": 1", 2, p, e);
}
static int zoo_plan_layout(const char *model, int layers, const char *cluster, const char *layout, int global, plan *p,
                           ts_err *e) {
  char path[] = "/tmp/test_exec_walk_zoo_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return ts_fail_sys(e, "mkstemp");
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(path);
    return ts_fail_sys(e, "fdopen");
  }
  fprintf(f,
          "{\"schema\": 1, \"name\": \"zoo-%s\", \"model\": \"%s\", \"cluster\": \"%s\", "
          "\"attention_backend\": \"executor\", \"hidden_dropout\": 0, \"bias_fusion\": false, \"schedule\": \"1f1b\", "
          "\"layout\": {%s, \"tp\": 1, \"pp\": 1, \"vpp\": 1, \"zero1\": false, \"recompute\": \"none\"}, "
          "\"batch\": {\"micro\": 1, \"global\": %d, \"seq\": 512}, \"layers_override\": %d}\n",
          model, model, cluster, layout, global, layers);
  fclose(f);
  int rc = plan_load(path, NULL, NULL, p, e);
  unlink(path);
  return rc;
}

static void test_every_zoo_model(void) {
  const char *models[] = {"gpt-tiny",     "gpt-h4096",     "gpt3-125m",   "gpt3-350m",     "gpt3-1.3b",
                          "gpt3-2.7b",    "gpt3-6.7b",     "gpt3-13b",    "gpt3-175b",     "llama3-8b",
                          "llama3-70b",   "llama3-405b",   "qwen2.5-7b",  "qwen2.5-14b",   "qwen2.5-32b",
                          "qwen2.5-72b",  "mixtral-8x7b",  "mixtral-8x22b", "moe-tiny",    "qwen3-30b-a3b",
                          "qwen3-235b-a22b", "qwen3-tiny", "qwen3-8b",   "qwen3-14b",     "qwen3-32b",
                          "deepseek-v3",  "mla-tiny"};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    plan p;
    ts_err e = {{0}, 0};
    int rc = zoo_plan(models[i], &p, &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", models[i], e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int index[EXEC_OP_COUNT];
    rc = exec_walk_layer_op_index(&p, index, &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", models[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) continue;
    const int mla = p.model.attention == MODEL_ATTN_MLA;
    CU_ASSERT_EQUAL(index[EXEC_OP_QKV] < 0, mla);
    for (int o = EXEC_OP_Q_A; o <= EXEC_OP_KV_B; o++) CU_ASSERT_EQUAL(index[o] >= 0, mla);
    if (mla) { /* ln1 q_a q_a_norm q_b kv_a kv_a_norm kv_b rope attn attn_out, as model_layer_ops orders them */
      for (int o = EXEC_OP_Q_A; o <= EXEC_OP_KV_B; o++) CU_ASSERT_EQUAL(index[o], index[EXEC_OP_LN1] + 1 + (o - EXEC_OP_Q_A));
      CU_ASSERT_EQUAL(index[EXEC_OP_ROPE], index[EXEC_OP_KV_B] + 1);
      CU_ASSERT_EQUAL(index[EXEC_OP_ATTN], index[EXEC_OP_ROPE] + 1);
      CU_ASSERT_EQUAL(index[EXEC_OP_ATTN_OUT], index[EXEC_OP_ATTN] + 1);
    }
    CU_ASSERT_EQUAL(index[EXEC_OP_ROPE] >= 0, p.model.position == MODEL_POS_ROPE);
    CU_ASSERT_EQUAL(index[EXEC_OP_Q_NORM] >= 0, p.model.qk_norm);
    CU_ASSERT_EQUAL(index[EXEC_OP_K_NORM] >= 0, p.model.qk_norm);
    if (p.model.qk_norm) { /* qkv q_norm k_norm rope attn, as model_layer_ops orders them */
      CU_ASSERT_EQUAL(index[EXEC_OP_Q_NORM], index[EXEC_OP_QKV] + 1);
      CU_ASSERT_EQUAL(index[EXEC_OP_K_NORM], index[EXEC_OP_QKV] + 2);
      CU_ASSERT_EQUAL(index[EXEC_OP_ROPE], index[EXEC_OP_QKV] + 3);
      CU_ASSERT_EQUAL(index[EXEC_OP_ATTN], index[EXEC_OP_QKV] + 4);
    }
    plan_program prog;
    CU_ASSERT_FATAL(plan_build_program(&p, 0, &prog, &e) == 0);
    rc = exec_walk_check_program(&p, &prog, &e);
    plan_program_free(&prog);
    if (rc) fprintf(stderr, "\n  %s: %s\n", models[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
  }
}

/* DeepSeek-V3 cut to 4 layers: its 3 dense layers and a MoE one (8 of 256 experts, a shared one), all with
 * multi-head latent attention, at DP 8 = EP 8 on one 8-GPU node (the experts fit at 32 a GPU): every op of
 * rank 0's program is one the executor runs (the plan itself passes exec_plan_refuse: its sigmoid
 * router runs too; the walk alone is checked here). */
static void test_deepseek_moe_layers(void) {
  plan p;
  ts_err e = {{0}, 0};
  int rc = zoo_plan_layout("deepseek-v3", 4, "h200x8-nvswitch", "\"dp\": 8, \"ep\": 8", 16, &p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  plan_program prog;
  CU_ASSERT_FATAL(plan_build_program(&p, 0, &prog, &e) == 0);
  int q_a = 0, router = 0, index[EXEC_OP_COUNT];
  CU_ASSERT_EQUAL_FATAL(exec_walk_layer_op_index(&p, index, &e), 0);
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->phase != PLAN_PHASE_FWD) continue;
    q_a += op->model_op == index[EXEC_OP_Q_A];
    router += op->model_op == index[EXEC_OP_ROUTER];
  }
  CU_ASSERT_EQUAL(q_a, 4 * plan_micro_batches(&p));    /* every layer's latent attention */
  CU_ASSERT_EQUAL(router, 1 * plan_micro_batches(&p)); /* the one MoE layer */
  rc = exec_walk_check_program(&p, &prog, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  plan_program_free(&prog);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("exec_walk", NULL, NULL);
  CU_add_test(s, "shipped PP=1 plans run op by op", test_supported_plans);
  CU_add_test(s, "TACO on DP gradient buckets maps", test_dp_codec_plans);
  CU_add_test(s, "TACO on SP collectives and pipeline messages maps", test_compressed_sp_pp_plans);
  CU_add_test(s, "SP, recomputation and ZeRO-1 plans run op by op", test_layout_feature_plans);
  CU_add_test(s, "layer ops by name", test_layer_op_index);
  CU_add_test(s, "MoE plans on one GPU run op by op", test_moe_plans);
  CU_add_test(s, "MoE plans at EP 2 = DP 2 run op by op (plain and TACO token all-to-alls)", test_moe_ep_plans);
  CU_add_test(s, "zoo models as published (RoPE, biases, untied) run op by op", test_zoo_plans);
  CU_add_test(s, "tp_overlap_chunks plans run op by op, by rows", test_tp_overlap_plans);
  CU_add_test(s, "ZeRO-1 with overlap_param_gather / overlap_grad_reduce false plans run op by op", test_zero_layout_plans);
  CU_add_test(s, "validation plans (SwiGLU/RMSNorm, PP2, DP2, TACO) run op by op", test_validation_plans);
  CU_add_test(s, "PP = 2 messages (1F1B, GPipe, interleaved) pair up with the executor's peers", test_pipeline_messages);
  CU_add_test(s, "activation slots: the program's in-flight peak (1F1B pp - stage, GPipe all)", test_activation_slots);
  CU_add_test(s, "uneven PP = 2 stages run op by op with the plan's layers", test_uneven_plans);
  CU_add_test(s, "an FP8 program's casts are not the executor's ops", test_fp8_program_refused);
  CU_add_test(s, "every zoo model as published runs op by op (DeepSeek-V3's MLA included)", test_every_zoo_model);
  CU_add_test(s, "DeepSeek-V3's dense and MoE layers with MLA run op by op", test_deepseek_moe_layers);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
