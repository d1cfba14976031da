#!/usr/bin/env python3
"""PyTorch's caching allocator under Megatron-Core training, on one GPU: how much more the process
reserves than it allocates (fragmentation and cached free blocks), against what churns.

tacosim's memory model (plan/plan_memory.c) counts tensors and a measured CUDA context; tacosim's own
executor allocates with cudaMalloc, so it has no caching allocator to measure. Published runs train
with Megatron-LM on PyTorch's caching allocator. This script trains a Megatron-Core GPTModel
(Megatron-LM's own source, exported into experiments/published/moe/host/megatron-src/, ignored by git; local spec, no Transformer
Engine, no apex) for a few iterations at a handful of dense shapes and records, per configuration:

  static          torch.cuda.memory_allocated() between iterations, after the first optimizer step:
                  BF16 parameters, FP32 gradient buffer, FP32 main parameters and Adam moments
  peak_alloc      torch.cuda.max_memory_allocated() over the iterations after the first
  peak_reserved   torch.cuda.max_memory_reserved() over the same iterations
  churn           peak_alloc - static: activations, gradients in flight, transient buffers
  reserve         peak_reserved - peak_alloc: what the allocator holds beyond the live tensors at its peak
  memory_stats()  inactive_split_bytes peak, num_alloc_retries, num_ooms, segment counts
  non-torch       per-process device memory (nvidia-smi --query-compute-apps, and cudaMemGetInfo less the
                  idle device) minus torch.cuda.memory_reserved(): CUDA context, kernel images, cuBLAS
                  workspaces, NCCL

each under the default allocator and under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, each
configuration in a fresh process. The training step is Megatron-LM's (megatron/training/training.py
train_step at the commit): DistributedDataParallel (FP32 gradient buffer, distributed optimizer, world
size 1), zero_grad_buffer, get_forward_backward_func() over M micro-batches (gradient accumulation),
get_megatron_optimizer's step (Adam; without TE or apex Megatron-Core falls back to torch.optim.AdamW,
megatron/core/optimizer/__init__.py; FP32 main parameters in the distributed optimizer; --optimizer fused, the
default, builds torch's fused AdamW in its place, standing in for TE's / apex's FusedAdam: the foreach
fallback's step makes temporaries the size of all main parameters). The peaks of the forward-backward and of
the optimizer step are recorded apart. Core attention
is torch's scaled_dot_product_attention (flash / cuDNN kernels, as TE's fused attention of published
runs: no s x s scores), since the local spec's DotProductAttention would hold the scores.

Usage: python3 alloc_frag.py --out DIR [--quick] [--budget-s S]    (GPU; run_gpu.sh wraps it)
       python3 alloc_frag.py --list [--quick]                       (the configurations; no torch)
       python3 alloc_frag.py --summary DIR/alloc_frag.json          (the table again; no torch)
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# Megatron-LM's megatron/ at 1e057005 (ignored by git): the one export experiments/published/moe/host/ reads too
MEGATRON_SRC = os.path.normpath(os.path.join(HERE, "..", "..", "published", "moe", "host", "megatron-src"))
GIB = 1024.0 ** 3
ALLOCATORS = {"default": None, "expandable": "expandable_segments:True"}

# Shapes. "gpt": GPT-3-style dense layer at hidden 4,096 (32 heads, FFN 4h = 16,384, GELU, LayerNorm,
# biases, learned absolute positions, GPT-2 vocabulary 50,257 padded to 50,304, a multiple of 128).
# "llama": Llama-3-8B's layer (hidden 4,096, 32 heads, 8 KV heads, FFN 14,336, SwiGLU, RMSNorm, RoPE base
# 500,000, no biases, vocabulary 128,256; Meta-Llama-3-8B config.json).
SHAPES = {
    "gpt": {"hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 16384, "vocab": 50304, "swiglu": False,
            "norm": "LayerNorm", "bias": True, "pos": "learned_absolute", "rope_base": 10000},
    "llama": {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "swiglu": True,
              "norm": "RMSNorm", "bias": False, "pos": "rope", "rope_base": 500000},
}


def cases(quick):
    """The configurations, in the order they run (the most informative first: a run past its time budget
    drops the tail). Each: shape, layers, seq, micro-batch size (mbs), micro-batches per iteration (mb),
    recompute (none, full: every layer uniform 1, sel-mlp: selective recompute of the dense MLP)."""
    def c(shape, layers, seq, mbs, mb, recompute):
        return {"name": f"{shape}-L{layers}-s{seq}-b{mbs}x{mb}-{recompute}", "shape": shape, "layers": layers,
                "seq": seq, "mbs": mbs, "mb": mb, "recompute": recompute}
    if quick:
        return [c("gpt", 2, 2048, 1, 2, "none")]
    return [
        c("llama", 4, 4096, 1, 4, "none"),
        c("gpt", 4, 2048, 2, 4, "none"),
        c("llama", 4, 4096, 2, 4, "full"),
        c("llama", 4, 2048, 4, 2, "none"),
        c("gpt", 8, 2048, 4, 4, "full"),
        c("llama", 4, 4096, 2, 4, "sel-mlp"),
    ]


def runs(quick):
    """(case, allocator) pairs: each case under both allocators, back to back."""
    return [(cs, a) for cs in cases(quick) for a in ALLOCATORS]


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------------------
# Summary (pure Python)
# ---------------------------------------------------------------------------------------------------------

def derive(r):
    """Adds churn, reserve and their ratios to one run record (bytes in, GiB and fractions out)."""
    m = r.get("mem")
    if not m:
        return r
    static, pa, pr = m["static"], m["peak_alloc"], m["peak_reserved"]
    ph = m.get("phases")
    # churn: what the forward-backward allocates beyond the static memory (older records: the overall peak's)
    churn = (ph["fb_alloc"] if ph else pa) - static
    reserve = pr - pa
    r["derived"] = {"static_gib": static / GIB, "peak_alloc_gib": pa / GIB, "peak_reserved_gib": pr / GIB,
                    "fb_peak_alloc_gib": ph["fb_alloc"] / GIB if ph else None,
                    "step_peak_alloc_gib": ph["step_alloc"] / GIB if ph else None,
                    "churn_gib": churn / GIB, "reserve_gib": reserve / GIB,
                    "reserve_over_churn": reserve / churn if churn > 0 else None,
                    "reserve_over_peak_alloc": reserve / pa if pa > 0 else None}
    return r


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def summary_table(res):
    """The table: one row per (case, allocator)."""
    hdr = ("case", "alloc", "static", "fb_al", "step_al", "peak_al", "peak_rs", "churn", "reserve", "rs/churn", "rs/peak",
           "inact_pk", "retries", "segs_pk", "nontorch", "status")
    rows = [hdr]
    for r in res.get("runs", []):
        d = r.get("derived", {})
        st = r.get("stats", {})
        rows.append((r["case"]["name"], r["allocator"], fmt(d.get("static_gib"), ".2f"),
                     fmt(d.get("fb_peak_alloc_gib"), ".2f"), fmt(d.get("step_peak_alloc_gib"), ".2f"),
                     fmt(d.get("peak_alloc_gib"), ".2f"), fmt(d.get("peak_reserved_gib"), ".2f"),
                     fmt(d.get("churn_gib"), ".2f"), fmt(d.get("reserve_gib"), ".2f"),
                     fmt(None if d.get("reserve_over_churn") is None else 100 * d["reserve_over_churn"], ".1f"),
                     fmt(None if d.get("reserve_over_peak_alloc") is None else 100 * d["reserve_over_peak_alloc"],
                         ".1f"),
                     fmt(None if st.get("inactive_split_bytes.all.peak") is None
                         else st["inactive_split_bytes.all.peak"] / GIB, ".2f"),
                     fmt(st.get("num_alloc_retries"), "d"), fmt(st.get("segment.all.peak"), "d"),
                     fmt(None if r.get("non_torch_gib") is None else r["non_torch_gib"], ".2f"),
                     r.get("status", "?")))
    w = [max(len(str(row[i])) for row in rows) for i in range(len(hdr))]
    lines = ["  ".join(str(x).rjust(w[i]) if i > 1 else str(x).ljust(w[i]) for i, x in enumerate(row))
             for row in rows]
    lines.append("GiB; static = memory_allocated between iterations; fb_al, step_al = allocated peaks of the "
                 "forward-backward and of the optimizer step; churn = fb_al - static (older runs: peak_al - static); reserve = "
                 "peak_reserved - peak_alloc; rs/churn, rs/peak in %; inact_pk = inactive_split_bytes peak; "
                 "segs_pk = segment.all.peak; nontorch = process device memory - memory_reserved (nvidia-smi)")
    ctx = res.get("context", {})
    if ctx:
        lines.append("CUDA context: " + json.dumps(ctx))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# GPU side (one configuration per process)
# ---------------------------------------------------------------------------------------------------------

def smi_process_mib(pid):
    """This process's device memory in MiB as nvidia-smi reports it, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        for line in out.splitlines():
            p = [x.strip() for x in line.split(",")]
            if len(p) == 2 and p[0] == str(pid):
                return float(p[1])
    except Exception:  # noqa: BLE001 (absent or failing nvidia-smi: no number)
        pass
    return None


def smi_device_used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.splitlines()[0]
        u, t = [float(x) for x in out.split(",")]
        return {"used_mib": u, "total_mib": t}
    except Exception:  # noqa: BLE001
        return None


def make_sdpa_class():
    """Core attention through torch's scaled_dot_product_attention, with Megatron's core-attention interface:
    q [s, b, np, hn], k/v [s, b, ng, hn] -> [s, b, np*hn] (as experiments/published/moe/host/layer_host.py)."""
    import torch.nn.functional as F
    from megatron.core.transformer.module import MegatronModule

    class SDPACore(MegatronModule):
        def __init__(self, config, layer_number=None, attn_mask_type=None, attention_type=None,
                     attention_dropout=None, softmax_scale=None, cp_comm_type=None, model_comm_pgs=None, **kw):
            super().__init__(config=config)
            self.scale = softmax_scale

        def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                    packed_seq_params=None):
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                               enable_gqa=(q.shape[1] != k.shape[1]))
            s, b = query.shape[0], query.shape[1]
            return o.permute(2, 0, 1, 3).reshape(s, b, -1)

    return SDPACore


def child(case, out_path):
    """Builds, trains and measures one configuration; writes its record to out_path."""
    rec = {"case": case, "allocator": os.environ.get("ALLOC_FRAG_ALLOCATOR", "?"),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), "status": "started", "points": []}
    sys.path.insert(0, MEGATRON_SRC)

    def save():
        with open(out_path, "w") as f:
            json.dump(rec, f, indent=1)

    import torch

    def point(what):
        free, total = torch.cuda.mem_get_info()
        p = {"what": what, "t": time.time() - t0, "device_used": total - free, "device_total": total,
             "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
             "smi_process_mib": smi_process_mib(os.getpid())}
        rec["points"].append(p)
        return p

    t0 = time.time()
    try:
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")
        point("context")
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
        from megatron.core import parallel_state
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
        model_parallel_cuda_manual_seed(1234)
        p = point("nccl + model parallel")
        cap_device(rec, p, float(os.environ.get("ALLOC_FRAG_DEVICE_GIB", "0")))
        model, gpt, cfg, opt = build(case, rec)
        p = point("model + optimizer built")
        rec["params"] = sum(x.numel() for x in gpt.parameters())
        rec["built_allocated"] = p["allocated"]
        train(case, rec, model, cfg, opt, point, save)
        rec["status"] = "ok"
    except torch.cuda.OutOfMemoryError:
        rec["status"] = "oom"
        rec["error"] = traceback.format_exc()[-3000:]
        rec["stats_at_oom"] = pick_stats(torch.cuda.memory_stats())
    except Exception:  # noqa: BLE001 (recorded, the parent goes on)
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-3000:]
    rec["wall_s"] = time.time() - t0
    save()
    log(f"child {case['name']} {rec['allocator']}: {rec['status']} in {rec['wall_s']:.1f} s")
    if rec["status"] != "ok":
        log(rec.get("error", ""))
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass


def cap_device(rec, p, device_gib):
    """On a card larger than device_gib, caps the caching allocator (set_per_process_memory_fraction) at what it
    could reserve on a card of device_gib: device_gib less the device memory in use now (context, NCCL), so that
    an H200 behaves as an H100 near its limit (frees its cache and retries, num_alloc_retries)."""
    import torch
    total = p["device_total"]
    if device_gib <= 0 or device_gib * GIB >= total:
        rec["cap"] = None
        return
    frac = (device_gib * GIB - p["device_used"]) / total
    torch.cuda.set_per_process_memory_fraction(frac)
    rec["cap"] = {"device_gib": device_gib, "fraction": frac, "allocator_limit_gib": frac * total / GIB}


STAT_KEYS = ["allocated_bytes.all.peak", "reserved_bytes.all.peak", "reserved_bytes.all.current",
             "active_bytes.all.peak", "inactive_split_bytes.all.peak", "inactive_split_bytes.all.current",
             "inactive_split_bytes.large_pool.peak", "inactive_split_bytes.small_pool.peak",
             "reserved_bytes.large_pool.peak", "reserved_bytes.small_pool.peak",
             "segment.all.peak", "segment.all.current", "segment.large_pool.peak", "segment.small_pool.peak",
             "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
             "oversize_allocations.peak", "oversize_segments.peak", "max_split_size"]


def pick_stats(st):
    return {k: st[k] for k in STAT_KEYS if k in st}


def build(case, rec):
    """GPTModel (local spec, SDPA core attention) under Float16Module and DistributedDataParallel, and
    get_megatron_optimizer's optimizer, as megatron/training/training.py setup_model_and_optimizer wires them."""
    import torch
    import torch.nn.functional as F
    from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                           finalize_model_grads)
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    sh = SHAPES[case["shape"]]
    rc = {"none": {}, "full": {"recompute_granularity": "full", "recompute_method": "uniform",
                               "recompute_num_layers": 1},
          "sel-mlp": {"recompute_granularity": "selective", "recompute_modules": ["mlp"]}}[case["recompute"]]
    cfg = TransformerConfig(
        num_layers=case["layers"], hidden_size=sh["hidden"], num_attention_heads=sh["heads"],
        num_query_groups=sh["kv_heads"], ffn_hidden_size=sh["ffn"], normalization=sh["norm"],
        layernorm_epsilon=1e-5, gated_linear_unit=sh["swiglu"], activation_func=F.silu if sh["swiglu"] else F.gelu,
        add_bias_linear=sh["bias"], add_qkv_bias=sh["bias"], hidden_dropout=0.0, attention_dropout=0.0,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        apply_rope_fusion=False, masked_softmax_fusion=False, bias_activation_fusion=False,
        bias_dropout_fusion=False, gradient_accumulation_fusion=False, persist_layer_norm=False,
        sequence_parallel=False, tensor_model_parallel_size=1, **rc)
    spec = get_gpt_layer_local_spec(normalization=sh["norm"])
    spec.submodules.self_attention.submodules.core_attention = make_sdpa_class()
    gpt = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=sh["vocab"],
                   max_sequence_length=case["seq"], pre_process=True, post_process=True, parallel_output=True,
                   share_embeddings_and_output_weights=False, position_embedding_type=sh["pos"],
                   rotary_percent=1.0, rotary_base=sh["rope_base"])
    gpt = gpt.cuda()
    f16 = Float16Module(cfg, gpt)
    ddp_cfg = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=True,
                                            use_distributed_optimizer=True)
    model = DistributedDataParallel(config=cfg, ddp_config=ddp_cfg, module=f16)
    opt_cfg = OptimizerConfig(optimizer="adam", lr=1e-5, min_lr=1e-6, weight_decay=0.1, adam_beta1=0.9,
                              adam_beta2=0.95, bf16=True, params_dtype=torch.bfloat16,
                              use_distributed_optimizer=True, clip_grad=1.0)
    # Without Transformer Engine, Megatron-Core's fp8_utils.quantize_param_shard raises even when there is no
    # FP8 parameter to cast (its fallback without TE); the distributed optimizer calls it every step. Here no
    # parameter is FP8, so an empty call is skipped and any other still reaches Megatron's own function.
    import megatron.core.optimizer.distrib_optimizer as distrib_optimizer
    if not getattr(distrib_optimizer, "_alloc_frag_guard", False):
        megatron_quantize = distrib_optimizer.quantize_param_shard

        def quantize_param_shard(model_params, *args, **kwargs):
            if len(model_params) == 0:
                return None
            return megatron_quantize(model_params, *args, **kwargs)

        distrib_optimizer.quantize_param_shard = quantize_param_shard
        distrib_optimizer._alloc_frag_guard = True
    import functools
    import megatron.core.optimizer as mopt
    if case.get("optimizer", "fused") == "fused":
        # Megatron-Core's Adam without TE or apex is torch.optim.AdamW (foreach), whose step makes temporaries the
        # size of all main parameters (a full FP32 copy and more); TE's and apex's FusedAdam of published runs
        # make none. torch's fused AdamW (one kernel, no such temporaries) stands in for them.
        mopt.Adam = functools.partial(torch.optim.AdamW, fused=True)
    opt = get_megatron_optimizer(opt_cfg, [model])
    inner = [getattr(o, "optimizer", None) for o in getattr(opt, "chained_optimizers", [opt])]
    rec["optimizer"] = f"{type(opt).__name__} over " + ", ".join(
        f"{type(o).__name__}({type(getattr(o, 'optimizer', None)).__module__}."
        f"{type(getattr(o, 'optimizer', None)).__name__})" for o in getattr(opt, "chained_optimizers", [opt]))
    del inner
    cfg.no_sync_func = model.no_sync
    cfg.finalize_model_grads_func = finalize_model_grads
    cfg.grad_scale_func = opt.scale_loss
    model.train()
    return model, gpt, cfg, opt


def train(case, rec, model, cfg, opt, point, save):
    """iterations of megatron/training/training.py train_step: zero_grad_buffer, forward_backward over mb
    micro-batches, optimizer step. Peaks are reset after the first iteration (optimizer states allocated)."""
    import itertools
    from functools import partial
    import torch
    from megatron.core.pipeline_parallel import get_forward_backward_func

    S, B, M = case["seq"], case["mbs"], case["mb"]
    vocab = SHAPES[case["shape"]]["vocab"]
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (B, S), generator=g).pin_memory()
    batch = {"tokens": tokens, "labels": torch.roll(tokens, -1, 1).pin_memory(),
             "loss_mask": torch.ones(B, S, dtype=torch.float32).pin_memory(),
             "position_ids": torch.arange(S).unsqueeze(0).expand(B, S).contiguous().pin_memory()}

    def loss_func(loss_mask, output_tensor):
        losses = output_tensor.view(-1).float()
        loss_mask = loss_mask.view(-1).float()
        loss = torch.sum(losses * loss_mask)
        num_tokens = loss_mask.sum().clone().detach().to(torch.int)
        return loss, num_tokens, {"lm loss": torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])}

    def forward_step(data_iterator, model):
        b = {k: v.cuda(non_blocking=True) for k, v in next(data_iterator).items()}
        out = model(b["tokens"], b["position_ids"], None, labels=b["labels"], loss_mask=b["loss_mask"])
        return out, partial(loss_func, b["loss_mask"])

    fb = get_forward_backward_func()
    rec["schedule"] = fb.__name__
    iters = case.get("iters", 3)
    rec["iters"] = []
    phase = {"fb_alloc": 0, "fb_reserved": 0, "step_alloc": 0, "step_reserved": 0}
    for it in range(iters):
        if it == 1:
            torch.cuda.synchronize()
            rec["static"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t = time.time()
        model.zero_grad_buffer()
        opt.zero_grad()
        torch.cuda.synchronize()
        if it >= 1:
            torch.cuda.reset_peak_memory_stats()
        losses = fb(forward_step_func=forward_step, data_iterator=itertools.repeat(batch), model=[model],
                    num_microbatches=M, seq_length=S, micro_batch_size=B, forward_only=False)
        torch.cuda.synchronize()
        fb_a, fb_r = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        fb_stats = pick_stats(torch.cuda.memory_stats())
        if it >= 1:
            torch.cuda.reset_peak_memory_stats()
        ok, grad_norm, _ = opt.step()
        torch.cuda.synchronize()
        st_a, st_r = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        if it >= 1:
            phase["fb_alloc"], phase["fb_reserved"] = max(phase["fb_alloc"], fb_a), max(phase["fb_reserved"], fb_r)
            phase["step_alloc"], phase["step_reserved"] = max(phase["step_alloc"], st_a), max(phase["step_reserved"], st_r)
        loss = sum(float(x["lm loss"][0]) for x in losses) / max(1, sum(float(x["lm loss"][1]) for x in losses))
        st = torch.cuda.memory_stats()
        rec["iters"].append({"s": time.time() - t, "loss": loss, "grad_norm": float(grad_norm) if grad_norm else None,
                             "update_ok": bool(ok), "allocated_end": torch.cuda.memory_allocated(),
                             "fb_peak_alloc": fb_a, "fb_peak_reserved": fb_r, "step_peak_alloc": st_a,
                             "step_peak_reserved": st_r, "fb_stats": fb_stats, "stats": pick_stats(st)})
        log(f"  iter {it}: {time.time() - t:.2f} s, loss {loss:.3f}, allocated {torch.cuda.memory_allocated() / GIB:.2f}"
            f" GiB, peak {st['allocated_bytes.all.peak'] / GIB:.2f}, reserved peak {st['reserved_bytes.all.peak'] / GIB:.2f}")
        save()
    st = torch.cuda.memory_stats()
    rec["stats"] = pick_stats(st)
    # peaks over the iterations after the first, the forward-backward and the optimizer step apart (the peaks are
    # reset before each phase: each phase's reserved peak starts from what is reserved when it starts)
    rec["mem"] = {"static": rec["static"], "peak_alloc": max(phase["fb_alloc"], phase["step_alloc"]),
                  "peak_reserved": max(phase["fb_reserved"], phase["step_reserved"]), "phases": phase}
    p = point("trained")
    if p["smi_process_mib"] is not None:
        rec["non_torch_gib"] = (p["smi_process_mib"] * 1048576.0 - p["reserved"]) / GIB


# ---------------------------------------------------------------------------------------------------------
# Parent
# ---------------------------------------------------------------------------------------------------------

def env_info(res):
    e = res["env"]
    e["python"] = sys.version.split()[0]
    e["platform"] = platform.platform()
    try:
        with open(os.path.join(MEGATRON_SRC, "COMMIT")) as f:
            e["megatron_commit"] = f.read().strip()
    except OSError:
        e["megatron_commit"] = None
    try:
        e["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        e["gpu"] = None
    # torch's version from a child process: the parent never touches the GPU
    try:
        e["torch"] = subprocess.run([sys.executable, "-c", "import torch;print(torch.__version__, torch.version.cuda)"],
                                    capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:  # noqa: BLE001
        e["torch"] = None


def context_from(res):
    """CUDA context size from the first run that got one: device memory in use right after the first CUDA call
    less the idle device's (cudaMemGetInfo), and nvidia-smi's per-process figure; and the non-torch memory
    after training (context + kernel images + cuBLAS + NCCL)."""
    idle = res["env"].get("idle_device")
    for r in res.get("runs", []):
        pts = {p["what"]: p for p in r.get("points", [])}
        c = pts.get("context")
        if not c:
            continue
        out = {"from": f"{r['case']['name']} {r['allocator']}",
               "after_first_call_smi_process_gib": None if c["smi_process_mib"] is None else c["smi_process_mib"] / 1024,
               "after_first_call_memgetinfo_gib": c["device_used"] / GIB}
        if idle:
            out["after_first_call_memgetinfo_less_idle_gib"] = (c["device_used"] - idle["used_mib"] * 1048576.0) / GIB
        n = pts.get("nccl + model parallel")
        if n and n["smi_process_mib"] is not None:
            out["after_nccl_smi_process_gib"] = n["smi_process_mib"] / 1024 - n["reserved"] / GIB
        tr = pts.get("trained")
        if tr and tr["smi_process_mib"] is not None:
            out["after_training_non_torch_smi_gib"] = tr["smi_process_mib"] / 1024 - tr["reserved"] / GIB
        if tr and idle:
            out["after_training_non_torch_memgetinfo_less_idle_gib"] = (
                tr["device_used"] - idle["used_mib"] * 1048576.0 - tr["reserved"]) / GIB
        return out
    return {}


def parent(args):
    res = {"env": {}, "runs": [], "quick": args.quick, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "alloc_frag.json")

    def save():
        res["context"] = context_from(res)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    t_start = time.time()
    env_info(res)
    res["env"]["idle_device"] = smi_device_used_mib()
    log(json.dumps(res["env"], indent=1))
    pending = [(c, a) for c, a in runs(args.quick) if not args.only or c["name"] in args.only.split(",")]
    for i, (cs, alloc) in enumerate(pending):
        left = args.budget_s - (time.time() - t_start)
        if left < 20:
            res["runs"].append({"case": cs, "allocator": alloc, "status": "skipped (time budget)"})
            continue
        if i > 0 and res["runs"][0].get("status") == "error":
            # the first run failed in the script or in Megatron (not out of memory, not a timeout): the others
            # would fail the same way; stop early
            res["runs"].append({"case": cs, "allocator": alloc, "status": "skipped (first run failed)"})
            continue
        cs = dict(cs, iters=args.iters, optimizer=args.optimizer)
        tmo = min(args.case_timeout_s, left)
        env = dict(os.environ, ALLOC_FRAG_ALLOCATOR=alloc, ALLOC_FRAG_DEVICE_GIB=str(args.device_gib), PYTHONUNBUFFERED="1", CUDA_DEVICE_MAX_CONNECTIONS="1")
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if ALLOCATORS[alloc]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = ALLOCATORS[alloc]
        env["MASTER_PORT"] = str(29600 + i)
        cpath = os.path.join(args.out, f"run-{i:02d}.json")
        log(f"--- [{i + 1}/{len(pending)}] {cs['name']} allocator {alloc} (timeout {tmo:.0f} s, {left:.0f} s left)")
        t = time.time()
        try:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(cs), "--child-out", cpath],
                           env=env, timeout=tmo, check=False)
            status = None
        except subprocess.TimeoutExpired:
            status = f"timeout after {tmo:.0f} s"
        try:
            with open(cpath) as f:
                r = json.load(f)
        except (OSError, ValueError):
            r = {"case": cs, "allocator": alloc, "status": "no record"}
        if status:
            r["status"] = status + " (was " + str(r.get("status")) + ")"
        r["child_wall_s"] = time.time() - t
        res["runs"].append(derive(r))
        save()
    res["wall_s"] = time.time() - t_start
    save()
    table = summary_table(res)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(table + "\n")
    log(table)
    log(f"total {res['wall_s']:.0f} s; {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output folder (alloc_frag.json, summary.txt, run-NN.json)")
    ap.add_argument("--quick", action="store_true", help="one small configuration under both allocators (< 60 s)")
    ap.add_argument("--budget-s", type=float, default=270.0,
                    help="wall seconds for all configurations; those that would start later are skipped (default 270)")
    ap.add_argument("--case-timeout-s", type=float, default=75.0,
                    help="wall seconds one configuration's process may take before it is killed (default 75)")
    ap.add_argument("--iters", type=int, default=3, help="training iterations per configuration (default 3; "
                    "peaks from the second on)")
    # 79.11 GiB: the total capacity PyTorch reports for an H100 80 GB HBM3 in its out-of-memory message
    # (github.com/vllm-project/vllm issue 27508: "GPU 0 has a total capacity of 79.11 GiB")
    ap.add_argument("--device-gib", type=float, default=79.11,
                    help="on a larger card, cap the allocator at what a card of this many GiB would leave it "
                         "(default 79.11: an H100 80 GB's total as PyTorch reports it; 0: no cap)")
    ap.add_argument("--optimizer", choices=["fused", "foreach"], default="fused",
                    help="the Adam Megatron-Core builds: torch's fused AdamW, standing in for TE's / apex's FusedAdam "
                         "(default), or torch's foreach AdamW, Megatron-Core's own fallback without them (its step "
                         "makes temporaries the size of all main parameters)")
    ap.add_argument("--only", default="", help="comma list of configuration names to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the configurations and exit (no torch needed)")
    ap.add_argument("--summary", metavar="JSON", help="print the table of a finished run's alloc_frag.json and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child), args.child_out)
        return 0
    if args.list:
        for cs, a in runs(args.quick):
            print(cs["name"], a, ALLOCATORS[a] or "(PYTORCH_CUDA_ALLOC_CONF unset)")
        return 0
    if args.summary:
        with open(args.summary) as f:
            res = json.load(f)
        res["runs"] = [derive(r) for r in res.get("runs", [])]
        print(summary_table(res))
        return 0
    if not args.out:
        ap.error("--out DIR is required")
    if args.iters < 2:
        ap.error("--iters: at least 2 (the first allocates the optimizer states)")
    if not os.path.isdir(os.path.join(MEGATRON_SRC, "megatron", "core")):
        print(f"alloc_frag.py: {MEGATRON_SRC}/megatron/core: missing (see run_gpu.sh)", file=sys.stderr)
        return 2
    parent(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
