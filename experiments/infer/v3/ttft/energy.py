#!/usr/bin/env python3
"""energy.py — does a boost governed by ENERGY (or windowed power) explain both bench-burst's GEMM bursts
and the executor's prefills of the GPU call of 2026-12-04 13:01 UTC (gpu-2026-12-04/)? Log data only.

nvidia-smi was polled every 20 ms, but its clock and power fields (power.draw.instant, power.draw)
change only every ~100 ms (median interval between changes printed below): every time and power read
from the log is a 100-ms sample, times are brackets [last sample before, first sample after].

Two models, each with ONE constant fitted on the 2,048 x 28,672 x 4,096 GEMM bursts (the shipped profile's):
  E  energy budget: the boost holds until the energy drawn above the cap P_CAP since idle,
     integral of (P_boost - P_CAP) dt, reaches B  ->  t_boost = B / (P_boost - P_CAP)
  W  first-order window: Pavg' = (P - Pavg) / tau from Pavg = P_idle; the clock drops when Pavg
     reaches P_CAP  ->  t_boost = tau * ln((P_boost - P_idle) / (P_boost - P_CAP))
P_CAP = 700 W (power.limit in gpu.txt). Boost duration of the GEMM = bench-burst's own timeline (the bin in
which its speed ratio falls under 1.10, per repetition); P_boost = the first loaded sample at >= 1,900 MHz.
Then both PREDICT, from the prefill's own logged boost power, how long a prefill sequence from idle keeps
1,980 MHz (out of sample), and what the clock / power settles at (both models: average power = P_CAP).

usage (repository root): python3 experiments/infer/v3/ttft/energy.py [DIR (gpu-2026-12-04)]
"""
import datetime
import gzip
import math
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import read_gpu  # noqa: E402
import prefills  # noqa: E402

P_CAP = 700.0
BOOST_MHZ = 1900   # "at boost": the SM clock at or above this (max 1,980)
FULL_MHZ = 1950    # "full boost" (1,965-1,980) for the prefills' bracket
LOADED_W = 300.0   # a sample is "loaded" above this instant power (idle 80-125 W)


def smi_all(d):
    """[(unix_s, mhz, instant_w, avg_w, temp)] (read_gpu.smi_samples keeps only instant power)."""
    base = read_gpu.smi_samples(d)
    out, i = [], 0
    for line in gzip.open(os.path.join(d, "smi.csv.gz"), "rt"):
        f = [x.strip() for x in line.split(",")]
        try:
            nums = [float(re.match(r"[\d.]+", x).group(0)) for x in f[1:]]
            datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
        except (ValueError, AttributeError, IndexError):
            continue
        out.append((base[i][0], nums[0], nums[1], nums[2], nums[3]))
        i += 1
    return out


def updates(smi):
    """Distinct samples: keep a row only when clock or power changed (the sensor's ~100-ms updates)."""
    out = [smi[0]]
    for s in smi[1:]:
        if s[1:4] != out[-1][1:4]:
            out.append(s)
    return out


def bursts(upd, t0, t1):
    """Loaded episodes in [t0, t1] that follow >= 1 s of idle: [(samples...)]."""
    eps, cur, idle_since = [], [], None
    for s in upd:
        if not t0 <= s[0] <= t1:
            continue
        if s[2] > LOADED_W:
            if not cur and idle_since is not None and s[0] - idle_since >= 1.0:
                cur = [s]
            elif cur:
                cur.append(s)
        else:
            if cur:
                eps.append(cur)
                cur = []
            if idle_since is None or s[2] > 200:
                idle_since = s[0]
    if cur:
        eps.append(cur)
    return eps


def burst_drop_ms(path):
    """Per repetition, the start of the first bin whose speed ratio is < 1.10 (bench-burst's timeline)."""
    rows = []
    for line in open(path):
        m = re.match(r"\| (\d+)-(\d+) \|(.*)\|", line)
        if m:
            cells = [c.strip() for c in m.group(3).split("|")]
            rows.append((float(m.group(1)), float(m.group(2)), cells[:3]))
    out = []
    for r in range(3):
        lo = next((a for a, b, c in rows if c[r] and float(c[r]) < 1.10), None)
        out.append(lo)
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "gpu-2026-12-04")
    smi = smi_all(d)
    upd = updates(smi)
    gaps = [b[0] - a[0] for a, b in zip(upd, upd[1:])]
    print(f"sensor: {len(smi)} rows, {len(upd)} distinct; median interval between changes {1e3 * statistics.median(gaps):.0f} ms\n")
    st = {n: (a, b) for n, a, b in read_gpu.stage_times(d)}

    print("## GEMM bursts from idle (bench-burst: 2 s idle, then one GEMM back to back)\n")
    print("| shape | rep | boost: MHz, W (first sample) | after: MHz, W (median of loaded samples at < 1,900 MHz) "
          "| speed < 1.10 from (ms, bench-burst) |")
    print("| --- | ---: | --- | --- | ---: |")
    fit = {}
    for shape in ("2048x28672x4096", "16384x28672x4096", "4096x4096x2048"):
        a, b = st[f"burst {shape}"]
        eps = bursts(upd, a, b)
        drops = burst_drop_ms(os.path.join(d, f"burst-{shape}.txt"))
        for r, ep in enumerate(eps[:3]):
            boost = [s for s in ep if s[1] >= BOOST_MHZ]
            after = [s for s in ep if s[1] < BOOST_MHZ]
            pb = boost[0][2] if boost else float("nan")
            fa = statistics.median(s[1] for s in after) if after else float("nan")
            pa = statistics.median(s[2] for s in after) if after else float("nan")
            dr = drops[r] if r < len(drops) else None
            if shape == "4096x4096x2048":
                dr = None  # its 38-ms burst never left the boost: ratios against its own boost end
            print(f"| {shape} | {r + 1} | {boost[0][1] if boost else float('nan'):.0f}, {pb:.0f} | {fa:.0f}, {pa:.0f} "
                  f"| {dr if dr is not None else 'none (38-ms burst, never left the boost)'} |")
            fit.setdefault(shape, []).append((pb, dr, ep[0][0]))
    # the fit: 2,048 x 28,672 x 4,096, the three repetitions' boost power and drop time
    # only one repetition has a sample inside its boost (the sensor updates every ~100 ms, the boost lasts
    # 50-80 ms): that sample's power stands for the kernel's boost power in all three; the drop = median
    L = fit["2048x28672x4096"]
    pb_g = max(pb for pb, _, _ in L if pb == pb)
    dr_g = statistics.median(dr for _, dr, _ in L if dr is not None)
    idle_w = statistics.median(s[2] for s in upd if s[2] < 200 and s[1] >= BOOST_MHZ)
    B = (pb_g - P_CAP) * dr_g / 1e3
    tau = dr_g / math.log((pb_g - idle_w) / (pb_g - P_CAP))
    print(f"\nfit on 2,048 x 28,672 x 4,096 (P_CAP {P_CAP:.0f} W, idle {idle_w:.0f} W, P_boost {pb_g:.0f} W, "
          f"drop {dr_g:.0f} ms = median of {', '.join(str(dr) for _, dr, _ in L)}): "
          f"E: B = {B:.1f} J (drops 50 / 80 ms: {(pb_g - P_CAP) * 0.05:.1f} / {(pb_g - P_CAP) * 0.08:.1f} J); "
          f"W: tau = {tau:.1f} ms")
    tE = lambda pb: 1e3 * B / (pb - P_CAP) if pb > P_CAP else math.inf
    tW = lambda pb: tau * math.log((pb - idle_w) / (pb - P_CAP)) if pb > P_CAP else math.inf
    print("\nin-sample / other shapes (bench-burst drop against the models, from each burst's first-sample power):\n")
    print("| shape | rep | P_boost W | drop measured (ms) | E predicts | W predicts |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for shape, L in fit.items():
        for r, (pb, dr, _) in enumerate(L):
            if shape == "4096x4096x2048":
                dr = "none (38-ms burst)"
            print(f"| {shape} | {r + 1} | {pb:.0f} | {dr if dr is not None else 'no drop'} | {tE(pb):.0f} | {tW(pb):.0f} |")

    print("\n## Prefills from idle: predicted against logged\n")
    print("Load start = t0 (the first timed prefill's issue time, printed by execute) - the warm-up prefill (taken "
          "as long as the first timed one) - 11 ms (2 decode steps); full boost held = [last sample at >= 1,950 MHz, "
          "first loaded sample below], ms from the load start; the models' inputs = the first two loaded samples' "
          "power (> 600 W) from the load start.\n")
    print("| run | plan | load start (ms from t0) | samples t0 - 250 .. t0 + 300 ms: ms @ MHz, W | first 4 timed "
          "prefills (ms) | full boost held (ms, bracket) | power W (samples) | E predicts (ms) | W predicts (ms) "
          "| after t0 + 300 ms: MHz median, W mean (models: 700 W) |")
    print("| --- | --- | ---: | --- | --- | --- | --- | --- | --- | --- |")
    for f, n, t0, ms in prefills.runs(d):
        pre = [s for s in upd if t0 - 1.0 <= s[0] < t0 - 0.25]
        if not pre or max(s[2] for s in pre) > 600:
            continue  # not from idle (a set-up's short loads under 600 W allowed)
        # the load: warm-up prefill (taken as long as the first timed one) + 2 decode steps (~11 ms) before t0
        ls = t0 - ms[0] / 1e3 - 0.011
        seq = [s for s in upd if t0 - 0.25 <= s[0] <= t0 + sum(ms) / 1e3]
        after = [s for s in seq if s[0] >= ls]
        full = [s for s in seq if s[1] >= FULL_MHZ and (s[0] < ls or s[2] > 600)]
        first_below = next(s for s in after if s[1] < FULL_MHZ)
        last_full = [s for s in full if s[0] < first_below[0]][-1]
        held = (max(0.0, 1e3 * (last_full[0] - ls)), 1e3 * (first_below[0] - ls))
        pbs = [s[2] for s in after if s[2] > 600][:2]
        cells = "; ".join(f"{1e3 * (s[0] - t0):+.0f} @ {s[1]:.0f}, {s[2]:.0f}" for s in seq if s[0] <= t0 + 0.3)
        settled = [s for s in seq if s[0] > t0 + 0.3 and s[2] > LOADED_W]
        sf = statistics.median(s[1] for s in settled)
        sp = statistics.mean(s[2] for s in settled)
        print(f"| {f[:-4]} | {n} | {1e3 * (ls - t0):+.0f} | {cells} | {', '.join(f'{x:.1f}' for x in ms[:4])} "
              f"| {held[0]:.0f}-{held[1]:.0f} | {' / '.join(f'{p:.0f}' for p in pbs)} "
              f"| {' / '.join(f'{tE(p):.0f}' for p in pbs)} | {' / '.join(f'{tW(p):.0f}' for p in pbs)} "
              f"| {sf:.0f}, {sp:.0f} |")

    print("\n## Settled state: every loaded sample after the boost, by run (a power cap would put them at <= ~700 W)\n")
    print("| episode | samples | MHz median | instant W mean, median (min-max) | 1-s average W at the end |")
    print("| --- | ---: | ---: | --- | ---: |")
    for name in ("burst 2048x28672x4096", "burst 16384x28672x4096", "execute-seq", "execute-alone", "execute-alone-qwen7b"):
        a, b = st[name]
        L = [s for s in upd if a <= s[0] <= b and s[2] > LOADED_W and s[1] < BOOST_MHZ]
        if L:
            print(f"| {name} | {len(L)} | {statistics.median(s[1] for s in L):.0f} | {statistics.mean(s[2] for s in L):.0f}, {statistics.median(s[2] for s in L):.0f} "
                  f"({min(s[2] for s in L):.0f}-{max(s[2] for s in L):.0f}) | {L[-1][3]:.0f} |")


if __name__ == "__main__":
    main()
