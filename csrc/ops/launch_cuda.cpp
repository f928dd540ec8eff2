// torch_cudajit: the CUDA implementation of cudajit::launch. One key lookup and the launch,
// on the current stream of the tensors' device (so CUDA graph capture records it).
#include "kernel_object.h"

#include <torch/library.h>

namespace {

void launch_cuda(const c10::intrusive_ptr<torch_cudajit::KernelObject>& k,
                 const std::optional<at::Tensor>& out0, const std::optional<at::Tensor>& out1,
                 const std::optional<at::Tensor>& out2, const std::optional<at::Tensor>& out3,
                 std::optional<at::TensorList> more_outputs, std::optional<at::TensorList> inputs,
                 at::OptionalIntArrayRef ints, c10::ArrayRef<double> floats,
                 c10::string_view kinds, c10::IntArrayRef grid, c10::IntArrayRef block,
                 int64_t shared_mem, const torch_cudajit::ScalarTensors& scalar_tensors) {
  const std::optional<at::Tensor>* const slots[torch_cudajit::kOpOutputSlots] = {&out0, &out1,
                                                                                &out2, &out3};
  // AOTInductor's runtime passes an empty list as None.
  k->launch(slots, more_outputs.value_or(at::TensorList()), inputs.value_or(at::TensorList()),
            ints.value_or(c10::IntArrayRef()), floats, kinds, grid, block, shared_mem,
            scalar_tensors);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudajit, CUDA, m) {
  torch_cudajit::ensure_kernel_class();
  m.impl("launch", &launch_cuda);
}
