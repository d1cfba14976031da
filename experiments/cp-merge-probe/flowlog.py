"""flowlog.py: the phase log that probe.patch writes (TACOSIM_FLOWLOG), read once for the scripts beside it.

Each line: t0 t1 kind key _ src:dst:bytes ...; a phase of kind 1 whose key >> 8 is 7 (PLAN_GROUP_CP) is a CP
ring step. read(path) gives per phase (t0, t1, group, nodes, edges, fields): group the plan group or -1,
nodes the set of nodes (8 GPUs a node) its edges touch, edges [(src, dst, bytes)] as strings, fields the
line's words (t0 and t1 as written, for output that must keep their digits)."""


def read(path):
    rows = []
    for line in open(path):
        p = line.split()
        t0, t1, k0, k1 = float(p[0]), float(p[1]), int(p[2]), int(p[3])
        edges = [tuple(x.split(':')) for x in p[5:]]
        g = (k1 >> 8) if k0 == 1 else -1
        nodes = {int(s) // 8 for s, d, b in edges} | {int(d) // 8 for s, d, b in edges}
        rows.append((t0, t1, g, nodes, edges, p))
    return rows
