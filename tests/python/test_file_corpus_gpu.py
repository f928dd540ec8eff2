"""llm.c's kernels, loaded from the unedited files, launch on the GPU and match the files' own CPU
references.

Each llm.c dev/cuda file (tests/corpus_files/llm.c) checks its kernels against a CPU function of
the same file (``gelu_forward_cpu``, ``softmax_forward_cpu``, ``adamw_cpu``, ...) with
``validate_result``. Here the kernel comes from ``torch_cudajit.load(path)`` and the reference
from the same file built by nvcc into a shared library (``_llmc_reference``). ``CASES`` holds one
entry per kernel: random inputs (``torch.randn``; never zeros), the grid, block and dynamic
shared memory the file's own launch wrapper uses (named in each case), the outputs (poisoned
with NaN before the launch), and validate_result's tolerance: ``|gpu - ref| <= tol +
|ref| * epsilon`` with the file's ``tol`` and epsilon ``FLT_EPSILON``, or 0.079 where the file
defines ENABLE_BF16 (its floatX is bfloat16) — assert_close with ``atol=tol, rtol=epsilon``.
Inputs of bfloat16 kernels are rounded to bfloat16 first and the reference gets those values.
Sizes are smaller than the files' mains (the references run on the CPU), keeping the
multiples the kernels assume.

Without a GPU the launches are skipped; the CPU tests still build every case (its reference
runs) and compile the kernel for exactly the case's arguments. They need nvcc, and skip
without it.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
from typing import Callable

import pytest
import torch

import _llmc_reference as llmc
import _support
from test_file_corpus import ARCH, BF16_FILES, KERNELS, kernels_of, load

FLT_EPSILON = 1.1920928955078125e-07
BF16_EPSILON = 0.079  # common.h's validate_result under ENABLE_BF16

NO_TOOLS = llmc.tools_available()
needs_nvcc = pytest.mark.skipif(NO_TOOLS is not None, reason=f"no CPU references: {NO_TOOLS}")


def validate_tol(stem: str, tol: float) -> dict:
    """validate_result(..., tol) of ``<stem>.cu`` as assert_close tolerances."""
    return dict(atol=tol, rtol=BF16_EPSILON if stem in BF16_FILES else FLT_EPSILON)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclasses.dataclass
class Launch:
    """One launch of a corpus kernel and what its arguments must hold afterwards."""

    #: the kernel's arguments: tensors (on the case's device) and Python numbers
    args: list
    grid: int | tuple
    block: int | tuple
    #: argument index -> the CPU reference's result (float32, on the CPU)
    expected: dict
    tol: dict
    #: arguments the kernel only writes: poisoned with NaN right before the launch
    outputs: tuple = ()
    shared_mem: int = 0


#: "file::kernel" -> (file stem, kernel, builder(device) -> Launch)
CASES: dict[str, tuple] = {}


def case(stem: str, *kernels: str):
    def register(fn: Callable):
        for kernel in kernels:
            cid = f"{stem}::{kernel}"
            assert cid not in CASES and kernel in KERNELS[stem], cid
            CASES[cid] = (stem, kernel, functools.partial(fn, kernel))
        return fn
    return register


def ref(stem: str, function: str, *args, restype=None):
    return llmc.reference_library(stem)(function, *args, restype=restype)


def randn(*shape, dtype=torch.float32):
    """Random normal values, rounded to `dtype` and returned as that dtype (on the CPU)."""
    return torch.randn(*shape).to(dtype)


def empty(n, dev, dtype=torch.float32):
    return torch.empty(n, dtype=dtype, device=dev)


# -- elementwise -----------------------------------------------------------------------------------

#: x128::size of a file whose floatX is bfloat16: 16 bytes / 2
X128_BF16 = 8


@case("gelu_forward", "gelu_forward_kernel1", "gelu_forward_kernel2")
def gelu_forward(kernel, dev):
    # gelu_forward1/2: grid ceil_div(N, block_size) / ceil_div(N, block_size * x128::size)
    stem, n, block = "gelu_forward", 4 * 64 * 768, 128
    inp = randn(n, dtype=torch.bfloat16)
    out = torch.empty(n)
    ref(stem, "gelu_forward_cpu", out, inp.float(), n)
    per_thread = 1 if kernel.endswith("1") else X128_BF16
    return Launch([empty(n, dev, torch.bfloat16), inp.to(dev), n],
                  ceil_div(n, block * per_thread), block, {0: out}, validate_tol(stem, 1e-2),
                  outputs=(0,))


@case("gelu_backward", "gelu_backward1", "gelu_backward2")
def gelu_backward(kernel, dev):
    # gelu_backward1/2 (launchers): grid ceil_div(N, block_size) / ceil_div(N, block_size * 8)
    stem, n, block = "gelu_backward", 4 * 64 * 768, 256
    inp, dout = randn(n, dtype=torch.bfloat16), randn(n, dtype=torch.bfloat16)
    dinp = torch.empty(n)
    ref(stem, "gelu_backward_cpu", dinp, inp.float(), dout.float(), n)
    per_thread = 1 if kernel.endswith("1") else X128_BF16
    return Launch([empty(n, dev, torch.bfloat16), inp.to(dev), dout.to(dev), n],
                  ceil_div(n, block * per_thread), block, {0: dinp}, validate_tol(stem, 1e-2),
                  outputs=(0,))


@case("residual_forward", "residual_forward_kernel1", "residual_forward_kernel2")
def residual_forward(kernel, dev):
    # residual_forward1/2: grid ceil_div(N, block_size) / ceil_div(N, block_size * x128::size)
    stem, n, block = "residual_forward", 4 * 64 * 768, 512
    inp1, inp2 = randn(n, dtype=torch.bfloat16), randn(n, dtype=torch.bfloat16)
    out = torch.empty(n)
    ref(stem, "residual_forward_cpu", out, inp1.float(), inp2.float(), n)
    per_thread = 1 if kernel.endswith("1") else X128_BF16
    return Launch([empty(n, dev, torch.bfloat16), inp1.to(dev), inp2.to(dev), n],
                  ceil_div(n, block * per_thread), block, {0: out}, validate_tol(stem, 1e-2),
                  outputs=(0,))


@case("permute", "permute_kernel")
def permute(kernel, dev):
    # main: blockSize 256, gridSize = ceil(total / 256); dims as in main
    stem, dims, block = "permute", (24, 42, 20, 32), 256
    total = 24 * 42 * 20 * 32
    matrix = randn(total)
    out = torch.empty(total)
    ref(stem, "permute_cpu", matrix, out, *dims)
    return Launch([matrix.to(dev), empty(total, dev), *dims], ceil_div(total, block), block,
                  {1: out}, validate_tol(stem, 1e-5), outputs=(1,))


@case("encoder_forward", "encoder_forward_kernel1", "encoder_forward_kernel2",
      "encoder_forward_kernel3")
def encoder_forward(kernel, dev):
    # encoder_forward1: grid ceil_div(B*T, block); 2: ceil_div(B*T*C, block);
    # 3: ceil_div(B*T*C, block * x128::size)
    stem, B, T, C, V, block = "encoder_forward", 4, 64, 768, 1024, 256
    inp = torch.randint(0, V, (B * T,), dtype=torch.int32)
    wte, wpe = randn(V * C, dtype=torch.bfloat16), randn(T * C, dtype=torch.bfloat16)
    out = torch.empty(B * T * C)
    ref(stem, "encoder_forward_cpu", out, inp, wte.float(), wpe.float(), B, T, C)
    n = {"encoder_forward_kernel1": B * T, "encoder_forward_kernel2": B * T * C,
         "encoder_forward_kernel3": ceil_div(B * T * C, X128_BF16)}[kernel]
    return Launch([empty(B * T * C, dev, torch.bfloat16), inp.to(dev), wte.to(dev), wpe.to(dev),
                   B, T, C], ceil_div(n, block), block, {0: out}, validate_tol(stem, 1e-2),
                  outputs=(0,))


# -- reductions ------------------------------------------------------------------------------------


def softmax_input(n, v):
    """main's input: random rows with three outliers (x20) each, so that the probabilities are
    not all about 1/V."""
    inp = torch.randn(n, v)
    outliers = torch.randint(0, v, (n, 3))
    for k in range(3):
        inp[torch.arange(n), outliers[:, k]] *= 20
    return inp.reshape(-1).contiguous()


@case("softmax_forward", "softmax_forward_kernel1", "softmax_forward_kernel2",
      "softmax_forward_kernel3", "softmax_forward_kernel4", "softmax_forward_online_kernel1",
      "softmax_forward_online_kernel2", "softmax_forward_kernel7",
      "softmax_forward_online_kernel8")
def softmax_forward(kernel, dev):
    # softmax_forward1..8 (the launchers); main validates every kernel against
    # softmax_forward_cpu with tol 1e-4
    stem, N, V, block = "softmax_forward", 64, 50257, 256
    inp = softmax_input(N, V)
    out = torch.empty(N * V)
    ref(stem, "softmax_forward_cpu", out, inp, N, V)
    grid, smem = {
        "softmax_forward_kernel1": (ceil_div(N, block), 0),
        "softmax_forward_kernel2": (N, block * 4),
        "softmax_forward_kernel3": (N, 32 * 4),  # softmax_forward3 forces block_size 32
        "softmax_forward_kernel4": (N, block // 32 * 4),
        "softmax_forward_online_kernel1": (ceil_div(N, block), 0),
        "softmax_forward_online_kernel2": (ceil_div(N * 32, block), 0),
        "softmax_forward_kernel7": (N, 2 * block // 32 * 4),
        "softmax_forward_online_kernel8": (ceil_div(N * 32, block), 0),
    }[kernel]
    if kernel == "softmax_forward_kernel3":
        block = 32
    return Launch([empty(N * V, dev), inp.to(dev), N, V], grid, block, {0: out},
                  validate_tol(stem, 1e-4), outputs=(0,), shared_mem=smem)


@case("crossentropy_forward", "crossentropy_forward_kernel1")
def crossentropy_forward(kernel, dev):
    # crossentropy_forward1: grid ceil_div(B*T, block_size); tol 1e-5
    stem, B, T, V, block = "crossentropy_forward", 4, 64, 50257, 128
    probs = torch.rand(B * T * V) * 0.99 + 0.01  # make_random_float_01, kept off zero
    targets = torch.randint(0, V, (B * T,), dtype=torch.int32)
    losses = torch.empty(B * T)
    ref(stem, "crossentropy_forward_cpu", losses, probs, targets, B, T, V)
    return Launch([empty(B * T, dev), probs.to(dev), targets.to(dev), B, T, V],
                  ceil_div(B * T, block), block, {0: losses}, validate_tol(stem, 1e-5),
                  outputs=(0,))


@case("crossentropy_softmax_backward", "crossentropy_softmax_backward_kernel1")
def crossentropy_softmax_backward(kernel, dev):
    # crossentropy_softmax_backward1: grid ceil_div(B*T*V, block_size); tol 1e-5. The kernel
    # and the reference accumulate into dlogits (+=): both start from the same random values.
    stem, B, T, V, block = "crossentropy_softmax_backward", 4, 16, 50257, 256
    dlogits0 = torch.randn(B * T * V)
    dlosses = torch.randn(B * T)
    probs = torch.rand(B * T * V) * 0.99 + 0.01
    targets = torch.randint(0, V, (B * T,), dtype=torch.int32)
    dlogits = dlogits0.clone()
    ref(stem, "crossentropy_softmax_backward_cpu", dlogits, dlosses, probs, targets, B, T, V)
    return Launch([dlogits0.to(dev), dlosses.to(dev), probs.to(dev), targets.to(dev), B, T, V],
                  ceil_div(B * T * V, block), block, {0: dlogits}, validate_tol(stem, 1e-5))


@case("layernorm_forward", "layernorm_forward_kernel1", "layernorm_forward_kernel3",
      "layernorm_forward_kernel4", "layernorm_forward_kernel5", "layernorm_forward_kernel6")
def layernorm_forward(kernel, dev):
    # layernorm_forward1/3/4/5/6 (launchers); main validates out, mean and rstd with tol 1e-5
    stem, B, T, C, block = "layernorm_forward", 4, 64, 768, 256
    N = B * T
    inp, weight, bias = randn(N * C), randn(C), randn(C)
    out, mean, rstd = torch.empty(N * C), torch.empty(N), torch.empty(N)
    ref(stem, "layernorm_forward_cpu", out, mean, rstd, inp, weight, bias, B, T, C)
    smem = 0
    if kernel == "layernorm_forward_kernel1":
        grid = ceil_div(N, block)
    elif kernel in ("layernorm_forward_kernel3", "layernorm_forward_kernel4"):
        grid = ceil_div(N * 32, block)
    elif kernel == "layernorm_forward_kernel5":
        grid = N
    else:  # layernorm_forward6: blocks of (32, block_size / 32) with (2 + block_y) * C floats
        block_y = block // 32
        grid, block, smem = ceil_div(N, block_y), (32, block_y), (2 + block_y) * C * 4
    return Launch([empty(N * C, dev), empty(N, dev), empty(N, dev), inp.to(dev), weight.to(dev),
                   bias.to(dev), N, C], grid, block, {0: out, 1: mean, 2: rstd},
                  validate_tol(stem, 1e-5), outputs=(0, 1, 2), shared_mem=smem)


@case("fused_residual_forward", "fused_residual_forward2", "fused_residual_forward3",
      "fused_residual_forward_kernel4", "fused_residual_forward_kernel5")
def fused_residual_forward(kernel, dev):
    # fused_residual_forward2..5 (launchers); main: residual_forward_cpu then
    # layernorm_forward_cpu on the residual, tol 5e-2 for bfloat16. N is a multiple of the
    # tokens per block: these kernels return on `idx > N` (not >=), so a partial last block
    # would write token N.
    stem, B, T, C, block = "fused_residual_forward", 4, 64, 768, 256
    N = B * T
    bf16 = torch.bfloat16
    inp1, inp2 = randn(N * C, dtype=bf16), randn(N * C, dtype=bf16)
    weight, bias = randn(C, dtype=bf16), randn(C, dtype=bf16)
    residual, normed = torch.empty(N * C), torch.empty(N * C)
    mean, rstd = torch.empty(N), torch.empty(N)
    ref(stem, "residual_forward_cpu", residual, inp1.float(), inp2.float(), N * C)
    ref(stem, "layernorm_forward_cpu", normed, mean, rstd, residual, weight.float(),
        bias.float(), B, T, C)
    smem = 0
    if kernel == "fused_residual_forward2":
        grid = ceil_div(N, block)
    else:  # one token per warp: blocks of (32, block_size / 32)
        block_y = block // 32
        grid, block = ceil_div(N, block_y), (32, block_y)
        if kernel == "fused_residual_forward_kernel5":
            smem = (2 + block_y) * C * 2  # sizeof(floatX)
    args = [empty(N * C, dev, bf16), empty(N * C, dev, bf16), empty(N, dev, bf16),
            empty(N, dev, bf16), inp1.to(dev), inp2.to(dev), weight.to(dev), bias.to(dev), N, C]
    return Launch(args, grid, block, {0: residual, 1: normed, 2: mean, 3: rstd},
                  validate_tol(stem, 5e-2), outputs=(0, 1, 2, 3), shared_mem=smem)


# -- matmul and optimizer --------------------------------------------------------------------------


@case("matmul_forward", "matmul_forward_kernel1", "matmul_forward_kernel4")
def matmul_forward(kernel, dev):
    # matmul_forward1: grid (ceil_div(B*T, sqrt_block), ceil_div(OC, sqrt_block)), block
    # (sqrt_block, sqrt_block); matmul_forward4: sqrt_block 16, grid over 128x128 tiles (B*T
    # and OC multiples of 128, C of 32). main's tol is 1e-1.
    stem, B, T, C, OC, sq = "matmul_forward", 2, 128, 256, 384, 16
    inp, weight, bias = randn(B * T * C), randn(OC * C), randn(OC)
    out = torch.empty(B * T * OC)
    ref(stem, "matmul_forward_cpu", out, inp, weight, bias, B, T, C, OC)
    if kernel == "matmul_forward_kernel1":
        args = [empty(B * T * OC, dev), inp.to(dev), weight.to(dev), bias.to(dev), B * T, C, OC]
        grid = (ceil_div(B * T, sq), ceil_div(OC, sq))
    else:
        args = [empty(B * T * OC, dev), inp.to(dev), weight.to(dev), bias.to(dev), C, OC]
        grid = (ceil_div(B * T, 8 * sq), ceil_div(OC, 8 * sq))
    return Launch(args, grid, (sq, sq), {0: out}, validate_tol(stem, 1e-1), outputs=(0,))


@case("adamw", "adamw_kernel1", "adamw_kernel2")
def adamw(kernel, dev):
    # adamw_dispatch1/2: block 512, grid ceil_div(num_parameters, 512); main's hyperparameters
    # (t = 10, adamw_cpu's defaults) and validate_result's default tol 1e-4 for params, m, v.
    # The kernel updates params, m and v in place: both sides start from the same values.
    stem, n, block, t = "adamw", 1 << 16, 512, 10
    lr, beta1, beta2, eps, weight_decay = 1e-3, 0.9, 0.999, 1e-8, 0.0
    params, grads, m = randn(n), randn(n), randn(n)
    v = torch.rand(n) * 0.99 + 0.01  # make_random_float_01, kept off zero
    beta1_correction = 1.0 - torch.tensor(beta1).pow(t).item()  # powf, as adamw() does
    beta2_correction = 1.0 - torch.tensor(beta2).pow(t).item()
    gpu = [x.to(dev) for x in (params, grads, m, v)]
    params, m, v = params.clone(), m.clone(), v.clone()
    ref(stem, "adamw_cpu", params, grads, m, v, t, n, lr, beta1, beta2, eps, weight_decay)
    args = [*gpu, n, lr, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay]
    return Launch(args, ceil_div(n, block), block, {0: params, 2: m, 3: v},
                  validate_tol(stem, 1e-4))


#: Every file with a case, for building their reference libraries at once.
CASE_FILES = sorted({stem for stem, _, _ in CASES.values()})


# -- tests -----------------------------------------------------------------------------------------

_DONE = {"built": set(), "matched": set()}


def _record(key: str, cid: str) -> None:
    _DONE[key].add(cid)
    _support.SUMMARY["llm.c CPU references"] = (
        f"llm.c CPU references: {len(CASES)} kernels of {len(CASE_FILES)} files in the table; "
        f"{len(_DONE['built'])} cases built on the CPU and compiled, "
        f"{len(_DONE['matched'])} launched on the GPU and matched")



def corpus_kernel(stem: str, name: str):
    """The kernel from ``cj.load(path)`` of the unedited file (a Kernel or a KernelModule)."""
    return kernels_of(load(stem))[name]


@pytest.fixture(scope="module")
def references():
    """Builds every case's reference library up front, nvcc processes in parallel."""
    if NO_TOOLS is not None:
        pytest.skip(f"no CPU references: {NO_TOOLS}")
    llmc.build_all(CASE_FILES)


def test_case_table_covers_enough():
    assert len(CASES) >= 12 and len(CASE_FILES) >= 6


@needs_nvcc
def test_reference_library_builds_and_gelu_matches_torch():
    """gelu_forward.cu's host code builds into a library whose gelu_forward_cpu is torch's tanh
    GELU."""
    lib = llmc.reference_library("gelu_forward")
    fn = lib.function("gelu_forward_cpu")
    assert fn.signature == "gelu_forward_cpu(float*, float const*, int)"
    x = torch.randn(4096)
    out = torch.full_like(x, float("nan"))
    lib("gelu_forward_cpu", out, x, x.numel())
    torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"))
    with pytest.raises(TypeError, match="takes a torch.float32 tensor"):
        lib("gelu_forward_cpu", out, x.double(), x.numel())


@needs_nvcc
def test_reference_with_a_return_value():
    """global_norm_cpu returns the sum of squares as a float (restype=)."""
    x = torch.randn(1000)
    got = ref("global_norm", "global_norm_cpu", x, x.numel(), restype=ctypes.c_float)
    assert got == pytest.approx((x.double() ** 2).sum().item(), rel=1e-5)


@pytest.mark.parametrize("cid", sorted(CASES))
def test_case_builds_on_cpu(cid, references):
    """Every case builds without a GPU (its reference runs and gives finite values), and the
    kernel compiles for exactly the case's arguments."""
    stem, name, build = CASES[cid]
    launch = build("cpu")
    for i, want in launch.expected.items():
        assert torch.isfinite(want).all(), (cid, i)
        assert launch.args[i].numel() == want.numel(), (cid, i)
    examples = [torch.empty_like(a, device="meta") if isinstance(a, torch.Tensor) else a
                for a in launch.args]
    compiled = corpus_kernel(stem, name).compile(*examples, arch=ARCH)
    assert compiled.cubin[:4] == b"\x7fELF"
    _record("built", cid)


@pytest.mark.gpu
@pytest.mark.parametrize("cid", sorted(CASES))
def test_kernel_matches_cpu_reference(cid, references, device):
    stem, name, build = CASES[cid]
    launch = build(device)
    for i in launch.outputs:
        launch.args[i].fill_(float("nan"))
    kernel = corpus_kernel(stem, name)
    kernel[launch.grid, launch.block, None, launch.shared_mem](*launch.args)
    torch.cuda.synchronize()
    for i, want in launch.expected.items():
        got = launch.args[i].float().cpu()
        torch.testing.assert_close(got, want, **launch.tol,
                                   msg=lambda m, i=i: f"{cid}: argument {i}: {m}")
    _record("matched", cid)
