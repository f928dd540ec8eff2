"""torch_cudajit: write CUDA C++ kernels as strings and call them on torch tensors.

    import torch, torch_cudajit as cj
    saxpy = cj.jit(r'''
    template <typename T>
    __global__ void saxpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
      long long i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < x.size(0)) out[i] = a * x[i];
    }''')
    saxpy[blocks, threads](out, x, 2.0)
"""
from ._loader import _C, cmake_prefix_path
from . import _log
from ._errors import CompileError, KernelAssertionError, LowOccupancyWarning
from ._extensions import Extension, Params
from ._args import DevicePointer
from ._compiled import CompiledKernel
from ._kernel import Kernel, KernelModule, SpecializedKernel
from ._parts import Parameter
from ._launch import ForallPlan
from ._jit import DeviceSource, device_source, jit
from ._prebuilt import PrebuiltKernel, load
from . import cache
from . import distributed
from . import _fake  # noqa: F401  (fake implementations for torch.compile)
from . import backend as _backend
_backend._install()  # torch.compile(..., backend="cudajit")
_log._configure()

__all__ = [
    "jit",
    "load",
    "device_source",
    "DeviceSource",
    "PrebuiltKernel",
    "Kernel",
    "KernelModule",
    "SpecializedKernel",
    "CompiledKernel",
    "ForallPlan",
    "Parameter",
    "Extension",
    "Params",
    "DevicePointer",
    "CompileError",
    "KernelAssertionError",
    "LowOccupancyWarning",
    "nvrtc_version",
    "cache",
    "cmake_prefix_path",
    "__version__",
]

__version__ = "0.2.0"

_C.set_device_pointer_type(DevicePointer)  # the launch path converts it without Python


def nvrtc_version():
    """NVRTC's version as a (major, minor) tuple."""
    v = _C.nvrtc_version()
    return v // 1000, (v % 1000) // 10
