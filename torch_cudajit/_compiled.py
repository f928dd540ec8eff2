"""CompiledKernel: one compiled specialization of a kernel, with its signature, PTX, CUBIN,
compile facts, resource use, module variables and inspection."""
from __future__ import annotations

import math

import torch

from ._args import dims
from ._inspect import sass_of, split_signature
from ._loader import _C


class CompiledKernel:
    """One compiled specialization: its signature, PTX, CUBIN, compile facts, resource use
    and inspection."""

    def __init__(self, spec, core=None, params=()):
        self._spec = spec
        self._core = core
        self._params = tuple(params)
        info = spec.info()
        self.signature: str = info["signature"]
        self.arch: int = info["arch"]
        self.target: str = info["target"]
        self.lowered_name: str = info["lowered_name"]
        self.name_expression: str = info["name_expression"]
        self.cpp_signature: str = info["demangled"]
        self.options: list = info["options"]
        self.log: str = info["log"]
        self.ptx: str = info["ptx"]
        self.cubin: bytes = info["cubin"]

    # -- inspection ------------------------------------------------------------------------
    def inspect_ptx(self) -> str:
        """The PTX NVRTC produced (empty for kernels linked with LTO, which keep none)."""
        if not self.ptx:
            raise ValueError(f"{self.lowered_name} was linked with link-time optimization "
                             f"(link=...), which keeps no PTX; use inspect_sass()")
        return self.ptx

    def inspect_sass(self) -> str:
        """The SASS of the CUBIN (needs cuobjdump or nvdisasm from the CUDA toolkit)."""
        return sass_of(self.cubin, f"{self.lowered_name} ({self.signature})")

    def inspect_types(self) -> dict:
        """The instantiated C++ signature, name expression, lowered name, options, and each
        parameter with the argument kind it binds to."""
        bound = split_signature(self.signature)
        params = [dict(name=p.name, declared=p.type, binds=b)
                  for p, b in zip(self._params, bound)] if self._params else [
                      dict(name=f"arg{i}", declared="?", binds=b) for i, b in enumerate(bound)]
        return dict(signature=self.signature, cpp_signature=self.cpp_signature,
                    name_expression=self.name_expression, lowered_name=self.lowered_name,
                    target=self.target, options=list(self.options), parameters=params)

    # -- resources (need a GPU of this architecture) -------------------------------------------
    def _device(self, what: str = "resource attributes are read from the driver") -> int:
        """The current CUDA device, checked to be of this overload's architecture."""
        if self._core is None:
            raise RuntimeError("this CompiledKernel has no kernel to query")
        if not torch.cuda.is_available():
            raise RuntimeError(f"{what} and need a CUDA GPU")
        device = torch.cuda.current_device()
        have = _C.device_compute_capability(device)
        if have != self.arch:
            raise ValueError(f"{self.signature} was compiled for sm_{self.arch}; the current "
                             f"device is sm_{have}")
        return device

    def _resources(self) -> dict:
        return self._core.resources(self._spec, self._device())

    @property
    def regs_per_thread(self) -> int:
        return self._resources()["regs_per_thread"]

    @property
    def shared_mem_per_block(self) -> int:
        """Static shared memory per block, in bytes."""
        return self._resources()["shared_mem_per_block"]

    @property
    def const_mem_size(self) -> int:
        return self._resources()["const_mem_size"]

    @property
    def local_mem_per_thread(self) -> int:
        return self._resources()["local_mem_per_thread"]

    @property
    def max_threads_per_block(self) -> int:
        return self._resources()["max_threads_per_block"]

    @property
    def ptx_version(self) -> int:
        """The PTX version the kernel was compiled for, as the driver reports it (major * 10 +
        minor)."""
        return self._resources()["ptx_version"]

    @property
    def binary_version(self) -> int:
        """The architecture of the machine code (major * 10 + minor, e.g. 90)."""
        return self._resources()["binary_version"]

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The most dynamic shared memory a launch may ask for without the plugin raising the
        limit (it raises it itself for larger launches). Settable; the value applies on every
        device this overload is loaded on, now or later."""
        return self._resources()["max_dynamic_shared_size_bytes"]

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        _check_attribute("max_dynamic_shared_size_bytes", value, 0, None,
                         "a byte count (e.g. 100 * 1024)")
        self._core.set_attribute(self._spec, self._device(), "max_dynamic_shared_size_bytes", value)

    @property
    def preferred_shared_memory_carveout(self) -> int:
        """The share of the L1/shared memory the kernel prefers as shared memory, in percent
        (0 to 100), or -1 for the driver's default. Settable, like
        max_dynamic_shared_size_bytes; the driver treats it as a hint."""
        return self._resources()["preferred_shared_memory_carveout"]

    @preferred_shared_memory_carveout.setter
    def preferred_shared_memory_carveout(self, value: int) -> None:
        _check_attribute("preferred_shared_memory_carveout", value, -1, 100,
                         "a percentage from 0 to 100, or -1 for the driver's default")
        self._core.set_attribute(self._spec, self._device(), "preferred_shared_memory_carveout", value)

    def get_global(self, name: str, dtype: torch.dtype = torch.uint8, shape=None) -> torch.Tensor:
        """A tensor aliasing the ``__device__`` or ``__constant__`` variable ``name`` of this
        overload's module on the current device: its bytes (uint8), or a view of them as
        ``dtype`` with ``shape`` (default: 1-D). Writing the tensor (``copy_``, ``fill_``)
        writes the variable, ``__constant__`` ones included; the tensor keeps the module
        loaded."""
        shape = _check_global_args(name, dtype, shape)
        raw = self._core.global_tensor(self._spec, self._device("module variables live on the GPU"), name)
        return _typed_view(raw, name, dtype, shape)

    def max_cooperative_grid_blocks(self, block, dynamic_shared_mem: int = 0) -> int:
        """The largest grid (in blocks) whose blocks are all resident at once for this block
        shape and dynamic shared memory: the limit of a cooperative launch."""
        self._resources()  # checks the device
        threads = math.prod(dims(block, "block", self.lowered_name))
        if not isinstance(dynamic_shared_mem, int) or dynamic_shared_mem < 0:
            raise ValueError(f"dynamic_shared_mem must be an int >= 0, got {dynamic_shared_mem!r}")
        return self._core.max_cooperative_grid_blocks(self._spec, torch.cuda.current_device(),
                                                      threads, dynamic_shared_mem)

    def __repr__(self):
        return f"<CompiledKernel {self.lowered_name} {self.signature} for {self.target}>"


_RESOURCES = ("regs_per_thread", "shared_mem_per_block", "const_mem_size", "local_mem_per_thread",
              "max_threads_per_block")


def _check_attribute(name: str, value, low: int, high, expected: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int ({expected}), got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {expected}; got {value}")


def _check_global_args(name, dtype, shape):
    """Checks get_global's arguments before any GPU work; returns the shape as a tuple or None."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"get_global: name must be the variable's name (a non-empty str), "
                        f"got {name!r}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"get_global: dtype must be a torch.dtype (e.g. torch.float32), got {dtype!r}")
    if shape is None:
        return None
    dims = (shape,) if isinstance(shape, int) else shape
    if (not isinstance(dims, (tuple, list, torch.Size))
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)):
        raise TypeError(f"get_global: shape must be an int or a tuple of ints >= 0, got {shape!r}")
    return tuple(dims)


def _typed_view(raw: torch.Tensor, name: str, dtype: torch.dtype, shape) -> torch.Tensor:
    """The bytes of a module variable viewed as `dtype` with `shape` (1-D when None)."""
    size = raw.numel()
    if size % dtype.itemsize != 0:
        raise ValueError(f"get_global: the variable '{name}' is {size} bytes, not a whole number "
                         f"of {dtype} elements ({dtype.itemsize} bytes each); pass a dtype whose "
                         f"size divides {size}")
    if raw.data_ptr() % dtype.itemsize != 0:
        raise ValueError(f"get_global: the variable '{name}' is not {dtype.itemsize}-byte aligned, "
                         f"as {dtype} needs; declare it with that alignment or read it as bytes")
    count = size // dtype.itemsize
    if shape is not None and math.prod(shape) != count:
        raise ValueError(f"get_global: the variable '{name}' holds {count} {dtype} element(s); "
                         f"shape {shape} has {math.prod(shape)}. Pass a shape with {count} elements")
    typed = raw.view(dtype) if dtype != torch.uint8 else raw
    return typed.view(shape) if shape is not None else typed

