#!/usr/bin/env python3
"""Facts about the C++ core that anyone can measure: the classes with the most out-of-line
methods and the .cpp files that define them, include cycles among csrc/ modules (a header with
its .cpp), and the files over 400 lines.

    python3 scripts/code_facts.py [csrc folder]          # a report
    python3 scripts/code_facts.py --check [csrc folder]  # exit 1 when a class has its methods
                                                         # in more than one .cpp file or two
                                                         # modules include each other
"""
from __future__ import annotations

import collections
import os
import re
import sys

# `Type::name(` at the start of a line (after the return type): an out-of-class definition.
DEFINITION = re.compile(r"^[A-Za-z_][\w:<>,*& ]*?\b([A-Z]\w*)::(~?\w+|operator\W+)\s*\(", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(csrc: str, suffix: str):
    """The files of `csrc` (recursively) ending in `suffix`, relative to it."""
    for folder, _, names in sorted(os.walk(csrc)):
        for name in sorted(names):
            if name.endswith(suffix):
                yield os.path.relpath(os.path.join(folder, name), csrc)


def read(csrc: str, path: str) -> str:
    with open(os.path.join(csrc, path), encoding="utf-8") as f:
        return f.read()


def methods_by_class(csrc: str) -> dict[str, dict[str, set[str]]]:
    """{class: {method: the .cpp files defining it}}"""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(set))
    for path in sources(csrc, ".cpp"):
        for m in DEFINITION.finditer(read(csrc, path)):
            out[m.group(1)][m.group(2)].add(path)
    return out


def include_graph(csrc: str) -> dict[str, list[str]]:
    """Each module (a header with its .cpp, named by the path without suffix) and the modules
    its files include: program.cpp including virtual_grid.h while virtual_grid.h includes
    program.h is a cycle between the two modules."""
    graph: dict = collections.defaultdict(set)
    for path in list(sources(csrc, ".h")) + list(sources(csrc, ".cpp")):
        module, here = os.path.splitext(path)[0], os.path.dirname(path)
        graph[module]
        for inc in INCLUDE.findall(read(csrc, path)):
            other = os.path.splitext(os.path.normpath(os.path.join(here, inc)))[0]
            if other != module:
                graph[module].add(other)
    return {m: sorted(deps) for m, deps in graph.items()}


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each cycle found by a depth-first walk, as the modules on it (first one repeated)."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt in graph and not state.get(nxt):
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if not state.get(node):
            visit(node, [])
    return found


def split_classes(csrc: str) -> dict[str, list[str]]:
    """The classes whose methods are defined in more than one .cpp file, with the files."""
    out = {}
    for name, methods in methods_by_class(csrc).items():
        files = sorted(set().union(*methods.values()))
        if len(files) > 1:
            out[name] = files
    return out


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--check"]
    csrc = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc")
    classes = methods_by_class(csrc)
    split = split_classes(csrc)
    loops = cycles(include_graph(csrc))
    largest = sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:5]
    print("largest classes by out-of-line methods:",
          ", ".join(f"{c} {len(m)}" for c, m in largest) or "none")
    print("classes with methods in more than one .cpp:",
          "; ".join(f"{c} ({', '.join(f)})" for c, f in sorted(split.items())) or "none")
    print("include cycles among modules:", "; ".join(" -> ".join(c) for c in loops) or "none")
    lengths = [(read(csrc, p).count("\n"), p)
               for p in list(sources(csrc, ".cpp")) + list(sources(csrc, ".h"))]
    print("files over 400 lines:",
          ", ".join(f"{p} {n}" for n, p in sorted(lengths, reverse=True) if n > 400) or "none")
    return 1 if "--check" in argv and (split or loops) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
