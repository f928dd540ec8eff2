// torch_cudajit: excerpts of a source for error messages (see excerpt.h).
#include "excerpt.h"

#include <algorithm>
#include <cstdlib>
#include <map>
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

std::vector<std::pair<std::string, size_t>> presumed_lines(const std::string& source,
                                                           const std::string& filename) {
  std::vector<std::pair<std::string, size_t>> out;
  std::string file = filename;
  size_t presumed = 1;
  std::istringstream is(source);
  for (std::string l; std::getline(is, l);) {
    if (l.compare(0, 6, "#line ") == 0) {
      presumed = std::strtoul(l.c_str() + 6, nullptr, 10);
      const size_t q = l.find('"'), r = l.rfind('"');
      if (q != std::string::npos && r > q) file = l.substr(q + 1, r - q - 1);
      out.emplace_back(file, 0);
      continue;
    }
    out.emplace_back(file, presumed++);
  }
  return out;
}

std::vector<size_t> nvrtc_error_lines(const std::string& log, const std::string& filename,
                                      const std::string& source) {
  // The source's #line directives (a whole file with its headers written in): which line of
  // the source each (file, line) NVRTC names is.
  std::map<std::pair<std::string, size_t>, size_t> physical;
  bool directives = false;
  const std::vector<std::pair<std::string, size_t>> presumed = presumed_lines(source, filename);
  for (size_t i = 0; i < presumed.size(); ++i) {
    if (presumed[i].second == 0) directives = true;
    else physical.emplace(presumed[i], i + 1);
  }
  std::vector<size_t> lines;
  std::istringstream is(log);
  std::string line;
  while (std::getline(is, line)) {
    const size_t open = line.find('(');
    if (open == std::string::npos || open == 0) continue;
    const std::string file = line.substr(0, open);
    if (file != filename && !directives) continue;
    const size_t close = line.find(')', open);
    if (close == std::string::npos || line.find("error", close) == std::string::npos) continue;
    const std::string digits = line.substr(open + 1, close - open - 1);
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const size_t n = std::stoul(digits);
    if (!directives) {
      lines.push_back(n);
      continue;
    }
    auto it = physical.find({file, n});
    if (it != physical.end()) lines.push_back(it->second);
  }
  return lines;
}

}  // namespace torch_cudajit::detail
