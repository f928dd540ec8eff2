"""Whole CUDA files and nvcc's device-pass environment, without a GPU: ``jit(pathlib.Path)``,
open files, ``load("x.cu")`` and ``device_source``; kernels of the user's headers; host macros,
system typedefs, the device runtime and cuRAND; struct parameters by value; other libraries'
complex types. Each kernel compiles for sm_90 from meta tensors."""
from __future__ import annotations

import collections
import dataclasses
import io
import pathlib
import re
import struct

import pytest
import torch

import torch_cudajit as cj

from _support import COMPLEX_SOURCE, CURAND_SOURCE, has_header, needs_cudadevrt, needs_curand

ARCH = "sm_90"

MIXED = r"""// A .cu file as nvcc users write it: host code, launch wrapper, CPU reference.
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "helper_cuda_missing.h"
#include "common.cuh"

#define BLOCK 128
const int kRepeat = 3;
float* d_scratch = NULL;
cublasHandle_t handle;

__constant__ float kScale[2];

__global__ void scale_add(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = twice(a) * x[i] + kRepeat;
}

void scale_add_cpu(float* out, const float* x, float a, int n) {
  for (int i = 0; i < n; ++i) out[i] = 2 * a * x[i] + kRepeat;
}

void launch(float* out, const float* x, float a, int n) {
  scale_add<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(out, x, a, n);
  checkCudaErrors(cudaGetLastError());
}

int main(int argc, char** argv) {
  cudaMalloc(&d_scratch, 1024);
  cublasCreate(&handle);
  printf("done\n");
  return 0;
}
"""

COMMON = r"""#pragma once
#include <math.h>
__device__ inline float twice(float v) { return 2.0f * v; }
template <typename T>
__global__ void fill(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
inline void host_only_helper() { exit(1); }
"""


def meta(n=64, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


@pytest.fixture
def mixed(tmp_path):
    (tmp_path / "common.cuh").write_text(COMMON)
    path = tmp_path / "mixed.cu"
    path.write_text(MIXED)
    return path


def line_of(text, part):
    return text[:text.index(part)].count("\n") + 1


def presumed_line(text, part):
    """The line of ``part`` as the compiler names it: through the text's #line directives."""
    target = line_of(text, part)
    presumed = 1
    for number, line in enumerate(text.split("\n"), 1):
        if number == target:
            return presumed
        presumed = int(line.split()[1]) if line.startswith("#line ") else presumed + 1
    raise AssertionError(part)


def test_device_source_keeps_device_code_on_its_lines(mixed):
    d = cj.device_source(mixed)
    assert d.path == str(mixed)
    assert d.files[0] == str(mixed) and d.files[1].endswith("common.cuh")
    for part in ("__global__ void scale_add", "const int kRepeat = 3;", "__constant__ float kScale",
                 "#define BLOCK 128"):
        assert presumed_line(d.text, part) == line_of(MIXED, part), part
    for part in ("int main", "scale_add_cpu", "void launch", "cudaMalloc", "d_scratch",
                 "cublasHandle_t handle", "host_only_helper", "#include <cublas_v2.h>",
                 "helper_cuda_missing.h"):
        assert part not in d.text, part
    notes = "\n".join(d.notes)
    assert "helper_cuda_missing.h" in notes and "not found" in notes
    assert "cublas_v2.h" in notes and "declares host functions" in notes


@pytest.mark.parametrize("how", ["path", "open", "stringio", "load", "load_str"])
def test_whole_file_kernels_compile(mixed, how):
    if how == "path":
        m = cj.jit(mixed)
    elif how == "open":
        with open(mixed) as f:
            m = cj.jit(f)
    elif how == "stringio":
        # Text without a file: its quoted includes are searched in the working directory.
        m = cj.jit(io.StringIO(MIXED.replace('#include "common.cuh"', COMMON)))
    elif how == "load":
        m = cj.load(mixed)
    else:
        m = cj.load(str(mixed))
    assert sorted(m.names) == ["fill", "scale_add"]
    m["scale_add"].compile(meta(), meta(), 2.0, 64, arch=ARCH)
    m["fill"].compile(meta(dtype=torch.float16), 1.0, 64, arch=ARCH)


def test_load_passes_jit_options(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* x) { x[0] = VALUE; }\nint main() { return 0; }\n")
    k = cj.load(path, defines={"VALUE": "2.0f"}, name="k")
    k.compile(meta(), arch=ARCH)
    with pytest.raises(TypeError, match="apply to CUDA source files"):
        cj.load(b"\x7fELF", "extern \"C\" __global__ void k(float* x)", defines={"A": 1})


def test_compile_errors_name_the_users_header_and_line(tmp_path):
    (tmp_path / "bad.cuh").write_text("\n\n__device__ float oops(float v) { return v + undeclared_name; }\n")
    path = tmp_path / "main.cu"
    path.write_text('#include "bad.cuh"\n__global__ void k(float* x) { x[0] = oops(1); }\n'
                    'int main() { return 0; }\n')
    k = cj.jit(path)
    with pytest.raises(cj.CompileError) as e:
        k.compile(meta(), arch=ARCH)
    assert "bad.cuh(3)" in str(e.value)


def test_a_str_is_source_text_and_a_missing_path_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"pathlib\.Path"):
        cj.jit("kernels.cu")
    with pytest.raises(ValueError, match="does not exist"):
        cj.jit(tmp_path / "absent.cu")
    with pytest.raises(TypeError, match="path object or an open file"):
        cj.jit(42)


def test_kernels_of_included_headers_are_found(tmp_path):
    # A string source is not a whole file: its headers hold device code only, as NVRTC needs.
    (tmp_path / "lib.cuh").write_text(COMMON.replace("inline void host_only_helper() { exit(1); }", ""))
    m = cj.jit('#include "lib.cuh"\n__global__ void own(float* x) { x[0] = twice(1); }\n',
               filename=str(tmp_path / "main.cu"))
    assert sorted(m.names) == ["fill", "own"]
    c = m["fill"].compile(meta(dtype=torch.float64), 1.0, 8, arch=ARCH)
    assert "float64" in c.signature


def test_host_platform_macros_and_system_typedefs():
    k = cj.jit(r"""
#if defined(__linux__) || defined(_WIN32) || defined(__APPLE__)
#else
#error "Unsupported system"
#endif
__global__ void k(float* x, uint n, ushort s, ulong l, u_char c) { x[0] = n + s + l + c; }""")
    k.compile(meta(), 1, 2, 3, 4, arch=ARCH)


@needs_cudadevrt
def test_device_runtime_is_linked_when_used():
    k = cj.jit(r"""
__global__ void child(float* x) { x[threadIdx.x] = 1; }
__global__ void parent(float* x) { child<<<1, 32>>>(x); }""", "parent")
    c = k.compile(meta(), arch=ARCH)
    # Relocatable code, linked with cudadevrt by nvJitLink into one CUBIN.
    assert "-rdc=true" in c.options and c.cubin[:4] == b"\x7fELF"
    g = cj.jit("__global__ void g(cudaGraphConditionalHandle h, const int* flag) "
               "{ cudaGraphSetConditional(h, *flag); }")
    g.compile(1, meta(dtype=torch.int32), arch=ARCH)


CURAND = CURAND_SOURCE


@needs_curand
@pytest.mark.parametrize("state,size", [("curandStateXORWOW_t", 48),
                                        ("curandStatePhilox4_32_10_t", 64),
                                        ("curandStateMRG32k3a_t", 48)])
def test_curand_states_as_template_arguments(state, size):
    init = cj.jit(CURAND, "init", template_args={"State": state})
    init.compile(meta(8 * size, torch.uint8), 1, 8, arch=ARCH)
    # Any tensor whose storage holds the structs: float32, 4 bytes each.
    init.compile(meta(8 * size // 4, torch.float32), 1, 8, arch=ARCH)
    with pytest.raises(ValueError, match=rf"points to `State` = `{state.rstrip('_t')}\w*` and "
                                         rf"needs .* a multiple of {size} bytes"):
        init.compile(meta(8 * size + 1, torch.uint8), 1, 8, arch=ARCH)


STRUCTS = r"""#include <cuda_fp16.h>
struct alignas(8) Pair { float x, y; };
struct Inner { short s; Pair v; };
struct Params { float a; int b; double c; unsigned short h; Inner in; unsigned char raw[3]; };
__global__ void k(Params p, float* out) { out[0] = p.a + p.b + p.c; }
namespace ns {
template <typename T> struct interval_gpu { T lo, hi; };
template <typename T> __global__ void width(interval_gpu<T> iv, T* out) { out[0] = iv.hi - iv.lo; }
}
"""


def expected_params_bytes(a, b, c, h, s, vx, vy, raw):
    buf = bytearray(48)
    struct.pack_into("<fid", buf, 0, a, b, c)
    struct.pack_into("<H", buf, 16, h)
    struct.pack_into("<h", buf, 24, s)
    struct.pack_into("<ff", buf, 32, vx, vy)
    buf[40:43] = bytes(raw)
    return bytes(buf)


@dataclasses.dataclass
class Inner:
    s: int
    v: tuple


def test_struct_arguments_pack_from_tuples_dicts_and_objects():
    k = cj.jit(STRUCTS, "k")
    want = expected_params_bytes(1.5, -2, 3.25, 5, 7, 1.0, 2.0, [1, 2, 3])
    values = (1.5, -2, 3.25, 5, (7, (1.0, 2.0)), [1, 2, 3])
    as_dict = {"a": 1.5, "b": -2, "c": 3.25, "h": 5, "in": {"s": 7, "v": {"x": 1.0, "y": 2.0}},
               "raw": [1, 2, 3]}
    Params = collections.namedtuple("Params", "a b c h inner raw")
    obj = type("P", (), {"a": 1.5, "b": -2, "c": 3.25, "h": 5, "in": Inner(7, (1.0, 2.0)),
                         "raw": torch.tensor([1, 2, 3])})()
    for value in (values, as_dict, Params(*values), obj, torch.frombuffer(bytearray(want), dtype=torch.uint8)):
        assert k._parts.structs.pack(0, value) == want
        k.compile(value, meta(), arch=ARCH)


@pytest.mark.parametrize("value,error,match", [
    ((1.0, 2), TypeError, r"'p' is a Params with 6 field\(s\) \(a, b, c, h, in, raw\); got a tuple of 2"),
    ({"a": 1.0}, TypeError, r"the dict given for it lacks b, c, h, in, raw"),
    ((1.0, 2**40, 3.0, 5, (1, (1, 2)), [1, 2, 3]), ValueError, r"'p\.b' is a int \(4 bytes\); 1099511627776 does not fit"),
    ((1.0, 2.5, 3.0, 5, (1, (1, 2)), [1, 2, 3]), TypeError, r"'p\.b' is a int; got float"),
    ((1.0, 2, 3.0, 5, (1, (1, 2)), [1, 2]), TypeError, r"'p\.raw' is an array of 3"),
    (torch.zeros(9, dtype=torch.uint8), ValueError, r"struct of 48 bytes \(Params\); got a uint8 tensor of 9 bytes"),
    (torch.zeros(48, dtype=torch.int16), TypeError, r"a 1-d uint8 CPU tensor"),
])
def test_struct_argument_errors_name_the_field(value, error, match):
    k = cj.jit(STRUCTS, "k")
    with pytest.raises(error, match=match):
        k.compile(value, meta(), arch=ARCH)


@pytest.mark.skipif(not has_header("crt/host_config.h"),
                    reason="the front end lays out __half with the CUDA toolkit's headers (NVIDIA's "
                           "wheels' declare it for NVRTC's built-ins)")
def test_struct_16_bit_float_fields():
    k = cj.jit("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
               "struct H { __half h; __nv_bfloat16 b; float f; };\n"
               "__global__ void k(H v, float* out) { out[0] = v.f; }")
    got = k._parts.structs.pack(0, (0.5, 1.5, 2.0))
    bf16 = torch.tensor(1.5, dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF
    assert got == struct.pack("<eHf", 0.5, bf16, 2.0)
    k.compile((0.5, 1.5, 2.0), meta(), arch=ARCH)


def test_struct_template_deduced_from_the_other_arguments():
    w = cj.jit(STRUCTS, "width")
    c = w.compile((1.0, 2.0), meta(dtype=torch.float64), arch=ARCH)
    assert "float64" in c.signature
    assert w._parts.structs.pack(0, (1, 2), (None, meta(dtype=torch.float32))) == struct.pack("<ff", 1, 2)
    given = cj.jit(STRUCTS.replace("T* out", "float* out"), "width", template_args={"T": "int"})
    given.compile((1, 2), meta(), arch=ARCH)
    alone = cj.jit(STRUCTS.replace("T* out", "float* out"), "width")
    with pytest.raises(ValueError, match="depends on the template parameter 'T'"):
        alone.compile((1, 2), meta(), arch=ARCH)


COMPLEX = COMPLEX_SOURCE


def test_other_libraries_complex_types_bind_complex_tensors_and_values():
    m = cj.jit(COMPLEX)
    m["t"].compile(meta(dtype=torch.complex128), meta(dtype=torch.complex128), 1 + 2j, 64, arch=ARCH)
    m["s"].compile(meta(dtype=torch.complex64), 1 - 1j, 64, arch=ARCH)


def test_device_source_is_kept_in_the_disk_cache(tmp_path, cache_dir):
    (tmp_path / "common.cuh").write_text(COMMON)
    path = tmp_path / "mixed.cu"
    path.write_text(MIXED)
    first = cj.device_source(path)
    parses = cj._C.frontend_parse_count()
    again = cj.device_source(path)
    assert again == first and cj._C.frontend_parse_count() == parses  # nothing read again
    # A header that changes, and a missing one that appears, make the file be read again.
    (tmp_path / "common.cuh").write_text(COMMON.replace("2.0f * v", "3.0f * v"))
    assert "3.0f * v" in cj.device_source(path).text
    (tmp_path / "helper_cuda_missing.h").write_text("#define checkCudaErrors(x) (x)\n")
    assert any(f.endswith("helper_cuda_missing.h") for f in cj.device_source(path).files)
    assert cj._C.frontend_parse_count() > parses


def test_a_damaged_device_source_record_is_refused_with_a_warning(tmp_path, cache_dir, capfd):
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* x) { x[0] = 1; }\nint main() { return 0; }\n")
    first = cj.device_source(path)
    for record in cache_dir.rglob("*.cjr"):
        data = bytearray(record.read_bytes())
        data[-3] ^= 0xFF
        record.write_bytes(bytes(data))
    parses = cj._C.frontend_parse_count()
    again = cj.device_source(path)
    assert again == first and cj._C.frontend_parse_count() > parses  # read again, not trusted
    assert re.search(r"ignoring '.*\.cjr': the file is corrupted", capfd.readouterr().err)
