"""Module variables (get_global) and settable kernel attributes (max_dynamic_shared_size_bytes,
preferred_shared_memory_carveout, read-only ptx_version and binary_version). CPU tests check the
arguments and which overload is meant; GPU tests read and write the variables through kernels
and launch with the attributes set."""
import gc

import pytest
import torch

import torch_cudajit as cj
from _support import blocks, poison_, random_values

ARCH = "sm_90"
TABLE = r"""
__constant__ float table[8];
__device__ int counter;
__device__ double scale[2][3];
extern "C" __global__ void lookup(float* out, const int* idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = table[idx[i]] * (float)scale[1][2]; atomicAdd(&counter, 1); }
}
"""
TEMPLATE = r"""
__constant__ float coef[4];
template <typename T>
__global__ void poly(T* out, const T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = T(coef[0] + coef[1] * float(x[i]));
}
"""


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


# -- arguments and overload choice (no GPU) ----------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(name=""), TypeError, r"get_global: name must be the variable's name \(a non-empty str\), got ''"),
    (dict(name=3), TypeError, r"get_global: name must be the variable's name \(a non-empty str\), got 3"),
    (dict(name="table", dtype="float32"), TypeError,
     r"get_global: dtype must be a torch.dtype \(e.g. torch.float32\), got 'float32'"),
    (dict(name="table", shape=(2, -1)), TypeError,
     r"get_global: shape must be an int or a tuple of ints >= 0, got \(2, -1\)"),
    (dict(name="table", shape="8"), TypeError, r"shape must be an int or a tuple of ints >= 0, got '8'"),
])
def test_get_global_argument_checks(kwargs, exc, match):
    k = cj.jit(TABLE)
    with pytest.raises(exc, match=match):
        k.get_global(**kwargs)


def test_get_global_before_any_compile():
    k = cj.jit(TABLE)
    with pytest.raises(ValueError, match=r"kernel 'lookup' has no compiled overloads yet; launch it "
                                         r"or call compile\(\) / specialize\(\) first"):
        k.get_global("table")


def test_get_global_of_a_template_needs_the_overload():
    k = cj.jit(TEMPLATE)
    k.compile(meta(4), meta(4), 4, arch=ARCH)
    k.compile(meta(4, torch.float64), meta(4, torch.float64), 4, arch=ARCH)
    with pytest.raises(ValueError, match=r"get_global: kernel 'poly' has 2 overloads, each with its "
                                         r"own copy of 'coef'; pass signature= \(one of "
                                         r"\['\(float32\*, const float32\*, int\)', '\(float64\*, "
                                         r"const float64\*, int\)'\]\)"):
        k.get_global("coef")
    with pytest.raises(ValueError, match=r"kernel 'poly' has no compiled overload '\(int8\*\)'"):
        k.get_global("coef", signature="(int8*)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without a GPU")
def test_get_global_needs_a_gpu():
    k = cj.jit(TABLE)
    k.compile(meta(4), meta(4, torch.int32), 4, arch=ARCH)
    with pytest.raises(RuntimeError, match=r"module variables live on the GPU and need a CUDA GPU"):
        k.get_global("table", torch.float32)


def test_module_get_global_needs_the_kernel():
    mod = cj.jit(TEMPLATE + "__global__ void other(float* out) { out[0] = coef[2]; }")
    with pytest.raises(ValueError, match=r"get_global: no kernel is compiled yet, and each has its "
                                         r"own copy of 'coef'; pass kernel= \(one of poly, other\)"):
        mod.get_global("coef")
    mod.poly.compile(meta(4), meta(4), 4, arch=ARCH)
    mod.other.compile(meta(4), arch=ARCH)
    with pytest.raises(ValueError, match=r"get_global: kernels poly, other are compiled"):
        mod.get_global("coef")
    with pytest.raises(KeyError, match=r"no kernel 'nope' in the source"):
        mod.get_global("coef", kernel="nope")


@pytest.mark.parametrize("attr, value, exc, match", [
    ("max_dynamic_shared_size_bytes", -1, ValueError,
     r"max_dynamic_shared_size_bytes must be a byte count \(e.g. 100 \* 1024\); got -1"),
    ("max_dynamic_shared_size_bytes", 1.5, TypeError,
     r"max_dynamic_shared_size_bytes must be an int \(a byte count \(e.g. 100 \* 1024\)\), got float 1.5"),
    ("preferred_shared_memory_carveout", 101, ValueError,
     r"preferred_shared_memory_carveout must be a percentage from 0 to 100, or -1 for the driver's "
     r"default; got 101"),
    ("preferred_shared_memory_carveout", True, TypeError,
     r"preferred_shared_memory_carveout must be an int .*, got bool True"),
])
def test_attribute_value_checks(attr, value, exc, match):
    c = cj.jit(TABLE).compile(meta(4), meta(4, torch.int32), 4, arch=ARCH)
    with pytest.raises(exc, match=match):
        setattr(c, attr, value)


def test_read_only_attributes():
    c = cj.jit(TABLE).compile(meta(4), meta(4, torch.int32), 4, arch=ARCH)
    for attr in ("ptx_version", "binary_version"):
        with pytest.raises(AttributeError):
            setattr(c, attr, 90)


# -- GPU ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_constant_table_written_through_the_tensor(device):
    k = cj.jit(TABLE)
    n = 500
    idx = torch.randint(0, 8, (n,), dtype=torch.int32, device=device)
    sk = k.specialize(torch.empty(n, device=device), idx, n)
    table = sk.get_global("table", torch.float32)
    assert table.shape == (8,) and table.dtype == torch.float32 and table.device == device
    values = random_values((8,), torch.float32, device)
    table.copy_(values)
    scale = sk.get_global("scale", torch.float64, (2, 3))
    scale.fill_(0.0)
    scale[1, 2] = 2.0
    counter = sk.get_global("counter", torch.int32)
    counter.zero_()
    out = poison_(torch.empty(n, device=device))
    sk[blocks(n, 128), 128](out, idx, n)
    torch.testing.assert_close(out, values[idx.long()] * 2.0)
    assert counter.item() == n
    assert sk.get_global("table").shape == (32,)  # bytes by default
    torch.testing.assert_close(k.get_global("table", torch.float32), values)  # the one overload


@pytest.mark.gpu
def test_global_tensor_keeps_the_module_alive(device):
    k = cj.jit(TABLE)
    n = 4
    idx = torch.zeros(n, dtype=torch.int32, device=device)
    k[1, 32](torch.empty(n, device=device), idx, n)
    table = k.get_global("table", torch.float32)
    del k
    gc.collect()
    table.fill_(7.0)  # still the loaded module's memory
    torch.testing.assert_close(table.cpu(), torch.full((8,), 7.0))


@pytest.mark.gpu
def test_global_of_a_template_overload(device):
    k = cj.jit(TEMPLATE)
    n = 100
    x = random_values((n,), torch.float64, device)
    sk = k.specialize(torch.empty_like(x), x, n)
    sk.get_global("coef", torch.float32).copy_(torch.tensor([1.0, 3.0, 0.0, 0.0]))
    out = poison_(torch.empty_like(x))
    sk[blocks(n, 128), 128](out, x, n)
    torch.testing.assert_close(out, (1.0 + 3.0 * x.float()).double())


@pytest.mark.gpu
def test_get_global_errors_on_a_gpu(device):
    k = cj.jit(TABLE)
    sk = k.specialize(torch.empty(4, device=device), torch.zeros(4, dtype=torch.int32, device=device), 4)
    with pytest.raises(ValueError, match=r"the module of kernel 'lookup' \(float32\*, const int32\*, "
                                         r"int\) has no __device__ or __constant__ variable named 'nope'"):
        sk.get_global("nope")
    with pytest.raises(ValueError, match=r"get_global: the variable 'counter' is 4 bytes, not a whole "
                                         r"number of torch.float64 elements \(8 bytes each\)"):
        sk.get_global("counter", torch.float64)
    with pytest.raises(ValueError, match=r"get_global: the variable 'table' holds 8 torch.float32 "
                                         r"element\(s\); shape \(3, 3\) has 9"):
        sk.get_global("table", torch.float32, (3, 3))


@pytest.mark.gpu
def test_loaded_kernel_globals(device):
    major, minor = torch.cuda.get_device_capability(device)
    cubin = cj.jit(TABLE).compile(meta(4), meta(4, torch.int32), 4, arch=f"sm_{major}{minor}").cubin
    k = cj.load(cubin, 'extern "C" __global__ void lookup(float* out, const int* idx, int n)')
    n = 64
    idx = torch.arange(n, dtype=torch.int32, device=device) % 8
    sk = k.specialize(torch.empty(n, device=device), idx, n)
    sk.get_global("table", torch.float32).copy_(torch.arange(8.0))
    sk.get_global("scale", torch.float64, (2, 3))[1, 2] = 1.0
    out = poison_(torch.empty(n, device=device))
    sk[1, n](out, idx, n)
    torch.testing.assert_close(out, idx.float())


BIG_SHARED = r"""
__global__ void big_shared(float* out, int nshared) {
  extern __shared__ float buf[];
  for (int k = threadIdx.x; k < nshared; k += blockDim.x) buf[k] = (float)k;
  __syncthreads();
  out[threadIdx.x] = buf[nshared - 1 - threadIdx.x];
}
"""


@pytest.mark.gpu
def test_max_dynamic_shared_size_bytes(device):
    optin = torch.cuda.get_device_properties(device).shared_memory_per_block_optin
    nbytes = min(100 * 1024, optin)
    if nbytes <= 48 * 1024:
        pytest.skip("this device has no more than 48 KiB of shared memory per block")
    out = poison_(torch.empty(256, device=device))
    sk = cj.jit(BIG_SHARED).specialize(out, 4)
    sk.max_dynamic_shared_size_bytes = nbytes
    assert sk.max_dynamic_shared_size_bytes == nbytes
    nshared = nbytes // 4
    sk[1, 256, None, nbytes](out, nshared)
    expected = torch.arange(nshared - 1, nshared - 257, -1, dtype=torch.float32, device=device)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"max_dynamic_shared_size_bytes of kernel 'big_shared' "
                                         r"\(float32\*, int\) may be at most \d+ on cuda:\d+"):
        sk.max_dynamic_shared_size_bytes = optin + 1


@pytest.mark.gpu
def test_carveout_and_versions(device):
    sk = cj.jit(BIG_SHARED).specialize(torch.empty(256, device=device), 4)
    sk.preferred_shared_memory_carveout = 50
    assert sk.preferred_shared_memory_carveout == 50
    sk.preferred_shared_memory_carveout = -1  # the driver's default again
    major, minor = torch.cuda.get_device_capability(device)
    assert sk.binary_version == major * 10 + minor
    assert sk.ptx_version >= 10  # major * 10 + minor


@pytest.mark.gpu
def test_attributes_apply_on_devices_loaded_later(two_gpus):
    d0, d1 = two_gpus
    if torch.cuda.get_device_capability(d0) != torch.cuda.get_device_capability(d1):
        pytest.skip("needs two GPUs of one architecture")
    sk = cj.jit(BIG_SHARED).specialize(torch.empty(256, device=d0), 4)
    sk.max_dynamic_shared_size_bytes = 64 * 1024
    with torch.cuda.device(d1):
        # The same overload, first loaded on d1 now: the recorded value applies there too.
        assert sk.max_dynamic_shared_size_bytes == 64 * 1024
