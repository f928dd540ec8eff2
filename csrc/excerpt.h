// torch_cudajit: excerpts of a source for error messages: the lines an error points at, with a
// few lines around them, numbered as the compiler numbers them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace torch_cudajit::detail {

/// Sources of up to this many lines are shown whole when no error names a line.
constexpr size_t kWholeSourceLines = 40;

/// `source`'s lines `first`..`last` (1-based, inclusive), each as "<number> | <text>" with the
/// numbers right-aligned to the width of the source's last line number.
std::string numbered_lines(const std::string& source, size_t first, size_t last);

/// The lines of `source` around `lines` (1-based; any order, repeats allowed), `context` lines
/// either side, numbered, with a "..." line where lines are left out. Without lines: the whole
/// source when it has at most kWholeSourceLines lines, else "" (nothing worth showing).
std::string source_excerpt(const std::string& source, std::vector<size_t> lines,
                           size_t context = 2);

/// Each line of `source` (named `filename`) as its #line directives name it: (file, line), in
/// order; a directive's own line is (the file it names, 0).
std::vector<std::pair<std::string, size_t>> presumed_lines(const std::string& source,
                                                           const std::string& filename);

/// The 1-based lines of `source` (named `filename`) that NVRTC's log reports errors at
/// ("name(12): error: ..."). A source with #line directives (a whole file with the user's headers
/// written in) maps each file and line the log names back to the source's own line.
std::vector<size_t> nvrtc_error_lines(const std::string& log, const std::string& filename,
                                      const std::string& source = "");

}  // namespace torch_cudajit::detail
