#!/usr/bin/env python3
"""table.py — decode attention grouped by batch x KV heads (README): the 26 plans measured with the
two-pass sampling (../sample/run-2026-12-04/) against the predictions made before that run
(../sample/predicted/: decode attention by KV bytes, Llama-3 8B's layout) and after it, from the
calibration benchmark's grouped tables (predicted/), or between any two prediction folders laid out as
experiments/infer/v3/small/predict_all.sh writes them (v3-first/first-of-process, v3-on, v3-eager).
Markdown on stdout.
usage: experiments/infer/v3/attn-layout/table.py [BEFORE AFTER [LABEL_BEFORE LABEL_AFTER]]
"""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("sample_table", os.path.join(os.path.dirname(here), "sample", "table.py"))
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)


def main():
    meas = st.measured(os.path.join(os.path.dirname(here), "sample", "run-2026-12-04"))
    before, after = os.path.join(os.path.dirname(here), "sample", "predicted"), os.path.join(here, "predicted")
    labels = ("before (by KV bytes)", "after (per head layout, grouped by batch x KV heads)")
    if len(sys.argv) >= 3:
        before, after = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 5:
        labels = (sys.argv[3], sys.argv[4])
    print("| plan | TPOT graph ms | error before | error after | TPOT eager ms | error before | error after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    err = {k: ([], []) for k in ("ttft", "graph", "eager")}
    for n in sorted(meas, key=st.key):
        pb, pa = st.pred(before, n), st.pred(after, n)
        for i, k in enumerate(("ttft", "graph", "eager")):
            err[k][0].append(pb[i] / meas[n][i] - 1)
            err[k][1].append(pa[i] / meas[n][i] - 1)
        print(f"| {n} | {1e3 * meas[n][1]:.3f} | {100 * err['graph'][0][-1]:+.1f} % | {100 * err['graph'][1][-1]:+.1f} % | "
              f"{1e3 * meas[n][2]:.3f} | {100 * err['eager'][0][-1]:+.1f} % | {100 * err['eager'][1][-1]:+.1f} % |")
    st.summary(err, *labels)


if __name__ == "__main__":
    main()
