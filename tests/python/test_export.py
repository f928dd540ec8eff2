"""torch.export and AOTInductor: a module that launches kernels (kernel[grid, block] and forall,
with int and float numbers) exports to an ExportedProgram whose kernel is a torchbind constant,
saves and loads as .pt2, and packages with AOTInductor. Exporting and saving run without a GPU;
running the programs is marked gpu."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
import torch

import torch_cudajit as cj
from _support import ACCUMULATE, REPO, random_values, run_cpp_example

# Five written tensors (one in more_outputs), no read-only tensor, no number: the op's lists
# that AOTInductor's runtime passes as None when empty.
FILL = r"""
__global__ void fill(float* a, float* b, float* c, float* d, float* e) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = 1.0f; b[i] = 2.0f; c[i] = 3.0f; d[i] = 4.0f; e[i] = 5.0f;
}
"""

N = 1000


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.accumulate = cj.jit(ACCUMULATE)
        self.fill = cj.jit(FILL)

    def forward(self, x):
        out = torch.zeros_like(x)
        n = x.shape[0]
        self.accumulate[(n + 127) // 128, 128](out, x, 2.0, n)
        self.accumulate.forall(n)(out, x, 0.5, n)
        parts = [torch.empty(128, device=x.device) for _ in range(5)]
        self.fill[1, 128](*parts)
        return out * 2 + torch.cat(parts).sum()


def reference(x):
    return (2.5 * x) * 2 + 128 * 15


def export(model, x):
    return torch.export.export(model, (x,))


def test_export_keeps_the_kernels_as_torchbind_constants():
    ep = export(Model(), torch.randn(N))
    code = ep.graph_module.code
    assert code.count("torch.ops.cudajit.launch.default") == 3, code
    assert "[1000], [0]" in code  # forall: the block size is picked when the program runs
    assert "[x], [1000], [2.0], 'fi'" in code  # numbers: ints, floats, kinds
    constants = [v for v in ep.constants.values() if isinstance(v, torch.ScriptObject)]
    assert {c.name() for c in constants} == {"accumulate", "fill"}


def test_exported_program_saves_and_loads():
    ep = export(Model(), torch.randn(N))
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    assert loaded.graph_module.code.count("torch.ops.cudajit.launch.default") == 3
    names = {c.name() for c in loaded.constants.values() if isinstance(c, torch.ScriptObject)}
    assert names == {"accumulate", "fill"}


# -- on the GPU -------------------------------------------------------------------------------


@pytest.mark.gpu
def test_exported_program_runs_like_eager(device):
    model = Model()
    x = random_values((N,), torch.float32, device)
    eager = model(x)
    torch.testing.assert_close(eager, reference(x))
    buf = io.BytesIO()
    torch.export.save(export(model, x), buf)
    buf.seek(0)
    assert torch.equal(torch.export.load(buf).module()(x), eager)


# Packages both models in one process (the compile is the slow part), saving each package
# beside its input and eager output; loading runs in processes of their own, below.
_AOTI_PACKAGE_SCRIPT = """
import sys, torch
sys.path.insert(0, {tests!r})
from _support import random_values
from test_export import Model
class Plain(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1
x = random_values((1000,), torch.float32, "cuda")
for name, model in (("plain", Plain()), ("model", Model())):
    path = torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)),
                                                    package_path=f"{folder}/{{name}}.pt2")
    torch.save({{"x": x, "eager": model(x)}}, f"{folder}/{{name}}.data")
"""

_AOTI_LOAD_SCRIPT = """
import sys, torch
import torch_cudajit
data = torch.load("{folder}/{name}.data")
got = torch._inductor.aoti_load_package("{folder}/{name}.pt2")(data["x"])
got = got[0] if isinstance(got, (list, tuple)) else got
assert torch.equal(got, data["eager"]), (got - data["eager"]).abs().max()
print("aoti: bitwise equal to eager")
"""

# torch 2.11's packages crash on load in some processes, inside the package's own std::regex
# code (torch::aot_inductor::parse_device_str), whatever the package holds; a process whose
# global symbol scope holds the C++ runtime does not crash. The README gives this workaround.
_PRELOAD_CXX_RUNTIME = {"LD_PRELOAD": "libstdc++.so.6"}


def _python(script: str, extra_env=None):
    """Runs `script` in a Python process of its own: a crash while loading a package must fail
    a test, not end the whole run."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, **(extra_env or {})))


@pytest.mark.gpu
def test_aoti_package_runs_like_eager(tmp_path):
    folder = str(tmp_path)
    r = _python(_AOTI_PACKAGE_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)),
                                            folder=folder))
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    # First what a process needs for AOTInductor to load a package of plain torch ops here:
    # nothing, or the C++ runtime preloaded. Neither working means AOTInductor itself is broken.
    errors = []
    for extra_env in ({}, _PRELOAD_CXX_RUNTIME):
        r = _python(_AOTI_LOAD_SCRIPT.format(folder=folder, name="plain"), extra_env)
        if r.returncode == 0:
            break
        errors.append(f"{extra_env or 'as is'}: exit status {r.returncode}, {r.stderr[-300:]}")
    else:
        pytest.skip("AOTInductor cannot load a package of plain torch ops here: " +
                    "; ".join(errors))
    r = _python(_AOTI_LOAD_SCRIPT.format(folder=folder, name="model"), extra_env)
    assert r.returncode == 0 and "bitwise equal" in r.stdout, (r.returncode, r.stdout[-3000:],
                                                               r.stderr[-3000:])


@pytest.mark.gpu
def test_aoti_package_runs_in_cpp(tmp_path):
    """examples/aoti: Python packages a module with AOTInductor; a C++ program with no Python
    loads the package with AOTIModelPackageLoader and reproduces eager Python bit for bit."""
    r = run_cpp_example("aoti", "package.py", "torch_cudajit_aoti", "TORCH_CUDAJIT_AOTI_BIN",
                        tmp_path, ["model.pt2", "data.pt"], script_timeout=600)
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    assert "bitwise identical to eager Python: yes" in r.stdout


def test_aoti_example_exports():
    """The example's module exports with both kernels as torchbind constants (no GPU needed)."""
    sys.path.insert(0, os.path.join(REPO, "examples", "aoti"))
    try:
        from package import COLS, ROWS, RMSNormBias
    finally:
        sys.path.pop(0)
    ep = torch.export.export(RMSNormBias(COLS), (torch.randn(ROWS, COLS),))
    assert ep.graph_module.code.count("torch.ops.cudajit.launch.default") == 2
    names = {c.name() for c in ep.constants.values() if isinstance(c, torch.ScriptObject)}
    assert names == {"rms_norm", "add_bias"}


class _ScriptObjectLaunch(torch.nn.Module):
    """Holds the script object itself, not the Python Kernel, and calls its short form."""

    def __init__(self, method: str):
        super().__init__()
        self.k = cj.jit(ACCUMULATE)._c
        self.method = method

    def forward(self, x):
        out = torch.zeros_like(x)
        if self.method == "launch":
            self.k.launch([4], [256], [out, x], [2.0, x.shape[0]])
        else:
            self.k.launch_forall(x.shape[0], [out, x], [2.0, x.shape[0]])
        return out


@pytest.mark.parametrize("method", ["launch", "launch_forall"])
def test_script_object_short_form_is_refused_by_export_with_what_to_call(method):
    with pytest.raises(RuntimeError, match=rf"kernel 'accumulate': the script object's "
                                           rf"{method}\(\) cannot be traced.*call {method}\(\) on "
                                           rf"the Python Kernel"):
        export(_ScriptObjectLaunch(method), torch.randn(N))
