"""Inspection helpers: SASS through the CUDA toolkit's disassemblers, and the per-parameter
view of a signature."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

#: Folders searched for cuobjdump / nvdisasm after PATH and $CUDA_HOME/bin.
TOOL_DIRS = ["/usr/local/cuda/bin"]

#: Where NVIDIA's pip wheels of the tools (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) put
#: them under a site-packages folder, searched last: nvidia/cu13/bin (CUDA 13 wheels) or
#: nvidia/cuda_<tool>/bin.
WHEEL_BIN_DIRS = ("nvidia/cu13/bin", "nvidia/cu12/bin", "nvidia/cuda_{tool}/bin")


def find_tool(name: str):
    """The path of a CUDA tool (cuobjdump, nvdisasm): on PATH, in $CUDA_HOME/bin or
    $CUDA_PATH/bin, in TOOL_DIRS, or from NVIDIA's pip wheel (found by cuda-pathfinder, or on
    sys.path); None if none has it."""
    found = shutil.which(name)
    if found:
        return found
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for d in dirs + TOOL_DIRS:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    # NVIDIA's wheels: cuda-pathfinder (installed with torch's CUDA 13 wheels) knows where each
    # puts its tools; without it, the folders those wheels use on sys.path.
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        found = find_nvidia_binary_utility(name)
        if found:
            return found
    except Exception:  # not installed, or a version that does not know the tool
        pass
    wheels = [os.path.join(base or os.curdir, *d.format(tool=name).split("/"))
              for base in sys.path for d in WHEEL_BIN_DIRS]
    for d in wheels:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def sass_of(cubin: bytes, what: str) -> str:
    """The SASS of a CUBIN, through cuobjdump (or nvdisasm)."""
    if not cubin:
        raise ValueError(f"{what} has no CUBIN (it was compiled to PTX only for an architecture "
                         f"this NVRTC cannot target); there is no SASS to show")
    tool = find_tool("cuobjdump")
    args = ["-sass"]
    if tool is None:
        tool = find_tool("nvdisasm")
        args = ["-c"]
    if tool is None:
        searched = ", ".join(["PATH", "$CUDA_HOME/bin"] + TOOL_DIRS +
                             [f"<site-packages>/{d.format(tool='nvdisasm')}" for d in WHEEL_BIN_DIRS])
        raise RuntimeError(f"inspect_sass needs cuobjdump or nvdisasm from the CUDA toolkit, and "
                           f"neither was found (searched {searched}). Install one: "
                           f"`pip install nvidia-cuda-nvdisasm`, or the CUDA toolkit with its bin "
                           f"folder on PATH.")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        r = subprocess.run([tool] + args + [path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} failed on {what}: {r.stderr.strip()}")
    return r.stdout


def split_signature(signature: str) -> list:
    """'(Array<float32, 1, contiguous>, float)' -> ['Array<float32, 1, contiguous>', 'float']."""
    body = signature.strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    parts, depth, current = [], 0, ""
    for ch in body:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts
