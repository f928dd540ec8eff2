"""The models the cudajit torch.compile backend is checked and measured on: a GPT-2 block, a
LLaMA-style block and a ResNet basic block, with their inputs. Shared by
tests/python/test_backend_gpu.py and benchmarks/backend.py."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT2Block(nn.Module):
    """LayerNorm, causal self-attention (aten matmul and softmax), a GELU MLP, residuals."""

    def __init__(self, dim: int = 768, heads: int = 12):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def _rotary(x, cos, sin):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaBlock(nn.Module):
    """RMSNorm, attention with rotary embeddings (aten scaled_dot_product_attention), a
    SiLU-gated MLP, residuals."""

    def __init__(self, dim: int = 1024, heads: int = 16, hidden: int = 2816):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.RMSNorm(dim, eps=1e-6)
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.norm2 = nn.RMSNorm(dim, eps=1e-6)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = self.wqkv(self.norm1(x)).split(c, dim=2)
        q = _rotary(q.view(b, t, self.heads, hd), cos, sin).transpose(1, 2)
        k = _rotary(k.view(b, t, self.heads, hd), cos, sin).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def rotary_tables(t: int, hd: int, device, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(t, device=device, dtype=torch.float32), inv)
    ang = torch.cat((ang, ang), dim=-1)[None, :, None, :]
    return ang.cos().to(dtype), ang.sin().to(dtype)


class BasicBlock(nn.Module):
    """ResNet's basic block: convolutions from aten, batch norm and ReLU around them."""

    def __init__(self, channels: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


def make(name: str, device, dtype, *, batch: int = None, small: bool = False):
    """(model, inputs) for a model name: "gpt2", "llama" or "resnet". `small` gives sizes for
    tests."""
    torch.manual_seed(0)
    if name == "gpt2":
        dim, heads = (128, 4) if small else (768, 12)
        b, t = (batch or (2 if small else 8)), (32 if small else 1024)
        model = GPT2Block(dim, heads)
        inputs = (torch.randn(b, t, dim),)
    elif name == "llama":
        dim, heads, hidden = (128, 4, 352) if small else (1024, 16, 2816)
        b, t = (batch or (2 if small else 8)), (32 if small else 1024)
        model = LlamaBlock(dim, heads, hidden)
        cos, sin = rotary_tables(t, dim // heads, "cpu", torch.float32)
        inputs = (torch.randn(b, t, dim), cos, sin)
    elif name == "resnet":
        ch = 16 if small else 64
        b, hw = (batch or (2 if small else 32)), (8 if small else 56)
        model = BasicBlock(ch)
        inputs = (torch.randn(b, ch, hw, hw),)
    else:
        raise ValueError(f"unknown model {name!r}")
    model = model.to(device=device, dtype=dtype)
    return model, tuple(i.to(device=device, dtype=dtype) for i in inputs)


MODELS = ("gpt2", "llama", "resnet")


def inference_graph(model, inputs):
    """The aten graph of `model`'s inference on `inputs` (meta tensors), traced on fake tensors
    with the cudajit backend's decompositions: what the backend compiles, without a GPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch_cudajit._fusion_ops import decompositions
    mode = FakeTensorMode()
    with mode:
        params = {k: mode.from_tensor(v) for k, v in model.named_parameters()}
        buffers = {k: mode.from_tensor(v) for k, v in model.named_buffers()}
        fake = [mode.from_tensor(i) for i in inputs]

        def run(params, buffers, *inputs):
            return torch.func.functional_call(model, (params, buffers), inputs)
        return make_fx(run, decomposition_table=decompositions(), tracing_mode="fake")(
            params, buffers, *fake)
