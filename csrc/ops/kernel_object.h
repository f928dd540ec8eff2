// torch_cudajit: the TorchScript custom class torch.classes.cudajit.Kernel. It holds a kernel's
// definition (definition.h), pickles as the definition's state, and shares the KernelRuntime
// that compiles and launches it. The cudajit::launch op takes one as its first argument.
#pragma once

#include "../definition.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Optional.h>
#include <c10/util/SmallVector.h>
#include <torch/custom_class.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace torch_cudajit {

class KernelRuntime;

// How the op family passes one kernel parameter follows its ParamRole (reflection.h): tensors
// the kernel may write go in the op's mutable output slots, read-only tensors (const element
// type) in `inputs`, and numbers in `ints` and `floats` (see OpNumbers). This is what lets the
// schema say which tensors are written. An `auto` parameter takes a number or a tensor; its
// kind in `kinds` says which ('t': a tensor, among the outputs).

/// The cudajit op's fixed output slots (out0..out3); further outputs go in `more_outputs`.
constexpr size_t kOpOutputSlots = 4;

/// The op's scalar_tensors argument: none, or one entry per number parameter, where a 0-d CPU
/// tensor replaces a float's placeholder in `floats`.
using ScalarTensors = std::optional<c10::List<std::optional<at::Tensor>>>;

/// Numbers in parameter order as the op takes them: `kinds` has one character per number or
/// `auto` parameter ('i', 'b' and 'f' for int, bool and float, 'c' for complex, 't' for a tensor
/// given to an `auto` parameter), and the values go in `ints` (ints and bools) and `floats`
/// (floats, and complex numbers as real and imaginary part).
struct OpNumbers {
  c10::SmallVector<int64_t, 8> ints;
  c10::SmallVector<double, 8> floats;
  std::string kinds;
  /// Appends one number.
  void add(const c10::Scalar& s);
  /// Marks the next `auto` parameter as taking a tensor (which goes in the op's tensor lists).
  void add_tensor() { kinds += 't'; }
};

/// A kernel as a TorchScript object: the KernelRuntime of a KernelDefinition, which it shares
/// with the Python Kernel (and any other holder of the definition).
class KernelObject : public torch::CustomClassHolder {
 public:
  /// What pickling keeps (KernelDefinition::State).
  using State = KernelDefinition::State;

  /// A new runtime of `definition`.
  explicit KernelObject(std::shared_ptr<const KernelDefinition> definition);
  /// The object of an existing runtime (the Python Kernel's), sharing its compiled code.
  explicit KernelObject(std::shared_ptr<KernelRuntime> runtime);
  /// A new definition: the kernel `name` of `source`, read with the options' preprocessor flags.
  KernelObject(std::string source, const std::string& name, KernelOptions options,
               std::string filename = "kernel.cu");
  explicit KernelObject(const State& state);
  /// What the object pickles as: the State in one string (KernelDefinition::encode). One
  /// string, not a tuple, because torch.compile and torch.export copy the object through
  /// Python, which cannot type the tuple's empty lists.
  static std::string encode(const State& state) { return KernelDefinition::encode(state); }
  /// The State of a pickled object: encode()'s string.
  static State state_from(const c10::IValue& pickled);

  const KernelDefinition& definition() const { return *def_; }
  State state() const { return def_->state(); }
  const std::string& name() const { return def_->name(); }
  const std::string& source() const { return def_->program().source(); }
  /// 16 hex characters of SHA-256 over the definition: equal kernels have equal fingerprints.
  const std::string& fingerprint() const { return def_->fingerprint(); }
  /// The role of each parameter, in declaration order.
  const std::vector<ParamRole>& roles() const { return def_->roles(); }
  KernelRuntime& runtime() { return *runtime_; }

  /// Binds the op's arguments to the parameters and launches on the current stream (see the
  /// schema in schemas.cpp for the numbers' encoding, scalar_tensors and block [0], a forall
  /// launch).
  void launch(const std::optional<at::Tensor>* const* slots, at::TensorList more_outputs,
              at::TensorList inputs, c10::IntArrayRef ints, c10::ArrayRef<double> floats,
              c10::string_view kinds, c10::IntArrayRef grid, c10::IntArrayRef block,
              int64_t shared_mem, const ScalarTensors& scalar_tensors);
  /// The parameters, one per line, with the role each takes on the op path (for messages).
  std::string describe_params() const { return def_->describe_params(); }

 private:
  std::shared_ptr<const KernelDefinition> def_;
  std::shared_ptr<KernelRuntime> runtime_;
};

/// Registers torch.classes.cudajit.Kernel once. Every registration block calls it first:
/// static initializers of different files run in no fixed order, and an impl's schema
/// inference needs the class to exist.
void ensure_kernel_class();

/// cudajit::launch as C++ callers and the op's own kernels see it (SymInt: grid and block may
/// be symbolic while tracing).
using LaunchOpSignature =
    void(const c10::intrusive_ptr<KernelObject>&, const std::optional<at::Tensor>&,
         const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
         const std::optional<at::Tensor>&, std::optional<at::TensorList>,
         std::optional<at::TensorList>, at::OptionalSymIntArrayRef, c10::ArrayRef<double>,
         c10::string_view, c10::SymIntArrayRef, c10::SymIntArrayRef, c10::SymInt,
         const ScalarTensors&);

/// Launches `kernel` through the cudajit::launch op with its arguments by kind: the tensors of
/// its tensor parameters in parameter order, and the values of its number and `auto`
/// parameters in parameter order. Which tensors the kernel writes comes from its declaration
/// (non-const parameters). `block` {0} asks for a forall launch of grid[0] tasks. This is the
/// short form for C++ programs.
void launch_through_op(const c10::intrusive_ptr<KernelObject>& kernel, c10::IntArrayRef grid,
                       c10::IntArrayRef block, at::TensorList tensors,
                       c10::ArrayRef<c10::Scalar> scalars, int64_t shared_mem = 0);
/// launch_through_op with `values` as IValues: numbers, or tensors for `auto` parameters. This
/// is the script object's `launch` method (and `launch_forall`'s).
void launch_values_through_op(const c10::intrusive_ptr<KernelObject>& kernel,
                              c10::IntArrayRef grid, c10::IntArrayRef block,
                              at::TensorList tensors, c10::ArrayRef<c10::IValue> values,
                              int64_t shared_mem);

/// The typed handle of cudajit::launch, looked up once: a C++ program launches through the op
/// family with launch_op().call(kernel, out0, ...).
const c10::TypedOperatorHandle<LaunchOpSignature>& launch_op();

}  // namespace torch_cudajit
