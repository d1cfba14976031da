#!/usr/bin/env bash
# table.sh SUMMARY.csv — the markdown table of experiments/loss/README.md from the
# summary that `tacorun train --out-dir` writes: final validation loss, its difference
# to the baseline (codec "none") in percent, final training loss, wall time, steps/s.
set -euo pipefail
f=${1:-"$(dirname "$0")/summary.csv"}
[ -f "$f" ] || { echo "table.sh: no summary file $f" >&2; exit 2; }
awk -F, 'NR == 1 { next }
  { codec[++n] = $1; params[n] = $2; steps[n] = $3; tr[n] = $4; val[n] = $5; wall[n] = $6; sps[n] = $8
    if ($1 == "none") base = $5 }
  END {
    if (base == "") { print "table.sh: no baseline (codec none) in the summary" > "/dev/stderr"; exit 2 }
    print "| codec | final validation loss | vs baseline | final training loss | wall time (s) | training steps/s |"
    print "| --- | ---: | ---: | ---: | ---: | ---: |"
    for (i = 1; i <= n; i++)
      printf "| %s | %.4f | %+.2f%% | %.4f | %.1f | %.1f |\n", codec[i], val[i], 100 * (val[i] - base) / base, tr[i],
             wall[i], sps[i]
  }' "$f"
