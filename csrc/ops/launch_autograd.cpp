// torch_cudajit: the Autograd implementation of cudajit::launch: it hands the call to the keys
// below ADInplaceOrView and does nothing else.
//
// Autograd's rules for what a kernel writes (refuse a write into a tensor that requires grad
// while grad mode is on; bump the version counter of every written tensor) live in
// launch_specialization (launch.h), which every launch path ends in: eager launches, this op (in inference
// mode too, where this kernel does not run) and the C++ API. torch.compile traces a torchbind
// op with a FakeScriptObject in Python, where a C++ kernel on a runtime key such as
// ADInplaceOrView is an error, so the op keeps no kernel there.
//
// Without this kernel, torch's boxed autograd fallback would run on every launch, boxing
// fourteen arguments into IValues and unboxing them again (benchmarks/op_overhead.py measures
// the op path).
#include "kernel_object.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

namespace {

using torch_cudajit::KernelObject;

void launch_autograd(c10::DispatchKeySet keys, const c10::intrusive_ptr<KernelObject>& k,
                     const std::optional<at::Tensor>& out0, const std::optional<at::Tensor>& out1,
                     const std::optional<at::Tensor>& out2, const std::optional<at::Tensor>& out3,
                     std::optional<at::TensorList> more_outputs,
                     std::optional<at::TensorList> inputs, at::OptionalSymIntArrayRef ints,
                     c10::ArrayRef<double> floats, c10::string_view kinds,
                     c10::SymIntArrayRef grid, c10::SymIntArrayRef block, c10::SymInt shared_mem,
                     const torch_cudajit::ScalarTensors& scalar_tensors) {
  // The guard covers whatever the keys below dispatch in turn; the key set spares recomputing
  // the dispatch keys of fourteen arguments for this call.
  at::AutoDispatchBelowADInplaceOrView below;
  torch_cudajit::launch_op().redispatch(keys & c10::after_ADInplaceOrView_keyset, k, out0, out1,
                                        out2, out3, more_outputs, inputs, ints, floats, kinds,
                                        grid, block, std::move(shared_mem), scalar_tensors);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudajit, Autograd, m) {
  torch_cudajit::ensure_kernel_class();
  m.impl("launch", &launch_autograd);
}
