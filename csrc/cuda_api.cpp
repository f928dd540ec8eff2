// torch_cudajit: loading libnvrtc and libcuda at run time, and turning their error codes into
// exceptions that name the API and say what to do next.
#include "cuda_api.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <initializer_list>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace torch_cudajit {
namespace detail {
namespace {

std::mutex& search_path_mutex() {
  static std::mutex m;
  return m;
}

std::vector<std::string>& search_paths() {
  static std::vector<std::string> paths;
  return paths;
}

// NVIDIA's wheels beside a pip-installed copy of this library
// (site-packages/torch_cudajit/lib/libtorch_cudajit.so -> site-packages/nvidia/<set>/lib), so a
// LibTorch program without Python finds the NVRTC that torch's wheels brought.
std::vector<std::string> wheel_library_dirs() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&wheel_library_dirs), &info) || !info.dli_fname) return {};
  std::string lib = info.dli_fname;
  lib = lib.substr(0, lib.rfind('/') == std::string::npos ? 0 : lib.rfind('/'));
  std::vector<std::string> out;
  for (const char* set : {"cu13", "cuda_nvrtc", "nvjitlink", "cu12"})
    out.push_back(lib + "/../../nvidia/" + set + "/lib");
  return out;
}

// Where a CUDA library is looked for, in order: the search paths the Python package adds
// (NVIDIA wheels), NVIDIA wheels beside this library, CUDA_HOME / CUDA_PATH, the dynamic
// linker's own search, /usr/local/cuda.
std::vector<std::string> library_candidates(std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  {
    std::lock_guard<std::mutex> lock(search_path_mutex());
    for (const auto& dir : search_paths())
      for (const char* n : names) out.push_back(dir + "/" + n);
  }
  for (const auto& dir : wheel_library_dirs())
    for (const char* n : names) out.push_back(dir + "/" + n);
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* v = std::getenv(env))
      for (const char* n : names) out.push_back(std::string(v) + "/lib64/" + n);
  }
  for (const char* n : names) out.push_back(n);
  for (const char* n : names) out.push_back(std::string("/usr/local/cuda/lib64/") + n);
  return out;
}

std::vector<std::string> nvrtc_candidates() {
  return library_candidates({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
}

// dlopens the first candidate that loads; `path` receives it, `tried` the ones that did not.
void* open_first(const std::vector<std::string>& candidates, std::string& path, std::string& tried) {
  for (const auto& c : candidates) {
    if (void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      path = c;
      return handle;
    }
    tried += "\n  " + c;
  }
  return nullptr;
}

NvrtcApi load_nvrtc() {
  NvrtcApi t;
  std::string tried;
  void* handle = open_first(nvrtc_candidates(), t.library_path, tried);
  TORCH_CHECK(handle != nullptr,
              "torch_cudajit: could not load NVRTC (libnvrtc.so). Tried:", tried,
              "\nInstall the CUDA toolkit or the nvidia-cuda-nvrtc wheel, or set CUDA_HOME.");
#define CJ_LOAD_NVRTC(name)                                                               \
  t.name = reinterpret_cast<decltype(t.name)>(dlsym(handle, #name));                      \
  TORCH_CHECK(t.name != nullptr, "torch_cudajit: ", t.library_path, " has no symbol " #name \
              "; NVRTC 12.0 or newer is required.");
  CJ_NVRTC_FUNCTIONS(CJ_LOAD_NVRTC)
#undef CJ_LOAD_NVRTC
  return t;
}

std::vector<std::string> nvjitlink_candidates() {
  return library_candidates({"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"});
}

NvJitLinkApi load_nvjitlink() {
  NvJitLinkApi t;
  std::string tried;
  void* handle = open_first(nvjitlink_candidates(), t.library_path, tried);
  TORCH_CHECK(handle != nullptr,
              "torch_cudajit: could not load nvJitLink (libnvJitLink.so), which link=[...] needs. "
              "Tried:", tried,
              "\nInstall the CUDA toolkit or the nvidia-nvjitlink wheel, or set CUDA_HOME.");
  // The exported names carry the library's version: __nvJitLinkCreate_13_0.
  auto find = [&](const char* name) -> void* {
    for (const char* suffix : {"_13_0", "_12_0"}) {
      std::string versioned = std::string("__") + name + suffix;
      if (void* p = dlsym(handle, versioned.c_str())) return p;
    }
    return dlsym(handle, name);
  };
#define CJ_LOAD_LINK(name)                                                                \
  t.name = reinterpret_cast<decltype(t.name)>(find(#name));                               \
  TORCH_CHECK(t.name != nullptr, "torch_cudajit: ", t.library_path, " has no entry point " #name \
              "; nvJitLink 12.0 or newer is required.");
  CJ_NVJITLINK_FUNCTIONS(CJ_LOAD_LINK)
#undef CJ_LOAD_LINK
  return t;
}

struct DriverState {
  DriverApi api;
  std::string error;  // empty when the driver loaded and initialized
};

DriverState load_driver() {
  DriverState s;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!handle) handle = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    s.error = "no CUDA driver (libcuda.so.1) could be loaded on this machine";
    return s;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!get_proc) {
    s.error = "the CUDA driver is older than CUDA 12.0 (no cuGetProcAddress_v2); update the driver";
    return s;
  }
  // Ask for each entry point at our headers' version first, then at 12.0 for older drivers.
  auto resolve = [&](const char* name, void** out) {
    for (int version : {CUDA_VERSION, 12040, 12000}) {
      CUdriverProcAddressQueryResult status;
      if (get_proc(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
          *out != nullptr)
        return true;
    }
    return false;
  };
  // An entry point this driver lacks stays null: only a call of it fails (CJ_CHECK says which),
  // so a driver older than some feature still runs everything else.
#define CJ_LOAD_DRIVER(name) resolve(#name, reinterpret_cast<void**>(&s.api.name));
  CJ_DRIVER_FUNCTIONS(CJ_LOAD_DRIVER)
#undef CJ_LOAD_DRIVER
  {
    CUdriverProcAddressQueryResult status;
    if (get_proc("cuCtxGetDevice", reinterpret_cast<void**>(&s.api.cuCtxGetDevice), 12000,
                 CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS)
      s.api.cuCtxGetDevice = nullptr;
  }
  if (s.api.cuInit == nullptr || s.api.cuGetErrorName == nullptr) {
    s.error = "the CUDA driver has no cuInit or cuGetErrorName entry point; update the driver";
    return s;
  }
  CUresult r = s.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = "?";
    s.api.cuGetErrorName(r, &name);
    s.error = std::string("cuInit failed with ") + name + " (is there a GPU on this machine?)";
  }
  return s;
}

const DriverState& driver_state() {
  static const DriverState state = load_driver();
  return state;
}

}  // namespace

void add_library_search_path(const std::string& dir) {
  std::lock_guard<std::mutex> lock(search_path_mutex());
  search_paths().push_back(dir);
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi table = load_nvrtc();
  return table;
}

const NvJitLinkApi& nvjitlink() {
  static const NvJitLinkApi table = load_nvjitlink();
  return table;
}

const DriverApi& driver() {
  const DriverState& s = driver_state();
  TORCH_CHECK(s.error.empty(), "torch_cudajit: cannot launch kernels: ", s.error,
              ". Compiling to PTX/CUBIN (kernel.compile(..., arch=...)) works without a GPU.");
  return s.api;
}

bool driver_available() { return driver_state().error.empty(); }

int current_context_arch() {
  void* loaded = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (loaded == nullptr) return 0;
  dlclose(loaded);
  const DriverState& s = driver_state();
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (!s.error.empty() || s.api.cuCtxGetCurrent == nullptr || s.api.cuCtxGetDevice == nullptr ||
      s.api.cuDeviceGetAttribute == nullptr || s.api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
      ctx == nullptr || s.api.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
      s.api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) !=
          CUDA_SUCCESS ||
      s.api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) !=
          CUDA_SUCCESS)
    return 0;
  return major * 10 + minor;
}

void throw_missing_entry_point(const char* name) {
  int version = 0;
  driver().cuDriverGetVersion(&version);
  TORCH_CHECK(false, "torch_cudajit: the CUDA driver (", version / 1000, ".", version % 1000 / 10,
              ") has no entry point ", name, ", which this feature needs; update the driver.");
}

namespace {
std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}
}  // namespace

std::string nvrtc_library_file() {
  // load_nvrtc takes the first candidate dlopen accepts. Absolute candidates before the first
  // bare soname can be checked with stat; past that only the dynamic linker knows.
  static const std::string file = []() -> std::string {
    for (const auto& c : nvrtc_candidates()) {
      if (c.find('/') == std::string::npos) break;
      struct stat st;
      if (stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return real_path(c);
    }
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(nvrtc().nvrtcVersion), &info) && info.dli_fname)
      return real_path(info.dli_fname);
    return nvrtc().library_path;
  }();
  return file;
}

std::string nvrtc_identity() {
  const std::string file = nvrtc_library_file();
  struct stat st;
  if (stat(file.c_str(), &st) != 0) return file;
  return file + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

int nvrtc_version() {
  static const int version = [] {
    int major = 0, minor = 0;
    CJ_CHECK(nvrtcVersion, &major, &minor);
    return major * 1000 + minor * 10;
  }();
  return version;
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  CJ_CHECK(nvrtcGetNumSupportedArchs, &n);
  std::vector<int> archs(static_cast<size_t>(n));
  if (n > 0) CJ_CHECK(nvrtcGetSupportedArchs, archs.data());
  return archs;
}

void throw_api_error(const char* api, CUresult result, const char* file, int line) {
  const char* name = "unknown error";
  const char* text = "";
  if (driver_state().error.empty()) {
    driver_state().api.cuGetErrorName(result, &name);
    driver_state().api.cuGetErrorString(result, &text);
  }
  TORCH_CHECK(false, "torch_cudajit: ", api, " failed with ", name, " (", text, ", code ",
              static_cast<int>(result), ") at ", file, ":", line);
}

void throw_api_error(const char* api, nvrtcResult result, const char* file, int line) {
  TORCH_CHECK(false, "torch_cudajit: ", api, " failed with ", nvrtc().nvrtcGetErrorString(result),
              " (code ", static_cast<int>(result), ") at ", file, ":", line);
}

void throw_api_error(const char* api, nvJitLinkResult result, const char* file, int line) {
  TORCH_CHECK(false, "torch_cudajit: ", api, " failed with nvJitLink error ",
              static_cast<int>(result), " at ", file, ":", line);
}

}  // namespace detail
}  // namespace torch_cudajit
