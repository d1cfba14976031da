#!/usr/bin/env bash
# sim/bench.sh [BUILD_DIR] — simulator speed benchmarks (printed, not asserted):
# wall and CPU time of one predicted iteration, pinned to one core.
#  - derived calibration (no clock section: one simulation per plan): the
#    1,024-GPU GPT-3 175B plan (target <= 2 s), its codec variants, the
#    16,384-GPU plan (target <= 15 s), the 64-GPU plan in full and reduced modes;
#  - default calibration (measured NVLink, with its clock section: 2-4
#    simulations per plan), issue 20: the DP plans that deadlocked in reduced
#    mode (target <= 15 s each) and a 1T GPT on 3,072 A100s (TP8 PP64 DP6,
#    global batch 3,072, micro-batch 1, full recompute; Narayanan et al. 2021,
#    table 1), 1F1B and interleaved 1F1B with vpp 2 (target <= 10 s). The 1T
#    model and the A100 cluster are written to a temporary zoo here (they are
#    not shipped); the A100 figures are NVIDIA's (312 TFLOP/s bf16, 80 GB,
#    2,039 GB/s, NVLink 600 GB/s both ways = 300 per direction, 8 x 200 Gb/s
#    HDR NICs per DGX A100) and the op costs stay the H200 calibration's, so
#    the predicted time is a speed workload, not an A100 prediction.
#  - GPT-3 175B on the 131,072-GPU cluster (h200-131072-rail, shipped: the
#    16,384-GPU rail cluster with 16,384 nodes), TP8 PP16 DP1024, global batch
#    65,536, reduced mode (issue 20: target <= 20 s, <= 2 GB).
# `sim/bench.sh BUILD_DIR quick` skips the full-mode row and the derived rows;
# `sim/bench.sh BUILD_DIR 131072` runs only the 131,072-GPU row.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
QUICK="${2:-}"
TACOSIM="$BUILD/sim/tacosim"
CAL="$ROOT/calibration/h200-derived.json"
NVCAL="$ROOT/calibration/h200-nvlink.json" # what simulate picks for these NVSwitch clusters by default
[ -x "$TACOSIM" ] || { echo "bench.sh: $TACOSIM not built" >&2; exit 1; }
PIN=""
command -v taskset >/dev/null && PIN="taskset -c 0"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# run PLAN_PATH MODE [CALIBRATION]: one line of figures
run() {
  local plan="$1" mode="$2" cal="${3:-}" out="$TMP/result.json" t0 t1 rc=0
  local calarg=()
  [ -n "$cal" ] && calarg=(--calibration "$cal")
  rm -f "$out"
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S %M" -o "$TMP/time" $PIN "$TACOSIM" simulate "$plan" "${calarg[@]}" --mode "$mode" \
    --json "$out" >/dev/null 2>"$TMP/err" || rc=$?
  t1=$(date +%s.%N)
  python3 - "$(basename "$plan" .json)" "$mode" "$out" "$TMP/time" "$t0" "$t1" "$rc" <<'PY'
import json, sys
plan, mode, res, tfile, t0, t1, rc = sys.argv[1:]
u, s, kb = open(tfile).read().split()[-3:]
wall, cpu, gb = float(t1) - float(t0), float(u) + float(s), float(kb) / 2**20
if rc != "0":
    print(f"  {plan:<34} {mode:<8} {'exit ' + rc:>10} {wall:8.2f} {cpu:8.2f} {gb:7.2f}")
    sys.exit()
r = json.load(open(res))
print(f"  {plan:<34} {mode:<8} {r['iteration_time_s']:10.4f} {wall:8.2f} {cpu:8.2f} {gb:7.2f} "
      f"{r.get('clock_passes', 1) or 1:6d}")
PY
}

header() { printf '# %s\n# %-34s %-8s %10s %8s %8s %7s %6s\n' "$1" plan mode iter_s wall_s cpu_s max_GB passes; }

sed 's/"name": "gpt3-175b-16384"/"name": "gpt3-175b-131072"/; s/"h200-16384-rail"/"h200-131072-rail"/;
     s/"dp": 128/"dp": 1024/; s/"global": 8192/"global": 65536/' \
  "$ROOT/experiments/plans/gpt3-175b-16384.json" >"$TMP/gpt3-175b-131072.json"
if [ "$QUICK" = 131072 ]; then
  header "default calibration ($NVCAL): the 131,072-GPU cluster"
  run "$TMP/gpt3-175b-131072.json" reduced "$NVCAL"
  exit 0
fi

if [ "$QUICK" != quick ]; then
  header "derived calibration ($CAL)"
  for p in gpt3-175b-1024 gpt3-175b-1024-taco gpt3-175b-1024-caat gpt3-175b-1024-taco-caat gpt3-175b-16384 gpt3-13b-64; do
    run "$ROOT/experiments/plans/$p.json" reduced "$CAL"
  done
  run "$ROOT/experiments/plans/gpt3-13b-64.json" full "$CAL"
fi

# issue 20's plans
sed 's/"zero1": true/"zero1": false/; s/"name": "gpt3-175b-16384"/"name": "gpt3-175b-16384-nozero1"/' \
  "$ROOT/experiments/plans/gpt3-175b-16384.json" >"$TMP/gpt3-175b-16384-nozero1.json"
for dp in 32 64; do
  cat >"$TMP/llama3-8b-tp8-dp$dp-nozero1.json" <<EOF
{ "schema": 1, "name": "llama3-8b-tp8-dp$dp-nozero1", "model": "llama3-8b", "cluster": "h200-1024-rail",
  "layout": { "dp": $dp, "tp": 8, "pp": 1, "vpp": 1, "sequence_parallel": false,
              "order": "tp-dp-pp", "zero1": false, "recompute": "none" },
  "batch": { "micro": 1, "global": 512, "seq": 2048 }, "schedule": "1f1b", "layers_override": null,
  "codec": { "tp_fwd": { "kind": "none" }, "tp_bwd": { "kind": "none" },
             "pp": { "kind": "none" }, "dp": { "kind": "none" } } }
EOF
done
mkdir -p "$TMP/models" "$TMP/topologies"
cp "$ROOT"/models/*.json "$TMP/models/"
cp "$ROOT"/topologies/*.json "$TMP/topologies/"
cp -r "$ROOT"/topologies/gpus "$TMP/topologies/" # the GPU catalogue the clusters name
cat >"$TMP/models/gpt-1t.json" <<'EOF'
{ "schema": 1, "name": "gpt-1t", "family": "gpt", "layers": 128, "hidden": 25600, "heads": 160, "kv_heads": 160,
  "ffn_hidden": 102400, "activation": "gelu", "norm": "layernorm", "vocab": 51200, "tied_embeddings": true,
  "max_seq": 2048, "position": "learned", "qkv_bias": true, "linear_bias": true, "norm_eps": 1e-05,
  "source": "1T GPT of Narayanan et al. 2021 (Megatron-LM, SC21), table 1" }
EOF
cat >"$TMP/topologies/a100-3072-rail.json" <<'EOF'
{ "schema": 1, "name": "a100-3072-rail",
  "notes": "benchmark only: h200-1024-rail's fabric with 384 DGX A100 nodes",
  "gpu": { "name": "A100", "bf16_tflops": 312, "hbm_gib": 80, "hbm_gbps": 2039 },
  "nodes": 384, "gpus_per_node": 8,
  "intra": { "kind": "nvswitch", "gbps_per_gpu": 300, "latency_us": 2 },
  "nic": { "per_node": 8, "gbps": 25, "latency_us": 2.5 },
  "fabric": { "kind": "rail_fat_tree", "levels": 2, "oversubscription": 1.0, "nodes_per_leaf": 32, "latency_us": 0.5 } }
EOF
for s in 1f1b interleaved-1f1b; do
  v=1
  [ "$s" = interleaved-1f1b ] && v=2
  cat >"$TMP/gpt-1t-3072-$s.json" <<EOF
{ "schema": 1, "name": "gpt-1t-3072-$s", "model": "gpt-1t", "cluster": "a100-3072-rail",
  "layout": { "dp": 6, "tp": 8, "pp": 64, "vpp": $v, "sequence_parallel": false,
              "order": "tp-dp-pp", "zero1": false, "recompute": "full" },
  "batch": { "micro": 1, "global": 3072, "seq": 2048 }, "schedule": "$s", "layers_override": null,
  "codec": { "tp_fwd": { "kind": "none" }, "tp_bwd": { "kind": "none" },
             "pp": { "kind": "none" }, "dp": { "kind": "none" } } }
EOF
done
export TACOSIM_MODELS_DIR="$TMP/models" TACOSIM_TOPOLOGIES_DIR="$TMP/topologies"
header "default calibration ($NVCAL: measured, clock model on); issue 20"
run "$TMP/gpt3-175b-16384-nozero1.json" reduced "$NVCAL"
run "$TMP/llama3-8b-tp8-dp32-nozero1.json" reduced "$NVCAL"
run "$TMP/llama3-8b-tp8-dp64-nozero1.json" reduced "$NVCAL"
if [ "$QUICK" != quick ]; then run "$TMP/llama3-8b-tp8-dp64-nozero1.json" full "$NVCAL"; fi
run "$TMP/gpt-1t-3072-1f1b.json" reduced "$NVCAL"
run "$TMP/gpt-1t-3072-interleaved-1f1b.json" reduced "$NVCAL"
run "$TMP/gpt3-175b-131072.json" reduced "$NVCAL"
