"""The cudajit backend's channels-last pass (torch_cudajit/_layout.py) without a GPU: graphs
traced on fake CUDA tensors get channels-last operands for their 2-D convolutions, meta values
propagated again and outputs in eager's layout; the weights' kept copies."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from torch_cudajit._layout import KeptChannelsLast, channels_last_convolutions
from test_backend import trace

aten = torch.ops.aten


def _targets(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def _result(gm):
    """The node a one-output graph returns."""
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    return out.args[0][0] if isinstance(out.args[0], (tuple, list)) else out.args[0]


def _keepers(gm):
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, KeptChannelsLast)]


def _block(x, w1, w2, scale):
    """Two convolutions with pointwise work between them and a residual, as ResNet's."""
    y = torch.relu(F.conv2d(x, w1, padding=1) * scale)
    return torch.relu(F.conv2d(y, w2, padding=1) + x)


BLOCK = [((2, 16, 8, 8), torch.float16), ((16, 16, 3, 3), torch.float16),
         ((16, 16, 3, 3), torch.float16), ((16, 1, 1), torch.float16)]


def test_convolutions_take_channels_last_operands():
    """The first convolution's input is copied to channels-last; the second's, computed from
    the first's output, is channels-last already. Each weight goes through its keeper."""
    gm = trace(_block, *BLOCK)
    assert channels_last_convolutions(gm) == 2
    convs = _targets(gm, aten.convolution.default)
    copies = _targets(gm, aten.clone.default)
    assert len(convs) == 2 and len(_keepers(gm)) == 2
    for conv in convs:
        x, w = conv.args[0].meta["val"], conv.args[1].meta["val"]
        assert x.is_contiguous(memory_format=torch.channels_last)
        assert w.is_contiguous(memory_format=torch.channels_last)
        assert conv.meta["val"].is_contiguous(memory_format=torch.channels_last)
    # The input's copy, and the output's copy back to eager's layout.
    to_last = [c for c in copies if c.kwargs["memory_format"] == torch.channels_last]
    back = [c for c in copies if c.kwargs["memory_format"] == torch.contiguous_format]
    assert len(to_last) == 1 and to_last[0].args[0].op == "placeholder"
    assert len(back) == 1 and back[0] is _result(gm)


def test_convolutions_of_one_input_share_its_copy():
    """A block's input read by its first convolution and by a 1x1 downsampling one, as in
    ResNet's downsampling blocks: one copy to channels-last, read by both."""
    def block(x, w1, w2):
        return F.conv2d(x, w1, padding=1, stride=2) + F.conv2d(x, w2, stride=2)
    gm = trace(block, ((2, 16, 8, 8), torch.float16), ((32, 16, 3, 3), torch.float16),
               ((32, 16, 1, 1), torch.float16))
    assert channels_last_convolutions(gm) == 2
    copies = [c for c in _targets(gm, aten.clone.default)
              if c.kwargs["memory_format"] == torch.channels_last]
    # A 1x1 weight is channels-last as it is: only the 3x3 one is kept in a copy.
    assert len(copies) == 1 and len(copies[0].users) == 2 and len(_keepers(gm)) == 1
    args = [torch.randn(2, 16, 8, 8), torch.randn(32, 16, 3, 3), torch.randn(32, 16, 1, 1)]
    torch.testing.assert_close(gm(*args), block(*args), rtol=1e-5, atol=1e-5)


def test_outputs_keep_eagers_layout():
    """The rewritten graph returns what eager returns, in eager's layout (checked by running
    the graph: fake tensors carry no values)."""
    gm = trace(_block, *BLOCK)
    want = _result(gm).meta["val"]
    channels_last_convolutions(gm)
    assert _result(gm).meta["val"].stride() == want.stride()
    args = [torch.randn(s) for s, _ in BLOCK]
    eager = _block(*args)
    out = gm(*args)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    assert out.stride() == eager.stride()


@pytest.mark.parametrize("case", ["channels-last input", "1-D convolution", "CPU tensors"])
def test_convolutions_left_alone(case):
    """Operands already channels-last get no copy; a 1-D convolution and convolutions on a
    device the backend does not fuse for are left as they are."""
    if case == "channels-last input":
        gm = trace(lambda x, w: F.conv2d(x, w), ((2, 16, 8, 8), torch.float16, "channels_last"),
                   ((16, 16, 3, 3), torch.float16))
        assert channels_last_convolutions(gm) == 1
        assert not _targets(gm, aten.clone.default) and len(_keepers(gm)) == 1
        return
    if case == "1-D convolution":
        gm = trace(lambda x, w: F.conv1d(x, w), ((2, 16, 8), torch.float16),
                   ((16, 16, 3), torch.float16))
    else:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
        with FakeTensorMode():
            gm = make_fx(_block, tracing_mode="fake")(*[torch.empty(s) for s, _ in BLOCK])
    code = gm.code
    assert channels_last_convolutions(gm) == 0 and gm.code == code


def test_a_graph_whose_meta_values_cannot_be_propagated_again_is_left_as_it_was(monkeypatch):
    """Where fake tensors cannot run the graph again, the pass takes back its copies and every
    meta value: the convolutions keep the graph's layouts."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def fail(self, *args):
        raise RuntimeError("an operation without a fake implementation")
    gm = trace(_block, *BLOCK)
    code = gm.code
    vals = {n.name: n.meta.get("val") for n in gm.graph.nodes}
    monkeypatch.setattr(FakeTensorProp, "propagate_dont_convert_inputs", fail)
    assert channels_last_convolutions(gm) == 0
    gm.recompile()
    assert gm.code == code
    assert {n.name: n.meta.get("val") for n in gm.graph.nodes} == vals


@pytest.mark.parametrize("change", ["none", "in place", "through .data", "new tensor", "layout"])
def test_a_kept_weight_is_copied_again_only_when_it_changed(change):
    keep = KeptChannelsLast()
    w = torch.randn(8, 4, 3, 3)
    first = keep(w)
    assert first.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(first, w, rtol=0, atol=0)
    if change == "in place":
        w.mul_(2)
    elif change == "through .data":
        w.data = torch.randn(8, 4, 3, 3)  # new memory: a new data pointer
    elif change == "new tensor":
        w = torch.randn(8, 4, 3, 3)
    elif change == "layout":
        w = w.contiguous(memory_format=torch.channels_last)
    again = keep(w)
    assert (again is first) == (change == "none")
    torch.testing.assert_close(again, w, rtol=0, atol=0)
    assert again.is_contiguous(memory_format=torch.channels_last)


def test_an_inference_tensor_weight_is_copied_every_call():
    """Inference tensors have no version counter: nothing can tell a change, so nothing is
    kept."""
    keep = KeptChannelsLast()
    with torch.inference_mode():
        w = torch.randn(8, 4, 3, 3)
    first = keep(w)
    with torch.inference_mode():
        w.mul_(-1)
    again = keep(w)
    assert again is not first
    torch.testing.assert_close(again, w, rtol=0, atol=0)
