"""Packages a module whose forward launches torch_cudajit kernels with AOTInductor, runs it on
the GPU, and saves for the C++ program (main.cpp):
  model.pt2  the AOTInductor package; each kernel travels in it as a torchbind constant
  data.pt    the input and the output eager Python computed (torch.save of a dict of CPU
             tensors; C++ reads it with torch::pickle_load)

Run: python examples/aoti/package.py <folder>"""
import os
import sys

import torch

import torch_cudajit as cj

# A row-wise RMS norm with a learned scale: one block of 256 threads per row, which reduces in
# shared memory. A second kernel adds a bias through forall, whose block size the op picks when the
# package runs.
RMS_NORM = r"""
template <typename T>
__global__ void rms_norm(cj::Array<T, 2> out, cj::Array<const T, 2> x,
                         cj::Array<const T, 1> weight, float eps) {
  __shared__ float partial[256];
  const int row = blockIdx.x, cols = x.size(1);
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = static_cast<float>(x(row, c));
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    out(row, c) = static_cast<T>(static_cast<float>(x(row, c)) * scale *
                                 static_cast<float>(weight(c)));
}
"""

ADD_BIAS = r"""
template <typename T>
__global__ void add_bias(cj::Array<T, 2> y, cj::Array<const T, 1> bias, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y.data()[i] += bias(i % bias.size(0));
}
"""

ROWS, COLS, BLOCK = 512, 1000, 256


class RMSNormBias(torch.nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = torch.nn.Parameter(torch.randn(cols))
        self.rms_norm = cj.jit(RMS_NORM)
        self.add_bias = cj.jit(ADD_BIAS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        self.rms_norm[x.shape[0], BLOCK](y, x, self.weight, 1e-6)
        self.add_bias.forall(y.numel())(y, self.bias, y.numel())
        return y


def reference(model: RMSNormBias, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[1],), model.weight, 1e-6) + model.bias


def main(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    model = RMSNormBias(COLS).cuda()
    x = torch.randn(ROWS, COLS, device="cuda")
    with torch.no_grad():
        eager = model(x)
        torch.testing.assert_close(eager, reference(model, x))
        program = torch.export.export(model, (x,))
    path = torch._inductor.aoti_compile_and_package(program,
                                                    package_path=os.path.join(folder, "model.pt2"))
    torch.save({"x": x.cpu(), "expected": eager.cpu()}, os.path.join(folder, "data.pt"))
    print(f"saved {path} and {folder}/data.pt; output sum {eager.sum().item():.6f}")
    if "--run" in sys.argv:
        # Runs the package here too, from Python.
        got = torch._inductor.aoti_load_package(path)(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        print(f"python package run: bitwise identical to eager: "
              f"{'yes' if torch.equal(got, eager) else 'NO'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "aoti_out")
