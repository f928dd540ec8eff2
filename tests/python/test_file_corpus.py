"""Whole CUDA files, unedited, load and compile: no GPU needed.

``tests/corpus_files/llm.c/`` holds llm.c's kernel development files (``dev/cuda/*.cu`` and the
``common.h`` they include) at one pinned commit, byte for byte (``scripts/fetch_corpus.py`` wrote
them; ``MANIFEST.json`` has their SHA-256). Each is a program written for nvcc: host includes
(cuBLAS, OpenMP, MPI, NCCL), ``main``, ``cudaMalloc``, ``<<<>>>`` launch wrappers and CPU
references beside the kernels. ``torch_cudajit.load(path)`` keeps what nvcc's device pass
compiles; every kernel it lists must compile for sm_90 from meta tensors and Python numbers.

The example arguments come from each kernel's reflected parameters (``kernel.params``): a meta
tensor of the element's dtype for a pointer (``ELEMENT_DTYPES``; the files' ``floatX`` is
``__nv_bfloat16`` where the file defines ENABLE_BF16 before including common.h, else ``float``:
``BF16_FILES``), a Python number for a scalar. Template kernels whose parameters nothing
deduces, and dependent element types, take what the file's own launchers instantiate
(``TEMPLATES``). A kernel that does not compile is listed in ``KNOWN_FAILURES`` with the reason
(a strict xfail), never skipped. The run's counts (files, kernels, compiled) end pytest's
summary.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import pathlib
import re

import pytest
import torch

import torch_cudajit as cj
import _support

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "corpus_files" / "llm.c"
SOURCE_DIR = CORPUS / "dev" / "cuda"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
CU_FILES = sorted(SOURCE_DIR.glob("*.cu"))
ARCH = "sm_90"

#: Every kernel of each file, as nvcc's device pass compiles the file as it is (no -D options):
#: kernels in ``#ifdef ENABLE_CUDNN`` (attention_forward.cu) and ``#ifndef ENABLE_BF16``
#: (matmul_backward_bias.cu, which defines ENABLE_BF16) blocks are not there.
KERNELS = {
    "adamw": ["adamw_kernel1", "adamw_kernel2"],
    "attention_backward": [
        "permute_kernel", "permute_kernel_backward", "unpermute_kernel",
        "unpermute_kernel_backward",
        "softmax_forward_kernel5", "softmax_autoregressive_backward_kernel1",
        "softmax_autoregressive_backward_kernel2", "softmax_autoregressive_backward_kernel3",
        "softmax_autoregressive_backward_kernel4", "softmax_autoregressive_backward_kernel5",
        "softmax_autoregressive_backward_kernel6", "softmax_autoregressive_backward_kernel7",
        "softmax_autoregressive_backward_kernel8"],
    "attention_forward": [
        "attention_query_key_kernel1", "attention_softmax_kernel1", "softmax_forward_kernel4",
        "softmax_forward_kernel5", "attention_value_kernel1", "attention_forward_kernel2",
        "permute_kernel", "unpermute_kernel", "scale_kernel", "attention_forward_fused1",
        "softmax_forward_kernel5_lowp", "permute_kernel_lowp", "unpermute_kernel_lowp"],
    "classifier_fused": [
        "fused_classifier_kernel1", "fused_classifier_kernel2", "fused_classifier_kernel3",
        "fused_classifier_kernel4", "fused_classifier_kernel5"],
    "crossentropy_forward": ["crossentropy_forward_kernel1"],
    "crossentropy_softmax_backward": ["crossentropy_softmax_backward_kernel1"],
    "encoder_backward": ["encoder_backward_kernel1", "encoder_backward_kernel2"],
    "encoder_forward": ["encoder_forward_kernel1", "encoder_forward_kernel2",
                        "encoder_forward_kernel3"],
    "fused_residual_forward": [
        "residual_forward_kernel1", "layernorm_forward_kernel1", "fused_residual_forward2",
        "fused_residual_forward3", "fused_residual_forward_kernel4",
        "fused_residual_forward_kernel5", "fused_residual_forward_kernel6"],
    "gelu_backward": ["gelu_backward1", "gelu_backward2"],
    "gelu_forward": ["gelu_forward_kernel1", "gelu_forward_kernel2"],
    "global_norm": ["norm_kernel1", "norm_kernel2", "norm_kernel3", "norm_kernel4",
                    "global_norm_aggregate_kernel"],
    "layernorm_backward": [
        "layernorm_backward_kernel1", "layernorm_backward_kernel2", "copy_to_dweight_dbias",
        "layernorm_backward_kernel3", "layernorm_backward_kernel4", "layernorm_backward_kernel5",
        "layernorm_backward_kernel6", "layernorm_backward_kernel7", "layernorm_backward_kernel8",
        "layernorm_backward_kernel9", "layernorm_backward_kernel10"],
    "layernorm_forward": [
        "layernorm_forward_kernel1", "mean_kernel", "rstd_kernel", "normalization_kernel",
        "layernorm_forward_kernel3", "layernorm_forward_kernel4", "layernorm_forward_kernel5",
        "layernorm_forward_kernel6"],
    "matmul_backward": ["matmul_backward_bias_kernel_naive", "matmul_backward_bias_kernel_faster"],
    "matmul_backward_bias": [
        "matmul_backward_bias_kernel1", "matmul_backward_bias_kernel2",
        "matmul_backward_bias_kernel3", "matmul_backward_bias_kernel4", "cast_and_add_kernel",
        "matmul_backward_bias_kernel7", "matmul_backward_bias_kernel8",
        "matmul_backward_bias_kernel9", "reduce_add_sum_kernel"],
    "matmul_forward": ["matmul_forward_kernel1", "add_bias", "matmul_forward_kernel4"],
    "nccl_all_reduce": ["set_vector"],
    "permute": ["permute_kernel"],
    "residual_forward": ["residual_forward_kernel1", "residual_forward_kernel2"],
    "softmax_forward": [
        "softmax_forward_kernel1", "softmax_forward_kernel2", "softmax_forward_kernel3",
        "softmax_forward_kernel4", "softmax_forward_online_kernel1",
        "softmax_forward_online_kernel2", "softmax_forward_kernel7",
        "softmax_forward_online_kernel8"],
    "trimat_forward": ["permute_kernel", "trimul_global"],
}

#: Files that ``#define ENABLE_BF16`` before ``#include "common.h"``: their floatX is bfloat16
#: (common.h: ``typedef __nv_bfloat16 floatX``); the others' is float.
BF16_FILES = frozenset({
    "attention_forward", "encoder_forward", "fused_residual_forward", "gelu_backward",
    "gelu_forward", "global_norm", "layernorm_backward", "matmul_backward_bias",
    "residual_forward"})


def floatx(stem: str) -> torch.dtype:
    return torch.bfloat16 if stem in BF16_FILES else torch.float32


#: Pointee (element) C++ type -> the dtype of the tensor passed for it. Vector types take their
#: lane dtype. ``floatX``/``floatN`` depend on the file (``floatx``).
ELEMENT_DTYPES = {
    "float": torch.float32, "double": torch.float64,
    "half": torch.float16, "__half": torch.float16,
    "__nv_bfloat16": torch.bfloat16, "nv_bfloat16": torch.bfloat16,
    "int": torch.int32, "unsigned int": torch.uint32, "long": torch.int64,
    "long long": torch.int64, "int64_t": torch.int64, "size_t": torch.uint64,
    "char": torch.int8, "signed char": torch.int8, "unsigned char": torch.uint8,
    "uint8_t": torch.uint8, "bool": torch.bool,
    "float2": torch.float32, "float4": torch.float32, "int4": torch.int32,
}
#: Scalar C++ types that take a Python float; other arithmetic scalars take a Python int.
FLOAT_SCALARS = frozenset({"float", "double", "half", "__half", "__nv_bfloat16", "floatX"})
INT_SCALARS = frozenset({"int", "unsigned int", "unsigned", "long", "long long", "size_t",
                         "int64_t", "unsigned long", "unsigned long long", "char", "bool"})
#: Elements of a meta tensor for a pointer: a whole number of 16-byte vectors in every dtype.
NUMEL = 16


@dataclasses.dataclass(frozen=True)
class Template:
    """How a template kernel is instantiated, as the file's own launchers do it."""

    #: passed to ``cj.load(path, name=..., template_args=...)``: parameters nothing deduces
    template_args: object = None
    #: dependent element type (a template parameter) -> the dtype of its tensors
    elements: dict = dataclasses.field(default_factory=dict)
    #: tag parameter (``std::bool_constant<B>``) name -> the Python bool passed
    tags: dict = dataclasses.field(default_factory=dict)


_LN_BACKWARD = Template(elements={"Tdinp": torch.bfloat16, "Tparams": torch.bfloat16,
                                  "Tdout": torch.bfloat16, "Trest": torch.bfloat16})

#: "file::kernel" -> its Template. Block sizes: the launchers dispatch over 32..1024; 256 is one.
TEMPLATES = {
    # launch_softmax_6/7/8: kernel<int_const.value> from dispatch_launch(block_size)
    "attention_backward::softmax_autoregressive_backward_kernel6": Template({"BlockSize": 256}),
    "attention_backward::softmax_autoregressive_backward_kernel7": Template({"BlockSize": 256}),
    "attention_backward::softmax_autoregressive_backward_kernel8": Template({"BlockSize": 256}),
    # fused_classifier5: fused_classifier_kernel5<true,false> (also the defaults)
    "classifier_fused::fused_classifier_kernel5": Template("true, false"),
    # global_norm<T>(float* out, const floatX* values, ...): T = floatX
    **{f"global_norm::norm_kernel{i}": Template(elements={"T": torch.bfloat16})
       for i in range(1, 5)},
    # layernorm_backward(kernel_num, floatX* dinp, floatX* dweight, ...): every T = floatX
    **{f"layernorm_backward::layernorm_backward_kernel{i}": _LN_BACKWARD for i in range(2, 7)},
    "layernorm_backward::copy_to_dweight_dbias": Template(elements={"Tparams": torch.bfloat16}),
    # matmul_backward_bias8/9: kernel(dbias (floatX*), ..., std::bool_constant<false>{})
    "matmul_backward_bias::matmul_backward_bias_kernel8": Template(
        elements={"OutFloat": torch.bfloat16}, tags={"arg5": False}),
    "matmul_backward_bias::matmul_backward_bias_kernel9": Template(
        elements={"OutFloat": torch.bfloat16}, tags={"arg5": False}),
    # trimul_launcher<matmul_tri_naive>: trimul_global<matmul_tri> takes a __device__ function
    "trimat_forward::trimul_global": Template("matmul_tri_naive"),
}

#: "file::kernel" -> why it does not compile. Each is a strict xfail: a fix makes it fail until
#: the entry is removed.
KNOWN_FAILURES: dict[str, str] = {}


def case_id(stem: str, kernel: str) -> str:
    return f"{stem}::{kernel}"


def compile_params():
    out = []
    for stem, kernels in KERNELS.items():
        for kernel in kernels:
            cid = case_id(stem, kernel)
            marks = ([pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[cid])]
                     if cid in KNOWN_FAILURES else [])
            out.append(pytest.param(stem, kernel, id=cid, marks=marks))
    return out


def source_path(stem: str) -> pathlib.Path:
    return SOURCE_DIR / f"{stem}.cu"


def kernels_of(loaded) -> dict:
    """name -> Kernel of what ``cj.load`` returned (a Kernel for a file with one kernel)."""
    if isinstance(loaded, cj.KernelModule):
        return {n: loaded[n] for n in loaded.names}
    return {loaded.name: loaded}


@functools.lru_cache(maxsize=None)
def load(stem: str):
    """``cj.load`` of one corpus file, once per test process (reading a file costs a Clang
    parse of it and its headers)."""
    return cj.load(str(source_path(stem)))


@functools.lru_cache(maxsize=None)
def kernel_for(stem: str, name: str):
    """The kernel to compile: from the file's module, or loaded alone with its template
    arguments where the file's launchers give them explicitly."""
    t = TEMPLATES.get(case_id(stem, name))
    if t is not None and t.template_args is not None:
        return cj.load(str(source_path(stem)), name=name, template_args=t.template_args)
    return kernels_of(load(stem))[name]


def _strip(cpp_type: str) -> str:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict)\b", " ", cpp_type)
    return " ".join(t.split())


def example_args(stem: str, kernel) -> list:
    """Meta tensors for pointer/array parameters, Python numbers for scalars, tags from
    TEMPLATES; raises for a parameter this table cannot give an example of (so that a new kind
    of parameter fails loudly)."""
    t = TEMPLATES.get(case_id(stem, kernel.name), Template())
    args = []
    for p in kernel.params:
        if p.kind in ("pointer", "array"):
            element = _strip(p.element)
            if element in ("floatX", "floatN"):
                dtype = floatx(stem)
            elif element in t.elements:
                dtype = t.elements[element]
            elif element in ELEMENT_DTYPES:
                dtype = ELEMENT_DTYPES[element]
            else:
                raise KeyError(f"{case_id(stem, kernel.name)}: no dtype for the element type "
                               f"{p.element!r} of parameter {p.name!r} ({p.type}); add it to "
                               f"ELEMENT_DTYPES or the kernel's Template")
            rank = int(p.rank) if p.kind == "array" and p.rank.isdigit() else 1
            shape = (NUMEL,) if rank == 1 else (4,) * rank
            args.append(torch.empty(shape, device="meta", dtype=dtype))
        elif p.kind == "scalar":
            scalar = _strip(p.type)
            if p.name in t.tags:
                args.append(t.tags[p.name])
            elif scalar in FLOAT_SCALARS:
                args.append(0.5)
            elif scalar in INT_SCALARS:
                args.append(8)
            else:
                raise KeyError(f"{case_id(stem, kernel.name)}: no example for the scalar "
                               f"parameter {p.name!r} of type {p.type!r}")
        else:
            raise KeyError(f"{case_id(stem, kernel.name)}: parameter {p.name!r} is of kind "
                           f"{p.kind!r}, which llm.c does not use")
    return args


# -- counts ---------------------------------------------------------------------------------------

_COUNTS = {"files": set(), "kernels": set(), "compiled": set(), "failed": set()}


def _record(key: str, value) -> None:
    _COUNTS[key].add(value)
    c = _COUNTS
    _support.SUMMARY["llm.c file corpus"] = (
        f"llm.c file corpus: {len(c['files'])}/{len(KERNELS)} files loaded, "
        f"{len(c['kernels'])} kernels listed, {len(c['compiled'])} compiled for {ARCH}, "
        f"{len(c['failed'])} did not compile ({len(KNOWN_FAILURES)} known failures)")


# -- the files are llm.c's, unedited --------------------------------------------------------------


def test_manifest_names_the_pinned_commit():
    assert MANIFEST["repository"] == "https://github.com/karpathy/llm.c"
    assert re.fullmatch(r"[0-9a-f]{40}", MANIFEST["commit"])
    assert MANIFEST["commit"].startswith("f1e2ace")


def test_manifest_lists_exactly_the_files():
    present = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    assert present - {"MANIFEST.json"} == set(MANIFEST["files"])
    assert "dev/cuda/common.h" in present and "LICENSE" in present


@pytest.mark.parametrize("relpath", sorted(MANIFEST["files"]))
def test_file_is_unedited(relpath):
    data = (CORPUS / relpath).read_bytes()
    entry = MANIFEST["files"][relpath]
    assert len(data) == entry["bytes"]
    assert hashlib.sha256(data).hexdigest() == entry["sha256"], (
        f"{relpath} differs from llm.c@{MANIFEST['commit'][:7]}: the corpus files stay unedited "
        f"(scripts/fetch_corpus.py writes them)")


# -- the tables agree with the files ---------------------------------------------------------------


def test_kernel_table_covers_every_file():
    assert sorted(KERNELS) == [p.stem for p in CU_FILES]
    assert len(CU_FILES) == 22


def test_floatx_table_matches_the_files():
    """BF16_FILES is what the files say: ``#define ENABLE_BF16`` ahead of common.h."""
    defines = {p.stem for p in CU_FILES
               if re.search(r"^#define ENABLE_BF16\b", p.read_text(encoding="utf-8"), re.M)}
    assert defines == BF16_FILES


def test_template_and_failure_tables_name_corpus_kernels():
    cases = {case_id(s, k) for s, ks in KERNELS.items() for k in ks}
    assert set(TEMPLATES) <= cases
    assert set(KNOWN_FAILURES) <= cases
    assert all(reason.strip() for reason in KNOWN_FAILURES.values())


# -- load and compile ------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", sorted(KERNELS))
def test_file_lists_its_kernels(stem):
    """``cj.load(path)`` on the unedited file lists the kernels nvcc's device pass compiles: a
    Kernel for a file with one, a KernelModule for several."""
    loaded = load(stem)
    expected = KERNELS[stem]
    if len(expected) == 1:
        assert isinstance(loaded, cj.Kernel), loaded
    else:
        assert isinstance(loaded, cj.KernelModule), loaded
    assert sorted(kernels_of(loaded)) == sorted(expected)
    _record("files", stem)
    for name in expected:
        _record("kernels", case_id(stem, name))


@pytest.mark.parametrize("stem, name", compile_params())
def test_kernel_compiles(stem, name):
    kernel = kernel_for(stem, name)
    assert kernel.name == name
    args = example_args(stem, kernel)
    try:
        compiled = kernel.compile(*args, arch=ARCH)
    except Exception:
        _record("failed", case_id(stem, name))
        raise
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.lowered_name.encode() in compiled.cubin
    _record("compiled", case_id(stem, name))
