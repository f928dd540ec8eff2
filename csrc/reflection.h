// torch_cudajit: reflection of kernel declarations. Finds every __global__ function in a CUDA
// C++ source, with its template header and each parameter's name, type, kind and constness, as
// the Clang front end (frontend.h) reads them: the plugin uses this for keyword arguments, error messages that name
// parameters, the read-only/written split of tensors, and the source rewrite that lets
// cj::Array parameters specialize on layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_cudajit {

/// How a kernel parameter binds to an argument.
enum class ParamKind {
  kArray,    ///< cj::Array<T, N[, Layout]>: a tensor, as an array descriptor
  kPointer,  ///< T* / const T*: a contiguous tensor, as its data pointer
  kScalar,   ///< any other type: a Python number, a 0-d tensor or extension-provided bytes
  kAuto,     ///< an abbreviated-template `auto` parameter: deduced from the argument
};

/// How a parameter takes part in a launch, from its declaration alone; every layer (the launch,
/// the op family, the Python API) reads it from param_role().
enum class ParamRole : uint8_t {
  kOutput,  ///< a tensor the kernel may write: a non-const Array or pointer
  kInput,   ///< a tensor the kernel only reads: const element type
  kScalar,  ///< a number (or extension bytes, or a 0-d tensor read as a number)
  kAuto,    ///< an `auto` parameter: a number, or a tensor the kernel may write
};

/// What an Array parameter's declaration says about its layout.
enum class LayoutMode {
  kDeduced,     ///< no layout written: the plugin adds a deduced layout template parameter
  kStrided,     ///< cj::Strided written: any tensor, indexed with runtime strides
  kContiguous,  ///< cj::Contiguous written: contiguous tensors only
  kOpaque,      ///< some other layout expression: passed through to the compiler
};

/// One reflected kernel parameter.
struct Param {
  std::string name;  ///< declared name, or "arg<i>" when unnamed
  std::string type;  ///< declared type, whitespace-normalized
  ParamKind kind = ParamKind::kScalar;
  bool is_const = false;  ///< element / pointee is const: the kernel only reads the tensor
  std::string element;    ///< Array element or pointee type without const (empty for scalars)
  std::string rank;       ///< Array rank expression
  LayoutMode layout = LayoutMode::kDeduced;
  std::string rewritten_type;  ///< the type after the layout rewrite (== type when unchanged)
  bool named = false;
  /// The element (pointee) type names a template parameter of the kernel (`T`, `Vec<T>`): the
  /// argument decides it. Otherwise it is a concrete type (`float`, `float4`, a typedef or a
  /// struct) that arguments are passed to as written.
  bool element_dependent = false;
  /// A tag: a scalar of type `integral_constant<T, v>` or `bool_constant<v>` (std:: or
  /// cuda::std::). It binds a Python bool or int whose value becomes part of the key, so that
  /// `v` is deduced from it.
  bool tag = false;
  // Offsets into the original source, used by the layout rewrite.
  size_t layout_insert = std::string::npos;  ///< position of the Array's closing '>'
};

/// The role of a parameter (see ParamRole).
ParamRole param_role(const Param& p);
/// True when a tensor bound to the parameter may be written: outputs, and `auto` parameters
/// (which deduce non-const elements even when declared `const auto`).
inline bool may_write(const Param& p) {
  const ParamRole r = param_role(p);
  return r == ParamRole::kOutput || r == ParamRole::kAuto;
}
/// The role's name in Python and messages: "output", "input", "scalar" or "auto".
const char* to_string(ParamRole r);

/// One template parameter of a kernel, as declared.
struct TemplateParam {
  std::string text;  ///< its declaration (`typename T = float`, `int BLOCK`)
  std::string name;  ///< "" when unnamed
  bool has_default = false;
  bool is_pack = false;  ///< `typename... Ts`
};

/// One reflected __global__ function.
struct KernelDecl {
  std::string name;
  std::string qualified_name;  ///< with its namespaces (`ns::saxpy`): how generated code names it
  std::string template_params;  ///< text between template < and >, empty if not a template
  bool is_template = false;
  bool is_extern_c = false;
  bool is_definition = false;
  std::vector<Param> params;
  size_t decl_begin = 0;                         ///< start of `template` or of the declaration
  size_t template_close = std::string::npos;     ///< position of the template header's '>'
  size_t line = 1;                               ///< 1-based line of the declaration
  /// The layout rewrite of every declaration of this kernel: (source offset, inserted text).
  std::vector<std::pair<size_t, std::string>> edits;

  /// Index of the parameter with this name, if any.
  std::optional<size_t> find_param(const std::string& name) const;
  /// Names of the kernel's own template parameters (`T`, `N` of `template <typename T, int N>`);
  /// unnamed ones are left out.
  std::vector<std::string> template_param_names() const;
  /// The kernel's own template parameters, in order (none for a non-template).
  std::vector<TemplateParam> template_parameters() const;
  /// Number of template parameters added by the layout rewrite.
  size_t layout_params() const;
  /// The template header of the rewritten kernel (with layout parameters), or "" if none.
  /// Layout parameters have no default, so that they are deduced even when explicit
  /// template arguments are given (`k<float>` leaves CjL0... to deduction).
  std::string rewritten_template_header() const;
};

struct FrontendReads;

/// Finds all __global__ functions of a source, preprocessed with `args` (frontend_args: the
/// options NVRTC gets). `reads`, when given, receives the files the front end read. Throws
/// c10::ValueError when a kernel name is declared with two different parameter lists
/// (overloaded kernels are not supported), and, with `refuse_errors`, when Clang finds an error
/// in a kernel's declaration (every header found): its message shows the lines concerned.
/// Without it, such parameters are classified from their text as written.
std::vector<KernelDecl> reflect_kernels(const std::string& source,
                                        const std::vector<std::string>& args = {},
                                        const std::string& filename = "kernel.cu",
                                        FrontendReads* reads = nullptr,
                                        bool refuse_errors = true);

/// Rewrites the source so that every cj::Array parameter without an explicit layout gains a
/// deduced layout template parameter (CjL<i>): applies the kernels' edits.
std::string rewrite_layouts(const std::string& source, const std::vector<KernelDecl>& kernels);

/// The identifiers of a C++ type or expression, in order (`const Vec<T, 4>` -> const, Vec, T).
std::vector<std::string> identifiers_of(const std::string& text);

/// The reflection of a source as bytes, kept with a pickled or scripted kernel so that loading
/// it (the C++ deploy loader included) needs no front end.
std::string serialize_kernels(const std::vector<KernelDecl>& kernels);
/// The inverse of serialize_kernels; throws c10::ValueError naming what is damaged.
std::vector<KernelDecl> deserialize_kernels(const std::string& bytes);

/// Human-readable parameter kind ("array", "pointer", "scalar", "auto").
const char* to_string(ParamKind kind);

}  // namespace torch_cudajit
