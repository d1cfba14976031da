#!/usr/bin/env bash
# adopt.sh — after run_gpu.sh ran on an H200: its tables into the shipped files and v5 the default.
#   1. the H200's v5 decode attention tables (cal.tgz) replace the decode attention tables of the three H200 files
#      (merge_decode_attn.py --tables-from), the H100's (calibration/h100/run-20261206-v5/decode-attention-v5.json.gz,
#      timed 2026-12-06 23:34 UTC) those of calibration/h100-sxm-nvlink.json;
#   2. the H200's per-query-head tables (pqh.tgz), where the run reached them, into the three H200 files;
#   3. the H200's decode GEMMs (gemm.tgz: the shapes its files lacked), where the run reached them, into their
#      "gemm_infer" lists (merge_infer.py --take decode-gemm: only shapes a file lacks);
#   4. the decode-sized QKV bias tables (small.tsv.gz: bias_fwd.eager / .graph), where the run has them, into the three
#      H200 files (merge_small.py --only bias_fwd: the other small-kernel tables stay as timed on 2026-12-04);
#   5. INFER_DECODE_DEFAULT 5 (runtime/ops/infer_decode.h).
# The run's tables are kept under calibration/h200/run-DATE-v5/ (gzipped, with their logs), its checks, timings and
# the 26 plans' measured results under experiments/infer/v5/h200-DATE/ (c/, bench.txt, infer/).
# usage: experiments/infer/v5/adopt.sh RUN_OUT DATE      (RUN_OUT: run_gpu.sh's OUT; DATE e.g. 20261207)
# Afterwards: rebuild, re-predict the validation sets (experiments/infer/v5/README.md says which).
set -eu
cd "$(dirname "$0")/../../.."
R=$1 D=$2
K=calibration/h200/run-$D-v5
H200="calibration/h200-nvlink.json calibration/h200-shm.json calibration/h200-socket.json"
grep -q H200 "$R/gpu.txt" || { echo "adopt.sh: $R/gpu.txt: not an H200 run" >&2; exit 2; }
[ -f "$R/cal.tgz" ] || { echo "adopt.sh: $R/cal.tgz missing: the run stopped before its v5 tables" >&2; exit 2; }
mkdir -p "$K"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$R/gpu.txt" "$R/summary.txt" "$K/"
tar -xzf "$R/cal.tgz" -C "$T"
gzip -c "$T/cal/h200-nvlink.json" > "$K/decode-attention-v5.json.gz"
cp "$T/cal/cal-v5.log" "$K/"
python3 calibration/merge_decode_attn.py --tables-from "$K/decode-attention-v5.json.gz" $H200
python3 calibration/merge_decode_attn.py --tables-from calibration/h100/run-20261206-v5/decode-attention-v5.json.gz \
  calibration/h100-sxm-nvlink.json
if [ -f "$R/pqh.tgz" ]; then
  tar -xzf "$R/pqh.tgz" -C "$T"
  if [ -f "$T/pqh/h200-nvlink.json" ]; then
    gzip -c "$T/pqh/h200-nvlink.json" > "$K/decode-attention-pqh.json.gz"
    cp "$T/pqh/pqh.log" "$K/"
    python3 calibration/merge_decode_attn.py --tables-from "$K/decode-attention-pqh.json.gz" --per-query-head $H200
  else
    echo "adopt.sh: pqh.tgz holds no table (the step ran out of time: $(tail -1 "$T/pqh/pqh.log"))"
  fi
fi
if [ -f "$R/gemm.tgz" ]; then
  tar -xzf "$R/gemm.tgz" -C "$T"
  if [ -f "$T/gemm/h200-nvlink.json" ]; then
    gzip -c "$T/gemm/h200-nvlink.json" > "$K/decode-gemms.json.gz"
    cp "$T/gemm/gemm.log" "$K/"
    for f in $H200; do python3 calibration/merge_infer.py --from "$K/decode-gemms.json.gz" --take decode-gemm "$f"; done
  else
    echo "adopt.sh: gemm.tgz holds no table (the step ran out of time: $(tail -1 "$T/gemm/gemm.log"))"
  fi
fi
if [ -f "$R/small.tsv.gz" ] && zgrep -q "bias_fwd" "$R/small.tsv.gz"; then
  cp "$R/small.tsv.gz" "$K/"
  python3 calibration/merge_small.py --from "$K/small.tsv.gz" --gpu "NVIDIA H200" --only bias_fwd $H200
fi
E=experiments/infer/v5/h200-$D
mkdir -p "$E"
cp "$R/gpu.txt" "$R/summary.txt" "$E/"
[ -f "$R/bench.txt" ] && cp "$R/bench.txt" "$E/"
[ -f "$R/check.tgz" ] && tar -xzf "$R/check.tgz" -C "$E"
[ -f "$R/infer.tgz" ] && tar -xzf "$R/infer.tgz" -C "$E"
sed -i 's/^#define INFER_DECODE_DEFAULT 3$/#define INFER_DECODE_DEFAULT 5/' runtime/ops/infer_decode.h
grep -q "^#define INFER_DECODE_DEFAULT 5$" runtime/ops/infer_decode.h
echo "adopted: $K; INFER_DECODE_DEFAULT 5"
