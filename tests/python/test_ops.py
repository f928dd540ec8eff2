"""The cudajit op family: schema, TorchScript (script, save, load), torch.compile (default and
reduce-overhead), CUDA graphs, opcheck and the op path's argument checks. Tracing and
scripting run without a GPU; anything that launches is marked gpu."""
from __future__ import annotations

import io
import re

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

import torch_cudajit as cj
from _support import ACCUMULATE, dtype_params, poison_, random_values

AXPY = r"""
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
"""

# Five written tensors: four go in the op's out0..out3 slots, the fifth in more_outputs.
FIVE_OUT = r"""
__global__ void powers(float* p1, float* p2, float* p3, float* p4, float* p5, const float* x,
                       int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    p1[i] = v; p2[i] = v * v; p3[i] = v * v * v; p4[i] = v * v * v * v; p5[i] = v * v * v * v * v;
  }
}
"""

N = 1000
BLOCK = 128
GRID = (N + BLOCK - 1) // BLOCK


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# -- schema and roles -------------------------------------------------------------------------


def test_schema_marks_written_tensors():
    schema = str(torch.ops.cudajit.launch.default._schema)
    for part in ("__torch__.torch.classes.cudajit.Kernel k", "Tensor(a!)? out0", "Tensor(d!)? out3",
                 "Tensor(e!)[]? more_outputs", "Tensor[]? inputs", "SymInt[]? ints",
                 "float[] floats", "str kinds", "Tensor?[]? scalar_tensors=None"):
        assert part in schema, schema
    args = {a.name: a for a in torch.ops.cudajit.launch.default._schema.arguments}
    assert args["out0"].alias_info.is_write
    assert args["inputs"].alias_info is None  # read-only: functionalization never clones it
    assert torch.Tag.flexible_layout in torch.ops.cudajit.launch.default.tags


def test_roles_follow_constness():
    k = cj.jit(AXPY)
    assert k._parts.op_roles == ("output", "input", "input", "scalar")
    assert cj.jit(FIVE_OUT)._parts.op_roles == ("output",) * 5 + ("input", "scalar")


def test_script_object_identity():
    k1, k2, k3 = cj.jit(AXPY), cj.jit(AXPY), cj.jit(AXPY, defines={"X": 1})
    assert k1.script_object.name() == "axpy"
    assert k1.script_object.source() == AXPY
    assert k1.script_object.fingerprint() == k2.script_object.fingerprint()
    assert k1.script_object.fingerprint() != k3.script_object.fingerprint()


# -- TorchScript --------------------------------------------------------------------------------


class AxpyModule(torch.nn.Module):
    """A model whose forward launches a kernel through the op family (scriptable)."""

    def __init__(self, kernel):
        super().__init__()
        self.k = kernel.script_object

    def forward(self, x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.size(0)
        # The op itself, as a C++ caller sees it: numbers as kinds ('f': one float).
        torch.ops.cudajit.launch(self.k, out, None, None, None, None, [x, y], None, [alpha], "f",
                                 [(n + 127) // 128], [128], 0)
        return out


def script_and_reload(module):
    scripted = torch.jit.script(module)
    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    buf.seek(0)
    return scripted, torch.jit.load(buf)


def test_script_save_load_keeps_the_kernel():
    k = cj.jit(AXPY, defines={"UNUSED": 3})
    scripted, loaded = script_and_reload(AxpyModule(k))
    assert "cudajit::launch" in str(scripted.graph)
    assert loaded.k.name() == "axpy"
    assert loaded.k.source() == AXPY
    assert loaded.k.fingerprint() == k.script_object.fingerprint()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64, torch.float16]))
def test_scripted_module_runs_like_eager(device, dtype):
    k = cj.jit(AXPY)
    x = random_values((N,), dtype, device)
    y = random_values((N,), dtype, device)
    eager = AxpyModule(k)(x, y, 1.5)
    scripted, loaded = script_and_reload(AxpyModule(k))
    expected = (1.5 * x.double() + y.double()).to(dtype)
    torch.testing.assert_close(eager, expected, rtol=2e-3, atol=2e-3)
    assert torch.equal(scripted(x, y, 1.5), eager)
    assert torch.equal(loaded(x, y, 1.5), eager)


class ShortFormModule(torch.nn.Module):
    """Stores the Python Kernel itself and launches it with the short form, which the Python
    Kernel and the script object both have: one forward for eager, torch.compile and
    TorchScript."""

    def __init__(self):
        super().__init__()
        self.k = cj.jit(ACCUMULATE)

    def forward(self, out: torch.Tensor, x: torch.Tensor, a: float) -> torch.Tensor:
        n = x.size(0)
        self.k.launch([(n + 127) // 128], [128], [out, x], [a, n])
        self.k.launch_forall(n, [out, x], [2.0 * a, n])
        return out


def test_kernel_attribute_scripts_to_its_script_object():
    module = ShortFormModule()
    scripted, loaded = script_and_reload(module)
    assert isinstance(scripted.k, torch.ScriptObject)
    assert scripted.k.fingerprint() == module.k.script_object.fingerprint()
    assert loaded.k.fingerprint() == module.k.script_object.fingerprint()
    assert str(scripted.graph).count("prim::CallMethod[name=\"launch") == 2
    # Assigning a Kernel to a scripted module converts it the same way.
    other = cj.jit(ACCUMULATE, defines={"OTHER": 1})
    scripted.k = other
    assert scripted.k.fingerprint() == other.script_object.fingerprint()


def test_kernel_stays_a_plain_python_object():
    """What makes a Kernel scriptable (torch.jit.RecursiveScriptClass) forwards attributes and
    operators to the script object; a Kernel turns that off."""
    k, other = cj.jit(ACCUMULATE), cj.jit(ACCUMULATE)
    assert bool(k) and k == k and k != other and len({k, other}) == 2
    assert str(k) == repr(k) and "accumulate" in str(k)
    with pytest.raises(AttributeError, match="'Kernel' object has no attribute 'fingerprint'"):
        k.fingerprint()
    with pytest.raises(TypeError):
        k + 1
    with pytest.raises(TypeError, match="does not support __len__"):
        len(k)
    k.note = "user data"  # attributes are the Python object's own
    assert k.note == "user data" and not hasattr(k.script_object, "note")


def test_short_form_errors_name_the_argument():
    k = cj.jit(ACCUMULATE)
    x = torch.randn(4)
    so = k.script_object
    with pytest.raises(TypeError, match=r"kernel 'accumulate': scalars\[0\] \(parameter 'a'\) is "
                                           r"a Tensor; scalars takes numbers"):
        so.launch([1], [4], [x, x], (x, 4))
    with pytest.raises(TypeError, match=r"kernel 'accumulate' takes 2 tensor\(s\) and 2 "
                                           r"number\(s\), in parameter order; got 1 tensor"):
        so.launch_forall(4, [x], [1.0])
    with pytest.raises(TypeError, match=r"T a \(number\)"):
        so.launch([1], [4], [x, x])
    with pytest.raises(ValueError, match="launch_forall of kernel 'accumulate': ntasks must be >= 1, "
                                         "got 0"):
        so.launch_forall(0, [x, x], [1.0])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64]))
def test_short_form_runs_alike_eager_scripted_and_compiled(device, dtype):
    module = ShortFormModule()
    scripted, loaded = script_and_reload(module)
    compiled = torch.compile(module, fullgraph=True)
    x = random_values((N,), dtype, device)
    base = random_values((N,), dtype, device)
    eager = module(base.clone(), x, 0.75)
    torch.testing.assert_close(eager, base + 2.25 * x)
    for run in (scripted, loaded, compiled):
        assert torch.equal(run(base.clone(), x, 0.75), eager)


# -- torch.compile: tracing (no GPU needed) ---------------------------------------------------


def traced_forward_code(fn, *args):
    """The functionalized forward graph torch.compile(fullgraph=True) builds for fn(*args).
    The graph is not run (the op has no CPU kernel): only tracing is tested."""
    codes = []

    def fw_compiler(gm, example_inputs):
        codes.append(gm.code)
        return gm

    compiled = torch.compile(fn, backend=aot_autograd(fw_compiler=fw_compiler), fullgraph=True)
    with pytest.raises(NotImplementedError, match="cudajit::launch"):
        compiled(*args)  # tracing succeeded; running on CPU tensors then fails
    assert len(codes) == 1
    return codes[0]


def test_compile_traces_one_graph_without_cloning_inputs():
    k = cj.jit(AXPY)

    def f(x, y):
        out = torch.empty_like(x)
        k[GRID, BLOCK](out, x, y, 2.0)
        return out + 1

    code = traced_forward_code(f, torch.randn(N), torch.randn(N))
    assert "cudajit.launch.default" in code and "auto_functionalized" in code
    assert "inputs = [arg0_1, arg1_1]" in code  # the graph inputs themselves
    assert "clone" not in code


def test_compile_traces_keyword_arguments():
    k = cj.jit(AXPY)

    def f(x, y):
        out = torch.empty_like(x)
        k[GRID, BLOCK](out=out, x=x, y=y, a=2.0)
        return out

    code = traced_forward_code(f, torch.randn(N), torch.randn(N))
    assert code.count("cudajit.launch.default") == 1
    assert "floats = [2.0], kinds = 'f'" in code


def test_op_path_argument_errors():
    k = cj.jit(AXPY)
    x = torch.randn(4)
    with pytest.raises(TypeError, match=r"parameter 'a' of kernel 'axpy' takes a number on the op "
                                        r"path, or a 0-d floating-point CPU tensor; got a Float "
                                        r"tensor of shape \[4\] on cpu"):
        k.op[1, 4](x, x, x, x)
    with pytest.raises(TypeError, match="parameter 'a' of kernel 'axpy' takes a number on the op path"):
        k.op[1, 4](x, x, x, "2.0")
    with pytest.raises(TypeError, match="parameter 'x' of kernel 'axpy' takes a tensor; got float"):
        k.op[1, 4](x, 1.0, x, 2.0)
    with pytest.raises(TypeError, match="kernel 'axpy' takes 4 argument"):
        k.op[1, 4](x, x, 2.0)
    with pytest.raises(ValueError, match="the op path launches on the current stream"):
        k.op[1, 4, object()](x, x, x, 2.0)
    with pytest.raises(ValueError, match="shared_mem must be an int >= 0, got -1"):
        k.op[1, 4, None, -1](x, x, x, 2.0)
    with pytest.raises(TypeError, match=r"grid must be an int or a tuple of 1 to 3 ints, got \(1, 2, 3, 4\)"):
        k.op[(1, 2, 3, 4), 4](x, x, x, 2.0)


# -- autograd: the rules every launch path shares (launch_specialization) -------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("inference", [False, True], ids=["grad_mode", "inference_mode"])
def test_op_bumps_the_version_of_every_written_tensor(device, inference):
    k = cj.jit(FIVE_OUT)
    x = random_values((N,), torch.float32, device)
    outs = [torch.empty(N, device=device) for _ in range(5)]
    for expected in (1, 2):
        with torch.inference_mode(inference):  # tensors made outside keep their counters
            k.op[GRID, BLOCK](*outs, x, N)
        assert [o._version for o in outs] == [expected] * 5  # out0..out3 and more_outputs[0]
        assert x._version == 0  # read only
    torch.testing.assert_close(outs[4], x ** 5)


@pytest.mark.gpu
@pytest.mark.parametrize("written", [0, 4], ids=["out0", "more_outputs"])
def test_op_refuses_to_write_a_tensor_that_requires_grad(device, written):
    k = cj.jit(FIVE_OUT)
    x = random_values((N,), torch.float32, device).requires_grad_()  # reading one is fine
    outs = [torch.empty(N, device=device) for _ in range(5)]
    outs[written].requires_grad_()
    with pytest.raises(RuntimeError, match=f"kernel 'powers' writes parameter 'p{written + 1}', a "
                                           "tensor that requires grad; kernels have no derivative"):
        k.op[GRID, BLOCK](*outs, x, N)
    assert outs[written]._version == 0
    with torch.no_grad():  # initialising a parameter in place, as torch allows
        k.op[GRID, BLOCK](*outs, x, N)
    assert outs[written]._version == 1


def test_writing_a_const_parameter_is_a_compile_error(arch):
    bad = cj.jit(r"""
    __global__ void bad(cj::Array<float, 1> out, cj::Array<const float, 1> x) {
      x[0] = 1.0f;  // x is an input: its element type is const
      out[0] = x[0];
    }""")
    t = torch.empty(4, device="meta")
    with pytest.raises(cj.CompileError) as info:
        bad.compile(t, t, arch=arch)
    assert info.value.kernel_name == "bad"
    assert "const" in info.value.log and "x[0] = 1.0f" in str(info.value)


# -- on the GPU -------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", dtype_params([torch.float32, torch.float64, torch.bfloat16]))
def test_op_path_eager(device, dtype):
    k = cj.jit(AXPY)
    x = random_values((N,), dtype, device)
    y = random_values((N,), dtype, device)
    expected = (2.0 * x.double() + y.double()).to(dtype)
    out = poison_(torch.empty_like(x), expected)
    k.op[GRID, BLOCK](out, x, y, 2.0)
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)
    # The op and the eager launcher share compiled code: one specialization.
    out2 = poison_(torch.empty_like(x), expected)
    k[GRID, BLOCK](out2, x, y, 2.0)
    assert torch.equal(out, out2)
    assert len(k.signatures) == 1


@pytest.mark.gpu
def test_op_path_more_than_four_outputs(device):
    k = cj.jit(FIVE_OUT)
    x = random_values((N,), torch.float32, device)
    outs = [poison_(torch.empty_like(x)) for _ in range(5)]
    k.op[GRID, BLOCK](*outs, x, N)
    for p, out in enumerate(outs, start=1):
        torch.testing.assert_close(out, x ** p, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_op_direct_call_checks_counts(device):
    k = cj.jit(AXPY)
    x = torch.randn(8, device=device)
    with pytest.raises(ValueError, match=r"got 1 output tensor\(s\), 1 input tensor\(s\) and 1 "
                                         r"number\(s\); the kernel takes 1, 2 and 1"):
        torch.ops.cudajit.launch(k.script_object, x, None, None, None, [], [x], [], [2.0], "f",
                                 [1], [8], 0)
    with pytest.raises(ValueError, match="out2 is given but out1 is None"):
        torch.ops.cudajit.launch(k.script_object, x, None, x, None, [], [x, x], [], [2.0], "f",
                                 [1], [8], 0)
    with pytest.raises(ValueError, match="kinds 'f' needs more entries in floats than its 0"):
        torch.ops.cudajit.launch(k.script_object, x, None, None, None, [], [x, x], [], [], "f",
                                 [1], [8], 0)
    with pytest.raises(ValueError, match="kinds 'f' uses 0 of the 1 ints and 1 of the 1 floats"):
        torch.ops.cudajit.launch(k.script_object, x, None, None, None, [], [x, x], [3], [2.0], "f",
                                 [1], [8], 0)
    with pytest.raises(ValueError, match=r"kinds\[0\] is 'x'; expected 'i', 'b', 'f' or 'c'"):
        torch.ops.cudajit.launch(k.script_object, x, None, None, None, [], [x, x], [], [2.0], "x",
                                 [1], [8], 0)


@pytest.mark.gpu
def test_opcheck(device):
    k = cj.jit(AXPY)
    x = random_values((N,), torch.float32, device)
    y = random_values((N,), torch.float32, device)
    out = torch.empty_like(x)
    # test_schema cannot inspect custom-class arguments (SchemaCheckMode); the other checks
    # (fake tensors, AOT dispatch with dynamic shapes, autograd registration) all run.
    torch.library.opcheck(
        torch.ops.cudajit.launch.default,
        (k.script_object, out, None, None, None, [], [x, y], [], [2.0], "f", [GRID, 1, 1],
         [BLOCK, 1, 1], 0),
        test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))
    poison_(out)
    torch.ops.cudajit.launch.default(k.script_object, out, None, None, None, [], [x, y], [], [2.0],
                                     "f", [GRID, 1, 1], [BLOCK, 1, 1], 0)
    torch.testing.assert_close(out, 2.0 * x + y)


class Model(torch.nn.Module):
    """Two launches and torch ops around them; launches use kernel[grid, block]."""

    def __init__(self):
        super().__init__()
        self.axpy = cj.jit(AXPY)

    def forward(self, x, y):
        h = torch.empty_like(x)
        self.axpy[GRID, BLOCK](h, x, y, 2.0)
        out = torch.empty_like(x)
        self.axpy[GRID, BLOCK](out, h.relu(), x, -0.5)
        return out * 3


def model_reference(x, y):
    h = 2.0 * x + y
    return (-0.5 * h.relu() + x) * 3


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [None, "reduce-overhead"], ids=["default", "reduce-overhead"])
def test_compile_fullgraph_matches_eager(device, mode):
    from torch._inductor.utils import run_and_get_code
    model = Model()
    x = random_values((N,), torch.float32, device)
    y = random_values((N,), torch.float32, device)
    eager = model(x, y)
    torch.testing.assert_close(eager, model_reference(x, y))
    compiled = torch.compile(model, fullgraph=True, mode=mode)
    for _ in range(3):  # reduce-overhead records a CUDA graph on a later call, then replays it
        x.copy_(random_values((N,), torch.float32, device))
        got, codes = run_and_get_code(compiled, x, y) if _ == 0 else (compiled(x, y), None)
        torch.testing.assert_close(got, model_reference(x, y))
        assert torch.equal(got, model(x, y))
        if codes is not None:
            # The calls in the generated code (comments may name the op too).
            code = "\n".join(line for c in codes for line in c.splitlines()
                             if not line.lstrip().startswith("#"))
            assert len(re.findall(r"torch\.ops\.cudajit\.launch\.default\(", code)) == 2, code
            if mode is None:
                assert "clone" not in code  # inputs read in place, outputs written in place


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay(device):
    k = cj.jit(AXPY)
    x = random_values((N,), torch.float32, device)
    y = random_values((N,), torch.float32, device)
    out = torch.empty_like(x)
    out_op = torch.empty_like(x)
    launch = k[GRID, BLOCK]
    # Compile and load before capture (capture must not compile).
    launch(out, x, y, 2.0)
    k.op[GRID, BLOCK](out_op, x, y, 2.0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            launch(out, x, y, 2.0)
            k.op[GRID, BLOCK](out_op, out, y, 0.5)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(3):
        x.copy_(random_values((N,), torch.float32, device))
        y.copy_(random_values((N,), torch.float32, device))
        poison_(out)
        poison_(out_op)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2.0 * x + y)
        torch.testing.assert_close(out_op, 0.5 * (2.0 * x + y) + y)
