// torch_cudajit: type codes, specialization keys and the generated deduction code.
#include "specialization.h"

#include "sha256.h"
#include "tokens.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace torch_cudajit {
namespace {

struct TypeInfo {
  const char* cpp;
  const char* dtype;
  size_t size;
};

const TypeInfo& info(TypeCode c) {
  static const TypeInfo table[] = {
      {"bool", "bool", 1},           {"signed char", "int8", 1},
      {"unsigned char", "uint8", 1}, {"short", "int16", 2},
      {"unsigned short", "uint16", 2}, {"int", "int32", 4},
      {"unsigned int", "uint32", 4}, {"long long", "int64", 8},
      {"unsigned long long", "uint64", 8}, {"__half", "float16", 2},
      {"__nv_bfloat16", "bfloat16", 2}, {"float", "float32", 4},
      {"double", "float64", 8},      {"::cj::complex<float>", "complex64", 8},
      {"::cj::complex<double>", "complex128", 16}};
  static const TypeInfo unknown{"?", "?", 0};
  int i = static_cast<int>(c);
  return i >= 0 && i <= 14 ? table[i] : unknown;
}

std::string strip_std(std::string t) {
  for (const char* p : {"::std::", "std::", "::"})
    if (t.rfind(p, 0) == 0) return t.substr(std::string(p).size());
  return t;
}

}  // namespace

size_t type_size(TypeCode code) { return info(code).size; }
const char* cpp_type_name(TypeCode code) { return info(code).cpp; }
const char* dtype_name(TypeCode code) { return info(code).dtype; }

bool is_integer(TypeCode c) { return c >= TypeCode::kInt8 && c <= TypeCode::kUInt64; }
bool is_signed_integer(TypeCode c) {
  return c == TypeCode::kInt8 || c == TypeCode::kInt16 || c == TypeCode::kInt32 ||
         c == TypeCode::kInt64;
}
bool is_floating(TypeCode c) { return c >= TypeCode::kHalf && c <= TypeCode::kDouble; }
bool is_complex(TypeCode c) {
  return c == TypeCode::kComplexFloat || c == TypeCode::kComplexDouble;
}

std::string scalar_type_of(const Param& p) {
  return p.type.rfind("const ", 0) == 0 ? p.type.substr(6) : p.type;
}

TypeCode type_code_of(const std::string& cpp_type) {
  static const std::map<std::string, TypeCode> names = {
      {"bool", TypeCode::kBool},
      {"char", TypeCode::kInt8}, {"signed char", TypeCode::kInt8}, {"int8_t", TypeCode::kInt8},
      {"unsigned char", TypeCode::kUInt8}, {"uint8_t", TypeCode::kUInt8},
      {"short", TypeCode::kInt16}, {"short int", TypeCode::kInt16},
      {"signed short", TypeCode::kInt16}, {"int16_t", TypeCode::kInt16},
      {"unsigned short", TypeCode::kUInt16}, {"uint16_t", TypeCode::kUInt16},
      {"int", TypeCode::kInt32}, {"signed", TypeCode::kInt32}, {"signed int", TypeCode::kInt32},
      {"int32_t", TypeCode::kInt32},
      {"unsigned", TypeCode::kUInt32}, {"unsigned int", TypeCode::kUInt32},
      {"uint32_t", TypeCode::kUInt32},
      {"long", TypeCode::kInt64}, {"long int", TypeCode::kInt64},
      {"long long", TypeCode::kInt64}, {"long long int", TypeCode::kInt64},
      {"int64_t", TypeCode::kInt64}, {"ptrdiff_t", TypeCode::kInt64},
      {"unsigned long", TypeCode::kUInt64}, {"unsigned long long", TypeCode::kUInt64},
      {"uint64_t", TypeCode::kUInt64}, {"size_t", TypeCode::kUInt64},
      {"__half", TypeCode::kHalf}, {"half", TypeCode::kHalf},
      {"__nv_bfloat16", TypeCode::kBFloat16}, {"nv_bfloat16", TypeCode::kBFloat16},
      {"float", TypeCode::kFloat}, {"double", TypeCode::kDouble},
      {"cj::complex<float>", TypeCode::kComplexFloat},
      {"complex<float>", TypeCode::kComplexFloat},
      {"cj::complex<double>", TypeCode::kComplexDouble},
      {"complex<double>", TypeCode::kComplexDouble},
      // CUDA's and CCCL's complex types share torch's layout: (real, imaginary), aligned to
      // their own size. cuComplex is cuFloatComplex, a float2.
      {"cuComplex", TypeCode::kComplexFloat}, {"cuFloatComplex", TypeCode::kComplexFloat},
      {"cuDoubleComplex", TypeCode::kComplexDouble},
      {"thrust::complex<float>", TypeCode::kComplexFloat},
      {"thrust::complex<double>", TypeCode::kComplexDouble},
      {"cuda::std::complex<float>", TypeCode::kComplexFloat},
      {"cuda::std::complex<double>", TypeCode::kComplexDouble},
      {"c10::complex<float>", TypeCode::kComplexFloat},
      {"c10::complex<double>", TypeCode::kComplexDouble}};
  auto it = names.find(strip_std(cpp_type));
  return it == names.end() ? TypeCode::kUnknown : it->second;
}

const VectorType* vector_type_of(const std::string& cpp_type) {
  static const std::map<std::string, VectorType> table = [] {
    std::map<std::string, VectorType> t;
    // CUDA's vector_types.h: <base><lanes> for lanes 1 to 4, with the element type of base.
    const std::pair<const char*, TypeCode> bases[] = {
        {"char", TypeCode::kInt8},       {"uchar", TypeCode::kUInt8},
        {"short", TypeCode::kInt16},     {"ushort", TypeCode::kUInt16},
        {"int", TypeCode::kInt32},       {"uint", TypeCode::kUInt32},
        {"long", TypeCode::kInt64},      {"ulong", TypeCode::kUInt64},
        {"longlong", TypeCode::kInt64},  {"ulonglong", TypeCode::kUInt64},
        {"float", TypeCode::kFloat},     {"double", TypeCode::kDouble}};
    for (const auto& b : bases)
      for (uint8_t lanes = 1; lanes <= 4; ++lanes)
        t[b.first + std::to_string(lanes)] = {b.second, lanes};
    // CUDA 13's explicitly aligned 4-lane 64-bit types.
    for (const char* b : {"long4", "ulong4", "longlong4", "ulonglong4", "double4"})
      for (const char* a : {"_16a", "_32a"}) t[std::string(b) + a] = t[b];
    t["__half2"] = t["half2"] = {TypeCode::kHalf, 2};
    t["__nv_bfloat162"] = t["nv_bfloat162"] = {TypeCode::kBFloat16, 2};
    return t;
  }();
  std::string name = cpp_type;
  if (name.rfind("::", 0) == 0) name = name.substr(2);
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

void check_key(const KernelDecl& decl, const SpecKey& key, const char* origin) {
  TORCH_CHECK_VALUE(key.arch >= 30 && key.arch < 1000, "torch_cudajit: ", origin, " of kernel '",
                    decl.name, "' targets compute capability ", key.arch,
                    ", which is not one (expected e.g. 90 for sm_90); it is damaged.");
  TORCH_CHECK_VALUE(key.size == decl.params.size(), "torch_cudajit: ", origin, " of kernel '",
                    decl.name, "' has ", key.size, " parameter(s), but the kernel has ",
                    decl.params.size(), "; it belongs to another kernel or is damaged.");
  for (uint32_t i = 0; i < key.size; ++i) {
    const ArgSig& s = key.args[i];
    const auto kind = static_cast<unsigned>(s.kind);
    const auto code = static_cast<int>(s.dtype);
    auto fail = [&](const std::string& what) {
      TORCH_CHECK_VALUE(false, "torch_cudajit: ", origin, " of kernel '", decl.name,
                        "' is damaged: parameter '", decl.params[i].name, "' has ", what, ".");
    };
    if (kind < static_cast<unsigned>(ArgKind::kTensor) || kind > static_cast<unsigned>(ArgKind::kTag))
      fail("argument kind " + std::to_string(kind) + " (expected 1 to 8)");
    if (s.kind == ArgKind::kTag && !decl.params[i].tag)
      fail("a tag value, which only integral_constant and bool_constant parameters take");
    if (s.kind == ArgKind::kAddress && decl.params[i].kind != ParamKind::kPointer)
      fail("an address (None or cj.DevicePointer), which only pointer parameters take");
    if (code < static_cast<int>(TypeCode::kPointer) || code > static_cast<int>(TypeCode::kComplexDouble))
      fail("dtype code " + std::to_string(code));
    if (s.kind == ArgKind::kTensor) {
      if (code < 0) fail("a tensor of dtype code " + std::to_string(code));
      if (s.rank > 16) fail("rank " + std::to_string(s.rank) + " (at most 16)");
      if ((s.flags & ~kKnownLayoutFlags) != 0) fail("layout flags " + std::to_string(s.flags));
    } else if (s.kind == ArgKind::kTag) {
      if (s.dtype != TypeCode::kBool && s.dtype != TypeCode::kInt64)
        fail("a tag of dtype code " + std::to_string(code));
    } else if (s.rank != 0 || s.flags != 0 || s.dtype != TypeCode::kUnknown) {
      fail("a dtype, rank or layout flags on a non-tensor argument");
    }
  }
}

int16_t tag_value(const ArgSig& s) {
  return static_cast<int16_t>(static_cast<uint16_t>(s.rank) | (static_cast<uint16_t>(s.flags) << 8));
}

void set_tag(ArgSig& s, bool is_bool, int16_t value) {
  s.kind = ArgKind::kTag;
  s.dtype = is_bool ? TypeCode::kBool : TypeCode::kInt64;
  const auto bits = static_cast<uint16_t>(value);
  s.rank = static_cast<uint8_t>(bits & 0xff);
  s.flags = static_cast<uint8_t>(bits >> 8);
}

namespace {
// A tag parameter's type with its value argument set: `std::bool_constant<B>` and true give
// `std::bool_constant<true>`, `cuda::std::integral_constant<int, N>` and 3 give `...<int, 3>`.
std::string tag_type(const Param& p, const ArgSig& s) {
  const std::string& t = p.type;
  const size_t open = t.find('<');
  size_t close = std::string::npos, last_comma = open;
  int depth = 0;
  for (size_t i = open; open != std::string::npos && i < t.size(); ++i) {
    if (t[i] == '<' || t[i] == '(') ++depth;
    if (t[i] == ',' && depth == 1) last_comma = i;
    if ((t[i] == '>' || t[i] == ')') && --depth == 0) {
      close = i;
      break;
    }
  }
  TORCH_INTERNAL_ASSERT(close != std::string::npos, "tag parameter type without arguments: ", t);
  const int16_t v = tag_value(s);
  const std::string value = s.dtype == TypeCode::kBool ? (v ? "true" : "false")
                            : v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
  return t.substr(0, last_comma + 1) + (last_comma == open ? "" : " ") + value + t.substr(close);
}
}  // namespace

std::string argument_cpp_type(const Param& p, const ArgSig& s) {
  switch (s.kind) {
    case ArgKind::kTag: return tag_type(p, s);
    case ArgKind::kInt: return "long long";
    case ArgKind::kFloat: return "double";
    case ArgKind::kBool: return "bool";
    // A complex parameter of another library's type (thrust::complex<T>, cuda::std::complex<T>,
    // cuDoubleComplex) takes the value as its own type: its layout is torch's.
    case ArgKind::kComplex:
      return is_complex(type_code_of(scalar_type_of(p))) ? scalar_type_of(p) : "::cj::complex<double>";
    case ArgKind::kBytes: return p.type;
    // Converts to any pointer; its parameter is a non-deduced context (deduction_helper).
    case ArgKind::kAddress: return "decltype(nullptr)";
    case ArgKind::kNone: TORCH_INTERNAL_ASSERT(false, "argument without a kind");
    case ArgKind::kTensor: break;
  }
  // A concrete declared element type is used as written (e.g. `long` for an int64 tensor). A
  // pointer's concrete pointee is used as written even when it is no dtype (float4, a struct,
  // a typedef): the probe of its pointee then tells the launch what to check.
  const bool as_written = type_code_of(p.element) == s.dtype ||
                          (p.kind == ParamKind::kPointer && !p.element_dependent && !p.element.empty());
  std::string elem = as_written ? p.element : cpp_type_name(s.dtype);
  std::string cv = p.is_const ? "const " : "";
  // A layout the declaration fixes wins over the tensor's own.
  // (cj::Strided and cj::Contiguous are Layout<0> and Layout<1> exactly.)
  int flags = s.flags;
  if (p.kind == ParamKind::kArray && p.layout == LayoutMode::kStrided) flags = 0;
  if (p.kind == ParamKind::kArray && p.layout == LayoutMode::kContiguous) flags = kContiguousFlag;
  std::string layout = "::cj::Layout<" + std::to_string(flags) + ">";
  switch (p.kind) {
    case ParamKind::kArray:
      return "::cj::Array<" + cv + elem + ", " + std::to_string(s.rank) + ", " + layout + ">";
    case ParamKind::kAuto:
      return "::cj::Array<" + elem + ", " + std::to_string(s.rank) + ", " + layout + ">";
    case ParamKind::kPointer: return cv + elem + "*";
    case ParamKind::kScalar: return cpp_type_name(s.dtype);
  }
  return "";
}

std::string describe_signature(const KernelDecl& decl, const SpecKey& key) {
  std::ostringstream os;
  os << "(";
  for (uint32_t i = 0; i < key.size; ++i) {
    if (i) os << ", ";
    const ArgSig& s = key.args[i];
    const Param& p = decl.params[i];
    switch (s.kind) {
      case ArgKind::kInt: os << "int"; break;
      case ArgKind::kFloat: os << "float"; break;
      case ArgKind::kBool: os << "bool"; break;
      case ArgKind::kComplex: os << "complex"; break;
      case ArgKind::kBytes: os << p.type; break;
      case ArgKind::kAddress: os << "address"; break;
      case ArgKind::kTag: os << tag_type(p, s); break;
      case ArgKind::kNone: os << "?"; break;
      case ArgKind::kTensor: {
        std::string cv = p.is_const ? "const " : "";
        if (p.kind == ParamKind::kPointer && vector_type_of(p.element) != nullptr)
          os << cv << p.element << "*";
        else if (p.kind == ParamKind::kPointer)
          os << cv << dtype_name(s.dtype) << "*";
        else if (p.kind == ParamKind::kScalar)
          os << dtype_name(s.dtype);
        else
          os << "Array<" << cv << dtype_name(s.dtype) << ", " << int(s.rank) << ", "
             << ((s.flags & kContiguousFlag) ? "contiguous" : "strided")
             // The usual case (aligned, 32-bit offsets) is left unsaid.
             << ((s.flags & kAligned16Flag) ? "" : ", unaligned")
             << ((s.flags & kIndex32Flag) ? "" : ", 64-bit index") << ">";
      }
    }
  }
  os << ")";
  return os.str();
}

namespace {
// __grid_constant__ is only allowed on __global__ parameters, not on the helper's.
std::string helper_type(const std::string& type) {
  std::string out = type;
  const std::string q = "__grid_constant__";
  for (size_t pos; (pos = out.find(q)) != std::string::npos;) out.erase(pos, q.size());
  return out;
}
}  // namespace

std::string scope_of(const KernelDecl& d) {
  const std::string& q = d.qualified_name;
  return q.size() > d.name.size() ? q.substr(0, q.size() - d.name.size()) : "";
}

std::pair<std::string, std::string> namespace_block(const KernelDecl& d) {
  const std::string scope = scope_of(d);
  std::string open, close;
  for (size_t b = 0, e; (e = scope.find("::", b)) != std::string::npos; b = e + 2) {
    open += "namespace " + scope.substr(b, e - b) + " {\n";
    close += "}\n";
  }
  return {open, close};
}

namespace {

// The deduction helper of `d` under the template header `header`. Without `kernel_ref` it
// returns the Sig of the parameters' types; with it (named template arguments), a KSig that
// also holds the address of that instantiation of the kernel, as the helper's own template
// parameters spell it.
std::string helper_text(const KernelDecl& d, const SpecKey* key, const std::string& suffix,
                        const std::string& header, const std::string& kernel_ref) {
  // The helper goes in the kernel's namespace, where its parameter types mean what they mean
  // in the kernel's declaration.
  const auto [open, close] = namespace_block(d);
  // Two overloads: the preferred one makes scalars non-deduced, so that `T alpha` takes the T
  // of the tensors; the fallback deduces scalars from the Python value's type. An address
  // (None, cj.DevicePointer) has no element type, so its parameter is never deduced: `const T*
  // bias` takes the T of the other arguments.
  std::ostringstream os;
  os << open;
  for (int priority : {1, 0}) {
    os << header << "\n__device__ auto cj_detail_sig_" << d.name << suffix
       << "(::cj::detail::priority<" << priority << ">";
    for (size_t i = 0; i < d.params.size(); ++i) {
      const Param& p = d.params[i];
      const bool address = key != nullptr && i < key->size && key->args[i].kind == ArgKind::kAddress;
      os << ", ";
      // A tag's value deduces the kernel's own template parameter: never non-deduced.
      if ((priority == 1 && p.kind == ParamKind::kScalar && !p.tag) || address)
        os << "typename ::cj::detail::nondeduced<" << helper_type(p.rewritten_type) << ">::type";
      else
        os << helper_type(p.rewritten_type);
      os << " cj_p" << i;
    }
    os << ") -> ::cj::detail::";
    if (kernel_ref.empty())
      os << "Sig<";
    else
      os << "KSig<decltype(&" << kernel_ref << "), &" << kernel_ref << (d.params.empty() ? "" : ", ");
    for (size_t i = 0; i < d.params.size(); ++i) os << (i ? ", " : "") << "decltype(cj_p" << i << ")";
    os << ">;\n";
  }
  os << close;
  return os.str();
}

}  // namespace

std::string deduction_helper(const KernelDecl& d, const SpecKey* key, const std::string& suffix) {
  return helper_text(d, key, suffix, d.rewritten_template_header(), "");
}

TemplateArguments split_template_args(const std::string& text) {
  using detail::Token;
  using detail::split_top;
  using detail::tokenize;
  TemplateArguments out;
  const std::vector<Token> t = tokenize(text, 0, text.size());
  for (const auto& [b, e] : split_top(t, 0, t.size())) {
    if (b == e) continue;
    // NAME = value: an identifier, then a lone '=' (`N == 4` tokenizes as two '=').
    const bool named = e - b >= 3 && t[b].ident && t[b + 1].text == "=" && t[b + 2].text != "=";
    // A part's text runs from its first token to the end of its last, as written.
    const size_t to = t[e - 1].pos + t[e - 1].text.size();
    if (named) {
      out.named.emplace_back(t[b].text, text.substr(t[b + 2].pos, to - t[b + 2].pos));
    } else {
      const std::string part = text.substr(t[b].pos, to - t[b].pos);
      TORCH_CHECK_VALUE(out.named.empty(), "torch_cudajit: template_args '", text, "' gives the "
                        "positional argument '", part, "' after a named one; give the positional "
                        "arguments first (as C++ does), then NAME=value ones.");
      out.positional.push_back(part);
    }
  }
  return out;
}

std::string template_args_problem(const KernelDecl& d, const std::string& template_args) {
  const TemplateArguments given = split_template_args(template_args);
  const std::vector<TemplateParam> params = d.template_parameters();
  const std::string kernel = "torch_cudajit: kernel '" + d.qualified_name + "'";
  std::string names;
  for (const TemplateParam& p : params)
    if (!p.name.empty()) names += (names.empty() ? "'" : ", '") + p.name + "'";
  if (!given.named.empty())
    for (const TemplateParam& p : params)
      if (p.name.empty())
        return kernel + " has an unnamed template parameter ('" + p.text + "'), so template_args "
               "cannot name its parameters; give them all positionally.";
  std::vector<bool> bound(params.size(), false);
  for (size_t i = 0; i < params.size() && i < given.positional.size(); ++i) bound[i] = true;
  for (const auto& [name, value] : given.named) {
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    if (i == params.size())
      return kernel + " has no template parameter '" + name + "' (template_args names it)" +
             (names.empty() ? "; it is not a template." : "; its template parameters are " + names + ".");
    if (params[i].is_pack)
      return kernel + ": template_args names the parameter pack '" + name + "', which only "
             "positional arguments can give; give it positionally, after the parameters before it.";
    if (bound[i])
      return kernel + ": template_args gives its template parameter '" + name + "' twice (by "
             "position and by name); give it once.";
    bound[i] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const TemplateParam& p = params[i];
    if (bound[i] || p.has_default || p.is_pack || p.name.empty()) continue;
    bool deducible = false;
    for (const Param& q : d.params)
      for (const std::string& id : identifiers_of(q.type)) deducible = deducible || id == p.name;
    if (!deducible)
      return kernel + " has the template parameter '" + p.name + "', which appears in none of "
             "its parameters' types, so no argument can deduce it. Give it when defining the "
             "kernel: cj.jit(..., template_args={'" + p.name + "': ...}) (in C++, "
             "KernelOptions::template_args = \"" + p.name + "=...\"), or give it a default "
             "in the kernel's template header.";
  }
  return "";
}

std::string instantiation_tag(const KernelDecl& d, const SpecKey& key) {
  // 48 bits of a hash: unique among the instantiations of one compile in practice, and a clash
  // only fails that compile (a batch then compiles its entries alone).
  const std::string bytes(reinterpret_cast<const char*>(key.args.data()), sizeof(ArgSig) * key.size);
  return sha256_hex(d.name + '\0' + bytes).substr(0, 12);
}

namespace {

// The deduction helper's parts for named template arguments: its template header lists the
// given parameters first (in the kernel's order), so that explicit arguments reach them and
// the others are deduced; its KSig names the kernel with every parameter in the kernel's order.
struct NamedHelper {
  std::string header, explicit_args, kernel_ref;
};

NamedHelper named_helper(const KernelDecl& d, const TemplateArguments& given) {
  const std::vector<TemplateParam> params = d.template_parameters();
  std::vector<std::string> value(params.size());
  for (size_t i = 0; i < params.size() && i < given.positional.size(); ++i) value[i] = given.positional[i];
  for (const auto& [n, v] : given.named)
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].name == n) value[i] = v;
  std::vector<std::string> first, rest, refs;
  NamedHelper h;
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_INTERNAL_ASSERT(!params[i].name.empty(), "named template arguments with an unnamed "
                          "template parameter pass template_args_problem");
    (value[i].empty() ? rest : first).push_back(params[i].text);
    if (!value[i].empty()) h.explicit_args += (h.explicit_args.empty() ? "" : ", ") + value[i];
    refs.push_back(params[i].name + (params[i].is_pack ? "..." : ""));
  }
  for (size_t i = 0; i < d.layout_params(); ++i) {
    rest.push_back("class CjL" + std::to_string(i));
    refs.push_back("CjL" + std::to_string(i));
  }
  std::string list, ref;
  for (const auto& p : first) list += (list.empty() ? "" : ", ") + p;
  for (const auto& p : rest) list += (list.empty() ? "" : ", ") + p;
  for (const auto& r : refs) ref += (ref.empty() ? "" : ", ") + r;
  h.header = "template <" + list + ">";
  h.kernel_ref = scope_of(d) + d.name + "<" + ref + ">";
  return h;
}

}  // namespace

// The argument type of parameter `p` for argument `s`: argument_cpp_type, except for the bytes of
// a struct whose type depends on template parameters, and for a pointer
// to a template parameter given explicitly as a type that is no dtype (`State*` with State = a
// cuRAND state): the tensor's storage then holds such structs, and the pointer is passed as one
// to them (the launch checks the storage against the struct's size and alignment).
std::string pointee_as_given(const KernelDecl& d, const TemplateArguments& given, const Param& p,
                             const ArgSig& s) {
  std::string type = argument_cpp_type(p, s);
  if (s.kind == ArgKind::kBytes) {
    // Bytes of a type that names the kernel's template parameters (`interval_gpu<T>`): a value
    // that converts to whatever the parameter becomes (a non-deduced context of the helper).
    const std::vector<std::string> names = d.template_param_names();
    for (const std::string& id : identifiers_of(p.type))
      if (std::find(names.begin(), names.end(), id) != names.end()) return "::cj::detail::any_value";
    return type;
  }
  if (p.kind != ParamKind::kPointer || s.kind != ArgKind::kTensor || !p.element_dependent)
    return type;
  std::string value;
  const std::vector<TemplateParam> params = d.template_parameters();
  for (size_t i = 0; i < params.size() && i < given.positional.size(); ++i)
    if (params[i].name == p.element) value = given.positional[i];
  for (const auto& [name, v] : given.named)
    if (name == p.element) value = v;
  if (value.empty() || type_code_of(value) != TypeCode::kUnknown) return type;
  return (p.is_const ? "const " : "") + value + "*";
}

Instantiation make_instantiation(const KernelDecl& d, const SpecKey& key,
                                 const std::string& template_args, const std::string& tag) {
  TORCH_INTERNAL_ASSERT(key.size == d.params.size(), "key size ", key.size, " != params ",
                        d.params.size());
  Instantiation inst;
  const std::string alias = "cj_detail_spec_" + tag;
  std::ostringstream os;
  const TemplateArguments given = split_template_args(template_args);
  // A key with addresses has a helper of its own, whose address parameters are not deduced;
  // so has one with named template arguments, whose helper takes the given ones first.
  std::string helper_suffix, helper_args = template_args, kernel;
  for (uint32_t i = 0; i < key.size; ++i)
    if (key.args[i].kind == ArgKind::kAddress) helper_suffix = "_" + tag;
  const std::string name = scope_of(d) + d.name;
  if (!given.named.empty()) {
    helper_suffix = "_" + tag;
    const NamedHelper named = named_helper(d, given);
    os << helper_text(d, &key, helper_suffix, named.header, named.kernel_ref);
    helper_args = named.explicit_args;
    // The helper's KSig holds the kernel's address for the deduced and the given arguments.
    kernel = alias + "::kernel";
  } else {
    if (!helper_suffix.empty()) os << deduction_helper(d, &key, helper_suffix);
    // Explicit template arguments name the kernel too: parameters no argument mentions
    // (template <int N, ...>) cannot be deduced from the function type alone.
    kernel = "static_cast<" + alias + "::fn>(" +
             (template_args.empty() ? name : name + "<" + template_args + ">") + ")";
  }
  os << "using " << alias << " = decltype(" << scope_of(d) << "cj_detail_sig_" << d.name
     << helper_suffix;
  if (!helper_args.empty()) os << "<" << helper_args << ">";
  os << "(::cj::detail::priority<1>{}";
  for (size_t i = 0; i < d.params.size(); ++i)
    os << ", ::cj::detail::declval<" << pointee_as_given(d, given, d.params[i], key.args[i])
       << ">()";
  os << "));\n";
  inst.alias_definition = os.str();
  inst.kernel_expression = kernel;
  for (size_t i = 0; i < d.params.size(); ++i) {
    std::string t = alias + "::arg<" + std::to_string(i) + ">";
    inst.known_probes.push_back({});
    if (known_probe(d.params[i], key.args[i], inst.known_probes.back())) {
      inst.probe_expressions.emplace_back();
    } else if (d.params[i].kind == ParamKind::kPointer) {
      // A pointer is 8 bytes; what the host must check is the pointee (float4, a struct).
      const std::string e = "::cj::detail::pointee<" + t + ">";
      inst.probe_expressions.push_back("&::cj::detail::probe<" + e + "::code, " + e + "::size, " +
                                       e + "::align>");
    } else {
      inst.probe_expressions.push_back("&::cj::detail::probe<::cj::detail::type_code<" + t +
                                       ">::value, sizeof(" + t + "), alignof(" + t + ")>");
    }
  }
  return inst;
}

namespace {
// The probe of a dtype: its code, and its size as size and alignment.
ParamProbe dtype_probe(TypeCode code) {
  const auto size = static_cast<uint32_t>(type_size(code));
  return {code, size, size};
}

// The probe of an element type named in a declaration, where its name alone fixes what the
// device header's type_code reports: the arithmetic types and cj::complex (CUDA's and CCCL's
// complex types take complex tensors, but type_code does not know them).
bool named_dtype_probe(const std::string& name, ParamProbe& out) {
  const TypeCode code = type_code_of(name);
  if (code == TypeCode::kUnknown || (is_complex(code) && name.rfind("cj::complex<", 0) != 0)) return false;
  out = dtype_probe(code);
  return true;
}
}  // namespace

bool known_probe(const Param& p, const ArgSig& s, ParamProbe& out) {
  if (p.kind == ParamKind::kArray && s.kind == ArgKind::kTensor) {
    // cj::Array<T, N, L>: a pointer and N shapes and strides of 8 bytes (rank 0: the pointer).
    out = {TypeCode::kArray, cj::abi::array_bytes(s.rank), 8u};
    return true;
  }
  // Vector types, typedefs and structs are left to NVRTC.
  if (p.kind == ParamKind::kPointer && !p.element_dependent) return named_dtype_probe(p.element, out);
  if (p.kind == ParamKind::kScalar && !p.tag)
    return named_dtype_probe(scalar_type_of(p), out);
  return false;
}

ParamProbe parse_probe(const std::string& lowered) {
  // Itanium mangling of probe<Code, Size, Align>: ...IL<x>[n]<digits>EL<y><digits>EL<y><digits>EEE
  std::vector<long long> values;
  size_t i = lowered.find('I');
  while (i != std::string::npos && i < lowered.size()) {
    size_t l = lowered.find('L', i);
    if (l == std::string::npos || l + 2 >= lowered.size()) break;
    size_t j = l + 2;  // skip 'L' and the type letter
    bool neg = lowered[j] == 'n';
    if (neg) ++j;
    long long v = 0;
    size_t digits = 0;
    while (j < lowered.size() && std::isdigit(static_cast<unsigned char>(lowered[j]))) {
      v = v * 10 + (lowered[j] - '0');
      ++j;
      ++digits;
    }
    if (digits == 0) break;
    values.push_back(neg ? -v : v);
    i = j;
  }
  TORCH_INTERNAL_ASSERT(values.size() == 3, "unexpected probe name '", lowered, "'");
  ParamProbe p;
  p.code = static_cast<TypeCode>(values[0]);
  p.size = static_cast<uint32_t>(values[1]);
  p.align = static_cast<uint32_t>(values[2]);
  return p;
}

namespace {
// CUDA's alignment of a vector type (vector_types.h): 3-lane types align to their element, the
// 4-lane 64-bit ones to 16 bytes (32 for the _32a variants), all others to their own size.
uint32_t vector_alignment(const std::string& name, const VectorType& v) {
  const uint32_t elem = static_cast<uint32_t>(type_size(v.element));
  if (v.lanes == 3) return elem;
  if (v.lanes == 4 && elem == 8) return name.size() > 4 && name.compare(name.size() - 4, 4, "_32a") == 0 ? 32 : 16;
  return elem * v.lanes;
}
}  // namespace

std::vector<ParamProbe> declared_probes(const KernelDecl& decl) {
  auto refuse = [&](const std::string& what) {
    TORCH_CHECK_VALUE(false, "torch_cudajit: prebuilt kernel '", decl.name, "' ", what);
  };
  if (decl.is_template)
    refuse("is declared as a template; prebuilt code holds concrete instantiations, so declare "
           "the one instantiation the image holds with concrete types (and pass its lowered_name=).");
  std::vector<ParamProbe> probes;
  for (const Param& p : decl.params) {
    ParamProbe probe;
    if (p.kind == ParamKind::kPointer) {
      // The probe of a pointer describes its pointee (see make_instantiation).
      probe.code = type_code_of(p.element);
      if (probe.code != TypeCode::kUnknown) {
        probe = dtype_probe(probe.code);
      } else if (const VectorType* v = vector_type_of(p.element)) {
        probe.size = static_cast<uint32_t>(type_size(v->element)) * v->lanes;
        probe.align = vector_alignment(p.element, *v);
      }
    } else if (p.kind == ParamKind::kScalar) {
      probe.code = type_code_of(scalar_type_of(p));
      if (probe.code == TypeCode::kUnknown)
        refuse("has the parameter '" + p.name + "' of type `" + p.type + "`, whose size and "
               "alignment only a compiler knows; prebuilt kernels take pointers and arithmetic "
               "or complex scalars. Pass a struct through a pointer instead.");
      probe = dtype_probe(probe.code);
    } else {
      refuse("has the parameter '" + p.name + "' (" + p.type + ") of kind " + to_string(p.kind) +
             ", which needs the plugin's generated code; prebuilt kernels take pointers (T*, "
             "const T*) and arithmetic or complex scalars.");
    }
    probes.push_back(probe);
  }
  return probes;
}

}  // namespace torch_cudajit
