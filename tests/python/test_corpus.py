"""The corpus of real-world CUDA kernels (tests/corpus/*.cu) compiles unchanged: no GPU needed.

Each corpus file is CUDA C++ written the way nvcc users write it (C and C++ library includes,
M_PI or INFINITY without includes, std:: math and type traits, cub, cooperative_groups, kernels in
namespaces or next to preprocessor-disabled ones, macro and typedef'd parameter types). Its first
line names the kernel and the example arguments to compile it for:

    // cj-corpus: name=<kernel> args=<arg>,<arg>,... [tmpl=<template arguments>] [<flag> ...]

Fields are separated by spaces; a field without ``=`` is a flag. The grammar of ``args``:

* ``f32[N]``, ``f16[N]``, ``bf16[N]``, ``f64[N]``, ``i32[N]``, ``i64[N]``, ``u8[N]`` (and
  ``i8``, ``i16``, ``bool``, ``c64``, ``c128``): a meta tensor of that dtype; ``[RxC]`` (dimensions
  joined by ``x``) gives a multi-dimensional one, ``[]`` a 0-d one.
* a bare ``i32`` or ``i64``: the Python int 3; a bare ``f32`` or ``f64``: the Python float 0.5.

``tmpl`` is passed to ``torch_cudajit.jit`` as ``template_args`` (for template parameters that the
arguments do not deduce, such as a block size).

Every corpus kernel is also launched on the GPU against a torch reference: test_corpus_gpu.py has
one case per file, and a CPU test there fails for a file without one. There is therefore no
``compile-only`` flag any more, and no flag is defined now (``KNOWN_FLAGS`` is empty); the flag
grammar stays for future use, and an unknown flag is an error.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest
import torch

import torch_cudajit as tcj

CORPUS_DIR = pathlib.Path(__file__).resolve().parent.parent / "corpus"
CORPUS_FILES = sorted(CORPUS_DIR.glob("*.cu"))

HEADER_PREFIX = "// cj-corpus:"

TENSOR_DTYPES = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "bool": torch.bool,
    "c64": torch.complex64,
    "c128": torch.complex128,
}
SCALARS = {"i32": 3, "i64": 3, "f32": 0.5, "f64": 0.5}
KNOWN_FIELDS = {"name", "args", "tmpl"}
KNOWN_FLAGS: frozenset = frozenset()  # none defined now (see the module docstring)

_TENSOR_ARG = re.compile(r"^([a-z0-9]+)\[([0-9x]*)\]$")


@dataclasses.dataclass
class CorpusEntry:
    name: str
    args: list = dataclasses.field(default_factory=list)
    tmpl: str | None = None
    flags: set = dataclasses.field(default_factory=set)


def parse_arg(text: str):
    """One entry of ``args=``: a meta tensor or a Python number (see the module docstring)."""
    m = _TENSOR_ARG.match(text)
    if m:
        dtype, dims = m.groups()
        if dtype not in TENSOR_DTYPES:
            raise ValueError(f"unknown tensor dtype {dtype!r} in {text!r}")
        shape = () if dims == "" else tuple(int(d) for d in dims.split("x"))
        return torch.empty(shape, device="meta", dtype=TENSOR_DTYPES[dtype])
    if text in SCALARS:
        return SCALARS[text]
    raise ValueError(f"cannot parse corpus argument {text!r}")


def parse_header(line: str) -> CorpusEntry:
    """The CorpusEntry of a ``// cj-corpus:`` line."""
    if not line.startswith(HEADER_PREFIX):
        raise ValueError(f"the first line must start with {HEADER_PREFIX!r}, got {line!r}")
    fields, flags = {}, set()
    for token in line[len(HEADER_PREFIX):].split():
        key, eq, value = token.partition("=")
        if not eq:
            if token not in KNOWN_FLAGS:
                raise ValueError(f"unknown corpus flag {token!r}")
            flags.add(token)
        elif key not in KNOWN_FIELDS:
            raise ValueError(f"unknown corpus field {key!r}")
        elif key in fields:
            raise ValueError(f"corpus field {key!r} given twice")
        else:
            fields[key] = value
    if not fields.get("name"):
        raise ValueError(f"the corpus line names no kernel (name=...): {line!r}")
    args = [parse_arg(a) for a in fields["args"].split(",")] if fields.get("args") else []
    return CorpusEntry(name=fields["name"], args=args, tmpl=fields.get("tmpl"), flags=flags)


def read_entry(path: pathlib.Path) -> CorpusEntry:
    with open(path, encoding="utf-8") as f:
        return parse_header(f.readline().rstrip("\n"))


# -- the header grammar ---------------------------------------------------------------------------


def test_parse_header_tensors_and_scalars():
    e = parse_header("// cj-corpus: name=softmax args=f32[64],bf16[4x8],u8[],i32,f64,c64[2] tmpl=256")
    assert e.name == "softmax" and e.tmpl == "256" and e.flags == set()
    out, x, byte, n, alpha, z = e.args
    assert (out.device.type, out.dtype, tuple(out.shape)) == ("meta", torch.float32, (64,))
    assert (x.dtype, tuple(x.shape)) == (torch.bfloat16, (4, 8))
    assert (byte.dtype, tuple(byte.shape)) == (torch.uint8, ())
    assert n == 3 and isinstance(n, int) and alpha == 0.5
    assert (z.dtype, tuple(z.shape)) == (torch.complex64, (2,))


def test_parse_header_flags(monkeypatch):
    """The flag grammar works for flags that are defined (none is now)."""
    monkeypatch.setitem(globals(), "KNOWN_FLAGS", frozenset({"slow", "sm90-only"}))
    e = parse_header("// cj-corpus: name=k slow args=f32[4] sm90-only")
    assert e.flags == {"slow", "sm90-only"} and len(e.args) == 1


def test_parse_header_without_args():
    assert parse_header("// cj-corpus: name=k").args == []


@pytest.mark.parametrize("line, match", [
    pytest.param("// kernel", "must start with", id="no-header"),
    pytest.param("// cj-corpus: args=f32[4]", "names no kernel", id="no-name"),
    pytest.param("// cj-corpus: name=k args=f8[4]", "unknown tensor dtype", id="bad-dtype"),
    pytest.param("// cj-corpus: name=k args=f32[4],u32", "cannot parse", id="bad-scalar"),
    pytest.param("// cj-corpus: name=k grid=4", "unknown corpus field", id="bad-field"),
    pytest.param("// cj-corpus: name=k launch-only", "unknown corpus flag", id="bad-flag"),
    pytest.param("// cj-corpus: name=k compile-only", "unknown corpus flag 'compile-only'",
                 id="compile-only-is-gone"),
    pytest.param("// cj-corpus: name=k name=j", "given twice", id="twice"),
])
def test_parse_header_rejects(line, match):
    with pytest.raises(ValueError, match=match):
        parse_header(line)


# -- the corpus ------------------------------------------------------------------------------------


def test_corpus_is_there():
    assert len(CORPUS_FILES) >= 25, f"expected the corpus in {CORPUS_DIR}"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_kernel_compiles(path, arch):
    entry = read_entry(path)
    k = tcj.jit(path.read_text(encoding="utf-8"), name=entry.name, filename=path.name,
                template_args=entry.tmpl)
    assert k.name == entry.name
    c = k.compile(*entry.args, arch=arch)
    assert isinstance(c.cubin, bytes) and len(c.cubin) > 0
    assert c.cubin[:4] == b"\x7fELF"
    assert c.lowered_name.encode() in c.cubin  # the kernel's symbol is in the CUBIN
