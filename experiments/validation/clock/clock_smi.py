"""clock_smi.py — the SM clock nvidia-smi saw during each point of the clock
section: matches `tacorun calibrate`'s per-point lines ("[  t s] clock:
measured duty D period P ..." at the end of each point, "back to back" after
each baseline pair) to nvidia-smi's 100 ms log of GPU 0.

Each point runs its GEMM pattern first, then the memory-bound one, for about
the same time, so the first half of the interval since the previous line is
the GEMM's. `offset` is when the calibration's clock started after the stage
stamp (CUDA initialisation, ~0.5 s: the log's first jump from the idle clock).

usage: python3 clock_smi.py STAGE_START_UTC(HH:MM:SS.mmm) clock.log clocks.csv [offset_s]
"""
import re
import sys


def seconds(hms):
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def main(argv):
    t0 = seconds(argv[1]) + (float(argv[4]) if len(argv) > 4 else 0.5)
    smi = []
    for line in open(argv[3]):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 5 or f[1] != "0":
            continue
        try:
            smi.append((seconds(f[0].split()[1]) - t0, float(f[2].split()[0])))
        except (ValueError, IndexError):
            continue
    prev = None
    print("point                                   SM clock of GPU 0 in its GEMM half (MHz): median [min, max], samples")
    for line in open(argv[2]):
        m = re.match(r"\[\s*([\d.]+)s\] clock: (measured duty ([\d.]+) period (\d+)|back to back)", line)
        if not m:
            continue
        t = float(m.group(1))
        if prev is not None:
            lo, hi = prev, prev + 0.5 * (t - prev)
            c = sorted(mhz for ts, mhz in smi if lo <= ts <= hi)
            what = f"duty {m.group(3)} period {int(m.group(4)):6d} us" if m.group(3) else "back to back (baseline)"
            if c:
                print(f"{what:38s}  {c[len(c) // 2]:5.0f} [{c[0]:.0f}, {c[-1]:.0f}], {len(c)}")
        prev = t


if __name__ == "__main__":
    main(sys.argv)
