"""torch.compile of code that launches kernels: every launch form (kernel[grid, block],
keyword arguments, forall, specialize, the launch/launch_forall short forms) traces into one
graph, and numbers that change between calls do not recompile it. Tracing runs without a GPU
(a backend that records the graph and runs nothing); anything that launches is marked gpu."""
from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

import torch_cudajit as cj
from torch_cudajit._kernel import SpecializedKernel
from _support import ACCUMULATE, dtype_params, random_values

# An optimizer step: every number a Python number that changes from step to step.
SGD = r"""
__global__ void sgd(float* __restrict__ w, float* __restrict__ m, const float* __restrict__ g,
                    float lr, float momentum, int step, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    m[i] = momentum * m[i] + g[i];
    w[i] -= lr * m[i] / (1.0f + 0.0f * step);
  }
}
"""

N = 1000

# `auto` parameters: each takes a tensor or a number, decided by the argument; on the op path a
# tensor travels with the written outputs (even `const auto` deduces non-const elements), marked
# 't' in `kinds`.
AUTO_SCALE = r"""
__global__ void auto_scale(auto out, const auto x, auto a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
"""


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


class Recorder:
    """A torch.compile backend that records each forward graph and runs nothing: the op has no
    CPU kernel, so tracing is what runs here. Outputs come back as the graph's first inputs.
    With ``run=True`` it runs the graph (with the `cpu_launches` fixture's kernel for the op)."""

    def __init__(self):
        self.codes: list = []

    def backend(self, run: bool = False):
        def fw_compiler(gm, example_inputs):
            self.codes.append(gm.code)
            if run:
                return make_boxed_func(gm.forward)
            n_out = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])
            return make_boxed_func(lambda *args: tuple(args[:n_out]))
        return aot_autograd(fw_compiler=fw_compiler)


@pytest.fixture
def cpu_launches():
    """For one test, a CPU kernel of cudajit::launch that launches nothing and records the float
    parameters of each call as the op reads them (a 0-d tensor of scalar_tensors, else the entry
    of `floats`): a list of lists, one per launch. With it, a compiled graph runs on CPU tensors
    under every backend, inductor's included."""
    calls: list = []

    def launch(k, out0, out1, out2, out3, more_outputs, inputs, ints, floats, kinds, grid, block,
               shared_mem=0, scalar_tensors=None):
        values, f = [], 0
        for j, kind in enumerate(kinds):
            if kind == "f":
                given = scalar_tensors[j] if scalar_tensors is not None else None
                values.append(floats[f] if given is None else given.item())
            f += {"f": 1, "c": 2}.get(kind, 0)
        calls.append(values)

    with torch.library._scoped_library("cudajit", "IMPL") as lib:
        lib.impl("launch", launch, "CPU")
        yield calls


def graph_count() -> int:
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def backend_for(name: str, rec: Recorder):
    """The torch.compile backend a test names: for "aot" the recording AOTAutograd backend,
    which runs the graph."""
    return rec.backend(run=True) if name == "aot" else name


def launches(code: str) -> int:
    return code.count("torch.ops.cudajit.launch.default")


@pytest.mark.parametrize("form", ["index", "keywords", "forall", "specialize", "launch",
                                  "launch_forall"])
def test_every_launch_form_traces_into_one_graph(form):
    k = cj.jit(ACCUMULATE)
    if form == "specialize":  # compiled for sm_90 from meta tensors: no GPU needed
        meta = torch.empty(N, device="meta")
        sk = SpecializedKernel(k, k._core.compile((meta, meta, 1.0, N), 90))
    x, out = torch.randn(N), torch.randn(N)

    def f(out, x, a: float):
        if form == "index":
            k[(N + 127) // 128, 128](out, x, a, N)
        elif form == "keywords":
            k[(N + 127) // 128, 128](out, x=x, n=N, a=a)
        elif form == "forall":
            k.forall(N)(out, x, a, N)
        elif form == "specialize":
            sk[(N + 127) // 128, 128](out, x, a, N)
        elif form == "launch":
            k.launch([(N + 127) // 128], [128], [out, x], [a, N])
        else:
            k.launch_forall(N, [out, x], [a, N])
        return out

    rec = Recorder()
    torch.compile(f, backend=rec.backend(), fullgraph=True)(out, x, 2.0)
    assert len(rec.codes) == 1
    code = rec.codes[0]
    assert launches(code) == 1, code
    if form in ("forall", "launch_forall"):
        assert f"grid = [{N}], block = [0]" in code, code  # the op picks the block when it runs
    else:
        assert "grid = [8, 1, 1], block = [128, 1, 1]" in code, code


@pytest.mark.parametrize("dynamic", [None, True], ids=["default", "dynamic"])
def test_changing_numbers_do_not_recompile(dynamic):
    """100 steps of an optimizer-style loop whose learning rate, momentum and step count change
    every step: Dynamo compiles once with the first values as constants and once more with them
    symbolic (its automatic dynamic shapes), or once with dynamic=True; then never again."""
    k = cj.jit(SGD)
    w, m, g = torch.randn(N), torch.randn(N), torch.randn(N)

    def step(w, m, g, lr: float, momentum: float, t: int):
        k.forall(N)(w, m, g, lr, momentum, t, N)

    rec = Recorder()
    compiled = torch.compile(step, backend=rec.backend(), fullgraph=True, dynamic=dynamic)
    for t in range(100):
        compiled(w, m, g, 0.1 / (1 + t), 0.9 - 0.001 * t, t)
    assert len(rec.codes) == (1 if dynamic else 2), rec.codes
    # The floats reach the op as 0-d tensors computed from graph inputs, not as constants.
    assert "scalar_tensors = [" in rec.codes[-1]
    assert "0.1" not in rec.codes[-1] and "0.9" not in rec.codes[-1], rec.codes[-1]


@pytest.mark.parametrize("backend", ["aot", "inductor"])
def test_a_float_kept_in_a_tensor_never_recompiles(backend, cpu_launches):
    """A float parameter given a 0-d CPU tensor (a learning rate kept in a tensor, as torch's
    optimizers allow) is a graph input from the first call: 100 new values, one graph."""
    k = cj.jit(ACCUMULATE)
    out, x = torch.randn(N), torch.randn(N)
    rec = Recorder()
    compiled = torch.compile(lambda out, x, a: k.forall(N)(out, x, a, N),
                             backend=backend_for(backend, rec), fullgraph=True)
    values = [0.1 / (1 + t) for t in range(100)]
    for a in values:
        compiled(out, x, torch.tensor(a, dtype=torch.float64))
    assert graph_count() == 1
    assert [call[0] for call in cpu_launches] == values
    if backend == "aot":
        assert "scalar_tensors = [" in rec.codes[0], rec.codes[0]


# The float parameter of a launch computed inside the compiled function from its arguments, as
# an optimizer step does (-lr for a kernel that adds, a decayed rate, ...).
COMPUTED_FLOATS = {
    "neg": lambda lr, m, t: -lr,
    "twice": lambda lr, m, t: 2 * lr,
    "times_two": lambda lr, m, t: lr * 2,
    "decayed": lambda lr, m, t: lr / (1 + t),
    "two_floats": lambda lr, m, t: lr - 0.5 * m,
}

ADD_SCALED = r"""
__global__ void add_scaled(float* __restrict__ w, const float* __restrict__ g, float a,
                           long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) w[i] += a * g[i];
}
"""

ADD_SCALED_TEMPLATE = r"""
template <class T> __global__ void add_scaled(T* w, const T* g, T a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) w[i] += a * g[i];
}
"""


@pytest.mark.parametrize("backend", ["aot", "inductor"])
@pytest.mark.parametrize("expr", list(COMPUTED_FLOATS))
@pytest.mark.parametrize("kernel", ["pointers", "template"])
@pytest.mark.parametrize("form", ["index", "forall"])
def test_floats_computed_from_changing_floats_do_not_recompile(form, kernel, expr, backend,
                                                               cpu_launches):
    """20 steps whose float arguments change every step, the kernel's float computed from them
    inside the compiled function: two graphs (the first values as constants, then symbolic), and
    each launch gets the float of its step."""
    k = cj.jit(ADD_SCALED_TEMPLATE if kernel == "template" else ADD_SCALED)
    compute = COMPUTED_FLOATS[expr]
    w, g = torch.randn(N), torch.randn(N)

    def step(w, g, lr: float, m: float, t: int):
        a = compute(lr, m, t)
        if form == "index":
            k[(N + 127) // 128, 128](w, g, a, N)
        else:
            k.forall(N)(w, g, a, N)

    rec = Recorder()
    compiled = torch.compile(step, backend=backend_for(backend, rec), fullgraph=True)
    expected = []
    for t in range(20):
        lr, m = 0.1 / (1 + t), 0.9 - 0.01 * t
        compiled(w, g, lr, m, t)
        expected.append(compute(lr, m, t))
    assert graph_count() == 2
    assert [call[0] for call in cpu_launches] == pytest.approx(expected, rel=1e-12, abs=0)


@pytest.mark.parametrize("value, what", [
    (torch.ones(2), r"a torch.float32 tensor of shape \(2,\) on cpu"),
    (torch.tensor(3), r"a torch.int64 tensor of shape \(\) on cpu"),
])
def test_tensors_for_numbers_must_be_0d_floating_cpu(value, what):
    from torch_cudajit._op import _OpLauncher
    k = cj.jit(ACCUMULATE)
    with pytest.raises(TypeError, match=r"parameter 'a' of kernel 'accumulate' takes a number on "
                                        r"the op path \(torch.compile, TorchScript\), or a 0-d "
                                        r"floating-point CPU tensor; got " + what):
        _OpLauncher(k._parts, (1, 128))(torch.randn(N), torch.randn(N), value, N)


def test_changing_floats_stay_on_the_cpu_whatever_the_default_device():
    """The 0-d tensor a symbolic float travels in is a CPU tensor (the op reads it on the host)
    even where the default device is another one."""
    k = cj.jit(ACCUMULATE)
    rec = Recorder()
    compiled = torch.compile(lambda out, x, a: k.forall(N)(out, x, a, N), backend=rec.backend(),
                             fullgraph=True)
    out, x = torch.randn(N), torch.randn(N)
    with torch.device("meta"):
        for a in (0.5, 1.5):
            compiled(out, x, a)
    assert "scalar_tensors = [" in rec.codes[-1]
    assert "device = device(type='cpu')" in rec.codes[-1], rec.codes[-1]


def test_ints_below_the_symint_range_are_refused():
    """The op's ints are SymInt[] (from -2^62 up). The launcher torch.compile traces refuses one
    below, naming the parameter; called outside tracing here, so no Dynamo wraps the error."""
    from torch_cudajit._op import _OpLauncher
    k = cj.jit(ACCUMULATE)
    with pytest.raises(ValueError, match=r"parameter 'n' of kernel 'accumulate': the op path takes ints "
                                         r"from -2\^62 up, got -9223372036854775808"):
        _OpLauncher(k._parts, (1, 128))(torch.randn(N), torch.randn(N), 1.0, -(1 << 63))


def test_launch_short_form_checks_its_arguments():
    k = cj.jit(ACCUMULATE)
    x = torch.randn(4)
    with pytest.raises(TypeError, match=r"kernel 'accumulate' takes 2 tensor\(s\) and 2 number\(s\), in "
                                        r"parameter order; got 1 tensor\(s\) and 2 number\(s\)"):
        k.launch([1], [4], [x], [1.0, 4])
    with pytest.raises(TypeError, match="scalars must be a list of the number arguments"):
        k.launch([1], [4], [x, x], 1.0)
    with pytest.raises(TypeError, match="tensors must be a list of the tensor arguments"):
        k.launch_forall(4, x, [1.0, 4])


# -- on the GPU -------------------------------------------------------------------------------


def test_auto_parameters_take_tensors_on_the_op_path():
    """A tensor given to an auto parameter is a written output in the traced op, with kind 't';
    a number given to one keeps its own kind."""
    k = cj.jit(AUTO_SCALE, std="c++20")
    rec = Recorder()

    def f(out, x, a: float):
        k[(N + 127) // 128, 128](out, x, a, N)

    torch.compile(f, backend=rec.backend(), fullgraph=True)(torch.randn(N), torch.randn(N), 2.0)
    code = rec.codes[0]
    assert launches(code) == 1, code
    assert "'ttfi'" in code, code
    # Both tensors are written outputs (out0, out1), none is a read-only input.
    assert "_out0_base_index = 0, _out1_base_index = 1" in code and "inputs = []" in code, code


def test_auto_parameters_take_tensors_in_the_short_form():
    """launch(grid, block, tensors, scalars): auto parameters take their values from scalars,
    a tensor there included."""
    k = cj.jit(AUTO_SCALE, std="c++20")
    rec = Recorder()

    def f(out, x, a: float):
        k.launch([(N + 127) // 128], [128], [], [out, x, a, N])

    torch.compile(f, backend=rec.backend(), fullgraph=True)(torch.randn(N), torch.randn(N), 2.0)
    assert "'ttfi'" in rec.codes[0], rec.codes[0]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64, torch.float16]))
@pytest.mark.parametrize("form", ["forall", "launch", "launch_forall", "specialize"])
def test_compiled_forms_match_eager(device, dtype, form):
    k = cj.jit(ACCUMULATE)
    n = 3000
    x = random_values((n,), dtype, device)
    base = random_values((n,), dtype, device)
    sk = k.specialize(base.clone(), x, 1.0, n)

    def f(out, x, a: float):
        if form == "forall":
            k.forall(n)(out, x, a, n)
        elif form == "launch":
            k.launch([(n + 255) // 256], [256], [out, x], [a, n])
        elif form == "launch_forall":
            k.launch_forall(n, [out, x], [a, n])
        else:
            sk[(n + 255) // 256, 256](out, x, a, n)
        return out

    compiled = torch.compile(f, fullgraph=True)
    for a in (0.5, 1.5, -2.0):  # the second value recompiles once (automatic dynamic)
        eager = f(base.clone(), x, a)
        got = compiled(base.clone(), x, a)
        expected = (base.double() + a * x.double()).to(dtype)
        torch.testing.assert_close(eager, expected, rtol=2e-3, atol=2e-3)
        assert torch.equal(got, eager)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64]))
def test_auto_kernel_compiled_matches_eager(device, dtype):
    """An `auto` kernel under torch.compile (inductor), through kernel.op and through the
    script object's short form, against the eager launch and torch."""
    k = cj.jit(AUTO_SCALE, std="c++20")
    x = random_values((N,), dtype, device)
    grid = (N + 127) // 128

    def f(out, x, a: float):
        k[grid, 128](out, x, a, N)
        return out

    expected = 2.5 * x
    eager = f(torch.full_like(x, float("nan")), x, 2.5)
    torch.testing.assert_close(eager, expected)
    compiled = torch.compile(f, fullgraph=True)(torch.full_like(x, float("nan")), x, 2.5)
    assert torch.equal(compiled, eager)
    out = torch.full_like(x, float("nan"))
    k.op[grid, 128](out, x, 2.5, N)
    assert torch.equal(out, eager)
    out = torch.full_like(x, float("nan"))
    # A tuple: torch's conversion of a Python list needs one element type.
    k.script_object.launch([grid], [128], [], (out, x, 2.5, N))
    assert torch.equal(out, eager)


@pytest.mark.gpu
def test_float_in_a_tensor_matches_the_number(device):
    """A 0-d CPU tensor for a float parameter: eager, kernel.op and compiled agree with the
    same value given as a number."""
    k = cj.jit(ACCUMULATE)
    x = random_values((N,), torch.float32, device)
    base = random_values((N,), torch.float32, device)
    expected = base.clone()
    k.forall(N)(expected, x, 0.375, N)
    a = torch.tensor(0.375, dtype=torch.float64)
    runs = {
        "eager": lambda out: k.forall(N)(out, x, a, N),
        "kernel.op": lambda out: k.op[(N + 127) // 128, 128](out, x, a, N),
        "compiled": torch.compile(lambda out: k.forall(N)(out, x, a, N), fullgraph=True),
    }
    for name, run in runs.items():
        out = base.clone()
        run(out)
        assert torch.equal(out, expected), name


@pytest.mark.gpu
@pytest.mark.parametrize("negated", [False, True], ids=["lr", "minus_lr"])
def test_optimizer_loop_compiles_twice_in_100_steps(device, negated):
    """The recompile count of the issue's optimizer loop, with inductor, on the GPU; the
    learning rate passed as given, or negated inside the compiled function."""
    from torch._dynamo.utils import counters
    k = cj.jit(SGD)
    w = random_values((N,), torch.float32, device)
    m = random_values((N,), torch.float32, device)
    g = random_values((N,), torch.float32, device)
    w_ref, m_ref = w.clone(), m.clone()

    def step(w, m, g, lr: float, momentum: float, t: int):
        k.forall(N)(w, m, g, -lr if negated else lr, momentum, t, N)
        return w

    counters.clear()
    compiled = torch.compile(step, fullgraph=True)
    for t in range(100):
        lr, momentum = 0.1 / (1 + t), 0.9 - 0.001 * t
        compiled(w, m, g, lr, momentum, t)
        m_ref.mul_(momentum).add_(g)
        w_ref.sub_((-lr if negated else lr) * m_ref)
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])
    torch.testing.assert_close(m, m_ref)
    torch.testing.assert_close(w, w_ref, rtol=1e-5, atol=1e-5)


class _AutoScaleModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = cj.jit(AUTO_SCALE, std="c++20")

    def forward(self, out, x, a: float):
        n = x.shape[0]
        # TorchScript types a literal list by one element type: values mixing tensors and
        # numbers go in a tuple.
        self.k.launch([(n + 127) // 128], [128], [], (out, x, a, n))
        return out


def test_auto_kernel_scripts_with_a_tuple_of_values():
    scripted = torch.jit.script(_AutoScaleModule())
    assert 'prim::CallMethod[name="launch"]' in str(scripted.graph)


@pytest.mark.gpu
def test_auto_kernel_scripted_matches_torch(device):
    x = random_values((N,), torch.float32, device)
    out = torch.jit.script(_AutoScaleModule())(torch.full_like(x, float("nan")), x, 1.5)
    torch.testing.assert_close(out, 1.5 * x)
