"""Loads the C++ core (through its binding, torch_cudajit._C) and tells it where NVRTC and the
CUDA headers are."""
import os
import sys

import torch  # noqa: F401  (loads libtorch and libc10_cuda before our libraries)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

try:
    from . import _C  # type: ignore[attr-defined]
except ImportError as e:
    _built = any(name.startswith("_C.") and name.endswith(".so") for name in os.listdir(_PACKAGE_DIR))
    if _built:
        raise ImportError(
            f"torch_cudajit: its compiled binding ({_PACKAGE_DIR}/_C*.so) did not load: {e}. "
            f"It was built against another torch than the one imported (torch {torch.__version__}"
            f" at {os.path.dirname(torch.__file__)}); rebuild it: `pip install --no-build-isolation "
            f".` or `python setup.py build_ext --inplace`.") from e
    raise ImportError(
        f"torch_cudajit is imported from {_PACKAGE_DIR}, which holds no compiled binding (_C). "
        "Install the package (`pip install --no-build-isolation .`), or build it in place "
        "(`python setup.py build_ext --inplace`), or run from outside the source tree so that "
        "the installed package is imported.") from e


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


def _libclang_path():
    # The `libclang` wheel (a dependency) keeps its library in clang/native; finding the file
    # does not import the bindings.
    import importlib.util
    spec = importlib.util.find_spec("clang")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "native", "libclang.so")
        if os.path.isfile(path):
            return path
    return None


def _pathfinder_dirs(name):
    """cuda-pathfinder's answer for a CUDA component (NVIDIA's wheels, conda, CUDA_HOME, the
    toolkit): its header folder and the library folders beside it, found without loading
    anything; None when cuda-pathfinder is not installed or does not know."""
    import importlib.util
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.pathfinder") is None:
        return None
    from cuda.pathfinder import find_nvidia_header_directory
    try:
        include = find_nvidia_header_directory(name)
    except Exception:  # an unknown name or layout: the built-in search stands
        return None
    if not include:
        return None
    root = os.path.dirname(include)
    # A wheel or toolkit keeps lib/ or lib64/ beside include/; conda keeps it beside targets/.
    libs = [os.path.join(root, sub) for sub in ("lib", "lib64")]
    return include, [d for d in libs if os.path.isdir(d)]


def _configure():
    _C.set_package_include_dir(os.path.join(_PACKAGE_DIR, "include"))
    libclang = _libclang_path()
    if libclang:
        _C.set_libclang_path(libclang)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            _C.add_library_search_path(os.path.join(os.environ[var], "lib64"))
    for lib in _nvidia_wheel_dirs():
        _C.add_library_search_path(lib)
    # Where neither torch's NVIDIA wheels nor the usual folders hold NVRTC (conda, a toolkit
    # elsewhere), cuda-pathfinder finds it, and the CUDA headers beside it. Only then is it
    # imported: a usual import does not pay for it.
    if not _C.library_file_found("nvrtc"):
        _add_pathfinder_dirs("nvrtc")


def _add_pathfinder_dirs(name):
    """Passes cuda-pathfinder's folders for `name` to the core; returns them, or None."""
    found = _pathfinder_dirs(name)
    if found:
        include, libs = found
        for lib in libs:
            _C.add_library_search_path(lib)
        _C.add_cuda_include_dir(include)
    return found


_configure()

#: The folder to add to CMAKE_PREFIX_PATH for find_package(torch_cudajit), as
#: torch.utils.cmake_prefix_path is for find_package(Torch).
cmake_prefix_path = os.path.join(_PACKAGE_DIR, "share", "cmake")
