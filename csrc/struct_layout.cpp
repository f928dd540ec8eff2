// torch_cudajit: struct layouts from the Clang front end (see struct_layout.h). The source is
// read with an alias of the parameter's type appended in the kernel's namespace (an alias
// template applied to the template arguments, for a type that names the kernel's template
// parameters), and Clang lays that alias's type out.
#include "struct_layout.h"

#include "definition.h"
#include "frontend.h"
#include "headers.h"
#include "libclang.h"
#include "specialization.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>

namespace torch_cudajit {
namespace detail {
namespace {

constexpr const char* kAlias = "cj_layout_type";
constexpr int kTypeBool = 3, kTypeCharU = 4, kTypeULongLong = 11, kTypeUInt128 = 12,
              kTypeCharS = 13, kTypeInt128 = 20, kTypeFloat = 21, kTypeLongDouble = 23,
              kTypeHalf = 31, kTypeFloat16 = 32, kTypePointer = 101, kTypeRecord = 105,
              kTypeEnum = 106, kCursorTypedefDecl = 20, kCursorTypeAliasDecl = 36;
constexpr int kVisitContinueField = 1;

void lay_out(CXType type, FieldLayout& out);

// The fields of a record type, in declaration order.
std::vector<FieldLayout> fields_of(CXType record) {
  struct Visit {
    std::vector<FieldLayout> fields;
  } v;
  libclang().clang_Type_visitFields(
      record,
      [](CXCursor field, CXClientData d) -> int {
        const auto& c = libclang();
        FieldLayout f;
        f.name = take(c.clang_getCursorSpelling(field));
        const long long bits = c.clang_Cursor_getOffsetOfField(field);
        f.offset = bits > 0 ? static_cast<size_t>(bits / 8) : 0;
        lay_out(c.clang_getCursorType(field), f);
        static_cast<Visit*>(d)->fields.push_back(std::move(f));
        return kVisitContinueField;
      },
      &v);
  return std::move(v.fields);
}

// The kind, size, element count and fields of a type.
void lay_out(CXType type, FieldLayout& out) {
  const auto& c = libclang();
  CXType t = c.clang_getCanonicalType(type);
  out.type = take(c.clang_getTypeSpelling(t));
  while (t.kind == kTypeConstantArray) {
    out.count *= static_cast<size_t>(std::max(0LL, c.clang_getArraySize(t)));
    t = c.clang_getCanonicalType(c.clang_getArrayElementType(t));
  }
  const long long size = c.clang_Type_getSizeOf(t);
  out.size = size > 0 ? static_cast<size_t>(size) : 0;
  const std::string spelling = take(c.clang_getTypeSpelling(t));
  if (t.kind == kTypeBool) {
    out.kind = 'b';
  } else if ((t.kind >= kTypeCharU && t.kind <= kTypeULongLong) || t.kind == kTypeUInt128) {
    out.kind = 'u';
  } else if ((t.kind >= kTypeCharS && t.kind <= kTypeInt128) || t.kind == kTypeEnum) {
    out.kind = 'i';
  } else if ((t.kind >= kTypeFloat && t.kind <= kTypeLongDouble) || t.kind == kTypeHalf ||
             t.kind == kTypeFloat16) {
    out.kind = t.kind == kTypeHalf || t.kind == kTypeFloat16 ? 'h' : 'f';
  } else if (t.kind == kTypePointer) {
    out.kind = 'p';
  } else if (t.kind == kTypeRecord) {
    // CUDA's 16-bit floating point types are structs holding the bits.
    if (spelling == "__half" || spelling == "half") out.kind = 'h';
    else if (spelling == "__nv_bfloat16" || spelling == "nv_bfloat16") out.kind = 'B';
    else {
      out.kind = 'r';
      out.fields = fields_of(t);
    }
  }
}

}  // namespace
}  // namespace detail

std::vector<size_t> struct_params(const KernelDecl& decl) {
  std::vector<size_t> out;
  const std::vector<std::string> names = decl.template_param_names();
  for (size_t i = 0; i < decl.params.size(); ++i) {
    const Param& p = decl.params[i];
    if (p.kind != ParamKind::kScalar || p.tag) continue;
    const std::string t = scalar_type_of(p);
    if (type_code_of(t) != TypeCode::kUnknown || t == "auto" ||
        std::find(names.begin(), names.end(), t) != names.end())
      continue;
    out.push_back(i);
  }
  return out;
}

TypeLayout param_layout(const KernelDefinition& def, size_t param,
                        const std::map<std::string, std::string>& deduced) {
  const KernelDecl& decl = def.decl();
  TORCH_CHECK_VALUE(param < decl.params.size(), "torch_cudajit: kernel '", decl.name, "' has ",
                    decl.params.size(), " parameters; parameter ", param, " does not exist.");
  const Param& p = decl.params[param];
  // The alias in the kernel's namespace, where the parameter's type means what it means in the
  // kernel's declaration.
  std::string alias;
  if (decl.is_template) {
    const std::vector<TemplateParam> params = decl.template_parameters();
    const TemplateArguments given = split_template_args(def.options().template_args);
    std::vector<std::string> args;
    for (size_t i = 0; i < params.size(); ++i) {
      std::string value = i < given.positional.size() ? given.positional[i] : "";
      for (const auto& [name, v] : given.named)
        if (name == params[i].name) value = v;
      if (value.empty()) {
        auto it = deduced.find(params[i].name);
        if (it != deduced.end()) value = it->second;
      }
      if (value.empty() && params[i].has_default) break;  // the defaults from here on
      TORCH_CHECK_VALUE(!value.empty() || params[i].is_pack, "torch_cudajit: parameter '", p.name,
                        "' (", p.type, ") of kernel '", decl.name,
                        "' is a struct whose layout depends on the template parameter '",
                        params[i].name, "', which neither the kernel's template_args nor the "
                        "call's tensors give. Pass template_args={'", params[i].name,
                        "': ...} to jit.");
      if (!value.empty()) args.push_back(value);
    }
    std::string list;
    for (const auto& a : args) list += (list.empty() ? "" : ", ") + a;
    alias = "template <" + decl.template_params + "> using cj_layout_alias = " + p.type + ";\n" +
            "using " + detail::kAlias + " = cj_layout_alias<" + list + ">;\n";
  } else {
    alias = "using " + std::string(detail::kAlias) + " = " + p.type + ";\n";
  }
  // Its size asked, so that a class template specialization is instantiated.
  alias += std::string("static_assert(sizeof(") + detail::kAlias + ") > 0, \"\");\n";
  const auto [open, close] = namespace_block(decl);
  const Program& program = def.program();
  const std::string text = program.source() + "\n" + open + alias + close;
  const std::string& filename = program.filename();
  const std::string main = !filename.empty() && filename[0] == '/'
                               ? filename
                               : "/torch_cudajit/source/" + filename;
  const std::vector<std::string> args = frontend_args(def.options().compile.extra,
                                                      def.options().compile.std,
                                                      kDefaultFrontendArch, filename);
  TypeLayout out;
  std::string error;
  detail::with_translation_unit(main, text, args, {}, [&](detail::CXTranslationUnit tu) {
    const auto& c = detail::libclang();
    struct Find {
      detail::CXCursor found;
      bool ok = false;
    } f;
    std::function<void(detail::CXCursor)> walk = [&](detail::CXCursor parent) {
      struct Ctx {
        Find* f;
        std::function<void(detail::CXCursor)>* walk;
      } ctx{&f, &walk};
      c.clang_visitChildren(
          parent,
          [](detail::CXCursor cur, detail::CXCursor, detail::CXClientData d) {
            auto& ctx = *static_cast<Ctx*>(d);
            const auto& c = detail::libclang();
            const int kind = c.clang_getCursorKind(cur);
            if ((kind == detail::kCursorTypedefDecl || kind == detail::kCursorTypeAliasDecl) &&
                detail::take(c.clang_getCursorSpelling(cur)) == detail::kAlias) {
              ctx.f->found = cur;
              ctx.f->ok = true;
              return detail::kVisitBreak;
            }
            if (kind == detail::kCursorNamespace) (*ctx.walk)(cur);
            return ctx.f->ok ? detail::kVisitBreak : detail::kVisitContinue;
          },
          &ctx);
    };
    walk(c.clang_getTranslationUnitCursor(tu));
    if (!f.ok) {
      error = "the front end did not read the type";
      return;
    }
    FieldLayout top;
    detail::lay_out(c.clang_getTypedefDeclUnderlyingType(f.found), top);
    const detail::CXType t = c.clang_getCanonicalType(c.clang_getTypedefDeclUnderlyingType(f.found));
    out.type = top.type;
    out.size = top.size * top.count;
    const long long align = c.clang_Type_getAlignOf(t);
    out.align = align > 0 ? static_cast<size_t>(align) : 0;
    out.is_record = top.kind == 'r';
    out.fields = std::move(top.fields);
    if (out.size == 0) error = "Clang could not lay it out (an incomplete or invalid type)";
    // A struct Clang found invalid has no fields to visit: a field's type it does not know
    // (with only NVIDIA's wheels' headers, CUDA's vector types are NVRTC's own built-ins).
    else if (out.is_record && out.fields.empty() && detail::libclang().clang_getNumDiagnostics(tu) > 0)
      error = "Clang could not read its fields (a field of a type the front end does not know, "
              "such as a CUDA vector type when only NVIDIA's wheels' headers are installed); "
              "pass the struct's bytes instead";
  });
  TORCH_CHECK_VALUE(error.empty(), "torch_cudajit: the layout of parameter '", p.name, "' (",
                    p.type, ") of kernel '", decl.name, "' cannot be read: ", error, ".");
  return out;
}

}  // namespace torch_cudajit
