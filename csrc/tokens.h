// torch_cudajit: the token layer under the reflection (reflection.cpp): source text with
// comments, literals and directives masked, cut into tokens, and the bracket-aware searches the
// classification of parameter types uses.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace torch_cudajit {

/// Replaces comments, string and character literals and preprocessor lines by spaces,
/// keeping every other character (and every newline) at its offset.
std::string mask_source(const std::string& source);

/// Replaces comments alone by spaces, as mask_source does; string and character literals (inline
/// PTX) and preprocessor lines are kept.
std::string mask_comments(const std::string& source);

}  // namespace torch_cudajit

namespace torch_cudajit::detail {

/// Whether `c` can start, or continue, a C++ identifier.
bool is_ident_start(char c);
bool is_ident_char(char c);

/// One token of masked text.
struct Token {
  std::string text;
  size_t pos;  ///< offset in the text
  bool ident;  ///< an identifier (or keyword)
};

/// Tokens of masked text in [begin, end): identifiers, numbers, "::", and single characters.
std::vector<Token> tokenize(const std::string& s, size_t begin, size_t end);
/// Tokens [b, e) as C++ text, spaced the way types are written (`const Vec<T, 4>*`).
std::string join(const std::vector<Token>& t, size_t b, size_t e);
/// Index of the token that closes the bracket `o` at `open` with `c`, or npos.
size_t match_forward(const std::vector<Token>& t, size_t open, const std::string& o,
                     const std::string& c);
/// Tokens [b, e) split on top-level commas; '<' counts as a bracket after an identifier.
std::vector<std::pair<size_t, size_t>> split_top(const std::vector<Token>& t, size_t b, size_t e);
/// The end of tokens [b, e) without a default argument (`= 4`).
size_t without_default(const std::vector<Token>& t, size_t b, size_t e);
/// The first top-level `Array < ... >` in [b, e): the index of '<' and of its matching '>', or
/// npos twice.
std::pair<size_t, size_t> find_array(const std::vector<Token>& t, size_t b, size_t e);

}  // namespace torch_cudajit::detail
