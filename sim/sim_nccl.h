/* sim_nccl.h — a model of what NCCL does for one collective: which algorithm
 * (ring, tree, NVLS, NVLS-tree; point-to-point for all-to-all and send/recv),
 * which protocol (LL, LL128, Simple), how many channels, and how long it
 * takes, from the fabric's figures. Optionally anchored on a measured curve
 * of the same transport (sim/README.md, "NCCL model"). Pure C, no SimGrid.
 *
 * Sizes are nccl-tests sizes (the whole buffer: the all-gather's output, the
 * reduce-scatter's input, one side of a send/recv), times in microseconds,
 * bandwidths in GB/s (1e9 bytes/s) per direction. */
#ifndef SIM_NCCL_H
#define SIM_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "calibration.h"
#include "topo.h"
#include "ts_coll.h"
#include "ts_error.h"

/* The collectives of common/ts_coll.h's table. */
typedef enum {
  SIM_NCCL_ALLREDUCE = TS_COLL_ALLREDUCE,
  SIM_NCCL_ALLGATHER = TS_COLL_ALLGATHER,
  SIM_NCCL_REDUCESCATTER = TS_COLL_REDUCESCATTER,
  SIM_NCCL_ALLTOALL = TS_COLL_ALLTOALL,
  SIM_NCCL_SENDRECV = TS_COLL_SENDRECV,
} sim_nccl_coll;

typedef enum {
  SIM_NCCL_RING,
  SIM_NCCL_TREE,      /* chain inside a node, binary trees across nodes (all-reduce) */
  SIM_NCCL_NVLS,      /* NVLink SHARP: reductions in the NVSwitch (one node) */
  SIM_NCCL_NVLS_TREE, /* NVLS inside each node, trees across nodes (all-reduce) */
  SIM_NCCL_P2P,       /* all-to-all and send/recv: point-to-point sends */
  SIM_NCCL_ALGO_COUNT
} sim_nccl_algo;

typedef enum { SIM_NCCL_LL, SIM_NCCL_LL128, SIM_NCCL_SIMPLE, SIM_NCCL_PROTO_COUNT } sim_nccl_proto;

/* The fabric as the model sees it. */
typedef struct {
  topo_intra_kind intra;
  double intra_gbps;       /* per GPU: line rate for NVLink/NVSwitch/PCIe; the achieved NCCL rate for shm/socket */
  double intra_latency_us; /* one hop inside the node (the step latency of shm and socket) */
  int nvlink_gen;          /* 3: A100, 4: H100/H200/H20, 5: B200/GB200; 0: none or not known */
  bool nvls;               /* NVLink SHARP may be used: the caller decides (sim_nccl_nvls_capable, and
                              whether NCCL_NVLS_ENABLE=0 ran); never chosen without NVSwitch */
  int nics_per_node;       /* 0 on one node */
  double nic_gbps;         /* per NIC */
  double net_latency_us;   /* one crossing between nodes: NIC to NIC through the switches */
} sim_nccl_fabric;

typedef struct {
  sim_nccl_algo algo;
  sim_nccl_proto proto;
  int channels;
  bool pxn;            /* all-to-all / send-recv across nodes through the NVLink peer on the destination's rail */
  double us;           /* the prediction */
  double model_us;     /* the fabric-only model's time for the same choice */
  double anchor_scale; /* us / model_us: the measured curve's efficiency carried over (1 without anchor) */
} sim_nccl_choice;

/* NVLink SHARP exists: NVSwitch of NVLink generation 4 or later (the third
 * NVSwitch generation: H100/H200/B200 baseboards). */
bool sim_nccl_nvls_capable(topo_intra_kind intra, int nvlink_gen);

/* The fabric of one node of a cluster, as the simulator uses it: NVLink
 * generation from the GPU's figure (else from its name, e.g. "H200" -> 4;
 * 0 when not known), NVLS on wherever the NVSwitch has it (NCCL's default;
 * a caller that wants NCCL_NVLS_ENABLE=0 clears f->nvls), one network
 * crossing = both NICs' latency plus the fabric's switch latency. */
void sim_nccl_fabric_of_cluster(const topo_cluster *cl, sim_nccl_fabric *f);

/* Time of a collective of `bytes` over nranks (ranks_per_node on each of
 * nranks / ranks_per_node nodes) and NCCL's choice. anchor: a measured curve
 * of this collective on this transport (one node, its nranks; may be NULL):
 * the model is scaled by the curve's time over the model's at the size with
 * the same per-rank chunk, so anchor->nranks ranks reproduce the curve (log
 * interpolation between its points, the edge point's ratio outside).
 * Returns 0, or -1 with e set for impossible arguments. */
int sim_nccl_time(const sim_nccl_fabric *f, sim_nccl_coll coll, double bytes, int nranks, int ranks_per_node,
                  const schema_coll_table *anchor, sim_nccl_choice *out, ts_err *e);

/* The model's time (us) of one algorithm and protocol, unanchored; -1 when
 * NCCL would not run that combination here. Arguments as sim_nccl_time's,
 * already checked. sim_nccl_algo_us: on the channels the message gets (a
 * small ring or tree runs on fewer); sim_nccl_tuner_us: on all channels, as
 * NCCL's tuner ranks the combinations (the choice is its fastest). */
double sim_nccl_algo_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_algo algo, sim_nccl_proto proto,
                        double bytes, int nranks, int ranks_per_node);
double sim_nccl_tuner_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_algo algo, sim_nccl_proto proto,
                         double bytes, int nranks, int ranks_per_node);

/* "allreduce", "allgather", "reducescatter", "alltoall", "sendrecv" (a
 * ".codec" suffix is not accepted: compressed collectives are not NCCL's). */
int sim_nccl_coll_from_name(const char *name, sim_nccl_coll *out);
const char *sim_nccl_coll_name(sim_nccl_coll c);
const char *sim_nccl_algo_name(sim_nccl_algo a);   /* "ring", "tree", "nvls", "nvls-tree", "p2p" */
const char *sim_nccl_proto_name(sim_nccl_proto p); /* "LL", "LL128", "Simple" */
/* "ring/Simple, 16 channels" (+ ", PXN"). */
void sim_nccl_describe(const sim_nccl_choice *c, char *buf, size_t cap);
/* nccl-tests bus bandwidth of a time (GB/s). */
double sim_nccl_busbw(sim_nccl_coll coll, double bytes, int nranks, double us);

#endif
