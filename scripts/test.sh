#!/usr/bin/env bash
# The whole test suite: the Python tests (pytest) and the C++ tests (CMake + GoogleTest + ctest),
# both against one build of the core. GPU tests are skipped on machines without a GPU.
# The build is, in order of preference: the checkout's own in-place build when it is current; the
# installed package's, when it was built from these sources against this torch (README line 1);
# else a new in-place build. scripts/build_digest.py decides "built from these sources".
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${MAX_JOBS:-2}
# ccache, when installed, keeps unchanged translation units from compiling again (its compiler
# links shadow c++/g++ on PATH; torch's extension build and CMake both pick them up).
if [[ -d /usr/lib/ccache ]]; then export PATH=/usr/lib/ccache:$PATH; fi
LOGS=$PWD/build/logs
mkdir -p "$LOGS"
REUSE=$(python3 scripts/build_digest.py --reuse)
if [[ $REUSE == in-place ]]; then
  echo "== the in-place build is current"
elif [[ -n $REUSE ]]; then
  INSTALLED=$REUSE
  echo "== using the installed build ($INSTALLED): it was built from these sources"
  PACKAGE=$(dirname "$INSTALLED")
  rm -rf torch_cudajit/lib torch_cudajit/cxx torch_cudajit/_C*.so
  cp -r "$INSTALLED" torch_cudajit/lib
  cp -r "$PACKAGE/cxx" torch_cudajit/cxx
  cp "$PACKAGE"/_C*.so torch_cudajit/
else
  echo "== building the Python extension in place"
  MAX_JOBS=$JOBS python3 setup.py build_ext --inplace > "$LOGS/build.log" 2>&1 || { tail -50 "$LOGS/build.log"; exit 1; }
fi
echo "== Python tests"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest tests/python -q -p no:cacheprovider
echo "== C++ tests"
# The build folder lives in the checkout: a CMake cache is tied to one source folder, and a
# shared /tmp folder from another clone makes cmake refuse to configure.
BUILD=${TORCH_CUDAJIT_BUILD_DIR:-$PWD/build/cmake-tests}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
# The tests link the library above (TORCH_CUDAJIT_LIBRARY): CMake compiles only the tests.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DTORCH_CUDAJIT_LIBRARY="$PWD/torch_cudajit/lib/libtorch_cudajit.so" > "$LOGS/cmake.log" 2>&1 || { tail -50 "$LOGS/cmake.log"; exit 1; }
ninja -C "$BUILD" -j"$JOBS" >> "$LOGS/cmake.log" 2>&1 || { tail -50 "$LOGS/cmake.log"; exit 1; }
# The C++ tests have no Python to find the `libclang` wheel's library: name it.
TORCH_CUDAJIT_LIBCLANG=${TORCH_CUDAJIT_LIBCLANG:-$(python3 -c 'import torch_cudajit._loader as l; print(l._libclang_path() or "")')}
export TORCH_CUDAJIT_LIBCLANG
(cd "$BUILD" && ctest --output-on-failure)
