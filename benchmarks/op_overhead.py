"""Cost of a launch through the cudajit op family from Python, against torch.ops.aten.add_ and
the eager torch_cudajit launcher, in one run.

Floor: the eager launcher (kernel[1, 256], one key lookup and cuLaunchKernel).
Target: a launch through the op family from Python costs no more than torch.ops.aten.add_.
Two Python entries into the op: kernel.op[grid, block](...) calls cudajit::launch through the
C++ dispatcher (typed call: every dispatch key applies, no Python argument parsing), predicted
~1 us over the eager launcher; torch.ops.cudajit.launch(...) goes through torch's generic
Python-to-IValue path, measured at ~28 us in an earlier run, of which the diagnostic row
isolates torch's __torch_function__ probe of the Kernel argument.

Run: python benchmarks/op_overhead.py"""
import os
import sys

import torch

# One-block launches are what these benchmarks measure, not a mistake to warn about.
os.environ.setdefault("TORCH_CUDAJIT_LOW_OCCUPANCY_WARNINGS", "0")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _timing import per_call_us_interleaved  # noqa: E402

import torch_cudajit as cj  # noqa: E402

from launch_overhead import N, SRC  # noqa: E402  (the same kernel as the launch benchmark)


def no_probe(*args):
    # torch's Python entry into an op looks up __torch_function__ on every argument; on a
    # ScriptObject the miss raises a C++ exception and a Python AttributeError. Under this
    # context torch skips that lookup: the row shows what the probe costs.
    with torch._C.DisableTorchFunctionSubclass():
        torch.ops.cudajit.launch.default(*args)


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
    grid, block, none, empty, ins, fl = [1, 1, 1], [N, 1, 1], None, [], [x, y], [2.0]
    rows = [
        ("torch.ops.aten.add_.Tensor(x, 1-element tensor)", lambda: add_(x, one)),
        ("torch.ops.aten.add_(x, 1)", lambda: torch.ops.aten.add_(x, 1)),
        ("x.add_(1)", lambda: x.add_(1)),
        ("torch.ops.cudajit.launch.default(...)",
         lambda: launch(obj, out, none, none, none, empty, ins, empty, fl, "f", grid, block, 0)),
        ("torch.ops.cudajit.launch(...)",
         lambda: packet(obj, out, none, none, none, empty, ins, empty, fl, "f", grid, block, 0)),
        ("torch.ops.cudajit.launch.default(...), torch-function probe off (diagnostic)",
         lambda: no_probe(obj, out, none, none, none, empty, ins, empty, fl, "f", grid, block, 0)),
        ("kernel.op[1, 256](out, x, y, 2.0)", lambda: op(out, x, y, 2.0)),
        ("kernel[1, 256](out, x, y, 2.0) (eager launcher)", lambda: eager(out, x, y, 2.0)),
    ]
    # The rows take turns loop by loop, so the comparison holds even while the clocks drift.
    results = list(zip([name for name, _ in rows], per_call_us_interleaved([fn for _, fn in rows])))
    launch(obj, out, none, none, none, empty, ins, empty, fl, "f", grid, block, 0)
    torch.testing.assert_close(out, 2.0 * x + y)
    base = results[1][1]
    print(f"# op-family launch cost from Python, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| path | us per call (median) | vs torch.ops.aten.add_ |")
    print("|---|---|---|")
    for name, us in results:
        print(f"| {name} | {us:.2f} | {us / base:.2f}x |")


if __name__ == "__main__":
    main()
