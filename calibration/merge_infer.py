#!/usr/bin/env python3
"""merge_infer.py — put the inference tables of a `tacorun calibrate-infer`
file into a training calibration file without changing any table the
training simulator reads.

From SRC (a file calibrate-infer extended, gzipped or not, e.g. experiments/infer/calibration/
h200-nvlink.json) into FILE:
  - the decode GEMMs: every SRC point with m <= 64 whose shape FILE lacks, into
    FILE's "gemm_infer" list, which only inference predictions read (in
    "gemm" they would bracket and floor the training lookups and move the
    transfer of training GEMMs to other GPUs: experiments/published/README.md);
  - "attention_decode" and "attention_decode_fp8" (by KV-cache bytes; grouped
    by batch x KV heads where SRC is) and their tables per head layout
    ("attention_decode[_fp8].g<G>"), the per-query-head tables of
    --per-query-head ("attention_decode_pqh[_fp8].g<G>") and any "attention_prefill.d<D>.s<S>"
    tables (prefill attention keyed by head dimension and prompt length);
  - the all-reduce tables calibrate-infer --collectives timed one process per
    GPU as the inference executor runs them (SRC's notes say which), as
    "<name>.infer": the inference simulator reads them in place of "<name>"
    (sim/sim_infer_cal.c), the training simulator never does.
Not taken: SRC's FLOP-keyed "attention_prefill" (it averages prompt lengths;
the simulator prices prefill attention as the executor's unfused program
when no keyed table is there), its decode-sized points of the norm,
add, SwiGLU and embedding tables, and its prefill GEMMs (the 72 measured
inference plans were predicted worse with them: experiments/infer/README.md).
A note naming SRC is appended to FILE's notes (cut to 511 characters).

Options:
  --take LIST     which of decode-gemm, attention-decode, attention-prefill,
                  collectives to take [all four]
  --replace-gemm  SRC's decode GEMMs (m <= 64, shapes not in FILE's training
                  "gemm") replace FILE's "gemm_infer" points of the same shape
                  (for shapes re-timed on purpose) [off: only shapes FILE lacks]

usage: merge_infer.py --from SRC [--take LIST] [--replace-gemm] FILE
"""
import argparse
import gzip
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--take", default="decode-gemm,attention-decode,attention-prefill,collectives")
    ap.add_argument("--replace-gemm", action="store_true")
    ap.add_argument("file")
    a = ap.parse_args()
    take = set(a.take.split(","))
    bad = take - {"decode-gemm", "attention-decode", "attention-prefill", "collectives"}
    if bad:
        print(f"merge_infer.py: --take: unknown {', '.join(sorted(bad))} (want decode-gemm, attention-decode, "
              "attention-prefill, collectives)", file=sys.stderr)
        sys.exit(2)
    src = json.load(gzip.open(a.src, "rt") if a.src.endswith(".gz") else open(a.src))
    cal = json.load(open(a.file))
    if cal.get("gpu") != src.get("gpu"):
        sys.exit(f"merge_infer.py: {a.file} and {a.src} are not of the same GPU")
    key = lambda g: (g["m"], g["n"], g["k"])
    train = {key(g) for g in cal["gemm"]}
    infer = cal.get("gemm_infer", [])
    have = train | {key(g) for g in infer}
    gemm, replaced = [], 0
    if "decode-gemm" in take:
        if a.replace_gemm:
            gemm = [g for g in src["gemm"] if g["m"] <= 64 and key(g) not in train]
            new = {key(g) for g in gemm}
            replaced = sum(1 for g in infer if key(g) in new)
            infer = [g for g in infer if key(g) not in new]
        else:
            gemm = [g for g in src["gemm"] if g["m"] <= 64 and key(g) not in have]
    cal["gemm_infer"] = sorted(infer + gemm, key=key)
    kernels = dict(cal["kernels"])
    taken = [k for k in src["kernels"] if (re.fullmatch(r"attention_decode(_fp8)?(\.g\d+)?|attention_decode_pqh(_fp8)?\.g\d+", k) and "attention-decode" in take) or
             (re.fullmatch(r"attention_prefill\.d\d+\.s\d+", k) and "attention-prefill" in take)]
    for k in taken:
        kernels[k] = src["kernels"][k]
    cal["kernels"] = {k: kernels[k] for k in sorted(kernels)}
    colls = dict(cal.get("collectives", {}))  # a one-GPU file has none
    m = re.search(r"(allreduce(?: and allreduce\.taco\d+)?) \((\d+) ranks\) replaced by tacorun calibrate-infer --collectives",
                  src.get("notes", ""))
    moved = []
    if m and "collectives" in take:
        ranks = m.group(2)
        for name in m.group(1).split(" and "):
            if name in src.get("collectives", {}) and ranks in src["collectives"][name]:
                colls[name + ".infer"] = {ranks: src["collectives"][name][ranks]}
                moved.append(f"{name}.infer ({ranks} ranks)")
    for name, per_n in src.get("collectives", {}).items():  # files calibrate-infer wrote with ".infer" tables
        if name.endswith(".infer") and "collectives" in take:
            colls[name] = per_n
            moved.append(name)
    if colls or "collectives" in cal:
        cal["collectives"] = {k: colls[k] for k in sorted(colls)}
    note = (f"; inference tables from {a.src} (calibrate-infer, {src.get('measured_at', '?')}): {len(gemm)} decode GEMMs"
            f"{f' ({replaced} re-timed)' if replaced else ''}, "
            f"{', '.join(short_names(taken))}{', ' if moved else ''}{', '.join(moved)} (calibration/merge_infer.py)")
    append_note(cal, note)
    with open(a.file, "w") as f:
        f.write(data_json(cal) + "\n")
    print(f"{a.file}: {len(gemm)} decode GEMMs ({replaced} replaced), {len(taken)} kernel tables, {len(moved)} collective tables from {a.src}")


def short_names(tables):
    """Table names for a note: the keyed prefill attention tables as one
    "attention_prefill.d<D>.s<S> (N tables, d.., s..)" entry, the others as they are."""
    keyed = [t for t in tables if t.startswith("attention_prefill.d")]
    rest = [t for t in tables if t not in keyed]
    if len(keyed) < 2:
        return tables
    ds = sorted({int(re.search(r"\.d(\d+)", t).group(1)) for t in keyed})
    ss = sorted({int(re.search(r"\.s(\d+)", t).group(1)) for t in keyed})
    return rest + [f"attention_prefill.d<D>.s<S> ({len(keyed)} tables, d {'/'.join(map(str, ds))}, s {ss[0]}..{ss[-1]})"]


def with_section(cal, name, value, before="kernels"):
    """cal with section `name` set to value, placed just before section `before`
    (the writer's order), or last when cal has no such section."""
    out = {}
    for k, v in cal.items():
        if k == name:
            continue
        if k == before:
            out[name] = value
        out[k] = v
    if name not in out:
        out[name] = value
    return out


def merge_section(tool, src_path, src, files, name, value, note):
    """Writes `value` as section `name` of each calibration file in `files`
    (with_section), its notes extended by `note`; refuses a file of another GPU
    than src's. Prints what it did per file."""
    for path in files:
        cal = json.load(open(path))
        if cal.get("gpu") != src.get("gpu"):
            sys.exit(f"{tool}: {path} and {src_path} are not of the same GPU")
        out = with_section(cal, name, value)
        append_note(out, note)
        with open(path, "w") as f:
            f.write(data_json(out) + "\n")
        yield path


def load_bench_target(tool, path, gpu, section, hint):
    """A calibration file a bench's figure goes into: refused (exit naming the tool and the file) when
    it is of another GPU than the bench's or lacks the section the figure belongs to (hint: what to do)."""
    cal = json.load(open(path))
    if cal.get("gpu") != gpu:
        sys.exit(f"{tool}: {path} is of {cal.get('gpu')}, the bench of {gpu}")
    if section not in cal:
        sys.exit(f"{tool}: {path} has no {section} section ({hint})")
    return cal


def write_calibration(path, cal):
    """Writes a calibration file as the merge scripts do (data_json, one trailing newline)."""
    with open(path, "w") as f:
        f.write(data_json(cal) + "\n")


def append_note(cal, note, limit=511):
    """Append note to cal's notes within the schema's limit. The notes are the
    measuring run's clauses, then one "; "-separated clause per merge (naming
    its script, "NAME.py"): where they do not fit, the oldest merge clauses go
    first (one "; ..." marks them), then the oldest others; only if that alone is still too
    long is it cut at a clause (marked ", ..."). The new note is never cut."""
    old = cal.get("notes", "")
    if len(old) + len(note) > limit:
        first, *merges = old.split("; ")
        merges = [m for m in merges if m != "..."]
        while merges and len(first) + len("; ...; " + "; ".join(merges)) + len(note) > limit:
            named = [i for i, m in enumerate(merges) if ".py" in m]  # a merge clause names its script
            merges.pop(named[0] if named else 0)
        if merges:
            old = first + "; ...; " + "; ".join(merges)
        else:
            cut = first[: max(0, limit - len(note) - 10)]
            old = (cut[: max(cut.rfind(", "), 0)] + ", ..." if len(first) + len(note) + 5 > limit else first) + "; ..."
    cal["notes"] = (old + note)[:limit]


def data_json(v, depth=0):
    """The layout tacosim and tacorun write data files in (common/ts_json.h,
    tsj_dump_data): a table point, or any object or array of scalars, on one
    line; the rest one member per line, indented one space per level."""
    kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
    if not any(isinstance(x, (dict, list)) for x in kids):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    pad = " " * (depth + 1)
    if isinstance(v, dict):
        rows = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {data_json(x, depth + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(rows) + "\n" + " " * depth + "}"
    rows = [pad + data_json(x, depth + 1) for x in v]
    return "[\n" + ",\n".join(rows) + "\n" + " " * depth + "]"


if __name__ == "__main__":
    main()
