"""The persistent kernel cache: where it is, what it holds, and how to empty or bound it.

Compiled kernels are stored per specialization under ``$TORCH_CUDAJIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/torch_cudajit``, else ``~/.cache/torch_cudajit``. ``TORCH_CUDAJIT_CACHE=0``
turns the disk cache off and ``TORCH_CUDAJIT_CACHE_MAX_BYTES`` bounds its size (least recently
used entries go first). The same operations run from a shell::

    python -m torch_cudajit cache info|clear|prune [--max-bytes N]
"""
from __future__ import annotations

import os

from ._loader import _C

__all__ = ["info", "clear", "prune", "stats", "configure", "reset", "settings"]


def settings() -> dict:
    """The settings in force: ``{"enabled", "dir", "max_bytes"}``."""
    return dict(_C.cache_settings())


def configure(*, dir: str | os.PathLike | None = None, enabled: bool | None = None,
              max_bytes: int | None = None) -> None:
    """Changes the cache settings of this process; arguments left as None keep their value."""
    current = settings()
    if dir is not None:
        if not isinstance(dir, (str, os.PathLike)):
            raise TypeError(f"dir must be a path, got {type(dir).__name__}")
        current["dir"] = os.path.abspath(os.fspath(dir))
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {type(enabled).__name__}")
        current["enabled"] = enabled
    if max_bytes is not None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        current["max_bytes"] = max_bytes
    _C.cache_configure(current["enabled"], current["dir"], current["max_bytes"])


def reset() -> None:
    """Re-reads the settings from the environment variables."""
    _C.cache_reset_from_environment()


def info() -> dict:
    """``{"dir", "enabled", "entries", "bytes", "max_bytes"}`` of the cache folder."""
    out = dict(_C.cache_info())
    out.pop("removed", None)
    return out


def clear() -> int:
    """Removes every cached kernel; returns how many files were removed."""
    return _C.cache_clear()["removed"]


def prune(max_bytes: int | None = None) -> int:
    """Removes temporary and lock files left by dead processes, then the least recently used
    kernels until the cache holds at most ``max_bytes`` (default: the configured bound).
    Returns how many files were removed."""
    if max_bytes is not None and (not isinstance(max_bytes, int) or isinstance(max_bytes, bool)
                                  or max_bytes < 0):
        raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
    return _C.cache_prune(-1 if max_bytes is None else max_bytes)["removed"]


def stats() -> dict:
    """Disk-cache hits and misses of this process: ``{"hits": n, "misses": n}``."""
    return dict(_C.cache_counters())
