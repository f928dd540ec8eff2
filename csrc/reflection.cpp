// torch_cudajit: the parameter table of __global__ declarations (see reflection.h), from the
// declarations the Clang front end reads (frontend.h).
#include "reflection.h"

#include "excerpt.h"

#include "frontend.h"
#include "tokens.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace torch_cudajit {
namespace {

using detail::find_array;
using detail::join;
using detail::split_top;
using detail::Token;
using detail::tokenize;
using detail::without_default;
using detail::match_forward;

const std::set<std::string>& type_keywords() {
  static const std::set<std::string> k = {
      "void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
      "const", "volatile", "__restrict__", "restrict", "auto", "struct", "class", "typename",
      "__half", "__nv_bfloat16", "half", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t",
      "int32_t", "uint32_t", "int64_t", "uint64_t", "__grid_constant__"};
  return k;
}

bool is_cv(const std::string& t) {
  return t == "const" || t == "volatile" || t == "__restrict__" || t == "__restrict" ||
         t == "restrict" ||
         t == "__grid_constant__";
}

// Classifies a parameter type, given as tokens [b, e): kind, constness, element, rank, layout.
void classify_type(Param& p, const std::vector<Token>& all, size_t b, size_t e) {
  p.type = join(all, b, e);
  p.rewritten_type = p.type;
  for (size_t i = b; i < e; ++i) {
    if (all[i].text == "auto") {
      p.kind = ParamKind::kAuto;
      return;
    }
  }
  const auto [open, close] = find_array(all, b, e);
  if (open != std::string::npos) {
    auto args = split_top(all, open + 1, close);
    if (args.size() >= 2) {
      p.kind = ParamKind::kArray;
      std::vector<Token> elem;
      for (size_t k = args[0].first; k < args[0].second; ++k) {
        if (all[k].text == "const") p.is_const = true;
        else elem.push_back(all[k]);
      }
      p.element = join(elem, 0, elem.size());
      p.rank = join(all, args[1].first, args[1].second);
      if (args.size() >= 3) {
        std::string l = join(all, args[2].first, args[2].second);
        if (l == "cj::Strided" || l == "Strided" || l == "::cj::Strided")
          p.layout = LayoutMode::kStrided;
        else if (l == "cj::Contiguous" || l == "Contiguous" || l == "::cj::Contiguous")
          p.layout = LayoutMode::kContiguous;
        else
          p.layout = LayoutMode::kOpaque;
      } else {
        p.layout = LayoutMode::kDeduced;
      }
      return;
    }
  }
  // Pointer: the last '*' at top level, followed only by cv-qualifiers.
  size_t last_star = std::string::npos;
  int angle = 0;
  for (size_t i = b; i < e; ++i) {
    if (all[i].text == "<") ++angle;
    else if (all[i].text == ">") --angle;
    else if (all[i].text == "*" && angle == 0) last_star = i;
  }
  if (last_star != std::string::npos) {
    bool tail_cv = true;
    for (size_t i = last_star + 1; i < e; ++i) tail_cv = tail_cv && is_cv(all[i].text);
    if (tail_cv) {
      p.kind = ParamKind::kPointer;
      std::vector<Token> elem;
      angle = 0;
      for (size_t i = b; i < last_star; ++i) {
        if (all[i].text == "<") ++angle;
        if (all[i].text == ">") --angle;
        if (all[i].text == "const" && angle == 0) p.is_const = true;
        else if (!is_cv(all[i].text) || angle > 0) elem.push_back(all[i]);
      }
      p.element = join(elem, 0, elem.size());
      return;
    }
  }
  p.kind = ParamKind::kScalar;
  // integral_constant<T, v> and bool_constant<v>, however qualified, are tags.
  for (size_t i = b; i + 1 < e; ++i) {
    if (all[i + 1].text != "<") continue;
    p.tag = all[i].text == "integral_constant" || all[i].text == "bool_constant";
    break;
  }
}

Param classify_text(const std::string& type_text) {
  const std::string masked = mask_source(type_text);
  std::vector<Token> t = tokenize(masked, 0, masked.size());
  // Clang spells CUDA's __restrict__ as __restrict; keep the spelling users write.
  for (Token& x : t)
    if (x.text == "__restrict") x.text = "__restrict__";
  Param p;
  classify_type(p, t, 0, t.size());
  return p;
}

// The reflected parameter for Clang's reading of one declaration. The type is Clang's spelling
// (macros expanded, typedef names kept); what Clang could not resolve, and `auto` parameters
// (which Clang reads as an error before C++20), are classified from the text as written.
Param reflect_param(const ParsedParam& pp, size_t index) {
  const std::string masked = mask_source(pp.source_text);
  const std::vector<Token> written = tokenize(masked, 0, masked.size());
  size_t end = without_default(written, 0, written.size());
  if (!pp.name.empty() && end > 0 && written[end - 1].text == pp.name) --end;
  bool has_auto = false;
  for (size_t i = 0; i < end; ++i) has_auto = has_auto || written[i].text == "auto";
  Param p;
  if (pp.invalid || has_auto) {
    classify_type(p, written, 0, end);
  } else {
    // A typedef'd element (`floatX*`) keeps its name: the compile's probes resolve it.
    p = classify_text(pp.spelling);
  }
  p.named = !pp.name.empty();
  p.name = p.named ? pp.name : "arg" + std::to_string(index);
  // Where a deduced layout goes: the Array's closing '>' as written in the source.
  if (p.kind == ParamKind::kArray && p.layout == LayoutMode::kDeduced) {
    const auto [open, close] = find_array(written, 0, end);
    if (open != std::string::npos && pp.begin != std::string::npos)
      p.layout_insert = pp.begin + written[close].pos;
  }
  return p;
}

}  // namespace

const char* to_string(ParamKind kind) {
  switch (kind) {
    case ParamKind::kArray: return "array";
    case ParamKind::kPointer: return "pointer";
    case ParamKind::kScalar: return "scalar";
    case ParamKind::kAuto: return "auto";
  }
  return "?";
}

ParamRole param_role(const Param& p) {
  switch (p.kind) {
    case ParamKind::kArray:
    case ParamKind::kPointer: return p.is_const ? ParamRole::kInput : ParamRole::kOutput;
    case ParamKind::kAuto: return ParamRole::kAuto;
    case ParamKind::kScalar: return ParamRole::kScalar;
  }
  return ParamRole::kScalar;
}

const char* to_string(ParamRole r) {
  switch (r) {
    case ParamRole::kOutput: return "output";
    case ParamRole::kInput: return "input";
    case ParamRole::kScalar: return "scalar";
    case ParamRole::kAuto: return "auto";
  }
  return "?";
}

std::optional<size_t> KernelDecl::find_param(const std::string& n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return i;
  return std::nullopt;
}

std::vector<TemplateParam> KernelDecl::template_parameters() const {
  std::vector<TemplateParam> out;
  const std::vector<Token> t = tokenize(template_params, 0, template_params.size());
  for (const auto& part : split_top(t, 0, t.size())) {
    TemplateParam p;
    p.text = join(t, part.first, part.second);
    // The name is the last identifier before a default argument (`typename T = float`).
    size_t end = part.second;
    for (size_t i = part.first; i < part.second; ++i) {
      if (t[i].text == "=") {
        end = i;
        p.has_default = true;
        break;
      }
      p.is_pack = p.is_pack || t[i].text == ".";  // `...` tokenizes as three dots
    }
    for (size_t i = end; i > part.first; --i) {
      const Token& x = t[i - 1];
      if (!x.ident) continue;
      // `typename`, `class` or `int` last: an unnamed parameter.
      if (type_keywords().count(x.text) == 0) p.name = x.text;
      break;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> KernelDecl::template_param_names() const {
  std::vector<std::string> names;
  for (const TemplateParam& p : template_parameters())
    if (!p.name.empty()) names.push_back(p.name);
  return names;
}

std::vector<std::string> identifiers_of(const std::string& text) {
  std::vector<std::string> out;
  for (const Token& x : tokenize(text, 0, text.size()))
    if (x.ident) out.push_back(x.text);
  return out;
}

size_t KernelDecl::layout_params() const {
  if (is_extern_c) return 0;
  size_t n = 0;
  for (const auto& p : params) n += p.kind == ParamKind::kArray && p.layout == LayoutMode::kDeduced;
  return n;
}

std::string KernelDecl::rewritten_template_header() const {
  std::string extra;
  size_t n = layout_params();
  for (size_t i = 0; i < n; ++i) {
    if (!extra.empty()) extra += ", ";
    extra += "class CjL" + std::to_string(i);
  }
  if (!is_template && extra.empty()) return "";
  std::string list = template_params;
  if (!extra.empty()) list += (list.empty() ? "" : ", ") + extra;
  return "template <" + list + ">";
}

namespace {

// The reflected kernel of one parsed declaration, with the layout rewrite's edits for it.
std::optional<KernelDecl> reflect_kernel(const std::string& source, const ParsedKernel& pk) {
  KernelDecl k;
  k.name = pk.name;
  k.qualified_name = pk.qualified_name;
  k.is_template = pk.is_template;
  k.is_extern_c = pk.is_extern_c;
  k.is_definition = pk.is_definition;
  k.decl_begin = pk.begin == std::string::npos ? 0 : pk.begin;
  k.template_close = pk.template_close;
  k.line = pk.line;
  if (pk.is_template) {
    std::string text = pk.template_params_text;  // a kernel of a header
    if (pk.file.empty()) {
      if (pk.template_params_begin == std::string::npos ||
          pk.template_params_end == std::string::npos || pk.template_params_end > source.size())
        return std::nullopt;  // a template header made by a macro: not one to call
      text = source.substr(pk.template_params_begin,
                           pk.template_params_end - pk.template_params_begin);
    } else if (text.empty()) {
      return std::nullopt;
    }
    const std::string masked = mask_source(text);
    const std::vector<Token> t = tokenize(masked, 0, masked.size());
    k.template_params = join(t, 0, t.size());
  }
  for (size_t i = 0; i < pk.params.size(); ++i) k.params.push_back(reflect_param(pk.params[i], i));
  const std::vector<std::string> template_names = k.template_param_names();
  for (auto& p : k.params) {
    for (const std::string& id : identifiers_of(p.element))
      p.element_dependent = p.element_dependent || id == "auto" ||
          std::find(template_names.begin(), template_names.end(), id) != template_names.end();
  }
  // A deduced layout gets a template parameter of its own. extern "C" kernels cannot have one,
  // nor can an Array or a template header that a macro wrote: those take any layout (strided).
  const bool can_rewrite = !k.is_extern_c && pk.begin != std::string::npos &&
                           (!k.is_template || k.template_close != std::string::npos);
  size_t li = 0;
  std::string header_extra;
  for (auto& p : k.params) {
    if (p.kind != ParamKind::kArray || p.layout != LayoutMode::kDeduced) continue;
    if (!can_rewrite || p.layout_insert == std::string::npos) {
      p.layout = LayoutMode::kStrided;
      continue;
    }
    std::string tag = "CjL" + std::to_string(li++);
    k.edits.emplace_back(p.layout_insert, ", " + tag);
    header_extra += (header_extra.empty() ? "class " : ", class ") + tag;
    // The Array's closing '>' is the last one unless the type continues (e.g. `const`).
    size_t depth = 0, pos = std::string::npos;
    for (size_t c = p.rewritten_type.find("Array"); c < p.rewritten_type.size(); ++c) {
      if (p.rewritten_type[c] == '<') ++depth;
      if (p.rewritten_type[c] == '>' && --depth == 0) {
        pos = c;
        break;
      }
    }
    if (pos == std::string::npos) pos = p.rewritten_type.rfind('>');
    p.rewritten_type.insert(pos, ", " + tag);
  }
  if (!header_extra.empty()) {
    if (k.is_template)
      k.edits.emplace_back(k.template_close, ", " + header_extra);
    else
      k.edits.emplace_back(k.decl_begin, "template <" + header_extra + "> ");
  }
  return k;
}

}  // namespace

std::vector<KernelDecl> reflect_kernels(const std::string& source,
                                        const std::vector<std::string>& args,
                                        const std::string& filename, FrontendReads* reads,
                                        bool refuse_errors) {
  std::vector<KernelDecl> out;
  for (const ParsedKernel& pk : parse_kernels(source, filename, args, reads)) {
    if (refuse_errors && !pk.errors.empty()) {
      std::string errors;
      for (const std::string& e : pk.errors) errors += "  " + e + "\n";
      TORCH_CHECK_VALUE(false, "torch_cudajit: the declaration of kernel '", pk.qualified_name,
                        "' (", filename, " line ", pk.line, ") does not compile:\n", errors,
                        detail::source_excerpt(source, pk.error_lines, 1),
                        "Correct the declaration: NVRTC would refuse it as well, so no launch "
                        "of the kernel could compile.");
    }
    if (auto k = reflect_kernel(source, pk)) out.push_back(std::move(*k));
  }
  // Several declarations of one kernel must agree; keep the definition (or the first), with
  // the layout edits of all of them.
  std::map<std::string, size_t> seen;
  std::vector<KernelDecl> unique;
  for (auto& k : out) {
    auto it = seen.find(k.name);
    if (it == seen.end()) {
      seen[k.name] = unique.size();
      unique.push_back(k);
      continue;
    }
    KernelDecl& prev = unique[it->second];
    bool same = prev.params.size() == k.params.size() && prev.qualified_name == k.qualified_name;
    for (size_t i = 0; same && i < k.params.size(); ++i)
      same = prev.params[i].type == k.params[i].type;
    TORCH_CHECK_VALUE(same, "torch_cudajit: kernel '", k.name, "' is declared at lines ",
                      prev.line, " and ", k.line,
                      " with different parameter lists or in different namespaces; overloaded "
                      "__global__ functions are not supported, give each its own name.");
    std::vector<std::pair<size_t, std::string>> edits = prev.edits;
    edits.insert(edits.end(), k.edits.begin(), k.edits.end());
    // Keep the definition's parameter names, which calls use as keywords.
    if (k.is_definition && !prev.is_definition) prev = k;
    prev.edits = std::move(edits);
  }
  return unique;
}

std::string rewrite_layouts(const std::string& source, const std::vector<KernelDecl>& kernels) {
  std::vector<std::pair<size_t, std::string>> edits;
  for (const auto& k : kernels) edits.insert(edits.end(), k.edits.begin(), k.edits.end());
  // From the back, so that earlier offsets stay valid.
  std::stable_sort(edits.begin(), edits.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = source;
  for (const auto& e : edits) out.insert(e.first, e.second);
  return out;
}

}  // namespace torch_cudajit
