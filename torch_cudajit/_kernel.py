"""Kernel objects: compile on demand, specialize per argument types, launch with
``kernel[grid, block, stream, shared_mem](*args)``, as numba-cuda's CUDA dispatcher does."""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch

from ._args import coerce
from ._compiled import CompiledKernel, _check_global_args
from ._launch import _Launch, _arch_number
from ._loader import _C
from ._scriptable import _Scriptable


@dataclass(frozen=True)
class Parameter:
    """A reflected kernel parameter."""

    name: str
    type: str
    kind: str  # "array", "pointer", "scalar" or "auto"
    is_const: bool  # element type is const: the kernel only reads this tensor
    element: str
    rank: str
    # How it takes part in a launch, from the C++ core (param_role in csrc/reflection.h):
    # "output" (a tensor the kernel may write), "input" (read only), "scalar" or "auto" (a
    # number, or a tensor the kernel may write).
    role: str = "scalar"

    @property
    def writable(self) -> bool:
        return self.role in ("output", "auto")


class Kernel(_Launch, _Scriptable):
    """A CUDA C++ __global__ function, compiled and specialized on demand.

    Launch it with ``kernel[grid, block](*args)``, ``kernel[grid, block, stream]`` or
    ``kernel[grid, block, stream, shared_mem]``; ``grid`` and ``block`` are ints or tuples of
    up to three ints."""

    def __init__(self, definition, extensions: Sequence = ()):
        """A kernel of a ``_C.KernelDefinition`` (``jit`` makes them)."""
        self._setup(definition, extensions)
        # The kernel's TorchScript object (torch.classes.cudajit.Kernel) holds the same
        # definition and owns the dispatcher: eager launches, torch.compile graphs and scripted
        # modules share compiled code.
        self._script_object = definition.script_object()
        self._core = _C.dispatcher_of(self._script_object)
        # torch.jit.script types a Kernel attribute of a module as the script class (cheap, and
        # repeated because torch.jit's registry can be cleared).
        torch.jit._state._script_classes[Kernel] = self._script_object._type()

    def _setup(self, definition, extensions: Sequence) -> None:
        """What every kernel has besides its dispatcher (_core): all of it read from the
        definition, which computed each parameter's binding once."""
        self._definition = definition
        self._name = definition.name
        self._params = tuple(Parameter(**p) for p in definition.params)
        self._occupancy_warned: set = set()
        for ext in extensions:
            if not hasattr(ext, "prepare_args"):
                raise TypeError(f"extensions: {ext!r} has no prepare_args method")
        self._extensions = tuple(extensions)
        self._launchers: dict = {}
        self._kernel = self
        # How each parameter travels through the cudajit::launch op (see _OpLauncher).
        self._op_roles = tuple(p.role for p in self._params)

    # -- the op family -------------------------------------------------------------------------
    @property
    def script_object(self):
        """This kernel as a ``torch.classes.cudajit.Kernel``: store it on a module to call
        ``torch.ops.cudajit.launch`` from TorchScript, or to save the module with the kernel."""
        return self._script_object

    # -- reflection -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def params(self) -> tuple:
        """The kernel's parameters, as reflected from its declaration."""
        return self._params

    @property
    def source(self) -> str:
        return self._definition.source

    @property
    def is_template(self) -> bool:
        return self._definition.is_template

    @property
    def options(self) -> dict:
        """The options the kernel was created with, as ``jit`` read them: NVRTC options, C++
        standard, debug, lineinfo, template arguments, cache, link files and cooperative."""
        return self._definition.options

    def _param_at(self, i):
        return self._params[i] if i < len(self._params) else None

    def _bind(self, args, kwargs, allow_extra=False):
        """Positional + keyword arguments -> positional, by parameter name."""
        if not kwargs:
            return tuple(args)
        names = [p.name for p in self._params]
        out = list(args)
        if len(out) > len(names) and not allow_extra:
            raise TypeError(f"kernel '{self.name}' takes {len(names)} argument(s) "
                            f"({', '.join(names)}), got {len(out)} positional")
        out.extend([_MISSING] * (len(names) - len(out)))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"kernel '{self.name}' got an unexpected keyword argument '{key}'; "
                                f"its parameters are ({', '.join(names)})")
            i = names.index(key)
            if out[i] is not _MISSING:
                raise TypeError(f"kernel '{self.name}' got multiple values for argument '{key}'")
            out[i] = value
        missing = [names[i] for i, v in enumerate(out) if v is _MISSING]
        if missing:
            raise TypeError(f"kernel '{self.name}' is missing argument(s): {', '.join(missing)}")
        return tuple(out)

    # -- specializations ----------------------------------------------------------------------
    @property
    def signatures(self) -> list:
        """Signatures compiled so far, e.g. '(Array<float32, 1, contiguous>, float)'."""
        return [s.signature for s in self._core.specializations()]

    @property
    def overloads(self) -> dict:
        """Compiled specializations by signature and architecture."""
        return {(s.signature, s.info()["arch"]): CompiledKernel(s, self._core, self._params)
                for s in self._core.specializations()}

    def compile(self, *args, arch=None, **kwargs) -> CompiledKernel:
        """Compiles for the types of example arguments without launching.

        Tensors may be on any device (CPU or meta tensors work) when ``arch`` is given, so
        this runs on machines without a GPU: ``k.compile(torch.empty(8), 1.0, arch="sm_90")``."""
        bound = tuple(coerce(a) for a in self._bind(args, kwargs))
        spec = self._core.compile(bound, 0 if arch is None else _arch_number(arch))
        return CompiledKernel(spec, self._core, self._params)

    def precompile(self, specs, *, arch=None, workers: int | None = None,
                   processes: bool | None = None, progress: bool | None = None) -> list:
        """Compiles many specializations in parallel, e.g. to warm the disk cache in a
        container build.

        Args:
            specs: example arguments, one entry per specialization: a tuple of positional
                arguments or a dict of keyword arguments. With ``arch`` the tensors may be on
                any device (meta tensors cost nothing).
            arch: the target architecture (90, "sm_90" or (9, 0)); default: the current GPU.
            workers: parallel compiles (default: one per CPU, at most one per entry). The
                entries are split into one batch per worker, and a batch compiles as one NVRTC
                program, whose entries share the parse of the source and its headers.
            processes: compile in forked worker processes (default where fork exists). NVRTC
                stops scaling at a few threads per process; processes keep scaling. Results
                come back to this process either way, and go to the disk cache, where each
                entry is found alone.
            progress: draw a progress bar on stderr (default: for 8 or more entries when
                stderr is a terminal).
        Returns the CompiledKernel of each entry, in order. If some entries fail, all the
        others are still compiled and the first failure is raised.
        """
        if isinstance(specs, (str, bytes)) or not hasattr(specs, "__iter__"):
            raise TypeError(f"precompile: specs must be a list of argument tuples or dicts, "
                            f"got {type(specs).__name__}")
        bound = []
        for i, entry in enumerate(specs):
            if isinstance(entry, dict):
                args = self._bind((), entry)
            elif isinstance(entry, (tuple, list)):
                args = self._bind(tuple(entry), {})
            else:
                raise TypeError(f"precompile: specs[{i}] must be a tuple of arguments or a dict "
                                f"of keyword arguments, got {type(entry).__name__}")
            bound.append(tuple(coerce(a) for a in args))
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                    or workers < 1):
            raise ValueError(f"precompile: workers must be a positive int, got {workers!r}")
        if arch is None:
            # Worker processes never touch CUDA: they get the architecture, not the device.
            arch_number = _C.device_compute_capability(torch.cuda.current_device())
        else:
            arch_number = _arch_number(arch)
        from ._precompile import run_parallel
        specs_out = run_parallel(self, bound, arch_number, workers=workers,
                                 processes=processes, progress=progress,
                                 label=f"torch_cudajit: compiling {self.name}")
        return [CompiledKernel(s, self._core, self._params) for s in specs_out]

    @property
    def cache_hits(self) -> int:
        """Compiles of this kernel served by the disk cache (numba's ``_cache_hits``)."""
        return self._core.cache_counters["hits"]

    @property
    def cache_misses(self) -> int:
        """Compiles of this kernel the disk cache did not have."""
        return self._core.cache_counters["misses"]

    def specialize(self, *args, **kwargs) -> "SpecializedKernel":
        """A kernel fixed to the signature of these (CUDA) arguments, with the fastest launch."""
        bound = tuple(coerce(a) for a in self._bind(args, kwargs))
        return SpecializedKernel(self, self._core.compile(bound, 0))

    # -- pickling ------------------------------------------------------------------------------
    def __reduce__(self):
        # Source and options, plus every compiled specialization, so that a new process of the
        # same architecture launches without compiling.
        compiled = [(s.key_bytes, s.serialized, hashlib.sha256(s.serialized).hexdigest())
                    for s in self._core.specializations()]
        # The definition's state carries the reflection, so that unpickling runs no front end;
        # it is the same string the TorchScript object pickles as.
        return (_rebuild_from_state, (_PICKLE_VERSION, self._definition.state, self._extensions,
                                      compiled))

    def __repr__(self):
        params = ", ".join(f"{p.type} {p.name}" for p in self._params)
        return f"<torch_cudajit.Kernel {self._name}({params})>"


def _compiled_attribute(name: str, settable: bool = False) -> property:
    """A property forwarding to the same attribute of ``self.compiled`` (a CompiledKernel)."""
    def get(self):
        return getattr(self.compiled, name)

    def set_(self, value):
        setattr(self.compiled, name, value)

    return property(get, set_ if settable else None,
                    doc=f"``compiled.{name}``{' (settable)' if settable else ''}.")


class SpecializedKernel(_Launch):
    """A kernel fixed to one signature (``Kernel.specialize``): no lookup at launch."""

    def __init__(self, kernel: Kernel, spec):
        self._kernel = kernel
        self._core = kernel._core
        self._fixed = spec
        self._launchers: dict = {}
        self.compiled = CompiledKernel(spec, kernel._core, kernel._params)

    @property
    def name(self) -> str:
        return self._kernel.name

    @property
    def signature(self) -> str:
        return self.compiled.signature

    def _launch_slow(self, launcher, args, kwargs):
        self._kernel._launch_slow(launcher, args, kwargs)

    def __reduce__(self):
        return (_rebuild_specialized, (self._kernel, self._fixed.key_bytes))

    # The compiled specialization's resources and attributes, read (and, for the two
    # settable ones, written) through it.
    regs_per_thread = _compiled_attribute("regs_per_thread")
    shared_mem_per_block = _compiled_attribute("shared_mem_per_block")
    const_mem_size = _compiled_attribute("const_mem_size")
    local_mem_per_thread = _compiled_attribute("local_mem_per_thread")
    max_threads_per_block = _compiled_attribute("max_threads_per_block")
    ptx_version = _compiled_attribute("ptx_version")
    binary_version = _compiled_attribute("binary_version")
    max_dynamic_shared_size_bytes = _compiled_attribute("max_dynamic_shared_size_bytes",
                                                        settable=True)
    preferred_shared_memory_carveout = _compiled_attribute("preferred_shared_memory_carveout",
                                                           settable=True)

    def __repr__(self):
        return f"<torch_cudajit.SpecializedKernel {self.name}{self.signature}>"


class KernelModule:
    """All kernels of a source with several __global__ functions, by name."""

    def __init__(self, kernels: dict):
        """The kernels of one source by name, each a definition on the same reflected
        program (``jit`` makes them)."""
        self._kernels = dict(kernels)

    @property
    def names(self) -> list:
        return list(self._kernels)

    def __getitem__(self, name: str) -> Kernel:
        try:
            return self._kernels[name]
        except KeyError:
            raise KeyError(f"no kernel '{name}' in the source; it defines {', '.join(self._kernels)}") from None

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"no kernel '{name}' in the source; it defines {', '.join(kernels)}")

    def __iter__(self):
        return iter(self._kernels.values())

    def get_global(self, name: str, dtype: torch.dtype = torch.uint8, shape=None, *,
                   kernel: str | None = None, signature=None) -> torch.Tensor:
        """A module variable of the one compiled overload of the module's kernels (see
        Kernel.get_global). Each kernel compiles to modules of its own, so with several
        compiled kernels pass ``kernel=`` (and ``signature=`` for several overloads)."""
        shape = _check_global_args(name, dtype, shape)
        if kernel is not None:
            return self[kernel].get_global(name, dtype, shape, signature=signature)
        compiled = [k for k in self._kernels.values() if k.signatures]
        if len(compiled) != 1:
            what = (f"kernels {', '.join(k.name for k in compiled)} are compiled" if compiled
                    else "no kernel is compiled yet")
            raise ValueError(f"get_global: {what}, and each has its own copy of '{name}'; pass "
                             f"kernel= (one of {', '.join(self._kernels)}) after launching or "
                             f"specializing it")
        return compiled[0].get_global(name, dtype, shape, signature=signature)

    def __reduce__(self):
        return (_rebuild_module, (list(self._kernels.values()),))

    def __repr__(self):
        return f"<torch_cudajit.KernelModule {', '.join(self._kernels)}>"


#: Layout of pickled specializations (keys and compiled code); older or newer pickles still
#: unpickle, but their specializations are compiled again instead of trusted. 3: the probe of a
#: pointer parameter describes its pointee.
_PICKLE_VERSION = 3


def _rebuild_from_state(version, state, extensions, compiled):
    return _adopt_pickled(Kernel(_C.KernelDefinition.from_state(state), extensions), version,
                          compiled)


def _rebuild_kernel(version, source, filename, name, options, extensions, compiled, reflection=None):
    """Pickles written before kernels pickled their definition's state."""
    try:
        program = _C.Program.from_reflection(source, filename, reflection)
    except (TypeError, ValueError):  # pickled before the reflection was kept, or not for this source
        program = _C.Program(source, filename, list(options["options"]), options["std"])
    definition = _C.KernelDefinition(
        program, name, options=list(options["options"]), std=options["std"],
        debug=options["debug"], lineinfo=options["lineinfo"],
        template_args=options["template_args"], cache=options.get("cache", True),
        link=list(options.get("link", ())), cooperative=options.get("cooperative"))
    return _adopt_pickled(Kernel(definition, extensions), version, compiled)


def _adopt_pickled(kernel, version, compiled):
    if version == _PICKLE_VERSION:
        for key, data, digest in compiled:
            # Each specialization is checked against the kernel (key, target, instantiation,
            # checksum); one that does not match is dropped and compiles again when launched.
            try:
                kernel._core.adopt_key(key, data, digest)
            except ValueError as e:
                warnings.warn(f"{e} It is compiled again when launched.", RuntimeWarning, stacklevel=3)
    return kernel


def _rebuild_specialized(kernel, key):
    return SpecializedKernel(kernel, kernel._core.lookup_key(key))


def _rebuild_module(kernels):
    return KernelModule({k.name: k for k in kernels})


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()
