#!/usr/bin/env python3
"""Facts about the C++ core that anyone can measure: methods per class and the .cpp files that
define them, include cycles among csrc/ modules (a header with its .cpp), and the files over
400 lines.

    python3 scripts/code_facts.py          # a report
    python3 scripts/code_facts.py --check  # exit 1 when a class has its methods in more than
                                           # one .cpp file or modules include each other
"""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CSRC = os.path.join(ROOT, "csrc")
# `Type::name(` at the start of a line (after the return type): an out-of-class definition.
DEFINITION = re.compile(r"^[A-Za-z_][\w:<>,*& ]*?\b([A-Z]\w*)::(~?\w+|operator\W+)\s*\(", re.M)
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def sources(suffix):
    for folder, _, names in os.walk(CSRC):
        for name in sorted(names):
            if name.endswith(suffix):
                yield os.path.relpath(os.path.join(folder, name), ROOT)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def methods_by_class():
    """{class: {method: set of .cpp files defining it}}"""
    out = collections.defaultdict(lambda: collections.defaultdict(set))
    for path in sources(".cpp"):
        for m in DEFINITION.finditer(read(path)):
            out[m.group(1)][m.group(2)].add(path)
    return out


def include_graph():
    """Modules (a header with its .cpp, named by the path without suffix) and the modules each
    one's files include: program.cpp including virtual_grid.h while virtual_grid.h includes
    program.h is a cycle between the two modules."""
    graph = collections.defaultdict(set)
    for path in list(sources(".h")) + list(sources(".cpp")):
        module, here = os.path.splitext(path)[0], os.path.dirname(path)
        graph[module]
        for inc in INCLUDE.findall(read(path)):
            other = os.path.splitext(os.path.normpath(os.path.join(here, inc)))[0]
            if other != module:
                graph[module].add(other)
    return {m: sorted(deps) for m, deps in graph.items()}


def cycles(graph):
    """Each cycle once, as the list of headers on it."""
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

    for node in graph:
        if not state.get(node):
            visit(node, [])
    return found


def main():
    classes = methods_by_class()
    split = {c: sorted(set().union(*m.values())) for c, m in classes.items()
             if len(set().union(*m.values())) > 1}
    loops = cycles(include_graph())
    largest = sorted(classes.items(), key=lambda kv: -len(kv[1]))[:5]
    print("largest classes by out-of-line methods:",
          ", ".join(f"{c} {len(m)}" for c, m in largest))
    print("classes with methods in more than one .cpp:",
          "; ".join(f"{c} ({', '.join(f)})" for c, f in sorted(split.items())) or "none")
    print("include cycles among csrc modules:",
          "; ".join(" -> ".join(c) for c in loops) or "none")
    long_files = [(p, read(p).count("\n")) for p in list(sources(".cpp")) + list(sources(".h"))]
    long_files = sorted((n, p) for p, n in long_files if n > 400)
    print("files over 400 lines:", ", ".join(f"{p} {n}" for n, p in reversed(long_files)) or "none")
    if "--check" in sys.argv and (split or loops):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
