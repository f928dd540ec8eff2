// torch_cudajit: the Autograd implementation of cudajit::launch. A hand-written kernel has no
// derivative, so this kernel refuses to write into a tensor autograd tracks (requires grad,
// grad mode on), hands the call to the keys below ADInplaceOrView, and then bumps the version
// counter of every tensor written, as torch's in-place ops do, so autograd notices a tensor
// saved for backward that a kernel overwrote.
//
// The version bump lives here rather than in an ADInplaceOrView kernel: torch.compile traces a
// torchbind op with a FakeScriptObject in Python, where a C++ kernel on a runtime key such as
// ADInplaceOrView is an error, while one on the Autograd alias key is skipped. So in inference
// mode (no Autograd key) a launch through the op does not bump versions.
//
// Without this kernel, torch's boxed autograd fallback would run on every launch: boxing eleven
// arguments into IValues and unboxing them again cost 1.36x against 1.13x of a plain <<<>>>
// launch on the C++ op path (benchmarks/RESULTS.md).
#include "kernel_object.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <string>

namespace {

using torch_cudajit::KernelObject;

void launch_autograd(c10::DispatchKeySet keys, const c10::intrusive_ptr<KernelObject>& k,
                     const std::optional<at::Tensor>& out0, const std::optional<at::Tensor>& out1,
                     const std::optional<at::Tensor>& out2, const std::optional<at::Tensor>& out3,
                     at::TensorList more_outputs, at::TensorList inputs,
                     c10::ArrayRef<c10::Scalar> scalars, c10::SymIntArrayRef grid,
                     c10::SymIntArrayRef block, c10::SymInt shared_mem) {
  const std::optional<at::Tensor>* const slots[torch_cudajit::kOpOutputSlots] = {&out0, &out1,
                                                                                &out2, &out3};
  if (c10::GradMode::is_enabled()) {
    for (size_t i = 0; i < torch_cudajit::kOpOutputSlots; ++i)
      if (slots[i]->has_value())
        torch_cudajit::check_write_untracked(**slots[i], k->name(), "out" + std::to_string(i));
    for (size_t i = 0; i < more_outputs.size(); ++i)
      torch_cudajit::check_write_untracked(more_outputs[i], k->name(),
                                           "more_outputs[" + std::to_string(i) + "]");
  }
  {
    // The guard covers whatever the keys below dispatch in turn; the key set spares
    // recomputing the dispatch keys of eleven arguments for this call.
    at::AutoDispatchBelowADInplaceOrView below;
    torch_cudajit::launch_op().redispatch(keys & c10::after_ADInplaceOrView_keyset, k, out0,
                                          out1, out2, out3, more_outputs, inputs, scalars, grid,
                                          block, std::move(shared_mem));
  }
  for (const auto* slot : slots)
    if (slot->has_value()) torch_cudajit::bump_written_version(**slot);
  for (const at::Tensor& t : more_outputs) torch_cudajit::bump_written_version(t);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudajit, Autograd, m) {
  torch_cudajit::ensure_kernel_class();
  m.impl("launch", &launch_autograd);
}
