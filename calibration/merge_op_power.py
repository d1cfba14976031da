#!/usr/bin/env python3
"""merge_op_power.py — put an "op_power" section (the power and SM clock each class of a prefill's ops draws and
runs at back to back, measured by the power phase; schema/calibration.h, "op_power") into calibration files of the
same GPU, replacing the one they have and changing no other table. The simulator prices an inference plan's prefill
with it (sim/INFERENCE.md, "The prefill at one clock from its ops' power").

SRC is the power phase's TSV (`tacorun calibrate --only power --power-tsv SRC --power-gemm MxNxK ...
--power-prefill-attn HLxKVLxDxBxS ...`, calibration/power/run_gpu.sh). Every field comes from its rows, nothing is
fitted to a prediction:
  - cap_w, f_max_mhz, idle_w: the TSV's header (the cap, the maximum SM clock, the idle board power);
  - gemm: the median power and the median mean clock of the --power-gemm shapes of more than 64 rows (prefill-sized;
    the tables' own state, each shape back to back);
  - mem: the "mem" row (the memory-bound add back to back);
  - attention_prefill: one entry a --power-prefill-attn row (query / KV heads, head dim, batch, sequence);
  - power_exponent g (how a tensor-core class's power above idle follows the clock, (f / f0)^g): from the reference
    GEMM back to back ("gemm") and its duty rows "gemm-d25" and "gemm-d50" (the GEMM share of their power,
    (P - idle_w x idle share) / GEMM share, at their clock): g = ln((mean share power - idle) / (P_gemm - idle)) /
    ln(mean duty clock / the gemm row's clock);
  - speed_exponent b (a tensor-core op's speed against its table's, (f / f_table)^b): least squares in log space
    through the "gemm" row's clock over the rows that measured a GEMM speed (the mixes and duty rows; not the
    attention mixes);
  - attention_speed_exponent (where the TSV has "amix-" rows: each --power-prefill-attn op mixed with the reference
    GEMM, the attention's speed against its back-to-back row at the mix's clock): least squares in log space
    through each op's back-to-back clock, over the ops whose mix ran at a clock 2 % or more from it, at least 0;
    absent otherwise (the simulator then gives the attention speed_exponent);
  - mem_power_exponent: 0 (--mem-power-exponent), the memory-bound class's power taken as the HBM's, not the SM
    clock's (its clock is f_max back to back: the data holds no slope of it).
FILE's notes get "; op_power: SRC (..., merge_op_power.py)" appended.

usage: merge_op_power.py --from POWER_TSV [--source TEXT] [--mem-power-exponent G] FILE...
"""
import argparse
import math
import re
import statistics
import sys

from merge_infer import merge_section

TOOL = "merge_op_power.py"
COLS = ("name", "gemm", "idle", "gemm_speed", "mem_speed", "power_w", "mhz_mean")
DECODE_ROWS = 64  # a --power-gemm shape of at most this many rows is a decode GEMM, not a prefill's


def fail(src, field, reason):
    sys.exit(f"{TOOL}: {src}: {field}: {reason}")


def read_tsv(src):
    """The header's cap, maximum clock, idle power and GPU, and the rows by name (the columns of COLS)."""
    head, rows, cols = None, {}, None
    try:
        lines = open(src).read().splitlines()
    except OSError as ex:
        fail(src, "file", f"cannot read ({ex.strerror})")
    for n, line in enumerate(lines, 1):
        if line.startswith("# power phase"):
            m = re.search(r"on (.+?): cap ([0-9.]+) W, max SM clock ([0-9.]+) MHz, idle ([0-9.]+) W", line)
            if not m:
                fail(src, f"line {n}", "the header does not say the GPU, cap, max SM clock and idle power")
            head = (m.group(1), float(m.group(2)), float(m.group(3)), float(m.group(4)))
            continue
        if line.startswith("#") or not line.strip():
            continue
        f = line.split("\t")
        if f[0] == "name":
            cols = {c: f.index(c) for c in COLS if c in f}
            if len(cols) != len(COLS):
                fail(src, f"line {n}", f"the column row lacks {sorted(set(COLS) - set(cols))}")
            continue
        if cols is None:
            fail(src, f"line {n}", "a row before the column row")
        try:
            rows[f[0]] = {c: (f[i] if c == "name" else float(f[i])) for c, i in cols.items()}
        except (IndexError, ValueError):
            fail(src, f"line {n}", "a row with a missing or non-numeric column")
    if head is None:
        fail(src, "header", "no \"# power phase ... on GPU: cap ... W, max SM clock ... MHz, idle ... W\" line")
    return head, rows


def need(src, rows, name):
    if name not in rows:
        fail(src, name, "no such row (run the whole power phase, not --power-tsv of a part)")
    return rows[name]


def power_exponent(src, rows, idle):
    ref = need(src, rows, "gemm")
    duty = [need(src, rows, n) for n in ("gemm-d25", "gemm-d50")]
    share = [(d["power_w"] - idle * d["idle"]) / d["gemm"] for d in duty]
    f = statistics.mean(d["mhz_mean"] for d in duty)
    if not (ref["power_w"] > idle and statistics.mean(share) > idle and f > ref["mhz_mean"]):
        fail(src, "gemm-d25, gemm-d50", "their GEMM share's power and clock do not rise above the gemm row's")
    return math.log((statistics.mean(share) - idle) / (ref["power_w"] - idle)) / math.log(f / ref["mhz_mean"])


def speed_exponent(src, rows):
    f0 = need(src, rows, "gemm")["mhz_mean"]
    num = den = 0.0
    for name, r in rows.items():
        if name.startswith(("attn-", "amix-")) or re.match(r"gemm-\d+x", name) or not r["gemm_speed"] > 0:
            continue
        x = math.log(r["mhz_mean"] / f0)
        num, den = num + math.log(r["gemm_speed"]) * x, den + x * x
    if not den > 0:
        fail(src, "gemm_speed", "no row measured a GEMM speed at a clock other than the gemm row's")
    return num / den


def attention_speed_exponent(rows):
    """The attention's speed law from its mixes, or None where the TSV has no mix that moved the clock."""
    num = den = 0.0
    for name, r in rows.items():
        b2b = rows.get("attn-" + name[5:]) if name.startswith("amix-") else None
        if not b2b or not r["mem_speed"] > 0:
            continue
        x = math.log(r["mhz_mean"] / b2b["mhz_mean"])
        if abs(x) < math.log(1.02):
            continue
        num, den = num + math.log(r["mem_speed"]) * x, den + x * x
    return num / den if den > 0 else None


def section(src, source, mem_g):
    (gpu, cap, fmax, idle), rows = read_tsv(src)
    shapes = [r for n, r in rows.items() if re.fullmatch(r"gemm-\d+x\d+x\d+", n) and int(n[5:].split("x")[0]) > DECODE_ROWS]
    if not shapes:
        fail(src, "gemm-MxNxK", f"no --power-gemm shape of more than {DECODE_ROWS} rows")
    attn = []
    for n, r in rows.items():
        m = re.fullmatch(r"attn-(\d+)x(\d+)x(\d+)x(\d+)x(\d+)", n)
        if m:
            h, kv, d, b, s = map(int, m.groups())
            attn.append({"heads": h, "kv_heads": kv, "head_dim": d, "batch": b, "seq": s,
                         "power_w": round(r["power_w"], 2), "mhz": round(r["mhz_mean"], 1)})
    if not attn:
        fail(src, "attn-HLxKVLxDxBxS", "no --power-prefill-attn row")
    mem = need(src, rows, "mem")
    b_attn = attention_speed_exponent(rows)
    sec = {
        "gpu": gpu, "source": source or src, "cap_w": cap, "f_max_mhz": fmax, "idle_w": idle,
        "power_exponent": round(power_exponent(src, rows, idle), 4), "mem_power_exponent": mem_g,
        "speed_exponent": round(speed_exponent(src, rows), 4),
        "gemm": {"power_w": round(statistics.median(r["power_w"] for r in shapes), 2),
                 "mhz": round(statistics.median(r["mhz_mean"] for r in shapes), 1)},
        "mem": {"power_w": round(mem["power_w"], 2), "mhz": round(mem["mhz_mean"], 1)},
        "attention_prefill": sorted(attn, key=lambda a: (a["head_dim"], a["heads"], a["kv_heads"], a["batch"], a["seq"])),
    }
    if b_attn is not None:
        sec["attention_speed_exponent"] = round(max(b_attn, 0.0), 4)
    return gpu, sec


def main():
    ap = argparse.ArgumentParser(description="put an op_power section into calibration files")
    ap.add_argument("--from", dest="src", required=True, help="the power phase's TSV (--power-tsv)")
    ap.add_argument("--source", default="", help="what the section says it came from (default: the TSV's path)")
    ap.add_argument("--mem-power-exponent", type=float, default=0.0,
                    help="the memory-bound class's power against the SM clock, (f / f0)^G (default 0)")
    ap.add_argument("--print", action="store_true", help="print the section and write no file")
    ap.add_argument("files", nargs="*", help="calibration files of the TSV's GPU")
    a = ap.parse_args()
    gpu, sec = section(a.src, a.source, a.mem_power_exponent)
    if a.print or not a.files:
        import json
        print(json.dumps(sec, indent=1))
        return
    note = f"; op_power: {sec['source']} ({len(sec['attention_prefill'])} attention rows, {TOOL})"
    for path in merge_section(TOOL, a.src, {"gpu": gpu}, a.files, "op_power", sec, note):
        print(f"{path}: op_power section (GEMMs {sec['gemm']['power_w']} W at {sec['gemm']['mhz']} MHz, "
              f"{len(sec['attention_prefill'])} attention rows, g {sec['power_exponent']}, b {sec['speed_exponent']}) "
              f"from {a.src}")


if __name__ == "__main__":
    main()
