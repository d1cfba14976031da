/* sim.h — predict one training iteration of a plan on SimGrid.
 *
 * Every rank's program (plan_build_program) is walked by one SimGrid actor per
 * stream; compute ops sleep for their calibrated time, collectives and
 * send/recv become flows on the cluster's platform (or calibrated times where
 * the calibration measured the link), so concurrent traffic shares links.
 *
 * SimGrid can be initialised once per process: sim_run() may be called once;
 * sim_run_isolated() runs it in a forked child and returns the result through
 * a pipe, so a caller (tests, the layout search) can run many simulations. */
#ifndef SIM_H
#define SIM_H

#include <stdbool.h>
#include <stdio.h>

#include "calibration.h"
#include "plan.h"
#include "result.h"
#include "sim_transfer.h"
#include "ts_error.h"

typedef enum {
  SIM_MODE_FULL,    /* every rank simulated */
  SIM_MODE_REDUCED, /* one representative per pipeline stage (tp 0, dp 0); see README */
} sim_mode;

/* The clock model (sim/README.md): AUTO (the default) is POWER when the calibration has a "power" section,
 * DUTY when it has a "clock" section, else OFF; POWER without a "power" section is an error; DUTY without a
 * "clock" section runs the calibrated times (as OFF). */
typedef enum { SIM_CLOCK_MODEL_AUTO, SIM_CLOCK_MODEL_POWER, SIM_CLOCK_MODEL_DUTY, SIM_CLOCK_MODEL_OFF } sim_clock_model;
const char *sim_clock_model_name(sim_clock_model m); /* "auto", "power", "duty", "off" */
/* 0 and *m set when name is power, duty or off; else -1. */
int sim_clock_model_parse(const char *name, sim_clock_model *m);

typedef struct {
  sim_mode mode;
  const schema_calibration *cal; /* costs; must outlive the call */
  bool record_ops;               /* fill result->ops (for --trace and per-op output) */
  const unsigned char *record_ranks; /* with record_ops: record only ranks r with record_ranks[r] (NULL: all) */
  FILE *warn;                    /* calibration/roofline warnings (NULL: silent) */
  FILE *progress;                /* a progress line on a terminal (NULL: none) */
  const char *platform_path;     /* NULL: written from p->cluster with topo_write_platform */
  /* Optional programs built by the caller (tests): programs[r] for every rank
   * of the plan; NULL: built with plan_build_program. */
  plan_program *programs;
  /* false (default): a collective that reaches a GPU while a compute kernel
   * runs there starts when that kernel ends (NCCL's kernel waits for the SMs
   * the GEMM holds: measured on 2 x H200, sim/RESULTS.md); true: collectives
   * progress alongside compute (ideal overlap). */
  bool ideal_overlap;
  /* false (default): when the calibration has a clock section, compute runs
   * at the clocks its duty allows (the clock model: a compute stream that
   * idles often leaves the power cap; sim/README.md), iterated to a fixed
   * point, each simulation in a forked child; true: calibrated times as they
   * are (the same as a calibration without the section). */
  bool clock_off;
  /* which clock model (above; clock_off true is SIM_CLOCK_MODEL_OFF whatever this says) */
  sim_clock_model clock_model;
  /* false (default): the flows of a cross-node ring or tree phase that no other flow can meet on a link
   * run as one flow per kind (bytes, route), which ends when each of them would (sim_collapse.c; the
   * same predictions, fewer flows); true: every edge its own flow. */
  bool collapse_off;
  /* false (default): the compute stream, and each stream whose ops all stay inside a node, run on the
   * simulator's own event queue (sim_local.c; the same instants, far fewer SimGrid calls); true: every
   * stream is a SimGrid actor */
  bool local_off;
  /* false (default): a cross-node all-to-all runs as every ordered pair's flow on the platform; true
   * (`--alltoall analytic`, approximate): it takes the time max-min sharing gives it alone on the
   * platform, latency + bytes x max over links of flows / bandwidth, without flows (sim_scale.c); it
   * neither slows nor is slowed by the other traffic on its links. */
  bool alltoall_analytic;
} sim_options;

/* Simulates one iteration; fills *out (schema_result_free it). Call once per process. */
/* --trace-ranks: "all", "stages" (tp 0, dp 0 of each stage) or "0,8,16-23"; sel has
 * plan_world_size(p) entries, set to 1 for the ranks chosen. */
int sim_parse_trace_ranks(const char *list, const plan *p, unsigned char *sel, ts_err *e);
/* --trace-ranks when not given: "all" up to SIM_TRACE_ALL_RANKS_MAX GPUs, else "stages" (a full-mode
 * trace of every rank of GPT-3 175B on 1,024 GPUs is over 1 GB; Perfetto opens a few hundred MB). */
#define SIM_TRACE_ALL_RANKS_MAX 256
const char *sim_default_trace_ranks(const plan *p);
int sim_run(const plan *p, const sim_options *o, schema_result *out, ts_err *e);
/* The clock model o runs with on o->cal (POWER, DUTY or OFF); -1 naming the calibration for POWER asked of a
 * calibration without a "power" section. */
int sim_clock_model_resolve(const sim_options *o, sim_clock_model *m, ts_err *e);

/* Same, in a forked child; the result travels back as result JSON. */
int sim_run_isolated(const plan *p, const sim_options *o, schema_result *out, ts_err *e);

/* Prints the headline table of a result. */
void sim_print_result(const schema_result *r, const plan *p, FILE *out);

/* Writes the ops of a result as a Chrome trace (opens in Perfetto): one process
 * per rank, one thread per stream. */
int sim_write_trace(const schema_result *r, const char *path, ts_err *e);
/* `tacosim ops`: each op's simulated cost on rank 0, summed by op name (sim_ops.c). */
int sim_print_op_costs(const plan *p, const schema_calibration *cal, FILE *out, ts_err *e);

/* ---- costs (sim_costs.c), usable without SimGrid ---- */

/* Roofline figures from the cluster (peak, HBM, intra-node link). */
void sim_roofline_of(const topo_cluster *c, schema_roofline *roof);

/* Whether a calibration's transport ("nvlink", "shm", "socket", "pcie") is the
 * intra-node fabric of a cluster; when not, intra-node collectives are timed
 * from the topology's figures (alpha-beta) instead of the calibration. */
bool sim_transport_matches(const char *transport, topo_intra_kind kind);
/* The transport name a cluster's intra-node fabric is calibrated as. */
const char *sim_transport_of(topo_intra_kind kind);
/* The calibration file a simulation of this cluster uses when none is given:
 * one measured on the cluster's own GPU, `<dir>/<gpu>-<transport>.json` (the
 * catalogue name in lower case, e.g. h100-sxm-nvlink.json), when it exists;
 * else the H200's measured `<dir>/h200-<transport>.json` of its intra-node
 * fabric (transferred onto the cluster's GPU), else the derived one
 * (h200-derived.json is NVLink's). PCIe clusters take NVLink's GPU tables;
 * their collectives come from the topology. Returns a static buffer. */
const char *sim_default_calibration(const topo_cluster *c);

/* ---- where the costs come from (sim_cost_source.c, sim_transfer.c) ---- */

typedef enum {
  SIM_TRANSFER_ROOFLINE, /* default: costs measured on another GPU are moved onto the cluster GPU's ceilings */
  SIM_TRANSFER_OFF,      /* a calibration of another GPU is an error */
  SIM_TRANSFER_MAMF,     /* as roofline, with the GPUs' measured matmul rates as compute ceilings */
} sim_transfer_mode;
const char *sim_transfer_mode_name(sim_transfer_mode m); /* "roofline", "off", "mamf" */

/* Loads the calibration at `path` (NULL: sim_default_calibration(cl)) for a
 * simulation of cluster `cl`: as measured when its GPU (found in the GPU
 * catalogue by the file's "gpu" device name) is the cluster's, else
 * transferred onto the cluster's GPU (mode ROOFLINE), else an error naming
 * both GPUs (exit 2). *src says which (for reports). */
int sim_load_costs(const char *path, const topo_cluster *cl, sim_transfer_mode mode, schema_calibration *out,
                   sim_cost_source *src, ts_err *e);
/* One line for reports: "costs measured on X (Y), transferred to Z by M". */
void sim_cost_source_line(const sim_cost_source *s, char *buf, unsigned long cap);

/* `tacosim derive-calibration --gpu NAME`: the measured file at from_path
 * transferred onto the catalogue GPU NAME, its NVLink collectives at
 * link_gbps per GPU per direction (<= 0: the GPU's own NVLink figure). */
int sim_derive_for_gpu(const char *from_path, const char *gpu_name, double link_gbps, schema_calibration *out,
                       ts_err *e);

/* Derived (not measured) calibration from DESIGN.md's measured H200 figures:
 * transport "nvlink", "shm" or "socket". */
int sim_derive_calibration(const char *transport, schema_calibration *c, ts_err *e);

#endif
