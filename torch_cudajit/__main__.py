"""Command line: ``python -m torch_cudajit info``, ``--version``, and

- ``python -m torch_cudajit cache info|clear|prune [--max-bytes N]``: the cache folder;
- ``python -m torch_cudajit cache export FILE [--kernel NAME ...]``: the cache's records (all, or
  those of the named kernels) in one checksummed archive file;
- ``python -m torch_cudajit cache import FILE [--dir DIR]``: an archive's records, all checked
  first, into the cache folder or DIR (for instance a read-only folder baked into an image and
  named in ``TORCH_CUDAJIT_CACHE_READONLY_DIRS``).
"""
from __future__ import annotations

import argparse
import math
import sys


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in units else ""
    number = t[:-1] if unit else t
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 1000000, 512M or 4G)")
    if value < 0:
        raise argparse.ArgumentTypeError(f"size must be >= 0, got {text!r}")
    size = value * units[unit]
    if not math.isfinite(size) or size >= 1 << 63:
        raise argparse.ArgumentTypeError(f"size {text!r} is too large (at most 2**63-1 bytes, e.g. 4G)")
    return int(size)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def _info() -> None:
    """What this installation finds: versions, the compiler, the front end, the headers and the
    cache folder, each with what to do when it is missing."""
    import os

    import torch

    from . import __version__
    from ._loader import _C, _libclang_path

    def row(name, value):
        print(f"{name + ':':<15}{value}")

    row("torch_cudajit", f"{__version__} ({os.path.dirname(os.path.abspath(__file__))})")
    row("torch", f"{torch.__version__} (CUDA {torch.version.cuda})")
    try:
        v = _C.nvrtc_version()
        nvrtc = f"{v // 1000}.{v % 1000 // 10} ({_C.nvrtc_library_file()})"
    except RuntimeError as e:  # reported, not raised: the other rows still help
        nvrtc = "not found: " + str(e).splitlines()[0]
    row("NVRTC", nvrtc)
    where = os.environ.get("TORCH_CUDAJIT_LIBCLANG") or _libclang_path() or "the dynamic loader's search"
    try:
        libclang = f"{_C.libclang_version()} ({where})"
    except RuntimeError as e:
        libclang = "not loadable: " + str(e).splitlines()[0]
    row("libclang", libclang)
    dirs = _C.default_include_dirs()
    row("headers", dirs[0] + " (cj/)")
    cuda = _C.cuda_include_dir()
    row("CUDA headers", cuda or "not found: install the nvidia-cuda-runtime wheel or set CUDA_HOME")
    cccl = next((d for d in dirs if os.path.exists(os.path.join(d, "cuda", "std", "type_traits"))), "")
    row("CCCL", cccl or "not found: install nvidia-cuda-cccl or set CUDA_HOME to a toolkit")
    row("driver", "available" if _C.driver_available() else "none (kernels compile, with arch=, but do not launch)")
    settings = _C.cache_settings()
    problem = _cache_problem()
    state = ("disabled (TORCH_CUDAJIT_CACHE=0)" if not settings["enabled"]
             else "not used (TORCH_CUDAJIT_CACHE=readonly)" if not settings["writable"]
             else "not usable: " + problem if problem else "usable")
    row("cache", f"{settings['dir']} ({state})")
    for d in _C.cache_readonly_info():
        row("read-only", f"{d['dir']} ({'not used: ' + d['problem'] if d['problem'] else 'usable'})")


def _cache_problem() -> str:
    """Why the cache folder in force cannot be used, as the cache itself checks it (creating it
    if it is missing); "" when it can, or when the cache is off."""
    import warnings

    from ._loader import _C

    if not _C.cache_settings()["enabled"] or not _C.cache_settings()["writable"]:
        return ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if _C.cache_usable():
            return ""
    # The cache warns once per process and reason: a reason given earlier is not repeated.
    return (str(caught[0].message).split(" (Triggered internally")[0] if caught
            else "see the warning above")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_cudajit")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="versions, NVRTC, libclang, headers and the cache folder")
    cache = sub.add_parser("cache", help="inspect or empty the persistent kernel cache")
    actions = cache.add_subparsers(dest="action", required=True)
    actions.add_parser("info", help="where the cache is and what it holds")
    actions.add_parser("clear", help="remove every cached kernel")
    prune = actions.add_parser("prune", help="remove stale files and evict down to a size")
    prune.add_argument("--max-bytes", type=_size, default=None,
                       help="size to evict down to (default: TORCH_CUDAJIT_CACHE_MAX_BYTES or 4G)")
    export = actions.add_parser(
        "export", help="write the cache's records to one checksummed archive file",
        description="Writes the records the cache would load (the cache folder, then the "
                    "read-only folders) to FILE. With --kernel, only what the named kernels need "
                    "to be found without compiling: their compiled entries, the batch records "
                    "those refer to, and the reflection records and manifests of their sources. "
                    "A kernel is named as declared, with or without its namespaces.")
    export.add_argument("file", metavar="FILE", help="the archive to write")
    export.add_argument("--kernel", metavar="NAME", action="append", default=[],
                        help="export only this kernel's records (repeatable)")
    imp = actions.add_parser(
        "import", help="check an archive, then write its records into a cache folder",
        description="Checks all of FILE (its checksum, each record's name, kind, SHA-256 and "
                    "contents) and, only when all of it is sound, writes its records atomically "
                    "into the cache folder or DIR. Import into a folder at image build time and "
                    "name it in TORCH_CUDAJIT_CACHE_READONLY_DIRS to ship a warm, read-only cache.")
    imp.add_argument("file", metavar="FILE", help="an archive written by cache export")
    imp.add_argument("--dir", metavar="DIR", default=None,
                     help="the folder to import into (default: the cache folder)")
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__
        print(f"torch_cudajit {__version__}")
        return 0
    if args.command is None:
        parser.error("a command is required: info or cache")
    if args.command == "info":
        _info()
        return 0

    from . import cache as c

    if args.action in ("export", "import"):
        try:
            if args.action == "export":
                s = c.export_archive(args.file, args.kernel or None)
                where = f"to {s['path']}"
            else:
                s = c.import_archive(args.file, args.dir)
                where = f"from {s['path']} into {s['dir']}"
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{args.action}ed {s['entries']} entries, {s['reflections']} reflection records and "
              f"{s['manifests']} manifests ({_human(s['bytes'])}) {where}")
        print(f"kernels: {', '.join(s['kernels']) or 'none'}")
    elif args.action == "info":
        problem = _cache_problem()  # before info(), which would give the reason as a warning
        i = c.info()
        writable = c.settings()["writable"]
        print(f"directory: {i['dir']}")
        print(f"enabled:   {'yes' if i['enabled'] else 'no (TORCH_CUDAJIT_CACHE=0)'}")
        if i["enabled"]:
            print(f"usable:    {'no: ' + problem if problem else 'yes' if writable else 'no (TORCH_CUDAJIT_CACHE=readonly)'}")
        print(f"entries:   {i['entries']}")
        print(f"size:      {_human(i['bytes'])} ({i['bytes']} bytes)")
        print(f"limit:     {_human(i['max_bytes'])} ({i['max_bytes']} bytes)")
        for r in i["readonly"]:
            state = f"not used: {r['problem']}" if r["problem"] else "usable"
            print(f"read-only: {r['dir']} ({state}; {r['entries']} entries, {_human(r['bytes'])})")
    elif args.action == "clear":
        print(f"removed {c.clear()} file(s) from {c.info()['dir']}")
    else:
        removed = c.prune(args.max_bytes)
        i = c.info()
        print(f"removed {removed} file(s); {i['entries']} entries, {_human(i['bytes'])} remain in {i['dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
