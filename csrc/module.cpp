// torch_cudajit: loading compiled programs and per-device kernel state (see module.h).
#include "module.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

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
    l.l2_cache_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
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

bool LoadedLibrary::has_kernel(const std::string& lowered_name) const {
  CUkernel k = nullptr;
  return detail::driver().cuLibraryGetKernel(&k, library_, lowered_name.c_str()) == CUDA_SUCCESS;
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
  for (const auto& [attr, value] : settings_) apply_attribute(attr, value, device);
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

std::optional<std::vector<size_t>> LoadedKernel::driver_param_sizes(size_t count) const {
  if (detail::driver().cuFuncGetParamInfo == nullptr) return std::nullopt;  // before CUDA 12.4
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

void LoadedKernel::apply_attribute(CUfunction_attribute attr, int value, int device) {
  CUdevice dev;
  CJ_CHECK(cuDeviceGet, &dev, device);
  CJ_CHECK(cuKernelSetAttribute, attr, value, kernel_, dev);
  // The launch path raises the limit only past what it knows to be set.
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    devices_[static_cast<size_t>(device)].dynamic_shared_limit = value;
}

void LoadedKernel::set_attribute(CUfunction_attribute attr, int value) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int device = 0; device < kMaxDevices; ++device)
    if (ready_[static_cast<size_t>(device)].load(std::memory_order_relaxed))
      apply_attribute(attr, value, device);
  auto same = [attr](const std::pair<CUfunction_attribute, int>& s) { return s.first == attr; };
  settings_.erase(std::remove_if(settings_.begin(), settings_.end(), same), settings_.end());
  settings_.emplace_back(attr, value);
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

const char* to_string(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPtx: return "PTX";
    case ImageFormat::kCubin: return "CUBIN";
    case ImageFormat::kFatbin: return "fatbin";
  }
  return "?";
}

ImageFormat image_format(const std::string& image) {
  constexpr uint32_t kFatbinMagic = 0xba55ed50u;         // fatbinary.h's FATBIN_MAGIC
  constexpr uint32_t kFatbinWrapperMagic = 0x466243b1u;  // __fatBinC_Wrapper_t, a host struct
  uint32_t magic = 0;
  if (image.size() >= 4) std::memcpy(&magic, image.data(), 4);
  if (image.compare(0, 4, "\x7f" "ELF") == 0) return ImageFormat::kCubin;
  if (magic == kFatbinMagic) return ImageFormat::kFatbin;
  TORCH_CHECK_VALUE(magic != kFatbinWrapperMagic, "torch_cudajit: the image starts with "
                    "0x466243b1, the magic of a __fatBinC_Wrapper_t: a host-side struct that "
                    "points at a fatbin. Pass the fatbin itself (nvcc -fatbin, or the "
                    "wrapper's data).");
  // PTX is text: the .version directive comes first, after comments.
  // A NUL may only end it (C strings written whole).
  const size_t nul = image.find('\0');
  const bool text = nul == std::string::npos || image.find_first_not_of('\0', nul) == std::string::npos;
  if (text && image.find(".version") != std::string::npos && image.find(".target") != std::string::npos)
    return ImageFormat::kPtx;
  std::string head;
  for (size_t i = 0; i < std::min<size_t>(image.size(), 8); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(image[i]));
    head += (i ? " " : "") + std::string(byte);
  }
  TORCH_CHECK_VALUE(false, "torch_cudajit: the image (", image.size(), " bytes",
                    image.empty() ? "" : ", starting with " + head,
                    ") is neither PTX (text with .version and .target directives), CUBIN (an ELF "
                    "file, 7f 45 4c 46) nor a fatbin (50 ed 55 ba). Pass the output of nvcc "
                    "-ptx, -cubin or -fatbin, or of NVRTC (kernel.compile(...).cubin / .ptx); "
                    "LTO-IR must be linked first.");
}

CompiledProgram prebuilt_program(std::string image, const KernelDecl& decl,
                                 const std::string& lowered_name) {
  const ImageFormat format = image_format(image);
  CompiledProgram out;
  out.target = to_string(format);
  out.has_cubin = format != ImageFormat::kPtx;
  if (out.has_cubin) {
    out.cubin = std::move(image);
  } else {
    // The driver reads PTX up to its NUL terminator, which c_str() adds.
    while (!image.empty() && image.back() == '\0') image.pop_back();
    out.ptx = std::move(image);
  }
  out.lowered_names = {lowered_name};
  out.name_expressions = {lowered_name};
  out.probes = {declared_probes(decl)};
  return out;
}

}  // namespace torch_cudajit
