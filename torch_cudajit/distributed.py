"""torch_cudajit.distributed: one compile per kernel specialization across a multi-node job.

Every rank of a job runs the same code and so asks for the same specializations at about the
same time. The disk cache compiles each once among the processes sharing its folder; through a
``torch.distributed`` key-value store, ranks that share no folder compile each once too: the
first rank to claim a specialization compiles it and publishes the record, the others wait for
it, check it as they check a disk record, store it in their own disk cache and use it.

It is on by itself once a default process group is initialised
(``torch.distributed.init_process_group``): the group's store is used, looked up on each
disk-cache miss (never on the launch path). ``TORCH_CUDAJIT_STORE=0`` turns that off;
``use_store`` names a store of your own, or turns the store off.

    import torch_cudajit.distributed as cjd
    cjd.use_store(torch.distributed.TCPStore(host, port, world, rank == 0), timeout=120)
    cjd.stats()   # {'compiled': 3, 'received': 41, 'timeouts': 0, ...}

A rank that waits longer than the timeout (``TORCH_CUDAJIT_STORE_TIMEOUT`` seconds, default
300), sees the compiling rank's heartbeat stop (it was killed) or loses the store compiles for
itself, with one warning.
"""
from __future__ import annotations

import atexit
import os

from ._loader import _C

__all__ = ["use_store", "stats"]

_AUTO = "auto"
# The store use_store set, kept here: the core holds a C++ reference only, and a Python
# subclass needs its Python object alive.
_store: object = _AUTO


def use_store(store, *, timeout: float | None = None, heartbeat: float = 1.0,
              stale: float = 15.0) -> None:
    """Sets the store through which this process's ranks compile each specialization once.

    ``store``: a ``torch.distributed.Store`` every rank of the job reaches (``TCPStore``,
    ``FileStore``, a ``PrefixStore`` or a subclass); ``None`` to compile without a store; or
    ``"auto"`` for the default process group's store when one is initialised (the default).
    ``timeout``: seconds a rank waits for another's compile before compiling for itself (None:
    ``TORCH_CUDAJIT_STORE_TIMEOUT``, else 300). ``heartbeat``: seconds between the compiling
    rank's signs of life (0: none); ``stale``: seconds without one after which a waiting rank
    takes the compiling rank for dead and compiles for itself.
    """
    global _store
    if isinstance(store, str) and store != _AUTO:
        raise ValueError(f"torch_cudajit: use_store takes a torch.distributed.Store, None or "
                         f"'auto'; got the string {store!r}.")
    for name, value in (("timeout", timeout or 0.0), ("heartbeat", heartbeat), ("stale", stale)):
        if not value >= 0:
            raise ValueError(f"torch_cudajit: use_store's {name} is {value!r}; give a number of "
                             f"seconds of 0 or more.")
    _C.set_compile_store(None if isinstance(store, str) else store, float(timeout or 0.0),
                         float(heartbeat), float(stale))
    _store = store


def stats() -> dict:
    """What the store did for this process: ``compiled`` (disk-cache misses this process
    compiled), ``received`` (records another rank compiled), ``failures_received`` (compile
    errors another rank published), ``timeouts`` (waits that ended without a result: timeout or
    dead rank), ``rejected`` (published records refused as damaged or of another key),
    ``store_errors`` (failed store calls); ``timeout``, the seconds a rank waits; and ``store``,
    which store is in use ("auto", "explicit" or None)."""
    out = dict(_C.compile_store_counters())
    out["timeout"] = _C.compile_store_timeout()
    out["store"] = _AUTO if _store is _AUTO else (None if _store is None else "explicit")
    return out


def _auto_disabled() -> bool:
    return os.environ.get("TORCH_CUDAJIT_STORE", "").strip().lower() in ("0", "off", "false", "no")


def _default_store():
    """The default process group's store, or None: asked by the core on each disk-cache miss
    while no store was set (a miss compiles for milliseconds at least, so looking up here keeps
    the store current if the group is destroyed and initialised again)."""
    if _store is not _AUTO or _auto_disabled():
        return None
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist.distributed_c10d._get_default_store()


def _release() -> None:
    # Before the interpreter goes: the core must not hold Python objects past it.
    _C.set_compile_store_provider(None)
    _C.set_compile_store(None)


_C.set_compile_store_provider(_default_store)
atexit.register(_release)
