#!/usr/bin/env python3
"""executor_alloc.py — what `tacorun execute` allocates itself on one GPU (the
ALLOC calls of runtime/exec/exec_model.c exec_model_create and the GEMM workspace of
runtime/ops/exec_gemm.c), for the GPT h4096 validation plans of run 10, set against
the GPU memory in use it measured (cudaMemGetInfo, result field
memory_per_gpu_bytes in experiments/validation/run10/measured.tgz, copied into
the table below from experiments/validation/run10/compare/*.txt). The rest is
what a run holds beyond its own buffers: CUDA context, kernel images, cuBLASLt's
state, NCCL's communicator buffers. Prints one row per plan.

GPT h4096: 8 layers, hidden 4096, 32 heads, FFN 16384, vocab 50257 (padded to a
multiple of 128 x tp), seq 2048, micro 2, global 16; the executor omits linear
biases; 128-element alignment of each tensor is ignored (< 0.01 %)."""

GIB = 2 ** 30
h, heads, f, V, S, L, micro = 4096, 32, 16384, 50257, 2048, 8, 2

# plan: (tp, dp, measured GiB from run10/compare/<plan>.txt, communicators)
RUNS = {
    "1gpu-nvlink":     (1, 1, 42.1649, 0),
    "tp2-none-nvlink": (2, 1, 22.5907, 1),
    "tp2-none-shm":    (2, 1, 22.1454, 1),
    "tp2-none-socket": (2, 1, 22.1336, 1),
    "dp2-nvlink":      (1, 2, 42.4422, 1),
    "dp2-none-shm":    (1, 2, 41.9970, 1),
}


def executor_bytes(tp, dp):
    Vp = -(-V // (128 * tp)) * 128 * tp
    hl, fl = h // tp, f // tp
    layer = 4 * h + 3 * h * hl + hl * h + h * fl + fl * h   # ln1, ln2 (g, b); qkv, attn_out, fc1, fc2
    P = L * layer + Vp // tp * h + S * h + 2 * h             # + wte shard, wpe, final norm
    params = P * (2 + 4 + 4 + 4 + 4)                         # w16, master, grad, adam m, v
    T = micro * S
    scores = micro * (heads // tp) * S * S
    micros = 16 // (micro * dp)
    acts = L * (T * (4 * h + 3 * hl + hl + 2 * fl) * 2 + scores * 2 + 4 * T * 4)   # one slot: x_in n1 qkv attn x_mid n2 u a, P, mean/rstd
    head = 3 * T * h * 2 + T * (Vp // tp) * 2 + 2 * T * 4 + 4 * T * 4
    grads = 3 * T * h * 2 + T * 3 * hl * 2 + T * hl * 2 + 2 * T * fl * 2 + 3 * scores * 2
    tokens = 2 * micros * T * 4
    return params + acts + head + grads + tokens + (32 << 20)


if __name__ == "__main__":
    print("%-18s %4s %4s %12s %12s %10s" % ("plan", "tp", "dp", "own GiB", "measured", "rest GiB"))
    for name, (tp, dp, meas, comms) in RUNS.items():
        own = executor_bytes(tp, dp) / GIB
        print("%-18s %4d %4d %12.3f %12.3f %10.3f" % (name, tp, dp, own, meas, meas - own))
