#!/usr/bin/env python3
"""codec_buffers.py — what `tacorun execute` allocates for its compressed collectives on one GPU,
buffer by buffer, for a gpt-h4096 validation plan (a plan file and the transport it ran on: nvlink,
shm or socket, experiments/validation/plans.txt). Mirrors the allocations of
kernels/coll_taco.c (coll_team_reserve: the NCCL path's wire buffer, grown whether or not the
direct path runs, for calls made under CUDA graph capture), kernels/coll_direct.c and
coll_direct_staging.c (the direct path's double-buffered staging and its bounce buffers), and
runtime/exec/exec_model.c / exec_step.c (which calls reserve and run what: exec_model_set_codecs,
exec_model_prepare_codecs, tp_allreduce_rows, dp_reduce_groups).

Usage: codec_buffers.py PLAN TRANSPORT [--list]
Prints the total in GiB (or, with --list, one line per buffer)."""

import json
import math
import sys

MIB = 1 << 20
CHUNK = 64 * MIB              # TS_CODEC_CHUNK_BYTES: the NCCL path's chunk
DIRECT_CHUNK = 64 * MIB       # COLL_DIRECT_DEFAULT_CHUNK_BYTES (over NVLink)
HOST_CHUNK = 16 * MIB         # COLL_HOST_DEFAULT_CHUNK_BYTES (through host memory)
TWO_SHOT_MIN = 16 * MIB       # COLL_DIRECT_TWO_SHOT_MIN_BYTES
DIRECT_MAX = 8                # COLL_DIRECT_MAX


def a256(x):
    return (x + 255) & ~255


def block_elems(n, g):
    return -(-n // (2 * g)) * 2 * g


def block_wire(n, g):
    return -(-block_elems(n, g) // g) * (g + 8)


def layout(op, count, n, g, es, chunk):
    """coll_layout_make: (m, nchunks, blocks per chunk); op: ar, ag, rs, sr."""
    seg = -(-(-(-count // n)) // g) * g if op == "ar" else count
    blocks = 1 if op == "sr" else n
    per_block = chunk // es // blocks
    unit = 16 * g if per_block >= 16 * g else 2 * g
    m = max(per_block // unit * unit, 2 * g)
    m = min(m, seg)
    return m, (-(-seg // m) if m else 0), blocks, seg


def nccl_wire(op, count, n, g, es):
    """coll_taco.c wire_need: four wire buffers (a, b, c, d) of the whole message and two staging chunks."""
    m, nchunks, blocks, _ = layout(op, count, n, g, es, CHUNK)
    return 4 * a256(nchunks * blocks * block_wire(m, g)) + 2 * a256(block_elems(m, g) * es)


def direct(op, count, n, g, es, host):
    """The direct path's GPU staging half (coll_direct_staging.c direct_staging_half) and the bounce
    buffers a run grows (coll_direct_run): (half, bounce_in, bounce_out)."""
    one = op == "ar" and (host or count * es < TWO_SHOT_MIN)
    recv0 = min(layout("ar", count, n, g, 2, 1 << 60)[3], count) if op == "ar" and not one else count
    region_a = a256(n * block_wire(recv0, g))
    region_b = region_a if op == "ar" and not one else 0
    half = region_a + region_b
    if not (op == "ar" and not one):
        m, nchunks, _, _ = layout("ag" if op == "ar" else op, count, n, g, es, HOST_CHUNK if host else DIRECT_CHUNK)
        half = max(half, a256(nchunks * n * block_wire(m, g)))
    pitch = a256(block_elems(recv0, g) * es)
    return half, n * pitch, 2 * pitch


class Team:
    """One coll_team: each buffer grows to the largest call."""

    def __init__(self, name, n, transport):
        self.name, self.n = name, n
        self.host = transport == "shm"
        self.has_direct = transport in ("nvlink", "shm") and 2 <= n <= DIRECT_MAX
        self.wire = self.half = self.bin = self.bout = 0

    def reserve(self, op, count, g, es):
        self.wire = max(self.wire, nccl_wire(op, count, self.n, g, es))
        if self.has_direct and op != "sr":
            self.half = max(self.half, direct(op, count, self.n, g, es, self.host)[0])

    def run(self, op, count, g, es):
        self.reserve(op, count, g, es)
        if self.has_direct and op != "sr":
            _, bi, bo = direct(op, count, self.n, g, es, self.host)
            self.bin, self.bout = max(self.bin, bi), max(self.bout, bo)

    def buffers(self):
        return [(self.name + " NCCL-path wire (a, b, c, d + 2 staging chunks)", self.wire),
                (self.name + " direct staging (2 parity halves)", 2 * self.half),
                (self.name + " bounce in (n pieces)", self.bin),
                (self.name + " bounce out (2 pieces)", self.bout)]


def model_of(name):
    path = name if "/" in name or name.endswith(".json") else "models/%s.json" % name
    return json.load(open(path))


def executor_buffers(plan, transport):
    m = model_of(plan["model"])
    lay, b, codec = plan["layout"], plan["batch"], plan["codec"]
    tp, dp, pp = lay["tp"], lay["dp"], lay["pp"]
    sp = lay.get("sequence_parallel", False) and tp > 1
    h, T = m["hidden"], b["micro"] * b["seq"]
    out = []
    kind = {k: codec.get(k, {}).get("kind", "none") for k in ("tp_fwd", "tp_bwd", "pp", "dp")}
    grp = {k: codec.get(k, {}).get("group", 128) for k in kind}
    if tp > 1:
        t = Team("TP", tp, transport)
        for k in ("tp_fwd", "tp_bwd"):
            if kind[k] == "taco":
                t.reserve("ar", T * h, grp[k], 2)  # exec_model_set_codecs
                if sp:  # exec_model_prepare_codecs: the SP all-gathers and reduce-scatters, run
                    t.run("ag", T // tp * h, grp[k], 2)
                    t.run("rs", T // tp * h, grp[k], 2)
                else:
                    t.run("ar", T * h, grp[k], 2)
        out += [x for x in t.buffers() if x[1]]
        caat = [k for k in ("tp_fwd", "tp_bwd") if kind[k] in ("caat", "taco_caat")]
        if caat:  # coll_caat_allreduce's packed shared channels; the backward's FP32 copy (exec_step.c)
            es = [2 if k == "tp_fwd" else 4 for k in caat]
            shared = [math.floor(codec[k]["p"] * h) if codec[k]["p"] < 1 else h for k in caat]
            out.append(("TP CAAT pack", max(T * s * e + 16 for s, e in zip(shared, es))))
            if "tp_bwd" in caat:
                out.append(("TP CAAT backward FP32 copy of the whole gradient (caat_f32)", T * h * 4))
    if pp > 1 and kind["pp"] == "taco":
        t = Team("PP", 2, "socket")  # send/recv: the NCCL path (AUTO keeps it)
        t.reserve("sr", (T // tp if sp else T) * h, grp["pp"], 2)
        out += [x for x in t.buffers() if x[1]]
    if dp > 1 and kind["dp"] == "taco":
        if lay.get("zero1", False):
            raise SystemExit("codec_buffers.py: ZeRO-1 with a DP codec is not mirrored")
        Vp = -(-m["vocab"] // (128 * tp)) * 128 * tp
        f = m.get("ffn_hidden", 4 * h)
        gated = 2 if m.get("activation") == "swiglu" else 1
        largest = max(Vp // tp * h, h * gated * f // tp, f // tp * h, 3 * h // tp * h)  # the largest tensor, FP32
        t = Team("DP", dp, transport)
        t.run("ar", largest, grp["dp"], 4)
        out += [x for x in t.buffers() if x[1]]
    return out


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bufs = executor_buffers(json.load(open(sys.argv[1])), sys.argv[2])
    if "--list" in sys.argv[3:]:
        for name, b in bufs:
            print("%-70s %8.3f GiB" % (name, b / 2 ** 30))
    print("%.6f" % (sum(b for _, b in bufs) / 2 ** 30))
