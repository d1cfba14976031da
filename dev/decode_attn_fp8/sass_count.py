#!/usr/bin/env python3
"""sass_count.py — instructions per 16-position tile of the decode-attention kernels, from SASS.

    cuobjdump -sass BINARY | python3 sass_count.py

For each kernel named below (v3 over the BF16 and the FP8 cache, v4 over FP8, the variant's three forms;
head_dim 128, 4 and 8 query heads per KV head) it finds the main loop (the backward branch
whose span holds the most HMMA), counts its instructions by class, divides by the tiles one
pass of the loop computes (its HMMA count over the HMMA a tile takes: 32 for v3, 16 for the
variant) and prints the issue-limited ceiling: 132 SMs x 4 schedulers x 1.98 GHz issue one
warp instruction a clock each, so a kernel issuing N warp instructions per tile of B bytes
cannot read faster than 132 * 4 * 1.98e9 * B / N bytes/s (B = 16 x 2 x (128 + 4) for FP8,
16 x 2 x 256 for BF16). Issue slots only: not the tensor-core, conversion or MUFU pipes' rates."""
import re
import sys

KERNELS = [  # (label, mangled-name pattern, HMMA per tile, bytes per tile)
    ("v3 bf16 G4", r"decode3_kernelILi128ELi4E7kv_bf16Lb0E", 32, 16 * 2 * 256),
    ("v3 fp8 G4", r"decode3_kernelILi128ELi4E7kv_e4m3Lb0E", 32, 16 * 2 * 132),
    ("v3 fp8 G8", r"decode3_kernelILi128ELi8E7kv_e4m3Lb0E", 32, 16 * 2 * 132),
    ("v4 fp8 G4", r"decode3_kernelILi128ELi4E7kv_e4m3Lb1E", 32, 16 * 2 * 132),
    ("v4 fp8 G8", r"decode3_kernelILi128ELi8E7kv_e4m3Lb1E", 32, 16 * 2 * 132),
    ("var G4", r"af_kernelILi4ELb0ELb1E", 16, 16 * 2 * 132),
    ("var G8", r"af_kernelILi8ELb0ELb1E", 16, 16 * 2 * 132),
    ("var-alu G4", r"af_kernelILi4ELb1ELb1E", 16, 16 * 2 * 132),
    ("var-alu G8", r"af_kernelILi8ELb1ELb1E", 16, 16 * 2 * 132),
    ("var-b4 G4", r"af_kernelILi4ELb0ELb0E", 16, 16 * 2 * 132),
    ("var-b4 G8", r"af_kernelILi8ELb0ELb0E", 16, 16 * 2 * 132),
]
CLASSES = ["HMMA", "F2FP.e4m3", "F2FP.pack", "MOVM", "PRMT", "MUFU", "SHFL", "mem", "fp32", "int", "ctrl", "mov", "other"]
ISSUE = 132 * 4 * 1.98e9


def classify(op):
    base = op.split(".")[0]
    if base == "HMMA": return "HMMA"
    if base == "F2FP": return "F2FP.e4m3" if "E4M3" in op or "E5M2" in op else "F2FP.pack"
    if base in ("MOVM",): return "MOVM"
    if base == "PRMT": return "PRMT"
    if base == "MUFU": return "MUFU"
    if base == "SHFL": return "SHFL"
    if base in ("LDG", "LD", "LDS", "STS", "STG", "ST", "CCTL", "LDGSTS", "LDSM"): return "mem"
    if base in ("FMUL", "FADD", "FFMA", "FMNMX", "FSETP", "FSEL", "FCHK", "FMNMX3"): return "fp32"
    if base in ("IMAD", "IADD3", "LEA", "SHF", "LOP3", "ISETP", "SEL", "IABS", "IMNMX", "PLOP3", "P2R", "R2P", "VIADD", "IADD",
                "SGXT", "BMSK", "FLO", "POPC", "I2F", "F2I", "IMUL"): return "int"
    if base in ("BRA", "BSSY", "BSYNC", "WARPSYNC", "EXIT", "BAR", "CALL", "RET", "YIELD", "BREAK"): return "ctrl"
    if base in ("MOV", "S2R", "CS2R", "S2UR", "R2UR", "UMOV", "ULDC", "LDC", "UIADD3", "ULEA", "USHF", "ULOP3"): return "mov"
    return "other"


def functions(lines):
    name, body = None, []
    for l in lines:
        m = re.search(r"Function : (\S+)", l)
        if m:
            if name: yield name, body
            name, body = m.group(1), []
        elif name:
            body.append(l)
    if name: yield name, body


def parse(body):
    ins = []
    for l in body:
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", l)
        if m: ins.append((int(m.group(1), 16), m.group(3), m.group(4)))
    return ins


def main_loop(ins):
    best = None
    for addr, op, args in ins:
        if not op.startswith("BRA"): continue
        t = re.search(r"0x([0-9a-f]+)", args)
        if not t: continue
        tgt = int(t.group(1), 16)
        if tgt >= addr: continue
        span = [x for x in ins if tgt <= x[0] <= addr]
        n = sum(1 for x in span if x[1].startswith("HMMA"))
        if n and (best is None or n > best[0]): best = (n, span)
    return best


def main():
    lines = sys.stdin.read().split("\n")
    found = {}
    for name, body in functions(lines):
        for label, pat, per, _ in KERNELS:
            if re.search(pat, name) and label not in found: found[label] = parse(body)
    print("%-11s %5s " % ("kernel", "tiles") + " ".join("%9s" % c for c in CLASSES) + " %7s %7s %10s" %
          ("all", "no-mov", "ceil TB/s"))
    for label, pat, per, nbytes in KERNELS:
        if label not in found:
            print("%-11s not found in the SASS" % label)
            continue
        loop = main_loop(found[label])
        if not loop:
            print("%-11s no loop with HMMA found" % label)
            continue
        n, span = loop
        tiles = n / per
        cnt = {c: 0 for c in CLASSES}
        for _, op, _ in span:
            if op.startswith("NOP"): continue
            cnt[classify(op)] += 1
        total = sum(cnt.values())
        print("%-11s %5.1f " % (label, tiles) + " ".join("%9.1f" % (cnt[c] / tiles) for c in CLASSES) +
              " %7.1f %7.1f %10.2f" % (total / tiles, (total - cnt["mov"]) / tiles, ISSUE * nbytes / (total / tiles) / 1e12))
    return 0


if __name__ == "__main__":
    sys.exit(main())
