# set_opts.sh — the options of a published set's run.sh that takes only a simulator and a work folder
# (mbridge-fp8/, moe-infer/); sourced, not run. After it, TACOSIM and WORK hold the choice, WORK exists
# and the current folder is ROOT:
#   . "$HERE/../set_opts.sh"; set_opts NAME HELP_LINES "$@"
# NAME names the default work folder (experiments/data/work/NAME), HELP_LINES the caller's header lines that
# --help prints (sed range, e.g. 2,13). Needs ROOT (the repository root) set.
set_opts() {
  local name=$1 help=$2
  shift 2
  TACOSIM="$ROOT/build/sim/tacosim"
  WORK="$ROOT/experiments/data/work/$name"
  while [ $# -gt 0 ]; do
    case "$1" in
    --tacosim) TACOSIM="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$WORK"
  cd "$ROOT"
}
