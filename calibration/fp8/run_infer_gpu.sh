#!/usr/bin/env bash
# run_infer_gpu.sh — the FP8 GEMMs of inference plans with "quantization": "fp8" (sim/INFERENCE.md, "FP8 weights")
# on the GPU of this machine, for calibration/merge_fp8.py --add (calibration/fp8/README.md, "Inference keys"):
# the FP8 GEMM against its C reference first (tacorun calibrate --check --only gemm_fp8), then every forward FP8
# key of the models in MODELS (default: the zoo, models/, plus experiments/published/dense-infer/models/) at
# TP 1/2/4/8 and m = 1..64, 128..65,536 that CAL's "gemm_fp8" list lacks (tacorun calibrate-infer
# --fp8-gemms-only, GEMM_PASSES alternating passes, default 6). About 1 minute on one H100.
# From the repository root, building nothing (BIN, LIB as run_gpu.sh). Outputs in OUT: machine.txt, check.log,
# fp8.log, fp8.tsv.gz (every pass of every key), cal/<CAL's name> (CAL with the keys added) and gemm_fp8.json.gz
# (only the keys added, with the machine: what calibration/fp8/h100-20261206-infer/ keeps and
# `merge_fp8.py --add --from OUT/gemm_fp8.json.gz CAL` merges).
set -u
BIN=${BIN:-.devbin/h100/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/fp8-infer-out}
CAL=${CAL:-calibration/h100-sxm-nvlink.json}
mkdir -p "$OUT/cal"
export LD_LIBRARY_PATH=$PWD/$LIB:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models
if [ -z "${MODELS:-}" ]; then
  MODELS=$(mktemp -d)
  cp models/*.json "$MODELS"/
  cp experiments/published/dense-infer/models/*.json "$MODELS"/ 2>/dev/null
fi
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv; date -u; } >"$OUT/machine.txt" 2>&1
timeout 60 "$BIN" calibrate --check --only gemm_fp8 >"$OUT/check.log" 2>&1
check_rc=$?
echo "check rc=$check_rc: $(tail -1 "$OUT/check.log")"
timeout 400 "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/cal" --fp8-gemms-only --models "$MODELS" \
  --gemm-passes "${GEMM_PASSES:-6}" --gemm-fp8-tsv "$OUT/fp8.tsv" >"$OUT/fp8.log" 2>&1
rc=$?
echo "calibrate-infer --fp8-gemms-only rc=$rc"
grep -E "FP8 GEMM keys|gemm_fp8: ([0-9]+ keys|achieved|keys of|passes)|wrote" "$OUT/fp8.log"
[ -f "$OUT/fp8.tsv" ] && gzip -9f "$OUT/fp8.tsv"
out="$OUT/cal/$(basename "$CAL")"
[ $rc -eq 0 ] && [ -f "$out" ] && python3 - "$CAL" "$out" "$OUT/gemm_fp8.json.gz" "$(sed -n 2p "$OUT/machine.txt")" <<'P'
import gzip, json, sys
cal, out, dst, machine = sys.argv[1:]
have = {(p["m"], p["n"], p["k"]) for p in json.load(open(cal)).get("gemm_fp8", [])}
o = json.load(open(out))
new = [p for p in o["gemm_fp8"] if (p["m"], p["n"], p["k"]) not in have]
keep = {k: o[k] for k in ("schema", "gpu", "driver", "cuda") if k in o}
keep.update(measured_at=o.get("measured_at", "?"), gemm_fp8=new,
            notes="tacorun calibrate-infer --fp8-gemms-only: the forward FP8 GEMMs of inference plans with "
                  "quantization fp8 that %s lacked; machine: %s" % (cal, machine))
json.dump(keep, gzip.open(dst, "wt"), indent=0)
print("%s: %d keys added to %s" % (dst, len(new), cal))
P
[ $check_rc -eq 0 ] || { echo "CHECK FAILED: do not merge"; exit 1; }
exit $rc
