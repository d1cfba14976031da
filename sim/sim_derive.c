/* sim_derive.c — a roofline calibration derived from the H200 figures that
 * DESIGN.md records (2 x H200, NVLink NV18), labelled "derived": true.
 *
 * It stands in until measured files arrive and goes through the same loader
 * and lookups. Every number below traces to one measured figure:
 *   bf16 GEMM ~790 TFLOP/s at large sizes; HBM copy 4276 GB/s (read+write);
 *   NCCL all-reduce busbw 44/130/218/273/303 GB/s at 1/4/16/64/256 MiB,
 *   all-gather busbw 245 GB/s and all-to-all algbw 566 GB/s at 256 MiB;
 *   all-reduce busbw ~28 GB/s through host shared memory, ~2.7 GB/s over sockets.
 * The shapes of the curves (efficiency of small GEMMs, launch costs, latency
 * below 1 MiB) are assumptions, stated where they are made. */
#include <math.h>
#include <string.h>

#include "sim.h"

#define GEMM_PEAK 790e12   /* FLOP/s, largest GEMMs measured */
#define HBM 4276e9         /* bytes/s, device-to-device copy counting read + write */
#define GEMM_LAUNCH_US 4.0 /* assumption: cuBLASLt launch + tail */
#define KERNEL_LAUNCH_US 2.5
#define ATTN_FLOPS 400e12  /* assumption: fused attention at ~50% of the GEMM rate */

/* Efficiency of a GEMM below peak: small dimensions fill tiles and waves
 * poorly (assumption: a 128-wide penalty per dimension). */
static double gemm_us(double m, double n, double k) {
  double eff = 1.0 / (1.0 + 128.0 / m + 128.0 / n + 128.0 / k);
  double tf = 2.0 * m * n * k / (GEMM_PEAK * eff), tb = 2.0 * (m * k + k * n + m * n) / HBM; /* bf16 operands */
  return GEMM_LAUNCH_US + (tf > tb ? tf : tb) * 1e6;
}

/* NVLink all-reduce bus bandwidth (GB/s) against size: the five measured
 * points, log-interpolated; below 1 MiB an alpha-beta fit through the 1 and
 * 4 MiB points (alpha ~21 us), above 256 MiB flat. */
static const double ar_size[] = {1048576, 4194304, 16777216, 67108864, 268435456};
static const double ar_busbw[] = {44, 130, 218, 273, 303};

static double nvlink_ar_us(double bytes, int n) {
  double f = ts_coll_busbw_factor(TS_COLL_ALLREDUCE, n);
  double t2; /* time for 2 ranks (f = 1) */
  if (bytes <= ar_size[0]) {
    double t1 = ar_size[0] / (ar_busbw[0] * 1e9) * 1e6, t4 = ar_size[1] / (ar_busbw[1] * 1e9) * 1e6;
    double beta = (ar_size[1] - ar_size[0]) / (t4 - t1); /* bytes per us */
    double alpha = t1 - ar_size[0] / beta;
    t2 = alpha + bytes / beta;
  } else if (bytes >= ar_size[4]) {
    t2 = bytes / (ar_busbw[4] * 1e9) * 1e6;
  } else {
    int i = 0;
    while (bytes > ar_size[i + 1]) i++;
    double u = (log(bytes) - log(ar_size[i])) / (log(ar_size[i + 1]) - log(ar_size[i]));
    double bw = exp(log(ar_busbw[i]) + u * (log(ar_busbw[i + 1]) - log(ar_busbw[i])));
    t2 = bytes / (bw * 1e9) * 1e6;
  }
  /* More ranks: same bus bandwidth (NVSwitch gives each GPU the same links),
   * the algorithmic factor grows, and each extra ring step adds latency
   * (assumption: 1 us per step). */
  return t2 * f + 2.0 * (n - 2);
}

typedef struct {
  const char *name;
  double ar_scale; /* all-reduce busbw relative to NVLink at large sizes */
  double latency_scale;
} transport_figures;

static const transport_figures transports[] = {
    {"nvlink", 1.0, 1.0},
    {"shm", 28.0 / 303.0, 2.0},    /* NCCL_P2P_DISABLE=1 */
    {"socket", 2.7 / 303.0, 10.0}, /* NCCL socket transport over loopback */
};

/* Time of a collective on a transport: NVLink's curve with bandwidth scaled by
 * the transport's measured all-reduce ratio and the latency stretched. */
static double coll_us(const transport_figures *t, const char *coll, double bytes, int n) {
  /* Relative bus bandwidth of each collective at 256 MiB on NVLink:
   * all-gather 245/303; reduce-scatter as all-gather; all-to-all busbw
   * 566*(n-1)/n = 283 at n = 2; sendrecv one flow at the all-to-all rate. */
  double rel = 1.0, steps_scale = 1.0;
  if (strcmp(coll, "allgather") == 0 || strcmp(coll, "reducescatter") == 0) rel = 245.0 / 303.0, steps_scale = 0.5;
  if (strcmp(coll, "alltoall") == 0) rel = 283.0 / 303.0, steps_scale = 0.5;
  if (strcmp(coll, "sendrecv") == 0) rel = 283.0 / 303.0, steps_scale = 0.5;
  double ar_f = ts_coll_busbw_factor(TS_COLL_ALLREDUCE, n);
  double f = schema_busbw_factor(coll, n);
  double t_ar = nvlink_ar_us(bytes, n);
  /* split into latency and bandwidth parts at this size, then rescale each */
  double t_lat = nvlink_ar_us(1.0, n);
  double t_bw = t_ar - t_lat;
  return t_lat * steps_scale * t->latency_scale + t_bw * (f / ar_f) / (rel * t->ar_scale);
}

static int add_fit(schema_calibration *c, const schema_coll_table *t) {
  /* Least squares t = a + x / b with x = bytes * busbw factor, so b is a bus bandwidth. */
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  double f = schema_busbw_factor(t->name, t->nranks);
  for (int i = 0; i < t->n; i++) {
    double x = t->pts[i].bytes * f, y = t->pts[i].us;
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  double slope = (t->n * sxy - sx * sy) / (t->n * sxx - sx * sx);
  double a = (sy - slope * sx) / t->n;
  char name[64];
  snprintf(name, sizeof name, "%s.%d", t->name, t->nranks);
  return schema_calibration_add_fit(c, name, a > 0 ? a : 0, 1.0 / slope / 1e3);
}

int sim_derive_calibration(const char *transport, schema_calibration *c, ts_err *e) {
  const transport_figures *t = NULL;
  for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
    if (strcmp(transports[i].name, transport) == 0) t = &transports[i];
  if (!t) return ts_fail(e, NULL, "transport", "\"%s\" is not one of nvlink, shm, socket", transport);
  memset(c, 0, sizeof *c);
  snprintf(c->gpu, sizeof c->gpu, "NVIDIA H200");
  snprintf(c->driver, sizeof c->driver, "derived");
  snprintf(c->cuda, sizeof c->cuda, "13.0");
  snprintf(c->nccl, sizeof c->nccl, "2.28.3");
  snprintf(c->transport, sizeof c->transport, "%s", transport);
  snprintf(c->measured_at, sizeof c->measured_at, "derived from DESIGN.md figures");
  snprintf(c->notes, sizeof c->notes,
           "roofline calibration derived from measured H200 figures (GEMM 790 TFLOP/s, HBM 4276 GB/s, "
           "NCCL busbw points); not a measurement: replace with tacorun calibrate output");
  c->derived = true;
  int rc = 0;

  static const int dims[] = {512, 1024, 2048, 4096, 6144, 8192, 12288, 16384, 24576, 49152};
  for (int m = 128; m <= 32768; m *= 2)
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
      rc |= schema_calibration_add_gemm(c, m, dims[i], dims[i], gemm_us(m, dims[i], dims[i]));

  /* memory-bound kernels: bytes = device-memory traffic */
  for (double b = 4096; b <= 64.0 * (1 << 30); b *= 4) {
    double base = b / HBM * 1e6;
    rc |= schema_calibration_add_kernel(c, "elementwise", false, b, 0, KERNEL_LAUNCH_US + base / 0.90);
    rc |= schema_calibration_add_kernel(c, "norm", false, b, 0, KERNEL_LAUNCH_US + base / 0.80);
    rc |= schema_calibration_add_kernel(c, "embedding", false, b, 0, KERNEL_LAUNCH_US + base / 0.80);
    rc |= schema_calibration_add_kernel(c, "loss", false, b, 0, KERNEL_LAUNCH_US + base / 0.70);
    rc |= schema_calibration_add_kernel(c, "optimizer", false, b, 0, KERNEL_LAUNCH_US + base / 0.80);
    /* CAAT-Net pack/unpack of the shared channels: read + write */
    rc |= schema_calibration_add_kernel(c, "caat_gather", false, b, 0, KERNEL_LAUNCH_US + 2 * base / 0.80);
    rc |= schema_calibration_add_kernel(c, "caat_scatter", false, b, 0, KERNEL_LAUNCH_US + 2 * base / 0.80);
    /* TACO codec, bytes = bf16 payload: read it and write N + 8N/G (encode),
     * the reverse (decode), both (decode+sum+encode); assumed at 70% of HBM
     * since the Hadamard transform stays in registers. */
    for (int g = 32; g <= 512; g *= 2) {
      double wire = b / 2.0 * (1.0 + 8.0 / g);
      double enc = (b + wire) / HBM * 1e6 / 0.70;
      rc |= schema_calibration_add_kernel(c, "taco_encode", false, b, g, KERNEL_LAUNCH_US + enc);
      rc |= schema_calibration_add_kernel(c, "taco_decode", false, b, g, KERNEL_LAUNCH_US + enc);
      rc |= schema_calibration_add_kernel(c, "taco_decode_sum_encode", false, b, g,
                                          KERNEL_LAUNCH_US + (2 * wire + b) / HBM * 1e6 / 0.70);
    }
  }
  for (double f = 1e8; f <= 1e15; f *= 4)
    rc |= schema_calibration_add_kernel(c, "attention", true, f, 0, 5.0 + f / ATTN_FLOPS * 1e6);

  const char *const *colls = ts_coll_names;
  for (size_t i = 0; colls[i]; i++)
    for (int n = 2; n <= 8; n *= 2) {
      if (i == TS_COLL_SENDRECV && n > 2) continue;
      for (double b = 8192; b <= 4.0 * (1 << 30); b *= 2)
        rc |= schema_calibration_add_coll(c, colls[i], n, b, coll_us(t, colls[i], b, n));
    }
  if (rc) {
    schema_calibration_free(c);
    return ts_fail_sys(e, "out of memory");
  }
  schema_calibration_sort(c);
  int n_tables = c->n_colls;
  for (int i = 0; i < n_tables; i++)
    if (add_fit(c, &c->colls[i])) {
      schema_calibration_free(c);
      return ts_fail_sys(e, "out of memory");
    }
  schema_calibration_sort(c);
  return 0;
}
