/* sim_nccl.c — NCCL's algorithm, protocol and channel choice for one
 * collective, and its time (sim_nccl.h; the model is written down in
 * sim/README.md, "NCCL model"). No SimGrid here. */
#include "sim_nccl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- figures ----
 * The shape of the model (a fixed launch cost per protocol, a latency per
 * ring step or tree level by the kind of hop, a bus bandwidth per protocol
 * that is a share of the link's rate with per-channel ceilings, the
 * all-reduce's NVLS traffic) follows NCCL's tuning model (src/graph/tuning.cc);
 * the numbers are of the order that file uses, rounded, and named here. */

/* A collective's fixed cost by protocol (us): kernel launch and the first handshake. */
static const double launch_us[SIM_NCCL_PROTO_COUNT] = {6.5, 14.0, 8.5};
/* One ring step / tree level by hop class and protocol (us). */
static const double nvlink_step_us[SIM_NCCL_PROTO_COUNT] = {0.6, 1.9, 3.4};
static const double pcie_step_us[SIM_NCCL_PROTO_COUNT] = {1.0, 2.5, 5.7};
static const double net_step_us[SIM_NCCL_PROTO_COUNT] = {2.7, 4.0, 14.0};
#define NVLS_LATENCY_US 25.0     /* NVLS kernels: multicast-object synchronisation across the switch */
#define NVLS_TREE_NET_STEP_US 21.0

#define SIMPLE_LINK_SHARE 0.82   /* NVLink/PCIe payload share under Simple: ~370 of H100's 450 GB/s */
#define LL_PAYLOAD 0.5           /* LL: every 8-byte store carries 4 bytes of flag */
#define LL128_PAYLOAD (120.0 / 128.0) /* LL128: 8 bytes of flag per 128-byte line */
#define NET_SHARE 0.92           /* InfiniBand/RoCE: ~46 of 50 GB/s per 400 Gb/s NIC */
#define TREE_SHARE 0.92          /* trees keep fewer links busy than rings at the same rate */
#define NET_LL_GBPS 30.0         /* LL across nodes: bounded by the proxy thread's polling */
#define GBPS_PER_CHANNEL_LINK 24.0 /* Simple rate one channel sustains on NVLink/PCIe (sets the channel count) */
#define GBPS_PER_CHANNEL_HOST 12.0
#define MAX_CHANNELS 32

static bool is_nvlink(topo_intra_kind k) { return k == TOPO_INTRA_NVSWITCH || k == TOPO_INTRA_NVLINK; }
static bool is_host(topo_intra_kind k) { return k == TOPO_INTRA_SHM || k == TOPO_INTRA_SOCKET; }

/* NVLink generation index: 0 (gen 3 and older), 1 (gen 4, or not known), 2 (gen 5+). */
static int gen_index(const sim_nccl_fabric *f) {
  if (f->nvlink_gen >= 5) return 2;
  if (f->nvlink_gen == 3 || (f->nvlink_gen > 0 && f->nvlink_gen < 3)) return 0;
  return 1;
}
/* LL ceiling inside a node (GB/s, all channels), LL128 and tree ceilings per channel. */
static const double ll_max_gbps[3] = {88.0, 141.0, 282.0};
static const double ll128_per_channel[3] = {20.0, 36.7, 40.0};
static const double tree_per_channel[3] = {24.0, 38.7, 70.0};
/* Share of the Simple rate the NVLS kernels reach (gen 3 has no NVLS). */
static const double nvls_share[3] = {0.0, 0.85, 0.74};

bool sim_nccl_nvls_capable(topo_intra_kind intra, int nvlink_gen) {
  return intra == TOPO_INTRA_NVSWITCH && nvlink_gen >= 4;
}

static int nvlink_gen_of(const topo_gpu *g) {
  static const struct {
    const char *tag;
    int gen;
  } by_name[] = {{"B200", 5}, {"B100", 5}, {"B300", 5}, {"H100", 4}, {"H200", 4}, {"H20", 4},
                 {"H800", 4}, {"A100", 3}, {"A800", 3}, {"V100", 2}};
  if (g->nvlink_gen > 0) return g->nvlink_gen;
  for (size_t i = 0; i < sizeof by_name / sizeof by_name[0]; i++)
    if (strstr(g->name, by_name[i].tag)) return by_name[i].gen;
  return 0;
}

void sim_nccl_fabric_of_cluster(const topo_cluster *cl, sim_nccl_fabric *f) {
  memset(f, 0, sizeof *f);
  f->intra = cl->intra.kind;
  f->intra_gbps = cl->intra.gbps_per_gpu;
  f->intra_latency_us = cl->intra.latency_us;
  f->nvlink_gen = nvlink_gen_of(&cl->gpu);
  f->nvls = sim_nccl_nvls_capable(f->intra, f->nvlink_gen);
  f->nics_per_node = cl->nic.per_node;
  f->nic_gbps = cl->nic.gbps;
  f->net_latency_us = 2.0 * cl->nic.latency_us + cl->fabric.latency_us;
}

/* ---- rates ---- */

static double intra_simple_gbps(const sim_nccl_fabric *f) {
  return f->intra_gbps * (is_host(f->intra) ? 1.0 : SIMPLE_LINK_SHARE);
}

static int channels_of(const sim_nccl_fabric *f) {
  double per = is_host(f->intra) || f->intra == TOPO_INTRA_PCIE ? GBPS_PER_CHANNEL_HOST : GBPS_PER_CHANNEL_LINK;
  int nch = (int)ceil(intra_simple_gbps(f) / per);
  return nch < 2 ? 2 : nch > MAX_CHANNELS ? MAX_CHANNELS : nch;
}

/* What the node's NICs carry for rings and trees, all channels together:
 * each NIC carries its own rings; a node uses at most one NIC per GPU. */
static double node_net_gbps(const sim_nccl_fabric *f, int ppn) {
  int nics = f->nics_per_node < ppn ? f->nics_per_node : ppn;
  return nics * f->nic_gbps * NET_SHARE;
}

/* LL128 needs NVLink inside the node; across nodes NCCL enables it only from
 * Hopper on (GPU to NIC through PCIe or PXN), not on Ampere. */
static bool ll128_allowed(const sim_nccl_fabric *f, int nodes) {
  return is_nvlink(f->intra) && (nodes == 1 || f->nvlink_gen >= 4);
}

static double ll_ceiling(const sim_nccl_fabric *f, int nodes) {
  return nodes > 1 ? NET_LL_GBPS : ll_max_gbps[gen_index(f)];
}

/* Bus bandwidth of a ring (GB/s), 0 when the protocol does not run here. */
static double ring_bus_gbps(const sim_nccl_fabric *f, sim_nccl_proto p, int nodes, int ppn) {
  double b = intra_simple_gbps(f);
  if (nodes > 1) b = fmin(b, node_net_gbps(f, ppn));
  if (p == SIM_NCCL_LL) return fmin(b * LL_PAYLOAD, ll_ceiling(f, nodes));
  if (p == SIM_NCCL_LL128)
    return ll128_allowed(f, nodes) ? fmin(b * LL128_PAYLOAD, channels_of(f) * ll128_per_channel[gen_index(f)]) : 0;
  return b;
}

static double tree_bus_gbps(const sim_nccl_fabric *f, sim_nccl_proto p, int nodes, int ppn) {
  double b = intra_simple_gbps(f);
  if (nodes > 1) b = fmin(b, node_net_gbps(f, ppn));
  b = fmin(b * TREE_SHARE, channels_of(f) * tree_per_channel[gen_index(f)]);
  if (p == SIM_NCCL_LL) return fmin(b / 3.8, ll_ceiling(f, nodes));
  if (p == SIM_NCCL_LL128)
    return ll128_allowed(f, nodes)
               ? fmin(b * (nodes == 1 ? 7.0 / 9.0 : LL128_PAYLOAD), channels_of(f) * ll128_per_channel[gen_index(f)])
               : 0;
  return b;
}

/* NVLS kernels' rate on one GPU's NVLink ports (GB/s). */
static double nvls_gbps(const sim_nccl_fabric *f) {
  return f->intra_gbps * SIMPLE_LINK_SHARE * nvls_share[gen_index(f)];
}

/* Channels a ring or tree runs a message of `bytes` on: NCCL gives each
 * channel at least threads x a per-thread threshold of bytes (Simple: 512 x
 * 64 B; LL128: 640 x 8 B; LL: 512 x 8 B x the ring's ranks), so small
 * messages run on fewer channels, at that share of the bandwidth. Continuous
 * (not NCCL's integer steps), so the time stays monotone in bytes. */
static double channel_share(const sim_nccl_fabric *f, sim_nccl_algo a, sim_nccl_proto p, double bytes, int n) {
  double per = p == SIM_NCCL_SIMPLE ? 512.0 * 64 : p == SIM_NCCL_LL128 ? 640.0 * 8 : 512.0 * 8;
  if (p == SIM_NCCL_LL && a == SIM_NCCL_RING) per *= n;
  double nch = channels_of(f), used = bytes / per;
  if (used < 1) used = 1;
  return used >= nch ? 1.0 : used / nch;
}

/* ---- latencies ---- */

static double intra_step_us(const sim_nccl_fabric *f, sim_nccl_proto p) {
  if (is_nvlink(f->intra)) return nvlink_step_us[p];
  if (f->intra == TOPO_INTRA_PCIE) return pcie_step_us[p];
  /* through host memory or a socket: the fabric's own hop latency (LL
   * skips Simple's separate flag write and fence: half of it) */
  double hop = f->intra_latency_us * (p == SIM_NCCL_LL ? 0.5 : 1.0);
  return fmax(hop, pcie_step_us[p]);
}

static double net_step_us_of(const sim_nccl_fabric *f, sim_nccl_proto p) {
  /* Simple waits for a flush of the received data: a second crossing */
  return net_step_us[p] + f->net_latency_us * (p == SIM_NCCL_SIMPLE ? 2.0 : 1.0);
}

static int ceil_log2(int x) {
  int l = 0;
  while ((1 << l) < x) l++;
  return l;
}

/* ---- one algorithm and protocol ---- */

static bool pxn_applies(const sim_nccl_fabric *f, int nodes) {
  return nodes > 1 && is_nvlink(f->intra) && f->nics_per_node > 1;
}

static double ring_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_proto p, double S, int n, int ppn,
                      bool all_channels) {
  int nodes = n / ppn;
  double bus = ring_bus_gbps(f, p, nodes, ppn) * (all_channels ? 1.0 : channel_share(f, SIM_NCCL_RING, p, S, n));
  if (bus <= 0) return -1;
  double steps = ts_coll_steps((ts_coll)coll, n), inter = nodes == 1 ? 0 : ts_coll_steps((ts_coll)coll, nodes);
  double lat = launch_us[p] + (steps - inter) * intra_step_us(f, p) + inter * net_step_us_of(f, p);
  double bus_bytes = S * ts_coll_busbw_factor((ts_coll)coll, n);
  return lat + bus_bytes / (bus * 1e3);
}

/* Tree all-reduce: reduce up, broadcast down; NCCL's two complementary
 * trees move half the buffer each, and a tree's algorithm bandwidth is half
 * its bus bandwidth. */
static double tree_us(const sim_nccl_fabric *f, sim_nccl_proto p, double S, int n, int ppn, bool all_channels) {
  int nodes = n / ppn;
  double bus = tree_bus_gbps(f, p, nodes, ppn) * (all_channels ? 1.0 : channel_share(f, SIM_NCCL_TREE, p, S, n));
  if (bus <= 0) return -1;
  double lat = launch_us[p] + 2.0 * ((ppn - 1) * intra_step_us(f, p) + ceil_log2(nodes) * net_step_us_of(f, p));
  return lat + 2.0 * S / (bus * 1e3);
}

/* NVLS on one node. All-reduce: each GPU's ports carry S out (the switch
 * reads every shard for the multimem reduction) and S/n in, then S/n out and
 * S in (the multicast store of the reduced shard): S (1 + 1/n) each way.
 * All-gather / reduce-scatter: S (n-1)/n each way, as a ring, at the NVLS rate. */
static double nvls_us(const sim_nccl_fabric *f, sim_nccl_coll coll, double S, int n) {
  double bw = nvls_gbps(f);
  if (bw <= 0) return -1;
  double bytes = coll == SIM_NCCL_ALLREDUCE ? S * (1.0 + 1.0 / n) : S * (n - 1.0) / n;
  return NVLS_LATENCY_US + bytes / (bw * 1e3);
}

/* NVLS-tree: NVLS reduce-scatter inside each node, a tree all-reduce of each
 * GPU's 1/ppn share across nodes on the node's NICs (two nodes exchange it
 * once; more nodes move it up and down), NVLS all-gather; pipelined, so the
 * slower of the two parts sets the rate. */
static double nvls_tree_us(const sim_nccl_fabric *f, double S, int n, int ppn) {
  int nodes = n / ppn;
  double bw = nvls_gbps(f), net = node_net_gbps(f, ppn);
  if (bw <= 0 || net <= 0) return -1;
  double intra = S * (1.0 + 1.0 / ppn) / (bw * 1e3);
  double inter = S * (nodes == 2 ? 1.0 : 2.0) / (net * 1e3);
  double lat = NVLS_LATENCY_US + 2.0 * ceil_log2(nodes) * (NVLS_TREE_NET_STEP_US + 2.0 * f->net_latency_us);
  return lat + fmax(intra, inter);
}

/* All-to-all and send/recv: point-to-point sends, Simple or LL. All-to-all
 * sends S/n to each peer: S (ppn-1)/n over NVLink and S (n-ppn)/n over the
 * GPU's share of its node's NICs, at the same time. With PXN the remote
 * part first crosses NVLink to the GPU on the destination's rail (one more
 * NVLink step of latency, no extra bandwidth on the NICs). */
static double p2p_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_proto p, double S, int n, int ppn) {
  if (p == SIM_NCCL_LL128) return -1;
  int nodes = n / ppn;
  double share = p == SIM_NCCL_LL ? LL_PAYLOAD : 1.0;
  double intra_bw = intra_simple_gbps(f) * share;
  double nic_bw = nodes > 1 ? node_net_gbps(f, ppn) / ppn * share : 0;
  if (p == SIM_NCCL_LL) {
    intra_bw = fmin(intra_bw, ll_ceiling(f, 1));
    nic_bw = fmin(nic_bw, NET_LL_GBPS);
  }
  double lat = launch_us[p];
  if (coll == SIM_NCCL_SENDRECV) {
    if (nodes == 1) return lat + intra_step_us(f, p) + S / (intra_bw * 1e3);
    double one_nic = f->nic_gbps * NET_SHARE * share;
    if (p == SIM_NCCL_LL) one_nic = fmin(one_nic, NET_LL_GBPS);
    return lat + net_step_us_of(f, p) + S / (one_nic * 1e3);
  }
  double t_intra = ppn > 1 ? S * (ppn - 1.0) / n / (intra_bw * 1e3) : 0;
  double t_inter = nodes > 1 ? S * (double)(n - ppn) / n / (nic_bw * 1e3) : 0;
  if (ppn > 1) lat += intra_step_us(f, p);
  if (nodes > 1) lat += net_step_us_of(f, p) + (pxn_applies(f, nodes) ? intra_step_us(f, p) : 0);
  return lat + fmax(t_intra, t_inter);
}

/* One combination's time; all_channels: as NCCL's tuner ranks them (every
 * channel), else on the channels the message actually gets. */
static double algo_time(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_algo algo, sim_nccl_proto proto,
                        double bytes, int nranks, int ranks_per_node, bool all_channels) {
  if (nranks <= 1 || bytes <= 0) return 0;
  int nodes = nranks / ranks_per_node;
  bool p2p = coll == SIM_NCCL_ALLTOALL || coll == SIM_NCCL_SENDRECV;
  bool nvls_ok = f->nvls && sim_nccl_nvls_capable(f->intra, f->nvlink_gen) && proto == SIM_NCCL_SIMPLE;
  switch (algo) {
  case SIM_NCCL_RING: return p2p ? -1 : ring_us(f, coll, proto, bytes, nranks, ranks_per_node, all_channels);
  case SIM_NCCL_TREE:
    return coll == SIM_NCCL_ALLREDUCE ? tree_us(f, proto, bytes, nranks, ranks_per_node, all_channels) : -1;
  case SIM_NCCL_NVLS:
    return nvls_ok && !p2p && nodes == 1 ? nvls_us(f, coll, bytes, nranks) : -1;
  case SIM_NCCL_NVLS_TREE:
    return nvls_ok && coll == SIM_NCCL_ALLREDUCE && nodes > 1 && ranks_per_node > 1
               ? nvls_tree_us(f, bytes, nranks, ranks_per_node)
               : -1;
  case SIM_NCCL_P2P: return p2p ? p2p_us(f, coll, proto, bytes, nranks, ranks_per_node) : -1;
  default: return -1;
  }
}

double sim_nccl_algo_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_algo algo, sim_nccl_proto proto,
                        double bytes, int nranks, int ranks_per_node) {
  return algo_time(f, coll, algo, proto, bytes, nranks, ranks_per_node, false);
}

double sim_nccl_tuner_us(const sim_nccl_fabric *f, sim_nccl_coll coll, sim_nccl_algo algo, sim_nccl_proto proto,
                         double bytes, int nranks, int ranks_per_node) {
  return algo_time(f, coll, algo, proto, bytes, nranks, ranks_per_node, true);
}

/* NCCL's choice: the combination its tuner ranks fastest (all channels);
 * its time is then taken on the channels the message gets. */
static double best_us(const sim_nccl_fabric *f, sim_nccl_coll coll, double bytes, int n, int ppn,
                      sim_nccl_algo *algo, sim_nccl_proto *proto) {
  double best = -1;
  *algo = coll == SIM_NCCL_ALLTOALL || coll == SIM_NCCL_SENDRECV ? SIM_NCCL_P2P : SIM_NCCL_RING;
  *proto = SIM_NCCL_SIMPLE;
  for (int a = 0; a < SIM_NCCL_ALGO_COUNT; a++)
    for (int p = 0; p < SIM_NCCL_PROTO_COUNT; p++) {
      double t = sim_nccl_tuner_us(f, coll, (sim_nccl_algo)a, (sim_nccl_proto)p, bytes, n, ppn);
      if (t >= 0 && (best < 0 || t < best)) {
        best = t;
        *algo = (sim_nccl_algo)a;
        *proto = (sim_nccl_proto)p;
      }
    }
  if (best < 0) return 0;
  return sim_nccl_algo_us(f, coll, *algo, *proto, bytes, n, ppn);
}

/* ---- the anchor ---- */

static double model_at(const sim_nccl_fabric *f, sim_nccl_coll coll, double bytes, int n) {
  sim_nccl_algo a;
  sim_nccl_proto p;
  return best_us(f, coll, bytes, n, n, &a, &p);
}

/* Measured over modelled time of the anchor's rank count at `bytes`. */
static double anchor_ratio(const sim_nccl_fabric *f, sim_nccl_coll coll, const schema_coll_table *t, double bytes) {
  const schema_size_point *pt = t->pts;
  int n = t->n;
  double x = bytes, meas;
  if (x <= pt[0].bytes) {
    x = pt[0].bytes;
    meas = pt[0].us;
  } else if (x >= pt[n - 1].bytes) {
    x = pt[n - 1].bytes;
    meas = pt[n - 1].us;
  } else {
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
      int mid = (lo + hi) / 2;
      if (pt[mid].bytes <= x)
        lo = mid;
      else
        hi = mid;
    }
    double u = pt[hi].bytes > pt[lo].bytes ? (log(x) - log(pt[lo].bytes)) / (log(pt[hi].bytes) - log(pt[lo].bytes)) : 0;
    meas = exp(log(pt[lo].us) + u * (log(pt[hi].us) - log(pt[lo].us)));
  }
  double model = model_at(f, coll, x, t->nranks);
  return model > 0 && meas > 0 ? meas / model : 1.0;
}

static int check_args(const sim_nccl_fabric *f, sim_nccl_coll coll, double bytes, int nranks, int rpn,
                      const schema_coll_table *anchor, ts_err *e) {
  const char *w = "nccl model";
  if (!(bytes >= 0) || !isfinite(bytes)) return ts_fail(e, w, "bytes", "%g: must be finite and >= 0", bytes);
  if (nranks < 1) return ts_fail(e, w, "nranks", "%d: must be >= 1", nranks);
  if (rpn < 1 || rpn > nranks || nranks % rpn)
    return ts_fail(e, w, "ranks_per_node", "%d: must divide nranks (%d)", rpn, nranks);
  if ((int)coll < 0 || coll > SIM_NCCL_SENDRECV) return ts_fail(e, w, "coll", "%d: unknown collective", (int)coll);
  if (coll == SIM_NCCL_SENDRECV && nranks != 2) return ts_fail(e, w, "nranks", "%d: send/recv is 2 ranks", nranks);
  if (!(f->intra_gbps > 0)) return ts_fail(e, w, "intra_gbps", "%g: must be > 0", f->intra_gbps);
  if (nranks > rpn && !(f->nics_per_node > 0 && f->nic_gbps > 0))
    return ts_fail(e, w, "nic", "%d nodes but no NIC bandwidth", nranks / rpn);
  if (anchor && (anchor->n < 1 || anchor->nranks < 2))
    return ts_fail(e, w, "anchor", "\"%s\": %d points of %d ranks: needs points of 2 ranks or more", anchor->name,
                   anchor->n, anchor->nranks);
  return 0;
}

int sim_nccl_time(const sim_nccl_fabric *f, sim_nccl_coll coll, double bytes, int nranks, int ranks_per_node,
                  const schema_coll_table *anchor, sim_nccl_choice *out, ts_err *e) {
  memset(out, 0, sizeof *out);
  out->anchor_scale = 1.0;
  if (check_args(f, coll, bytes, nranks, ranks_per_node, anchor, e)) return -1;
  int nodes = nranks / ranks_per_node;
  out->channels = channels_of(f);
  out->pxn = (coll == SIM_NCCL_ALLTOALL || coll == SIM_NCCL_SENDRECV) && pxn_applies(f, nodes);
  out->model_us = best_us(f, coll, bytes, nranks, ranks_per_node, &out->algo, &out->proto);
  if (out->algo == SIM_NCCL_RING || out->algo == SIM_NCCL_TREE) {
    double used = ceil(out->channels * channel_share(f, out->algo, out->proto, bytes, nranks) - 1e-9);
    out->channels = used < 1 ? 1 : (int)used;
  }
  out->us = out->model_us;
  if (anchor && out->model_us > 0) {
    /* the anchor's size with the same per-rank chunk: S/n per step of a ring,
     * S/n per peer of an all-to-all; a send/recv has one peer */
    double eq = coll == SIM_NCCL_SENDRECV ? bytes : bytes * anchor->nranks / nranks;
    out->anchor_scale = anchor_ratio(f, coll, anchor, eq);
    out->us = out->model_us * out->anchor_scale;
  }
  return 0;
}

/* ---- names ---- */

int sim_nccl_coll_from_name(const char *name, sim_nccl_coll *out) {
  ts_coll c;
  if (ts_coll_parse(name, &c)) return -1;
  *out = (sim_nccl_coll)c;
  return 0;
}

const char *sim_nccl_coll_name(sim_nccl_coll c) { return ts_coll_name((ts_coll)c); }

const char *sim_nccl_algo_name(sim_nccl_algo a) {
  static const char *const n[] = {"ring", "tree", "nvls", "nvls-tree", "p2p"};
  return (int)a >= 0 && a < SIM_NCCL_ALGO_COUNT ? n[a] : "?";
}

const char *sim_nccl_proto_name(sim_nccl_proto p) {
  static const char *const n[] = {"LL", "LL128", "Simple"};
  return (int)p >= 0 && p < SIM_NCCL_PROTO_COUNT ? n[p] : "?";
}

void sim_nccl_describe(const sim_nccl_choice *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s, %d channels%s", sim_nccl_algo_name(c->algo), sim_nccl_proto_name(c->proto), c->channels,
           c->pxn ? ", PXN" : "");
}

double sim_nccl_busbw(sim_nccl_coll coll, double bytes, int nranks, double us) {
  if (us <= 0 || nranks < 2) return 0;
  return bytes / (us * 1e3) * ts_coll_busbw_factor((ts_coll)coll, nranks);
}
