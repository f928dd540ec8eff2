"""The launch side of a kernel: Launch, the component Kernel, PrebuiltKernel and
SpecializedKernel each hold (the ``kernel[grid, block, stream, shared_mem]`` launcher cache,
``forall``, the short form scripted modules use, extension launchers, and numba's inspection and
resource API), working on the KernelParts (``_parts``) they share."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, NamedTuple

import torch

from ._args import as_tuple, dims, stream_handle
from ._compiled import CompiledKernel, _check_global_args
from ._loader import _C
from ._op import _OpIndexer, _OpLauncher

if TYPE_CHECKING:
    from ._parts import KernelParts

_MAX_CACHED_LAUNCHERS = 1024


class ForallPlan(NamedTuple):
    """What ``kernel.forall(ntasks)(*args)`` launches (``kernel.forall_plan``)."""

    grid: int
    block: int
    #: Virtual blocks each physical block runs on forall's virtual grid; 0 when the kernel
    #: itself runs, one thread per task, on a grid of ``grid`` blocks.
    virtual_blocks: int
    #: Why the kernel runs on a plain grid ("" when it runs on the virtual grid).
    plain_because: str
    #: The parameters whose data each physical block prefetches into L2 for a later one, on
    #: the virtual grid: tensors the kernel only reads, of 1- or 2-byte elements, contiguous,
    #: one element per task (compute capability 9.0 and later).
    prefetched: tuple = ()


class Launch:
    """The launch and inspection API of a kernel's parts, or of one specialization of them
    (``fixed``): what a kernel object exposes as its own through ``_parts.delegate``."""

    #: What Kernel, PrebuiltKernel and SpecializedKernel take over as their own API.
    API = ("__getitem__", "__call__", "launch", "launch_forall", "forall", "forall_plan",
           "inspect_ptx", "inspect_sass", "inspect_types", "get_regs_per_thread",
           "get_shared_mem_per_block", "get_const_mem_size", "get_local_mem_per_thread",
           "get_max_threads_per_block", "get_global", "max_cooperative_grid_blocks",
           "cooperative")
    #: The op path, which prebuilt code does not have.
    OP_API = ("op",)

    def __init__(self, parts: "KernelParts", fixed=None):
        """Launches of `parts`: of any specialization, or of the one `fixed` specialization."""
        self.parts = parts
        self.fixed = fixed
        self.launchers: dict = {}

    @property
    def name(self) -> str:
        return self.parts.name

    def __getitem__(self, config):
        if torch.compiler.is_compiling():
            # Under torch.compile the launch is a cudajit::launch op in the graph.
            return _OpLauncher(self.parts, config)
        try:
            return self.launchers[config]
        except (KeyError, TypeError):
            return self._configure(config)

    @property
    def op(self) -> "_OpIndexer":
        """Launches through the cudajit::launch op (``kernel.op[grid, block](*args)``): the
        path torch.compile records and TorchScript runs. Eager code is faster through
        ``kernel[grid, block]``."""
        return _OpIndexer(self.parts)

    def _configure(self, config, forall_tasks: int = 0):
        """The launcher of a configuration, cached by it: [grid, block, stream, shared_mem], or
        for forall_tasks > 0 ("forall", ntasks, stream, shared_mem), whose grid and block the
        launch chooses."""
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError(
                f"kernel '{self.name}': the launch configuration must be [grid, block], "
                f"[grid, block, stream] or [grid, block, stream, shared_mem]; got {config!r}")
        grid, block = config[0], config[1]
        stream = config[2] if len(config) > 2 else None
        shared_mem = config[3] if len(config) > 3 else 0
        if not isinstance(shared_mem, int) or isinstance(shared_mem, bool):
            raise TypeError(f"shared_mem must be an int, got {type(shared_mem).__name__}")
        if forall_tasks:
            grid = block = 1
        warning = "" if forall_tasks else self._occupancy_warning(grid, block)
        launcher = _C.Launcher(self.parts.core, grid, block, stream_handle(stream), shared_mem,
                               self.fixed, self._launch_slow, warning, forall_tasks)
        if self.parts.extensions:
            launcher = _ExtensionLauncher(self.parts, launcher, stream)
        try:
            if len(self.launchers) < _MAX_CACHED_LAUNCHERS:
                self.launchers[config] = launcher
        except TypeError:  # unhashable config (lists): not cached
            pass
        return launcher

    def _launch_slow(self, launcher, args, kwargs):
        launcher.launch_normalized(self.parts.bound(args, kwargs))

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
        k = self.parts
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"kernel '{k.name}': tensors must be a list of the tensor arguments "
                            f"in parameter order, got {type(tensors).__name__}")
        if scalars is None:
            scalars = ()
        if not isinstance(scalars, (list, tuple)):
            raise TypeError(f"kernel '{k.name}': scalars must be a list of the number arguments "
                            f"in parameter order, got {type(scalars).__name__}")
        roles = k.op_roles
        # `auto` parameters take their value (a number, or a tensor) from `scalars`.
        n_scalars = sum(r in ("scalar", "auto") for r in roles)
        if len(tensors) != len(roles) - n_scalars or len(scalars) != n_scalars:
            params = ", ".join(f"{p.type} {p.name}" for p in k.params)
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
        if self.fixed is not None:
            return [self.parts.compiled(self.fixed)]
        return [self.parts.compiled(s) for s in self.parts.core.specializations()]

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
        return self.parts.core.cooperative

    def _occupancy_warning(self, grid, block) -> str:
        if os.environ.get("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "1") == "0":
            return ""
        if not torch.cuda.is_available() or self.parts.core.cooperative:
            return ""  # a cooperative grid is bounded by co-residency, not a choice
        try:
            g = dims(grid, "grid", self.name)
            b = dims(block, "block", self.name)
        except TypeError:
            return ""  # the launcher reports the bad configuration itself
        key = (tuple(g), tuple(b))
        warned = self.parts.occupancy_warned
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
        threads where that keeps the same occupancy), and the grid gives each thread one task.
        A cj::elementwise kernel whose arrays are all contiguous and 16-byte aligned gets one
        thread per step of its vector loop instead (16 fp32 or 32 bf16 elements), as torch's
        own vectorized kernels do. A kernel written one task per thread runs on the virtual
        grid when its text and the arguments allow it: each physical block runs several of the
        blocks the kernel sees, with __restrict__ data pointers (docs/launching.md, "The virtual
        grid"; ``forall_plan`` says what a call gets). Never warns about low occupancy: a small
        grid here means little work."""
        if not isinstance(ntasks, int) or isinstance(ntasks, bool) or ntasks < 1:
            raise ValueError(f"forall: ntasks must be a positive int, got {ntasks!r}")
        if torch.compiler.is_compiling():
            # The op picks the grid and block when it runs (block [0]): the graph holds no
            # device facts, and tracing calls into no compiler.
            return _OpLauncher(self.parts, (ntasks, 0, stream, shared_mem), forall=True)
        config = ("forall", ntasks, stream, shared_mem)
        try:
            return self.launchers[config]
        except (KeyError, TypeError):
            return self._configure(config, forall_tasks=ntasks)

    def forall_plan(self, ntasks: int, *args, shared_mem: int = 0, **kwargs) -> ForallPlan:
        """What ``forall(ntasks, shared_mem=shared_mem)(*args, **kwargs)`` launches, without
        launching (it compiles what the launch would): the grid and block, the virtual blocks
        each physical block runs, why the kernel runs on a plain grid if it does, and which
        parameters' data the virtual grid prefetches into L2."""
        if not isinstance(ntasks, int) or isinstance(ntasks, bool) or ntasks < 1:
            raise ValueError(f"forall_plan: ntasks must be a positive int, got {ntasks!r}")
        return ForallPlan(*self.parts.core.forall_shape(self.parts.bound(args, kwargs), ntasks,
                                                        shared_mem))


class _ExtensionLauncher:
    """A launcher that runs the kernel's extensions before each launch."""

    def __init__(self, parts: "KernelParts", launcher, stream):
        self._parts = parts
        self._launcher = launcher
        self._stream = stream_handle(stream)

    def __call__(self, *args, **kwargs):
        retr: list = []
        self._launcher.launch_normalized(self._parts.prepared(args, kwargs, self._stream, retr))
        for fn in retr:
            fn()
