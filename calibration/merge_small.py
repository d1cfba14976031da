#!/usr/bin/env python3
"""merge_small.py — the small-kernel tables of `tacorun calibrate-infer
--small-only` (runtime/calibrate/calibrate_small.h) into calibration files of
the same GPU. SRC is the command's standard output, one line a point:
  small TABLE BYTES GROUP ROWS COLS HL KVL D QUEUED_US GRAPH_US
(tab-separated, gzipped or not; GROUP is TACO's G or the row width; 0, as the first run of
2026-12-04 18:55 printed it, means the row width derived from COLS, HL, KVL, D). Each point goes into
"<TABLE>.eager" (QUEUED_US: queued in a stream, as an eager decode step and
the prefill run them) and "<TABLE>.graph" (GRAPH_US: inside a CUDA graph, as
a graph decode step runs them), keyed by BYTES and, as group, TACO's G or the
row width the kernel's rows take (COLS; RoPE: (HL + KVL) x D), since equal
bytes of another width take another time (calibrate_small.h); points of one
(bytes, group) are averaged. These tables replace FILE's tables of the same
names; nothing else changes. The RoPE of a decode step is inference's RoPE fused with the KV-cache
scatter: "rope_scatter_fwd.<mode>" (the first runs printed it as rope_fwd, the training kernel's table); its points
of more than 64 rows (a prefill's batch x prompt, timed since 2026-12-07) go into "rope_scatter_fwd" (QUEUED_US),
the table the prefill reads, joined with the twins as the training tables of the other kernels are. "embedding_fwd.<mode>" is also written as
"embedding.<mode>", the table the simulator reads for the embedding (as
`tacorun calibrate` writes one measurement as "embedding_fwd" and
"embedding"). Only the inference simulator reads them (sim/sim_infer_cal.c,
sim_infer_phase_view, which takes the plan's width of each); the training
simulator's tables stay as they are. FILE's notes get "; small kernels: SRC
(merge_small.py)" appended.

--only TABLE,... merges just those tables (e.g. "argmax", a kernel the
command times since 2026-12-04 21:10 UTC) and keeps FILE's other ".eager" /
".graph" tables as they are.

usage: merge_small.py --from SMALL.tsv [--gpu NAME] [--only TABLE,...] FILE...
"""
import argparse
import gzip
import statistics
import sys

from merge_infer import append_note, load_bench_target, write_calibration


DECODE_MAX_ROWS = 64  # calibrate_small.c's MAX_BATCH: rows above it are a prefill's


def tables_of(path):
    pts = {}
    for n, line in enumerate((gzip.open(path, "rt") if path.endswith(".gz") else open(path)), 1):
        f = line.rstrip("\n").split("\t")
        if not f or f[0] != "small":
            continue
        if len(f) != 11:
            sys.exit(f"merge_small.py: {path}:{n}: want 11 tab-separated fields, got {len(f)}")
        table, x, group, cols, hl, kvl, d = f[1], float(f[2]), int(f[3]), int(f[5]), int(f[6]), int(f[7]), int(f[8])
        queued, graph = float(f[9]), float(f[10])
        if table == "rope_fwd":  # the runs of 2026-12-04 18:55 named the RoPE + KV-scatter kernel so
            table = "rope_scatter_fwd"
        if group == 0:
            group = (hl + kvl) * d if table == "rope_scatter_fwd" else cols
        if table == "rope_scatter_fwd" and int(f[4]) > DECODE_MAX_ROWS:
            # the prefill's RoPE + KV scatter (batch x prompt rows): the table the prefill reads, queued as it runs
            pts.setdefault(table, {}).setdefault((group, x), []).append(queued)
            continue
        names = [table] + (["embedding"] if table == "embedding_fwd" else [])
        for name in names:
            for mode, us in ((".eager", queued), (".graph", graph)):
                pts.setdefault(name + mode, {}).setdefault((group, x), []).append(us)
    if not pts:
        sys.exit(f"merge_small.py: {path}: no \"small\" lines (tacorun calibrate-infer --small-only's output)")
    return {name: [{"bytes": int(x) if x == int(x) else x, "group": g, "us": round(statistics.mean(v), 6)}
                   for (g, x), v in sorted(p.items())] for name, p in pts.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True, help="calibrate-infer --small-only's standard output")
    ap.add_argument("--gpu", default="NVIDIA H200", help="the GPU SRC was timed on (default NVIDIA H200)")
    ap.add_argument("--only", help="comma-separated table names (without .eager/.graph) to merge; default all")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    tables = tables_of(a.src)
    if a.only:
        want = a.only.split(",")
        tables = {k: v for k, v in tables.items() if k.rsplit(".", 1)[0] in want}
        missing = [w for w in want if not any(k.rsplit(".", 1)[0] == w for k in tables)]
        if missing:
            sys.exit(f"merge_small.py: {a.src}: no points of {', '.join(missing)}")
    for path in a.files:
        cal = load_bench_target("merge_small.py", path, a.gpu, "kernels", "a calibration with kernel tables")
        kern = {k: v for k, v in cal["kernels"].items()
                if not k.endswith((".eager", ".graph")) or (a.only and k not in tables)}
        kern.update(tables)
        cal["kernels"] = dict(sorted(kern.items()))
        what = f"small kernels ({a.only})" if a.only else "small kernels"
        append_note(cal, f"; {what}: {a.src} (merge_small.py)")
        write_calibration(path, cal)
        print(f"{path}: {len(tables)} tables, {sum(len(v) for v in tables.values())} points")


if __name__ == "__main__":
    main()
