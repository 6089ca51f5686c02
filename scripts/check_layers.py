#!/usr/bin/env python3
"""Check the library's folder graph against README.md's layer table.

Usage: scripts/check_layers.py BUILD_DIR [--readme FILE] [--allow A->B ...]

The layers are the rows of README.md's table under "## Layers" whose first
cell is `src/<name>/`, from the bottom layer (the first row) up; the build
(cmake/layers.cmake) reads the same rows.  The objects are the ones each
layer's object library (stoke_<name>) compiled in BUILD_DIR.  Folder A uses
folder B when an object of A leaves undefined a symbol that an object of B
defines (nm).  The script prints the graph, then fails (exit 1) on

  - any use of a later row (a layer calling one above it), and
  - any circle between folders,

except for the arrows given with --allow (printed as allowed, so that they
stay visible until they are gone).  Circles between the files of one folder
are printed too, as a note.  Exit 2: no objects or no table."""
import argparse
import glob
import os
import re
import subprocess
import sys


def read_layers(readme):
    layers, in_table = [], False
    with open(readme, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_table = line.strip() == "## Layers"
            elif in_table:
                m = re.match(r"^\| `src/([a-z_]+)/` \|", line)
                if m:
                    layers.append(m.group(1))
    return layers


def symbols(obj):
    """(defined, undefined) global symbols of one object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 2 and p[0] == "U":
            undefined.add(p[1])
        elif len(p) == 3 and p[1] in "TDBRVWGSC":
            defined.add(p[2])
    return defined, undefined


def circles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("--readme", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "README.md"))
    ap.add_argument("--allow", action="append", default=[],
                    metavar="A->B", help="an arrow not to fail on")
    args = ap.parse_args()

    layers = read_layers(args.readme)
    if not layers:
        print(f"check_layers: no layer table in {args.readme}",
              file=sys.stderr)
        return 2
    rank = {name: i for i, name in enumerate(layers)}
    root = os.path.dirname(os.path.abspath(args.readme))
    allowed = set()
    for a in args.allow:
        src, _, dst = a.partition("->")
        if src.strip() not in rank or dst.strip() not in rank:
            print(f"check_layers: --allow {a}: not two layers",
                  file=sys.stderr)
            return 2
        allowed.add((src.strip(), dst.strip()))

    # Who defines each symbol, and what each file leaves undefined.
    owner, uses = {}, {}
    for layer in layers:
        pattern = os.path.join(args.build_dir, "CMakeFiles",
                               f"stoke_{layer}.dir", "**", "*.o")
        for obj in sorted(glob.glob(pattern, recursive=True)):
            name = os.path.basename(obj)[:-len(".c.o")]
            # An object left by a source since renamed or removed is not
            # part of the library any more (make keeps it in the tree).
            src_file = os.path.join(root, "src", layer, name + ".c")
            if obj.endswith(".c.o") and not os.path.exists(src_file):
                continue
            defined, undefined = symbols(obj)
            for s in defined:
                owner[s] = (layer, name)
            uses[(layer, name)] = undefined
    if not uses:
        print(f"check_layers: no objects of the layers in {args.build_dir} "
              "(build it first)", file=sys.stderr)
        return 2

    # Folder arrows with the symbols behind them, and file arrows.
    arrows, file_edges = {}, {}
    for (layer, name), undefined in uses.items():
        for s in undefined:
            if s not in owner:
                continue                 # the C library, libjpeg, ...
            to_layer, to_name = owner[s]
            if to_layer != layer:
                arrows.setdefault((layer, to_layer), set()).add(s)
            elif to_name != name:
                file_edges.setdefault((layer, name), set()).add(
                    (layer, to_name))

    print("folder graph (README.md's layer table, bottom first):")
    for layer in layers:
        deps = sorted((d for (a, d) in arrows if a == layer),
                      key=lambda d: rank[d])
        text = ", ".join(f"{d} ({len(arrows[(layer, d)])})" for d in deps)
        print(f"  {rank[layer]:2d} {layer:<10} -> {text or '-'}")

    failures = []
    for (a, b), syms in sorted(arrows.items()):
        if rank[b] > rank[a]:
            what = "allowed" if (a, b) in allowed else "FAIL"
            example = ", ".join(sorted(syms)[:4])
            more = f" and {len(syms) - 4} more" if len(syms) > 4 else ""
            line = f"{what}: {a} -> {b} uses a later row: {example}{more}"
            print(line)
            if (a, b) not in allowed:
                failures.append(line)
    checked = {}
    for (a, b) in arrows:
        if (a, b) not in allowed:
            checked.setdefault(a, set()).add(b)
    for comp in circles(layers, checked):
        inner = "; ".join(f"{a} -> {b}" for a in comp
                          for b in sorted(checked.get(a, ())) if b in comp)
        line = f"FAIL: a circle of {len(comp)} folders: {inner}"
        print(line)
        failures.append(line)

    edges = {}
    for f, tos in file_edges.items():
        edges[f] = tos
    for comp in circles(set(uses), edges):
        names = ", ".join(f"{l}/{n}.c" for l, n in comp)
        print(f"note: a circle of files inside src/{comp[0][0]}/: {names}")

    if failures:
        print(f"check_layers: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("check_layers: the folder graph follows the layer table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
