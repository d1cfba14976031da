#!/usr/bin/env bash
# Figure 13: what each layout feature of issue 22 does to the prediction of the shipped plans that use
# it. Every plan is simulated as shipped and once without each feature it uses (a copy of the plan with
# that field toggled, nothing else changed); the features that move the predicted iteration by more
# than 1 % are drawn as iteration-time breakdowns with and without them.
#
#   experiments/fig13-features.sh [PLAN.json ...]
#
# Plans (default): experiments/plans/*.json, plans/moe/*.json, layouts/plans/*.json and the dense
# published sets' plans (published/{sc21,mcore-h100,dgxc,llama3,torchtitan}/plans/*.json). Each is
# simulated from the repository root with tacosim simulate's defaults (the calibration it picks for
# the plan's cluster), as experiments/published/run.sh does.
#
# Features and the variant "without" it (jq on the plan):
#   tp_comm_overlap       layout.tp_comm_overlap true -> false
#   overlap_param_gather  layout.overlap_param_gather true -> false (not under ZeRO-3, which implies it)
#   overlap_grad_reduce   on (true, or absent: tacosim's default) with more than one DP shard -> false;
#                         not where overlap_param_gather is on (Megatron-LM refuses the gather overlap
#                         without it, and so does tacosim) or under ZeRO-3 (which implies both)
#   zero2                 data_parallel_sharding_strategy optim_grads -> optim (ZeRO-1)
#   zero3                 optim_grads_params -> optim (ZeRO-1) with overlap_param_gather true (ZeRO-3
#                         overlaps its gathers), zero3_prefetch_layers removed
#   cp                    context_parallel_size C > 1 -> 1 with dp x C (the same GPUs), cp_comm_type
#                         and codec.cp removed
#   uneven                decoder_first/last_pipeline_num_layers removed (even stages)
#   accounted             account_for_embedding/loss_in_pipeline_split removed
# A variant the plan rules refuse (memory over the HBM, layers the stages do not divide, ...) is listed
# with the reason tacosim gave and left out of the figure.
#
# Writes experiments/data/fig13-features.dat (every plan x feature: both iteration times, the change,
# both breakdowns; FIG13_DAT replaces the path), experiments/data/fig13-features.md (the table of the
# features that move a prediction by more than 1 %, and for the published rows the error against the
# published figure with and without each feature), and the figure (skipped with FIG13_NOPLOT=1).
# Environment: TACOSIM, JOBS, REUSE=1 (as make-figures.sh); FIG13_WORK: the folder of the variants and
# their results (default experiments/data/work/fig13).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3
command -v jq > /dev/null || { echo "fig13: jq is needed" >&2; exit 2; }

if [ $# -gt 0 ]; then
  plans=("$@")
else
  shopt -s nullglob
  plans=("$EXP"/plans/*.json "$EXP"/plans/moe/*.json "$EXP"/layouts/plans/*.json)
  for s in sc21 mcore-h100 dgxc llama3 torchtitan; do plans+=("$EXP"/published/$s/plans/*.json); done
fi
DAT="${FIG13_DAT:-$DATA/fig13-features.dat}"
MD="${DAT%.dat}.md"
WORK="${FIG13_WORK:-$DATA/work/fig13}"
fresh_dir "$WORK"

# features PLAN: lines "feature<TAB>jq filter making the variant without it"
features() {
  jq -r '
    .layout as $l
    | ($l.context_parallel_size // 1) as $cp
    | ($l.data_parallel_sharding_strategy // (if $l.zero1 then "optim" else "no_shard" end)) as $dps
    | [ (if $l.tp_comm_overlap == true then ["tp_comm_overlap", ".layout.tp_comm_overlap = false"] else empty end),
        (if $l.overlap_param_gather == true and $dps != "optim_grads_params"
           then ["overlap_param_gather", ".layout.overlap_param_gather = false"] else empty end),
        (if (if $l | has("overlap_grad_reduce") then $l.overlap_grad_reduce else true end) == true and ($l.dp // 1) * $cp > 1
            and $l.overlap_param_gather != true and $dps != "optim_grads_params"
           then ["overlap_grad_reduce", ".layout.overlap_grad_reduce = false"] else empty end),
        (if $dps == "optim_grads"
           then ["zero2", ".layout.data_parallel_sharding_strategy = \"optim\""] else empty end),
        (if $dps == "optim_grads_params"
           then ["zero3", ".layout.data_parallel_sharding_strategy = \"optim\" | .layout.overlap_param_gather = true | del(.layout.zero3_prefetch_layers)"]
           else empty end),
        (if $cp > 1
           then ["cp", ".layout.dp = .layout.dp * \($cp) | .layout.context_parallel_size = 1 | del(.layout.cp_comm_type) | if .codec then del(.codec.cp) else . end"]
           else empty end),
        (if $l.decoder_first_pipeline_num_layers != null or $l.decoder_last_pipeline_num_layers != null
           then ["uneven", "del(.layout.decoder_first_pipeline_num_layers, .layout.decoder_last_pipeline_num_layers)"]
           else empty end),
        (if $l.account_for_embedding_in_pipeline_split == true or $l.account_for_loss_in_pipeline_split == true
           then ["accounted", "del(.layout.account_for_embedding_in_pipeline_split, .layout.account_for_loss_in_pipeline_split)"]
           else empty end) ]
    | .[] | "\(.[0])\t\(.[1])"' "$1"
}

# the jobs: "TAG PLAN.json" per simulation; TAG = plan name, or plan name + "~" + feature
: > "$WORK/list"
: > "$WORK/features"
for f in "${plans[@]}"; do
  [ -f "$f" ] || { echo "fig13: $f: no such plan" >&2; exit 2; }
  jq -e '.kind // "training" | . == "training"' "$f" > /dev/null || continue # inference plans: no layout features
  name="$(basename "$f" .json)"
  abs="$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"
  n=0
  while IFS=$'\t' read -r feat filter; do
    [ -n "$feat" ] || continue
    jq "$filter" "$abs" > "$WORK/$name~$feat.json"
    echo "$name~$feat $WORK/$name~$feat.json" >> "$WORK/list"
    echo "$name $feat" >> "$WORK/features"
    n=$((n + 1))
  done < <(features "$abs")
  if [ $n -gt 0 ]; then # the plan as shipped, copied beside its variants (its result is written there)
    cp "$abs" "$WORK/$name.json"
    echo "$name $WORK/$name.json" >> "$WORK/list"
  fi
done
[ -s "$WORK/list" ] || { echo "fig13: none of the plans uses a layout feature" >&2; exit 3; }
echo "fig13: $(wc -l < "$WORK/list") simulations, $JOBS at a time" >&2

# simulated from the repository root: the published plans name their models by repository paths
# shellcheck disable=SC2016
(cd "$ROOT" && REUSE="${REUSE:-}" xargs -P "$JOBS" -L 1 sh -c '
  out="$2.result"
  if [ -n "$REUSE" ] && [ -s "$out.json" ]; then exit 0; fi
  rm -f "$out.json"
  "$0" simulate "$2" --json "$out.json" > /dev/null 2> "$out.err" || true
' "$TACOSIM" < "$WORK/list")

# row TAG: iteration and the breakdown (compute tp pp dp cp codec bubble), or "- reason"
row() {
  local j
  j="$(awk -v t="$1" '$1 == t { print $2 }' "$WORK/list").result.json"
  if [ -s "$j" ]; then
    jq -r '[.iteration_time_s, (.breakdown | .compute_s, .tp_exposed_s, .pp_exposed_s, .dp_exposed_s,
            (.cp_exposed_s // 0), .codec_s, .bubble_s)] | map(tostring) | join(" ")' "$j"
  else
    local err="${j%.json}.err"
    echo "- $(grep -v '^$' "$err" 2> /dev/null | tail -1 | sed 's|'"$WORK"'/||g' | tr '\t"' '  ' | cut -c1-200)"
  fi
}

{
  echo "# fig13-features: each shipped plan with and without each issue-22 layout feature it uses (tacosim simulate,"
  echo "# default calibration per plan; experiments/fig13-features.sh, $(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "# plan feature with_s without_s change_% (with - without) / without, then compute tp pp dp cp codec bubble (s)"
  echo "# with, then the same without; a variant tacosim refused: without_s \"-\" and its reason after '#'"
  while read -r name feat; do
    read -r tw cw tpw ppw dpw cpw cdw bw <<< "$(row "$name")"
    wo="$(row "$name~$feat")"
    if [ "$tw" = "-" ]; then
      echo "\"$name\" $feat - - - # the plan itself: $(row "$name" | cut -c3-)"
    elif [ "${wo%% *}" = "-" ]; then
      echo "\"$name\" $feat $tw - - $cw $tpw $ppw $dpw $cpw $cdw $bw # without it: ${wo#- }"
    else
      read -r to co tpo ppo dpo cpo cdo bo <<< "$wo"
      awk -v n="$name" -v f="$feat" -v a="$tw" -v b="$to" -v rest="$cw $tpw $ppw $dpw $cpw $cdw $bw $co $tpo $ppo $dpo $cpo $cdo $bo" \
        'BEGIN { printf "\"%s\" %s %.6f %.6f %+.2f %s\n", n, f, a, b, 100 * (a - b) / b, rest }'
    fi
  done < "$WORK/features"
} > "$DAT"

# the table of moves over 1 %, and the data of the figure: two bars per (plan, feature), a gap between
big="$WORK/big.dat"
awk '!/^#/ && $5 != "-" && ($5 > 1 || $5 < -1)' "$DAT" > "$big"
{
  echo "Features that move a shipped plan's predicted iteration by more than 1 % (\`experiments/fig13-features.sh\`,"
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(awk '!/^#/' "$DAT" | wc -l) plan x feature pairs simulated, $(wc -l < "$big") over 1 %,"
  echo "$(awk '!/^#/ && $4 == "-"' "$DAT" | wc -l) variants refused by the plan rules: \`data/fig13-features.dat\`)."
  echo
  echo "| plan | feature | with (s) | without (s) | change |"
  echo "| --- | --- | ---: | ---: | ---: |"
  awk '{ gsub(/"/, "", $1); printf "| %s | %s | %.3f | %.3f | %+.2f %% |\n", $1, $2, $3, $4, $5 }' "$big"
} > "$MD"
# Published rows (experiments/published/table.txt, the last run.sh): the error of the predicted TFLOP/s per
# GPU with the feature (as the published run used it) and without; same FLOPs, so error = published
# iteration / predicted iteration - 1.
pubt="${FIG13_PUBLISHED:-$EXP/published/table.txt}"
if [ -f "$pubt" ]; then
  for c in "$EXP"/published/*/set.conf; do
    echo "$(basename "$(dirname "$c")") $(sed -n 's/^plan_prefix=//p' "$c")"
  done > "$WORK/prefixes"
  {
    echo
    echo "Published rows with and without each feature their plan uses: error of the predicted TFLOP/s per GPU"
    echo "against the published figure (published iteration from \`published/table.txt\` over the predicted one, - 1;"
    echo "\"refused\": the plan without it breaks a plan rule, the reason in \`data/fig13-features.dat\`)."
    echo
    echo "| row | feature | error with it | error without it |"
    echo "| --- | --- | ---: | ---: |"
    awk 'FILENAME == ARGV[1] { pre[$1] = $2; next }
         FILENAME == ARGV[2] { if ($0 !~ /^#/ && ($1 in pre)) pub[pre[$1] tolower($3)] = $9; next }
         !/^#/ { n = $1; gsub(/"/, "", n); if (!(n in pub)) next
                 w = sprintf("%+.1f %%", 100 * (pub[n] / $3 - 1))
                 o = $4 == "-" ? "refused" : sprintf("%+.1f %%", 100 * (pub[n] / $4 - 1))
                 printf "| %s | %s | %s | %s |\n", n, $2, w, o }' "$WORK/prefixes" "$pubt" "$DAT"
  } >> "$MD"
fi
echo "fig13: $(wc -l < "$big") plan x feature pairs move the prediction by more than 1 % ($MD)" >&2

[ -z "${FIG13_NOPLOT:-}" ] || exit 0
[ -s "$big" ] || skip fig13-features "no feature moves a prediction by more than 1 %"
# one panel per feature: two bars per plan (on, off), a gap between plans
feats="$(awk '{ print $2 }' "$big" | awk '!s[$0]++')"
nf=0 most=0
: > "$WORK/panels.gp"
for ft in $feats; do
  bars="$WORK/bars-$ft.dat"
  awk -v ft="$ft" '$2 == ft { gsub(/"/, "", $1); t = $3
       printf "\"%s\" %s", $1, $3; for (i = 6; i <= 12; i++) printf " %.6f", $i / t; printf "\n"
       printf "\"off\" %s", $4; for (i = 13; i <= 19; i++) printf " %.6f", $i / t; printf "\n"
       print "\"\" 0 0 0 0 0 0 0 0" }' "$big" > "$bars"
  k=$(awk -v ft="$ft" '$2 == ft' "$big" | wc -l)
  [ "$k" -le "$most" ] || most=$k
  nf=$((nf + 1))
  cat >> "$WORK/panels.gp" <<GP
set title "$ft on (left bar: the plan as shipped) and off (right bar): $k plans" font ",10"
plot "$bars" using 3:xtic(1) title "compute", "" using 4 title "TP exposed", "" using 5 title "PP exposed", \\
     "" using 6 title "DP exposed", "" using 7 title "CP exposed", "" using 8 title "codec", "" using 9 title "bubble", \\
     "" using 0:(\$2 > 0 ? (\$3 + \$4 + \$5 + \$6 + \$7 + \$8 + \$9) * 1.03 : 1/0):(\$2 > 0 ? sprintf("%.2f", \$2) : "") with labels notitle font ",7"
GP
done
w=$((900 + 55 * most))
[ $w -le 3200 ] || w=3200
plot fig13-features "$w" $((120 + 430 * nf)) <<GP
set multiplot layout $nf,1 title "Simulated (tacosim simulate; nothing measured): shipped plans with each issue-22 layout feature on and off, where it moves the predicted iteration by more than 1 %;\\nbreakdown as a share of the iteration with the feature on, iteration time (s) above each bar; costs from the H200 calibrations, transferred to the plan's GPU" font ",11"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.8
set grid ytics
set key outside right top
set xtics rotate by -35 scale 0 font ",8"
set ylabel "share of the iteration with it on"
set yrange [0:1.45]
set bmargin 7
$(cat "$WORK/panels.gp")
unset multiplot
GP
