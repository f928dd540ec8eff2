#!/usr/bin/env bash
# The fresh-machine case: the only CUDA is the NVIDIA wheels that torch brings. Run by .ci/run in a
# venv with torch installed. It hides the CUDA toolkit (/usr/local/cuda) in a private mount
# namespace (needs root, as CI has), then builds a clean copy of the repo in place and runs the
# Python suite there: the build finds cuda.h/nvrtc.h, and NVRTC, cuda_fp16.h and CCCL are found,
# in the wheels.
# Usage: scripts/no_toolkit_check.sh WORKDIR
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:?usage: no_toolkit_check.sh WORKDIR}
if [[ ${CJ_IN_NAMESPACE:-} != 1 ]]; then
  mkdir -p "$WORK/empty"
  rm -rf "$WORK/src"
  git clone -q "$PWD" "$WORK/src"  # what is committed, as CI tests it
  exec unshare --mount env CJ_IN_NAMESPACE=1 bash "$0" "$@"
fi
for d in /usr/local/cuda /usr/local/cuda-*; do
  [[ -d $d ]] && mount --bind "$WORK/empty" "$d"
done
unset CUDA_HOME CUDA_PATH
export PATH=$(echo "$PATH" | tr : '\n' | grep -v '^/usr/local/cuda' | paste -sd:)
# (Links into the toolkit, such as /usr/local/bin/nvcc, now dangle.)
if nvcc --version > /dev/null 2>&1 || [[ -e /usr/local/cuda/include/cuda.h ]]; then
  echo "the CUDA toolkit is still visible"; exit 1
fi
echo "== no CUDA toolkit: $(ls /usr/local/cuda | wc -l) files in /usr/local/cuda, nvcc not on PATH"
cd "$WORK/src"
MAX_JOBS=${MAX_JOBS:-2} python3 setup.py build_ext --inplace > "$WORK/build-no-toolkit.log" 2>&1 ||
  { tail -40 "$WORK/build-no-toolkit.log"; exit 1; }
python3 - <<'PY'
import torch_cudajit as cj
dirs = cj._C.default_include_dirs()
print("NVRTC", cj.nvrtc_version(), "headers:", dirs)
assert all("/nvidia/" in d for d in dirs[1:]), dirs
assert any(d.endswith("/cccl") for d in dirs), f"no CCCL folder among {dirs}"
PY
python3 -m pytest tests/python -q -p no:cacheprovider
