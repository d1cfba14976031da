#!/usr/bin/env python3
"""Tables from layer_host.py's JSON: each case, and one rank's layer-micro-batch at the 4k and 16k
rows' shapes (attention over S tokens + MoE over S/4 tokens, TP 4 with sequence parallelism).
Usage: python3 summarize.py measured/layer_host.json"""
import json
import sys


def load(argv, prog):
    """The JSON named by the one argument, or None after a message (usage, or the file's error)."""
    if len(argv) != 2:
        print(f"usage: {prog} LAYER_HOST_JSON", file=sys.stderr)
        return None
    try:
        with open(argv[1]) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return None


def fmt(v, digits=2, wide=1000):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < wide else f"{v:.{max(digits - 2, 0)}f}"
    return str(v)


def table(hdr, rows, digits=2, wide=1000):
    """A Markdown table, then an empty line."""
    print("| " + " | ".join(hdr) + " |")
    print("|" + " --- |" * len(hdr))
    for row in rows:
        print("| " + " | ".join(fmt(v, digits, wide) for v in row) + " |")
    print()


def main():
    r = load(sys.argv, "summarize.py")
    if r is None:
        return 2
    cases = {c["case"]: c for c in r.get("cases", [])}

    def row(c):
        p = c.get("profile", {})
        return [c["case"], c.get("wall_ms"), p.get("gpu_union_ms"), p.get("kernel_sum_ms"),
                c.get("cpu_less_idle_ms"), c.get("cold_fwd_return_ms", 0) + c.get("cold_bwd_return_ms", 0),
                c.get("fwd_return_ms_median"), c.get("bwd_return_ms_median"),
                p.get("kernels_per_iter"), p.get("memcpy_per_iter"), p.get("memset_per_iter"),
                c.get("syncs_reported")]

    table(["case", "wall ms", "GPU busy ms", "kernel sum ms", "CPU ms", "host, GPU idle at start ms",
           "fwd return ms", "bwd return ms", "kernels", "memcpy", "memset", "syncs"],
          [row(c) for c in r.get("cases", [])])
    print("one rank's layer-micro-batch = attn_sdpa_S + moe_S/4 (sums of the two parts)")
    hdr2 = ["S", "wall ms", "GPU busy ms", "CPU ms", "host, GPU idle at start ms", "kernels",
            "host floor ms (attn_sdpa_256 + moe_64, wall)"]
    print("| " + " | ".join(hdr2) + " |")
    print("|" + " --- |" * len(hdr2))
    floor = None
    if "attn_sdpa_256" in cases and "moe_64" in cases:
        floor = cases["attn_sdpa_256"]["wall_ms"] + cases["moe_64"]["wall_ms"]
    for S in (1024, 4096, 16384):
        a, m = cases.get(f"attn_sdpa_{S}"), cases.get(f"moe_{S // 4}")
        if not a or not m:
            continue
        pa, pm = a.get("profile", {}), m.get("profile", {})
        vals = [S, a["wall_ms"] + m["wall_ms"],
                (pa.get("gpu_union_ms") or 0) + (pm.get("gpu_union_ms") or 0),
                a["cpu_less_idle_ms"] + m["cpu_less_idle_ms"],
                a["cold_fwd_return_ms"] + a["cold_bwd_return_ms"] + m["cold_fwd_return_ms"]
                + m["cold_bwd_return_ms"],
                (pa.get("kernels_per_iter") or 0) + (pm.get("kernels_per_iter") or 0), floor]
        print("| " + " | ".join(fmt(v) for v in vals) + " |")
    print()
    if any(k.startswith("moe_grouped_") for k in cases):
        print("experts as grouped GEMMs (TEGroupedMLP's steps; layer_host.py make_grouped_experts):",
              r.get("env", {}).get("grouped_experts", "?"))
        hdr3 = ["S", "attn_sdpa_S + moe_grouped_S/4 wall ms", "GPU busy ms", "layer_grouped_S wall ms",
                "its GPU busy ms", "host floor ms (attn_sdpa_256 + moe_grouped_64, wall)"]
        print("| " + " | ".join(hdr3) + " |")
        print("|" + " --- |" * len(hdr3))
        gfloor = None
        if "attn_sdpa_256" in cases and "moe_grouped_64" in cases:
            gfloor = cases["attn_sdpa_256"]["wall_ms"] + cases["moe_grouped_64"]["wall_ms"]
        for S in (256, 1024, 4096, 16384):
            a, m, l = cases.get(f"attn_sdpa_{S}"), cases.get(f"moe_grouped_{S // 4}"), cases.get(f"layer_grouped_{S}")
            vals = [S, a["wall_ms"] + m["wall_ms"] if a and m else None,
                    (a.get("profile", {}).get("gpu_union_ms") or 0) + (m.get("profile", {}).get("gpu_union_ms") or 0)
                    if a and m else None,
                    l["wall_ms"] if l else None, l.get("profile", {}).get("gpu_union_ms") if l else None, gfloor]
            print("| " + " | ".join(fmt(v) if v is not None else "-" for v in vals) + " |")
        print()
    dense = [k for k in ("layer_dense_256", "layer_dense_4096", "layer_dense_16384", "mlp_dense_64",
                         "mlp_dense_1024", "mlp_dense_4096") if k in cases]
    if dense:
        print("dense layer (SwiGLU MLP, no experts): host floor = attn_sdpa_256 + mlp_dense_64 =",
              fmt(cases["attn_sdpa_256"]["wall_ms"] + cases["mlp_dense_64"]["wall_ms"])
              if "attn_sdpa_256" in cases and "mlp_dense_64" in cases else "-", "ms")
        print()
    for name in ("layer_sdpa_256", "layer_sdpa_4096", "layer_sdpa_16384", "moe_64", "moe_1024",
                 "moe_4096", "attn_sdpa_256", "attn_sdpa_4096", "moe_grouped_64", "moe_grouped_1024",
                 "layer_grouped_256", "layer_grouped_4096", "mlp_dense_64", "layer_dense_256"):
        c = cases.get(name)
        if c and "fwd_breakdown" in c:
            print(name, "forward host ms:",
                  ", ".join(f"{k} {v['ms']:.3f}" for k, v in c["fwd_breakdown"].items()))
    if r.get("errors"):
        print()
        print("errors:", [e["where"] for e in r["errors"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
