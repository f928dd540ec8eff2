"""Mutation fuzz of what torch_cudajit reads back from outside the process: a kernel's state
string (pickles, scripted modules) and the reflection records of the disk cache. Whatever a
mutation does, reading it gives a clear error (ValueError or TypeError that names
torch_cudajit) or the very parameter table of the original; a changed table is never accepted.
Runs without a GPU."""
from __future__ import annotations

import hashlib
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import torch_cudajit as cj

SOURCE = ("__global__ void k(const float* x, float* y, int n, cj::Array<const double, 2> a, "
          "cj::Array<float, 1> out) {}\n")


def table(definition):
    """The parameter table: what binding reads of each parameter."""
    return [(p["name"], p["type"], p["kind"], p["is_const"], p["role"], p["element"], p["rank"])
            for p in definition.params]


STATE = cj.jit(SOURCE)._definition.state
TABLE = table(cj._C.KernelDefinition.from_state(STATE))


def mutate(data, blob: bytes, start: int = 0) -> bytes:
    """One random byte replaced, inserted or deleted at or after `start`."""
    b = bytearray(blob)
    op = data.draw(st.sampled_from(["replace", "insert", "delete", "flip"]), label="op")
    i = data.draw(st.integers(start, len(b) - 1), label="at")
    if op == "replace":
        b[i] = data.draw(st.integers(0, 255), label="byte")
    elif op == "insert":
        b.insert(i, data.draw(st.integers(0, 255), label="byte"))
    elif op == "delete":
        del b[i]
    else:
        b[i] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    return bytes(b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_state_is_refused_or_unchanged(data):
    mutated = mutate(data, STATE)
    try:
        definition = cj._C.KernelDefinition.from_state(mutated)
    except (ValueError, TypeError) as e:
        assert "torch_cudajit" in str(e)
        return
    assert table(definition) == TABLE


def fields(blob: bytes) -> list:
    """The "<length>:<bytes>" fields of a state string."""
    out, pos = [], 0
    while pos < len(blob):
        colon = blob.index(b":", pos)
        n = int(blob[pos:colon])
        out.append(blob[colon + 1:colon + 1 + n])
        pos = colon + 1 + n
    return out


@pytest.mark.parametrize("count", [b"x", b"-1", b"18446744073709551616", b"50000000"])
def test_state_with_a_bad_count_is_a_clear_error(count):
    f = fields(STATE)
    assert f[2] == b"k"  # format, source, name, then the number of options
    f[3] = count
    mutated = b"".join(str(len(x)).encode() + b":" + x for x in f)
    with pytest.raises(ValueError, match=r"a pickled cudajit.Kernel is damaged at byte \d+ "
                                         r"\((a number holds|it counts 50000000 items)"):
        cj._C.KernelDefinition.from_state(mutated)


# -- reflection records of the disk cache -----------------------------------------------------

MAGIC_HEADER = 8 + 4 + 4 + 8 + 32  # magic, version, reserved, length, SHA-256 of the payload


def rewrap(container: bytes, payload: bytes) -> bytes:
    """A cache file holding `payload`, with a valid length and checksum."""
    return (container[:16] + len(payload).to_bytes(8, "little") +
            hashlib.sha256(payload).digest() + payload)


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-cache")
    before = cj.cache.settings()
    cj.cache.configure(dir=folder, enabled=True)
    try:
        cj.jit(SOURCE)
        (path,) = folder.glob("*.cjr")
        yield path, path.read_bytes()
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"],
                           max_bytes=before["max_bytes"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_reflection_record_is_refused_or_unchanged(record, data):
    path, original = record
    payload = mutate(data, original[MAGIC_HEADER:])
    before = cj.cache.settings()
    cj.cache.configure(dir=path.parent, enabled=True)
    try:
        path.write_bytes(rewrap(original, payload))  # damage that the file checksum misses
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel = cj.jit(SOURCE)
        assert table(kernel._definition) == TABLE
    finally:
        cj.cache.configure(dir=before["dir"], enabled=before["enabled"],
                           max_bytes=before["max_bytes"])
