"""Ahead-of-time kernel caches: cache archives (export, import, every refusal) and read-only
cache folders layered under the writable one. Everything compiles to CUBIN for sm_90, so no GPU
is needed."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torch_cudajit as cj
from _support import ACCUMULATE, REPO, SCALE

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def records(folder):
    """Record files of a folder, by name: their bytes and modification times."""
    if not folder.exists():
        return {}
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def scale_args(dtype):
    x = torch.empty(8, dtype=dtype, device="meta")
    return x, x, 2.0


def fill(cache_dir):
    """A cache of SCALE alone (float32, float64) and in a batch (float16, bfloat16), and of
    ACCUMULATE (float32)."""
    k = cj.jit(SCALE)
    for d in DTYPES[:2]:
        k.compile(*scale_args(d), arch="sm_90")
    k.precompile([scale_args(d) for d in DTYPES[2:]], arch="sm_90", workers=1, progress=False)
    x = torch.empty(8, device="meta")
    cj.jit(ACCUMULATE).compile(x, x, 2.0, 8, arch="sm_90")
    assert sorted(p.suffix for p in cache_dir.iterdir() if p.suffix.startswith(".cj")) == (
        [".cj"] * 6 + [".cjm"] * 2 + [".cjr"] * 2)


def run_python(code, env):
    full = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full.pop("TORCH_CUDAJIT_CACHE_READONLY_DIRS", None)
    full.update({k: str(v) for k, v in env.items()})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=300)


def cli(*args, env):
    return run_python("import sys, runpy; sys.argv = ['torch_cudajit'] + %r\n"
                      "runpy.run_module('torch_cudajit', run_name='__main__')" % list(args), env)


# A fresh process compiles SCALE in four dtypes and ACCUMULATE: NVRTC compiles and front-end
# parses it needed, and the disk cache's hits and misses.
PROBE = f"""
import json, torch, torch_cudajit as cj
C = cj._C
compiles, parses = C.nvrtc_compile_count(), C.frontend_parse_count()
k = cj.jit({SCALE!r})
for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    x = torch.empty(8, dtype=d, device="meta")
    k.compile(x, x, 2.0, arch="sm_90")
x = torch.empty(8, device="meta")
cj.jit({ACCUMULATE!r}).compile(x, x, 2.0, 8, arch="sm_90")
print(json.dumps(dict(cj.cache.stats(), compiles=C.nvrtc_compile_count() - compiles,
                      parses=C.frontend_parse_count() - parses)))
"""


def probe(env):
    r = run_python(PROBE, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


# --- export and import --------------------------------------------------------------------------


def test_export_then_import_in_a_fresh_process_hits_without_compiling(cache_dir, tmp_path):
    fill(cache_dir)
    archive = tmp_path / "kernels.cjar"
    r = cli("cache", "export", str(archive), env={"TORCH_CUDAJIT_CACHE_DIR": cache_dir})
    assert r.returncode == 0, r.stderr
    assert "exported 6 entries, 2 reflection records and 2 manifests" in r.stdout
    assert "kernels: accumulate, scale" in r.stdout
    empty = tmp_path / "empty"
    r = cli("cache", "import", str(archive), env={"TORCH_CUDAJIT_CACHE_DIR": empty})
    assert r.returncode == 0, r.stderr
    assert f"into {empty}" in r.stdout
    assert {n: b for n, (b, _) in records(empty).items()} == {
        n: b for n, (b, _) in records(cache_dir).items() if ".cj" in n}
    assert stat.S_IMODE(empty.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in empty.iterdir()} == {0o600}
    stats, err = probe({"TORCH_CUDAJIT_CACHE_DIR": empty})
    assert stats == dict(hits=5, misses=0, compiles=0, parses=0), err


def test_export_of_named_kernels(cache_dir, tmp_path):
    fill(cache_dir)
    archive = tmp_path / "accumulate.cjar"
    summary = cj.cache.export_archive(archive, kernels=["accumulate"])
    assert summary == dict(path=str(archive), entries=1, reflections=1, manifests=1,
                           bytes=archive.stat().st_size, kernels=["accumulate"])
    # Naming scale brings its batch record along with the references into it.
    summary = cj.cache.export_archive(tmp_path / "scale.cjar", kernels=["scale"])
    assert (summary["entries"], summary["reflections"], summary["manifests"]) == (5, 1, 1)
    target = tmp_path / "target"
    assert cj.cache.import_archive(archive, dir=target)["kernels"] == ["accumulate"]
    stats, err = probe({"TORCH_CUDAJIT_CACHE_DIR": target})
    assert stats == dict(hits=1, misses=4, compiles=4, parses=1), err


def test_export_refuses_a_kernel_no_entry_holds(cache_dir, tmp_path):
    fill(cache_dir)
    with pytest.raises(ValueError, match=r"no compiled entry holds a kernel named 'nope' in the "
                       r"cache folder '.*' \(the entries hold: accumulate, scale\)\. Compile it "
                       r"first"):
        cj.cache.export_archive(tmp_path / "x.cjar", kernels=["scale", "nope"])
    assert not (tmp_path / "x.cjar").exists()
    r = cli("cache", "export", str(tmp_path / "x.cjar"), "--kernel", "nope",
            env={"TORCH_CUDAJIT_CACHE_DIR": cache_dir})
    assert r.returncode == 1 and "error: torch_cudajit: cannot export" in r.stderr


def test_export_of_an_empty_cache_is_refused(cache_dir, tmp_path):
    with pytest.raises(ValueError, match=r"there are no records in the cache folder '.*'\. "
                       r"Compile the kernels first"):
        cj.cache.export_archive(tmp_path / "x.cjar")


def test_export_to_an_unwritable_path(cache_dir, tmp_path):
    fill(cache_dir)
    with pytest.raises(ValueError, match=r"cannot write the cache archive '.*/missing/x.cjar' "
                       r"\(No such file or directory\)\. Choose a path"):
        cj.cache.export_archive(tmp_path / "missing" / "x.cjar")


def test_api_rejects_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="kernels must be a list of kernel names, got 'scale'"):
        cj.cache.export_archive(tmp_path / "x", kernels="scale")
    with pytest.raises(TypeError, match="path must be a path, got int"):
        cj.cache.export_archive(3)
    with pytest.raises(TypeError, match="dir must be a path, got int"):
        cj.cache.import_archive(tmp_path / "x", dir=3)
    with pytest.raises(TypeError, match="readonly_dirs must be a list of paths, got '/x'"):
        cj.cache.configure(readonly_dirs="/x")
    with pytest.raises(TypeError, match="writable must be a bool, got str"):
        cj.cache.configure(writable="no")


# An archive built by hand, as cache_archive.h describes the format, so that the tests can make
# archives whose checksum is right and whose members are not.
def put_str(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def build_archive(members, tag=b"torch_cudajit cache archive", version=1):
    """members: (name, kind, sha256 hex or None for the right one, bytes)."""
    payload = put_str(tag) + struct.pack("<Q", len(members))
    for name, kind, digest, data in members:
        digest = digest or hashlib.sha256(data).hexdigest()
        payload += put_str(name.encode()) + put_str(kind.encode()) + put_str(digest.encode())
        payload += put_str(data)
    return (b"TCJARCHV" + struct.pack("<IIQ", version, 0, len(payload)) +
            hashlib.sha256(payload).digest() + payload)


def frame(payload: bytes) -> bytes:
    return b"TCJCACHE" + struct.pack("<IIQ", 1, 0, len(payload)) + hashlib.sha256(payload).digest() + payload


def test_hand_built_archive_matches_the_format(cache_dir, tmp_path):
    fill(cache_dir)
    entry = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cj")
    (tmp_path / "hand.cjar").write_bytes(build_archive([(entry.name, "entry", None, entry.read_bytes())]))
    summary = cj.cache.import_archive(tmp_path / "hand.cjar", dir=tmp_path / "t")
    assert summary["entries"] == 1 and list(records(tmp_path / "t")) == [entry.name]


def damaged_archives(cache_dir):
    """(id, archive bytes, message) for every way an archive is refused."""
    fill(cache_dir)
    good = cj.cache.export_archive(cache_dir.parent / "good.cjar")["path"]
    data = open(good, "rb").read()
    entry = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cj")
    other = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cj" and p != entry)
    manifest = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cjm")
    body = entry.read_bytes()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    inner = bytearray(body)
    inner[-5] ^= 0xFF
    return [
        ("flipped byte", bytes(flipped), r"'\S+' is corrupted \(its checksum does not match\)"),
        ("truncated", data[: len(data) // 2], r"'\S+' is truncated; nothing was imported"),
        ("not an archive", body, r"is truncated or not a torch_cudajit cache archive"),
        ("other version", build_archive([], version=7),
         r"has another cache format version; nothing was imported"),
        ("other tag", build_archive([], tag=b"something else"), "does not start with the archive tag"),
        ("parent folder", build_archive([("../x", "entry", None, body)]),
         r"has a member 1 \('\.\./x'\) whose name is not a cache record's \(64 lowercase hex "
         r"digits, then \.cj, \.cjr or \.cjm\)"),
        ("absolute path", build_archive([("/tmp/" + entry.name, "entry", None, body)]),
         r"member 1 \('/tmp/[0-9a-f]{64}\.cj'\) whose name is not a cache record's"),
        ("subfolder", build_archive([("a/" + entry.name, "entry", None, body)]),
         r"member 1 \('a/[0-9a-f]{64}\.cj'\) whose name is not a cache record's"),
        ("upper case", build_archive([(entry.name.upper(), "entry", None, body)]),
         r"whose name is not a cache record's"),
        ("twice", build_archive([(entry.name, "entry", None, body)] * 2),
         r"holds member 2 \('[0-9a-f]{64}\.cj'\) twice"),
        ("kind", build_archive([(entry.name, "manifest", None, body)]),
         r"lists member 1 \('[0-9a-f]{64}\.cj'\) as kind 'manifest', but its name makes it an "
         r"entry"),
        ("digest", build_archive([(entry.name, "entry", "0" * 64, body)]),
         r"member 1 \('[0-9a-f]{64}\.cj'\) whose bytes do not match their SHA-256"),
        ("damaged member", build_archive([(entry.name, "entry", None, bytes(inner))]),
         r"member 1 \('[0-9a-f]{64}\.cj'\) that is corrupted \(its checksum does not match\)"),
        ("truncated member", build_archive([(entry.name, "entry", None, body[:100])]),
         r"member 1 \('[0-9a-f]{64}\.cj'\) that is truncated"),
        ("other key", build_archive([(entry.name, "entry", None, other.read_bytes())]),
         r"does not hold a compiled kernel or a batch reference stored under its key"),
        ("not a reflection", build_archive([(entry.name[:-3] + ".cjr", "reflection", None, body)]),
         r"that is not a reflection record of its key"),
        ("not a manifest", build_archive([(entry.name[:-3] + ".cjm", "manifest", None, body)]),
         r"that is not a manifest of its key"),
        ("manifest of another key", build_archive([(entry.name[:-3] + ".cjm", "manifest", None,
                                                    manifest.read_bytes())]),
         r"that is not a manifest of its key"),
        ("garbage member", build_archive([(entry.name, "entry", None, frame(b"junk"))]),
         r"does not hold a compiled kernel or a batch reference"),
    ]


def test_import_refuses_every_damaged_archive(cache_dir, tmp_path):
    cases = damaged_archives(cache_dir)
    for name, data, message in cases:
        bad = tmp_path / (name.replace(" ", "_") + ".cjar")
        bad.write_bytes(data)
        target = tmp_path / ("target_" + name.replace(" ", "_"))
        with pytest.raises(ValueError, match=message) as e:
            cj.cache.import_archive(bad, dir=target)
        assert str(bad) in str(e.value) and "nothing was imported" in str(e.value), name
        assert not target.exists(), name


def test_import_refuses_a_member_list_that_does_not_end(cache_dir, tmp_path):
    fill(cache_dir)
    entry = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cj")
    data = build_archive([(entry.name, "entry", None, entry.read_bytes())])
    payload = data[56:] + b"extra"  # bytes after the last member, checksum made right
    bad = tmp_path / "extra.cjar"
    bad.write_bytes(b"TCJARCHV" + struct.pack("<IIQ", 1, 0, len(payload)) +
                    hashlib.sha256(payload).digest() + payload)
    with pytest.raises(ValueError, match=r"has a damaged member list \(at byte \d+ of its payload\)"):
        cj.cache.import_archive(bad, dir=tmp_path / "t")


def test_cli_import_of_a_damaged_archive(cache_dir, tmp_path):
    fill(cache_dir)
    entry = next(p for p in sorted(cache_dir.iterdir()) if p.suffix == ".cj")
    bad = tmp_path / "bad.cjar"
    bad.write_bytes(build_archive([("../x", "entry", None, entry.read_bytes())]))
    target = tmp_path / "target"
    r = cli("cache", "import", str(bad), env={"TORCH_CUDAJIT_CACHE_DIR": target})
    assert r.returncode == 1
    assert f"error: torch_cudajit: the cache archive '{bad}' has a member 1 ('../x') whose name" in r.stderr
    assert not target.exists() and not (tmp_path / "x").exists()


def test_import_of_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read the cache archive '.*/none.cjar' \(No such "
                       r"file or directory\)\. Check the path"):
        cj.cache.import_archive(tmp_path / "none.cjar", dir=tmp_path / "t")


def test_import_refuses_a_folder_others_can_write(cache_dir, tmp_path):
    fill(cache_dir)
    archive = cj.cache.export_archive(tmp_path / "a.cjar")["path"]
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(ValueError, match=r"the cache folder '.*/shared' can be written by other "
                       r"users \(mode 0777\).*Import into a folder of your own"):
        cj.cache.import_archive(archive, dir=shared)
    assert list(shared.iterdir()) == []


def test_import_without_a_writable_folder_needs_dir(cache_dir, tmp_path):
    fill(cache_dir)
    archive = cj.cache.export_archive(tmp_path / "a.cjar")["path"]
    r = cli("cache", "import", archive, env={"TORCH_CUDAJIT_CACHE_DIR": tmp_path / "c",
                                             "TORCH_CUDAJIT_CACHE": "readonly"})
    assert r.returncode == 1
    assert "there is no writable cache folder (TORCH_CUDAJIT_CACHE=readonly). Name the folder" in r.stderr
    r = cli("cache", "import", archive, "--dir", str(tmp_path / "d"),
            env={"TORCH_CUDAJIT_CACHE_DIR": tmp_path / "c", "TORCH_CUDAJIT_CACHE": "readonly"})
    assert r.returncode == 0, r.stderr
    assert len(records(tmp_path / "d")) == 10 and not (tmp_path / "c").exists()


# --- read-only folders --------------------------------------------------------------------------


@pytest.fixture
def image_folder(cache_dir, tmp_path):
    """A read-only folder as an image would ship it: imported at build time, then files 0444 in
    a 0555 folder. The writable cache folder is emptied."""
    fill(cache_dir)
    archive = cj.cache.export_archive(tmp_path / "image.cjar")["path"]
    folder = tmp_path / "image"
    cj.cache.import_archive(archive, dir=folder)
    for p in folder.iterdir():
        os.chmod(p, 0o444)
    os.chmod(folder, 0o555)
    cj.cache.clear()
    yield folder
    os.chmod(folder, 0o755)


def test_readonly_folder_hits_and_writes_nothing(image_folder, tmp_path):
    before = records(image_folder)
    writable = tmp_path / "mine"
    stats, err = probe({"TORCH_CUDAJIT_CACHE_DIR": writable,
                        "TORCH_CUDAJIT_CACHE_READONLY_DIRS": f"{tmp_path / 'missing'}:{image_folder}"})
    assert stats == dict(hits=5, misses=0, compiles=0, parses=0), err
    assert "read-only cache folder" in err and "cannot be read (No such file or directory)" in err
    assert records(image_folder) == before  # no new file, no lock, no modification time
    assert records(writable) == {}


def test_readonly_folder_without_a_writable_folder(image_folder, tmp_path):
    writable = tmp_path / "never"
    env = {"TORCH_CUDAJIT_CACHE_DIR": writable, "TORCH_CUDAJIT_CACHE": "readonly",
           "TORCH_CUDAJIT_CACHE_READONLY_DIRS": image_folder}
    stats, err = probe(env)
    assert stats == dict(hits=5, misses=0, compiles=0, parses=0), err
    assert "Warning" not in err, err
    # A kernel the image lacks compiles, and nothing is written anywhere.
    before = records(image_folder)
    r = run_python("import torch, torch_cudajit as cj\n"
                   "k = cj.jit('__global__ void fresh(float* p) { p[0] = 1; }')\n"
                   "k.compile(torch.empty(1, device='meta'), arch='sm_90')\n"
                   "print(cj.cache.stats()['misses'], cj._C.nvrtc_compile_count())", env)
    assert r.returncode == 0 and r.stdout.split() == ["1", "1"], r.stderr
    assert not writable.exists() and records(image_folder) == before
    info = cli("cache", "info", env=env).stdout
    assert "usable:    no (TORCH_CUDAJIT_CACHE=readonly)" in info
    assert f"read-only: {image_folder} (usable; 6 entries" in info
    info = cli("info", env=env).stdout
    assert f"{writable} (not used (TORCH_CUDAJIT_CACHE=readonly))" in info
    assert f"read-only:     {image_folder} (usable)" in info


def test_damaged_readonly_record_compiles_into_the_writable_folder(image_folder, cache_dir):
    # The smaller of the compiled records (references are small; the batch holds two kernels).
    entry = sorted((p for p in image_folder.iterdir() if p.suffix == ".cj" and p.stat().st_size > 1000),
                   key=lambda p: p.stat().st_size)[0]
    os.chmod(image_folder, 0o755)
    os.chmod(entry, 0o644)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    os.chmod(entry, 0o444)
    os.chmod(image_folder, 0o555)
    before = records(image_folder)
    cj.cache.configure(readonly_dirs=[image_folder])
    with pytest.warns(UserWarning, match=r"ignoring '.*\.cj': the file is corrupted \(its checksum "
                      r"does not match\)\. It cannot be replaced in a read-only cache folder"):
        k = cj.jit(SCALE)
        for d in DTYPES:
            k.compile(*scale_args(d), arch="sm_90")
    assert (k.cache_hits, k.cache_misses) == (3, 1)
    assert records(image_folder) == before
    assert entry.name in records(cache_dir)  # compiled into the writable folder
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = cj.jit(SCALE)
        for d in DTYPES:
            k.compile(*scale_args(d), arch="sm_90")
    assert (k.cache_hits, k.cache_misses) == (4, 0)


def test_readonly_records_refused_by_the_trust_rule(image_folder, cache_dir):
    entries = [p for p in image_folder.iterdir() if p.suffix == ".cj"]
    for p in entries:
        os.chmod(p, 0o666)
    cj.cache.configure(readonly_dirs=[image_folder])
    with pytest.warns(UserWarning, match=r"with mode 0666; read-only cache folders and their files "
                      r"must be owned by this user \(uid \d+\) or by root, and writable by neither "
                      r"group nor others"):
        k = cj.jit(SCALE)
        for d in DTYPES:
            k.compile(*scale_args(d), arch="sm_90")
    assert (k.cache_hits, k.cache_misses) == (0, 4)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_readonly_file_of_another_user_is_refused(image_folder, cache_dir):
    for p in image_folder.iterdir():
        os.chown(p, 4242, -1)
    cj.cache.configure(readonly_dirs=[image_folder])
    with pytest.warns(UserWarning, match=r"owned by uid 4242 with mode 0444; read-only cache folders"):
        k = cj.jit(SCALE)
        for d in DTYPES:
            k.compile(*scale_args(d), arch="sm_90")
    assert (k.cache_hits, k.cache_misses) == (0, 4)


def test_readonly_folder_others_can_write_is_not_used(image_folder, cache_dir):
    os.chmod(image_folder, 0o777)
    cj.cache.configure(readonly_dirs=[image_folder])
    with pytest.warns(UserWarning, match=r"the read-only cache folder '.*' is owned by uid \d+ with "
                      r"mode 0777; it is not used \(read-only cache folders and their files must"):
        k = cj.jit(SCALE)
        k.compile(*scale_args(torch.float32), arch="sm_90")
    assert (k.cache_hits, k.cache_misses) == (0, 1)
    assert "mode 0777" in cj.cache.info()["readonly"][0]["problem"]


def test_clear_and_prune_leave_readonly_folders_alone(image_folder, cache_dir):
    os.chmod(image_folder, 0o755)  # even where they could delete
    before = records(image_folder)
    cj.cache.configure(readonly_dirs=[image_folder])
    k = cj.jit(SCALE)
    k.compile(*scale_args(torch.float32), arch="sm_90")
    assert k.cache_hits == 1
    cj.cache.prune(0)
    cj.cache.clear()
    assert records(image_folder) == before
    info = cj.cache.info()
    assert info["readonly"] == [dict(dir=str(image_folder), entries=6,
                                     bytes=sum(len(b) for b, _ in before.values()), problem="")]


def test_readonly_folders_are_exported_too(image_folder, cache_dir, tmp_path):
    cj.cache.configure(readonly_dirs=[image_folder])
    summary = cj.cache.export_archive(tmp_path / "again.cjar")
    assert (summary["entries"], summary["reflections"], summary["manifests"]) == (6, 2, 2)


def test_environment_and_settings(tmp_path):
    code = "import json, torch_cudajit as cj; print(json.dumps(cj.cache.settings()))"
    r = run_python(code, {"TORCH_CUDAJIT_CACHE_DIR": tmp_path / "c",
                          "TORCH_CUDAJIT_CACHE_READONLY_DIRS": f"/opt/a::/opt/b",
                          "TORCH_CUDAJIT_CACHE": "readonly"})
    s = json.loads(r.stdout)
    assert s["readonly_dirs"] == ["/opt/a", "/opt/b"] and s["writable"] is False and s["enabled"]
    before = cj.cache.settings()
    try:
        cj.cache.configure(readonly_dirs=[tmp_path / "x"], writable=False)
        assert cj.cache.settings()["readonly_dirs"] == [str(tmp_path / "x")]
        assert cj.cache.settings()["writable"] is False
    finally:
        cj.cache.configure(**before)
