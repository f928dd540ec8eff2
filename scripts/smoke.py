"""A quick end-to-end check of the launch path on a GPU (used by gpu_check.sh)."""
import torch

import torch_cudajit as cj

k = cj.jit(r"""
template <typename T>
__global__ void saxpy(cj::Array<T, 2> out, cj::Array<const T, 2> x, T a) {
  long long i = blockIdx.x, j = threadIdx.x;
  if (i < x.size(0) && j < x.size(1)) out(i, j) = a * x(i, j);
}""")
for dtype in (torch.float32, torch.float16, torch.float64):
    for strided in (False, True):
        x = torch.randn(64, 32, device="cuda", dtype=dtype)
        if strided:
            x = torch.randn(32, 64, device="cuda", dtype=dtype).t()
        out = torch.full((64, 32), float("nan"), device="cuda", dtype=dtype)
        k[64, 32](out, x, 2.5)
        torch.testing.assert_close(out, 2.5 * x)
print("signatures:", k.signatures)
raw = cj.jit('extern "C" __global__ void fill(float* out, float v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = v; }')
o = torch.empty(1000, device="cuda")
raw.forall(1000)(o, 3.0, 1000)
assert torch.all(o == 3.0)
print("smoke OK")
