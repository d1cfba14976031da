#!/usr/bin/env python3
"""merge_decode_attn.py — the "attention_decode" table (decode attention by
KV-cache bytes read, 2 x batch x length x KV heads x head_dim x 2 B; what
tacorun calibrate-infer writes) from the decode attention rows of a
`tacorun bench-decode` output (runtime/bench_decode.c: the executor's kernel
KERNEL = v1, v2 or v3 timed over batch x KV length, caches rotating through
512 MiB), replacing the table in each FILE. --kernel v2fp8 or v3fp8 (v2 or v3
over the FP8 KV cache, runtime/ops/infer_kv8.h) writes "attention_decode_fp8" instead, by
bytes of E4M3 codes and FP32 scales read: 2 x batch x length x KV heads x
(head_dim + 4) B. Rows of equal bytes are averaged
(as calibrate's tables average repeated points). FILE's notes get a clause
naming the source (older notes cut at a clause, marked ", ...").

--by-layout: the table of BENCH.txt's head layout instead, "attention_decode.g<G>"
(or "attention_decode_fp8.g<G>"), G = query heads per KV head, each point
grouped by the (sequence, KV head) pairs batch x KV heads: equal bytes take
longer over fewer pairs and with more query heads a KV head
(experiments/infer/v3/attn-layout/README.md); the inference simulator reads the
table of a plan's G at its pairs, where the file has it (sim/sim_infer.c).

--tables-from CAL.json[.gz]: every decode attention table of CAL.json (what
`tacorun calibrate-infer --decode-attention-only --out-dir` wrote: the plain
tables and one per head layout of the zoo) replaces the same-named table of
each FILE, and the FILE's other tables are left byte for byte as they are.

--per-query-head (with --tables-from): only CAL's tables of decode attention read once per query
head, "attention_decode_pqh[_fp8].g<G>" (`tacorun calibrate-infer --decode-attention-only
--per-query-head`), which replace (or, with --beyond, extend) FILE's; its other tables are left alone.

--beyond (with --tables-from): instead of replacing a table, add to it only CAL's points outside
the range FILE's table measured: a group the table lacks, or more bytes than the table's largest
point of that group. Predictions inside the old range stay as they were; CAL's points inside it
are compared with FILE's (the printed ratio of the points both have: how far the two machines
and days differ), not written.

usage: merge_decode_attn.py --from BENCH.txt [--kernel v1|v2|v3|v2fp8|v3fp8 (v2)] [--by-layout] FILE...
       merge_decode_attn.py --tables-from CAL.json[.gz] [--per-query-head] [--beyond] FILE...
"""
import argparse
import gzip
import json
import re
import sys

from merge_infer import append_note, data_json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src")
    ap.add_argument("--tables-from", dest="cal_src")
    ap.add_argument("--kernel", default="v2", choices=["v1", "v2", "v3", "v2fp8", "v3fp8"])
    ap.add_argument("--beyond", action="store_true",
                    help="with --tables-from: add only the points beyond each table's measured range")
    ap.add_argument("--by-layout", action="store_true",
                    help='write "<table>.g<G>" grouped by batch x KV heads (the bench\'s head layout)')
    ap.add_argument("--per-query-head", dest="pqh", action="store_true",
                    help="with --tables-from: only the attention_decode_pqh[_fp8].g<G> tables")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if (a.src is None) == (a.cal_src is None):
        sys.exit("merge_decode_attn.py: give one of --from BENCH.txt and --tables-from CAL.json")
    if a.beyond and not a.cal_src:
        sys.exit("merge_decode_attn.py: --beyond goes with --tables-from")
    if a.pqh and not a.cal_src:
        sys.exit("merge_decode_attn.py: --per-query-head goes with --tables-from")
    if a.cal_src:
        return copy_tables(a.cal_src, a.files, a.beyond, a.pqh)
    text = open(a.src).read()
    m = re.search(r"^model (\S+): hidden (\d+), heads (\d+) / (\d+)", text, re.M)
    if not m:
        sys.exit(f"merge_decode_attn.py: {a.src}: no model line")
    hidden, heads, kv = int(m.group(2)), int(m.group(3)), int(m.group(4))
    d = hidden // heads
    pts = {}
    fp8 = a.kernel.endswith("fp8")
    name = "attention_decode_fp8" if fp8 else "attention_decode"
    if a.by_layout:
        if heads % kv:
            sys.exit(f"merge_decode_attn.py: {a.src}: {heads} heads over {kv} KV heads is not a whole grouping")
        name += f".g{heads // kv}"
    for b, L, us in re.findall(r"^decode attention b=(\d+) kv=(\d+) %s\s+([\d.]+) us" % a.kernel, text, re.M):
        key = 2 * int(b) * int(L) * kv * (d + 4) if fp8 else 2 * int(b) * int(L) * kv * d * 2
        group = int(b) * kv if a.by_layout else 0
        pts.setdefault((group, key), []).append(float(us))
    if not pts:
        sys.exit(f"merge_decode_attn.py: {a.src}: no {a.kernel} decode attention rows")
    table = [dict({"bytes": k}, **({"group": g} if g else {}), us=round(sum(v) / len(v), 6))
             for (g, k), v in sorted(pts.items())]
    note = f"; {name}: {a.src} ({a.kernel}, {m.group(1)} {heads}/{kv} heads, calibration/merge_decode_attn.py)"
    for path in a.files:
        cal = json.load(open(path))
        cal["kernels"][name] = table
        append_note(cal, note)
        with open(path, "w") as f:
            f.write(data_json(cal) + "\n")
        print(f"{path}: {name}, {len(table)} points from {a.src}")


def add_beyond(old, new):
    """old's points, plus new's outside old's range (per group: a group old lacks, or more
    bytes than old's largest of that group); the ratios new / old of the points both have."""
    top = {}
    for p in old:
        g = p.get("group", 0)
        top[g] = max(top.get(g, 0), p["bytes"])
    have = {(p.get("group", 0), p["bytes"]): p["us"] for p in old}
    added = [p for p in new if p.get("group", 0) not in top or p["bytes"] > top[p.get("group", 0)]]
    ratios = [p["us"] / have[(p.get("group", 0), p["bytes"])] for p in new
              if (p.get("group", 0), p["bytes"]) in have]
    table = sorted(old + added, key=lambda p: (p.get("group", 0), p["bytes"]))
    return table, len(added), ratios


def copy_tables(src, files, beyond=False, pqh=False):
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        cal = json.load(f)
    pattern = r"attention_decode_pqh(_fp8)?\.g\d+" if pqh else r"attention_decode(_fp8)?(\.g\d+)?"
    names = sorted(k for k in cal.get("kernels", {}) if re.fullmatch(pattern, k))
    if not names:
        sys.exit(f"merge_decode_attn.py: {src}: no {'per-query-head ' if pqh else ''}decode attention table")
    what = "points beyond the measured range of" if beyond else ""
    kind = "per query head" if pqh else "plain and per head layout"
    opt = " --per-query-head" if pqh else ""
    note = f"; {what}{' ' if what else ''}{len(names)} decode attention tables ({kind}): tacorun calibrate-infer --decode-attention-only{opt} ({src}, calibration/merge_decode_attn.py{opt}{' --beyond' if beyond else ''})"
    for path in files:
        dst = json.load(open(path))
        for n in names:
            if beyond and n in dst["kernels"]:
                table, added, ratios = add_beyond(dst["kernels"][n], cal["kernels"][n])
                dst["kernels"][n] = table
                r = sorted(ratios)
                print(f"{path}: {n}: {added} points added; the {len(r)} both have, new / old: "
                      + (f"median {r[len(r) // 2]:.3f}, {r[0]:.3f}-{r[-1]:.3f}" if r else "none"))
            else:
                dst["kernels"][n] = cal["kernels"][n]
        append_note(dst, note)
        with open(path, "w") as f:
            f.write(data_json(dst) + "\n")
        print(f"{path}: {len(names)} decode attention tables from {src}")


if __name__ == "__main__":
    main()
