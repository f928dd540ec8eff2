"""numba-dispatcher parity: options with numba's names, inspection (PTX, SASS, types), resource
attributes, occupancy, cooperative launch, nvJitLink linking, debug mode, the low-occupancy
warning and pickling. Compile-side checks run without a GPU; launches are marked gpu."""
from __future__ import annotations

import ctypes
import math
import os
import pickle
import struct
import subprocess
import sys
import warnings

import pytest
import torch

import torch_cudajit as cj
from torch_cudajit import _inspect
from _support import poison_, random_values

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCALE = r"""
template <typename T>
__global__ void scale(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
"""

SHARED = r"""
__global__ void __launch_bounds__(128) blocksum(float* out, const float* x, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int j = 0; j < blockDim.x; ++j) s += buf[j];
    out[blockIdx.x] = s;
  }
}
"""

# A grid-wide reduction: every block writes a partial sum, the grid synchronizes, block 0 adds.
GRID_SUM = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void grid_sum(cj::Array<double, 1> out, cj::Array<double, 1> partial,
                         cj::Array<const double, 1> x) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ double scratch[];
  double s = 0;
  for (long long i = grid.thread_rank(); i < x.size(0); i += grid.size()) s += x[i];
  scratch[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) scratch[threadIdx.x] += scratch[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = scratch[0];
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
    out[0] = total;
  }
}
"""

USES_HELPER = r"""
extern __device__ float helper(float v);
__global__ void apply(cj::Array<float, 1> out, cj::Array<const float, 1> x) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = helper(x[i]);
}
"""
HELPER_CU = "__device__ float helper(float v) { return 3.0f * v + 1.0f; }\n"

OOB = r"""
__global__ void shift(cj::Array<float, 1> out, cj::Array<const float, 1> x, int by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < out.size(0)) {
    out[i] = x[i + by];
  }
}
"""

ASSERTS = r"""
__global__ void checked(cj::Array<float, 1> out, cj::Array<const float, 1> x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) {
    cj_assert(x[i] > 0.0f, "inputs must be positive");
    out[i] = x[i];
  }
}
"""


def meta(n, dtype=torch.float32):
    return torch.empty(n, dtype=dtype, device="meta")


def compiled_scale(arch, *dtypes):
    k = cj.jit(SCALE)
    for d in dtypes or (torch.float32,):
        k.compile(meta(8, d), meta(8, d), 2.0, arch=arch)
    return k


# -- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, expected", [
    pytest.param(dict(max_registers=32), ["--maxrregcount=32"], id="max_registers"),
    pytest.param(dict(opt=False), ["--ptxas-options=-O0"], id="opt-false"),
    pytest.param(dict(opt=1), ["--ptxas-options=-O1"], id="opt-1"),
    pytest.param(dict(fastmath=True), ["--use_fast_math"], id="fastmath"),
    pytest.param(dict(lineinfo=True), ["-lineinfo"], id="lineinfo"),
    pytest.param(dict(debug=True), ["-G", "-DCJ_DEBUG"], id="debug"),
    pytest.param(dict(defines={"A": 2}, include_dirs=["/tmp"]), ["-DA=2", "-I/tmp"], id="defines"),
    pytest.param(dict(options=["--extra-device-vectorization"]), ["--extra-device-vectorization"],
                 id="extra"),
])
def test_numba_named_options(arch, kwargs, expected):
    c = cj.jit(SCALE, **kwargs).compile(meta(8), meta(8), 2.0, arch=arch)
    for o in expected:
        assert o in c.options
    if "opt" not in kwargs:
        assert not any(o.startswith("--ptxas-options=-O") for o in c.options)


def cubin_register_counts(cubin: bytes) -> list:
    """Registers per thread of each kernel in a CUBIN, read from its .nv.info section
    (EIATTR_REGCOUNT), so register caps can be checked without a GPU."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3a)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    counts = []
    for sec in sections:
        name = cubin[names + sec[0]:cubin.index(b"\0", names + sec[0])]
        if name != b".nv.info":
            continue
        p, end = sec[4], sec[4] + sec[5]
        while p < end:
            fmt, attr = cubin[p], cubin[p + 1]
            if fmt == 4:  # size-prefixed value
                size, = struct.unpack_from("<H", cubin, p + 2)
                if attr == 0x2F:  # EIATTR_REGCOUNT: (function, registers)
                    counts.append(struct.unpack_from("<II", cubin, p + 4)[1])
                p += 4 + size
            else:
                p += {3: 4, 2: 3}.get(fmt, 2)
    return counts


# Many live values: without a cap ptxas uses far more than 32 registers.
HUNGRY = r"""
__global__ void hungry(float* out, const float* x, int n) {
  float acc[48];
  #pragma unroll
  for (int j = 0; j < 48; ++j) acc[j] = x[(threadIdx.x + j * 7) % n];
  #pragma unroll
  for (int r = 0; r < 4; ++r)
    #pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = acc[j] * acc[(j + r + 1) % 48] + 1.0f;
  float s = 0;
  #pragma unroll
  for (int j = 0; j < 48; ++j) s += acc[j];
  out[threadIdx.x] = s;
}
"""


def test_max_registers_caps_the_cubin(arch):
    loose = cj.jit(HUNGRY).compile(meta(8), meta(8), 8, arch=arch)
    tight = cj.jit(HUNGRY, max_registers=32).compile(meta(8), meta(8), 8, arch=arch)
    (loose_regs,), (tight_regs,) = cubin_register_counts(loose.cubin), cubin_register_counts(tight.cubin)
    assert loose_regs > 32 and tight_regs <= 32


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param(dict(max_registers=0), ValueError, "max_registers must be a positive int, got 0", id="regs"),
    pytest.param(dict(opt=7), ValueError, "opt must be True, False or an optimization level 0-3, got 7", id="opt"),
    pytest.param(dict(link=["/nonexistent/helper.cu"]), ValueError, "the file '/nonexistent/helper.cu' does not exist", id="link-missing"),
    pytest.param(dict(link=["helper.txt"]), ValueError, "has the extension '.txt'", id="link-ext"),
    pytest.param(dict(link=[3]), TypeError, "link entries must be paths, got int", id="link-type"),
])
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cj.jit(SCALE, **kwargs)


# -- inspection -------------------------------------------------------------------------------


def test_inspect_ptx_one_and_all(arch):
    k = compiled_scale(arch, torch.float32)
    ptx = k.inspect_ptx()
    assert isinstance(ptx, str) and ".entry" in ptx and k.overloads[next(iter(k.overloads))].lowered_name in ptx
    k.compile(meta(8, torch.float64), meta(8, torch.float64), 2.0, arch=arch)
    all_ptx = k.inspect_ptx()
    assert set(all_ptx) == set(k.signatures)
    sig64 = "(Array<float64, 1, contiguous>, Array<const float64, 1, contiguous>, float)"
    assert "f64" in k.inspect_ptx(sig64) and all_ptx[sig64] == k.inspect_ptx(sig64)


def test_inspect_types(arch):
    k = compiled_scale(arch, torch.float16)
    t = k.inspect_types()
    assert t["signature"] == "(Array<float16, 1, contiguous>, Array<const float16, 1, contiguous>, float)"
    assert t["cpp_signature"].startswith("void scale<__half")
    assert "cj::Array<__half, 1" in t["cpp_signature"]
    assert t["lowered_name"].startswith("_Z") and "static_cast" in t["name_expression"]
    assert "-arch=sm_90" in t["options"]
    assert [p["name"] for p in t["parameters"]] == ["out", "x", "a"]
    assert t["parameters"][0] == dict(name="out", declared="cj::Array<T, 1>",
                                      binds="Array<float16, 1, contiguous>")
    assert t["parameters"][2]["binds"] == "float"


def test_inspect_sass(arch):
    if _inspect.find_tool("cuobjdump") is None and _inspect.find_tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here")
    k = compiled_scale(arch, torch.float32)
    sass = k.inspect_sass()
    assert "FMUL" in sass or "FMUL" in sass.upper()
    assert k.overloads[next(iter(k.overloads))].lowered_name in sass


def test_inspect_sass_without_tools(arch, monkeypatch):
    k = compiled_scale(arch, torch.float32)
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(_inspect, "TOOL_DIRS", [])
    monkeypatch.setattr(_inspect, "WHEEL_BIN_DIRS", ())
    with pytest.raises(RuntimeError, match="inspect_sass needs cuobjdump or nvdisasm from the CUDA toolkit"):
        k.inspect_sass()


@pytest.mark.parametrize("layout", ["nvidia/cu13/bin", "nvidia/cuda_nvdisasm/bin"])
def test_nvdisasm_from_its_wheel_is_found(arch, monkeypatch, tmp_path, layout):
    """The nvidia-cuda-nvdisasm wheel installs nvidia/cu13/bin/nvdisasm in site-packages (older
    wheels: nvidia/cuda_nvdisasm/bin): inspect_sass finds it there, with nothing on PATH."""
    site = tmp_path / "site-packages"
    folder = site.joinpath(*layout.split("/"))
    folder.mkdir(parents=True)
    tool = folder / "nvdisasm"
    tool.write_text("#!/bin/sh\necho \"fake nvdisasm $1\"\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(_inspect, "TOOL_DIRS", [])
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(site)])
    assert _inspect.find_tool("nvdisasm") == str(tool)
    assert _inspect.find_tool("cuobjdump") is None
    k = compiled_scale(arch, torch.float32)
    assert k.inspect_sass().startswith("fake nvdisasm -c")
    tool.chmod(0o644)  # not executable: not a tool
    assert _inspect.find_tool("nvdisasm") is None


def test_inspect_errors(arch):
    k = cj.jit(SCALE)
    with pytest.raises(ValueError, match="has no compiled overloads yet"):
        k.inspect_ptx()
    k.compile(meta(8), meta(8), 2.0, arch=arch)
    with pytest.raises(ValueError, match=r"has no compiled overload '\(float\)'"):
        k.inspect_ptx("(float)")
    with pytest.raises(TypeError, match="signature must be a str"):
        k.inspect_types(3)


# -- cooperative kernels and linking (compile side) ---------------------------------------------


def test_cooperative_detection_and_compile(arch):
    k = cj.jit(GRID_SUM)
    assert k.cooperative
    assert not cj.jit(SCALE).cooperative
    c = k.compile(meta(1, torch.float64), meta(4, torch.float64), meta(100, torch.float64), arch=arch)
    assert c.cubin


def nvrtc():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libnvrtc.so" in path and "builtins" not in path:
                return ctypes.CDLL(path)
    raise RuntimeError("NVRTC not loaded")


def nvrtc_output(source: str, options, what: str) -> bytes:
    """PTX, relocatable CUBIN or LTO-IR of a source, through the NVRTC C API."""
    lib = nvrtc()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"helper.cu", 0, None, None) == 0
    argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    assert lib.nvrtcCompileProgram(prog, len(options), argv) == 0
    size = ctypes.c_size_t()
    getattr(lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    getattr(lib, f"nvrtcGet{what}")(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    data = buf.raw
    return data.rstrip(b"\0") if what == "PTX" else data


@pytest.fixture
def link_files(tmp_path, arch):
    cj.jit(SCALE).compile(meta(8), meta(8), 2.0, arch=arch)  # loads NVRTC
    files = {}
    files["cu"] = tmp_path / "helper.cu"
    files["cu"].write_text(HELPER_CU)
    files["ltoir"] = tmp_path / "helper.ltoir"
    files["ltoir"].write_bytes(nvrtc_output(HELPER_CU, ["-arch=sm_90", "-rdc=true", "-dlto"], "LTOIR"))
    files["ptx"] = tmp_path / "helper.ptx"
    files["ptx"].write_bytes(nvrtc_output(HELPER_CU, ["-arch=compute_90", "-rdc=true"], "PTX"))
    files["cubin"] = tmp_path / "helper.cubin"
    files["cubin"].write_bytes(nvrtc_output(HELPER_CU, ["-arch=sm_90", "-rdc=true"], "CUBIN"))
    return files


@pytest.mark.parametrize("kind", ["cu", "ltoir", "ptx", "cubin"])
def test_link_compiles(arch, link_files, kind):
    k = cj.jit(USES_HELPER, link=[link_files[kind]])
    c = k.compile(meta(8), meta(8), arch=arch)
    assert c.cubin and c.target == "sm_90"
    assert "-dlto" in c.options
    with pytest.raises(ValueError, match="keeps no PTX"):
        c.inspect_ptx()


def test_link_undefined_symbol(arch, tmp_path):
    other = tmp_path / "other.cu"
    other.write_text("__device__ float not_helper(float v) { return v; }\n")
    with pytest.raises(cj.CompileError, match="Linking failed") as info:
        cj.jit(USES_HELPER, link=[other]).compile(meta(8), meta(8), arch=arch)
    assert "helper" in info.value.log


def test_link_file_edit_misses_the_cache(arch, tmp_path):
    helper = tmp_path / "h.cu"
    helper.write_text(HELPER_CU)
    k1 = cj.jit(USES_HELPER, link=[helper])
    c1 = k1.compile(meta(8), meta(8), arch=arch)
    helper.write_text(HELPER_CU.replace("3.0f", "5.0f"))
    k2 = cj.jit(USES_HELPER, link=[helper])
    c2 = k2.compile(meta(8), meta(8), arch=arch)
    assert k2.cache_hits == 0 and c2.cubin != c1.cubin


# -- pickling -----------------------------------------------------------------------------------


def test_pickle_round_trip_keeps_compiled_code(arch):
    k = compiled_scale(arch, torch.float32, torch.float64)
    k2 = pickle.loads(pickle.dumps(k))
    assert k2.signatures == k.signatures
    assert k2.source == k.source and k2.name == k.name
    assert [c.cubin for c in k2.overloads.values()] == [c.cubin for c in k.overloads.values()]


def test_pickle_module(arch):
    src = SCALE + "\n__global__ void other(float* o) { o[0] = 1.0f; }\n"
    mod = cj.jit(src)
    mod.scale.compile(meta(8), meta(8), 2.0, arch=arch)
    mod2 = pickle.loads(pickle.dumps(mod))
    assert mod2.names == ["scale", "other"]
    assert mod2.scale.signatures == mod.scale.signatures


def test_unpickle_in_a_new_process_does_not_compile(arch, tmp_path):
    k = compiled_scale(arch, torch.float32)
    path = tmp_path / "k.pkl"
    path.write_bytes(pickle.dumps(k))
    code = f"""
import pickle, torch, torch_cudajit as cj
k = pickle.loads(open({str(path)!r}, "rb").read())
print(k.signatures[0])
print(len(k.inspect_ptx()))
print(cj._C.nvrtc_compile_count())
"""
    env = dict(os.environ, TORCH_CUDAJIT_CACHE="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    sig, ptx_len, compiles = r.stdout.split("\n")[:3]
    assert sig == k.signatures[0]
    assert int(ptx_len) == len(k.inspect_ptx())
    assert compiles == "0"  # nothing was compiled (and the disk cache was off)


# -- on the GPU -------------------------------------------------------------------------------


@pytest.mark.gpu
def test_resource_attributes(device):
    k = cj.jit(SHARED)
    x = random_values((1000,), torch.float32, device)
    out = torch.empty(8, device=device)
    k[8, 128](out, x, 1000)
    assert k.get_shared_mem_per_block() == 256 * 4
    assert k.get_max_threads_per_block() == 128  # __launch_bounds__(128)
    assert 1 <= k.get_regs_per_thread() <= 255
    assert k.get_local_mem_per_thread() >= 0 and k.get_const_mem_size() >= 0
    two = cj.jit(SCALE)
    xs = [random_values((64,), d, device) for d in (torch.float32, torch.float64)]
    for xx in xs:
        two[1, 64](torch.empty_like(xx), xx, 2.0)
    regs = two.get_regs_per_thread()
    assert isinstance(regs, dict) and set(regs) == set(two.signatures)
    sig = two.signatures[1]
    assert two.get_regs_per_thread(sig) == regs[sig]
    sk = two.specialize(torch.empty_like(xs[0]), xs[0], 2.0)
    assert sk.regs_per_thread == regs[two.signatures[0]]
    assert sk.get_max_threads_per_block() == sk.max_threads_per_block >= 256


@pytest.mark.gpu
def test_max_registers_caps_registers(device):
    # A kernel without __launch_bounds__ (its own bounds would take precedence over the cap).
    k = cj.jit(HUNGRY, max_registers=32)
    x = random_values((256,), torch.float32, device)
    k[2, 128](torch.empty_like(x), x, 256)
    regs = k.get_regs_per_thread()
    assert regs <= 32
    assert regs == cubin_register_counts(k.overloads[next(iter(k.overloads))].cubin)[0]


@pytest.mark.gpu
def test_grid_sync_reduction_matches_torch_sum(device):
    k = cj.jit(GRID_SUM)
    x = random_values((1_000_003,), torch.float64, device)
    block = 256
    smem = block * 8
    # Compile first (specialize), then ask the occupancy question of that overload.
    out = torch.empty(1, dtype=torch.float64, device=device)
    partial = torch.empty(1024, dtype=torch.float64, device=device)
    sk = k.specialize(out, partial, x)
    blocks = sk.max_cooperative_grid_blocks(block, smem)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    assert blocks >= sms and blocks % sms == 0
    grid = min(blocks, partial.numel())
    poison_(out)
    sk[grid, block, None, smem](out, partial, x)
    torch.testing.assert_close(out[0], x.sum(), rtol=1e-12, atol=1e-9)


@pytest.mark.gpu
def test_max_cooperative_grid_blocks_bad_inputs(device):
    k = cj.jit(GRID_SUM)
    x = random_values((4096,), torch.float64, device)
    sk = k.specialize(torch.empty(1, dtype=torch.float64, device=device),
                      torch.empty(64, dtype=torch.float64, device=device), x)
    with pytest.raises(ValueError, match="dynamic_shared_mem must be an int >= 0, got -1"):
        sk.max_cooperative_grid_blocks(256, -1)
    with pytest.raises(ValueError, match=r"threads per block on this device; got 2048"):
        sk.max_cooperative_grid_blocks((2048,))
    with pytest.raises(ValueError, match=r"bytes of dynamic shared memory \(.* static\); got 100000000"):
        sk.max_cooperative_grid_blocks(256, 100_000_000)
    # One overload: no signature needed. Two: the kernel asks which.
    assert k.max_cooperative_grid_blocks(256, 2048) == sk.max_cooperative_grid_blocks(256, 2048)
    k.specialize(torch.empty(1, dtype=torch.float64, device=device),
                 torch.empty(64, dtype=torch.float64, device=device), x[::2])  # strided: a second overload
    assert len(k.signatures) == 2
    with pytest.raises(ValueError, match=r"kernel 'grid_sum' has 2 overloads; pass signature="):
        k.max_cooperative_grid_blocks(256)


@pytest.mark.gpu
def test_cooperative_grid_too_large_is_refused(device):
    k = cj.jit(GRID_SUM)
    x = random_values((4096,), torch.float64, device)
    out = torch.empty(1, dtype=torch.float64, device=device)
    partial = torch.empty(100000, dtype=torch.float64, device=device)
    sk = k.specialize(out, partial, x)
    too_many = sk.max_cooperative_grid_blocks(256, 2048) + 1
    with pytest.raises(ValueError, match=rf"synchronizes the whole grid, so all its blocks must be "
                                         rf"resident at once; the grid has {too_many} blocks"):
        sk[too_many, 256, None, 2048](out, partial, x)
    sk[4, 256, None, 2048](out, partial, x)  # the context is fine
    torch.testing.assert_close(out[0], x.sum())


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cu", "ltoir"])
def test_linked_kernel_runs(device, link_files, kind):
    k = cj.jit(USES_HELPER, link=[link_files[kind]])
    x = random_values((1000,), torch.float32, device)
    out = poison_(torch.empty_like(x))
    k[8, 128](out, x)
    torch.testing.assert_close(out, 3.0 * x + 1.0)


@pytest.mark.gpu
def test_debug_mode_out_of_bounds_read(device):
    k = cj.jit(OOB, debug=True)
    x = random_values((8,), torch.float32, device)
    out = torch.empty(8, device=device)
    with pytest.raises(cj.KernelAssertionError) as info:
        k[1, 8](out, x, 3)
    e = info.value
    # Thread 5 reads x[5 + 3] first out of bounds (threads 5, 6, 7 all do; one is reported).
    assert e.kernel_name == "shift" and e.file == "kernel.cu" and e.line == 5
    assert e.shape == (8,) and e.dim == 0 and e.index in (8, 9, 10)
    assert e.thread[0] == e.index - 3 and e.block == (0, 0, 0)
    assert (f"kernel 'shift' indexed out of bounds at kernel.cu:5 in thread ({e.thread[0]}, 0, 0) "
            f"of block (0, 0, 0): index {e.index} is outside dimension 0 of size 8 of an array "
            f"of shape [8]") in str(e)
    # The context is still usable: the same kernel and torch both work afterwards.
    out2 = poison_(torch.empty(5, device=device))
    k[1, 8](out2, x, 3)
    torch.testing.assert_close(out2, x[3:])
    assert torch.equal((x + 1).cpu(), x.cpu() + 1)


@pytest.mark.gpu
def test_debug_mode_assert(device):
    k = cj.jit(ASSERTS, debug=True)
    x = random_values((64,), torch.float32, device).abs()
    x[37] = -1.0
    out = torch.empty_like(x)
    with pytest.raises(cj.KernelAssertionError, match=r"failed cj_assert\(x\[i\] > 0.0f\) at "
                                                      r"kernel.cu:5 in thread \(5, 0, 0\) of block "
                                                      r"\(1, 0, 0\): inputs must be positive"):
        k[2, 32](out, x)
    x[37] = 1.0
    k[2, 32](out, x)
    torch.testing.assert_close(out, x)


@pytest.mark.gpu
def test_release_mode_has_no_checks(device):
    k = cj.jit(ASSERTS)  # no debug: cj_assert compiles to nothing
    x = -random_values((64,), torch.float32, device).abs()
    out = torch.empty_like(x)
    k[2, 32](out, x)
    torch.testing.assert_close(out, x)


@pytest.mark.gpu
def test_low_occupancy_warning(device, monkeypatch):
    monkeypatch.setenv("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "1")
    k = cj.jit(SCALE)
    x = random_values((64,), torch.float32, device)
    out = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with pytest.warns(cj.LowOccupancyWarning, match=rf"grid of 1 block\(s\), fewer than twice the {sms} SMs"):
        k[1, 64](out, x, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k[1, 64](out, x, 2.0)  # once per kernel and configuration
        k[2 * sms, 64](out, x, 2.0)  # enough blocks: no warning
    monkeypatch.setenv("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")
    k2 = cj.jit(SCALE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k2[1, 64](out, x, 2.0)


@pytest.mark.gpu
def test_pickled_specialized_kernel_launches_in_a_new_process(device, tmp_path):
    k = cj.jit(SCALE)
    x = random_values((100,), torch.float32, device)
    sk = k.specialize(torch.empty_like(x), x, 2.0)
    path = tmp_path / "sk.pkl"
    path.write_bytes(pickle.dumps(sk))
    code = f"""
import pickle, torch, torch_cudajit as cj
sk = pickle.loads(open({str(path)!r}, "rb").read())
x = torch.arange(100, dtype=torch.float32, device="cuda")
out = torch.empty_like(x)
sk[1, 128](out, x, 2.0)
torch.testing.assert_close(out, 2 * x)
print(cj._C.nvrtc_compile_count())
"""
    env = dict(os.environ, TORCH_CUDAJIT_CACHE="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


# -- review follow-ups: per-kernel cooperative detection, linking in debug mode, link options --


def test_cooperative_detection_is_per_kernel(arch):
    src = GRID_SUM + "\n__global__ void plain(float* o) { o[0] = 1.0f; }\n"
    mod = cj.jit(src)
    assert mod.grid_sum.cooperative and not mod.plain.cooperative
    helper_only = r"""
#include <cooperative_groups.h>
__device__ void barrier() { cooperative_groups::this_grid().sync(); }
__global__ void uses_helper(float* o) { barrier(); o[0] = 1.0f; }
"""
    assert cj.jit(helper_only).cooperative  # the helper may be called: launch cooperatively
    assert not cj.jit(helper_only, cooperative=False).cooperative
    assert cj.jit(SCALE, cooperative=True).cooperative
    with pytest.raises(TypeError, match="cooperative must be None or a bool, got int"):
        cj.jit(SCALE, cooperative=1)


def test_debug_kernel_links_a_file_that_includes_cj(arch, tmp_path):
    helper = tmp_path / "with_cj.cu"
    helper.write_text('#include <cj/cj.cuh>\n__device__ float helper(float v) { return 3.0f * v + 1.0f; }\n')
    c = cj.jit(USES_HELPER, link=[helper], debug=True).compile(meta(8), meta(8), arch=arch)
    assert c.cubin  # one definition of the debug record, no duplicate symbols


def test_link_applies_code_generation_options(arch, tmp_path):
    helper = tmp_path / "helper.cu"
    helper.write_text(HELPER_CU)
    loose = cj.jit(HUNGRY + "\nextern __device__ float helper(float v);\n", link=[helper])
    tight = cj.jit(HUNGRY + "\nextern __device__ float helper(float v);\n", link=[helper],
                   max_registers=32)
    lc = loose.compile(meta(8), meta(8), 8, arch=arch)
    tc = tight.compile(meta(8), meta(8), 8, arch=arch)
    assert cubin_register_counts(lc.cubin)[0] > 32 >= cubin_register_counts(tc.cubin)[0]


def test_link_header_edit_misses_the_cache(arch, tmp_path):
    (tmp_path / "factor.h").write_text("#define FACTOR 3.0f\n")
    helper = tmp_path / "helper.cu"
    helper.write_text('#include "factor.h"\n__device__ float helper(float v) { return FACTOR * v; }\n')
    c1 = cj.jit(USES_HELPER, link=[helper]).compile(meta(8), meta(8), arch=arch)
    (tmp_path / "factor.h").write_text("#define FACTOR 5.0f\n")
    k2 = cj.jit(USES_HELPER, link=[helper])
    c2 = k2.compile(meta(8), meta(8), arch=arch)
    assert k2.cache_hits == 0 and c2.cubin != c1.cubin


def test_pickle_of_another_layout_recompiles(arch):
    from torch_cudajit import _kernel
    k = compiled_scale(arch, torch.float32)
    fn, args = k.__reduce__()
    k2 = fn(_kernel._PICKLE_VERSION + 1, *args[1:])
    assert k2.signatures == []  # nothing trusted from an unknown layout
    assert k2.compile(meta(8), meta(8), 2.0, arch=arch).cubin == k.overloads[next(iter(k.overloads))].cubin
