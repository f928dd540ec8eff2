// torch_cudajit: the headers NVRTC and the front end see (see headers.h): the package's device
// headers, CUDA's and CCCL's, found once per call from the environment, the NVRTC in use and
// the usual toolkit folder.
#include "headers.h"

#include "cuda_api.h"
#include "file_io.h"
#include "options.h"
#include "tokens.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <mutex>

#ifndef CJ_SOURCE_INCLUDE_DIR
#define CJ_SOURCE_INCLUDE_DIR ""
#endif

namespace torch_cudajit {

using detail::dirname_of;
using detail::file_exists;

namespace {

std::mutex& include_mutex() {
  static std::mutex m;
  return m;
}
std::string& package_include_override() {
  static std::string dir;
  return dir;
}

std::string find_package_include_dir() {
  {
    std::lock_guard<std::mutex> lock(include_mutex());
    if (!package_include_override().empty()) return package_include_override();
  }
  if (const char* env = std::getenv("TORCH_CUDAJIT_INCLUDE_DIR")) return env;
  // Next to the library holding this code: the pip package (torch_cudajit/lib/libtorch_cudajit.so
  // -> torch_cudajit/include), an installed CMake prefix (lib/ -> include/torch_cudajit).
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&find_package_include_dir), &info) && info.dli_fname) {
    std::string lib_dir = dirname_of(info.dli_fname);
    for (const std::string& c : {lib_dir + "/../include", lib_dir + "/../include/torch_cudajit",
                                 lib_dir + "/include", lib_dir + "/torch_cudajit/include"})
      if (file_exists(c + "/cj/cj.cuh")) return c;
  }
  return CJ_SOURCE_INCLUDE_DIR;
}

// The CUDA major version of an NVRTC library from its file name (libnvrtc.so.13.0.88 -> 13).
int nvrtc_major_from_file(const std::string& path) {
  const size_t at = path.rfind(".so.");
  if (at == std::string::npos) return 0;
  return std::atoi(path.c_str() + at + 4);
}

// CUDA_VERSION / 1000 of the cuda.h in a folder, 0 when unknown.
int cuda_header_major(const std::string& dir) {
  std::ifstream f(dir + "/cuda.h");
  std::string line;
  while (std::getline(f, line)) {
    const size_t at = line.find("#define CUDA_VERSION ");
    if (at != std::string::npos) return std::atoi(line.c_str() + at + 21) / 1000;
  }
  return 0;
}

std::vector<std::string>& extra_cuda_include_dirs() {  // guarded by include_mutex
  static std::vector<std::string> dirs;
  return dirs;
}

}  // namespace

void add_cuda_include_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(include_mutex());
  extra_cuda_include_dirs().push_back(dir);
}

std::string cuda_include_dir() {
  std::vector<std::string> candidates;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env)) candidates.push_back(std::string(v) + "/include");
  // The headers that ship with the NVRTC we loaded (toolkit or NVIDIA wheel) match it best.
  const std::string nvrtc_path = detail::nvrtc_library_file();
  if (nvrtc_path.find('/') != std::string::npos)
    candidates.push_back(dirname_of(dirname_of(nvrtc_path)) + "/include");
  {
    std::lock_guard<std::mutex> lock(include_mutex());
    for (const std::string& d : extra_cuda_include_dirs()) candidates.push_back(d);
  }
  candidates.push_back("/usr/local/cuda/include");
  // Headers of NVRTC's own CUDA major version first; among those, a complete folder: one that
  // also has libcu++ (CCCL), which cooperative_groups.h and the cuda/std headers need, and crt/,
  // which vector_types.h and cuda_runtime.h include. NVIDIA's wheels ship the CUDA headers with
  // either missing (CCCL and crt/ come in wheels of their own), and the front end cannot read a
  // float2 without crt/.
  const int major = nvrtc_major_from_file(nvrtc_path);
  auto complete = [](const std::string& c) {
    return (file_exists(c + "/cccl/cuda/std/type_traits") || file_exists(c + "/cuda/std/type_traits")) &&
           file_exists(c + "/crt/host_defines.h");
  };
  for (int pass = 0; pass < 4; ++pass) {
    const bool want_version = pass < 2, want_complete = pass % 2 == 0;
    for (const auto& c : candidates) {
      if (!file_exists(c + "/cuda_fp16.h")) continue;
      if (want_version && (major <= 0 || cuda_header_major(c) != major)) continue;
      if (want_complete && !complete(c)) continue;
      return c;
    }
  }
  return "";
}

std::string toolkit_include_dir() {
  const std::vector<std::string> dirs = default_include_dirs();
  return dirs.size() > 1 ? dirs.back() : "";
}

void set_package_include_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(include_mutex());
  package_include_override() = dir;
}

std::vector<std::string> default_include_dirs() {
  std::vector<std::string> dirs;
  std::string pkg = find_package_include_dir();
  TORCH_CHECK(file_exists(pkg + "/cj/cj.cuh"),
              "torch_cudajit: cannot find the device header cj/cj.cuh (looked in '", pkg,
              "'). Set TORCH_CUDAJIT_INCLUDE_DIR to the torch_cudajit/include folder.");
  dirs.push_back(pkg);
  std::string cuda = cuda_include_dir();
  if (!cuda.empty()) {
    // CUDA 13 keeps libcu++ (cuda/std/...) in include/cccl.
    if (file_exists(cuda + "/cccl/cuda/std/type_traits")) dirs.push_back(cuda + "/cccl");
    dirs.push_back(cuda);
  }
  return dirs;
}


bool is_user_header(const std::string& path, const std::vector<std::string>& system_dirs) {
  if (path.empty() || path[0] != '/' || path.rfind("/torch_cudajit/", 0) == 0) return false;
  for (const std::string& dir : system_dirs)
    if (detail::under_folder(path, dir)) return false;
  return true;
}

const std::vector<std::string>& host_platform_macros() {
  static const std::vector<std::string> macros = [] {
    std::vector<std::string> m;
#if defined(__linux__)
    for (const char* name : {"__linux__", "__linux", "__gnu_linux__", "__unix__", "__unix", "__ELF__"})
      m.push_back(std::string("-D") + name + "=1");
#endif
#if defined(__x86_64__)
    for (const char* name : {"__x86_64__", "__x86_64", "__amd64__", "__amd64"})
      m.push_back(std::string("-D") + name + "=1");
#elif defined(__aarch64__)
    m.push_back("-D__aarch64__=1");
#endif
    return m;
  }();
  return macros;
}

namespace {

// The functions <cuda_device_runtime_api.h> declares, read from the header in use (its
// `cudaName(` declarations); a fixed few when it is not found.
const std::vector<std::string>& device_runtime_functions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    std::string text;
    const std::string dir = cuda_include_dir();
    if (!dir.empty() && detail::read_file(dir + "/cuda_device_runtime_api.h", text)) {
      const std::vector<detail::Token> t = detail::tokenize(text, 0, text.size());
      for (size_t i = 0; i + 1 < t.size(); ++i)
        if (t[i].ident && t[i + 1].text == "(" && t[i].text.size() > 4 &&
            t[i].text.compare(0, 4, "cuda") == 0 && std::isupper(static_cast<unsigned char>(t[i].text[4])))
          out.push_back(t[i].text);
    }
    for (const char* n : {"cudaGetParameterBuffer", "cudaLaunchDevice", "cudaGraphSetConditional",
                          "cudaDeviceSynchronize", "cudaGraphLaunch"})
      out.push_back(n);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    // Functions device code has without the device runtime.
    for (const char* builtin : {"cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString",
                                "cudaGetErrorName"})
      out.erase(std::remove(out.begin(), out.end(), builtin), out.end());
    return out;
  }();
  return names;
}

}  // namespace

bool uses_device_runtime(const std::string& text) {
  if (text.find("<<<") != std::string::npos) return true;
  if (text.find("cuda") == std::string::npos) return false;
  const std::vector<std::string>& names = device_runtime_functions();
  for (const detail::Token& t : detail::tokenize(text, 0, text.size()))
    if (t.ident && std::binary_search(names.begin(), names.end(), t.text)) return true;
  return false;
}

std::string cudadevrt_library() {
  std::vector<std::string> dirs;
  const std::string inc = cuda_include_dir();
  if (!inc.empty()) {
    const std::string root = dirname_of(inc);
    dirs = {root + "/lib64", root + "/lib", root + "/lib/x64"};
    // A toolkit's targets/<arch>/include: its libraries are beside it.
    dirs.push_back(root + "/targets/x86_64-linux/lib");
    dirs.push_back(root + "/targets/sbsa-linux/lib");
  }
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env)) dirs.push_back(std::string(v) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& d : dirs)
    if (file_exists(d + "/libcudadevrt.a")) return d + "/libcudadevrt.a";
  return "";
}

std::vector<std::string> frontend_args(const std::vector<std::string>& options,
                                       const std::string& std, int arch,
                                       const std::string& filename) {
  const UserOptions user = parse_user_options(options);
  const std::string standard = !user.std.empty() ? user.std : std.empty() ? "c++17" : std;
  std::vector<std::string> args = {"-std=" + standard};
  // NVRTC looks for quoted includes in the program's folder first: the working directory, or
  // the folder part of its name taken from there.
  std::string folder = filename.find('/') == std::string::npos ? "" : dirname_of(filename);
  if (folder.empty() || folder[0] != '/') {
    char cwd[4096];
    const std::string here = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
    folder = folder.empty() ? here : here + "/" + folder;
  }
  args.push_back("-iquote");
  args.push_back(folder);
  // __CUDA_ARCH__ of the compile: declarations and includes under #if __CUDA_ARCH__ are read
  // as NVRTC reads them. (Clang's own value comes from --cuda-gpu-arch, which knows fewer
  // architectures than NVRTC.)
  const std::string arch_value = std::to_string(arch * 10);
  args.push_back("-U__CUDA_ARCH__");
  args.push_back("-D__CUDA_ARCH__=" + arch_value);
  args.push_back("-D__CUDA_ARCH_LIST__=" + arch_value);
  const std::vector<std::string> include_dirs = default_include_dirs();
  for (const auto& dir : include_dirs) args.push_back("-I" + dir);
  // The front end always reads everything cj/cj.cuh can give: its preamble is parsed once per
  // process for every source, and a declaration may name any of it.
  for (const std::string& m : detail::implicit_macros({true, true})) args.push_back(m);
  const int version = detail::nvrtc_version();
  args.push_back("-D__CUDACC_VER_MAJOR__=" + std::to_string(version / 1000));
  args.push_back("-D__CUDACC_VER_MINOR__=" + std::to_string(version % 1000 / 10));
  args.push_back("-D__CUDACC_VER_BUILD__=0");
  for (const std::string& m : host_platform_macros()) args.push_back(m);
  args.push_back("-include");
  args.push_back("cj/cj.cuh");
  // The preprocessor options, in Clang's spelling and NVRTC's order; the others do not change
  // declarations.
  for (const auto& dir : user.include_dirs) args.push_back("-I" + dir);
  args.insert(args.end(), user.macros.begin(), user.macros.end());
  for (const auto& file : user.pre_includes) {
    args.push_back("-include");
    args.push_back(file);
  }
  return args;
}


namespace detail {

// The text as the preprocessor's directive reader sees it: backslash-newlines joined, comments
// replaced by a space (string and character literals kept), one entry per logical line.
static std::vector<std::string> logical_lines(const std::string& text) {
  std::vector<std::string> lines(1);
  enum { kCode, kLineComment, kBlockComment, kString, kChar } state = kCode;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\\' && (next == '\n' || (next == '\r' && i + 2 < text.size() && text[i + 2] == '\n'))) {
      i += next == '\r' ? 2 : 1;  // a continuation: the logical line goes on
      continue;
    }
    if (c == '\n') {
      if (state == kLineComment || state == kString || state == kChar) state = kCode;
      if (state == kCode) lines.emplace_back();
      continue;  // a newline inside a block comment keeps the logical line (it is a space)
    }
    std::string& line = lines.back();
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') { state = kLineComment; line += ' '; ++i; }
        else if (c == '/' && next == '*') { state = kBlockComment; line += ' '; ++i; }
        else { if (c == '"') state = kString; else if (c == '\'') state = kChar; line += c; }
        break;
      case kBlockComment:
        if (c == '*' && next == '/') { state = kCode; ++i; }
        break;
      case kLineComment:
        break;
      case kString:
      case kChar:
        line += c;
        if (c == '\\' && i + 1 < text.size()) line += text[++i];
        else if (c == (state == kString ? '"' : '\'')) state = kCode;
        break;
    }
  }
  return lines;
}

// Trimmed, for messages.
static std::string trimmed(const std::string& l) {
  const size_t b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : l.substr(b, e - b + 1);
}

// The headers a text reads: #include directives, and the headers whose existence it tests with
// __has_include. `inexact` receives the first line that names a header through a macro
// (#include HDR, __has_include(HDR)): what such a text reads depends on the preprocessor, which
// this scan does not run.
std::vector<Include> scan_includes(const std::string& text, std::string& inexact) {
  std::vector<Include> out;
  auto skip_space = [](const std::string& l, size_t i) {
    while (i < l.size() && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r')) ++i;
    return i;
  };
  for (const std::string& l : logical_lines(text)) {
    // __has_include(<name>) reads whether a header exists: the key records that like an
    // #include (found or not). Only a name given through a macro cannot be resolved.
    for (size_t at = l.find("__has_include"); at != std::string::npos;
         at = l.find("__has_include", at + 13)) {
      size_t j = at + 13;
      if (l.compare(j, 5, "_next") == 0) j += 5;
      j = skip_space(l, j);
      if (j >= l.size() || l[j] != '(') continue;  // defined(__has_include)
      j = skip_space(l, j + 1);
      const char close = j < l.size() && l[j] == '"' ? '"' : j < l.size() && l[j] == '<' ? '>' : 0;
      const size_t end = close ? l.find(close, j + 1) : std::string::npos;
      if (end != std::string::npos) {
        out.push_back({l.substr(j + 1, end - j - 1), close == '"'});
      } else if (inexact.empty()) {
        inexact = trimmed(l);
      }
    }
    size_t i = skip_space(l, 0);
    if (i >= l.size() || l[i] != '#') continue;
    i = skip_space(l, i + 1);
    size_t word = i;
    while (i < l.size() && (std::isalnum(static_cast<unsigned char>(l[i])) || l[i] == '_')) ++i;
    const std::string directive = l.substr(word, i - word);
    if (directive != "include" && directive != "include_next" && directive != "import") continue;
    i = skip_space(l, i);
    if (i < l.size() && (l[i] == '"' || l[i] == '<')) {
      const char close = l[i] == '"' ? '"' : '>';
      const size_t end = l.find(close, i + 1);
      if (end != std::string::npos) {
        out.push_back({l.substr(i + 1, end - i - 1), close == '"'});
        continue;
      }
    }
    if (inexact.empty()) inexact = trimmed(l);  // #include MACRO, or a malformed directive
  }
  return out;
}

namespace {

bool contains(std::initializer_list<const char*> names, const std::string& id) {
  for (const char* n : names)
    if (id == n) return true;
  return false;
}

// Whether an identifier names something of cuda_fp16.h or cuda_bf16.h (see ImplicitNeeds).
bool names_half_api(const std::string& id) {
  std::string lower(id);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* part : {"half", "bfloat16", "fp16", "bf16"})
    if (lower.find(part) != std::string::npos) return true;
  if (id.rfind("__h", 0) == 0) return true;  // __hadd, __hmul2, __heq, __hisnan, __high2float, ...
  if (id.size() < 3 || id[0] != 'h') return false;
  // The half math functions: hsin, h2sqrt, hrcp, htanh_approx, hmax, ...
  return contains({"ceil", "cos", "exp", "exp10", "exp2", "floor", "log", "log10", "log2", "rcp",
                   "rint", "rsqrt", "sin", "sqrt", "tanh", "tanh_approx", "trunc", "max", "min"},
                  id.substr(id[1] == '2' ? 2 : 1));
}

// Whether an identifier names something the implicit prelude's <math.h> adds (see ImplicitNeeds).
bool names_math_api(const std::string& id) {
  if (id == "std" || id.rfind("M_", 0) == 0 || id.rfind("FP_", 0) == 0 || id.rfind("HUGE_VAL", 0) == 0 ||
      id.rfind("MATH_ERR", 0) == 0)
    return true;
  return contains({"INFINITY", "NAN", "float_t", "double_t", "fpclassify", "isnormal", "isgreater",
                   "isgreaterequal", "isless", "islessequal", "islessgreater", "isunordered",
                   "isfinite", "isinf", "isnan", "signbit", "abs", "fabs", "fmod", "remainder",
                   "remquo", "fma", "fmax", "fmin", "fdim", "nan", "exp", "exp2", "expm1", "log",
                   "log10", "log2", "log1p", "pow", "sqrt", "cbrt", "hypot", "sin", "cos", "tan",
                   "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
                   "atanh", "erf", "erfc", "tgamma", "lgamma", "ceil", "floor", "trunc", "round",
                   "lround", "llround", "nearbyint", "rint", "lrint", "llrint", "frexp", "ldexp",
                   "modf", "scalbn", "scalbln", "ilogb", "logb", "nextafter", "copysign"},
                  id);
}

}  // namespace

bool includes_only_known_headers(const std::string& text) {
  std::string inexact;
  const std::vector<Include> includes = scan_includes(text, inexact);
  if (!inexact.empty()) return false;
  if (includes.empty()) return true;
  const std::vector<std::string> dirs = default_include_dirs();
  for (const Include& inc : includes) {
    bool known = false;
    for (const std::string& dir : dirs)
      if (!inc.name.empty() && inc.name[0] != '/' && file_exists(dir + "/" + inc.name)) {
        known = true;
        break;
      }
    if (!known) return false;
  }
  return true;
}

ImplicitNeeds implicit_needs(const std::string& text) {
  ImplicitNeeds needs;
  bool line_start = true;
  for (size_t i = 0; i < text.size() && !(needs.half && needs.math);) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (line_start && c == '#') {
      // The words of an #include name a file (<cuda/std/cstdint>, <cuda_fp16.h>), not code;
      // the header itself is checked below.
      size_t j = text.find_first_not_of(" \t", i + 1);
      if (j != std::string::npos && text.compare(j, 7, "include") == 0) {
        i = text.find('\n', j);
        if (i == std::string::npos) break;
        continue;
      }
    }
    if (c != ' ' && c != '\t' && c != '\r') line_start = false;
    if (std::isalpha(c) || c == '_') {
      size_t e = i;
      while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
      const std::string id = text.substr(i, e - i);
      needs.half = needs.half || names_half_api(id);
      needs.math = needs.math || names_math_api(id);
      i = e;
    } else if (std::isdigit(c)) {  // a number's suffix or exponent is not an identifier
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' ||
                                 text[i] == '.'))
        ++i;
    } else {
      ++i;
    }
  }
  // A header of the user's own may rely on what cj/cj.cuh has always given, so it keeps it all.
  if (!(needs.half && needs.math) && !includes_only_known_headers(text)) needs = {true, true};
  return needs;
}

std::vector<std::string> implicit_macros(const ImplicitNeeds& needs) {
  std::vector<std::string> out;
  // Without the CUDA headers cj/cj.cuh cannot include the fp16/bf16 ones.
  if (needs.half && default_include_dirs().size() > 1) {
    out.push_back("-DCJ_HAVE_FP16");
    out.push_back("-DCJ_HAVE_BF16");
  }
  if (needs.math) out.push_back("-DCJ_IMPLICIT_MATH");
  return out;
}

}  // namespace detail
}  // namespace torch_cudajit
