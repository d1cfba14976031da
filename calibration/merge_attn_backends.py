#!/usr/bin/env python3
"""merge_attn_backends.py — put the "attention_backends" section of an
attn_cudnn.py file (other implementations' attention timed per shape: cuDNN
"fused", FlashAttention-2 "flash", and the same with attention dropout,
"fused_dropout" / "flash_dropout", from attn_cudnn.py --dropout) into
calibration files, replacing the backends the file brings and keeping the
others, changing no other table ("attention_shapes", the
executor's own, is merge_attn.py's and stays as it is). The simulator prices a
plan's attention from the section of its "attention_backend"
(schema_lookup_attn_backend). FILE's notes get "; attention_backends: SRC
(measured_at, ...)" appended (append_note: older notes cut at a clause).

--add: add SRC's points to the file's tables of the same backends instead of replacing them (a
shape the file already has is an error: a second measurement of one shape is not averaged in), so
that a run of longer sequences extends a table measured earlier.

usage: merge_attn_backends.py --from SRC [--add] FILE...
"""
import argparse
import json
import sys

from merge_infer import merge_section

KNOWN = ("fused", "flash", "fused_dropout", "flash_dropout")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--add", action="store_true", help="add the points to the file's tables instead of replacing them")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src = json.load(open(a.src))
    by = {k: v for k, v in src.get("attention_backends", {}).items() if v}
    if not by:
        sys.exit(f"merge_attn_backends.py: {a.src} has no attention_backends points")
    for k in by:
        if k not in KNOWN:
            sys.exit(f"merge_attn_backends.py: {a.src}: attention_backends.{k}: unknown backend ({', '.join(KNOWN)})")
    keys = ("head_dim", "seq", "batch", "heads", "kv_heads", "causal", "fwd_us", "bwd_us")
    by = {k: [{f: p[f] for f in keys} for p in v] for k, v in sorted(by.items())}
    counts = ", ".join(f"{k} {len(v)}" for k, v in by.items())
    # short: the notes hold 511 characters and the older merges' clauses go first when full
    note = f"; attention_backends: {a.src} ({src.get('measured_at', '?')[:10]}, merge_attn_backends.py)"
    if src.get("dropout"):
        note = f"; {', '.join(by)} (p {src['dropout']}): {a.src} (merge_attn_backends.py)"
    shape = ("head_dim", "seq", "batch", "heads", "kv_heads", "causal")
    if a.add:
        note = f"; attention_backends {', '.join(by)} + {counts.replace(',', ' +')} points: {a.src} ({src.get('measured_at', '?')[:10]}, merge_attn_backends.py --add)"
    for path in a.files:  # each file keeps the backends the source does not bring
        kept = json.load(open(path)).get("attention_backends", {})
        add = by
        if a.add:
            add = {}
            for k, v in by.items():
                have = {tuple(p[f] for f in shape) for p in kept.get(k, [])}
                dup = [p for p in v if tuple(p[f] for f in shape) in have]
                if dup:
                    sys.exit(f"merge_attn_backends.py: {path}: attention_backends.{k} already has {len(dup)} of "
                             f"{a.src}'s shapes (first: {dict((f, dup[0][f]) for f in shape)})")
                add[k] = sorted(kept.get(k, []) + v, key=lambda p: tuple(p[f] for f in shape))
        merged = dict(sorted({**kept, **add}.items()))
        # after attention_shapes, before kernels (the writer's order)
        for done in merge_section("merge_attn_backends.py", a.src, src, [path], "attention_backends", merged, note):
            print(f"{done}: attention_backends {counts} from {a.src}; kept {', '.join(k for k in kept if k not in by) or 'none'}")

if __name__ == "__main__":
    main()
