"""gemm_duty_probe.py — how fast the GEMMs of the validation model run when the
GPU is not busy all the time (measurement for a clock model; run on the GPU
machine, which has PyTorch; cuBLAS through torch.matmul, BF16).

For each duty cycle d (the fraction of time the GPU computes), one round of
the four GEMMs of a GPT h4096 TP2 layer (tokens 4096: QKV 4096x6144x4096,
attention out 4096x4096x2048, FC1 4096x8192x4096, FC2 4096x4096x8192) is
followed by a GPU-side spin (torch.cuda._sleep) long enough to make the GPU
idle (1 - d) of the time; after 4 s of that to settle the clocks, 3 s are
timed with CUDA events around each round's GEMMs. Prints the mean GEMM time
per round at each duty cycle and its ratio to d = 1 (back to back, the way
tacorun calibrate times them). nvidia-smi's clock log beside it says why.
"""
import sys
import time

import torch

assert torch.cuda.is_available()
dev = torch.device("cuda:0")
torch.manual_seed(0)
shapes = [(4096, 6144, 4096), (4096, 4096, 2048), (4096, 8192, 4096), (4096, 4096, 8192)]
ops = [(torch.randn(m, k, device=dev, dtype=torch.bfloat16), torch.randn(k, n, device=dev, dtype=torch.bfloat16))
       for m, n, k in shapes]
flops = sum(2.0 * m * n * k for m, n, k in shapes)


def gemms():
    for a, b in ops:
        torch.matmul(a, b)


# spin cycles per microsecond: calibrate torch.cuda._sleep against events
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
torch.cuda._sleep(10_000_000)
e.record()
e.synchronize()
cycles_per_us = 10_000_000 / (s.elapsed_time(e) * 1e3)

# one round's GEMM time back to back first (its estimate sets the spin length)
for _ in range(20):
    gemms()
torch.cuda.synchronize()
s.record()
for _ in range(20):
    gemms()
e.record()
e.synchronize()
round_us = s.elapsed_time(e) * 1e3 / 20

duties = [float(x) for x in sys.argv[1:]] or [1.0, 0.8, 0.6, 0.5, 0.3, 0.15]
print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, spin {cycles_per_us:.0f} cycles/us, "
      f"one round of 4 GEMMs {round_us:.1f} us back to back ({flops / round_us / 1e6:.0f} TFLOP/s)")
print("# duty  gemm_us_per_round  TFLOP/s  ratio_to_duty_1  rounds  start_utc")
base = None
for d in duties:
    idle_us = round_us * (1.0 - d) / d
    t_start = time.strftime("%H:%M:%S", time.gmtime())

    def one_round(evs=None):
        if evs:
            evs[0].record()
        gemms()
        if evs:
            evs[1].record()
        if idle_us > 0:
            torch.cuda._sleep(int(idle_us * cycles_per_us))

    t0 = time.time()
    while time.time() - t0 < 4.0:  # settle
        for _ in range(10):
            one_round()
        torch.cuda.synchronize()
    pairs = []
    t0 = time.time()
    while time.time() - t0 < 3.0:
        batch = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
        for ev in batch:
            one_round(ev)
        torch.cuda.synchronize()
        pairs += [a.elapsed_time(b) * 1e3 for a, b in batch]
    pairs.sort()
    med = pairs[len(pairs) // 2]
    if base is None:
        base = med
    print(f"{d:5.2f}  {med:10.1f}  {flops / med / 1e6:7.0f}  {med / base:7.3f}  {len(pairs):6d}  {t_start}", flush=True)
