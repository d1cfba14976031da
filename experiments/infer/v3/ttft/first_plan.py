#!/usr/bin/env python3
"""first_plan.py — 'from idle' only where the validation run (../run/, ../run_gpu.sh) started from idle.

The 26 measured runs were four `tacorun execute` processes back to back (qwen7b, qwen14b, llama-bf16,
llama-fp8; the plans of each in the order its log lists them), so only a process's first plan can have
started from an idle GPU (and, with the processes back to back, maybe only the call's first one). The
simulator's `--prefill-clock on` prices a plan from idle, `off` at the tables' sustained clock. This script
assembles, from ON_DIR (`--prefill-clock on`, ttft/predicted) and OFF_DIR (`--prefill-clock off`,
ttft/predicted-warm), two prediction folders that follow the run's order:
  OUT/first-of-process: on for the first plan of each of the four processes, off for the rest
  OUT/first-of-call:    on for the call's first plan only (the first of execute-qwen7b), off for the rest
and prints which plans are on.
usage: experiments/infer/v3/ttft/first_plan.py ON_DIR OFF_DIR OUT
"""
import os
import re
import shutil
import sys

here = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(os.path.dirname(here), "run")
ORDER = ("qwen7b", "qwen14b", "llama-bf16", "llama-fp8")  # ../run_gpu.sh's order


def plans(tag):
    return [m.group(1) for line in open(os.path.join(RUN, f"execute-{tag}.txt"))
            if (m := re.match(r"# ((?:llama|qwen)\S+): ", line))]


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: first_plan.py ON_DIR OFF_DIR OUT")
    on, off, out = sys.argv[1:]
    runs = [plans(t) for t in ORDER]
    sets = {"first-of-process": {p[0] for p in runs}, "first-of-call": {runs[0][0]}}
    for name, first in sets.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for p in (x for r in runs for x in r):
            for ext in (".json", ".txt"):
                shutil.copyfile(os.path.join(on if p in first else off, p + ext), os.path.join(d, p + ext))
        print(f"{name}: --prefill-clock on for {', '.join(sorted(first))}; off for the other {sum(map(len, runs)) - len(first)}")


if __name__ == "__main__":
    main()
