"""Runs the README's ```python blocks in order, as written, each in a fresh Python process.

A block whose opening fence follows the line ``<!-- walkthrough: gpu -->`` needs a GPU: without
one (torch.cuda.is_available() is False) it is skipped with a note; every other block must run.
The first block that fails stops the walk, printing its text and its output, and the script
exits with status 1.

Each block runs as a file of its own (sys.executable) from the repository root, with the
torch_cudajit this script would import first on PYTHONPATH (an installed package, or a build in
place in the repository).

Run: python3 scripts/walkthrough.py [README.md]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_MARK = "<!-- walkthrough: gpu -->"
#: Seconds one block may take (a cold compile of a few kernels, a first CUDA context).
BLOCK_TIMEOUT_S = 600


class Block(NamedTuple):
    line: int  # 1-based line of the opening fence
    code: str
    needs_gpu: bool


def python_blocks(text: str) -> list:
    """The ```python blocks of a Markdown text that start at the left margin, in order."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() == "```python":
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].rstrip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"the ```python block opened at line {start + 1} is never closed")
            needs_gpu = start > 0 and lines[start - 1].strip() == GPU_MARK
            blocks.append(Block(start + 1, "\n".join(body) + "\n", needs_gpu))
        i += 1
    return blocks


def package_root() -> str:
    """The folder to put on PYTHONPATH so that a block imports the torch_cudajit this script
    sees: where an installed or PYTHONPATH package lives, else the repository (a build in place)."""
    spec = importlib.util.find_spec("torch_cudajit")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.dirname(spec.origin))
    return REPO


def has_gpu() -> bool:
    import torch
    return torch.cuda.is_available()


def run_block(block: Block, env: dict) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="walkthrough_") as folder:
        path = os.path.join(folder, f"readme_line_{block.line}.py")
        with open(path, "w") as f:
            f.write(block.code)
        return subprocess.run([sys.executable, path], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme", nargs="?", default=os.path.join(REPO, "README.md"))
    args = ap.parse_args(argv)
    with open(args.readme) as f:
        blocks = python_blocks(f.read())
    if not blocks:
        print(f"{args.readme}: no ```python blocks")
        return 1
    env = dict(os.environ)
    root = package_root()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    gpu = has_gpu()
    ran = skipped = 0
    for n, block in enumerate(blocks, 1):
        where = f"block {n} (line {block.line})"
        if block.needs_gpu and not gpu:
            print(f"{where}: skipped, it needs a GPU and torch.cuda.is_available() is False")
            skipped += 1
            continue
        t0 = time.perf_counter()
        try:
            result = run_block(block, env)
        except subprocess.TimeoutExpired:
            print(f"{where}: FAILED, still running after {BLOCK_TIMEOUT_S} s. The block:\n"
                  f"{block.code}")
            return 1
        if result.returncode != 0:
            print(f"{where}: FAILED with exit status {result.returncode}. The block:\n"
                  f"{block.code}\n--- its output:\n{result.stdout}{result.stderr}")
            return 1
        print(f"{where}: ok ({time.perf_counter() - t0:.1f} s)")
        for line in result.stdout.splitlines():
            print(f"    {line}")
        ran += 1
    print(f"{ran} block(s) ran, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
