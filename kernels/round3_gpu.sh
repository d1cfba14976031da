#!/usr/bin/env bash
# round3_gpu.sh — the GPU runs of round 3 (codec load variants, decode-sum-encode
# without transforms, CUDA-graph timing of the collectives), on the 2 x H200
# machine. Usage: round3_gpu.sh explore|comm|final BINDIR OUTDIR
#   BINDIR holds tacorun, test_kernels_gpu and test_coll_gpu built for sm_90.
#   explore: GPU tests (quick), codec variants side by side (64 MiB, 1 GiB;
#            G = 64 .. 512), the NVLink all-reduce ceiling, collectives on NVLink
#            and shm (16, 64 MiB) with and without graphs.
#   final:   GPU tests, the codec table (64 MiB .. 1 GiB, all G, old and new
#            default side by side), and runtime/bench_comm_all.sh (3 transports).
# Every step has its own timeout and runs even if an earlier one failed; a
# summary is printed last and everything is packed into OUTDIR/round3-MODE.tgz.
set -u
MODE=${1:?explore|final}; BIN=${2:?bindir}; OUT=${3:?outdir}
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=$(mktemp -d)/logs # packed into OUTDIR at the end (few files come back from there)
mkdir -p "$LOG" "$OUT"
export NCCL_NVLS_ENABLE=0
SUM="$LOG/summary.txt"
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }
step() { # name timeout cmd...: runs, logs, notes rc and seconds
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout "$to" bash -c '"$@"' step "$@" >"$LOG/$name.txt" 2>"$LOG/$name.err" # bash -c: mpi is a function
  local rc=$?
  note "$name: rc=$rc in $(( $(date +%s) - t0 )) s"
}
mpi() { # mpirun forwarding the NCCL_* and TACO_* variables that are set
  local fwd=() v
  for v in $(env | grep -oE '^(NCCL|TACO)_[A-Z0-9_]*'); do fwd+=(-x "$v"); done
  mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$@"
}
export -f mpi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv; nvidia-smi topo -m | head -3; } >"$LOG/machine.txt" 2>&1

comm() { # name extra-args...: bench-comm, ops AR/AG/RS, NCCL BF16 vs TACO G=128
  local name=$1; shift
  step "$name" 60 mpi "$BIN/tacorun" bench-comm --op allreduce,allgather,reducescatter --codec none,taco \
    --iters 20 --warmup 3 --target-ms 40 --chunk 8M,16M,32M,64M --step-factor 4 "$@"
  grep -E "^# op:|^ +(16777216|67108864|268435456) " "$LOG/$name.txt" | sed 's/^/  /' >>"$SUM"
}

comm_explore() {
  step comm-nvlink-compressed-size 40 mpi "$BIN/tacorun" bench-comm --op allreduce,allgather,reducescatter,alltoall,sendrecv \
    --codec none --iters 20 --warmup 3 --minbytes 17M --maxbytes 34M --step-factor 2
  unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
  comm comm-nvlink --minbytes 16M --maxbytes 64M
  comm comm-nvlink-graph --minbytes 16M --maxbytes 64M --graph
  export NCCL_P2P_DISABLE=1
  comm comm-shm --minbytes 16M --maxbytes 64M
  comm comm-shm-graph --minbytes 16M --maxbytes 64M --graph
  unset NCCL_P2P_DISABLE
}

case "$MODE" in
comm) # the collectives part of explore alone
  comm_explore
  ;;
explore)
  CUDA_VISIBLE_DEVICES=0 step test-kernels-gpu-quick 90 "$BIN/test_kernels_gpu" --quick
  tail -8 "$LOG/test-kernels-gpu-quick.txt" >>"$SUM"
  CUDA_VISIBLE_DEVICES=0 step bench-codec-explore 120 "$BIN/tacorun" bench-codec --sizes 64M,1G --groups 128,256 --reps 11 \
    --variants auto:stream:transform:32,auto:stream:direct:32,auto:l2pf:direct:32,auto:deep:direct:32,shuffle:deep:direct:32,smem:deep:direct:32,shuffle:stream:direct:64,shuffle:l2pf:direct:64
  grep -vE "^#" "$LOG/bench-codec-explore.txt" | awk '{printf "  %-22s %-26s %4s %11s %8s %6s\n", $1, $2, $4, $5, $8, $9}' >>"$SUM"
  # the ceiling of the NVLink all-reduce: codec kernels at the sizes one rank
  # handles, and NCCL's own time at the compressed size (34 MiB = 64 MiB x 136/256)
  step comm-nvlink-compressed-size 40 mpi "$BIN/tacorun" bench-comm --op allreduce,allgather,reducescatter,alltoall,sendrecv \
    --codec none --iters 20 --warmup 3 --minbytes 17M --maxbytes 34M --step-factor 2
  step test-coll-gpu 60 "$BIN/test_coll_gpu"
  tail -2 "$LOG/test-coll-gpu.txt" >>"$SUM"
  unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
  comm comm-nvlink --minbytes 16M --maxbytes 64M
  comm comm-nvlink-graph --minbytes 16M --maxbytes 64M --graph
  export NCCL_P2P_DISABLE=1
  comm comm-shm --minbytes 16M --maxbytes 64M
  comm comm-shm-graph --minbytes 16M --maxbytes 64M --graph
  unset NCCL_P2P_DISABLE
  # SASS instruction counts of the hot kernels (G = 128/256, E4M3, BF16), and
  # where the time goes in two encodes (hardware counters, clocks left alone)
  if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$BIN/tacorun" 2>/dev/null | awk '
      /Function : / { name = $3; keep = name ~ /(encode_kernelILi(128|256)EtLb0|decode_sum_kernelILi(128|256)E(t|f)Lb0)/; next }
      keep && $1 ~ /^\/\*[0-9a-f]+\*\/$/ { i = $2 ~ /^@/ ? 3 : 2; op = $i; sub(/\..*/, "", op); sub(/;$/, "", op); n[name]++; c[name, op]++ }
      END { for (f in n) { printf "%s total=%d", f, n[f]; split("LDG STG SHFL LDS STS FADD FFMA FMUL FMNMX F2FP F2F HADD2 PRMT MOV BRA ISETP IMAD", w, " ");
              for (k in w) if (c[f, w[k]]) printf " %s=%d", w[k], c[f, w[k]]; printf "\n" } }' | sort >"$LOG/sass-counts.txt"
    note "sass counts: $(wc -l <"$LOG/sass-counts.txt") kernels"
    for f in _Z13encode_kernelILi128EtLb0ELb0ELi0ELi32EEvPKT0_mmmmPhP6float2P14taco_nonfinite \
             _Z13encode_kernelILi128EtLb0ELb0ELi1ELi64EEvPKT0_mmmmPhP6float2P14taco_nonfinite; do
      cuobjdump --dump-sass --function "$f" "$BIN/tacorun" >>"$LOG/sass-encode128.txt" 2>&1
    done
  fi
  if command -v ncu >/dev/null; then
    for v in auto:stream:direct:32 shuffle:l2pf:direct:64; do
      CUDA_VISIBLE_DEVICES=0 TACO_LOADS=$(echo "$v" | cut -d: -f2) TACO_PER_THREAD=${v##*:} \
        step "ncu-encode-${v//:/-}" 40 ncu --clock-control none --kernel-name-base mangled -k regex:encode_kernelILi128Et -c 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
        "$BIN/tacorun" bench-codec --sizes 256M --groups 128 --reps 1 --variants "$v"
    done
  fi
  ;;
final)
  if [ "${FINAL_KERNEL_TEST:-1}" = 1 ]; then
    CUDA_VISIBLE_DEVICES=0 step test-kernels-gpu-quick 90 "$BIN/test_kernels_gpu" --quick
    tail -8 "$LOG/test-kernels-gpu-quick.txt" >>"$SUM"
  fi
  CUDA_VISIBLE_DEVICES=0 step bench-codec-final 150 "$BIN/tacorun" bench-codec --sizes 1M,4M,16M,64M,256M,1G \
    --variants "${TACO_FINAL_VARIANTS:-auto:stream:transform:32,auto:stream:direct:auto,auto:stream:direct:32}"
  grep -vE "^#" "$LOG/bench-codec-final.txt" | grep -E " (67108864|1073741824) " |
    awk '{printf "  %-22s %-26s %4s %11s %8s %6s\n", $1, $2, $4, $5, $8, $9}' >>"$SUM"
  # the four ops figure 6 draws, four chunk sizes (whole messages won every size >= 16 MiB in round 2 and the explore run)
  BENCH_COMM_FAULT=${BENCH_COMM_FAULT:-0} BENCH_COMM_ARGS=${BENCH_COMM_ARGS:---chunk 1M,4M,16M,64M --op allreduce,allgather,reducescatter,sendrecv} \
    step bench-comm-all 300 bash "$HERE/../runtime/bench_comm_all.sh" \
    "$BIN/tacorun" "$BIN/test_coll_gpu" "$LOG/comm"
  cat "$LOG/comm/summary.txt" >>"$SUM" 2>/dev/null
  ;;
*) echo "round3_gpu.sh: mode '$MODE': want explore or final" >&2; exit 2 ;;
esac
tar -C "$(dirname "$LOG")" -czf "$OUT/round3-$MODE.tgz" logs
cp "$SUM" "$OUT/summary-$MODE.txt"
cat "$SUM"
