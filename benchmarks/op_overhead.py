"""Cost of a launch through the cudajit op family from Python, against torch.ops.aten.add_ and
the eager torch_cudajit launcher, in one run.

Floor: the eager launcher (kernel[1, 256], one key lookup and cuLaunchKernel). The op path
adds the torch dispatcher's Python argument parsing of a 11-argument schema.
Target: torch.ops.cudajit.launch <= torch.ops.aten.add_ (the issue's bar).
Prediction: ~1.0-1.2x of aten.add_ for the direct op call; kernel.op[...] adds ~1-2 us of
Python (argument sorting into outputs, inputs and scalars).

Run: python benchmarks/op_overhead.py"""
import os
import sys

import torch

# One-block launches are what these benchmarks measure, not a mistake to warn about.
os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _timing import per_call_us  # noqa: E402

import torch_cudajit as cj  # noqa: E402

from launch_overhead import N, SRC  # noqa: E402  (the same kernel as the launch benchmark)


def main():
    dev = torch.device("cuda")
    x = torch.randn(N, device=dev)
    y = torch.randn(N, device=dev)
    out = torch.empty(N, device=dev)
    k = cj.jit(SRC)
    obj = k.script_object
    launch = torch.ops.cudajit.launch.default
    packet = torch.ops.cudajit.launch
    add_ = torch.ops.aten.add_.Tensor
    one = torch.ones((), device=dev)
    eager = k[1, N]
    op = k.op[1, N]
    grid, block, none, empty, ins, sc = [1, 1, 1], [N, 1, 1], None, [], [x, y], [2.0]
    rows = [
        ("torch.ops.aten.add_.Tensor(x, 1-element tensor)", lambda: add_(x, one)),
        ("torch.ops.aten.add_(x, 1)", lambda: torch.ops.aten.add_(x, 1)),
        ("x.add_(1)", lambda: x.add_(1)),
        ("torch.ops.cudajit.launch.default(...)",
         lambda: launch(obj, out, none, none, none, empty, ins, sc, grid, block, 0)),
        ("torch.ops.cudajit.launch(...)",
         lambda: packet(obj, out, none, none, none, empty, ins, sc, grid, block, 0)),
        ("kernel.op[1, 256](out, x, y, 2.0)", lambda: op(out, x, y, 2.0)),
        ("kernel[1, 256](out, x, y, 2.0) (eager launcher)", lambda: eager(out, x, y, 2.0)),
    ]
    results = [(name, per_call_us(fn)) for name, fn in rows]
    launch(obj, out, none, none, none, empty, ins, sc, grid, block, 0)
    torch.testing.assert_close(out, 2.0 * x + y)
    base = results[1][1]
    print(f"# op-family launch cost from Python, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| path | us per call (median) | vs torch.ops.aten.add_ |")
    print("|---|---|---|")
    for name, us in results:
        print(f"| {name} | {us:.2f} | {us / base:.2f}x |")


if __name__ == "__main__":
    main()
