#!/usr/bin/env python3
"""Tables from layer_host.py --schedule's JSON (RESULTS["schedule"]): each schedule call, the derived host
time per micro-batch, per layer-micro-batch and of the rest, the forward's parts per micro-batch, and the
GPTModel's parts outside the layers timed alone. Usage: python3 schedule_summary.py OUT/layer_host.json"""
import sys

import summarize


def table(hdr, rows):
    summarize.table(hdr, rows, digits=3, wide=100)


def main():
    r = summarize.load(sys.argv, "schedule_summary.py")
    if r is None:
        return 2
    path = sys.argv[1]
    sch = r.get("schedule")
    if not isinstance(sch, dict):
        print(f"{path}: schedule: missing (not a layer_host.py --schedule run)", file=sys.stderr)
        return 2
    env = r.get("env", {})
    print(f"GPU {env.get('gpu', '?')}, torch {env.get('torch', '?')}, Megatron-LM {env.get('megatron_commit', '?')}, "
          f"schedule {sch.get('schedule_func')}, S {sch.get('seq')}, micro-batch size 1, vocabulary per rank "
          f"{sch.get('vocab_per_rank')}, {sch.get('reps')} timed calls per case after {sch.get('warmup')}")
    print()
    print("each schedule call (ms; host = until the call returns, wall = to the GPU's end, CPU less idle):")
    rows = []
    for x in sch.get("runs", []):
        p = x.get("profile_per_call", {})
        rows.append([x["kind"], x["wrap"], x["layers"], x["microbatches"], x.get("host_ms_median"),
                     x.get("host_ms_min"), x.get("wall_ms_median"), x.get("cpu_ms_median"),
                     x.get("back_to_back_wall_ms"), p.get("gpu_union_ms"), p.get("kernels_per_iter"),
                     x.get("syncs_reported")])
    table(["kind", "wrap", "L", "M", "host median", "host min", "wall median", "CPU median",
           "back-to-back wall", "GPU busy", "kernels", "syncs"], rows)
    print("derived (ms): per micro-batch = (T(M 8) - T(M 4)) / 4; per layer-micro-batch = L 2 - L 1; "
          "rest = per micro-batch (L 1) - per layer-micro-batch; fixed = T(M 4) - 4 x per micro-batch")
    rows = []
    for key, d in sch.get("derived", {}).items():
        for q in ("host_ms_median", "host_ms_min", "wall_ms_median", "cpu_ms_median"):
            e = d.get(q)
            if not isinstance(e, dict):
                continue
            pm, fx = e.get("per_microbatch", {}), e.get("fixed_per_call", {})
            rows.append([key, q.replace("_ms", "").replace("_", " "), pm.get("1"), pm.get("2"),
                         e.get("per_layer_microbatch"), e.get("rest_per_microbatch"), fx.get("1"), fx.get("2")])
    table(["kind_wrap", "figure", "per micro-batch, L 1", "per micro-batch, L 2", "per layer-micro-batch",
           "rest per micro-batch", "fixed per call, L 1", "fixed per call, L 2"], rows)
    parts = {}
    for key, d in sch.get("derived", {}).items():
        for k, v in d.items():
            if k.startswith("forward_parts_per_microbatch"):
                parts[key] = v
    if parts:
        print("forward host time per micro-batch by call (ms, L 1, M 8; nested: the schedule's forward_step holds "
              "forward_step_func (get_batch, the model) and the loss function; the model holds the embedding, "
              "decoder, output layer and cross-entropy; backward_step holds the whole backward):")
        names = []
        for v in parts.values():
            for k in v:
                if k not in names:
                    names.append(k)
        keys = list(parts)
        table(["call"] + keys, [[n] + [parts[k].get(n) for k in keys] for n in names])
    if sch.get("parts"):
        print("the GPTModel's parts outside the layers, alone (forward + backward, ms):")
        rows = []
        for c in sch["parts"]:
            p = c.get("profile", {})
            rows.append([c.get("case"), c.get("wall_ms"), c.get("fwd_return_ms_median"),
                         c.get("bwd_return_ms_median"), c.get("cpu_less_idle_ms"), p.get("gpu_union_ms"),
                         p.get("kernels_per_iter"), c.get("syncs_reported")])
        table(["case", "wall", "forward returns", "backward returns", "CPU", "GPU busy", "kernels", "syncs"], rows)
    it = sch.get("interleaved")
    if isinstance(it, str):
        print("interleaved schedule:", it)
    elif isinstance(it, dict):
        vp = it.get("vp")
        print(f"interleaved schedule (forward_backward_pipelining_with_interleaving, pipeline size 1, VP {vp}, "
              f"one layer a chunk, p2p {it.get('p2p')}), ms:")
        rows = []
        for x in it.get("runs", []):
            rows.append([x.get("kind"), x.get("microbatches"), x.get("host_ms_median"), x.get("host_ms_min"),
                         x.get("wall_ms_median"), x.get("cpu_ms_median"), x.get("p2p_calls_per_call")])
        table(["kind", "M", "host median", "host min", "wall median", "CPU median", "p2p calls"], rows)
        rows = []
        for kind, d in it.get("derived", {}).items():
            for q, e in d.items():
                rows.append([kind, q.replace("_ms", "").replace("_", " "), e.get("per_microbatch"),
                             e.get(f"no_pipelining_per_microbatch_L{vp}"), e.get("extra_per_microbatch"),
                             e.get("extra_per_chunk_microbatch"), e.get("fixed_per_call")])
        table(["kind", "figure", "per micro-batch", f"no pipelining, L {vp}, per micro-batch", "extra per micro-batch",
               "extra per extra chunk-micro-batch", "fixed per call"], rows)
    if r.get("errors"):
        print()
        print("errors:", [e.get("where") for e in r["errors"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
