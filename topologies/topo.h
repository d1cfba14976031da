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

/* One GPU's published figures (datasheet / whitepaper). A cluster file either
 * names a catalogue entry (topologies/gpus/<name>.json, every field there) or
 * gives an inline block with at least name, bf16_tflops, hbm_gib and
 * hbm_gbps; a figure an inline block leaves out is 0 ("not known"). In the
 * catalogue too, base_mhz and boost_mhz are 0 where NVIDIA publishes no clock
 * (the entry's "sources" says so); fp8_tflops is 0 for a GPU without FP8,
 * nvlink_gen and nvlink_gbps 0 for one without NVLink. */
typedef struct {
  char name[32];        /* catalogue name, e.g. "A100-SXM4-80GB", "H200-SXM" */
  double bf16_tflops;   /* dense BF16 tensor-core TFLOP/s (no sparsity) */
  double fp16_tflops;   /* dense FP16 tensor-core */
  double fp8_tflops;    /* dense FP8 tensor-core; 0 when the GPU has none */
  double fp32_tflops;   /* non-tensor FP32 */
  /* Measured, not a datasheet figure: the maximum achievable BF16 matmul TFLOP/s (the best shape of a
   * published search over GEMM shapes; 0 where none is published). Read only by the transfer's "mamf"
   * mode (sim/README.md, "Calibration transfer"). */
  double bf16_mamf_tflops;
  /* Published, not a datasheet figure: the best fraction of bf16_tflops that FlashAttention-2 (the
   * "flash" attention backend, warp-level mma.sync kernels) reaches on this GPU; 0 where none is
   * published. The transfer moves the "flash" tables by bf16_tflops x this figure on both GPUs when
   * both have it (sim/README.md, "Calibration transfer"). */
  double flash2_bf16_util;
  double hbm_gib;       /* device memory, GiB */
  double hbm_gbps;      /* device memory bandwidth, GB/s */
  int sms;              /* streaming multiprocessors */
  double l2_mib;        /* L2 cache, MiB */
  double base_mhz, boost_mhz; /* SM clocks */
  double power_w;       /* board power limit (TDP / TGP) */
  int nvlink_gen;       /* 0: no NVLink */
  double nvlink_gbps;   /* NVLink per GPU per direction, GB/s (0 without NVLink) */
  int pcie_gen;
  /* The tensor cores take MXFP8 (E8M0 scales per 32 elements, OCP Microscaling): Blackwell's, compute capability
   * 10.0 and up; Hopper's and Ada's do not. What layout.fp8 "mxfp8" needs (plan_fp8.c). */
  bool mxfp8;
  /* Measured, not a datasheet figure: an MXFP8 GEMM's time over a per-tensor-scaled FP8 GEMM's of the same
   * shapes on this GPU, as Transformer Engine calls them (the scale swizzles it runs inside the GEMM call
   * included); 0 where none is published (MXFP8 GEMMs are then priced as per-tensor FP8 ones, warned) and where
   * the GPU has no MXFP8. Read by the FP8 GEMM prices under layout.fp8 "mxfp8" (sim/README.md, "FP8 GEMMs"). */
  double mxfp8_gemm_ratio;
  /* cuBLASLt runs this GPU's FP8 GEMMs with the operands in any layout, not only TN (A transposed, B not):
   * Transformer Engine's nvte_is_non_tn_fp8_gemm_supported (compute capability 10.x, 11.x, 13.0 and up), under
   * which its per-tensor FP8 tensors carry no transposed (columnwise) copy: the dgrad and wgrad GEMMs read the
   * rowwise one. Read by the casts' bytes and the weights' FP8 copies of "tensorwise" and "delayed"
   * (plan_fp8.c); MXFP8 keeps both copies (each with its own block scales). An inline block without it: false. */
  bool fp8_non_tn_gemm;
  /* Dense NVFP4 tensor-core peak, TFLOP/s (E2M1 operands with an E4M3 scale per 16 elements and an FP32 scale per
   * tensor, the block-scaled MMA of compute capability 10.0): B200 9,000, GB200 10,000, twice their FP8 peaks;
   * 0 for a GPU without FP4 tensor cores (Ampere, Hopper, Ada), where an inference plan's "quantization": "nvfp4"
   * is refused. An inline block without it: 0. Read by the NVFP4 GEMM price (sim/INFERENCE.md, "NVFP4 weights"). */
  double fp4_tflops;
  bool from_catalogue;  /* loaded from topologies/gpus/, every field known */
} topo_gpu;

typedef struct {
  char name[64];
  topo_gpu gpu;
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

/* A cluster by name (topologies_dir/<name>.json; NULL: topo_zoo_dir()) or by
 * path. Its "gpu" is either the name of a catalogue entry, read from
 * <topologies_dir>/gpus (NULL: topo_gpus_dir()), or an inline object. An
 * unknown cluster or GPU name gets an error listing the names there are. */
int topo_load(const char *name_or_path, const char *topologies_dir, topo_cluster *c, ts_err *e);
/* Same from text; a named GPU comes from topo_gpus_dir(). */
int topo_from_json_text(const char *text, unsigned long len, const char *what, topo_cluster *c, ts_err *e);

/* ---- the GPU catalogue (topologies/gpus/<name>.json, topo_gpu.c) ----
 *
 * One file per GPU: every topo_gpu figure, "device_names" (the CUDA device
 * names the entry answers to) and "sources" (for each figure, where it comes
 * from). Read strictly: every field present and in range, unknown keys
 * refused, a source for every figure. */

/* $TACOSIM_TOPOLOGIES_DIR/gpus when that is set, else the compiled-in
 * topologies/gpus folder. */
const char *topo_gpus_dir(void);
/* An entry by catalogue name (gpus_dir/<name>.json; gpus_dir NULL:
 * topo_gpus_dir()) or by path. By name, the file's "name" must be that name;
 * an unknown name gets an error listing the catalogue. */
int topo_gpu_load(const char *name_or_path, const char *gpus_dir, topo_gpu *g, ts_err *e);
/* The entry whose device_names holds cuda_device_name exactly (as
 * cudaGetDeviceProperties().name gives it, e.g. "NVIDIA H200"). None, or more
 * than one, is an error naming the catalogue's entries. */
int topo_gpu_find_device(const char *cuda_device_name, const char *gpus_dir, topo_gpu *g, ts_err *e);
/* One catalogue entry from text (for tests and the fuzzer). */
int topo_gpu_from_json_text(const char *text, unsigned long len, const char *what, topo_gpu *g, ts_err *e);

static inline int topo_total_gpus(const topo_cluster *c) { return c->nodes * c->gpus_per_node; }
static inline int topo_node_of(const topo_cluster *c, int gpu) { return gpu / c->gpus_per_node; }

const char *topo_zoo_dir(void); /* $TACOSIM_TOPOLOGIES_DIR when set, else the compiled-in topologies folder */
const char *topo_intra_kind_name(topo_intra_kind k); /* "nvswitch", ... as in the JSON */
const char *topo_fabric_kind_name(topo_fabric_kind k);

/* ---- structure: the one description both the platform and the helpers use ----
 *
 * Nodes hang under leaves: the leaf switches of a fat-tree (fabric.nodes_per_leaf
 * nodes each), the groups of a dragonfly, or one leaf for a single switch. Each
 * GPU reaches the other nodes through one NIC of its node: GPU i uses NIC
 * i / (gpus_per_node / nic.per_node), so with one NIC per GPU (rail-optimized)
 * GPU i uses NIC i. */
int topo_leaf_count(const topo_cluster *c);
int topo_leaf_of_node(const topo_cluster *c, int node);
int topo_nodes_in_leaf(const topo_cluster *c, int leaf);
int topo_nic_of(const topo_cluster *c, int gpu); /* index within the node; -1 without NICs */

/* One link of a route, as the SimGrid platform names it: a full-duplex link
 * "name" has the two directions "name_UP" and "name_DOWN"; `up` says which. */
typedef struct {
  char name[40];
  bool up;
  double gbps;       /* per direction */
  double latency_us;
} topo_link;

#define TOPO_MAX_ROUTE_LINKS 8

/* The links a transfer from GPU a to GPU b crosses, in order, ignoring
 * contention; returns their count (0 when a == b), or -1 for a GPU index out
 * of range. The SimGrid route between the hosts "gpu<a>" and "gpu<b>" of the
 * platform topo_write_platform emits holds exactly these directed links
 * (SimGrid may list them in another order, which no flow notices). */
int topo_route(const topo_cluster *c, int a, int b, topo_link out[TOPO_MAX_ROUTE_LINKS]);
/* Bandwidth of the slowest link of the route (GB/s) and the sum of its
 * latencies (us): what one transfer alone on the network sees. For a == b no
 * link is crossed: the bandwidth is the GPU's HBM bandwidth and latency 0. */
double topo_path_gbps(const topo_cluster *c, int a, int b);
double topo_path_latency_us(const topo_cluster *c, int a, int b);

/* SimGrid host name of a GPU: "gpu<N>". */
static inline void topo_gpu_host_name(int gpu, char *buf, unsigned long cap) { snprintf(buf, cap, "gpu%d", gpu); }

/* Writes a SimGrid platform (XML, DTD 4.1) with one host per GPU named
 * "gpu<N>" (N = global GPU index) whose speed is the GPU's bf16 flop/s, and
 * links such that routes between GPUs cross the intra-node fabric, the NICs
 * and the inter-node fabric as described. Links are full-duplex (SPLITDUPLEX).
 * The route SimGrid finds between "gpu<a>" and "gpu<b>" holds exactly the
 * links of topo_route(c, a, b) (README.md: the zones, and why).
 *
 * Using it from SimGrid 3.32: load it with simgrid_load_platform(); seal it
 * (simgrid_run() with no actors, or Engine::seal_platform()) before asking for
 * a route outside an actor; index the hosts once from sg_host_list() rather
 * than calling sg_host_by_name() per message (it walks the zone tree). */
int topo_write_platform(const topo_cluster *c, FILE *out, ts_err *e);
/* The same platform holding only the GPUs g with keep[g] != 0 (keep has one
 * entry per GPU; NULL keeps all), with their ports, NICs and nodes' cables;
 * switches and leaf uplinks stay. Routes between kept GPUs are those of the
 * whole platform; a cluster of one node is written whole. For simulations
 * where only some GPUs send or receive (the simulator's reduced mode). */
int topo_write_platform_subset(const topo_cluster *c, const unsigned char *keep, FILE *out, ts_err *e);
/* Same, into a file (created or truncated). */
int topo_write_platform_file(const topo_cluster *c, const char *path, ts_err *e);

/* The SimGrid settings the platform is designed for, as "--cfg=..." arguments
 * for simgrid_init() (NULL-terminated): CM02 without TCP corrections, no
 * reverse cross traffic, no TCP window bound, so a lone transfer gets the
 * declared bandwidth and the two directions of a link are independent. */
const char *const *topo_simgrid_options(void);

#endif
