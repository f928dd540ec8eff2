"""``torch_cudajit.jit``: the options a user gives, checked and turned into NVRTC options,
then the source read once by the front end and each kernel built on it."""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Sequence

import torch

from ._extensions import Extension
from ._kernel import Kernel, KernelModule
from ._loader import _C

_DTYPE_TO_CPP = {
    torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.uint8: "uint8_t",
    torch.uint16: "uint16_t",
    torch.uint32: "uint32_t",
    torch.uint64: "uint64_t",
    torch.bool: "bool",
    torch.complex64: "cj::complex<float>",
    torch.complex128: "cj::complex<double>",
}


def _template_args(value) -> str:
    """jit's template_args as the kernel's options hold them: positional ones ("float, 4"),
    then NAME=value ones (from a dict, {"BLOCK": 256})."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for name in value:
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(f"template_args: the keys of a dict name template parameters, "
                                f"got {name!r}")
        return ", ".join(f"{name}={_template_arg(v)}" for name, v in value.items())
    return ", ".join(_template_arg(v) for v in value)


def _template_arg(v) -> str:
    if isinstance(v, torch.dtype):
        if v not in _DTYPE_TO_CPP:
            raise TypeError(f"template_args: dtype {v} has no CUDA C++ type")
        return _DTYPE_TO_CPP[v]
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, str)):
        return str(v)
    raise TypeError(f"template_args entries must be str, int, bool or torch.dtype, got {v!r}")


def jit(source, name: str | None = None, *, options: Iterable[str] = (),
        include_dirs: Iterable[str] = (), defines: dict | None = None, std: str = "c++17",
        fastmath: bool = False, lineinfo: bool = False, debug: bool = False,
        template_args=None, extensions: Sequence[Extension] = (), filename: str = "kernel.cu",
        cache: bool = True, max_registers: int | None = None, opt=True,
        link: Iterable[str] = (), cooperative: bool | None = None):
    """Compiles CUDA C++ kernels on demand.

    Args:
        source: CUDA C++ with one or more ``__global__`` functions, as a ``str``. ``cj/cj.cuh``
            (cj::Array, fixed-width integers, cj::complex) is included automatically. Or a
            whole CUDA file, as a path object (``pathlib.Path("kernels.cu")``) or an open file:
            host code and all, of which what nvcc's device pass compiles is kept
            (``device_source`` shows it); ``filename`` is then the file's path.
        name: the kernel to return. Without it, a source with one kernel returns that kernel
            and a source with several returns a KernelModule.
        options: extra NVRTC options, each a string (not -arch: the architecture is the
            device's, or compile(arch=...)'s). include_dirs / defines: -I and -D options.
        std: the C++ standard: 'c++14', 'c++17' or 'c++20'. fastmath: --use_fast_math.
            lineinfo: -lineinfo.
        debug: -G, and bounds-checked cj::Array indexing.
        template_args: explicit template arguments: leading ones ("float, 4" or
            (torch.float32, 4)), or any by name ({"BLOCK": 256}, or "BLOCK=256"); the rest are
            deduced from the arguments.
        extensions: objects with ``prepare_args`` that convert arguments before a launch.
        cache: keep compiled specializations in the persistent disk cache (see
            ``torch_cudajit.cache``); False compiles them in every process.
        max_registers: cap on registers per thread (--maxrregcount).
        opt: device code optimization: True (full), False (ptxas -O0) or a ptxas level 0-3.
        link: files linked into the kernel with nvJitLink: .cu, .ptx, .cubin, .fatbin,
            .ltoir, .o and .a. The kernel then compiles to LTO-IR and is linked with
            link-time optimization.
        cooperative: launch with cuLaunchCooperativeKernel (grid-wide sync). None detects
            cooperative_groups::this_grid / grid_group in the kernel's source text.
    """
    if cooperative is not None and not isinstance(cooperative, bool):
        raise TypeError(f"cooperative must be None or a bool, got {type(cooperative).__name__}")
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be a bool, got {type(cache).__name__}")
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str, got {type(filename).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    _check_std(std)
    opts = _nvrtc_options(options, include_dirs, defines, fastmath, max_registers, opt)
    if isinstance(source, str):
        _check_not_a_path(source)
    elif isinstance(source, os.PathLike) or hasattr(source, "read"):
        read = _device_source(source, opts, std, "source", cache)
        source, filename = read.text, read.path
    else:
        raise TypeError(f"source must be a str of CUDA C++, a path object or an open file, got "
                        f"{type(source).__name__}")
    link_files = _link_files(link)
    # The option fields of the kernel's state (KernelDefinition.options), exactly.
    config = dict(options=opts, std=std, debug=bool(debug), lineinfo=bool(lineinfo),
                  template_args=_template_args(template_args), cache=cache, link=link_files,
                  cooperative=-1 if cooperative is None else int(cooperative))
    # The source is read once; each of its kernels is one definition on it, which the Python
    # Kernel, its TorchScript object and its runtime share.
    program = _C.Program(source, filename, opts, std, cache=cache)
    names = program.kernel_names
    if name is None and not names:
        raise ValueError("source defines no __global__ function")

    def kernel(n):  # an unknown name raises ValueError naming the kernels that exist
        return Kernel(_C.KernelDefinition(program, n, config), extensions)

    if name is not None or len(names) == 1:
        k = kernel(name if name is not None else names[0])
        # A kernel defined alone reports now what keeps its template arguments from being
        # known; a module's kernels report it when that kernel compiles.
        if k._definition.template_problem:
            raise ValueError(k._definition.template_problem)
        return k
    return KernelModule({n: kernel(n) for n in names})


@dataclasses.dataclass(frozen=True)
class DeviceSource:
    """A whole CUDA file as NVRTC compiles it (``device_source``)."""

    #: The file's device side: host code blanked (lines keep their numbers), the user's own
    #: headers written in behind ``#line`` directives.
    text: str
    #: The file's absolute path: the program's name, beside which quoted includes are found.
    path: str
    #: The files written into ``text``, the file first.
    files: tuple
    #: What was left out that is not plainly host code, and why ("file:line: ...").
    notes: tuple


def device_source(file, *, options: Iterable[str] = (), include_dirs: Iterable[str] = (),
                  defines: dict | None = None, std: str = "c++17") -> DeviceSource:
    """What ``jit(pathlib.Path(file))`` compiles of a whole CUDA file: the kernels, device
    functions and variables, types, templates and macros, without host functions, host
    variables and host-only includes (see docs/writing-kernels.md, "Whole files").

    Args:
        file: a path (str or path object) or an open file.
        options, include_dirs, defines, std: as for ``jit``; they decide what the preprocessor
            reads, as they do for the compile.
    """
    _check_std(std)
    opts = _nvrtc_options(options, include_dirs, defines, False, None, True)
    return _device_source(file, opts, std, "file", True)


def _device_source(file, opts, std, what, cache) -> DeviceSource:
    """The device side of a file given as a path or an open file (``what`` names the argument
    in messages)."""
    text = None
    if hasattr(file, "read"):
        path = getattr(file, "name", None)
        if not (isinstance(path, (str, os.PathLike)) and os.path.isfile(path)):
            text = file.read()
            if isinstance(text, bytes):
                text = text.decode()
            if not isinstance(text, str):
                raise TypeError(f"{what}: the open file's read() gave {type(text).__name__}, "
                                f"not text")
            path = os.path.join(os.getcwd(), "kernel.cu")
    elif isinstance(file, (str, os.PathLike)):
        path = file
    else:
        raise TypeError(f"{what} must be a path or an open file, got {type(file).__name__}")
    path = os.path.abspath(os.fspath(path))
    if text is None and not os.path.isfile(path):
        raise ValueError(f"{what}: the CUDA file '{os.fspath(path)}' does not exist; pass the "
                         f"path of a .cu file (a str is read as source text: pass "
                         f"pathlib.Path(...) for a file)")
    d = _C.device_source(path, opts, std, text=text, cache=cache)
    return DeviceSource(d["text"], d["path"], tuple(d["files"]), tuple(d["notes"]))


#: The C++ standards jit takes (csrc/options.cpp: supported_standards, which checks -std= in
#: the options): those NVRTC takes that cj/cj.cuh compiles under.
_STANDARDS = ("c++14", "c++17", "c++20")


def _check_std(std) -> None:
    """Refuses a std= that NVRTC or cj/cj.cuh does not take, before anything is read."""
    if not isinstance(std, str):
        raise TypeError(f"std must be a str such as 'c++17', got {type(std).__name__}")
    if std in _STANDARDS:
        return
    iso = "c++" + std[len("gnu++"):] if std.startswith("gnu++") else ""
    raise ValueError(f"std is {std!r}; the C++ standard must be one of "
                     f"{', '.join(repr(s) for s in _STANDARDS)} (NVRTC takes these"
                     f"{' and no GNU dialect' if iso else ''}; cj/cj.cuh needs C++14 or later). "
                     f"Pass std={iso if iso in _STANDARDS else 'c++17'!r} instead.")


#: File name endings of CUDA C++ sources and headers (a path passed where text is expected).
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".cxx")


def _check_not_a_path(source: str) -> None:
    """Refuses a file name passed as the source: jit takes the text of the source."""
    if "\n" in source or "__global__" in source:
        return
    text = source.strip()
    if text and (text.lower().endswith(_SOURCE_SUFFIXES) or os.path.isfile(text)):
        raise ValueError(
            f"jit takes the text of a CUDA C++ source, and got {source!r}, which looks like a "
            f"file name{' (the file exists)' if os.path.isfile(text) else ''}. To compile a "
            f"file, pass it as a path object: cj.jit(pathlib.Path({text!r})) (or cj.load("
            f"{text!r})), which reads the whole file, host code and all.")


def _nvrtc_options(options, include_dirs, defines, fastmath, max_registers, opt) -> list:
    """jit's option arguments, checked, as NVRTC options in order."""
    if max_registers is not None and (not isinstance(max_registers, int)
                                      or isinstance(max_registers, bool) or max_registers < 1):
        raise ValueError(f"max_registers must be a positive int, got {max_registers!r}")
    if opt is True:
        opt_level = 3
    elif opt is False:
        opt_level = 0
    elif isinstance(opt, int) and 0 <= opt <= 3:
        opt_level = opt
    else:
        raise ValueError(f"opt must be True, False or an optimization level 0-3, got {opt!r}")
    if isinstance(options, str):
        raise TypeError("options must be a list of NVRTC option strings, not one string")
    opts = list(options)
    for i, o in enumerate(opts):
        if not isinstance(o, str):
            raise TypeError(f"options[{i}] is {o!r} ({type(o).__name__}); options must be NVRTC "
                            f"option strings, e.g. ['-DN=4', '--use_fast_math']")
    opts += [f"-I{d}" for d in include_dirs]
    for key, value in (defines or {}).items():
        opts.append(f"-D{key}" if value is None else f"-D{key}={value}")
    if fastmath:
        opts.append("--use_fast_math")
    if max_registers is not None:
        opts.append(f"--maxrregcount={max_registers}")
    if opt_level != 3:
        opts.append(f"--ptxas-options=-O{opt_level}")
    return opts


def _link_files(link) -> list:
    """jit's link argument, checked, as absolute paths."""
    if isinstance(link, (str, os.PathLike)):
        link = [link]
    link_files = []
    for f in link:
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(f"link entries must be paths, got {type(f).__name__}")
        path = os.path.abspath(os.fspath(f))
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".cu", ".ptx", ".cubin", ".fatbin", ".ltoir", ".o", ".a"):
            raise ValueError(f"link: '{f}' has the extension '{ext}'; link= takes .cu, .ptx, "
                             f".cubin, .fatbin, .ltoir, .o and .a files")
        if not os.path.isfile(path):
            raise ValueError(f"link: the file '{f}' does not exist")
        link_files.append(path)
    return link_files
