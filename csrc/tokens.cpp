// torch_cudajit: masked source text and its tokens (see tokens.h).
#include "tokens.h"


#include <algorithm>
#include <cctype>

namespace torch_cudajit {
namespace detail {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

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

// Drops a default argument (`= 4`) from tokens [b, e); returns the new end.
size_t without_default(const std::vector<Token>& t, size_t b, size_t e) {
  int depth = 0;
  for (size_t i = b; i < e; ++i) {
    const std::string& x = t[i].text;
    if (x == "(" || x == "<" || x == "[") ++depth;
    else if (x == ")" || x == ">" || x == "]") --depth;
    else if (x == "=" && depth == 0) return i;
  }
  return e;
}

// The tokens of the first top-level `Array < ... >` in [b, e): the index of '<' and of its
// matching '>', or npos.
std::pair<size_t, size_t> find_array(const std::vector<Token>& t, size_t b, size_t e) {
  for (size_t i = b; i + 1 < e; ++i) {
    if (t[i].text == "Array" && t[i + 1].text == "<") {
      size_t close = match_forward(t, i + 1, "<", ">");
      if (close == std::string::npos || close >= e) break;
      return {i + 1, close};
    }
  }
  return {std::string::npos, std::string::npos};
}

}  // namespace detail

namespace {
// mask_source, or with `comments_only` mask_comments.
std::string mask(const std::string& s, bool comments_only) {
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
    if (line_start && c == '#' && !comments_only) {
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
      // Keep the quotes (so `extern "C"` stays recognisable), blank the contents. Either way the
      // literal is skipped whole: a `//` inside it starts no comment.
      size_t j = i + 1;
      while (j < n && s[j] != c && s[j] != '\n') j += (s[j] == '\\') ? 2 : 1;
      if (!comments_only) blank(i + 1, std::min(j, n));
      i = std::min(j + 1, n);
    } else {
      ++i;
    }
  }
  return m;
}
}  // namespace

std::string mask_source(const std::string& s) { return mask(s, false); }

std::string mask_comments(const std::string& s) { return mask(s, true); }

}  // namespace torch_cudajit
