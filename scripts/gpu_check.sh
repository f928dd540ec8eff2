#!/usr/bin/env bash
# Builds torch_cudajit on the GPU machine, runs the GPU tests (Python and C++) and the
# benchmarks in one call; logs go to $OUT (or ./gpu_logs).
#   all    build, smoke, pytest, ctest (which also builds examples/deploy), all benchmarks
#   tests  build, pytest and ctest
#   final  a shorter pass: op family, deploy and launch tests (Python and C++), launch, op-path
#          and deploy benchmarks
#   wheel  builds a wheel, installs it into a folder, builds examples/deploy against the installed
#          package alone (find_package(torch_cudajit)) and runs it
#   sanitizer  compute-sanitizer memcheck over test_launch.py, racecheck and synccheck over the
#          launch and reliability tests
#   bandwidth  benchmarks/bandwidth.py --quick with its plot, then benchmarks/virtual_grid_probe.py
#   aoti   the export, AOTInductor (Python and examples/aoti) and deploy tests
#   compare  the launch and cache benchmarks on the source copy in $BASELINE (an earlier commit,
#          built here beside this tree) and on this tree, in one call ($COMPARE_ROUNDS rounds,
#          default 2)
#   verify  build, pytest ($PYTEST_FILES), then compare: a change checked and measured in one call
#   results  benchmarks/run_all.py: every benchmark, with the C++ deploy floor, written to
#          $OUT/RESULTS.md (copy it over benchmarks/RESULTS.md); RESULTS_ARGS adds arguments
#   backend  build, the torch.compile backend's GPU tests (PYTEST_ARGS selects), a profile of each
#          model, the row- and run-kernel probes, the benchmark (BACKEND_ARGS adds arguments, e.g.
#          "--models gpt2 --reps 20"); together they take longer than one device call allows, so
#          backend-tests (the tests, profiles and probes) and backend-bench (the benchmark) split
#          them over two calls
#   smoke | pytest | ctest | bench | cache | ops   one part (pytest also builds examples/deploy, which
#          test_deploy.py runs)
# PYTEST_ARGS adds pytest arguments (e.g. "-m gpu": only the GPU tests), PYTEST_FILES replaces
# tests/python (to split the suite over calls), CTEST_ARGS adds ctest ones (e.g. "-R Gpu|Ops").
# PYTEST_WORKERS=N runs pytest in N processes (pytest-xdist; on a machine without network, from
# wheels carried in .whl/: `pip download -d .whl pytest-xdist execnet`): the backend's GPU tests
# are bound by the host's compiles, not the GPU.
set -uo pipefail
OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STEP=${1:-all}
# True when this run's step is one of the arguments.
wants() { local s; for s in "$@"; do [[ $STEP == "$s" ]] && return 0; done; return 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

# The front end needs libclang (the `libclang` wheel); a machine without network gets it from
# wheels carried in .whl/.
if ! python3 -c 'import clang' 2>/dev/null && ls .whl/libclang-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/libclang-*.whl > "$OUT/wheels.log" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [[ -n ${PYTEST_WORKERS:-} ]] && ! python3 -c 'import xdist' 2>/dev/null &&
   ls .whl/pytest_xdist-*.whl .whl/execnet-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/pytest_xdist-*.whl .whl/execnet-*.whl >> "$OUT/wheels.log" 2>&1
  [[ :${PYTHONPATH:-}: == *:/tmp/site:* ]] || export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
TORCH_CUDAJIT_LIBCLANG=$(python3 -c 'import clang, os; print(os.path.join(os.path.dirname(clang.__file__), "native", "libclang.so"))')
export TORCH_CUDAJIT_LIBCLANG

TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
echo "== build (extension, and where needed the CMake tree with the C++ tests and the deploy program, in parallel)"
(MAX_JOBS=10 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "ext rc $?" >> "$OUT/build.log") &
if wants compare verify; then
  (cd "$BASELINE" && MAX_JOBS=6 python3 setup.py build_ext --inplace > "$OUT/build_baseline.log" 2>&1
   echo "baseline rc $?" >> "$OUT/build_baseline.log") &
fi
if wants all tests pytest ctest final bench ops aoti results; then
  targets=(); wants aoti && targets=(torch_cudajit_aoti torch_cudajit_deploy)
  wants results && targets=(torch_cudajit_deploy)
  (cmake -S . -B build/cmake-gpu -G Ninja -DCMAKE_PREFIX_PATH="$TP" -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 &&
   ninja -C build/cmake-gpu -j6 ${targets[@]+"${targets[@]}"} >> "$OUT/cmake.log" 2>&1; echo "cmake rc $?" >> "$OUT/cmake.log") &
fi
wait
tail -1 "$OUT/build.log"; [[ -f $OUT/cmake.log ]] && tail -1 "$OUT/cmake.log"
grep -q "ext rc 0" "$OUT/build.log" || { tail -40 "$OUT/build.log"; exit 1; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# PYTEST_ARGS and CTEST_ARGS as the shell would split them, quotes kept ('-k "a or b"').
eval "pytest_args=(${PYTEST_ARGS:-})"
eval "ctest_args=(${CTEST_ARGS:-})"
if [[ -n ${PYTEST_WORKERS:-} ]]; then
  python3 -c 'import xdist' 2>/dev/null || { echo "PYTEST_WORKERS needs pytest-xdist (not installed, no wheel in .whl/)"; exit 1; }
  pytest_args+=(-n "$PYTEST_WORKERS")
fi

if wants all smoke; then
  echo "== smoke"
  python3 scripts/smoke.py 2>&1 | tee "$OUT/smoke.log"
fi
if wants all tests pytest final verify; then
  # final: the op family, the deploy program and the launch path only.
  files=${PYTEST_FILES:-tests/python}
  wants final && files="tests/python/test_ops.py tests/python/test_deploy.py tests/python/test_launch.py"
  echo "== pytest ($files)"
  python3 -m pytest $files ${pytest_args[@]+"${pytest_args[@]}"} -q -p no:cacheprovider -rfE 2>&1 | tee "$OUT/pytest.log" | tail -25
fi
if wants all aoti; then
  echo "== AOTInductor and deploy examples (test_export.py, test_deploy.py)"
  python3 -m pytest tests/python/test_export.py tests/python/test_deploy.py -m gpu -v \
    -p no:cacheprovider -rfEs 2>&1 | tee "$OUT/pytest_aoti.log" | tail -12
fi
if wants all tests ctest final; then
  filter=(${ctest_args[@]+"${ctest_args[@]}"})
  wants final && filter=(-R "Ops|Kernel")
  echo "== ctest ${filter[*]}"
  if grep -q "cmake rc 0" "$OUT/cmake.log"; then
    (cd build/cmake-gpu && ctest "${filter[@]}" --output-on-failure 2>&1) | tee "$OUT/ctest.log" | tail -15
  else
    tail -30 "$OUT/cmake.log"
  fi
fi
if wants compare verify; then
  tail -1 "$OUT/build_baseline.log"
  for round in $(seq 1 "${COMPARE_ROUNDS:-2}"); do
    for tree in "$BASELINE" "$PWD"; do
      name=$([[ $tree == "$PWD" ]] && echo this || echo baseline)
      echo "== round $round, $name ($tree): launch, then compile latency"
      PYTHONPATH=$tree:/tmp/site python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/compare_launch_${name}_$round.log" | tail -14
      PYTHONPATH=$tree:/tmp/site python3 benchmarks/cache.py --latency-only 2>&1 | tee "$OUT/compare_cache_${name}_$round.log" | tail -14
    done
  done
fi
if wants all bench final; then
  echo "== launch benchmark"
  python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/bench_launch.log"
fi
if wants all bench cache; then
  echo "== cache benchmarks"
  python3 benchmarks/cache.py 2>&1 | tee "$OUT/bench_cache.log"
fi
if wants all bench ops final; then
  echo "== op-family benchmarks (Python, then the C++ deploy program)"
  python3 benchmarks/op_overhead.py 2>&1 | tee "$OUT/bench_op.log"
  if [[ -x build/cmake-gpu/examples/deploy/torch_cudajit_deploy ]]; then
    python3 examples/deploy/export.py "$OUT/deploy" 2>&1 | tail -1
    # Without libclang: the archive carries the kernels' reflection, so loading parses nothing.
    env -u TORCH_CUDAJIT_LIBCLANG ./build/cmake-gpu/examples/deploy/torch_cudajit_deploy "$OUT/deploy/model.pt" "$OUT/deploy/data.pt" --bench 2>&1 | tee "$OUT/bench_deploy.log"
  fi
fi
if wants backend backend-tests; then
  # The torch.compile backend: its GPU tests (the failures' first lines printed), a profile of
  # each model's compiled step and the kernel-shape probes.
  echo "== backend: GPU tests"
  python3 -m pytest tests/python/test_backend_gpu.py ${pytest_args[@]+"${pytest_args[@]}"} -q -p no:cacheprovider -rfE --maxfail=40 2>&1 |
    tee "$OUT/pytest_backend.log" | grep -E "^(FAILED|ERROR|E   )|passed|failed|no tests ran" | head -40
  for m in gpt2 llama resnet; do
    python3 benchmarks/backend.py --profile "$m" > "$OUT/profile_$m.txt" 2>&1
    head -1 "$OUT/profile_$m.txt"
  done
  # ResNet with channels-last convolutions (options={"channels_last": True}).
  python3 benchmarks/backend.py --profile resnet --profile-backend cudajit-channels-last > "$OUT/profile_resnet_channels_last.txt" 2>&1
  head -1 "$OUT/profile_resnet_channels_last.txt"
  echo "== backend: row-kernel shapes (benchmarks/row_kernel_probe.py)"
  python3 benchmarks/row_kernel_probe.py 2>&1 | grep -v Warning | tee "$OUT/row_probe.txt"
  echo "== backend: run-kernel shapes (benchmarks/run_kernel_probe.py)"
  python3 benchmarks/run_kernel_probe.py 2>&1 | grep -v Warning | tee "$OUT/run_probe.txt"
fi
if wants backend backend-bench; then
  # The benchmark against eager and Inductor, whose results are written after each model (a run
  # cut short keeps what it measured).
  echo "== backend: benchmark"
  python3 benchmarks/backend.py --markdown --plot "$OUT/backend.png" --json "$OUT/backend.json" \
    ${BACKEND_ARGS:-} 2> "$OUT/backend.err" | tee "$OUT/backend.md"
fi
if wants all wheel; then
  echo "== wheel: build, install, examples/deploy against the installed package"
  rm -rf build/wheel build/site build/deploy-wheel
  (MAX_JOBS=12 python3 -m pip wheel --no-build-isolation --no-deps -w build/wheel . > "$OUT/wheel.log" 2>&1 &&
   python3 -m pip install --no-deps --target build/site build/wheel/*.whl >> "$OUT/wheel.log" 2>&1) ||
    { tail -30 "$OUT/wheel.log"; exit 1; }
  ROOT=$PWD
  prefix="$TP;$(cd /tmp && PYTHONPATH=$ROOT/build/site python3 -c 'import torch_cudajit as c; print(c.cmake_prefix_path)')"
  (cmake -S examples/deploy -B build/deploy-wheel -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" &&
   ninja -C build/deploy-wheel) >> "$OUT/wheel.log" 2>&1 || { tail -30 "$OUT/wheel.log"; exit 1; }
  ldd build/deploy-wheel/torch_cudajit_deploy | grep torch_cudajit | tee -a "$OUT/wheel.log"
  (cd /tmp && PYTHONPATH=$ROOT/build/site python3 "$ROOT/examples/deploy/export.py" "$OUT/deploy-wheel") 2>&1 | tail -1
  ./build/deploy-wheel/torch_cudajit_deploy "$OUT/deploy-wheel/model.pt" "$OUT/deploy-wheel/data.pt" 2>&1 | tee -a "$OUT/wheel.log" | tail -5
fi
if wants all sanitizer; then
  echo "== compute-sanitizer"
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    files=tests/python/test_launch.py
    [[ $tool != memcheck ]] && files="tests/python/test_launch.py::test_copy2d tests/python/test_launch.py::test_rank4_permuted_copy"
    "$CS" --tool "$tool" --target-processes all --print-limit 20 \
      python3 -m pytest $files -q -p no:cacheprovider -x > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool (rc $?): $(grep -E '(passed|failed)' "$OUT/sanitizer_$tool.log" | tail -1) | $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_$tool.log" | sort | uniq -c | tr '\n' ' ')"
  done
fi
if wants all bandwidth; then
  echo "== bandwidth benchmark"
  python3 benchmarks/bandwidth.py ${BANDWIDTH_ARGS:---quick} --plot "$OUT/bandwidth.png" 2>&1 | tee "$OUT/bench_bandwidth.log"
  echo "== virtual-grid probe (one element per load instruction: the ceiling)"
  python3 benchmarks/virtual_grid_probe.py 2>&1 | tee "$OUT/bench_probe.log"
fi
if wants results; then
  echo "== all benchmarks (benchmarks/run_all.py ${RESULTS_ARGS:-})"
  python3 benchmarks/run_all.py --output "$OUT/RESULTS.md" ${RESULTS_ARGS:-} \
    --deploy build/cmake-gpu/examples/deploy/torch_cudajit_deploy 2>&1 | tee "$OUT/results.log"
  cp benchmarks/bandwidth.png "$OUT/" 2>/dev/null || true
fi
