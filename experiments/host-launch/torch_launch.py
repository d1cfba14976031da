"""torch_launch.py - PyTorch eager's host cost per op on the GPU it runs on, measured the way
`tacorun calibrate --only host` measures the executor's (runtime/calibrate/calibrate_host.c): the GPU
idle at the start of each repetition, N ops issued back to back, host wall clock / N; median of 21.
Ops: torch.add of 256 bf16 elements (out=), torch.mm 64 x 64 x 64 bf16, F.linear 64 -> 64 with bias,
and the gap on the GPU between a device-to-host copy the host waits for (.item()) and the next op.
Prints one line per op; with --json OUT also writes them. Not part of the simulator: a user's figure
for the plan's host_launch_us (sim/README.md)."""
import json, statistics, sys, time
import torch
import torch.nn.functional as F

N, REPS = 200, 21
dev = torch.device("cuda")
x = torch.zeros(256, dtype=torch.bfloat16, device=dev)
y = torch.empty_like(x)
a = torch.zeros(64, 64, dtype=torch.bfloat16, device=dev)
b = torch.zeros_like(a)
c = torch.empty_like(a)
bias = torch.zeros(64, dtype=torch.bfloat16, device=dev)


def per_op(fn):
    fn()
    torch.cuda.synchronize()
    host, gpu = [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(REPS):
        torch.cuda.synchronize()
        e0.record()
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        t1 = time.perf_counter()
        e1.record()
        e1.synchronize()
        host.append((t1 - t0) * 1e6 / N)
        gpu.append(e0.elapsed_time(e1) * 1e3 / N)
    return statistics.median(host), statistics.median(gpu)


def sync_gap():
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gaps = []
    for _ in range(REPS):
        torch.cuda.synchronize()
        s = x.sum()
        e0.record()
        s.item()  # device-to-host copy, waited for
        e1.record()
        torch.add(x, x, out=y)
        e1.synchronize()
        gaps.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(gaps)


rows = {
    "torch.add 256 bf16": per_op(lambda: torch.add(x, x, out=y)),
    "torch.mm 64x64x64 bf16": per_op(lambda: torch.mm(a, b, out=c)),
    "F.linear 64->64 bf16 +bias": per_op(lambda: F.linear(a, b, bias)),
}
out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "launches": N, "reps": REPS, "ops": {}}
for k, (h, g) in rows.items():
    print(f"{k}: host {h:.2f} us per op, GPU span {g:.2f} us per op")
    out["ops"][k] = {"host_us": round(h, 3), "gpu_us": round(g, 3)}
gap = sync_gap()
print(f".item() sync: GPU gap {gap:.2f} us")
out["item_sync_gap_us"] = round(gap, 3)
if len(sys.argv) > 2 and sys.argv[1] == "--json":
    json.dump(out, open(sys.argv[2], "w"), indent=1)
