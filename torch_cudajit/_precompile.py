"""Parallel compiles for Kernel.precompile, with a progress bar.

NVRTC compiles in one process stop scaling after a few threads (measured on a 16-CPU H200
host: 32 compiles take 0.42 s on 4 threads and 0.67 s on 8, but 0.22 s in 16 processes), so
the default runs worker processes. They are forked once and kept for the life of the process
(forking a process that holds torch and CUDA costs tens of milliseconds per worker, which a
container warm-up calling precompile for many kernels would pay again and again).

A worker only compiles (NVRTC, the disk cache) and never touches CUDA: it receives the
kernel's definition, the arguments as meta tensors and numbers, the architecture and the
cache settings, and sends the serialized compile back; this process adopts it. An entry a
worker cannot compile is compiled again here, so that its error is raised with all its
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

# In a worker: the kernels it has built, by definition.
_WORKER_KERNELS: dict = {}


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


def _compile_in_worker(definition, args, arch, cache_settings):
    from ._loader import _C
    from ._kernel import Kernel
    try:
        _C.cache_configure(*cache_settings)
        kernel = _WORKER_KERNELS.get(definition)
        if kernel is None:
            source, filename, name, options = definition
            options = dict(options)
            program = _C.Program(source, filename, list(options["options"]), options["std"])
            kernel = Kernel(program, name, options, ())
            _WORKER_KERNELS[definition] = kernel
        return kernel._core.compile_serialized(args, arch)
    except BaseException:  # the parent compiles it again and raises the real error
        return None, 0


def _definition(kernel):
    def frozen(v):
        return tuple(frozen(x) for x in v) if isinstance(v, (list, tuple)) else v
    options = tuple(sorted((k, frozen(v)) for k, v in kernel._options.items()))
    return (kernel.source, kernel._program.filename, kernel.name, options)


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


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_parallel(kernel, bound, arch: int, *, workers=None, processes=None, progress=None,
                 label="compiling"):
    """Compiles every argument tuple of `bound` for `arch` for `kernel`; returns the
    specializations in order, raising the first failure after all have run."""
    core = kernel._core
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
        definition = _definition(kernel)
        settings = _C.cache_settings()
        cache_settings = (settings["enabled"], settings["dir"], settings["max_bytes"])
        pool = _pool(workers)
        try:
            futures = {pool.submit(_compile_in_worker, definition,
                                   tuple(_portable(a) for a in bound[i]), arch, cache_settings): i
                       for i in todo}
            for future in as_completed(futures):
                data, outcome = future.result()
                if data is not None:
                    core.adopt_serialized(bound[futures[future]], arch, data, outcome)
                    bar.step()
        except BrokenProcessPool:
            _drop_pool(pool)
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
