/* sim_host.c — the host clock (sim_host.h). */
#include "sim_host.h"

#include <math.h>
#include <string.h>

/* The framework section's costs for plan p, or -1 naming what the calibration lacks. */
static int setup_framework(sim_host *h, const plan *p, const schema_calibration *cal, ts_err *e) {
  const char *name = plan_host_framework_names[p->host_framework];
  const char *file = cal && cal->path[0] ? cal->path : "calibration";
  const schema_framework_host *f = cal ? &cal->fw_host : NULL;
  if (!f || strcmp(f->framework, name) != 0)
    return ts_fail(e, file, "framework_host",
                   "the plan (%s) asks for host_framework \"%s\" and this calibration has no such section "
                   "(experiments/published/moe/host/ measures one)",
                   p->path[0] ? p->path : "plan", name);
  const bool moe = p->model.experts > 0, dense = p->model.experts == 0 || p->model.dense_layers > 0;
  for (int k = 0; k < SCHEMA_FW_NLAYERS; k++) {
    const bool needed = k == SCHEMA_FW_LAYER_MOE ? moe : dense;
    if (needed && !(f->layer_fwd_us[k] > 0))
      return ts_fail(e, file, "framework_host.layers", "no \"%s\" layer, which the model %s has",
                     k == SCHEMA_FW_LAYER_MOE ? "moe" : "dense", p->model.name);
    h->fw_layer_s[k][0] = f->layer_fwd_us[k] * 1e-6;
    h->fw_layer_s[k][1] = f->layer_bwd_us[k] * 1e-6;
    for (int b = 0; b < SCHEMA_FW_NPARTS; b++) h->fw_part_us[k][b] = f->part_us[k][b];
  }
  for (int c = 0; c < TS_COLL_COUNT; c++) h->fw_call_s[c] = f->call_us[c] * 1e-6;
  h->fw = true;
  return 0;
}

int sim_host_setup(sim_host *h, const plan *p, const schema_calibration *cal, ts_err *e) {
  *h = (sim_host){0};
  h->cal = cal;
  const bool has = cal && cal->has_host;
  if (p->host_framework != PLAN_HOST_EXECUTOR && setup_framework(h, p, cal, e)) return -1;
  if (p->host_launch_us > 0) {
    h->launch_s = h->gemm_s = h->event_s = p->host_launch_us * 1e-6;
  } else if (has) {
    h->launch_s = cal->host_launch_us * 1e-6;
    h->gemm_s = cal->host_gemm_launch_us * 1e-6;
    h->event_s = cal->host_event_us > 0 ? cal->host_event_us * 1e-6 : h->launch_s;
  } else if (!h->fw) {
    return 0; /* off */
  }
  h->sync_s = p->host_sync_us > 0 ? p->host_sync_us * 1e-6 : 0;
  h->on = true;
  return 0;
}

static int entries_of(const plan_op *op) { return op->launches + op->gemm_launches + op->events; }

static bool fw_layer_op(const plan_op *op, int n_mops) {
  return op->kind == PLAN_OP_COMPUTE && op->model_op >= 0 && op->model_op < n_mops && op->layer >= 0 &&
         (op->phase == PLAN_PHASE_FWD || op->phase == PLAN_PHASE_BWD || op->phase == PLAN_PHASE_RECOMPUTE);
}

schema_fw_part sim_host_fw_part(const char *name, bool moe) {
  if (!strcmp(name, "fc1") || !strcmp(name, "act") || !strcmp(name, "fc2")) return SCHEMA_FW_MLP;
  if (!strcmp(name, "router") || !strcmp(name, "router_topk")) return SCHEMA_FW_ROUTER;
  if (!strcmp(name, "permute")) return SCHEMA_FW_DISPATCH;
  if (!strncmp(name, "expert_", 7) || !strncmp(name, "shared_", 7)) return SCHEMA_FW_EXPERTS;
  if (!strcmp(name, "unpermute")) return SCHEMA_FW_COMBINE;
  if (!strcmp(name, "mlp_residual")) return moe ? SCHEMA_FW_COMBINE : SCHEMA_FW_MLP;
  return SCHEMA_FW_ATTENTION;
}

static int kind_of(const plan *p, const plan_op *op) {
  return model_layer_is_moe(&p->model, op->layer) ? SCHEMA_FW_LAYER_MOE : SCHEMA_FW_LAYER_DENSE;
}

void sim_host_fw_entry_rates(const sim_host *h, const plan *p, const model_op *mops, int n_mops,
                             const plan_program *prog, sim_host_fw_rates rate_s) {
  int first_layer[SCHEMA_FW_NLAYERS] = {-1, -1}, first_micro[SCHEMA_FW_NLAYERS] = {-1, -1};
  long long n[SCHEMA_FW_NLAYERS][2][SCHEMA_FW_NPARTS] = {{{0}}};
  memset(rate_s, 0, sizeof(sim_host_fw_rates));
  if (!h->fw) return;
  for (int i = 0; i < prog->n; i++) {
    const plan_op *op = &prog->ops[i];
    if (!fw_layer_op(op, n_mops) || op->phase == PLAN_PHASE_RECOMPUTE) continue;
    const int k = kind_of(p, op);
    if (first_layer[k] < 0) first_layer[k] = op->layer, first_micro[k] = op->micro;
    if (op->layer == first_layer[k] && op->micro == first_micro[k])
      n[k][op->phase == PLAN_PHASE_BWD][sim_host_fw_part(mops[op->model_op].name, k == SCHEMA_FW_LAYER_MOE)] +=
          entries_of(op);
  }
  for (int k = 0; k < SCHEMA_FW_NLAYERS; k++) {
    const double *part = h->fw_part_us[k];
    for (int ph = 0; ph < 2; ph++) {
      double w = 0;
      long long all = 0;
      for (int b = 0; b < SCHEMA_FW_NPARTS; b++)
        if (n[k][ph][b] > 0) w += part[b], all += n[k][ph][b];
      for (int b = 0; b < SCHEMA_FW_NPARTS; b++) {
        if (n[k][ph][b] <= 0) continue;
        rate_s[k][ph][b] = w > 0 ? h->fw_layer_s[k][ph] * part[b] / w / (double)n[k][ph][b]
                                 : h->fw_layer_s[k][ph] / (double)all;
      }
    }
  }
}

double sim_host_fw_op_s(const sim_host *h, const plan *p, const model_op *mops, int n_mops,
                        const sim_host_fw_rates rate_s, const plan_op *op) {
  if (!h->fw || !fw_layer_op(op, n_mops)) return -1;
  const int k = kind_of(p, op);
  const int b = sim_host_fw_part(mops[op->model_op].name, k == SCHEMA_FW_LAYER_MOE);
  return entries_of(op) * rate_s[k][op->phase == PLAN_PHASE_BWD][b];
}

double sim_host_fw_call_s(const sim_host *h, const plan_op *op) {
  if (!h->fw || op->kind != PLAN_OP_COLLECTIVE || op->coll >= TS_COLL_COUNT) return 0;
  return h->fw_call_s[op->coll];
}

double sim_host_sync_gap_s(const sim_host *h, double wait_s) {
  if (h->sync_s > 0) return h->sync_s;
  if (!h->cal || !h->cal->has_host) return 0;
  return schema_host_sync_gap(h->cal, wait_s * 1e6) * 1e-6;
}

double sim_host_op(const sim_host *h, double *host_t, int kernels, int gemms, int events, int sync, double gpu_free,
                   double d, double *start) {
  return sim_host_op_cost(h, host_t, kernels + gemms + events,
                          kernels * h->launch_s + gemms * h->gemm_s + events * h->event_s, sync, gpu_free, d, start);
}

double sim_host_op_cost(const sim_host *h, double *host_t, int n, double cost, int sync, double gpu_free, double d,
                        double *start) {
  if (!h->on || n == 0) {
    if (start) *start = gpu_free;
    return gpu_free + d;
  }
  const double h0 = *host_t;
  const double c = cost / n;
  double end = fmax(gpu_free + d, fmax(h0 + d, h0 + (n - 1) * c + d / n));
  if (start) *start = fmax(gpu_free, h0);
  const double issued = h0 + cost;
  *host_t = issued;
  if (sync) {
    double wait = end > issued ? end - issued : 0;
    *host_t = fmax(issued, end + sim_host_sync_gap_s(h, wait));
  }
  return end;
}

void sim_host_wait_before(const sim_host *h, double *host_t, double gpu_free, int n, int m) {
  if (!h->on || n <= 0) return;
  const double wait = gpu_free > *host_t ? gpu_free - *host_t : 0;
  *host_t = fmax(*host_t, gpu_free) + sim_host_sync_gap_s(h, wait) + (n - 1) * sim_host_sync_gap_s(h, 0) +
            (m > 0 ? m : 0) * h->launch_s;
}
