// torch_cudajit: the front end's stand-in for NVRTC's built-in header "nvrtc_device_runtime.h",
// which CUDA's <cuda_runtime.h> includes under NVRTC: the device runtime API (cudaMalloc,
// cudaGetParameterBuffer, cudaGraphSetConditional, ... in device code), which CUDA's own
// <cuda_device_runtime_api.h> declares (see cj/frontend/target for this folder's use).
#pragma once

#if __has_include(<cuda_device_runtime_api.h>)
#include <cuda_device_runtime_api.h>
#endif
