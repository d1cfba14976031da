#!/usr/bin/env bash
# make-figures.sh — regenerates every figure (PNG and SVG, through gnuplot)
# under experiments/figures/, from simulations (tacosim) and from the measured
# results kept in the repository. A figure whose data does not exist yet is
# skipped with a message naming what is missing.
#
#   experiments/make-figures.sh            all figures (a few minutes on 2 cores)
#   experiments/make-figures.sh --quick    fewer points in the simulated sweeps (CI)
#   experiments/make-figures.sh 2 5        only figures 2 and 5
#
# Environment: TACOSIM / TACORUN (the commands; default: the builds in the
# repository), JOBS (simulations at once; default: the CPU cores), REUSE=1
# (redraw from the simulations already in experiments/data/work/).
set -uo pipefail
EXP="$(cd "$(dirname "$0")" && pwd)"
command -v gnuplot > /dev/null || { echo "make-figures: gnuplot is needed (apt-get install gnuplot-nox)" >&2; exit 2; }

only=()
for a in "$@"; do
  case $a in
    --quick)
      export FIG1_MODELS="gpt3-2.7b gpt3-175b qwen2.5-7b"
      export FIG2_BANDWIDTHS="8 25 100 450"
      export FIG3_GPUS="64 256 1024"
      export FIG12_BANDWIDTHS="12.5 50 200"
      export FIG4_PLANS="gpt3-175b-1024 gpt3-175b-1024-taco gpt3-13b-64 gpt-h4096-tp2-none-socket gpt-h4096-tp2-taco-socket" ;;
    [1-9] | 1[0-4]) only+=("$a") ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "make-figures: unknown argument \"$a\" (--quick, or figure numbers 1-14)" >&2; exit 2 ;;
  esac
done

# The PNGs kept in the tree are palette-quantized once, as drawn (pngquant, quality 90-100: the plots
# have few colours, the file shrinks 2-3x and looks the same); without pngquant they stay as gnuplot
# wrote them.
quantize() {
  command -v pngquant > /dev/null && [ -f "$1" ] || return 0
  pngquant --quality=90-100 --speed 1 --skip-if-larger --force --output "$1" -- "$1" 2> /dev/null || true
}

drawn=() skipped=() failed=()
start=$(date +%s)
for script in "$EXP"/fig[1-9]-*.sh "$EXP"/fig1[0-4]-*.sh; do
  name="$(basename "$script" .sh)"
  n="${name#fig}"; n="${n%%-*}"
  if [ "${#only[@]}" -gt 0 ] && [[ ! " ${only[*]} " =~ " $n " ]]; then continue; fi
  t0=$(date +%s)
  echo "== $name"
  bash "$script"
  rc=$?
  case $rc in
    0) drawn+=("$name ($(( $(date +%s) - t0 )) s)")
       quantize "$EXP/figures/$name.png" ;;
    3) skipped+=("$name") ;;
    *) failed+=("$name (exit $rc)") ;;
  esac
done
echo
echo "drawn (${#drawn[@]}): ${drawn[*]:-none}"
echo "skipped for missing data (${#skipped[@]}): ${skipped[*]:-none}"
[ "${#failed[@]}" = 0 ] || echo "FAILED (${#failed[@]}): ${failed[*]}"
echo "total $(( $(date +%s) - start )) s; figures in experiments/figures/"
[ "${#failed[@]}" = 0 ]
