/* topo.h — a cluster of GPUs, rank placement, and its SimGrid platform.
 *
 * Plain C. Bandwidths are GB/s (1e9 bytes/s) per direction, latencies in us. */
#ifndef TOPO_H
#define TOPO_H

#include <stdbool.h>
#include <stdio.h>

#include "ts_error.h"

typedef enum {
  TOPO_INTRA_NVSWITCH, /* all GPUs of a node through NVSwitch */
  TOPO_INTRA_NVLINK,   /* direct NVLink between GPUs (2-GPU machine) */
  TOPO_INTRA_PCIE,     /* through the PCIe switch / host */
  TOPO_INTRA_SHM,      /* NCCL through host shared memory (NCCL_P2P_DISABLE=1) */
  TOPO_INTRA_SOCKET,   /* NCCL socket transport over loopback */
} topo_intra_kind;

typedef enum {
  TOPO_FABRIC_NONE,          /* one node */
  TOPO_FABRIC_SINGLE_SWITCH, /* every NIC on one switch */
  TOPO_FABRIC_FAT_TREE,      /* fat-tree with an oversubscription ratio at the leaves */
  TOPO_FABRIC_RAIL_FAT_TREE, /* NIC i of every node on rail switch i, spine above */
  TOPO_FABRIC_DRAGONFLY,
} topo_fabric_kind;

typedef struct {
  char name[64];
  struct {
    char name[32];
    double bf16_tflops; /* datasheet dense BF16 */
    double hbm_gib;
    double hbm_gbps;
  } gpu;
  int nodes, gpus_per_node;
  struct {
    topo_intra_kind kind;
    double gbps_per_gpu;
    double latency_us;
  } intra;
  struct {
    int per_node;
    double gbps; /* per NIC */
    double latency_us;
  } nic;
  struct {
    topo_fabric_kind kind;
    int levels;
    double oversubscription; /* >= 1 */
    int nodes_per_leaf;      /* fat-tree: nodes under one leaf switch */
    int groups;              /* dragonfly */
    double latency_us;       /* per switch hop */
  } fabric;
} topo_cluster;

int topo_load(const char *name_or_path, const char *topologies_dir, topo_cluster *c, ts_err *e);
int topo_from_json_text(const char *text, unsigned long len, const char *what, topo_cluster *c, ts_err *e);

static inline int topo_total_gpus(const topo_cluster *c) { return c->nodes * c->gpus_per_node; }
static inline int topo_node_of(const topo_cluster *c, int gpu) { return gpu / c->gpus_per_node; }

/* Writes a SimGrid platform (XML, DTD 4.1) with one host per GPU named
 * "gpu<N>" (N = global GPU index) whose speed is the GPU's bf16 flop/s, and
 * links such that routes between GPUs cross the intra-node fabric, the NICs
 * and the inter-node fabric as described. Links are full-duplex (SPLITDUPLEX). */
int topo_write_platform(const topo_cluster *c, FILE *out, ts_err *e);

#endif
