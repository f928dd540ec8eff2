"""Parallel compiles for Kernel.precompile, with a progress bar.

NVRTC compiles in one process stop scaling after a few threads (measured on a 16-CPU H200
host: 32 compiles take 0.42 s on 4 threads and 0.67 s on 8, but 0.22 s in 16 processes), so
the default runs forked worker processes. A worker only compiles (NVRTC, the disk cache) and
never touches CUDA; it sends the serialized result back and this process adopts it. A worker
that fails leaves the entry to this process, which compiles it again and raises the error
with all its detail."""
from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

# What a forked worker compiles: set in the worker by _init_worker (never in the parent, so
# two precompile calls on two threads cannot see each other's job).
_JOB = None


def _init_worker(job):
    global _JOB
    _JOB = job


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


def _compile_in_worker(i: int):
    core, bound, arch = _JOB
    try:
        data, outcome = core.compile_serialized(bound[i], arch)
        return i, data, outcome
    except BaseException:  # the parent compiles it again and raises the real error
        return i, None, 0


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_parallel(core, bound, arch: int, *, workers=None, processes=None, progress=None,
                 label="compiling"):
    """Compiles every argument tuple of `bound` for `arch` with `core` (a _C.Dispatcher);
    returns the specializations in order, raising the first failure after all have run."""
    if not bound:
        return []
    if workers is None:
        workers = os.cpu_count() or 1
    workers = max(1, min(workers, len(bound)))
    if progress is None:
        progress = len(bound) >= 8 and sys.stderr.isatty()
    if processes is None:
        processes = workers > 1 and _can_fork()
    bar = _Bar(len(bound), label, bool(progress))

    def in_process(args):
        try:
            return core.compile(args, arch)
        finally:
            bar.step()

    todo = [i for i, args in enumerate(bound) if not core.is_compiled(args, arch)]
    if processes and workers > 1 and len(todo) > 1:
        # fork: the workers inherit the job (no pickling of kernels or tensors). A worker that
        # dies (out of memory, a crash in NVRTC) breaks the pool instead of hanging it; what it
        # left undone is compiled here.
        context = multiprocessing.get_context("fork")
        try:
            with ProcessPoolExecutor(min(workers, len(todo)), mp_context=context,
                                     initializer=_init_worker,
                                     initargs=((core, bound, arch),)) as pool:
                for future in as_completed([pool.submit(_compile_in_worker, i) for i in todo]):
                    i, data, outcome = future.result()
                    if data is not None:
                        core.adopt_serialized(bound[i], arch, data, outcome)
                        bar.step()
        except BrokenProcessPool:
            pass
        # Entries a worker could not compile (errors) run here, to raise with full detail.
        leftover = [i for i in todo if not core.is_compiled(bound[i], arch)]
        bar.done = len(bound) - len(leftover)
        results = {}
        errors = []
        for i in leftover:
            try:
                results[i] = in_process(bound[i])
            except Exception as e:  # noqa: BLE001 - re-raised below
                errors.append(e)
        if errors:
            raise errors[0]
        return [results[i] if i in results else core.compile(args, arch)
                for i, args in enumerate(bound)]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(in_process, args) for args in bound]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return [f.result() for f in futures]
