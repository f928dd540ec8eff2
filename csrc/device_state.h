// torch_cudajit: what a specialization is on a device: its resources, its settable attributes,
// its module's variables and the largest cooperative grid. Each call loads the specialization
// on the device first.
#pragma once

#include "specialization_table.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace torch_cudajit {

/// Resource use of a compiled kernel on a device (numba's get_regs_per_thread & co.).
struct KernelResources {
  int regs_per_thread = 0;
  int shared_mem_per_block = 0;  ///< static shared memory, bytes
  int const_mem_size = 0;        ///< bytes
  int local_mem_per_thread = 0;  ///< bytes
  int max_threads_per_block = 0;
  int ptx_version = 0;     ///< PTX ISA version the kernel was compiled from, e.g. 90 for 9.0
  int binary_version = 0;  ///< architecture of the machine code, e.g. 90 for sm_90
  int max_dynamic_shared_size_bytes = 0;     ///< settable (set_attribute)
  int preferred_shared_memory_carveout = 0;  ///< percent of L1 for shared memory, -1: default
};

/// Registers, memory and the thread limit of a specialization on a device.
KernelResources kernel_resources(Specialization& spec, int device);

/// Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES or _PREFERRED_SHARED_MEMORY_CARVEOUT
/// of a specialization, loading it on `device` first; the value applies on every device
/// the specialization is loaded on, now or later. Throws c10::ValueError when `device`
/// cannot give that much dynamic shared memory.
void set_kernel_attribute(Specialization& spec, int device, CUfunction_attribute attr, int value);

/// A uint8 tensor aliasing the __device__ or __constant__ variable `name` of a
/// specialization's module on `device` (loading it there). The tensor keeps the module
/// loaded. Throws c10::ValueError when the module has no such variable.
at::Tensor module_global(const std::shared_ptr<Specialization>& spec, int device,
                         const std::string& name);

/// The most blocks of `threads` threads (with `dynamic_shared` bytes each) that can be
/// resident at once on a device: the largest grid a cooperative launch may use.
int64_t max_cooperative_grid_blocks(Specialization& spec, int device, int threads,
                                    int64_t dynamic_shared);

}  // namespace torch_cudajit
