"""Prebuilt device code (torch_cudajit.load): PTX, CUBIN and fatbin images with a declaration.
CPU tests make images with NVRTC (kernel.compile(..., arch=...)) and check format detection,
declarations, symbol lookup and error paths; GPU tests launch loaded kernels against torch."""
import os
import pickle
import subprocess

import pytest
import torch

import torch_cudajit as cj
from _support import blocks, poison_, random_values
from torch_cudajit._inspect import find_tool

ARCH = "sm_90"
SAXPY_C = r"""
extern "C" __global__ void saxpy(float* out, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
"""
SAXPY_C_DECL = 'extern "C" __global__ void saxpy(float* out, const float* x, float a, int n)'
SAXPY_CPP = SAXPY_C.replace('extern "C" ', "")
SAXPY_CPP_DECL = "__global__ void saxpy(float* out, const float* x, float a, int n)"


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def image_of(source, what, arch=ARCH):
    """The CUBIN or PTX NVRTC makes of a source's one kernel (float32 tensors, float, int)."""
    compiled = cj.jit(source).compile(meta(4), meta(4), 2.0, 4, arch=arch)
    return compiled.cubin if what == "cubin" else compiled.ptx.encode()


def fatbin_of(cubin: bytes, tmp_path, sm: int) -> bytes:
    tool = find_tool("fatbinary")
    # A wrapper left on PATH by a toolkit that is gone (the no-toolkit CI check) does not run.
    if tool is None or subprocess.run([tool, "--version"], capture_output=True).returncode != 0:
        pytest.skip("needs the CUDA toolkit's fatbinary tool")
    src, out = tmp_path / "k.cubin", tmp_path / "k.fatbin"
    src.write_bytes(cubin)
    subprocess.run([tool, "--64", f"--create={out}", f"--image3=kind=elf,sm={sm},file={src}"],
                   check=True, capture_output=True)
    return out.read_bytes()


# -- formats and symbols (no GPU) -----------------------------------------------------------------

@pytest.mark.parametrize("what, fmt", [("cubin", "CUBIN"), ("ptx", "PTX")])
def test_load_detects_the_format(what, fmt):
    k = cj.load(image_of(SAXPY_C, what), SAXPY_C_DECL)
    assert isinstance(k, cj.PrebuiltKernel)
    assert k.format == fmt
    assert k.lowered_name == "saxpy"
    assert [(p.name, p.kind, p.is_const) for p in k.params] == [
        ("out", "pointer", False), ("x", "pointer", True), ("a", "scalar", False), ("n", "scalar", False)]


def test_load_detects_a_fatbin(tmp_path):
    k = cj.load(fatbin_of(image_of(SAXPY_C, "cubin"), tmp_path, 90), SAXPY_C_DECL)
    assert k.format == "fatbin"


@pytest.mark.parametrize("what", ["cubin", "ptx"])
def test_load_finds_the_mangled_name_of_a_cpp_kernel(what):
    k = cj.load(image_of(SAXPY_CPP, what), SAXPY_CPP_DECL)
    assert k.lowered_name == "_Z5saxpyPfPKffi"


def test_load_from_a_path(tmp_path):
    path = tmp_path / "saxpy.cubin"
    path.write_bytes(image_of(SAXPY_C, "cubin"))
    assert cj.load(path, SAXPY_C_DECL).format == "CUBIN"
    assert cj.load(str(path), SAXPY_C_DECL).format == "CUBIN"


def test_loaded_kernel_specializes_without_compiling():
    k = cj.load(image_of(SAXPY_C, "cubin"), SAXPY_C_DECL)
    before = cj._C.nvrtc_compile_count()
    c = k.compile(meta(4), meta(4), 2.0, 4, arch=ARCH)
    assert cj._C.nvrtc_compile_count() == before
    assert c.lowered_name == "saxpy"
    assert c.signature == "(float32*, const float32*, float, int)"


def test_loaded_kernel_checks_arguments_like_jit():
    k = cj.load(image_of(SAXPY_C, "cubin"), SAXPY_C_DECL)
    with pytest.raises(TypeError, match=r"parameter 'x' \(const float\*\) of kernel 'saxpy' takes "
                                        r"float32 elements, got a tensor of dtype float16"):
        k.compile(meta(4), meta(4, torch.float16), 2.0, 4, arch=ARCH)
    with pytest.raises(TypeError, match=r"kernel 'saxpy' takes 4 argument\(s\) \(out, x, a, n\), got 3"):
        k.compile(meta(4), meta(4), 2.0, arch=ARCH)


def test_loaded_kernel_pickles():
    k = cj.load(image_of(SAXPY_CPP, "cubin"), SAXPY_CPP_DECL)
    k2 = pickle.loads(pickle.dumps(k))
    # The source is the declaration as the C++ statement that was read (';' added).
    assert (k2.name, k2.lowered_name, k2.format, k2.source) == ("saxpy", "_Z5saxpyPfPKffi", "CUBIN",
                                                                SAXPY_CPP_DECL.rstrip() + ";")


# -- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("image, match", [
    (b"", r"the image \(0 bytes\) is neither PTX"),
    (b"\x00asm\x01\x00\x00\x00", r"the image \(8 bytes, starting with 00 61 73 6d 01 00 00 00\) is "
                                 r"neither PTX \(text with \.version and \.target directives\), CUBIN"),
    (b"int main() { return 0; }", r"is neither PTX"),
    (b"\xb1\x43\x62\x46\x01\x00\x00\x00", r"0x466243b1, the magic of a __fatBinC_Wrapper_t"),
])
def test_load_refuses_other_formats(image, match):
    with pytest.raises(ValueError, match=match):
        cj.load(image, SAXPY_C_DECL)


@pytest.mark.parametrize("declaration, match", [
    ("template <typename T>\n__global__ void saxpy(T* out, const T* x, T a, int n)",
     r"prebuilt kernel 'saxpy' is declared as a template; .*declare the one instantiation"),
    ('extern "C" __global__ void saxpy(cj::Array<float, 1> out, const float* x, float a, int n)',
     r"prebuilt kernel 'saxpy' has the parameter 'out' \(cj::Array<float, 1>\) of kind array, which "
     r"needs the plugin's generated code"),
    ('struct P { float a; int n; };\nextern "C" __global__ void saxpy(float* out, const float* x, P p)',
     r"prebuilt kernel 'saxpy' has the parameter 'p' of type `P`, whose size and alignment only a "
     r"compiler knows"),
    ("__device__ float helper(float x);", r"declares no __global__ function"),
])
def test_load_refuses_declarations_it_cannot_launch(declaration, match):
    with pytest.raises(ValueError, match=match):
        cj.load(image_of(SAXPY_C, "cubin"), declaration)


def test_load_several_declared_kernels_need_a_name():
    decl = SAXPY_C_DECL + ";\n" + 'extern "C" __global__ void other(float* out)'
    with pytest.raises(ValueError, match=r"declares several kernels \(saxpy, other\); pass name="):
        cj.load(image_of(SAXPY_C, "cubin"), decl)
    assert cj.load(image_of(SAXPY_C, "cubin"), decl, name="saxpy").name == "saxpy"
    with pytest.raises(ValueError, match=r"no __global__ function named 'nope'"):
        cj.load(image_of(SAXPY_C, "cubin"), decl, name="nope")


def test_load_ambiguous_mangled_name():
    # A second function of the same name (an overload elsewhere in the image) makes the
    # mangled symbol ambiguous.
    ptx = image_of(SAXPY_CPP, "ptx") + b"\n// .globl _Z5saxpyPd\n"
    with pytest.raises(ValueError, match=r"several functions named 'saxpy' \(_Z5saxpyPd, "
                                         r"_Z5saxpyPfPKffi\); pass lowered_name="):
        cj.load(ptx, SAXPY_CPP_DECL)
    assert cj.load(ptx, SAXPY_CPP_DECL, lowered_name="_Z5saxpyPfPKffi").lowered_name == "_Z5saxpyPfPKffi"


@pytest.mark.parametrize("call, exc, match", [
    (lambda img: cj.load(12, SAXPY_C_DECL), TypeError, r"image must be a path \(str or os.PathLike\) or bytes, got int"),
    (lambda img: cj.load("/no/such/file.cubin", SAXPY_C_DECL), ValueError, r"no file '/no/such/file.cubin'"),
    (lambda img: cj.load(img, b"decl"), TypeError, r"declaration must be a str of CUDA C\+\+, got bytes"),
    (lambda img: cj.load(img, SAXPY_C_DECL, name=3), TypeError, r"name must be a non-empty str, got 3"),
    (lambda img: cj.load(img, SAXPY_C_DECL, lowered_name=""), TypeError, r"lowered_name must be a non-empty str, got ''"),
    (lambda img: cj.load(img, SAXPY_C_DECL, cooperative=1), TypeError, r"cooperative must be a bool, got int"),
])
def test_load_argument_checks(call, exc, match):
    with pytest.raises(exc, match=match):
        call(image_of(SAXPY_C, "cubin"))


def test_prebuilt_kernel_has_no_op_path():
    k = cj.load(image_of(SAXPY_C, "cubin"), SAXPY_C_DECL)
    with pytest.raises(TypeError, match=r"kernel 'saxpy' is prebuilt code .* no TorchScript object"):
        k.script_object
    with pytest.raises(TypeError, match=r"no cudajit::launch op"):
        k.op
    with pytest.raises(TypeError, match=r"nothing to precompile"):
        k.precompile([(meta(4), meta(4), 2.0, 4)], arch=ARCH)


# -- GPU: launches compared with torch -------------------------------------------------------------

def device_arch(device):
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def device_image(source, what, device, tmp_path=None):
    if what == "fatbin":
        cubin = image_of(source, "cubin", device_arch(device))
        major, minor = torch.cuda.get_device_capability(device)
        return fatbin_of(cubin, tmp_path, major * 10 + minor)
    return image_of(source, what, device_arch(device))


@pytest.mark.gpu
@pytest.mark.parametrize("what", ["cubin", "ptx", "fatbin"])
@pytest.mark.parametrize("source, decl", [(SAXPY_C, SAXPY_C_DECL), (SAXPY_CPP, SAXPY_CPP_DECL)],
                         ids=["extern-C", "C++"])
def test_loaded_kernel_launches(what, source, decl, device, tmp_path):
    k = cj.load(device_image(source, what, device, tmp_path), decl)
    n = 1000
    x = random_values((n,), torch.float32, device)
    out = poison_(torch.empty_like(x))
    k[blocks(n, 128), 128](out, x, 2.5, n)
    torch.testing.assert_close(out, 2.5 * x)
    out2 = poison_(torch.empty_like(x))
    k.forall(n)(out=out2, x=x, a=-1.0, n=n)  # keywords bind by the declared names
    torch.testing.assert_close(out2, -x)


@pytest.mark.gpu
def test_loaded_kernel_runs_on_the_current_stream(device):
    k = cj.load(device_image(SAXPY_C, "cubin", device), SAXPY_C_DECL)
    n = 1 << 20
    x = random_values((n,), torch.float32, device)
    out = poison_(torch.empty_like(x))
    s = torch.cuda.Stream(device)
    s.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(s):
        k[blocks(n, 256), 256](out, x, 3.0, n)
        result = out.clone()  # ordered after the kernel on the same stream
    s.synchronize()
    torch.testing.assert_close(result, 3.0 * x)


@pytest.mark.gpu
def test_loaded_kernel_refuses_bad_arguments(device):
    k = cj.load(device_image(SAXPY_C, "cubin", device), SAXPY_C_DECL)
    x = random_values((8,), torch.float32, device)
    with pytest.raises(TypeError, match=r"parameter 'x' \(const float\*\) of kernel 'saxpy' takes "
                                        r"float32 elements, got a tensor of dtype float64"):
        k[1, 8](x, x.double(), 1.0, 8)
    with pytest.raises(ValueError, match=r"parameter 'n' \(int\) of kernel 'saxpy' is int32 with range"):
        k[1, 8](x, x, 1.0, 1 << 40)


@pytest.mark.gpu
def test_declaration_that_does_not_match_the_image(device):
    k = cj.load(device_image(SAXPY_C, "cubin", device),
                'extern "C" __global__ void saxpy(float* out, const float* x, double a, int n)')
    x = random_values((8,), torch.float32, device)
    with pytest.raises(ValueError, match=r"the declaration of prebuilt kernel 'saxpy' does not match "
                                         r"the image: its parameters take \(8, 8, 8, 4\) bytes as "
                                         r"declared, but \(8, 8, 4, 4\) bytes in the image"):
        k[1, 8](x, x, 1.0, 8)


@pytest.mark.gpu
def test_lowered_name_missing_from_the_image(device):
    k = cj.load(device_image(SAXPY_C, "cubin", device), SAXPY_C_DECL, lowered_name="_Z5saxpyPf")
    x = random_values((8,), torch.float32, device)
    with pytest.raises(ValueError, match=r"the CUBIN image has no kernel named '_Z5saxpyPf'. Pass "
                                         r"lowered_name="):
        k[1, 8](x, x, 1.0, 8)
