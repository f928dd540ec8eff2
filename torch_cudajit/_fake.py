"""Fake (meta) registrations of the cudajit op family, for torch.compile and torch.export.

Tracing replaces a torch.classes.cudajit.Kernel by a FakeKernel built from its
``__obj_flatten__`` output, and runs the op's fake implementation on fake tensors: it checks
the arguments' shape of the call and touches no data. The op returns nothing; what it writes
is declared by the schema's (a!) annotations."""
from __future__ import annotations

import torch

from ._loader import _C  # noqa: F401  (registers the op family and the class)


@torch._library.register_fake_class("cudajit::Kernel")
class FakeKernel:
    """What tracing knows of a kernel: its name and a fingerprint of its definition."""

    def __init__(self, kernel_name: str, key: str):
        self.kernel_name = kernel_name
        self.key = key

    @classmethod
    def __obj_unflatten__(cls, flat):
        return cls(**dict(flat))

    def name(self) -> str:
        return self.kernel_name

    def fingerprint(self) -> str:
        return self.key

    def source(self) -> str:
        raise RuntimeError("cudajit::Kernel.source() is not available while tracing; read it "
                           "from the kernel before torch.compile")

    # The script object's short forms. Tracing records launches as cudajit::launch calls, which
    # the Python Kernel's launch methods make; a method call on the script object would be
    # recorded as an opaque torchbind call whose writes tracing cannot see.
    def launch(self, grid, block, tensors, scalars=None, shared_mem=0):
        _refuse_method(self.kernel_name, "launch")

    def launch_forall(self, ntasks, tensors, scalars=None, shared_mem=0):
        _refuse_method(self.kernel_name, "launch_forall")


def _refuse_method(kernel: str, method: str):
    raise RuntimeError(f"kernel '{kernel}': the script object's {method}() cannot be traced by "
                       f"torch.compile or torch.export; call {method}() on the Python Kernel "
                       f"(torch_cudajit.jit(...)), or kernel[grid, block](...), which trace as "
                       f"cudajit::launch")


@torch.library.register_fake("cudajit::launch")
def _launch_fake(k, out0, out1, out2, out3, more_outputs, inputs, ints, floats, kinds, grid, block,
                 shared_mem=0, scalar_tensors=None):
    if list(block) == [0]:  # a forall launch: grid is [ntasks]
        if len(grid) != 1:
            raise ValueError(f"cudajit::launch: a forall launch (block [0]) takes grid [ntasks], "
                             f"got {list(grid)}")
    elif not 1 <= len(grid) <= 3 or not 1 <= len(block) <= 3:
        raise ValueError(f"cudajit::launch: grid and block need 1 to 3 entries, got {list(grid)} "
                         f"and {list(block)}")
    if set(kinds) - set("ibfct"):
        raise ValueError(f"cudajit::launch: kinds '{kinds}' may hold only 'i', 'b', 'f', 'c' "
                         f"and 't'")
    if scalar_tensors is not None and len(scalar_tensors) != len(kinds):
        raise ValueError(f"cudajit::launch: scalar_tensors has {len(scalar_tensors)} entries; it "
                         f"must be None or have one per number ({len(kinds)})")
    return None
