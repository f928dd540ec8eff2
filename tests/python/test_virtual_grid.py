"""forall's virtual grid: a kernel written one task per thread runs several virtual blocks per
physical block, with __restrict__ data pointers, when nothing it writes overlaps another argument.
CPU tests compile the variant for sm_90 and read the PTX and the refusals; GPU tests check that
the kernel sees exactly the grid it asked for and that results match torch, on the virtual grid
and on the plain launches it falls back to."""
from __future__ import annotations

import threading
import time

import pytest
import torch

import torch_cudajit as cj
from _support import README_AXPY, dtype_params, forall_axpy, poison_, random_values

README = README_AXPY

# What the kernel sees of its launch, one task per thread: written by a helper, so that the
# virtual blockIdx reaches code outside the kernel too.
GRID = r"""
__device__ long long task() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__global__ void grid_of(int* block, int* grid, int* thread, int* width, long long n) {
  long long i = task();
  if (i >= n) return;
  block[i] = blockIdx.x;
  grid[i] = gridDim.x;
  thread[i] = threadIdx.x;
  width[i] = blockDim.x;
}
"""

# A grid-stride loop over gridDim: on the virtual grid, every virtual thread runs it once.
GRID_STRIDE = r"""
__global__ void add_one(int* count, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    atomicAdd(count + i, 1);
}
"""

POINTERS = r"""
template <typename T>
__global__ void scale(T* out, const T* x, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = T(a * float(x[i]));
}
"""


#: A size whose plain grid fills an H200 many times over (the virtual grid needs it), and that
#: is no multiple of a block, so that the last physical block runs fewer virtual blocks.
BIG = (1 << 23) + 777


# -- CPU: the variant and the refusals -----------------------------------------------------------


@pytest.mark.parametrize("dtype, blocks", [(torch.float32, 4), (torch.bfloat16, 4),
                                           (torch.float16, 4), (torch.float64, 2)], ids=str)
def test_readme_kernel_compiles_on_a_virtual_grid(dtype, blocks):
    k = cj.jit(README)
    x = torch.empty(1024, dtype=dtype)
    assert k._core.virtual_grid_refusal == ""
    info = k._core.virtual_grid((x, x, x, 2.0), 90)
    assert info is not None, k._core.virtual_grid_failure((x, x, x, 2.0), 90)
    assert info["virtual_blocks"] == blocks
    assert info["companions"] == [0, 1, 2]
    assert info["lowered_name"].startswith("cj_detail_virtual_")
    assert f".entry {info['lowered_name']}(" in info["ptx"]
    assert "ld.global.nc" in info["ptx"]
    # One bulk L2 prefetch per tensor, each issued when the launch's mask asks for it.
    assert info["ptx"].count("cp.async.bulk.prefetch.L2.global") == 3
    # The variant is no specialization of its own: signatures list the plain ones.
    assert k.signatures == []
    assert "ld.global.nc" not in k.compile(x, x, x, 2.0, arch="sm_90").inspect_ptx()


def test_pointer_kernel_gets_companions_for_its_tensors():
    k = cj.jit(POINTERS)
    x = torch.empty(64)
    info = k._core.virtual_grid((x, x, 2.0, 64), 90)
    assert info is not None and info["companions"] == [0, 1]


# Parameters as nvcc projects qualify them: the qualifiers say nothing about the data, and each
# form gets its companions and non-coherent loads.
QUALIFIED = {
    "const_pointer": "float* const out, const float* const x",
    "restrict": "float* __restrict__ out, const float* __restrict__ x",
    "const_restrict": "float* const __restrict__ out, const float* const __restrict__ x",
    "const_array": "const cj::Array<float, 1> out, const cj::Array<const float, 1> x",
}


def qualified_kernel(params):
    return cj.jit(f"""
__global__ void scale({params}, float a, long long n) {{
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}}
""")


@pytest.mark.parametrize("params", QUALIFIED.values(), ids=QUALIFIED.keys())
def test_qualified_parameters_compile_on_a_virtual_grid(params):
    k = qualified_kernel(params)
    x = torch.empty(1024)
    args = (x, x, 2.0, 1024)
    info = k._core.virtual_grid(args, 90)
    assert info is not None, k._core.virtual_grid_failure(args, 90)
    assert info["companions"] == [0, 1]
    assert "ld.global.nc" in info["ptx"]


@pytest.mark.parametrize("source, options, reason", [
    ("__global__ void k(float* o) { __shared__ float t[4]; t[0] = 1; o[0] = t[0]; }", {},
     "shared memory"),
    ("__global__ void k(float* o) { __syncthreads(); o[0] = 1; }", {}, "block barrier"),
    ("__global__ void k(cj::Array<float, 1> o) { cj::elementwise(o, [] { return 1.f; }); }", {},
     "loops over the grid itself"),
    ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
     "__global__ void k(float* o) { cg::this_grid().sync(); }", {}, "synchronizes the whole grid"),
    ("__global__ void k(float* o) { o[threadIdx.x] = 1; }", {"debug": True}, "debug mode"),
    ("__device__ float g_scale;\n__global__ void k(float* o) { o[threadIdx.x] = g_scale; }", {},
     "declares a __device__ variable"),
], ids=["shared", "barrier", "elementwise", "grid_sync", "debug", "module_variable"])
def test_refusals_say_why(source, options, reason):
    k = cj.jit(source, **options)
    assert reason in k._core.virtual_grid_refusal
    x = torch.empty(64)
    args = (x,)
    assert k._core.virtual_grid(args, 90) is None
    assert reason in k._core.virtual_grid_failure(args, 90)


def test_words_in_comments_refuse_nothing():
    # Kernels pasted from nvcc projects often say what they do not need.
    k = cj.jit("// One task per thread: no __shared__ memory, no __syncthreads().\n"
               "/* a cooperative_groups grid sync would be wrong here */\n" + README)
    assert k._core.virtual_grid_refusal == ""
    x = torch.empty(1024, dtype=torch.bfloat16)
    assert k._core.virtual_grid((x, x, x, 2.0), 90)["virtual_blocks"] == 4


def test_a_variant_that_does_not_compile_leaves_the_plain_kernel():
    k = cj.jit("__global__ void __maxnreg__(32) k(float* o) { o[threadIdx.x] = 1; }")
    x = torch.empty(64)
    assert k._core.virtual_grid_refusal == ""
    assert k._core.virtual_grid((x,), 90) is None
    assert "__maxnreg__" in k._core.virtual_grid_failure((x,), 90)
    k.compile(x, arch="sm_90")  # the kernel itself is fine


# -- GPU: the grid the kernel sees, results, fallbacks --------------------------------------------


def forall_shape(k, args, n, shared_mem=0):
    """(grid, block, virtual blocks per physical block) of k.forall(n)(*args)."""
    plan = k.forall_plan(n, *args, shared_mem=shared_mem)
    assert isinstance(plan, cj.ForallPlan)
    assert (plan.plain_because == "") == (plan.virtual_blocks > 0), plan
    return plan.grid, plan.block, plan.virtual_blocks


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.bfloat16, torch.float16,
                                                torch.float64]))
def test_readme_kernel_on_the_virtual_grid_matches_torch(device, dtype):
    k = cj.jit(README)
    n = BIG
    grid, block, blocks = forall_shape(k, forall_axpy(k, n, dtype, device), n)
    virtual_grid = -(-n // block)
    assert blocks == (2 if dtype == torch.float64 else 4)
    assert grid == -(-virtual_grid // blocks), (grid, block, blocks)


@pytest.mark.gpu
@pytest.mark.parametrize("params", QUALIFIED.values(), ids=QUALIFIED.keys())
def test_qualified_parameters_run_on_the_virtual_grid(device, params):
    k = qualified_kernel(params)
    n = BIG
    x = random_values([n], torch.float32, device)
    out = torch.empty_like(x)
    poison_(out)
    k.forall(n)(out, x, 3.0, n)
    torch.testing.assert_close(out, 3.0 * x, rtol=0, atol=0)
    assert forall_shape(k, (out, x, 3.0, n), n)[2] == 4


# Which inputs each physical block prefetches into L2 for a later one: tensors the kernel only
# reads, of 1- or 2-byte elements, contiguous, one element per task. Results are the same either
# way; the prefetch is a hint.
@pytest.mark.gpu
@pytest.mark.parametrize("case, prefetched", [
    ("bfloat16", ("x", "y")), ("float16", ("x", "y")), ("float32", ()), ("strided_x", ("y",)),
    ("longer_y", ("x",)), ("offset_views", ("x", "y"))])
def test_virtual_grid_prefetches_narrow_read_only_inputs(device, case, prefetched):
    if torch.cuda.get_device_capability(device) < (9, 0):
        pytest.skip("bulk L2 prefetch needs compute capability 9.0")
    k = cj.jit(README)
    n = BIG
    dtype = {"float16": torch.float16, "float32": torch.float32}.get(case, torch.bfloat16)
    x = random_values([n], dtype, device)
    y = random_values([n], dtype, device)
    if case == "strided_x":
        x = random_values([2 * n], dtype, device)[::2]
    elif case == "longer_y":
        y = random_values([n + 5], dtype, device)
    elif case == "offset_views":  # data starting off a 16-byte boundary
        x = random_values([n + 3], dtype, device)[3:]
        y = random_values([n + 1], dtype, device)[1:]
    out = torch.empty(n, dtype=dtype, device=device)
    poison_(out)
    plan = k.forall_plan(n, out, x, y, 2.0)
    assert plan.virtual_blocks == 4 and plan.prefetched == prefetched, plan
    k.forall(n)(out, x, y, 2.0)
    torch.testing.assert_close(out, (2.0 * x.float() + y[:n].float()).to(dtype))


@pytest.mark.gpu
def test_first_forall_launch_compiles_its_variant_without_the_gil(device):
    # A source of its own, so the variant is a cold compile; the plain kernel compiles first.
    k = cj.jit(README + f"// {time.time_ns()}\n")
    n = BIG
    x, y = random_values([n], torch.float32, device), random_values([n], torch.float32, device)
    out = torch.empty_like(x)
    k[-(-n // 256), 256](out, x, y, 2.0)
    torch.cuda.synchronize()
    beats, done = [], threading.Event()

    def heartbeat():
        while not done.is_set():
            beats.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    k.forall(n)(out, x, y, 2.0)
    took = time.perf_counter() - start
    done.set()
    thread.join()
    assert forall_shape(k, (out, x, y, 2.0), n)[2] == 4
    torch.testing.assert_close(out, 2.0 * x + y, rtol=0, atol=0)
    during = [b for b in beats if start <= b <= start + took]
    # The other thread kept running while the variant compiled.
    assert len(during) >= 5, (took, len(during))


@pytest.mark.gpu
def test_the_kernel_sees_the_grid_it_asked_for(device):
    k = cj.jit(GRID)
    n = BIG
    outs = [torch.full([n], -1, dtype=torch.int32, device=device) for _ in range(4)]
    grid, block, blocks = forall_shape(k, (*outs, n), n)
    assert blocks == 4 and block == 256  # the variant's constant blockDim
    k.forall(n)(*outs, n)
    i = torch.arange(n, device=device)
    torch.testing.assert_close(outs[0], (i // block).int())
    torch.testing.assert_close(outs[1], torch.full_like(outs[1], -(-n // block)))
    torch.testing.assert_close(outs[2], (i % block).int())
    torch.testing.assert_close(outs[3], torch.full_like(outs[3], block))


@pytest.mark.gpu
def test_grid_stride_kernel_visits_each_task_once(device):
    k = cj.jit(GRID_STRIDE)
    n = BIG
    count = torch.zeros(n, dtype=torch.int32, device=device)
    assert forall_shape(k, (count, n), n)[2] == 4
    k.forall(n)(count, n)
    assert bool((count == 1).all())


@pytest.mark.gpu
def test_pointer_kernel_on_the_virtual_grid(device):
    k = cj.jit(POINTERS)
    n = BIG
    x = random_values([n], torch.bfloat16, device)
    out = torch.empty_like(x)
    poison_(out)
    k.forall(n)(out, x, 3.0, n)
    torch.testing.assert_close(out, (3.0 * x.float()).bfloat16(), rtol=0, atol=0)
    assert forall_shape(k, (out, x, 3.0, n), n)[2] == 4


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["in_place", "overlapping_views", "small", "shared_mem"])
def test_plain_grid_when_the_virtual_one_would_not_be_right_or_faster(device, case):
    k = cj.jit(README)
    n = BIG
    base = random_values([n + 1], torch.float32, device)
    y = random_values([n + 1], torch.float32, device)
    shared_mem = 0
    if case == "in_place":  # out is x: a written tensor overlaps a read one
        out, x, y = base[:n], base[:n], y[:n]
    elif case == "overlapping_views":  # out and x share all but one element
        out, x, y = base[1:], base[:n], y[:n]
    elif case == "small":  # too few blocks to fill the GPU several times over
        n = 10_000
        out, x, y = torch.empty(n, device=device), base[:n].clone(), y[:n]
    else:  # dynamic shared memory belongs to physical blocks
        out, x, y = torch.empty(n, device=device), base[:n].clone(), y[:n]
        shared_mem = 256
    want = 2.0 * x + y
    if case != "in_place" and case != "overlapping_views":
        poison_(out)
    grid, block, blocks = forall_shape(k, (out, x, y, 2.0), n, shared_mem)
    because = {"in_place": "overlaps another argument", "overlapping_views": "overlaps another argument",
               "small": "fills the GPU fewer times", "shared_mem": "dynamic shared memory"}[case]
    assert because in k.forall_plan(n, out, x, y, 2.0, shared_mem=shared_mem).plain_because
    k.forall(n, shared_mem=shared_mem)(out, x, y, 2.0)
    torch.cuda.synchronize()
    if case == "overlapping_views":
        # Threads race on the shared elements as they would on any plain launch; the first
        # element is read before anything writes it.
        torch.testing.assert_close(out[0], want[0])
    else:
        torch.testing.assert_close(out, want)
    assert blocks == 0 and grid == -(-n // block)


@pytest.mark.gpu
def test_virtual_grid_under_torch_compile_and_cuda_graphs(device):
    k = cj.jit(README)
    n = BIG
    x, y = random_values([n], torch.float32, device), random_values([n], torch.float32, device)
    out = torch.empty_like(x)
    poison_(out)
    torch.compile(lambda o, a, b: k.forall(n)(o, a, b, 2.0), fullgraph=True)(out, x, y)
    torch.testing.assert_close(out, 2.0 * x + y)

    poison_(out)
    k.forall(n)(out, x, y, 3.0)  # compiled and loaded before capture
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph):
            k.forall(n)(out, x, y, 3.0)
    torch.cuda.current_stream().wait_stream(s)
    poison_(out)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 3.0 * x + y)


@pytest.mark.gpu
def test_forall_plan_names_the_refusal_and_checks_ntasks(device):
    k = cj.jit("__global__ void k(float* o) { __shared__ float t[1]; t[0] = 1; o[threadIdx.x] = t[0]; }")
    out = torch.empty(BIG, device=device)
    plan = k.forall_plan(BIG, out)
    assert plan.virtual_blocks == 0 and "shared memory" in plan.plain_because
    with pytest.raises(ValueError, match="ntasks must be a positive int, got 0"):
        k.forall_plan(0, out)
    with pytest.raises(TypeError, match=r"kernel 'k' takes 1 argument\(s\) \(o\), got 0"):
        k.forall_plan(BIG)


@pytest.mark.parametrize("ntasks", [0, -3, True, 2.5], ids=repr)
def test_forall_plan_refuses_bad_ntasks(ntasks):
    k = cj.jit(README)
    with pytest.raises(ValueError, match=f"forall_plan: ntasks must be a positive int, got {ntasks!r}"):
        k.forall_plan(ntasks, torch.empty(4), torch.empty(4), torch.empty(4), 2.0)
