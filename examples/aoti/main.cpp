// torch_cudajit AOTInductor example: a C++ program with no Python that loads an AOTInductor
// package (torch::inductor::AOTIModelPackageLoader) whose graph launches torch_cudajit kernels,
// runs it, and checks the output against the one eager Python computed (bitwise).
//
//   torch_cudajit_aoti <model.pt2> <data.pt>
//
// The package holds each kernel as a torchbind constant (source, name, options and
// reflection); the plugin, linked here, registers the class and the cudajit::launch op that the
// package's wrapper calls.
#include <torch_cudajit/ops/kernel_object.h>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <model.pt2> <data.pt>\n", argv[0]);
    return 2;
  }
  torch_cudajit::ensure_kernel_class();  // links the plugin: the op family and its class
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "no CUDA device: the package's kernels need a GPU\n");
    return 3;
  }
  std::ifstream file(argv[2], std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  const c10::Dict<c10::IValue, c10::IValue> data = torch::pickle_load(bytes).toGenericDict();
  const at::Tensor x = data.at("x").toTensor().cuda();
  const at::Tensor expected = data.at("expected").toTensor();

  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  const std::vector<at::Tensor> outputs = loader.run({x});
  if (outputs.size() != 1) {
    std::printf("FAIL: the package returned %zu outputs, expected 1\n", outputs.size());
    return 1;
  }
  const at::Tensor out = outputs[0].cpu();
  const bool identical = out.sizes() == expected.sizes() && torch::equal(out, expected);
  std::printf("output %s, sum %.6f; bitwise identical to eager Python: %s\n",
              c10::str(out.sizes()).c_str(), out.sum().item<double>(), identical ? "yes" : "NO");
  return identical ? 0 : 1;
}
