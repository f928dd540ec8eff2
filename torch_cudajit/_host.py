"""The host side of a compiled graph, made cheap.

A step of a compiled graph issues every aten call its FX code makes, through Python. Two kinds
of calls cost host time and nothing on the GPU:

- a linear layer arrives from AOTAutograd as four calls (``t`` of the weight, a ``view`` of the
  input to two dimensions, ``mm`` or ``addmm``, a ``view`` back); ``torch._C._nn.linear`` does
  the same in one call, with the same matrix product for a contiguous input (it flattens the
  input and calls the same mm or addmm, on torch 2.11 and 2.15 alike);
- the remaining view operations (``view``, ``t``, ``transpose``, ``permute``, ...) go through the
  OpOverload's Python wrapper; the Tensor method of the same name is one binding call (a
  ``slice`` with static bounds is ``narrow``). The operations the backend leaves to aten that
  have one overload (``convolution``, ``mm``, ``bmm``, ``addmm``) are called through their
  ``torch`` function, whose argument parsing costs less than the OpOverload's boxing of the
  same arguments (a convolution's several lists above all).

``lighten(graph)`` rewrites both in place. It changes no values: every rewritten node computes
what it replaced, and a node whose intermediate results are read elsewhere is left alone.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

# aten view operations and the Tensor methods that call them with the same arguments.
_METHODS = {aten.view.default: "view", aten.t.default: "t", aten.transpose.int: "transpose",
            aten.permute.default: "permute", aten.unsqueeze.default: "unsqueeze",
            aten.squeeze.dim: "squeeze", aten.select.int: "select", aten.expand.default: "expand"}
_RESHAPES = (aten.view.default, aten._unsafe_view.default)
# aten operations with one overload and the torch functions that call them with the same
# positional arguments.
_FUNCTIONS = {aten.convolution.default: torch.convolution, aten.mm.default: torch.mm,
              aten.bmm.default: torch.bmm, aten.addmm.default: torch.addmm}


def _val(node):
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def _static(shape) -> bool:
    return all(isinstance(s, int) for s in shape)


def _only_user(node: fx.Node, user: fx.Node) -> bool:
    return isinstance(node, fx.Node) and list(node.users) == [user]


def _linear_parts(mm: fx.Node):
    """(input, weight, bias, node to replace) when `mm` is the matrix product of a linear
    layer whose intermediate results nothing else reads, else None."""
    if mm.kwargs:
        return None  # addmm's beta or alpha
    if mm.target is aten.mm.default:
        a, wt, bias = mm.args[0], mm.args[1], None
    elif mm.target is aten.addmm.default and len(mm.args) == 3:
        bias, a, wt = mm.args
        bias_val = _val(bias)
        if bias_val is None or bias_val.dim() != 1:
            return None
    else:
        return None
    if not (_only_user(wt, mm) and wt.target is aten.t.default):
        return None
    weight = wt.args[0]
    w, out = _val(weight), _val(mm)
    if w is None or out is None or w.dim() != 2 or not _static(out.shape):
        return None
    if isinstance(a, fx.Node) and a.target in _RESHAPES and _only_user(a, mm):
        x = a.args[0]
        xv = _val(x)
        if xv is None or xv.dim() < 2 or not _static(xv.shape):
            return None
        if xv.dim() == 2:
            return x, weight, bias, mm
        if not xv.is_contiguous():
            return None  # linear multiplies such an input with bmm, not this mm
        # The product is viewed back to the input's leading dimensions.
        users = list(mm.users)
        back = users[0] if len(users) == 1 else None
        want = list(xv.shape[:-1]) + [out.shape[-1]]
        if back is None or back.target not in _RESHAPES or list(_val(back).shape) != want:
            return None
        return x, weight, bias, back
    av = _val(a)
    if av is None or av.dim() != 2:
        return None
    return a, weight, bias, mm


def _narrow_args(node: fx.Node):
    """slice(x, dim, start, end) as x.narrow(dim, start, length) when its step is 1 and its
    start and result are static (narrow takes a length, which the result's size gives), else
    None."""
    args = list(node.args) + [0, None, None, 1][len(node.args) - 1:]
    x, dim, start, step = args[0], args[1], args[2] or 0, args[4]
    out, xv = _val(node), _val(x)
    if step != 1 or out is None or xv is None or not _static(out.shape) or not _static(xv.shape):
        return None
    if not isinstance(dim, int) or not isinstance(start, int):
        return None
    dim %= xv.dim()
    start = min(max(start + xv.shape[dim] if start < 0 else start, 0), xv.shape[dim])
    return (x, dim, start, out.shape[dim])


def lighten(graph: fx.Graph) -> int:
    """Rewrites `graph`'s linear layers to one call each, its view operations to Tensor methods
    and its convolutions and matrix products to torch functions (see the module docstring);
    returns how many nodes it rewrote."""
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.mm.default, aten.addmm.default):
            continue
        parts = _linear_parts(node)
        if parts is None:
            continue
        x, weight, bias, replaced = parts
        with graph.inserting_before(replaced):
            args = (x, weight) if bias is None else (x, weight, bias)
            linear = graph.call_function(torch._C._nn.linear, args)
        linear.meta = dict(replaced.meta)
        replaced.replace_all_uses_with(linear)
        # The replaced chain, last first: what it read has no other reader (_linear_parts).
        for dead in dict.fromkeys([replaced, node, *node.args]):
            if isinstance(dead, fx.Node) and not dead.users and dead.op == "call_function":
                graph.erase_node(dead)
        rewritten += 1
    for node in list(graph.nodes):
        if node.op != "call_function" or node.kwargs:
            continue
        if node.target in _FUNCTIONS:
            with graph.inserting_before(node):
                call = graph.call_function(_FUNCTIONS[node.target], node.args)
            call.meta = dict(node.meta)
            node.replace_all_uses_with(call)
            graph.erase_node(node)
            rewritten += 1
            continue
        if node.target in _METHODS:
            name, args = _METHODS[node.target], node.args
        elif node.target is aten.slice.Tensor and _narrow_args(node) is not None:
            name, args = "narrow", _narrow_args(node)
        else:
            continue
        with graph.inserting_before(node):
            method = graph.call_method(name, args)
            method.meta = dict(node.meta)
            node.replace_all_uses_with(method)
            graph.erase_node(node)
            rewritten += 1
    return rewritten
