// torch_cudajit: launch arguments (see arg.h).
#include "arg.h"

namespace torch_cudajit {

TypeCode type_code_of(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Bool: return TypeCode::kBool;
    case c10::ScalarType::Char: return TypeCode::kInt8;
    case c10::ScalarType::Byte: return TypeCode::kUInt8;
    case c10::ScalarType::Short: return TypeCode::kInt16;
    case c10::ScalarType::Int: return TypeCode::kInt32;
    case c10::ScalarType::Long: return TypeCode::kInt64;
    case c10::ScalarType::Half: return TypeCode::kHalf;
    case c10::ScalarType::BFloat16: return TypeCode::kBFloat16;
    case c10::ScalarType::Float: return TypeCode::kFloat;
    case c10::ScalarType::Double: return TypeCode::kDouble;
    case c10::ScalarType::ComplexFloat: return TypeCode::kComplexFloat;
    case c10::ScalarType::ComplexDouble: return TypeCode::kComplexDouble;
    case c10::ScalarType::UInt16: return TypeCode::kUInt16;
    case c10::ScalarType::UInt32: return TypeCode::kUInt32;
    case c10::ScalarType::UInt64: return TypeCode::kUInt64;
    default:
      TORCH_CHECK_TYPE(false, "torch_cudajit: tensors of dtype ", dtype,
                       " cannot be passed to kernels; supported dtypes are float16, bfloat16, "
                       "float32, float64, int8/16/32/64, uint8/16/32/64, bool, complex64 and "
                       "complex128.");
  }
}


Arg scalar_arg(const c10::Scalar& s) {
  Arg a;
  if (s.isBoolean()) {
    a.kind = ArgKind::kBool;
    a.i = s.toBool();
  } else if (s.isIntegral(/*includeBool=*/false)) {
    a.kind = ArgKind::kInt;
    a.i = s.toLong();
  } else if (s.isComplex()) {
    a.kind = ArgKind::kComplex;
    auto c = s.toComplexDouble();
    a.d = c.real();
    a.imag = c.imag();
  } else {
    a.kind = ArgKind::kFloat;
    a.d = s.toDouble();
  }
  return a;
}

Arg tensor_arg(const at::Tensor& t) {
  Arg a;
  if (t.defined() && t.dim() == 0 && t.is_cpu() && t.is_floating_point() && !t.is_pinned()) {
    a.kind = ArgKind::kFloat;
    a.d = t.item<double>();
    a.host_scalar = &t;
  } else {
    a.kind = ArgKind::kTensor;
    a.tensor = &t;
  }
  return a;
}

Arg null_pointer_arg() {
  Arg a;
  a.kind = ArgKind::kAddress;
  a.is_none = true;
  return a;
}

Arg to_arg(const c10::IValue& v, size_t position) {
  if (v.isTensor()) return tensor_arg(v.toTensor());
  if (v.isBool() || v.isInt() || v.isDouble() || v.isComplexDouble()) return scalar_arg(v.toScalar());
  if (v.isNone()) return null_pointer_arg();
  TORCH_CHECK_TYPE(false, "torch_cudajit: argument ", position, " is a ", v.tagKind(),
                   "; kernels take tensors, int, float, bool and complex values, and None "
                   "(NULL) for pointer parameters (add an extension to pass other types).");
}

namespace detail {

const char* kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::kTensor: return "tensor";
    case ArgKind::kInt: return "int";
    case ArgKind::kFloat: return "float";
    case ArgKind::kBool: return "bool";
    case ArgKind::kComplex: return "complex";
    case ArgKind::kBytes: return "extension bytes";
    case ArgKind::kAddress: return "address";
    case ArgKind::kTag: return "tag";
    case ArgKind::kNone: return "nothing";
  }
  return "?";
}

void param_type_error(const KernelDecl& decl, size_t i, const std::string& what) {
  const Param& p = decl.params[i];
  TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' (", p.type, ") of kernel '",
                   decl.name, "' ", what);
}

void param_value_error(const KernelDecl& decl, size_t i, const std::string& what) {
  const Param& p = decl.params[i];
  TORCH_CHECK_VALUE(false, "torch_cudajit: parameter '", p.name, "' (", p.type, ") of kernel '",
                    decl.name, "' ", what);
}

}  // namespace detail
}  // namespace torch_cudajit
