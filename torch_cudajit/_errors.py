"""Exceptions and warnings raised by torch_cudajit."""
from ._loader import _C

#: Raised when NVRTC rejects a kernel. Attributes: kernel_name, arch, options, log, source.
CompileError = _C.CompileError
CompileError.__module__ = "torch_cudajit"

#: Raised after a debug-mode launch (jit(..., debug=True)) in which a bounds check or a
#: cj_assert failed. Attributes: kernel_name, file, line, thread, block and, for bounds checks,
#: index, dim and shape (None for cj_assert). The CUDA context stays usable.
KernelAssertionError = _C.KernelAssertionError
KernelAssertionError.__module__ = "torch_cudajit"


class LowOccupancyWarning(UserWarning):
    """A launch whose grid has fewer blocks than twice the GPU's SM count: most of the GPU
    idles. Set TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS=0 to turn these warnings off."""
