#!/usr/bin/env bash
# round3_gpu.sh — the GPU runs of round 3 (codec load variants, decode-sum-encode
# without transforms, CUDA-graph timing of the collectives), on the 2 x H200
# machine. Usage: round3_gpu.sh explore|final BINDIR OUTDIR
#   BINDIR holds tacorun, test_kernels_gpu and test_coll_gpu built for sm_90.
#   explore: GPU tests (quick), codec variants side by side (64 MiB, 1 GiB;
#            G = 128, 256), collectives on NVLink and shm with and without graphs.
#   final:   GPU tests, the codec table (64 MiB .. 1 GiB, all G, old and new
#            default side by side), and runtime/bench_comm_all.sh (3 transports).
# Every step has its own timeout and runs even if an earlier one failed; a
# summary is printed last and everything is packed into OUTDIR/round3.tgz.
set -u
MODE=${1:?explore|final}; BIN=${2:?bindir}; OUT=${3:?outdir}
HERE=$(cd "$(dirname "$0")" && pwd)
LOG="$OUT/logs"
mkdir -p "$LOG"
export NCCL_NVLS_ENABLE=0
SUM="$LOG/summary.txt"
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }
step() { # name timeout cmd...: runs, logs, notes rc and seconds
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout "$to" "$@" >"$LOG/$name.txt" 2>"$LOG/$name.err"
  local rc=$?
  note "$name: rc=$rc in $(( $(date +%s) - t0 )) s"
}
mpi() { # mpirun forwarding the NCCL_* and TACO_* variables that are set
  local fwd=() v
  for v in $(env | grep -oE '^(NCCL|TACO)_[A-Z0-9_]*'); do fwd+=(-x "$v"); done
  mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$@"
}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv; nvidia-smi topo -m | head -3; } >"$LOG/machine.txt" 2>&1

comm() { # name extra-args...: bench-comm, ops AR/AG/RS, NCCL BF16 vs TACO G=128
  local name=$1; shift
  step "$name" 60 mpi "$BIN/tacorun" bench-comm --op allreduce,allgather,reducescatter --codec none,taco \
    --iters 20 --warmup 3 --target-ms 60 --chunk 4M,8M,16M,32M,64M --step-factor 4 "$@"
  grep -E "^# op:|^ +(16777216|67108864|268435456) " "$LOG/$name.txt" | sed 's/^/  /' >>"$SUM"
}

case "$MODE" in
explore)
  CUDA_VISIBLE_DEVICES=0 step test-kernels-gpu-quick 90 "$BIN/test_kernels_gpu" --quick
  tail -8 "$LOG/test-kernels-gpu-quick.txt" >>"$SUM"
  CUDA_VISIBLE_DEVICES=0 step bench-codec-explore 90 "$BIN/tacorun" bench-codec --sizes 64M,1G --groups 128,256 \
    --variants auto:stream:transform,auto:l2pf:direct,auto:deep:direct,shuffle:l2pf:direct,shuffle:deep:direct,smem:deep:direct,smem:stream:direct
  grep -vE "^#" "$LOG/bench-codec-explore.txt" | awk '{printf "  %-22s %-24s %4s %11s %8s %6s\n", $1, $2, $4, $5, $8, $9}' >>"$SUM"
  # the ceiling of the NVLink all-reduce: codec kernels at the sizes one rank
  # handles, and NCCL's own time at the compressed size (34 MiB = 64 MiB x 136/256)
  CUDA_VISIBLE_DEVICES=0 step bench-codec-ceiling 40 "$BIN/tacorun" bench-codec --sizes 32M,64M --groups 128
  step comm-nvlink-compressed-size 40 mpi "$BIN/tacorun" bench-comm --op allreduce,allgather,reducescatter,alltoall,sendrecv \
    --codec none --iters 20 --warmup 3 --minbytes 17M --maxbytes 34M --step-factor 2
  step test-coll-gpu 60 "$BIN/test_coll_gpu"
  tail -2 "$LOG/test-coll-gpu.txt" >>"$SUM"
  unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
  comm comm-nvlink --minbytes 16M --maxbytes 256M
  comm comm-nvlink-graph --minbytes 16M --maxbytes 256M --graph
  export NCCL_P2P_DISABLE=1
  comm comm-shm --minbytes 16M --maxbytes 256M
  comm comm-shm-graph --minbytes 16M --maxbytes 256M --graph
  unset NCCL_P2P_DISABLE
  ;;
final)
  CUDA_VISIBLE_DEVICES=0 step test-kernels-gpu-quick 90 "$BIN/test_kernels_gpu" --quick
  tail -8 "$LOG/test-kernels-gpu-quick.txt" >>"$SUM"
  CUDA_VISIBLE_DEVICES=0 step bench-codec-final 150 "$BIN/tacorun" bench-codec --sizes 16M,64M,256M,1G \
    --variants "${TACO_FINAL_VARIANTS:-auto:stream:transform,auto:l2pf:direct}"
  grep -vE "^#" "$LOG/bench-codec-final.txt" | awk '{printf "  %-22s %-24s %4s %11s %8s %6s\n", $1, $2, $4, $5, $8, $9}' >>"$SUM"
  step bench-comm-all 300 bash "$HERE/../runtime/bench_comm_all.sh" "$BIN/tacorun" "$BIN/test_coll_gpu" "$LOG/comm"
  cat "$LOG/comm/summary.txt" >>"$SUM" 2>/dev/null
  ;;
*) echo "round3_gpu.sh: mode '$MODE': want explore or final" >&2; exit 2 ;;
esac
tar -C "$OUT" -czf "$OUT/round3.tgz" logs
cat "$SUM"
