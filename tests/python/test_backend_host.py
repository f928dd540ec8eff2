"""The compiled graph's host side (torch_cudajit/_host.py) without a GPU: linear layers that
AOTAutograd decomposed into t, view, mm or addmm and view become one linear call, view operations
become Tensor methods, and the rewritten graph computes bit for bit what the aten graph did (the
same matrix products, the same views)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from torch_cudajit._fusion_ops import decompositions
from torch_cudajit._host import lighten

aten = torch.ops.aten


def _graph(fn, *args):
    return make_fx(fn, decomposition_table=decompositions())(*args)


def _targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def _check_same(fn, *args):
    """Lightens fn's aten graph and checks it against the graph before, on fresh random inputs:
    equal values, shapes and strides. Returns the lightened graph module."""
    gm = _graph(fn, *args)
    before = _graph(fn, *args)
    lighten(gm.graph)
    gm.recompile()
    gm.graph.lint()
    fresh = [torch.randn_like(a) if isinstance(a, torch.Tensor) else a for a in args]
    want, got = before(*fresh), gm(*fresh)
    for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        assert g.shape == w.shape and g.stride() == w.stride()
        assert torch.equal(g, w)
    return gm


W, B = torch.randn(24, 16), torch.randn(24)



def _flat_twice(x):
    flat = x.view(-1, 16)
    return (flat @ W.t()).view(2, 5, 24), flat * 2


# name: (function, its input, whether its product becomes one linear call)
LINEARS = {
    "3d": (lambda x: F.linear(x, W), torch.randn(2, 5, 16), True),
    "3d_bias": (lambda x: F.linear(x, W, B), torch.randn(2, 5, 16), True),
    "4d_bias": (lambda x: F.linear(x, W, B), torch.randn(2, 3, 5, 16), True),
    "2d": (lambda x: F.linear(x, W), torch.randn(7, 16), True),
    "2d_bias": (lambda x: F.linear(x, W, B), torch.randn(7, 16), True),
    # A strided input that views as a matrix: linear would multiply it with bmm, not this mm.
    "view_of_strided": (lambda x: (x.view(-1, 16) @ W.t()).view(2, 5, 24),
                        torch.randn(2, 5, 32)[..., ::2], False),
    # The flattened input is also read by another operation: the linear takes the flat matrix.
    "view_read_elsewhere": (_flat_twice, torch.randn(2, 5, 16), True),
    # The product is returned flat, not viewed back to the input's dimensions.
    "flat_product": (lambda x: x.view(-1, 16) @ W.t(), torch.randn(2, 5, 16), False),
    "scaled_addmm": (lambda x: torch.addmm(B, x, W.t(), beta=0.5), torch.randn(7, 16), False),
}


@pytest.mark.parametrize("name", list(LINEARS))
def test_linear_layers_become_one_call(name):
    fn, x, fused = LINEARS[name]
    gm = _check_same(fn, x)
    targets = _targets(gm)
    assert (torch._C._nn.linear in targets) == fused, targets
    if fused:
        assert not {aten.mm.default, aten.addmm.default, aten.t.default} & set(targets), targets


VIEWS = {
    "view": (lambda x: x.view(6, 20) + 1, "view"),
    "t": (lambda x: x[0].t() + 1, "t"),
    "transpose": (lambda x: x.transpose(0, 2) + 1, "transpose"),
    "permute": (lambda x: x.permute(2, 0, 1) + 1, "permute"),
    "unsqueeze": (lambda x: x.unsqueeze(1) + 1, "unsqueeze"),
    "squeeze": (lambda x: x[:, :1].squeeze(1) + 1, "squeeze"),
    "select": (lambda x: x.select(1, 2) + 1, "select"),
    "expand": (lambda x: x[:, :1].expand(2, 3, 20) + 1, "expand"),
    "slice": (lambda x: x[..., 4:9] + 1, "narrow"),
    "slice_from_end": (lambda x: x[..., -3:] + 1, "narrow"),
    "slice_past_end": (lambda x: x[:, 1:100] + 1, "narrow"),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_operations_become_tensor_methods(name):
    fn, method = VIEWS[name]
    gm = _check_same(fn, torch.randn(2, 3, 20))
    assert method in _targets(gm)
    assert not any(isinstance(t, torch._ops.OpOverload) and t.is_view for t in _targets(gm)), _targets(gm)


# name: (function, its inputs, the torch function it calls after the rewrite)
ATEN_CALLS = {
    "convolution": (lambda x, w: F.conv2d(x, w, padding=1, stride=2),
                    (torch.randn(2, 4, 9, 9), torch.randn(6, 4, 3, 3)), torch.convolution),
    "grouped_convolution": (lambda x, w: F.conv2d(x, w, groups=2, dilation=2),
                            (torch.randn(2, 4, 9, 9), torch.randn(6, 2, 3, 3)), torch.convolution),
    "mm": (lambda a, b: a @ b, (torch.randn(5, 7), torch.randn(7, 3)), torch.mm),
    "bmm": (lambda a, b: a @ b, (torch.randn(2, 5, 7), torch.randn(2, 7, 3)), torch.bmm),
    "addmm": (lambda a, b: torch.addmm(B[:3], a, b), (torch.randn(5, 7), torch.randn(7, 3)),
              torch.addmm),
}


@pytest.mark.parametrize("name", list(ATEN_CALLS))
def test_convolutions_and_products_call_their_torch_function(name):
    fn, args, function = ATEN_CALLS[name]
    gm = _check_same(fn, *args)
    assert function in _targets(gm)
    assert not any(isinstance(t, torch._ops.OpOverload) and t in (
        aten.convolution.default, aten.mm.default, aten.bmm.default, aten.addmm.default)
        for t in _targets(gm)), _targets(gm)


def test_a_strided_slice_stays_aten():
    gm = _check_same(lambda x: x[:, ::2] + 1, torch.randn(4, 9))
    assert aten.slice.Tensor in _targets(gm)


def test_views_returned_by_the_graph_stay_views():
    """A view the graph returns is still a view of its input after the rewrite."""
    gm = _graph(lambda x: x.transpose(0, 1), torch.randn(3, 4))
    lighten(gm.graph)
    gm.recompile()
    x = torch.randn(3, 4)
    out = gm(x)
    assert out.data_ptr() == x.data_ptr() and out.stride() == (1, 4)


def test_symbolic_sizes_keep_the_linear_decomposed():
    """With a symbolic batch the product's shape is not static: nothing is recomposed (the
    rewrite reads sizes from the nodes' values, and comparing symbols would add guards)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=False)
    x = mode.from_tensor(torch.empty(4, 5, 16, device="meta"))
    w = mode.from_tensor(torch.empty(24, 16, device="meta"))
    with mode:  # the pattern AOTAutograd gives for a linear layer, as direct aten calls
        gm = make_fx(lambda x, w: torch.mm(x.view(-1, 16), w.t()).view(x.shape[0], 5, 24),
                     decomposition_table=decompositions(), tracing_mode="fake")(x, w)
    lighten(gm.graph)
    assert torch.mm in _targets(gm) and torch._C._nn.linear not in _targets(gm)


# name: (convolution, its operands as (shape, dtype, layout), whether aten's backend selection
# is cuDNN (this machine has no cuDNN: the selection is given), whether it calls cuDNN directly)
CONVOLUTIONS = {
    "bf16": (lambda x, w: F.conv2d(x, w, padding=1),
             [((2, 16, 8, 8), torch.bfloat16), ((16, 16, 3, 3), torch.bfloat16)], True, True),
    "fp16_bias_stride2": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
                          [((2, 16, 8, 8), torch.float16), ((8, 16, 3, 3), torch.float16),
                           ((8,), torch.float16)], True, True),
    "channels_last": (lambda x, w: F.conv2d(x, w),
                      [((2, 16, 8, 8), torch.float16, "channels_last"),
                       ((16, 16, 1, 1), torch.float16, "channels_last")], True, True),
    # fp32 is where cuDNN's TF32 settings would decide; left to aten.
    "fp32": (lambda x, w: F.conv2d(x, w),
             [((2, 16, 8, 8), torch.float32), ((16, 16, 3, 3), torch.float32)], True, False),
    # Dilation is where cuDNN's deterministic flag changes the selection.
    "dilated": (lambda x, w: F.conv2d(x, w, dilation=2),
                [((2, 16, 8, 8), torch.float16), ((16, 16, 3, 3), torch.float16)], True, False),
    "transposed": (lambda x, w: F.conv_transpose2d(x, w),
                   [((2, 16, 8, 8), torch.float16), ((16, 16, 3, 3), torch.float16)], True, False),
    "1d": (lambda x, w: F.conv1d(x, w),
           [((2, 16, 8), torch.float16), ((16, 16, 3), torch.float16)], True, False),
    # A channels-last input with a contiguous weight: aten's cuDNN path would copy the
    # weight to channels-last first.
    "mixed_layouts": (lambda x, w: F.conv2d(x, w),
                      [((2, 16, 8, 8), torch.float16, "channels_last"),
                       ((16, 16, 3, 3), torch.float16)], True, False),
    "not_cudnn": (lambda x, w: F.conv2d(x, w),
                  [((2, 16, 8, 8), torch.float16), ((16, 16, 3, 3), torch.float16)], False, False),
}


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_convolutions_that_aten_runs_on_cudnn_call_it_directly(name, monkeypatch):
    from test_backend import trace

    from torch_cudajit import _host
    fn, specs, selected, direct = CONVOLUTIONS[name]
    chosen = torch._C._ConvBackend.Cudnn if selected else torch._C._ConvBackend.Slow2d
    gm = trace(fn, *specs)
    monkeypatch.setattr(torch._C, "_select_conv_backend", lambda *a: chosen)
    lighten(gm.graph)
    targets = _targets(gm)
    assert (_host.cudnn_convolution in targets) == direct, targets
    assert aten.convolution.default not in targets and aten.convolution_backward not in targets
    if direct:
        (call,) = [n for n in gm.graph.nodes if n.target is _host.cudnn_convolution]
        x, w, b, stride, padding, dilation, groups = call.args
        conv = [n for n in call.args[:3] if n is not None]
        assert [n.op for n in conv] == ["placeholder"] * len(specs)
        assert dilation == [1, 1] and groups == 1
        assert (stride, padding) == (([2, 2], [1, 1]) if name == "fp16_bias_stride2" else
                                     ([1, 1], [1, 1]) if name == "bf16" else ([1, 1], [0, 0]))


def test_a_direct_cudnn_convolution_with_cudnn_turned_off_is_atens():
    """cuDNN turned off after the graph was compiled: aten's convolution, which picks another
    backend (here the CPU's), bit for bit, bias added."""
    from torch_cudajit._host import cudnn_convolution
    x, w, b = torch.randn(2, 4, 9, 9), torch.randn(6, 4, 3, 3), torch.randn(6)
    with torch.backends.cudnn.flags(enabled=False):
        for bias in (None, b):
            got = cudnn_convolution(x, w, bias, [2, 2], [1, 1], [1, 1], 1)
            assert torch.equal(got, F.conv2d(x, w, bias, stride=2, padding=1))
