// torch_cudajit deploy example: a C++ program with no Python that loads a TorchScript model
// whose forward launches torch_cudajit kernels (cudajit::launch), checks its output against
// the one Python computed (bitwise), and with --bench times one launch through the op family
// against a plain <<<>>> launch of the same kernel compiled by nvcc.
//
//   torch_cudajit_deploy <model.pt> <data.pt> [--bench]
#include <torch_cudajit/ops/kernel_object.h>

#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int launch_native_axpy(float* out, const float* x, const float* y, float a, long long n, int grid,
                       int block, void* stream);

namespace {

// Host time of one call (us) for each function, in loops of `calls`: the functions take turns,
// `repeats` rounds after a warm-up, so drift of the machine's clocks within the run hits all of
// them alike; returns each one's median.
template <class... F>
std::vector<double> per_call_us(int calls, int repeats, F&&... fns) {
  for (int i = 0; i < 500; ++i) (fns(), ...);
  torch::cuda::synchronize();
  std::vector<std::vector<double>> samples(sizeof...(F));
  auto time_one = [&](auto& fn) {
    torch::cuda::synchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    auto t1 = std::chrono::steady_clock::now();
    torch::cuda::synchronize();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
  };
  for (int r = 0; r < repeats; ++r) {
    size_t which = 0;
    ((samples[which++].push_back(time_one(fns))), ...);
  }
  std::vector<double> medians;
  for (auto& s : samples) {
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

int bench(torch::jit::Module& model) {
  // Small enough that the GPU drains each launch faster than the host issues the next: the
  // loop measures launch cost, not kernel time.
  const long long n = 1 << 12;
  const int block = 256, grid = static_cast<int>((n + block - 1) / block);
  at::Tensor x = torch::randn({n}, torch::kCUDA);
  at::Tensor y = x * 2;
  at::Tensor out = torch::empty_like(x);
  void* stream = c10::cuda::getCurrentCUDAStream().stream();

  int native_error = 0;
  auto native = [&] {
    native_error |= launch_native_axpy(out.data_ptr<float>(), x.data_ptr<float>(),
                                       y.data_ptr<float>(), 2.0f, n, grid, block, stream);
  };
  auto kernel = model.attr("axpy").toCustomClass<torch_cudajit::KernelObject>();
  const std::vector<at::Tensor> tensors = {out, x, y};
  const std::vector<c10::Scalar> scalars = {2.0};
  const std::vector<int64_t> g = {grid}, b = {block};
  auto through_op = [&] { torch_cudajit::launch_through_op(kernel, g, b, tensors, scalars); };
  // Same results first: the op path and the native kernel compute the same thing.
  through_op();
  at::Tensor ours = out.clone();
  native();
  if (native_error != 0 || !torch::equal(ours, out)) {
    std::printf("FAIL: the op launch and the native launch disagree\n");
    return 1;
  }
  const std::vector<double> t = per_call_us(2000, 31, native, through_op);
  const double t_native = t[0], t_op = t[1];
  std::printf("| path (C++, no Python) | us per launch (median) | vs <<<>>> |\n|---|---|---|\n");
  std::printf("| plain <<<>>> launch loop (nvcc) | %.2f | 1.00x |\n", t_native);
  std::printf("| cudajit::launch through the dispatcher | %.2f | %.2fx |\n", t_op, t_op / t_native);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <model.pt> <data.pt> [--bench]\n", argv[0]);
    return 2;
  }
  torch_cudajit::ensure_kernel_class();  // links the plugin: the op family and its class
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "no CUDA device: the deploy program needs a GPU\n");
    return 3;
  }
  torch::jit::Module model = torch::jit::load(argv[1]);
  torch::jit::Module data = torch::jit::load(argv[2]);
  at::Tensor x = data.attr("x").toTensor();
  at::Tensor y = data.attr("y").toTensor();
  const double alpha = data.attr("alpha").toTensor().item<double>();
  at::Tensor expected = data.attr("expected").toTensor();
  at::Tensor out = model.forward({x, y, alpha}).toTensor();
  const bool identical = out.sizes() == expected.sizes() && torch::equal(out, expected);
  std::printf("output %s, sum %.6f; bitwise identical to Python: %s\n",
              c10::str(out.sizes()).c_str(), out.sum().item<double>(), identical ? "yes" : "NO");
  if (!identical) return 1;
  if (argc > 3 && std::strcmp(argv[3], "--bench") == 0) return bench(model);
  return 0;
}
