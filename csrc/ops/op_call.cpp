// torch_cudajit: a cudajit::launch call built in parameter order (see op_call.h), and the short
// forms of kernel_object.h that build one.
#include "op_call.h"

namespace torch_cudajit {

OpCall::OpCall(const c10::intrusive_ptr<KernelObject>& kernel)
    : kernel_(kernel), roles_(kernel->roles()) {}

ParamRole OpCall::next_role() const {
  TORCH_CHECK_TYPE(next_ < roles_.size(), "torch_cudajit: kernel '", kernel_->name(), "' takes ",
                   roles_.size(), " argument(s), got more.");
  return roles_[next_];
}

const Param& OpCall::next_param() const { return kernel_->definition().decl().params[next_]; }

void OpCall::tensor(const at::Tensor& t) {
  const ParamRole role = next_role();
  TORCH_CHECK_TYPE(role != ParamRole::kScalar, "torch_cudajit: parameter '", next_param().name,
                   "' of kernel '", kernel_->name(), "' takes a number on the op path, or a 0-d "
                   "floating-point CPU tensor; got a ", t.scalar_type(), " tensor of shape ",
                   t.sizes(), " on ", t.device(), ".");
  // `auto` parameters deduce non-const elements: a tensor given to one is written.
  if (role == ParamRole::kAuto) numbers_.add_tensor();
  if (role == ParamRole::kInput) inputs_.push_back(t);
  else if (n_slots_ < kOpOutputSlots) slots_[n_slots_++] = t;
  else more_.push_back(t);
  ++next_;
}

void OpCall::number(const c10::Scalar& s) {
  const ParamRole role = next_role();
  TORCH_CHECK_TYPE(role == ParamRole::kScalar || role == ParamRole::kAuto,
                   "torch_cudajit: parameter '", next_param().name, "' of kernel '",
                   kernel_->name(), "' takes a tensor; got a number.");
  numbers_.add(s);
  ++next_;
}

void OpCall::value(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (next_role() == ParamRole::kScalar && is_host_float(t)) {
      // A placeholder in `floats`; the op reads the tensor when it runs.
      float_tensors_.emplace_back(numbers_.kinds.size(), t);
      number(c10::Scalar(0.0));
    } else {
      tensor(t);
    }
    return;
  }
  TORCH_CHECK_TYPE(v.isInt() || v.isDouble() || v.isBool() || v.isComplexDouble(),
                   "torch_cudajit: parameter '", next_param().name, "' of kernel '",
                   kernel_->name(), "' takes a number (int, float, bool, complex) on the op path; "
                   "got a ", v.tagKind(), ".");
  number(v.toScalar());
}

void OpCall::launch(c10::SymIntArrayRef grid, c10::SymIntArrayRef block, c10::SymInt shared_mem) {
  TORCH_CHECK_TYPE(complete(), "torch_cudajit: kernel '", kernel_->name(), "' takes ",
                   roles_.size(), " argument(s), got ", next_, ".");
  ScalarTensors scalar_tensors;
  if (!float_tensors_.empty()) {
    c10::List<std::optional<at::Tensor>> list;
    list.resize(numbers_.kinds.size());
    for (const auto& [index, t] : float_tensors_) list.set(index, t);
    scalar_tensors = std::move(list);
  }
  launch_op().call(kernel_, slots_[0], slots_[1], slots_[2], slots_[3], at::TensorList(more_),
                   at::TensorList(inputs_), c10::fromIntArrayRefSlow(numbers_.ints),
                   c10::ArrayRef<double>(numbers_.floats), numbers_.kinds, grid, block,
                   std::move(shared_mem), scalar_tensors);
}

void launch_values_through_op(const c10::intrusive_ptr<KernelObject>& kernel,
                              c10::IntArrayRef grid, c10::IntArrayRef block,
                              at::TensorList tensors, c10::ArrayRef<c10::IValue> values,
                              int64_t shared_mem) {
  const auto& roles = kernel->roles();
  const auto& params = kernel->definition().decl().params;
  size_t n_tensors = 0;
  for (ParamRole r : roles) n_tensors += r == ParamRole::kOutput || r == ParamRole::kInput;
  TORCH_CHECK_TYPE(tensors.size() == n_tensors && values.size() == roles.size() - n_tensors,
                    "torch_cudajit: kernel '", kernel->name(), "' takes ", n_tensors,
                    " tensor(s) and ", roles.size() - n_tensors, " number(s), in parameter "
                    "order; got ", tensors.size(), " tensor(s) and ", values.size(),
                    " number(s). Its parameters:", kernel->describe_params());
  OpCall call(kernel);
  size_t t = 0, v = 0;
  for (size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == ParamRole::kOutput || roles[i] == ParamRole::kInput) {
      call.tensor(tensors[t++]);
      continue;
    }
    const c10::IValue& x = values[v];
    const bool fits = x.isTensor() ? roles[i] == ParamRole::kAuto || is_host_float(x.toTensor())
                                   : x.isInt() || x.isDouble() || x.isBool() || x.isComplexDouble();
    TORCH_CHECK_TYPE(fits, "torch_cudajit: kernel '", kernel->name(), "': scalars[", v,
                     "] (parameter '", params[i].name, "') is a ", x.tagKind(), "; scalars "
                     "takes numbers (int, float, bool, complex) and 0-d floating-point CPU "
                     "tensors for floats, tensors for auto parameters, and the other tensors go "
                     "in `tensors`.");
    call.value(x);
    ++v;
  }
  call.launch(c10::fromIntArrayRefSlow(grid), c10::fromIntArrayRefSlow(block),
              c10::SymInt(shared_mem));
}

void launch_through_op(const c10::intrusive_ptr<KernelObject>& kernel, c10::IntArrayRef grid,
                       c10::IntArrayRef block, at::TensorList tensors,
                       c10::ArrayRef<c10::Scalar> scalars, int64_t shared_mem) {
  c10::SmallVector<c10::IValue, 8> values(scalars.begin(), scalars.end());
  launch_values_through_op(kernel, grid, block, tensors, values, shared_mem);
}

}  // namespace torch_cudajit
