// torch_cudajit: the arguments of one cudajit::launch call, built from values in parameter order.
// Each parameter's role (reflection.h, read from the kernel's definition) decides where its value
// goes: written tensors in the output slots, read-only tensors in `inputs`, numbers in `ints` and
// `floats` with their kinds. kernel.op's eager launcher (python/launchers.cpp) and the C++ and
// TorchScript short forms (launch_through_op) fill one; the traced Python launcher (_op.py)
// builds the same lists while tracing.
#pragma once

#include "kernel_object.h"

#include <c10/util/SmallVector.h>

#include <optional>
#include <utility>

namespace torch_cudajit {

/// True for a 0-d floating-point CPU tensor: what a float parameter takes in place of a number
/// on the op path (its value is read when the op runs).
inline bool is_host_float(const at::Tensor& t) {
  return t.dim() == 0 && t.is_floating_point() && t.device().is_cpu();
}

/// One cudajit::launch call being built.
class OpCall {
 public:
  explicit OpCall(const c10::intrusive_ptr<KernelObject>& kernel);

  /// The role of the parameter the next value binds to.
  ParamRole next_role() const;
  /// True when every parameter has its value.
  bool complete() const { return next_ == roles_.size(); }
  /// A tensor for the next parameter; throws c10::TypeError when it takes a number.
  void tensor(const at::Tensor& t);
  /// A number for the next parameter; throws c10::TypeError when it takes a tensor.
  void number(const c10::Scalar& s);
  /// A value for the next number or `auto` parameter: a number, a tensor for an `auto`
  /// parameter, or a 0-d floating-point CPU tensor for a float, read when the op runs (a
  /// learning rate kept in a tensor). Throws c10::TypeError for anything else.
  void value(const c10::IValue& v);
  /// Launches through the op; throws c10::TypeError when values are missing.
  void launch(c10::SymIntArrayRef grid, c10::SymIntArrayRef block, c10::SymInt shared_mem);

 private:
  /// The parameter the next value binds to, for messages.
  const Param& next_param() const;

  c10::intrusive_ptr<KernelObject> kernel_;
  const std::vector<ParamRole>& roles_;
  size_t next_ = 0;
  std::optional<at::Tensor> slots_[kOpOutputSlots];
  size_t n_slots_ = 0;
  c10::SmallVector<at::Tensor, 4> more_, inputs_;
  OpNumbers numbers_;
  c10::SmallVector<std::pair<size_t, at::Tensor>, 2> float_tensors_;  ///< (number index, tensor)
};

}  // namespace torch_cudajit
