"""Loads the C++ core and tells it where NVRTC and the CUDA headers are."""
import os
import sys

import torch  # noqa: F401  (loads libtorch and libc10_cuda before our extension)

from . import _C  # type: ignore[attr-defined]


def _nvidia_wheel_dirs():
    # torch's CUDA wheels bring NVRTC and the CUDA headers as nvidia-* packages.
    for base in sys.path:
        root = os.path.join(base, "nvidia")
        if not os.path.isdir(root):
            continue
        for sub in ("cu13", "cuda_nvrtc", "cu12"):
            lib = os.path.join(root, sub, "lib")
            if os.path.isdir(lib):
                yield lib


def _configure():
    _C.set_package_include_dir(os.path.join(os.path.dirname(__file__), "include"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            _C.add_library_search_path(os.path.join(os.environ[var], "lib64"))
    for lib in _nvidia_wheel_dirs():
        _C.add_library_search_path(lib)


_configure()
