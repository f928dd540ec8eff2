// torch_cudajit: torch's CUDA device and stream as the core sees them, read through torch's
// device-generic guard interface so that the core needs no CUDA runtime headers.
#pragma once

#include <cuda.h>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

namespace torch_cudajit {
namespace detail {

/// torch's current CUDA device.
int current_cuda_device();
/// torch's current CUDA stream on a device (what torch.cuda.current_stream() returns there).
CUstream current_cuda_stream(int device);

/// Makes `device` current for a scope: torch's current device and the driver context.
class DeviceScope {
 public:
  explicit DeviceScope(int device);

 private:
  c10::OptionalDeviceGuard guard_;
};

/// The address a kernel reaches a tensor's data at: its data pointer for CUDA tensors; for a
/// pinned host tensor (CallBinder lets no other CPU tensor through) the device pointer of its
/// mapping, which CUDA's unified addressing makes equal to the host pointer.
void* device_address(const at::Tensor& t);

}  // namespace detail
}  // namespace torch_cudajit
