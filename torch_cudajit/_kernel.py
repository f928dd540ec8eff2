"""Kernel objects: compile on demand, specialize per argument types, launch with
``kernel[grid, block, stream, shared_mem](*args)``, as numba-cuda's CUDA dispatcher does."""
from __future__ import annotations

import hashlib
import math
import os
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from ._args import as_tuple, coerce, dims, stream_handle
from ._extensions import Extension, Params
from ._compiled import CompiledKernel, _check_global_args
from ._loader import _C
from ._op import _OpIndexer, _OpLauncher

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

_MAX_CACHED_LAUNCHERS = 1024


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



def _arch_number(arch) -> int:
    if isinstance(arch, int):
        return arch
    if isinstance(arch, str):
        digits = arch.split("_")[-1]
        if digits.isdigit():
            return int(digits)
    if isinstance(arch, tuple) and len(arch) == 2:
        return arch[0] * 10 + arch[1]
    raise ValueError(f"arch must be like 90, 'sm_90' or (9, 0), got {arch!r}")


def _template_args(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    parts = []
    for v in value:
        if isinstance(v, torch.dtype):
            if v not in _DTYPE_TO_CPP:
                raise TypeError(f"template_args: dtype {v} has no CUDA C++ type")
            parts.append(_DTYPE_TO_CPP[v])
        elif isinstance(v, bool):
            parts.append("true" if v else "false")
        elif isinstance(v, (int, str)):
            parts.append(str(v))
        else:
            raise TypeError(f"template_args entries must be str, int, bool or torch.dtype, got {v!r}")
    return ", ".join(parts)


class _Launch:
    """Shared launch machinery of Kernel and SpecializedKernel."""

    _core: "_C.Dispatcher"
    _fixed = None

    def __getitem__(self, config):
        if torch.compiler.is_compiling():
            # Under torch.compile the launch is a cudajit::launch op in the graph.
            return _OpLauncher(self._kernel, config)
        try:
            return self._launchers[config]
        except (KeyError, TypeError):
            return self._configure(config)

    @property
    def op(self) -> "_OpIndexer":
        """Launches through the cudajit::launch op (``kernel.op[grid, block](*args)``): the
        path torch.compile records and TorchScript runs. Eager code is faster through
        ``kernel[grid, block]``."""
        return _OpIndexer(self._kernel)

    def _configure(self, config, warn=True):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError(
                f"kernel '{self.name}': the launch configuration must be [grid, block], "
                f"[grid, block, stream] or [grid, block, stream, shared_mem]; got {config!r}")
        grid, block = config[0], config[1]
        stream = config[2] if len(config) > 2 else None
        shared_mem = config[3] if len(config) > 3 else 0
        if not isinstance(shared_mem, int) or isinstance(shared_mem, bool):
            raise TypeError(f"shared_mem must be an int, got {type(shared_mem).__name__}")
        launcher = _C.Launcher(self._core, grid, block, stream_handle(stream), shared_mem,
                               self._fixed, self._launch_slow,
                               self._occupancy_warning(grid, block) if warn else "")
        if self._kernel._extensions:
            launcher = _ExtensionLauncher(self._kernel, launcher, stream)
        try:
            if len(self._launchers) < _MAX_CACHED_LAUNCHERS:
                self._launchers[config] = launcher
        except TypeError:  # unhashable config (lists): not cached
            pass
        return launcher

    def _launch_slow(self, launcher, args, kwargs):
        args = self._kernel._bind(args, kwargs)
        launcher.launch_normalized(tuple(coerce(a) for a in args))

    # -- the form scripted modules use (the script object has the same two methods) ---------
    def launch(self, grid, block, tensors, scalars=None, shared_mem: int = 0) -> None:
        """Launches with the tensor arguments and the number arguments each in parameter order,
        as a scripted module calls the kernel's script object: ``k.launch(grid, block, [y, x],
        [a, n])`` is ``k[grid, block, None, shared_mem](y, x, a, n)`` for a kernel ``(y, x, a,
        n)``. The same forward then runs eager, under torch.compile and in TorchScript."""
        config = (as_tuple(grid), as_tuple(block), None, shared_mem)
        self[config](*self._interleave(tensors, scalars))

    def launch_forall(self, ntasks: int, tensors, scalars=None, shared_mem: int = 0) -> None:
        """``forall(ntasks)`` with the arguments given as in ``launch``."""
        self.forall(ntasks, None, shared_mem)(*self._interleave(tensors, scalars))

    def _interleave(self, tensors, scalars) -> tuple:
        """Positional arguments from tensors and numbers each in parameter order."""
        k = self._kernel
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"kernel '{k.name}': tensors must be a list of the tensor arguments "
                            f"in parameter order, got {type(tensors).__name__}")
        if scalars is None:
            scalars = ()
        if not isinstance(scalars, (list, tuple)):
            raise TypeError(f"kernel '{k.name}': scalars must be a list of the number arguments "
                            f"in parameter order, got {type(scalars).__name__}")
        roles = k._op_roles
        # `auto` parameters take their value (a number, or a tensor) from `scalars`.
        n_scalars = sum(r in ("scalar", "auto") for r in roles)
        if len(tensors) != len(roles) - n_scalars or len(scalars) != n_scalars:
            params = ", ".join(f"{p.type} {p.name}" for p in k._params)
            raise TypeError(f"kernel '{k.name}' takes {len(roles) - n_scalars} tensor(s) and "
                            f"{n_scalars} number(s), in parameter order; got {len(tensors)} "
                            f"tensor(s) and {len(scalars)} number(s). Its parameters: ({params})")
        tensor_it, scalar_it = iter(tensors), iter(scalars)
        return tuple(next(scalar_it) if r in ("scalar", "auto") else next(tensor_it)
                     for r in roles)

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"kernel '{self.name}' needs a launch configuration: call it as "
            f"kernel[grid, block](*args) or kernel[grid, block, stream, shared_mem](*args), "
            f"or use kernel.forall(n)(*args)")

    # -- inspection and resources (numba's dispatcher API) ---------------------------------
    def _compiled(self) -> list:
        """CompiledKernel of each overload this object covers."""
        k = self._kernel
        if self._fixed is not None:
            return [CompiledKernel(self._fixed, k._core, k._params)]
        return [CompiledKernel(s, k._core, k._params) for s in k._core.specializations()]

    def _overloads(self, signature, prefer_device: bool):
        overloads = self._compiled()
        if isinstance(signature, CompiledKernel):
            signature = signature.signature
        if signature is not None:
            if not isinstance(signature, str):
                raise TypeError(f"signature must be a str from kernel.signatures or a "
                                f"CompiledKernel, got {type(signature).__name__}")
            overloads = [c for c in overloads if c.signature == signature]
            if not overloads:
                raise ValueError(f"kernel '{self.name}' has no compiled overload {signature!r}; "
                                 f"compiled: {[c.signature for c in self._compiled()]}")
        if not overloads:
            raise ValueError(f"kernel '{self.name}' has no compiled overloads yet; launch it or "
                             f"call compile() / specialize() first")
        if prefer_device and torch.cuda.is_available():
            arch = _C.device_compute_capability(torch.cuda.current_device())
            overloads = [c for c in overloads if c.arch == arch] or overloads
        return overloads

    def _per_overload(self, signature, fn, prefer_device=False):
        overloads = self._overloads(signature, prefer_device)
        if signature is not None or len(overloads) == 1:
            return fn(overloads[0])
        return {c.signature: fn(c) for c in overloads}

    def inspect_ptx(self, signature=None):
        """PTX of one overload, or a dict {signature: PTX} when there are several."""
        return self._per_overload(signature, CompiledKernel.inspect_ptx)

    def inspect_sass(self, signature=None):
        """SASS of one overload, or a dict {signature: SASS} (needs cuobjdump or nvdisasm)."""
        return self._per_overload(signature, CompiledKernel.inspect_sass)

    def inspect_types(self, signature=None):
        """C++ signature, name expression, lowered name, options and parameter bindings of one
        overload, or a dict of them by signature."""
        return self._per_overload(signature, CompiledKernel.inspect_types)

    def get_regs_per_thread(self, signature=None):
        return self._per_overload(signature, lambda c: c.regs_per_thread, True)

    def get_shared_mem_per_block(self, signature=None):
        return self._per_overload(signature, lambda c: c.shared_mem_per_block, True)

    def get_const_mem_size(self, signature=None):
        return self._per_overload(signature, lambda c: c.const_mem_size, True)

    def get_local_mem_per_thread(self, signature=None):
        return self._per_overload(signature, lambda c: c.local_mem_per_thread, True)

    def get_max_threads_per_block(self, signature=None):
        return self._per_overload(signature, lambda c: c.max_threads_per_block, True)

    def get_global(self, name: str, dtype: torch.dtype = torch.uint8, shape=None, *,
                   signature=None) -> torch.Tensor:
        """A tensor aliasing a ``__device__`` / ``__constant__`` variable of the module of one
        compiled overload, on the current device (see CompiledKernel.get_global). Every
        overload is a module of its own with its own copy of the variable: a kernel with
        several overloads needs ``signature=``; one with none must be launched, specialized
        (``specialize(*args)``) or compiled first."""
        shape = _check_global_args(name, dtype, shape)
        overloads = self._overloads(signature, True)
        if len(overloads) > 1:
            raise ValueError(f"get_global: kernel '{self.name}' has {len(overloads)} overloads, "
                             f"each with its own copy of '{name}'; pass signature= (one of "
                             f"{[c.signature for c in overloads]}) or use kernel.specialize(...)")
        return overloads[0].get_global(name, dtype, shape)

    def max_cooperative_grid_blocks(self, block, dynamic_shared_mem: int = 0, signature=None):
        """The most blocks a cooperative launch of this block shape may use."""
        overloads = self._overloads(signature, True)
        if signature is None and len(overloads) > 1:
            raise ValueError(f"kernel '{self.name}' has {len(overloads)} overloads; pass "
                             f"signature= (one of {[c.signature for c in overloads]}) or use a "
                             f"specialized kernel")
        return overloads[0].max_cooperative_grid_blocks(block, dynamic_shared_mem)

    @property
    def cooperative(self) -> bool:
        """True when the kernel synchronizes the whole grid (cooperative_groups::this_grid):
        it is launched with cuLaunchCooperativeKernel, and a grid larger than
        max_cooperative_grid_blocks is refused."""
        return self._kernel._core.cooperative

    def _occupancy_warning(self, grid, block) -> str:
        if os.environ.get("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "1") == "0":
            return ""
        if not torch.cuda.is_available() or self._kernel._core.cooperative:
            return ""  # a cooperative grid is bounded by co-residency, not a choice
        try:
            g = dims(grid, "grid", self.name)
            b = dims(block, "block", self.name)
        except TypeError:
            return ""  # the launcher reports the bad configuration itself
        key = (tuple(g), tuple(b))
        warned = self._kernel._occupancy_warned
        if key in warned:
            return ""
        device = torch.cuda.current_device()
        sms = _C.device_multiprocessors(device)
        blocks = math.prod(g)
        if blocks >= 2 * sms:
            return ""
        warned.add(key)
        return (f"kernel '{self.name}' is launched with a grid of {blocks} block(s), fewer than "
                f"twice the {sms} SMs of cuda:{device}, so most of the GPU idles. Launch more "
                f"blocks (e.g. smaller blocks, or kernel.forall(n)). Set "
                f"TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS=0 to turn this warning off.")

    def forall(self, ntasks: int, stream=None, shared_mem: int = 0):
        """A 1-D launch over `ntasks` tasks. The block size comes from the occupancy API (256
        threads where that keeps the same occupancy). A kernel that calls cj::for_each or
        cj::elementwise loops over the grid, so it gets at most one full wave of resident blocks;
        any other kernel gets enough blocks for one thread per task. Never warns about low
        occupancy: a small grid here means little work."""
        if not isinstance(ntasks, int) or ntasks < 1:
            raise ValueError(f"forall: ntasks must be a positive int, got {ntasks!r}")
        return _ForAll(self, ntasks, stream, shared_mem)



class _ExtensionLauncher:
    """A launcher that runs the kernel's extensions before each launch."""

    def __init__(self, kernel: "Kernel", launcher, stream):
        self._kernel = kernel
        self._launcher = launcher
        self._stream = stream_handle(stream)

    def __call__(self, *args, **kwargs):
        args = self._kernel._bind(args, kwargs, allow_extra=True)
        retr: list = []
        for ext in reversed(self._kernel._extensions):
            out = []
            for value in args:
                param = self._kernel._param_at(len(out))
                new = ext.prepare_args(value, param=param, stream=self._stream, retr=retr)
                if isinstance(new, Params):
                    out.extend(new)
                else:
                    out.append(new)
            args = out
        self._launcher.launch_normalized(tuple(coerce(a) for a in args))
        for fn in retr:
            fn()


class _ForAll:
    def __init__(self, kernel, ntasks, stream, shared_mem):
        self._kernel = kernel
        self._ntasks = ntasks
        self._stream = stream
        self._shared_mem = shared_mem

    def __call__(self, *args, **kwargs):
        k = self._kernel
        if torch.compiler.is_compiling():
            # The op picks the block size when it runs (block [0]): the graph holds no device
            # facts, and tracing calls into no compiler.
            return _OpLauncher(k._kernel, (self._ntasks, 0, self._stream, self._shared_mem),
                               forall=True)(*args, **kwargs)
        bound = tuple(coerce(a) for a in k._kernel._bind(args, kwargs))
        block, wave = k._core.forall_config(bound)
        grid = -(-self._ntasks // block)
        if wave:
            grid = min(grid, wave)
        config = (grid, block, self._stream, self._shared_mem)
        launcher = k._launchers.get(config) if not k._kernel._extensions else None
        if launcher is None:
            launcher = k._configure(config, warn=False)
        launcher(*bound)


class _Scriptable(torch.jit.RecursiveScriptClass):
    """Lets ``torch.jit.script`` take a Kernel stored on a module. TorchScript types a module
    attribute through torch.jit's registry of script classes (the Kernel class is registered
    as torch.classes.cudajit.Kernel), and converts an instance of RecursiveScriptClass to the
    script object in its ``_c``: here the kernel's own script object, so the scripted module
    shares its compiled code. The rest of RecursiveScriptClass (forwarding attributes and
    operators to ``_c``) is turned off: a Kernel behaves as a plain Python object."""

    @property
    def _c(self):
        return self._script_object

    def __getattr__(self, name):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    __setattr__ = object.__setattr__
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __lt__ = object.__lt__
    __le__ = object.__le__
    __gt__ = object.__gt__
    __ge__ = object.__ge__
    __hash__ = object.__hash__
    __str__ = object.__str__

    def __bool__(self):
        return True

    def __getstate__(self):
        return self.__dict__


def _unsupported(name: str):
    def method(self, *args):
        raise TypeError(f"'{type(self).__name__}' object does not support {name}")
    return method


def _not_implemented(self, other):
    return NotImplemented


# The operators RecursiveScriptClass forwards to its script object, back to plain behaviour:
# arithmetic is not implemented (Python then raises its usual TypeError), the rest raises.
for _name in ("__iter__", "__len__", "__neg__", "__contains__", "__setitem__", "__int__",
              "__float__", "__enter__", "__exit__"):
    setattr(_Scriptable, _name, _unsupported(_name))
for _name in ("__mul__", "__add__", "__sub__", "__pow__", "__truediv__", "__mod__", "__and__",
              "__or__", "__xor__", "__iadd__"):
    setattr(_Scriptable, _name, _not_implemented)
del _name


class Kernel(_Launch, _Scriptable):
    """A CUDA C++ __global__ function, compiled and specialized on demand.

    Launch it with ``kernel[grid, block](*args)``, ``kernel[grid, block, stream]`` or
    ``kernel[grid, block, stream, shared_mem]``; ``grid`` and ``block`` are ints or tuples of
    up to three ints."""

    def __init__(self, program, name: str, options: dict, extensions: Sequence = ()):
        self._setup(program, name, options, extensions)
        # The kernel's TorchScript object (torch.classes.cudajit.Kernel) owns the dispatcher:
        # eager launches, torch.compile graphs and scripted modules share compiled code.
        self._script_object = _C.kernel_object(
            program, name, list(options["options"]), options["std"], options["debug"],
            options["lineinfo"], options["template_args"], options.get("cache", True),
            list(options.get("link", ())), {None: -1, False: 0, True: 1}[options.get("cooperative")])
        self._core = _C.dispatcher_of(self._script_object)
        # torch.jit.script types a Kernel attribute of a module as the script class (cheap, and
        # repeated because torch.jit's registry can be cleared).
        torch.jit._state._script_classes[Kernel] = self._script_object._type()

    def _setup(self, program, name: str, options: dict, extensions: Sequence) -> None:
        """What every kernel has besides its dispatcher (_core)."""
        self._program = program
        self._options = dict(options)
        self._name = name
        params = program.params(name)
        self._params = tuple(Parameter(**p) for p in params)
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
        return self._program.source

    @property
    def is_template(self) -> bool:
        return self._program.is_template(self._name)

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
            workers: parallel compiles (default: one per CPU, at most one per entry).
            processes: compile in forked worker processes (default where fork exists). NVRTC
                stops scaling at a few threads per process; processes keep scaling. Results
                come back to this process either way, and go to the disk cache.
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
        # The reflection goes along, so that unpickling runs no front end.
        return (_rebuild_kernel, (_PICKLE_VERSION, self._program.source, self._program.filename,
                                  self._name, self._options, self._extensions, compiled,
                                  self._program.reflection))

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

    def __init__(self, program, options, extensions):
        self._program = program
        self._kernels = {n: Kernel(program, n, options, extensions) for n in program.kernel_names}

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


def _rebuild_kernel(version, source, filename, name, options, extensions, compiled, reflection=None):
    try:
        program = _C.Program.from_reflection(source, filename, reflection)
    except (TypeError, ValueError):  # pickled before the reflection was kept, or not for this source
        program = _C.Program(source, filename, list(options["options"]), options["std"])
    kernel = Kernel(program, name, options, extensions)
    if version == _PICKLE_VERSION:
        for key, data, digest in compiled:
            # Each specialization is checked against the kernel (key, target, instantiation,
            # checksum); one that does not match is dropped and compiles again when launched.
            try:
                kernel._core.adopt_key(key, data, digest)
            except ValueError as e:
                warnings.warn(f"{e} It is compiled again when launched.", RuntimeWarning, stacklevel=2)
    return kernel


def _rebuild_specialized(kernel, key):
    return SpecializedKernel(kernel, kernel._core.lookup_key(key))


def _rebuild_module(kernels):
    module = KernelModule.__new__(KernelModule)
    module._program = kernels[0]._program if kernels else None
    module._kernels = {k.name: k for k in kernels}
    return module


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def jit(source: str, name: str | None = None, *, options: Iterable[str] = (),
        include_dirs: Iterable[str] = (), defines: dict | None = None, std: str = "c++17",
        fastmath: bool = False, lineinfo: bool = False, debug: bool = False,
        template_args=None, extensions: Sequence[Extension] = (), filename: str = "kernel.cu",
        cache: bool = True, max_registers: int | None = None, opt=True,
        link: Iterable[str] = (), cooperative: bool | None = None):
    """Compiles CUDA C++ kernels on demand.

    Args:
        source: CUDA C++ with one or more ``__global__`` functions. ``cj/cj.cuh`` (cj::Array,
            fixed-width integers, cj::complex) is included automatically.
        name: the kernel to return. Without it, a source with one kernel returns that kernel
            and a source with several returns a KernelModule.
        options: extra NVRTC options. include_dirs / defines: -I and -D options.
        std: the C++ standard. fastmath: --use_fast_math. lineinfo: -lineinfo.
        debug: -G, and bounds-checked cj::Array indexing.
        template_args: explicit template arguments ("float, 4" or (torch.float32, 4)); the
            rest are deduced from the arguments.
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
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be a bool, got {type(cache).__name__}")
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of CUDA C++, got {type(source).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if isinstance(options, str):
        raise TypeError("options must be a list of NVRTC option strings, not one string")
    opts = [str(o) for o in options]
    opts += [f"-I{d}" for d in include_dirs]
    for key, value in (defines or {}).items():
        opts.append(f"-D{key}" if value is None else f"-D{key}={value}")
    if fastmath:
        opts.append("--use_fast_math")
    if max_registers is not None:
        opts.append(f"--maxrregcount={max_registers}")
    if opt_level != 3:
        opts.append(f"--ptxas-options=-O{opt_level}")
    config = dict(options=opts, std=std, debug=bool(debug), lineinfo=bool(lineinfo),
                  template_args=_template_args(template_args), cache=cache, link=tuple(link_files),
                  cooperative=cooperative)
    program = _C.Program(source, filename, opts, std)
    names = program.kernel_names
    if name is not None:
        program.params(name)  # raises ValueError naming the kernels that exist
        return Kernel(program, name, config, extensions)
    if not names:
        raise ValueError("source defines no __global__ function")
    if len(names) == 1:
        return Kernel(program, names[0], config, extensions)
    return KernelModule(program, config, extensions)
