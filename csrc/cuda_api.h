// torch_cudajit: lazily loaded NVRTC and CUDA driver entry points, and CJ_CHECK, the one macro
// that wraps every NVRTC and driver call. Nothing here needs a GPU or links against CUDA:
// libnvrtc and libcuda are opened on first use, so the library imports on any machine.
#pragma once

#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>
#include <utility>
#include <vector>

// X-macro lists of the entry points we use. Adding one here makes it callable through CJ_CHECK.
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
  X(nvJitLinkAddFile)             \
  X(nvJitLinkComplete)            \
  X(nvJitLinkGetLinkedCubinSize)  \
  X(nvJitLinkGetLinkedCubin)      \
  X(nvJitLinkGetErrorLogSize)     \
  X(nvJitLinkGetErrorLog)         \
  X(nvJitLinkGetInfoLogSize)      \
  X(nvJitLinkGetInfoLog)

#define CJ_DRIVER_FUNCTIONS(X)                    \
  X(cuInit)                                       \
  X(cuDriverGetVersion)                           \
  X(cuGetErrorName)                               \
  X(cuGetErrorString)                             \
  X(cuDeviceGet)                                  \
  X(cuDeviceGetCount)                             \
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
  X(cuMemcpyHtoD)                                 \
  X(cuMemsetD8Async)                              \
  X(cuMemHostGetDevicePointer)                    \
  X(cuStreamSynchronize)                          \
  X(cuStreamIsCapturing)                          \
  X(cuStreamGetCtx)

namespace torch_cudajit {
namespace detail {

/// Function-pointer table for NVRTC, filled from libnvrtc on first use.
struct NvrtcApi {
#define CJ_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  CJ_NVRTC_FUNCTIONS(CJ_DECLARE_POINTER)
  std::string library_path;
};

/// Function-pointer table for the CUDA driver, filled from libcuda on first use.
struct DriverApi {
  CJ_DRIVER_FUNCTIONS(CJ_DECLARE_POINTER)
#undef CJ_DECLARE_POINTER
  /// CUDA 12.0's one-argument form: from CUDA 13.0 on, the entry point of this name asked for
  /// at the headers' version takes the context as well (cuCtxGetDevice_v2).
  CUresult (*cuCtxGetDevice)(CUdevice*) = nullptr;
};

/// Function-pointer table for nvJitLink, filled from libnvJitLink on first use.
struct NvJitLinkApi {
#define CJ_DECLARE_LINK_POINTER(name) decltype(&::name) name = nullptr;
  CJ_NVJITLINK_FUNCTIONS(CJ_DECLARE_LINK_POINTER)
#undef CJ_DECLARE_LINK_POINTER
  std::string library_path;
};

/// Loads NVRTC on first call; throws, saying where it looked, when it cannot be found.
const NvrtcApi& nvrtc();
/// Loads nvJitLink on first call (for kernels with link=[...]); throws, saying where it looked.
const NvJitLinkApi& nvjitlink();
/// Loads the CUDA driver and calls cuInit on first call; throws when there is no driver.
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
/// The resolved path of the NVRTC library that is loaded, or that nvrtc() would load. Only
/// loads it when the dynamic linker's own search must find it, so a disk-cache hit can name
/// the compiler without paying for loading it.
std::string nvrtc_library_file();
/// NVRTC's identity for cache keys: the library's real path, size and modification time.
std::string nvrtc_identity();
/// NVRTC's version as major * 1000 + minor * 10.
int nvrtc_version();
/// Architectures this NVRTC can target, as compute capabilities (e.g. 90).
std::vector<int> nvrtc_supported_archs();

[[noreturn]] void throw_api_error(const char* api, CUresult result, const char* file, int line);
/// A driver entry point the loaded driver does not have was called.
[[noreturn]] void throw_missing_entry_point(const char* name);
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
#define CJ_FORWARD_NVRTC(name) \
  template <class... A>        \
  inline auto name(A&&... a) { return ::torch_cudajit::detail::nvrtc().name(std::forward<A>(a)...); }
#define CJ_FORWARD_DRIVER(name)                                                          \
  template <class... A>                                                                  \
  inline auto name(A&&... a) {                                                           \
    const auto& d = ::torch_cudajit::detail::driver();                                   \
    if (d.name == nullptr) ::torch_cudajit::detail::throw_missing_entry_point(#name);     \
    return d.name(std::forward<A>(a)...);                                                \
  }
#define CJ_FORWARD_LINK(name) \
  template <class... A>       \
  inline auto name(A&&... a) { return ::torch_cudajit::detail::nvjitlink().name(std::forward<A>(a)...); }
CJ_NVRTC_FUNCTIONS(CJ_FORWARD_NVRTC)
CJ_DRIVER_FUNCTIONS(CJ_FORWARD_DRIVER)
CJ_NVJITLINK_FUNCTIONS(CJ_FORWARD_LINK)
#undef CJ_FORWARD_LINK
#undef CJ_FORWARD_NVRTC
#undef CJ_FORWARD_DRIVER
}  // namespace api

}  // namespace detail
}  // namespace torch_cudajit

/// Calls an NVRTC or driver entry point and throws, naming the API and its error string,
/// when it fails: CJ_CHECK(cuLaunchKernel, f, gx, gy, ...).
#define CJ_CHECK(name, ...)                                                                  \
  ::torch_cudajit::detail::check_result(::torch_cudajit::detail::api::name(__VA_ARGS__), #name, \
                                        __FILE__, __LINE__)
