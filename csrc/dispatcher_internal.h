// torch_cudajit: helpers the dispatcher's files share (dispatcher.cpp, call_key.cpp,
// launch.cpp, device_state.cpp); not part of the core's interface.
#pragma once

#include "dispatcher.h"

#include <c10/core/DeviceGuard.h>

namespace torch_cudajit::detail {

/// The name of an argument kind in messages ("tensor", "int", ...).
const char* kind_name(ArgKind k);

/// Makes `device` current for a scope: torch's current device and the driver context.
class DeviceScope {
 public:
  explicit DeviceScope(int device);

 private:
  c10::OptionalDeviceGuard guard_;
};

/// The address a kernel reaches a tensor's data at: its data pointer for CUDA tensors; for a
/// pinned host tensor (make_key let no other CPU tensor through) the device pointer of its
/// mapping, which CUDA's unified addressing makes equal to the host pointer.
void* device_address(const at::Tensor& t);

/// Runs `work` through the runner set_blocking_runner installed, or directly without one.
void run_blocking(const std::function<void()>& work);

}  // namespace torch_cudajit::detail
