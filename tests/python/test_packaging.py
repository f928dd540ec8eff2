"""Packaging: one core library shared by the Python binding and C++ programs, its CMake package
config, one version everywhere, and a clear message when the package is imported from a source
tree that was never built. (CI also builds an sdist and a wheel and installs each in a clean venv:
scripts/package_check.sh.)"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import torch_cudajit as cj

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.dirname(os.path.abspath(cj.__file__))


def _read(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def test_one_version_everywhere():
    setup_version = re.search(r'^VERSION = "([^"]+)"', _read(REPO, "setup.py"), re.M).group(1)
    cmake_version = re.search(r"project\(torch_cudajit VERSION (\S+)", _read(REPO, "CMakeLists.txt")).group(1)
    config_version = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)',
                               _read(cj.cmake_prefix_path, "torch_cudajit",
                                     "torch_cudajitConfigVersion.cmake")).group(1)
    assert cj.__version__ == setup_version == cmake_version == config_version


def test_cmake_prefix_path_holds_the_package_config():
    config = os.path.join(cj.cmake_prefix_path, "torch_cudajit", "torch_cudajitConfig.cmake")
    assert os.path.isfile(config)
    text = _read(config)
    # The config points at the library and headers of this very package.
    assert "lib/libtorch_cudajit.so" in text and "/cxx" in text
    assert os.path.isfile(os.path.join(PACKAGE, "lib", "libtorch_cudajit.so"))
    assert os.path.isfile(os.path.join(PACKAGE, "cxx", "torch_cudajit", "kernel.h"))
    assert os.path.isfile(os.path.join(PACKAGE, "cxx", "torch_cudajit", "ops", "kernel_object.h"))
    # The C++ API headers never sit in NVRTC's folder, whose <cstdint> would shadow the host's.
    assert not os.path.exists(os.path.join(PACKAGE, "include", "kernel.h"))


def _loaded_objects():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if line.rstrip().endswith(".so") or ".so." in line}


def test_binding_links_the_one_core_library():
    loaded = [p for p in _loaded_objects() if "torch_cudajit" in os.path.basename(p)]
    assert loaded == [os.path.realpath(os.path.join(PACKAGE, "lib", "libtorch_cudajit.so"))], loaded
    # The binding itself holds no copy of the core: it needs the library by name.
    out = subprocess.run(["readelf", "-d", cj._C.__file__], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("readelf is not available")
    assert "[libtorch_cudajit.so]" in out.stdout
    # A function defined out of line in the core (csrc/program.cpp) is defined in the library
    # and only referenced by the binding.
    def defines(path):
        nm = subprocess.run(["nm", "-C", "-D", "--defined-only", path], capture_output=True, text=True)
        return "torch_cudajit::Program::compile(" in nm.stdout
    assert defines(loaded[0]) and not defines(cj._C.__file__)


def test_op_family_is_registered_once():
    import torch
    schemas = [s for s in torch._C._jit_get_all_schemas() if s.name == "cudajit::launch"]
    assert len(schemas) == 1, schemas


def test_import_from_an_unbuilt_tree_says_what_to_run(tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(PACKAGE, tree / "torch_cudajit",
                    ignore=shutil.ignore_patterns("*.so", "lib", "cxx", "__pycache__"))
    r = subprocess.run([sys.executable, "-c", "import torch_cudajit"], cwd=tree,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    assert r.returncode != 0
    assert "holds no compiled binding" in r.stderr
    assert "python setup.py build_ext --inplace" in r.stderr
    assert "partially initialized" not in r.stderr.splitlines()[-1]


def test_import_pulls_in_no_symbolic_shapes():
    """`import torch_cudajit` costs little beyond `import torch`: sympy (through torch's
    symbolic shapes, about a second) is loaded only once torch.compile traces."""
    code = ("import sys, torch\n"
            "before = {'sympy', 'torch.fx.experimental.symbolic_shapes'} & set(sys.modules)\n"
            "import torch_cudajit\n"
            "after = {'sympy', 'torch.fx.experimental.symbolic_shapes'} & set(sys.modules)\n"
            "print(sorted(after - before))\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(PACKAGE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _code_facts():
    spec = importlib.util.spec_from_file_location(
        "code_facts", os.path.join(REPO, "scripts", "code_facts.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_core_modules_include_no_cycle_and_classes_live_in_one_file(tmp_path):
    """Every module of the C++ core (a csrc/ header with its .cpp) builds on the ones it
    includes and never the other way, and no class has its methods in more than one .cpp:
    scripts/code_facts.py --check."""
    script = os.path.join(REPO, "scripts", "code_facts.py")
    out = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # The check itself finds a cycle through a .cpp (a.cpp -> b.h -> c.h -> a.h) and a class
    # split over two files.
    (tmp_path / "a.h").write_text('#include "b.h"\n#include <vector>\n')
    (tmp_path / "a.cpp").write_text('#include "a.h"\n#  include "c.h"\nvoid Thing::run() {}\n')
    (tmp_path / "b.cpp").write_text('int Thing::size() const { return 0; }\n')
    (tmp_path / "b.h").write_text("")
    (tmp_path / "c.h").write_text('#include "a.h"\n#include "d.h"\n')
    (tmp_path / "d.h").write_text("")
    facts = _code_facts()
    assert facts.cycles(facts.include_graph(str(tmp_path))) == [["a", "c", "a"]]
    assert facts.split_classes(str(tmp_path)) == {"Thing": ["a.cpp", "b.cpp"]}
    out = subprocess.run([sys.executable, script, "--check", str(tmp_path)], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "a -> c -> a" in out.stdout and "Thing (a.cpp, b.cpp)" in out.stdout


def test_program_includes_no_layer_built_on_it():
    """The NVRTC stage (csrc/program.*) builds on the reflection alone: the reading layer, the
    disk cache and forall's virtual grid build on it, never the other way."""
    pattern = _code_facts().INCLUDE
    above = {"cache.h", "cache_key.h", "compile_cache.h", "reading.h", "dependencies.h",
             "virtual_grid.h"}
    for name in ("program.h", "program.cpp"):
        included = {os.path.basename(i) for i in pattern.findall(_read(REPO, "csrc", name))}
        assert not included & above, (name, sorted(included & above))


def test_public_headers_are_the_api_and_what_it_includes():
    """csrc/public_headers.txt, the headers installed for LibTorch programs, is kernel.h,
    ops/kernel_object.h, job_store.h and device_pass.h with every csrc header they include:
    nothing they need is missing, and no internal header is installed."""
    listed = [line.strip() for line in _read(REPO, "csrc", "public_headers.txt").splitlines()
              if line.strip() and not line.startswith("#")]
    pattern = _code_facts().INCLUDE
    roots = ["kernel.h", "ops/kernel_object.h", "job_store.h", "device_pass.h"]
    reached, todo = set(), list(roots)
    while todo:
        header = todo.pop()
        if header in reached:
            continue
        reached.add(header)
        here = os.path.dirname(header)
        todo += [os.path.normpath(os.path.join(here, inc))
                 for inc in pattern.findall(_read(REPO, "csrc", header))]
    assert sorted(listed) == sorted(reached)
    assert listed[:len(roots)] == roots


def _digest_module():
    import runpy
    import types

    return types.SimpleNamespace(**runpy.run_path(os.path.join(REPO, "scripts", "build_digest.py")))


def _mini_checkout(root):
    """The files a build compiles, copied: setup.py, csrc/ and the device headers."""
    os.makedirs(root, exist_ok=True)
    shutil.copy(os.path.join(REPO, "setup.py"), root)
    shutil.copytree(os.path.join(REPO, "csrc"), os.path.join(root, "csrc"))
    shutil.copytree(os.path.join(REPO, "torch_cudajit", "include"), os.path.join(root, "torch_cudajit", "include"))


@pytest.mark.parametrize("edit", ["csrc/cache.cpp", "torch_cudajit/include/cj/cj.cuh", "setup.py", "csrc/new_file.h"])
def test_build_digest_follows_every_compiled_file(tmp_path, edit):
    digest = _digest_module()
    _mini_checkout(tmp_path)
    before = digest.source_digest(str(tmp_path))
    assert before == digest.source_digest(str(tmp_path))
    with open(tmp_path / edit, "a", encoding="utf-8") as f:
        f.write("\n// edited\n")
    assert digest.source_digest(str(tmp_path)) != before


def test_the_tests_reuse_an_installed_build_only_when_it_matches(tmp_path):
    """scripts/test.sh copies an installed build only when its digest is the checkout's."""
    _mini_checkout(tmp_path / "checkout")
    lib = tmp_path / "site" / "torch_cudajit" / "lib"
    lib.mkdir(parents=True)
    (tmp_path / "site" / "torch_cudajit" / "__init__.py").write_text("")
    (tmp_path / "checkout" / "scripts").mkdir()
    shutil.copy(os.path.join(REPO, "scripts", "build_digest.py"), tmp_path / "checkout" / "scripts")
    script = str(tmp_path / "checkout" / "scripts" / "build_digest.py")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))

    def installed(flag="--installed"):
        return subprocess.run([sys.executable, script, flag], env=env, cwd=str(tmp_path / "checkout"),
                              capture_output=True, text=True, check=True).stdout.strip()

    assert installed() == "" and installed("--reuse") == ""  # no digest file: not reused
    current = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
    (lib / "build_digest.txt").write_text(current + "\n")
    assert installed() == installed("--reuse") == str(lib)
    # The checkout's own current build comes first.
    (tmp_path / "checkout" / "torch_cudajit" / "lib").mkdir()
    (tmp_path / "checkout" / "torch_cudajit" / "lib" / "build_digest.txt").write_text(current + "\n")
    assert installed("--reuse") == "in-place"
    (tmp_path / "checkout" / "csrc" / "cache.cpp").write_text("// changed\n")
    assert installed() == ""


def test_library_file_found_checks_files_without_loading():
    from torch_cudajit._loader import _C

    assert isinstance(_C.library_file_found("nvrtc"), bool)
    with pytest.raises(RuntimeError, match="library_file_found: unknown library 'cublas'; expected 'nvrtc' or 'nvJitLink'"):
        _C.library_file_found("cublas")


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.pathfinder") is None,
                    reason="cuda-pathfinder is not installed")
def test_pathfinder_finds_nvrtc_and_its_headers():
    """Where the built-in search finds no NVRTC, the package asks cuda-pathfinder: its folders
    hold the library and the CUDA headers, and the core then considers both."""
    from torch_cudajit import _loader

    found = _loader._add_pathfinder_dirs("nvrtc")
    if found is None:
        pytest.skip("cuda-pathfinder finds no NVRTC here")
    include, libs = found
    assert os.path.isfile(os.path.join(include, "nvrtc.h"))
    assert any(name.startswith("libnvrtc.so") for lib in libs for name in os.listdir(lib))
    assert _loader._pathfinder_dirs("not-a-cuda-component") is None
