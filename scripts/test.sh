#!/usr/bin/env bash
# The whole test suite: builds the extension in place, runs the Python tests (pytest) and the
# C++ tests (CMake + GoogleTest + ctest). GPU tests are skipped on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${MAX_JOBS:-2}
# ccache, when installed, keeps unchanged translation units from compiling again (its compiler
# links shadow c++/g++ on PATH; torch's extension build and CMake both pick them up).
if [[ -d /usr/lib/ccache ]]; then export PATH=/usr/lib/ccache:$PATH; fi
LOGS=$PWD/build/logs
mkdir -p "$LOGS"
echo "== building the Python extension"
MAX_JOBS=$JOBS python3 setup.py build_ext --inplace > "$LOGS/build.log" 2>&1 || { tail -50 "$LOGS/build.log"; exit 1; }
echo "== Python tests"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest tests/python -q -p no:cacheprovider
echo "== C++ tests"
# The build folder lives in the checkout: a CMake cache is tied to one source folder, and a
# shared /tmp folder from another clone makes cmake refuse to configure.
BUILD=${TORCH_CUDAJIT_BUILD_DIR:-$PWD/build/cmake-tests}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" > "$LOGS/cmake.log" 2>&1 || { tail -50 "$LOGS/cmake.log"; exit 1; }
ninja -C "$BUILD" -j"$JOBS" >> "$LOGS/cmake.log" 2>&1 || { tail -50 "$LOGS/cmake.log"; exit 1; }
# The C++ tests have no Python to find the `libclang` wheel's library: name it.
TORCH_CUDAJIT_LIBCLANG=${TORCH_CUDAJIT_LIBCLANG:-$(python3 -c 'import torch_cudajit._loader as l; print(l._libclang_path() or "")')}
export TORCH_CUDAJIT_LIBCLANG
(cd "$BUILD" && ctest --output-on-failure)
