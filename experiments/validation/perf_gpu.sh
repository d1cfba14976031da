#!/usr/bin/env bash
# perf_gpu.sh — the attention and MFU measurements on the 2 x H200 machine in
# one call, with binaries built on the CPU machine (nothing is built here):
#   flash.txt    tests/test_exec_flash_gpu --bench: the fused attention against
#                its float64 reference, then timed at the GPT h4096 TP2 shape;
#                tests/test_exec_norm_gpu --bench: the one-kernel norm backward
#                against float64, then timed against the three-kernel path
#   check.txt    `tacorun execute --check` (2 ranks), fused attention (the default): whole
#                models' gradients vs float64 through the fused attention
#   timing.txt   the GPT h4096 TP2 NVLink plan timed with each attention path,
#                alternating (unfused, v1, fa128, unfused, ...) so that drift
#                of the machine hits all alike; per-op tables in results.tgz
#   summary.txt  one line per run, and the table printed last
#   sdpa.txt     PyTorch's scaled_dot_product_attention (flash and cuDNN
#                backends) at the bench shape, timed with CUDA events: a measured
#                ceiling beside ours (measured only)
#   ncu.tgz      ncu_*.txt: Nsight Compute (--clock-control none; speed of light, occupancy,
#                warp states, schedulers, memory) of the forward and backward
#                kernels, old (fa128) and new (default), one launch each
# usage: perf_gpu.sh [flash] [check] [timed] [sdpa] [ncu]  (default: the first three)
#   clocks.csv   SM clock, power, temperature of both GPUs every 100 ms during the
#                timed runs (nvidia-smi); summary.txt has each run's start time
# RUNS: the timed runs, NAME=SETTING[,SETTING...] words (a lowercase SETTING is a tacorun
#   --variant NAME=VALUE, ops_variants.h; an uppercase one an environment variable), default: the attention
#   kernels that were the default until 2026-11-30 05:15 UTC (old: one-stage
#   forward, exp2f backward, one head's tiles launched together), the new
#   defaults (new), and the new kernels in the old launch order (newhead),
#   each repeated ROUNDS (2) times,
#   then EXTRA once (a SETTING may set PLAN, e.g. the shm plan with TRANSPORT=shm: tacorun's
#   --transport, auto by default).
# PLAN, NP (default the GPT h4096 TP2 NVLink plan on 2 ranks), ITERS (6).
set -u
cd "$(dirname "$0")/../.."
D=${DEVBIN:-.devbin/exec-perf}
BIN=$D/tacorun
OUT=${OUT:-/tmp/perf-out}
PLAN=${PLAN:-experiments/plans/gpt-h4096-tp2-none.json}
NP=${NP:-2}
ITERS=${ITERS:-6}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-"old=flash-fwd=fa128,flash-bwd=fa128,flash-order=head new= newhead=flash-order=head"}
EXTRA=${EXTRA:-}
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi

stage_flash() {
  timeout 60 "$D/test_exec_flash_gpu" --bench >"$OUT/flash.txt" 2>&1
  say "flash test rc=$? ($(elapsed) s)"
  cat "$OUT/flash.txt" | tee -a "$SUMMARY"
  if [ -x "$D/test_exec_norm_gpu" ]; then
    echo "=== test_exec_norm_gpu --bench ===" >>"$OUT/flash.txt"
    timeout 60 "$D/test_exec_norm_gpu" --bench >>"$OUT/flash.txt" 2>&1
    say "norm test rc=$? ($(elapsed) s)"
    sed -n '/=== test_exec_norm_gpu/,$p' "$OUT/flash.txt" | tee -a "$SUMMARY"
  fi
}

stage_check() {
  mpi 2 100 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
  local rc=$?
  say "check (fused attention) rc=$rc ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
  grep -E "worst|FAILED" "$OUT/check.txt" | head -6 | tee -a "$SUMMARY"
  if [ $rc -ne 0 ]; then # is it the fused attention? the same check on the unfused path
    echo "=== --variant attn=unfused ===" >>"$OUT/check.txt"
    VARIANTS=attn=unfused mpi 2 100 execute --check --timeout 20 >>"$OUT/check.txt" 2>&1
    say "check (--variant attn=unfused) rc=$? ($(elapsed) s)"
  fi
}

timed_one() { # timed_one TAG SETTINGS
  local tag=$1 envs=$2
  say "start $tag $(date -u '+%Y/%m/%d %H:%M:%S.%3N')"
  echo "=== $tag: ($envs, $ITERS iterations after 2 warm-up) ===" >>"$OUT/timing.txt"
  (
    IFS=, read -ra kvs <<<"$envs"
    VARIANTS=""
    for kv in "${kvs[@]}"; do
      if [[ ${kv%%=*} =~ ^[a-z-]+$ ]]; then VARIANTS="$VARIANTS $kv"; else export "${kv?}"; fi
    done
    export VARIANTS
    echo "plan $PLAN"
    mpi "$NP" 60 execute "$PLAN" --transport "${TRANSPORT:-auto}" --iters "$ITERS" --warmup 2 --timeout 30 --json "$OUT/measured/$tag.json" \
      --ops-csv "$OUT/measured/$tag.ops.txt"
  ) >>"$OUT/timing.txt" 2>&1
  say "$tag rc=$? ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/')"
}

stage_timed() {
  local r v smi
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
    >"$OUT/clocks.csv" 2>&1 &
  smi=$!
  for r in $(seq 1 "$ROUNDS"); do
    for v in $RUNS; do timed_one "${v%%=*}-$r" "${v#*=}"; done
  done
  for v in $EXTRA; do timed_one "${v%%=*}" "${v#*=}"; done
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  tar -czf "$OUT/results.tgz" -C "$OUT" measured
  # attention rows of the per-op tables, side by side
  for f in "$OUT"/measured/*.ops.txt; do
    printf '%-12s %s\n' "$(basename "$f" .ops.txt)" \
      "$(awk '$1 == "fwd.attn" || $1 == "bwd.attn" || $1 == "bwd.ln1" || $1 == "bwd.ln2" { printf "%s %.1f us  ", $1, $4 }' "$f")"
  done | tee -a "$SUMMARY"
  rm -rf "$OUT/measured"
}

stage_sdpa() {
  timeout 90 python3 - >"$OUT/sdpa.txt" 2>&1 <<'PY'
import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F
B, H, S, D = 2, 16, 2048, 128
torch.manual_seed(0)
print("torch", torch.__version__, torch.cuda.get_device_name())
q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
f = 2.0 * B * H * S * S * D / 2  # one causal product
def timed(fn, reps=20):
    for _ in range(3): fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(5):
        a.record()
        for _ in range(reps): fn()
        b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / reps)
    return sorted(ts)[2]
for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
    try:
        with sdpa_kernel(be):
            fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
            o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            bwd = timed(lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True))
        print(f"sdpa {name:6s} B={B} S={S} H={H} D={D}: forward {fwd:.1f} us ({2*f/fwd/1e6:.0f} TFLOP/s causal), "
              f"backward {bwd:.1f} us ({5*f/bwd/1e6:.0f} TFLOP/s, 5 GEMMs' worth), median of 5 x 20 calls")
    except Exception as ex:
        print(f"sdpa {name}: {type(ex).__name__}: {ex}")
PY
  say "sdpa rc=$? ($(elapsed) s)"
  cat "$OUT/sdpa.txt" | tee -a "$SUMMARY"
}

stage_ncu() {
  local k m sec="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
  for m in default fa128; do
    for k in flash_fwd128 flash_bwd128; do
      # shellcheck disable=SC2086
      timeout 60 ncu --clock-control none $sec -k "regex:$k" -c 1 "$D/test_exec_flash_gpu" --bench-only "$m" \
        >"$OUT/ncu_${m}_${k#flash_}.txt" 2>&1
      say "ncu $m $k rc=$? ($(elapsed) s): $(grep -E 'Duration|Compute \(SM\) Throughput' "$OUT/ncu_${m}_${k#flash_}.txt" | tr -s ' ' | tr '\n' ';')"
    done
  done
  tar -czf "$OUT/ncu.tgz" -C "$OUT" $(cd "$OUT" && ls ncu_*.txt) && rm -f "$OUT"/ncu_*.txt # at most 8 files come back
}

say "binaries of commit $(cat "$D/COMMIT" 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
[ $# -eq 0 ] && set -- flash check timed
for stage in "$@"; do
  case $stage in
  flash) stage_flash ;;
  check) stage_check ;;
  timed) stage_timed ;;
  sdpa) stage_sdpa ;;
  ncu) stage_ncu ;;
  *) echo "perf_gpu.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
say "done in $(elapsed) s"
