#!/usr/bin/env bash
# Figure 12: mixture of experts (simulated). Left: iteration-time breakdown
# (compute, token all-to-alls exposed, imbalance wait, DP exposed, bubble) of
# the MoE plans in experiments/plans/moe/, without and with TACO on the expert
# all-to-alls. Right: TACO's speedup of the iteration (and of the exposed
# all-to-all time) against the inter-node bandwidth per GPU: Qwen3-30B-A3B on
# 4 nodes x 8 H200, DP32 with EP16 spanning two nodes, global batch 64,
# seq 4096, on a rail fabric whose NICs run at each bandwidth; compute and
# codec kernels keep the measured H200 costs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3

BWS="${FIG12_BANDWIDTHS:-12.5 25 50 100 200}"
CAL="$(nvlink_calibration)"
WORK="$DATA/work/fig12"
fresh_dir "$WORK"

# one simulation: PLAN -> OUT.json (kept with REUSE=1)
sim_json() {
  if [ -n "${REUSE:-}" ] && [ -f "$2" ]; then return 0; fi
  "$TACOSIM" simulate "$1" --calibration "$CAL" --json "$2" > /dev/null 2> "$2.err" && rm -f "$2.err"
}
# breakdown fields of a result: iteration compute ep_exposed imbalance dp_exposed bubble other
fields() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); b = r["breakdown"]
parts = [b["compute_s"], b.get("ep_exposed_s", 0), b.get("imbalance_s", 0), b["dp_exposed_s"], b["bubble_s"]]
other = max(0.0, r["iteration_time_s"] - sum(parts))
print(" ".join("%.6g" % x for x in [r["iteration_time_s"]] + parts + [other]))
PY
}

# ---- left: breakdowns of the shipped MoE plans ----
: > "$WORK/list"
for p in "$ROOT"/experiments/plans/moe/*.json; do
  n=$(basename "$p" .json)
  sim_json "$p" "$WORK/$n.json" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done
wait
out="$DATA/fig12-moe-breakdown.dat"
{
  echo "# MoE iteration-time breakdown (simulated; calibration $(basename "$CAL")), seconds"
  echo "# plan iteration compute ep_exposed imbalance dp_exposed bubble other"
  for p in "$ROOT"/experiments/plans/moe/*.json; do
    n=$(basename "$p" .json)
    [ -f "$WORK/$n.json" ] && echo "$n $(fields "$WORK/$n.json")"
  done
} > "$out"

# ---- right: TACO on the all-to-alls against the inter-node bandwidth ----
for bw in $BWS; do
  cat > "$WORK/rail-$bw.json" <<JSON
{ "schema": 1, "name": "rail-$bw", "gpu": "H200-SXM", "nodes": 4, "gpus_per_node": 8,
  "intra": { "kind": "nvswitch", "gbps_per_gpu": 450, "latency_us": 2 },
  "nic": { "per_node": 8, "gbps": $bw, "latency_us": 2.5 },
  "fabric": { "kind": "rail_fat_tree", "levels": 2, "oversubscription": 1.0, "nodes_per_leaf": 4, "latency_us": 0.5 } }
JSON
  for c in none taco; do
    if [ $c = taco ]; then codec='{ "kind": "taco", "group": 128, "fp8": "e4m3" }'; else codec='{ "kind": "none" }'; fi
    cat > "$WORK/q30-$bw-$c-plan.json" <<JSON
{ "schema": 1, "model": "qwen3-30b-a3b", "cluster": "$WORK/rail-$bw.json",
  "layout": { "dp": 32, "tp": 1, "pp": 1, "zero1": true, "recompute": "selective", "ep": 16 },
  "batch": { "micro": 1, "global": 64, "seq": 4096 }, "schedule": "1f1b", "codec": { "ep": $codec } }
JSON
    sim_json "$WORK/q30-$bw-$c-plan.json" "$WORK/q30-$bw-$c.json" &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  done
done
wait
out2="$DATA/fig12-moe-bandwidth.dat"
{
  echo "# TACO on the expert all-to-alls, Qwen3-30B-A3B DP32 EP16 (2 nodes per EP group), simulated"
  echo "# nic_gbps_per_gpu iter_none_s iter_taco_s speedup ep_exposed_none_s ep_exposed_taco_s"
  for bw in $BWS; do
    a="$WORK/q30-$bw-none.json"; b="$WORK/q30-$bw-taco.json"
    [ -f "$a" ] && [ -f "$b" ] || continue
    read -r ta _ ea _ < <(fields "$a" | awk '{print $1, $2, $3, $4}')
    read -r tb _ eb _ < <(fields "$b" | awk '{print $1, $2, $3, $4}')
    awk -v bw="$bw" -v ta="$ta" -v tb="$tb" -v ea="$ea" -v eb="$eb" \
      'BEGIN { printf "%s %.6g %.6g %.4f %.6g %.6g\n", bw, ta, tb, ta / tb, ea, eb }'
  done
} > "$out2"

plot fig12-moe 1400 600 <<GP
set multiplot layout 1,2
set title "MoE iteration breakdown (simulated)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel "seconds per iteration"
set xtics rotate by -30 font ",8"
set key top left font ",9"
plot "$out" using 3:xtic(1) title "compute", '' using 4 title "EP all-to-all exposed", \
     '' using 5 title "imbalance wait", '' using 6 title "DP exposed", '' using 7 title "bubble", '' using 8 title "other"
unset style
set style data linespoints
set title "TACO on the expert all-to-alls vs inter-node bandwidth"
set xlabel "inter-node bandwidth per GPU (GB/s)"
set ylabel "speedup over uncompressed"
set logscale x
set xrange [10:250]
set xtics ("12.5" 12.5, "25" 25, "50" 50, "100" 100, "200" 200) rotate by 0 font ",10"
set key top right
plot "$out2" using 1:4 title "iteration (TACO / none)" lw 2, "$out2" using 1:(\$5/\$6) title "exposed all-to-all time" lw 2
unset multiplot
GP
