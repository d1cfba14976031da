/* sim_cost_source.c — the calibration a simulation of a cluster runs on:
 * the file as measured when it was measured on the cluster's GPU, else the
 * file transferred onto the cluster's GPU (sim_transfer.c), else an error
 * naming both GPUs. */
#include <stdio.h>
#include <string.h>

#include "sim.h"
#include "sim_transfer.h"

const char *sim_transfer_mode_name(sim_transfer_mode m) {
  return m == SIM_TRANSFER_OFF ? "off" : m == SIM_TRANSFER_MAMF ? "mamf" : "roofline";
}

int sim_load_costs(const char *path, const topo_cluster *cl, sim_transfer_mode mode, schema_calibration *out,
                   sim_cost_source *src, ts_err *e) {
  memset(src, 0, sizeof *src);
  if (!path) path = sim_default_calibration(cl);
  schema_calibration measured;
  if (schema_calibration_load(path, &measured, e)) return -1;
  snprintf(src->measured_on, sizeof src->measured_on, "%s", measured.gpu);
  snprintf(src->target_gpu, sizeof src->target_gpu, "%s", cl->gpu.name);
  topo_gpu from;
  ts_err lookup;
  if (topo_gpu_find_device(measured.gpu, topo_gpus_dir(), &from, &lookup)) {
    schema_calibration_free(&measured);
    return ts_fail(e, path, "gpu",
                   "\"%s\" is in no GPU description of the catalogue (%s), so its costs cannot be placed "
                   "against that GPU's ceilings for the cluster's %s (%s)",
                   src->measured_on, topo_gpus_dir(), cl->gpu.name, lookup.msg);
  }
  snprintf(src->source_gpu, sizeof src->source_gpu, "%s", from.name);
  if (sim_same_gpu(&from, &cl->gpu)) {
    snprintf(src->method, sizeof src->method, "none");
    *out = measured;
    return 0;
  }
  if (mode == SIM_TRANSFER_OFF) {
    schema_calibration_free(&measured);
    return ts_fail(e, path, "gpu",
                   "measured on %s (%s, %.0f TFLOP/s, %.0f GB/s) but the cluster's GPU is %s (%.0f TFLOP/s, "
                   "%.0f GB/s) and --transfer is off",
                   src->measured_on, from.name, from.bf16_tflops, from.hbm_gbps, cl->gpu.name, cl->gpu.bf16_tflops,
                   cl->gpu.hbm_gbps);
  }
  const bool mamf = mode == SIM_TRANSFER_MAMF;
  int rc = sim_transfer_calibration(&measured, &from, &cl->gpu, cl->intra.gbps_per_gpu, false, mamf, out, e);
  schema_calibration_free(&measured);
  if (rc) return -1;
  snprintf(src->method, sizeof src->method, "%s", mamf ? SIM_TRANSFER_METHOD_MAMF : SIM_TRANSFER_METHOD);
  return 0;
}

void sim_cost_source_line(const sim_cost_source *s, char *buf, unsigned long cap) {
  if (strcmp(s->method, "none") == 0)
    snprintf(buf, cap, "costs measured on %s (%s), the cluster's GPU", s->measured_on, s->source_gpu);
  else
    snprintf(buf, cap, "costs measured on %s (%s), transferred to %s by %s (sim/README.md)", s->measured_on,
             s->source_gpu, s->target_gpu, s->method);
}

int sim_derive_for_gpu(const char *from_path, const char *gpu_name, double link_gbps, schema_calibration *out,
                       ts_err *e) {
  topo_gpu to, from;
  if (topo_gpu_load(gpu_name, topo_gpus_dir(), &to, e)) return -1;
  schema_calibration measured;
  if (schema_calibration_load(from_path, &measured, e)) return -1;
  ts_err lookup;
  if (topo_gpu_find_device(measured.gpu, topo_gpus_dir(), &from, &lookup)) {
    ts_fail(e, from_path, "gpu", "\"%s\" is in no GPU description of the catalogue: %s", measured.gpu, lookup.msg);
    schema_calibration_free(&measured);
    return -1;
  }
  int rc = sim_transfer_calibration(&measured, &from, &to, link_gbps > 0 ? link_gbps : to.nvlink_gbps, false, false,
                                    out, e);
  schema_calibration_free(&measured);
  return rc;
}
