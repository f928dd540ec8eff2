// torch_cudajit: the kernel definition. One __global__ function of a reflected Program, the
// options it was created with, and what its declaration fixes about each parameter (its
// binding: kind, constness, role and concrete C++ types). A definition is built once and shared,
// never copied, by every layer that launches the kernel: the KernelRuntime, the TorchScript object
// (torch.classes.cudajit.Kernel), the Python Kernel and KernelModule, and the C++ Kernel. None of
// them recomputes a binding, a role, the effective options or the pickled form.
#pragma once

#include "program.h"
#include "specialization.h"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace torch_cudajit {

/// Options fixed when a kernel is created.
struct KernelOptions {
  CompileOptions compile;     ///< compile.arch is ignored: the device decides
  std::string template_args;  ///< explicit template arguments ("" deduces all)
  bool cache = true;          ///< use the disk cache (when it is enabled for the process)
  /// Launch with cuLaunchCooperativeKernel: -1 detects grid syncs in the source, 0 or 1 force.
  int cooperative = -1;
  /// Prebuilt code (torch_cudajit.load, prebuilt_program): every key uses this image and
  /// nothing is compiled. The Program then holds only the kernel's declaration.
  std::shared_ptr<const CompiledProgram> prebuilt;
};

/// How one parameter binds to arguments, read from its declaration once so that computing a
/// call's key parses nothing.
struct ParamBinding {
  const Param* param = nullptr;  ///< the reflected declaration (name, type, kind, constness)
  ParamRole role = ParamRole::kScalar;
  TypeCode element = TypeCode::kUnknown;  ///< Array/pointer element type, if concrete
  TypeCode scalar = TypeCode::kUnknown;   ///< scalar parameter type, if concrete
  int rank = -1;                          ///< Array rank, if a literal
  const VectorType* vector = nullptr;     ///< pointee of a pointer to a CUDA vector type (float4*)
};

/// One kernel of a Program with its options: what every launch path shares.
class KernelDefinition {
 public:
  /// What a definition pickles as: source, name, NVRTC options, C++ standard, debug, lineinfo,
  /// explicit template arguments, use of the disk cache, files linked in, source file name,
  /// cooperative launch (-1: detected from the source, 0/1: forced), and the source's
  /// reflection (Program::reflection), so that loading runs no front end.
  using State = std::tuple<std::string, std::string, std::vector<std::string>, std::string, bool,
                           bool, std::string, bool, std::vector<std::string>, std::string, int64_t,
                           std::string>;

  /// The kernel `name` of `program`; throws c10::ValueError listing the kernels that exist, or
  /// when the kernel has more parameters than a launch can pack.
  KernelDefinition(std::shared_ptr<const Program> program, const std::string& name,
                   KernelOptions options);
  /// A source read by the front end with the options' preprocessor flags and standard.
  static std::shared_ptr<const KernelDefinition> from_source(std::string source,
                                                             const std::string& name,
                                                             KernelOptions options,
                                                             std::string filename = "kernel.cu");
  /// The definition a State describes, read from its reflection (no front end runs); throws
  /// c10::ValueError when the reflection is missing or does not match the source.
  static std::shared_ptr<const KernelDefinition> from_state(const State& state);
  /// The options of a State (everything but source, name, file name and reflection).
  static KernelOptions options_of(const State& state);

  State state() const;
  /// The State as one length-prefixed string (serialize.h): the form pickles, TorchScript
  /// archives and Python pickles keep.
  static std::string encode(const State& state);
  /// The inverse of encode; throws c10::ValueError naming what is damaged.
  static State decode(const std::string& bytes);

  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& program_ptr() const { return program_; }
  const KernelDecl& decl() const { return *decl_; }
  const std::string& name() const { return decl_->name; }
  /// The options as compiles use them: the standard is raised to C++20 when any kernel of the
  /// source has an `auto` parameter (abbreviated templates need it).
  const KernelOptions& options() const { return options_; }
  /// The C++ standard the kernel was created with (what pickles keep).
  const std::string& requested_std() const { return requested_std_; }
  /// One binding per parameter, in declaration order.
  const std::vector<ParamBinding>& bindings() const { return bindings_; }
  ParamRole role(size_t i) const { return bindings_[i].role; }
  /// The role of each parameter, in declaration order (the bindings' roles).
  const std::vector<ParamRole>& roles() const { return roles_; }
  /// Launched with cuLaunchCooperativeKernel (forced, or a grid-wide barrier in its text).
  bool cooperative() const { return cooperative_; }
  /// How the kernel's own text covers forall's tasks (Program::task_loop).
  TaskLoop task_loop() const { return task_loop_; }
  /// The kernel's own text calls cj::for_each or cj::elementwise, which loop over the grid.
  bool grid_strides() const { return task_loop_ != TaskLoop::kOnePerThread; }
  /// Why forall cannot run this kernel on a virtual grid (virtual_grid.h), or "" when it can
  /// (for arguments whose written tensors overlap nothing else).
  const std::string& virtual_grid_refusal() const { return virtual_grid_refusal_; }
  /// 16 hex characters of SHA-256 over what defines the kernel: equal definitions have equal
  /// fingerprints.
  const std::string& fingerprint() const { return fingerprint_; }
  /// The parameters, one per line, with the role each takes on the op path (for messages).
  std::string describe_params() const;

 private:
  std::shared_ptr<const Program> program_;
  const KernelDecl* decl_;
  KernelOptions options_;
  std::string requested_std_;
  std::vector<ParamBinding> bindings_;
  std::vector<ParamRole> roles_;
  bool cooperative_ = false;
  TaskLoop task_loop_ = TaskLoop::kOnePerThread;
  std::string virtual_grid_refusal_;
  std::string fingerprint_;
};

}  // namespace torch_cudajit
