"""The cudajit backend's attention rewrite (torch_cudajit/_attention.py), without a GPU: attention
written out as matmul, softmax and matmul, traced to aten with the backend's decompositions,
becomes scaled_dot_product_attention, and the rewritten graph computes what the original does;
forms it must not touch stay as they are."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from torch_cudajit import _attention, backend
from torch_cudajit._fusion_ops import decompositions

aten = torch.ops.aten


def traced(fn, *args):
    """fn's aten graph, decomposed as the backend decomposes it (values recorded as fake
    tensors)."""
    return make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args)


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def qkv(dtype, b=2, h=3, t=16, d=8):
    torch.manual_seed(0)
    return [torch.randn(b, h, t, d, dtype=dtype) for _ in range(3)]


def causal(q, k, v):
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v


FORMS = {
    "causal_scaled": causal,
    "divided": lambda q, k, v: F.softmax(q @ k.transpose(-2, -1) / 3.0, dim=-1) @ v,
    "unscaled": lambda q, k, v: torch.softmax(torch.matmul(q, k.transpose(-1, -2)), -1) @ v,
    "three_d": lambda q, k, v: F.softmax(q[0] @ k[0].transpose(1, 2) * 0.5, -1) @ v[0],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("form", list(FORMS))
def test_attention_written_out_becomes_fused_attention(form, dtype):
    fn = FORMS[form]
    args = qkv(dtype)
    gm = traced(fn, *args)
    assert aten.bmm.default in targets(gm)
    assert _attention.rewrite(gm) == 1
    assert aten.scaled_dot_product_attention.default in targets(gm)
    # Nothing of the written-out form is left: no matmul, no softmax, no mask.
    for gone in (aten.bmm.default, aten.amax.default, aten.exp.default, aten.tril.default):
        assert gone not in targets(gm), gm.graph
    want = fn(*args)
    got = gm(*args)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got, want, **tol)


def _other_mask(q, k, v):
    mask = torch.rand(q.shape[-2], k.shape[-2]) < 0.7
    return F.softmax((q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf")), -1) @ v


def _weights_returned(q, k, v):
    p = F.softmax(q @ k.transpose(-2, -1), -1)
    return p @ v, p


def _tensor_scale(q, k, v):
    return F.softmax(q @ k.transpose(-2, -1) * q.new_tensor(0.5), -1) @ v


def _other_dim(q, k, v):
    return F.softmax(q @ k.transpose(-2, -1), -2) @ v


def _offset_causal(q, k, v):
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool).tril(-1)
    return F.softmax((q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf")), -1) @ v


@pytest.mark.parametrize("fn", [_other_mask, _weights_returned, _tensor_scale, _other_dim,
                                _offset_causal], ids=lambda f: f.__name__.strip("_"))
def test_other_forms_stay_as_written(fn):
    gm = traced(fn, *qkv(torch.float32))
    before = targets(gm)
    assert _attention.rewrite(gm) == 0
    assert targets(gm) == before


def test_training_graphs_keep_the_written_out_form(monkeypatch):
    """A graph with a backward keeps its matmuls and softmax (the backward reads them); its
    inference graph gets the fused attention."""
    from torch_cudajit import _fusion
    monkeypatch.setattr(_fusion, "_fusable_device", lambda t: False)  # no kernels: CPU run
    torch._dynamo.reset()
    q, k, v = (t.requires_grad_() for t in qkv(torch.float32))
    run = torch.compile(causal, backend="cudajit")
    out = run(q, k, v)
    want = causal(q, k, v)
    torch.testing.assert_close(out, want)
    out.sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    want.sum().backward()
    for g, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, t.grad)
    forward = backend.compiled_graphs()[-2].graph_module
    assert torch.bmm in targets(forward)  # called through its torch function (_host.lighten)
    assert aten.scaled_dot_product_attention.default not in targets(forward)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(run(q, k, v), want)
    inference = backend.compiled_graphs()[-1].graph_module
    assert aten.scaled_dot_product_attention.default in targets(inference)
    assert not {aten.bmm.default, torch.bmm} & set(targets(inference))
    torch._dynamo.reset()


def test_symbolic_batch_sizes_are_rewritten(monkeypatch):
    """A second batch size makes the batch a symbol (Dynamo's automatic dynamic shapes); the
    rewrite still applies, and a third batch size compiles nothing."""
    from torch_cudajit import _fusion
    monkeypatch.setattr(_fusion, "_fusable_device", lambda t: False)
    torch._dynamo.reset()
    run = torch.compile(causal, backend="cudajit")
    with torch.no_grad():
        for b in (2, 3):
            q, k, v = qkv(torch.float32, b=b)
            torch.testing.assert_close(run(q, k, v), causal(q, k, v))
        latest = backend.compiled_graphs()[-1]
        assert any(isinstance(a, torch.SymInt) for n in latest.graph_module.graph.nodes
                   if n.op == "placeholder" for a in [n.meta.get("val")])
        assert aten.scaled_dot_product_attention.default in targets(latest.graph_module)
        q, k, v = qkv(torch.float32, b=5)
        torch.testing.assert_close(run(q, k, v), causal(q, k, v))
        assert backend.compiled_graphs()[-1] is latest
    torch._dynamo.reset()
