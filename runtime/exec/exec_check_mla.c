/* exec_check_mla.c — `tacorun execute --check`, multi-head latent attention
 * part: the MLA layers (exec_mla.c, rt_mla.cu, the unfused attention with
 * values narrower than queries and keys) on one GPU, walked from the plan's
 * own program, against the float64 reference (exec_ref_mla.c, itself checked
 * by finite differences in tests/test_exec_ref.c): the loss and every tensor's
 * gradient within the dense check's tolerances, then 30 AdamW steps on one
 * batch (the loss must fall). Cases: DeepSeek-V3's attention in small on a
 * dense FFN, the same with full recomputation (the latent activations shared
 * between layers and rerun before each backward), and on a DeepSeek-V3-like
 * MoE stack (a dense first layer, then experts with a shared one; routed with
 * the softmax top-k the executor runs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_check.h"
#include "exec_model.h"
#include "exec_walk.h"

/* hidden 128, 4 heads of qk 32 + 32 (nope + rope) and v 32, q_lora 64, kv_lora 32; seq 128 */
#define MLA_SMALL                                                                                                  \
  .vocab = 512, .hidden = 128, .heads = 4, .layers = 2, .seq = 128, .act = EXEC_ACT_SWIGLU,                      \
  .norm = EXEC_NORM_RMSNORM, .norm_eps = 1e-6, .rope_theta = 1e4, .untied = 1, .q_lora = 64, .kv_lora = 32,      \
  .qk_nope = 32, .qk_rope = 32, .v_head = 32

static const struct {
  exec_ref_config cfg;
  const char *layout, *what;
} mla_cases[] = {
    {{MLA_SMALL, .batch = 2, .ffn = 256}, NULL, "dense FFN"},
    {{MLA_SMALL, .batch = 2, .ffn = 256, .recompute = 2}, ", \"recompute\": \"full\"", "dense FFN, full recomputation"},
    {{MLA_SMALL, .batch = 1, .ffn = 256, .experts = 8, .top_k = 2, .expert_ffn = 64, .shared_ffn = 64,
      .dense_layers = 1}, NULL, "MoE (a dense first layer, 8 experts top 2, a shared one; softmax routing)"},
};

/* One case: the reference's loss and gradient of batch 0, the walked plan's against them, 30 AdamW steps. */
static int check_case(rt_nccl *w, const exec_ref_config *cfg, const char *layout, const char *what, FILE *log,
                      int *failures, ts_err *e) {
  exec_model m;
  exec_walk wk;
  memset(&wk, 0, sizeof wk);
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  exec_ref_tensors(cfg, t, EXEC_REF_MAX_TENSORS, &total);
  const size_t T = (size_t)cfg->batch * cfg->seq;
  double *params = malloc(total * 8), *grad = malloc(total * 8), *local = NULL, ref_loss = 0;
  int *ti = malloc(T * sizeof *ti), *li = malloc(T * sizeof *li);
  int32_t *tok = malloc(T * 4), *lab = malloc(T * 4);
  float *g = NULL, loss = 0, first = 0, last = 0;
  int rc = -1, created = 0, bad = 0;
  char model_path[256] = "", text[1024];
  if (!params || !grad || !ti || !li || !tok || !lab) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  exec_ref_init(cfg, 2024, 1, params);
  exec_ref_tokens(cfg, 100, ti, li);
  for (size_t j = 0; j < T; j++) tok[j] = ti[j], lab[j] = li[j];
  if (exec_ref_loss_grad(cfg, params, ti, li, &ref_loss, grad, e)) goto out;
  if (exec_check_plan_text(cfg, 1, 1, 1, 1, layout, NULL, NULL, model_path, sizeof model_path, text, sizeof text, e))
    goto out;
  created = 1; /* (exec_model_destroy frees what a failed create allocated) */
  if (exec_model_create(&m, cfg, 1, 1, 0, NULL, 1, 0, NULL, w->streams[0], e)) goto out;
  if (exec_model_load_ref(&m, params, e) || exec_model_set_data(&m, tok, lab, e)) goto out;
  if (exec_walk_init_text(&wk, text, "exec-check MLA plan", 0, &m, e)) goto out;
  if (exec_walk_iteration(&m, &wk, 1, e) || exec_model_check_finite(&m, 0, &loss, e)) goto out;
  g = malloc(m.nparams * sizeof *g);
  local = malloc(m.nparams * sizeof *local);
  if (!g || !local) {
    ts_fail_sys(e, "exec check: out of memory");
    goto out;
  }
  if (exec_model_grads_to_host(&m, g, e)) goto out;
  exec_model_shard_of(&m, grad, local);
  fprintf(log, "\nMLA model (%s): hidden %d, %d heads of qk %d + %d and v %d, q_lora %d, kv_lora %d, %d layers, seq "
          "%d x %d: plan program of %d ops, one GPU; attention: unfused (values %d wide, queries and keys %d)\n", what,
          cfg->hidden, cfg->heads, cfg->qk_nope, cfg->qk_rope, cfg->v_head, cfg->q_lora, cfg->kv_lora, cfg->layers,
          cfg->batch, cfg->seq, wk.prog.n, cfg->v_head, cfg->qk_nope + cfg->qk_rope);
  int loss_ok = fabs(loss - ref_loss) <= CHECK_TOL_LOSS * ref_loss;
  fprintf(log, "  loss: float64 %.6f  executor %.6f%s\n  relative L2 error of each gradient vs float64:\n", ref_loss,
          loss, loss_ok ? "" : "  FAILED");
  bad += !loss_ok + exec_check_compare_grads(&m, g, local, CHECK_TOL_GRAD, log);
  m.lr = 1e-3f;
  for (int s = 0; s < 30; s++) {
    if (exec_walk_iteration(&m, &wk, 0, e) || exec_model_check_finite(&m, s, &loss, e)) goto out;
    if (s == 0) first = loss;
    last = loss;
  }
  bad += !(last < 0.9f * first);
  fprintf(log, "  30 AdamW steps (lr 1e-3) on one batch: loss %.4f -> %.4f\n  %s\n", first, last,
          bad ? "FAILED" : "passed");
  *failures += bad;
  rc = 0;
out:
  if (model_path[0]) remove(model_path);
  exec_walk_destroy(&wk);
  if (created) exec_model_destroy(&m);
  free(params), free(grad), free(local), free(ti), free(li), free(tok), free(lab), free(g);
  return rc;
}

int exec_check_mla(rt_nccl *w, FILE *log, int *failures, ts_err *e) {
  for (size_t i = 0; i < sizeof mla_cases / sizeof *mla_cases; i++)
    if (check_case(w, &mla_cases[i].cfg, mla_cases[i].layout, mla_cases[i].what, log, failures, e)) return -1;
  return 0;
}
