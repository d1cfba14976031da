#!/usr/bin/env python3
"""experiments/infer/xfer-attn/h100_check.py OLD_TACOSIM NEW_TACOSIM

The one check of the transfer of the keyed prefill attention tables against a measurement: both shipped files
time the same points of "attention_prefill.d128.s<S>" (Llama-3 8B, Qwen2.5 7B and 14B at TP 1, Llama-3 8B at
TP 2, batch 1-64; calibration/h100/README.md), on an H200 and on an H100, two GPUs of the same BF16 peak and
SMs and 4,800 / 3,350 GB/s of HBM. Each binary's `tacosim derive-calibration` moves one file's tables onto the
other GPU; each moved point is compared with that GPU's measured one (error = moved / measured - 1). Prints,
per table and over all, the measured ratio H100 / H200 and the median and range of the error of each binary."""
import json, os, statistics as st, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
H200 = os.path.join(ROOT, "calibration", "h200-nvlink.json")
H100 = os.path.join(ROOT, "calibration", "h100-sxm-nvlink.json")


def keyed(path):
    k = json.load(open(path))["kernels"]
    return {n: {p["flops"]: p["us"] for p in t} for n, t in k.items() if n.startswith("attention_prefill.d")}


def derive(binary, src, gpu, out):
    subprocess.run([binary, "derive-calibration", "--gpu", gpu, "--from", src, out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return keyed(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bins = [os.path.abspath(b) for b in sys.argv[1:3]]
    m200, m100 = keyed(H200), keyed(H100)
    order = sorted(m200, key=lambda n: int(n.split(".s")[1]))
    with tempfile.TemporaryDirectory() as tmp:
        for src, dst, gpu, mdst, label in ((H200, H100, "H100-SXM", m100, "H200 -> H100"),
                                           (H100, H200, "H200-SXM", m200, "H100 -> H200")):
            moved = [derive(b, src, gpu, os.path.join(tmp, "%d.json" % i)) for i, b in enumerate(bins)]
            print("%s: tables of %s moved onto the %s, against its own measured tables" %
                  (label, os.path.basename(src), gpu))
            print("%-30s %4s %13s  %-26s %-26s" % ("table", "n", "H100/H200", "old: median [range]",
                                                    "new: median [range]"))
            every = [[], []]
            for name in order:
                pts = [f for f in mdst[name] if f in moved[0].get(name, {})]
                ratio = [m100[name][f] / m200[name][f] for f in pts if f in m100[name] and f in m200[name]]
                cols = []
                for i in range(2):
                    e = [100 * (moved[i][name][f] / mdst[name][f] - 1) for f in pts]
                    every[i] += e
                    cols.append("%+6.1f%% [%+.1f, %+.1f]" % (st.median(e), min(e), max(e)))
                print("%-30s %4d %6.2f..%5.2f  %-26s %-26s" % (name, len(pts), min(ratio), max(ratio), *cols))
            print("%-30s %4d %13s  %-26s %-26s" % ("all", len(every[0]), "", *["%+6.1f%% (mean |e| %.1f%%)" % (
                st.median(e), st.mean(map(abs, e))) for e in every]))
            print()


if __name__ == "__main__":
    main()
