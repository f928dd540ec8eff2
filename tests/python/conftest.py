"""pytest configuration of the torch_cudajit suite.

Tests marked ``gpu`` need a CUDA GPU and are skipped when ``torch.cuda.is_available()`` is
False; everything else (reflection, compilation to PTX/CUBIN, argument checking) runs on any
machine that has NVRTC, using CPU or meta tensors as type exemplars.
"""
import os
import sys
import tempfile

import pytest
import torch

import torch_cudajit as cj

# Every test process gets an empty disk cache of its own, so that results never depend on
# kernels a previous run left in ~/.cache (tests of the cache itself use their own folders).
os.environ["TORCH_CUDAJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="torch_cudajit_test_cache_")
# Tests launch tiny grids on purpose; the low-occupancy warning has a test of its own.
os.environ["TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS"] = "0"

# The helpers module sits next to this file; make it importable whatever the rootdir/import mode.
sys.path.insert(0, os.path.dirname(__file__))

HAS_GPU = torch.cuda.is_available()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_terminal_summary(terminalreporter):
    """The summary lines test modules left in _support.SUMMARY (counts of the file corpus)."""
    from _support import SUMMARY
    for line in SUMMARY.values():
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    """Deterministic random inputs in every test."""
    torch.manual_seed(1234)
    yield


@pytest.fixture(autouse=True)
def _surface_async_errors(request):
    """Synchronizes after each GPU test, so that an asynchronous CUDA error fails the test that
    caused it rather than a later one."""
    yield
    if HAS_GPU and "gpu" in request.keywords:
        torch.cuda.synchronize()


@pytest.fixture
def arch():
    """The architecture CPU-side compilation targets (an H200's)."""
    return "sm_90"


@pytest.fixture
def device():
    if not HAS_GPU:
        pytest.skip("needs a CUDA GPU")
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def two_gpus():
    """The first two CUDA devices; skips with fewer than two GPUs."""
    if not HAS_GPU or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    return torch.device("cuda", 0), torch.device("cuda", 1)


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh, empty cache folder for this test; the previous settings come back afterwards."""
    before = cj.cache.settings()
    folder = tmp_path / "cache"
    cj.cache.configure(dir=folder, enabled=True, max_bytes=1 << 30)
    yield folder
    cj.cache.configure(**before)
