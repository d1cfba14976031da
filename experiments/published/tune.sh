#!/usr/bin/env bash
# tune.sh — fills in the settings a published run did not publish by the
# rule "the publisher tuned its benchmark": each unpublished setting takes the
# value tacosim itself predicts fastest among those that fit in memory.
#
#   experiments/published/tune.sh [options]
#
# The unpublished settings are the micro-batch size and, where PP > 1, the
# virtual pipeline stages (nothing else). For each plan of the set, with every
# other field as shipped (TP, PP, DP, global batch, recomputation, flags):
#   micro-batch m: every divisor of global batch / dp;
#   virtual stages v: 1, and where PP >= the set's interleave_min_pp (set.conf;
#     2 if unset) every divisor v > 1 of layers / pp (Megatron-LM's rule: the
#     layers per virtual stage divide the layers per stage; core_v0.8.0 allows
#     PP 2 since --overlap-p2p-communication is on by default, the 2021 code
#     wants PP > 2), run as "interleaved-1f1b"; where the plan accounts the
#     embedding and / or the loss as layers (layout.account_for_..._in_pipeline_
#     split), of (layers + the accounted units) / pp instead.
# Each candidate goes through `tacosim plan` (the loader's rules, among them
# "micro-batches a multiple of pp" for interleaving, which Megatron-LM's
# interleaved schedule also requires, and the memory check against the GPU's
# HBM, 80 GiB on the H100); those it accepts are simulated with
# `tacosim simulate CANDIDATE --json` (run.sh's options: reduced mode, the
# default or --calibration file). The chosen candidate is the one with the
# shortest predicted iteration; ties go to the smaller micro-batch, then the
# fewer virtual stages. No published throughput is read: published.csv is not
# opened. Micro-batch sizes over 1,024 are not generated (no row here has one).
#
# Writes SET/tune.txt (with --only: WORK/SET.tune.txt): every candidate (m, v,
# fits/refused and why, predicted iteration s) and the choice per plan. With --write, rewrites each plan's
# "micro", "vpp" and "schedule" to the choice and its description's
# "micro-batch M, vpp V (tune.sh)" to say so; without it, says which plans
# differ from the choice and exits 1 if any does.
#
# Options (defaults in brackets):
#   --tacosim PATH       the simulator [$TACOSIM, else build/sim/tacosim, else the newest build-*/]
#   --calibration FILE   passed to every simulation [none: tacosim's own choice for the cluster]
#   --sets "A B"         the sets tuned [mcore-h100 llama3: the sets whose micro-batch and vpp are not published]
#   --only "P Q"         only these plans (names without .json) [all of the set]
#   --jobs N             simulations at once [1]
#   --work DIR           candidate plans and results [experiments/data/work/tune]
#   --write              rewrite the plans to the choice [off: check only]
#   -h, --help           this text
set -euo pipefail
trap 'echo "tune.sh: stopped by a failing command at line $LINENO" >&2' ERR
PUB="$(cd "$(dirname "$0")" && pwd)"
source "$PUB/../lib.sh" # ROOT DATA TACOSIM

cal="" sets="mcore-h100 llama3" only="" jobs=1 work="$DATA/work/tune" write=0
while [ $# -gt 0 ]; do
  case $1 in
    --tacosim) TACOSIM=$2; shift 2 ;;
    --calibration) cal=$2; shift 2 ;;
    --sets) sets=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --write) write=1; shift ;;
    -h | --help) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune.sh: unknown option \"$1\" (--help lists them)" >&2; exit 2 ;;
  esac
done
check_run_args tune.sh
mkdir -p "$work"
work="$(cd "$work" && pwd)"

divisors() { awk -v n="$1" 'BEGIN { for (i = 1; i <= n && i <= 1024; i++) if (n % i == 0) print i }'; }

# candidate PLAN M V OUT: the plan with micro-batch M and V virtual stages.
candidate() {
  local sched=1f1b
  [ "$3" -gt 1 ] && sched=interleaved-1f1b
  jq --argjson m "$2" --argjson v "$3" --arg s "$sched" --arg n "$(basename "$4" .json)" \
    '.name = $n | .batch.micro = $m | .layout.vpp = $v | .schedule = $s' "$1" > "$4"
}

# evaluate P M V: check and simulate one candidate; writes $work/P.mM.vV.{json,plan,res,out,err}
# and one line "M V status time_s" to $work/P.mM.vV.line (status: ok, memory GiB, refused).
evaluate() {
  local p=$1 m=$2 v=$3 base c rc=0 t gib why
  base="$work/$p.m$m.v$v"
  c="$base.json"
  if ! (cd "$ROOT" && "$TACOSIM" plan "$c") > "$base.plan" 2>&1; then
    gib=$(sed -n 's/.*needs \([0-9.]*\) GiB per GPU.*/\1/p' "$base.plan" | head -n 1)
    if [ -n "$gib" ]; then echo "$m $v memory ${gib}_GiB -" > "$base.line"
    else
      why=$(grep -m1 '^tacosim:' "$base.plan" | sed 's/^tacosim: [^:]*: //; s/ /_/g')
      echo "$m $v refused ${why:-?} -" > "$base.line"
    fi
    return 0
  fi
  (cd "$ROOT" && "$TACOSIM" simulate "$c" --json "$base.res" ${cal:+--calibration "$cal"} > "$base.out" 2> "$base.err") || rc=$?
  if [ "$rc" != 0 ] || ! t=$(jq -e '.iteration_time_s' "$base.res" 2> /dev/null); then
    echo "tune.sh: FAILED: tacosim simulate $c: exit $rc; its stderr ($base.err):" >&2
    tail -n 5 "$base.err" >&2 || true
    echo "$m $v failed exit_$rc -" > "$base.line"
    return 0
  fi
  gib=$(sed -n 's/^memory\/GPU *\([0-9.]*\) GiB.*/\1/p' "$base.out")
  echo "$m $v ok ${gib}_GiB $t" > "$base.line"
}

plans=""
for s in $sets; do
  [ -d "$PUB/$s/plans" ] || { echo "tune.sh: $PUB/$s/plans: no such set" >&2; exit 2; }
  for f in "$PUB/$s/plans"/*.json; do
    p=$(basename "$f" .json)
    if [ -n "$only" ] && [[ ! " $only " =~ " $p " ]]; then continue; fi
    plans="$plans $s/$p"
  done
done
[ -n "$plans" ] || { echo "tune.sh: nothing to tune (sets: $sets; only: ${only:-all})" >&2; exit 2; }

# Every candidate of every plan, then the simulations, $jobs at a time.
queue="$work/queue"
: > "$queue"
for sp in $plans; do
  s=${sp%%/*} p=${sp#*/}
  f="$PUB/$s/plans/$p.json"
  dp=$(jq -er '.layout.dp' "$f") pp=$(jq -er '.layout.pp // 1' "$f") global=$(jq -er '.batch.global' "$f")
  model=$(jq -er '.model' "$f")
  layers=$(jq -er '.layers_override // empty' "$f" 2> /dev/null || true)
  [ -n "$layers" ] || layers=$(cd "$ROOT" && jq -er '.layers' "$model")
  [ $((global % dp)) = 0 ] || { echo "tune.sh: $f: batch.global $global is not divisible by dp $dp" >&2; exit 2; }
  rm -f "$work/$p".m*.line
  interleave_min_pp=2
  # shellcheck source=/dev/null
  [ ! -f "$PUB/$s/set.conf" ] || source "$PUB/$s/set.conf"
  # layer slots: the layers plus the embedding and the loss where the plan accounts them as layers
  # (layout.account_for_embedding/loss_in_pipeline_split; Megatron-Core's get_num_layers_to_build)
  slots=$((layers + $(jq -r '[.layout.account_for_embedding_in_pipeline_split, .layout.account_for_loss_in_pipeline_split] | map(select(. == true)) | length' "$f")))
  vs=1
  if [ "$pp" -gt 1 ] && [ "$pp" -ge "$interleave_min_pp" ] && [ $((slots % pp)) = 0 ]; then
    vs=$(divisors $((slots / pp)) | paste -sd' ' -)
  fi
  for m in $(divisors $((global / dp))); do
    for v in $vs; do
      candidate "$f" "$m" "$v" "$work/$p.m$m.v$v.json"
      echo "$p $m $v" >> "$queue"
    done
  done
done
echo "tune.sh: $(wc -l < "$queue") candidates of$(echo "$plans" | wc -w | sed 's/^/ /') plans, $jobs at a time, with $TACOSIM${cal:+ --calibration $cal}" >&2
while read -r p m v; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  evaluate "$p" "$m" "$v" &
done < "$queue"
wait

# The table and the choice per plan.
out_status=0
for s in $sets; do
  interleave_min_pp=2
  # shellcheck source=/dev/null
  [ ! -f "$PUB/$s/set.conf" ] || source "$PUB/$s/set.conf"
  table="$PUB/$s/tune.txt"
  [ -z "$only" ] || table="$work/$s.tune.txt" # a part of a set does not replace the set's table
  {
    echo "# Unpublished settings chosen by experiments/published/tune.sh: for each plan, every micro-batch m"
    echo "# dividing global/dp and (PP >= $interleave_min_pp) every vpp v dividing layers/pp, other fields as shipped; refused by"
    echo "# tacosim plan (memory: GiB per GPU needed, of the GPU's HBM) or simulated (predicted iteration, s)."
    echo "# The choice (*) is the fastest prediction; ties: smaller m, then smaller v. No published figure is read."
    echo "# $(date -u +%Y-%m-%d) $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2> /dev/null || echo '+changes'); simulator ${TACOSIM#"$ROOT"/}${cal:+; calibration ${cal#"$ROOT"/}}"
    printf "# %-12s %5s %4s  %-10s %-30s %10s\n" plan micro vpp status memory/reason iter_s
  } > "$table"
  for sp in $plans; do
    [ "${sp%%/*}" = "$s" ] || continue
    p=${sp#*/}
    f="$PUB/$s/plans/$p.json"
    best=$(cat "$work/$p".m*.line | awk '$3 == "ok"' | sort -k5,5g -k1,1n -k2,2n | head -n 1)
    if [ -z "$best" ]; then
      echo "tune.sh: $p: no candidate fits or simulates; the first's reason: $(sort -k1,1n -k2,2n "$work/$p".m*.line | head -n 1 | cut -d' ' -f3- | tr _ ' ')" >&2
      exit 1
    fi
    read -r bm bv _ _ bt <<< "$best"
    bt=$(printf "%.4f" "$bt")
    cat "$work/$p".m*.line | sort -k1,1n -k2,2n | while read -r m v st info t; do
      mark=" "
      [ "$m" = "$bm" ] && [ "$v" = "$bv" ] && mark="*"
      [ "$t" = - ] || t=$(printf "%.4f" "$t")
      printf "  %-12s %5s %4s%s %-10s %-30s %10s\n" "$p" "$m" "$v" "$mark" "$st" "$(echo "$info" | tr _ ' ')" "$t" >> "$table"
    done
    echo "# $p: chosen micro-batch $bm, vpp $bv ($bt s)" >> "$table"
    cm=$(jq -r '.batch.micro' "$f") cv=$(jq -r '.layout.vpp // 1' "$f")
    if [ "$write" = 1 ]; then
      sched=1f1b
      [ "$bv" -gt 1 ] && sched=interleaved-1f1b
      sed -E -i "s/(\"micro\": *)[0-9]+/\1$bm/; s/(\"vpp\": *)[0-9]+/\1$bv/; s/(\"schedule\": *)\"[a-z0-9-]+\"/\1\"$sched\"/;
        s/micro-batch [0-9]+, vpp [0-9]+ \(tune\.sh\)/micro-batch $bm, vpp $bv (tune.sh)/" "$f"
      got=$(jq -r '"\(.batch.micro) \(.layout.vpp) \(.schedule)"' "$f")
      [ "$got" = "$bm $bv $sched" ] || { echo "tune.sh: $f: rewrite failed (got $got)" >&2; exit 1; }
      grep -q "micro-batch $bm, vpp $bv (tune.sh)" "$f" ||
        echo "tune.sh: $f: its description does not say \"micro-batch $bm, vpp $bv (tune.sh)\"" >&2
      echo "tune.sh: $p: micro-batch $bm, vpp $bv ($bt s; was $cm, $cv)" >&2
    elif [ "$cm $cv" != "$bm $bv" ]; then
      echo "tune.sh: $p: the plan has micro-batch $cm, vpp $cv; the rule chooses $bm, $bv ($bt s)" >&2
      out_status=1
    fi
  done
  cat "$table"
done
exit $out_status
