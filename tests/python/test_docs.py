"""The documentation stays honest: the MkDocs nav and docs/ agree, every relative link of the
README and of docs/ resolves, the README keeps its set-up block (which .ci/run executes) and its
length, every `cj.X` / `torch_cudajit.X` the pages name exists, and the README's Python blocks
run (scripts/walkthrough.py). CPU only; no GPU needed."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, "docs")
README = os.path.join(REPO, "README.md")
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*```.*?^\s*```[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# cj.X or torch_cudajit.X, not part of a longer name or a path (cj/cj.cuh, libtorch_cudajit.so).
API_NAME = re.compile(r"(?<![\w./])(cj|torch_cudajit)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def pages() -> list:
    return sorted(glob.glob(os.path.join(DOCS, "*.md")))


def documents() -> list:
    return [README] + pages()


def nav_pages() -> list:
    """The .md files listed under mkdocs.yml's `nav:` (read without a YAML parser, which the
    test environment need not have)."""
    text = read(os.path.join(REPO, "mkdocs.yml"))
    match = re.search(r"^nav:\s*\n((?:[ \t]+.*\n?|\s*\n)*)", text, re.M)
    assert match, "mkdocs.yml has no nav: section"
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", match.group(1), re.M)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where links live."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def code(text: str) -> str:
    """Fenced code blocks and inline code spans, joined."""
    return "\n".join(FENCE.findall(text) + INLINE_CODE.findall(FENCE.sub("", text)))


def relative_links(path: str) -> list:
    out = []
    for target in LINK.findall(prose(read(path))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor of the same page
        out.append(target.split("#", 1)[0])
    return out


def test_nav_lists_every_page_and_only_existing_ones():
    listed = nav_pages()
    assert listed, "mkdocs.yml's nav lists no pages"
    assert "docs_dir: docs" in read(os.path.join(REPO, "mkdocs.yml"))
    missing = [p for p in listed if not os.path.isfile(os.path.join(DOCS, p))]
    assert not missing, f"mkdocs.yml's nav names pages that docs/ lacks: {missing}"
    unlisted = [os.path.basename(p) for p in pages() if os.path.basename(p) not in listed]
    assert not unlisted, f"docs/ pages missing from mkdocs.yml's nav: {unlisted}"


@pytest.mark.parametrize("path", documents(), ids=lambda p: os.path.relpath(p, REPO))
def test_relative_links_resolve(path):
    broken = []
    for target in relative_links(path):
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if not os.path.exists(resolved):
            broken.append(target)
        elif path != README and not resolved.startswith(DOCS + os.sep):
            # MkDocs (strict) rejects links out of docs_dir: name such files in backticks.
            broken.append(f"{target} (outside docs/)")
    assert not broken, f"{os.path.relpath(path, REPO)}: links that do not resolve: {broken}"


def test_readme_is_short_and_keeps_the_set_up_block():
    text = read(README)
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move detail to docs/")
    start = lines.index("```bash")
    end = lines.index("```", start + 1)
    block = lines[start + 1:end]
    assert len(block) == 2, f"README's first ```bash block must hold the two set-up lines, got {block}"
    install, test = block
    assert install.startswith("python3 -m pip install torch") and "--no-build-isolation ." in install
    assert install.endswith("python3 examples/quickstart.py")
    assert test.startswith("python3 -m pip install pytest") and test.endswith("bash scripts/test.sh")
    # .ci/run reads lines 2 and 3 of the README's ```bash blocks as sed prints them.
    sed_view = []
    inside = False
    for line in lines:
        if line == "```bash":
            inside = True
        if inside:
            sed_view.append(line)
        if inside and line == "```" and len(sed_view) > 1:
            inside = False
    assert sed_view[1:3] == block


@pytest.mark.parametrize("path", documents(), ids=lambda p: os.path.relpath(p, REPO))
def test_named_api_exists(path):
    torch_cudajit = pytest.importorskip("torch_cudajit")
    missing = []
    for root, chain in API_NAME.findall(code(read(path))):
        obj = torch_cudajit
        for name in chain.split("."):
            if not hasattr(obj, name):
                missing.append(f"{root}.{chain}")
                break
            obj = getattr(obj, name)
            if not isinstance(obj, types.ModuleType):
                break  # attributes of classes and functions are not checked
    assert not missing, f"{os.path.relpath(path, REPO)} names what torch_cudajit lacks: {sorted(set(missing))}"


def test_walkthrough_finds_the_blocks():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import walkthrough
    finally:
        sys.path.pop(0)
    blocks = walkthrough.python_blocks(read(README))
    assert blocks, "README.md has no ```python block"
    assert any(not b.needs_gpu for b in blocks), "README.md needs a Python block that runs without a GPU"
    text = "```python\na = 1\n```\n<!-- walkthrough: gpu -->\n```python\nb = 2\n```\n"
    assert [(b.line, b.code, b.needs_gpu) for b in walkthrough.python_blocks(text)] == [
        (1, "a = 1\n", False), (5, "b = 2\n", True)]


def test_readme_walkthrough_runs():
    pytest.importorskip("torch_cudajit")
    result = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "walkthrough.py")],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
