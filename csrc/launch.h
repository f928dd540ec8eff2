// torch_cudajit: the launch of a specialization. The parameter buffer is packed from the
// arguments (numbers converted to the declared type and range-checked, raw pointers' pointees
// checked), the configuration is checked against the device, and the kernel is launched on the
// plan's stream or the current torch stream, cooperatively when it synchronizes its grid. Every
// launch path ends here, which keeps autograd's rules for written tensors in one place.
#pragma once

#include "arg.h"
#include "kernel_assertion_error.h"
#include "launch_plan.h"
#include "specialization_table.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <string>
#include <vector>

namespace torch_cudajit {

/// Launches `spec` of `definition` with arguments whose key equals spec.key on `device`.
///
/// A write into a tensor that requires grad is refused while grad mode is on, and each written
/// tensor's version counter is bumped after the launch, as torch's in-place ops do (in
/// inference mode too; inference tensors have no counter). A debug-mode kernel's failed check
/// raises KernelAssertionError.
void launch_specialization(const KernelDefinition& definition, Specialization& spec,
                           const Arg* args, size_t n, int device, const LaunchPlan& plan);

/// Checks what a specialization's pointer parameters need of their arguments' addresses and
/// sizes (vector and struct pointees); throws ValueError naming the parameter. A launch does
/// this itself; a compile-only call does it so that it reports the same errors.
void check_pointees(const KernelDecl& decl, const Specialization& spec, const Arg* args, size_t n);

/// Refuses a kernel's write into `t` when autograd tracks it (requires grad, grad mode on):
/// kernels have no derivative. `what` names the tensor in the message ("parameter 'out'").
void check_write_untracked(const at::Tensor& t, const std::string& kernel, const std::string& what);

/// Bumps the version counter of a tensor a kernel wrote, as torch's in-place ops do, so that
/// autograd notices a saved tensor that was overwritten. Inference tensors have no counter.
inline void bump_written_version(const at::Tensor& t) {
  if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

namespace detail {
/// Debug mode: waits for the launch on `stream` and raises KernelAssertionError for a failed
/// check recorded in the module's cj_debug_record at `record` (`size` bytes). Does nothing
/// while the stream is being captured into a CUDA graph, which forbids the wait.
void check_debug_record(const std::string& kernel, CUdeviceptr record, size_t size,
                        CUstream stream);
}  // namespace detail

}  // namespace torch_cudajit
