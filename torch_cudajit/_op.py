"""The op path: kernel.op[grid, block] and, under torch.compile, kernel[grid, block] as calls of
torch.ops.cudajit.launch (see csrc/ops/schemas.cpp)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ._args import dims, number
from ._loader import _C

if TYPE_CHECKING:
    from ._parts import KernelParts


def _has_static_value(value) -> bool:
    # Imported here: the module pulls in sympy (about a second), and is only needed while
    # torch.compile traces, which has imported it already.
    from torch.fx.experimental.symbolic_shapes import has_static_value
    return has_static_value(value)


class _OpIndexer:
    def __init__(self, parts: "KernelParts"):
        self._parts = parts

    def __getitem__(self, config):
        traced = _OpLauncher(self._parts, config)  # validates the configuration
        if torch.compiler.is_compiling():
            return traced
        # Eager: the same op through the C++ dispatcher, the kernel object converted once.
        k = self._parts

        def bind_keywords(launcher, args, kwargs):
            launcher.launch_normalized(k.bind(args, kwargs))

        return _C.OpLauncher(k.script_object, traced._grid, traced._block, traced._shared_mem,
                             bind_keywords)


class _OpLauncher:
    """kernel[grid, block] as a call of torch.ops.cudajit.launch: written tensors (non-const
    parameters) in the output slots, read-only tensors in ``inputs``, numbers in ``ints`` and
    ``floats`` with their kinds (see csrc/ops/schemas.cpp).
    With ``forall``, the configuration is (ntasks, 0, ...): the op's block [0] asks it to pick
    the block size when it runs."""

    def __init__(self, parts: "KernelParts", config, forall: bool = False):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError(f"kernel '{parts.name}': the launch configuration must be "
                             f"[grid, block] or [grid, block, stream, shared_mem]; got {config!r}")
        if len(config) > 2 and config[2] is not None:
            raise ValueError(f"kernel '{parts.name}': the op path launches on the current "
                             f"stream; use `with torch.cuda.stream(s):` instead of a stream in "
                             f"the launch configuration")
        shared_mem = config[3] if len(config) > 3 else 0
        if not isinstance(shared_mem, int) or isinstance(shared_mem, bool) or shared_mem < 0:
            raise ValueError(f"kernel '{parts.name}': shared_mem must be an int >= 0, got {shared_mem!r}")
        self._parts = parts
        if forall:
            self._grid, self._block = [config[0]], [0]
        else:
            self._grid = dims(config[0], "grid", parts.name)
            self._block = dims(config[1], "block", parts.name)
        self._shared_mem = shared_mem

    def __call__(self, *args, **kwargs):
        k = self._parts
        if kwargs:
            args = k.bind(args, kwargs)
        roles = k.op_roles
        if len(args) != len(roles):
            raise TypeError(f"kernel '{k.name}' takes {len(roles)} argument(s), got {len(args)}")
        compiling = torch.compiler.is_compiling()
        outs, ins, ints, floats, kinds, scalar_tensors = [], [], [], [], [], []
        for i, value in enumerate(args):
            role = roles[i]
            if role == "auto":
                if isinstance(value, torch.Tensor):
                    kinds.append("t")
                    scalar_tensors.append(None)
                    outs.append(value)  # `auto` deduces non-const elements: written
                    continue
                role = "scalar"
            if role == "scalar":
                kind, values, tensor = _op_number(k, i, value, compiling)
                kinds.append(kind)
                (ints if kind in "ib" else floats).extend(values)
                scalar_tensors.append(tensor)
            elif not isinstance(value, torch.Tensor):
                raise TypeError(f"parameter '{k.params[i].name}' of kernel '{k.name}' takes a "
                                f"tensor; got {type(value).__name__}")
            elif role == "output":
                outs.append(value)
            else:
                ins.append(value)
        if not any(t is not None for t in scalar_tensors):
            scalar_tensors = None
        slots = outs[:4] + [None] * (4 - min(len(outs), 4))
        torch.ops.cudajit.launch.default(k.script_object, slots[0], slots[1], slots[2], slots[3],
                                         outs[4:], ins, ints, floats, "".join(kinds), self._grid,
                                         self._block, self._shared_mem, scalar_tensors)


def _op_number(k: "KernelParts", i: int, value, compiling: bool):
    """A number parameter's value as the op takes it: (kind, values for `ints` or `floats`,
    the tensor for scalar_tensors or None)."""
    if isinstance(value, torch.Tensor):
        # A 0-d floating-point CPU tensor is read as a float when the op runs; under
        # torch.compile it stays a graph input, so new values (a learning rate kept in a tensor)
        # never recompile.
        if value.dim() != 0 or not value.is_floating_point() or value.device.type != "cpu":
            raise TypeError(
                f"parameter '{k.params[i].name}' of kernel '{k.name}' takes a number on the op "
                f"path (torch.compile, TorchScript), or a 0-d floating-point CPU tensor; got a "
                f"{value.dtype} tensor of shape {tuple(value.shape)} on {value.device}")
        return "f", [0.0], value
    value = number(value)
    if not isinstance(value, (int, float, bool, complex)):
        raise TypeError(f"parameter '{k.params[i].name}' of kernel '{k.name}' takes a number on "
                        f"the op path (torch.compile, TorchScript); got {type(value).__name__}")
    if isinstance(value, bool):
        return "b", [int(value)], None
    if isinstance(value, int):
        if not isinstance(value, torch.SymInt) and value < -(1 << 62):
            raise ValueError(f"parameter '{k.params[i].name}' of kernel '{k.name}': the op path "
                             f"takes ints from -2^62 up, got {value}; pass such a value as a "
                             f"float, or in a tensor")
        return "i", [value], None
    if isinstance(value, complex):
        return "c", [value.real, value.imag], None
    # A float torch.compile made symbolic (one it saw change, or one computed from such a float)
    # reaches the graph as a 0-d tensor computed from it (cudajit::float_tensor, below), with a
    # placeholder in `floats`: that keeps it a graph input, where in `floats` it would be
    # specialized and each new value (a learning rate) would recompile. Constants and symbolic
    # ints stay in the lists.
    if compiling and not _has_static_value(value):
        return "f", [0.0], torch.ops.cudajit.float_tensor.default(value)
    return "f", [value], None


# cudajit::float_tensor(Scalar value) -> Tensor: a float as a 0-d float64 CPU tensor, for the
# graphs torch.compile traces. Its one implementation is Python, so it is defined here rather
# than with cudajit::launch in C++. CompositeImplicitAutograd: AOTAutograd traces through it, and
# compiled graphs hold only the aten ops of _float_tensor. Dynamo's graph holds the op itself,
# which AOTAutograd's cache takes (a call of a Python function there would bypass the cache).
_LIB = torch.library.Library("cudajit", "FRAGMENT")
_LIB.define("float_tensor(Scalar value) -> Tensor")


def _float_tensor(value):
    # Dynamo passes a float argument that changes to the graph as a tensor, and traces the
    # function with its item(): a SymFloat whose expression is a symbol. The add below takes the
    # float as a scalar operand, and AOTAutograd's tensorify_python_scalars pass computes it from
    # that tensor instead. The pass then specializes (a guard on the value, so a recompile for
    # each new one) every float symbol it did not record, and torch 2.11 records an operand's
    # expression, not the symbols in it: a float computed from the argument (-lr, 2 * lr,
    # lr / (1 + t)) leaves its symbol unrecorded. A second op per symbol, with the symbol itself
    # as an operand, gets each recorded; its result leaves the value unchanged.
    t = torch.zeros((), dtype=torch.float64, device="cpu") + value
    if isinstance(value, torch.SymFloat):
        for symbol in _float_symbols(value):
            seen = torch.zeros((), dtype=torch.float64, device="cpu") * symbol
            t = torch.where(seen == seen, t, t)  # t, whatever `seen` holds (nan included)
    return t


def _float_symbols(value: "torch.SymFloat") -> list:
    """The float symbols (backed: Dynamo's float inputs) of a SymFloat computed from them, each
    as a SymFloat of its own, which make_fx traces back to the item() that made it. None for a
    lone symbol, which tensorify_python_scalars records as it is."""
    import sympy
    from torch.utils._sympy.symbol import SymT, symbol_is_type
    node = value.node
    expr = getattr(node, "_expr", node.expr)  # as computed, before the ShapeEnv's replacements
    shape_env = node.shape_env
    hints = getattr(shape_env, "backed_var_to_val", None)
    if isinstance(expr, sympy.Symbol) or hints is None:
        return []
    return [shape_env.create_symfloatnode(s, hint=float(hints[s]))
            for s in sorted(expr.free_symbols, key=str)
            if symbol_is_type(s, SymT.FLOAT) and s in hints]


_LIB.impl("float_tensor", _float_tensor, "CompositeImplicitAutograd")
