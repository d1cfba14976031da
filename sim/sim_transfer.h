/* sim_transfer.h — calibration transfer: costs measured on one GPU mapped
 * onto another GPU's ceilings (sim/README.md, "Calibration transfer").
 *
 * Every measured point is placed against the measuring GPU's own roofline
 * (tensor-core bound, memory bound) above a latency floor, the efficiency it
 * reached there is kept, and the point is moved onto the target's roofline:
 *
 *   t' = L + (t - L) * R_to / R_from,   R = max(F / peak, B / bandwidth)
 *
 * with F, B the point's FLOPs and bytes and L the table's latency floor,
 * L = min over the table's points of (t - R_from) (the launch and latency cost
 * the table itself shows; every point keeps t - L >= R_from, so no transferred
 * point is faster than the target's ceiling). A launch-bound point (t close to
 * L) barely moves; a compute-bound one moves with the tensor-core FLOP/s, a
 * memory-bound one with the HBM bandwidth, and a point that is compute-bound on
 * one GPU and memory-bound on the other follows whichever ceiling binds.
 * Collectives measured over NVLink are dropped (the simulator's NCCL model
 * prices them from the cluster's fabric; move_nvlink keeps them, moved with
 * the per-GPU NVLink bandwidth the same way); compressed-collective tables
 * are dropped (the
 * simulator composes them from the transferred codec kernels and the
 * transferred plain collective); the clock section is dropped (it describes
 * the measuring GPU's power controller). Plain C, no SimGrid. */
#ifndef SIM_TRANSFER_H
#define SIM_TRANSFER_H

#include <stdbool.h>

#include "calibration.h"
#include "topo.h"
#include "ts_error.h"

#define SIM_TRANSFER_METHOD "roofline-v1"
/* The same with each GPU's measured maximum achievable matmul rate (topo_gpu.bf16_mamf_tflops) as its
 * compute ceiling in place of the datasheet peak (sim/README.md, "Calibration transfer"). */
#define SIM_TRANSFER_METHOD_MAMF "mamf-v1"

/* Where a simulation's costs come from, for reports. */
typedef struct {
  char measured_on[64];  /* the calibration's GPU ("NVIDIA H200") */
  char source_gpu[32];   /* its catalogue entry ("H200-SXM"); "" when not found */
  char target_gpu[32];   /* the cluster's GPU */
  char method[32];       /* "none" (same GPU) or SIM_TRANSFER_METHOD */
} sim_cost_source;

/* The figures the transfer reads from a GPU description (datasheet values; with the mamf method the
 * compute ceiling is the measured matmul rate). */
typedef struct {
  double peak_flops;      /* dense BF16 tensor-core FLOP/s */
  double hbm_bytes_per_s; /* device memory */
  double link_bytes_per_s; /* intra-node NVLink per GPU per direction; 0 = none */
} sim_ceilings;

/* The roofline of an op (us): its FLOPs at `peak` FLOP/s or its bytes at `bw` bytes/s, whichever is longer
 * (a ceiling of 0 bounds nothing). */
double sim_roof_us(double flops, double bytes, double peak, double bw);
/* Time of one point on the target, given its time `us` on the source. */
double sim_transfer_point_us(double us, double floor_us, double flops, double bytes, const sim_ceilings *from,
                             const sim_ceilings *to);
/* The same for an op whose time is its bytes at the HBM rate, a latency floor and the rest (the inference
 * executor's unfused prefill attention: the s x s scores' traffic, the launches, then the GEMMs' and softmax's
 * arithmetic): the bytes' time on the source, bytes / its HBM rate, moves to the target's HBM rate; floor_us
 * stays; the rest, us less those two (0 if less), moves with the BF16 peak. Never below the bytes at the
 * target's rate. */
double sim_transfer_split_us(double us, double floor_us, double bytes, const sim_ceilings *from,
                             const sim_ceilings *to);

/* Whether two GPU descriptions are the same part (name, BF16 peak and HBM
 * bandwidth agree; a cluster that edits a figure is a different GPU). */
bool sim_same_gpu(const topo_gpu *a, const topo_gpu *b);

/* Builds in *out (schema_calibration_free it) the calibration `src`, measured
 * on `from`, transferred to `to`, whose intra-node links run at
 * to_link_gbps per GPU per direction (the cluster's intra figure; used for
 * NVLink collective tables). Labels it derived, with the source GPU, the
 * target GPU and the method in its notes. mamf: compute ceilings are the
 * GPUs' bf16_mamf_tflops (an error naming the GPU when either has none). */
int sim_transfer_calibration(const schema_calibration *src, const topo_gpu *from, const topo_gpu *to,
                             double to_link_gbps, bool move_nvlink, bool mamf, schema_calibration *out, ts_err *e);

#endif
