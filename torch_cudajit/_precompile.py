"""A thread pool with a progress bar, for Kernel.precompile. Compiles release the GIL in C++,
so threads give real parallelism."""
from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor


class _Bar:
    def __init__(self, total: int, label: str, enabled: bool):
        self.total, self.label, self.enabled = total, label, enabled
        self.done = 0
        self.lock = threading.Lock()
        self.draw()

    def step(self):
        with self.lock:
            self.done += 1
            self.draw()

    def draw(self):
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{self.done}/{self.total}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_parallel(fn, items, *, threads=None, progress=None, label="compiling"):
    """fn(item) for every item on a thread pool; results in order. Every item runs even when
    some fail; the first failure (in item order) is raised at the end."""
    items = list(items)
    if not items:
        return []
    if threads is None:
        threads = os.cpu_count() or 1
    threads = max(1, min(threads, len(items)))
    if progress is None:
        progress = len(items) >= 8 and sys.stderr.isatty()
    bar = _Bar(len(items), label, bool(progress))

    def one(item):
        try:
            return fn(item)
        finally:
            bar.step()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(one, item) for item in items]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return [f.result() for f in futures]
