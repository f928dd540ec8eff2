// torch_cudajit: the specialization key of a call (see call_binder.h).
#include "call_binder.h"

#include "cuda_api.h"
#include "module.h"
#include "torch_device.h"

#include <algorithm>
#include <sstream>

namespace torch_cudajit {
namespace {

using detail::kind_name;

std::string shape_of(const at::Tensor& t) {
  std::ostringstream os;
  os << "shape " << t.sizes() << " and strides " << t.strides();
  return os.str();
}

// The alignment and index-width bits of a tensor's key: 16-byte aligned data, and every element
// offset (numel, and the farthest strided offset) below 2^31.
uint8_t layout_property_flags(const at::Tensor& t) {
  uint8_t flags = 0;
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) flags |= kAligned16Flag;
  constexpr int64_t kMax32 = 2147483647;
  bool fits = t.numel() <= kMax32;
  int64_t farthest = 0;
  for (int64_t d = 0; fits && d < t.dim(); ++d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size == 0) return flags | kIndex32Flag;  // nothing is ever indexed
    farthest += (size - 1) * (stride < 0 ? -stride : stride);
    fits = farthest <= kMax32 && stride <= kMax32;
  }
  return fits ? flags | kIndex32Flag : flags;
}

}  // namespace

void CallBinder::key_device(size_t i, const at::Tensor& t, int arch, int& dev,
                            size_t& dev_param) const {
  const auto& params = def_.decl().params;
  const Param& p = params[i];
  if (arch == 0 && !t.is_cuda()) {
    // Pinned host memory is mapped into the device's address space: pointer and Array
    // parameters reach it through its device address (launch, device_address).
    const bool addressable = p.kind != ParamKind::kScalar && t.is_cpu();
    if (!addressable || !t.is_pinned()) {
      const std::string what =
          "got a tensor on " + t.device().str() + "; kernels take CUDA tensors";
      if (!detail::driver_available()) {
        // Nothing launches in this process, wherever the tensor is: the driver's own message
        // says why and that compiling with arch= needs no GPU.
        std::string why;
        try {
          detail::driver();
        } catch (const c10::Error& e) {
          why = e.what_without_backtrace();
        }
        const std::string prefix = "torch_cudajit: ";
        if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
        detail::param_type_error(def_.decl(), i, what + ", and this process " + why);
      }
      detail::param_type_error(def_.decl(), i, what + ". Move it with .cuda() or .to('cuda')" +
                        (addressable ? ", or pin it with .pin_memory(): pointer and cj::Array "
                                       "parameters take pinned CPU tensors, which the kernel "
                                       "reads and writes in host memory."
                                     : "."));
    }
  } else if (arch == 0) {
    int d = t.get_device();
    if (dev < 0) {
      dev = d;
      dev_param = i;
    } else if (d != dev) {
      TORCH_CHECK_VALUE(false, "torch_cudajit: kernel '", def_.decl().name,
                        "' got tensors on two devices: parameter '", params[dev_param].name,
                        "' is on cuda:", dev, " and parameter '", p.name, "' is on cuda:", d,
                        ". Move them to one device.");
    }
  }
}

void CallBinder::key_tensor(size_t i, const at::Tensor& t, int arch, ArgSig& s, int& dev,
                            size_t& dev_param) const {
  const auto& params = def_.decl().params;
  const Param& p = params[i];
  if (!t.defined()) detail::param_type_error(def_.decl(), i, "got an undefined tensor.");
  key_device(i, t, arch, dev, dev_param);
  s.dtype = type_code_of(t.scalar_type());
  const TypeCode declared = def_.bindings()[i].element;
  if (p.kind == ParamKind::kArray || p.kind == ParamKind::kPointer) {
    if (declared != TypeCode::kUnknown && declared != s.dtype)
      detail::param_type_error(def_.decl(), i, std::string("takes ") + dtype_name(declared) +
                        " elements, got a tensor of dtype " + dtype_name(s.dtype) + ".");
  }
  if (const VectorType* v = def_.bindings()[i].vector) {
    if (v->element != s.dtype)
      detail::param_type_error(def_.decl(), i, "points to " + p.element + ", " + std::to_string(v->lanes) + " lane(s) of " +
                        dtype_name(v->element) + "; got a tensor of dtype " +
                        dtype_name(s.dtype) + ". Pass a " + dtype_name(v->element) +
                        " tensor whose size is a multiple of " + std::to_string(v->lanes) +
                        " elements.");
  }
  switch (p.kind) {
    case ParamKind::kArray:
    case ParamKind::kAuto: {
      int64_t rank = t.dim();
      if (def_.bindings()[i].rank >= 0 && def_.bindings()[i].rank != rank)
        detail::param_type_error(def_.decl(), i, "takes a tensor of rank " + p.rank + ", got rank " +
                          std::to_string(rank) + " (" + shape_of(t) + ").");
      if (rank > 16) detail::param_type_error(def_.decl(), i, "got a tensor of rank " + std::to_string(rank) + "; at most 16 is supported.");
      s.rank = static_cast<uint8_t>(rank);
      bool contiguous = t.is_contiguous();
      if (p.layout == LayoutMode::kContiguous && !contiguous)
        detail::param_type_error(def_.decl(), i, "is declared cj::Contiguous and needs a contiguous tensor, got " +
                          shape_of(t) + ". Call .contiguous() on it, or declare it cj::Strided.");
      if (p.layout == LayoutMode::kStrided) contiguous = false;
      if (p.layout == LayoutMode::kContiguous) contiguous = true;
      s.flags = (contiguous ? kContiguousFlag : 0) | layout_property_flags(t);
      break;
    }
    case ParamKind::kPointer:
      if (!t.is_contiguous())
        detail::param_type_error(def_.decl(), i, "is a raw pointer and needs a contiguous tensor, got " + shape_of(t) +
                          ". Call .contiguous() on it, or declare the parameter as a "
                          "cj::Array to take strided tensors.");
      break;
    case ParamKind::kScalar:
      if (p.tag)
        detail::param_type_error(def_.decl(), i, "is a tag and takes a Python bool or int (its value picks the "
                      "specialization), got a tensor.");
      if (t.dim() != 0)
        detail::param_type_error(def_.decl(), i, "is a scalar and takes a number or a 0-d tensor, got a tensor of " +
                          shape_of(t) + ".");
      break;
  }
}

void CallBinder::key_value(size_t i, const Arg& a, ArgSig& s) const {
  const Param& p = def_.decl().params[i];
  if (p.kind == ParamKind::kPointer && a.kind == ArgKind::kInt) {
    const std::string v = a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i);
    detail::param_type_error(def_.decl(), i, "takes a tensor, got the Python int " + v + ". A raw device address "
                  "must be wrapped: pass cj.DevicePointer(" + v + "), or None for a NULL "
                  "pointer.");
  }
  if (p.kind == ParamKind::kPointer)
    detail::param_type_error(def_.decl(), i, std::string("takes a tensor, None (NULL) or a cj.DevicePointer, got ") +
                      kind_name(a.kind) + ".");
  if (p.kind == ParamKind::kArray)
    detail::param_type_error(def_.decl(), i, std::string("takes a tensor, got ") + kind_name(a.kind) + ".");
  if (p.kind == ParamKind::kAuto && a.kind == ArgKind::kBytes)
    detail::param_type_error(def_.decl(), i, "is `auto`; extension bytes need a declared parameter type.");
  if (a.kind == ArgKind::kBytes) {
    // Bytes carry no type, so they cannot decide a template parameter the type names: another
    // parameter's type must name it (the argument there decides it), or template_args give it.
    const KernelDecl& d = def_.decl();
    const auto names = d.template_param_names();
    const TemplateArguments given = split_template_args(def_.options().template_args);
    for (const std::string& id : identifiers_of(p.type)) {
      const auto at = std::find(names.begin(), names.end(), id);
      if (at == names.end()) continue;
      bool decided = static_cast<size_t>(at - names.begin()) < given.positional.size();
      for (const auto& [name, value] : given.named) decided = decided || name == id;
      for (size_t j = 0; j < d.params.size() && !decided; ++j) {
        if (j == i) continue;
        for (const std::string& other : identifiers_of(d.params[j].type)) decided = decided || other == id;
      }
      if (!decided)
        detail::param_type_error(d, i, "has type `" + p.type + "`, which depends on template parameter `" +
                          id + "`; bytes cannot decide it, and no other parameter's type names it. "
                          "Give it in template_args (cj.jit(..., template_args={'" + id +
                          "': ...})), or declare a concrete type.");
    }
  }
  if (p.tag && a.kind != ArgKind::kBytes) {
    if (a.kind != ArgKind::kBool && a.kind != ArgKind::kInt)
      detail::param_type_error(def_.decl(), i, std::string("is a tag and takes a Python bool or int (its value picks "
                                "the specialization), got ") + kind_name(a.kind) + ".");
    if (a.big_unsigned || a.i < -32768 || a.i > 32767)
      detail::param_value_error(def_.decl(), i, "is a tag; its value must be in [-32768, 32767], got " +
                        (a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i)) + ".");
    set_tag(s, a.kind == ArgKind::kBool, static_cast<int16_t>(a.i));
  } else if (p.kind == ParamKind::kScalar) {
    const TypeCode declared = def_.bindings()[i].scalar;
    if (declared != TypeCode::kUnknown) {
      bool ok = true;
      if (a.kind == ArgKind::kFloat) ok = is_floating(declared) || is_complex(declared);
      if (a.kind == ArgKind::kComplex) ok = is_complex(declared);
      if (!ok) detail::param_type_error(def_.decl(), i, std::string("cannot take a Python ") + kind_name(a.kind) + ".");
    }
  }
}

SpecKey CallBinder::key(const Arg* args, size_t n, int* device, int arch) const {
  const auto& params = def_.decl().params;
  if (n != params.size()) {
    std::string names;
    for (const auto& p : params) names += (names.empty() ? "" : ", ") + p.name;
    TORCH_CHECK_TYPE(false, "torch_cudajit: kernel '", def_.decl().name, "' takes ", params.size(),
                     " argument(s) (", names, "), got ", n, ".");
  }
  SpecKey key;
  key.size = static_cast<uint32_t>(n);
  int dev = -1;
  size_t dev_param = 0;
  for (size_t i = 0; i < n; ++i) {
    const Param& p = params[i];
    // A 0-d CPU tensor read as a float (tensor_arg) is still a tensor to parameters that take
    // tensors (auto ones too, as on the op path).
    Arg as_tensor;
    if (args[i].host_scalar != nullptr && p.kind != ParamKind::kScalar) {
      as_tensor.kind = ArgKind::kTensor;
      as_tensor.tensor = args[i].host_scalar;
    }
    const Arg& a = as_tensor.tensor != nullptr ? as_tensor : args[i];
    ArgSig& s = key.args[i];
    s.kind = a.kind;
    if (a.kind == ArgKind::kTensor) {
      key_tensor(i, *a.tensor, arch, s, dev, dev_param);
    } else if (a.kind == ArgKind::kNone) {
      detail::param_type_error(def_.decl(), i, "got no value.");
    } else if (a.kind == ArgKind::kAddress) {
      if (p.kind != ParamKind::kPointer) {
        const std::string wants = p.kind == ParamKind::kScalar ? "a number" : "a tensor";
        detail::param_type_error(def_.decl(), i, std::string(a.is_none ? "got None" : "got a cj.DevicePointer") + "; only raw "
                      "pointer parameters (T*, const T*) take " +
                      (a.is_none ? "None (as a NULL pointer)" : "device addresses") +
                      ". Pass " + wants + ".");
      }
    } else {
      key_value(i, a, s);
    }
  }
  if (arch > 0) {
    key.arch = arch;
  } else {
    if (dev < 0) dev = detail::current_cuda_device();
    key.arch = device_limits(dev).compute_capability;
  }
  if (device) *device = dev;
  return key;
}

}  // namespace torch_cudajit
