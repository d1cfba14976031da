/* sim_transfer.c — calibration transfer between GPUs (model in sim_transfer.h
 * and sim/README.md). */
#include "sim_transfer.h"

#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static sim_ceilings ceilings_of(const topo_gpu *g, double link_gbps, bool mamf) {
  sim_ceilings c = {(mamf ? g->bf16_mamf_tflops : g->bf16_tflops) * 1e12, g->hbm_gbps * 1e9, link_gbps * 1e9};
  return c;
}

double sim_roof_us(double flops, double bytes, double peak, double bw) {
  double tf = peak > 0 ? flops / peak : 0, tb = bw > 0 ? bytes / bw : 0;
  return (tf > tb ? tf : tb) * 1e6;
}

double sim_transfer_point_us(double us, double floor_us, double flops, double bytes, const sim_ceilings *from,
                             const sim_ceilings *to) {
  double r_from = sim_roof_us(flops, bytes, from->peak_flops, from->hbm_bytes_per_s);
  double r_to = sim_roof_us(flops, bytes, to->peak_flops, to->hbm_bytes_per_s);
  if (r_from <= 0 || us <= floor_us) return us;
  return floor_us + (us - floor_us) * r_to / r_from;
}

double sim_transfer_split_us(double us, double floor_us, double bytes, const sim_ceilings *from,
                             const sim_ceilings *to) {
  double rest = us - bytes / from->hbm_bytes_per_s * 1e6 - floor_us;
  if (rest < 0) rest = 0;
  return floor_us + rest * from->peak_flops / to->peak_flops + bytes / to->hbm_bytes_per_s * 1e6;
}

bool sim_same_gpu(const topo_gpu *a, const topo_gpu *b) {
  return strcmp(a->name, b->name) == 0 && fabs(a->bf16_tflops - b->bf16_tflops) <= 1e-6 * b->bf16_tflops &&
         fabs(a->hbm_gbps - b->hbm_gbps) <= 1e-6 * b->hbm_gbps;
}

/* ---- one table at a time: floor first, then every point ---- */

static double gemm_flops(const schema_gemm_point *g) { return 2.0 * (double)g->m * (double)g->n * (double)g->k; }
static double gemm_bytes(const schema_gemm_point *g) {
  return 2.0 * ((double)g->m * g->k + (double)g->k * g->n + (double)g->m * g->n); /* bf16 A, B, C */
}
static double gemm_wgrad_bytes(const schema_gemm_point *g) { /* bf16 A, B; C accumulated in FP32, read and written */
  return 2.0 * ((double)g->m * g->k + (double)g->k * g->n) + 8.0 * (double)g->m * g->n;
}
static double gemm_fp8_bytes(const schema_gemm_point *g) { /* FP8 A, B; bf16 C */
  return (double)g->m * g->k + (double)g->k * g->n + 2.0 * (double)g->m * g->n;
}

static double floor_of(const double *us, const double *roof, int n) {
  double f = INFINITY;
  for (int i = 0; i < n; i++)
    if (us[i] - roof[i] < f) f = us[i] - roof[i];
  return f > 0 && isfinite(f) ? f : 0;
}

/* One GEMM list (the training "gemm", the decode "gemm_infer", the weight
 * gradients' "gemm_wgrad" or the FP8 "gemm_fp8"), each with its own latency
 * floor and its operands' bytes, its points added to `out` by `add`. */
typedef int (*gemm_adder)(schema_calibration *, long long, long long, long long, double);
static int transfer_gemm_list(const schema_gemm_point *pts, int n, double (*bytes)(const schema_gemm_point *),
                              gemm_adder add, const sim_ceilings *from, const sim_ceilings *to,
                              schema_calibration *out) {
  int rc = 0;
  if (n == 0) return 0;
  double *us = malloc(2 * (size_t)n * sizeof *us), *roof;
  if (!us) return -1;
  roof = us + n;
  for (int i = 0; i < n; i++) {
    us[i] = pts[i].us;
    roof[i] = sim_roof_us(gemm_flops(&pts[i]), bytes(&pts[i]), from->peak_flops, from->hbm_bytes_per_s);
  }
  double fl = floor_of(us, roof, n);
  for (int i = 0; i < n && !rc; i++) {
    const schema_gemm_point *g = &pts[i];
    rc = add(out, g->m, g->n, g->k, sim_transfer_point_us(g->us, fl, gemm_flops(g), bytes(g), from, to));
  }
  free(us);
  return rc;
}

/* FP8 GEMMs move between the two FP8 peaks, scaled as the BF16 ceiling is (the datasheet peak, or with
 * --transfer mamf the measured matmul rate's share of it); 0 when the GPU has no FP8 tensor cores. */
static double fp8_peak(const topo_gpu *g, const sim_ceilings *bf16) {
  return g->fp8_tflops > 0 && g->bf16_tflops > 0 ? g->fp8_tflops * 1e12 * bf16->peak_flops / (g->bf16_tflops * 1e12)
                                                 : 0;
}

static int transfer_gemms(const schema_calibration *src, const topo_gpu *gf, const topo_gpu *gt,
                          const sim_ceilings *from, const sim_ceilings *to, schema_calibration *out) {
  if (transfer_gemm_list(src->gemm, src->n_gemm, gemm_bytes, schema_calibration_add_gemm, from, to, out) ||
      transfer_gemm_list(src->gemm_infer, src->n_gemm_infer, gemm_bytes, schema_calibration_add_gemm_infer, from, to,
                         out) ||
      transfer_gemm_list(src->gemm_wgrad, src->n_gemm_wgrad, gemm_wgrad_bytes, schema_calibration_add_gemm_wgrad, from,
                         to, out))
    return -1;
  sim_ceilings f8 = *from, t8 = *to;
  f8.peak_flops = fp8_peak(gf, from), t8.peak_flops = fp8_peak(gt, to);
  if (f8.peak_flops <= 0 || t8.peak_flops <= 0) return 0; /* dropped: no FP8 plan runs on the target */
  return transfer_gemm_list(src->gemm_fp8, src->n_gemm_fp8, gemm_fp8_bytes, schema_calibration_add_gemm_fp8, &f8, &t8,
                            out);
}

/* The device-memory bytes of a point of `flops` in a FLOP-keyed kernel table:
 * - a grouped GEMM's operands (schema_grouped_gemm_bytes);
 * - the inference executor's unfused prefill attention of a keyed table "attention_prefill.d<D>.s<S>"
 *   (model_prefill_attention_bytes_at: Q, K, V, the scores written by Q K^T, read and written by the
 *   softmax and read by P V, the output), with K and V counted once per query head (group 1): the
 *   table's points mix head layouts its key does not carry (Llama-3 8B's 4 query heads per KV head,
 *   Qwen2.5 7B's 7, 14B's 5), and group 1 is the most bytes any of them moves, so no transferred point
 *   is faster than the memory floor of the layout it was timed on. The scores dominate (8 s^2 bytes of
 *   4 s^2 d FLOPs a query head: at most d / 2 FLOP per byte), so these points are memory-bound on every
 *   GPU of the catalogue but the H20;
 * - 0 for the others. The FLOP-keyed "attention_prefill" keeps none: it averages prompt lengths (and
 *   head dimensions) whose bytes per FLOP, 2 / d + (2 + 1 / group) / s, its key does not carry (a
 *   short prompt's point moves several times the bytes of a long one's at the same FLOPs); the
 *   simulator warns when it reads it and holds its price to the op's own floor (sim_infer.c). The
 *   training attention tables ("attention", "attention.d<D>.s<S>", "attention_bwd...": the executor's
 *   flash kernels, which move Q, K, V, O and their gradients only) keep none: at s >= 2,048 their
 *   FLOPs are at least s / 2 = 1,024 per byte, above every catalogue GPU's ridge (the L40S's 419), so a
 *   bytes term would never bind. */
static double kernel_table_bytes(const char *name, double flops) {
  int g, d;
  bool tk;
  long long a, b, s;
  if (!schema_grouped_gemm_parse(name, &g, &tk, &a, &b)) return schema_grouped_gemm_bytes(g, tk, a, b, flops);
  if (!schema_prefill_attention_parse(name, &d, &s)) return model_prefill_attention_bytes_at(d, s, flops, 1.0);
  return 0;
}

/* A kernel table's x is FLOPs (attention, grouped GEMMs, the prefill attention)
 * or device-memory bytes. Grouped GEMMs also move the bytes of their operands,
 * whichever bound is higher (sim_transfer_point_us). A keyed prefill attention
 * point is split (sim_transfer_split_us): its bytes at the source's HBM rate
 * move with the bandwidth, the table's latency floor (the least any point has
 * left once its bytes are taken out) stays, the rest moves with the FLOP peak; measured on an H100 and
 * an H200 (same peak, 3.35 / 4.8 TB/s), that moves either file's 153 common
 * points onto the other GPU within +8.1 / -9.2 % (median), where the FLOPs alone
 * gave -11.2 / +12.6 % and the higher of the two bounds +21.4 / -18.7 %
 * (experiments/infer/xfer-attn/h100_check.txt). Each group of a codec table is
 * its own kernel (its own floor). */
static int transfer_kernel_group(const schema_kernel_table *t, int lo, int hi, const sim_ceilings *from,
                                 const sim_ceilings *to, schema_calibration *out) {
  int n = hi - lo, rc = 0, d;
  long long s;
  const bool split = t->by_flops && schema_prefill_attention_parse(t->name, &d, &s) == 0;
  double us[n], flops[n], bytes[n], roof[n];
  for (int i = 0; i < n; i++) {
    const schema_kernel_point *p = &t->pts[lo + i];
    us[i] = p->us;
    flops[i] = t->by_flops ? p->x : 0;
    bytes[i] = t->by_flops ? kernel_table_bytes(t->name, p->x) : p->x;
    /* split: the floor is what is left of the fastest point once its bytes are taken out */
    roof[i] = split ? bytes[i] / from->hbm_bytes_per_s * 1e6
                    : sim_roof_us(flops[i], bytes[i], from->peak_flops, from->hbm_bytes_per_s);
  }
  double fl = floor_of(us, roof, n);
  for (int i = 0; i < n && !rc; i++) {
    double moved = split ? sim_transfer_split_us(us[i], fl, bytes[i], from, to)
                         : sim_transfer_point_us(us[i], fl, flops[i], bytes[i], from, to);
    rc = schema_calibration_add_kernel(out, t->name, t->by_flops, t->pts[lo + i].x, t->pts[lo + i].group, moved);
  }
  return rc;
}

static int transfer_kernels(const schema_calibration *src, const sim_ceilings *from, const sim_ceilings *to,
                            schema_calibration *out) {
  for (int k = 0; k < src->n_kernels; k++) {
    const schema_kernel_table *t = &src->kernels[k];
    for (int lo = 0, hi; lo < t->n; lo = hi) { /* points are sorted by (group, x) */
      for (hi = lo; hi < t->n && t->pts[hi].group == t->pts[lo].group;) hi++;
      if (transfer_kernel_group(t, lo, hi, from, to, out)) return -1;
    }
  }
  return 0;
}

/* "attention_shapes" and each backend of "attention_backends": each point's
 * forward and backward moved like the kernel tables, over its backend's own
 * floor per direction (its FLOPs and bytes: schema_attn_flops / _bytes). */
static int transfer_attn_backend(const schema_calibration *src, schema_attn_backend be, const sim_ceilings *from,
                                 const sim_ceilings *to, schema_calibration *out) {
  int n, rc = 0;
  const schema_attn_point *pts = schema_attn_points(src, be, &n);
  if (n == 0) return 0;
  double *v = malloc(4 * (size_t)n * sizeof *v);
  if (!v) return -1;
  double fl[2];
  for (int b = 0; b < 2; b++) {
    double *us = v + 2 * b * n, *roof = us + n;
    for (int i = 0; i < n; i++) {
      const schema_attn_point *p = &pts[i];
      us[i] = b ? p->bwd_us : p->fwd_us;
      roof[i] = sim_roof_us(schema_attn_flops(&p->s, b), schema_attn_bytes(&p->s, b), from->peak_flops,
                        from->hbm_bytes_per_s);
    }
    fl[b] = floor_of(us, roof, n);
  }
  for (int i = 0; i < n && !rc; i++) {
    const schema_attn_point *p = &pts[i];
    double t[2];
    for (int b = 0; b < 2; b++)
      t[b] = sim_transfer_point_us(b ? p->bwd_us : p->fwd_us, fl[b], schema_attn_flops(&p->s, b),
                                   schema_attn_bytes(&p->s, b), from, to);
    rc = schema_calibration_add_attn_backend(out, be, &p->s, t[0], t[1]);
  }
  free(v);
  return rc;
}

/* FlashAttention-2's tables ("flash", "flash_dropout") move with the ceilings
 * `flash_from` / `flash_to` (flash2_ceilings), the others with the GPUs'. */
static int transfer_attn(const schema_calibration *src, const sim_ceilings *from, const sim_ceilings *to,
                         const sim_ceilings *flash_from, const sim_ceilings *flash_to, schema_calibration *out) {
  for (int be = 0; be < SCHEMA_ATTN_NBACKENDS; be++) {
    bool flash = be == SCHEMA_ATTN_FLASH || be == SCHEMA_ATTN_FLASH_DROPOUT;
    if (transfer_attn_backend(src, (schema_attn_backend)be, flash ? flash_from : from, flash ? flash_to : to, out))
      return -1;
  }
  return 0;
}

/* The ceilings FlashAttention-2's tables ("attention_backends" flash and flash_dropout) move with:
 * cf / ct with the compute ceiling replaced by bf16_tflops x flash2_bf16_util on each GPU when both
 * publish that utilisation (its mma.sync kernels reach a different share of each architecture's
 * tensor-core peak: 73 % on A100, 35 % on H100), else cf / ct unchanged. Returns whether it replaced them. */
static bool flash2_ceilings(const topo_gpu *from, const topo_gpu *to, const sim_ceilings *cf, const sim_ceilings *ct,
                            sim_ceilings *ff, sim_ceilings *ft) {
  *ff = *cf, *ft = *ct;
  if (from->flash2_bf16_util <= 0 || to->flash2_bf16_util <= 0) return false;
  ff->peak_flops = from->bf16_tflops * from->flash2_bf16_util * 1e12;
  ft->peak_flops = to->bf16_tflops * to->flash2_bf16_util * 1e12;
  return true;
}

/* NVLink collectives: bus bytes against the per-GPU link, as nccl-tests
 * counts them. Host-memory and socket paths do not depend on the GPU: copied. */
static int transfer_coll(const schema_coll_table *t, bool over_nvlink, const sim_ceilings *from,
                         const sim_ceilings *to, schema_calibration *out) {
  int n = t->n, rc = 0;
  double f = schema_busbw_factor(t->name, t->nranks);
  sim_ceilings lf = {0, from->link_bytes_per_s, 0}, lt = {0, to->link_bytes_per_s, 0};
  bool move = over_nvlink && lf.hbm_bytes_per_s > 0 && lt.hbm_bytes_per_s > 0;
  double us[n > 0 ? n : 1], roof[n > 0 ? n : 1];
  for (int i = 0; i < n; i++) {
    us[i] = t->pts[i].us;
    roof[i] = move ? t->pts[i].bytes * f / lf.hbm_bytes_per_s * 1e6 : 0;
  }
  double fl = move ? floor_of(us, roof, n) : 0;
  for (int i = 0; i < n && !rc; i++) {
    double u = move ? sim_transfer_point_us(t->pts[i].us, fl, 0, t->pts[i].bytes * f, &lf, &lt) : t->pts[i].us;
    rc = schema_calibration_add_coll(out, t->name, t->nranks, t->pts[i].bytes, u);
  }
  return rc;
}

/* NVLink collectives are dropped, not moved: the measuring GPU's NVLink
 * curves (two H200s on 18 direct links) describe that fabric and its NCCL
 * protocol efficiency, which another GPU's NVSwitch or PCIe does not share;
 * the simulator prices them with the NCCL model from the cluster's own
 * fabric figures (sim_nccl.c, validated on published DGX A100 / H100
 * nccl-tests figures in experiments/nccl/). `move_nvlink` keeps them, moved
 * by the link ratio. */
static int transfer_colls(const schema_calibration *src, const sim_ceilings *from, const sim_ceilings *to,
                          bool move_nvlink, schema_calibration *out) {
  bool nvlink = strcmp(src->transport, "nvlink") == 0;
  if (nvlink && !move_nvlink) return 0;
  for (int i = 0; i < src->n_colls; i++) {
    const schema_coll_table *t = &src->colls[i];
    if (strchr(t->name, '.')) continue; /* compressed: composed from codec kernels + plain transfer */
    if (transfer_coll(t, nvlink, from, to, out)) return -1;
  }
  return 0;
}

int sim_transfer_calibration(const schema_calibration *src, const topo_gpu *from, const topo_gpu *to,
                             double to_link_gbps, bool move_nvlink, bool mamf, schema_calibration *out, ts_err *e) {
  memset(out, 0, sizeof *out);
  if (from->bf16_tflops <= 0 || from->hbm_gbps <= 0)
    return ts_fail(e, src->path[0] ? src->path : NULL, "gpu",
                   "\"%s\": the measuring GPU's BF16 peak and HBM bandwidth are needed to transfer its costs",
                   src->gpu);
  if (to->bf16_tflops <= 0 || to->hbm_gbps <= 0)
    return ts_fail(e, NULL, "gpu", "\"%s\": the target GPU's BF16 peak and HBM bandwidth are needed", to->name);
  if (mamf && (from->bf16_mamf_tflops <= 0 || to->bf16_mamf_tflops <= 0))
    return ts_fail(e, NULL, "bf16_mamf_tflops",
                   "\"%s\" has no measured maximum achievable matmul rate in the GPU catalogue (%s), which --transfer "
                   "mamf needs; --transfer roofline uses the datasheet peak",
                   from->bf16_mamf_tflops <= 0 ? from->name : to->name, topo_gpus_dir());
  sim_ceilings cf = ceilings_of(from, from->nvlink_gbps, mamf), ct = ceilings_of(to, to_link_gbps, mamf), ff, ft;
  bool flash2 = flash2_ceilings(from, to, &cf, &ct, &ff, &ft);
  snprintf(out->path, sizeof out->path, "%s", src->path);
  snprintf(out->gpu, sizeof out->gpu, "%s", to->name);
  snprintf(out->driver, sizeof out->driver, "%s", src->driver);
  snprintf(out->cuda, sizeof out->cuda, "%s", src->cuda);
  snprintf(out->nccl, sizeof out->nccl, "%s", src->nccl);
  snprintf(out->transport, sizeof out->transport, "%s", src->transport);
  snprintf(out->measured_at, sizeof out->measured_at, "%s", src->measured_at);
  snprintf(out->notes, sizeof out->notes,
           "transferred (%s) from %s (%s, %.0f TFLOP/s, %.0f GB/s, NVLink %.0f GB/s) to %s (%.0f TFLOP/s, "
           "%.0f GB/s, intra-node %.0f GB/s)%s; compressed-collective tables, the clock section%s dropped",
           mamf ? SIM_TRANSFER_METHOD_MAMF : SIM_TRANSFER_METHOD, src->gpu, from->name, cf.peak_flops / 1e12,
           from->hbm_gbps, from->nvlink_gbps, to->name, ct.peak_flops / 1e12, to->hbm_gbps, to_link_gbps,
           flash2 ? "; FlashAttention-2 tables by its published utilisation on each" : "",
           strcmp(src->transport, "nvlink") == 0 && !move_nvlink ? " and the NVLink collectives (NCCL model)" : "");
  out->derived = true;
  if (transfer_gemms(src, from, to, &cf, &ct, out) || transfer_kernels(src, &cf, &ct, out) || transfer_attn(src, &cf, &ct, &ff, &ft, out) ||
      transfer_colls(src, &cf, &ct, move_nvlink, out)) {
    schema_calibration_free(out);
    return ts_fail_sys(e, "out of memory transferring the calibration");
  }
  /* "tp_comm_overlap_sm": ratios of one GPU's own times, kept as they are; the simulator applies them
   * only to a GPU of the table's SM count (schema_tpo_sm_ratio), else the proportional rule */
  schema_calibration_copy_tpo_sm(out, src);
  /* "framework_host": the framework's Python on the host CPU, not the GPU's work; kept (the "host" section's
   * launch costs are the executor's on the measuring machine and are not) */
  out->fw_host = src->fw_host;
  schema_calibration_sort(out);
  return 0;
}
