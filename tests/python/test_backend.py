"""The cudajit torch.compile backend without a GPU: graphs traced on fake CUDA tensors (as
AOTAutograd hands them to the backend) are partitioned, their kernels generated and compiled
for sm_90 as one NVRTC program; what is fused and what stays aten; the registration under the
name "cudajit"; options; and models that run eagerly run compiled (on the CPU nothing fuses)."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import torch_cudajit as cj
from torch_cudajit import backend
from torch_cudajit._fusion import _row_threads as backend_threads, compile_graph, generate
from torch_cudajit._fusion_ops import decompositions
from torch_cudajit._loader import _C
from _backend_cases import BINARY, CATS, REDUCTIONS, UNARY, UNFUSED_REDUCTIONS, WIDE, chain

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import _backend_models as models  # noqa: E402

aten = torch.ops.aten


def trace(fn, *specs, dynamic=False):
    """The aten graph of `fn` on fake CUDA tensors: each spec a (shape, dtype) or (shape,
    dtype, layout), the layout "contiguous", "transposed" or "channels_last"."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    # Symbolic sizes: fake tensors of a shape environment (on the meta device, which the
    # backend fuses like CUDA).
    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=False) if dynamic else FakeTensorMode()
    args = []
    for spec in specs:
        shape, dtype = spec[0], spec[1]
        with mode if not dynamic else contextlib.nullcontext():
            device = "meta" if dynamic else "cuda"
            layout = spec[2] if len(spec) > 2 else "contiguous"
            if layout == "channels_last":
                t = torch.empty(shape, device=device, dtype=dtype,
                                memory_format=torch.channels_last)
            elif layout == "transposed":
                t = torch.empty(*shape[:-2], shape[-1], shape[-2], device=device,
                                dtype=dtype).transpose(-1, -2)
            else:
                t = torch.empty(shape, device=device, dtype=dtype)
        # A real meta tensor made fake by the mode gets a symbol for each size.
        args.append(mode.from_tensor(t) if dynamic else t)
    with mode:
        return make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args)


def compiled(fn, *specs, dynamic=False):
    return compile_graph(trace(fn, *specs, dynamic=dynamic), arch=90)


def called(gm) -> list:
    """The functions and the Tensor methods (by name) a graph calls."""
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


@pytest.mark.parametrize("name", list(UNARY))
def test_every_unary_operation_compiles_fused(name):
    c = compiled(lambda x: UNARY[name](x) * 2, ((33, 65), torch.bfloat16, "transposed"))
    assert c.fused_nodes >= 2 and len(c.launches) == 1, c.source


@pytest.mark.parametrize("name", list(BINARY))
def test_every_binary_operation_compiles_fused_with_broadcasting(name):
    c = compiled(lambda a, b: torch.tanh(BINARY[name](a, b)), ((17, 40), torch.float16),
                 ((40,), torch.float16))
    assert len(c.launches) == 1, c.source
    assert not any(t in (aten.add.Tensor, aten.mul.Tensor, aten.tanh.default)
                   for t in called(c.graph_module)), c.graph_module.code


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_every_reduction_fuses_into_one_row_kernel(name):
    c = compiled(lambda x: REDUCTIONS[name](x * 1.5), ((3, 5, 1030), torch.float32))
    assert len(c.launches) == 1 and c.launches[0].row, c.source
    assert "cj::block_reduce" in c.source


@pytest.mark.parametrize("name", list(UNFUSED_REDUCTIONS))
def test_other_reductions_stay_aten(name):
    c = compiled(lambda x: UNFUSED_REDUCTIONS[name](x * 1.5) + 1, ((6, 40), torch.float32))
    assert not any(launch.row for launch in c.launches), c.source


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", list(CATS))
def test_cats_along_the_last_dimension_fuse(name, layout):
    fn, kernels, cats = CATS[name]
    c = compiled(fn, ((6, 5, 40), torch.bfloat16, *([layout] if layout == "transposed" else [])),
                 ((6, 5, 24), torch.bfloat16))
    assert len(c.launches) == kernels, c.source
    assert called(c.graph_module).count(aten.cat.default) == cats, c.graph_module.code


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_cat_branch_computes_its_operand_at_its_own_positions(layout):
    c = compiled(CATS["rotate_half"][0],
                 ((6, 5, 40), torch.float32, *([layout] if layout == "transposed" else [])),
                 ((6, 5, 24), torch.float32))
    branches = c.source.split("const long long cj_c = cj_at[2] + cj_j;")[1]
    # The first branch negates the second half of x, read 20 positions on; the second reads
    # the first half; a lane past the row's end is never stored. No branch per lane: each
    # branch's loads are guarded by the lane's position and the position selects a value.
    first, second = branches.index("float v2_b0;"), branches.index("float v2_b1;")
    assert "static_cast<unsigned long long>(cj_c - 0LL) < 20ULL ?" in branches[first:second]
    assert "(-in" in branches[first:second]
    assert "static_cast<unsigned long long>(cj_c - 20LL) < 20ULL ?" in branches[second:]
    assert "v2 = cj_c < 20LL ? v2_b0 : cj_c < 40LL ? v2_b1 : static_cast<float>(0);" in branches
    assert " if (" not in branches
    # A branch's input of last stride 1 in the graph is read without a multiply by it.
    for array in ("in1", "in2"):
        step = f" * {array}.stride(2)]" in branches
        assert step == (layout == "transposed"), branches


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_cat_of_whole_runs_guards_and_selects_by_the_runs_start(layout):
    """Branches 16, 24 and 24 wide: every run of 8 lies in one branch, so the run's start
    (cj_at[2]) decides for all its lanes; the first branch has no lower bound, the last no
    upper one and is the select's default. A branch input of last stride 1 and other strides
    multiples of 8 is loaded as one aligned run before the lane loop, only by the runs of its
    branch; a transposed one (x) lane by lane behind the run's guard."""
    c = compiled(lambda x, y: torch.cat((x[..., :16] * 2, y, -x[..., 16:]), -1).exp(),
                 ((6, 5, 40), torch.float32, *([layout] if layout == "transposed" else [])),
                 ((6, 5, 24), torch.float32))
    guards = ["(cj_at[2] < 16LL)", "(cj_at[2] >= 16LL && cj_at[2] < 40LL)", "(cj_at[2] >= 40LL)"]
    # The branches' inputs are in0 (x's first slice), in1 (y) and in2 (x's second slice).
    for k, guard in enumerate(guards):
        whole = layout == "contiguous" or k == 1
        loaded = (f"if ({guard}) in{k}_br = in{k}.template load_aligned_run<8>(in{k}_cb + "
                  f"cj_at[2] - {[0, 16, 40][k]}LL);")
        assert (loaded in c.source) == whole, c.source
        assert (f"{guard} ? static_cast<float>(in{k}.data()" in c.source) == (not whole), c.source
    assert re.search(r"v\d+ = cj_at\[2\] < 16LL \? (v\d+)_b0 : cj_at\[2\] < 40LL \? \1_b1 : \1_b2;",
                     c.source), c.source
    assert "unsigned long long" not in c.source
    # The lane's position is computed only where a lane loads by it.
    assert ("const long long cj_c" in c.source) == (layout == "transposed"), c.source


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool], ids=str)
def test_cats_of_integer_and_bool_operands_compile(dtype):
    """A cat's guarded loads and its select in an integer or bool compute type (`long long(0)`
    is not C++: the zeros are casts)."""
    c = compiled(lambda i, j: torch.cat((i, j), -1).to(torch.float32) + 1,
                 ((6, 5, 36), dtype), ((6, 5, 28), dtype))
    assert len(c.launches) == 1 and "static_cast<unsigned long long>(cj_c - 36LL)" in c.source, c.source
    c = compiled(lambda i, y: torch.cat((i.float() * 2, y), -1) + 1, ((6, 5, 40), dtype),
                 ((6, 5, 24), torch.float32))
    assert len(c.launches) == 1, c.source


ALIGNED = {
    # name: (function, input specs, the arrays loaded or stored as aligned runs)
    # A contiguous input, a view of a wider one and a row-major output.
    "contiguous": (lambda x, y: x * y[..., :40] + 1, [((6, 5, 40), torch.bfloat16),
                                                     ((6, 5, 48), torch.bfloat16)],
                   {"out0", "in0", "in1"}),
    # Tables broadcast over the leading dimensions: strides 0 there, 1 along the last. The
    # output takes x's dimension order, as eager's would, and the kernel walks that order:
    # the output is written dense.
    "broadcast_table": (lambda x, t: (x.transpose(0, 1) * t).exp(),
                        [((5, 6, 48), torch.float16), ((48,), torch.float16)],
                        {"out0", "in0", "in1"}),
    # A view whose row stride (40 + 24) is a multiple of 8, as the LLaMA block's q in qkv.
    "view_of_wider": (lambda x, y: torch.cat((-x[..., 20:40], x[..., :20]), -1) * y[..., :40],
                      [((6, 5, 40), torch.float32), ((6, 5, 64), torch.float32)],
                      {"out0", "in2"}),
    # A last size that is not a multiple of 8: a run may be cut short, so none is aligned.
    "ragged": (lambda x, y: x * y + 1, [((6, 5, 36), torch.float32, "transposed"),
                                        ((6, 5, 36), torch.float32)], set()),
    # A row stride of 44: a run's offset is not a multiple of 8.
    "odd_row_stride": (lambda x, y: x.transpose(0, 1)[..., :40] * y,
                       [((5, 6, 44), torch.float32), ((6, 5, 40), torch.float32)],
                       {"out0", "in1"}),
}


@pytest.mark.parametrize("name", list(ALIGNED))
def test_runs_known_whole_and_aligned_move_as_vectors_without_checks(name):
    """Run kernels read an array with load_aligned_run (one vector, no checks of stride,
    length and address) where the graph's sizes and strides make every run whole, of last
    stride 1 and at a multiple of 8; with load_run otherwise."""
    fn, specs, aligned = ALIGNED[name]
    c = compiled(fn, *specs)
    assert re.search(r"cj::for_each_run<8(, \d)?>", c.source), c.source
    got = set(re.findall(r"(\w+)\.template (?:load|store)_aligned_run<8>", c.source))
    rest = set(re.findall(r"(\w+)\.template (?:load|store)_run<8>", c.source))
    assert got == aligned and not got & rest, c.source


# name: (function, its operands as (shape, dtype, layout), the walk's order, the Across of its
# runs (the walk's dimension consecutive threads' runs differ in first; None: row-major order))
ACROSS = {
    # ResNet's last group with channels-last convolutions: the convolution's output is
    # channels-last, the residual and the output NCHW. The walk is NCHW; the runs lie along W,
    # where the channels-last input's stride is C: consecutive threads take consecutive
    # channels, whose elements lie side by side.
    "nchw_walk_reads_channels_last": (
        lambda y, x, s: torch.relu(y * s + x).contiguous(),
        [((2, 64, 8, 8), torch.bfloat16, "channels_last"), ((2, 64, 8, 8), torch.bfloat16),
         ((64, 1, 1), torch.bfloat16)], None, 1),
    # The input's copy to channels-last: the walk is channels-last (runs along C), the NCHW
    # input has stride 1 along W, the walk's dimension 2.
    "channels_last_walk_reads_nchw": (
        lambda x: x.contiguous(memory_format=torch.channels_last),
        [((2, 64, 8, 8), torch.float16)], (0, 2, 3, 1), 2),
    "one_layout": (lambda x, y: x * y + 1,
                   [((2, 64, 8, 8), torch.float16), ((2, 64, 8, 8), torch.float16)], None, None),
    "both_channels_last": (
        lambda x, y: x * y + 1,
        [((2, 64, 8, 8), torch.float16, "channels_last"),
         ((2, 64, 8, 8), torch.float16, "channels_last")], (0, 2, 3, 1), None),
    # A per-channel table is one value a run: it does not pick the order.
    "table_only": (lambda x, t: x * t,
                   [((2, 64, 8, 8), torch.float16), ((64, 1, 1), torch.float16)], None, None),
    "transposed_matrix": (lambda x, y: x * y,
                          [((40, 48), torch.float32), ((40, 48), torch.float32, "transposed")],
                          None, 0),
}


@pytest.mark.parametrize("name", list(ACROSS))
def test_runs_that_read_another_layout_differ_first_where_it_is_dense(name):
    """A run kernel that reads a tensor element by element along its runs (stride other than
    0 and 1 there) hands consecutive runs to consecutive threads along the dimension where
    that tensor's stride is 1: cj::for_each_run's Across, in the walk's order."""
    fn, specs, perm, across = ACROSS[name]
    source, (plan,) = generate(trace(fn, *specs))
    assert (plan.perm, plan.across) == (perm, across), source
    if across is None:  # a run kernel in row-major order, or cj::elementwise
        assert "cj::for_each_run<8, " not in source, source
    else:
        assert f"cj::for_each_run<8, {across}>(out0" in source, source
    compiled(fn, *specs)  # and NVRTC compiles it


def test_runs_of_symbolic_strides_are_not_assumed_aligned():
    """Every size symbolic, the last among them: no run is known whole."""
    c = compiled(lambda x, y: x.transpose(0, 1) * y, ((5, 6, 40), torch.float32),
                 ((6, 5, 40), torch.float32), dynamic=True)
    assert "cj::for_each_run<8>" in c.source and "aligned_run" not in c.source, c.source


def test_symbolic_strides_that_are_multiples_of_8_for_every_size_keep_aligned_runs():
    """Batch and tokens symbolic, the head dimension a number (Dynamo's automatic dynamic
    shapes): q's row stride 192 * T is a multiple of 8 whatever T is, so q's runs, the table's
    and the output's are aligned; the graph gains no guard."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env, static_shapes=False)

    def fake(shape, dynamic):
        context = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dynamic])
        return mode.from_tensor(torch.empty(shape, device="meta", dtype=torch.bfloat16),
                                symbolic_context=context)

    qkv, table = fake((4, 12, 3 * 64), [True, True, False]), fake((12, 64), [True, False])

    def rotary(qkv, table):
        q = qkv[..., :64]
        return torch.cat((-q[..., 32:], q[..., :32]), -1) * table + q

    with mode:
        gm = make_fx(rotary, decomposition_table=decompositions(), tracing_mode="fake")(qkv, table)
    guards = len(env.guards)
    c = compile_graph(gm, arch=90)
    assert len(env.guards) == guards
    loads = set(re.findall(r"(\w+)\.template load_(?:aligned_)?run<8>", c.source))
    aligned = set(re.findall(r"(\w+)\.template (?:load|store)_aligned_run<8>", c.source))
    assert loads and loads | {"out0"} == aligned, c.source


def test_values_constant_along_a_run_are_loaded_and_computed_once_a_run():
    """Batch norm's form: per-channel statistics of last size 1 broadcast over (N, C, H, W).
    Each is one element a run, and what only they determine (the rsqrt) is computed before the
    lane loop; the activation is loaded as runs."""
    def bn(x, mean, var, w):
        return torch.relu((x - mean) * torch.rsqrt(var + 1e-5) * w)
    c = compiled(bn, ((2, 3, 5, 16), torch.float16), ((3, 1, 1), torch.float16),
                 ((3, 1, 1), torch.float16), ((3, 1, 1), torch.float16))
    body = c.source.split("__global__")[1]
    lanes = body.index("for (int cj_j = 0;")
    scalars = re.findall(r"const auto (in\d)_s = \1\.data\(\)\[\1\.offset_at\(cj_i, cj_at\)\];",
                         body[:lanes])
    runs = re.findall(r"const auto (in\d)_r = \1\.template load_(?:aligned_)?run<8>", body[:lanes])
    assert len(scalars) == 3 and len(runs) == 1 and runs[0] not in scalars, c.source
    assert body.index("cj::op::rsqrt") < lanes and body.count("cj::op::rsqrt") == 1


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_a_channels_last_group_walks_memory_order(layout):
    """Batch norm on a channels-last activation: the kernel walks (N, H, W, C), so runs lie
    along C, of stride 1, and every array, the per-channel statistics too, moves as aligned
    vectors; the launch hands the kernel each array permuted to that walk (the output and the
    activation dense) and returns the output channels-last, as eager does. A contiguous
    activation keeps S's own order."""
    def bn(x, mean, var, w):
        return torch.relu((x - mean) * torch.rsqrt(var + 1e-5) * w)
    c = compiled(bn, ((2, 16, 5, 3), torch.float16, layout), ((16, 1, 1), torch.float16),
                 ((16, 1, 1), torch.float16), ((16, 1, 1), torch.float16))
    (launch,) = c.launches
    assert launch.perm == ((0, 2, 3, 1) if layout == "channels_last" else None), c.source
    loads = set(re.findall(r"(\w+)\.template (?:load|store)_aligned_run<8>", c.source))
    if layout == "channels_last":
        assert "walked in dimension order (0, 2, 3, 1)" in c.source
        assert loads == {"out0", "in0", "in1", "in2", "in3"} and "_s = " not in c.source, c.source
    else:  # runs along W (3): not whole; the statistics are one element a run
        assert not loads and c.source.count("_s = ") == 3, c.source
    seen = []
    launch.launchers.clear()
    launch.launch_forall = lambda tasks: lambda *args: seen.append((tasks, args))
    memory_format = {"channels_last": torch.channels_last,
                     "contiguous": torch.contiguous_format}[layout]
    x = torch.randn(2, 16, 5, 3, dtype=torch.float16).to(memory_format=memory_format)
    stats = {n: torch.randn(16, 1, 1, dtype=torch.float16) for n in ("mean_1", "var_1", "w_1")}
    (out,) = launch(*[x if n.name == "x_1" else stats[n.name] for n in launch.reads])
    assert out.shape == (2, 16, 5, 3) and out.is_contiguous(memory_format=memory_format)
    (tasks, args), = seen
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    (activation,) = [t for t in tensors[1:] if t.data_ptr() == x.data_ptr()]
    statistics = [t for t in tensors[1:] if t is not activation]
    assert tensors[0].data_ptr() == out.data_ptr() and len(statistics) == 3
    if layout == "channels_last":
        assert tasks == 2 * 5 * 3 * (16 // 8)
        assert [t.shape for t in tensors] == [(2, 5, 3, 16)] * 5
        assert tensors[0].is_contiguous() and activation.is_contiguous()
        assert all(t.stride() == (0, 0, 0, 1) for t in statistics)
    else:
        assert tasks == 2 * 16 * 5 and [t.shape for t in tensors] == [(2, 16, 5, 3)] * 5
        assert all(t.stride() == (0, 1, 0, 0) for t in statistics)


def test_a_channels_last_group_of_whole_inputs_is_elementwise():
    """Every input read whole and dense in the walk's order: cj::elementwise over the permuted
    views, which are contiguous, so its 16-byte vectors apply."""
    c = compiled(lambda x, y: x * 2 + y, ((2, 16, 5, 3), torch.float16, "channels_last"),
                 ((2, 16, 5, 3), torch.float16, "channels_last"))
    (launch,) = c.launches
    assert launch.perm == (0, 2, 3, 1) and "cj::elementwise" in c.source, c.source
    seen = []
    launch.launchers.clear()
    launch.launch_forall = lambda tasks: lambda *args: seen.append((tasks, args))
    x, y = (torch.randn(2, 16, 5, 3, dtype=torch.float16).to(memory_format=torch.channels_last)
            for _ in range(2))
    (out,) = launch(x, y)
    assert out.is_contiguous(memory_format=torch.channels_last)
    (tasks, args), = seen
    assert tasks == out.numel() and args[-1] == out.numel()
    assert all(a.is_contiguous() and a.shape == (2, 5, 3, 16) for a in args[:3])


def test_groups_of_several_memory_orders_keep_the_order_of_s():
    """Outputs of different layouts (a channels-last and a contiguous one): no common memory
    order, so the kernel walks S as it is."""
    c = compiled(lambda x, y: (x * 2, (x + y).contiguous()),
                 ((2, 16, 5, 3), torch.float32, "channels_last"), ((2, 16, 5, 3), torch.float32))
    assert len(c.launches) == 1 and c.launches[0].perm is None, c.source


@pytest.mark.parametrize("exponent, code", [
    (2, "(in0_1 * in0_1)"), (3, "(in0_1 * in0_1 * in0_1)"),
    (-2, "(static_cast<float>(1LL) / (in0_1 * in0_1))"), (0.5, "cj::op::sqrt(in0_1)"),
    (-0.5, "cj::op::rsqrt(in0_1)"), (-1, "(static_cast<float>(1LL) / in0_1)"),
    (2.0, "(in0_1 * in0_1)"), (2.5, "cj::op::pow(in0_1, static_cast<float>(static_cast<double>(2.5)))")])
def test_powers_by_torchs_special_constants_are_products_and_roots(exponent, code):
    """As torch's own pow kernels compute them (the same results as eager, no logarithm and
    exponential per element); other exponents call pow."""
    c = compiled(lambda x: x ** exponent, ((6, 40), torch.float32))
    body = c.source.split("__global__")[1]
    assert code in body, c.source
    assert ("cj::op::pow" in body) == (exponent == 2.5)


@pytest.mark.parametrize("name", ["mixed_dtypes", "symbolic_size"])
def test_cats_that_stay_aten(name):
    if name == "mixed_dtypes":  # aten's cat promotes the operands' types itself
        c = compiled(lambda x, y: torch.cat((x, y), -1) * 2, ((6, 40), torch.float32),
                     ((6, 24), torch.float16))
    else:  # a symbolic size along the cat's dimension: a branch's bounds are constants
        c = compiled(lambda x: torch.cat((x, x), -1) * 2, ((6, 40), torch.float32), dynamic=True)
    assert aten.cat.default in called(c.graph_module), c.source
    assert len(c.launches) == 1


def test_a_reduction_over_another_dimension_stays_aten():
    c = compiled(lambda x: (x * 2).sum(0) + 1, ((8, 16), torch.float32))
    assert aten.sum.dim_IntList in called(c.graph_module)
    assert len(c.launches) == 2  # the multiply, and the add after the sum


def test_matmul_and_views_stay_aten_between_fused_groups():
    c = compiled(lambda x, w: F.gelu(x @ w).view(-1).softmax(-1), ((8, 16), torch.float32),
                 ((16, 32), torch.float32))
    targets = called(c.graph_module)
    # The product through its torch function, the view as a Tensor method (_host.lighten).
    assert torch.mm in targets and "view" in targets
    assert len(c.launches) == 2


def test_softmax_is_one_kernel_of_three_stages():
    c = compiled(lambda x: F.softmax(x, -1), ((64, 1000), torch.bfloat16))
    assert len(c.launches) == 1
    registers, streaming = c.source.split("if (cj_cols <= 16LL * blockDim.x)")[1].split("} else {")
    # The max, then the sum of exponentials, in either pass; the register pass reads the row
    # once and computes each exponential once, the streaming pass reads it in each stage.
    assert registers.count("cj::block_reduce") == streaming.count("cj::block_reduce") == 2
    assert registers.count("load_run<8>") == 1 and registers.count("cj::op::exp(") == 1
    assert streaming.count("cj::op::exp(") == 2
    # Launched with up to 512 threads a block, which the bound lets every kernel take.
    assert "__global__ void __launch_bounds__(512) fused_" in c.source
    assert backend_threads(1000) == 64 and backend_threads(20000) == 512
    assert "__nv_bfloat16" in c.source


def test_layer_norm_with_weight_and_bias_is_one_kernel():
    c = compiled(lambda x, w, b: F.layer_norm(x, (96,), w, b), ((4, 7, 96), torch.float16),
                 ((96,), torch.float16), ((96,), torch.float16))
    assert len(c.launches) == 1
    assert c.fused_nodes >= 8


def _rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


ROTARY = [((2, 8, 4, 32), torch.float32), ((2, 8, 4, 32), torch.float32),
          ((8, 1, 32), torch.float32), ((8, 1, 32), torch.float32)]


def test_siblings_that_read_one_tensor_are_one_kernel():
    """The rotary embeddings of q and of k (same shape, both reading cos and sin, neither
    reading the other) are one kernel: one launch, an output each, two cats."""
    c = compiled(lambda q, k, cos, sin: (_rotary(q, cos, sin), _rotary(k, cos, sin)), *ROTARY)
    (launch,) = c.launches
    assert len(launch.outputs) == 2, c.source
    assert len(re.findall(r"v\d+ = cj_at\[3\] < 16LL \? v\d+_b0 : v\d+_b1;", c.source)) == 2, c.source
    assert aten.cat.default not in called(c.graph_module)
    # cos and sin are read once a position, for both outputs.
    reads = [n.name for n in launch.reads]
    assert reads.count("cos_1") == 1 and reads.count("sin_1") == 1, reads


@pytest.mark.parametrize("case", ["one reads the other", "no common input", "other shapes",
                                  "one is a row group"])
def test_siblings_stay_apart(case):
    """Groups merge only where it is one launch for the same positions and no cycle."""
    m, big, sq = ((8, 32), torch.float32), ((4, 8, 32), torch.float32), ((32, 32), torch.float32)
    fn, specs = {
        # The second group reads the first's value through a matmul: merged, it would wait
        # for itself.
        "one reads the other": (lambda x, y: (lambda a: (a, (a @ y).exp() * x))(x * 2), [m, sq]),
        "no common input": (lambda x, y, z: (x.exp() + 1, (y @ z).sin() * 2), [m, m, sq]),
        "other shapes": (lambda x, y: (x.exp() + 1, (x + y).sin()), [m, big]),
        "one is a row group": (lambda x, y: (x.exp() + 1, F.softmax(x * y, -1)), [m, m]),
    }[case]
    c = compiled(fn, *specs)
    assert len(c.launches) == 2, c.source
    c.graph_module.graph.lint()


def test_greedy_fusion_never_makes_a_cycle():
    # `b` reads the sum of `a`'s group through an aten op; `c` reads both: joining `a`'s group
    # would make the group wait for itself.
    def fn(x):
        a = x * 2
        s = a.sum(0)              # aten (not the last dimension)
        return a + s, torch.exp(a)
    c = compiled(fn, ((8, 16), torch.float32))
    gm = c.graph_module
    gm.graph.lint()
    assert aten.sum.dim_IntList in called(gm)


def test_symbolic_sizes_become_kernel_arguments():
    c = compiled(lambda x, y: F.softmax(x * y, -1), ((8, 16), torch.float32),
                 ((8, 16), torch.float32), dynamic=True)
    assert len(c.launches) == 1
    assert "long long cj_rows, long long cj_cols" in c.source
    # Sizes are read from the inputs when the group runs: no size is written into the code.
    assert "16" not in c.source.split("__global__")[1].split("{")[0]


def test_generated_source_names_the_nodes_it_fuses():
    c = compiled(lambda x: torch.exp(x) + 1, ((8, 8), torch.float32))
    assert "aten.exp.default" in c.source and "aten.add.Tensor" in c.source
    assert c.source.count("__global__") == 1


@pytest.mark.parametrize("cpus, programs", [(2, 1), (4, 2), (16, 3)])
def test_kernels_of_a_graph_compile_as_one_nvrtc_program_per_thread(monkeypatch, cache_dir, cpus,
                                                                    programs):
    def fn(x, w):
        a = torch.exp(x) + 1
        b = F.softmax(a @ w, -1)
        return torch.tanh(b @ w.t()) * 3
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)  # threads: half the CPUs, at most 8
    before = _C.nvrtc_compile_count()
    c = compiled(fn, ((8, 16), torch.float32), ((16, 16), torch.float32))
    assert len(c.launches) == 3
    assert _C.nvrtc_compile_count() - before == programs


def test_compiled_graphs_are_kept_for_inspection():
    x = torch.randn(8, 8)
    torch._dynamo.reset()
    out = torch.compile(lambda x: torch.exp(x) + 1, backend="cudajit")(x)
    torch.testing.assert_close(out, torch.exp(x) + 1)
    assert backend.compiled_graphs()[-1].launches == []  # CPU tensors: nothing to fuse


def test_the_backend_is_registered_under_its_name():
    from torch._dynamo.backends.registry import list_backends, lookup_backend
    assert "cudajit" in list_backends(exclude_tags=())
    assert lookup_backend("cudajit") is backend.cudajit


@pytest.mark.parametrize("order", ["entry point first", "import first", "registry first"])
def test_the_name_resolves_whichever_registers_first(order):
    """The installed package's entry point and the import's registration never clash: torch
    loads the entry point on the first lookup, and the import leaves the name to it."""
    code = {
        "entry point first": "registry._lazy_import(); registry._BACKENDS['cudajit'] = EP\n"
                             "fn = registry.lookup_backend('cudajit'); import torch_cudajit\n",
        "import first": "import torch_cudajit; registry._lazy_import()\n"
                        "registry._BACKENDS['cudajit'] = EP; fn = registry.lookup_backend('cudajit')\n",
        "registry first": "registry._lazy_import(); registry._BACKENDS['cudajit'] = EP\n"
                          "import torch_cudajit; fn = registry.lookup_backend('cudajit')\n",
    }[order]
    script = ("import torch\nfrom importlib.metadata import EntryPoint\n"
              "from torch._dynamo.backends import registry\n"
              "EP = EntryPoint(name='cudajit', value='torch_cudajit.backend:cudajit', "
              "group='torch_dynamo_backends')\n" + code +
              "from torch_cudajit import backend\n"
              "assert fn is backend.cudajit and registry.lookup_backend('cudajit') is fn\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_import_does_not_import_dynamo():
    code = "import torch, sys, torch_cudajit; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("options, match", [
    ({"debgu": True}, "unknown option"),
    ({"channels_last": "yes"}, "option channels_last must be a bool, got 'yes'"),
])
def test_unknown_options_are_refused(options, match):
    torch._dynamo.reset()
    with pytest.raises(Exception, match=match):
        torch.compile(lambda x: x + 1, backend="cudajit", options=options)(torch.randn(3))


@pytest.mark.parametrize("name", ["gpt2", "llama", "resnet"])
def test_models_run_compiled_where_they_run_eagerly(name):
    torch._dynamo.reset()
    model, inputs = models.make(name, "cpu", torch.float32, small=True)
    torch.testing.assert_close(torch.compile(model, backend="cudajit")(*inputs), model(*inputs),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["gpt2", "llama", "resnet"])
def test_models_fuse_on_cuda_graphs(name):
    """The models' aten graphs (traced on fake tensors of the meta device, which the backend
    fuses as it does CUDA tensors) fuse and compile for sm_90."""
    model, inputs = models.make(name, "meta", torch.float32, small=True)
    model.eval()
    c = compile_graph(models.inference_graph(model, inputs), arch=90)
    # make_fx keeps batch norm an aten call (AOTAutograd's inference graphs decompose it).
    assert c.fused_nodes >= (3 if name == "resnet" else 8) and c.launches, c.source


def test_module_precompile_compiles_several_kernels_as_one_program():
    m = cj.jit(r"""
    __global__ void a(cj::Array<float, 1> o, cj::Array<const float, 1> x) { o[0] = x[0]; }
    __global__ void b(cj::Array<float, 1> o, float s) { o[0] = s; }
    """, cache=False)
    t = torch.empty(4, device="meta")
    before = _C.nvrtc_compile_count()
    got = m.precompile({"a": [(t, t)], "b": [(t, 1.0), (t, 2.0)]}, arch=90)
    assert _C.nvrtc_compile_count() - before == 1
    assert [len(got["a"]), len(got["b"])] == [1, 2]
    assert "Array<float32, 1, contiguous>" in got["a"][0].signature


@pytest.mark.parametrize("specs, match", [
    ([("a", ())], "specs must be a dict"),
    ({"a": 3}, r"specs\['a'\] must be a list"),
    ({"a": [3]}, r"specs\['a'\]\[0\] must be a tuple"),
    ({"zz": []}, "no kernel 'zz'"),
])
def test_module_precompile_refuses_bad_specs(specs, match):
    m = cj.jit("__global__ void a(float* p) {}\n__global__ void b(float* p) {}\n", cache=False)
    with pytest.raises((TypeError, KeyError), match=match):
        m.precompile(specs, arch=90)


def test_pch_is_used_unless_switched_off():
    assert _C.use_pch() == (cj.nvrtc_version() >= (12, 8))
    code = "import torch_cudajit; from torch_cudajit._loader import _C; print(_C.use_pch())"
    env = dict(os.environ, TORCH_CUDAJIT_PCH="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("form", ["lr", "-lr", "2 * lr", "lr / (1 + t)"])
def test_a_changing_learning_rate_compiles_two_graphs(form):
    """20 steps with a learning rate that changes every step, given or computed from the
    argument inside the compiled function: two graphs (the first value as a constant, then
    symbolic), on every supported torch (CPU tensors: nothing fuses, Dynamo and AOTAutograd
    run as on the GPU)."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    rate = {"lr": lambda lr, t: lr, "-lr": lambda lr, t: -lr, "2 * lr": lambda lr, t: 2 * lr,
            "lr / (1 + t)": lambda lr, t: lr / (1 + t)}[form]
    w, g = torch.randn(100), torch.randn(100)
    step = torch.compile(lambda w, g, lr, t: w - rate(lr, t) * g * 0.5, backend="cudajit",
                         fullgraph=True)
    for t in range(20):
        lr = 0.1 / (1 + t)
        torch.testing.assert_close(step(w, g, lr, t), w - rate(lr, t) * g * 0.5)
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])


@pytest.fixture
def groups_as_aten(monkeypatch):
    """The backend on CPU tensors, with each fusion group's kernel replaced by the aten
    operations it fuses: the partition, the decompositions, the rewritten graph and each
    group's run (sizes read from its inputs, outputs allocated in their layouts, the launch's
    configuration) are checked against eager without a GPU."""
    import torch.fx as fx
    from torch_cudajit import _fusion

    monkeypatch.setattr(_fusion, "_fusable_device", lambda t: True)
    init, call = _fusion.GroupLaunch.__init__, _fusion.GroupLaunch.__call__

    def with_aten_kernel(self, kernel, plan):
        init(self, kernel, plan)
        n_out = len(plan.outputs)

        views = {k: v for k, *_, v in self.tensor_inputs}

        def kernel_as_aten(*launch_args):
            # An input given as the graph input it views: the view again.
            env = {i.node: _fusion._replay_views(a, views.get(k, ()))
                   for k, (i, a) in enumerate(zip(plan.inputs, self.args))}
            for n in plan.group.members:
                env[n] = n.target(*fx.node.map_arg(n.args, env.__getitem__),
                                  **fx.node.map_arg(n.kwargs, env.__getitem__))
            for (m, _, _), view in zip(plan.outputs, launch_args[:n_out]):
                # A kernel that walks S in another order writes its outputs so permuted.
                value = env[m.node] if plan.perm is None else env[m.node].permute(plan.perm)
                view.copy_(value.reshape(view.shape))
            # The sizes the kernel is given agree with the outputs it writes.
            tail = launch_args[len(launch_args) - (2 if plan.group.row else 1):]
            for (m, _, _), view in zip(plan.outputs, launch_args[:n_out]):
                if plan.runs:  # a task per run of RUN elements along the last dimension
                    cols = view.shape[-1]
                    assert self.tasks == view.numel() // cols * -(-cols // _fusion.RUN)
                elif not plan.group.row:
                    assert view.numel() == tail[0]
                elif m.level == "e":
                    assert view.numel() == tail[0] * tail[1] and view.shape[-1] == tail[1]
                else:
                    assert view.numel() == tail[0] and view.shape[-1] == 1

        def forall(tasks):
            self.tasks = tasks
            return kernel_as_aten
        self.launch_forall = forall
        self.index = lambda config: kernel_as_aten

    def remember_args(self, *args):
        self.args = args
        return call(self, *args)

    monkeypatch.setattr(_fusion.GroupLaunch, "__init__", with_aten_kernel)
    monkeypatch.setattr(_fusion.GroupLaunch, "__call__", remember_args)
    # Kernels are generated and compiled for sm_90 as on the GPU.
    monkeypatch.setattr(_fusion.compile_graph, "__kwdefaults__", {"arch": 90, "debug": False})


@pytest.mark.parametrize("name", ["gpt2", "llama", "resnet"])
def test_rewritten_graphs_match_eager_in_training_and_inference(name, groups_as_aten):
    torch._dynamo.reset()
    model, inputs = models.make(name, "cpu", torch.float32, small=True)
    ref, _ = models.make(name, "cpu", torch.float32, small=True)
    ref.load_state_dict(model.state_dict())
    out = torch.compile(model, backend="cudajit")(*inputs)
    want = ref(*inputs)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    out.square().mean().backward()
    want.square().mean().backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=lambda m: f"{n}: {m}")
    for a, b in zip(model.buffers(), ref.buffers()):  # batch norm's running statistics
        torch.testing.assert_close(a, b)
    assert sum(g.fused_nodes for g in backend.compiled_graphs()[-2:]) > 0
    torch._dynamo.reset()
    model.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="cudajit")(*inputs), ref(*inputs),
                                   rtol=1e-5, atol=1e-5)
    assert backend.compiled_graphs()[-1].fused_nodes > 0
    if name == "resnet":
        # A kernel per batch norm: the arithmetic on its statistics is computed inside it.
        assert len(backend.compiled_graphs()[-1].launches) == 2, backend.compiled_graphs()[-1].source
        # The launches take the statistics and parameters as they are and view them
        # themselves, once: the graph makes no view each call.
        assert not [f for f in called(backend.compiled_graphs()[-1].graph_module)
                    if "view" in str(f)], backend.compiled_graphs()[-1].graph_module.code
    if name == "llama":
        # Each rotary embedding (its rotate-half cat among it) is one kernel.
        graph = backend.compiled_graphs()[-1]
        assert aten.cat.default not in called(graph.graph_module), graph.source
        # The two embeddings (of q and of k) read the same cos and sin: one kernel, with an
        # output each.
        (rotary,) = [launch for launch in graph.launches if "_cat_" in launch.name]
        assert len(rotary.outputs) == 2, graph.source
        assert graph.source.count("__global__") == len(graph.launches), graph.source


@pytest.mark.parametrize("channels_last", [False, True])
def test_launches_see_weights_changed_in_place_or_replaced(groups_as_aten, channels_last):
    """The batch norms' parameters reach their launches as the graph's inputs, viewed by the
    launch, and the convolutions' weights the convolutions (as they are, or their kept
    channels-last copies): a change in place and a new parameter give eager's result."""
    torch._dynamo.reset()
    model, inputs = models.make("resnet", "cpu", torch.float32, small=True)
    model.eval()
    run = torch.compile(model, backend="cudajit", options={"channels_last": channels_last})
    with torch.no_grad():
        torch.testing.assert_close(run(*inputs), model(*inputs))
        model.bn1.weight.mul_(-2)
        model.bn2.running_var.add_(1)
        torch.testing.assert_close(run(*inputs), model(*inputs))
        model.bn2.bias = torch.nn.Parameter(torch.randn_like(model.bn2.bias))
        torch.testing.assert_close(run(*inputs), model(*inputs))
        model.conv1.weight.mul_(-1)
        torch.testing.assert_close(run(*inputs), model(*inputs))
        model.conv2.weight = torch.nn.Parameter(torch.randn_like(model.conv2.weight))
        torch.testing.assert_close(run(*inputs), model(*inputs))


@pytest.mark.parametrize("options", [{}, {"channels_last": False}, {"channels_last": True}])
def test_the_channels_last_option(groups_as_aten, options):
    """By default (and with channels_last False) the convolutions take the model's NCHW
    tensors, no copy is made and every kernel walks S as it is. With channels_last True the
    input's copy to channels-last is a kernel, the first batch norm's kernel walks that memory
    order, and the second writes the block's output contiguous, as eager's is."""
    torch._dynamo.reset()
    model, inputs = models.make("resnet", "cpu", torch.float32, small=True)
    model.eval()
    run = torch.compile(model, backend="cudajit", options=options)
    with torch.no_grad():
        out = run(*inputs)
        torch.testing.assert_close(out, model(*inputs))
    assert out.is_contiguous()
    graph = backend.compiled_graphs()[-1]
    perms = [launch.perm for launch in graph.launches]
    if options.get("channels_last"):
        assert perms == [(0, 2, 3, 1)] * 2 + [None], graph.source
        assert "_clone" in graph.launches[0].name, graph.source
    else:
        assert perms == [None, None], graph.source
        assert aten.clone.default not in called(graph.graph_module), graph.graph_module.code


def test_a_launch_views_a_graph_input_itself_and_keeps_the_view():
    """A weight the group reads through a view reaches the launch as the weight itself; the
    launch makes the view once and keeps it while the weight's memory and layout stay."""
    c = compiled(lambda x, w: x * w.view(1, 8) + 1, ((4, 8), torch.float32), ((8,), torch.float32))
    (launch,) = c.launches
    assert sorted(n.name for n in launch.reads) == ["w_1", "x_1"], launch.reads
    assert "view" not in c.graph_module.code, c.graph_module.code
    seen = []
    launch.launchers.clear()
    launch.launch_forall = lambda tasks: lambda *args: seen.append(args)
    w = torch.randn(8)
    args = [{"x_1": torch.randn(4, 8), "w_1": w}[n.name] for n in launch.reads]

    def read_weight():
        launch(*args)
        (view,) = [t for t in seen[-1] if isinstance(t, torch.Tensor) and t.stride() == (0, 1)]
        return view
    first = read_weight()
    assert read_weight() is first and first.data_ptr() == w.data_ptr()
    w.mul_(2)
    torch.testing.assert_close(first, w.expand(4, 8), rtol=0, atol=0)
    w.data = torch.randn(8)  # new memory under the same tensor
    again = read_weight()
    assert again is not first and again.data_ptr() == w.data_ptr()
    torch.testing.assert_close(again, w.expand(4, 8), rtol=0, atol=0)


def test_an_input_that_gives_a_symbolic_size_is_not_given_as_what_it_views():
    """A view that S's sizes are read from stays the launch's argument: the graph input it
    views has other sizes."""
    c = compiled(lambda x, w: w.unsqueeze(0) * x, ((4, 8), torch.float32), ((8,), torch.float32),
                 dynamic=True)
    (launch,) = c.launches
    sized = {r[0] for r in launch.recipe if not isinstance(r, int)}
    assert "unsqueeze" in {launch.reads[k].name for k in sized}, launch.recipe
    seen = []
    launch.launch_forall = lambda tasks: lambda *args: seen.append(args)
    x, w = torch.randn(3, 5), torch.randn(5)
    args = {"x_1": x, "w_1": w, "unsqueeze": w.unsqueeze(0)}
    (out,) = launch(*[args[n.name] for n in launch.reads])
    assert out.shape == (3, 5) and seen[-1][0].shape == (3, 5)


@pytest.mark.parametrize("case, folded", [
    ("a graph input viewed", True),
    ("views of views", True),
    ("a graph input itself", False),
    ("a view of a computed value", False),
    ("a view to a symbolic size", False),
    ("a reshape (a copy where it cannot view)", False),
    ("a view of a large graph input (not kept)", False),
])
def test_static_views_of_graph_inputs_are_found(case, folded):
    import torch.fx as fx
    from torch_cudajit._fusion import _KEPT_VIEW_MAX, _replay_views, _static_views
    g = fx.Graph()
    w = g.placeholder("w")
    w.meta["val"] = torch.empty(4, device="meta")
    big = g.placeholder("big")
    big.meta["val"] = torch.empty(_KEPT_VIEW_MAX + 4, device="meta")
    n = g.placeholder("n")
    node = {"a graph input viewed": lambda: g.call_function(aten.view.default, (w, [1, 4, 1])),
            "views of views": lambda: g.call_function(aten.unsqueeze.default, (
                g.call_function(aten.view.default, (w, [4, 1])), 0)),
            "a graph input itself": lambda: w,
            "a view of a computed value": lambda: g.call_function(aten.view.default, (
                g.call_function(aten.neg.default, (w,)), [1, 4, 1])),
            "a view to a symbolic size": lambda: g.call_function(aten.view.default, (w, [n, 4])),
            "a reshape (a copy where it cannot view)": lambda: g.call_function(
                aten.reshape.default, (w, [1, 4, 1])),
            "a view of a large graph input (not kept)": lambda: g.call_function(
                aten.view.default, (big, [1, -1])),
            }[case]()
    root, views = _static_views(node)
    assert (root is w and len(views) > 0) == folded
    if folded:
        t = torch.randn(4)
        got = _replay_views(t, views)
        assert got.shape == (1, 4, 1) and got.data_ptr() == t.data_ptr()
    else:
        assert root is node and views == ()


@pytest.mark.parametrize("name", list(CATS))
def test_graphs_with_cats_match_eager(name, groups_as_aten):
    """The partition and rewrite around a fused cat (branch members moved into its group,
    branch inputs viewed at their branch's shape), forward and backward."""
    torch._dynamo.reset()
    fn = CATS[name][0]
    x = torch.randn(6, 40, 5).transpose(1, 2).requires_grad_()
    y = torch.randn(6, 5, 24, requires_grad=True)
    got = torch.compile(fn, backend="cudajit")(x, y)
    want = fn(x, y)
    torch.testing.assert_close(got, want)
    for g, w in zip(torch.autograd.grad(got.square().sum(), (x, y), allow_unused=True),
                    torch.autograd.grad(want.square().sum(), (x, y), allow_unused=True)):
        torch.testing.assert_close(g, w)  # None where the case reads only x
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(fn, backend="cudajit")(x, y), want)
    graph = backend.compiled_graphs()[-1]
    assert called(graph.graph_module).count(aten.cat.default) == CATS[name][2], graph.source


def test_a_new_batch_size_compiles_a_graph_with_symbolic_sizes(groups_as_aten):
    """The second batch size makes Dynamo trace the model again with a symbolic batch: the
    kernels' example arguments take the sizes' hints."""
    torch._dynamo.reset()
    model, (x,) = models.make("gpt2", "cpu", torch.float32, small=True)
    model.eval()
    run = torch.compile(model, backend="cudajit")
    with torch.no_grad():
        for b in (2, 3, 5):
            xb = torch.randn(b, *x.shape[1:])
            torch.testing.assert_close(run(xb), model(xb), rtol=1e-5, atol=1e-5)
    graph = backend.compiled_graphs()[-1]
    assert graph.launches and any(isinstance(s, torch.SymInt) for n in graph.graph_module.graph.nodes
                                  for s in getattr(n.meta.get("val"), "shape", ()))


@pytest.mark.parametrize("second, shared", [
    (lambda y: torch.exp(y) * 2 + 1, True),            # the same code on another tensor
    (lambda y: torch.exp(y) * 2 - 1, False),           # another operation
    (lambda y: torch.exp(y.half()) * 2 + 1, False),    # another dtype
])
def test_groups_with_the_same_code_launch_one_kernel(second, shared, capsys):
    """Two groups whose kernels differ only in their names (values are numbered, not named
    after nodes) compile one kernel, launched by both; the source keeps the second group's
    header with the FX nodes it fuses and the kernel it launches, and the debug option says
    how many kernels the groups have."""
    def fn(x, y):
        a = torch.exp(x) * 2 + 1
        return a @ a, second(y) @ y.to(a.dtype)  # the matmuls keep the groups apart
    c = compile_graph(trace(fn, ((16, 16), torch.float32), ((16, 16), torch.float32)), arch=90,
                      debug=True)
    assert f"{1 if shared else 2} kernel(s) for 2 group(s)" in capsys.readouterr().err
    assert len(c.launches) == 2, c.source
    first, other = c.launches
    assert (first.kernel is other.kernel) == shared, c.source
    assert c.source.count("__global__") == (1 if shared else 2), c.source
    assert (f"(launches {first.name}, the same code); fuses:" in c.source) == shared, c.source
    assert c.source.count("aten.exp.default") == 2, c.source


def test_a_group_whose_values_nothing_reads_makes_no_kernel():
    def fn(x):
        torch.exp(x) + 1  # dead: make_fx keeps it, AOTAutograd would not
        return x * 2
    c = compiled(fn, ((8, 8), torch.float32))
    assert len(c.launches) == 1 and "aten.mul.Tensor" in c.source and "exp" not in c.source


@pytest.mark.parametrize("value", [1.5, -0.25, 3])
def test_float_tensor_op_passes_opcheck(value):
    """cudajit::float_tensor, the one op the backend (and the op path) adds to graphs: schema,
    autograd registration, fake tensor and AOT dispatch checks."""
    result = torch.library.opcheck(torch.ops.cudajit.float_tensor.default, (value,))
    assert set(result.values()) == {"SUCCESS"}, result
    t = torch.ops.cudajit.float_tensor.default(value)
    assert t.dtype == torch.float64 and t.dim() == 0 and t.item() == value


def test_a_launch_keeps_the_views_of_small_graph_inputs():
    """A weight's view as a kernel reads it (expanded to the launch's shape) is made once and
    reused while the tensor, its data pointer and the shape stay; the view shares the weight's
    storage, so writes to the weight show through it."""
    from torch_cudajit._fusion import _KEPT_VIEW_MAX, _graph_input_view
    kept = []
    w = torch.randn(1, 1, 8)
    v = _graph_input_view(kept, w, "e", False, (4, 3, 8), 0)
    assert v.shape == (4, 3, 8) and v.stride() == (0, 0, 1)
    assert _graph_input_view(kept, w, "e", False, (4, 3, 8), 0) is v
    # The graph views a weight anew each call (batch norm's statistics as [1, C, 1, 1]).
    stats, kept_stats = torch.randn(8), []
    first = _graph_input_view(kept_stats, stats.view(1, 8, 1), "e", False, (2, 8, 3), 0)
    assert _graph_input_view(kept_stats, stats.view(1, 8, 1), "e", False, (2, 8, 3), 0) is first
    assert _graph_input_view(kept_stats, stats[:4].view(1, 4, 1), "e", False, (2, 4, 3), 0) is not first
    w.add_(1)
    torch.testing.assert_close(v, w.expand(4, 3, 8), rtol=0, atol=0)
    cases = [("another tensor", torch.randn(1, 1, 8), (4, 3, 8)),
             ("another shape", w, (5, 3, 8))]
    for what, t, shape in cases:
        got = _graph_input_view(kept, t, "e", False, shape, 0)
        assert got is not v and got.shape == shape, what
        assert torch.equal(got, t.expand(shape)), what
    # A tensor that needs no view, and a large one, are not kept.
    for t, shape in [(torch.randn(4, 3, 8), (4, 3, 8)), (torch.randn(1, _KEPT_VIEW_MAX + 1), (2, _KEPT_VIEW_MAX + 1))]:
        kept = []
        _graph_input_view(kept, t, "e", False, shape, 0)
        assert kept == []


def _kernel_params(source: str) -> list:
    """Each kernel's parameter count in a generated source."""
    counts = []
    for m in re.finditer(r"__global__ void [^(]*\(([^)]*)\)", source):
        depth, n = 0, 1
        for ch in m.group(1):  # commas outside template arguments
            depth += (ch == "<") - (ch == ">")
            n += ch == "," and depth == 0
        counts.append(n)
    return counts


@pytest.mark.parametrize("name", list(WIDE))
def test_a_wide_group_is_split_within_the_kernel_parameter_bound(name, groups_as_aten):
    """A group is split where its kernel would pass the plugin's bound on a kernel's
    parameters (a cat too wide for it is left to aten), and the graph still matches eager."""
    fn, shapes, least, cat_left = WIDE[name]
    c = compiled(fn, *[(s, torch.float16) for s in shapes])
    params = _kernel_params(c.source)
    assert len(params) >= least and max(params) <= _C.max_kernel_params, (name, params)
    assert (aten.cat.default in called(c.graph_module)) == cat_left, c.graph_module.code
    torch._dynamo.reset()
    inputs = [torch.randn(s) for s in shapes]
    torch.testing.assert_close(torch.compile(fn, backend="cudajit")(*inputs), fn(*inputs))


def test_a_kernel_over_the_parameter_bound_is_left_to_aten(monkeypatch):
    """With the partition's bound lifted, the one group of a 120-input chain would make a
    kernel of 121 parameters; it is left to aten instead of failing to compile."""
    from torch_cudajit import _fusion
    monkeypatch.setattr(_fusion, "_GROUP_PARAMS", 10_000)
    c = compiled(chain, *[((8, 16), torch.float16)] * 120)
    assert not c.launches and called(c.graph_module).count(aten.abs.default) == 119, c.source


def _graphs_for_counts():
    for name in ("gpt2", "llama", "resnet"):
        model, inputs = models.make(name, "meta", torch.float32, small=True)
        model.eval()
        yield name, models.inference_graph(model, inputs)
    for name, (fn, shapes, _, _) in WIDE.items():
        yield name, trace(fn, *[(s, torch.float16) for s in shapes])
    for name, (fn, _, _) in CATS.items():
        yield name, trace(fn, ((6, 5, 40), torch.float16), ((6, 5, 24), torch.float16))


def test_the_partitions_running_parameter_counts_agree_with_counting_afresh(monkeypatch):
    """Each count for one node more (from the group's running counts) equals counting the
    grown group afresh, at every check of every graph here; only the wide graphs meet the
    bound."""
    from torch_cudajit import _fusion
    count = _fusion.Partition._param_count
    checks = []

    def both(self, g, *added):
        got = count(self, g, *added)
        if len(added) == 1 and isinstance(added[0], torch.fx.Node):
            fresh = _fusion.Group(-1, g.shape, members={**g.members, added[0]: None})
            checks.append((got, count(self, fresh)))
        return got
    monkeypatch.setattr(_fusion.Partition, "_param_count", both)
    total, met = 0, set()
    for name, gm in _graphs_for_counts():
        checks.clear()
        part = _fusion.Partition(gm.graph)
        total += len(checks)
        assert all(a == b for a, b in checks), (name, [c for c in checks if c[0] != c[1]])
        if any(a > _fusion._GROUP_PARAMS for a, _ in checks):
            met.add(name)
        assert all(count(part, g) <= _fusion._GROUP_PARAMS for g in part.groups), name
    assert total > 100
    assert met == {"120_inputs_of_one_chain", "cat_of_100_computed_operands"}
