// torch_cudajit: finding and opening libclang (see libclang.h).
#include "libclang.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace torch_cudajit {
namespace detail {
namespace {

std::mutex& path_mutex() {
  static std::mutex m;
  return m;
}
std::string& configured_path() {
  static std::string p;
  return p;
}

std::vector<std::string> libclang_candidates() {
  std::vector<std::string> out;
  {
    std::lock_guard<std::mutex> lock(path_mutex());
    if (!configured_path().empty()) out.push_back(configured_path());
  }
  out.emplace_back("libclang.so");
  out.emplace_back("libclang.so.1");
  for (int v = 22; v >= 14; --v) {
    out.push_back("libclang-" + std::to_string(v) + ".so.1");
    out.push_back("/usr/lib/llvm-" + std::to_string(v) + "/lib/libclang.so.1");
  }
  return out;
}

LibclangApi load_libclang() {
  LibclangApi api;
  // libclang runs each parse on a thread of its own with an 8 MB stack, which deeply nested
  // declarations overflow (a crash, not an error). The front end parses on a thread with a
  // large stack of its own instead (frontend.cpp), so libclang must not start another one.
  setenv("LIBCLANG_NOTHREADS", "1", 1);
  std::string tried;
  void* handle = nullptr;
  // A library named explicitly must be the one used: falling back to another would hide the
  // mistake, and run another front end than the one asked for.
  if (const char* env = std::getenv("TORCH_CUDAJIT_LIBCLANG"); env != nullptr && *env != '\0') {
    struct stat st;
    const bool file = stat(env, &st) == 0 && S_ISREG(st.st_mode);
    handle = file ? dlopen(env, RTLD_NOW | RTLD_LOCAL) : nullptr;
    const char* why = dlerror();
    TORCH_CHECK(handle != nullptr, "torch_cudajit: TORCH_CUDAJIT_LIBCLANG is '", env,
                "', which cannot be loaded: ",
                file ? (why != nullptr ? why : "dlopen failed")
                     : (stat(env, &st) != 0 ? "no such file" : "it is not a regular file"),
                ". Point it at a libclang.so (LLVM 14 or newer), or unset it to use the `libclang` "
                "package's library.");
    api.path = env;
  }
  for (const auto& c : libclang_candidates()) {
    if (handle != nullptr) break;
    // RTLD_LOCAL: LLVM's symbols must not interpose on those of another LLVM in the process
    // (Triton's, numba's).
    if ((handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      api.path = c;
      break;
    }
    tried += "\n  " + c;
  }
  TORCH_CHECK(handle != nullptr,
              "torch_cudajit: could not load libclang, which reads kernel declarations. Tried:",
              tried,
              "\nInstall it with `pip install libclang` (the Python package finds it), or set "
              "TORCH_CUDAJIT_LIBCLANG to a libclang.so (LLVM 14 or newer).");
#define CJ_LOAD_CLANG(name, type)                                                          \
  api.name = reinterpret_cast<LibclangApi::name##_type>(dlsym(handle, #name));            \
  TORCH_CHECK(api.name != nullptr, "torch_cudajit: ", api.path, " has no entry point " #name \
              "; libclang from LLVM 14 or newer is required.");
  CJ_LIBCLANG_FUNCTIONS(CJ_LOAD_CLANG)
#undef CJ_LOAD_CLANG
  api.clang_getFileContents = reinterpret_cast<decltype(api.clang_getFileContents)>(
      dlsym(handle, "clang_getFileContents"));
  return api;
}

}  // namespace

const LibclangApi& libclang() {
  static const LibclangApi api = load_libclang();
  return api;
}

std::string take(CXString s) {
  const char* c = libclang().clang_getCString(s);
  std::string out = c != nullptr ? c : "";
  libclang().clang_disposeString(s);
  return out;
}

}  // namespace detail

void set_libclang_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(detail::path_mutex());
  detail::configured_path() = path;
}

namespace {
std::string file_identity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}
}  // namespace

std::string frontend_identity() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&frontend_identity), &info) != 0 && info.dli_fname != nullptr)
    return file_identity(info.dli_fname);
  return "";
}

std::string libclang_identity() {
  // The candidate load_libclang would open first: the explicit one, else the first path that
  // exists; a bare name is resolved by the dynamic loader, which cannot be asked without
  // loading it.
  if (const char* env = std::getenv("TORCH_CUDAJIT_LIBCLANG"); env != nullptr && *env != '\0')
    return file_identity(env);
  for (const auto& c : detail::libclang_candidates()) {
    if (c.find('/') == std::string::npos) return "";
    if (std::string id = file_identity(c); !id.empty()) return id;
  }
  return "";
}

std::string libclang_version() {
  return detail::take(detail::libclang().clang_getClangVersion());
}

}  // namespace torch_cudajit
