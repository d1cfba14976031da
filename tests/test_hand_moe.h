/* test_hand_moe.h — the zoo's moe-tiny on a hand-made cluster whose GPUs are
 * SimGrid hosts of one cluster behind one switch, for simulator tests whose
 * figures are worked out by hand: the plan (every field the test does not
 * set left zero) and the platform file it runs on. */
#ifndef TEST_HAND_MOE_H
#define TEST_HAND_MOE_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"

/* moe-tiny on `nodes` x `gpn` GPUs of 1,000 TFLOP/s, 80 GiB at 4 TB/s, NVSwitch
 * at intra_gbps per GPU (1 us), nics per node of nic_gbps on one switch; dp x
 * tp x pp = 1 x 1 x 1, micro-batch 1 x 128 tokens, 4 sequences, imbalance 1. */
static inline void test_hand_moe_plan(plan *p, const char *name, int nodes, int gpn, double intra_gbps, int nics,
                                      double nic_gbps) {
  memset(p, 0, sizeof *p);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(model_load("moe-tiny", NULL, &p->model, &e), 0);
  snprintf(p->path, sizeof p->path, "%s", name);
  snprintf(p->name, sizeof p->name, "%s", name);
  topo_cluster *c = &p->cluster;
  snprintf(c->name, sizeof c->name, "hand");
  snprintf(c->gpu.name, sizeof c->gpu.name, "X");
  c->gpu.bf16_tflops = 1000;
  c->gpu.hbm_gib = 80;
  c->gpu.hbm_gbps = 4000;
  c->nodes = nodes;
  c->gpus_per_node = gpn;
  c->intra.kind = TOPO_INTRA_NVSWITCH;
  c->intra.gbps_per_gpu = intra_gbps;
  c->intra.latency_us = 1;
  c->nic.per_node = nics;
  c->nic.gbps = nic_gbps;
  c->fabric.kind = TOPO_FABRIC_SINGLE_SWITCH;
  p->dp = 1, p->tp = 1, p->pp = 1, p->vpp = 1, p->ep = 1, p->moe_imbalance = 1.0;
  p->order = PLAN_ORDER_TP_DP_PP;
  p->micro_batch = 1;
  p->seq = 128;
  p->global_batch = 4;
  p->layers = p->model.layers;
}

/* Writes /tmp/<tag>-<pid>.xml into path: `hosts` GPUs as one SimGrid cluster
 * of links of bw_Bps bytes/s and lat_s seconds (split duplex). */
static inline void test_hand_platform(char *path, size_t cap, const char *tag, int hosts, double bw_Bps, double lat_s) {
  snprintf(path, cap, "/tmp/%s-%d.xml", tag, (int)getpid());
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n"
          "<cluster id=\"c\" prefix=\"gpu\" suffix=\"\" radical=\"0-%d\" speed=\"1Pf\" bw=\"%.0fBps\" lat=\"%gs\" "
          "sharing_policy=\"SPLITDUPLEX\"/>\n</platform>\n",
          hosts - 1, bw_Bps, lat_s);
  fclose(f);
}

#endif
