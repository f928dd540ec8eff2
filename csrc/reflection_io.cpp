// torch_cudajit: a reflection as bytes (serialize_kernels, see reflection.h), so that a pickled
// or scripted kernel loads without the front end.
#include "reflection.h"

#include "serialize.h"

namespace torch_cudajit {

namespace {

constexpr const char* kReflectionFormat = "torch_cudajit reflection 1";
constexpr const char* kReflectionWhat = "a kernel's serialized reflection";
// The fewest bytes a serialized kernel and parameter take (each field at least "0:"), which
// bound the counts a damaged reflection may claim.
constexpr size_t kMinKernelBytes = 11 * 2;
constexpr size_t kMinParamBytes = 12 * 2;

}  // namespace

std::string serialize_kernels(const std::vector<KernelDecl>& kernels) {
  detail::Writer w;
  w << std::string(kReflectionFormat) << kernels.size();
  for (const auto& k : kernels) {
    w << k.name << k.qualified_name << k.template_params << k.is_template << k.is_extern_c
      << k.is_definition << k.decl_begin << k.template_close << k.line << k.edits.size();
    for (const auto& [pos, text] : k.edits) w << pos << text;
    w << k.params.size();
    for (const auto& p : k.params)
      w << p.name << p.type << static_cast<size_t>(p.kind) << p.is_const << p.element << p.rank
        << static_cast<size_t>(p.layout) << p.rewritten_type << p.named << p.element_dependent
        << p.layout_insert << p.tag;
  }
  return w.take();
}

std::vector<KernelDecl> deserialize_kernels(const std::string& bytes) {
  detail::Reader r(bytes, kReflectionWhat);
  const std::string format = r.text();
  TORCH_CHECK_VALUE(format == kReflectionFormat, "torch_cudajit: a kernel's serialized "
                    "reflection has the format '", detail::utf8_text(format.substr(0, 64)),
                    "', expected '", kReflectionFormat,
                    "'; pickle or script the kernel again with this version.");
  std::vector<KernelDecl> kernels(r.count(kMinKernelBytes));
  for (auto& k : kernels) {
    k.name = r.text();
    k.qualified_name = r.text();
    k.template_params = r.text();
    k.is_template = r.flag();
    k.is_extern_c = r.flag();
    k.is_definition = r.flag();
    k.decl_begin = r.number();
    k.template_close = r.number();
    k.line = r.number();
    k.edits.resize(r.count(4));
    for (auto& e : k.edits) {
      e.first = r.number();
      e.second = r.text();
    }
    k.params.resize(r.count(kMinParamBytes));
    for (auto& p : k.params) {
      p.name = r.text();
      p.type = r.text();
      p.kind = r.enumerator(ParamKind::kAuto, "parameter kind");
      p.is_const = r.flag();
      p.element = r.text();
      p.rank = r.text();
      p.layout = r.enumerator(LayoutMode::kOpaque, "layout mode");
      p.rewritten_type = r.text();
      p.named = r.flag();
      p.element_dependent = r.flag();
      p.layout_insert = r.number();
      p.tag = r.flag();
    }
  }
  TORCH_CHECK_VALUE(r.done(), "torch_cudajit: a kernel's serialized reflection has trailing "
                    "bytes; pickle or script the kernel again.");
  return kernels;
}

}  // namespace torch_cudajit
