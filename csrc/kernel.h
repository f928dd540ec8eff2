// torch_cudajit: the C++ API for LibTorch programs. A Kernel is a CUDA C++ source plus the
// name of one __global__ function; calling it binds c10::IValue arguments (through the
// extensions, then the default tensor/number binding), specializes and launches.
#pragma once

#include "arg.h"
#include "definition.h"
#include "kernel_assertion_error.h"
#include "launch_plan.h"

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {

class KernelRuntime;
struct Specialization;

/// Turns one argument into kernel arguments before a launch (numba's `prepare_args`).
/// Extensions run from the last registered to the first; each sees what the later ones left.
class Extension {
 public:
  virtual ~Extension() = default;
  /// Returns false when the value is not this extension's; otherwise fills `out` with the
  /// values that replace it (several values bind to consecutive parameters) and may add work
  /// to `after`, which runs once the launch has been issued.
  virtual bool prepare(const c10::IValue& value, CUstream stream, std::vector<c10::IValue>& out,
                       std::vector<std::function<void()>>& after) = 0;
};

/// A compiled-on-demand kernel for C++ callers.
class Kernel {
 public:
  /// The kernel `name` of `source`, read with the options' preprocessor flags.
  Kernel(const std::string& source, const std::string& name, KernelOptions options = {});
  /// The kernel `name` of an already reflected program (shared with its other kernels).
  Kernel(std::shared_ptr<const Program> program, const std::string& name, KernelOptions options = {});
  /// A kernel of an existing definition: the same definition a TorchScript object
  /// (KernelObject::definition) or another Kernel holds.
  explicit Kernel(std::shared_ptr<const KernelDefinition> definition);

  /// Adds an extension; it runs before those added earlier.
  void add_extension(std::shared_ptr<Extension> extension);
  /// Applies the extensions and converts the values to launch arguments (`storage` keeps the
  /// tensors they refer to alive).
  std::vector<Arg> bind(const std::vector<c10::IValue>& values, CUstream stream,
                        std::vector<c10::IValue>& storage,
                        std::vector<std::function<void()>>& after) const;
  /// Launches as `request` asks (a grid and block, or a forall over request.forall_tasks tasks).
  void launch(const LaunchRequest& request, const std::vector<c10::IValue>& values);
  /// Compiles for the given example values and architecture without launching (no GPU needed).
  std::shared_ptr<Specialization> compile(const std::vector<c10::IValue>& values, int arch);

  /// The runtime: the key of a call, the specializations compiled so far, forall's plan.
  KernelRuntime& runtime() { return *runtime_; }
  const KernelDefinition& definition() const;

 private:
  std::shared_ptr<KernelRuntime> runtime_;
  std::vector<std::shared_ptr<Extension>> extensions_;
};

}  // namespace torch_cudajit
