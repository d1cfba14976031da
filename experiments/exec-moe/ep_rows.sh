# ep_rows.sh — what run_2gpu_ep.sh and run_ngpu_ep.sh share (sourced after validation/gpu_lib.sh):
# plan_rows NP LIMIT TIMEOUT PLAN...: each plan of plans/ run on NP ranks (--iters 6 --warmup 2, bounded
# by LIMIT s, tacorun's own --timeout TIMEOUT), its output appended to $OUT/plans.txt and one row of the
# summary table: measured median beside the prediction in predicted/<plan>.txt. One failure does not stop
# the others.
plan_rows() {
  local np=$1 limit=$2 tmo=$3 p rc med pred; shift 3
  say ""
  say "| plan | rc | measured median (ms) | predicted (ms) |"
  say "| --- | ---: | ---: | ---: |"
  for p in "$@"; do
    echo "== $p" >>"$OUT/plans.txt"
    mpi "$np" "$limit" execute "experiments/exec-moe/plans/$p.json" --iters 6 --warmup 2 --timeout "$tmo" >"$OUT/$p.tmp" 2>&1
    rc=$?
    cat "$OUT/$p.tmp" >>"$OUT/plans.txt"
    med=$(grep -oE 'median [0-9.]+ ms' "$OUT/$p.tmp" | head -1 | awk '{print $2}')
    [ -n "$med" ] || med="- ($(grep -m1 -E 'tacorun|rror|FAILED' "$OUT/$p.tmp" | cut -c1-110))"
    pred=$(awk '/^iteration/ {printf "%.1f", $2 * 1000}' "experiments/exec-moe/predicted/$p.txt")
    say "| $p | $rc | $med | $pred |"
    rm -f "$OUT/$p.tmp"
  done
}
