#!/usr/bin/env python3
"""arch_check.py — the module layering, checked from the build files and the sources.

A module is a top folder (common/, plan/, sim/, ...), or a folder of runtime/ (runtime/exec/,
...: one library each); runtime/tacorun.c is the module `runtime`. The layering, as the
modules' CMakeLists.txt link them (target_link_libraries), lowest first:

  rank 0  common          ts_common
  rank 1  models          ts_models                      -> common
          topologies      ts_topo                        -> common
          schema          ts_schema                      -> common
          kernels         ts_kernels_ref, ts_kernels_cuda -> common
          runtime/ops     ts_ops_ref, ts_ops             -> common
  rank 2  plan            ts_plan                        -> models, topologies, common
          runtime/nccl    ts_rt_idmsg, ts_rt_nccl        -> kernels, schema, common
  rank 3  sim             ts_sim, ts_search              -> plan, schema, ...
          runtime/exec    ts_exec_cpu, ts_exec           -> plan, runtime/ops, runtime/nccl, kernels, ...
          runtime/infer   ts_infer                       -> plan, runtime/ops, runtime/nccl, kernels, ...
  rank 4  runtime/calibrate  ts_calibrate_cpu, ts_calibrate -> runtime/infer, plan, ...
          runtime/bench      ts_bench_cpu, ts_bench         -> runtime/infer, runtime/ops, runtime/nccl, plan, ...
          runtime/train      ts_train_cpu, ts_train         -> runtime/exec, ...
  rank 5  runtime (tacorun), dev, calibration, experiments: programs over the libraries
  tests/ may use anything.

ALLOWED below is that layering arrow by arrow (ARCHITECTURE.md, "The arrows"): sim/ and
runtime/ never reach each other, kernels/ knows only common/; plan/ may use schema/ (it does
not at present: ts_plan links no ts_schema).
The checks (each failure names the file, and the line or the target):

  1. the table itself has no cycle (so a rank exists for every module);
  2. every #include "..." of a module's sources (.c .h .cu .cuh .cpp) that names a header of
     another module is an allowed arrow; a header is found beside the including file first,
     then by its path under the repository, then by its name (header names are unique: a
     name held by two modules is reported);
  3. every target_link_libraries of a target to a target of another module is an allowed
     arrow (a target's module is that of its first source, else that of its CMake file);
  4. a module that includes another module's header also links one of that module's
     libraries (directly or through the libraries it links), where the module has targets;
  5. a target compiles only sources of its own module: a test or a program links the library
     that owns a source, it does not compile the source again;
  6. no cycle between modules over include and link arrows together;
  7. no cycle between header files (a.h includes b.h includes ... a.h), anywhere.

Usage: tests/arch_check.py [--graph]   (exit 0: all hold; 1: a violation; --graph prints
the module arrows, "A -> B  include|link").  Plain python3, standard library only.
"""
import os
import re
import subprocess
import sys

ALLOWED = {
    "common": [],
    "models": ["common"],
    "topologies": ["common"],
    "schema": ["common"],
    "kernels": ["common"],
    "runtime/ops": ["common"],
    "plan": ["models", "topologies", "schema", "common"],
    "runtime/nccl": ["kernels", "schema", "common"],
    "sim": ["plan", "models", "topologies", "schema", "common"],
    "runtime/exec": ["runtime/ops", "runtime/nccl", "kernels", "plan", "models", "topologies",
                     "schema", "common"],
    "runtime/infer": ["runtime/ops", "runtime/nccl", "kernels", "plan", "models", "topologies",
                      "schema", "common"],
    "runtime/bench": ["runtime/infer", "runtime/ops", "runtime/nccl", "kernels", "plan", "models",
                      "topologies", "schema", "common"],
    "runtime/calibrate": ["runtime/infer", "runtime/ops", "runtime/nccl", "kernels", "plan",
                          "models", "topologies", "schema", "common"],
    "runtime/train": ["runtime/exec", "runtime/ops", "runtime/nccl", "kernels", "plan", "models",
                      "topologies", "schema", "common"],
    "runtime": ["runtime/exec", "runtime/infer", "runtime/calibrate", "runtime/bench",
                "runtime/train"],
    "dev": ["runtime/ops", "kernels", "models", "common"],
    "calibration": ["schema", "common"],
    "experiments": ["sim", "plan", "models", "topologies", "schema", "common"],
}
FREE = {"tests", "scripts"}  # may use anything
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp")
HEADER_EXT = (".h", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    """The module that holds PATH (relative to the repository root), or None at the top."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    if len(parts) > 2 and parts[0] + "/" + parts[1] in ALLOWED:
        return parts[0] + "/" + parts[1]
    return parts[0]


def repo_files(root):
    """The tracked and untracked-but-not-ignored files; every file but build trees outside git."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        return [f for f in out.splitlines() if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.startswith(".")
                          and not os.path.exists(os.path.join(d, s, "CMakeCache.txt"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def find_cycle(graph):
    """A cycle of GRAPH (node -> iterable of nodes) as a list of nodes, or None."""
    state = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph.get(start, ()))))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    return None


def ranks(table):
    """Each module's rank: 0 for one that uses nothing, else 1 + the highest it uses."""
    memo = {}

    def rank(m):
        if m not in memo:
            memo[m] = 1 + max((rank(u) for u in table[m]), default=-1)
        return memo[m]
    return {m: rank(m) for m in table}


# ---- CMake ---------------------------------------------------------------------------------

def cmake_commands(text):
    """(name, args, line) of each command of a CMake file (comments dropped, no nesting)."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.group(1).lower(), text[m.end():i - 1].split(), text.count("\n", 0, m.start()) + 1


def cmake_targets(root, files):
    """targets {name: {module, file, line}} and links [(target, lib, file, line)]."""
    targets, links = {}, []
    for f in sorted(x for x in files if x.endswith(("CMakeLists.txt", ".cmake"))):
        here = os.path.dirname(f)
        top = "@ROOT@/" + here if here else "@ROOT@"
        var = {"CMAKE_SOURCE_DIR": "@ROOT@", "CMAKE_CURRENT_SOURCE_DIR": top,
               "CMAKE_CURRENT_LIST_DIR": top}
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            text = fh.read()
        for cmd, args, line in cmake_commands(text):
            if cmd == "set" and len(args) == 2:
                var[args[0]] = re.sub(r"\$\{(\w+)\}", lambda v: var.get(v.group(1), v.group(0)),
                                      args[1])
            elif cmd in ("add_library", "add_executable") and args:
                sources = []
                for src in args[1:]:
                    src = re.sub(r"\$\{(\w+)\}", lambda v: var.get(v.group(1), "\0"), src)
                    if "\0" in src or not src.endswith(SOURCE_EXT):
                        continue
                    if src.startswith("@ROOT@/"):
                        src = src[len("@ROOT@/"):]
                    else:
                        src = os.path.join(here, src)
                    sources.append(os.path.normpath(src))
                module = module_of(sources[0]) if sources else module_of(f)
                targets[args[0]] = {"module": module, "file": f, "line": line, "sources": sources}
            elif cmd == "target_link_libraries" and len(args) > 1:
                for lib in args[1:]:
                    if lib not in ("PUBLIC", "PRIVATE", "INTERFACE"):
                        links.append((args[0], lib, f, line))
    return targets, links


# ---- includes ------------------------------------------------------------------------------

def resolve(inc, src, by_path, by_name):
    """The repository path of header INC included by SRC, or None (a system header)."""
    beside = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if beside in by_path:
        return [beside]
    if inc in by_path:
        return [inc]
    return by_name.get(os.path.basename(inc))


def includes(root, files):
    """[(src, line, inc, [header paths])] of every #include "..." of the sources."""
    headers = [f for f in files if f.endswith(HEADER_EXT)]
    by_path = set(headers)
    by_name = {}
    for h in headers:
        by_name.setdefault(os.path.basename(h), []).append(h)
    out = []
    for src in (f for f in files if f.endswith(SOURCE_EXT)):
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as fh:
            for n, text in enumerate(fh, 1):
                m = INCLUDE_RE.match(text)
                if m:
                    hits = resolve(m.group(1), src, by_path, by_name)
                    if hits:
                        out.append((src, n, m.group(1), hits))
    return out


# ---- the checks ----------------------------------------------------------------------------

def check(root):
    errors, edges = [], {}
    cycle = find_cycle(ALLOWED)
    if cycle:
        errors.append("ALLOWED has a cycle: " + " -> ".join(cycle))
    files = repo_files(root)

    def arrow(a, b, kind):
        edges.setdefault((a, b), set()).add(kind)
        return a in FREE or b in ALLOWED.get(a, ())

    inc_edges = {}
    for src, line, inc, hits in includes(root, files):
        a = module_of(src)
        if a is None or a in FREE:
            continue
        if len(hits) > 1 and not any(module_of(h) == a for h in hits):
            errors.append(f"{src}:{line}: \"{inc}\" names headers of several modules: "
                          + ", ".join(hits))
        for h in hits:
            b = module_of(h)
            if b is None or b == a:
                continue
            inc_edges.setdefault(a, {}).setdefault(b, (src, line, inc))
            if not arrow(a, b, "include"):
                errors.append(f"{src}:{line}: {a}/ includes \"{inc}\" ({h}): {a} -> {b} "
                              "is not an allowed arrow")

    targets, links = cmake_targets(root, files)
    link_graph = {}
    for tgt, lib, f, line in links:
        if tgt not in targets or lib not in targets:
            continue  # a system or imported library
        a, b = targets[tgt]["module"], targets[lib]["module"]
        if a == b or a is None or b is None:
            continue
        link_graph.setdefault(a, set()).add(b)
        if not arrow(a, b, "link"):
            errors.append(f"{f}:{line}: {tgt} ({a}) links {lib} ({b}): {a} -> {b} "
                          "is not an allowed arrow")

    for name, t in sorted(targets.items()):
        for src in t["sources"]:
            if module_of(src) != t["module"]:
                errors.append(f"{t['file']}:{t['line']}: {name} ({t['module']}) compiles {src} of "
                              f"{module_of(src)}/: link the library that owns it instead")

    with_targets = {t["module"] for t in targets.values()}
    for a, used in sorted(inc_edges.items()):
        if a not in with_targets:
            continue
        reach, stack = set(), [a]
        while stack:
            for b in link_graph.get(stack.pop(), ()):
                if b not in reach:
                    reach.add(b)
                    stack.append(b)
        for b, (src, line, inc) in sorted(used.items()):
            if b not in reach:
                errors.append(f"{src}:{line}: {a}/ includes \"{inc}\" from {b}/, but no library "
                              f"of {a}/ links one of {b}/")

    graph = {}
    for a, b in edges:
        if a not in FREE:
            graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    if cycle:
        errors.append("cycle between modules: " + " -> ".join(cycle))

    header_graph = {}
    for src, _, _, hits in includes(root, files):
        if src.endswith(HEADER_EXT):
            header_graph.setdefault(src, set()).update(h for h in hits if h != src)
    cycle = find_cycle(header_graph)
    if cycle:
        errors.append("cycle between headers: " + " -> ".join(cycle))
    return errors, edges, len(targets)


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    errors, edges, ntargets = check(root)
    if "--graph" in sys.argv[1:]:
        rank = ranks(ALLOWED)
        for (a, b), kinds in sorted(edges.items(), key=lambda e: (-rank.get(e[0][0], 9), e[0])):
            print(f"{a} -> {b}  {'+'.join(sorted(kinds))}")
    for e in errors:
        print("arch_check: " + e, file=sys.stderr)
    if errors:
        return 1
    print(f"arch_check: {len(edges)} arrows between modules ({ntargets} CMake targets), "
          "all allowed, every include backed by a link, every source compiled by its own module, "
          "no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
