# gpu_lib.sh — what the GPU-machine scripts of validation/ share (sourced, not run):
# the environment, a summary log and a bounded mpirun. Needs OUT and BIN set.
START=$(date +%s)
mkdir -p "$OUT/measured"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }

# variant_args CMD: the --variant options of VARIANTS ("NAME=VALUE ...", ops_variants.h) for the
# tacorun commands that take them (execute, calibrate, train); nothing for the others.
variant_args() {
  case $1 in execute | calibrate | train) for v in ${VARIANTS:-}; do printf '%s\n' --variant "$v"; done ;; esac
}
# mpi NP LIMIT CMD ARGS...: NP processes of $BIN, one per GPU, bounded by LIMIT seconds; NCCL_* variables
# forwarded, VARIANTS as options. Through mpirun where the machine has one; otherwise through tacorun's
# id-file bootstrap (TACORUN_ID_FILE / TACORUN_NRANKS / TACORUN_RANK): ranks 1.. in the background with
# their output in $OUT/rankN.log, rank 0's on stdout; the status is the first non-zero one, rank 0 first.
mpi() {
  local np=$1 limit=$2; shift 2
  local cmd=$1; shift
  mapfile -t va < <(variant_args "$cmd")
  if command -v mpirun >/dev/null 2>&1; then
    local fwd=(-x LD_LIBRARY_PATH)
    for v in $(env | grep -o '^NCCL_[A-Z_]*'); do fwd+=(-x "$v"); done
    timeout "$limit" mpirun --allow-run-as-root -np "$np" --bind-to none "${fwd[@]}" "$BIN" "$cmd" "${va[@]}" "$@"
    return
  fi
  local idf r rc=0 rcr pids=()
  idf=$(mktemp -u /tmp/tacorun-id.XXXXXX)
  for ((r = 1; r < np; r++)); do
    TACORUN_ID_FILE=$idf TACORUN_NRANKS=$np TACORUN_RANK=$r TACORUN_LOCAL_RANK=$r \
      timeout "$limit" "$BIN" "$cmd" "${va[@]}" "$@" >"$OUT/rank$r.log" 2>&1 &
    pids+=($!)
  done
  TACORUN_ID_FILE=$idf TACORUN_NRANKS=$np TACORUN_RANK=0 TACORUN_LOCAL_RANK=0 \
    timeout "$limit" "$BIN" "$cmd" "${va[@]}" "$@"
  rc=$?
  for r in "${pids[@]}"; do
    wait "$r"; rcr=$?
    [ "$rc" -ne 0 ] || rc=$rcr
  done
  rm -f "$idf" "$idf".*
  return "$rc"
}
