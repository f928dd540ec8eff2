// torch_cudajit: what a failed compile reports (see program.h): CompileError, and the reading of
// NVRTC's log that finds its first error, drops its follow-on noise and names a missing header
// set.
#include "program.h"

#include "excerpt.h"
#include "file_io.h"

#include <algorithm>
#include <sstream>

namespace torch_cudajit {

using detail::file_exists;

namespace detail {

std::string kernel_names(const std::vector<InstantiationRequest>& requests) {
  std::string names;
  for (const auto& r : requests)
    if (names.find(r.kernel) == std::string::npos) names += (names.empty() ? "" : ", ") + r.kernel;
  return names;
}

std::string missing_header_hint(const std::string& log, const std::string& cuda) {
  const std::string marker = "cannot open source file \"";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const std::string header = log.substr(start, log.find('"', start) - start);
  auto starts = [&](const char* prefix) { return header.rfind(prefix, 0) == 0; };
  if (starts("cuda/") || starts("nv/") || starts("cub/") || starts("thrust/")) {
    if (!cuda.empty() && file_exists(cuda + "/cccl/cuda/std/type_traits")) return "";
    if (!cuda.empty() && file_exists(cuda + "/cuda/std/type_traits")) return "";
    return "'" + header + "' is part of CCCL (libcu++, CUB, Thrust), which was not found" +
           (cuda.empty() ? std::string() : " next to the CUDA headers in '" + cuda + "'") +
           ". Install it with `pip install nvidia-cuda-cccl` (torch's CUDA 13 wheels; "
           "nvidia-cuda-cccl-cu12 for CUDA 12), or set CUDA_HOME to a CUDA toolkit.\n";
  }
  if (cuda.empty() && (starts("cuda") || starts("cooperative_groups") || starts("mma.h") ||
                       starts("math_constants.h") || starts("sm_"))) {
    return "'" + header + "' is a CUDA header, and none were found (no cuda_fp16.h under "
           "CUDA_HOME, next to the NVRTC library in use, or in /usr/local/cuda). Install torch's "
           "CUDA wheels (`pip install nvidia-cuda-runtime`) or set CUDA_HOME to a CUDA toolkit.\n";
  }
  return "";
}

std::string first_error(const std::string& log) {
  std::istringstream is(log);
  std::string line, out;
  bool in_error = false;
  while (std::getline(is, line)) {
    if (in_error) {
      // Only the argument list of a failed overload resolution belongs to the error; the code
      // excerpt and the candidates follow in the full log.
      const size_t at = line.find("argument types are: (");
      if (at == std::string::npos) break;
      std::string types = line.substr(at);
      const std::string tag = "cj::detail::priority<1>, ";
      const size_t t = types.find(tag);
      if (t != std::string::npos) types.erase(t, tag.size());
      out += "\n    " + types;
      break;
    }
    const bool error = line.find(": error: ") != std::string::npos ||
                       line.find(": catastrophic error: ") != std::string::npos;
    if (!error || line.rfind("__nv_name_map", 0) == 0) continue;
    out = "  " + line;
    in_error = true;
  }
  return out;
}

std::string condensed_log(const std::string& log) {
  std::istringstream is(log);
  std::string line, out;
  size_t follow_ups = 0;
  bool skipping = false;
  while (std::getline(is, line)) {
    if (line.rfind("__nv_name_map", 0) == 0) {
      follow_ups += line.find(": error: ") != std::string::npos;
      skipping = true;
      continue;
    }
    // A name-map error's excerpt and caret run up to the blank line that ends it.
    if (skipping) {
      const bool excerpt = !line.empty() && (line[0] == ' ' || line[0] == '\t');
      skipping = excerpt;
      if (excerpt || line.empty()) continue;
    }
    out += line + "\n";
  }
  if (follow_ups > 0)
    out += "(" + std::to_string(follow_ups) + " follow-on error(s) of NVRTC's name map "
           "(__nv_name_map), caused by the errors above, are left out here; CompileError.log "
           "has the whole log.)\n";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace detail

CompileError::CompileError(std::string kernel_name, std::string arch,
                           std::vector<std::string> options, std::string log,
                           const std::string& source, const std::string& filename,
                           std::string hint)
    : c10::Error(
          [&] {
            std::ostringstream os;
            os << "torch_cudajit: kernel '" << kernel_name << "' failed to compile for " << arch
               << ".\n" << hint << "NVRTC options:";
            for (const auto& o : options) os << " " << o;
            os << "\nNVRTC log:\n" << detail::condensed_log(log);
            const std::string excerpt =
                detail::source_excerpt(source, detail::nvrtc_error_lines(log, filename, source));
            if (!excerpt.empty())
              os << "\nSource (" << filename << "; CompileError.source has all of it, numbered):\n"
                 << excerpt;
            return os.str();
          }(),
          /*backtrace=*/nullptr),
      kernel_name_(std::move(kernel_name)),
      arch_(std::move(arch)),
      options_(std::move(options)),
      log_(std::move(log)),
      numbered_source_(number_lines(source)),
      hint_(std::move(hint)) {}

std::string number_lines(const std::string& source) {
  return detail::numbered_lines(source, 1, std::string::npos);
}

}  // namespace torch_cudajit
