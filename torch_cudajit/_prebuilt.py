"""Prebuilt device code: ``torch_cudajit.load`` turns PTX, CUBIN or a fatbin plus the kernel's
declaration into a kernel with the launch API, argument checks and stream rules of ``jit``."""
from __future__ import annotations

import os
import pathlib
import re
from typing import Sequence

from ._kernel import SpecializedKernel, specialize
from ._launch import Launch
from ._loader import _C
from ._parts import KernelParts, delegate


@delegate("_launch", Launch, Launch.API)
@delegate("_parts", KernelParts, KernelParts.API)
class PrebuiltKernel:
    """A kernel of prebuilt device code (``torch_cudajit.load``). It launches like any kernel
    (``k[grid, block](*args)``, ``forall``, ``specialize``); there is nothing to compile, so
    ``precompile``, the cudajit op (``op``, ``script_object``, torch.compile and TorchScript)
    and template deduction are not available."""

    def __init__(self, program, name: str, image: bytes, lowered_name: str, cooperative: bool,
                 extensions: Sequence = ()):
        definition = _C.KernelDefinition.prebuilt(program, name, image, lowered_name, cooperative)
        self._parts = KernelParts.of_prebuilt(definition, extensions)
        self._launch = Launch(self._parts)
        self._image = image
        self._lowered_name = lowered_name
        self._cooperative = cooperative

    @property
    def format(self) -> str:
        """'PTX', 'CUBIN' or 'fatbin'."""
        return _C.image_format(self._image)

    @property
    def lowered_name(self) -> str:
        """The kernel's symbol in the image."""
        return self._lowered_name

    def specialize(self, *args, **kwargs) -> SpecializedKernel:
        """A kernel fixed to the signature of these (CUDA) arguments, with the fastest launch."""
        return specialize(self, args, kwargs)

    @property
    def script_object(self):
        return self._parts.script_object  # raises: prebuilt code has none

    @property
    def op(self):
        raise self._parts.unavailable("cudajit::launch op")

    def precompile(self, specs, **kwargs):
        raise TypeError(f"kernel '{self.name}' is prebuilt code (torch_cudajit.load); there is "
                        f"nothing to precompile")

    def __reduce__(self):
        parts = self._parts
        return (_rebuild_prebuilt, (self._image, parts.source, parts.name, self._lowered_name,
                                    self._cooperative, parts.extensions))

    def __repr__(self):
        params = ", ".join(f"{p.type} {p.name}" for p in self._parts.params)
        return (f"<torch_cudajit.PrebuiltKernel {self._parts.name}({params}) {self.format} "
                f"{self._lowered_name}>")


def _declaration_program(declaration):
    # A declaration is C++: it ends with ';' (or is a definition). Users write the signature
    # alone, as in the README, so the ';' is added when missing.
    text = declaration.rstrip()
    if not text.endswith((";", "}")):
        text += ";"
    return _C.Program(text, "declaration.cu")


def _rebuild_prebuilt(image, declaration, name, lowered_name, cooperative, extensions):
    return PrebuiltKernel(_declaration_program(declaration), name, image, lowered_name,
                          cooperative, extensions)


def _read_image(image) -> bytes:
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        if not os.path.isfile(path):
            raise ValueError(f"load: no file '{path}'. Pass the path of a .ptx, .cubin or .fatbin "
                             f"file, or the image itself as bytes (PTX text as ptx.encode())")
        with open(path, "rb") as f:
            return f.read()
    raise TypeError(f"load: image must be a path (str or os.PathLike) or bytes, got "
                    f"{type(image).__name__}")


def _kernel_symbol(image: bytes, name: str) -> str:
    """The symbol of kernel `name` in an image: the name itself when the image has it (extern
    "C"), else the one Itanium-mangled function of that name (_Z5saxpyPfPKff). A compressed
    fatbin shows neither; the name is then tried as it is, and loading reports a miss."""
    n = re.escape(name.encode())
    if re.search(rb"(?:\.entry\s+|\x00)" + n + rb"(?:\s*\(|\x00)", image):
        return name
    # Where symbols stand: PTX's .entry and .globl, ELF's string tables (NUL-separated, and
    # section names such as .text.<symbol>); not PTX's parameter names (<symbol>_param_0).
    mangled = sorted(set(re.findall(rb"(?:\.entry\s+|\.globl\s+|[\x00.])(_Z%d%s[A-Za-z0-9_]*)(?=[\x00(\s])"
                                    % (len(name.encode()), n), image)))
    if len(mangled) > 1:
        found = ", ".join(m.decode() for m in mangled)
        raise ValueError(f"load: the image holds several functions named '{name}' ({found}); "
                         f"pass lowered_name= the one to launch")
    return mangled[0].decode() if mangled else name


#: File name endings that ``load`` reads as CUDA C++ sources, not device code.
_SOURCE_SUFFIXES = (".cu", ".cuh")


def load(image, declaration: str | None = None, *, name: str | None = None,
         lowered_name: str | None = None, cooperative: bool | None = None,
         extensions: Sequence = (), **jit_options):
    """Loads a kernel from prebuilt device code, to launch it like a ``jit`` kernel; or a
    whole CUDA source file, host code and all (``load("kernels.cu")``, which is
    ``jit(pathlib.Path("kernels.cu"), ...)``: ``jit_options`` are jit's).

    Args:
        image: PTX, CUBIN or fatbin, as bytes or as the path of a file (PTX text:
            ``ptx.encode()``). The format is told by the first bytes.
        declaration: the kernel's CUDA C++ declaration, e.g.
            ``'extern "C" __global__ void saxpy(float* out, const float* x, float a)'``:
            parameter names (keywords, messages), types (argument checks, packing) and
            constness. Only pointers and arithmetic or complex scalars; no templates.
        name: which kernel of the declaration, when it declares several.
        lowered_name: the kernel's symbol in the image. Default: the name for extern "C"
            kernels, else the one mangled function of that name found in the image.
        cooperative: launch with cuLaunchCooperativeKernel (a grid-wide barrier).
        extensions: as for ``jit``.
    """
    if (declaration is None and isinstance(image, (str, os.PathLike))
            and os.fspath(image).lower().endswith(_SOURCE_SUFFIXES)):
        from ._jit import jit
        return jit(pathlib.Path(os.fspath(image)), name, cooperative=cooperative,
                   extensions=extensions, **jit_options)
    if jit_options:
        raise TypeError(f"load: {', '.join(sorted(jit_options))} apply to CUDA source files "
                        f"(.cu, .cuh), not to prebuilt device code")
    if cooperative is None:
        cooperative = False
    data = _read_image(image)
    if declaration is None:
        raise TypeError("load: prebuilt device code needs declaration=, the kernel's CUDA C++ "
                        "declaration (e.g. 'extern \"C\" __global__ void saxpy(float* out, "
                        "const float* x, float a)'); a CUDA source file is loaded by its path "
                        "ending in .cu or .cuh")
    if not isinstance(declaration, str):
        raise TypeError(f"load: declaration must be a str of CUDA C++, got {type(declaration).__name__}")
    for arg, value in (("name", name), ("lowered_name", lowered_name)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"load: {arg} must be a non-empty str, got {value!r}")
    if not isinstance(cooperative, bool):
        raise TypeError(f"load: cooperative must be a bool, got {type(cooperative).__name__}")
    _C.image_format(data)  # raises ValueError naming what the image starts with
    program = _declaration_program(declaration)
    names = program.kernel_names
    if not names:
        raise ValueError(f"load: the declaration {declaration!r} declares no __global__ function; "
                         f"pass e.g. 'extern \"C\" __global__ void saxpy(float* out, const float* "
                         f"x, float a)'")
    if name is None:
        if len(names) > 1:
            raise ValueError(f"load: the declaration declares several kernels ({', '.join(names)}); "
                             f"pass name= one of them")
        name = names[0]
    else:
        program.require_kernel(name)  # raises ValueError naming the kernels that exist
    if lowered_name is None:
        lowered_name = _kernel_symbol(data, name)
    return PrebuiltKernel(program, name, data, lowered_name, cooperative, extensions)
