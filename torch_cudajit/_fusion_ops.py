"""The aten operations the cudajit backend fuses, as CUDA C++ expressions.

Each pointwise operation maps to a function that takes its operands' expressions (already
converted to the operation's compute type) and its constant arguments, and returns one C++
expression; the math comes from ``cj::op`` in ``cj/cj.cuh``. Reductions over one dimension are
described by their initial value and combining expression. Anything not listed here runs as
the aten operation it is."""
from __future__ import annotations

import math
import struct

import torch

aten = torch.ops.aten
prims = torch.ops.prims

# Storage type of each dtype in a kernel, and the type its values are computed in (16-bit
# floats in float, as torch's own CUDA kernels do).
STORAGE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16", torch.int64: "long long", torch.int32: "int",
    torch.int16: "short", torch.int8: "signed char", torch.uint8: "unsigned char",
    torch.bool: "bool",
}
COMPUTE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "float",
    torch.bfloat16: "float", torch.int64: "long long", torch.int32: "int", torch.int16: "int",
    torch.int8: "int", torch.uint8: "int", torch.bool: "bool",
}
FLOATING = ("float", "double")
# Dtypes stored in 16 bits and computed in float.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def literal(value, ctype: str) -> str:
    """A Python number as a C++ expression of `ctype`."""
    if isinstance(value, bool):
        return f"static_cast<{ctype}>({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"static_cast<{ctype}>({value}LL)"
    value = float(value)
    if math.isfinite(value):
        return f"static_cast<{ctype}>({value!r})"
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return f"static_cast<{ctype}>(cj::op::bits(0x{bits:016x}ULL))"


def _unary(fn):
    return lambda a: f"cj::op::{fn}({a})"


def _infix(op):
    return lambda a, b: f"({a} {op} {b})"


# Operation -> expression builder, for operations of one and two operands. Operands arrive in the
# operation's compute type.
UNARY = {
    aten.neg.default: lambda a: f"(-{a})",
    aten.abs.default: _unary("abs"),
    aten.reciprocal.default: lambda a: f"(1 / {a})",
    aten.relu.default: lambda a: f"cj::op::maximum({a}, decltype({a})(0))",
    aten.sigmoid.default: _unary("sigmoid"),
    aten.sign.default: _unary("sign"),
    aten.round.default: _unary("round"),
    aten.logical_not.default: lambda a: f"(!{a})",
    # On bool, ~ is logical not (C++'s ~ would promote to int: ~true is -2, still true).
    aten.bitwise_not.default: lambda a: f"cj::op::bitwise_not({a})",
    aten.isnan.default: _unary("isnan"),
    aten.isinf.default: _unary("isinf"),
}
for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
              "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
              "atanh", "erf", "erfc", "erfinv", "lgamma", "floor", "ceil", "trunc"):
    UNARY[getattr(aten, _name).default] = _unary(_name)

BINARY = {
    aten.add.Tensor: _infix("+"), aten.sub.Tensor: _infix("-"), aten.mul.Tensor: _infix("*"),
    aten.div.Tensor: _infix("/"), aten.add.Scalar: _infix("+"), aten.sub.Scalar: _infix("-"),
    aten.mul.Scalar: _infix("*"), aten.div.Scalar: _infix("/"),
    aten.maximum.default: lambda a, b: f"cj::op::maximum({a}, {b})",
    aten.minimum.default: lambda a, b: f"cj::op::minimum({a}, {b})",
    aten.pow.Tensor_Tensor: lambda a, b: f"cj::op::pow({a}, {b})",
    aten.pow.Tensor_Scalar: lambda a, b: f"cj::op::pow({a}, {b})",
    aten.atan2.default: lambda a, b: f"cj::op::atan2({a}, {b})",
    aten.remainder.Tensor: lambda a, b: f"cj::op::remainder({a}, {b})",
    aten.remainder.Scalar: lambda a, b: f"cj::op::remainder({a}, {b})",
    aten.fmod.Tensor: lambda a, b: f"cj::op::fmod({a}, {b})",
    aten.fmod.Scalar: lambda a, b: f"cj::op::fmod({a}, {b})",
    aten.bitwise_and.Tensor: _infix("&"), aten.bitwise_or.Tensor: _infix("|"),
    aten.bitwise_xor.Tensor: _infix("^"),
}
# Comparisons and logical operations: computed in the operands' common type, bool results.
COMPARE = {
    aten.eq.Tensor: "==", aten.eq.Scalar: "==", aten.ne.Tensor: "!=", aten.ne.Scalar: "!=",
    aten.lt.Tensor: "<", aten.lt.Scalar: "<", aten.le.Tensor: "<=", aten.le.Scalar: "<=",
    aten.gt.Tensor: ">", aten.gt.Scalar: ">", aten.ge.Tensor: ">=", aten.ge.Scalar: ">=",
    aten.logical_and.default: "&&", aten.logical_or.default: "||",
    aten.logical_xor.default: "!=",
}
# Casts: the value converted to the node's dtype.
CASTS = {aten._to_copy.default, prims.convert_element_type.default, aten.clone.default}

# Reductions over one dimension: (C++ initial value for a compute type, combine(a, b)).
REDUCTIONS = {
    aten.sum.dim_IntList: ("0", "({a} + {b})"),
    aten.mean.dim: ("0", "({a} + {b})"),
    aten.amax.default: ("-inf", "cj::op::maximum({a}, {b})"),
    aten.amin.default: ("inf", "cj::op::minimum({a}, {b})"),
}


def reduction_init(kind: str, ctype: str) -> str:
    if kind == "0":
        return f"static_cast<{ctype}>(0)"
    if ctype in FLOATING:
        return literal(float(kind), ctype)
    # Integer amax/amin: the type's extreme.
    lim = {"long long": (-(1 << 63), (1 << 63) - 1), "int": (-(1 << 31), (1 << 31) - 1),
           "bool": (0, 1)}[ctype]
    return literal(lim[0] if kind == "-inf" else lim[1], ctype)


def common_ctype(ctypes) -> str:
    """The type two operands of a comparison meet in."""
    for t in ("double", "float", "long long", "int", "bool"):
        if t in ctypes:
            return t
    return "float"


def decompositions() -> dict:
    """The decompositions applied before partitioning: composite operations (norms, softmax,
    activations and their backwards) become the pointwise operations and one-dimension
    reductions the backend fuses."""
    from torch._decomp import get_decompositions
    names = ["gelu", "gelu_backward", "silu", "silu_backward", "native_layer_norm",
             "native_layer_norm_backward", "_softmax", "_log_softmax", "_softmax_backward_data",
             "_log_softmax_backward_data", "var_mean", "var", "sigmoid_backward",
             "tanh_backward", "threshold_backward", "_native_batch_norm_legit_no_training",
             "_fused_rms_norm", "_fused_rms_norm_backward", "addcmul", "addcdiv", "hardtanh",
             "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "mish", "softplus",
             "softplus_backward", "elu", "elu_backward", "rsub", "masked_fill",
             "native_dropout_backward", "clamp", "clamp_min", "clamp_max", "hardswish",
             "hardsigmoid", "lerp", "square", "xlogy", "logsumexp"]
    ops = [getattr(aten, n) for n in names if hasattr(aten, n)]
    table = get_decompositions(ops)
    # Variance over one dimension as two reductions of the input (a mean, then a sum of
    # squared differences), layer norm on it, and batch norm with running statistics replace
    # torch's decompositions of these overloads, which go to prims that nothing fuses or to
    # an in-place operation (the table keeps torch's for their other overloads).
    table[aten.var_mean.correction] = _var_mean
    table[aten.var.correction] = _var
    table[aten.native_layer_norm.default] = _layer_norm
    table[aten._native_batch_norm_legit_no_training.default] = _batch_norm_inference
    return table


def _batch_norm_inference(x, weight, bias, running_mean, running_var, momentum, eps):
    """Batch norm with running statistics as pointwise operations over the channel dimension
    (torch's decomposition goes through the in-place _native_batch_norm_legit, which
    AOTAutograd refuses in a functional graph)."""
    compute = torch.float32 if x.dtype in LOW_PRECISION else x.dtype
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    # The statistics are viewed in x's broadcast shape before any arithmetic, so that their
    # pointwise work broadcasts into the normalization's group and is computed there (one
    # kernel per batch norm), not in small groups of their own.
    mean = aten._to_copy.default(aten.view.default(running_mean, shape), dtype=compute)
    invstd = aten.rsqrt.default(aten.add.Tensor(
        aten._to_copy.default(aten.view.default(running_var, shape), dtype=compute), eps))
    out = aten.mul.Tensor(aten.sub.Tensor(x, mean), invstd)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, shape))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, shape))
    out = aten._to_copy.default(out, dtype=x.dtype)
    if x.device.type == "cpu":  # what the aten operation returns for the saved statistics
        return out, x.new_zeros((0,)), x.new_zeros((0,))
    channels = [x.shape[1]]
    return out, aten.view.default(mean, channels), aten.view.default(invstd, channels)


def _layer_norm(x, normalized_shape, weight, bias, eps):
    """native_layer_norm over the last dimension with aten reductions (torch's decomposition
    reaches prims.var); more dimensions stay the aten operation."""
    if len(normalized_shape) != 1 or x.is_complex() or x.dim() == 0:
        return NotImplemented
    low, mean, diff = _centered(x, [-1])
    var = aten.mean.dim(aten.mul.Tensor(diff, diff), [-1], True)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = aten.mul.Tensor(diff, rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    if bias is not None:
        out = aten.add.Tensor(out, bias)
    if low:
        out = aten._to_copy.default(out, dtype=x.dtype)
    return out, mean, rstd


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    if dim is None or len(dim) != 1 or not x.is_floating_point() or x.is_complex():
        return NotImplemented
    n = x.shape[dim[0]]
    c = 1 if correction is None else correction
    low, mean, diff = _centered(x, dim)
    var = aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(diff, diff), dim, keepdim), n - c)
    if not keepdim:
        mean = aten.squeeze.dims(mean, dim)
    if low:
        var = aten._to_copy.default(var, dtype=x.dtype)
        mean = aten._to_copy.default(mean, dtype=x.dtype)
    return var, mean


def _centered(x, dim):
    """(whether x is 16-bit, its mean over `dim` kept, x minus it), computed in float for
    16-bit dtypes."""
    low = x.dtype in LOW_PRECISION
    xf = aten._to_copy.default(x, dtype=torch.float32) if low else x
    mean = aten.mean.dim(xf, dim, True)
    return low, mean, aten.sub.Tensor(xf, mean)


def _var(x, dim=None, *, correction=None, keepdim=False):
    out = _var_mean(x, dim, correction=correction, keepdim=keepdim)
    return out if out is NotImplemented else out[0]
