#!/usr/bin/env python3
"""Host time of one Megatron-Core MoE transformer layer, forward + backward, on one GPU.

Builds one Megatron-Core TransformerLayer (Megatron-LM's own source, exported into
megatron-src/, ignored by git) at Qwen3-235B-A22B's per-rank shapes of the Megatron-MoE-ModelZoo
H100 rows (TP 4: 16 query heads, 1 KV group, head dim 128, hidden 4,096; EP 8: 16 experts of FFN
1,536 on this rank, top-8; RMSNorm, qk-layernorm, RoPE base 1e6, SwiGLU, no biases, BF16, forced
load balancing, aux loss 1e-3, FP32 router, all-to-all dispatcher) with TP = EP = 1 on one GPU, and
times it:

  wall      per layer-micro-batch, torch.cuda.synchronize() after N iterations
  cpu       process CPU time over the same N iterations (all threads: the autograd engine issues the
            backward from its own thread), less the idle rate of the process measured beforehand
  fwd/bwd   host time until forward() and backward() return (includes waits at host syncs)
  gpu       torch.profiler: kernel time sum and the union of kernel intervals per iteration,
            kernel / memcpy / memset counts, CUDA runtime calls and the time in blocking ones
  syncs     host-device syncs torch reports (torch.cuda.set_sync_debug_mode) in one iteration

Parts: "attn" = input RMSNorm + self-attention + residual + pre-MLP RMSNorm
(TransformerLayer._forward_attention) over S tokens; "moe" = the MoE block + residual
(TransformerLayer._forward_mlp) over T tokens; "layer" = the whole layer over S tokens. Under TP 4
with sequence parallelism each rank's attention runs over the whole sequence S (after the
all-gather) and its MoE block over S/4 tokens (the sequence-parallel shard), so one rank's
layer-micro-batch is attn(S) + moe(S/4). Tiny shapes give the host floor: the GPU work is then too
short to hide the host.

Usage: python3 layer_host.py --out DIR [--iters N] [--quick]
       python3 layer_host.py --out DIR --schedule   (Megatron-Core's training schedule on a GPTModel of 1 and 2
       such layers: the host time per micro-batch beyond the layers; run_schedule, schedule_summary.py)
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "megatron-src"))

RESULTS = {"env": {}, "cases": [], "errors": []}


def log(*a):
    print(*a, flush=True)


def err(where):
    tb = traceback.format_exc()
    log(f"FAILED {where}:\n{tb}")
    RESULTS["errors"].append({"where": where, "traceback": tb[-4000:]})


def env_info():
    e = RESULTS["env"]
    e["python"] = sys.version.split()[0]
    e["platform"] = platform.platform()
    try:
        e["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=20).stdout
    except Exception:
        err("lscpu")
        try:
            with open("/proc/cpuinfo") as f:
                e["cpuinfo_model"] = [l for l in f if l.startswith("model name")][:1]
        except Exception:
            err("cpuinfo")
    e["nproc"] = os.cpu_count()
    try:
        e["affinity"] = len(os.sched_getaffinity(0))
    except Exception:
        pass
    try:
        with open(os.path.join(HERE, "megatron-src", "COMMIT")) as f:
            e["megatron_commit"] = f.read().strip()
    except Exception:
        err("megatron COMMIT file")
    import torch
    e["torch"] = torch.__version__
    e["cuda"] = torch.version.cuda
    e["gpu"] = torch.cuda.get_device_name(0)
    for mod in ["transformer_engine", "apex", "grouped_gemm", "flash_attn", "einops", "numpy",
                "packaging"]:
        try:
            __import__(mod)
            e["import_" + mod] = "ok"
        except Exception as x:
            e["import_" + mod] = f"{type(x).__name__}: {x}"[:300]
    log(json.dumps({k: v for k, v in e.items() if k != "lscpu"}, indent=1))
    log(e.get("lscpu", ""))


def init_megatron():
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(0)
    try:
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
        RESULTS["env"]["dist_backend"] = "nccl"
    except Exception:
        err("init_process_group nccl")
        dist.init_process_group("gloo", rank=0, world_size=1)
        RESULTS["env"]["dist_backend"] = "gloo"
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        expert_model_parallel_size=1)
    model_parallel_cuda_manual_seed(1234)


class SDPACoreAttention:
    """Placeholder; replaced by make_sdpa_class() once torch and Megatron are imported."""


def make_sdpa_class():
    """Core attention through torch's scaled_dot_product_attention (flash / cuDNN kernels), with
    Megatron's core-attention interface: q [s, b, np, hn], k/v [s, b, ng, hn] -> [s, b, np*hn].
    Stands in for TE's DotProductAttention (flash attention) of the published runs, which is not
    installed; its host cost is one torch call plus the layout changes, so it is no model of TE's
    Python overhead."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.module import MegatronModule

    class SDPACore(MegatronModule):
        def __init__(self, config, layer_number=None, attn_mask_type=None, attention_type=None,
                     attention_dropout=None, softmax_scale=None, cp_comm_type=None,
                     model_comm_pgs=None, **kw):
            super().__init__(config=config)
            self.scale = softmax_scale

        def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None):
            q = query.permute(1, 2, 0, 3)
            k = key.permute(1, 2, 0, 3)
            v = value.permute(1, 2, 0, 3)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                               enable_gqa=(q.shape[1] != k.shape[1]))
            s, b = query.shape[0], query.shape[1]
            return o.permute(2, 0, 1, 3).reshape(s, b, -1)

    return SDPACore


def make_config(experts=16, num_layers=1):
    """The TransformerConfig of every case: Qwen3-235B-A22B's per-rank shapes (module docstring)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=num_layers,
        hidden_size=4096,
        # per rank under TP 4: 64 / 4 query heads, 4 / 4 KV groups
        num_attention_heads=16,
        num_query_groups=1,
        kv_channels=128,
        ffn_hidden_size=12288,
        normalization="RMSNorm",
        layernorm_epsilon=1e-6,
        qk_layernorm=True,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        # per rank under EP 8: 128 / 8 experts, each token's top-8 over them
        num_moe_experts=experts or None,
        moe_router_topk=8,
        moe_ffn_hidden_size=1536 if experts else None,  # Megatron asserts None without experts
        moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-3,
        moe_router_pre_softmax=False,
        moe_router_dtype="fp32",
        moe_router_force_load_balancing=True,
        moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=False,          # TE / grouped_gemm not installed: SequentialMLP
        moe_permute_fusion=False,        # needs TE
        apply_rope_fusion=False,         # needs TE or apex
        masked_softmax_fusion=False,     # needs Megatron's compiled kernels
        bias_activation_fusion=False,    # torch.compile'd in Megatron: left out (dynamic shapes)
        bias_dropout_fusion=False,
        gradient_accumulation_fusion=False,  # needs apex / TE
        persist_layer_norm=False,
        sequence_parallel=False,
        tensor_model_parallel_size=1,
        expert_model_parallel_size=1,
    )


def build_layer(core, experts=16):
    """experts 0: the same layer with a dense SwiGLU MLP of the config's ffn_hidden_size (12,288), for the host
    time of a dense layer's calls (the GPU time of these shapes stands for no particular model)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module

    cfg = make_config(experts)
    spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False, qk_layernorm=True,
                                    normalization="RMSNorm")
    if core == "sdpa":
        spec.submodules.self_attention.submodules.core_attention = make_sdpa_class()
    # Megatron's Float16Module casts the whole model with .bfloat16() (the norms are built in FP32)
    layer = build_module(spec, config=cfg, layer_number=1).cuda().bfloat16()
    layer.train()
    return cfg, layer


def make_grouped_experts(cfg, n_experts, log_impl):
    """A stand-in for Megatron-Core's TEGroupedMLP (experts.py at the commit above, TEGroupedMLP.forward):
    the same steps in the same order (tokens_per_expert.tolist(), a host sync; fc1 over all experts in one
    grouped GEMM; SwiGLU; times the routing probabilities; fc2 in one grouped GEMM), with PyTorch's grouped
    GEMM in place of TE's GroupedLinear (TE is not installed on the GPU machine). TE's GroupedLinear loops
    over the experts' GEMMs in C++; this one issues one call per GEMM: its host time is a lower bound of
    TE's by a few microseconds per expert and GEMM."""
    import torch

    H, F = cfg.hidden_size, cfg.moe_ffn_hidden_size
    dev = torch.device("cuda")

    def mm_loop(a, b, sizes):
        outs, o = [], 0
        for g, n in enumerate(sizes):
            outs.append(a[o:o + n] @ b[g])
            o += n
        return torch.cat(outs) if outs else a.new_zeros(0, b.shape[-1])

    def wgrad_loop(x, dy, sizes):
        outs, o = [], 0
        for n in sizes:
            outs.append(x[o:o + n].t() @ dy[o:o + n])
            o += n
        return torch.stack(outs)

    def grouped_ok():
        if not hasattr(torch, "_grouped_mm"):
            return "torch._grouped_mm: absent"
        try:
            sizes = [5, 48, 0, 75]  # not multiples of 16, an empty expert: as routing gives them
            offs = torch.tensor(sizes, device=dev).cumsum(0).to(torch.int32)
            a = torch.randn(sum(sizes), 64, device=dev, dtype=torch.bfloat16)
            b = torch.randn(len(sizes), 64, 32, device=dev, dtype=torch.bfloat16)
            dy = torch.randn(sum(sizes), 32, device=dev, dtype=torch.bfloat16)
            y = torch._grouped_mm(a, b, offs=offs)
            dx = torch._grouped_mm(dy, b.transpose(-2, -1), offs=offs)
            dw = torch._grouped_mm(a.t(), dy, offs=offs)
            for got, ref in ((y, mm_loop(a, b, sizes)), (dx, mm_loop(dy, b.transpose(-2, -1), sizes)),
                             (dw, wgrad_loop(a, dy, sizes))):
                err = (got.float() - ref.float()).norm() / max(ref.float().norm().item(), 1e-6)
                if not err < 2e-2:
                    return f"torch._grouped_mm: rel. error {err:.3g}"
            return None
        except Exception as e:  # noqa: BLE001 (any failure selects the loop)
            return f"torch._grouped_mm: {type(e).__name__}: {e}"

    why = grouped_ok()
    grouped = why is None
    log_impl("grouped_mm" if grouped else "mm loop (" + why + ")")

    class GroupedLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, offs, sizes):
            ctx.save_for_backward(x, w, offs)
            ctx.sizes = sizes
            return torch._grouped_mm(x, w, offs=offs) if grouped else mm_loop(x, w, sizes)

        @staticmethod
        def backward(ctx, dy):
            x, w, offs = ctx.saved_tensors
            dy = dy.contiguous()
            if grouped:
                dx = torch._grouped_mm(dy, w.transpose(-2, -1), offs=offs)
                dw = torch._grouped_mm(x.t(), dy, offs=offs)
            else:
                dx = mm_loop(dy, w.transpose(-2, -1), ctx.sizes)
                dw = wgrad_loop(x, dy, ctx.sizes)
            return dx, dw, None, None

    class GroupedExperts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(n_experts, H, 2 * F, device=dev, dtype=torch.bfloat16) * 0.02)
            self.w2 = torch.nn.Parameter(torch.randn(n_experts, F, H, device=dev, dtype=torch.bfloat16) * 0.02)

        def forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
            sizes = tokens_per_expert.tolist()          # TEGroupedMLP.forward's host sync
            offs = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(device=dev, dtype=torch.int32,
                                                                       non_blocking=True)
            probs = permuted_probs.unsqueeze(-1)
            x = permuted_local_hidden_states
            h = GroupedLinear.apply(x, self.w1, offs, sizes)
            a, b = torch.chunk(h, 2, dim=-1)
            h = (cfg.activation_func(a) * b * probs).to(x.dtype)
            return GroupedLinear.apply(h, self.w2, offs, sizes), None

    return GroupedExperts()


def parse_trace(path, iters):
    with open(path) as f:
        tr = json.load(f)
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    kern, mcpy, mset = [], [], []
    rt_count, rt_time = {}, {}
    n_cpu_op = 0
    iter_spans = []
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        name = e.get("name", "")
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        if cat == "kernel":
            kern.append((ts, ts + dur, name))
        elif cat == "gpu_memcpy":
            mcpy.append((ts, ts + dur, name))
        elif cat == "gpu_memset":
            mset.append((ts, ts + dur, name))
        elif cat in ("cuda_runtime", "cuda_driver"):
            rt_count[name] = rt_count.get(name, 0) + 1
            rt_time[name] = rt_time.get(name, 0.0) + dur
        elif cat == "cpu_op":
            n_cpu_op += 1
        elif cat == "user_annotation" and name == "iteration":
            iter_spans.append(dur)
    allgpu = sorted([(a, b) for a, b, _ in kern + mcpy + mset])
    union, cur_a, cur_b = 0.0, None, None
    for a, b in allgpu:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                union += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        union += cur_b - cur_a
    ksum = sum(b - a for a, b, _ in kern)
    by_name = {}
    for a, b, n in kern:
        s = by_name.setdefault(n[:90], [0, 0.0])
        s[0] += 1
        s[1] += b - a
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:12]
    blocking = [n for n in rt_time if "Synchronize" in n or n in ("cudaMemcpy",)]
    launch_names = [n for n in rt_count if "Launch" in n or "launch" in n]
    return {
        "kernels_per_iter": len(kern) / iters,
        "memcpy_per_iter": len(mcpy) / iters,
        "memset_per_iter": len(mset) / iters,
        "kernel_sum_ms": ksum / iters / 1e3,
        "gpu_union_ms": union / iters / 1e3,
        "cpu_ops_per_iter": n_cpu_op / iters,
        "launch_calls_per_iter": sum(rt_count[n] for n in launch_names) / iters,
        "launch_call_ms_per_iter": sum(rt_time[n] for n in launch_names) / iters / 1e3,
        "blocking_calls": {n: rt_count[n] / iters for n in blocking},
        "blocking_ms_per_iter": sum(rt_time[n] for n in blocking) / iters / 1e3,
        "memcpyasync_ms_per_iter": rt_time.get("cudaMemcpyAsync", 0.0) / iters / 1e3,
        "memcpyasync_calls_per_iter": rt_count.get("cudaMemcpyAsync", 0) / iters,
        "profiled_iter_host_ms": (sum(iter_spans) / len(iter_spans) / 1e3) if iter_spans else None,
        "runtime_calls_per_iter": {n: c / iters for n, c in sorted(rt_count.items(),
                                                                   key=lambda kv: -kv[1])[:15]},
        "top_kernels": [[n, c / iters, t / iters / 1e3] for n, (c, t) in top],
    }


def idle_cpu_rate():
    t0, c0 = time.perf_counter(), time.process_time()
    time.sleep(1.0)
    return (time.process_time() - c0) / (time.perf_counter() - t0)


def wrap_targets(layer):
    """(label, object, attribute) of the calls whose host time the forward breakdown records."""
    mlp = layer.mlp
    t = [("input_layernorm", layer.input_layernorm, "forward"),
         ("self_attention", layer.self_attention, "forward"),
         ("core_attention", layer.self_attention.core_attention, "forward"),
         ("pre_mlp_layernorm", layer.pre_mlp_layernorm, "forward"),
         ("moe" if hasattr(mlp, "router") else "mlp", mlp, "forward")]
    if hasattr(mlp, "router"):
        t += [("router", mlp.router, "forward"),
              ("dispatch", mlp.token_dispatcher, "token_permutation"),
              ("experts", mlp.experts, "forward"),
              ("combine", mlp.token_dispatcher, "token_unpermutation")]
    return t


def forward_breakdown(step, targets, iters):
    """Host time of each wrapped call in the forward (no synchronisation added; a call that holds a
    host sync includes the wait), averaged over iters steps."""
    import torch
    acc = {lbl: 0.0 for lbl, _, _ in targets}
    cnt = {lbl: 0 for lbl, _, _ in targets}
    saved = []
    for lbl, obj, attr in targets:
        orig = getattr(obj, attr)

        def make(orig=orig, lbl=lbl):
            def w(*a, **k):
                t = time.perf_counter()
                r = orig(*a, **k)
                acc[lbl] += time.perf_counter() - t
                cnt[lbl] += 1
                return r
            return w
        saved.append((obj, attr, attr in obj.__dict__, obj.__dict__.get(attr)))
        setattr(obj, attr, make())
    try:
        torch.cuda.synchronize()
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    finally:
        for obj, attr, had, old in saved:
            if had:
                setattr(obj, attr, old)
            else:
                delattr(obj, attr)
    return {lbl: {"ms": acc[lbl] / iters * 1e3, "calls": cnt[lbl] / iters}
            for lbl in acc if cnt[lbl]}


def sync_report(run, rec, where):
    """The host-device syncs torch reports (torch.cuda.set_sync_debug_mode) while run() runs once, into rec."""
    import torch
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode(1)
            run()
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
        msgs = [str(x.message).split("\n")[0][:160] for x in w]
        rec["syncs_reported"] = len([m for m in msgs if "synchroniz" in m.lower()])
        rec["sync_messages"] = sorted(set(msgs))[:10]
    except Exception:
        torch.cuda.set_sync_debug_mode(0)
        err(where)


def profile_runs(run, n, name):
    """torch.profiler over n calls of run() (each marked "iteration"), parsed by parse_trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            with record_function("iteration"):
                run()
        torch.cuda.synchronize()
    path = f"/tmp/trace_{name}.json"
    prof.export_chrome_trace(path)
    try:
        return parse_trace(path, n)
    finally:
        os.remove(path)


def measure(name, step, iters, warmup, prof_iters, idle_rate, extra, targets=None):
    import torch
    rec = {"case": name, **extra}
    log(f"--- {name} {extra}")
    try:
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        # unprofiled: wall, CPU, per-phase host return times
        fwd_t, bwd_t = [], []
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(iters):
            a = time.perf_counter()
            b = step(fwd_mark=True)
            c = time.perf_counter()
            fwd_t.append(b - a)
            bwd_t.append(c - b)
        t_issue = time.perf_counter()
        torch.cuda.synchronize()
        t1, c1 = time.perf_counter(), time.process_time()
        wall = (t1 - t0) / iters
        rec["wall_ms"] = wall * 1e3
        rec["cpu_ms"] = (c1 - c0) / iters * 1e3
        rec["cpu_less_idle_ms"] = ((c1 - c0) - idle_rate * (t1 - t0)) / iters * 1e3
        rec["issue_loop_ms"] = (t_issue - t0) / iters * 1e3
        fwd_t.sort()
        bwd_t.sort()
        rec["fwd_return_ms_median"] = fwd_t[len(fwd_t) // 2] * 1e3
        rec["bwd_return_ms_median"] = bwd_t[len(bwd_t) // 2] * 1e3
        rec["fwd_return_ms_min"] = fwd_t[0] * 1e3
        rec["bwd_return_ms_min"] = bwd_t[0] * 1e3
        # one iteration, synchronised before it: the host's own time when the GPU is idle at start
        torch.cuda.synchronize()
        a = time.perf_counter()
        b = step(fwd_mark=True)
        c = time.perf_counter()
        torch.cuda.synchronize()
        d = time.perf_counter()
        rec["cold_fwd_return_ms"] = (b - a) * 1e3
        rec["cold_bwd_return_ms"] = (c - b) * 1e3
        rec["cold_until_gpu_done_ms"] = (d - a) * 1e3
    except Exception:
        err(f"{name}: timing")
    if targets:
        try:
            rec["fwd_breakdown"] = forward_breakdown(step, targets, iters)
            log("  fwd breakdown " + json.dumps({k: round(v["ms"], 3)
                                                for k, v in rec["fwd_breakdown"].items()}))
        except Exception:
            err(f"{name}: forward breakdown")
    sync_report(step, rec, f"{name}: sync debug")
    try:
        rec["profile"] = profile_runs(step, prof_iters, name)
    except Exception:
        err(f"{name}: profiler")
    p = rec.get("profile", {})
    log(json.dumps({k: v for k, v in rec.items() if k not in ("profile", "sync_messages", "fwd_breakdown")}))
    if p:
        log("  gpu_union_ms %.3f kernel_sum_ms %.3f kernels %.0f memcpy %.1f memset %.1f "
            "cpu_ops %.0f launches %.0f blocking_ms %.3f prof_iter_host_ms %s" % (
                p["gpu_union_ms"], p["kernel_sum_ms"], p["kernels_per_iter"],
                p["memcpy_per_iter"], p["memset_per_iter"], p["cpu_ops_per_iter"],
                p["launch_calls_per_iter"], p["blocking_ms_per_iter"],
                p["profiled_iter_host_ms"]))
    RESULTS["cases"].append(rec)
    torch.cuda.synchronize()
    return rec


def comm_calls(n):
    """Host cost of one torch.distributed call of each kind Megatron-Core issues per layer (sequence-parallel
    all-gather and reduce-scatter, all-reduce, the all-to-all dispatcher's all_to_all_single with split sizes),
    on the one-rank NCCL group of this process: n calls of 1 MiB queued without a sync in between, host time
    per call (until the call returns) and GPU time per call. One rank: NCCL's work is a local copy, so the GPU
    figure is not a collective's time; the host figure is c10d's and NCCL's enqueue path as a real call takes it."""
    import torch
    import torch.distributed as dist
    dev = torch.device("cuda")
    x = torch.randn(1 << 19, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    sizes = [x.numel()]
    kinds = {
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(y, x),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(y, x),
        "all_reduce": lambda: dist.all_reduce(x),
        "all_to_all_single": lambda: dist.all_to_all_single(y, x, output_split_sizes=sizes,
                                                            input_split_sizes=sizes),
        "launch_add_": lambda: x.add_(1.0),
    }
    rows = []
    for name, call in kinds.items():
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        per = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            per.append(((t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6))
        per.sort()
        row = {"call": name, "host_us_per_call": per[1][0], "until_gpu_done_us_per_call": per[1][1],
               "host_us_all": [p[0] for p in per], "calls": n, "bytes": x.numel() * 2}
        log("comm call " + json.dumps(row))
        rows.append(row)
    RESULTS["comm_calls"] = rows


# ---------------------------------------------------------------------------------------------------------
# --schedule: the host time Megatron-Core's training schedule adds per micro-batch beyond the layers
# ---------------------------------------------------------------------------------------------------------

# Qwen3's vocabulary: config.json "vocab_size": 151936 (the Qwen3 family's tokenizer, e.g. Qwen/Qwen3-8B on
# huggingface.co). Megatron-LM pads it to a multiple of make_vocab_size_divisible_by (default 128) x TP
# (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding at the commit): 128 x 4 = 512,
# 151,936 -> 152,064; one TP-4 rank's share of the embedding and the output layer is 152,064 / 4 = 38,016.
QWEN3_VOCAB = 151936
SCHED_TP = 4
SCHED_VOCAB_PER_RANK = -(-QWEN3_VOCAB // (128 * SCHED_TP)) * 128 * SCHED_TP // SCHED_TP


def build_gpt(num_layers, experts, wrap, log_impl):
    """Megatron-Core's GPTModel (pre_process and post_process: embedding, the layers, final RMSNorm, output
    layer, vocab-parallel cross-entropy) with num_layers of the calibrated layer (make_config; SDPA core
    attention; experts 16: the grouped experts of make_grouped_experts, 0: the dense SwiGLU MLP), untied
    embeddings (Qwen3-235B-A22B: tie_word_embeddings false), RoPE base 1e6, one TP-4 rank's vocabulary.
    wrap "bare": the model cast to BF16, nothing around it. wrap "ddp": as Megatron-LM's training wraps it
    (megatron/training/training.py get_model / setup_model_and_optimizer): Float16Module, then
    DistributedDataParallel (overlap_grad_reduce, distributed optimizer, FP32 grad buffers, as the
    published rows), with the config's no_sync_func, finalize_model_grads_func and grad_scale_func set as
    training.py sets them (grad_scale_func: the optimizer's scale_loss, a multiply by a constant 1 under
    BF16 without a loss scaler). Returns (config, the model to hand to the schedule, the GPTModel)."""
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    cfg = make_config(experts, num_layers=num_layers)
    spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False, qk_layernorm=True,
                                    normalization="RMSNorm")
    spec.submodules.self_attention.submodules.core_attention = make_sdpa_class()
    gpt = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=SCHED_VOCAB_PER_RANK,
                   max_sequence_length=4096, pre_process=True, post_process=True,
                   parallel_output=True, share_embeddings_and_output_weights=False,
                   position_embedding_type="rope", rotary_percent=1.0, rotary_base=1000000)
    if experts:
        for layer in gpt.decoder.layers:
            layer.mlp.experts = make_grouped_experts(cfg, experts, log_impl)
    gpt = gpt.cuda()
    if wrap == "ddp":
        from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                               finalize_model_grads)
        from megatron.core.transformer.module import Float16Module
        f16 = Float16Module(cfg, gpt)
        ddp_cfg = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=True,
                                                use_distributed_optimizer=True)
        model = DistributedDataParallel(config=cfg, ddp_config=ddp_cfg, module=f16)
        cfg.no_sync_func = model.no_sync
        cfg.finalize_model_grads_func = finalize_model_grads
        one = torch.ones((), device="cuda")
        cfg.grad_scale_func = lambda loss: one * loss
    else:
        gpt = gpt.bfloat16()
        model = gpt
    model.train()
    return cfg, model, gpt


def schedule_funcs(wrap, S):
    """forward_step_func and its data, after pretrain_gpt.py at the commit (forward_step, get_batch,
    loss_func). The batch comes from pinned host memory and is copied with .cuda(non_blocking=True) as
    megatron/training/utils.py get_batch_on_this_tp_rank does (no attention mask: the SDPA core attention is
    causal; --no-create-attention-mask-in-dataloader). wrap "ddp" also takes the rest of the published path
    per micro-batch: get_batch_on_this_tp_rank's broadcasts of tokens, labels, loss mask and position ids
    over the TP group (at PP 1; here a one-rank group: the c10d call's host cost, no transfer), and
    pretrain_gpt.py's loss_func checks of the loss for NaN and Inf through the rerun state machine
    (check_for_nan_in_loss_and_grad is on by default; in its default mode, disabled, each check is a
    torch.isnan / torch.isinf evaluated on the host: a host-device sync per check). wrap "bare": the copies,
    the model call and the loss arithmetic only. The data iterator is itertools.repeat of one batch: the
    data loader's own host time (worker processes, RerunDataIterator) is not measured. Returns a namespace
    (forward_step_func, get_batch, loss_func: each called through it, so that forward_breakdown can wrap them)
    and the data iterator."""
    import itertools
    import types
    from functools import partial
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, QWEN3_VOCAB // SCHED_TP, (1, S), generator=g).pin_memory()
    batch = {"tokens": tokens,
             "labels": torch.roll(tokens, -1, 1).pin_memory(),
             "loss_mask": torch.ones(1, S, dtype=torch.float32).pin_memory(),
             "position_ids": torch.arange(S).unsqueeze(0).pin_memory()}
    checks = wrap == "ddp"
    if checks:
        from megatron.core.rerun_state_machine import get_rerun_state_machine
        rsm = get_rerun_state_machine()
        tp_src = parallel_state.get_tensor_model_parallel_src_rank()
        tp_group = parallel_state.get_tensor_model_parallel_group()

    def get_batch(it):
        data = next(it)
        b = {k: v.cuda(non_blocking=True) for k, v in data.items()}
        if checks:
            for k in ("tokens", "labels", "loss_mask", "position_ids"):
                dist.broadcast(b[k], tp_src, group=tp_group)
        return b

    def loss_func(loss_mask, output_tensor):
        losses = output_tensor.view(-1).float()
        loss_mask = loss_mask.view(-1).float()
        loss = torch.sum(losses * loss_mask)
        if checks:
            rsm.validate_result(result=loss, rejection_func=torch.isnan,
                                message="found NaN in local forward loss calculation", tolerance=0.0,
                                fatal=True)
            rsm.validate_result(result=loss, rejection_func=torch.isinf,
                                message="found Inf in local forward loss calculation", tolerance=0.0,
                                fatal=True)
        num_tokens = loss_mask.sum().clone().detach().to(torch.int)
        reporting_loss = torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])
        return (loss, num_tokens, {"lm loss": reporting_loss})

    ns = types.SimpleNamespace()

    def forward_step_func(data_iterator, model):
        b = ns.get_batch(data_iterator)
        output_tensor = model(b["tokens"], b["position_ids"], None, labels=b["labels"],
                              loss_mask=b["loss_mask"])
        return output_tensor, partial(ns.loss_func, b["loss_mask"])

    ns.forward_step_func, ns.get_batch, ns.loss_func = forward_step_func, get_batch, loss_func
    return ns, itertools.repeat(batch)


def schedule_breakdown_targets(model, gpt, fsf_holder):
    """(label, object, attribute) of the calls whose host time (until return) a schedule call is split
    into: the schedule's forward_step and backward_step (module functions of schedules.py, looked up as
    globals by forward_backward_no_pipelining), and inside forward_step the model call and its parts."""
    from megatron.core.pipeline_parallel import schedules
    t = [("schedule.forward_step", schedules, "forward_step"),
         ("schedule.backward_step", schedules, "backward_step"),
         ("forward_step_func", fsf_holder, "forward_step_func"),
         ("get_batch", fsf_holder, "get_batch"),
         ("loss_func", fsf_holder, "loss_func"),
         ("model (wrappers and GPTModel)", model, "forward"),
         ("embedding", gpt.embedding, "forward"),
         ("rotary_pos_emb", gpt.rotary_pos_emb, "forward"),
         ("decoder (layers + final norm)", gpt.decoder, "forward"),
         ("final_layernorm", gpt.decoder.final_layernorm, "forward"),
         ("output_layer", gpt.output_layer, "forward"),
         ("compute_language_model_loss", gpt, "compute_language_model_loss")]
    for i, layer in enumerate(gpt.decoder.layers):
        t.append((f"layer {i}", layer, "forward"))
    return t


class Watchdog:
    """Ends the process if one case runs past its time: records the case as an error, saves the results,
    dumps every thread's stack (faulthandler) and exits with status 3. A timer thread: it fires whenever the
    main thread waits with the GIL released (CUDA synchronisation, NCCL, sleeps)."""

    def __init__(self, seconds, save):
        self.seconds, self.save, self.timer, self.what = seconds, save, None, None

    def arm(self, what):
        import threading
        self.disarm()
        self.what = what
        self.timer = threading.Timer(self.seconds, self.fire)
        self.timer.daemon = True
        self.timer.start()

    def disarm(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def fire(self):
        import faulthandler
        log(f"TIMEOUT {self.what}: over {self.seconds} s; stacks follow, results saved, exit 3")
        RESULTS["errors"].append({"where": f"{self.what}: timeout", "traceback": f"over {self.seconds} s"})
        try:
            self.save()
        finally:
            faulthandler.dump_traceback(all_threads=True)
            os._exit(3)


def time_calls(call, warmup, reps, idle):
    """warmup calls, then reps timed ones, each from a synchronised GPU: host time until call() returns, wall
    time to the GPU's end, CPU time less the process's idle rate (ms); their medians and minima. Also the
    number of losses the last warm-up call returned."""
    import torch
    out = None
    for _ in range(warmup):
        out = call()
    torch.cuda.synchronize()
    host, wall, cpu = [], [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2, c1 = time.perf_counter(), time.process_time()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
        cpu.append(((c1 - c0) - idle * (t2 - t0)) * 1e3)

    def median(xs):
        xs = sorted(xs)
        return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2

    return {"losses_returned": len(out) if out is not None else None, "host_ms": host, "wall_ms": wall,
            "cpu_less_idle_ms": cpu, "host_ms_median": median(host), "wall_ms_median": median(wall),
            "cpu_ms_median": median(cpu), "host_ms_min": min(host), "wall_ms_min": min(wall)}


def run_schedule(args, idle, save):
    """Times get_forward_backward_func()(...) (pipeline size 1: forward_backward_no_pipelining) on a
    GPTModel of L layers for M micro-batches of S tokens and derives the host time per micro-batch, per
    layer-micro-batch and of the rest (README section "Megatron-Core's schedule host time")."""
    import torch
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    S = args.schedule_seq
    Ls = sorted({int(x) for x in args.schedule_layers.split(",") if x})
    Ms = [4, 8]
    wraps = [w for w in args.schedule_wraps.split(",") if w]
    kinds = [k for k in args.schedule_kinds.split(",") if k]
    sch = RESULTS.setdefault("schedule", {})
    sch.update({"seq": S, "micro_batch_size": 1, "layers": Ls, "microbatches": Ms, "wraps": wraps,
                "kinds": kinds, "reps": args.schedule_reps, "warmup": args.schedule_warmup,
                "vocab_per_rank": SCHED_VOCAB_PER_RANK, "vocab": QWEN3_VOCAB, "vocab_tp": SCHED_TP,
                "pipeline_size": 1, "schedule_func": None, "runs": [], "parts": [], "derived": {},
                "interleaved": "not run (--schedule-vp 1, or no bare wrap)"})
    try:
        sch["schedule_func"] = get_forward_backward_func().__name__
    except Exception:
        err("schedule: get_forward_backward_func")
    log(f"schedule: S {S}, vocab per rank {SCHED_VOCAB_PER_RANK}, wraps {wraps}, kinds {kinds}, "
        f"function {sch['schedule_func']}")

    def impl(what):
        RESULTS["env"]["grouped_experts"] = what

    dog = Watchdog(args.case_timeout, save)

    for kind in kinds:
        experts = 16 if kind == "moe" else 0
        for wrap in wraps:
            for L in Ls:
                tag = f"{kind}_{wrap}_L{L}"
                dog.arm(f"schedule {tag}")
                model = gpt = None
                try:
                    # Megatron's MoE aux-loss tracker keeps one value per layer, sized by the first model it
                    # saw: a fresh one for each model
                    from megatron.core.transformer.moe import moe_utils
                    moe_utils.get_moe_layer_wise_logging_tracker().clear()
                    t = time.perf_counter()
                    cfg, model, gpt = build_gpt(L, experts, wrap, impl)
                    build_s = time.perf_counter() - t
                    h, data_it = schedule_funcs(wrap, S)
                    fb = get_forward_backward_func()

                    def call(M):
                        if wrap == "ddp":
                            model.zero_grad_buffer()
                        else:
                            model.zero_grad(set_to_none=True)
                        return fb(forward_step_func=lambda it, m: h.forward_step_func(it, m),
                                  data_iterator=data_it, model=[model], num_microbatches=M,
                                  seq_length=S, micro_batch_size=1, forward_only=False)

                    log(f"--- schedule {tag}: built in {build_s:.1f} s, "
                        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")
                except Exception:
                    err(f"schedule {tag}: build")
                    dog.disarm()
                    save()
                    continue
                for M in Ms:
                    rec = {"kind": kind, "wrap": wrap, "layers": L, "microbatches": M, "seq": S,
                           "experts": experts}
                    try:
                        rec.update(time_calls(lambda: call(M), args.schedule_warmup, args.schedule_reps, idle))
                        # back to back, one synchronize after all: the schedule's pace when the host
                        # never waits at the start of a call
                        n_b2b = min(5, args.schedule_reps)
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        for _ in range(n_b2b):
                            call(M)
                        torch.cuda.synchronize()
                        rec["back_to_back_wall_ms"] = (time.perf_counter() - t0) / n_b2b * 1e3
                    except Exception:
                        err(f"schedule {tag} M{M}: timing")
                    if M == Ms[-1]:
                        try:
                            bd = forward_breakdown(lambda fwd_mark=False: call(M),
                                                   schedule_breakdown_targets(model, gpt, h),
                                                   max(3, args.schedule_reps // 2))
                            rec["breakdown_per_call"] = bd
                            log("  host ms per call by part " + json.dumps(
                                {k: [round(v["ms"], 3), v["calls"]] for k, v in bd.items()}))
                        except Exception:
                            err(f"schedule {tag} M{M}: breakdown")
                        sync_report(lambda: call(M), rec, f"schedule {tag} M{M}: sync debug")
                        try:
                            p = profile_runs(lambda: call(M), 1, f"schedule_{tag}_M{M}")
                            rec["profile_per_call"] = {k: p[k] for k in (
                                "kernels_per_iter", "memcpy_per_iter", "memset_per_iter", "kernel_sum_ms",
                                "gpu_union_ms", "cpu_ops_per_iter", "launch_calls_per_iter",
                                "blocking_calls", "blocking_ms_per_iter", "top_kernels")}
                        except Exception:
                            err(f"schedule {tag} M{M}: profiler")
                    sch["runs"].append(rec)
                    log("schedule " + json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                                  for k, v in rec.items()
                                                  if k not in ("host_ms", "wall_ms", "cpu_less_idle_ms",
                                                               "breakdown_per_call", "sync_messages",
                                                               "profile_per_call")}))
                    save()
                # the parts alone, at L 1 of the bare model (they depend on neither L nor the wrappers;
                # under DDP a backward outside the schedule would trip its hooks' once-a-step checks):
                # embedding forward + backward, and final norm + output layer + cross-entropy
                if L == Ls[0] and wrap == "bare":
                    try:
                        schedule_parts(gpt, kind, wrap, S, args, idle)
                    except Exception:
                        err(f"schedule {tag}: parts")
                dog.disarm()
                del model, gpt
                torch.cuda.empty_cache()
                save()
    derive_schedule(sch)
    save()
    if args.schedule_vp > 1 and "bare" in wraps:
        try:
            run_interleaved(args, idle, save, dog, sch)
        except Exception:
            err("schedule: interleaved")
        finally:
            try:
                from megatron.core import parallel_state
                parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
            except Exception:
                pass
            dog.disarm()
        save()


def schedule_parts(gpt, kind, wrap, S, args, idle):
    """Host time of the GPTModel's parts outside the layers, each alone, forward + backward: the embedding
    (LanguageModelEmbedding over S tokens) and the head (final RMSNorm, output layer, vocab-parallel
    cross-entropy, the masked sum), through measure() (wall, CPU, host until return, profile)."""
    import torch
    H = 4096
    dev = torch.device("cuda")
    tokens = torch.randint(0, QWEN3_VOCAB // SCHED_TP, (1, S), device=dev)
    pos = torch.arange(S, device=dev).unsqueeze(0)
    labels = torch.roll(tokens, -1, 1)
    mask = torch.ones(S, device=dev)
    g = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16)
    x = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def emb_step(fwd_mark=False):
        out = gpt.embedding(input_ids=tokens, position_ids=pos)
        t = time.perf_counter()
        out.backward(g)
        return t

    def head_step(fwd_mark=False):
        hn = gpt.decoder.final_layernorm(x)
        logits, _ = gpt.output_layer(hn)
        loss = gpt.compute_language_model_loss(labels, logits)
        loss = torch.sum(loss.view(-1).float() * mask)
        t = time.perf_counter()
        loss.backward()
        return t

    targets_head = [("final_layernorm", gpt.decoder.final_layernorm, "forward"),
                    ("output_layer", gpt.output_layer, "forward"),
                    ("compute_language_model_loss", gpt, "compute_language_model_loss")]
    for name, step, targets in ((f"sched_embedding_{kind}_{wrap}_{S}", emb_step, None),
                                (f"sched_head_loss_{kind}_{wrap}_{S}", head_step, targets_head)):
        try:
            rec = measure(name, step, args.iters, args.warmup, args.prof_iters, idle,
                          {"part": name.split("_" + kind)[0][len("sched_"):], "kind": kind, "wrap": wrap,
                           "seq": S, "vocab_per_rank": SCHED_VOCAB_PER_RANK}, targets=targets)
            if RESULTS["cases"] and RESULTS["cases"][-1] is rec:
                RESULTS["cases"].pop()
            RESULTS["schedule"]["parts"].append(rec)
        except Exception:
            err(f"schedule part {name}")
    gpt.zero_grad(set_to_none=True)


def loopback_communicate(queues):
    """A stand-in for p2p_communication._communicate (the one function every send / receive of the
    pipeline schedules goes through) for a pipeline of one rank: what a stage sends to its next (previous)
    stage is what it receives from its previous (next) stage, first in first out, copied into a fresh
    buffer made as _communicate makes it (torch.empty, requires_grad, the pipeline dtype). At pipeline size 1
    the interleaved schedule's sends and receives pair within each call (read in schedules.py at the
    commit); a receive with nothing sent raises. No NCCL call is made: the p2p calls' own host time is not
    in what this measures."""
    import torch

    def _communicate(*, tensor_send_next, tensor_send_prev, recv_prev, recv_next, tensor_shape, config,
                     wait_on_reqs=True):
        def recv(q, what):
            if not q:
                raise RuntimeError(f"loopback p2p: {what} with nothing sent")
            src = q.pop(0)
            buf = torch.empty(tensor_shape, requires_grad=True, device=torch.cuda.current_device(),
                              dtype=config.pipeline_dtype)
            with torch.no_grad():
                buf.copy_(src.view(buf.shape))
            return buf
        if tensor_send_next is not None:
            queues["next"].append(tensor_send_next.detach())
        if tensor_send_prev is not None:
            queues["prev"].append(tensor_send_prev.detach())
        rp = recv(queues["next"], "a receive from the previous stage") if recv_prev else None
        rn = recv(queues["prev"], "a receive from the next stage") if recv_next else None
        queues["calls"] += 1
        return rp, rn, ([] if config.batch_p2p_comm else {})

    return _communicate


def run_interleaved(args, idle, save, dog, sch):
    """Megatron-Core's interleaved schedule (forward_backward_pipelining_with_interleaving, called directly:
    get_forward_backward_func picks it only at a pipeline size above 1) on one GPU: pipeline size 1 with a
    virtual pipeline size of VP (parallel_state's virtual world size set, the config's
    virtual_pipeline_model_parallel_size), VP GPTModel chunks of one layer each (the first with the
    embedding, the last with the output layer and loss; vp_stage set), and the sends and receives between
    chunks through loopback_communicate. Megatron-LM's settings for an interleaved run
    (megatron/training/arguments.py at the commit): overlap_p2p_comm on (so batch_p2p_comm off),
    deallocate_pipeline_outputs on; microbatch_group_size_per_vp_stage defaults to the pipeline size (1 here,
    so the schedule alternates chunks every micro-batch). The bare model only (no DDP). Its per-micro-batch
    time against forward_backward_no_pipelining on one GPTModel of VP layers (the "bare" L = VP runs) is the
    interleaving's extra host time per micro-batch for VP - 1 extra chunks (their forward_step and
    backward_step, the chunk's batch fetch, rotary embedding and block call, the schedule's bookkeeping),
    less the p2p calls (not made)."""
    import torch
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel import p2p_communication, schedules

    VP = args.schedule_vp
    Ms = sch.get("microbatches", [4, 8])
    S = sch["seq"]
    inter = {"vp": VP, "layers_per_chunk": 1, "pipeline_size": 1, "wrap": "bare", "runs": [],
             "derived": {}, "p2p": "loopback (no NCCL call; loopback_communicate)",
             "overlap_p2p_comm": True, "deallocate_pipeline_outputs": True}
    sch["interleaved"] = inter
    orig_comm = p2p_communication._communicate
    queues = {"next": [], "prev": [], "calls": 0}
    kinds = [k for k in sch.get("kinds", []) if k in ("dense", "moe")]

    def impl(what):
        RESULTS["env"]["grouped_experts"] = what

    for kind in kinds:
        experts = 16 if kind == "moe" else 0
        tag = f"interleaved_{kind}_vp{VP}"
        dog.arm(f"schedule {tag}")
        chunks = None
        try:
            parallel_state.set_virtual_pipeline_model_parallel_world_size(VP)
            p2p_communication._communicate = loopback_communicate(queues)
            cfg = make_config(experts, num_layers=1)
            cfg.virtual_pipeline_model_parallel_size = VP
            cfg.overlap_p2p_comm = True
            cfg.batch_p2p_comm = False
            cfg.deallocate_pipeline_outputs = True
            spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False,
                                            qk_layernorm=True, normalization="RMSNorm")
            spec.submodules.self_attention.submodules.core_attention = make_sdpa_class()
            chunks = []
            for c in range(VP):
                g = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=SCHED_VOCAB_PER_RANK,
                             max_sequence_length=4096, pre_process=(c == 0), post_process=(c == VP - 1),
                             parallel_output=True, share_embeddings_and_output_weights=False,
                             position_embedding_type="rope", rotary_percent=1.0, rotary_base=1000000,
                             vp_stage=c)
                if experts:
                    for layer in g.decoder.layers:
                        layer.mlp.experts = make_grouped_experts(cfg, experts, impl)
                g = g.cuda().bfloat16()
                g.train()
                chunks.append(g)
            inter["layers_built_per_chunk"] = [len(g.decoder.layers) for g in chunks]
            h, data_it = schedule_funcs("bare", S)
            fb = schedules.forward_backward_pipelining_with_interleaving

            def call(M):
                for g in chunks:
                    g.zero_grad(set_to_none=True)
                queues["next"].clear()
                queues["prev"].clear()
                out = fb(forward_step_func=lambda it, m: h.forward_step_func(it, m),
                         data_iterator=[data_it] * VP, model=chunks, num_microbatches=M, seq_length=S,
                         micro_batch_size=1, forward_only=False)
                if queues["next"] or queues["prev"]:
                    raise RuntimeError(f"loopback p2p: {len(queues['next'])} forward and "
                                       f"{len(queues['prev'])} backward sends never received")
                return out
            log(f"--- schedule {tag}: {inter['layers_built_per_chunk']} layers per chunk")
        except Exception:
            err(f"schedule {tag}: build")
            chunks = None
        if chunks is not None:
            for M in Ms:
                rec = {"kind": kind, "vp": VP, "microbatches": M, "seq": S}
                try:
                    counted = []

                    def counted_call(M=M):
                        queues["calls"] = 0
                        r = call(M)
                        counted.append(queues["calls"])
                        return r
                    rec.update(time_calls(counted_call, args.schedule_warmup, args.schedule_reps, idle))
                    rec["p2p_calls_per_call"] = counted[-1] if counted else None
                    if M == Ms[-1]:
                        bd = forward_breakdown(
                            lambda fwd_mark=False: call(M),
                            [("schedule.forward_step", schedules, "forward_step"),
                             ("schedule.backward_step", schedules, "backward_step"),
                             ("p2p _communicate (loopback)", p2p_communication, "_communicate"),
                             ("get_batch", h, "get_batch")],
                            max(3, args.schedule_reps // 2))
                        rec["breakdown_per_call"] = bd
                except Exception:
                    err(f"schedule {tag} M{M}: timing")
                inter["runs"].append(rec)
                log("schedule " + json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                              for k, v in rec.items()
                                              if k not in ("host_ms", "wall_ms", "cpu_less_idle_ms")}))
                save()
        p2p_communication._communicate = orig_comm
        parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
        dog.disarm()
        chunks = None
        torch.cuda.empty_cache()
        save()
    # the interleaving's extra time per micro-batch against forward_backward_no_pipelining on VP layers
    runs = {(r["kind"], r["microbatches"]): r for r in inter["runs"]}
    base = sch.get("derived", {})
    m0, m1 = Ms[0], Ms[-1]
    for kind in kinds:
        d = {}
        for q in ("host_ms_median", "host_ms_min", "wall_ms_median", "cpu_ms_median"):
            a, b = runs.get((kind, m0)), runs.get((kind, m1))
            if not (a and b and a.get(q) is not None and b.get(q) is not None):
                continue
            per_mb = (b[q] - a[q]) / (m1 - m0)
            e = {"per_microbatch": per_mb, "fixed_per_call": a[q] - m0 * per_mb}
            nopipe = base.get(f"{kind}_bare", {}).get(q, {}).get("per_microbatch", {}).get(str(VP))
            if nopipe is not None:
                e["no_pipelining_per_microbatch_L%d" % VP] = nopipe
                e["extra_per_microbatch"] = per_mb - nopipe
                e["extra_per_chunk_microbatch"] = (per_mb - nopipe) / (VP - 1)
            d[q] = e
        inter["derived"][kind] = d
        hm = d.get("host_ms_median", {})
        log(f"schedule interleaved {kind} VP {VP} (host ms, medians): per micro-batch {hm.get('per_microbatch')}, "
            f"no pipelining on {VP} layers {hm.get('no_pipelining_per_microbatch_L%d' % VP)}, extra per extra "
            f"chunk-micro-batch {hm.get('extra_per_chunk_microbatch')}")
    save()


def derive_schedule(sch):
    """per micro-batch = (T(M 8) - T(M 4)) / 4; per layer-micro-batch = per micro-batch (L 2) - (L 1);
    rest per micro-batch (the schedule's loop, forward_step / backward_step and loss function calls, the batch,
    embedding, final norm, output layer, cross-entropy, and under "ddp" the wrappers and checks)
    = per micro-batch (L) - L x per layer-micro-batch = 2 x per micro-batch (L 1) - per micro-batch (L 2);
    fixed per schedule call = T(M 4) - 4 x per micro-batch. Each for the host time until the call returns,
    the wall time to the GPU's end and the CPU time, from the medians of the timed calls (and the host time
    also from their minima)."""
    runs = {(r["kind"], r["wrap"], r["layers"], r["microbatches"]): r for r in sch.get("runs", [])}
    Ms = sch.get("microbatches", [4, 8])
    Ls = sch.get("layers", [1, 2])
    m0, m1 = Ms[0], Ms[-1]
    l0, l1 = Ls[0], Ls[-1]
    out = {}
    for kind in sch.get("kinds", []):
        for wrap in sch.get("wraps", []):
            d = {}
            for q in ("host_ms_median", "host_ms_min", "wall_ms_median", "cpu_ms_median"):
                per_mb, fixed = {}, {}
                for L in Ls:
                    a, b = runs.get((kind, wrap, L, m0)), runs.get((kind, wrap, L, m1))
                    if a and b and a.get(q) is not None and b.get(q) is not None:
                        per_mb[str(L)] = (b[q] - a[q]) / (m1 - m0)
                        fixed[str(L)] = a[q] - m0 * per_mb[str(L)]
                e = {"per_microbatch": per_mb, "fixed_per_call": fixed}
                pts = [(L, per_mb[str(L)]) for L in Ls if str(L) in per_mb]
                if len(pts) >= 2:
                    # least squares over the layer counts: per micro-batch = rest + L x per layer-micro-batch
                    # (two counts: their difference)
                    n = len(pts)
                    mx = sum(x for x, _ in pts) / n
                    my = sum(y for _, y in pts) / n
                    per_layer = (sum((x - mx) * (y - my) for x, y in pts) /
                                 sum((x - mx) ** 2 for x, _ in pts))
                    e["per_layer_microbatch"] = per_layer
                    e["rest_per_microbatch"] = my - mx * per_layer
                    e["fit_layers"] = [x for x, _ in pts]
                d[q] = e
            # the forward's parts by direct timing (forward_breakdown at the largest M), per micro-batch
            r = runs.get((kind, wrap, l0, m1))
            if r and r.get("breakdown_per_call"):
                d["forward_parts_per_microbatch_ms_L%d" % l0] = {
                    k: v["ms"] / m1 for k, v in r["breakdown_per_call"].items()}
            # the layers' own forward inside the model at the largest count: the mean over its layers
            r = runs.get((kind, wrap, l1, m1))
            if r and r.get("breakdown_per_call"):
                lay = [v["ms"] / m1 for k, v in r["breakdown_per_call"].items() if k.startswith("layer ")]
                if lay:
                    d["layer_forward_per_microbatch_ms_L%d" % l1] = sum(lay) / len(lay)
            out[f"{kind}_{wrap}"] = d
    sch["derived"] = out
    for k, d in out.items():
        h = d.get("host_ms_median", {})
        log(f"schedule derived {k} (host ms, medians): per micro-batch {h.get('per_microbatch')}, per "
            f"layer-micro-batch {h.get('per_layer_microbatch')}, rest per micro-batch "
            f"{h.get('rest_per_microbatch')}, fixed per call {h.get('fixed_per_call')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--prof-iters", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="4k only, fewer cases")
    ap.add_argument("--only-dense", action="store_true",
                    help="only the dense-layer cases (experts 0) and the attention cases")
    ap.add_argument("--only-grouped", action="store_true",
                    help="only the cases whose experts run as grouped GEMMs (make_grouped_experts), and the "
                         "attention cases they are summed with")
    ap.add_argument("--host-blocks", action="store_true",
                    help="the host floor of each block for a calibration section: attention (S 256), grouped "
                         "MoE (64 tokens), dense MLP (64 tokens) and both whole layers, each --repeats times, "
                         "and the host cost of one torch.distributed call of each kind (comm_calls)")
    ap.add_argument("--repeats", type=int, default=3, help="with --host-blocks: times each case is measured")
    ap.add_argument("--schedule", action="store_true",
                    help="only the training schedule's host time: get_forward_backward_func() on a GPTModel of "
                         "1 and 2 layers for 4 and 8 micro-batches (run_schedule); no layer cases")
    ap.add_argument("--schedule-seq", type=int, default=256, help="with --schedule: tokens per micro-batch")
    ap.add_argument("--schedule-layers", default="1,2",
                    help="with --schedule: comma list of the GPTModel's layer counts (more than two: the per-layer "
                         "figure is the least-squares slope over them)")
    ap.add_argument("--schedule-reps", type=int, default=15, help="with --schedule: timed calls per case")
    ap.add_argument("--schedule-warmup", type=int, default=3, help="with --schedule: warm-up calls per case")
    ap.add_argument("--schedule-wraps", default="bare,ddp",
                    help="with --schedule: comma list of bare (the GPTModel alone) and ddp (Float16Module + "
                         "DistributedDataParallel, the loss checks and batch broadcasts of pretrain_gpt.py)")
    ap.add_argument("--schedule-kinds", default="dense,moe",
                    help="with --schedule: comma list of dense (SwiGLU MLP) and moe (16 grouped experts)")
    ap.add_argument("--schedule-vp", type=int, default=2,
                    help="with --schedule: virtual pipeline size of the interleaved schedule's run on one GPU "
                         "(run_interleaved: one layer a chunk, loopback p2p); 1: not run")
    ap.add_argument("--case-timeout", type=int, default=150,
                    help="with --schedule: seconds one model's cases may take before the process saves its "
                         "results, dumps its stacks and exits (Watchdog)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    out_json = os.path.join(args.out, "layer_host.json")

    def save():
        with open(out_json, "w") as f:
            json.dump(RESULTS, f, indent=1)

    try:
        env_info()
    except Exception:
        err("env_info")
    save()
    import torch
    try:
        t = time.perf_counter()
        init_megatron()
        RESULTS["env"]["megatron_init_s"] = time.perf_counter() - t
    except Exception:
        err("init_megatron")
        save()
        return 1
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

    idle = idle_cpu_rate()
    RESULTS["env"]["idle_cpu_rate"] = idle
    log(f"idle CPU rate of the process: {idle:.4f} s/s")
    if args.schedule:
        try:
            run_schedule(args, idle, save)
        except Exception:
            err("schedule")
        return finish(save)
    rope = RotaryEmbedding(kv_channels=128, rotary_percent=1.0, rotary_base=1000000)

    layers = {}
    for core in ("sdpa", "local"):
        try:
            layers[core] = build_layer(core)
        except Exception:
            err(f"build_layer {core}")
    try:
        layers["dense"] = build_layer("sdpa", experts=0)
    except Exception:
        err("build_layer dense")
    try:
        cfg_g, layer_g = build_layer("sdpa")

        def impl(what):
            RESULTS["env"]["grouped_experts"] = what
            log("grouped experts:", what)
        layer_g.mlp.experts = make_grouped_experts(cfg_g, 16, impl)
        layers["grouped"] = (cfg_g, layer_g)
    except Exception:
        err("build_layer grouped")
    save()
    if not layers:
        return 1
    log({k: sum(p.numel() for p in l.parameters()) for k, (c, l) in layers.items()})

    H = 4096
    dev = torch.device("cuda")

    def attn_step_factory(layer, S):
        x = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
        emb = rope(S)
        g1 = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16)
        g2 = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16)

        def step(fwd_mark=False):
            pre, res, _ = layer._forward_attention(x, attention_mask=None, rotary_pos_emb=emb)
            t = time.perf_counter()
            torch.autograd.backward([pre, res], [g1, g2])
            return t
        return step

    def moe_step_factory(layer, T):
        x = torch.randn(T, 1, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn(T, 1, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn(T, 1, H, device=dev, dtype=torch.bfloat16)

        def step(fwd_mark=False):
            out = layer._forward_mlp(x, r)
            t = time.perf_counter()
            out.backward(g)
            return t
        return step

    def layer_step_factory(layer, S):
        x = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
        emb = rope(S)
        g = torch.randn(S, 1, H, device=dev, dtype=torch.bfloat16)

        def step(fwd_mark=False):
            out, _ = layer(hidden_states=x, attention_mask=None, rotary_pos_emb=emb)
            t = time.perf_counter()
            out.backward(g)
            return t
        return step

    # (part, core, tokens)
    cases = []
    seqs = [256, 1024, 4096] if args.quick else [256, 1024, 4096, 16384]
    for S in seqs:
        cases.append(("attn", "sdpa", S))
    for S in ([4096] if args.quick else [4096, 16384]):
        cases.append(("attn", "local", S))
    for T in ([64, 256, 1024] if args.quick else [64, 256, 1024, 4096, 16384]):
        cases.append(("moe", "sdpa", T))
    for S in ([256, 4096] if args.quick else [256, 4096, 16384]):
        cases.append(("layer", "sdpa", S))
    # the experts as one grouped GEMM each way (TEGroupedMLP's steps; make_grouped_experts)
    for T in ([64, 1024] if args.quick else [64, 256, 1024, 4096]):
        cases.append(("moe", "grouped", T))
    for S in ([256, 4096] if args.quick else [256, 1024, 4096, 16384]):
        cases.append(("layer", "grouped", S))
    # a dense layer (the same attention, a SwiGLU MLP): Megatron-Core's host time for dense models
    for T in ([64, 1024] if args.quick else [64, 1024, 4096]):
        cases.append(("moe", "dense", T))
    for S in ([256, 4096] if args.quick else [256, 4096, 16384]):
        cases.append(("layer", "dense", S))
    if args.only_dense:
        cases = [c for c in cases if c[1] == "dense" or c[:2] == ("attn", "sdpa")]
    if args.only_grouped:
        cases = [c for c in cases if c[1] == "grouped" or c[:2] == ("attn", "sdpa")]
    if args.host_blocks:
        floor = [("attn", "sdpa", 256), ("moe", "grouped", 64), ("moe", "dense", 64),
                 ("layer", "grouped", 256), ("layer", "dense", 256)]
        cases = [c for _ in range(args.repeats) for c in floor]
        try:
            comm_calls(200)
        except Exception:
            err("comm_calls")
        save()

    for part, core, n in cases:
        if core not in layers:
            continue
        cfg, layer = layers[core]
        name = (f"mlp_dense_{n}" if core == "dense" and part == "moe" else
                f"{part}_{core}_{n}" if part != "moe" or core == "grouped" else f"moe_{n}")
        if args.host_blocks:
            name += "_r%d" % sum(1 for c in RESULTS["cases"] if c["case"].startswith(name))
        try:
            if part == "attn":
                step = attn_step_factory(layer, n)
                extra = {"part": part, "core": core, "seq": n, "tokens_attn": n}
            elif part == "moe":
                step = moe_step_factory(layer, n)
                extra = ({"part": "mlp", "tokens_mlp": n, "dense": True} if core == "dense" else
                         {"part": part, "tokens_moe": n, "experts": 16, "topk": 8,
                          "experts_impl": "grouped" if core == "grouped" else "sequential"})
            else:
                step = layer_step_factory(layer, n)
                extra = {"part": part, "core": core, "seq": n, "tokens_attn": n, "tokens_moe": n}
            measure(name, step, args.iters, args.warmup, args.prof_iters, idle, extra,
                    targets=wrap_targets(layer))
        except Exception:
            err(f"case {name}")
        save()
        layer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
    return finish(save)


def finish(save):
    """The end of a run: the peak of allocated GPU memory into the results, saved, the process group gone."""
    try:
        import torch
        RESULTS["env"]["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
    except Exception:
        err("max_memory_allocated")
    save()
    log("done")
    try:
        import torch.distributed as dist
        dist.destroy_process_group()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
