"""The deploy example (examples/deploy): a C++ program with no Python loads the scripted model
and reproduces the Python output bit for bit. CI builds the program (scripts/test.sh, through
CMake); running it needs a GPU."""
from __future__ import annotations

import os
import sys

import pytest

from _support import REPO, run_cpp_example


@pytest.mark.gpu
def test_cpp_program_reproduces_python_bitwise(tmp_path):
    # The C++ process has no Python, and no libclang: the archive carries the kernels'
    # reflection, so loading it reads no source.
    r = run_cpp_example("deploy", "export.py", "torch_cudajit_deploy", "TORCH_CUDAJIT_DEPLOY_BIN",
                        tmp_path, ["model.pt", "data.pt"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bitwise identical to Python: yes" in r.stdout


def test_deploy_model_scripts_and_saves(tmp_path):
    """The exported model compiles under TorchScript and saves (no GPU needed)."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "examples", "deploy"))
    try:
        from model import DeployModel
    finally:
        sys.path.pop(0)
    scripted = torch.jit.script(DeployModel())
    assert str(scripted.graph).count('prim::CallMethod[name="launch"]') == 2
    scripted.save(str(tmp_path / "model.pt"))
    loaded = torch.jit.load(str(tmp_path / "model.pt"))
    assert loaded.axpy.name() == "axpy" and loaded.row_scale.name() == "row_scale"
