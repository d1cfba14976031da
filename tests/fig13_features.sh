#!/bin/sh
# experiments/fig13-features.sh on three plans in a scratch folder: it finds the layout features each
# plan uses, its "without" variants are the plan with that one field toggled (their predictions equal
# tacosim simulate's on variants written here by hand), a variant the rules refuse is listed with the
# field tacosim named, and the table lists exactly the pairs whose change is over 1 %.
# usage: fig13_features.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v jq > /dev/null 2>&1 || { echo "jq missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fig13_features.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$src"
# gpt-h4096 TP 2 with SP and tp_comm_overlap; DP 2 with ZeRO-1's gathers overlapped; the CP 4 layout plan
jq '.layout.tp_comm_overlap = true' experiments/plans/gpt-h4096-tp2-sp.json > "$tmp/tpo.json"
jq '.layout.zero1 = true | .layout.overlap_param_gather = true' experiments/plans/gpt-h4096-dp2.json > "$tmp/opg.json"
cp experiments/layouts/plans/qwen2.5-72b-1024-cp4-seq32k.json "$tmp/cp.json"
# the uneven Llama-3 405B plan: its even variant cannot exist (126 layers, PP 16)
cp experiments/layouts/plans/llama3-405b-1024-pp16-uneven.json "$tmp/uneven.json"
# a published row (its published iteration in experiments/published/table.txt): Llama 3.1 8B on 8 H100, CP 2
cp experiments/published/dgxc/plans/dgxc-h100-8b-8.json "$tmp/"
TACOSIM=$bin JOBS=2 FIG13_DAT="$tmp/out.dat" FIG13_WORK="$tmp/work" FIG13_NOPLOT=1 \
  bash experiments/fig13-features.sh "$tmp/tpo.json" "$tmp/opg.json" "$tmp/cp.json" "$tmp/uneven.json" "$tmp/dgxc-h100-8b-8.json" 2> "$tmp/err" ||
  { cat "$tmp/err"; echo "FAIL: fig13-features.sh exit"; exit 1; }
cat "$tmp/out.dat" | cut -c1-160
fail() { echo "FAIL: $*"; exit 1; }
# the features found, plan by plan (overlap_grad_reduce is not toggled where overlap_param_gather needs it)
got=$(awk '!/^#/ { gsub(/"/, "", $1); printf "%s:%s ", $1, $2 }' "$tmp/out.dat")
want="tpo:tp_comm_overlap opg:overlap_param_gather cp:overlap_grad_reduce cp:cp uneven:overlap_grad_reduce uneven:uneven "
want="${want}dgxc-h100-8b-8:overlap_param_gather dgxc-h100-8b-8:cp "
[ "$got" = "$want" ] || fail "features: got '$got', want '$want'"
echo "ok: features $got"
# each "without" prediction is tacosim's on the plan with that field toggled by hand
sim() { "$bin" simulate "$1" --json "$tmp/r.json" > /dev/null 2>&1 || fail "simulate $1"; jq -r .iteration_time_s "$tmp/r.json"; }
check() { # plan feature jq-filter
  jq "$3" "$tmp/$1.json" > "$tmp/hand.json"
  want=$(sim "$tmp/hand.json") with=$(sim "$tmp/$1.json")
  row=$(awk -v p="\"$1\"" -v f="$2" '$1 == p && $2 == f' "$tmp/out.dat")
  gw=$(echo "$row" | awk '{ print $4 }') gt=$(echo "$row" | awk '{ print $3 }') gc=$(echo "$row" | awk '{ print $5 }')
  awk -v a="$gw" -v b="$want" 'BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }' || fail "$1 without $2: $gw, by hand $want"
  awk -v a="$gt" -v b="$with" 'BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }' || fail "$1 with $2: $gt, by hand $with"
  awk -v c="$gc" -v a="$with" -v b="$want" 'BEGIN { d = c - 100 * (a - b) / b; exit !(d < 0.006 && d > -0.006) }' ||
    fail "$1 $2: change $gc"
  echo "ok: $1 without $2: $gw s (by hand $want), with $gt s, change $gc %"
}
check tpo tp_comm_overlap '.layout.tp_comm_overlap = false'
check opg overlap_param_gather '.layout.overlap_param_gather = false'
check cp cp '.layout.dp = 32 | .layout.context_parallel_size = 1 | del(.layout.cp_comm_type)'
check cp overlap_grad_reduce '.layout.overlap_grad_reduce = false'
# the even variant of 126 layers on PP 16 is refused, the field named
grep '^"uneven" uneven ' "$tmp/out.dat" | grep -q ' - - .*layout.pp: 126 layers do not split evenly' ||
  fail "uneven: the refusal and its field"
echo "ok: uneven's even variant refused, layout.pp named"
# the table: exactly the pairs over 1 %
big=$(awk '!/^#/ && $5 != "-" && ($5 > 1 || $5 < -1) { gsub(/"/, "", $1); printf "%s:%s ", $1, $2 }' "$tmp/out.dat")
tab=$(awk -F' *[|] *' '/^Published rows/ { exit } /^[|] [^-]/ && $2 != "plan" { printf "%s:%s ", $2, $3 }' "$tmp/out.md")
[ -n "$big" ] && [ "$big" = "$tab" ] || fail "table: '$tab', pairs over 1 %: '$big'"
echo "ok: table lists $tab"
# the published row's errors: published iteration over each prediction, - 1
pub=$(awk '$1 == "dgxc" && $3 == "h100-8b-8" { print $9 }' experiments/published/table.txt)
row=$(awk '$1 == "\"dgxc-h100-8b-8\"" && $2 == "overlap_param_gather"' "$tmp/out.dat")
with=$(echo "$row" | awk '{ print $3 }') without=$(echo "$row" | awk '{ print $4 }')
want=$(awk -v p="$pub" -v a="$with" -v b="$without" 'BEGIN { printf "| dgxc-h100-8b-8 | overlap_param_gather | %+.1f %% | %+.1f %% |", 100 * (p / a - 1), 100 * (p / b - 1) }')
grep -qF "$want" "$tmp/out.md" || fail "published error row: want '$want'"
grep -qF "| dgxc-h100-8b-8 | cp | " "$tmp/out.md" && grep "| dgxc-h100-8b-8 | cp | " "$tmp/out.md" | grep -q "refused" ||
  fail "published error row of the refused CP variant"
echo "ok: published errors $want"
