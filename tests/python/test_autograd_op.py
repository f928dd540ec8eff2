"""Differentiable ops from kernels: examples/fused_gelu.py (GELU's forward and backward kernels
as one torch.library.custom_op with register_autograd and register_fake) under gradcheck,
opcheck, eager autograd and torch.compile(fullgraph=True). The kernels launch, so every test
here needs a GPU; the example itself is what the README shows."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from _support import dtype_params, random_values

pytestmark = pytest.mark.gpu

_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fused_gelu.py")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("fused_gelu", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gradcheck(example, device):
    x = random_values((64, 33), torch.float64, device).requires_grad_()
    assert torch.autograd.gradcheck(example.gelu, (x,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(1000,), (64, 33)], ids=["1d", "2d"])
def test_opcheck(example, device, shape):
    x = random_values(shape, torch.float32, device).requires_grad_()
    torch.library.opcheck(example.gelu, (x,))
    dy = random_values(shape, torch.float32, device)
    torch.library.opcheck(example.gelu_backward, (dy, x.detach()))


@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64]))
def test_forward_and_backward_match_torch(example, device, dtype):
    x = random_values((257, 129), dtype, device).requires_grad_()
    ref = x.detach().clone().requires_grad_()
    dy = random_values((257, 129), dtype, device)
    y = example.gelu(x)
    y.backward(dy)
    expected = torch.nn.functional.gelu(ref)
    expected.backward(dy)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(x.grad, ref.grad)


def test_compiled_training_step_has_no_graph_break(example, device):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    w = random_values((128, 128), torch.float32, device).requires_grad_()
    x = random_values((64, 128), torch.float32, device)

    def loss_fn(w, x):
        return (example.gelu(x @ w) ** 2).mean()

    compiled = torch.compile(loss_fn, fullgraph=True)
    loss = compiled(w, x)
    loss.backward()
    grad = w.grad.clone()
    w.grad = None
    ref = (torch.nn.functional.gelu(x @ w) ** 2).mean()
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, w.grad)
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"], dict(counters["graph_break"])


def test_example_main_runs(example):
    example.main()
