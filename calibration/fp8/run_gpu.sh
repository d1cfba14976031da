#!/usr/bin/env bash
# run_gpu.sh — the FP8 GEMM table ("gemm_fp8") on the GPU of this machine, for calibration/merge_fp8.py
# (calibration/fp8/README.md): first the FP8 GEMM against its C reference (tacorun calibrate --check
# --only gemm_fp8; a failure is flagged in summary.txt and the file's notes, and the timing runs on: the
# kernels' times hold, but do not merge such a run before the failure is understood), then every FP8 key
# of the zoo models (models/*.json) timed (tacorun calibrate --only gemm_fp8, GEMM_PASSES alternating
# passes, default 4). Expected about 1.5 minutes on one H100 or H200 (an estimate: calibration/fp8/README.md);
# the check is stopped at 40 s and the timing at CAL_S seconds (default 180), so the run ends within 4 minutes.
# From the repository root, building nothing (BIN, LIB as calibration/wgrad/run_gpu.sh). Outputs in OUT:
# machine.txt, check.log, gemm_fp8.json, gemm_fp8.log, gemm_fp8.tsv.gz (every pass of every key, with its
# roles and accumulation), summary.txt (rc and seconds of each step, the passes, achieved TFLOP/s range).
set -u
BIN=${BIN:-.devbin/h100/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/fp8-out}
CAL_S=${CAL_S:-180}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$LIB:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models
S=$(date +%s)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv; date -u; } >"$OUT/machine.txt" 2>&1
head -2 "$OUT/machine.txt" | tee "$OUT/summary.txt"

timeout 40 "$BIN" calibrate --check --only gemm_fp8 >"$OUT/check.log" 2>&1
rc=$?
say "check rc=$rc ($(($(date +%s) - S)) s): $(tail -1 "$OUT/check.log")"
grep -E '^  FP8 GEMM|FP8 GEMM check' "$OUT/check.log" | tee -a "$OUT/summary.txt"
check_rc=$rc
[ $rc -eq 0 ] || say "CHECK FAILED: the FP8 GEMM disagrees with its C reference (check.log); timing anyway, do not merge"

models=$(ls models/*.json | paste -sd,)
timeout $((CAL_S + 10)) "$BIN" calibrate --only gemm_fp8 --time-limit "$CAL_S" --models "$models" \
  --gemm-passes "${GEMM_PASSES:-4}" --gemm-fp8-tsv "$OUT/gemm_fp8.tsv" --out "$OUT/gemm_fp8.json" >"$OUT/gemm_fp8.log" 2>&1
rc=$?
say "calibrate gemm_fp8 rc=$rc ($(($(date +%s) - S)) s): $(grep -m1 wrote "$OUT/gemm_fp8.log")"
grep -E 'FP8 GEMM keys|gemm_fp8: (pass|passes|[0-9]+ keys|achieved|keys of)|warning' "$OUT/gemm_fp8.log" | tee -a "$OUT/summary.txt"
if [ -s "$OUT/gemm_fp8.json" ]; then
  python3 - "$OUT/gemm_fp8.json" <<'P' | tee -a "$OUT/summary.txt"
import json, statistics, sys
d = json.load(open(sys.argv[1]))
pts = d.get("gemm_fp8", [])
def line(what, ps):
    r = sorted(2.0 * p["m"] * p["n"] * p["k"] / p["us"] * 1e-6 for p in ps)
    return f"{what}: {len(r)} keys, {r[0]:.0f} .. {r[-1]:.0f} TFLOP/s, median {statistics.median(r):.0f}" if r else f"{what}: none"
print(f"{d.get('gpu')} ({d.get('measured_at')}): gemm_fp8 achieved 2mnk/time")
print(line("  all keys", pts))
print(line("  keys of >= 1 ms", [p for p in pts if p["us"] >= 1000]))
print(line("  keys of < 100 us", [p for p in pts if p["us"] < 100]))
P
fi
[ -f "$OUT/gemm_fp8.tsv" ] && gzip -9f "$OUT/gemm_fp8.tsv"
[ $check_rc -eq 0 ] || exit 1
exit $rc
