"""The persistent kernel cache: where it is, what it holds, and how to empty or bound it.

Compiled kernels are stored per specialization under ``$TORCH_CUDAJIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/torch_cudajit``, else ``~/.cache/torch_cudajit``. ``TORCH_CUDAJIT_CACHE=0``
turns the disk cache off and ``TORCH_CUDAJIT_CACHE_MAX_BYTES`` bounds its size (least recently
used entries go first). Folders of records built ahead of time (an image's) are searched after
it, read-only: ``TORCH_CUDAJIT_CACHE_READONLY_DIRS`` (separated by ``os.pathsep``), and
``TORCH_CUDAJIT_CACHE=readonly`` uses them alone. ``export_archive`` and ``import_archive`` move
records between caches. The same operations run from a shell::

    python -m torch_cudajit cache info|clear|prune [--max-bytes N]
    python -m torch_cudajit cache export FILE [--kernel NAME ...]
    python -m torch_cudajit cache import FILE [--dir DIR]
"""
from __future__ import annotations

import os

from ._loader import _C

__all__ = ["info", "clear", "prune", "stats", "configure", "reset", "settings", "export_archive",
           "import_archive"]


def settings() -> dict:
    """The settings in force: ``{"enabled", "dir", "max_bytes", "readonly_dirs", "writable"}``."""
    return dict(_C.cache_settings())


def configure(*, dir: str | os.PathLike | None = None, enabled: bool | None = None,
              max_bytes: int | None = None,
              readonly_dirs: list[str | os.PathLike] | None = None,
              writable: bool | None = None) -> None:
    """Changes the cache settings of this process; arguments left as None keep their value.

    ``readonly_dirs`` are folders of records built ahead of time, searched after ``dir`` in
    order and never written; ``writable=False`` leaves ``dir`` unused (no reads, no writes), so
    that only the read-only folders are used."""
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
    if readonly_dirs is not None:
        if isinstance(readonly_dirs, (str, os.PathLike)) or not all(
                isinstance(d, (str, os.PathLike)) for d in readonly_dirs):
            raise TypeError(f"readonly_dirs must be a list of paths, got {readonly_dirs!r}")
        current["readonly_dirs"] = [os.path.abspath(os.fspath(d)) for d in readonly_dirs]
    if writable is not None:
        if not isinstance(writable, bool):
            raise TypeError(f"writable must be a bool, got {type(writable).__name__}")
        current["writable"] = writable
    _C.cache_configure(current["enabled"], current["dir"], current["max_bytes"],
                       current["readonly_dirs"], current["writable"])


def reset() -> None:
    """Re-reads the settings from the environment variables."""
    _C.cache_reset_from_environment()


def info() -> dict:
    """``{"dir", "enabled", "entries", "bytes", "max_bytes", "readonly"}`` of the cache folder;
    ``readonly`` lists each read-only folder as ``{"dir", "entries", "bytes", "problem"}``
    (``problem`` says why the folder is not used, "" when it is)."""
    out = dict(_C.cache_info())
    out.pop("removed", None)
    out["readonly"] = [{k: d[k] for k in ("dir", "entries", "bytes", "problem")}
                       for d in _C.cache_readonly_info()]
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


def export_archive(path: str | os.PathLike, kernels: list[str] | None = None) -> dict:
    """Writes the cache's records to one checksummed archive file at ``path`` (atomically).

    With ``kernels=None``, everything the cache would load: the writable folder, then the
    read-only ones. With a list of kernel names, what those kernels need to be found without
    compiling or parsing: the compiled entries of each kernel of that name (named as declared,
    with or without its namespaces: ``"scale"`` matches ``ns::scale``; every source's kernel of
    that name is exported), the batch records they refer to (whole, with the other kernels
    compiled in the same batch), the reflection records declaring them, and the manifests leading
    to those. Returns ``{"path", "entries", "reflections", "manifests", "bytes", "kernels"}``;
    raises ValueError when a name matches no compiled entry, or the cache is empty."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, got {type(path).__name__}")
    if kernels is None:
        kernels = []
    elif isinstance(kernels, str) or not all(isinstance(k, str) and k for k in kernels):
        raise TypeError(f"kernels must be a list of kernel names, got {kernels!r}")
    out = dict(_C.cache_export(os.path.abspath(os.fspath(path)), list(kernels)))
    out.pop("dir")
    return out


def import_archive(path: str | os.PathLike, dir: str | os.PathLike | None = None) -> dict:
    """Writes the records of an archive made by ``export_archive`` into ``dir`` (default: the
    writable cache folder), each atomically, mode 0600, as the cache writes its own.

    Everything is checked first (the archive's checksum, each record's name, kind, SHA-256,
    frame and contents); nothing is written when any of it is wrong, and the ValueError says
    what. To bake a read-only folder into an image, import into it at build time. Returns
    ``{"path", "dir", "entries", "reflections", "manifests", "bytes", "kernels"}``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, got {type(path).__name__}")
    if dir is not None and not isinstance(dir, (str, os.PathLike)):
        raise TypeError(f"dir must be a path, got {type(dir).__name__}")
    target = "" if dir is None else os.path.abspath(os.fspath(dir))
    return dict(_C.cache_import(os.path.abspath(os.fspath(path)), target))
