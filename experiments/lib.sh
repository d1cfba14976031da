# lib.sh — helpers the figure scripts share (sourced, not run).
#
#   EXP      experiments/ (absolute)        ROOT  the repository
#   DATA     experiments/data: every data file a figure is drawn from
#   FIGS     experiments/figures: NAME.png (in the tree) and NAME.svg (drawn, not kept: .gitignore)
#   TACOSIM  the tacosim command ($TACOSIM, else the first build that has one)
#   TACORUN  the tacorun command, when built (only bench-codec --quality is used: it runs on the CPU)
#   JOBS     simulations run at once (default: the CPU cores)

EXP="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$EXP/.." && pwd)"
DATA="$EXP/data"
FIGS="$EXP/figures"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
mkdir -p "$DATA" "$FIGS"

# find_tool NAME SUBDIR: $NAME (upper case) from the environment, else
# build/SUBDIR/NAME, else the newest unsanitized build-*/SUBDIR/NAME.
find_tool() {
  local name=$1 sub=$2 var best=""
  var=$(echo "$name" | tr a-z A-Z)
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  if [ -x "$ROOT/build/$sub/$name" ]; then echo "$ROOT/build/$sub/$name"; return; fi
  for b in "$ROOT"/build-*; do
    case $b in *asan* | *fuzz* | *sanit*) continue ;; esac # sanitized builds are slow
    [ -x "$b/$sub/$name" ] || continue
    if [ -z "$best" ] || [ "$b/$sub/$name" -nt "$best" ]; then best="$b/$sub/$name"; fi
  done
  echo "$best"
}
TACOSIM="$(find_tool tacosim sim)"
TACORUN="$(find_tool tacorun runtime)"

need_tacosim() {
  if [ -z "$TACOSIM" ] || [ ! -x "$TACOSIM" ]; then
    echo "missing: the tacosim command (build it: cmake -S . -B build && make -C build tacosim, or set TACOSIM=)" >&2
    return 1
  fi
}

# check_run_args PROG: the checks that experiments/published/run.sh and tune.sh make on their options
# (the globals TACOSIM, cal, jobs); exits 2 naming PROG; makes TACOSIM and cal absolute paths.
check_run_args() {
  local prog=$1
  [ -n "$TACOSIM" ] && [ -x "$TACOSIM" ] || { echo "$prog: no tacosim binary (build it, or --tacosim PATH)" >&2; exit 2; }
  TACOSIM="$(cd "$(dirname "$TACOSIM")" && pwd)/$(basename "$TACOSIM")"
  command -v jq > /dev/null || { echo "$prog: jq is needed (apt-get install jq)" >&2; exit 2; }
  [ -z "$cal" ] || [ -f "$cal" ] || { echo "$prog: --calibration $cal: no such file" >&2; exit 2; }
  [ -z "$cal" ] || cal="$(cd "$(dirname "$cal")" && pwd)/$(basename "$cal")"
  case $jobs in '' | *[!0-9]* | 0) echo "$prog: --jobs wants a positive integer" >&2; exit 2 ;; esac
}

# The calibration `tacosim simulate` would choose for the measured 2xH200 NVLink machine.
nvlink_calibration() {
  if [ -f "$ROOT/calibration/h200-nvlink.json" ]; then echo "$ROOT/calibration/h200-nvlink.json"
  else echo "$ROOT/calibration/h200-derived.json"; fi
}

# write_plan FILE MODEL CLUSTER DP TP PP MICRO GLOBAL SEQ CODEC [RECOMPUTE] [SP]
# CODEC: none | taco | caat | taco+caat (TACO G=128 E4M3, CAAT-Net p=0.5, on TP traffic).
write_plan() {
  local f=$1 model=$2 cluster=$3 dp=$4 tp=$5 pp=$6 micro=$7 global=$8 seq=$9 codec=${10}
  local rc=${11:-none} sp=${12:-false} c zero=true
  [ "$dp" -gt 1 ] || zero=false
  case $codec in
    none) c='{ "kind": "none" }' ;;
    taco) c='{ "kind": "taco", "group": 128, "fp8": "e4m3" }' ;;
    caat) c='{ "kind": "caat", "p": 0.5 }' ;;
    taco+caat) c='{ "kind": "taco+caat", "group": 128, "fp8": "e4m3", "p": 0.5 }' ;;
    *) echo "write_plan: unknown codec $codec" >&2; return 2 ;;
  esac
  cat > "$f" <<EOF
{ "schema": 1, "model": "$model", "cluster": "$cluster",
  "layout": { "dp": $dp, "tp": $tp, "pp": $pp, "vpp": 1, "sequence_parallel": $sp,
              "order": "tp-dp-pp", "zero1": $zero, "recompute": "$rc" },
  "batch": { "micro": $micro, "global": $global, "seq": $seq },
  "schedule": "1f1b",
  "codec": { "tp_fwd": $c, "tp_bwd": $c, "pp": { "kind": "none" }, "dp": { "kind": "none" } } }
EOF
}

# fresh_dir DIR: an empty work folder (kept as it is with REUSE=1, so a figure
# can be redrawn from the simulations already run).
fresh_dir() {
  if [ -z "${REUSE:-}" ]; then rm -rf "$1"; fi
  mkdir -p "$1"
}

# simulate_list LIST: LIST has lines "PLAN.json CALIBRATION OUT.csv"; runs them
# JOBS at a time; each OUT.csv gets the result CSV (a failed run leaves OUT.csv.err).
simulate_list() {
  need_tacosim || return 1
  # shellcheck disable=SC2016
  REUSE="${REUSE:-}" xargs -P "$JOBS" -L 1 sh -c '
    if [ -n "$REUSE" ] && [ -f "$3" ]; then exit 0; fi
    if "$0" simulate "$1" --calibration "$2" --csv "$3" > /dev/null 2> "$3.err"; then rm -f "$3.err"; fi
  ' "$TACOSIM" < "$1"
}

# headline OUT.csv: the numbers row of a result CSV:
# iteration_time_s tokens_per_s tflops_per_gpu mfu memory_per_gpu_bytes compute_s
# tp_exposed_s pp_exposed_s dp_exposed_s codec_s bubble_s
headline() { awk '!/^#/ && NF { print; exit }' "$1"; }

# One colour per codec in every figure (Okabe-Ito, colour-blind safe).
C_NONE='"#555555"' C_TACO='"#0072b2"' C_CAAT='"#e69f00"' C_BOTH='"#009e73"'

# plot NAME [W H]: gnuplot commands on stdin, drawn as FIGS/NAME.png and
# FIGS/NAME.svg (one gnuplot run per terminal, so multiplots work too).
plot() {
  local name=$1 w=${2:-1400} h=${3:-800} body
  body="$(cat)"
  printf 'set terminal pngcairo size %d,%d font "Sans,11" noenhanced\nset output "%s"\n%s\n' \
    "$w" "$h" "$FIGS/$name.png" "$body" | gnuplot || return 1
  printf 'set terminal svg size %d,%d font "Sans,11" noenhanced\nset output "%s"\n%s\n' \
    "$w" "$h" "$FIGS/$name.svg" "$body" | gnuplot || return 1
  echo "drew: experiments/figures/$name.png and .svg"
}

# skip NAME WHAT: a figure whose data does not exist yet.
skip() {
  echo "skipped: $1: missing data: $2" >&2
  return 3
}
