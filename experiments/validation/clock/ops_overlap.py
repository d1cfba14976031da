"""ops_overlap.py — the TP collectives of a measured validation run, split by
whether a compute kernel ran beside them, against the calibration's
back-to-back time of the same collective.

Reads experiments/validation/measured/<plan>.json (the executor's per-op
timeline of rank 0: name, stream, start_s, dur_s) and prints per kind of TP
collective: how many, their median duration, the median compute time that
overlapped them on the compute stream, the calibration's time for a 32 MiB
collective (given as --calib-us, the table's value for the plan's op), the
extension (median duration - calibrated) and the extension per microsecond
of overlapped compute. With --calib-us it also sums every TP collective's
duration three ways: measured; back to back (the calibrated time, a
collective beside a kernel costing nothing more: the simulator's rule over
host memory in run 8); and the rule proposed in RESULTS.md for shm: delayed
by max(k - 125 us, k / 3), k the time left of the compute kernel that was
already running when the collective started (one that starts after the
collective does not delay it).

usage: python3 ops_overlap.py [--calib-us US] PLAN...   (from experiments/validation/)
"""
import json
import re
import statistics as st
import sys


def main(argv):
    calib = None
    if len(argv) > 2 and argv[1] == "--calib-us":
        calib = float(argv[2])
        argv = argv[2:]
    for plan in argv[1:]:
        ops = [o for o in json.load(open(f"measured/{plan}.json"))["ops"] if o["rank"] == 0]
        compute = [(o["start_s"], o["start_s"] + o["dur_s"]) for o in ops if o["stream"] == "compute"]
        kinds = {}
        sums = [0.0, 0.0, 0.0]  # measured, back to back, proposed rule (us)
        for o in ops:
            if o["stream"] != "tp":
                continue
            s, e = o["start_s"], o["start_s"] + o["dur_s"]
            overlap = sum(max(0.0, min(e, ce) - max(s, cs)) for cs, ce in compute)
            kind = re.sub(r"^(layer\d+\.)?mb\d+\.", "", o["name"])
            kinds.setdefault(kind, []).append((o["dur_s"] * 1e6, overlap * 1e6))
            if calib and o["dur_s"] > 1e-4:  # the 32 MiB collectives (not the loss's scalars)
                left = max([ce - s for cs, ce in compute if cs < s < ce], default=0.0) * 1e6
                sums[0] += o["dur_s"] * 1e6
                sums[1] += calib
                sums[2] += calib + (max(left - 125.0, left / 3.0) if left > 0 else 0.0)
        print(f"== {plan} (rank 0){'' if calib is None else f', calibrated back to back {calib:.1f} us'}")
        print(f"{'collective':34s} {'n':>4s} {'dur_med_us':>10s} {'overlap_med_us':>14s} {'ext_us':>8s} {'ext/overlap':>11s}")
        for kind, v in sorted(kinds.items()):
            dur = st.median(a for a, _ in v)
            ov = st.median(b for _, b in v)
            ext = dur - calib if calib else float("nan")
            ratio = ext / ov if calib and ov > 1 else float("nan")
            print(f"{kind:34s} {len(v):4d} {dur:10.1f} {ov:14.1f} {ext:8.1f} {ratio:11.2f}")
        if calib:
            print(f"sum of TP collective durations: measured {sums[0] / 1e3:.1f} ms, back to back {sums[1] / 1e3:.1f} ms "
                  f"({100 * (sums[1] / sums[0] - 1):+.1f}%), proposed shm rule {sums[2] / 1e3:.1f} ms "
                  f"({100 * (sums[2] / sums[0] - 1):+.1f}%)")


if __name__ == "__main__":
    main(sys.argv)
