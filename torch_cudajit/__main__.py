"""Command line: ``python -m torch_cudajit cache info|clear|prune [--max-bytes N]``."""
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_cudajit")
    sub = parser.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="inspect or empty the persistent kernel cache")
    actions = cache.add_subparsers(dest="action", required=True)
    actions.add_parser("info", help="where the cache is and what it holds")
    actions.add_parser("clear", help="remove every cached kernel")
    prune = actions.add_parser("prune", help="remove stale files and evict down to a size")
    prune.add_argument("--max-bytes", type=_size, default=None,
                       help="size to evict down to (default: TORCH_CUDAJIT_CACHE_MAX_BYTES or 4G)")
    args = parser.parse_args(argv)

    from . import cache as c

    if args.action == "info":
        i = c.info()
        print(f"directory: {i['dir']}")
        print(f"enabled:   {'yes' if i['enabled'] else 'no (TORCH_CUDAJIT_CACHE=0)'}")
        print(f"entries:   {i['entries']}")
        print(f"size:      {_human(i['bytes'])} ({i['bytes']} bytes)")
        print(f"limit:     {_human(i['max_bytes'])} ({i['max_bytes']} bytes)")
    elif args.action == "clear":
        print(f"removed {c.clear()} file(s) from {c.info()['dir']}")
    else:
        removed = c.prune(args.max_bytes)
        i = c.info()
        print(f"removed {removed} file(s); {i['entries']} entries, {_human(i['bytes'])} remain in {i['dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
