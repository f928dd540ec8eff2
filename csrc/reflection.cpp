// torch_cudajit: a small tokenizer-based reader of __global__ declarations (see reflection.h).
#include "reflection.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace torch_cudajit {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Token {
  std::string text;
  size_t pos;
  bool ident;
};

// Tokens of masked text in [begin, end): identifiers, numbers, "::", and single characters.
std::vector<Token> tokenize(const std::string& s, size_t begin, size_t end) {
  std::vector<Token> out;
  size_t i = begin;
  while (i < end) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (is_ident_start(c)) {
      size_t j = i;
      while (j < end && is_ident_char(s[j])) ++j;
      out.push_back({s.substr(i, j - i), i, true});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < end && (is_ident_char(s[j]) || s[j] == '.')) ++j;
      out.push_back({s.substr(i, j - i), i, false});
      i = j;
    } else if (c == ':' && i + 1 < end && s[i + 1] == ':') {
      out.push_back({"::", i, false});
      i += 2;
    } else {
      out.push_back({std::string(1, c), i, false});
      ++i;
    }
  }
  return out;
}

std::string join(const std::vector<Token>& t, size_t b, size_t e) {
  std::string out;
  for (size_t i = b; i < e; ++i) {
    const std::string& x = t[i].text;
    if (!out.empty()) {
      char p = out.back();
      bool glue = x == "::" || x == "," || x == ">" || x == ")" || x == "]" || x == "*" ||
                  x == "&" || x == "<" || x == "(" || x == "[" || p == '<' || p == '(' ||
                  p == '[' || (p == ':' && out.size() >= 2 && out[out.size() - 2] == ':');
      if (!glue) out += ' ';
    }
    out += x;
  }
  // Put a space after commas for readability.
  std::string spaced;
  for (size_t i = 0; i < out.size(); ++i) {
    spaced += out[i];
    if (out[i] == ',' && i + 1 < out.size() && out[i + 1] != ' ') spaced += ' ';
  }
  return spaced;
}

const std::set<std::string>& type_keywords() {
  static const std::set<std::string> k = {
      "void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
      "const", "volatile", "__restrict__", "restrict", "auto", "struct", "class", "typename",
      "__half", "__nv_bfloat16", "half", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t",
      "int32_t", "uint32_t", "int64_t", "uint64_t", "__grid_constant__"};
  return k;
}

// Tokens that may stand between a template header and __global__.
bool is_decl_specifier(const std::string& t) {
  return t == "static" || t == "inline" || t == "__forceinline__" || t == "__noinline__" ||
         t == "\"" || t == "extern";
}

bool is_cv(const std::string& t) {
  return t == "const" || t == "volatile" || t == "__restrict__" || t == "restrict" ||
         t == "__grid_constant__";
}

// Index of the token matching an opening bracket at `open`, over masked tokens.
size_t match_forward(const std::vector<Token>& t, size_t open, const std::string& o,
                     const std::string& c) {
  int depth = 0;
  for (size_t i = open; i < t.size(); ++i) {
    if (t[i].text == o) ++depth;
    else if (t[i].text == c && --depth == 0) return i;
  }
  return std::string::npos;
}

// Splits tokens [b, e) on top-level commas. '<' counts as a bracket after an identifier.
std::vector<std::pair<size_t, size_t>> split_top(const std::vector<Token>& t, size_t b, size_t e) {
  std::vector<std::pair<size_t, size_t>> parts;
  int paren = 0, angle = 0;
  size_t start = b;
  for (size_t i = b; i < e; ++i) {
    const std::string& x = t[i].text;
    if (x == "(" || x == "[" || x == "{") ++paren;
    else if (x == ")" || x == "]" || x == "}") --paren;
    else if (x == "<" && i > b && (t[i - 1].ident || t[i - 1].text == ">")) ++angle;
    else if (x == ">" && angle > 0) --angle;
    else if (x == "," && paren == 0 && angle == 0) {
      parts.emplace_back(start, i);
      start = i + 1;
    }
  }
  if (start < e) parts.emplace_back(start, e);
  return parts;
}

Param parse_param(const std::string& src, const std::vector<Token>& all, size_t b, size_t e,
                  size_t index) {
  Param p;
  // Drop a default argument.
  {
    int depth = 0;
    for (size_t i = b; i < e; ++i) {
      const std::string& x = all[i].text;
      if (x == "(" || x == "<" || x == "[") ++depth;
      else if (x == ")" || x == ">" || x == "]") --depth;
      else if (x == "=" && depth == 0) {
        e = i;
        break;
      }
    }
  }
  // The last identifier is the name when something type-like stands before it.
  size_t type_end = e;
  if (e - b >= 2 && all[e - 1].ident && type_keywords().count(all[e - 1].text) == 0 &&
      all[e - 2].text != "::") {
    bool only_cv = true;
    for (size_t i = b; i + 1 < e; ++i) only_cv = only_cv && is_cv(all[i].text);
    if (!only_cv) {
      p.name = all[e - 1].text;
      p.named = true;
      type_end = e - 1;
    }
  }
  if (!p.named) p.name = "arg" + std::to_string(index);
  p.type = join(all, b, type_end);
  p.rewritten_type = p.type;

  // Find "Array <" at top level (optionally cj::Array).
  for (size_t i = b; i < type_end; ++i) {
    if (all[i].text == "auto") {
      p.kind = ParamKind::kAuto;
      return p;
    }
  }
  for (size_t i = b; i + 1 < type_end; ++i) {
    if (all[i].text == "Array" && all[i + 1].text == "<") {
      size_t close = match_forward(all, i + 1, "<", ">");
      if (close == std::string::npos || close > type_end) break;
      auto args = split_top(all, i + 2, close);
      if (args.size() < 2) break;
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
        p.layout_insert = all[close].pos;
      }
      return p;
    }
  }
  // Pointer: the last '*' at top level, followed only by cv-qualifiers.
  size_t last_star = std::string::npos;
  int angle = 0;
  for (size_t i = b; i < type_end; ++i) {
    if (all[i].text == "<") ++angle;
    else if (all[i].text == ">") --angle;
    else if (all[i].text == "*" && angle == 0) last_star = i;
  }
  if (last_star != std::string::npos) {
    bool tail_cv = true;
    for (size_t i = last_star + 1; i < type_end; ++i) tail_cv = tail_cv && is_cv(all[i].text);
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
      return p;
    }
  }
  p.kind = ParamKind::kScalar;
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

std::optional<size_t> KernelDecl::find_param(const std::string& n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return i;
  return std::nullopt;
}

std::vector<std::string> KernelDecl::template_param_names() const {
  std::vector<std::string> names;
  const std::vector<Token> t = tokenize(template_params, 0, template_params.size());
  for (const auto& part : split_top(t, 0, t.size())) {
    // The name is the last identifier before a default argument (`typename T = float`).
    size_t end = part.second;
    for (size_t i = part.first; i < part.second; ++i)
      if (t[i].text == "=") {
        end = i;
        break;
      }
    for (size_t i = end; i > part.first; --i) {
      const Token& x = t[i - 1];
      if (!x.ident) continue;
      // `typename`, `class` or `int` last: an unnamed parameter.
      if (type_keywords().count(x.text) == 0) names.push_back(x.text);
      break;
    }
  }
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

std::string mask_source(const std::string& s) {
  std::string m = s;
  size_t i = 0, n = s.size();
  bool line_start = true;
  auto blank = [&](size_t a, size_t b) {
    for (size_t k = a; k < b && k < n; ++k)
      if (m[k] != '\n') m[k] = ' ';
  };
  while (i < n) {
    char c = s[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (line_start && c == '#') {
      // A preprocessor directive runs to the end of the line, with backslash continuations.
      size_t j = i;
      while (j < n && !(s[j] == '\n' && (j == 0 || s[j - 1] != '\\'))) ++j;
      blank(i, j);
      i = j;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      size_t j = s.find('\n', i);
      if (j == std::string::npos) j = n;
      blank(i, j);
      i = j;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t j = s.find("*/", i + 2);
      j = j == std::string::npos ? n : j + 2;
      blank(i, j);
      i = j;
    } else if (c == '"' || c == '\'') {
      // Keep the quotes (so `extern "C"` stays recognisable), blank the contents.
      size_t j = i + 1;
      while (j < n && s[j] != c && s[j] != '\n') j += (s[j] == '\\') ? 2 : 1;
      blank(i + 1, std::min(j, n));
      i = std::min(j + 1, n);
    } else {
      ++i;
    }
  }
  return m;
}

std::vector<KernelDecl> reflect_kernels(const std::string& source) {
  const std::string masked = mask_source(source);
  const std::vector<Token> t = tokenize(masked, 0, masked.size());
  // Token ranges of extern "C" { ... } blocks: kernels inside them have C linkage.
  std::vector<std::pair<size_t, size_t>> c_blocks;
  for (size_t i = 0; i + 3 < t.size(); ++i) {
    if (t[i].text == "extern" && t[i + 1].text == "\"" && t[i + 2].text == "\"" && t[i + 3].text == "{") {
      size_t close = match_forward(t, i + 3, "{", "}");
      c_blocks.emplace_back(i + 3, close == std::string::npos ? t.size() : close);
    }
  }
  std::vector<KernelDecl> out;
  for (size_t g = 0; g < t.size(); ++g) {
    if (t[g].text != "__global__") continue;
    KernelDecl k;
    for (const auto& r : c_blocks) k.is_extern_c = k.is_extern_c || (g > r.first && g < r.second);
    // Walk back over specifiers to an optional template header.
    size_t b = g;
    while (b > 0 && is_decl_specifier(t[b - 1].text)) {
      if (t[b - 1].text == "extern") k.is_extern_c = true;
      --b;
    }
    k.decl_begin = t[b].pos;
    if (b > 0 && t[b - 1].text == ">") {
      int depth = 0;
      size_t j = b - 1;
      for (;; --j) {
        if (t[j].text == ">") ++depth;
        else if (t[j].text == "<" && --depth == 0) break;
        if (j == 0) break;
      }
      if (t[j].text == "<" && j > 0 && t[j - 1].text == "template") {
        k.is_template = true;
        k.template_close = t[b - 1].pos;
        k.template_params = join(t, j + 1, b - 1);
        k.decl_begin = t[j - 1].pos;
        if (k.template_params.empty()) continue;  // explicit specialization: not a kernel entry
      }
    }
    // Forward to the name and parameter list, skipping attribute groups.
    size_t i = g + 1;
    size_t open = std::string::npos;
    for (; i < t.size(); ++i) {
      const std::string& x = t[i].text;
      if (x == "__launch_bounds__" || x == "__attribute__" || x == "__cluster_dims__" ||
          x == "__maxnreg__") {
        size_t close = match_forward(t, i + 1, "(", ")");
        if (close == std::string::npos) break;
        i = close;
      } else if (x == "[" && i + 1 < t.size() && t[i + 1].text == "[") {
        size_t close = match_forward(t, i, "[", "]");
        if (close == std::string::npos) break;
        i = close;
      } else if (x == "(") {
        open = i;
        break;
      } else if (x == ";" || x == "{") {
        break;
      }
    }
    if (open == std::string::npos || open == 0 || !t[open - 1].ident) continue;
    k.name = t[open - 1].text;
    size_t close = match_forward(t, open, "(", ")");
    if (close == std::string::npos) continue;
    k.is_definition = close + 1 < t.size() && t[close + 1].text == "{";
    k.line = 1 + static_cast<size_t>(std::count(source.begin(), source.begin() + t[g].pos, '\n'));
    auto parts = split_top(t, open + 1, close);
    if (!(parts.size() == 1 && parts[0].second - parts[0].first == 1 &&
          t[parts[0].first].text == "void")) {
      for (size_t p = 0; p < parts.size(); ++p)
        k.params.push_back(parse_param(source, t, parts[p].first, parts[p].second, p));
    }
    const std::vector<std::string> template_names = k.template_param_names();
    for (auto& p : k.params) {
      for (const std::string& id : identifiers_of(p.element))
        p.element_dependent = p.element_dependent || id == "auto" ||
            std::find(template_names.begin(), template_names.end(), id) != template_names.end();
    }
    // A deduced layout gets a template parameter of its own (not possible for extern "C").
    size_t li = 0;
    for (auto& p : k.params) {
      if (p.kind != ParamKind::kArray || p.layout != LayoutMode::kDeduced) continue;
      if (k.is_extern_c) {
        p.layout = LayoutMode::kStrided;
        continue;
      }
      std::string tag = "CjL" + std::to_string(li++);
      size_t gt = p.rewritten_type.rfind('>');
      // The Array's closing '>' is the last one unless the type continues (e.g. `const`).
      size_t depth = 0, pos = std::string::npos;
      for (size_t c = p.rewritten_type.find("Array"); c < p.rewritten_type.size(); ++c) {
        if (p.rewritten_type[c] == '<') ++depth;
        if (p.rewritten_type[c] == '>' && --depth == 0) {
          pos = c;
          break;
        }
      }
      if (pos == std::string::npos) pos = gt;
      p.rewritten_type.insert(pos, ", " + tag);
    }
    out.push_back(std::move(k));
  }
  // Several declarations of one kernel must agree; keep the definition (or the first).
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
    bool same = prev.params.size() == k.params.size();
    for (size_t i = 0; same && i < k.params.size(); ++i)
      same = prev.params[i].type == k.params[i].type;
    TORCH_CHECK_VALUE(same, "torch_cudajit: kernel '", k.name, "' is declared at lines ",
                      prev.line, " and ", k.line,
                      " with different parameter lists; overloaded __global__ functions are not "
                      "supported, give each its own name.");
    if (k.is_definition && !prev.is_definition) {
      // Keep the definition's parameter names, which calls use as keywords.
      unique[it->second] = k;
    }
  }
  return unique;
}

std::string rewrite_layouts(const std::string& source, const std::vector<KernelDecl>& kernels) {
  const std::string masked = mask_source(source);
  const std::vector<Token> t = tokenize(masked, 0, masked.size());
  std::set<std::string> rewrite;
  for (const auto& k : kernels)
    if (k.layout_params() > 0) rewrite.insert(k.name);
  if (rewrite.empty()) return source;

  struct Edit {
    size_t pos;
    std::string text;
  };
  std::vector<Edit> edits;
  // Each declaration (a kernel may be declared before it is defined) is reflected on its own
  // window of the source, so that its offsets are exact.
  for (size_t g = 0; g < t.size(); ++g) {
    if (t[g].text != "__global__") continue;
    size_t end = masked.size();
    for (size_t j = g + 1; j < t.size(); ++j)
      if (t[j].text == "{" || t[j].text == ";") {
        end = t[j].pos + 1;
        break;
      }
    std::string window(masked.size(), ' ');
    // The window starts at the declaration's specifiers (static, extern "C") or its template
    // header, so that a new template header goes in front of them.
    size_t b = g;
    while (b > 0 && is_decl_specifier(t[b - 1].text)) --b;
    size_t wb = t[b].pos;
    if (b > 0 && t[b - 1].text == ">") {
      int depth = 0;
      size_t j = b - 1;
      for (;; --j) {
        if (t[j].text == ">") ++depth;
        else if (t[j].text == "<" && --depth == 0) break;
        if (j == 0) break;
      }
      if (j > 0 && t[j - 1].text == "template") wb = t[j - 1].pos;
    }
    for (size_t c = wb; c < end; ++c) window[c] = source[c];
    auto one = reflect_kernels(window);
    if (one.size() != 1 || rewrite.count(one[0].name) == 0) continue;
    const KernelDecl& k = one[0];
    size_t li = 0;
    std::string header_extra;
    for (const auto& p : k.params) {
      if (p.kind != ParamKind::kArray || p.layout != LayoutMode::kDeduced) continue;
      std::string tag = "CjL" + std::to_string(li++);
      edits.push_back({p.layout_insert, ", " + tag});
      if (!header_extra.empty()) header_extra += ", ";
      header_extra += "class " + tag;
    }
    if (k.is_template)
      edits.push_back({k.template_close, ", " + header_extra});
    else
      edits.push_back({k.decl_begin, "template <" + header_extra + "> "});
  }
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.pos > b.pos; });
  std::string out = source;
  for (const auto& e : edits) out.insert(e.pos, e.text);
  return out;
}

}  // namespace torch_cudajit
