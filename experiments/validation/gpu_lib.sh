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
mpi() { # mpi NP LIMIT CMD ARGS...: mpirun forwarding the NCCL_* variables that are set, VARIANTS as options; bounded
  local np=$1 limit=$2; shift 2
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^NCCL_[A-Z_]*'); do fwd+=(-x "$v"); done
  local cmd=$1; shift
  mapfile -t va < <(variant_args "$cmd")
  timeout "$limit" mpirun --allow-run-as-root -np "$np" --bind-to none "${fwd[@]}" "$BIN" "$cmd" "${va[@]}" "$@"
}
