# torch_cudajit build: the C++ core as one shared library (torch_cudajit/lib/libtorch_cudajit.so)
# and a thin Python extension (torch_cudajit/_C) that links it, so Python and LibTorch programs
# share one copy of the core and of the cudajit op registration. Only the host C++ compiler is
# used (no nvcc); NVRTC and the CUDA driver are opened at run time.
#
# The C++ standard and the ABI flags are the ones torch's own extension tooling picks for the
# installed torch (C++17 up to torch 2.14, C++20 from 2.15): nothing here names a standard.
import glob
import os
import shutil
import sys

from setuptools import find_packages, setup

try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("torch_cudajit builds against the torch installed in this environment, and none was "
             "found. Install torch first, then build without isolation: "
             "`pip install --no-build-isolation .` or `python -m build --no-isolation`.")

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "torch_cudajit.lib.libtorch_cudajit"
VERSION = "0.2.0"
TORCH_RANGE = ">=2.6"


def cuda_include_dir():
    """Headers for cuda.h / nvrtc.h: CUDA_HOME, NVIDIA's wheels (what torch brings), the toolkit."""
    candidates = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for p in sys.path:
        candidates += [os.path.join(p, "nvidia", sub, "include") for sub in ("cu13", "cuda_runtime", "cuda_nvrtc")]
    candidates += ["/usr/local/cuda/include"]
    for c in candidates:
        if os.path.exists(os.path.join(c, "cuda.h")) and os.path.exists(os.path.join(c, "nvrtc.h")):
            return c
    raise RuntimeError(
        "torch_cudajit: cannot find cuda.h and nvrtc.h. They come with torch's CUDA wheels "
        "(nvidia-cuda-runtime, nvidia-cuda-nvrtc) or the CUDA toolkit; set CUDA_HOME to the "
        "toolkit, or install torch with CUDA support.")


class BuildCoreAndBinding(BuildExtension):
    """Builds the core library first, then the binding against it, and lays out the C++ package
    (headers and CMake config) beside the library."""

    def get_ext_filename(self, fullname):
        # A plain shared library, not a Python module: no ABI suffix. setuptools asks with the
        # dotted name (and wants a path) or with its last part (and wants a file name).
        if fullname == CORE:
            return os.path.join(*CORE.split(".")[:-1], "libtorch_cudajit.so")
        if fullname == CORE.rsplit(".", 1)[1]:
            return "libtorch_cudajit.so"
        return super().get_ext_filename(fullname)

    def build_extensions(self):
        # Extensions are linked in build_lib (and copied into the tree afterwards for --inplace).
        core_dir = os.path.join(self.build_lib, *CORE.split(".")[:-1])
        for ext in self.extensions:
            if ext.name == CORE:
                # Not a Python module: it must not need libtorch_python, which LibTorch lacks.
                ext.libraries = [lib for lib in ext.libraries if lib != "torch_python"]
            else:
                ext.library_dirs.append(core_dir)
        super().build_extensions()
        self._copy_cxx_headers(os.path.dirname(core_dir))
        self._write_digest(core_dir)

    def copy_extensions_to_source(self):  # --inplace: the library's folder, then the headers
        os.makedirs(os.path.join(HERE, *CORE.split(".")[:-1]), exist_ok=True)
        super().copy_extensions_to_source()
        self._copy_cxx_headers(os.path.join(HERE, "torch_cudajit"))
        self._write_digest(os.path.join(HERE, *CORE.split(".")[:-1]))

    def _write_digest(self, lib_dir):
        # What this build compiled (scripts/build_digest.py): the tests reuse an installed build
        # only when it matches the checkout.
        digest = load_build_digest()
        with open(os.path.join(lib_dir, digest.FILE_NAME), "w", encoding="ascii") as f:
            f.write(digest.source_digest(HERE) + "\n")

    def _copy_cxx_headers(self, package_dir):
        # <package>/cxx/torch_cudajit/*.h: the C++ API for find_package(torch_cudajit), the
        # headers csrc/public_headers.txt names. Kept apart from <package>/include, NVRTC's
        # folder, whose <cstdint> stand-ins must not shadow the host compiler's headers.
        dest = os.path.join(package_dir, "cxx", "torch_cudajit")
        shutil.rmtree(dest, ignore_errors=True)
        for rel in public_headers():
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(HERE, "csrc", rel), os.path.join(dest, rel))


def load_build_digest():
    """scripts/build_digest.py, loaded by path (the package itself needs the built core)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "torch_cudajit_build_digest", os.path.join(HERE, "scripts", "build_digest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_headers():
    """The installed C++ API: csrc/public_headers.txt, one header (relative to csrc/) a line."""
    with open(os.path.join(HERE, "csrc", "public_headers.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


core_sources = sorted(glob.glob("csrc/*.cpp")) + sorted(glob.glob("csrc/ops/*.cpp"))
common = dict(
    include_dirs=[os.path.join(HERE, "csrc"), cuda_include_dir()],
    extra_compile_args=["-O2"],
)

setup(
    name="torch_cudajit",
    version=VERSION,
    description="CUDA C++ kernels as strings, compiled with NVRTC and called on torch tensors",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["torch_cudajit", "torch_cudajit.*"]),
    package_data={"torch_cudajit": ["include/**/*", "include/*", "share/cmake/torch_cudajit/*.cmake"]},
    # torch.compile(..., backend="cudajit") finds the backend without an import.
    entry_points={"torch_dynamo_backends": ["cudajit = torch_cudajit.backend:cudajit"]},
    ext_modules=[
        CppExtension(
            CORE,
            core_sources,
            libraries=["c10_cuda", "dl"],
            # The library finds torch's libraries where pip puts them (site-packages/torch/lib)
            # for LibTorch programs; Python has loaded them already by the time it is opened.
            extra_link_args=["-Wl,-soname,libtorch_cudajit.so", "-Wl,-rpath,$ORIGIN/../../torch/lib",
                             "-l:libstdc++.so.6"],
            **common,
        ),
        CppExtension(
            "torch_cudajit._C",
            sorted(glob.glob("csrc/python/*.cpp")),
            libraries=["torch_cudajit", "c10_cuda"],
            # Some Python builds link extensions with -static-libstdc++; a private copy of
            # libstdc++ beside torch's shared one breaks iostream locales. Link the shared one.
            extra_link_args=["-Wl,-rpath,$ORIGIN/lib", "-l:libstdc++.so.6"],
            **common,
        ),
    ],
    cmdclass={"build_ext": BuildCoreAndBinding.with_options(use_ninja=True)},
    python_requires=">=3.9",
    install_requires=[f"torch{TORCH_RANGE}", "libclang>=14"],
    extras_require={"test": ["pytest", "numpy", "hypothesis"]},
)
