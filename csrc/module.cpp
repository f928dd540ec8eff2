// torch_cudajit: loading compiled programs and per-device kernel state (see module.h).
#include "module.h"

#include <c10/util/Exception.h>

namespace torch_cudajit {

const DeviceLimits& device_limits(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_cudajit: device index ", device,
              " is out of range [0, ", kMaxDevices, ")");
  static std::array<DeviceLimits, kMaxDevices> limits{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[static_cast<size_t>(device)], [device] {
    CUdevice dev;
    CJ_CHECK(cuDeviceGet, &dev, device);
    DeviceLimits& l = limits[static_cast<size_t>(device)];
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      CJ_CHECK(cuDeviceGetAttribute, &v, a, dev);
      return v;
    };
    l.compute_capability = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
                           attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    l.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    l.max_block = {attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                   attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
    l.max_grid = {attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                  attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
    l.max_shared_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    l.multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    l.cooperative_launch = attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0;
  });
  return limits[static_cast<size_t>(device)];
}

void ensure_context(int device) {
  CUcontext current = nullptr;
  CJ_CHECK(cuCtxGetCurrent, &current);
  if (current != nullptr) return;
  static std::array<CUcontext, kMaxDevices> primary{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[static_cast<size_t>(device)], [device] {
    CUdevice dev;
    CJ_CHECK(cuDeviceGet, &dev, device);
    CJ_CHECK(cuDevicePrimaryCtxRetain, &primary[static_cast<size_t>(device)], dev);
  });
  CJ_CHECK(cuCtxSetCurrent, primary[static_cast<size_t>(device)]);
}

LoadedLibrary::LoadedLibrary(std::shared_ptr<const CompiledProgram> compiled)
    : compiled_(std::move(compiled)) {
  const void* image = compiled_->has_cubin ? static_cast<const void*>(compiled_->cubin.data())
                                           : static_cast<const void*>(compiled_->ptx.c_str());
  CJ_CHECK(cuLibraryLoadData, &library_, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
}

LoadedLibrary::~LoadedLibrary() {
  // At process exit the driver may already be gone; an unload failure is harmless then.
  if (library_ && detail::driver_available()) detail::driver().cuLibraryUnload(library_);
}

CUkernel LoadedLibrary::get_kernel(const std::string& lowered_name) const {
  CUkernel k = nullptr;
  CJ_CHECK(cuLibraryGetKernel, &k, library_, lowered_name.c_str());
  return k;
}

std::pair<CUdeviceptr, size_t> LoadedLibrary::global(const char* name) const {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  if (detail::driver().cuLibraryGetGlobal(&ptr, &size, library_, name) != CUDA_SUCCESS) return {0, 0};
  return {ptr, size};
}

LoadedKernel::LoadedKernel(std::shared_ptr<LoadedLibrary> library, const std::string& lowered_name)
    : library_(std::move(library)), kernel_(library_->get_kernel(lowered_name)) {}

const KernelDeviceState& LoadedKernel::device_state(int device) {
  KernelDeviceState& s = devices_[static_cast<size_t>(device)];
  if (ready_[static_cast<size_t>(device)].load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(mutex_);
  if (ready_[static_cast<size_t>(device)].load(std::memory_order_relaxed)) return s;
  CUdevice dev;
  CJ_CHECK(cuDeviceGet, &dev, device);
  // Loading the kernel into this context here keeps lazy loading out of graph capture.
  CUfunction f;
  CJ_CHECK(cuKernelGetFunction, &f, kernel_);
  CJ_CHECK(cuKernelGetAttribute, &s.max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
           kernel_, dev);
  CJ_CHECK(cuKernelGetAttribute, &s.static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel_, dev);
  ready_[static_cast<size_t>(device)].store(true, std::memory_order_release);
  return s;
}

void LoadedKernel::reserve_dynamic_shared(int device, int bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  KernelDeviceState& s = devices_[static_cast<size_t>(device)];
  if (bytes <= s.dynamic_shared_limit) return;
  CUdevice dev;
  CJ_CHECK(cuDeviceGet, &dev, device);
  CJ_CHECK(cuKernelSetAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes, kernel_, dev);
  s.dynamic_shared_limit = bytes;
}

std::pair<int, int> LoadedKernel::forall_block(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  KernelDeviceState& s = devices_[static_cast<size_t>(device)];
  if (s.forall_block == 0) {
    CUfunction f;
    CJ_CHECK(cuKernelGetFunction, &f, kernel_);
    int min_grid = 0, block = 0;
    CJ_CHECK(cuOccupancyMaxPotentialBlockSize, &min_grid, &block, f, nullptr, 0, 0);
    auto resident = [&](int threads) {
      int blocks = 0;
      CJ_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, f, threads, 0);
      return blocks;
    };
    int per_sm = resident(block);
    constexpr int kSmallBlock = 256;
    if (block > kSmallBlock) {
      const int small = resident(kSmallBlock);
      if (small * kSmallBlock >= per_sm * block) {
        block = kSmallBlock;
        per_sm = small;
      }
    }
    s.forall_block = block;
    s.forall_blocks_per_sm = per_sm;
  }
  return {s.forall_block, s.forall_blocks_per_sm};
}

std::vector<size_t> LoadedKernel::driver_param_sizes(size_t count) const {
  CUfunction f;
  CJ_CHECK(cuKernelGetFunction, &f, kernel_);
  std::vector<size_t> sizes;
  // Only the parameters the plugin packs: probing past the last one fails by design, and
  // compute-sanitizer would report every such call as an API error.
  for (size_t i = 0; i < count; ++i) {
    size_t offset = 0, size = 0;
    if (detail::driver().cuFuncGetParamInfo(f, i, &offset, &size) != CUDA_SUCCESS) break;
    sizes.push_back(size);
  }
  return sizes;
}

int LoadedKernel::attribute(CUfunction_attribute attr, int device) const {
  CUdevice dev;
  CJ_CHECK(cuDeviceGet, &dev, device);
  int value = 0;
  CJ_CHECK(cuKernelGetAttribute, &value, attr, kernel_, dev);
  return value;
}

CUfunction LoadedKernel::function() const {
  CUfunction f;
  CJ_CHECK(cuKernelGetFunction, &f, kernel_);
  return f;
}

int LoadedKernel::max_active_blocks_per_sm(int threads, size_t dynamic_shared) const {
  int blocks = 0;
  CJ_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, function(), threads, dynamic_shared);
  return blocks;
}

}  // namespace torch_cudajit
