"""The host side of a compiled graph, made cheap.

A step of a compiled graph issues every aten call its FX code makes, through Python. Three kinds
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
  same arguments (a convolution's several lists above all);
- a half-precision 2-D convolution that aten would run on cuDNN goes through two layers of
  dispatch and checks (``convolution``, then ``_convolution``, which selects the backend) on its
  way to ``cudnn_convolution``; the selection depends only on what the graph's meta values fix
  (device, dtype, sizes, strides, the convolution's arguments) and on cuDNN's flags, so it is
  made once, when the graph is compiled (torch's own ``_select_conv_backend``), and the call
  goes to ``cudnn_convolution`` with the flags read at each call, as ``_convolution`` reads
  them. The same cuDNN call on the same operands: the same result, bit for bit.

``lighten(graph)`` rewrites these in place. It changes no values: every rewritten node computes
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


# The flags _convolution passes to cuDNN, read at each call as it reads them.
_cudnn_enabled = torch._C._get_cudnn_enabled
_cudnn_benchmark = torch._C._get_cudnn_benchmark
_cudnn_deterministic = torch._C._get_cudnn_deterministic
_deterministic_algorithms = torch._C._get_deterministic_algorithms
_cudnn_allow_tf32 = torch._C._get_cudnn_allow_tf32


def cudnn_convolution(x, weight, bias, stride, padding, dilation, groups):
    """``aten.convolution(x, weight, bias, stride, padding, dilation, False, [0, 0], groups)``
    for operands that aten runs on cuDNN (see _cudnn_convolution_args): cuDNN's convolution
    with the flags _convolution would pass it, then the bias added as _convolution adds it.
    With cuDNN turned off since the graph was compiled, aten's convolution, which then picks
    another backend."""
    if not _cudnn_enabled():
        return torch.convolution(x, weight, bias, stride, padding, dilation, False, [0, 0],
                                 groups)
    out = torch.cudnn_convolution(x, weight, padding, stride, dilation, groups,
                                  _cudnn_benchmark(),
                                  _cudnn_deterministic() or _deterministic_algorithms(),
                                  _cudnn_allow_tf32())
    return out if bias is None else out.add_(bias.reshape(1, -1, 1, 1))


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


def _cudnn_convolution_args(node: fx.Node):
    """The arguments of cudnn_convolution (the function above) for a convolution node that aten
    would run on cuDNN whatever the flags, given the operands its meta values describe, else
    None: a 2-D, not transposed, not dilated convolution of fp16 or bf16 CUDA tensors of
    static sizes (dilation is where cuDNN's deterministic flag changes the selection; fp32 is
    where its TF32 settings would), whose input and weight are dense in the memory format
    aten's cuDNN path makes them (so that its copies to that format are no-ops)."""
    args = node.args
    if node.kwargs or len(args) != 9:
        return None
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    xv, wv, bv = _val(x), _val(weight), _val(bias)
    if (xv is None or wv is None or (bias is not None and bv is None) or transposed
            or xv.device.type != "cuda" or xv.dim() != 4
            or xv.dtype not in (torch.float16, torch.bfloat16) or wv.dtype != xv.dtype
            or (bv is not None and (bv.dtype != xv.dtype or bv.dim() != 1))
            or not _static(xv.shape) or not _static(wv.shape) or not _static(xv.stride())
            or not _static(wv.stride())):
        return None
    lists = (stride, padding, dilation, output_padding)
    if not all(isinstance(v, (list, tuple)) and len(v) == 2 and all(type(i) is int for i in v)
               for v in lists) or type(groups) is not int:
        return None
    if list(dilation) != [1, 1] or list(output_padding) != [0, 0]:
        return None
    backend = torch._C._select_conv_backend(xv, wv, bv, list(stride), list(padding),
                                            list(dilation), False, [0, 0], groups)
    if backend != torch._C._ConvBackend.Cudnn:
        return None
    fmt = torch._C._conv_determine_backend_memory_format(xv, wv, backend)
    if not (xv.is_contiguous(memory_format=fmt) and wv.is_contiguous(memory_format=fmt)):
        return None
    return (x, weight, bias, list(stride), list(padding), list(dilation), groups)


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
            target, args = _FUNCTIONS[node.target], node.args
            if node.target is aten.convolution.default:
                cudnn_args = _cudnn_convolution_args(node)
                if cudnn_args is not None:
                    target, args = cudnn_convolution, cudnn_args
            with graph.inserting_before(node):
                call = graph.call_function(target, args)
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
