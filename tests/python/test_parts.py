"""The parts kernel objects are built from (torch_cudajit/_parts.py, _launch.Launch) and the one
number converter of _args: no kernel object refers to itself, forwarders keep the signatures
of the parts' methods, and numbers convert the same way on every path. Runs without a GPU."""
import gc
import inspect

import pytest
import torch

import torch_cudajit as cj
from torch_cudajit._args import number
from torch_cudajit._kernel import SpecializedKernel
from torch_cudajit._launch import Launch
from torch_cudajit._op import _op_number
from torch_cudajit._parts import KernelParts, delegate

SAXPY = r"""
extern "C" __global__ void saxpy(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
"""


def meta(n):
    return torch.empty(n, device="meta")


def refers_to(holder, obj) -> bool:
    """Whether one of `holder`'s attributes is `obj`."""
    return any(r is obj for r in gc.get_referents(vars(holder)))


def test_kernel_objects_hold_parts_that_never_refer_back():
    k = cj.jit(SAXPY)
    sk = SpecializedKernel(k, k._core.compile((meta(4), meta(4), 2.0, 4), 90))
    prebuilt = cj.load(k.compile(meta(4), meta(4), 2.0, 4, arch="sm_90").cubin,
                       'extern "C" __global__ void saxpy(float* out, const float* x, float a, int n)')
    for owner in (k, sk, prebuilt):
        assert not refers_to(owner, owner)
        assert not refers_to(owner._launch, owner)
    for owner in (k, prebuilt):
        assert owner._launch.parts is owner._parts
        assert not refers_to(owner._parts, owner)
    # A specialization shares its kernel's parts (its occupancy warnings, its binding).
    assert sk._launch.parts is k._parts and sk._launch.fixed is not None


def test_prebuilt_kernel_has_the_launch_api_without_being_a_jit_kernel():
    k = cj.jit(SAXPY)
    prebuilt = cj.load(k.compile(meta(4), meta(4), 2.0, 4, arch="sm_90").cubin,
                       'extern "C" __global__ void saxpy(float* out, const float* x, float a, int n)')
    for name in Launch.API + KernelParts.API:
        assert hasattr(type(prebuilt), name), name
    assert not isinstance(prebuilt, cj.Kernel)
    assert prebuilt.forall_plan.__doc__ == k.forall_plan.__doc__


class _Part:
    def __init__(self):
        self.calls = []
        self._value = 1

    def method(self, a, b=2, *rest, c=3, **more):
        """What the part does."""
        self.calls.append((a, b, rest, c, more))
        return a

    @property
    def value(self):
        """A settable value."""
        return self._value

    @value.setter
    def value(self, v):
        self._value = v

    @property
    def fixed(self):
        return "fixed"


@delegate("_part", _Part, ("method", "value", "fixed"))
class _Owner:
    def __init__(self):
        self._part = _Part()


def test_delegate_forwards_methods_with_their_signature_and_defaults():
    owner = _Owner()
    assert owner.method(1) == 1
    owner.method(1, 5, 6, 7, c=8, d=9)
    assert owner._part.calls == [(1, 2, (), 3, {}), (1, 5, (6, 7), 8, {"d": 9})]
    assert str(inspect.signature(owner.method)) == "(a, b=2, *rest, c=3, **more)"
    assert _Owner.method.__doc__ == "What the part does."
    assert _Owner.method.__qualname__ == "_Owner.method"
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        owner.method()


def test_delegate_forwards_properties_settable_as_in_the_part():
    owner = _Owner()
    assert owner.value == 1 and _Owner.value.__doc__ == "A settable value."
    owner.value = 5
    assert owner._part.value == 5
    with pytest.raises(AttributeError):
        owner.fixed = "other"


def test_number_converts_numpy_scalars_and_passes_everything_else():
    np = pytest.importorskip("numpy")
    for value, expected in [(np.float32(2.5), 2.5), (np.int64(-3), -3), (np.bool_(True), True),
                            (np.complex128(1 + 2j), 1 + 2j), (np.uint8(7), 7)]:
        got = number(value)
        assert got == expected and type(got) is type(expected)
    t = torch.ones(())
    for value in (1, 2.5, True, 1j, t, "x", None):
        assert number(value) is value


def test_op_path_reads_numbers_through_the_same_converter():
    np = pytest.importorskip("numpy")
    parts = cj.jit(SAXPY)._parts
    assert _op_number(parts, 2, np.float32(2.5), False) == ("f", [2.5], None)
    assert _op_number(parts, 3, np.int32(4), False) == ("i", [4], None)
    assert _op_number(parts, 3, np.bool_(False), False) == ("b", [0], None)
    with pytest.raises(TypeError, match="parameter 'a' of kernel 'saxpy' takes a number on the op "
                                        "path"):
        _op_number(parts, 2, np.str_("2.0"), False)
