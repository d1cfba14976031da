#!/usr/bin/env bash
# experiments/infer/xfer-attn/compare.sh OLD_TACOSIM [NEW_TACOSIM] — the executor's prefill attention (one
# layer's "prefill.attn", tacosim ops) and the TTFT (tacosim simulate) of Llama-3 8B (4 layers, TP 2, 16
# generated) at the prompt lengths of the calibration's keyed "attention_prefill.d128.s<S>" tables, on each
# shipped 8-GPU cluster of another GPU (costs transferred from the H200's measured file by roofline-v1) and on
# the H200 and H100 (their own files, nothing transferred), by two tacosim binaries. Default calibration, as
# `tacosim simulate` picks it. Prints one row per (cluster, batch, prompt).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
OLD="${1:?usage: compare.sh OLD_TACOSIM [NEW_TACOSIM]}"
NEW="${2:-$ROOT/build/sim/tacosim}"
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "compare.sh: $b is not executable" >&2; exit 1; }; done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
CLUSTERS="h200x8-nvswitch h100x8-nvswitch a100x8-nvswitch b200x8-nvswitch gb200-nvl72 pcie-8gpu-2x100gbe"
SHAPES="1x128 64x128 4x512 16x512 8x1024 4x2048 2x4096 1x8128"
# one plan by one binary: "attn_us ttft_ms" (or "failed(rc)" with the message on stderr)
one() {
  local bin="$1" plan="$2" rc=0 attn
  attn=$("$bin" ops "$plan" 2>"$TMP/err" | awk '$1 == "prefill.attn" {print $4}') || rc=$?
  [ "$rc" -eq 0 ] && "$bin" simulate "$plan" --json "$TMP/r.json" >/dev/null 2>>"$TMP/err" || rc=$?
  if [ "$rc" -ne 0 ] || [ -z "$attn" ]; then
    echo "failed($rc) -"; grep -m1 -v warning "$TMP/err" | sed 's/^/  /' >&2; return
  fi
  python3 -c 'import json,sys; print(sys.argv[2], "%.4f" % (1e3 * json.load(open(sys.argv[1]))["ttft_s"]))' \
    "$TMP/r.json" "$attn"
}
printf '%-20s %9s %12s %12s %8s %11s %11s %8s\n' cluster shape old_attn_us new_attn_us diff old_ttft_ms \
  new_ttft_ms diff
for c in $CLUSTERS; do
  for sh in $SHAPES; do
    b=${sh%x*} s=${sh#*x} plan="$TMP/$c-$sh.json"
    cat >"$plan" <<PLAN
{ "schema": 1, "kind": "inference", "name": "xfer-attn-$c-b$b-p$s", "model": "llama3-8b", "cluster": "$c",
  "layout": { "tp": 2, "pp": 1 }, "batch": { "size": $b, "prompt": $s, "generate": 16 }, "kv_cache": "bf16",
  "codec": { "kind": "none" }, "layers_override": 4 }
PLAN
    read -r oa ot < <(one "$OLD" "$plan")
    read -r na nt < <(one "$NEW" "$plan")
    pct() { python3 -c 'import sys
try: a, b = float(sys.argv[1]), float(sys.argv[2]); print("%+.1f%%" % (100 * (b - a) / a))
except ValueError: print("-")' "$1" "$2"; }
    printf '%-20s %9s %12s %12s %8s %11s %11s %8s\n' "$c" "$sh" "$oa" "$na" "$(pct "$oa" "$na")" "$ot" "$nt" \
      "$(pct "$ot" "$nt")"
  done
done
