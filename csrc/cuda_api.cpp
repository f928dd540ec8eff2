// torch_cudajit: opening libnvrtc, libnvJitLink and libcuda at run time, finding their entry
// points one by one, and turning their error codes into exceptions that name the API and say
// what to do next.
#include "cuda_api.h"

#include "file_io.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>

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

// nvJitLink links the LTO-IR NVRTC writes and must be at least as new as that NVRTC, so the one
// beside the NVRTC in use (the same toolkit, or the same set of wheels) comes first. Searched by
// soname alone, the dynamic linker may pair torch's wheel NVRTC with an older toolkit's nvJitLink.
std::vector<std::string> nvjitlink_candidates() {
  const std::initializer_list<const char*> names = {"libnvJitLink.so.13", "libnvJitLink.so.12",
                                                    "libnvJitLink.so"};
  std::vector<std::string> out;
  const std::string nvrtc = nvrtc_library_file();
  const size_t slash = nvrtc.rfind('/');
  if (slash != std::string::npos)
    for (const char* n : names) out.push_back(nvrtc.substr(0, slash + 1) + n);
  for (std::string& c : library_candidates(names)) out.push_back(std::move(c));
  return out;
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

// NVRTC or nvJitLink: the first of library_candidates that opens, on first use; an entry point
// is found under its plain name or, first, under the versioned names the library exports
// (__<name><suffix>).
class ToolkitLibrary final : public Library {
 public:
  // `what` names the library ("NVRTC (libnvrtc.so)"), `needed_by` says what needs it (", which
  // link=[...] needs" or ""), `install` what provides it ("the nvidia-cuda-nvrtc wheel").
  ToolkitLibrary(std::vector<std::string> (*candidates)(), const char* what, const char* needed_by,
                 const char* install, std::vector<std::string> suffixes)
      : candidates_(candidates), what_(what), needed_by_(needed_by), install_(install),
        suffixes_(std::move(suffixes)) {}

  const std::string& file() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handle_ == nullptr) {
      std::string tried;
      handle_ = open_first(candidates_(), path_, tried);
      TORCH_CHECK(handle_ != nullptr, "torch_cudajit: could not load ", what_, needed_by_,
                  ". Tried:", tried, "\nInstall the CUDA toolkit or ", install_,
                  ", or set CUDA_HOME.");
    }
    return path_;
  }

  void* find(const char* name) const noexcept override {
    if (handle_ == nullptr) return nullptr;  // not opened (file() is called first)
    for (const std::string& suffix : suffixes_) {
      const std::string versioned = std::string("__") + name + suffix;
      if (void* p = dlsym(handle_, versioned.c_str())) return p;
    }
    return dlsym(handle_, name);
  }

  std::string advice() const override {
    return std::string("this feature needs a newer ") + what_ + ": install CUDA 12.0 or newer (the "
           "CUDA toolkit or " + install_ + "), or set CUDA_HOME to a newer toolkit.";
  }

 private:
  std::vector<std::string> (*candidates_)();
  const char* what_;
  const char* needed_by_;
  const char* install_;
  std::vector<std::string> suffixes_;
  mutable std::mutex mutex_;
  mutable void* handle_ = nullptr;
  mutable std::string path_;
};

// The CUDA driver (libcuda.so.1). Entry points come from cuGetProcAddress_v2, asked for at our
// headers' version first, then at 12.4 and 12.0 for older drivers.
class DriverLibrary final : public Library {
 public:
  // Why the driver cannot be opened ("" when it can); opens it on the first call.
  const std::string& problem() const {
    std::call_once(once_, [this] { open(); });
    return problem_;
  }

  const std::string& file() const override {
    TORCH_CHECK(problem().empty(), "torch_cudajit: ", problem(), ".");
    return path_;
  }

  void* find(const char* name) const noexcept override {
    if (get_proc_ == nullptr) return nullptr;  // not opened (file() is called first)
    // cuCtxGetDevice and cuStreamGetCtx are called in their CUDA 12.0 form: asked for at a
    // newer version, the driver gives their later forms, which take another argument
    // (cuStreamGetCtx from 12.5 writes a green context through a third pointer).
    const bool pinned_to_12_0 =
        std::strcmp(name, "cuCtxGetDevice") == 0 || std::strcmp(name, "cuStreamGetCtx") == 0;
    for (int version : {CUDA_VERSION, 12040, 12000}) {
      if (pinned_to_12_0 && version != 12000) continue;
      void* out = nullptr;
      CUdriverProcAddressQueryResult status;
      if (get_proc_(name, &out, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
          out != nullptr)
        return out;
    }
    return nullptr;
  }

  std::string advice() const override {
    int version = 0;
    if (!problem().empty()) return problem() + ".";
    if (auto get = reinterpret_cast<CUresult (*)(int*)>(find("cuDriverGetVersion"))) get(&version);
    return "the CUDA driver (" + std::to_string(version / 1000) + "." +
           std::to_string(version % 1000 / 10) + ") is older than this feature needs; update "
           "the driver.";
  }

 private:
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);

  void open() const {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!handle) handle = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      problem_ = "no CUDA driver (libcuda.so.1) could be loaded on this machine";
      return;
    }
    get_proc_ = reinterpret_cast<GetProc>(dlsym(handle, "cuGetProcAddress_v2"));
    if (!get_proc_) {
      problem_ = "the CUDA driver is older than CUDA 12.0 (no cuGetProcAddress_v2); update the "
                 "driver";
      return;
    }
    Dl_info info;
    const bool named = dladdr(reinterpret_cast<void*>(get_proc_), &info) && info.dli_fname;
    path_ = named ? info.dli_fname : "libcuda.so.1";
  }

  mutable std::once_flag once_;
  mutable std::string problem_, path_;
  mutable GetProc get_proc_ = nullptr;
};

const DriverLibrary& the_driver_library() {
  static const DriverLibrary library;
  return library;
}

const DriverApi& driver_table() {
  static const DriverApi table(the_driver_library());
  return table;
}

// Opens the driver and calls cuInit: why kernels cannot be launched, "" when they can.
std::string initialize_driver() {
  const std::string& problem = the_driver_library().problem();
  if (!problem.empty()) return problem;
  const DriverApi& d = driver_table();
  if (!d.cuInit.available() || !d.cuGetErrorName.available())
    return "the CUDA driver has no cuInit or cuGetErrorName entry point; update the driver";
  const CUresult r = d.cuInit(0);
  if (r == CUDA_SUCCESS) return "";
  const char* name = "?";
  d.cuGetErrorName(r, &name);
  return std::string("cuInit failed with ") + name + " (is there a GPU on this machine?)";
}

const std::string& driver_problem() {
  static const std::string problem = initialize_driver();
  return problem;
}

}  // namespace

const Library& nvrtc_library() {
  static const ToolkitLibrary library(nvrtc_candidates, "NVRTC (libnvrtc.so)", "",
                                      "the nvidia-cuda-nvrtc wheel", {});
  return library;
}

const Library& nvjitlink_library() {
  // The exported names carry the library's version: __nvJitLinkCreate_13_0.
  static const ToolkitLibrary library(nvjitlink_candidates, "nvJitLink (libnvJitLink.so)",
                                      ", which link=[...] needs", "the nvidia-nvjitlink wheel",
                                      {"_13_0", "_12_0"});
  return library;
}

const Library& driver_library() { return the_driver_library(); }

bool library_file_found(const std::string& name) {
  TORCH_CHECK(name == "nvrtc" || name == "nvJitLink", "torch_cudajit: library_file_found: unknown "
              "library '", name, "'; expected 'nvrtc' or 'nvJitLink'");
  for (const std::string& c : name == "nvrtc" ? nvrtc_candidates() : nvjitlink_candidates()) {
    struct stat st;
    if (c.find('/') != std::string::npos && stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      return true;
  }
  return false;
}

void add_library_search_path(const std::string& dir) {
  std::lock_guard<std::mutex> lock(search_path_mutex());
  search_paths().push_back(dir);
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi table(nvrtc_library());
  return table;
}

const NvJitLinkApi& nvjitlink() {
  static const NvJitLinkApi table(nvjitlink_library());
  return table;
}

const DriverApi& driver() {
  const std::string& problem = driver_problem();
  TORCH_CHECK(problem.empty(), "torch_cudajit: cannot launch kernels: ", problem,
              ". Compiling to PTX/CUBIN (kernel.compile(..., arch=...)) works without a GPU.");
  return driver_table();
}

bool driver_available() { return driver_problem().empty(); }

int current_context_arch() {
  void* loaded = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (loaded == nullptr) return 0;
  dlclose(loaded);
  if (!driver_available()) return 0;
  const DriverApi& d = driver_table();
  if (!d.cuCtxGetCurrent.available() || !d.cuCtxGetDevice.available() ||
      !d.cuDeviceGetAttribute.available())
    return 0;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr ||
      d.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) !=
          CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) !=
          CUDA_SUCCESS)
    return 0;
  return major * 10 + minor;
}

void throw_missing_entry_point(const Library& library, const char* name) {
  TORCH_CHECK(false, "torch_cudajit: ", library.file(), " has no entry point ", name, "; ",
              library.advice());
}

namespace {
std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}
}  // namespace

std::string nvrtc_library_file() {
  // nvrtc() opens the first candidate dlopen accepts. Absolute candidates before the first
  // bare soname can be checked with stat; past that only the dynamic linker knows.
  static const std::string file = []() -> std::string {
    for (const auto& c : nvrtc_candidates()) {
      if (c.find('/') == std::string::npos) break;
      struct stat st;
      if (stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return real_path(c);
    }
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(nvrtc().nvrtcVersion.get()), &info) && info.dli_fname)
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

namespace {
std::atomic<bool> g_pch_disabled{false};
// How NVRTC names the folder of a process's automatic PCH in $TMPDIR (the process id and a
// counter follow).
constexpr char kNvrtcPchFolderPrefix[] = "__nvrtc_auto_pch_";
}  // namespace

bool use_pch() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_CUDAJIT_PCH");
    if (v != nullptr && std::string(v) == "0") return false;
    if (nvrtc_version() < 12080) return false;
    // NVRTC keeps a process's automatic PCH in $TMPDIR/__nvrtc_auto_pch_<pid>_<n>/ and removes
    // it only at a normal exit: the folders of killed processes (megabytes each) go here.
    sweep_dead_process_folders(temp_folder(), kNvrtcPchFolderPrefix);
    return true;
  }();
  return on && !g_pch_disabled.load(std::memory_order_relaxed);
}

void disable_pch() { g_pch_disabled.store(true, std::memory_order_relaxed); }

bool pch_failure(const std::string& log) {
  for (const char* sign : {"mapped memory", "precompiled header", "PCH"})
    if (log.find(sign) != std::string::npos) return true;
  return false;
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
  if (driver_available()) {
    const DriverApi& d = driver_table();
    d.cuGetErrorName(result, &name);  // initialize_driver checked that it exists
    if (d.cuGetErrorString.available()) d.cuGetErrorString(result, &text);
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
