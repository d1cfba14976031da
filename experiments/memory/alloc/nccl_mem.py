"""Device memory held by NCCL communicators under torch.distributed, step by step, on one GPU.

alloc_frag.py found 7.0 GiB of device memory outside PyTorch's allocator after init_process_group and
Megatron-Core's initialize_model_parallel at world size 1. This script splits that figure: it measures the
device memory in use (cudaMemGetInfo: total - free, less torch's memory_reserved) after the CUDA context,
after init_process_group (eager, with device_id), after the first all-reduce on the world group, after each of
N further one-rank groups' first all-reduce, and after Megatron-Core's initialize_model_parallel (if its source
is given), each in a fresh process, under NCCL's defaults and under the environment variants named on the
command line (for example NCCL_CUMEM_ENABLE=0 or NCCL_NVLS_ENABLE=0, NCCL's own settings).

Usage: python3 nccl_mem.py --out DIR [--groups 8] [--megatron-src DIR] [--variant NAME=ENV,ENV ...]
Writes DIR/nccl_mem.json (every point of every variant) and prints one table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

GIB = 1024.0 ** 3


def child(groups, megatron_src, out_path):
    import torch
    import torch.distributed as dist
    rec = {"points": [], "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}

    def point(what):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        rec["points"].append({"what": what, "device_used": total - free,
                              "reserved": torch.cuda.memory_reserved()})

    torch.cuda.set_device(0)
    x = torch.ones(1 << 20, device="cuda")
    point("context")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    point("init_process_group")
    dist.all_reduce(x)
    point("world all_reduce")
    for i in range(groups):
        g = dist.new_group([0])
        dist.all_reduce(x, group=g)
        point("group %d all_reduce" % (i + 1))
    if megatron_src:
        sys.path.insert(0, megatron_src)
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
        point("megatron initialize_model_parallel")
        n = 0
        for name in dir(parallel_state):
            v = getattr(parallel_state, name)
            if isinstance(v, dist.ProcessGroup):
                n += 1
        rec["megatron_group_globals"] = n
    try:
        rec["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as e:  # the version is a label only
        rec["nccl_version"] = "unknown (%s)" % e
    rec["torch"] = torch.__version__
    dist.destroy_process_group()
    with open(out_path, "w") as f:
        json.dump(rec, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--groups", type=int, default=8, help="one-rank groups created after the world's (default 8)")
    ap.add_argument("--megatron-src", default="", help="folder holding megatron/core (default: none)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=VAR=VAL[,VAR=VAL...]: NCCL settings of one more run (default run: NCCL's own)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.groups, a.megatron_src, a.child)
        return 0
    os.makedirs(a.out, exist_ok=True)
    variants = [("default", {})]
    for v in a.variant:
        name, _, envs = v.partition("=")
        env = dict(e.split("=", 1) for e in envs.split(",") if e)
        variants.append((name, env))
    result = {"groups": a.groups, "megatron_src": bool(a.megatron_src), "variants": []}
    for name, env in variants:
        path = os.path.join(a.out, "nccl_mem-%s.json" % name)
        e = dict(os.environ, **env)
        t = time.time()
        cmd = [sys.executable, __file__, "--out", a.out, "--groups", str(a.groups), "--child", path]
        if a.megatron_src:
            cmd += ["--megatron-src", a.megatron_src]
        rc = subprocess.call(cmd, env=e, timeout=180)
        rec = {"name": name, "env": env, "rc": rc, "wall_s": time.time() - t}
        if rc == 0:
            with open(path) as f:
                rec.update(json.load(f))
        result["variants"].append(rec)
    with open(os.path.join(a.out, "nccl_mem.json"), "w") as f:
        json.dump(result, f, indent=1)
    for v in result["variants"]:
        print("== %s %s rc %d nccl %s" % (v["name"], v["env"], v["rc"], v.get("nccl_version", "-")))
        prev = None
        for p in v.get("points", []):
            outside = (p["device_used"] - p["reserved"]) / GIB
            print("  %-36s outside torch %7.3f GiB  (+%6.3f)" % (p["what"], outside,
                                                             outside - prev if prev is not None else 0.0))
            prev = outside
    return 0


if __name__ == "__main__":
    sys.exit(main())
