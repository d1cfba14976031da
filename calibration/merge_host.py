#!/usr/bin/env python3
"""merge_host.py — put the "host" section (the executor's launch and
synchronisation costs, `tacorun calibrate --only host`,
runtime/calibrate/calibrate_host.c) into calibration files of the same GPU,
replacing that section if they have one and changing no other table. With
several sources (runs of the same binary on the same GPU) each value is their
mean, point by point (the sync points must have the same waits). FILE's notes
get "; host: SRC... (measured_at, merge_host.py)" appended.

usage: merge_host.py --from SRC [--from SRC2 ...] [--event-from SRC] FILE...
"""
import argparse
import json
import sys

from merge_infer import merge_section


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", action="append", required=True)
    ap.add_argument("--event-from", dest="event_src",
                    help="take event_us (the cudaEventRecord cost) from this run only (a run whose other values "
                         "are not to be averaged in, e.g. one timed beside other work)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    srcs = [json.load(open(p)) for p in a.src]
    hosts = []
    for p, s in zip(a.src, srcs):
        if "host" not in s:
            sys.exit(f"merge_host.py: {p} has no host section")
        if s.get("gpu") != srcs[0].get("gpu"):
            sys.exit(f"merge_host.py: {p} and {a.src[0]} are not of the same GPU")
        hosts.append(s["host"])
    waits = [pt["wait_us"] for pt in hosts[0]["sync"]]
    for p, h in zip(a.src, hosts):
        if [pt["wait_us"] for pt in h["sync"]] != waits:
            sys.exit(f"merge_host.py: {p}: host.sync waits differ from {a.src[0]}'s")
    n = len(hosts)
    mean = lambda xs: round(sum(xs) / n, 4)
    host = {
        "launch_us": mean([h["launch_us"] for h in hosts]),
        "gemm_launch_us": mean([h["gemm_launch_us"] for h in hosts]),
        "sync": [{"wait_us": w, "gap_us": mean([h["sync"][i]["gap_us"] for h in hosts])} for i, w in enumerate(waits)],
    }
    events = [h["event_us"] for h in hosts if "event_us" in h]
    if a.event_src:
        ev = json.load(open(a.event_src)).get("host", {})
        if "event_us" not in ev:
            sys.exit(f"merge_host.py: {a.event_src} has no host.event_us")
        events = [ev["event_us"]]
    if events:
        host["event_us"] = round(sum(events) / len(events), 4)
    # short: the notes hold 511 characters and the older merges' clauses go first when full
    note = f"; host: {a.src[0]} +{n - 1} ({srcs[0].get('measured_at', '?')[:10]}, merge_host.py)"
    for path in merge_section("merge_host.py", a.src[0], srcs[0], a.files, "host", host, note):
        print(f"{path}: host launch {host['launch_us']} us, GEMM launch {host['gemm_launch_us']} us, "
              f"{len(waits)} sync points")


if __name__ == "__main__":
    main()
