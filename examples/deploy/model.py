"""The model the deploy example ships: two torch_cudajit kernels launched through the cudajit
op family, so that torch.jit.script compiles it and a C++ program runs it without Python."""
from __future__ import annotations

from typing import List

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
        self.axpy = cj.jit(AXPY).script_object
        self.row_scale = cj.jit(ROW_SCALE).script_object

    def forward(self, x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        n = x.numel()
        h = torch.empty(n, device=x.device, dtype=x.dtype)  # axpy's arrays are rank 1
        scalars: List[number] = [alpha]  # noqa: F821  (TorchScript's number type)
        torch.ops.cudajit.launch(self.axpy, h, None, None, None, [], [x.view(-1), y.view(-1)],
                                 scalars, [(n + 255) // 256], [256], 0)
        m = h.view(x.size(0), x.size(1)).t()  # a strided view
        out = torch.empty(m.size(0), m.size(1), device=x.device, dtype=x.dtype)
        scale = torch.arange(1, m.size(0) + 1, device=x.device, dtype=x.dtype)
        no_scalars: List[number] = []  # noqa: F821  (an empty list is List[Tensor] otherwise)
        torch.ops.cudajit.launch(self.row_scale, out, None, None, None, [], [m, scale], no_scalars,
                                 [(m.size(1) + 127) // 128, m.size(0)], [128], 0)
        return out


def reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    # NVRTC contracts a * x[i] + y[i] into one fused multiply-add (one rounding); the double
    # computation rounded once to x's dtype is the same value, where torch's two float ops
    # round twice.
    h = (alpha * x.double() + y.double()).to(x.dtype)
    m = h.t()
    return m * torch.arange(1, m.size(0) + 1, device=x.device, dtype=x.dtype)[:, None]
