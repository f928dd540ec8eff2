#!/usr/bin/env python3
"""Writes the corpus of real, unedited CUDA files that tests/python/test_file_corpus*.py load whole.

The corpus is llm.c's kernel development files (``dev/cuda/*.cu`` and the ``dev/cuda/common.h``
they include) at one pinned commit, with llm.c's LICENSE, written byte for byte into
``tests/corpus_files/llm.c/`` with their relative layout kept (so ``#include "common.h"``
resolves), and ``tests/corpus_files/llm.c/MANIFEST.json``: the repository, the commit and the
SHA-256 of every file. The output is committed; CI does not run this script (the test checks the
committed files against the manifest).

    python3 scripts/fetch_corpus.py                      # download the commit's tarball from GitHub
    python3 scripts/fetch_corpus.py --from-git DIR       # read a local clone or mirror instead
    python3 scripts/fetch_corpus.py --check              # only verify the committed files

Every file of the selection is kept, including ``nccl_all_reduce.cu``, which includes NCCL's and
MPI's host headers: whole-file loading must drop host-only headers it cannot find.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request

REPOSITORY = "https://github.com/karpathy/llm.c"
#: karpathy/llm.c at "Merge pull request #801 from ngc92/ngc92/fix-test".
COMMIT = "f1e2ace651495b74ae22d45d1723443fd00ecd3a"
#: What is taken (fnmatch patterns on paths in the repository; "*" does not cross folders here
#: because every match is also required to sit directly in the pattern's folder).
PATTERNS = ("dev/cuda/*.cu", "dev/cuda/common.h", "LICENSE")

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEST = ROOT / "tests" / "corpus_files" / "llm.c"
MANIFEST = "MANIFEST.json"


def selected(path: str) -> bool:
    """Whether a repository path is one of the corpus files (a direct child of its pattern's
    folder)."""
    for pattern in PATTERNS:
        if fnmatch.fnmatchcase(path, pattern) and path.count("/") == pattern.count("/"):
            return True
    return False


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_git(git_dir: str, commit: str) -> dict[str, bytes]:
    """The selected files of `commit` in a local clone or (bare) mirror."""
    def git(*args) -> bytes:
        return subprocess.run(["git", "-C", git_dir, *args], check=True,
                              stdout=subprocess.PIPE).stdout

    full = git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    if full != commit:
        raise SystemExit(f"{git_dir}: {commit} resolves to {full}")
    files = {}
    # -z: paths exactly as stored; each line is "<mode> <type> <object>\t<path>".
    for entry in git("ls-tree", "-r", "-z", commit).split(b"\0"):
        if not entry:
            continue
        info, path = entry.decode().split("\t", 1)
        mode, kind, obj = info.split()
        if kind != "blob" or not selected(path):
            continue
        if mode not in ("100644", "100755"):
            raise SystemExit(f"{path}: not a regular file in the commit (mode {mode})")
        files[path] = git("cat-file", "blob", obj)
    return files


def from_tarball(commit: str) -> dict[str, bytes]:
    """The selected files of `commit` from GitHub's archive of it (one top folder,
    ``llm.c-<commit>/``)."""
    url = f"{REPOSITORY}/archive/{commit}.tar.gz"
    print(f"downloading {url}", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            top, sep, path = member.name.partition("/")
            if not sep or not selected(path):
                continue
            if top != f"llm.c-{commit}":
                raise SystemExit(f"unexpected folder {top!r} in {url}")
            if not member.isfile():
                raise SystemExit(f"{path}: not a regular file in {url}")
            files[path] = tar.extractfile(member).read()
    return files


def manifest_of(files: dict[str, bytes], commit: str) -> dict:
    return {
        "repository": REPOSITORY,
        "commit": commit,
        "selection": list(PATTERNS),
        "files": {path: {"sha256": sha256(data), "bytes": len(data)}
                  for path, data in sorted(files.items())},
    }


def write(files: dict[str, bytes], commit: str, dest: pathlib.Path) -> None:
    """Replaces `dest` with the files and their manifest (written next to each other first, then
    moved into place, so that an interrupted run leaves the old corpus)."""
    missing = [p for p in PATTERNS if "*" not in p and p not in files]
    if missing or not any(p.endswith(".cu") for p in files):
        raise SystemExit(f"the commit lacks corpus files: {missing or PATTERNS[0]}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".fetch_corpus.", dir=dest.parent))
    try:
        for path, data in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        text = json.dumps(manifest_of(files, commit), indent=2) + "\n"
        (staging / MANIFEST).write_text(text, encoding="utf-8")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def check(dest: pathlib.Path) -> list[str]:
    """Differences between the files under `dest` and its manifest (empty when they agree)."""
    manifest = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    problems = []
    listed = set(manifest["files"])
    present = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} - {MANIFEST}
    for path in sorted(present - listed):
        problems.append(f"{path}: not in {MANIFEST}")
    for path in sorted(listed):
        if path not in present:
            problems.append(f"{path}: missing")
        elif sha256((dest / path).read_bytes()) != manifest["files"][path]["sha256"]:
            problems.append(f"{path}: SHA-256 differs from {MANIFEST} (the file was edited)")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-git", metavar="DIR",
                        help="a local clone or mirror of llm.c that has the commit")
    parser.add_argument("--commit", default=COMMIT, help=f"the full commit hash (default {COMMIT})")
    parser.add_argument("--dest", type=pathlib.Path, default=DEST, help=f"default {DEST}")
    parser.add_argument("--check", action="store_true",
                        help="only check the files under --dest against their manifest")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.dest)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    if len(args.commit) != 40:
        parser.error("--commit must be a full 40-hex hash (the archive and the manifest name it)")
    files = from_git(args.from_git, args.commit) if args.from_git else from_tarball(args.commit)
    write(files, args.commit, args.dest)
    problems = check(args.dest)
    if problems:
        raise SystemExit("\n".join(problems))
    print(f"wrote {len(files)} files of {REPOSITORY}@{args.commit[:7]} to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
