"""Kernel objects: compile on demand, specialize per argument types, launch with
``kernel[grid, block, stream, shared_mem](*args)``, as numba-cuda's CUDA dispatcher does."""
from __future__ import annotations

import hashlib
import warnings
from typing import Sequence

import torch

from ._args import arch_number
from ._compiled import CompiledKernel, _check_global_args
from ._launch import Launch
from ._loader import _C
from ._parts import KernelParts, delegate
from ._scriptable import _Scriptable


@delegate("_launch", Launch, Launch.API + Launch.OP_API)
@delegate("_parts", KernelParts, KernelParts.API)
class Kernel(_Scriptable):
    """A CUDA C++ __global__ function, compiled and specialized on demand.

    Launch it with ``kernel[grid, block](*args)``, ``kernel[grid, block, stream]`` or
    ``kernel[grid, block, stream, shared_mem]``; ``grid`` and ``block`` are ints or tuples of
    up to three ints."""

    def __init__(self, definition, extensions: Sequence = ()):
        """A kernel of a ``_C.KernelDefinition`` (``jit`` makes them)."""
        self._parts = KernelParts.of_jit(definition, extensions)
        self._launch = Launch(self._parts)
        # torch.jit.script types a Kernel attribute of a module as the script class (cheap, and
        # repeated because torch.jit's registry can be cleared).
        torch.jit._state._script_classes[Kernel] = self._parts.script_object._type()

    # The runtime and the definition, as the package's modules and its tests reach them.
    _core = property(lambda self: self._parts.core)
    _definition = property(lambda self: self._parts.definition)

    # -- the op family -------------------------------------------------------------------------
    @property
    def script_object(self):
        """This kernel as a ``torch.classes.cudajit.Kernel``: store it on a module to call
        ``torch.ops.cudajit.launch`` from TorchScript, or to save the module with the kernel."""
        return self._parts.script_object

    # -- specializations ----------------------------------------------------------------------
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
        parts = self._parts
        bound = _bound_examples(parts, specs, "specs")
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                    or workers < 1):
            raise ValueError(f"precompile: workers must be a positive int, got {workers!r}")
        from ._precompile import run_parallel
        # Worker processes never touch CUDA: they get the architecture, not the device.
        specs_out = run_parallel(parts, bound, _target_arch(arch), workers=workers,
                                 processes=processes, progress=progress,
                                 label=f"torch_cudajit: compiling {self.name}")
        return [parts.compiled(s) for s in specs_out]

    def specialize(self, *args, **kwargs) -> "SpecializedKernel":
        """A kernel fixed to the signature of these (CUDA) arguments, with the fastest launch."""
        return specialize(self, args, kwargs)

    # -- pickling ------------------------------------------------------------------------------
    def __reduce__(self):
        # Source and options, plus every compiled specialization, so that a new process of the
        # same architecture launches without compiling.
        parts = self._parts
        compiled = [(s.key_bytes, s.serialized, hashlib.sha256(s.serialized).hexdigest())
                    for s in parts.core.specializations()]
        # The definition's state carries the reflection, so that unpickling runs no front end;
        # it is the same string the TorchScript object pickles as.
        return (_rebuild_from_state, (_PICKLE_VERSION, parts.definition.state, parts.extensions,
                                      compiled))

    def __repr__(self):
        params = ", ".join(f"{p.type} {p.name}" for p in self._parts.params)
        return f"<torch_cudajit.Kernel {self._parts.name}({params})>"


@delegate("_launch", Launch, Launch.API + Launch.OP_API)
# The compiled specialization's resources and attributes, read (and, for the two settable ones,
# written) through it.
@delegate("compiled", CompiledKernel, (
    "regs_per_thread", "shared_mem_per_block", "const_mem_size", "local_mem_per_thread",
    "max_threads_per_block", "ptx_version", "binary_version", "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout"))
class SpecializedKernel:
    """A kernel fixed to one signature (``Kernel.specialize``): no lookup at launch."""

    def __init__(self, kernel, spec):
        """`kernel` (a Kernel or PrebuiltKernel) fixed to its compiled specialization `spec`."""
        self._kernel = kernel  # what pickling rebuilds this from
        self._launch = Launch(kernel._parts, fixed=spec)
        self.compiled = kernel._parts.compiled(spec)

    @property
    def name(self) -> str:
        return self._launch.name

    @property
    def signature(self) -> str:
        return self.compiled.signature

    def __reduce__(self):
        return (_rebuild_specialized, (self._kernel, self._launch.fixed.key_bytes))

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

    def precompile(self, specs: dict, *, arch=None) -> dict:
        """Compiles specializations of several of the module's kernels as one NVRTC program,
        which parses the source and its headers once for all of them (the disk cache still
        finds each alone later).

        Args:
            specs: kernel name -> list of example arguments, each a tuple of positional
                arguments or a dict of keyword arguments (as ``Kernel.precompile`` takes them).
            arch: the target architecture (90, "sm_90" or (9, 0)); default: the current GPU.
        Returns kernel name -> list of CompiledKernel, in the order given. An entry whose batch
        fails is compiled alone, so the error raised names its own kernel.
        """
        if not isinstance(specs, dict):
            raise TypeError(f"precompile: specs must be a dict of kernel name -> list of "
                            f"argument tuples, got {type(specs).__name__}")
        arch_value = _target_arch(arch)
        entries, owners = [], []
        for name, examples in specs.items():
            kernel = self[name]
            for bound in _bound_examples(kernel._parts, examples, f"specs['{name}']"):
                entries.append((kernel._core, bound))
                owners.append(kernel)
        compiled = _C.compile_together(entries, arch_value)
        out: dict = {name: [] for name in specs}
        for kernel, spec in zip(owners, compiled):
            out[kernel.name].append(kernel._parts.compiled(spec))
        return out

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


def _bound_examples(parts, examples, label: str) -> list:
    """precompile's example arguments (`label` names them in errors) bound as a launch would
    bind them: each a tuple of positional arguments or a dict of keyword arguments."""
    if isinstance(examples, (str, bytes)) or not hasattr(examples, "__iter__"):
        raise TypeError(f"precompile: {label} must be a list of argument tuples or dicts, "
                        f"got {type(examples).__name__}")
    bound = []
    for i, entry in enumerate(examples):
        if isinstance(entry, dict):
            bound.append(parts.examples((), entry))
        elif isinstance(entry, (tuple, list)):
            bound.append(parts.examples(tuple(entry), {}))
        else:
            raise TypeError(f"precompile: {label}[{i}] must be a tuple of arguments or a dict "
                            f"of keyword arguments, got {type(entry).__name__}")
    return bound


def _target_arch(arch) -> int:
    """precompile's architecture: `arch` (90, "sm_90" or (9, 0)), or the current GPU's."""
    if arch is None:
        return _C.device_compute_capability(torch.cuda.current_device())
    return arch_number(arch)


def _rebuild_from_state(version, state, extensions, compiled):
    return _adopt_pickled(Kernel(_C.KernelDefinition.from_state(state), extensions), version,
                          compiled)


def _adopt_pickled(kernel, version, compiled):
    if version == _PICKLE_VERSION:
        for key, data, digest in compiled:
            # Each specialization is checked against the kernel (key, target, instantiation,
            # checksum); one that does not match is dropped and compiles again when launched.
            try:
                kernel._parts.core.adopt_key(key, data, digest)
            except ValueError as e:
                warnings.warn(f"{e} It is compiled again when launched.", RuntimeWarning, stacklevel=3)
    return kernel


def specialize(kernel, args, kwargs) -> SpecializedKernel:
    """``kernel.specialize(*args, **kwargs)`` of a Kernel or PrebuiltKernel."""
    return SpecializedKernel(kernel, kernel._parts.specialization(args, kwargs))


def _rebuild_specialized(kernel, key):
    return SpecializedKernel(kernel, kernel._parts.core.lookup_key(key))


def _rebuild_module(kernels):
    return KernelModule({k.name: k for k in kernels})

