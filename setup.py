# torch_cudajit build: the C++ core and its Python binding as one extension, compiled with the
# host C++ compiler only (no nvcc). NVRTC and the CUDA driver are loaded at run time.
import glob
import os
import sys

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension


def cuda_include_dir():
    """Headers for cuda.h / nvrtc.h / cuda_runtime_api.h: the toolkit or NVIDIA's wheels."""
    candidates = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += [os.path.join(p, "nvidia", "cu13", "include") for p in sys.path]
    candidates += ["/usr/local/cuda/include"]
    for c in candidates:
        if os.path.exists(os.path.join(c, "cuda.h")) and os.path.exists(os.path.join(c, "nvrtc.h")):
            return c
    raise RuntimeError("torch_cudajit: cannot find cuda.h and nvrtc.h; set CUDA_HOME or install the CUDA toolkit")


sources = sorted(glob.glob("csrc/*.cpp")) + sorted(glob.glob("csrc/ops/*.cpp")) + ["csrc/python/bindings.cpp"]

setup(
    name="torch_cudajit",
    version="0.1.0",
    description="CUDA C++ kernels as strings, compiled with NVRTC and called on torch tensors",
    packages=find_packages(include=["torch_cudajit", "torch_cudajit.*"]),
    package_data={"torch_cudajit": ["include/*", "include/cj/*"]},
    ext_modules=[
        CppExtension(
            "torch_cudajit._C",
            sources,
            include_dirs=[os.path.abspath("csrc"), cuda_include_dir()],
            libraries=["c10_cuda", "dl"],
            extra_compile_args=["-O2", "-std=c++17"],
            # Some Python builds link extensions with -static-libstdc++; a private copy of
            # libstdc++ beside torch's shared one breaks iostream locales. Link the shared one.
            extra_link_args=["-l:libstdc++.so.6"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    python_requires=">=3.9",
    install_requires=["torch>=2.4"],
    extras_require={"test": ["pytest", "numpy"]},
)
