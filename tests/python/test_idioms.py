"""Idioms of CUDA code copied from public projects, bound without edits to the device code:
None (NULL) and cj.DevicePointer for pointer parameters, pinned host tensors, CUDA/CCCL complex
types, CUDA vector types and user structs behind pointers, and the first NVRTC error of a failed
deduction. CPU tests compile for sm_90 with meta or CPU tensors; GPU tests launch and compare
with torch."""
import os
import pickle
import re
import warnings

import pytest
import torch

import torch_cudajit as cj
from _support import (CALL_PATHS, CPU_TENSOR_ADVICE, assert_raises, blocks, call, dtype_id,
                      poison_, random_values)

ARCH = "sm_90"


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def has_cccl() -> bool:
    return any(os.path.exists(os.path.join(d, "cuda", "std", "complex"))
               for d in cj._C.default_include_dirs())


# -- None and cj.DevicePointer ---------------------------------------------------------------------

BIAS_ADD = r"""
template <typename T>
__global__ void bias_add(T* out, const T* x, const T* bias, T* saved, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = bias ? T(x[i] + bias[i]) : x[i];
  if (saved) saved[i] = x[i];
}
"""

CPP_NAMES = {torch.float32: "float", torch.float64: "double", torch.float16: "__half",
             torch.bfloat16: "__nv_bfloat16"}
BIAS_DTYPES = [pytest.param(d, id=dtype_id(d)) for d in CPP_NAMES]


@pytest.mark.parametrize("dtype", BIAS_DTYPES)
@pytest.mark.parametrize("address", ["None", "DevicePointer"])
def test_address_takes_the_element_type_of_the_other_tensors(dtype, address):
    k = cj.jit(BIAS_ADD)
    value = None if address == "None" else cj.DevicePointer(256)
    c = k.compile(meta(8, dtype), meta(8, dtype), value, value, 8, arch=ARCH)
    name = dtype_id(dtype)
    assert c.signature == f"({name}*, const {name}*, address, address, int)"
    t = CPP_NAMES[dtype]
    assert c.inspect_types()["cpp_signature"] == (
        f"void bias_add<{t}>({t}*, {t} const*, {t} const*, {t}*, int)")
    binds = [p["binds"] for p in c.inspect_types()["parameters"]]
    assert binds == [f"{name}*", f"const {name}*", "address", "address", "int"]


def test_none_and_device_pointer_share_one_specialization():
    k = cj.jit(BIAS_ADD)
    a = k.compile(meta(8), meta(8), None, None, 8, arch=ARCH)
    b = k.compile(meta(8), meta(8), cj.DevicePointer(64), cj.DevicePointer(0), 8, arch=ARCH)
    assert a.signature == b.signature and len(k.signatures) == 1
    # A tensor for the same parameter is another signature.
    c = k.compile(meta(8), meta(8), meta(8), None, 8, arch=ARCH)
    assert c.signature == "(float32*, const float32*, const float32*, address, int)"
    assert len(k.signatures) == 2


def test_none_to_a_concrete_pointer():
    k = cj.jit("__global__ void k(float* out, const float* __restrict__ bias, int n) {}")
    c = k.compile(meta(4), None, 4, arch=ARCH)
    assert c.inspect_types()["cpp_signature"] == "k(float*, float const*, int)"


def test_none_by_keyword():
    k = cj.jit(BIAS_ADD)
    c = k.compile(out=meta(8), x=meta(8), bias=None, saved=None, n=8, arch=ARCH)
    assert c.signature == "(float32*, const float32*, address, address, int)"


def test_address_whose_type_only_it_could_deduce():
    k = cj.jit("template <typename T>\n__global__ void fill(T* out, float v, int n) {}")
    for value in (None, cj.DevicePointer(4096)):
        with pytest.raises(TypeError, match=r"parameter 'out' \(T\*\) of kernel 'fill' got an "
                                            r"address \(None or a cj.DevicePointer\), which has no "
                                            r"element type, and its template parameter 'T' appears "
                                            r"in no other parameter.*template_args"):
            k.compile(value, 1.0, 4, arch=ARCH)
    # Given explicitly, T needs no tensor.
    c = cj.jit(k.source, template_args=(torch.float16,)).compile(None, 1.0, 4, arch=ARCH)
    assert c.inspect_types()["cpp_signature"] == "void fill<__half>(__half*, float, int)"


@pytest.mark.parametrize("source, param, wants", [
    pytest.param("__global__ void k(cj::Array<float, 1> a, float* p) {}", r"'a' \(cj::Array<float, 1>\)",
                 "a tensor", id="array"),
    pytest.param("__global__ void k(float a, float* p) {}", r"'a' \(float\)", "a number", id="scalar"),
    pytest.param("__global__ void k(auto a, float* p) {}", r"'a' \(auto\)", "a tensor", id="auto"),
])
@pytest.mark.parametrize("value, said", [
    pytest.param(None, r"got None; only raw pointer parameters \(T\*, const T\*\) take None \(as a "
                       r"NULL pointer\)", id="None"),
    pytest.param(cj.DevicePointer(64), r"got a cj.DevicePointer; only raw pointer parameters "
                                       r"\(T\*, const T\*\) take device addresses", id="DevicePointer"),
])
def test_address_to_a_parameter_that_is_no_pointer(source, param, wants, value, said):
    k = cj.jit(source)
    with pytest.raises(TypeError, match=rf"parameter {param} of kernel 'k' {said}. Pass {wants}\."):
        k.compile(value, meta(4), arch=ARCH)


@pytest.mark.parametrize("value", [0, 4096, 2**63 + 8], ids=str)
def test_bare_int_to_a_pointer_suggests_device_pointer(value):
    k = cj.jit("__global__ void k(float* out, int n) {}")
    with pytest.raises(TypeError, match=rf"parameter 'out' \(float\*\) of kernel 'k' takes a tensor, "
                                        rf"got the Python int {value}. A raw device address must be "
                                        rf"wrapped: pass cj.DevicePointer\({value}\), or None for a "
                                        rf"NULL pointer"):
        k.compile(value, 4, arch=ARCH)


def test_float_to_a_pointer_names_what_pointers_take():
    k = cj.jit("__global__ void k(float* out, int n) {}")
    with pytest.raises(TypeError, match=r"parameter 'out' \(float\*\) of kernel 'k' takes a tensor, "
                                        r"None \(NULL\) or a cj.DevicePointer, got float"):
        k.compile(1.5, 4, arch=ARCH)


@pytest.mark.parametrize("value, error, match", [
    pytest.param(-1, ValueError, r"DevicePointer takes an address from 0 to 2\*\*64-1, got -1", id="negative"),
    pytest.param(2**64, ValueError, r"DevicePointer takes an address from 0 to 2\*\*64-1, got 18446744073709551616",
                 id="2**64"),
    pytest.param(True, TypeError, r"DevicePointer takes an int address, got the bool True", id="bool"),
    pytest.param(1.0, TypeError, r"DevicePointer takes an int address \(such as tensor.data_ptr\(\)\), got float",
                 id="float"),
    pytest.param("0x10", TypeError, r"DevicePointer takes an int address \(such as tensor.data_ptr\(\)\), got str",
                 id="str"),
    pytest.param(None, TypeError, r"DevicePointer takes an int address \(such as tensor.data_ptr\(\)\), got NoneType",
                 id="None"),
])
def test_device_pointer_validates_its_value(value, error, match):
    with pytest.raises(error, match=match):
        cj.DevicePointer(value)


def test_device_pointer_value_and_equality():
    p = cj.DevicePointer(0x1000)
    assert p.value == 4096 and repr(p) == "DevicePointer(0x1000)"
    assert p == cj.DevicePointer(4096) and hash(p) == hash(cj.DevicePointer(4096))
    assert p != cj.DevicePointer(4097) and p != 4096
    assert cj.DevicePointer(2**64 - 1).value == 2**64 - 1
    with pytest.raises(AttributeError):
        p.value = 8


def test_pickled_address_specialization_is_adopted():
    k = cj.jit(BIAS_ADD)
    k.compile(meta(8), meta(8), None, None, 8, arch=ARCH)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a dropped specialization warns
        k2 = pickle.loads(pickle.dumps(k))
    assert k2.signatures == k.signatures == ["(float32*, const float32*, address, address, int)"]


# -- pinned host tensors -------------------------------------------------------------------------

SCALE_PTR = r"""
__global__ void scale(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
"""
SCALE_ARRAY = r"""
__global__ void scale_array(cj::Array<float, 1> out, cj::Array<const float, 1> x, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
"""


@pytest.mark.parametrize("path", CALL_PATHS)
@pytest.mark.parametrize("source", [SCALE_PTR, SCALE_ARRAY], ids=["pointer", "array"])
def test_unpinned_cpu_tensor_suggests_pin_memory(source, path):
    k = cj.jit(source)
    x = random_values((8,), torch.float32)
    args = (torch.empty(8), x, 2.0) + ((8,) if "int n" in source else ())
    # Checked before any device work, so a machine without a GPU shows it too.
    pinning = (r", or pin it with .pin_memory\(\): pointer and cj::Array parameters take "
               r"pinned CPU tensors" if cj._C.driver_available() else "")
    assert_raises(TypeError, r"parameter 'out' \(.*\) of kernel '.*' got a tensor on cpu; kernels "
                             r"take CUDA tensors" + CPU_TENSOR_ADVICE + pinning, call, k[1, 8], k,
                  args, path)


def test_cpu_tensor_to_a_scalar_parameter_is_not_offered_pinning():
    k = cj.jit("__global__ void k(float a) {}")
    with pytest.raises(TypeError, match=r"parameter 'a' \(float\) of kernel 'k' got a tensor on cpu; "
                                        r"kernels take CUDA tensors" + CPU_TENSOR_ADVICE + r"\.$"):
        k[1, 1](torch.tensor(2))


def test_cpu_tensor_of_rank_one_to_a_scalar_parameter():
    # Only 0-d floating-point CPU tensors are read as numbers (as on the op path).
    k = cj.jit("__global__ void k(float a) {}")
    with pytest.raises(TypeError, match=r"parameter 'a' \(float\) of kernel 'k' got a tensor on cpu"):
        k[1, 1](torch.tensor([2.0]))


# -- complex pointees ----------------------------------------------------------------------------

CU_COMPLEX = r"""
#include <cuComplex.h>
__global__ void cmul(cuComplex* out, const cuFloatComplex* x, const cuComplex* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = cuCmulf(x[i], y[i]);
}
__global__ void zmul(cuDoubleComplex* out, const cuDoubleComplex* x, const cuDoubleComplex* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = cuCmul(x[i], y[i]);
}
"""

# <thrust/complex.h> includes the host's <complex> and <sstream>, which NVRTC lacks; kernels that
# only name the type (their project includes thrust elsewhere) are represented by a stand-in of
# its layout.
THRUST_COMPLEX = r"""
namespace thrust {
template <class T> struct alignas(2 * sizeof(T)) complex {
  T re, im;
  __device__ T real() const { return re; }
  __device__ T imag() const { return im; }
};
}
template <class T>
__device__ thrust::complex<T> times(thrust::complex<T> a, thrust::complex<T> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__global__ void tmul(thrust::complex<float>* out, const thrust::complex<float>* x,
                     const thrust::complex<float>* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = times(x[i], y[i]);
}
__global__ void tmul64(thrust::complex<double>* out, const thrust::complex<double>* x,
                       const thrust::complex<double>* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = times(x[i], y[i]);
}
"""

CUDA_STD_COMPLEX = r"""
#include <cuda/std/complex>
__global__ void smul(cuda::std::complex<double>* out, const cuda::std::complex<double>* x,
                     const ::cuda::std::complex<double>* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * y[i];
}
__global__ void smul64(cuda::std::complex<float>* out, const cuda::std::complex<float>* x,
                       const cuda::std::complex<float>* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * y[i];
}
"""

needs_cccl = pytest.mark.skipif(not has_cccl(), reason="CCCL (cuda/std) is not installed")

# (id, source, kernel, dtype, C++ signature)
COMPLEX_CASES = [
    pytest.param(CU_COMPLEX, "cmul", torch.complex64,
                 "cmul(float2*, float2 const*, float2 const*, int)", id="cuComplex"),
    pytest.param(CU_COMPLEX, "zmul", torch.complex128,
                 "zmul(double2*, double2 const*, double2 const*, int)", id="cuDoubleComplex"),
    pytest.param(THRUST_COMPLEX, "tmul", torch.complex64,
                 "tmul(thrust::complex<float>*, thrust::complex<float> const*, "
                 "thrust::complex<float> const*, int)", id="thrust-complex64"),
    pytest.param(THRUST_COMPLEX, "tmul64", torch.complex128,
                 "tmul64(thrust::complex<double>*, thrust::complex<double> const*, "
                 "thrust::complex<double> const*, int)", id="thrust-complex128"),
    pytest.param(CUDA_STD_COMPLEX, "smul", torch.complex128, "cuda::std::", id="cuda-std-complex128",
                 marks=needs_cccl),
    pytest.param(CUDA_STD_COMPLEX, "smul64", torch.complex64, "cuda::std::", id="cuda-std-complex64",
                 marks=needs_cccl),
]


@pytest.mark.parametrize("source, name, dtype, cpp", COMPLEX_CASES)
def test_complex_pointees_compile(source, name, dtype, cpp):
    k = cj.jit(source, name=name)
    c = k.compile(meta(4, dtype), meta(4, dtype), meta(4, dtype), 4, arch=ARCH)
    n = dtype_id(dtype)
    assert c.signature == f"({n}*, const {n}*, const {n}*, int)"
    assert cpp in c.inspect_types()["cpp_signature"]


@pytest.mark.parametrize("source, name, dtype, cpp", COMPLEX_CASES)
def test_complex_pointee_refuses_the_other_precision(source, name, dtype, cpp):
    k = cj.jit(source, name=name)
    other = torch.complex128 if dtype == torch.complex64 else torch.complex64
    with pytest.raises(TypeError, match=rf"parameter 'x' \(const .*\*\) of kernel '{name}' takes "
                                        rf"{dtype_id(dtype)} elements, got a tensor of dtype "
                                        rf"{dtype_id(other)}"):
        k.compile(meta(4, dtype), meta(4, other), meta(4, dtype), 4, arch=ARCH)


def test_cucomplex_header_compiles_with_its_helpers():
    src = r"""
#include <cuComplex.h>
__global__ void k(cuDoubleComplex* out, const cuFloatComplex* x) {
  cuFloatComplex a = cuCaddf(x[0], make_cuFloatComplex(1.0f, 2.0f));
  out[0] = cuComplexFloatToDouble(cuCdivf(a, cuConjf(x[1])));
  out[1] = make_cuDoubleComplex(cuCabs(out[0]), cuCreal(out[0]));
}"""
    c = cj.jit(src).compile(meta(2, torch.complex128), meta(2, torch.complex64), arch=ARCH)
    assert c.inspect_types()["cpp_signature"] == "k(double2*, float2 const*)"


# -- vector types and structs behind pointers -------------------------------------------------------

VECTORS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void vec(float4* a, const int4* b, float2* c, __half2* d, const __nv_bfloat162* e,
                    double2* f, uchar4* g, const char2* h, longlong2* i, ushort4* j) {}
"""
# (parameter, C++ name, element dtype, lanes, alignment)
VECTOR_PARAMS = [
    ("a", "float4", torch.float32, 4, 16),
    ("b", "int4", torch.int32, 4, 16),
    ("c", "float2", torch.float32, 2, 8),
    ("d", "__half2", torch.float16, 2, 4),
    ("e", "__nv_bfloat162", torch.bfloat16, 2, 4),
    ("f", "double2", torch.float64, 2, 16),
    ("g", "uchar4", torch.uint8, 4, 4),
    ("h", "char2", torch.int8, 2, 2),
    ("i", "longlong2", torch.int64, 2, 16),
    ("j", "ushort4", torch.uint16, 4, 8),
]


def vector_args(n_vectors=3, device="meta", override=None):
    args = [torch.empty(n_vectors * lanes, dtype=dtype, device=device)
            for _, _, dtype, lanes, _ in VECTOR_PARAMS]
    for i, value in (override or {}).items():
        args[i] = value
    return args


def test_vector_pointers_compile():
    k = cj.jit(VECTORS)
    c = k.compile(*vector_args(), arch=ARCH)
    assert c.signature == ("(float4*, const int4*, float2*, __half2*, const __nv_bfloat162*, double2*, "
                           "uchar4*, const char2*, longlong2*, ushort4*)")
    assert c.inspect_types()["cpp_signature"] == (
        "vec(float4*, int4 const*, float2*, __half2*, __nv_bfloat162 const*, double2*, uchar4*, "
        "char2 const*, longlong2*, ushort4*)")


@pytest.mark.parametrize("index", range(len(VECTOR_PARAMS)),
                         ids=[v[1] for v in VECTOR_PARAMS])
def test_vector_pointer_refuses_another_dtype(index):
    name, cpp, dtype, lanes, _ = VECTOR_PARAMS[index]
    other = torch.float64 if dtype != torch.float64 else torch.float32
    k = cj.jit(VECTORS)
    args = vector_args(override={index: meta(4 * lanes, other)})
    with pytest.raises(TypeError, match=rf"parameter '{name}' \((const )?{cpp}\*\) of kernel 'vec' points "
                                        rf"to {cpp}, {lanes} lane\(s\) of {dtype_id(dtype)}; got a tensor "
                                        rf"of dtype {dtype_id(other)}. Pass a {dtype_id(dtype)} tensor "
                                        rf"whose size is a multiple of {lanes} elements"):
        k.compile(*args, arch=ARCH)


@pytest.mark.parametrize("index", [i for i, v in enumerate(VECTOR_PARAMS) if v[3] > 1],
                         ids=[v[1] for v in VECTOR_PARAMS if v[3] > 1])
@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_vector_pointer_needs_whole_vectors(index, device):
    name, cpp, dtype, lanes, align = VECTOR_PARAMS[index]
    size = lanes * torch.empty(0, dtype=dtype).element_size()
    k = cj.jit(VECTORS)
    n = 2 * lanes + 1
    args = vector_args(device=device, override={index: torch.empty(n, dtype=dtype, device=device)})
    with pytest.raises(ValueError, match=rf"parameter '{name}' \((const )?{cpp}\*\) of kernel 'vec' points "
                                         rf"to `{cpp}` and needs a tensor whose data is {align}-byte "
                                         rf"aligned and whose size is a multiple of {size} bytes; got a "
                                         rf"{dtype_id(dtype)} tensor of {n} elements \({n * size // lanes} "
                                         rf"bytes\) whose data is {align}-byte aligned"):
        k.compile(*args, arch=ARCH)


@pytest.mark.parametrize("index", [i for i, v in enumerate(VECTOR_PARAMS)
                                   if v[4] > torch.empty(0, dtype=v[2]).element_size()],
                         ids=[v[1] for v in VECTOR_PARAMS
                              if v[4] > torch.empty(0, dtype=v[2]).element_size()])
@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_vector_pointer_needs_aligned_data(index, device):
    name, cpp, dtype, lanes, align = VECTOR_PARAMS[index]
    item = torch.empty(0, dtype=dtype).element_size()
    k = cj.jit(VECTORS)
    # One element in: a whole number of vectors that starts one element past the alignment.
    view = torch.empty(3 * lanes + 1, dtype=dtype, device=device)[1:]
    args = vector_args(device=device, override={index: view})
    with pytest.raises(ValueError, match=rf"parameter '{name}' .* needs a tensor whose data is {align}-byte "
                                         rf"aligned .*; got a {dtype_id(dtype)} tensor of {3 * lanes} "
                                         rf"elements \({3 * lanes * item} bytes\) whose data starts "
                                         rf"{item} bytes past a {align}-byte boundary. Use a tensor of a "
                                         rf"multiple of {lanes} elements that starts at a multiple of "
                                         rf"{lanes} elements"):
        k.compile(*args, arch=ARCH)


def test_float4_example_message():
    k = cj.jit("__global__ void k(const float4* x) {}")
    with pytest.raises(ValueError, match=re.escape(
            "parameter 'x' (const float4*) of kernel 'k' points to `float4` and needs a tensor whose "
            "data is 16-byte aligned and whose size is a multiple of 16 bytes; got a float32 tensor of "
            "10 elements (40 bytes) whose data starts 4 bytes past a 16-byte boundary.")):
        k.compile(meta(11)[1:], arch=ARCH)


def test_device_pointer_to_a_vector_must_be_aligned():
    k = cj.jit("__global__ void k(float4* out, const float4* x) {}")
    assert k.compile(meta(4), cj.DevicePointer(0x7f0000001000), arch=ARCH).signature == "(float4*, address)"
    with pytest.raises(ValueError, match=r"parameter 'x' \(const float4\*\) of kernel 'k' points to "
                                         r"`float4` \(16 bytes, 16-byte aligned\) and needs a 16-byte "
                                         r"aligned address; got cj.DevicePointer\(0x7f0000001004\), 4 "
                                         r"bytes past a 16-byte boundary"):
        k.compile(meta(4), cj.DevicePointer(0x7f0000001004), arch=ARCH)


STRUCTS = r"""
struct alignas(16) Vec { float v[4]; };
struct Rgb { unsigned char r, g, b; };
struct Opaque;
typedef float scalar_t;
__global__ void structs(Vec* out, const Vec* x, const Rgb* pixels, Opaque* handle, void* raw,
                        scalar_t* s) {}
"""


def test_struct_pointers_compile():
    k = cj.jit(STRUCTS)
    c = k.compile(meta(8), meta(4, torch.int32), meta(6, torch.uint8), meta(3, torch.int64),
                  meta(5, torch.float16), meta(2), arch=ARCH)
    assert c.inspect_types()["cpp_signature"] == (
        "structs(Vec*, Vec const*, Rgb const*, Opaque*, void*, float*)")


@pytest.mark.parametrize("index, value, match", [
    pytest.param(0, meta(6), r"parameter 'out' \(Vec\*\) of kernel 'structs' points to `Vec` and needs a "
                             r"tensor whose data is 16-byte aligned and whose size is a multiple of 16 "
                             r"bytes; got a float32 tensor of 6 elements \(24 bytes\)", id="size"),
    pytest.param(1, meta(9, torch.int32)[1:], r"parameter 'x' \(const Vec\*\) .* whose data starts 4 bytes "
                                              r"past a 16-byte boundary", id="alignment"),
    pytest.param(2, meta(7, torch.uint8), r"parameter 'pixels' \(const Rgb\*\) of kernel 'structs' points "
                                          r"to `Rgb` and needs a tensor whose data is 1-byte aligned and "
                                          r"whose size is a multiple of 3 bytes; got a uint8 tensor of 7 "
                                          r"elements \(7 bytes\)", id="odd-size"),
])
def test_struct_pointee_errors(index, value, match):
    k = cj.jit(STRUCTS)
    args = [meta(8), meta(4, torch.int32), meta(6, torch.uint8), meta(3, torch.int64),
            meta(5, torch.float16), meta(2)]
    args[index] = value
    with pytest.raises(ValueError, match=match):
        k.compile(*args, arch=ARCH)


def test_typedef_pointee_refuses_another_dtype():
    k = cj.jit(STRUCTS)
    with pytest.raises(TypeError, match=r"parameter 's' \(scalar_t\*\) of kernel 'structs' points to "
                                        r"float32 elements \(`scalar_t` is float\); got a tensor of "
                                        r"dtype float16"):
        k.compile(meta(8), meta(4, torch.int32), meta(6, torch.uint8), meta(3, torch.int64),
                  meta(5, torch.float16), meta(2, torch.float16), arch=ARCH)


def test_template_pointee_in_a_struct_template():
    # A dependent pointee keeps being deduced from the tensor's dtype.
    src = ("template <typename T> struct Box { T v; };\n"
           "template <typename T>\n__global__ void k(T* out, const T* x) {}")
    c = cj.jit(src).compile(meta(4, torch.float64), meta(4, torch.float64), arch=ARCH)
    assert c.inspect_types()["cpp_signature"] == "void k<double>(double*, double const*)"


# -- tag parameters: integral_constant / bool_constant bound from a Python bool or int ------------------

TAGS = r"""
#include <type_traits>
#include <cuda/std/type_traits>
template <bool Accumulate, int Unroll>
__global__ void scale_tagged(float* out, const float* x, float a, int n,
                             std::bool_constant<Accumulate>,
                             cuda::std::integral_constant<int, Unroll> unroll) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * Unroll;
  #pragma unroll
  for (int k = 0; k < Unroll; ++k) {
    if (i + k >= n) return;
    float v = a * x[i + k] + (float)unroll.value * 0.0f;
    out[i + k] = Accumulate ? out[i + k] + v : v;
  }
}
"""


def test_tag_parameters_are_reflected():
    k = cj.jit(TAGS)
    assert [p.kind for p in k.params][4:] == ["scalar", "scalar"]


@pytest.mark.skipif(not has_cccl(), reason="needs CCCL's cuda/std headers")
@pytest.mark.parametrize("accumulate, unroll", [(True, 2), (False, 4), (False, -3)])
def test_tag_values_pick_the_specialization(accumulate, unroll):
    k = cj.jit(TAGS)
    c = k.compile(meta(8), meta(8), 2.0, 8, accumulate, unroll, arch=ARCH)
    value = "true" if accumulate else "false"
    number = f"({unroll})" if unroll < 0 else str(unroll)
    assert c.signature == (f"(float32*, const float32*, float, int, std::bool_constant<{value}>, "
                           f"cuda::std::integral_constant<int, {number}>)")
    assert c.inspect_types()["cpp_signature"].startswith(
        f"void scale_tagged<{value}, {unroll}>(")
    # Another value is another specialization; the same value is the same one.
    k.compile(meta(8), meta(8), 2.0, 8, not accumulate, unroll, arch=ARCH)
    k.compile(meta(8), meta(8), 2.0, 8, accumulate, unroll, arch=ARCH)
    assert len(k.signatures) == 2


@pytest.mark.skipif(not has_cccl(), reason="needs CCCL's cuda/std headers")
def test_tag_with_explicit_template_arguments():
    k = cj.jit(TAGS, template_args=(True, 2))
    c = k.compile(meta(8), meta(8), 2.0, 8, True, 2, arch=ARCH)
    assert "scale_tagged<true, 2>" in c.inspect_types()["cpp_signature"]


@pytest.mark.parametrize("value, exc, match", [
    (1.5, TypeError, r"parameter 'unroll' \(cuda::std::integral_constant<int, Unroll>\) of kernel "
                     r"'scale_tagged' is a tag and takes a Python "
                     r"bool or int \(its value picks the specialization\), got float"),
    (40000, ValueError, r"parameter 'unroll' \(cuda::std::integral_constant<int, Unroll>\) of kernel "
                     r"'scale_tagged' is a tag; its value must be "
                        r"in \[-32768, 32767\], got 40000"),
    (torch.tensor(2), TypeError, r"parameter 'unroll' \(cuda::std::integral_constant<int, Unroll>\) of kernel "
                     r"'scale_tagged' is a tag and takes "
                                 r"a Python bool or int .*got a tensor"),
], ids=["float", "out-of-range", "tensor"])
def test_tag_rejects(value, exc, match):
    k = cj.jit(TAGS)
    with pytest.raises(exc, match=match):
        k.compile(meta(8), meta(8), 2.0, 8, True, value, arch=ARCH)


def test_bytes_for_a_dependent_struct_name_the_template_parameter():
    src = ("template <typename T> struct Box { T v; };\n"
           "template <typename T>\n__global__ void k(T* out, Box<T> b) { out[0] = b.v; }\n"
           "template <typename T>\n__global__ void alone(float* out, Box<T> b) { out[0] = b.v; }")
    # Another parameter's type names T: the tensor decides it, the bytes are a Box<float>.
    cj.jit(src, "k").compile(meta(4), bytes(4), arch=ARCH)
    with pytest.raises(TypeError, match=r"parameter 'b' \(Box<T>\) of kernel 'alone' has type "
                                        r"`Box<T>`, which depends on template parameter `T`; bytes "
                                        r"cannot decide it, and no other parameter's type names it"):
        cj.jit(src, "alone").compile(meta(4), bytes(4), arch=ARCH)
    cj.jit(src, "alone", template_args={"T": "int"}).compile(meta(4), bytes(4), arch=ARCH)


@pytest.mark.gpu
@pytest.mark.skipif(not has_cccl(), reason="needs CCCL's cuda/std headers")
@pytest.mark.parametrize("path", CALL_PATHS)
def test_tag_parameters_launch(path):
    k = cj.jit(TAGS)
    n = 1001
    x = random_values((n,), torch.float32, "cuda")
    base = random_values((n,), torch.float32, "cuda")
    out = base.clone()
    call(k[blocks(n, 128 * 2), 128], k, (out, x, 1.5, n, True, 2), path)
    torch.testing.assert_close(out, base + 1.5 * x)
    out = poison_(torch.empty(n, device="cuda"))
    call(k[blocks(n, 128 * 4), 128], k, (out, x, 1.5, n, False, 4), path)
    torch.testing.assert_close(out, 1.5 * x)


# -- part 5: the first NVRTC error of a failed deduction ------------------------------------------------

def test_failed_deduction_shows_the_first_nvrtc_error_first():
    k = cj.jit("template <typename T>\n__global__ void k(T* out, const T* x, T a) {}")
    with pytest.raises(cj.CompileError) as info:
        k.compile(meta(4), meta(4, torch.float16), 1.0, arch=ARCH)
    message = str(info.value)
    first = message.index("NVRTC's first error:")
    assert first < message.index("NVRTC log:") < message.index("__nv_name_map")
    head = message[:message.index("NVRTC options:")]
    assert re.search(r"NVRTC's first error:\n  torch_cudajit_generated\(\d+\): error: no instance of "
                     r"overloaded function \"cj_detail_sig_k\" matches the argument list\n    argument "
                     r"types are: \(float \*, const __half \*, double\)\n", head), head
    assert "__nv_name_map" not in head
    assert "k(float32*, const float16*, float)" in head


def test_failed_deduction_leaves_the_name_map_errors_out_of_the_message():
    # NVRTC follows a failed deduction with one __nv_name_map error per name expression; the
    # message counts them in one line after the useful error, and .log keeps them all.
    k = cj.jit("template <typename T>\n__global__ void k(T* out, const T* x, T a) {}")
    with pytest.raises(cj.CompileError) as info:
        k.compile(meta(4), meta(4, torch.float16), 1.0, arch=ARCH)
    message, log = str(info.value), info.value.log
    follow_ups = log.count("__nv_name_map(")
    assert follow_ups >= 3
    full = message[message.index("NVRTC log:"):message.index("\nSource (")]
    assert "#pragma nv_mangled_name" not in full
    assert re.search(r"NVRTC log:\ntorch_cudajit_generated\(\d+\): error: no instance of overloaded "
                     r"function \"cj_detail_sig_k\" matches the argument list\n", full), full
    assert re.search(r"\(\d+ follow-on error\(s\) of NVRTC's name map \(__nv_name_map\), caused by "
                     r"the errors above, are left out here; CompileError.log has the whole log.\)",
                     full), full
    assert full.index("no instance of overloaded") < full.index("follow-on error(s)")


def test_failed_deduction_names_an_address_in_the_argument_types():
    # The per-key helper of an address key reports like the kernel's own.
    k = cj.jit("template <typename T>\n__global__ void k(T* out, const T* x, const T* b) {}")
    with pytest.raises(cj.CompileError, match=r"NVRTC's first error:\n.*no instance of overloaded "
                                              r"function \"cj_detail_sig_k_[0-9a-f]{12}\" matches the argument "
                                              r"list\n    argument types are: \(float \*, const __half "
                                              r"\*, std::nullptr_t\)"):
        k.compile(meta(4), meta(4, torch.float16), None, arch=ARCH)


# -- GPU: launches compared with torch -------------------------------------------------------------------

N = 1000


@pytest.mark.gpu
@pytest.mark.parametrize("path", CALL_PATHS)
@pytest.mark.parametrize("dtype", BIAS_DTYPES)
@pytest.mark.parametrize("bias_kind", ["tensor", "None", "DevicePointer"])
@pytest.mark.parametrize("saved_kind", ["tensor", "None"])
def test_optional_pointers_launch(device, path, dtype, bias_kind, saved_kind):
    k = cj.jit(BIAS_ADD)
    x = random_values((N,), dtype, device)
    bias = random_values((N,), dtype, device)
    expected = x + bias if bias_kind != "None" else x.clone()
    out = poison_(torch.empty(N, dtype=dtype, device=device))
    saved = poison_(torch.empty(N, dtype=dtype, device=device))
    b = {"tensor": bias, "None": None, "DevicePointer": cj.DevicePointer(bias.data_ptr())}[bias_kind]
    s = saved if saved_kind == "tensor" else None
    call(k[blocks(N, 128), 128], k, (out, x, b, s, N), path)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)
    if saved_kind == "tensor":
        torch.testing.assert_close(saved, x, rtol=0, atol=0)
    else:
        assert torch.isnan(saved).all()  # untouched: the kernel saw NULL


@pytest.mark.gpu
def test_none_pointer_with_a_specialized_kernel(device):
    k = cj.jit(BIAS_ADD)
    x = random_values((N,), torch.float32, device)
    out = poison_(torch.empty_like(x))
    sk = k.specialize(out, x, None, None, N)
    sk[blocks(N, 256), 256](out, x, None, None, N)
    torch.testing.assert_close(out, x, rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"is fixed to \(float32\*, const float32\*, address, address, int\) "
                                        r"but got \(float32\*, const float32\*, const float32\*, address, int\)"):
        sk[blocks(N, 256), 256](out, x, x, None, N)


@pytest.mark.gpu
@pytest.mark.parametrize("source", [SCALE_PTR, SCALE_ARRAY], ids=["pointer", "array"])
@pytest.mark.parametrize("where", ["both-pinned", "pinned-input", "pinned-output", "pinned-slices"])
def test_pinned_host_tensors(device, source, where):
    k = cj.jit(source)
    n = 777
    host_x = random_values((n + 3,), torch.float32).pin_memory()
    host_out = poison_(torch.empty(n + 3)).pin_memory()
    if where == "pinned-slices":
        x, out = host_x[3:], host_out[3:]  # views that start inside their pinned allocations
    else:
        x, out = host_x[:n], host_out[:n]
    if where == "pinned-input":
        out = poison_(torch.empty(n, device=device))
    if where == "pinned-output":
        x = x.to(device)
    assert x.is_pinned() or x.is_cuda
    args = (out, x, 3.0) + ((n,) if source is SCALE_PTR else ())
    k[blocks(n, 128), 128](*args)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), 3.0 * x.cpu())
    if where == "pinned-slices":
        assert torch.isnan(host_out[:3]).all()  # nothing written before the view


@pytest.mark.gpu
def test_device_pointer_to_foreign_memory(device):
    k = cj.jit(SCALE_PTR)
    x = random_values((N,), torch.float32, device)
    out = poison_(torch.empty_like(x))
    k[blocks(N, 128), 128](cj.DevicePointer(out.data_ptr()), cj.DevicePointer(x.data_ptr()), -2.0, N)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, -2.0 * x, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("source, name, dtype, cpp", COMPLEX_CASES)
def test_complex_kernels_against_torch(device, source, name, dtype, cpp):
    k = cj.jit(source, name=name)
    x = random_values((N,), dtype, device)
    y = random_values((N,), dtype, device)
    out = poison_(torch.empty_like(x))
    k[blocks(N, 128), 128](out, x, y, N)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x * y)


VECTOR_KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void scale4(float4* out, const float4* x, float a, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 v = x[i]; out[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w); }
}
__global__ void hadd2(__half2* out, const __half2* x, const __half2* y, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) out[i] = __hadd2(x[i], y[i]);
}
__global__ void bmul2(__nv_bfloat162* out, const __nv_bfloat162* x, const __nv_bfloat162* y, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) out[i] = __hmul2(x[i], y[i]);
}
__global__ void dsub2(double2* out, const double2* x, const double2* y, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) out[i] = make_double2(x[i].x - y[i].x, x[i].y - y[i].y);
}
__global__ void iadd4(int4* out, const int4* x, const int4* y, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) out[i] = make_int4(x[i].x + y[i].x, x[i].y + y[i].y, x[i].z + y[i].z, x[i].w + y[i].w);
}
"""

# (kernel, dtype, lanes, reference)
VECTOR_LAUNCHES = [
    pytest.param("scale4", torch.float32, 4, lambda x, y: 1.5 * x, id="float4"),
    pytest.param("hadd2", torch.float16, 2, lambda x, y: x + y, id="__half2"),
    pytest.param("bmul2", torch.bfloat16, 2, lambda x, y: x * y, id="__nv_bfloat162"),
    pytest.param("dsub2", torch.float64, 2, lambda x, y: x - y, id="double2"),
    pytest.param("iadd4", torch.int32, 4, lambda x, y: x + y, id="int4"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("name, dtype, lanes, reference", VECTOR_LAUNCHES)
def test_vector_kernels_against_torch(device, name, dtype, lanes, reference):
    k = cj.jit(VECTOR_KERNELS, name=name)
    n = 4096
    x = random_values((n,), dtype, device)
    y = random_values((n,), dtype, device)
    out = poison_(torch.empty_like(x))
    third = 1.5 if name == "scale4" else y
    k[blocks(n // lanes, 128), 128](out, x, third, n // lanes)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, reference(x, y))


@pytest.mark.gpu
@pytest.mark.parametrize("name, dtype, lanes, reference", VECTOR_LAUNCHES)
def test_vector_kernels_refuse_misaligned_data_at_launch(device, name, dtype, lanes, reference):
    k = cj.jit(VECTOR_KERNELS, name=name)
    n = 64
    item = torch.empty(0, dtype=dtype).element_size()
    align = {"scale4": 16, "hadd2": 4, "bmul2": 4, "dsub2": 16, "iadd4": 16}[name]
    x = random_values((n + 1,), dtype, device)[1:]  # one element past an aligned start
    out = poison_(torch.empty(n, dtype=dtype, device=device))
    third = 1.5 if name == "scale4" else torch.empty(n, dtype=dtype, device=device)
    with pytest.raises(ValueError, match=rf"parameter 'x' \(const .*\*\) of kernel '{name}' points to "
                                         rf"`.*` and needs a tensor whose data is {align}-byte aligned and "
                                         rf"whose size is a multiple of {lanes * item} bytes; got a "
                                         rf"{dtype_id(dtype)} tensor of {n} elements \({n * item} bytes\) "
                                         rf"whose data starts {item} bytes past a {align}-byte boundary"):
        k[1, 32](out, x, third, n // lanes)
    assert torch.isnan(out).all() if dtype.is_floating_point else (out == torch.iinfo(dtype).max).all()


@pytest.mark.gpu
def test_struct_pointee_kernel_against_torch(device):
    k = cj.jit(STRUCT_SUM)
    n = 500
    x = random_values((n, 4), torch.float32, device)
    out = poison_(torch.empty(n, device=device))
    k[blocks(n, 128), 128](out, x, n)
    torch.cuda.synchronize()
    expected = ((x[:, 0] + x[:, 1]) + x[:, 2]) + x[:, 3]
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


# -- the GPU tests' kernels compile here, with the arguments they launch with --------------------------

STRUCT_SUM = r"""
struct alignas(16) Vec { float v[4]; };
__global__ void vsum(float* out, const Vec* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ((x[i].v[0] + x[i].v[1]) + x[i].v[2]) + x[i].v[3];
}"""


@pytest.mark.parametrize("name, dtype, lanes, reference", VECTOR_LAUNCHES)
def test_vector_kernels_compile(name, dtype, lanes, reference):
    k = cj.jit(VECTOR_KERNELS, name=name)
    third = 1.5 if name == "scale4" else meta(64, dtype)
    c = k.compile(meta(64, dtype), meta(64, dtype), third, 64 // lanes, arch=ARCH)
    assert c.cubin and c.lowered_name


@pytest.mark.parametrize("dtype", BIAS_DTYPES)
def test_bias_add_with_tensors_compiles(dtype):
    c = cj.jit(BIAS_ADD).compile(*(meta(8, dtype) for _ in range(4)), 8, arch=ARCH)
    name = dtype_id(dtype)
    assert c.signature == f"({name}*, const {name}*, const {name}*, {name}*, int)"


@pytest.mark.parametrize("source, args", [
    pytest.param(SCALE_PTR, (meta(8), meta(8), 3.0, 8), id="scale-pointer"),
    pytest.param(SCALE_ARRAY, (meta(8), meta(8), 3.0), id="scale-array"),
    pytest.param(SCALE_PTR, (cj.DevicePointer(1 << 20), cj.DevicePointer(1 << 21), 3.0, 8),
                 id="scale-device-pointers"),
    pytest.param(STRUCT_SUM, (meta(8), meta(32), 8), id="struct-sum"),
])
def test_launch_kernels_compile(source, args):
    assert cj.jit(source).compile(*args, arch=ARCH).cubin
