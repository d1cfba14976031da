"""probe_table.py — one row per pattern from `tacorun probe-interleave` outputs:
the range over ranks and repetitions of the all-reduce's per-call median, its
difference to back to back in the same repetition, and the GEMM times.

usage: python3 probe_table.py probe-shm.txt [more outputs of the same transport...]
"""
import statistics as st
import sys


def main(paths):
    rows = []
    for i, path in enumerate(paths):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if len(f) != 11 or line.startswith("#") or f[1] == "0":  # rep 0: the warm-up sizing
                continue
            rank, rep, pat = int(f[0]), (i, int(f[1])), f[2].strip()
            rows.append((rank, rep, pat, float(f[4]), float(f[8]), float(f[9])))
    b2b = {(r, rep): ar for r, rep, pat, ar, _, _ in rows if pat == "b2b"}
    order = []
    for _, _, pat, _, _, _ in rows:
        if pat not in order:
            order.append(pat)
    print(f"{'pattern':10s} {'n':>3s} {'ar_med_us':>18s} {'vs b2b (same rep)':>22s} {'gemm_burst_us':>15s} {'beside_us':>15s}")
    for pat in order:
        sel = [x for x in rows if x[2] == pat]
        ar = [x[3] for x in sel]
        d = [x[3] - b2b[(x[0], x[1])] for x in sel]
        g = [x[4] for x in sel if x[4] > 0]
        w = [x[5] for x in sel if x[5] > 0]
        fmt = lambda v: f"{min(v):7.1f}-{max(v):7.1f}" if v else f"{'':>15s}"
        ars = fmt(ar) if pat != "gemm" else f"{'':>15s}"
        ds = f"{st.median(d):+8.1f} ({min(d):+.0f}..{max(d):+.0f})" if pat not in ("gemm", "b2b") else ""
        print(f"{pat:10s} {len(sel):3d} {ars:>18s} {ds:>22s} {fmt(g):>15s} {fmt(w):>15s}")


if __name__ == "__main__":
    main(sys.argv[1:])
