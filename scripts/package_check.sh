#!/usr/bin/env bash
# Packaging check, run by .ci/run in a venv that has the torch to build against:
#   1. `python -m build --no-isolation` makes an sdist and a wheel;
#   2. each installs in a clean venv (with the same torch) and compiles a kernel there, from a
#      folder outside the source tree so that the installed package is the one imported;
#   3. examples/deploy builds on its own against the installed wheel, through
#      find_package(torch_cudajit) and torch_cudajit.cmake_prefix_path, with the newest CMake and
#      with CMake 3.25, the oldest an LTS distribution ships (Debian 12).
# Usage: scripts/package_check.sh WORKDIR           the whole check
#        scripts/package_check.sh --deploy WORKDIR  step 3 only, against the torch_cudajit
#                                                   already installed in the active venv
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
deploy_only=false
if [[ ${1:-} == --deploy ]]; then deploy_only=true; shift; fi
WORK=${1:?usage: package_check.sh [--deploy] WORKDIR}
mkdir -p "$WORK"
TORCH_VERSION=$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')
ts() { date +%s; }
export REPO

# deploy_build CMAKE DIR: examples/deploy configured and built on its own in DIR with CMAKE,
# against the torch and torch_cudajit installed in the active venv (imported from outside the
# source tree); the program must link the installed libtorch_cudajit.so.
deploy_build() {
  local cmake=$1 dir=$2 t0 found package prefix
  t0=$(ts)
  found=$(cd "$WORK" && python3 -c 'import os, torch, torch_cudajit as cj
assert not cj.__file__.startswith(os.environ["REPO"]), cj.__file__
print(os.path.dirname(cj.__file__))
print(torch.utils.cmake_prefix_path + ";" + cj.cmake_prefix_path)')
  package=${found%%$'\n'*}
  prefix=${found#*$'\n'}
  # The installed package's entry point: torch.compile finds backend="cudajit" with no import.
  (cd "$WORK" && python3 -c 'import sys, torch
from torch._dynamo.backends.registry import lookup_backend
fn = lookup_backend("cudajit")
assert fn.__module__ == "torch_cudajit.backend", fn
print("   torch.compile backend \"cudajit\" found through the entry point")') || exit 1
  echo "== examples/deploy against the installed package: torch $TORCH_VERSION, $("$cmake" --version | head -1)"
  rm -rf "$dir"
  "$cmake" -S "$REPO/examples/deploy" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DCMAKE_PREFIX_PATH="$prefix" > "$dir.log" 2>&1 &&
    "$cmake" --build "$dir" -j2 >> "$dir.log" 2>&1 ||
    { tail -40 "$dir.log"; exit 1; }
  local linked
  linked=$(ldd "$dir/torch_cudajit_deploy" | sed -n 's/^\s*libtorch_cudajit\.so[.0-9]* => \(\S*\).*/\1/p')
  [[ -n $linked && $(readlink -f "$linked") == $(readlink -f "$package/lib/libtorch_cudajit.so") ]] ||
    { echo "the deploy program links '$linked', not $package/lib/libtorch_cudajit.so"; exit 1; }
  echo "   built in $(( $(ts) - t0 )) s, linked to $linked"
}

# deploy_builds: deploy_build with the newest CMake from pip (README line 2 installs it) and with
# CMake 3.25.0: CMake learnt nvcc's C++20 flag in 3.25.2, Debian 12 ships 3.25.1, and torch 2.15
# asks for C++20 (torch_cudajitCxxStandard.cmake fills the gap).
deploy_builds() {
  python3 -m pip install -q cmake ninja
  local cmake325=$WORK/cmake-3.25/cmake/data/bin/cmake
  [[ -x $cmake325 ]] || python3 -m pip install -q --target "$WORK/cmake-3.25" "cmake==3.25.0"
  deploy_build "$(command -v cmake)" "$WORK/deploy-cmake-newest"
  deploy_build "$cmake325" "$WORK/deploy-cmake-3.25"
}
if $deploy_only; then
  deploy_builds
  exit 0
fi

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
    if [[ $kind == wheel ]]; then deploy_builds; fi
  )
  echo "   $kind: $(( $(ts) - t0 )) s"
done
echo "package check: OK"
