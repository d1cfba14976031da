/* tacorun — the GPU half of tacosim: benchmarks, calibration, plan execution.
 * This file only dispatches: each command's code lives in the folder named
 * after it (ARCHITECTURE.md, "Commands: where their code lives"). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "calibrate.h"
#include "calibrate_graph.h"
#include "exec_run.h"
#include "infer_run.h"
#include "train.h"

/* `tacorun execute`: inference plans (and --infer-check) go to infer/, training plans and --check to exec/. */
static int cmd_execute(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* before any plan is read: the help of both kinds of plan */
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      exec_usage(stdout);
      fprintf(stdout, "\n");
      infer_usage(stdout);
      return 0;
    }
  return infer_wants(argc, argv) ? infer_execute(argc, argv) : exec_execute(argc, argv);
}

static const struct {
  const char *name;
  int (*fn)(int argc, char **argv); /* argv[0] is the command's name; returns the exit status */
  const char *help;
} commands[] = {
    {"bench-burst", bench_burst_main,
     "one GEMM back to back after a long idle: its speed by time since the burst began (clock profile)"},
    {"bench-codec", bench_codec_main, "speed (GB/s, fused vs unfused) and error of the TACO codec"},
    {"bench-comm", bench_comm_main, "NCCL BF16 vs TACO/CAAT-Net compressed collectives (nccl-tests columns)"},
    {"bench-decode", bench_decode_main, "decode GEMV and attention kernels: checks, GB/s and % of the read floor"},
    {"bench-decode-step", bench_decode_step_main,
     "the executor's whole decode step over batch x KV length: GB/s and % of the read floor per point"},
    {"bench-graph", bench_graph_main,
     "the decode step's kernels alone, queued in a stream and in one CUDA graph: GPU time per kernel"},
    {"calibrate", cmd_calibrate, "measure GEMMs, kernels and collectives; write a calibration file"},
    {"calibrate-infer", cmd_calibrate_infer,
     "add decode GEMMs and KV-cache attention tables for inference plans to calibration files"},
    {"execute", cmd_execute, "run a plan's training iterations on GPUs (TP, DP, PP; --check for correctness)"},
    {"probe-interleave", cmd_probe_interleave,
     "NCCL all-reduce back to back vs interleaved with GEMMs as the executor runs TP (a probe)"},
    {"train", cmd_train, "train a small byte-level GPT on a text corpus, with or without TP compression; loss CSV"},
};
#define COMMAND_COUNT (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out, "usage: tacorun COMMAND [options]   (COMMAND --help for its options)\n\ncommands:\n");
  for (int i = 0; i < COMMAND_COUNT; i++) fprintf(out, "  %-17s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 0; i < COMMAND_COUNT; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tacorun: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
