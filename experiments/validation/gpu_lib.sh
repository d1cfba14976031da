# gpu_lib.sh — what the GPU-machine scripts of validation/ share (sourced, not run):
# the environment, a summary log and a bounded mpirun. Needs OUT and BIN set.
START=$(date +%s)
mkdir -p "$OUT/measured"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }

mpi() { # mpi NP LIMIT ARGS...: mpirun forwarding the NCCL_*/EXEC_*/TACO_* variables that are set; bounded
  local np=$1 limit=$2; shift 2
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^\(NCCL\|EXEC\|TACO\)_[A-Z_]*'); do fwd+=(-x "$v"); done
  timeout "$limit" mpirun --allow-run-as-root -np "$np" --bind-to none "${fwd[@]}" "$BIN" "$@"
}
