// torch_cudajit: the TorchScript kernel object and the binding of op arguments to kernel
// parameters (see kernel_object.h).
#include "kernel_object.h"

#include "../kernel_runtime.h"

#include <torch/custom_class.h>

#include <sstream>

namespace torch_cudajit {
namespace {

// The values of the script object's launch methods: None, or a list of numbers (ints, floats,
// bools, complex numbers) and, for `auto` parameters, tensors. launch_values_through_op checks
// each against its parameter.
std::vector<c10::IValue> values_of(const c10::IValue& v, const std::string& kernel) {
  if (v.isNone()) return {};
  TORCH_CHECK_TYPE(v.isList() || v.isTuple(), "torch_cudajit: kernel '", kernel, "': scalars "
                   "must be a list of the number arguments in parameter order, got ",
                   v.tagKind(), ".");
  return v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
}

}  // namespace

KernelObject::KernelObject(std::shared_ptr<const KernelDefinition> definition)
    : KernelObject(std::make_shared<KernelRuntime>(std::move(definition))) {}

KernelObject::KernelObject(std::shared_ptr<KernelRuntime> runtime)
    : def_(runtime->definition_ptr()), runtime_(std::move(runtime)) {}

KernelObject::KernelObject(std::string source, const std::string& name, KernelOptions options,
                           std::string filename)
    : KernelObject(KernelDefinition::from_source(std::move(source), name, std::move(options),
                                                 std::move(filename))) {}

KernelObject::KernelObject(const State& s) : KernelObject(KernelDefinition::from_state(s)) {}

KernelObject::State KernelObject::state_from(const c10::IValue& pickled) {
  TORCH_CHECK_VALUE(pickled.isString(), "torch_cudajit: a pickled cudajit.Kernel holds a ",
                    pickled.tagKind(), ", expected a string; the archive is damaged.");
  return KernelDefinition::decode(pickled.toStringRef());
}

namespace {

// The number a 0-d floating-point CPU tensor of scalar_tensors holds.
c10::Scalar scalar_of(const at::Tensor& t, size_t j, const std::string& kernel) {
  TORCH_CHECK_VALUE(t.dim() == 0 && t.device().is_cpu() && t.is_floating_point(),
                    "torch_cudajit: cudajit::launch of kernel '", kernel, "': scalar_tensors[", j,
                    "] must be a 0-d floating-point CPU tensor, got a ", t.scalar_type(),
                    " tensor of shape ", t.sizes(), " on ", t.device(), "; put the number in "
                    "`floats` and leave scalar_tensors[", j, "] None instead.");
  return c10::Scalar(t.item<double>());
}

}  // namespace

void OpNumbers::add(const c10::Scalar& s) {
  if (s.isBoolean()) {
    kinds += 'b';
    ints.push_back(s.toBool() ? 1 : 0);
  } else if (s.isIntegral(/*includeBool=*/false)) {
    const int64_t v = s.toLong();
    // `ints` is SymInt[] (symbolic under torch.compile), which holds ints down to -2^62.
    TORCH_CHECK_VALUE(c10::SymInt::check_range(v), "torch_cudajit: the op path takes ints from "
                      "-2^62 up, got ", v, "; pass such a value as a float, or in a tensor.");
    kinds += 'i';
    ints.push_back(v);
  } else if (s.isComplex()) {
    kinds += 'c';
    const auto c = s.toComplexDouble();
    floats.push_back(c.real());
    floats.push_back(c.imag());
  } else {
    kinds += 'f';
    floats.push_back(s.toDouble());
  }
}

namespace {

// The op's tensors and numbers checked against the kernel's parameters: the output slots filled
// in order, and as many outputs, inputs and numbers as the parameters' roles ask for.
void check_op_arguments(const KernelObject& k, const std::optional<at::Tensor>* const* slots,
                        at::TensorList more_outputs, at::TensorList inputs,
                        c10::string_view kinds, const ScalarTensors& scalar_tensors) {
  const std::string& name = k.name();
  // Outputs fill the slots in order; a gap (None before a tensor) would shift parameters.
  size_t n_slots = 0;
  while (n_slots < kOpOutputSlots && slots[n_slots]->has_value()) ++n_slots;
  for (size_t i = n_slots; i < kOpOutputSlots; ++i)
    TORCH_CHECK_VALUE(!slots[i]->has_value(), "torch_cudajit: cudajit::launch of kernel '", name,
                      "': out", i, " is given but out", n_slots,
                      " is None; fill the output slots in order.");
  TORCH_CHECK_VALUE(more_outputs.empty() || n_slots == kOpOutputSlots,
                    "torch_cudajit: cudajit::launch of kernel '", name,
                    "': more_outputs is used before out0..out3 are all given.");
  // Values are the number and `auto` parameters, one kind each; a tensor given to an `auto`
  // parameter ('t') counts with the outputs.
  size_t n_out = 0, n_in = 0, n_values = 0;
  for (ParamRole r : k.roles()) {
    if (r == ParamRole::kOutput) {
      ++n_out;
    } else if (r == ParamRole::kInput) {
      ++n_in;
    } else {
      if (r == ParamRole::kAuto && n_values < kinds.size() && kinds[n_values] == 't') ++n_out;
      ++n_values;
    }
  }
  const size_t got_out = n_slots + more_outputs.size();
  TORCH_CHECK_VALUE(got_out == n_out && inputs.size() == n_in && kinds.size() == n_values,
                    "torch_cudajit: cudajit::launch of kernel '", name, "' got ", got_out,
                    " output tensor(s), ", inputs.size(), " input tensor(s) and ", kinds.size(),
                    " number(s); the kernel takes ", n_out, ", ", n_in, " and ", n_values,
                    ". Its parameters:", k.describe_params());
  TORCH_CHECK_VALUE(!scalar_tensors || scalar_tensors->size() == kinds.size(),
                    "torch_cudajit: cudajit::launch of kernel '", name, "': scalar_tensors has ",
                    scalar_tensors ? scalar_tensors->size() : 0, " entries; it must be None or "
                    "have one per number (", kinds.size(), ").");
}

// The launch configuration of the op's grid, block and shared memory; block [0] is a forall
// launch of grid[0] tasks.
LaunchRequest op_request(c10::IntArrayRef grid, c10::IntArrayRef block, int64_t shared_mem,
                         const std::string& name) {
  LaunchRequest cfg;
  if (block.size() == 1 && block[0] == 0) {
    TORCH_CHECK_VALUE(grid.size() == 1 && grid[0] >= 1, "torch_cudajit: a forall launch of "
                      "kernel '", name, "' (block [0]) takes grid [ntasks] with ntasks >= 1, "
                      "got ", grid, ".");
    cfg.forall_tasks = grid[0];
  } else {
    cfg.grid = launch_dims(grid, "grid", name);
    cfg.block = launch_dims(block, "block", name);
  }
  cfg.shared_mem = shared_mem;
  return cfg;
}

}  // namespace

void KernelObject::launch(const std::optional<at::Tensor>* const* slots, at::TensorList more_outputs,
                          at::TensorList inputs, c10::IntArrayRef ints, c10::ArrayRef<double> floats,
                          c10::string_view kinds, c10::IntArrayRef grid, c10::IntArrayRef block,
                          int64_t shared_mem, const ScalarTensors& scalar_tensors) {
  check_op_arguments(*this, slots, more_outputs, inputs, kinds, scalar_tensors);
  Arg args[kMaxParams];
  size_t o = 0, in = 0, j = 0, next_int = 0, next_float = 0;
  // The next value of `ints` or `floats` (`need` of them) for number j, checked to exist.
  auto take = [&](size_t& next, size_t size, size_t need, const char* list) {
    TORCH_CHECK_VALUE(next + need <= size, "torch_cudajit: cudajit::launch of kernel '", name(),
                      "': kinds '", kinds, "' needs more entries in ", list, " than its ", size,
                      ".");
    next += need;
    return next - need;
  };
  // The next written tensor (out0..out3, then more_outputs) or the next read-only one.
  auto bind_tensor = [&](Arg& a, bool written) {
    a.kind = ArgKind::kTensor;
    if (!written) {
      a.tensor = &inputs[in++];
    } else {
      a.tensor = o < kOpOutputSlots ? &**slots[o] : &more_outputs[o - kOpOutputSlots];
      ++o;
    }
  };
  const auto& params = def_->decl().params;
  for (size_t i = 0; i < roles().size(); ++i) {
    const ParamRole role = roles()[i];
    if (role == ParamRole::kOutput || role == ParamRole::kInput) {
      bind_tensor(args[i], role == ParamRole::kOutput);
      continue;
    }
    const char kind = kinds[j];
    const std::optional<at::Tensor> t = scalar_tensors ? scalar_tensors->get(j) : std::nullopt;
    TORCH_CHECK_VALUE(!t || kind == 'f', "torch_cudajit: cudajit::launch of kernel '", name(),
                      "': scalar_tensors[", j, "] is given for a number of kind '", kind,
                      "'; only floats ('f') come as tensors.");
    if (kind == 't') {
      TORCH_CHECK_VALUE(role == ParamRole::kAuto, "torch_cudajit: cudajit::launch of kernel '", name(),
                        "': kinds[", j, "] is 't' (a tensor) for parameter '", params[i].name,
                        "', which takes a number; 't' is for auto parameters.");
      bind_tensor(args[i], /*written=*/true);
    } else if (kind == 'i' || kind == 'b') {
      const int64_t v = ints[take(next_int, ints.size(), 1, "ints")];
      args[i] = scalar_arg(kind == 'b' ? c10::Scalar(v != 0) : c10::Scalar(v));
    } else if (kind == 'f') {
      const double v = floats[take(next_float, floats.size(), 1, "floats")];
      args[i] = scalar_arg(t ? scalar_of(*t, j, name()) : c10::Scalar(v));
    } else if (kind == 'c') {
      const size_t at = take(next_float, floats.size(), 2, "floats");
      args[i] = scalar_arg(c10::Scalar(c10::complex<double>(floats[at], floats[at + 1])));
    } else {
      TORCH_CHECK_VALUE(false, "torch_cudajit: cudajit::launch of kernel '", name(), "': kinds[",
                        j, "] is '", kind, "'; expected 'i', 'b', 'f' or 'c' (or 't' for an "
                        "auto parameter given a tensor).");
    }
    ++j;
  }
  TORCH_CHECK_VALUE(next_int == ints.size() && next_float == floats.size(),
                    "torch_cudajit: cudajit::launch of kernel '", name(), "': kinds '", kinds,
                    "' uses ", next_int, " of the ", ints.size(), " ints and ", next_float,
                    " of the ", floats.size(), " floats given.");
  runtime_->launch(args, roles().size(), op_request(grid, block, shared_mem, name()));
}

void ensure_kernel_class() {
  using KernelPtr = c10::intrusive_ptr<KernelObject>;
  static const bool registered = [] {
    torch::class_<KernelObject>("cudajit", "Kernel")
        // torch.classes.cudajit.Kernel(source, name, options, std, debug, lineinfo,
        // template_args, cache, link, filename, cooperative): the State's fields but the
        // reflection, which the front end then reads.
        .def(torch::init(with_state_args(
            [](const KernelObject::State& s) { return c10::make_intrusive<KernelObject>(s); })))
        .def("name", [](const KernelPtr& k) { return k->name(); })
        .def("source", [](const KernelPtr& k) { return k->source(); })
        .def("fingerprint", [](const KernelPtr& k) { return k->fingerprint(); })
        .def("__eq__", [](const KernelPtr& a, const KernelPtr& b) {
          return a->fingerprint() == b->fingerprint();
        })
        // TorchScript's short form of a launch: tensors and numbers each in parameter order.
        // `scalars` is typed Any: TorchScript types a literal list of mixed numbers, [a, n],
        // as List[Union[float, int]], which a List[number] parameter refuses.
        .def("launch",
             [](const KernelPtr& k, std::vector<int64_t> grid, std::vector<int64_t> block,
                std::vector<at::Tensor> tensors, c10::IValue scalars, int64_t shared_mem) {
               launch_values_through_op(k, grid, block, tensors, values_of(scalars, k->name()),
                                        shared_mem);
             },
             "", {torch::arg("grid"), torch::arg("block"), torch::arg("tensors"),
                  torch::arg("scalars") = c10::IValue(), torch::arg("shared_mem") = 0})
        .def("launch_forall",
             [](const KernelPtr& k, int64_t ntasks, std::vector<at::Tensor> tensors,
                c10::IValue scalars, int64_t shared_mem) {
               TORCH_CHECK_VALUE(ntasks >= 1, "torch_cudajit: launch_forall of kernel '",
                                 k->name(), "': ntasks must be >= 1, got ", ntasks, ".");
               launch_values_through_op(k, {ntasks}, {0}, tensors,
                                        values_of(scalars, k->name()), shared_mem);
             },
             "", {torch::arg("ntasks"), torch::arg("tensors"),
                  torch::arg("scalars") = c10::IValue(), torch::arg("shared_mem") = 0})
        // torch.compile guards on this on every call: keep it small (no source text). The
        // keys are the attributes of the Python FakeKernel (torch_cudajit/_fake.py).
        .def("__obj_flatten__",
             [](const KernelPtr& k) {
               return std::make_tuple(std::make_tuple(std::string("kernel_name"), k->name()),
                                      std::make_tuple(std::string("key"), k->fingerprint()));
             })
        .def_pickle([](const KernelPtr& k) { return KernelObject::encode(k->state()); },
                    [](c10::IValue s) {
                      return c10::make_intrusive<KernelObject>(KernelObject::state_from(s));
                    });
    return true;
  }();
  (void)registered;
}

const c10::TypedOperatorHandle<LaunchOpSignature>& launch_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("cudajit::launch", "")
                             .typed<LaunchOpSignature>();
  return op;
}

}  // namespace torch_cudajit
