#!/usr/bin/env bash
# assemble.sh — calibration/h100-sxm-nvlink.json from the H100 run's measured
# tables (run-20261205/, written by run_gpu.sh) and, for what one GPU cannot
# measure, the shipped H200 NVLink file transferred onto the H100-SXM
# (tacosim derive-calibration --gpu H100-SXM). Run from the repository root
# with a built tacosim (TACOSIM, default build/sim/tacosim).
set -eu
T=${TACOSIM:-build/sim/tacosim}
R=calibration/h100/run-20261205
OUTF=${1:-calibration/h100-sxm-nvlink.json}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for f in compute infer attn-fused attn-fused-dropout; do gunzip -c "$R/$f.json.gz" >"$W/$f.json"; done
"$T" derive-calibration --gpu H100-SXM --from calibration/h200-nvlink.json "$W/xfer.json"
cp "$W/compute.json" "$W/out.json"
python3 calibration/merge_infer.py --from "$W/infer.json" --take decode-gemm,attention-decode,attention-prefill "$W/out.json"
python3 calibration/merge_attn_backends.py --from "$W/attn-fused.json" "$W/out.json"
python3 calibration/merge_attn_backends.py --from "$W/attn-fused-dropout.json" "$W/out.json"
# the weight gradients' own timings of keys that are also BF16 products (calibration/wgrad/README.md), before
# complete.py: the H100's measured list, not the H200's transferred one
G=calibration/wgrad/h100-20261206
if [ -f "$G/gemm.json.gz" ]; then
  tar -xzf "$R/logs.tgz" -C "$W" logs/gemm.tsv
  python3 calibration/merge_wgrad.py --from "$G/gemm.json.gz" --classes "$W/logs/gemm.tsv" "$W/out.json"
fi
python3 calibration/h100/complete.py --from "$W/xfer.json" "$W/out.json" --notes "tacorun calibrate on 1 GPU (H100 80GB HBM3, 700 W), 2026-12-05 19:21 UTC: GEMMs (4 passes; gemm_wgrad 2026-12-06, calibration/wgrad/), attention_shapes, kernels, codec, MoE, clock, host; decode GEMMs and decode / keyed prefill attention by calibrate-infer --quick; attention_backends fused and fused_dropout by attn_cudnn.py (cuDNN 9.19); from the H200 NVLink file transferred to H100-SXM (roofline-v1): flash backends, the decode step's eager/graph small kernels, tp_comm_overlap_sm, framework_host. No collective tables (one GPU): collectives priced by the NCCL model. calibration/h100/README.md"
# the FP8 GEMMs (E4M3, per-tensor scales; calibration/fp8/README.md)
F=calibration/fp8/h100-20261206
if [ -f "$F/gemm_fp8.json.gz" ]; then
  python3 calibration/merge_fp8.py --from "$F/gemm_fp8.json.gz" "$W/out.json"
fi
cp "$W/out.json" "$OUTF"
echo "wrote $OUTF"
