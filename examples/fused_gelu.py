"""A differentiable op from two kernels: GELU's forward and backward, as one torch op.

torch.library.custom_op makes each kernel launch an op of its own; register_autograd ties the
backward kernel to the forward one, and register_fake tells torch.compile and torch.export the
output's shape without running anything. The op then works in eager mode, under gradcheck and
opcheck, and inside torch.compile(fullgraph=True) with no graph break.

Run it: python examples/fused_gelu.py (needs a CUDA GPU)."""
import torch

import torch_cudajit as cj

# Exact GELU, y = x * Phi(x), and its derivative Phi(x) + x * phi(x). Each kernel loops over the
# grid, so forall(n) picks the block size and grid.
kernels = cj.jit(r"""
template <typename T>
__global__ void gelu_forward(cj::Array<T, 1> y, cj::Array<const T, 1> x) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size(0);
       i += (long long)gridDim.x * blockDim.x)
    y[i] = T(0.5) * x[i] * (T(1) + erf(x[i] * T(0.7071067811865476)));
}

template <typename T>
__global__ void gelu_backward(cj::Array<T, 1> dx, cj::Array<const T, 1> dy,
                              cj::Array<const T, 1> x) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size(0);
       i += (long long)gridDim.x * blockDim.x) {
    T cdf = T(0.5) * (T(1) + erf(x[i] * T(0.7071067811865476)));
    T pdf = exp(T(-0.5) * x[i] * x[i]) * T(0.3989422804014327);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}
""")


@torch.library.custom_op("cj_examples::gelu", mutates_args=())
def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        kernels.gelu_forward.forall(x.numel())(y.view(-1), x.view(-1))
    return y


@gelu.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("cj_examples::gelu_backward", mutates_args=())
def gelu_backward(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    dy, x = dy.contiguous(), x.contiguous()
    dx = torch.empty_like(x)
    if x.numel():
        kernels.gelu_backward.forall(x.numel())(dx.view(-1), dy.view(-1), x.view(-1))
    return dx


@gelu_backward.register_fake
def _(dy, x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _backward(ctx, dy):
    (x,) = ctx.saved_tensors
    return gelu_backward(dy, x)


gelu.register_autograd(_backward, setup_context=_setup_context)


def main():
    x = torch.randn(4096, 512, device="cuda", requires_grad=True)
    y = gelu(x)
    y.sum().backward()
    ref = x.detach().clone().requires_grad_()
    torch.nn.functional.gelu(ref).sum().backward()
    torch.testing.assert_close(y, torch.nn.functional.gelu(ref))
    torch.testing.assert_close(x.grad, ref.grad)
    compiled = torch.compile(lambda t: gelu(t) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(x), 2 * y)
    print("gelu forward and backward match torch, eager and compiled")


if __name__ == "__main__":
    main()
