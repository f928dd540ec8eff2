// torch_cudajit: excerpts of a source for error messages (see excerpt.h).
#include "excerpt.h"

#include <algorithm>
#include <sstream>

namespace torch_cudajit::detail {

namespace {

size_t line_count(const std::string& source) {
  return static_cast<size_t>(std::count(source.begin(), source.end(), '\n')) +
         (source.empty() || source.back() != '\n' ? 1 : 0);
}

}  // namespace

std::string numbered_lines(const std::string& source, size_t first, size_t last) {
  const size_t width = std::to_string(line_count(source)).size();
  std::ostringstream os;
  std::istringstream is(source);
  std::string line;
  for (size_t n = 1; std::getline(is, line) && n <= last; ++n) {
    if (n < first) continue;
    const std::string num = std::to_string(n);
    os << std::string(width > num.size() ? width - num.size() : 0, ' ') << num << " | " << line
       << "\n";
  }
  return os.str();
}

std::string source_excerpt(const std::string& source, std::vector<size_t> lines, size_t context) {
  const size_t total = line_count(source);
  if (lines.empty()) return total <= kWholeSourceLines ? numbered_lines(source, 1, total) : "";
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  std::string out;
  size_t shown = 0;  // the last line shown so far
  for (size_t line : lines) {
    if (line == 0 || line > total) continue;
    const size_t first = std::max(line > context ? line - context : 1, shown + 1);
    const size_t last = std::min(line + context, total);
    if (first > last) continue;
    if (first > shown + 1) out += "  ...\n";
    out += numbered_lines(source, first, last);
    shown = last;
  }
  if (!out.empty() && shown < total) out += "  ...\n";
  return out;
}

std::vector<size_t> nvrtc_error_lines(const std::string& log, const std::string& filename) {
  std::vector<size_t> lines;
  std::istringstream is(log);
  std::string line;
  const std::string prefix = filename + "(";
  while (std::getline(is, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t close = line.find(')', prefix.size());
    if (close == std::string::npos || line.find("error", close) == std::string::npos) continue;
    const std::string digits = line.substr(prefix.size(), close - prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    lines.push_back(std::stoul(digits));
  }
  return lines;
}

}  // namespace torch_cudajit::detail
