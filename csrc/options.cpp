// torch_cudajit: the user's NVRTC options by role (see options.h).
#include "options.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>

namespace torch_cudajit {

bool is_arch_variant_option(const std::string& o) {
  for (const std::string flag : {"-arch=sm_", "--gpu-architecture=sm_"}) {
    if (o.rfind(flag, 0) != 0) continue;
    size_t end = flag.size();
    while (end < o.size() && std::isdigit(static_cast<unsigned char>(o[end]))) ++end;
    return end > flag.size() && end + 1 == o.size() && (o[end] == 'a' || o[end] == 'f');
  }
  return false;
}

UserOptions parse_user_options(const std::vector<std::string>& extra) {
  UserOptions out;
  for (size_t i = 0; i < extra.size(); ++i) {
    const std::string& o = extra[i];
    const bool has_value = i + 1 < extra.size();
    // The value of `flag` in o: "--flag=V", "--flag V", "-FV" or "-F V"; consumes the next
    // option when the value is separate.
    auto value_of = [&](const std::string& flag) -> std::optional<std::string> {
      if (o == flag && has_value) return extra[++i];
      if (flag.size() > 2 && o.rfind(flag + "=", 0) == 0) return o.substr(flag.size() + 1);
      if (flag.size() == 2 && o.size() > 2 && o.rfind(flag, 0) == 0) return o.substr(2);
      return std::nullopt;
    };
    if (auto v = value_of("-I")) out.include_dirs.push_back(*v);
    else if (auto v = value_of("--include-path")) out.include_dirs.push_back(*v);
    else if (auto v = value_of("-D")) out.macros.push_back("-D" + *v);
    else if (auto v = value_of("--define-macro")) out.macros.push_back("-D" + *v);
    else if (auto v = value_of("-U")) out.macros.push_back("-U" + *v);
    else if (auto v = value_of("--undefine-macro")) out.macros.push_back("-U" + *v);
    else if (auto v = value_of("--pre-include")) out.pre_includes.push_back(*v);
    else if (auto v = value_of("-include")) out.pre_includes.push_back(*v);
    else if (auto v = value_of("-std")) out.std = *v, out.others.push_back("-std=" + *v);
    else if (auto v = value_of("--std")) out.std = *v, out.others.push_back("-std=" + *v);
    else {
      if (is_arch_variant_option(o)) {
        out.arch_variant = o.substr(o.find("sm_"));
        continue;  // the compile's own -arch carries it
      }
      out.others.push_back(o);
    }
  }
  for (const std::string& o : out.others) {
    if (o.rfind("--maxrregcount=", 0) == 0) {
      out.link_options.push_back("-maxrregcount=" + o.substr(15));
    } else if (o.rfind("-maxrregcount=", 0) == 0) {
      out.link_options.push_back(o);
    } else if (o.rfind("--ptxas-options=-O", 0) == 0) {
      out.link_options.push_back(o.substr(16));
    } else if (o == "--use_fast_math" || o == "-use_fast_math") {
      for (const char* f : {"-ftz=true", "-prec-div=false", "-prec-sqrt=false", "-fma=true"})
        out.link_options.push_back(f);
    }
  }
  return out;
}

const std::vector<std::string>& supported_standards() {
  static const std::vector<std::string> standards = {"c++14", "c++17", "c++20"};
  return standards;
}

namespace detail {
namespace {
// A value for a message, with NUL bytes and line breaks made visible.
std::string visible(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\0') out += "\\0";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  if (out.size() <= 200) return out;
  size_t cut = 200;  // not inside a UTF-8 sequence: the message must stay text
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  return out.substr(0, cut) + "...";
}
// The value of an option that is one of `flags`: "FLAG=V", or "FLAG" followed by `next` (V);
// nullopt for another option.
std::optional<std::string> flag_value(const std::string& o, const std::string& next,
                                      std::initializer_list<const char*> flags) {
  for (const char* flag : flags) {
    const std::string f = flag;
    if (o == f) return next;
    if (o.rfind(f + "=", 0) == 0) return o.substr(f.size() + 1);
  }
  return std::nullopt;
}
// Refuses options[i] (`shown` as a message shows it), which sets the target architecture to
// `value`.
[[noreturn]] void refuse_architecture_option(size_t i, const std::string& shown,
                                             const std::string& value) {
  // "sm_80", "compute_80" or "80": the number, and whatever follows it (sm_90a's "a").
  const size_t start = value.find('_') == std::string::npos ? 0 : value.find('_') + 1;
  size_t end = start;
  while (end < value.size() && std::isdigit(static_cast<unsigned char>(value[end]))) ++end;
  const std::string number = end > start ? value.substr(start, end - start) : "90";
  const bool suffix = end > start && end < value.size();
  TORCH_CHECK_VALUE(false, "torch_cudajit: options[", i, "] is '", shown, "', which sets the "
                    "target architecture; options cannot set it. A kernel is compiled for the "
                    "architecture of the GPU it launches on, or for the one given to "
                    "compile(..., arch=...) or precompile(..., arch=...), which need no GPU. "
                    "Remove it from options", suffix ? "; an architecture-specific target is "
                    "written -arch=sm_" + number + visible(value.substr(end)) + " (one option, "
                    "with '='), and applies when the kernel compiles for sm_" + number + "." :
                    " and pass arch='sm_" + number + "' to compile or precompile to compile "
                    "for that architecture.");
}
// What the message of a standard that is not supported says after the option.
std::string standard_advice(const std::string& standard) {
  std::string accepted;
  for (const std::string& s : supported_standards())
    accepted += (accepted.empty() ? "'" : ", '") + s + "'";
  const auto& known = supported_standards();
  const bool gnu = standard.rfind("gnu++", 0) == 0;
  // gnu++17's ISO counterpart, when it is one.
  const std::string iso = gnu ? "c++" + standard.substr(5) : "";
  const bool has_iso = std::find(known.begin(), known.end(), iso) != known.end();
  return "; the C++ standard must be one of " + accepted + " (NVRTC takes these" +
         (gnu ? " and no GNU dialect" : "") + "; cj/cj.cuh needs C++14 or later). Pass std='" +
         (has_iso ? iso : std::string("c++17")) + "' to jit instead.";
}
}  // namespace

void check_options(const std::vector<std::string>& options) {
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    TORCH_CHECK_VALUE(o.find('\0') == std::string::npos, "torch_cudajit: options[", i, "] is '",
                      visible(o), "', which holds a NUL byte; the compiler would read the option "
                      "only up to there. Pass each option as its own string, without NUL bytes.");
    const std::string next = i + 1 < options.size() ? options[i + 1] : "";
    // The option as a message shows it: with its value when that is the next option.
    const bool separate = o.find('=') == std::string::npos && i + 1 < options.size();
    const std::string shown = visible(o) + (separate ? "', followed by '" + visible(next) : "");
    if (auto arch = flag_value(o, next, {"-arch", "--gpu-architecture", "-code", "--gpu-code"}))
      if (!is_arch_variant_option(o)) refuse_architecture_option(i, shown, *arch);
    if (auto standard = flag_value(o, next, {"-std", "--std"})) {
      const auto& known = supported_standards();
      TORCH_CHECK_VALUE(std::find(known.begin(), known.end(), *standard) != known.end(),
                        "torch_cudajit: options[", i, "] is '", shown, "'",
                        standard_advice(*standard));
    }
  }
}

void check_program_name(const std::string& filename) {
  TORCH_CHECK_VALUE(!filename.empty() && filename.find_first_of(std::string("\0\n\r", 3)) ==
                                             std::string::npos,
                    "torch_cudajit: filename is '", visible(filename), "'; it must be a non-empty "
                    "file name without NUL bytes or line breaks (it is written into #line "
                    "directives and compiler messages). Pass a name such as 'kernel.cu'.");
}
}  // namespace detail

}  // namespace torch_cudajit
