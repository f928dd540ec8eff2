// torch_cudajit: the specialization key and the code that instantiates a kernel for one key.
// A key is the target architecture plus one 4-byte ArgSig per kernel parameter (kind, dtype,
// rank, layout flags: contiguity, 16-byte alignment, 32-bit indexability), which the device
// header reads from cj::Layout<Flags>.
#pragma once

#include "cj/abi.h"
#include "reflection.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace torch_cudajit {

/// Scalar and element type codes, the values the device header's probes give
/// (cj::detail::type_code): cj/abi.h's TypeCodes.
enum class TypeCode : int8_t {
  kBool = cj::abi::kTypeBool,
  kInt8 = cj::abi::kTypeInt8,
  kUInt8 = cj::abi::kTypeUInt8,
  kInt16 = cj::abi::kTypeInt16,
  kUInt16 = cj::abi::kTypeUInt16,
  kInt32 = cj::abi::kTypeInt32,
  kUInt32 = cj::abi::kTypeUInt32,
  kInt64 = cj::abi::kTypeInt64,
  kUInt64 = cj::abi::kTypeUInt64,
  kHalf = cj::abi::kTypeHalf,
  kBFloat16 = cj::abi::kTypeBFloat16,
  kFloat = cj::abi::kTypeFloat,
  kDouble = cj::abi::kTypeDouble,
  kComplexFloat = cj::abi::kTypeComplexFloat,
  kComplexDouble = cj::abi::kTypeComplexDouble,
  kUnknown = cj::abi::kTypeUnknown,  ///< a type the plugin cannot convert a Python value to (user structs)
  kArray = cj::abi::kTypeArray,
  kPointer = cj::abi::kTypePointer,
};

/// What an argument is, as far as specialization is concerned.
enum class ArgKind : uint8_t {
  kNone = 0, kTensor, kInt, kFloat, kBool, kComplex, kBytes,
  /// A raw address for a pointer parameter: None (NULL) or a cj.DevicePointer. It carries no
  /// element type: the declaration or the other arguments decide the pointee, so its parameter
  /// is a non-deduced context of the deduction helper.
  kAddress,
  /// The value of a tag parameter (Param::tag): dtype kBool or kInt64, the value (-32768 to
  /// 32767) in rank (low byte) and flags (high byte).
  kTag,
};


/// Layout flag bits of a tensor argument, the bits of cj::Layout<Flags> (cj/abi.h: LayoutBits):
/// row-major contiguous, a 16-byte aligned data pointer (vector loads), every element offset
/// below 2^31 (32-bit index arithmetic).
enum LayoutFlags : uint8_t {
  kContiguousFlag = cj::abi::kLayoutContiguous,
  kAligned16Flag = cj::abi::kLayoutAligned16,
  kIndex32Flag = cj::abi::kLayoutIndex32,
};
constexpr uint8_t kKnownLayoutFlags = kContiguousFlag | kAligned16Flag | kIndex32Flag;

/// One argument's part of a specialization key.
struct ArgSig {
  ArgKind kind = ArgKind::kNone;
  TypeCode dtype = TypeCode::kUnknown;
  uint8_t rank = 0;
  uint8_t flags = 0;
  bool operator==(const ArgSig& o) const {
    return kind == o.kind && dtype == o.dtype && rank == o.rank && flags == o.flags;
  }
};
static_assert(sizeof(ArgSig) == 4, "ArgSig must stay one word");

/// The value a kTag ArgSig carries.
int16_t tag_value(const ArgSig& s);
/// Puts a tag value in an ArgSig (kind, dtype and the two value bytes).
void set_tag(ArgSig& s, bool is_bool, int16_t value);

/// Most parameters a kernel may have.
constexpr size_t kMaxParams = 64;

/// The specialization key: target architecture and one ArgSig per kernel parameter.
struct SpecKey {
  int32_t arch = 0;  ///< compute capability, e.g. 90
  uint32_t size = 0;
  std::array<ArgSig, kMaxParams> args{};

  bool operator==(const SpecKey& o) const {
    return arch == o.arch && size == o.size &&
           std::memcmp(args.data(), o.args.data(), size * sizeof(ArgSig)) == 0;
  }
  size_t hash() const {
    uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(arch);
    const auto* words = reinterpret_cast<const uint32_t*>(args.data());
    for (uint32_t i = 0; i < size; ++i) h = (h ^ words[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct SpecKeyHash {
  size_t operator()(const SpecKey& k) const { return k.hash(); }
};

/// Size in bytes of one element of a dtype code (0 for non-element codes).
size_t type_size(TypeCode code);
/// The C++ type NVRTC sees for an element type code ("float", "__half", ...).
const char* cpp_type_name(TypeCode code);
/// The name users see for a dtype code ("float32", "bfloat16", ...).
const char* dtype_name(TypeCode code);
/// A scalar parameter's declared type without a leading const (what type_code_of reads).
std::string scalar_type_of(const Param& p);
/// The dtype code of a C++ type written in a declaration, or kUnknown (e.g. a typedef).
TypeCode type_code_of(const std::string& cpp_type);
/// A CUDA vector type (float4, __half2, ...) as lanes of one element dtype.
struct VectorType {
  TypeCode element;
  uint8_t lanes;
};
/// The CUDA vector type named by a declared pointee type (`float4`, `const int2` without the
/// const, `__nv_bfloat162`), or nullptr. Complex types (cuComplex) are element types instead:
/// type_code_of maps them to complex64 / complex128.
const VectorType* vector_type_of(const std::string& cpp_type);
/// Whether a code is an integer type, and whether it is signed.
bool is_integer(TypeCode code);
bool is_signed_integer(TypeCode code);
bool is_floating(TypeCode code);
bool is_complex(TypeCode code);

/// What the compiler reported about one parameter of an instantiation: its type code, size and
/// alignment. For a pointer parameter (ParamKind::kPointer) the probe describes the pointee
/// instead (the pointer itself is always 8 bytes): its type code, and its size and alignment,
/// both 0 for void and incomplete types.
struct ParamProbe {
  TypeCode code = TypeCode::kUnknown;
  uint32_t size = 0;
  uint32_t align = 0;
};

/// Checks a key that did not come from make_key (a pickle, a TorchScript archive): as many
/// ArgSigs as `decl` has parameters, each kind, dtype code, rank and flag bit one that make_key
/// produces, and a plausible architecture. Throws ValueError naming the bad field and `origin`.
void check_key(const KernelDecl& decl, const SpecKey& key, const char* origin);

/// The declaration-side C++ type of an argument for the deduction helper.
std::string argument_cpp_type(const Param& param, const ArgSig& sig);
/// A readable signature, e.g. "(Array<float32, 2, contiguous>, Array<const float32, 1>, float)".
std::string describe_signature(const KernelDecl& decl, const SpecKey& key);

/// Explicit template arguments as a kernel's options hold them: leading positional ones
/// ("float, 4"), then named ones ("BLOCK=256"), comma-separated.
struct TemplateArguments {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;  ///< (parameter name, argument)
};

/// The namespaces around a kernel, as "a::b::" ("" at global scope).
std::string scope_of(const KernelDecl& d);
/// The lines that open and close the kernel's namespaces around generated code, where its
/// parameter types mean what they mean in its declaration ("namespace a {\n", "}\n"; both ""
/// at global scope).
std::pair<std::string, std::string> namespace_block(const KernelDecl& d);

/// Splits a template argument list; a top-level `NAME=value` part is named (`==` is not).
/// Throws c10::ValueError for a positional argument after a named one.
TemplateArguments split_template_args(const std::string& text);

/// What keeps `template_args` from instantiating `decl` ("" when nothing does): a named
/// argument that is no template parameter of it, or given twice, or one for a parameter pack;
/// or a template parameter that no argument names and none can deduce (it appears in no
/// parameter's type and has no default). The text is a complete message with what to do.
std::string template_args_problem(const KernelDecl& decl, const std::string& template_args);

/// The code appended to a source so that one kernel can be instantiated from keys. With
/// `key`, the helper is the one for that key alone, named with `suffix`: the parameters of
/// its kAddress arguments (None, cj.DevicePointer) become non-deduced contexts.
std::string deduction_helper(const KernelDecl& decl, const SpecKey* key = nullptr,
                             const std::string& suffix = "");

/// Text NVRTC needs to instantiate one kernel for one key.
struct Instantiation {
  std::string alias_definition;            ///< appended to the source
  std::string kernel_expression;           ///< name expression of the kernel itself
  /// One name expression per parameter; "" where the declaration and key fix what the probe
  /// would report (known_probes holds it then), which spares NVRTC the instantiation.
  std::vector<std::string> probe_expressions;
  std::vector<ParamProbe> known_probes;  ///< one per parameter, for the empty expressions
};

/// Builds the instantiation of `decl` for `key`; `tag` makes the alias name unique.
Instantiation make_instantiation(const KernelDecl& decl, const SpecKey& key,
                                 const std::string& template_args, const std::string& tag);
/// The tag of a kernel's instantiation for a key: 12 hex characters of a hash of the kernel's
/// name and the key's argument signatures. It depends on nothing else, so an instantiation is
/// spelled the same alone or among others in one compile, and its name expression identifies
/// it in either.
std::string instantiation_tag(const KernelDecl& decl, const SpecKey& key);

/// Parses a lowered probe name (mangled cj::detail::probe<Code, Size, Align>).
ParamProbe parse_probe(const std::string& lowered);
/// What a parameter's probe would report where the declaration and the argument fix it: a
/// cj::Array (its size follows from the rank), a pointer to a named dtype, a scalar of one.
/// False where only the compiler knows: template parameters, typedefs, vector types, structs.
bool known_probe(const Param& p, const ArgSig& s, ParamProbe& out);

/// The probes of a kernel whose code NVRTC never sees (prebuilt PTX, CUBIN or fatbin), read
/// from its declaration alone: pointers to dtypes, CUDA vector types or anything else (whose
/// pointee is then not checked), and arithmetic or complex scalars. Throws c10::ValueError
/// naming the parameter for what only a compiler could lay out: templates, cj::Array, `auto`
/// and struct scalars.
std::vector<ParamProbe> declared_probes(const KernelDecl& decl);

}  // namespace torch_cudajit
