"""One test per bad input, each matching its error message.

Most checks run on the CPU through ``Kernel.compile(..., arch=90)``, which keys and checks the
arguments exactly as a launch does. Launch-only checks (argument packing, launch limits, several
devices) are GPU tests. Launch-path tests run both positionally (the C++ fast path) and by
keyword (the Python slow path): see _support.CALL_PATHS.
"""
import re

import pathlib

import pytest
import torch

import torch_cudajit as tcj
from _support import CALL_PATHS, CPU_TENSOR_ADVICE, assert_raises, call

ARCH = 90

SRC = r"""
__global__ void k(cj::Array<float, 2> out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && i < out.size(1)) out(0, i) = x[i];
}
"""


@pytest.fixture
def k():
    return tcj.jit(SRC)


def good_args(device="cpu"):
    return torch.empty(2, 4, device=device), torch.empty(4, device=device), 4


# -- argument count and keywords ----------------------------------------------------------------

@pytest.mark.parametrize("nargs", [0, 2, 4])
def test_wrong_number_of_arguments(k, nargs):
    args = (list(good_args()) + [5])[:nargs]
    with pytest.raises(TypeError, match=rf"kernel 'k' takes 3 argument\(s\) \(out, x, n\), got {nargs}\."):
        k.compile(*args, arch=ARCH)


def test_wrong_number_of_arguments_at_launch(k):
    out, x, _ = good_args()
    assert_raises(TypeError, r"takes 3 argument\(s\) \(out, x, n\), got 2", k[1, 1], out, x)


def test_too_many_positional_arguments_with_keywords(k):
    out, x, n = good_args()
    with pytest.raises(TypeError, match=r"kernel 'k' takes 3 argument\(s\) \(out, x, n\), got 4 positional"):
        k.compile(out, x, n, 5, arch=ARCH, n=4)
    with pytest.raises(TypeError, match=r"takes 3 argument\(s\) \(out, x, n\), got 4 positional"):
        k[1, 1](out, x, n, 5, n=4)


@pytest.mark.parametrize("via", ["compile", "launch"])
def test_unknown_keyword(k, via):
    out, x, n = good_args()
    fn = (lambda **kw: k.compile(arch=ARCH, **kw)) if via == "compile" else k[1, 1]
    with pytest.raises(TypeError, match=r"kernel 'k' got an unexpected keyword argument 'm'; "
                                        r"its parameters are \(out, x, n\)"):
        fn(out=out, x=x, m=n)


@pytest.mark.parametrize("via", ["compile", "launch"])
def test_missing_keyword_argument(k, via):
    out, x, _ = good_args()
    fn = (lambda *a, **kw: k.compile(*a, arch=ARCH, **kw)) if via == "compile" else k[1, 1]
    with pytest.raises(TypeError, match=r"kernel 'k' is missing argument\(s\): n"):
        fn(out, x=x)


@pytest.mark.parametrize("via", ["compile", "launch"])
def test_argument_given_twice(k, via):
    out, x, n = good_args()
    fn = (lambda *a, **kw: k.compile(*a, arch=ARCH, **kw)) if via == "compile" else k[1, 1]
    with pytest.raises(TypeError, match=r"kernel 'k' got multiple values for argument 'out'"):
        fn(out, x, out=out, n=n)


# -- unsupported Python types -----------------------------------------------------------------------

# None is an address (a NULL pointer) for pointer parameters; for others, see test_idioms.py.
UNSUPPORTED = [
    pytest.param([1, 2], "list", id="list"),
    pytest.param(object(), "object", id="object"),
    pytest.param({"a": 1}, "dict", id="dict"),
    pytest.param("4", "str", id="str"),
    pytest.param((4,), "tuple", id="tuple"),
]


@pytest.mark.parametrize("value, type_name", UNSUPPORTED)
@pytest.mark.parametrize("via", ["compile", "launch"])
def test_unsupported_python_type(k, value, type_name, via):
    out, x, _ = good_args()
    fn = (lambda *a: k.compile(*a, arch=ARCH)) if via == "compile" else k[1, 1]
    # Conversion fails before any device work, so a launch on a machine without a GPU shows it too.
    with pytest.raises(TypeError, match=rf"parameter 'n' of kernel 'k' got an object of type '{type_name}'; "
                                        r"kernels take torch tensors"):
        fn(out, x, value)


# -- Python ints that do not fit ----------------------------------------------------------------------

@pytest.mark.parametrize("value", [2**64, 2**70, -(2**63) - 1, -(2**100)], ids=str)
def test_python_int_beyond_64_bits(k, value):
    out, x, _ = good_args()
    with pytest.raises(ValueError, match=rf"parameter 'n' of kernel 'k' got the Python int {value}, "
                                         r"which does not fit in 64 bits"):
        k.compile(out, x, value, arch=ARCH)


@pytest.mark.parametrize("path", CALL_PATHS)
def test_python_int_beyond_64_bits_at_launch(path):
    # A kernel with only scalar parameters: the int is converted before any device is touched.
    k = tcj.jit("__global__ void s(int64_t n) {}")
    assert_raises(ValueError, "got the Python int 18446744073709551616, which does not fit in 64 bits",
                  call, k[1, 1], k, (2**64,), path)


@pytest.mark.parametrize("value", [2**63, 2**64 - 1], ids=str)
def test_python_int_up_to_uint64_max_converts(value):
    k = tcj.jit("__global__ void s(float* out, unsigned long long n) {}")
    assert k.compile(torch.empty(1), value, arch=ARCH).signature == "(float32*, int)"


FITS = r"""
__global__ void fits(int64_t* out, int8_t a, uint8_t b, int32_t c, uint32_t d, int64_t e, uint64_t f) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = (int64_t)f;
}
"""
GOOD_INTS = (1, 2, 3, 4, 5, 6)


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
@pytest.mark.parametrize("index, value, cpp, range_", [
    (1, 128, "int8", r"\[-128, 127\]"),
    (1, -129, "int8", r"\[-128, 127\]"),
    (2, 256, "uint8", r"\[0, 255\]"),
    (2, -1, "uint8", r"\[0, 255\]"),
    (3, 2**31, "int32", r"\[-2147483648, 2147483647\]"),
    (4, -1, "uint32", r"\[0, 4294967295\]"),
    (4, 2**32, "uint32", r"\[0, 4294967295\]"),
    (5, 2**63, "int64", r"\[-9223372036854775808, 9223372036854775807\]"),
    (6, -1, "uint64", r"\[0, 18446744073709551615\]"),
], ids=lambda v: str(v) if isinstance(v, int) else None)
def test_python_int_out_of_parameter_range(device, path, index, value, cpp, range_):
    k = tcj.jit(FITS)
    out = torch.full((6,), -7, dtype=torch.int64, device=device)
    args = [out, *GOOD_INTS]
    args[index] = value
    name = k.params[index].name
    assert_raises(ValueError, rf"parameter '{name}' .* is {cpp} with range {range_}; the Python int "
                             rf"{value} does not fit", call, k[1, 1], k, tuple(args), path)
    torch.cuda.synchronize()
    assert (out == -7).all(), "the kernel ran despite the error"


@pytest.mark.gpu
def test_numpy_int_out_of_parameter_range(device):
    np = pytest.importorskip("numpy")
    k = tcj.jit(FITS)
    out = torch.zeros(6, dtype=torch.int64, device=device)
    # numpy scalars take the Python slow path, whose errors have their proper type.
    with pytest.raises(ValueError, match=r"parameter 'a' .* is int8 with range \[-128, 127\]; "
                                        r"the Python int 300 does not fit"):
        k[1, 1](out, np.int64(300), *GOOD_INTS[1:])


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
def test_0d_tensor_out_of_parameter_range(device, path):
    k = tcj.jit(FITS)
    out = torch.zeros(6, dtype=torch.int64, device=device)
    big = torch.tensor(1000, device=device)
    assert_raises(ValueError, r"parameter 'a' .* got a 0-d tensor whose value does not fit",
                  call, k[1, 1], k, (out, big, *GOOD_INTS[1:]), path)


# -- tensors on the wrong device ------------------------------------------------------------------------

CPU_TENSOR_MSG = (r"parameter 'out' \(cj::Array<float, 2>\) of kernel 'k' got a tensor on cpu; "
                  r"kernels take CUDA tensors" + CPU_TENSOR_ADVICE)


def test_cpu_tensor_to_a_launch_message(k):
    """The check runs before any device work, so it shows on machines without a GPU too; there
    it says that nothing launches and that compiling with arch= works."""
    with pytest.raises(Exception, match=CPU_TENSOR_MSG):
        k[1, 1](*good_args("cpu"))


@pytest.mark.skipif(tcj._C.driver_available(), reason="a CUDA driver is loaded here")
@pytest.mark.parametrize("via", ["launch", "compile without arch"])
def test_cpu_tensor_without_a_driver_suggests_compiling(k, via):
    """Where no driver loads, moving the tensor cannot help: the message says why nothing
    launches and that compile(..., arch=...) works."""
    with pytest.raises(TypeError, match=r"got a tensor on cpu; kernels take CUDA tensors, and "
                                        r"this process cannot launch kernels: .*Compiling to "
                                        r"PTX/CUBIN \(kernel\.compile\(\.\.\., arch=\.\.\.\)\) "
                                        r"works without a GPU\.$") as info:
        if via == "launch":
            k[1, 1](*good_args("cpu"))
        else:
            k.compile(*good_args("cpu"))
    assert ".cuda()" not in str(info.value)


@pytest.mark.parametrize("path", CALL_PATHS)
def test_cpu_tensor_to_a_launch(k, path):
    assert_raises(TypeError, CPU_TENSOR_MSG, call, k[1, 1], k, good_args("cpu"), path)


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
def test_cpu_tensor_among_cuda_tensors(k, device, path):
    out, x, n = good_args(device)
    assert_raises(TypeError, r"parameter 'x' \(const float\*\) of kernel 'k' got a tensor on cpu; "
                             r"kernels take CUDA tensors", call, k[1, 1], k, (out, x.cpu(), n), path)


def test_meta_tensor_to_a_launch(k):
    with pytest.raises(TypeError, match="got a tensor on meta; kernels take CUDA tensors"):
        k[1, 1](out=torch.empty(2, 4, device="meta"), x=torch.empty(4, device="meta"), n=4)


def test_cpu_tensor_to_forall(k):
    with pytest.raises(TypeError, match=CPU_TENSOR_MSG):
        k.forall(4)(*good_args("cpu"))


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
def test_tensors_on_two_devices(k, two_gpus, path):
    d0, d1 = two_gpus
    out = torch.zeros(2, 4, device=d0)
    x = torch.ones(4, device=d1)
    assert_raises(ValueError, r"kernel 'k' got tensors on two devices: parameter 'out' is on cuda:0 "
                              r"and parameter 'x' is on cuda:1. Move them to one device",
                  call, k[1, 4], k, (out, x, 4), path)


# -- dtype, rank and layout mismatches --------------------------------------------------------------------

@pytest.mark.parametrize("which, args, match", [
    pytest.param("array", (torch.empty(2, 4, dtype=torch.float64), torch.empty(4), 4),
                 r"parameter 'out' \(cj::Array<float, 2>\) of kernel 'k' takes float32 elements, "
                 r"got a tensor of dtype float64", id="array"),
    pytest.param("pointer", (torch.empty(2, 4), torch.empty(4, dtype=torch.float64), 4),
                 r"parameter 'x' \(const float\*\) of kernel 'k' takes float32 elements, "
                 r"got a tensor of dtype float64", id="pointer"),
    pytest.param("pointer-int", (torch.empty(2, 4), torch.empty(4, dtype=torch.int32), 4),
                 r"parameter 'x' .* takes float32 elements, got a tensor of dtype int32", id="pointer-int"),
])
def test_dtype_mismatch_on_a_concrete_parameter(k, which, args, match):
    with pytest.raises(TypeError, match=match):
        k.compile(*args, arch=ARCH)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool], ids=str)
def test_dtype_mismatch_on_a_template_with_shared_T(dtype):
    k = tcj.jit("template <typename T> __global__ void t(cj::Array<T, 1> out, cj::Array<const T, 1> x) {}")
    with pytest.raises(tcj.CompileError, match=r"could not be instantiated for the argument types"):
        k.compile(torch.empty(4), torch.empty(4, dtype=dtype), arch=ARCH)


def test_unsupported_dtype(k):
    with pytest.raises(TypeError, match=r"tensors of dtype Float8_e4m3fn cannot be passed to kernels; "
                                        r"supported dtypes are float16"):
        k.compile(torch.empty(2, 4, dtype=torch.float8_e4m3fn), torch.empty(4), 4, arch=ARCH)


@pytest.mark.parametrize("shape", [(2, 3, 4), (8,), ()], ids=lambda s: f"rank{len(s)}")
def test_rank_mismatch(k, shape):
    with pytest.raises(TypeError, match=rf"parameter 'out' \(cj::Array<float, 2>\) of kernel 'k' takes a tensor "
                                        rf"of rank 2, got rank {len(shape)}"):
        k.compile(torch.empty(shape), torch.empty(4), 4, arch=ARCH)


@pytest.mark.parametrize("x", [
    pytest.param(torch.empty(8)[::2], id="sliced"),
    pytest.param(torch.empty(4, 2).t(), id="transposed"),
    pytest.param(torch.empty(1, 4).expand(3, 4), id="expanded"),
])
def test_non_contiguous_tensor_to_a_raw_pointer(k, x):
    with pytest.raises(TypeError, match=r"parameter 'x' \(const float\*\) of kernel 'k' is a raw pointer and "
                                        r"needs a contiguous tensor, got shape .* Call .contiguous\(\) on it"):
        k.compile(torch.empty(2, 4), x, 4, arch=ARCH)


def test_non_contiguous_tensor_to_a_contiguous_array():
    k = tcj.jit("__global__ void c(cj::Array<const float, 2, cj::Contiguous> x) {}")
    with pytest.raises(TypeError, match=r"parameter 'x' .* is declared cj::Contiguous and needs a contiguous "
                                        r"tensor, got shape \[3, 2\] and strides \[1, 3\]. Call .contiguous\(\)"):
        k.compile(torch.empty(2, 3).t(), arch=ARCH)


# -- scalars ------------------------------------------------------------------------------------------------

def test_python_float_to_an_int_parameter(k):
    with pytest.raises(TypeError, match=r"parameter 'n' \(int\) of kernel 'k' cannot take a Python float"):
        k.compile(torch.empty(2, 4), torch.empty(4), 4.0, arch=ARCH)


@pytest.mark.parametrize("path", CALL_PATHS)
def test_python_float_to_an_int_parameter_at_launch(path):
    k = tcj.jit("__global__ void s(int n) {}")  # no tensors: fails while keying, before device work
    assert_raises(TypeError, r"parameter 'n' \(int\) of kernel 's' cannot take a Python float",
                  call, k[1, 1], k, (1.5,), path)


def test_python_float_to_a_templated_integer(k):
    t = tcj.jit("template <typename T> __global__ void t(cj::Array<T, 1> out, T a) {}")
    with pytest.raises(TypeError, match=r"parameter 'a' of kernel 't' is an integer \(int32\); got a Python float"):
        t.compile(torch.empty(4, dtype=torch.int32), 2.5, arch=ARCH)


def test_python_complex_to_a_real_parameter():
    k = tcj.jit("__global__ void s(float* out, double a) {}")
    with pytest.raises(TypeError, match=r"parameter 'a' \(double\) of kernel 's' cannot take a Python complex"):
        k.compile(torch.empty(2), 1 + 2j, arch=ARCH)


def test_tensor_with_dimensions_to_a_scalar_parameter(k):
    with pytest.raises(TypeError, match=r"parameter 'n' \(int\) of kernel 'k' is a scalar and takes a number or "
                                        r"a 0-d tensor, got a tensor of shape \[1\]"):
        k.compile(torch.empty(2, 4), torch.empty(4), torch.ones(1, dtype=torch.int32), arch=ARCH)


@pytest.mark.parametrize("value, kind", [(3, "int"), (2.5, "float"), (True, "bool")])
def test_scalar_to_a_tensor_parameter(k, value, kind):
    with pytest.raises(TypeError, match=rf"parameter 'out' .* takes a tensor, got {kind}"):
        k.compile(value, torch.empty(4), 4, arch=ARCH)


def test_python_number_to_a_struct_parameter():
    k = tcj.jit("struct W { float v; __device__ W(double d) : v(d) {} };\n"
                "__global__ void s(float* out, W w) { out[0] = w.v; }")
    with pytest.raises(TypeError, match=r"parameter 'w' of kernel 's' has type `W`, which a Python float cannot "
                                        r"be converted to; pass such a value through an extension"):
        k.compile(torch.empty(2), 2.0, arch=ARCH)


def test_bytes_to_an_auto_parameter():
    k = tcj.jit("__global__ void a(auto out, float s) {}")
    with pytest.raises(TypeError, match=r"parameter 'out' \(auto\) of kernel 'a' is `auto`; extension bytes need "
                                        r"a declared parameter type"):
        k.compile(b"\0" * 8, 1.0, arch=ARCH)


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
def test_bytes_of_the_wrong_size(device, path):
    k = tcj.jit("struct P { float a, b; };\n__global__ void s(float* out, P p) { out[0] = p.a + p.b; }")
    assert_raises(TypeError, r"parameter 'p' \(P\) of kernel 's' is 8 bytes; the extension gave 4",
                  call, k[1, 1], k, (torch.zeros(1, device=device), b"\0" * 4), path)


# -- launch configuration ----------------------------------------------------------------------------------

def test_call_without_launch_configuration(k):
    with pytest.raises(TypeError, match=r"kernel 'k' needs a launch configuration: call it as "
                                        r"kernel\[grid, block\]\(\*args\)"):
        k(*good_args())


@pytest.mark.gpu
def test_specialized_kernel_call_without_launch_configuration(k, device):
    sk = k.specialize(*good_args(device))
    with pytest.raises(TypeError, match="needs a launch configuration"):
        sk(*good_args(device))


@pytest.mark.parametrize("config, exc, match", [
    pytest.param(1, ValueError, r"the launch configuration must be \[grid, block\]", id="grid-only"),
    pytest.param((1,), ValueError, r"the launch configuration must be", id="1-tuple"),
    pytest.param((1, 1, None, 0, 5), ValueError, r"the launch configuration must be", id="5-tuple"),
    pytest.param("a", ValueError, r"the launch configuration must be", id="string"),
    pytest.param(((1, 2, 3, 4), 1), ValueError, r"grid must be an int or a tuple of 1 to 3 ints, got 4 values",
                 id="grid-4d"),
    pytest.param((1, ()), ValueError, r"block must be an int or a tuple of 1 to 3 ints, got 0 values",
                 id="block-empty"),
    pytest.param((1, "x"), TypeError, r"block must be an int or a tuple of up to 3 ints", id="block-str"),
    pytest.param((1.0, 1), TypeError, r"grid must be an int or a tuple of up to 3 ints", id="grid-float"),
    pytest.param(((1, 2.0), 1), TypeError, r"grid must contain ints", id="grid-tuple-float"),
    pytest.param((1, 1, "stream"), TypeError, r"stream must be a torch.cuda.Stream, a raw handle \(int\) or None",
                 id="stream-str"),
    pytest.param((1, 1, True), TypeError, r"stream must be a torch.cuda.Stream", id="stream-bool"),
    pytest.param((1, 1, None, -1), ValueError, r"shared_mem must be >= 0, got -1", id="shared-negative"),
    pytest.param((1, 1, None, 1.5), TypeError, r"shared_mem must be an int, got float", id="shared-float"),
])
def test_bad_launch_configuration(k, config, exc, match):
    with pytest.raises(exc, match=match):
        k[config]


@pytest.mark.parametrize("ntasks", [0, -3, 1.5, "8", True], ids=repr)
def test_bad_forall(k, ntasks):
    with pytest.raises(ValueError, match="forall: ntasks must be a positive int"):
        k.forall(ntasks)


# -- kernel names ----------------------------------------------------------------------------------------

def test_kernel_name_not_in_source():
    src = "__global__ void f(float* x) {}\n__global__ void g(float* x) {}"
    with pytest.raises(ValueError, match=r"no __global__ function named 'h' in the source; it defines 'f', 'g'. "
                                         r"Pass one of those as name="):
        tcj.jit(src, name="h")


def test_kernel_name_in_source_without_kernels():
    with pytest.raises(ValueError, match=r"no __global__ function named 'h' in the source; it defines none"):
        tcj.jit("__device__ int f() { return 1; }", name="h")


# -- launch limits (GPU) ----------------------------------------------------------------------------------

NOOP = "__global__ void noop(float* out) {}"


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
@pytest.mark.parametrize("grid, block, shared, match", [
    pytest.param(1, 2048, 0, r"block dimension x of kernel 'noop' is 2048; this device allows 1 to 1024",
                 id="block-x"),
    pytest.param(1, (1, 1, 128), 0, r"block dimension z of kernel 'noop' is 128; this device allows 1 to 64",
                 id="block-z"),
    pytest.param(1, (32, 32, 2), 0, r"block of kernel 'noop' has 2048 threads \(32x32x2\); this kernel allows "
                                    r"at most 1024", id="block-threads"),
    pytest.param(1, 0, 0, r"block dimension x of kernel 'noop' is 0", id="block-zero"),
    pytest.param(0, 32, 0, r"grid dimension x of kernel 'noop' is 0; this device allows 1 to", id="grid-zero"),
    pytest.param((1, 65536), 32, 0, r"grid dimension y of kernel 'noop' is 65536; this device allows 1 to 65535",
                 id="grid-y"),
    pytest.param(2**31, 32, 0, r"grid dimension x of kernel 'noop' is 2147483648; this device allows 1 to "
                               r"2147483647", id="grid-x"),
    pytest.param(1, 32, 1 << 20, r"kernel 'noop' asks for 1048576 bytes of dynamic shared memory; this device "
                                 r"allows at most \d+", id="shared-memory"),
])
def test_launch_beyond_device_limits(device, path, grid, block, shared, match):
    k = tcj.jit(NOOP)
    out = torch.zeros(1, device=device)
    assert_raises(ValueError, match, call, k[grid, block, None, shared], k, (out,), path)


@pytest.mark.gpu
def test_shared_memory_just_over_the_limit(device):
    k = tcj.jit(NOOP)
    optin = torch.cuda.get_device_properties(device).shared_memory_per_block_optin
    out = torch.zeros(1, device=device)
    k[1, 32, None, optin](out=out)  # the whole opt-in amount is allowed for a kernel without static shared
    with pytest.raises(ValueError, match=rf"asks for {optin + 1} bytes of dynamic shared memory; this device "
                                         rf"allows at most {optin}"):
        k[1, 32, None, optin + 1](out=out)


# -- compile errors at launch (GPU) ------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
def test_compile_error_at_first_launch(device, path):
    k = tcj.jit("__global__ void broken(float* out) {\n  out[0] = nope;\n}")
    info = assert_raises(tcj.CompileError, r"kernel 'broken' failed to compile", call, k[1, 1], k,
                         (torch.zeros(1, device=device),), path)
    assert info.value.kernel_name == "broken"
    assert "kernel.cu(2): error" in info.value.log
    assert info.value.arch == "sm_%d%d" % torch.cuda.get_device_capability(device)


# -- options and architectures, refused at jit or compile ------------------------------------------------

@pytest.mark.parametrize("options, shown, arch", [
    (["-arch=sm_80"], "'-arch=sm_80'", "sm_80"),
    (["--gpu-architecture=sm_80"], "'--gpu-architecture=sm_80'", "sm_80"),
    (["-arch", "compute_80"], "'-arch', followed by 'compute_80'", "sm_80"),
    (["-G", "--gpu-architecture", "sm_80"], "'--gpu-architecture', followed by 'sm_80'", "sm_80"),
    (["-code=sm_90"], "'-code=sm_90'", "sm_90"),
], ids=["arch", "gpu-architecture", "arch-separate", "gpu-architecture-separate", "code"])
def test_architecture_in_options_is_refused_at_jit(options, shown, arch):
    # NVRTC would take the last -arch: sm_80 code under compile(arch=...)'s target name.
    with pytest.raises(ValueError, match=rf"options\[\d\] is {shown}, which sets the target "
                                         rf"architecture; options cannot set it\. A kernel is "
                                         rf"compiled for the architecture of the GPU it launches "
                                         rf"on, or for the one given to compile\(\.\.\., arch=\.\.\.\)"
                                         rf" or precompile\(\.\.\., arch=\.\.\.\).* pass "
                                         rf"arch='{arch}' to compile or precompile"):
        tcj.jit(SRC, options=options)


def test_architecture_specific_target_in_options_is_honoured_for_its_architecture():
    k = tcj.jit(SRC, options=["-arch=sm_90a"])
    c = k.compile(*good_args(), arch="sm_90")
    # Compiled and reported as sm_90a; the plugin's own -arch carries it, once.
    assert c.target == "sm_90a" and c.options.count("-arch=sm_90a") == 1
    assert ".target sm_90a" in c.ptx
    with pytest.raises(ValueError, match=r"the options ask for sm_90a, a target specific to another "
                                         r"architecture than the one this compile is for \(sm_80"):
        k.compile(*good_args(), arch="sm_80")
    with pytest.raises(ValueError, match=r"options\[0\] is '-arch', followed by 'sm_90a'.*an "
                                         r"architecture-specific target is written -arch=sm_90a"):
        tcj.jit(SRC, options=["-arch", "sm_90a"])


@pytest.mark.parametrize("arch", ["sm_999", 999, (99, 9), "sm_91"], ids=repr)
def test_architecture_nvrtc_does_not_support_is_refused(k, arch):
    # Not PTX of the newest architecture NVRTC supports, which no GPU asked for.
    major, minor = tcj.nvrtc_version()
    with pytest.raises(ValueError, match=rf"arch is {re.escape(repr(arch))}: NVRTC {major}\.{minor} "
                                         rf"cannot target sm_\d+\. It supports sm_\d+(, sm_\d+)*; "
                                         rf"pass one of those"):
        k.compile(*good_args(), arch=arch)
    with pytest.raises(ValueError, match=r"cannot target sm_\d+\. It supports sm_"):
        k.precompile([good_args()], arch=arch)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_100f", "compute_90a"])
def test_architecture_specific_target_is_refused_at_compile(k, arch):
    with pytest.raises(ValueError, match=rf"arch is '{arch}', an architecture-specific target; "
                                         r"compile and precompile take a compute capability such "
                                         r"as 'sm_\d+'.*\(the 'a' and 'f' suffixes\), define "
                                         r"the kernel with options=\['-arch=sm_\d+[af]'\]"):
        k.compile(*good_args(), arch=arch)


@pytest.mark.parametrize("kwargs, match", [
    ({"std": "c++99"}, r"std is 'c\+\+99'; the C\+\+ standard must be one of 'c\+\+14', 'c\+\+17', "
                       r"'c\+\+20' \(NVRTC takes these; .*Pass std='c\+\+17' instead"),
    ({"std": "gnu++17"}, r"std is 'gnu\+\+17'; .*NVRTC takes these and no GNU dialect.*"
                         r"Pass std='c\+\+17' instead"),
    ({"std": "c++11"}, r"std is 'c\+\+11'; .*cj/cj.cuh needs C\+\+14 or later"),
    ({"options": ["-std=gnu++20"]}, r"options\[0\] is '-std=gnu\+\+20'; the C\+\+ standard must "
                                     r"be one of .*Pass std='c\+\+20' to jit instead"),
    ({"options": ["-G", "--std=c++23"]}, r"options\[1\] is '--std=c\+\+23'; the C\+\+ standard"),
], ids=["c++99", "gnu++17", "c++11", "options-gnu", "options-c++23"])
def test_standard_is_checked_at_jit(kwargs, match):
    # Refused before the front end reads the source (libclang would fail to parse it).
    with pytest.raises(ValueError, match=match):
        tcj.jit(SRC, **kwargs)


@pytest.mark.parametrize("options", [[3], ["-G", None], [b"-G"]], ids=["int", "None", "bytes"])
def test_options_that_are_not_strings(options):
    with pytest.raises(TypeError, match=r"options\[\d\] is .*; options must be NVRTC option strings"):
        tcj.jit(SRC, options=options)


def test_accepted_options_still_compile(k):
    c = tcj.jit(SRC, options=["-G", "-std=c++20"], std="c++14").compile(*good_args(), arch=ARCH)
    assert c.target == "sm_90" and "-G" in c.options


@pytest.mark.parametrize("exists", [True, False], ids=["existing-file", "missing-file"])
def test_file_name_as_source(tmp_path, monkeypatch, exists):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernels").mkdir()
    if exists:
        (tmp_path / "kernels" / "add.cu").write_text(SRC)
    with pytest.raises(ValueError, match=r"jit takes the text of a CUDA C\+\+ source, and got "
                                         r"'kernels/add.cu', which looks like a file name"
                                         + (r" \(the file exists\)" if exists else "") +
                                         r"\. To compile a file, pass it as a path object: "
                                         r"cj\.jit\(pathlib\.Path\('kernels/add\.cu'\)\) "
                                         r"\(or cj\.load\('kernels/add\.cu'\)\)"):
        tcj.jit("kernels/add.cu")
    if exists:  # the advice works, quoted #includes included
        (tmp_path / "kernels" / "add.cu").write_text(
            '#include "value.cuh"\n__global__ void k(float* x) { x[0] = VALUE; }\n')
        (tmp_path / "kernels" / "value.cuh").write_text("#define VALUE 2.0f\n")
        for k in (tcj.jit(pathlib.Path("kernels/add.cu")), tcj.load("kernels/add.cu")):
            assert k.name == "k" and k.compile(torch.empty(1), arch=ARCH).target == "sm_90"


def test_one_line_source_is_not_taken_for_a_file_name():
    assert tcj.jit("__global__ void k(float* x) {}").name == "k"
    with pytest.raises(ValueError, match="source defines no __global__ function"):
        tcj.jit("int x;")
