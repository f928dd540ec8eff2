"""The Clang front end (csrc/frontend.cpp): declarations are read as the compiler reads them, with
the kernel's include folders, macros and language standard. CPU tests reflect and compile for
sm_90 with meta tensors; GPU tests launch kernels the old reader could not read and compare with
torch."""
import pickle

import pytest
import torch

import torch_cudajit as cj
from _support import blocks, poison_, random_values

ARCH = "sm_90"


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def test_libclang_is_loaded():
    assert "clang version" in cj._C.libclang_version()


# -- the preprocessor ------------------------------------------------------------------------------

GUARDED = r"""
#if 0
__global__ void ghost(float* x) {}
#endif
#ifndef WITH_SCALE
__global__ void copy(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i];
}
#else
__global__ void scale(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
#endif
"""


def test_disabled_kernels_are_not_listed():
    k = cj.jit(GUARDED)
    assert isinstance(k, cj.Kernel) and k.name == "copy"


def test_defines_choose_the_kernels():
    k = cj.jit(GUARDED, defines={"WITH_SCALE": None})
    assert k.name == "scale"
    assert [p.name for p in k.params] == ["out", "x", "a", "n"]


def test_options_defines_count_too():
    k = cj.jit(GUARDED, options=["-DWITH_SCALE"])
    assert k.name == "scale"


MACRO_TYPES = r"""
#define TYPE float
#define OUT_T(T) T* __restrict__
__global__ void axpy(OUT_T(TYPE) out, const TYPE* x, \
                     TYPE a, \
                     int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += a * x[i];
}
"""


def test_macros_in_types_and_continuations_are_expanded():
    k = cj.jit(MACRO_TYPES)
    assert [(p.name, p.kind) for p in k.params] == [
        ("out", "pointer"), ("x", "pointer"), ("a", "scalar"), ("n", "scalar")]
    assert [p.type for p in k.params][:3] == ["float* __restrict__", "const float*", "float"]
    c = k.compile(meta(8), meta(8), 2.0, 8, arch=ARCH)
    assert ".entry" in c.ptx
    with pytest.raises(TypeError, match=r"parameter 'x' \(const float\*\) of kernel 'axpy'"):
        k.compile(meta(8), meta(8, torch.float16), 2.0, 8, arch=ARCH)


NAMESPACED = r"""
namespace ops { namespace detail {
template <typename T> struct Twice { __device__ static T of(T v) { return v + v; } };
}
template <typename T>
__global__ void twice(cj::Array<T, 1> out, cj::Array<const T, 1> x) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = detail::Twice<T>::of(x[i]);
}
}  // namespace ops
namespace {
__global__ void fill(float* out, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v;
}
}
"""


def test_kernels_in_namespaces_compile():
    m = cj.jit(NAMESPACED)
    assert sorted(k.name for k in m) == ["fill", "twice"]
    c = m.twice.compile(meta(8, torch.float64), meta(8, torch.float64), arch=ARCH)
    assert "ops5twice" in c.lowered_name
    assert ".entry" in m.fill.compile(meta(4), 1.0, 4, arch=ARCH).ptx


TYPEDEFS = r"""
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
using index_t = int;
__global__ void to_bf16(floatX* out, const float* x, index_t n) {
  index_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(x[i]);
}
"""


def test_typedef_element_types_bind_their_dtype():
    k = cj.jit(TYPEDEFS)
    assert [p.type for p in k.params] == ["floatX*", "const float*", "index_t"]
    assert ".entry" in k.compile(meta(4, torch.bfloat16), meta(4), 4, arch=ARCH).ptx
    with pytest.raises(TypeError, match=r"parameter 'out' \(floatX\*\) of kernel 'to_bf16' points "
                                        r"to bfloat16 elements \(`floatX` is __nv_bfloat16\); got a "
                                        r"tensor of dtype float32"):
        k.compile(meta(4), meta(4), 4, arch=ARCH)


def test_kernels_made_by_a_macro_are_found():
    src = ("#define UNARY(name, expr) __global__ void name(float* out, const float* x, int n) { \\\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = expr; }\n"
           "UNARY(negate, -x[i])\nUNARY(square, x[i] * x[i])\n")
    m = cj.jit(src)
    assert sorted(k.name for k in m) == ["negate", "square"]
    assert ".entry" in m.square.compile(meta(4), meta(4), 4, arch=ARCH).ptx


def test_user_include_folders_are_searched(tmp_path):
    (tmp_path / "types.h").write_text("#pragma once\ntypedef float real_t;\n")
    src = ('#include "types.h"\n'
           "__global__ void k(real_t* out, int n) { if (n) out[0] = 1; }\n")
    k = cj.jit(src, include_dirs=[str(tmp_path)])
    assert k.params[0].type == "real_t*"
    assert ".entry" in k.compile(meta(4), 4, arch=ARCH).ptx


# -- the reflection travels with the kernel ---------------------------------------------------------

def test_unpickling_reads_no_source():
    k = cj.jit(NAMESPACED).twice
    data = pickle.dumps(k)
    before = cj._C.frontend_parse_count()
    again = pickle.loads(data)
    assert cj._C.frontend_parse_count() == before
    assert [p.name for p in again.params] == ["out", "x"]
    c = again.compile(meta(8), meta(8), arch=ARCH)
    assert "ops5twice" in c.lowered_name


def test_reflection_of_another_source_is_refused():
    a = cj._C.Program("__global__ void k(float* x) {}", "kernel.cu", [], "c++17")
    with pytest.raises(ValueError, match=r"serialized reflection given for 'kernel.cu' was read "
                                         r"from another source"):
        cj._C.Program.from_reflection("__global__ void k(int* x) {}", "kernel.cu", a.reflection)


@pytest.mark.parametrize("cut, message", [
    (lambda r: r[:128] + b"9:not a format", "is damaged \\(its checksum does not match"),
    (lambda r: r[:-3], "is damaged \\(its checksum does not match"),
    (lambda r: r + b"1:x", "is damaged \\(its checksum does not match"),
    (lambda r: r[:64], "is damaged \\(its checksum does not match its 64 bytes"),
], ids=["format", "truncated", "trailing", "no-kernels"])
def test_damaged_reflection_is_refused(cut, message):
    a = cj._C.Program("__global__ void k(float* x, int n) {}", "kernel.cu", [], "c++17")
    with pytest.raises(ValueError, match=message):
        cj._C.Program.from_reflection(a.source, "kernel.cu", cut(a.reflection))


def test_scripted_kernel_keeps_its_reflection():
    obj = cj.jit(NAMESPACED).twice.script_object
    obj = obj() if callable(obj) else obj
    state = obj.__getstate__()[0]  # (state, class name); the state is one string
    assert state.startswith("22:torch_cudajit kernel 1") and "torch_cudajit reflection 1" in state
    before = cj._C.frontend_parse_count()
    again = torch.jit.load(_saved(obj))
    assert cj._C.frontend_parse_count() == before
    assert again.k.__getstate__()[0] == state


def test_script_object_deep_copies():
    """torch.compile and torch.export deep-copy the kernel object through Python (a state with
    empty lists in a tuple could not be typed there)."""
    import copy
    obj = cj.jit(NAMESPACED).twice.script_object
    clone = copy.deepcopy(obj)
    assert clone.fingerprint() == obj.fingerprint() and clone.source() == obj.source()


def _saved(obj):
    import io

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = obj

        def forward(self, x):
            return x

    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Holder()), buffer)
    buffer.seek(0)
    return buffer


# -- GPU: kernels the old reader could not read, launched and compared with torch --------------------

@pytest.mark.gpu
def test_namespaced_template_kernel_launches():
    m = cj.jit(NAMESPACED)
    x = random_values((1000,), torch.float32, "cuda")
    out = poison_(torch.empty_like(x))
    m.twice[blocks(1000, 256), 256](out, x)
    torch.testing.assert_close(out, x + x)
    fill = poison_(torch.empty(300, device="cuda"))
    m.fill[blocks(300, 128), 128](fill, 2.5, 300)
    torch.testing.assert_close(fill, torch.full_like(fill, 2.5))


@pytest.mark.gpu
def test_macro_typed_kernel_launches():
    k = cj.jit(MACRO_TYPES)
    x = random_values((777,), torch.float32, "cuda")
    y = random_values((777,), torch.float32, "cuda")
    expected = y + 1.5 * x
    k[blocks(777, 256), 256](y, x, 1.5, 777)
    torch.testing.assert_close(y, expected)


@pytest.mark.gpu
def test_typedef_kernel_launches():
    k = cj.jit(TYPEDEFS)
    x = random_values((513,), torch.float32, "cuda")
    out = poison_(torch.empty(513, device="cuda", dtype=torch.bfloat16))
    k[blocks(513, 128), 128](out, x, 513)
    torch.testing.assert_close(out, x.to(torch.bfloat16), rtol=0, atol=0)
