#!/usr/bin/env bash
# Packaging check, run by .ci/run in a venv that has the torch to build against:
#   1. `python -m build --no-isolation` makes an sdist and a wheel;
#   2. each installs in a clean venv (with the same torch) and compiles a kernel there, from a
#      folder outside the source tree so that the installed package is the one imported;
#   3. examples/deploy builds on its own against the installed wheel, through
#      find_package(torch_cudajit) and torch_cudajit.cmake_prefix_path.
# Usage: scripts/package_check.sh WORKDIR
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=${1:?usage: package_check.sh WORKDIR}
mkdir -p "$WORK"
TORCH_VERSION=$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')
ts() { date +%s; }

python3 -m pip install -q build
echo "== python -m build --no-isolation (torch $TORCH_VERSION)"
t0=$(ts)
rm -rf "$WORK/dist"
MAX_JOBS=${MAX_JOBS:-2} python3 -m build --no-isolation --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 ||
  { tail -40 "$WORK/build.log"; exit 1; }
ls "$WORK/dist"
echo "   built in $(( $(ts) - t0 )) s"
wheel=$(ls "$WORK"/dist/*.whl)
sdist=$(ls "$WORK"/dist/*.tar.gz)
# The wheel holds one core library, its C++ headers and CMake config, and the device headers.
python3 - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["torch_cudajit/lib/libtorch_cudajit.so", "torch_cudajit/cxx/torch_cudajit/kernel.h",
        "torch_cudajit/cxx/torch_cudajit/ops/kernel_object.h", "torch_cudajit/include/cj/cj.cuh",
        "torch_cudajit/share/cmake/torch_cudajit/torch_cudajitConfig.cmake"]
missing = [n for n in need if n not in names]
cores = [n for n in names if n.endswith(".so") and "torch_cudajit" in n.rsplit("/", 1)[-1]]
assert not missing, f"wheel lacks {missing}"
assert cores == ["torch_cudajit/lib/libtorch_cudajit.so"], f"expected one core library, found {cores}"
print("wheel contents: OK")
PY

smoke() {  # compiles a kernel with the installed package, outside the source tree
  (cd "$WORK" && python3 - <<'PY'
import os, torch, torch_cudajit as cj
assert not cj.__file__.startswith(os.environ["REPO"]), cj.__file__
k = cj.jit("template <typename T> __global__ void k(T* o, const T* x, int n) "
           "{ int i = threadIdx.x; if (i < n) o[i] = x[i] + x[i]; }")
m = torch.empty(8, device="meta", dtype=torch.float16)
c = k.compile(m, m, 8, arch="sm_90")
assert c.cubin and "k" in c.lowered_name, c.lowered_name
print("installed", cj.__version__, "from", os.path.dirname(cj.__file__), "compiles:", c.signature)
PY
  )
}
export REPO

for kind in wheel sdist; do
  echo "== install the $kind in a clean venv"
  t0=$(ts)
  python3 -m venv "$WORK/venv-$kind"
  (
    source "$WORK/venv-$kind/bin/activate"
    python3 -m pip install -q "torch==$TORCH_VERSION" wheel setuptools
    if [[ $kind == wheel ]]; then
      python3 -m pip install -q "$wheel"
    else
      MAX_JOBS=${MAX_JOBS:-2} python3 -m pip install -q --no-build-isolation "$sdist"
    fi
    smoke
    if [[ $kind == wheel ]]; then
      echo "== examples/deploy against the installed wheel (find_package(torch_cudajit))"
      python3 -m pip install -q cmake ninja
      prefix="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)');$(cd "$WORK" && python3 -c 'import torch_cudajit;print(torch_cudajit.cmake_prefix_path)')"
      cmake -S "$REPO/examples/deploy" -B "$WORK/deploy-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_PREFIX_PATH="$prefix" > "$WORK/deploy.log" 2>&1 &&
        cmake --build "$WORK/deploy-build" -j2 >> "$WORK/deploy.log" 2>&1 ||
        { tail -40 "$WORK/deploy.log"; exit 1; }
      grep -E "torch_cudajit|Found Torch" "$WORK/deploy.log" | head -3 || true
      ldd "$WORK/deploy-build/torch_cudajit_deploy" | grep torch_cudajit
      ldd "$WORK/deploy-build/torch_cudajit_deploy" | grep -q "$WORK/venv-wheel/.*/torch_cudajit/lib/libtorch_cudajit.so" ||
        { echo "the deploy program does not link the wheel's library"; exit 1; }
      echo "deploy program built against the wheel: $WORK/deploy-build/torch_cudajit_deploy"
    fi
  )
  echo "   $kind: $(( $(ts) - t0 )) s"
done
echo "package check: OK"
