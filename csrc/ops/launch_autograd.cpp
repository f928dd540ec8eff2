// torch_cudajit: the Autograd implementation of cudajit::launch. A hand-written kernel has no
// derivative, so this kernel refuses to write into a tensor autograd tracks, bumps the version
// counter of every tensor written (as torch's own in-place ops do, so autograd notices a saved
// tensor that was overwritten), and hands the call to the backend below autograd.
//
// Without it, torch's boxed autograd fallback would run on every launch: boxing eleven
// arguments into IValues and unboxing them again costs about a microsecond of the op path.
#include "kernel_object.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

namespace {

using torch_cudajit::KernelObject;

/// The op's signature as the dispatcher sees it (SymInt, since grid and block may be symbolic
/// while tracing).
using LaunchSignature =
    void(const c10::intrusive_ptr<KernelObject>&, const std::optional<at::Tensor>&,
         const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
         const std::optional<at::Tensor>&, at::TensorList, at::TensorList,
         c10::ArrayRef<c10::Scalar>, c10::SymIntArrayRef, c10::SymIntArrayRef, c10::SymInt);

void check_untracked(const KernelObject& k, const at::Tensor& t, const char* slot, int64_t index) {
  TORCH_CHECK(!t.requires_grad(), "torch_cudajit: cudajit::launch of kernel '", k.name(),
              "' writes ", slot, index >= 0 ? "[" + std::to_string(index) + "]" : std::string(),
              ", a tensor that requires grad; kernels have no derivative, so autograd cannot "
              "track the write. Write into a tensor that does not require grad (torch.empty(...), "
              "or t.detach()), launch under torch.no_grad(), or wrap the launch in a "
              "torch.autograd.Function that defines backward.");
}

void launch_autograd(c10::DispatchKeySet keys, const c10::intrusive_ptr<KernelObject>& k,
                     const std::optional<at::Tensor>& out0,
                     const std::optional<at::Tensor>& out1, const std::optional<at::Tensor>& out2,
                     const std::optional<at::Tensor>& out3, at::TensorList more_outputs,
                     at::TensorList inputs, c10::ArrayRef<c10::Scalar> scalars,
                     c10::SymIntArrayRef grid, c10::SymIntArrayRef block, c10::SymInt shared_mem) {
  const std::optional<at::Tensor>* const slots[] = {&out0, &out1, &out2, &out3};
  static const char* const kSlotNames[] = {"out0", "out1", "out2", "out3"};
  if (c10::GradMode::is_enabled()) {
    for (int i = 0; i < 4; ++i)
      if (slots[i]->has_value()) check_untracked(*k, **slots[i], kSlotNames[i], -1);
    for (size_t i = 0; i < more_outputs.size(); ++i)
      check_untracked(*k, more_outputs[i], "more_outputs", static_cast<int64_t>(i));
  }
  {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("cudajit::launch", "")
                               .typed<LaunchSignature>();
    // The guard covers anything the backend dispatches in turn; the key set skips recomputing
    // the dispatch keys of eleven arguments for this call.
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatch(keys & c10::after_ADInplaceOrView_keyset, k, out0, out1, out2, out3,
                  more_outputs, inputs, scalars, grid, block, std::move(shared_mem));
  }
  for (const auto* slot : slots)
    if (slot->has_value()) torch::autograd::impl::bump_version(**slot);
  for (const at::Tensor& t : more_outputs) torch::autograd::impl::bump_version(t);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudajit, Autograd, m) {
  torch_cudajit::ensure_kernel_class();
  m.impl("launch", &launch_autograd);
}
