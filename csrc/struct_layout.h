// torch_cudajit: the layout of a struct a kernel takes by value, read by the Clang front end.
// A parameter of a user struct type (`Params p`, `interval_gpu<T> iv`) is passed as the struct's
// bytes; to build them from a Python object, a tuple or a dict, the plugin needs each field's
// offset, size and kind, which the front end computes for the source as NVRTC compiles it (its
// folders, macros, standard and architecture), template arguments substituted.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace torch_cudajit {

class KernelDefinition;
struct KernelDecl;

/// One field of a struct (or an element type of an array field).
struct FieldLayout {
  std::string name;
  size_t offset = 0;  ///< bytes from the start of the enclosing struct
  size_t size = 0;    ///< bytes of one element
  /// 'f' floating point, 'i' signed integer, 'u' unsigned integer, 'b' bool, 'h' __half,
  /// 'B' __nv_bfloat16, 'p' pointer, 'r' a struct (its `fields`), '?' anything else (bytes).
  char kind = '?';
  size_t count = 1;  ///< elements of an array field (1: no array)
  std::string type;  ///< the field's type as Clang spells it
  std::vector<FieldLayout> fields;  ///< a struct field's own fields
};

/// The layout of one struct type.
struct TypeLayout {
  std::string type;  ///< the type, template arguments substituted, as Clang spells it
  size_t size = 0;
  size_t align = 0;
  bool is_record = false;  ///< false: the type is no struct (a number, a typedef of one)
  std::vector<FieldLayout> fields;
};

/// The parameters of `decl` passed as structs by value: scalars whose type is no number, no tag
/// and no bare template parameter (`Params p`, `interval_gpu<T> iv`), in order.
std::vector<size_t> struct_params(const KernelDecl& decl);

/// The layout of the type of parameter `param` of `def`'s kernel. A type that names the
/// kernel's template parameters is read with them given by `def`'s explicit template arguments,
/// then by `deduced` (name -> C++ type or value, e.g. {"T": "float"}). Throws c10::ValueError
/// when a template parameter the type needs is given by neither, naming it, or when Clang
/// cannot lay the type out (its error).
TypeLayout param_layout(const KernelDefinition& def, size_t param,
                        const std::map<std::string, std::string>& deduced = {});

}  // namespace torch_cudajit
