"""What every kernel object is made of: KernelParts (a definition, its C++ runtime, the
reflected parameters, the extensions, and the binding of call arguments to parameters), and
``delegate``, which gives a kernel class the API of a part it holds. Kernel, PrebuiltKernel and
SpecializedKernel are built from these parts and the launch component (``_launch.Launch``)."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Sequence

from ._args import arch_number, coerce
from ._compiled import CompiledKernel
from ._extensions import Params
from ._structs import StructArgs
from ._loader import _C


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


class KernelParts:
    """A kernel's definition and runtime (``_C.KernelRuntime``, which compiles and launches),
    with what is read from the definition once: the
    parameters, their roles on the op path, the extensions; and the binding of call arguments.
    One instance is shared by a kernel and every SpecializedKernel made from it."""

    #: What Kernel and PrebuiltKernel take over as their own API (see ``delegate``).
    API = ("name", "params", "source", "is_template", "options", "signatures", "overloads",
           "compile", "cache_hits", "cache_misses")

    def __init__(self, definition, extensions: Sequence, core, script_object=None):
        """Use ``of_jit`` or ``of_prebuilt``, which say where the runtime comes from."""
        for ext in extensions:
            if not hasattr(ext, "prepare_args"):
                raise TypeError(f"extensions: {ext!r} has no prepare_args method")
        self.definition = definition
        self.extensions = tuple(extensions)
        self.core = core
        self._script_object = script_object
        self._params = tuple(Parameter(**p) for p in definition.params)
        # Struct parameters passed by value take objects, dicts and tuples (see _structs).
        structs = StructArgs(definition, self._params)
        self.structs = structs if structs.indexes else None
        # How each parameter travels through the cudajit::launch op (see _op._OpLauncher).
        self.op_roles = tuple(p.role for p in self._params)
        # Grid and block shapes whose low-occupancy warning was given (see Launch).
        self.occupancy_warned: set = set()

    # -- where the runtime comes from (the one place a kernel object gets it) ------------------
    @classmethod
    def of_jit(cls, definition, extensions: Sequence) -> "KernelParts":
        """The parts of a jit kernel: a new runtime of the definition, and the TorchScript
        object (torch.classes.cudajit.Kernel) that shares it, so eager launches, torch.compile
        graphs and scripted modules share compiled code."""
        runtime = definition.runtime()
        return cls(definition, extensions, runtime, runtime.script_object())

    @classmethod
    def of_prebuilt(cls, definition, extensions: Sequence) -> "KernelParts":
        """The parts of prebuilt code (torch_cudajit.load): a runtime and no TorchScript
        object."""
        return cls(definition, extensions, definition.runtime())

    @property
    def script_object(self):
        """The kernel's TorchScript object; TypeError for prebuilt code, which has none."""
        if self._script_object is None:
            raise self.unavailable("TorchScript object")
        return self._script_object

    def unavailable(self, what: str) -> TypeError:
        """The error for what prebuilt code does not have (the op path, TorchScript)."""
        return TypeError(f"kernel '{self.name}' is prebuilt code (torch_cudajit.load), which has "
                         f"no {what}; launch it eagerly with kernel[grid, block](*args), or "
                         f"compile its source with torch_cudajit.jit for torch.compile and "
                         f"TorchScript")

    # -- reflection ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def params(self) -> tuple:
        """The kernel's parameters, as reflected from its declaration."""
        return self._params

    @property
    def source(self) -> str:
        return self.definition.source

    @property
    def is_template(self) -> bool:
        return self.definition.is_template

    @property
    def options(self) -> dict:
        """The options the kernel was created with, as its pickled state keeps them: NVRTC
        options, C++ standard, debug, lineinfo, template arguments, cache, link files and
        cooperative (-1: detected from the source, 0 or 1: as ``jit`` was told)."""
        return self.definition.options

    # -- binding ---------------------------------------------------------------------------------
    def param_at(self, i):
        return self.params[i] if i < len(self.params) else None

    def bind(self, args, kwargs, allow_extra=False):
        """Positional + keyword arguments -> positional, by parameter name."""
        if not kwargs:
            return tuple(args)
        names = [p.name for p in self.params]
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

    def bound(self, args, kwargs) -> tuple:
        """Call arguments bound to the parameters, each as the C++ core takes it."""
        args = self.bind(args, kwargs)
        if self.structs is not None:
            args = self.structs.convert(args)
        return tuple(coerce(a) for a in args)

    def prepared(self, args, kwargs, stream, retr: list) -> tuple:
        """Call arguments bound to the parameters and converted by the extensions' prepare_args
        (from the last extension to the first), each as the C++ core takes it. ``stream`` is
        the launch's stream handle (None: the current stream); the extensions append to
        ``retr`` what runs after the launch."""
        args = self.bind(args, kwargs, allow_extra=True)
        for ext in reversed(self.extensions):
            out = []
            for value in args:
                new = ext.prepare_args(value, param=self.param_at(len(out)), stream=stream,
                                       retr=retr)
                if isinstance(new, Params):
                    out.extend(new)
                else:
                    out.append(new)
            args = out
        if self.structs is not None:
            args = self.structs.convert(tuple(args))
        return tuple(coerce(a) for a in args)

    def examples(self, args, kwargs) -> tuple:
        """Example arguments of compile and precompile, as a launch would pass them: through
        the extensions when the kernel has some (nothing launches, so what they ask to run
        after a launch does not run)."""
        return self.prepared(args, kwargs, None, []) if self.extensions else self.bound(args, kwargs)

    # -- specializations -------------------------------------------------------------------------
    def compiled(self, spec) -> CompiledKernel:
        return CompiledKernel(spec, self.core, self.params)

    @property
    def signatures(self) -> list:
        """Signatures compiled so far, e.g. '(Array<float32, 1, contiguous>, float)'."""
        return [s.signature for s in self.core.specializations()]

    @property
    def overloads(self) -> dict:
        """Compiled specializations by signature and architecture."""
        return {(s.signature, s.info()["arch"]): self.compiled(s)
                for s in self.core.specializations()}

    def compile(self, *args, arch=None, **kwargs) -> CompiledKernel:
        """Compiles for the types of example arguments without launching.

        Tensors may be on any device (CPU or meta tensors work) when ``arch`` is given, so
        this runs on machines without a GPU: ``k.compile(torch.empty(8), 1.0, arch="sm_90")``.
        The kernel's extensions convert the arguments first, as for a launch."""
        return self.compiled(self.core.compile(self.examples(args, kwargs),
                                               0 if arch is None else arch_number(arch)))

    def specialization(self, args, kwargs):
        """The specialization of these (CUDA) arguments for the current device, compiled."""
        return self.core.compile(self.bound(args, kwargs), 0)

    @property
    def cache_hits(self) -> int:
        """Compiles of this kernel served by the disk cache (numba's ``_cache_hits``)."""
        return self.core.cache_counters["hits"]

    @property
    def cache_misses(self) -> int:
        """Compiles of this kernel the disk cache did not have."""
        return self.core.cache_counters["misses"]


def delegate(attr: str, component: type, names: Sequence[str]):
    """A class decorator: each of ``names`` becomes a method or property of the class that
    forwards to the same attribute of the ``component`` instance the object holds in ``attr``,
    with its docstring and signature. This is how kernel classes share the API of their parts
    without inheriting from them."""
    def decorate(cls):
        for name in names:
            forwarder = _forwarder(attr, name, inspect.getattr_static(component, name))
            if not isinstance(forwarder, property):
                forwarder.__module__ = cls.__module__
                forwarder.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, forwarder)
        return cls
    return decorate


def _forwarder(attr: str, name: str, impl):
    if isinstance(impl, property):
        settable = impl.fset is not None

        def get(self):
            return getattr(getattr(self, attr), name)

        def set_(self, value):
            setattr(getattr(self, attr), name, value)

        return property(get, set_ if settable else None, doc=impl.__doc__)
    return _forward_method(attr, impl)


def _forward_method(attr: str, impl):
    """A function with the parameters of ``impl`` (a method) that calls it on the object in
    ``attr``. The parameters are spelled out rather than passed as ``*args, **kwargs``: a call
    that unpacks arguments is not made inline by the interpreter and costs several times more,
    and ``kernel[grid, block]`` runs through one of these forwarders."""
    declared, passed, keyword_only = [], [], False
    for p in list(inspect.signature(impl).parameters.values())[1:]:  # after self
        if p.kind is p.VAR_POSITIONAL:
            declared.append(f"*{p.name}")
            passed.append(f"*{p.name}")
            keyword_only = True
        elif p.kind is p.VAR_KEYWORD:
            declared.append(f"**{p.name}")
            passed.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            if not keyword_only:
                declared.append("*")
                keyword_only = True
            declared.append(p.name)
            passed.append(f"{p.name}={p.name}")
        else:
            declared.append(p.name)
            passed.append(p.name)
    namespace = {"impl": impl}
    exec(f"def forward(self, {', '.join(declared)}):\n"  # noqa: S102 - generated from a signature
         f"    return impl(self.{attr}, {', '.join(passed)})\n", namespace)
    forward = namespace["forward"]
    # The same parameters in the same order: the defaults carry over as they are.
    forward.__defaults__, forward.__kwdefaults__ = impl.__defaults__, impl.__kwdefaults__
    return functools.update_wrapper(forward, impl)


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()
