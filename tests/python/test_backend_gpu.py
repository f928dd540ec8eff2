"""torch.compile(..., backend="cudajit") on the GPU: each fused operation against eager over
dtypes and layouts (contiguous, transposed, broadcast, zero-size), every supported reduction,
forward and backward through AOTAutograd, the three models, and new sizes that compile
nothing."""
from __future__ import annotations

import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

from torch.fx.experimental.proxy_tensor import make_fx

from torch_cudajit import _host, backend
from torch_cudajit._loader import _C

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import _backend_models as models  # noqa: E402
from _backend_cases import (BINARY, CATS, REDUCTIONS, UNARY, UNFUSED_REDUCTIONS,  # noqa: E402
                            WIDE)

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=5e-3, atol=5e-3),
       torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled(fn, **kw):
    return torch.compile(fn, backend="cudajit", fullgraph=True, **kw)


def fused_nodes() -> int:
    return sum(g.fused_nodes for g in backend.compiled_graphs())


def rand(shape, dtype, layout="contiguous"):
    """Random values in (0.5, 1.5) with random signs, never zero; `layout` "transposed" gives
    a non-contiguous view of the same shape."""
    if layout == "transposed" and len(shape) >= 2:
        base = torch.rand(*shape[:-2], shape[-1], shape[-2], device="cuda") + 0.5
        base = base.transpose(-1, -2)
    else:
        base = torch.rand(shape, device="cuda") + 0.5
    sign = torch.where(torch.rand(base.shape, device="cuda") < 0.5, -1.0, 1.0)
    return (base * sign).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_matches_eager(name, dtype):
    fn = UNARY[name]
    x = rand((33, 65), dtype, "transposed")
    got = compiled(lambda x: fn(x) * 2)(x)
    torch.testing.assert_close(got, fn(x) * 2, **TOL[dtype], equal_nan=True)
    assert fused_nodes() >= 2


LAYOUTS = ["same", "broadcast_row", "broadcast_col", "transposed", "scalar_tensor"]


def _pair(layout, dtype):
    a = rand((17, 40), dtype, "transposed" if layout == "transposed" else "contiguous")
    b = {"same": lambda: rand((17, 40), dtype),
         "broadcast_row": lambda: rand((40,), dtype),
         "broadcast_col": lambda: rand((17, 1), dtype),
         "transposed": lambda: rand((17, 40), dtype, "transposed"),
         "scalar_tensor": lambda: rand((), dtype)}[layout]()
    return a, b


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_matches_eager_with_broadcasting_and_strides(name, layout, dtype):
    fn = BINARY[name]
    a, b = _pair(layout, dtype)
    got = compiled(lambda a, b: torch.tanh(fn(a, b)))(a, b)
    torch.testing.assert_close(got, torch.tanh(fn(a, b)), **TOL[dtype], equal_nan=True)
    assert fused_nodes() >= 2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# Channels a multiple of 8 (runs whole and aligned) and not (runs cut short).
@pytest.mark.parametrize("shape", [(2, 16, 5, 3), (3, 20, 7, 9)], ids=str)
def test_channels_last_groups_match_eager(shape, dtype):
    """Batch norm's form and a residual on a channels-last activation: the kernel walks
    (N, H, W, C) and its output is channels-last, as eager's."""
    x = rand(shape, dtype).contiguous(memory_format=torch.channels_last)
    mean, var, w = (rand((shape[1], 1, 1), dtype) for _ in range(3))

    def fn(x, mean, var, w):
        return torch.relu((x - mean) * torch.rsqrt(var.abs() + 1e-5) * w) + x
    got = compiled(fn)(x, mean, var, w)
    want = fn(x, mean, var, w)
    torch.testing.assert_close(got, want, **TOL[dtype])
    assert got.stride() == want.stride()
    assert [launch.perm for launch in backend.compiled_graphs()[-1].launches] == [(0, 2, 3, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_convolutions_run_channels_last_and_return_eagers_layout(dtype):
    """ResNet's block in inference with options={"channels_last": True}: the convolutions take
    channels-last operands, the output has eager's layout, and a weight changed in place is
    seen."""
    model, (x,) = models.make("resnet", "cuda", dtype, small=True)
    model.eval()
    tol = TOL[dtype] if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    run = compiled(model, options={"channels_last": True})
    with torch.no_grad():
        got, want = run(x), model(x)
        torch.testing.assert_close(got, want, **tol)
        assert got.stride() == want.stride()
        graph = backend.compiled_graphs()[-1].graph_module.graph
        # _host.lighten: cuDNN's convolution called directly in half precision.
        want_target = torch.convolution if dtype == torch.float32 else _host.cudnn_convolution
        convs = [n for n in graph.nodes if n.target is want_target]
        assert len(convs) == 2 and all(
            n.args[0].meta["val"].is_contiguous(memory_format=torch.channels_last) for n in convs)
        model.conv2.weight.mul_(-0.5)
        torch.testing.assert_close(run(x), model(x), **tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 64, 8, 8), (3, 37, 5, 11)], ids=str)
@pytest.mark.parametrize("case", ["nchw_walk_reads_channels_last", "channels_last_walk_reads_nchw",
                                  "transposed_matrix"])
def test_runs_across_another_layout_match_eager(case, shape, dtype):
    """Run kernels whose consecutive threads differ first in another dimension than the runs'
    (cj::for_each_run's Across) against eager: channels and widths that are and are not
    multiples of a warp and of a run, outputs poisoned first by the allocator's reuse."""
    n, c, h, w = shape
    if case == "nchw_walk_reads_channels_last":
        def fn(y, x, s):
            return torch.relu(y * s + x).contiguous()
        args = (rand(shape, dtype).contiguous(memory_format=torch.channels_last),
                rand(shape, dtype), rand((c, 1, 1), dtype))
    elif case == "channels_last_walk_reads_nchw":
        def fn(x):
            return (x * 2).contiguous(memory_format=torch.channels_last)
        args = (rand(shape, dtype),)
    else:
        def fn(x, y):
            return x * y
        args = (rand((n * c, h * w + 3), dtype), rand((n * c, h * w + 3), dtype, "transposed"))
    torch.empty(4 * math.prod(shape) + 64, device="cuda", dtype=dtype).fill_(float("nan"))
    got = compiled(fn)(*args)
    want = fn(*args)
    torch.testing.assert_close(got, want, **TOL[dtype])
    assert got.stride() == want.stride()
    assert any(launch.across is not None for launch in backend.compiled_graphs()[-1].launches), \
        backend.compiled_graphs()[-1].source


# (input shape, weight shape, bias, stride, padding, groups, layout of the operands)
CUDNN_CONVOLUTIONS = {
    "3x3": ((4, 16, 12, 12), (24, 16, 3, 3), False, 1, 1, 1, "contiguous"),
    "3x3_bias_stride2": ((4, 16, 12, 12), (24, 16, 3, 3), True, 2, 1, 1, "contiguous"),
    "1x1_stride2": ((4, 16, 12, 12), (32, 16, 1, 1), False, 2, 0, 1, "contiguous"),
    "grouped": ((2, 16, 10, 10), (16, 4, 3, 3), False, 1, 1, 4, "contiguous"),
    "channels_last": ((4, 16, 12, 12), (24, 16, 3, 3), False, 1, 1, 1, "channels_last"),
    "channels_last_bias": ((4, 16, 12, 12), (24, 16, 3, 3), True, 1, 1, 1, "channels_last"),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(CUDNN_CONVOLUTIONS))
@pytest.mark.parametrize("flags", ["default", "benchmark", "deterministic", "cudnn_off"])
def test_direct_cudnn_convolutions_are_aten_bit_for_bit(case, dtype, flags):
    """_host.cudnn_convolution against aten's convolution on the same operands, under each of
    cuDNN's flags (read at each call), bit for bit with the same strides; the graph rewrite
    picks it for each case."""
    xs, ws, has_bias, stride, padding, groups, layout = CUDNN_CONVOLUTIONS[case]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = rand(xs, dtype).contiguous(memory_format=fmt)
    w = rand(ws, dtype).contiguous(memory_format=fmt)
    b = rand((ws[0],), dtype) if has_bias else None
    conv = [[stride] * 2, [padding] * 2, [1, 1]]

    def aten_conv(x, w, b):
        return torch.ops.aten.convolution.default(x, w, b, *conv, False, [0, 0], groups)
    gm = make_fx(aten_conv)(x, w, b)
    (node,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    for n, v in zip([n for n in gm.graph.nodes if n.op == "placeholder"], (x, w, b)):
        n.meta["val"] = v  # the operands themselves stand for their meta values
    assert _host._cudnn_convolution_args(node) is not None
    with torch.backends.cudnn.flags(enabled=flags != "cudnn_off",
                                    benchmark=flags == "benchmark",
                                    deterministic=flags == "deterministic"):
        want = aten_conv(x, w, b)
        got = _host.cudnn_convolution(x, w, b, *conv[:2], conv[2], groups)
    assert got.stride() == want.stride()
    assert torch.equal(got, want)


@pytest.mark.parametrize("src, dst", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                      (torch.float16, torch.float32), (torch.float32, torch.int32),
                                      (torch.int64, torch.float16), (torch.float32, torch.bool)])
def test_casts_match_eager(src, dst):
    x = (rand((50, 30), torch.float32) * 40).to(src)
    got = compiled(lambda x: (x * 3).to(dst))(x)
    torch.testing.assert_close(got, (x * 3).to(dst), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
# Rows that fit the register pass (partial runs among them), and one longer than a block of
# 512 threads keeps in registers (the streaming pass, at the block size the kernel's launch
# bounds allow).
@pytest.mark.parametrize("shape", [(7, 300), (3, 5, 1030), (4, 1), (2, 20000)], ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS) + list(UNFUSED_REDUCTIONS))
def test_reductions_match_eager(name, shape, layout, dtype):
    fn = {**REDUCTIONS, **UNFUSED_REDUCTIONS}[name]
    x = rand(shape, dtype, layout)
    got = compiled(lambda x: fn(x * 1.5))(x)
    want = fn(x * 1.5)
    tol = dict(TOL[dtype])
    if dtype == torch.float32:
        tol = dict(rtol=1e-4, atol=1e-4)
    # A sum in 16 bits is rounded once at its magnitude (eager rounds it before the next
    # operation; the kernel keeps it in float): the tolerance scales with it.
    tol["atol"] *= max(1.0, float(want.float().abs().nan_to_num().max()))
    torch.testing.assert_close(got, want, **tol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", list(CATS))
def test_cats_match_eager(name, layout, dtype):
    """Cats along the last dimension computed in their consumers' kernels (each branch at its
    own positions, over partial runs: 40 and 24 are not multiples of 16), of strided operands."""
    fn, _, cats = CATS[name]
    x, y = rand((6, 5, 40), dtype, layout), rand((6, 5, 24), dtype)
    got = compiled(fn)(x, y)
    torch.testing.assert_close(got, fn(x, y), **TOL[dtype])
    graph = backend.compiled_graphs()[-1].graph_module.graph
    assert sum(n.target is torch.ops.aten.cat.default for n in graph.nodes) == cats


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(WIDE))
def test_wide_graphs_match_eager(name, dtype):
    """Graphs whose one group would pass the bound on a kernel's parameters run as several
    kernels of at most that many (a cat too wide for it is left to aten)."""
    fn, shapes, least, _ = WIDE[name]
    inputs = [rand(s, dtype) for s in shapes]
    torch.testing.assert_close(compiled(fn)(*inputs), fn(*inputs), **TOL[dtype])
    assert len(backend.compiled_graphs()[-1].launches) >= least


@pytest.mark.parametrize("name", ["pointwise", "softmax", "sum"])
def test_zero_size_inputs(name):
    fn = {"pointwise": lambda x: torch.exp(x) + 1, "softmax": lambda x: F.softmax(x, -1),
          "sum": lambda x: x.sum(-1)}[name]
    for shape in [(0, 8), (4, 0)]:
        x = torch.randn(shape, device="cuda")
        torch.testing.assert_close(compiled(fn, dynamic=False)(x), fn(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_and_backward_through_aot_autograd(dtype):
    def fn(x, w, b):
        h = F.layer_norm(x, x.shape[-1:], w, b)
        return (F.gelu(h) * torch.sigmoid(h)).softmax(-1).sum()

    x = rand((6, 96), dtype).requires_grad_()
    w = rand((96,), dtype).requires_grad_()
    b = rand((96,), dtype).requires_grad_()
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    compiled(fn)(x, w, b).backward()
    fn(xr, wr, br).backward()
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, **TOL[dtype])
    assert len(backend.compiled_graphs()) >= 2  # a forward and a backward graph


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", models.MODELS)
def test_models_match_eager_in_training_and_inference(name, dtype):
    model, inputs = models.make(name, "cuda", dtype, small=True)
    ref_model, _ = models.make(name, "cuda", dtype, small=True)
    ref_model.load_state_dict(model.state_dict())
    tol = TOL[dtype] if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    # Training: forward and backward, batch norm in training mode.
    out = torch.compile(model, backend="cudajit")(*inputs)
    ref = ref_model(*inputs)
    torch.testing.assert_close(out, ref, **tol)
    out.float().square().mean().backward()
    ref.float().square().mean().backward()
    for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol, msg=lambda m: f"{n}: {m}")
    # Inference.
    torch._dynamo.reset()
    model.eval(), ref_model.eval()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="cudajit")(*inputs),
                                   ref_model(*inputs), **tol)
    assert fused_nodes() > 0
    graph = backend.compiled_graphs()[-1].graph_module.graph
    if name == "gpt2":  # its causal attention, written out, runs as aten's fused attention
        assert any(n.target is torch.ops.aten.scaled_dot_product_attention.default for n in graph.nodes)


def test_new_batch_sizes_compile_nothing():
    model, (x,) = models.make("gpt2", "cuda", torch.float32, small=True)
    run = torch.compile(model, backend="cudajit")
    with torch.no_grad():
        for b in (2, 3):  # the second size makes Dynamo trace once more, with a symbolic batch
            run(torch.randn(b, *x.shape[1:], device="cuda"))
        compiles = _C.nvrtc_compile_count()
        for b in (5, 8, 13):
            xb = torch.randn(b, *x.shape[1:], device="cuda")
            torch.testing.assert_close(run(xb), model(xb), rtol=1e-4, atol=1e-4)
    assert _C.nvrtc_compile_count() == compiles


def test_debug_option_prints_each_kernel_with_its_nodes(capfd):
    x = rand((8, 8), torch.float32)
    torch.compile(lambda x: torch.exp(x) + 1, backend="cudajit",
                  options={"debug": True})(x)
    err = capfd.readouterr().err
    assert "__global__ void fused_" in err and "aten.exp.default" in err


@pytest.mark.parametrize("form", ["lr", "-lr", "2 * lr", "lr / (1 + t)"])
def test_a_changing_learning_rate_compiles_two_graphs(form):
    """20 steps of an update whose learning rate changes every step, given as the argument or
    computed from it inside the compiled function: Dynamo compiles with the first value as a
    constant and once more with it symbolic; the kernels take it as a parameter."""
    from torch._dynamo.utils import counters
    counters.clear()
    w, g = rand((1000,), torch.float32), rand((1000,), torch.float32)
    rate = {"lr": lambda lr, t: lr, "-lr": lambda lr, t: -lr, "2 * lr": lambda lr, t: 2 * lr,
            "lr / (1 + t)": lambda lr, t: lr / (1 + t)}[form]
    step = compiled(lambda w, g, lr, t: w - rate(lr, t) * g * 0.5)
    for t in range(20):
        lr = 0.1 / (1 + t)
        torch.testing.assert_close(step(w, g, lr, t), w - rate(lr, t) * g * 0.5)
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
