"""torch_cudajit quickstart: compile a CUDA C++ kernel, run it on tensors, check it against
torch and time one launch. Without a GPU it compiles for sm_90 and shows the PTX instead."""
import time

import torch

import torch_cudajit as cj

saxpy = cj.jit(r"""
template <typename T>
__global__ void saxpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
""")

if not torch.cuda.is_available():
    compiled = saxpy.compile(torch.empty(1), torch.empty(1), torch.empty(1), 2.0, arch="sm_90")
    print(f"no GPU here: compiled {compiled.lowered_name} {compiled.signature} for {compiled.target}")
    print("\n".join(line for line in compiled.ptx.splitlines() if ".entry" in line))
    raise SystemExit(0)

n = 1 << 20
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.full_like(x, float("nan"))
threads = 256
launch = saxpy[(n + threads - 1) // threads, threads]
launch(out, x, y, 2.0)  # compiles for (float32, float32, float32, float) on first call
torch.testing.assert_close(out, 2.0 * x + y)
print("saxpy matches torch:", saxpy.signatures[0])

for _ in range(100):
    launch(out, x, y, 2.0)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(1000):
    launch(out, x, y, 2.0)
t1 = time.perf_counter()
torch.cuda.synchronize()
print(f"one launch costs {(t1 - t0) * 1e3:.2f} us of host time")
