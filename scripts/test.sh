#!/usr/bin/env bash
# The whole test suite: builds the extension in place, runs the Python tests (pytest) and the
# C++ tests (CMake + GoogleTest + ctest). GPU tests are skipped on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${MAX_JOBS:-2}
echo "== building the Python extension"
MAX_JOBS=$JOBS python3 setup.py build_ext --inplace > /tmp/torch_cudajit_build.log 2>&1 || { tail -50 /tmp/torch_cudajit_build.log; exit 1; }
echo "== Python tests"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest tests/python -q -p no:cacheprovider
echo "== C++ tests"
BUILD=${TORCH_CUDAJIT_BUILD_DIR:-/tmp/torch_cudajit_cmake}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" > /tmp/torch_cudajit_cmake.log 2>&1 || { tail -50 /tmp/torch_cudajit_cmake.log; exit 1; }
ninja -C "$BUILD" -j"$JOBS" >> /tmp/torch_cudajit_cmake.log 2>&1 || { tail -50 /tmp/torch_cudajit_cmake.log; exit 1; }
(cd "$BUILD" && ctest --output-on-failure)
