"""Reflection and compilation: runs without a GPU (CPU and meta tensors are type exemplars)."""
import os
import re
import struct
import subprocess
import sys

import pytest
import torch

import torch_cudajit as tcj
from _support import COPY2D, DTYPE_NAMES, DTYPES, base_shape, dtype_params, view_of

# -- reflection ---------------------------------------------------------------------------------

# (id, source, kernel name, is_template, [(name, kind, is_const, element, rank), ...])
REFLECTION_CASES = [
    ("plain-pointers",
     "__global__ void k(float* out, const float* x, int64_t n) {}", "k", False,
     [("out", "pointer", False, "float", ""), ("x", "pointer", True, "float", ""),
      ("n", "scalar", False, "", "")]),
    ("pointer-qualifiers",
     "__global__ void k(float* __restrict__ out, const double* __restrict__ x, "
     "int* const p, volatile unsigned int* q) {}", "k", False,
     [("out", "pointer", False, "float", ""), ("x", "pointer", True, "double", ""),
      ("p", "pointer", False, "int", ""), ("q", "pointer", False, "unsigned int", "")]),
    ("template",
     "template <typename T>\n__global__ void k(cj::Array<T, 2> out, cj::Array<const T, 2> x, T s) {}",
     "k", True,
     [("out", "array", False, "T", "2"), ("x", "array", True, "T", "2"), ("s", "scalar", False, "", "")]),
    ("template-rank",
     "template <class T, int N>\n__global__ void k(cj::Array<T, N> out, const T* x, unsigned long long m) {}",
     "k", True,
     [("out", "array", False, "T", "N"), ("x", "pointer", True, "T", ""),
      ("m", "scalar", False, "", "")]),
    ("array-layouts",
     "__global__ void k(cj::Array<float, 1, cj::Contiguous> a, cj::Array<const double, 3, cj::Strided> b, "
     "cj::Array<const cj::complex<float>, 2> c, cj::Array<__half, 0> d) {}", "k", False,
     [("a", "array", False, "float", "1"), ("b", "array", True, "double", "3"),
      ("c", "array", True, "cj::complex<float>", "2"), ("d", "array", False, "__half", "0")]),
    ("auto",
     "__global__ void k(auto out, auto x, float s) {}", "k", False,
     [("out", "auto", False, "", ""), ("x", "auto", False, "", ""), ("s", "scalar", False, "", "")]),
    ("unnamed",
     "__global__ void k(float*, const double*, int) {}", "k", False,
     [("arg0", "pointer", False, "float", ""), ("arg1", "pointer", True, "double", ""),
      ("arg2", "scalar", False, "", "")]),
    ("extern-C",
     'extern "C" __global__ void k(float* out, const float* x, int n) {}', "k", False,
     [("out", "pointer", False, "float", ""), ("x", "pointer", True, "float", ""),
      ("n", "scalar", False, "", "")]),
    ("launch-bounds-and-default",
     "__global__ void __launch_bounds__(256) k(cj::Array<float, 1> out, int n = 4) {}", "k", False,
     [("out", "array", False, "float", "1"), ("n", "scalar", False, "", "")]),
    ("void-params", "__global__ void k(void) {}", "k", False, []),
    ("struct-param",
     "struct P { float a, b; };\n__global__ void k(float* out, P p) {}", "k", False,
     [("out", "pointer", False, "float", ""), ("p", "scalar", False, "", "")]),
]


@pytest.mark.parametrize("source, name, is_template, expected",
                         [pytest.param(*c[1:], id=c[0]) for c in REFLECTION_CASES])
def test_reflection(source, name, is_template, expected):
    k = tcj.jit(source)
    assert isinstance(k, tcj.Kernel)
    assert k.name == name
    assert k.source == source
    assert k.is_template is is_template
    got = [(p.name, p.kind, p.is_const, p.element, p.rank) for p in k.params]
    assert got == expected
    assert all(isinstance(p, tcj.Parameter) for p in k.params)


def test_kernels_share_one_definition_with_their_script_object():
    k = tcj.jit("template <class T> __global__ void k(cj::Array<T, 1> o, T a) {}",
                options=["-DX=1"], debug=True, template_args="float")
    assert k.options == {"options": ["-DX=1"], "std": "c++17", "debug": True, "lineinfo": False,
                         "template_args": "float", "cache": True, "link": [],
                         "cooperative": -1}
    assert k._definition.fingerprint == k.script_object.fingerprint()
    assert [p["role"] for p in k._definition.params] == ["output", "scalar"]
    # The state is what the script object pickles as, and rebuilds the same definition.
    again = tcj._C.KernelDefinition.from_state(k._definition.state)
    assert again.fingerprint == k._definition.fingerprint and again.options == k.options
    # Every kernel of a module is a definition on the one reflected source.
    m = tcj.jit("__global__ void a(float* x) {}\n__global__ void b(const float* x) {}")
    assert [p.role for p in m.a.params] == ["output"] and [p.role for p in m.b.params] == ["input"]
    with pytest.raises(ValueError, match="no __global__ function named 'c' in the source; it "
                                         "defines 'a', 'b'"):
        tcj.jit("__global__ void a(float* x) {}\n__global__ void b(const float* x) {}", "c")


def test_writable_parameters():
    k = tcj.jit("__global__ void k(float* a, const float* b, cj::Array<float, 1> c, "
                "cj::Array<const float, 1> d, int n, auto e) {}", std="c++20")
    assert [p.writable for p in k.params] == [True, False, True, False, False, True]
    # The roles come from the C++ core (param_role), which the op path reads too.
    assert [p.role for p in k.params] == ["output", "input", "output", "input", "scalar", "auto"]
    assert k._parts.op_roles == tuple(p.role for p in k.params)


def test_reflection_types_are_normalized():
    k = tcj.jit("__global__ void k(cj::Array< const float ,2 >   x, const   float  *  y) {}")
    assert [p.type for p in k.params] == ["cj::Array<const float, 2>", "const float*"]


def test_reflection_ignores_comments_and_strings():
    src = """// __global__ void in_line_comment(float* x) {}
/* __global__ void in_block_comment(int y) {} */
const char* s = "__global__ void in_string(int z)";
__global__ void real(float* x) {}
"""
    k = tcj.jit(src)
    assert isinstance(k, tcj.Kernel) and k.name == "real"


def test_reflection_forward_declaration_uses_definition_names(arch):
    src = """__global__ void fwd(cj::Array<float, 1> a, cj::Array<const float, 1> b, int n);
__global__ void fwd(cj::Array<float, 1> dst, cj::Array<const float, 1> src, int count) {
  int i = threadIdx.x; if (i < count) dst[i] = src[i];
}"""
    k = tcj.jit(src)
    assert [p.name for p in k.params] == ["dst", "src", "count"]
    c = k.compile(dst=torch.empty(4), src=torch.empty(8)[::2], count=4, arch=arch)
    assert c.signature == "(Array<float32, 1, contiguous>, Array<const float32, 1, strided>, int)"


def test_overloaded_kernels_are_rejected():
    with pytest.raises(ValueError, match=r"kernel 'o' is declared at lines 1 and 2 with different "
                                         r"parameter lists"):
        tcj.jit("__global__ void o(float* x) {}\n__global__ void o(int* x) {}")


def test_kernel_repr_lists_params():
    k = tcj.jit("__global__ void k(float* out, int n) {}")
    assert repr(k) == "<torch_cudajit.Kernel k(float* out, int n)>"


# -- compiling every dtype and layout -------------------------------------------------------------

SCALE_PTR = r"""
template <typename T>
__global__ void scale_ptr(T* out, const T* x, T s, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * s;
}
"""


def _exemplar(shape, dtype, layout, device):
    """An uninitialised tensor of `shape` with the given layout (only its type matters)."""
    base = torch.empty(base_shape(shape, layout), dtype=dtype, device=device)
    return view_of(base, layout, shape)


def _check_binary(c, arch_name="sm_90"):
    assert isinstance(c, tcj.CompiledKernel)
    assert c.arch == int(arch_name[3:]) and c.target == arch_name
    assert f"-arch={arch_name}" in c.options
    assert isinstance(c.ptx, str) and ".entry" in c.ptx
    assert re.search(r"\.entry\s+" + re.escape(c.lowered_name) + r"\s*\(", c.ptx), "entry not in PTX"
    assert isinstance(c.cubin, bytes) and len(c.cubin) > 0
    assert c.cubin[:4] == b"\x7fELF"
    assert c.lowered_name.encode() in c.cubin  # the kernel's symbol is in the CUBIN
    assert c.lowered_name in repr(c) and c.signature in repr(c)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "expanded"])
@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", dtype_params())
def test_compile_array_kernel_every_dtype_and_layout(dtype, device, layout, arch):
    k = tcj.jit(COPY2D)
    out = torch.empty(6, 5, dtype=dtype, device=device)
    x = _exemplar((6, 5), dtype, layout, device)
    c = k.compile(out, x, arch=arch)
    name = DTYPE_NAMES[dtype]
    flag = "contiguous" if layout == "contiguous" else "strided"
    assert c.signature == f"(Array<{name}, 2, contiguous>, Array<const {name}, 2, {flag}>)"
    _check_binary(c)
    assert k.signatures == [c.signature]


@pytest.mark.parametrize("out_layout", ["contiguous", "transposed", "sliced"])
def test_compile_strided_output(out_layout, arch):
    k = tcj.jit(COPY2D)
    out = _exemplar((4, 3), torch.float32, out_layout, "cpu")
    c = k.compile(out, torch.empty(4, 3), arch=arch)
    flag = "contiguous" if out_layout == "contiguous" else "strided"
    assert c.signature == f"(Array<float32, 2, {flag}>, Array<const float32, 2, contiguous>)"


@pytest.mark.parametrize("dtype", dtype_params())
def test_compile_pointer_kernel_every_dtype(dtype, arch):
    k = tcj.jit(SCALE_PTR)
    t = torch.empty(16, dtype=dtype)
    scalar = True if dtype == torch.bool else 3
    c = k.compile(t, t[3:], scalar, 16, arch=arch)  # a contiguous view with an offset is fine
    name = DTYPE_NAMES[dtype]
    assert c.signature == f"({name}*, const {name}*, {'bool' if dtype == torch.bool else 'int'}, int)"
    _check_binary(c)


def test_lowered_names_differ_across_dtypes(arch):
    k = tcj.jit(COPY2D)
    names = {d: k.compile(torch.empty(2, 2, dtype=d), torch.empty(2, 2, dtype=d), arch=arch).lowered_name
             for d in DTYPES}
    assert len(set(names.values())) == len(DTYPES), names
    assert len(k.signatures) == len(DTYPES)


def test_layout_is_part_of_the_instantiation(arch):
    k = tcj.jit(COPY2D)
    a = k.compile(torch.empty(3, 3), torch.empty(3, 3), arch=arch)
    b = k.compile(torch.empty(3, 3), torch.empty(3, 3).t(), arch=arch)
    assert a.lowered_name != b.lowered_name
    # cj::Layout<7> (contiguous, 16-byte aligned, 32-bit offsets) vs cj::Layout<6> (strided,
    # aligned, 32-bit offsets) in the mangled names
    assert "LayoutILi7EE" in a.lowered_name and "ILi6EE" not in a.lowered_name
    assert "LayoutILi7EE" in b.lowered_name and "ILi6EE" in b.lowered_name


def test_meta_and_cpu_exemplars_share_a_specialization(arch):
    k = tcj.jit(COPY2D)
    a = k.compile(torch.empty(3, 4), torch.empty(3, 4), arch=arch)
    b = k.compile(torch.empty(7, 2, device="meta"), torch.empty(7, 2, device="meta"), arch=arch)
    assert a.lowered_name == b.lowered_name and a.ptx == b.ptx
    assert len(k.signatures) == 1


@pytest.mark.parametrize("arch_arg", [90, "sm_90", (9, 0), "compute_90"], ids=repr)
def test_arch_spellings(arch_arg):
    k = tcj.jit(COPY2D)
    c = k.compile(torch.empty(2, 2), torch.empty(2, 2), arch=arch_arg)
    assert c.arch == 90 and c.target == "sm_90"


def test_other_arch_gets_its_own_specialization(arch):
    k = tcj.jit(COPY2D)
    a = k.compile(torch.empty(2, 2), torch.empty(2, 2), arch=arch)
    b = k.compile(torch.empty(2, 2), torch.empty(2, 2), arch="sm_80")
    assert (a.target, b.target) == ("sm_90", "sm_80")
    assert "-arch=sm_80" in b.options
    assert set(k.overloads) == {(a.signature, 90), (a.signature, 80)}


def test_arch_unknown_to_nvrtc_is_refused():
    # sm_99 does not exist: an explicit arch= is refused rather than compiled as older PTX (a
    # GPU newer than NVRTC still gets PTX: tests/cpp/program_test.cpp, UnknownArchFallsBackToPtx).
    k = tcj.jit(COPY2D)
    with pytest.raises(ValueError, match=r"arch is 99: NVRTC .* cannot target sm_99\. It supports"):
        k.compile(torch.empty(2, 2), torch.empty(2, 2), arch=99)


def test_arch_older_than_nvrtc_supports():
    k = tcj.jit(COPY2D)
    with pytest.raises(ValueError, match=r"cannot target sm_30; the oldest architecture it supports"):
        k.compile(torch.empty(2, 2), torch.empty(2, 2), arch=30)


@pytest.mark.parametrize("bad", ["sm_foo", "ninety", (9,), 9.0], ids=repr)
def test_bad_arch_spelling(bad):
    k = tcj.jit(COPY2D)
    with pytest.raises(ValueError, match="arch must be like 90"):
        k.compile(torch.empty(2, 2), torch.empty(2, 2), arch=bad)


def test_nvrtc_version():
    major, minor = tcj.nvrtc_version()
    assert isinstance(major, int) and isinstance(minor, int)
    assert major >= 12


# -- template deduction ---------------------------------------------------------------------------

SAXPY = r"""
template <typename T>
__global__ void saxpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
"""


def _param_ptx_type(c, index):
    m = re.search(r"\.param\s+(\.\w+)\s+" + re.escape(c.lowered_name) + f"_param_{index}\\b", c.ptx)
    assert m, f"no scalar .param {index} in the PTX"
    return m.group(1)


@pytest.mark.parametrize("scalar", [2.0, 2, True], ids=["py-float", "py-int", "py-bool"])
def test_saxpy_scalar_follows_tensor_type(scalar, arch):
    """T is float for float32 tensors even when the scalar is a Python float (a double) or int."""
    k = tcj.jit(SAXPY)
    x = torch.empty(8)
    c = k.compile(torch.empty(8), x, scalar, arch=arch)
    assert c.lowered_name.startswith("_Z5saxpyIf")  # saxpy<float, ...>
    assert _param_ptx_type(c, 2) == ".f32"
    kind = {float: "float", int: "int", bool: "bool"}[type(scalar)]
    assert c.signature == f"(Array<float32, 1, contiguous>, Array<const float32, 1, contiguous>, {kind})"


def test_saxpy_python_float_and_int_share_the_instantiation(arch):
    k = tcj.jit(SAXPY)
    a = k.compile(torch.empty(8), torch.empty(8), 2.0, arch=arch)
    b = k.compile(torch.empty(8), torch.empty(8), 2, arch=arch)
    assert a.lowered_name == b.lowered_name
    assert a.signature != b.signature  # but the keys (Python kinds) differ
    assert len(k.signatures) == 2


@pytest.mark.parametrize("dtype, mangled, ptx_type", [
    pytest.param(torch.float64, "d", ".f64", id="float64"),
    pytest.param(torch.float16, "6__half", None, id="float16"),  # a struct: .b8 [2] in PTX
    pytest.param(torch.bfloat16, "13__nv_bfloat16", None, id="bfloat16"),
    pytest.param(torch.int32, "i", ".u32", id="int32"),
    pytest.param(torch.int64, "x", ".u64", id="int64"),
    pytest.param(torch.int8, "a", ".u8", id="int8"),
    pytest.param(torch.uint8, "h", ".u8", id="uint8"),
])
def test_saxpy_deduces_other_dtypes(dtype, mangled, ptx_type, arch):
    k = tcj.jit(SAXPY)
    scalar = 2.0 if dtype.is_floating_point else 2
    c = k.compile(torch.empty(8, dtype=dtype), torch.empty(8, dtype=dtype), scalar, arch=arch)
    assert c.lowered_name.startswith(f"_Z5saxpyI{mangled}"), c.lowered_name
    if ptx_type is not None:
        assert _param_ptx_type(c, 2) in (ptx_type, ".b" + ptx_type[2:], ".s" + ptx_type[2:])


def test_saxpy_complex128_with_python_complex(arch):
    k = tcj.jit(SAXPY)
    t = torch.empty(4, dtype=torch.complex128)
    c = k.compile(t, t, 1 + 2j, arch=arch)
    assert c.signature.endswith(", complex)")
    assert "complexIdE" in c.lowered_name


@pytest.mark.parametrize("source", [
    pytest.param(SAXPY, id="template-T"),
    pytest.param("__global__ void k(cj::Array<cj::complex<float>, 1> out, cj::Array<const cj::complex<float>, 1> x,"
                 " cj::complex<float> a) { out[0] = a * x[0]; }", id="concrete-complex-float"),
])
def test_python_complex_to_complex64_parameter(source, arch):
    k = tcj.jit(source)
    t = torch.empty(4, dtype=torch.complex64)
    c = k.compile(t, t, 1 + 2j, arch=arch)
    assert c.signature.endswith(", complex)")


def test_complex_kernels_compile_with_arithmetic(arch):
    k = tcj.jit(r"""
template <typename C>
__global__ void cmul(cj::Array<C, 1> out, cj::Array<const C, 1> a, cj::Array<const C, 1> b) {
  long long i = threadIdx.x;
  if (i < out.size(0)) out[i] = a[i] * b[i] + C(a[i].real(), -a[i].imag()) - b[i];
}""")
    for dtype in (torch.complex64, torch.complex128):
        t = torch.empty(4, dtype=dtype)
        c = k.compile(t, t, t, arch=arch)
        assert ".entry" in c.ptx


# -- explicit template arguments ------------------------------------------------------------------

FILL_N = r"""
template <int N, typename T>
__global__ void fill_n(cj::Array<T, 1> out, T v) {
  long long i = (long long)threadIdx.x * N;
  for (int k = 0; k < N; ++k) if (i + k < out.size(0)) out[i + k] = v;
}
"""



@pytest.mark.parametrize("template_args, mangled", [
    pytest.param("4", "ILi4E", id="str"),
    pytest.param((8,), "ILi8E", id="tuple-int"),
    pytest.param([16], "ILi16E", id="list-int"),
])
def test_explicit_template_args_with_deduced_rest(template_args, mangled, arch):
    k = tcj.jit(FILL_N, template_args=template_args)
    c = k.compile(torch.empty(8, dtype=torch.float64), 1.5, arch=arch)
    assert c.lowered_name.startswith(f"_Z6fill_n{mangled}d"), c.lowered_name  # N explicit, T=double


@pytest.mark.parametrize("template_args", [
    pytest.param("float", id="str"),
    pytest.param((torch.float32,), id="dtype"),
])
def test_explicit_template_type(template_args, arch):
    k = tcj.jit(SAXPY, template_args=template_args)
    c = k.compile(torch.empty(8), torch.empty(8), 2, arch=arch)
    assert c.lowered_name.startswith("_Z5saxpyIf")


def test_explicit_bool_template_arg(arch):
    k = tcj.jit(r"""
template <bool Negate, typename T>
__global__ void maybe_neg(cj::Array<T, 1> out) { if (Negate) out[0] = -out[0]; }""",
                template_args=(True,))
    c = k.compile(torch.empty(2), arch=arch)
    assert c.lowered_name.startswith("_Z9maybe_negILb1E"), c.lowered_name


def test_explicit_template_type_that_contradicts_the_tensors(arch):
    k = tcj.jit(SAXPY, template_args=(torch.float64,))
    with pytest.raises(tcj.CompileError, match="could not be instantiated") as info:
        k.compile(torch.empty(8), torch.empty(8), 2.0, arch=arch)
    assert "saxpy(Array<float32, 1, contiguous>" in str(info.value)


@pytest.mark.parametrize("dtype, cpp", [(torch.uint16, "unsigned short"), (torch.uint32, "unsigned int"),
                                        (torch.uint64, "unsigned long")])
def test_unsigned_dtypes_as_template_args(dtype, cpp, arch):
    k = tcj.jit("template <typename T>\n__global__ void fill(cj::Array<T, 1> out, T v) { out[0] = v; }",
                template_args=(dtype,))
    c = k.compile(torch.empty(4, dtype=dtype), 7, arch=arch)
    assert c.inspect_types()["cpp_signature"].startswith(f"void fill<{cpp}")


@pytest.mark.parametrize("template_args, match", [
    pytest.param((1.5,), "template_args entries must be", id="float"),
    pytest.param((object(),), "template_args entries must be", id="object"),
    pytest.param((torch.float8_e4m3fn,), "has no CUDA C\\+\\+ type", id="dtype-without-cpp-type"),
])
def test_bad_template_args(template_args, match):
    with pytest.raises(TypeError, match=match):
        tcj.jit(SAXPY, template_args=template_args)


# -- abbreviated templates (auto parameters) ------------------------------------------------------

AUTO_COPY = r"""
__global__ void auto_copy(auto out, auto x, float s) {
  long long i = blockIdx.y * blockDim.y + threadIdx.y;
  long long j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0) && j < x.size(1)) out(i, j) = x(i, j) * s;
}
"""


@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_auto_parameters(std, arch):
    k = tcj.jit(AUTO_COPY, std=std)
    assert [p.kind for p in k.params] == ["auto", "auto", "scalar"]
    c = k.compile(torch.empty(4, 3), torch.empty(3, 4).t(), 2.0, arch=arch)
    assert c.signature == "(Array<float32, 2, contiguous>, Array<float32, 2, strided>, float)"
    assert "-std=c++20" in c.options  # abbreviated function templates need C++20
    d = k.compile(torch.empty(4, 3, dtype=torch.float64), torch.empty(4, 3, dtype=torch.float64), 2.0,
                  arch=arch)
    assert d.lowered_name != c.lowered_name
    assert len(k.signatures) == 2


def test_auto_parameter_takes_a_0d_tensor(arch):
    k = tcj.jit("__global__ void k(auto out, float v) { out() = v; }")
    c = k.compile(torch.empty(()), 1.0, arch=arch)
    assert c.signature == "(Array<float32, 0, contiguous>, float)"


def test_module_with_auto_kernel_compiles_its_other_kernels(arch):
    m = tcj.jit(AUTO_COPY + "\n__global__ void plain(float* out, int n) { if (n) out[0] = 1; }")
    c = m.plain.compile(torch.empty(4), 4, arch=arch)
    assert ".entry" in c.ptx


# -- headers ----------------------------------------------------------------------------------------

HEADERS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <stdint.h>
__global__ void mixed(__half* h, __nv_bfloat16* b, const int64_t* idx, std::uint32_t n, uint8_t k) {
  uint32_t i = threadIdx.x;
  if (i < n) {
    h[i] = __hadd(h[i], __float2half(1.0f));
    b[i] = __float2bfloat16(__bfloat162float(b[i]) * 2.0f + (float)idx[i] + k);
  }
}
"""


def test_kernel_with_standard_headers(arch):
    k = tcj.jit(HEADERS)
    assert [p.element for p in k.params[:3]] == ["__half", "__nv_bfloat16", "int64_t"]
    c = k.compile(torch.empty(4, dtype=torch.float16), torch.empty(4, dtype=torch.bfloat16),
                  torch.empty(4, dtype=torch.int64), 4, 1, arch=arch)
    assert c.signature == "(float16*, bfloat16*, const int64*, int, int)"
    assert ".entry" in c.ptx and c.cubin[:4] == b"\x7fELF"


def test_cj_header_is_included_automatically(arch):
    k = tcj.jit("__global__ void k(cj::Array<cj::complex<double>, 1> out, int64_t n, uint16_t m) "
                "{ out[0] = cj::complex<double>(n, m); }")
    c = k.compile(torch.empty(2, dtype=torch.complex128), 1, 2, arch=arch)
    assert ".entry" in c.ptx


# (id, source, arguments, CUDA's fp16/bf16 headers asked for, the prelude's <math.h> asked for)
IMPLICIT_CASES = [
    ("arithmetic", "__global__ void k(float* o, const float* x) { o[0] = 2.0f * x[0]; }",
     lambda: (torch.empty(4), torch.empty(4)), False, False),
    ("float16 key", "template <class T> __global__ void k(T* o, const T* x) { o[0] = x[0]; }",
     lambda: (torch.empty(4, dtype=torch.float16),) * 2, True, False),
    ("bfloat16 key", "template <class T> __global__ void k(cj::Array<T, 1> o) { o[0] = o[1]; }",
     lambda: (torch.empty(4, dtype=torch.bfloat16),), True, False),
    ("names __half", "__global__ void k(__half* o) { o[0] = __float2half(1.0f); }",
     lambda: (torch.empty(4, dtype=torch.float16),), True, False),
    ("nvcc's implicit math", "__global__ void k(double* o, int n) { o[0] = M_PI * sqrt(n) + std::fabs(o[1]); }",
     lambda: (torch.empty(4, dtype=torch.float64), 3), False, True),
    ("float-suffixed math", "__global__ void k(float* o) { o[0] = sqrtf(fmaxf(o[1], 1.0f)); }",
     lambda: (torch.empty(4),), False, False),
]


@pytest.mark.parametrize("source, args, half, math", [c[1:] for c in IMPLICIT_CASES],
                         ids=[c[0] for c in IMPLICIT_CASES])
def test_optional_parts_of_the_device_header_follow_what_the_source_uses(source, args, half, math, arch):
    k = tcj.jit(source)
    text = k._core.compile_inputs(args(), 90)["source"]
    assert ("#define CJ_HAVE_FP16 1" in text) == half
    assert ("#define CJ_IMPLICIT_MATH 1" in text) == math
    assert ".entry" in k.compile(*args(), arch=arch).ptx


def test_a_header_of_the_users_own_keeps_the_whole_device_header(tmp_path, arch):
    # The header relies on what cj/cj.cuh has always given: __half and M_PI without includes.
    (tmp_path / "my_ops.cuh").write_text(
        "__device__ inline __half twice(__half x) { return __hadd(x, x); }\n"
        "__device__ inline double tau() { return 2 * M_PI; }\n")
    k = tcj.jit('#include "my_ops.cuh"\n'
                "__global__ void k(float* o) { o[0] = __half2float(twice(__float2half(o[1]))) + tau(); }",
                options=[f"-I{tmp_path}"])
    text = k._core.compile_inputs((torch.empty(4),), 90)["source"]
    assert "#define CJ_HAVE_FP16 1" in text and "#define CJ_IMPLICIT_MATH 1" in text
    assert ".entry" in k.compile(torch.empty(4), arch=arch).ptx


# (id, C++ scalar type, Python value)
SCALAR_PARAMS = [(t, v) for t in ["int8_t", "uint8_t", "int16_t", "uint16_t", "int", "unsigned",
                                   "long long", "unsigned long long", "size_t", "bool"]
                 for v in (3, True)]
SCALAR_PARAMS += [(t, v) for t in ["float", "double", "__half", "__nv_bfloat16",
                                    "cj::complex<double>"] for v in (3, 2.5, True)]


@pytest.mark.parametrize("cpp_type, value", [pytest.param(t, v, id=f"{t}-{v!r}") for t, v in SCALAR_PARAMS])
def test_scalar_parameter_types(cpp_type, value, arch):
    read = "v.real()" if "complex" in cpp_type else "(float)v"
    k = tcj.jit(f"__global__ void s(float* out, {cpp_type} v) {{ out[0] = {read}; }}")
    c = k.compile(torch.empty(2), value, arch=arch)
    kind = {int: "int", float: "float", bool: "bool"}[type(value)]
    assert c.signature == f"(float32*, {kind})"


def test_struct_parameter_from_bytes(arch):
    k = tcj.jit(r"""struct Affine { float scale; float shift; };
__global__ void affine(cj::Array<float, 1> out, cj::Array<const float, 1> x, Affine p) {
  long long i = threadIdx.x; if (i < x.size(0)) out[i] = x[i] * p.scale + p.shift;
}""")
    c = k.compile(torch.empty(4), torch.empty(4), struct.pack("ff", 2.0, 1.0), arch=arch)
    assert c.signature == "(Array<float32, 1, contiguous>, Array<const float32, 1, contiguous>, Affine)"


# -- modules of several kernels -------------------------------------------------------------------

MODULE = r"""
template <typename T>
__global__ void add(cj::Array<T, 1> out, cj::Array<const T, 1> a, cj::Array<const T, 1> b) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a[i] + b[i];
}
__device__ float helper(float v) { return 2.0f * v; }
__global__ void twice(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = helper(x[i]);
}
extern "C" __global__ void negate(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -x[i];
}
"""


def test_module_of_several_kernels(arch):
    m = tcj.jit(MODULE)
    assert isinstance(m, tcj.KernelModule)
    assert m.names == ["add", "twice", "negate"]
    assert m.add is m["add"] and m.twice is m["twice"] and m.negate is m["negate"]
    assert [k.name for k in m] == m.names
    assert repr(m) == "<torch_cudajit.KernelModule add, twice, negate>"
    t = torch.empty(8)
    assert m.add.compile(t, t, t, arch=arch).signature.startswith("(Array<float32, 1, contiguous>")
    assert m["twice"].compile(t, t, 8, arch=arch).signature == "(float32*, const float32*, int)"
    c = m.negate.compile(t, t, 8, arch=arch)
    assert c.lowered_name == "negate"  # extern "C": no mangling
    # each kernel keeps its own specializations
    assert len(m.add.signatures) == len(m.twice.signatures) == len(m.negate.signatures) == 1


def test_module_unknown_kernel():
    m = tcj.jit(MODULE)
    with pytest.raises(AttributeError, match="no kernel 'nope' in the source; it defines add, twice, negate"):
        m.nope
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        m["nope"]


def test_jit_name_picks_one_kernel(arch):
    k = tcj.jit(MODULE, name="twice")
    assert isinstance(k, tcj.Kernel) and k.name == "twice"
    assert ".entry" in k.compile(torch.empty(2), torch.empty(2), 2, arch=arch).ptx


def test_extern_c_array_parameters_are_strided(arch):
    k = tcj.jit('extern "C" __global__ void ec(cj::Array<float, 1> out, int n) { out[0] = n; }')
    c = k.compile(torch.empty(4), 4, arch=arch)  # contiguous, yet an extern "C" kernel has one instantiation
    assert c.signature == "(Array<float32, 1, strided>, int)"
    assert c.lowered_name == "ec"


# -- the specialization cache ---------------------------------------------------------------------

def test_signatures_grow_once_per_new_key(arch):
    k = tcj.jit(SAXPY)
    f32 = torch.empty(8)
    first = k.compile(f32, f32, 2.0, arch=arch)
    assert k.signatures == [first.signature]
    # the same key again, through other tensors of another shape: no new specialization
    again = k.compile(torch.empty(100), torch.empty(3), 5.0, arch=arch)
    assert again.lowered_name == first.lowered_name and again.ptx == first.ptx
    assert len(k.signatures) == 1
    steps = [
        (torch.empty(8, dtype=torch.float64), torch.empty(8, dtype=torch.float64), 2.0),  # dtype
        (f32, torch.empty(16)[::2], 2.0),  # layout
        (f32, f32, 2),  # Python kind of the scalar
    ]
    for i, args in enumerate(steps, start=2):
        k.compile(*args, arch=arch)
        k.compile(*args, arch=arch)
        assert len(k.signatures) == i
    k.compile(f32, f32, 2.0, arch="sm_80")  # another architecture
    assert len(k.signatures) == 5
    assert len(set(k.signatures)) == 4
    assert len(k.overloads) == 5
    for (sig, arch_number), compiled in k.overloads.items():
        assert isinstance(compiled, tcj.CompiledKernel)
        assert compiled.signature == sig and compiled.arch == arch_number


def test_overloads_are_compiled_kernels(arch):
    k = tcj.jit(SAXPY)
    c = k.compile(torch.empty(8), torch.empty(8), 2.0, arch=arch)
    (key, compiled), = k.overloads.items()
    assert key == (c.signature, 90)
    assert compiled.lowered_name == c.lowered_name and compiled.cubin == c.cubin


# -- compile errors ---------------------------------------------------------------------------------

BROKEN = """__global__ void bad(float* out, int n) {
  int i = threadIdx.x;
  out[i] = undefined_symbol + n;
}"""


def test_compile_error_attributes(arch):
    k = tcj.jit(BROKEN, options=["-DEXTRA_OPTION=1"])
    with pytest.raises(tcj.CompileError) as info:
        k.compile(torch.empty(4), 3, arch=arch)
    e = info.value
    assert isinstance(e, RuntimeError)
    assert e.kernel_name == "bad"
    assert e.arch == "sm_90"
    assert isinstance(e.options, list) and "-arch=sm_90" in e.options and "-DEXTRA_OPTION=1" in e.options
    assert re.search(r"kernel\.cu\(3\): error: .*undefined_symbol", e.log), e.log
    assert re.search(r"^\s*1 \| __global__ void bad\(float\* out, int n\) \{$", e.source, re.M), e.source
    assert re.search(r"^\s*3 \|   out\[i\] = undefined_symbol \+ n;$", e.source, re.M), e.source
    msg = str(e)
    assert "kernel 'bad' failed to compile for sm_90" in msg
    assert e.log.splitlines()[0] in msg and "3 |   out[i] = undefined_symbol + n;" in msg


def test_compile_error_shows_the_lines_around_the_error_of_a_long_source(arch):
    # One typo in a 400-line source: the message shows its neighbourhood, not the 400 lines;
    # CompileError.source keeps them all.
    source = "".join(f"// note {i}\n" for i in range(400)) + BROKEN
    with pytest.raises(tcj.CompileError) as info:
        tcj.jit(source).compile(torch.empty(4), 3, arch=arch)
    e, msg = info.value, str(info.value)
    assert "Source (kernel.cu; CompileError.source has all of it, numbered):\n  ...\n" in msg
    assert re.search(r"^401 \| __global__ void bad", msg, re.M) and "403 |   out[i] = undefined_symbol" in msg
    assert "// note 397" not in msg and "// note 10\n" not in msg
    assert len(msg) < 2000, len(msg)
    assert e.source.count("\n") == 404 and " 11 | // note 10" in e.source


@pytest.mark.parametrize("source, error, line", [
    ("#include <cuda_fp16.h>\n\n__global__ void scale(flaot* out, const float* x, float a) {\n"
     "  out[threadIdx.x] = a * x[threadIdx.x];\n}\n",
     "kernel.cu:3:23: error: unknown type name 'flaot'", "3 | __global__ void scale(flaot* out"),
    ("template <typename T>\n__global__ void scale(T* out, Half* x) {}\n",
     "kernel.cu:2:31: error: unknown type name 'Half'", "2 | __global__ void scale(T* out, Half* x)"),
    ("namespace ops {\n__global__ void scale(float* out, int n = undefined_default) {}\n}\n",
     "use of undeclared identifier 'undefined_default'", "2 | __global__ void scale"),
], ids=["typo", "template", "default"])
def test_a_declaration_that_does_not_compile_is_refused_at_jit(source, error, line):
    with pytest.raises(ValueError) as info:
        tcj.jit(source)
    msg = str(info.value)
    assert "torch_cudajit: the declaration of kernel '" in msg and "does not compile:\n" in msg
    assert error in msg and line in msg, msg
    assert "NVRTC would refuse it as well" in msg


def test_types_nvrtc_declares_unasked_are_no_declaration_errors():
    # NVRTC declares CUDA's built-in types without an include; so does the front end.
    k = tcj.jit("__global__ void t(cudaTextureObject_t tex, cudaSurfaceObject_t surf, dim3 d, "
                "uint3 u, float4* o) {}")
    assert [p.kind for p in k.params] == ["scalar", "scalar", "scalar", "scalar", "pointer"]


def test_an_unresolved_type_behind_a_missing_header_is_left_to_nvrtc():
    # The front end cannot judge a type whose header it did not find: the kernel is defined,
    # and the compile says what NVRTC says.
    k = tcj.jit('#include "no_such_header.cuh"\n__global__ void k(Missing* out) {}')
    assert [p.name for p in k.params] == ["out"]


def test_compile_error_is_not_cached(arch):
    k = tcj.jit(BROKEN)
    for _ in range(2):
        with pytest.raises(tcj.CompileError, match="undefined_symbol"):
            k.compile(torch.empty(4), 3, arch=arch)
    assert k.signatures == []


def test_compile_error_line_numbers_survive_the_layout_rewrite(arch):
    # cj::Array parameters get a layout template parameter inserted; lines must not move.
    src = """
template <typename T>
__global__ void e(cj::Array<T, 1> out,
                  cj::Array<const T, 1> x) {
  out[0] = x[0] + oops;
}"""
    k = tcj.jit(src, filename="my_kernel.cu")
    with pytest.raises(tcj.CompileError) as info:
        k.compile(torch.empty(3), torch.empty(3), arch=arch)
    assert re.search(r"my_kernel\.cu\(5\): error: .*oops", info.value.log), info.value.log


@pytest.mark.parametrize("source", [
    pytest.param("""template <typename T>
__global__ void w(cj::Array<T, 1> out, cj::Array<const T, 1> x) {
  x[0] = 1;
}""", id="array-of-const-T"),
    pytest.param("""__global__ void w(cj::Array<float, 1> out, cj::Array<const float, 1> x) {
  out[0] = 0;
  x[0] = 1;
}""", id="array-of-const-float"),
    pytest.param("""__global__ void w(float* out, const float* x) {
  out[0] = 0;
  x[0] = 1;
}""", id="const-pointer"),
])
def test_writing_through_const_is_a_compile_error(source, arch):
    k = tcj.jit(source)
    line = source.splitlines().index(next(l for l in source.splitlines() if "x[0] = 1" in l)) + 1
    with pytest.raises(tcj.CompileError) as info:
        k.compile(torch.empty(4), torch.empty(4), arch=arch)
    assert re.search(rf"kernel\.cu\({line}\): error", info.value.log), info.value.log


# -- jit options --------------------------------------------------------------------------------

NEEDS_SCALE = """
#ifndef SCALE
#error "SCALE is not defined"
#endif
__global__ void k(float* out) { out[0] = SCALE; }"""


def test_defines_reach_the_compiler(arch):
    with pytest.raises(tcj.CompileError, match="SCALE is not defined"):
        tcj.jit(NEEDS_SCALE).compile(torch.empty(1), arch=arch)
    c = tcj.jit(NEEDS_SCALE, defines={"SCALE": 3, "FLAG": None}).compile(torch.empty(1), arch=arch)
    assert "-DSCALE=3" in c.options and "-DFLAG" in c.options


def test_include_dirs(tmp_path, arch):
    (tmp_path / "my_helpers.cuh").write_text("__device__ inline float triple(float v) { return 3 * v; }\n")
    k = tcj.jit('#include "my_helpers.cuh"\n__global__ void k(float* out) { out[0] = triple(out[0]); }',
                include_dirs=[str(tmp_path)])
    c = k.compile(torch.empty(1), arch=arch)
    assert f"-I{tmp_path}" in c.options


@pytest.mark.parametrize("kwargs, expected, absent", [
    pytest.param({}, ["-std=c++17"], ["--use_fast_math", "-lineinfo", "-G"], id="defaults"),
    pytest.param({"fastmath": True}, ["--use_fast_math"], ["-G"], id="fastmath"),
    pytest.param({"lineinfo": True}, ["-lineinfo"], ["-G"], id="lineinfo"),
    pytest.param({"debug": True}, ["-G", "-DCJ_DEBUG"], [], id="debug"),
    pytest.param({"std": "c++20"}, ["-std=c++20"], ["-std=c++17"], id="std"),
    pytest.param({"options": ["-maxrregcount=32"]}, ["-maxrregcount=32"], [], id="options"),
])
def test_compile_options(kwargs, expected, absent, arch):
    c = tcj.jit(COPY2D, **kwargs).compile(torch.empty(2, 2), torch.empty(2, 2), arch=arch)
    for o in expected:
        assert o in c.options
    for o in absent:
        assert o not in c.options


def test_debug_mode_bounds_checks(arch):
    """debug=True compiles cj::Array indexing with a bounds check that records the first
    failure for the host (never a trap, which would poison the context); release code has
    no trace of it."""
    dbg = tcj.jit(COPY2D, debug=True).compile(torch.empty(2, 2), torch.empty(2, 2), arch=arch)
    rel = tcj.jit(COPY2D).compile(torch.empty(2, 2), torch.empty(2, 2), arch=arch)
    assert "cj_debug_record" in dbg.ptx and "atom" in dbg.ptx
    assert "trap" not in dbg.ptx
    assert "cj_debug_record" not in rel.ptx and "trap" not in rel.ptx


@pytest.mark.parametrize("call, exc, match", [
    pytest.param(lambda: tcj.jit(b"__global__ void k() {}"), TypeError, "source must be a str", id="bytes-source"),
    pytest.param(lambda: tcj.jit("__global__ void k() {}", name=3), TypeError, "name must be a str", id="int-name"),
    pytest.param(lambda: tcj.jit("__global__ void k() {}", options="-G"), TypeError,
                 "options must be a list", id="string-options"),
    pytest.param(lambda: tcj.jit("__global__ void k() {}", extensions=[object()]), TypeError,
                 "has no prepare_args method", id="bad-extension"),
    pytest.param(lambda: tcj.jit("__device__ float f(float v) { return v; }"), ValueError,
                 "defines no __global__ function", id="no-kernel"),
])
def test_jit_argument_checks(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


NAMED = """template <typename T, int BLOCK>
__global__ void k(T* out, const T* x) { out[threadIdx.x] = x[threadIdx.x] * BLOCK; }"""


@pytest.mark.parametrize("template_args", [{"BLOCK": 256}, "BLOCK=256", "float, BLOCK = 256",
                                           {"T": torch.float32, "BLOCK": 256}],
                         ids=["dict", "text", "mixed", "all-named"])
def test_named_template_arguments_leave_the_rest_to_deduction(template_args, arch):
    k = tcj.jit(NAMED, template_args=template_args)
    c = k.compile(torch.empty(4), torch.empty(4), arch=arch)
    # k<float, 256>: T deduced (or given), BLOCK given by name.
    assert "_Z1kIfLi256EEvPT_PKS0_" in c.ptx
    assert c.signature == "(float32*, const float32*)"


def test_named_template_arguments_with_layouts_and_a_deduced_scalar(arch):
    k = tcj.jit("template <typename T, int N, class U>\n"
                "__global__ void a(cj::Array<T, 1> o, U u) {}", template_args={"N": 3})
    c = k.compile(torch.empty(4, dtype=torch.float16), 2.0, arch=arch)
    assert re.search(r"\.entry _Z1aI6__halfLi3Ed", c.ptx), c.ptx[:400]


@pytest.mark.parametrize("template_args, match", [
    (None, r"kernel 'k' has the template parameter 'BLOCK', which appears in none of its "
           r"parameters' types, so no argument can deduce it. Give it when defining the kernel: "
           r"cj.jit\(..., template_args=\{'BLOCK': ...\}\)"),
    ({"B": 1}, r"kernel 'k' has no template parameter 'B' \(template_args names it\); its "
               r"template parameters are 'T', 'BLOCK'"),
    ("BLOCK=1, float", r"gives the positional argument 'float' after a named one"),
    ("float, T=float", r"gives its template parameter 'T' twice"),
], ids=["undeducible", "unknown-name", "positional-after-named", "twice"])
def test_template_argument_mistakes_are_reported_at_jit(template_args, match):
    with pytest.raises(ValueError, match=match):
        tcj.jit(NAMED, template_args=template_args)


def test_a_module_reports_an_undeducible_kernel_when_it_compiles(arch):
    m = tcj.jit(NAMED + "\n__global__ void other(float* o) {}")
    m.other.compile(torch.empty(4), arch=arch)  # the module's other kernels stay usable
    with pytest.raises(ValueError, match="'BLOCK', which appears in none of its parameters"):
        m.k.compile(torch.empty(4), torch.empty(4), arch=arch)


def test_template_parameters_with_defaults_or_in_a_parameter_need_no_arguments(arch):
    k = tcj.jit("template <typename T, int BLOCK = 128>\n__global__ void k(T* out) {}")
    assert "_Z1kIfLi128EEvPT_" in k.compile(torch.empty(4), arch=arch).ptx
    with pytest.raises(TypeError, match="keys of a dict name template parameters"):
        tcj.jit(NAMED, template_args={1: 2})


def test_cub_after_the_implicit_standard_headers_compiles_without_warnings(arch):
    # libcu++'s <cuda/std/climits> (which cub includes) defines the limits that the implicit
    # <limits.h> stand-in defined first: identically, so NVRTC has nothing to warn about.
    k = tcj.jit("#include <cub/block/block_reduce.cuh>\n"
                "__global__ void r(float* out, const float* x) {\n"
                "  using R = cub::BlockReduce<float, 128>;\n"
                "  __shared__ typename R::TempStorage t;\n"
                "  float s = R(t).Sum(x[threadIdx.x]);\n"
                "  if (threadIdx.x == 0) out[0] = s + INT_MAX + LLONG_MAX + ULONG_MAX;\n"
                "}", cache=False)
    try:
        c = k.compile(torch.empty(1), torch.empty(128), arch=arch)
    except tcj.CompileError as e:
        if "CCCL" in str(e):
            pytest.skip("no CCCL headers on this machine")
        raise
    assert "redefinition of macro" not in c.log, c.log


# -- compile() and extensions ----------------------------------------------------------------------

class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class _PairExtension(tcj.Extension):
    """Passes a _Pair as two parameters; records the calls and what would run after a launch."""

    def __init__(self):
        self.seen, self.after = [], []

    def prepare_args(self, value, *, param, stream, retr):
        self.seen.append((type(value).__name__, param.name if param is not None else None, stream))
        if isinstance(value, _Pair):
            retr.append(lambda: self.after.append("ran"))
            return tcj.Params(value.a, value.b)
        return value


ADD_PAIR = r"""
__global__ void add_pair(cj::Array<float, 1> out, cj::Array<const float, 1> a,
                         cj::Array<const double, 1> b) {}
"""


@pytest.mark.parametrize("via", ["compile", "precompile"])
def test_compile_applies_the_extensions(via, arch):
    """compile and precompile take the arguments a launch takes: the extensions convert them."""
    ext = _PairExtension()
    k = tcj.jit(ADD_PAIR, extensions=[ext])
    x = torch.empty(4, device="meta")
    pair = _Pair(x, torch.empty(4, dtype=torch.float64, device="meta"))
    c = (k.compile(x, pair, arch=arch) if via == "compile"
         else k.precompile([(x, pair)], arch=arch)[0])
    assert c.signature == k.compile(x, pair, arch=arch).signature
    assert "float64" in c.signature
    assert ext.seen[:2] == [("Tensor", "out", None), ("_Pair", "a", None)]
    assert ext.after == []  # nothing launched: what runs after a launch does not run


def test_pch_folders_left_by_killed_processes_are_removed(tmp_path):
    """NVRTC keeps a process's automatic PCH in $TMPDIR/__nvrtc_auto_pch_<pid>_<n>/ and
    removes it at a normal exit; a killed process leaves it behind. The next process that
    compiles removes the folders of processes that are gone, and keeps a live one's."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"__nvrtc_auto_pch_{gone}_0"
    live = tmp_path / f"__nvrtc_auto_pch_{os.getpid()}_0"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "k_0.pch").write_bytes(b"pch")
    code = ("import torch, torch_cudajit as cj\n"
            "k = cj.jit('__global__ void k(float* p) { p[0] = 1; }', cache=False)\n"
            "k.compile(torch.empty(1), arch=90)\n")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TMPDIR=str(tmp_path)),
                   check=True, capture_output=True)
    assert not stale.exists() and live.exists()


def test_compile_logs_leave_out_the_precompiled_headers_bookkeeping():
    """Every compile uses NVRTC's automatic PCH: compiles with other options, other standards
    and other include sequences in one process pass over each other's PCH, which NVRTC reports
    as warnings; a log shows only what concerns the kernel."""
    logs = []
    for i, (std, defines) in enumerate([("c++17", {}), ("c++17", {"A": 1}), ("c++20", {}),
                                        ("c++17", {"B": 2}), ("c++17", {})]):
        k = tcj.jit(f"#include <cuda/std/limits>\n__global__ void k{i}(float* p) {{ p[0] = {i}; }}"
                    if i == 4 else f"__global__ void k{i}(float* p) {{ p[0] = {i}; }}",
                    std=std, defines=defines, cache=False)
        logs.append(k.compile(torch.empty(1), arch=90).log)
    assert not any("precompiled header" in log or "PCH" in log for log in logs), logs
