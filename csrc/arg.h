// torch_cudajit: launch arguments. Every launch path (the Python launchers, the cudajit op, the
// C++ Kernel) turns its values into Args with the converters here, the only place a number or
// a tensor becomes a launch argument.
#pragma once

#include "specialization.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Scalar.h>

#include <cstddef>
#include <cstdint>

namespace torch_cudajit {

/// One launch argument, converted from Python, from an IValue or from the op's numbers.
struct Arg {
  ArgKind kind = ArgKind::kNone;
  const at::Tensor* tensor = nullptr;
  int64_t i = 0;            ///< kInt, kBool
  uint64_t u = 0;           ///< kInt values in [2^63, 2^64) (with big_unsigned); kAddress
  bool big_unsigned = false;
  double d = 0;             ///< kFloat; real part of kComplex
  double imag = 0;          ///< imaginary part of kComplex
  const void* bytes = nullptr;  ///< kBytes: raw parameter bytes from an extension
  size_t nbytes = 0;
  bool is_none = false;  ///< kAddress from None (u == 0), for messages
  /// kFloat read from a 0-d floating-point CPU tensor (tensor_arg), for messages.
  const at::Tensor* host_scalar = nullptr;
};

/// The TypeCode of a torch dtype; throws c10::TypeError for dtypes kernels cannot take.
TypeCode type_code_of(c10::ScalarType dtype);

/// A launch argument holding a number (bool, integer, floating or complex).
Arg scalar_arg(const c10::Scalar& s);

/// A launch argument holding a tensor. A 0-d floating-point CPU tensor that is not pinned is
/// read as a float, as the op path reads it (a learning rate kept in a tensor), so eager
/// launches, the op and the C++ API agree; no kernel parameter takes such a tensor's memory.
Arg tensor_arg(const at::Tensor& t);

/// A NULL pointer argument (None); only pointer parameters take it.
Arg null_pointer_arg();

/// Converts one IValue (tensor, int, float, bool, complex, None) to a launch argument; throws
/// c10::TypeError naming argument `position` for anything else.
Arg to_arg(const c10::IValue& value, size_t position);

namespace detail {
/// The name of an argument kind in messages ("tensor", "int", ...).
const char* kind_name(ArgKind k);
/// Throws c10::TypeError about parameter `i` of `decl`: "parameter 'x' (float*) of kernel 'k' "
/// followed by `what`.
[[noreturn]] void param_type_error(const KernelDecl& decl, size_t i, const std::string& what);
/// param_type_error's c10::ValueError twin, for a value of the right type that does not fit.
[[noreturn]] void param_value_error(const KernelDecl& decl, size_t i, const std::string& what);
}  // namespace detail

}  // namespace torch_cudajit
