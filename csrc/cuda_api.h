// torch_cudajit: NVRTC, nvJitLink and CUDA driver entry points, each resolved on its first call,
// and CJ_CHECK, the one macro that wraps every NVRTC, nvJitLink and driver call. Nothing here
// needs a GPU or links against CUDA: the libraries are opened on first use, so the library
// imports on any machine, and a library that lacks an entry point fails only the calls of it.
#pragma once

#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// X-macro lists of the entry points we call. Adding one here makes it callable through CJ_CHECK.
#define CJ_NVRTC_FUNCTIONS(X)      \
  X(nvrtcVersion)                  \
  X(nvrtcGetErrorString)           \
  X(nvrtcGetNumSupportedArchs)     \
  X(nvrtcGetSupportedArchs)        \
  X(nvrtcCreateProgram)            \
  X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram)           \
  X(nvrtcAddNameExpression)        \
  X(nvrtcGetLoweredName)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetPTXSize)               \
  X(nvrtcGetPTX)                   \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)                 \
  X(nvrtcGetLTOIRSize)             \
  X(nvrtcGetLTOIR)

// nvJitLink's entry points carry a version suffix in the library (__nvJitLinkCreate_13_0);
// the table holds them under their plain names.
#define CJ_NVJITLINK_FUNCTIONS(X) \
  X(nvJitLinkCreate)              \
  X(nvJitLinkDestroy)             \
  X(nvJitLinkAddData)             \
  X(nvJitLinkComplete)            \
  X(nvJitLinkGetLinkedCubinSize)  \
  X(nvJitLinkGetLinkedCubin)      \
  X(nvJitLinkGetErrorLogSize)     \
  X(nvJitLinkGetErrorLog)

#define CJ_DRIVER_FUNCTIONS(X)                    \
  X(cuInit)                                       \
  X(cuDriverGetVersion)                           \
  X(cuGetErrorName)                               \
  X(cuGetErrorString)                             \
  X(cuDeviceGet)                                  \
  X(cuDeviceGetAttribute)                         \
  X(cuDevicePrimaryCtxRetain)                     \
  X(cuCtxGetCurrent)                              \
  X(cuCtxSetCurrent)                              \
  X(cuLibraryLoadData)                            \
  X(cuLibraryUnload)                              \
  X(cuLibraryGetKernel)                           \
  X(cuKernelGetFunction)                          \
  X(cuKernelGetAttribute)                         \
  X(cuKernelSetAttribute)                         \
  X(cuFuncGetParamInfo)                           \
  X(cuLaunchKernel)                               \
  X(cuLaunchCooperativeKernel)                    \
  X(cuOccupancyMaxPotentialBlockSize)             \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuLibraryGetGlobal)                           \
  X(cuMemcpyDtoH)                                 \
  X(cuMemsetD8Async)                              \
  X(cuMemHostGetDevicePointer)                    \
  X(cuStreamSynchronize)                          \
  X(cuStreamIsCapturing)                          \
  X(cuStreamGetCtx)

namespace torch_cudajit {
namespace detail {

/// A shared library whose entry points are looked up one by one (NVRTC, nvJitLink, the CUDA
/// driver). Implementations open the library on first use.
class Library {
 public:
  virtual ~Library() = default;
  /// The file the library was opened from, opening it on the first call; throws c10::Error,
  /// saying where it looked and what to install, when it cannot be opened.
  virtual const std::string& file() const = 0;
  /// The address of entry point `name`, or nullptr when the library lacks it. Only called
  /// after file() succeeded.
  virtual void* find(const char* name) const noexcept = 0;
  /// What to do about an entry point this library lacks (a sentence), for messages.
  virtual std::string advice() const = 0;
};

/// Throws c10::Error for an entry point `library` lacks: the symbol, the library's file and
/// what to do.
[[noreturn]] void throw_missing_entry_point(const Library& library, const char* name);

template <class Fn>
class EntryPoint;

/// One entry point of a Library, resolved on its first call and remembered: a library that lacks
/// it fails the calls of this entry point only, with an error naming it and the library.
template <class R, class... A>
class EntryPoint<R (*)(A...)> {
 public:
  using Function = R (*)(A...);

  EntryPoint(const Library& library, const char* name) : library_(&library), name_(name) {}
  EntryPoint(const EntryPoint&) = delete;
  EntryPoint& operator=(const EntryPoint&) = delete;

  /// Calls the entry point; throws c10::Error (throw_missing_entry_point) when the library
  /// lacks it, or the library's error when it cannot be opened.
  R operator()(A... args) const { return get()(args...); }
  /// The function; throws as operator() does.
  Function get() const {
    Function f = address();
    if (f == nullptr) throw_missing_entry_point(*library_, name_);
    return f;
  }
  /// Whether the library has this entry point: the check before using an optional one.
  /// Throws only when the library cannot be opened.
  bool available() const { return address() != nullptr; }
  const char* name() const { return name_; }

  // `entry == nullptr` reads as "the library lacks it", as for a plain function pointer.
  friend bool operator==(const EntryPoint& e, std::nullptr_t) { return !e.available(); }
  friend bool operator!=(const EntryPoint& e, std::nullptr_t) { return e.available(); }

 private:
  Function address() const {
    if (!resolved_.load(std::memory_order_acquire)) {
      library_->file();  // opens the library, or throws: never inside call_once
      std::call_once(once_, [this] {
        function_ = reinterpret_cast<Function>(library_->find(name_));
        resolved_.store(true, std::memory_order_release);
      });
    }
    return function_;
  }

  const Library* library_;
  const char* name_;
  mutable std::once_flag once_;
  mutable std::atomic<bool> resolved_{false};
  mutable Function function_ = nullptr;
};

#define CJ_DECLARE_ENTRY_POINT(name) EntryPoint<decltype(&::name)> name;
#define CJ_INIT_ENTRY_POINT(name) name(library, #name),

/// NVRTC's entry points. Constructing the table opens the library; entry points are resolved
/// when first called.
struct NvrtcApi {
  explicit NvrtcApi(const Library& library)
      : CJ_NVRTC_FUNCTIONS(CJ_INIT_ENTRY_POINT) library_path(library.file()) {}
  CJ_NVRTC_FUNCTIONS(CJ_DECLARE_ENTRY_POINT)
  /// The file NVRTC was opened from.
  std::string library_path;
};

/// nvJitLink's entry points, as NvrtcApi.
struct NvJitLinkApi {
  explicit NvJitLinkApi(const Library& library)
      : CJ_NVJITLINK_FUNCTIONS(CJ_INIT_ENTRY_POINT) library_path(library.file()) {}
  CJ_NVJITLINK_FUNCTIONS(CJ_DECLARE_ENTRY_POINT)
  /// The file nvJitLink was opened from.
  std::string library_path;
};

/// The CUDA driver's entry points; constructing the table opens nothing.
struct DriverApi {
  explicit DriverApi(const Library& library)
      : CJ_DRIVER_FUNCTIONS(CJ_INIT_ENTRY_POINT) cuCtxGetDevice(library, "cuCtxGetDevice") {}
  CJ_DRIVER_FUNCTIONS(CJ_DECLARE_ENTRY_POINT)
  /// CUDA 12.0's one-argument form: from CUDA 13.0 on, the entry point of this name asked for
  /// at the headers' version takes the context as well (cuCtxGetDevice_v2).
  EntryPoint<CUresult (*)(CUdevice*)> cuCtxGetDevice;
};

#undef CJ_DECLARE_ENTRY_POINT
#undef CJ_INIT_ENTRY_POINT

/// The libraries the tables below are resolved in, opened on first use (Library::file).
const Library& nvrtc_library();
const Library& nvjitlink_library();
const Library& driver_library();

/// Opens NVRTC on first call; throws, saying where it looked, when it cannot be found.
const NvrtcApi& nvrtc();
/// Opens nvJitLink on first call (for kernels with link=[...]); throws, saying where it looked.
const NvJitLinkApi& nvjitlink();
/// Opens the CUDA driver and calls cuInit on first call; throws when there is no usable driver.
const DriverApi& driver();
/// True when a CUDA driver can be loaded and initialized (no exception).
bool driver_available();
/// The compute capability (e.g. 90) of the device whose context is current on this thread, 0
/// when none is or this process has not loaded the driver yet (then it is not loaded: a process
/// that has not touched CUDA, a compile-only worker, stays so).
int current_context_arch();

/// Adds a directory searched for libnvrtc before the system paths (the Python package
/// passes the NVIDIA pip wheels' and the toolkit's library folders).
void add_library_search_path(const std::string& dir);
/// True when one of the folders searched (search paths, NVIDIA's wheels beside this library,
/// CUDA_HOME, /usr/local/cuda) holds the library ("nvrtc" or "nvJitLink"), checked without
/// loading it; false means only the dynamic linker's own search is left.
bool library_file_found(const std::string& name);
/// The resolved path of the NVRTC library that is loaded, or that nvrtc() would load. Only
/// loads it when the dynamic linker's own search must find it, so a disk-cache hit can name
/// the compiler without paying for loading it.
std::string nvrtc_library_file();
/// NVRTC's identity for cache keys: the library's real path, size and modification time.
std::string nvrtc_identity();
/// NVRTC's version as major * 1000 + minor * 10.
int nvrtc_version();
/// Whether compiles use NVRTC's automatic precompiled header (NVRTC 12.8 and later, unless
/// TORCH_CUDAJIT_PCH=0): the parse of the headers every source includes is made once per
/// process and reused.
bool use_pch();
/// Stops this process's compiles from using the PCH (after a compile the PCH made fail).
void disable_pch();
/// Whether a failed compile's log says the PCH itself failed (it could not be made or mapped,
/// as when the temporary folder is full), not the program.
bool pch_failure(const std::string& log);
/// Architectures this NVRTC can target, as compute capabilities (e.g. 90).
std::vector<int> nvrtc_supported_archs();

[[noreturn]] void throw_api_error(const char* api, CUresult result, const char* file, int line);
[[noreturn]] void throw_api_error(const char* api, nvrtcResult result, const char* file, int line);
[[noreturn]] void throw_api_error(const char* api, nvJitLinkResult result, const char* file, int line);

inline void check_result(CUresult r, const char* api, const char* file, int line) {
  if (r != CUDA_SUCCESS) throw_api_error(api, r, file, line);
}
inline void check_result(nvrtcResult r, const char* api, const char* file, int line) {
  if (r != NVRTC_SUCCESS) throw_api_error(api, r, file, line);
}
inline void check_result(nvJitLinkResult r, const char* api, const char* file, int line) {
  if (r != NVJITLINK_SUCCESS) throw_api_error(api, r, file, line);
}

// One forwarding function per entry point, so that CJ_CHECK(name, args...) reads like a call.
namespace api {
#define CJ_FORWARD(table, name) \
  template <class... A>         \
  inline auto name(A&&... a) { return ::torch_cudajit::detail::table().name(std::forward<A>(a)...); }
#define CJ_FORWARD_NVRTC(name) CJ_FORWARD(nvrtc, name)
#define CJ_FORWARD_DRIVER(name) CJ_FORWARD(driver, name)
#define CJ_FORWARD_LINK(name) CJ_FORWARD(nvjitlink, name)
CJ_NVRTC_FUNCTIONS(CJ_FORWARD_NVRTC)
CJ_DRIVER_FUNCTIONS(CJ_FORWARD_DRIVER)
CJ_NVJITLINK_FUNCTIONS(CJ_FORWARD_LINK)
#undef CJ_FORWARD_LINK
#undef CJ_FORWARD_DRIVER
#undef CJ_FORWARD_NVRTC
#undef CJ_FORWARD
}  // namespace api

}  // namespace detail
}  // namespace torch_cudajit

/// Calls an NVRTC, nvJitLink or driver entry point and throws, naming the API and its error
/// string, when it fails: CJ_CHECK(cuLaunchKernel, f, gx, gy, ...). An entry point the library
/// lacks throws too, naming it and the library.
#define CJ_CHECK(name, ...)                                                                  \
  ::torch_cudajit::detail::check_result(::torch_cudajit::detail::api::name(__VA_ARGS__), #name, \
                                        __FILE__, __LINE__)
