"""Exceptions raised by torch_cudajit."""
from ._loader import _C

#: Raised when NVRTC rejects a kernel. Attributes: kernel_name, arch, options, log, source.
CompileError = _C.CompileError
CompileError.__module__ = "torch_cudajit"
