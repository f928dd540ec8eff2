"""The CPU references of llm.c's dev/cuda files (tests/corpus_files/llm.c), callable from Python.

Most llm.c kernel files define the CPU function their kernels are checked against
(``gelu_forward_cpu``, ``softmax_forward_cpu``, ``adamw_cpu``, ...). This module compiles ONE
corpus file, host code and all, with nvcc into a shared library, as the file's own Makefile
builds it but with ``-shared``, and ``main`` renamed so that it is an ordinary function:

    nvcc -shared -Xcompiler -fPIC -arch=sm_90 -Dmain=llmc_unused_main FILE.cu -o FILE.so

and calls the reference through ctypes on CPU tensors:

    ref = reference_library("gelu_forward")
    ref("gelu_forward_cpu", out, inp, n)        # out, inp: contiguous CPU tensors

The library is not linked with cuBLAS and is loaded with lazy binding (``-z lazy``, RTLD_LAZY):
the references are plain host loops, and the host code's cuBLAS calls (``setup_main``, the
launch wrappers) are never made, so their symbols are never resolved. That keeps a second
cuBLAS (the toolkit's, beside the one torch loads) out of the test process. The CUDA runtime is
linked statically, nvcc's default, and is not called either.

Functions are found by name among the library's dynamic symbols (``nm -D --defined-only``: the
``_Z<len><name>`` mangled C++ name, or the plain name for ``extern "C"``); their parameter types
come from the demangled name (``c++filt``), so that each argument is checked and converted:
pointers take contiguous CPU tensors of the pointee's dtype, integer and floating-point
parameters Python numbers. Itanium mangling has no return type for plain functions: pass
``restype=`` (a ctypes type) for a reference that returns a value (``global_norm_cpu``).

Libraries are cached in ``$TMPDIR/torch_cudajit_llmc_reference/``, by the SHA-256 of the file
and its folder's headers, the nvcc version and the command; a build writes a temporary file and
renames it into place, so concurrent test processes never see half a library.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import torch

CORPUS_DIR = (pathlib.Path(__file__).resolve().parent.parent / "corpus_files" / "llm.c" / "dev"
              / "cuda")
CACHE_DIR = pathlib.Path(tempfile.gettempdir()) / "torch_cudajit_llmc_reference"
ARCH = "sm_90"


@functools.lru_cache(maxsize=None)
def nvcc_path() -> str | None:
    """nvcc from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin that runs (a wrapper left behind by
    a toolkit that is gone does not); None when there is none."""
    candidates = [shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "nvcc"))
    for path in candidates:
        if not path or not os.access(path, os.X_OK):
            continue
        try:
            if subprocess.run([path, "--version"], capture_output=True, timeout=60).returncode == 0:
                return path
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def tools_available() -> str | None:
    """None when a reference library can be built and read here, else what is missing."""
    if nvcc_path() is None:
        return "nvcc is not installed (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
    for tool in ("nm", "c++filt"):
        if shutil.which(tool) is None:
            return f"{tool} (binutils) is not installed"
    return None


def _command(nvcc: str, source: pathlib.Path, output: pathlib.Path) -> list:
    return [nvcc, "-shared", "-Xcompiler", "-fPIC", "-Xlinker", "-z,lazy", f"-arch={ARCH}",
            "-std=c++17", "-Dmain=llmc_unused_main", str(source), "-o", str(output)]


@functools.lru_cache(maxsize=None)
def _nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                          check=True).stdout


def library_path(stem: str) -> pathlib.Path:
    """Builds (or finds in the cache) the shared library of ``<stem>.cu``; returns its path."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise RuntimeError(tools_available())
    source = CORPUS_DIR / f"{stem}.cu"
    if not source.is_file():
        raise FileNotFoundError(source)
    digest = hashlib.sha256()
    for part in [source, *sorted(source.parent.glob("*.h"))]:
        digest.update(part.name.encode() + b"\0" + part.read_bytes() + b"\0")
    digest.update(_nvcc_version(nvcc).encode())
    digest.update("\0".join(_command("nvcc", source, pathlib.Path("x"))).encode())
    target = CACHE_DIR / f"{stem}-{digest.hexdigest()[:16]}.so"
    if target.is_file():
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".so", dir=CACHE_DIR)
    os.close(fd)
    try:
        # The file's folder is the working directory: #include "common.h" resolves there.
        result = subprocess.run(_command(nvcc, source, pathlib.Path(tmp)), cwd=source.parent,
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"nvcc could not build the reference library of {source.name}:\n"
                               f"{' '.join(result.args)}\n{result.stdout}{result.stderr}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


# -- calling ---------------------------------------------------------------------------------------

#: Demangled scalar types -> (ctypes type, Python type the argument must be).
_SCALARS = {
    "int": (ctypes.c_int, int), "unsigned int": (ctypes.c_uint, int),
    "long": (ctypes.c_long, int), "unsigned long": (ctypes.c_ulong, int),
    "long long": (ctypes.c_longlong, int), "unsigned long long": (ctypes.c_ulonglong, int),
    "short": (ctypes.c_short, int), "char": (ctypes.c_char, int), "bool": (ctypes.c_bool, bool),
    "float": (ctypes.c_float, float), "double": (ctypes.c_double, float),
}
#: Demangled pointee types -> the dtype of the tensor a pointer parameter takes.
_POINTEES = {
    "float": torch.float32, "double": torch.float64, "int": torch.int32,
    "unsigned int": torch.uint32, "long": torch.int64, "unsigned char": torch.uint8,
    "char": torch.int8, "__nv_bfloat16": torch.bfloat16, "__half": torch.float16,
}




class ReferenceFunction:
    """One function of a reference library, with its parameter types."""

    def __init__(self, library: "ReferenceLibrary", symbol: str, signature: str, restype):
        self.symbol = symbol
        self.signature = signature  # demangled: "gelu_forward_cpu(float*, float const*, int)"
        self.params = _parameters(signature)
        self._fn = getattr(library.cdll, symbol)
        self._fn.restype = restype
        self._fn.argtypes = [ctypes.c_void_p if pointee is not None else ctype
                             for ctype, pointee, _ in self.params]

    def __call__(self, *args):
        if len(args) != len(self.params):
            raise TypeError(f"{self.signature} takes {len(self.params)} arguments, got {len(args)}")
        keep, values = [], []
        for i, (arg, (ctype, pointee, text)) in enumerate(zip(args, self.params)):
            where = f"{self.signature}: argument {i} ({text})"
            if pointee is not None:
                if not isinstance(arg, torch.Tensor):
                    raise TypeError(f"{where} takes a CPU tensor, got {type(arg).__name__}")
                if arg.device.type != "cpu" or not arg.is_contiguous():
                    raise ValueError(f"{where} takes a contiguous CPU tensor")
                if pointee != "void" and arg.dtype != _POINTEES.get(pointee):
                    raise TypeError(f"{where} takes a {_POINTEES.get(pointee)} tensor, "
                                    f"got {arg.dtype}")
                keep.append(arg)
                values.append(arg.data_ptr())
            else:
                python_type = _SCALARS[text][1]
                if python_type is float and isinstance(arg, int) and not isinstance(arg, bool):
                    arg = float(arg)
                if not isinstance(arg, python_type) or (python_type is int
                                                        and isinstance(arg, bool)):
                    raise TypeError(f"{where} takes a Python {python_type.__name__}, "
                                    f"got {type(arg).__name__}")
                values.append(arg)
        return self._fn(*values)


def _parameters(signature: str) -> list:
    """[(ctypes type, pointee or None, declared type)] of a demangled plain function's
    parameters."""
    inner = signature[signature.index("(") + 1:signature.rindex(")")].strip()
    if inner in ("", "void"):
        return []
    out = []
    for text in (t.strip() for t in inner.split(",")):
        base = " ".join(re.sub(r"\bconst\b", " ", text).split())
        if base.endswith("*"):
            pointee = base[:-1].strip()
            if pointee.endswith("*"):
                raise TypeError(f"{signature}: pointer-to-pointer parameters are not supported")
            out.append((ctypes.c_void_p, pointee, text))
        elif base in _SCALARS:
            out.append((_SCALARS[base][0], None, base))
        else:
            raise TypeError(f"{signature}: parameter type {text!r} is not supported")
    return out


class ReferenceLibrary:
    """A corpus file's host code, loaded; call functions by name."""

    def __init__(self, stem: str):
        self.stem = stem
        self.path = library_path(stem)
        # RTLD_LAZY: the host code's cuBLAS calls stay unresolved (see the module docstring).
        self.cdll = ctypes.CDLL(str(self.path), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        nm = subprocess.run(["nm", "-D", "--defined-only", str(self.path)], capture_output=True,
                            text=True, check=True).stdout
        self.symbols = sorted({line.split()[-1] for line in nm.splitlines()
                               if len(line.split()) == 3 and line.split()[1] in "TW"})
        self._functions = {}

    def symbols_of(self, name: str) -> list:
        """The defined symbols of function `name`: its extern "C" name, or C++ names mangled
        ``_Z<len><name>`` (one per overload)."""
        prefix = f"_Z{len(name)}{name}"
        return [s for s in self.symbols if s == name or s.startswith(prefix)]

    def function(self, name: str, restype=None) -> ReferenceFunction:
        key = (name, restype)
        if key not in self._functions:
            found = self.symbols_of(name)
            if len(found) != 1:
                raise LookupError(f"{self.stem}.cu: {len(found)} functions named {name!r} in "
                                  f"{self.path.name} ({', '.join(demangle(found)) or 'none'})")
            symbol = found[0]
            signature = demangle([symbol])[0] if symbol.startswith("_Z") else f"{name}(...)"
            if not symbol.startswith("_Z"):
                raise LookupError(f"{name} is extern \"C\": its parameter types are unknown")
            self._functions[key] = ReferenceFunction(self, symbol, signature, restype)
        return self._functions[key]

    def __call__(self, name: str, *args, restype=None):
        return self.function(name, restype)(*args)


def demangle(symbols: list) -> list:
    if not symbols:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(symbols) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(out) == len(symbols), (symbols, out)
    return out


@functools.lru_cache(maxsize=None)
def reference_library(stem: str) -> ReferenceLibrary:
    """The loaded reference library of ``<stem>.cu`` (built once per machine, loaded once per
    process)."""
    return ReferenceLibrary(stem)


def build_all(stems, workers: int | None = None) -> None:
    """Builds the libraries of several files at once (nvcc processes in parallel)."""
    from concurrent.futures import ThreadPoolExecutor
    stems = sorted(set(stems))
    workers = workers or max(1, min(len(stems), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(library_path, stems))
