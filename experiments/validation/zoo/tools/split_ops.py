#!/usr/bin/env python3
"""split_ops.py RESULT.json... — how a measured result (`tacorun execute --json`) is kept in the tree:
its per-op profile ("ops", thousands of entries) moves to RESULT.ops.json.gz (one op per line,
gzipped, reproducible bytes) and RESULT.json keeps the rest in the data writer's layout, so that
`tacosim compare` and table.py still read it. tools/cmpops.py reads the profile from either place.
A result without "ops" is left as it is. Run from the repository root."""
import gzip
import json
import sys

sys.path.insert(0, "calibration")
from merge_infer import data_json  # noqa: E402  (the layout tacosim and tacorun write)

for path in sys.argv[1:]:
    with open(path) as f:
        result = json.load(f)
    ops = result.pop("ops", None)
    if ops is None:
        continue
    text = "[\n" + ",\n".join(json.dumps(o, separators=(",", ":")) for o in ops) + "\n]\n"
    with open(path[:-5] + ".ops.json.gz", "wb") as f:
        f.write(gzip.compress(text.encode(), 9, mtime=0))
    with open(path, "w") as f:
        f.write(data_json(result) + "\n")
    print(f"{path}: {len(ops)} ops -> {path[:-5]}.ops.json.gz")
