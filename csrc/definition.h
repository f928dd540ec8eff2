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
#include <utility>
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

/// Binary data in a KernelDefinition::State (the reflection): kept byte for byte, where every
/// other string of a State is UTF-8 text; bytes in Python.
struct StateBytes : std::string {
  using std::string::string;
  StateBytes() = default;
  StateBytes(std::string bytes) : std::string(std::move(bytes)) {}  // NOLINT: implicit on purpose
};

/// The fields of KernelDefinition::State, in the order they are encoded: the one list that
/// encoding, decoding, the fingerprint, the Python dict, the tuples of old TorchScript archives
/// and the constructors all follow. A row is
///   SOURCE(type, name, hash, tag): what the kernel is (its source, name and file name);
///   OPTION(type, name, hash, tag, member): a KernelOptions member;
///   DERIVED(type, name, hash, tag): read from the source, kept so that loading reads no source
///     (derived fields come last: torch.classes.cudajit.Kernel(...) takes the others in order).
/// `name` is the State's member, its key in Python and its argument name in TorchScript; `hash`
/// is the field's place in the fingerprint (0: not hashed on its own: the program's digest stands
/// for source and file name, and the cache flag and the reflection do not define the kernel);
/// `tag` is what the fingerprint hashes for a set flag, or before each item of a list (nullptr:
/// nothing). Adding an option is one OPTION row before the derived fields: the State, its
/// encoding and fingerprint, the TorchScript constructor, the Python state and options dicts and
/// the Python KernelDefinition constructor follow it (jit's keyword is the user's name for it).
/// The encoding then gains the field, so strings written before it need a new kStateFormat
/// version (definition.cpp) that decode tells apart.
#define CJ_KERNEL_STATE_FIELDS(SOURCE, OPTION, DERIVED)                                      \
  SOURCE(std::string, source, 0, nullptr)                                                    \
  SOURCE(std::string, name, 1, nullptr)                                                      \
  OPTION(std::vector<std::string>, options, 7, nullptr, compile.extra)                       \
  OPTION(std::string, std, 2, nullptr, compile.std)                                          \
  OPTION(bool, debug, 4, "debug", compile.debug)                                             \
  OPTION(bool, lineinfo, 5, "lineinfo", compile.lineinfo)                                    \
  OPTION(std::string, template_args, 3, nullptr, template_args)                              \
  OPTION(bool, cache, 0, nullptr, cache)                                                     \
  OPTION(std::vector<std::string>, link, 8, "link", compile.link)                            \
  SOURCE(std::string, filename, 0, nullptr)                                                  \
  OPTION(int64_t, cooperative, 6, nullptr, cooperative)                                      \
  DERIVED(::torch_cudajit::StateBytes, reflection, 0, nullptr)

/// The row a field has in CJ_KERNEL_STATE_FIELDS.
enum class StateFieldKind { kSource, kOption, kDerived };

/// What the field list says about one field.
struct StateField {
  const char* name;
  int hash;         ///< its place in the fingerprint, 0 for none
  const char* tag;  ///< hashed for a set flag or before each list item (nullptr: nothing)
  StateFieldKind kind;
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
  /// What a definition pickles as: its source, kernel name, options, file name and the
  /// source's reflection (Program::reflection), so that loading runs no front end. The fields
  /// are CJ_KERNEL_STATE_FIELDS's; `cooperative` is -1 (detected from the source), 0 or 1
  /// (forced).
  struct State {
#define CJ_STATE_MEMBER(type, name, ...) type name{};
    CJ_KERNEL_STATE_FIELDS(CJ_STATE_MEMBER, CJ_STATE_MEMBER, CJ_STATE_MEMBER)
#undef CJ_STATE_MEMBER
#define CJ_STATE_COUNT(...) +1
    /// The number of fields.
    static constexpr size_t kFieldCount =
        0 CJ_KERNEL_STATE_FIELDS(CJ_STATE_COUNT, CJ_STATE_COUNT, CJ_STATE_COUNT);
#undef CJ_STATE_COUNT

    /// Calls f(const StateField&, member) for each field, in list order.
    template <class F>
    void for_each(F&& f) {
      visit(*this, f);
    }
    template <class F>
    void for_each(F&& f) const {
      visit(*this, f);
    }

   private:
    template <class S, class F>
    static void visit(S& s, F& f) {
#define CJ_STATE_VISIT(kind, type, name, hash, tag, ...) \
  f(StateField{#name, hash, tag, StateFieldKind::kind}, s.name);
#define CJ_STATE_VISIT_SOURCE(...) CJ_STATE_VISIT(kSource, __VA_ARGS__)
#define CJ_STATE_VISIT_OPTION(...) CJ_STATE_VISIT(kOption, __VA_ARGS__)
#define CJ_STATE_VISIT_DERIVED(...) CJ_STATE_VISIT(kDerived, __VA_ARGS__)
      CJ_KERNEL_STATE_FIELDS(CJ_STATE_VISIT_SOURCE, CJ_STATE_VISIT_OPTION, CJ_STATE_VISIT_DERIVED)
#undef CJ_STATE_VISIT_SOURCE
#undef CJ_STATE_VISIT_OPTION
#undef CJ_STATE_VISIT_DERIVED
#undef CJ_STATE_VISIT
    }
  };

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
  /// The inverse of encode; throws c10::ValueError naming what is damaged and in which field.
  static State decode(const std::string& bytes);

  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& program_ptr() const { return program_; }
  const KernelDecl& decl() const { return *decl_; }
  const std::string& name() const { return decl_->name; }
  /// The options as compiles use them: the standard is raised to C++20 when any kernel of the
  /// source has an `auto` parameter (abbreviated templates need it).
  const KernelOptions& options() const { return options_; }
  /// The compile options of a specialization (compile.arch is then set): options().compile,
  /// with CUDA's device runtime library linked when the source uses the device runtime
  /// (Program::uses_device_runtime). Throws c10::ValueError when that library is not found.
  CompileOptions compile_options() const;
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
  /// Why the kernel's template arguments cannot all be known for a launch ("" when they can):
  /// template_args_problem's message. A compile throws it as a c10::ValueError; jit throws it
  /// when it defines the kernel alone (a module's other kernels stay usable).
  const std::string& template_problem() const { return template_problem_; }
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
  std::string template_problem_;
  std::string fingerprint_;
};

namespace detail {
template <class... T>
struct StateTypes {};
template <class Types>
struct StateArgs;
template <class... T>
struct StateArgs<StateTypes<void, T...>> {
  template <class F>
  static auto bind(F f) {
    return [f = std::move(f)](T... fields) {
      return f(KernelDefinition::State{std::move(fields)...});
    };
  }
};
#define CJ_STATE_ARG_TYPE(type, ...) , type
#define CJ_STATE_NO_ARG(...)
/// StateTypes<void, the types of the State's fields but the derived ones>.
using StateArgTypes = StateTypes<void CJ_KERNEL_STATE_FIELDS(CJ_STATE_ARG_TYPE, CJ_STATE_ARG_TYPE,
                                                             CJ_STATE_NO_ARG)>;
#undef CJ_STATE_ARG_TYPE
#undef CJ_STATE_NO_ARG
}  // namespace detail

/// f(State) as a function of the State's fields but the derived ones, in list order, which
/// leaves the derived ones empty: the constructor from source of torch.classes.cudajit.Kernel.
template <class F>
auto with_state_args(F f) {
  return detail::StateArgs<detail::StateArgTypes>::bind(std::move(f));
}

}  // namespace torch_cudajit
