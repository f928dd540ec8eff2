// torch_cudajit: the loaded stage. A LoadedLibrary holds a CompiledProgram's binary loaded
// with the context-independent cuLibrary API, so that one load serves every device of the
// same architecture; a LoadedKernel is one kernel of it with its per-device attributes.
#pragma once

#include "cuda_api.h"
#include "program.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace torch_cudajit {

/// Most devices a process may use with one kernel.
constexpr int kMaxDevices = 64;

/// Device limits read once per device.
struct DeviceLimits {
  int compute_capability = 0;  ///< e.g. 90
  int max_threads_per_block = 0;
  std::array<int, 3> max_block{};
  std::array<int64_t, 3> max_grid{};
  int max_shared_optin = 0;  ///< most dynamic + static shared memory a block may opt in to
  int multiprocessors = 0;
  int64_t l2_cache_bytes = 0;
  bool cooperative_launch = false;
};

/// Limits of a device, read on first use and cached (thread-safe).
const DeviceLimits& device_limits(int device);

/// Makes the device's primary context current on this thread, if no context is.
void ensure_context(int device);

/// A compiled program's binary, loaded into the driver.
class LoadedLibrary {
 public:
  explicit LoadedLibrary(std::shared_ptr<const CompiledProgram> compiled);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  CUkernel get_kernel(const std::string& lowered_name) const;
  /// True when the library holds a kernel of this lowered name.
  bool has_kernel(const std::string& lowered_name) const;
  /// Device address and size of a __device__ variable in the current context ({0, 0} when
  /// the module has no such symbol).
  std::pair<CUdeviceptr, size_t> global(const char* name) const;
  const CompiledProgram& compiled() const { return *compiled_; }

 private:
  std::shared_ptr<const CompiledProgram> compiled_;
  CUlibrary library_ = nullptr;
};

/// Per-device facts about a loaded kernel, filled on its first launch on that device.
struct KernelDeviceState {
  int max_threads_per_block = 0;
  int static_shared = 0;
  int dynamic_shared_limit = 48 * 1024;  ///< current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int forall_block = 0;          ///< 1-D block size for forall (0: not computed)
  int forall_blocks_per_sm = 0;  ///< resident blocks of that size per multiprocessor
};

/// One kernel of a LoadedLibrary.
class LoadedKernel {
 public:
  LoadedKernel(std::shared_ptr<LoadedLibrary> library, const std::string& lowered_name);

  CUkernel handle() const { return kernel_; }
  /// Per-device state, initialised on first use (thread-safe); call with the context current.
  const KernelDeviceState& device_state(int device);
  /// Raises the dynamic shared memory limit on a device when a launch asks for more.
  void reserve_dynamic_shared(int device, int bytes);
  /// The block size for 1-D launches and how many such blocks stay resident per multiprocessor:
  /// the occupancy API's block size, or 256 threads where that keeps the same occupancy
  /// (smaller blocks make whole waves out of more grids).
  std::pair<int, int> forall_block(int device);
  /// The sizes of the first `count` parameters as the driver sees them (fewer when the kernel
  /// has fewer).
  std::optional<std::vector<size_t>> driver_param_sizes(size_t count) const;
  /// A function attribute (CU_FUNC_ATTRIBUTE_*) on a device.
  int attribute(CUfunction_attribute attr, int device) const;
  /// Sets a settable attribute (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
  /// CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) on every device the kernel is
  /// loaded on, and remembers it for the devices it is loaded on later (device_state).
  void set_attribute(CUfunction_attribute attr, int value);
  /// Blocks of `threads` threads with `dynamic_shared` bytes that fit on one SM at once
  /// (call with the device's context current).
  int max_active_blocks_per_sm(int threads, size_t dynamic_shared) const;
  /// The kernel as a CUfunction of the current context.
  CUfunction function() const;
  const LoadedLibrary& library() const { return *library_; }

 private:
  std::shared_ptr<LoadedLibrary> library_;
  CUkernel kernel_ = nullptr;
  std::mutex mutex_;
  std::array<KernelDeviceState, kMaxDevices> devices_{};
  std::array<std::atomic<bool>, kMaxDevices> ready_{};
  /// Attributes set through set_attribute, in order, applied to each newly loaded device.
  std::vector<std::pair<CUfunction_attribute, int>> settings_;

  /// Sets an attribute on one device; call with mutex_ held.
  void apply_attribute(CUfunction_attribute attr, int value, int device);
};

/// The kinds of prebuilt device code torch_cudajit.load takes.
enum class ImageFormat { kPtx, kCubin, kFatbin };

/// "PTX", "CUBIN" or "fatbin".
const char* to_string(ImageFormat format);

/// The format of a prebuilt image, told by its first bytes: ELF (CUBIN), the fatbin magic
/// 0xba55ed50, or PTX text (a `.version` directive). Throws c10::ValueError describing what
/// the image starts with otherwise.
ImageFormat image_format(const std::string& image);

/// A CompiledProgram holding prebuilt code for one kernel, which NVRTC never sees: the image,
/// the kernel's lowered (symbol) name and the probes read from its declaration
/// (declared_probes). Throws c10::ValueError for an image of unknown format or a declaration
/// prebuilt code cannot be launched through.
CompiledProgram prebuilt_program(std::string image, const KernelDecl& decl,
                                 const std::string& lowered_name);

}  // namespace torch_cudajit
