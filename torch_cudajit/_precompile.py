"""Parallel compiles for Kernel.precompile, with a progress bar.

The entries are split into one batch per worker. A batch compiles as one NVRTC program, so
its entries share the parse of the source and its headers, which costs most of a compile; the
disk cache stores the batch once, with a reference under each entry's own key, so a later
process finds every entry alone. Batches run in worker processes where fork exists: NVRTC
compiles in one process stop scaling after a few threads, processes keep scaling. The workers
are forked once and kept for the life of the process (forking a process that holds torch and
CUDA is not free, and a container warm-up may call precompile for many kernels).

A worker only compiles (NVRTC, the disk cache) and never touches CUDA: it receives the
kernel's definition (its state, reflection included, so it runs no front end), the arguments
as meta tensors and numbers, the architecture and the cache settings, and sends the serialized
compile back; this process adopts it. A batch that fails is compiled again here entry by
entry, so that the good entries still compile and the first error is raised with all its
detail; a worker that dies breaks the pool, which is then made anew."""
from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import torch
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from ._loader import _C

_POOL = None
_POOL_WORKERS = 0
_POOL_LOCK = threading.Lock()

# In a worker: the parts of the kernels it has built, by definition.
_WORKER_PARTS: dict = {}


def _pool(workers: int) -> ProcessPoolExecutor:
    global _POOL, _POOL_WORKERS
    with _POOL_LOCK:
        if _POOL is None or _POOL_WORKERS != workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False, cancel_futures=True)
            _POOL = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            _POOL_WORKERS = workers
        return _POOL


def _drop_pool(pool) -> None:
    global _POOL
    with _POOL_LOCK:
        if _POOL is pool:
            _POOL = None
    pool.shutdown(wait=False, cancel_futures=True)


def _portable(value):
    """An argument as a worker receives it: tensors become meta tensors of the same dtype,
    shape and strides (what the key depends on), so no data and no CUDA crosses over."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="meta")
    return value


def _compile_in_worker(definition, args_list, arch, cache_settings):
    """Compiles one batch (a list of argument tuples) in a worker: (programs, entries) as
    KernelRuntime.compile_serialized returns them, or (None, None) when it fails."""
    from ._loader import _C
    from ._parts import KernelParts
    try:
        _C.cache_configure(*cache_settings)
        parts = _WORKER_PARTS.get(definition)
        if parts is None:
            # The state carries the reflection: a worker runs no front end.
            parts = KernelParts.of_jit(_C.KernelDefinition.from_state(definition), ())
            _WORKER_PARTS[definition] = parts
        return parts.core.compile_serialized(list(args_list), arch)
    except BaseException:  # the parent compiles it again and raises the real error
        return None, None


class _Bar:
    def __init__(self, total: int, label: str, enabled: bool):
        self.total, self.label, self.enabled = total, label, enabled
        self.done = 0
        self.lock = threading.Lock()
        self.draw()

    def step(self, count: int = 1):
        with self.lock:
            self.done += count
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


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_parallel(parts, bound, arch: int, *, workers=None, processes=None, progress=None,
                 label="compiling"):
    """Compiles every argument tuple of `bound` for `arch` for a kernel's `parts`
    (KernelParts); returns the specializations in order, raising the first failure after all
    have run."""
    core = parts.core
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

    def batch_in_process(group):
        # One NVRTC program for the group; a failure leaves its entries to be compiled alone.
        try:
            core.compile_many([bound[i] for i in group], arch)
            bar.step(len(group))
        except Exception:  # noqa: BLE001 - each entry is compiled (and raises) alone below
            pass

    todo = [i for i, args in enumerate(bound) if not core.is_compiled(args, arch)]
    # One batch per worker: a batch shares one header parse among its entries, while the
    # batches run in parallel.
    groups = _batches(todo, workers)
    if processes and len(groups) > 1:
        _batches_in_workers(parts, bound, groups, arch, workers, bar)
    elif len(groups) > 1:
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            list(pool.map(batch_in_process, groups))
    elif groups:
        batch_in_process(groups[0])
    # Entries no batch compiled (errors) run alone here, to raise with full detail; the others
    # still compile.
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


def _batches_in_workers(parts, bound, groups, arch: int, workers: int, bar) -> None:
    """Compiles each batch in a worker process and adopts what comes back; a batch that fails
    is left uncompiled (its entries then compile here, alone)."""
    core = parts.core
    # What a worker rebuilds the kernel from: its definition's state (bytes).
    definition = parts.definition.state
    settings = _C.cache_settings()
    cache_settings = (settings["enabled"], settings["dir"], settings["max_bytes"],
                      settings["readonly_dirs"], settings["writable"])
    pool = _pool(workers)
    try:
        futures = {pool.submit(_compile_in_worker, definition,
                               [tuple(_portable(a) for a in bound[i]) for i in group], arch,
                               cache_settings): group
                   for group in groups}
        for future in as_completed(futures):
            programs, entries = future.result()
            if programs is not None:
                group = futures[future]
                core.adopt_serialized([bound[i] for i in group], arch, programs, entries)
                bar.step(len(group))
    except BrokenProcessPool:
        _drop_pool(pool)


def _batches(indices: list, workers: int) -> list:
    """`indices` in at most `workers` batches of nearly equal size, in order."""
    n = min(workers, len(indices))
    if n == 0:
        return []
    size, extra = divmod(len(indices), n)
    out, start = [], 0
    for b in range(n):
        end = start + size + (b < extra)
        out.append(indices[start:end])
        start = end
    return out
