"""The corpus (tests/corpus/*.cu) launches unchanged on the GPU and matches a torch reference.

test_corpus.py compiles every corpus file for sm_90 from its ``// cj-corpus:`` header; this module
launches each one. ``GPU_CASES`` maps every corpus file (by stem) to a function that builds the
launch on a device: the arguments (random inputs, never zeros), the grid and block the kernel
assumes (warp reductions that need blockDim.x == 32, fixed 256-thread blocks, ...), the outputs to
poison before the launch and the expected contents of every tensor the kernel writes, computed in
Python (mostly float64 on the CPU), with tolerances where the kernel's math differs from torch's.

The CPU tests check that every corpus file has a case, and build every case on the CPU and compile
the kernel for exactly those arguments, so that a wrong argument list or a broken reference shows
up without a GPU.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import torch_cudajit as tcj
from _support import blocks, poison_, random_values
from test_corpus import CORPUS_FILES, read_entry

ARCH = "sm_90"

# Tolerances (torch.testing.assert_close keyword arguments).
EXACT = dict(rtol=0, atol=0)
F32 = dict(rtol=1e-5, atol=1e-5)  # float math against a float64 reference
F64 = dict(rtol=1e-12, atol=1e-14)
F16 = dict(rtol=2e-3, atol=1e-3)  # one fp16 rounding step apart
BF16 = dict(rtol=1.6e-2, atol=1e-2)  # one bf16 rounding step apart


@dataclasses.dataclass
class Launch:
    """One launch of a corpus kernel and what it must leave behind."""

    args: list
    grid: int | tuple
    block: int | tuple
    #: argument index -> the tensor that argument must hold after the launch
    expected: dict = dataclasses.field(default_factory=dict)
    #: argument index -> assert_close tolerances; EXACT where not given
    tol: dict = dataclasses.field(default_factory=dict)
    #: argument indices of tensors the kernel only writes: poisoned right before the launch
    outputs: tuple = ()
    #: dynamic shared memory in bytes (kernel[grid, block, None, shared_mem])
    shared_mem: int = 0
    #: (kernel, args) -> the launcher to use (e.g. a specialized kernel whose module variables
    #: were set); GPU only
    prepare: Callable | None = None
    #: an extra check of the arguments after the launch, for what `expected` cannot say
    check: Callable | None = None


GPU_CASES: dict[str, Callable[[torch.device], Launch]] = {}


def case(stem: str):
    def register(fn):
        assert stem not in GPU_CASES, stem
        GPU_CASES[stem] = fn
        return fn
    return register


def rand(shape, dev, dtype=torch.float32):
    """Random values, never zero: 0.5 <= |v| <= 2 for floating point (see _support)."""
    return random_values(shape if isinstance(shape, tuple) else (shape,), dtype, dev)


def empty(shape, dev, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device=dev)


def d64(t: torch.Tensor) -> torch.Tensor:
    """A float64 CPU copy (never an alias) of t, for references."""
    return t.detach().to("cpu", torch.float64, copy=True)


def f32(x: float) -> float:
    """x rounded to float32, as the kernel receives it for a float parameter."""
    return float(torch.tensor(x, dtype=torch.float32))


# -- the corpus, one case per file -------------------------------------------------------------------


@case("adam_step")
def _adam(dev):
    n = 1000
    param, grad = rand(n, dev), rand(n, dev)
    exp_avg = rand(n, dev) * 0.1
    exp_avg_sq = rand(n, dev).abs() * 0.01
    lr, b1, b2, eps, wd, step = f32(1e-2), f32(0.9), f32(0.999), f32(1e-8), f32(0.01), 10
    p, g, m, v = d64(param), d64(grad), d64(exp_avg), d64(exp_avg_sq)
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    p = p * (1 - lr * wd) - (lr / bc1) * m / (v.sqrt() / math.sqrt(bc2) + eps)
    return Launch([param, grad, exp_avg, exp_avg_sq, lr, b1, b2, eps, wd, step, n], blocks(n, 256), 256,
                  expected={0: p, 2: m, 3: v}, tol={0: F32, 2: F32, 3: dict(rtol=1e-5, atol=1e-7)})


@case("aos_offsetof")
def _aos(dev):
    count, total = 300, 305  # the last five particles are past `count` and stay as they are
    parts = rand((total, 7), dev)  # struct Particle: float pos[3], vel[3]; uint32_t flags (28 bytes)
    dt = 0.25  # a power of two: pos + dt * vel rounds once, on the GPU as here
    expected = parts.cpu().clone()
    expected[:count, 0:3] += dt * expected[:count, 3:6]
    return Launch([parts.view(torch.uint8), count, dt], blocks(count, 128), 128,
                  expected={0: expected.view(torch.uint8)})


@case("argmax_rows")
def _argmax(dev):
    rows, cols = 50, 100
    x = rand((rows, cols), dev)
    x[3, 17] = x[3, 60] = float("nan")  # NaN is the largest value; ties go to the smallest index
    x[5, 10] = x[5, 70] = 5.0
    xc = x.cpu()
    expected = torch.where(xc.isnan(), torch.inf, xc).argmax(dim=1)  # the first of equal maxima
    assert expected[3] == 17 and expected[5] == 10
    indices = empty(rows, dev, torch.int64)
    # one warp (threadIdx.x) per row, blockDim.y rows per block
    return Launch([x, indices, rows, cols], blocks(rows, 4), (32, 4), expected={1: expected},
                  outputs=(1,))


@case("bf16_silu_mul")
def _silu_mul(dev):
    tokens, d = 7, 300
    inp = rand((tokens, 2 * d), dev, torch.bfloat16)
    out = empty((tokens, d), dev, torch.bfloat16)
    xf, yf = inp[:, :d].cpu().float(), inp[:, d:].cpu().float()
    expected = (F.silu(xf) * yf).to(torch.bfloat16)
    return Launch([out, inp, d], tokens, 128, expected={0: expected}, tol={0: BF16}, outputs=(0,))


@case("bitonic_sort_smem")
def _bitonic(dev):
    n, nblocks = 1000, 3  # each block sorts the first n of its 1024 keys and leaves the rest
    keys = rand(nblocks * 1024, dev)
    expected = keys.cpu().clone().view(nblocks, 1024)
    expected[:, :n] = expected[:, :n].sort(dim=1).values
    return Launch([keys, n], nblocks, 256, expected={0: expected.view(-1)})


@case("block_max_limits")
def _block_max(dev):
    n, grid, block = 10000, 16, 256  # block_max<float, 256>: the block must have 256 threads
    x = rand(n, dev)
    per = grid * block
    padded = torch.full((blocks(n, per) * per,), -torch.inf)
    padded[:n] = x.cpu()
    expected = padded.view(-1, grid, block).amax(dim=(0, 2))
    return Launch([x, empty(grid, dev), n], grid, block, expected={1: expected}, outputs=(1,))


@case("cj_array_rownorm")
def _row_rms(dev):
    rows, cols, eps = 50, 64, 1e-5
    x, scale = rand((rows, cols), dev), rand(rows, dev)
    xd = d64(x)
    eps_used = max(f32(eps), torch.finfo(torch.float32).eps)
    rms = ((xd * xd).mean(dim=1, keepdim=True) + eps_used).sqrt()
    expected = xd / rms * d64(scale)[:, None]
    return Launch([x, scale, eps], blocks(rows, 32), 32, expected={0: expected}, tol={0: F32})


@case("coop_groups_norm")
def _l2_normalize(dev):
    rows, cols = 50, 100
    x = rand((rows, cols), dev)
    xd = d64(x)
    expected = xd / xd.norm(dim=1, keepdim=True).clamp_min(1e-12)
    # one 32-thread tile per row, four per block
    return Launch([empty((rows, cols), dev), x, rows, cols], blocks(rows, 4), 128,
                  expected={0: expected}, tol={0: F32}, outputs=(0,))


@case("cross_entropy")
def _cross_entropy(dev):
    rows, classes, ignore = 300, 37, -100
    logits = rand((rows, classes), dev) * 3
    targets = torch.randint(0, classes, (rows,), dtype=torch.int64)
    targets[::7] = ignore
    expected = F.cross_entropy(d64(logits), targets, reduction="none", ignore_index=ignore)
    assert (expected[::7] == 0).all()
    return Launch([logits, targets.to(dev), empty(rows, dev), rows, classes, ignore], blocks(rows, 128), 128,
                  expected={2: expected}, tol={2: F32}, outputs=(2,))


@case("cub_block_reduce")
def _cub_block(dev):
    n, grid, block = 10000, 16, 256  # tmpl=256: BLOCK_THREADS is the block size
    x = rand(n, dev)
    per = grid * block
    padded = torch.zeros(blocks(n, per) * per, dtype=torch.float64)
    padded[:n] = d64(x)
    expected = (padded * padded).view(-1, grid, block).sum(dim=(0, 2)).sqrt()
    return Launch([x, empty(grid, dev), n], grid, block, expected={1: expected}, tol={1: F32},
                  outputs=(1,))


@case("cub_warp_max")
def _cub_warp(dev):
    rows = 50  # 32-element rows, one warp each, four warps (temp_storage[4]) per block
    x = rand((rows, 32), dev)
    expected = x.cpu().amax(dim=1)
    return Launch([x, empty(rows, dev), rows], blocks(rows, 4), 128, expected={1: expected}, outputs=(1,))


@case("double_precision")
def _relative_error(dev):
    n = 1000
    actual, expect = rand(n, dev, torch.float64), rand(n, dev, torch.float64)
    a, e = d64(actual), d64(expect)
    expected = (a - e).abs() / e.abs().clamp_min(torch.finfo(torch.float64).eps)
    return Launch([empty(n, dev, torch.float64), actual, expect, n], blocks(n, 256), 256,
                  expected={0: expected}, tol={0: dict(rtol=1e-14, atol=0)}, outputs=(0,))


@case("float_bits_memcpy")
def _float_flip(dev):
    n = 1000
    x = rand(n, dev)
    bits = x.cpu().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    mask = torch.where((bits >> 31) == 1, 0xFFFFFFFF, 0x80000000)
    key = bits ^ mask
    expected = torch.where(key >= 2 ** 31, key - 2 ** 32, key).to(torch.int32)
    # the keys order as the floats do
    assert torch.equal(key.argsort(), x.cpu().argsort())
    return Launch([x, empty(n, dev, torch.int32), n], blocks(n, 256), 256, expected={1: expected},
                  outputs=(1,))


@case("functional_binary_op")
def _binary_op(dev):
    n = 1000
    a, b = rand(n, dev), rand(n, dev)
    ac, bc = a.cpu(), b.cpu()
    expected = torch.maximum(ac + bc, ac * bc)  # float32, rounded once each, as in the kernel
    return Launch([empty(n, dev), a, b, n], blocks(n, 256), 256, expected={0: expected}, outputs=(0,))


@case("gather_assert")
def _gather(dev):
    num_indices, num_embeddings, dim = 50, 80, 100
    table = rand((num_embeddings, dim), dev)
    idx = torch.randint(0, num_embeddings, (num_indices,), dtype=torch.int64)
    expected = table.cpu()[idx]
    return Launch([empty((num_indices, dim), dev), table, idx.to(dev), num_indices, num_embeddings, dim],
                  num_indices, 64, expected={0: expected}, outputs=(0,))


@case("gelu_erf")
def _gelu_erf(dev):
    n = 1000
    x = rand(n, dev, torch.float64)
    expected = F.gelu(d64(x))
    # grid-stride loop: 256 threads for 1000 elements
    return Launch([empty(n, dev, torch.float64), x, n], 2, 128, expected={0: expected}, tol={0: F64},
                  outputs=(0,))


@case("gelu_tanh_implicit")
def _gelu_tanh(dev):
    n = 1000
    x = rand(n, dev)
    expected = F.gelu(d64(x), approximate="tanh")
    return Launch([empty(n, dev), x, n], blocks(n, 256), 256, expected={0: expected},
                  tol={0: dict(rtol=2e-5, atol=2e-6)}, outputs=(0,))


@case("grid_sum_size_t")
def _grid_sum(dev):
    n, init = 5000, 1.5
    x = rand(n, dev)
    result = torch.full((1,), init, device=dev)  # atomicAdd accumulates onto what is there
    expected = (init + d64(x).sum()).reshape(1)
    # a warp shuffle reduction: whole warps; a grid-stride loop over 1024 threads
    return Launch([x, result, n], 4, 256, expected={1: expected}, tol={1: dict(rtol=1e-5, atol=1e-3)})


@case("half_exp")
def _half_sigmoid(dev):
    n = 1000
    x = rand(n, dev, torch.float16)
    expected = torch.sigmoid(d64(x)).half()
    return Launch([empty(n, dev, torch.float16), x, n], blocks(n, 256), 256, expected={0: expected},
                  tol={0: F16}, outputs=(0,))


@case("histogram_u8")
def _histogram(dev):
    n = 10000
    data = torch.randint(0, 256, (n,), dtype=torch.uint8)
    hist = torch.randint(1, 100, (256,), dtype=torch.int32)  # the kernel adds onto what is there
    expected = hist + torch.bincount(data.long(), minlength=256).to(torch.int32)
    return Launch([data.to(dev), hist.to(dev), n], 8, 256, expected={1: expected})


@case("implicit_prelude")
def _polar(dev):
    n = 500
    r = rand(n, dev)
    theta = ((torch.rand(n, dtype=torch.float64) * 2 - 1) * 3 * math.pi).float().to(dev)  # wrapped
    rd, td = d64(r), d64(theta)
    x, y = empty(n, dev), empty(n, dev)
    return Launch([x, y, r, theta, n], blocks(n, 128), 128,
                  expected={0: rd * td.cos(), 1: rd * td.sin()}, tol={0: F32, 1: F32}, outputs=(0, 1))


@case("layernorm")
def _layernorm(dev):
    rows, cols, eps = 50, 100, 1e-5
    x, gamma, beta = rand((rows, cols), dev), rand(cols, dev), rand(cols, dev)
    xd = d64(x)
    mean = xd.mean(dim=1)
    var = xd.var(dim=1, unbiased=False)
    y = (xd - mean[:, None]) / (var[:, None] + f32(eps)).sqrt() * d64(gamma) + d64(beta)
    # Welford over one warp only (shuffles, no shared memory): the block is one warp per row
    return Launch([x, gamma, beta, empty(rows, dev), empty((rows, cols), dev), rows, cols, eps], rows, 32,
                  expected={3: mean, 4: y}, tol={3: F32, 4: dict(rtol=1e-4, atol=1e-4)}, outputs=(3, 4))


@case("minmax_tuple")
def _minmax(dev):
    n, grid, block = 5000, 16, 32  # only warp 0's shuffle result is written: one warp per block
    x = rand(n, dev)
    per = grid * block
    lo = torch.full((blocks(n, per) * per,), torch.inf)
    hi = torch.full((blocks(n, per) * per,), -torch.inf)
    lo[:n] = hi[:n] = x.cpu()
    return Launch([x, empty(grid, dev), empty(grid, dev), n], grid, block,
                  expected={1: lo.view(-1, grid, block).amin(dim=(0, 2)),
                            2: hi.view(-1, grid, block).amax(dim=(0, 2))},
                  outputs=(1, 2))


@case("mixed_includes")
def _clip_grad(dev):
    n = 3000
    grads = rand(n, dev)
    g = d64(grads)
    norm_sq = torch.tensor([float((g * g).sum())], dtype=torch.float32)
    norm = math.sqrt(float(norm_sq))
    max_norm = f32(0.5 * norm)  # clips (and prints one line)
    scale = min(max_norm / (norm + 1e-6), 1.0)
    expected = (g * scale).clamp(-1e4, 1e4)
    return Launch([grads, norm_sq.to(dev), max_norm, n], 4, 256, expected={0: expected},
                  tol={0: F32})


@case("nan_check_printf")
def _check_finite(dev):
    n = 1000
    values = rand(n, dev)
    values[5], values[300], values[999] = float("nan"), float("inf"), -float("inf")
    found = torch.full((1,), 5, dtype=torch.int32, device=dev)  # counts on from here; prints three lines
    return Launch([values, found, n], blocks(n, 256), 256,
                  expected={1: torch.tensor([8], dtype=torch.int32)})


@case("quantize_int8")
def _quantize(dev):
    n, scale, zero_point = 3000, 0.05, 3
    x = rand(n, dev) * 4  # up to |80| after scaling: some saturate at -128 / 127
    inv_scale = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(scale, dtype=torch.float32)
    q = torch.round(x.cpu() * inv_scale).to(torch.int64) + zero_point  # half to even, as lrint
    q = q.clamp(-128, 127).to(torch.int16)
    assert (q == 127).any() and (q == -128).any()

    def check(args):
        got = args[1].view(torch.int8).to(torch.int16).cpu()
        # float32 products tie at .5 only by accident; allow a rounding step there
        torch.testing.assert_close(got, q, rtol=0, atol=1)
        assert (got == q).float().mean() > 0.99

    return Launch([x, empty(n, dev, torch.uint8), scale, zero_point, n], 4, 256, outputs=(1,), check=check)


@case("rmsnorm_half")
def _rmsnorm_half(dev):
    rows, hidden, eps = 20, 300, 1e-6
    x, w = rand((rows, hidden), dev, torch.float16), rand(hidden, dev, torch.float16)
    xd = d64(x)
    inv = 1.0 / ((xd * xd).mean(dim=1, keepdim=True) + eps).sqrt()
    # __float2half(x * inv) * weight: two fp16 roundings, as torch's half multiply does
    expected = (xd * inv).half() * w.cpu()
    return Launch([empty((rows, hidden), dev, torch.float16), x, w, eps, hidden], rows, 128,
                  expected={0: expected}, tol={0: dict(rtol=4e-3, atol=4e-3)}, outputs=(0,))


@case("rotary_embedding")
def _rotary(dev):
    tokens, heads, head_size, rot_dim, base = 10, 4, 64, 32, 10000.0
    query = rand((tokens, heads, head_size), dev)
    positions = torch.randint(0, 256, (tokens,), dtype=torch.int64)
    half = rot_dim // 2
    inv_freq = 1.0 / base ** (2.0 * torch.arange(half, dtype=torch.float64) / rot_dim)
    angle = positions.double()[:, None, None] * inv_freq  # (tokens, 1, half)
    q = d64(query)
    x, y = q[..., :half], q[..., half:rot_dim]
    expected = q.clone()
    expected[..., :half] = x * angle.cos() - y * angle.sin()
    expected[..., half:rot_dim] = y * angle.cos() + x * angle.sin()
    # float32 angles up to 255 rad (powf, sincosf): a few 1e-5 rad apart from float64's
    return Launch([query, positions.to(dev), heads, head_size, rot_dim, base], tokens, 48,
                  expected={0: expected}, tol={0: dict(rtol=1e-3, atol=1e-3)})


@case("softmax_block")
def _softmax_block(dev):
    rows, dim = 20, 1000  # a power-of-two tree reduction in sdata[256]: 256-thread blocks
    x = rand((rows, dim), dev)
    expected = torch.softmax(d64(x), dim=1)
    return Launch([empty((rows, dim), dev), x, dim], rows, 256, expected={0: expected},
                  tol={0: dict(rtol=1e-4, atol=1e-7)}, outputs=(0,))  # __expf


@case("softmax_warp")
def _softmax_warp(dev):
    rows, cols = 50, 100
    x = rand((rows, cols), dev)
    expected = torch.softmax(d64(x), dim=1)
    return Launch([empty((rows, cols), dev), x, rows, cols], blocks(rows, 4), 128, expected={0: expected},
                  tol={0: dict(rtol=1e-5, atol=1e-7)}, outputs=(0,))


@case("topk_heap")
def _topk(dev):
    n, grid, block, k = 500, 2, 32, 8  # 64 threads: threads 52..63 see only 7 values
    x = rand(n, dev)
    xc, threads = x.cpu(), grid * block
    rows = []
    for t in range(threads):
        vals = xc[t::threads].topk(min(k, len(xc[t::threads]))).values  # descending
        rows.append(torch.cat([vals, torch.full((k - len(vals),), -torch.inf)]))
    expected = torch.cat(rows)
    assert torch.isinf(expected).sum() == 12
    return Launch([x, empty(threads * k, dev), n], grid, block, expected={1: expected}, outputs=(1,))


@case("type_dispatch")
def _scale_cast(dev):
    n, alpha = 320, 1.75  # no bounds check: one thread per element, n a multiple of the block
    x = rand(n, dev, torch.float16)
    expected = (x.cpu().float() * alpha).half()
    return Launch([empty(n, dev, torch.float16), x, alpha], n // 64, 64, expected={0: expected},
                  outputs=(0,))


@case("using_namespace_std")
def _smooth_l1(dev):
    n, beta = 1000, 1.0
    inp, target = rand(n, dev), rand(n, dev)
    expected = F.smooth_l1_loss(d64(inp), d64(target), reduction="none", beta=beta)
    return Launch([empty(n, dev), inp, target, beta, n], blocks(n, 256), 256, expected={0: expected},
                  tol={0: F32}, outputs=(0,))


@case("vectorized_array")
def _axpby(dev):
    n, a, b = 1001, 1.5, -0.75  # 250 float4 threads and one scalar tail element
    x, y = rand(n, dev), rand(n, dev)
    expected = a * d64(x) + b * d64(y)
    return Launch([empty(n, dev), x, y, a, b, n], blocks(blocks(n, 4), 64), 64, expected={0: expected},
                  tol={0: F32}, outputs=(0,))


@case("welford_double_limits")
def _column_stats(dev):
    rows, cols = 70, 100
    x = rand((rows, cols), dev, torch.float64)
    xd = d64(x)
    return Launch([x, empty(cols, dev, torch.float64), empty(cols, dev, torch.float64), rows, cols],
                  blocks(cols, 32), 32, expected={1: xd.mean(dim=0), 2: xd.var(dim=0, unbiased=True)},
                  tol={1: dict(rtol=1e-10, atol=1e-12), 2: dict(rtol=1e-10, atol=1e-12)}, outputs=(1, 2))


# -- front-end idioms ------------------------------------------------------------------------------


@case("namespace_template")
def _namespace(dev):
    n, alpha = 1000, 0.5
    x, res = rand(n, dev, torch.float16), rand(n, dev, torch.float16)  # detail::to_float<__half>
    expected = (x.cpu().float() + alpha * res.cpu().float()).half()
    return Launch([empty(n, dev, torch.float16), x, res, alpha, n], blocks(n, 128), 128,
                  expected={0: expected}, tol={0: F16}, outputs=(0,))


@case("preprocessor_disabled")
def _leaky_relu(dev):
    n, slope = 1000, 0.125
    x = rand(n, dev)
    expected = F.leaky_relu(x.cpu(), slope)  # slope a power of two: exact
    return Launch([empty(n, dev), x, slope, n], blocks(n, 128), 128, expected={0: expected}, outputs=(0,))


@case("macro_param_types")
def _bias_gelu(dev):
    rows, cols = 30, 50
    x, bias = rand((rows, cols), dev), rand(cols, dev)
    v = (x.cpu() + bias.cpu()).double()  # the float sum, then erf in float
    expected = F.gelu(v)
    return Launch([empty((rows, cols), dev), x, bias, rows, cols], blocks(rows * cols, 128), 128,
                  expected={0: expected}, tol={0: dict(rtol=1e-4, atol=1e-5)}, outputs=(0,))


@case("typedef_bf16")
def _residual_bf16(dev):
    n = 1000
    a, b = rand(n, dev, torch.bfloat16), rand(n, dev, torch.bfloat16)
    expected = (a.cpu().float() + b.cpu().float()).bfloat16()  # exact in float, rounded once
    return Launch([empty(n, dev, torch.bfloat16), a, b, n], blocks(n, 128), 128, expected={0: expected},
                  outputs=(0,))


@case("optional_output")
def _rms_norm_stats(dev):
    rows, cols, eps = 50, 64, 1e-5
    x, w = rand((rows, cols), dev), rand(cols, dev)
    xd = d64(x)
    expected = xd / ((xd * xd).mean(dim=1, keepdim=True) + f32(eps)).sqrt() * d64(w)
    # rstd_out is None: a NULL pointer, so the kernel skips the store
    return Launch([empty((rows, cols), dev), x, w, None, rows, cols, eps], blocks(rows, 32), 32,
                  expected={0: expected}, tol={0: F32}, outputs=(0,))


@case("tag_unroll")
def _tag_unroll(dev):
    n, a, unroll = 1000, 1.5, 4  # the tag's value (4) selects axpy_unrolled<4>
    x = rand(n, dev)
    return Launch([empty(n, dev), x, a, n, unroll], blocks(n, 64 * unroll), 64,
                  expected={0: d64(x) * a}, tol={0: F32}, outputs=(0,))


@case("vector_pointers")
def _float4(dev):
    n4, scale, shift = 250, 1.5, -0.25
    x = rand(4 * n4, dev)  # float4* takes float32 tensors of whole, 16-byte aligned float4s
    expected = d64(x) * scale + shift
    return Launch([empty(4 * n4, dev), x, scale, shift, n4], blocks(n4, 64), 64, expected={0: expected},
                  tol={0: dict(rtol=1e-6, atol=1e-6)}, outputs=(0,))


@case("cucomplex_mul")
def _cmul(dev):
    n = 500
    x, h = rand(n, dev, torch.complex64), rand(n, dev, torch.complex64)
    expected = x.cpu().to(torch.complex128) * h.cpu().to(torch.complex128).conj()
    return Launch([empty(n, dev, torch.complex64), x, h, n], blocks(n, 128), 128, expected={0: expected},
                  tol={0: F32}, outputs=(0,))


@case("constant_coeffs")
def _poly(dev):
    n = 1000
    coeffs = torch.tensor([0.5, -1.25, 0.75, 0.3], dtype=torch.float32)
    x = rand(n, dev)
    xd, c = d64(x), coeffs.double()
    expected = c[0] + c[1] * xd + c[2] * xd ** 2 + c[3] * xd ** 3

    def prepare(kernel, args):
        sk = kernel.specialize(*args)
        table = sk.get_global("coeffs", torch.float32)
        assert tuple(table.shape) == (4,)
        table.copy_(coeffs.to(table.device))
        return sk

    return Launch([empty(n, dev), x, n], blocks(n, 128), 128, expected={0: expected}, tol={0: F32},
                  outputs=(0,), prepare=prepare)


@case("dynamic_smem_sum")
def _partial_sums(dev):
    n, block = 5000, 128  # each block sums 2 * block elements; blockDim.x floats of shared memory
    grid = blocks(n, 2 * block)
    x = rand(n, dev)
    padded = torch.zeros(grid * 2 * block, dtype=torch.float64)
    padded[:n] = d64(x)
    expected = padded.view(grid, 2 * block).sum(dim=1)
    return Launch([x, empty(grid, dev), n], grid, block, expected={1: expected}, tol={1: F32},
                  outputs=(1,), shared_mem=block * 4)


# -- running a case ----------------------------------------------------------------------------------


def load(path):
    entry = read_entry(path)
    kernel = tcj.jit(path.read_text(encoding="utf-8"), name=entry.name, filename=path.name,
                     template_args=entry.tmpl)
    assert kernel.name == entry.name
    return kernel


def build(path, dev) -> Launch:
    launch = GPU_CASES[path.stem](dev)
    for i in launch.outputs:
        assert isinstance(launch.args[i], torch.Tensor), (path.stem, i)
    for i, expected in launch.expected.items():
        got = launch.args[i]
        assert isinstance(got, torch.Tensor), (path.stem, i)
        assert tuple(expected.shape) == tuple(got.shape), (path.stem, i, expected.shape, got.shape)
    assert set(launch.tol) <= set(launch.expected), path.stem
    assert launch.expected or launch.check, f"{path.stem}: the case checks nothing"
    return launch


def test_every_corpus_file_has_a_gpu_case():
    stems = {p.stem for p in CORPUS_FILES}
    missing = sorted(stems - set(GPU_CASES))
    assert not missing, f"corpus files without a GPU case in test_corpus_gpu.GPU_CASES: {missing}"
    stale = sorted(set(GPU_CASES) - stems)
    assert not stale, f"GPU cases without a corpus file: {stale}"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_gpu_case_compiles_for_its_arguments(path):
    """The case builds on the CPU (its reference included) and the kernel compiles for exactly
    the arguments the GPU launch passes."""
    if path.stem not in GPU_CASES:
        pytest.fail(f"{path.name} has no GPU case")
    launch = build(path, torch.device("cpu"))
    c = load(path).compile(*launch.args, arch=ARCH)
    assert c.cubin[:4] == b"\x7fELF"


def test_disabled_kernels_are_not_listed():
    path = next(p for p in CORPUS_FILES if p.stem == "preprocessor_disabled")
    k = tcj.jit(path.read_text(encoding="utf-8"), filename=path.name)  # no name=: the only kernel
    assert k.name == "leaky_relu_kernel"


@pytest.mark.gpu
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_kernel_matches_torch(path, device):
    if path.stem not in GPU_CASES:
        pytest.fail(f"{path.name} has no GPU case")
    kernel = load(path)
    launch = build(path, device)
    launcher = launch.prepare(kernel, launch.args) if launch.prepare else kernel
    for i in launch.outputs:
        poison_(launch.args[i], launch.expected.get(i))
    if launch.shared_mem:
        launcher[launch.grid, launch.block, None, launch.shared_mem](*launch.args)
    else:
        launcher[launch.grid, launch.block](*launch.args)
    torch.cuda.synchronize(device)
    for i, expected in launch.expected.items():
        got = launch.args[i]
        torch.testing.assert_close(got, expected.to(device=got.device, dtype=got.dtype),
                                   **launch.tol.get(i, EXACT),
                                   msg=lambda m, i=i: f"{path.stem}: argument {i}: {m}")
    if launch.check:
        launch.check(launch.args)
