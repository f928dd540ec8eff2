"""The model the deploy example ships: two torch_cudajit kernels launched through the cudajit
op family, so that torch.jit.script compiles it and a C++ program runs it without Python."""
from __future__ import annotations

import torch

import torch_cudajit as cj

AXPY = r"""
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
"""

# Strided 2-D input (a transposed view), contiguous 2-D output.
ROW_SCALE = r"""
template <typename T>
__global__ void row_scale(cj::Array<T, 2> out, cj::Array<const T, 2> x, cj::Array<const T, 1> s) {
  long long r = blockIdx.y, c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r < x.size(0) && c < x.size(1)) out(r, c) = x(r, c) * s[r];
}
"""


class DeployModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Scripting stores each Kernel's script object (torch.classes.cudajit.Kernel); its
        # launch method reads from the kernel which tensors are written.
        self.axpy = cj.jit(AXPY)
        self.row_scale = cj.jit(ROW_SCALE)

    def forward(self, x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        n = x.numel()
        h = torch.empty(n, device=x.device, dtype=x.dtype)  # axpy's arrays are rank 1
        self.axpy.launch([(n + 255) // 256], [256], [h, x.view(-1), y.view(-1)], [alpha])
        m = h.view(x.size(0), x.size(1)).t()  # a strided view
        out = torch.empty(m.size(0), m.size(1), device=x.device, dtype=x.dtype)
        scale = torch.arange(1, m.size(0) + 1, device=x.device, dtype=x.dtype)
        self.row_scale.launch([(m.size(1) + 127) // 128, m.size(0)], [128], [out, m, scale])
        return out


def reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    # NVRTC contracts a * x[i] + y[i] into one fused multiply-add (one rounding); the double
    # computation rounded once to x's dtype is the same value, where torch's two float ops
    # round twice.
    h = (alpha * x.double() + y.double()).to(x.dtype)
    m = h.t()
    return m * torch.arange(1, m.size(0) + 1, device=x.device, dtype=x.dtype)[:, None]
