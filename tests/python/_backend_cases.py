"""The operations the cudajit backend's tests compile: each a function of tensors, used by the
CPU tests (traced on fake CUDA tensors, compiled for sm_90) and the GPU tests (against eager)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": lambda x: torch.log(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs()),
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil,
    "round": torch.round, "trunc": torch.trunc, "sign": torch.sign, "reciprocal": torch.reciprocal,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "softplus": F.softplus, "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh,
    "expm1": torch.expm1, "log1p": lambda x: torch.log1p(x.abs()), "square": torch.square,
    "isnan": lambda x: torch.isnan(x / x.abs().floor()),
    # Powers by the constants torch's pow kernels special-case, and one they do not.
    "pow_products": lambda x: x ** 2 + x ** 3 - x ** -2,
    "pow_roots": lambda x: x.abs() ** 0.5 + x.abs() ** -0.5 + x ** -1,
    "pow_other": lambda x: x.abs() ** 2.5,
}


BINARY = {
    "add": lambda a, b: a + b, "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
    "mul": lambda a, b: a * b, "div": lambda a, b: a / b, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": lambda a, b: torch.pow(a.abs(), b), "atan2": torch.atan2,
    "remainder": torch.remainder, "fmod": torch.fmod,
    "floor_divide": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "where": lambda a, b: torch.where(a > b, a, b * 2), "lt": lambda a, b: (a < b).to(a.dtype),
    "eq_scalar": lambda a, b: (a.round() == 1).to(a.dtype) + b,
    "scalar_ops": lambda a, b: (a * 0.5 - 2) / (b.abs() + 3) + 1.5 ** a,
    "clamp": lambda a, b: torch.clamp(a, -0.7, 0.9) + b,
}
REDUCTIONS = {
    "sum": lambda x: x.sum(-1), "sum_keepdim": lambda x: x.sum(-1, keepdim=True) * x,
    "mean": lambda x: x.mean(-1), "amax": lambda x: x.amax(-1, keepdim=True),
    "amin": lambda x: x.amin(-1),
    "softmax": lambda x: F.softmax(x, -1), "log_softmax": lambda x: F.log_softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:], eps=1e-6),
    "var_mean": lambda x: torch.var_mean(x, -1, correction=0)[0] + torch.var_mean(x, -1)[1],
    "var": lambda x: torch.var(x, -1, keepdim=True) * x if x.shape[-1] > 1 else x,
    "logsumexp": lambda x: torch.logsumexp(x, -1),
}
# Reductions the backend leaves to aten: another dimension, values with indices.
UNFUSED_REDUCTIONS = {
    "sum_dim0": lambda x: x.sum(0), "max_values": lambda x: x.max(-1).values,
    "sum_all": lambda x: x.sum(),
}


# Cats along the last dimension, of x (6, 5, 40) and y (6, 5, 24): name -> (function, kernels
# the backend makes of it, cats left to aten).
CATS = {
    # The rotary embedding's rotate-half: a negated slice and a slice, scaled and added.
    "rotate_half": (lambda x, y: x * 2 + torch.cat((-x[..., 20:], x[..., :20]), -1) * 3, 1, 0),
    "leaves": (lambda x, y: torch.cat((x, y), -1).exp(), 1, 0),
    "three_branches": (lambda x, y: torch.cat((x.sin(), y * 2, x[..., :7] - 1), -1) + 1, 1, 0),
    # An operand read elsewhere is stored once and loaded by its branch; the reduction over
    # the cat is a row kernel of its own.
    "operand_read_elsewhere": (
        lambda x, y: (lambda e: torch.cat((e, y), -1).sum(-1) + e.sum(-1))(x.exp()), 3, 0),
    # A cat's operand computed with a cat of its own is stored by its kernel and loaded.
    # The dimension given as a positive number, and operands of one rank less (rank 2).
    "positive_dim": (lambda x, y: torch.cat((x[0] * 2, y[1]), 1).tanh(), 1, 0),
    # A branch one position wide (every lane of it reads position 0 of its operand).
    "width_one_branch": (lambda x, y: torch.cat((x, x[..., :1] * 3, y), -1) + 1, 1, 0),
    # One operand twice: computed by a kernel of its own, loaded by both branches.
    "same_operand_twice": (lambda x, y: (lambda e: torch.cat((e, e), -1) * 2)(x.exp()), 2, 0),
    "cat_of_cats": (lambda x, y: torch.cat((torch.cat((x, y), -1) * 2, y), -1) - 1, 2, 0),
    "other_dimension": (lambda x, y: torch.cat((x, x * 2), 0) + 1, 2, 1),
}


def chain(*xs):
    s = xs[0]
    for x in xs[1:]:
        s = s * 0.5 + x.abs()
    return s


def cat_of_relus(*xs):
    return torch.cat([torch.relu(x) for x in xs], -1) * 2


def many_multiples(x):
    return tuple(x * i for i in range(1, 100))


# Graphs whose one group would take more parameters than a kernel may have:
# (function, its inputs, the least kernels it takes, whether the cat stays aten's).
WIDE = {
    "120_inputs_of_one_chain": (chain, [(8, 16)] * 120, 3, False),
    "cat_of_100_computed_operands": (cat_of_relus, [(8, 4)] * 100, 2, True),
    "cat_of_40_computed_operands": (cat_of_relus, [(8, 4)] * 40, 1, False),
    "99_outputs": (many_multiples, [(8, 16)], 2, False),
}
