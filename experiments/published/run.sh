#!/usr/bin/env bash
# run.sh — predicts published large-scale training runs with tacosim and
# compares per-GPU TFLOP/s and iteration time with the published figures.
#
#   experiments/published/run.sh [options]
#
# Each set is a folder experiments/published/SET/ with set.conf (GPU label,
# sequence, vocabulary, FLOP formula, plan prefix), published.csv (the
# published rows with their source), models/ and plans/ (one plan per row:
# plans/PREFIX<name in lower case>.json). Every plan is simulated with
# `tacosim simulate PLAN --json`; the predicted iteration time t gives
#   TFLOP/s per GPU = F / (t * GPUs)
# with F the FLOPs per iteration counted as the publisher counts them:
#   sc21      Narayanan et al. SC'21, eq. (3): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
#             (full recomputation counted: 4 passes)
#   mcore-0.8 Megatron-LM core_v0.8.0 num_floating_point_operations for GPT
#             with MHA and a 4h GeLU MLP: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
#   palm      Chowdhery et al. (PaLM), Appendix B, which the Llama 3 paper cites
#             for its MFU: B s (6 N + 12 l h s), N the plan's model's parameters
#             (h = heads x head size; the attention counted non-causal)
#   nemo      NVIDIA dgxc-benchmarking's READMEs, "# Notes" (NeMo 2's count for GQA models):
#             B s (12 l h^2 (1 + g/a + s/h) + 6 m l f h + 6 V h), f the FFN size, m its GEMMs
#             (3 for SwiGLU, 2 for a plain MLP), a the heads, g the query groups as the publisher
#             counts them (published.csv: ffn_hidden, mlp_gemms, heads, kv_heads_counted; vocab
#             from the row where published.csv has a vocab column)
#   palm-noemb torchtitan's get_num_flop_per_token (pytorch/torchtitan 3faaa1a0 train.py:127-129,
#             torchtitan/utils.py:112-126): PaLM's count with N less the input embedding,
#             B s (6 (N - V h) + 12 l h s) (the output projection stays in N)
# A row's own formula: published.csv's flops column, where it has one (else set.conf's).
# and the published iteration time is F / (published TFLOP/s per GPU * GPUs). Where a
# set publishes tokens per second per GPU instead (published.csv: tokens_per_gpu_s, e.g.
# torchtitan's WPS), the published TFLOP/s per GPU is that times F / (B s), the formula's
# FLOPs per token, so the error of TFLOP/s is the error of tokens/s.
# s is set.conf's seq, or the row's own where published.csv has a seq column.
#
# Writes experiments/published/SET/table.txt per set, experiments/published/
# table.txt (every set, with median and max |error|), experiments/data/
# fig11-published.dat and the figure experiments/figures/fig11-published.{png,svg}.
# Any simulation that fails stops the script with exit status 1 and its error,
# before a table is written.
#
# Options (defaults in brackets):
#   --tacosim PATH       the simulator [$TACOSIM, else build/sim/tacosim, else the newest build-*/]
#   --calibration FILE   passed to every simulation [none: tacosim's own choice for the cluster]
#   --transfer KIND      passed to every simulation as --transfer KIND (roofline, mamf, off: how costs
#                        measured on another GPU move onto the cluster's; sim/README.md "Calibration
#                        transfer") [none: tacosim's default]
#   --sets "A B"         the sets to run [every folder here with a set.conf]
#   --only "P Q"         only these plans (names without .json, e.g. sc21-1.7b) [all]
#   --jobs N             simulations at once [1, so each wall time is one core's]
#   --topologies DIR     look cluster names up in DIR instead of the zoo (for clusters
#                        not in topologies/ yet; passed as TACOSIM_TOPOLOGIES_DIR) [the zoo]
#   --work DIR           result JSON, stdout and stderr of each simulation
#                        [experiments/data/work/published]
#   --reuse              keep the results already in --work (exit 0, JSON present) and
#                        simulate only the others [off; REUSE=1 as for make-figures.sh: on]
#   --no-figure          tables only
#   -h, --help           this text
set -euo pipefail
trap 'echo "run.sh: stopped by a failing command at line $LINENO" >&2' ERR
PUB="$(cd "$(dirname "$0")" && pwd)"
source "$PUB/../lib.sh" # EXP ROOT DATA FIGS TACOSIM plot

cal="" transfer="" sets="" only="" jobs=1 topo="" work="$DATA/work/published" figure=1 reuse="${REUSE:+1}"
while [ $# -gt 0 ]; do
  case $1 in
    --tacosim) TACOSIM=$2; shift 2 ;;
    --calibration) cal=$2; shift 2 ;;
    --transfer) transfer=$2; shift 2 ;;
    --sets) sets=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --topologies) topo=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-figure) figure=0; shift ;;
    --reuse) reuse=1; shift ;;
    -h | --help) sed -n '2,58p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option \"$1\" (--help lists them)" >&2; exit 2 ;;
  esac
done
check_run_args run.sh
case $transfer in '' | roofline | mamf | off) ;; *) echo "run.sh: --transfer wants roofline, mamf or off" >&2; exit 2 ;; esac
[ -z "$topo" ] || [ -d "$topo" ] || { echo "run.sh: --topologies $topo: no such folder" >&2; exit 2; }
if [ -n "$topo" ]; then
  TACOSIM_TOPOLOGIES_DIR="$(cd "$topo" && pwd)"
  export TACOSIM_TOPOLOGIES_DIR
fi
if [ -z "$sets" ]; then
  for d in "$PUB"/*/; do [ -f "$d/set.conf" ] && sets="$sets $(basename "$d")"; done
fi
mkdir -p "$work"

# rows SET: the published rows as "name gpus hidden layers batch tflops_per_gpu params_b seq gpu
# ffn_hidden heads kv_heads_counted mlp_gemms vocab", picked from published.csv by column name ("-"
# where the set has no such column: seq and vocab (then set.conf's), and the per-row gpu, FFN size,
# heads, KV heads and MLP GEMMs that only the nemo FLOP count and sets of several GPU generations need). A row whose "predict" column says "no" is left out
# (published.csv says why: e.g. a published layout that tacosim's memory check refuses).
rows() {
  awk -F, '
    function c(k) { return (k in col && $col[k] != "") ? $col[k] : "-" }
    /^#/ || !NF { next }
    !hdr { for (i = 1; i <= NF; i++) col[$i] = i; hdr = 1; next }
    c("predict") == "no" { next }
    { print $col["name"], $col["gpus"], $col["hidden"], $col["layers"], $col["batch"], c("tflops_per_gpu"), $col["params_b"], c("seq"), c("gpu"), c("ffn_hidden"), c("heads"), c("kv_heads_counted"), c("mlp_gemms"), c("vocab"), c("tokens_per_gpu_s"), c("flops") }
  ' "$PUB/$1/published.csv"
}

# The list of simulations: "set name plan".
list="$work/list"
: > "$list"
for s in $sets; do
  [ -f "$PUB/$s/set.conf" ] || { echo "run.sh: $PUB/$s/set.conf: no such set" >&2; exit 2; }
  label="" gpu="" seq="" vocab="" flops="" plan_prefix=""
  # shellcheck source=/dev/null
  source "$PUB/$s/set.conf"
  while read -r name _; do
    p="$plan_prefix$(echo "$name" | tr A-Z a-z)"
    if [ -n "$only" ] && [[ ! " $only " =~ " $p " ]]; then continue; fi
    plan="$PUB/$s/plans/$p.json"
    [ -f "$plan" ] || { echo "run.sh: $plan: missing (set $s, row $name)" >&2; exit 2; }
    echo "$s $name $p" >> "$list"
  done < <(rows "$s")
done
[ -s "$list" ] || { echo "run.sh: nothing to run (sets:$sets; only: ${only:-all})" >&2; exit 2; }

# The plans first: each must pass `tacosim plan` (the loader's rules and the
# memory check), and its model's parameter count must be the published one
# within 5 % (the published counts are rounded: 1.65 B is "1.7B").
echo "run.sh: checking $(wc -l < "$list") plans with tacosim plan" >&2
bad=0
while read -r s name p; do
  if ! (cd "$ROOT" && "$TACOSIM" plan "experiments/published/$s/plans/$p.json") > "$work/$p.plan" 2>&1; then
    echo "run.sh: FAILED: tacosim plan experiments/published/$s/plans/$p.json:" >&2
    tail -n 5 "$work/$p.plan" >&2
    bad=$((bad + 1))
    continue
  fi
  pub=$(rows "$s" | awk -v n="$name" '$1 == n { print $7 }')
  got=$(sed -n 's/.* \([0-9.]*\) B params.*/\1/p' "$work/$p.plan" | head -n 1)
  if ! awk -v a="$got" -v b="$pub" 'BEGIN { d = (a - b) / b; exit !(a > 0 && d < 0.05 && d > -0.05) }'; then
    echo "run.sh: FAILED: $p: the model has ${got:-?} B parameters, the published row ${pub:-?} B" >&2
    bad=$((bad + 1))
  fi
  echo "$got" > "$work/$p.params"
done < "$list"
if [ "$bad" -gt 0 ]; then
  echo "run.sh: $bad of $(wc -l < "$list") plans failed the check: nothing simulated" >&2
  exit 1
fi

# simulate P: one simulation from the repository root (plans name their
# models by repository paths); its exit status and wall time go beside the JSON.
simulate() {
  local p=$1 t0 t1 rc=0
  if [ -n "$reuse" ] && [ "$(cat "$work/$p.rc" 2> /dev/null)" = 0 ] && [ -s "$work/$p.json" ] && [ -f "$work/$p.wall" ]; then
    echo "  $p: kept from $work (--reuse)" >&2
    touch "$work/$p.kept"
    return
  fi
  rm -f "$work/$p.kept" "$work/$p.json" "$work/$p.rc" "$work/$p.wall"
  t0=$(date +%s.%N)
  (cd "$ROOT" && "$TACOSIM" simulate "experiments/published/${2}/plans/$p.json" --json "$work/$p.json" \
    ${cal:+--calibration "$cal"} ${transfer:+--transfer "$transfer"} > "$work/$p.out" 2> "$work/$p.err") || rc=$?
  t1=$(date +%s.%N)
  echo "$rc" > "$work/$p.rc"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' > "$work/$p.wall"
  echo "  $p: exit $rc, $(cat "$work/$p.wall") s" >&2
}

echo "run.sh: $(wc -l < "$list") simulations, $jobs at a time, with $TACOSIM${cal:+ --calibration $cal}${transfer:+ --transfer $transfer}" >&2
start=$(date +%s)
# the largest runs first (most GPUs), so the last worker does not start the slowest one alone
while read -r s name p; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  simulate "$p" "$s" &
done < <(while read -r s name p; do
  g=$(rows "$s" | awk -v n="$name" '$1 == n { print $2 }')
  echo "$g $s $name $p"
done < "$list" | sort -rn | cut -d' ' -f2-)
wait
total=$(($(date +%s) - start))

failed=0
while read -r s name p; do
  rc=$(cat "$work/$p.rc" 2> /dev/null || echo "?")
  if [ "$rc" != 0 ] || ! jq -e '.iteration_time_s > 0' "$work/$p.json" > /dev/null 2>&1; then
    echo "run.sh: FAILED: $p (set $s, row $name): tacosim exit status $rc; its stderr ($work/$p.err):" >&2
    tail -n 20 "$work/$p.err" >&2 || true
    failed=$((failed + 1))
  fi
done < "$list"
if [ "$failed" -gt 0 ]; then
  echo "run.sh: $failed of $(wc -l < "$list") simulations failed: no table written" >&2
  exit 1
fi

# The comparison, one line per row:
# set gpu name gpus layout pub_tflops pred_tflops err_pct pub_iter_s pred_iter_s wall_s tacosim_mfu_pct
flops_awk='
  function flops(kind, B, s, l, h, V, N, f, a, g, m) {
    if (kind == "sc21") return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    if (kind == "mcore-0.8") return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    if (kind == "palm") return B * s * (6 * N + 12 * l * h * s)
    if (kind == "palm-noemb") return B * s * (6 * (N - V * h) + 12 * l * h * s)
    if (kind == "nemo") return B * s * (12 * l * h * h * (1 + g / a + s / h) + 6 * m * l * f * h + 6 * V * h)
    print "run.sh: unknown FLOP formula " kind > "/dev/stderr"; exit 2
  }'
cmp="$work/compare"
: > "$cmp"
while read -r s name p; do
  # shellcheck source=/dev/null
  source "$PUB/$s/set.conf"
  read -r _ gpus hidden layers batch tf_pub params_pub row_seq row_gpu ffn heads kvh mlpg row_vocab wps row_flops < <(rows "$s" | awk -v n="$name" '$1 == n')
  [ "$row_flops" = - ] || flops=$row_flops
  [ "$row_seq" = - ] || seq=$row_seq
  [ "$row_gpu" = - ] || gpu=$row_gpu
  [ "$row_vocab" = - ] || vocab=$row_vocab
  plan="$PUB/$s/plans/$p.json"
  layout=$(jq -r '"tp\(.layout.tp) pp\(.layout.pp) dp\(.layout.dp) v\(.layout.vpp // 1) m\(.batch.micro)"' "$plan" | tr ' ' '/')
  t_pred=$(jq -r '.iteration_time_s' "$work/$p.json")
  mfu=$(jq -r '.mfu * 100' "$work/$p.json")
  awk -v kind="$flops" -v B="$batch" -v s="$seq" -v l="$layers" -v h="$hidden" -v V="$vocab" -v f="$ffn" -v a="$heads" -v g="$kvh" -v m="$mlpg" \
    -v n="$gpus" -v tp="$tf_pub" -v t="$t_pred" -v set="$s" -v gpu="$gpu" -v name="$name" \
    -v layout="$layout" -v wall="$(cat "$work/$p.wall")" -v mfu="$mfu" \
    -v pp="$params_pub" -v pm="$(cat "$work/$p.params")" -v wps="$wps" "$flops_awk"'
    BEGIN {
      F = flops(kind, B, s, l, h, V, pm * 1e9, f, a, g, m)
      if (wps != "-") tp = wps * F / (B * s) / 1e12
      pred = F / (t * n) / 1e12
      printf "%s %s %s %d %s %.1f %.1f %+.1f %.3f %.3f %.1f %.1f %s %s\n", set, gpu, name, n, layout, tp, pred,
        100 * (pred - tp) / tp, F / (tp * 1e12 * n), t, wall, mfu, pp, pm
    }' >> "$cmp"
done < "$list"

# summary: median and max |error| of the lines on stdin (column 8)
summary() {
  awk '{ print ($8 < 0 ? -$8 : $8) }' | sort -g | awk '
    { a[NR] = $1 }
    END {
      if (!NR) exit
      med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf "median |error| %.1f %%, max |error| %.1f %% over %d rows\n", med, a[NR], NR
    }'
}

cals=$(for f in "$work"/*.json; do jq -r '.calibration // empty' "$f" 2> /dev/null; done | sort -u | sed "s|^$ROOT/||" | paste -sd, -)
header() {
  echo "# Predicted (tacosim simulate) against published per-GPU TFLOP/s and iteration time."
  echo "# $(date -u +%Y-%m-%d) $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2> /dev/null || echo '+changes'); simulator ${TACOSIM#"$ROOT"/}"
  echo "# calibration: ${cals:-?}${transfer:+; --transfer $transfer}${topo:+; clusters from $topo (--topologies)}"
  echo "# TFLOP/s counted as the publisher counts them (set.conf: flops); published iteration time = F / (published TFLOP/s x GPUs)."
  echo "# error = (predicted - published) / published TFLOP/s; sim_s = wall time of the simulation ($jobs at a time on $(nproc) cores);"
  echo "# mfu_sim = tacosim's own MFU (its FLOP count, the cluster's peak); pub_B / plan_B = parameters, published and of the plan's model"
  printf "# %-10s %-4s %-6s %5s %-20s %9s %9s %7s %9s %9s %7s %8s %8s %8s\n" set gpu row gpus layout pub_TF/s pred_TF/s err_% pub_it_s pred_it_s sim_s mfu_sim% pub_B plan_B
}
line() { awk '{ printf "  %-10s %-4s %-6s %5d %-20s %9.1f %9.1f %7s %9.3f %9.3f %7.1f %8.1f %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 }'; }
for s in $sets; do
  grep -q "^$s " "$cmp" || continue
  # shellcheck source=/dev/null
  source "$PUB/$s/set.conf"
  {
    echo "# set $s: $label (experiments/published/$s/README.md)"
    header
    grep "^$s " "$cmp" | line
    echo "# $(grep "^$s " "$cmp" | summary)"
  } > "$PUB/$s/table.txt"
done
{
  header
  for s in $sets; do
    grep -q "^$s " "$cmp" || continue
    grep "^$s " "$cmp" | line
    echo "# $s: $(grep "^$s " "$cmp" | summary)"
  done
  echo "# all: $(summary < "$cmp")"
  kept=0
  while read -r _ _ p; do if [ -f "$work/$p.kept" ]; then kept=$((kept + 1)); fi; done < "$list"
  echo "# $(wc -l < "$list") simulations, $(awk '{ t += $11 } END { printf "%.0f", t }' "$cmp") s of sim_s in all; this run took $total s$(if [ "$kept" -gt 0 ]; then echo " ($kept results kept from an earlier run with --reuse: their sim_s is that run's)"; fi)"
} > "$PUB/table.txt"
cat "$PUB/table.txt"

dat="$DATA/fig11-published.dat"
{
  echo "# written by experiments/published/run.sh; the rows of experiments/published/table.txt"
  echo "# set gpu row gpus layout published_tflops predicted_tflops error_pct published_iter_s predicted_iter_s sim_wall_s tacosim_mfu_pct published_params_b plan_params_b"
  cat "$cmp"
} > "$dat"
[ "$figure" = 1 ] || exit 0
command -v gnuplot > /dev/null || { echo "run.sh: gnuplot missing: figure not drawn" >&2; exit 3; }
gens=$(awk '{ print $2 }' "$cmp" | sort -u | paste -sd' ' -) # one colour per GPU generation
plot fig11-published 1700 650 <<GP
set title "Published training runs predicted by tacosim simulate: error of TFLOP/s per GPU, row by row\n($(summary < "$cmp"); costs measured on H200, transferred; calibration ${cals:-?})" font ",10"
set ylabel "(predicted - published) / published TFLOP/s per GPU, %"
set xlabel "published run: model (GPUs), in each set's order"
set grid ytics
set key top left
set xtics rotate by -45 font ",8" nomirror
# the row count first: stats filters a one-column "using" by the y range, which would cut it at 25
n = 0
stats "$dat" using 0 nooutput
n = STATS_records
set xrange [-0.7:*]
set yrange [-45:25]
set style fill transparent solid 0.25 noborder
plot [-0.7:n-0.3] "+" using 1:(-8):(8) with filledcurves lc rgb "gray70" title "±8 % (the target's max)", \
     "+" using 1:(-3):(3) with filledcurves lc rgb "gray50" title "±3 % (the target's median)", \
     0 lc rgb "black" dt 2 notitle, \
     for [g in "$gens"] "$dat" using 0:(strcol(2) eq g ? \$8 : NaN):xtic(sprintf("%s %s (%s)", strcol(2), strcol(3), strcol(4))) with points pt 7 ps 1.6 title g, \
     "" using 0:8:(sprintf("%+.1f", \$8)) with labels offset 0,1.1 font ",7" notitle
GP
