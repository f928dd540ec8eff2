"""The digest of what a torch_cudajit build compiles: every file of csrc/ and of the device
headers (torch_cudajit/include), setup.py, and the torch and Python versions it builds against.

setup.py writes it beside the built core (torch_cudajit/lib/build_digest.txt). `scripts/test.sh`
compares it with the checkout's: when the installed package was built from these very sources,
the tests use its libraries instead of compiling the same sources again.

    python3 scripts/build_digest.py            # this checkout's digest
    python3 scripts/build_digest.py --installed  # the installed package's lib folder, when its
                                                 # digest is this checkout's (else nothing)
    python3 scripts/build_digest.py --reuse      # "in-place" when the checkout's own build is
                                                 # current, else as --installed
"""
from __future__ import annotations

import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE_NAME = "build_digest.txt"


def source_digest(root: str = ROOT) -> str:
    """SHA-256 over the compiled sources (names and contents) and the torch/Python versions."""
    import torch

    h = hashlib.sha256()
    h.update(f"torch {torch.__version__} python {sys.version_info[:2]}\n".encode())
    files = [os.path.join(root, "setup.py")]
    for top in ("csrc", os.path.join("torch_cudajit", "include")):
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs.sort()
            files += [os.path.join(folder, n) for n in sorted(names)]
    for path in files:
        h.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _built_digest(lib: str) -> str | None:
    try:
        with open(os.path.join(lib, FILE_NAME), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def installed_lib_dir(root: str = ROOT, digest: str | None = None) -> str | None:
    """The installed package's lib folder when it was built from this checkout, else None. The
    package is looked up outside the checkout, whose own torch_cudajit folder would shadow it."""
    import importlib.util

    sys.path = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != root]
    spec = importlib.util.find_spec("torch_cudajit")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    built = _built_digest(lib)
    return lib if built is not None and built == (digest or source_digest(root)) else None


def reusable_build(root: str = ROOT) -> str:
    """"in-place" when the checkout's own build is current, else the installed package's lib
    folder when it was built from this checkout, else ""; the digest is computed once."""
    digest = source_digest(root)
    if _built_digest(os.path.join(root, "torch_cudajit", "lib")) == digest:
        return "in-place"
    return installed_lib_dir(root, digest) or ""


if __name__ == "__main__":
    if sys.argv[1:] == ["--installed"]:
        print(installed_lib_dir() or "")
    elif sys.argv[1:] == ["--reuse"]:
        print(reusable_build())
    else:
        print(source_digest())
