# gpu_env.sh — the common start of the GPU scripts (the run_gpu*.sh files), sourced from the repository root after
# the script sets its default OUT (OUT=${OUT:-/tmp/name}):
#  - BIN, a tacorun built on the CPU machine [.devbin/v5/tacorun], and LIB, the folder of the libraries it needs that
#    the GPU machine lacks [.devbin/h100/lib], unless given;
#  - the environment tacorun reads: LD_LIBRARY_PATH (LIB first), TACOSIM_MODELS_DIR, TACOSIM_TOPOLOGIES_DIR;
#  - OUT created; OUT/gpu.txt: nvidia-smi's name, driver, max SM clock, power limit, memory (total, used), then
#    the date (the first field, the name, is what the scripts' "case" on the GPU reads);
#  - S, the start time; el, the seconds since; say, a line to stdout and OUT/summary.txt;
#  - infer_plans DIR PLANS [EXECUTE OPTIONS...], the 26 inference validation plans of the folder PLANS run by
#    `tacorun execute --decode-graph` in four groups, each under its time limit: DIR/measured/*.json and
#    DIR/execute-GROUP.txt, a line each in the summary.
BIN=${BIN:-.devbin/v5/tacorun}
LIB=${LIB:-.devbin/h100/lib}
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s)
el() { echo $(($(date +%s) - S)); }
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,memory.total,memory.used --format=csv,noheader \
  > "$OUT/gpu.txt" 2>&1
date -u >> "$OUT/gpu.txt"
infer_plans() {
  local dir=$1 plans=$2 tag limit pattern
  shift 2
  mkdir -p "$dir/measured"
  while read -r tag limit pattern; do
    timeout "$limit" "$BIN" execute $plans/$pattern "$@" --decode-graph --json-dir "$dir/measured" \
      > "$dir/execute-$tag.txt" 2>&1 < /dev/null
    say "infer $tag rc=$? ($(el) s)"
  done <<'GROUPS'
qwen7b 45 qwen2.5-7b-*.json
qwen14b 60 qwen2.5-14b-*.json
llama-bf16 70 llama3-8b-*-bf16.json
llama-fp8 70 llama3-8b-*-fp8.json
GROUPS
}
