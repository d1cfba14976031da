#!/usr/bin/env bash
# clock_validation.sh CLOCK_JSON [TACOSIM] — the 20 plans of experiments/validation predicted with the
# shipped calibration files (calibration/h200-<transport>.json) without (--clock off) and with the clock
# model, against the latest validation run's measured iteration times (experiments/validation/validation.txt,
# measured/<tag>.json; run 11 since 2026-11-30 09:30 UTC, run 9 from 08:00, run 8 before; its socket rows are
# predicted here with the shipped socket file, not the one their run calibrated).
# CLOCK_JSON: a calibration file whose "clock" section is put into copies of the shipped files (a GPU
# property: the same section for every transport); "shipped": the shipped files as they are (their own
# section, if any). Run 8's measurements were known when the model was written; run 9's were not.
# Writes the table to stdout; OUT_DIR (default a temporary folder) keeps every prediction's text.
set -euo pipefail
cd "$(dirname "$0")/.."
clock=${1:?usage: sim/clock_validation.sh CLOCK_JSON|shipped [TACOSIM]}
sim=${2:-build/sim/tacosim}
V=experiments/validation
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out/cal"
for t in nvlink shm socket; do
  if [ "$clock" = shipped ]; then
    cp calibration/h200-$t.json "$out/cal/h200-$t.json"
  else
    python3 - "$clock" calibration/h200-$t.json "$out/cal/h200-$t.json" <<'EOF'
import json, sys
src, base, dst = sys.argv[1:4]
section = json.load(open(src)).get("clock")
if section is None:
    sys.exit(f"{src}: no \"clock\" section")
cal = json.load(open(base))
cal["clock"] = section
json.dump(cal, open(dst, "w"), indent=1)
EOF
  fi
done
measured() { awk -v t="$1" '$1 == t {print $5}' $V/validation.txt; }
# the compute stream's time in ms: measured (run 8's result JSON) and predicted (the report)
measured_compute() { python3 -c 'import json, sys; print(1000 * json.load(open(sys.argv[1]))["breakdown"]["compute_s"])' "$1"; }
predicted_compute() { awk '$1 == "compute" {print $2 * 1000}' "$1"; }
field() { awk -v k="$2" '$1 == k {print $3}' "$1"; }
printf "# plan                     transp  measured_ms  old_ms  old_err%%  new_ms  new_err%%  duty   gemm_x  sims  compute_ms: measured  old    new\n"
grep -v '^#' $V/plans.txt | while read -r tag plan transport ranks; do
  cal=$out/cal/h200-$transport.json
  "$sim" simulate "$plan" --calibration "$cal" --clock off >"$out/$tag.old.txt" 2>&1
  "$sim" simulate "$plan" --calibration "$cal" >"$out/$tag.new.txt" 2>&1
  m=$(measured "$tag")
  old=$(awk '/^iteration/ {print $2 * 1000}' "$out/$tag.old.txt")
  new=$(awk '/^iteration/ {print $2 * 1000}' "$out/$tag.new.txt")
  # the clock line: "clock  duty D (lo-hi), GEMM speed xS (lo-hi), ...; N simulations"
  duty=$(awk '/^clock/ {print $3}' "$out/$tag.new.txt")
  gemm=$(awk '/^clock/ {sub(/^x/, "", $7); print $7}' "$out/$tag.new.txt")
  sims=$(awk '/^clock/ {for (i = 2; i <= NF; i++) if ($i ~ /^simulations/) print $(i - 1)}' "$out/$tag.new.txt")
  mc=$(measured_compute $V/measured/$tag.json)
  oc=$(predicted_compute "$out/$tag.old.txt")
  nc=$(predicted_compute "$out/$tag.new.txt")
  awk -v tag="$tag" -v tr="$transport" -v m="$m" -v o="$old" -v n="$new" -v d="${duty:--}" -v g="${gemm:--}" \
    -v s="${sims:-1}" -v mc="$mc" -v oc="$oc" -v nc="$nc" 'BEGIN {
      printf "  %-24s %-6s %10.1f %7.1f %+8.2f %7.1f %+8.2f  %-6s %-7s %-4s %19.1f %6.1f %6.1f\n", tag, tr, m, o,
        100 * (o - m) / m, n, 100 * (n - m) / m, d, g, s, mc, oc, nc }'
done | tee "$out/table.txt"
# median and max |error|, old and new
stats() { awk '!/^#/ {print ($c < 0 ? -$c : $c)}' c="$1" "$out/table.txt" | sort -g |
  awk '{v[NR] = $1} END {printf "%.2f%% median, %.2f%% max", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR]}'; }
echo "# $(grep -vc '^#' "$out/table.txt") plans: |error| old $(stats 5); new $(stats 7)"
