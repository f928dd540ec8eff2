#!/usr/bin/env python3
"""Finds include cycles among the C++ core's headers (csrc/*.h).

Each `#include "name.h"` of a header in csrc/ that names another header of csrc/ is an edge; a
cycle means no header of it can be read first, and that its layers reach into each other. Prints
each cycle found (a -> b -> a) and exits with status 1 when there is one, 0 otherwise.

Usage: python3 scripts/include_cycles.py [csrc folder]
"""
from __future__ import annotations

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_graph(folder: str) -> dict[str, list[str]]:
    """Each header of `folder` (by file name) and the headers of `folder` it includes, in order."""
    headers = sorted(name for name in os.listdir(folder) if name.endswith(".h"))
    graph = {}
    for name in headers:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            text = f.read()
        graph[name] = [os.path.basename(inc) for inc in INCLUDE.findall(text)
                       if os.path.dirname(inc) in ("", ".") and os.path.basename(inc) in headers]
    return graph


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of headers that includes itself, as the path
    a -> ... -> a (depth-first, from the first header of the group by name)."""
    found = []
    state = {}  # name -> "open" while on the current path, "done" once all its edges were seen
    path = []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for dep in graph[name]:
            if state.get(dep) == "open":
                found.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name)
    return found


def main(argv: list[str]) -> int:
    folder = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    found = cycles(include_graph(folder))
    for cycle in found:
        print(" -> ".join(cycle))
    if not found:
        print(f"no include cycle among the headers of {folder}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
