#!/usr/bin/env bash
# experiments/layouts/tpo_cfg_dgxc.sh [TACOSIM] — the dgxc H100 plans whose NeMo run set a per-GEMM
# userbuffer configuration that tacosim models, simulated with TE's defaults (the shipped plan) and with
# NeMo's configuration as layout.tp_comm_overlap_cfg, beside the published step time. Reduced mode,
# default calibration. The configurations, as NeMo's benchmark scripts set them:
#   70B (dgxc-benchmarking 85380ff: NeMo d2b2155, scripts/performance/llm/pretrain_llama3_70b.py, ub_cfg
#     "h100"/"bf16" = userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192 of
#     nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py at d2b2155);
#   405B on 512 (dgxc-benchmarking 60d6fd3: NeMo 6f2c6fd, pretrain_llama31_405b.py, which sets the ring
#     exchanges' aggregate to False on userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192).
# The 405B rows of 85380ff (NeMo d2b2155) ran aggregate=True, which tacosim refuses (not modelled).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${1:-$ROOT/build/sim/tacosim}"
export TACOSIM_MODELS_DIR="${TACOSIM_MODELS_DIR:-$ROOT/models}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
python3 - "$ROOT" "$TMP" <<'PY'
import json, sys
root, tmp = sys.argv[1], sys.argv[2]
def bulk(n): return {"method": "bulk", "num_sm": n, "cga_size": 2, "set_sm_margin": False}
def ring(): return {"method": "ring_exchange", "aggregate": False}
def pipe(n): return {"method": "pipeline", "num_sm": n, "cga_size": 2, "num_splits": 4, "set_sm_margin": True}
def cfg(qd, qw, fd, fw, pf, ff):
    return {"qkv_dgrad": bulk(qd), "qkv_wgrad": bulk(qw), "fc1_dgrad": bulk(fd), "fc1_wgrad": bulk(fw),
            "qkv_fprop": ring(), "proj_dgrad": ring(), "fc1_fprop": ring(), "fc2_dgrad": ring(),
            "proj_fprop": pipe(pf), "fc2_fprop": pipe(ff)}
h8192_tp4 = cfg(4, 24, 2, 4, 24, 16)
h16384_tp8_cp2 = cfg(2, 24, 2, 2, 24, 8)
rows = [("dgxc-h100-70b-%d" % g, h8192_tp4) for g in (64, 128, 256, 512, 1024, 2048)]
rows.append(("dgxc-h100-405b-512", h16384_tp8_cp2))
with open(tmp + "/list", "w") as out:
    for name, c in rows:
        src = "%s/experiments/published/dgxc/plans/%s.json" % (root, name)
        p = json.load(open(src))
        p["layout"]["tp_comm_overlap_cfg"] = c
        json.dump(p, open("%s/%s-nemo.json" % (tmp, name), "w"), indent=1)
        out.write("%s %s %s/%s-nemo.json\n" % (name, src, tmp, name))
PY
printf '%-22s %12s %12s %12s %9s %12s %12s\n' plan published_s te_default_s nemo_cfg_s change compute_te_s compute_nemo_s
while read -r name src var; do
  "$BIN" simulate "$src" --json "$TMP/a.json" >/dev/null 2>&1
  "$BIN" simulate "$var" --json "$TMP/b.json" >/dev/null 2>&1
  python3 - "$name" "$TMP/a.json" "$TMP/b.json" "$ROOT/experiments/published/dgxc/published.csv" <<'PY'
import json, sys
name, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
pub = "-"
import csv
with open(sys.argv[4]) as fh:
    for r in csv.DictReader(l for l in fh if not l.startswith("#")):
        if "dgxc-" + r["name"] == name:
            pub = "%.3f" % float(r["step_time_s"])
ta, tb = a["iteration_time_s"], b["iteration_time_s"]
print("%-22s %12s %12.3f %12.3f %+8.2f%% %12.3f %12.3f" % (name, pub, ta, tb, 100 * (tb - ta) / ta,
      a["breakdown"]["compute_s"], b["breakdown"]["compute_s"]))
PY
done < "$TMP/list"
