// torch_cudajit: the headers NVRTC and the front end see (see headers.h): the package's device
// headers, CUDA's and CCCL's, found once per call from the environment, the NVRTC in use and
// the usual toolkit folder.
#include "headers.h"

#include "cuda_api.h"
#include "file_io.h"
#include "options.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
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

}  // namespace

std::string cuda_include_dir() {
  std::vector<std::string> candidates;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env)) candidates.push_back(std::string(v) + "/include");
  // The headers that ship with the NVRTC we loaded (toolkit or NVIDIA wheel) match it best.
  const std::string nvrtc_path = detail::nvrtc_library_file();
  if (nvrtc_path.find('/') != std::string::npos)
    candidates.push_back(dirname_of(dirname_of(nvrtc_path)) + "/include");
  candidates.push_back("/usr/local/cuda/include");
  // Headers of NVRTC's own CUDA major version first; among those, a folder that also has
  // libcu++ (CCCL), which cooperative_groups.h and the cuda/std headers need (NVIDIA's runtime
  // wheels ship the CUDA headers without it).
  const int major = nvrtc_major_from_file(nvrtc_path);
  auto has_cccl = [](const std::string& c) {
    return file_exists(c + "/cccl/cuda/std/type_traits") || file_exists(c + "/cuda/std/type_traits");
  };
  for (int pass = 0; pass < 4; ++pass) {
    const bool want_version = pass < 2, want_cccl = pass % 2 == 0;
    for (const auto& c : candidates) {
      if (!file_exists(c + "/cuda_fp16.h")) continue;
      if (want_version && (major <= 0 || cuda_header_major(c) != major)) continue;
      if (want_cccl && !has_cccl(c)) continue;
      return c;
    }
  }
  return "";
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


std::vector<std::string> frontend_args(const std::vector<std::string>& options,
                                       const std::string& std) {
  std::vector<std::string> args = {"-std=" + (std.empty() ? std::string("c++17") : std)};
  const std::vector<std::string> include_dirs = default_include_dirs();
  for (const auto& dir : include_dirs) args.push_back("-I" + dir);
  if (include_dirs.size() > 1) {  // as in nvrtc_options
    args.push_back("-DCJ_HAVE_FP16");
    args.push_back("-DCJ_HAVE_BF16");
  }
  const int version = detail::nvrtc_version();
  args.push_back("-D__CUDACC_VER_MAJOR__=" + std::to_string(version / 1000));
  args.push_back("-D__CUDACC_VER_MINOR__=" + std::to_string(version % 1000 / 10));
  args.push_back("-D__CUDACC_VER_BUILD__=0");
  args.push_back("-include");
  args.push_back("cj/cj.cuh");
  // The preprocessor options, in Clang's spelling; the others do not change declarations.
  const UserOptions user = parse_user_options(options);
  for (const auto& dir : user.include_dirs) args.push_back("-I" + dir);
  args.insert(args.end(), user.macros.begin(), user.macros.end());
  for (const auto& file : user.pre_includes) {
    args.push_back("-include");
    args.push_back(file);
  }
  return args;
}


}  // namespace torch_cudajit
