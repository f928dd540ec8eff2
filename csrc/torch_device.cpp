// torch_cudajit: torch's CUDA device and stream (see torch_device.h).
#include "torch_device.h"

#include "cuda_api.h"
#include "module.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>
#endif
// c10::Stream::native_handle, which needs no CUDA runtime headers, is there from torch 2.11 on
// (the oldest version checked); older torch reads the stream through c10/cuda.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#define CJ_STREAM_NATIVE_HANDLE 1
#else
#define CJ_STREAM_NATIVE_HANDLE 0
#include <c10/cuda/CUDAStream.h>
#endif

namespace torch_cudajit::detail {
namespace {

// libc10_cuda registers the CUDA guard; NVIDIA's wheels ship the CUDA runtime headers only
// with nvidia-cuda-crt, which torch does not bring.
const c10::impl::DeviceGuardImplInterface* cuda_guard_impl() {
  static const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl;
}

}  // namespace

int current_cuda_device() { return cuda_guard_impl()->getDevice().index(); }

CUstream current_cuda_stream(int device) {
#if CJ_STREAM_NATIVE_HANDLE
  const c10::Stream s = cuda_guard_impl()->getStream(
      c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
  return static_cast<CUstream>(s.native_handle());
#else
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#endif
}

DeviceScope::DeviceScope(int device) {
  if (current_cuda_device() != device)
    guard_.reset_device(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
  ensure_context(device);
}

void* device_address(const at::Tensor& t) {
  void* host = t.data_ptr();
  if (t.is_cuda() || host == nullptr) return host;
  // The driver is asked about the storage's start, where the pinned allocation begins; a view
  // (a slice) keeps its offset from there.
  char* base = static_cast<char*>(const_cast<void*>(t.storage().data()));
  CUdeviceptr device = 0;
  CJ_CHECK(cuMemHostGetDevicePointer, &device, base, 0);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(device) +
                                 static_cast<uintptr_t>(static_cast<char*>(host) - base));
}

}  // namespace torch_cudajit::detail
