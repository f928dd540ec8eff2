// torch_cudajit: a specialization on the devices (see device_state.h): its module loaded once
// and shared by the specializations of one compile, and what a kernel is on each device: its
// resources, its settable attributes, its module variables and the largest cooperative grid.
#include "device_state.h"

#include "torch_device.h"

#include <ATen/ops/from_blob.h>

#include <unordered_map>

namespace torch_cudajit {
namespace {

// The loaded library of a compile, shared by the specializations it holds (a batch of
// precompile, or keys a batch record served): one module load, not one per specialization.
std::shared_ptr<LoadedLibrary> library_of(const std::shared_ptr<const CompiledProgram>& compiled) {
  static std::mutex mutex;
  // A live library holds its compile, so an entry's address is not reused while it is live.
  static std::unordered_map<const CompiledProgram*, std::weak_ptr<LoadedLibrary>> libraries;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<LoadedLibrary>& entry = libraries[compiled.get()];
  if (std::shared_ptr<LoadedLibrary> live = entry.lock()) return live;
  for (auto it = libraries.begin(); it != libraries.end();)
    it = it->second.expired() && it->first != compiled.get() ? libraries.erase(it) : std::next(it);
  auto library = std::make_shared<LoadedLibrary>(compiled);
  libraries[compiled.get()] = library;
  return library;
}

}  // namespace

LoadedKernel& Specialization::loaded() {
  std::call_once(load_once_, [this] {
    std::shared_ptr<LoadedLibrary> library = library_of(compiled);
    TORCH_CHECK_VALUE(!prebuilt || library->has_kernel(lowered_name), "torch_cudajit: the ",
                      compiled->target, " image has no kernel named '", lowered_name,
                      "'. Pass lowered_name= the kernel's symbol in the image (extern \"C\" "
                      "kernels keep their name; C++ ones are mangled, e.g. _Z5saxpyPfPKff; "
                      "cuobjdump -symbols lists them).");
    loaded_ = std::make_shared<LoadedKernel>(library, lowered_name);
    // The driver's view of the parameter list must match the plugin's packing.
    // (A driver before CUDA 12.4 cannot tell: then nothing is checked.)
    const auto image = prebuilt ? loaded_->driver_param_sizes(slots.size() + 1) : std::nullopt;
    if (image) {
      // One more than declared: an image kernel with more parameters is a mismatch too.
      std::string declared, found;
      for (const auto& slot : slots) declared += (declared.empty() ? "" : ", ") + std::to_string(slot.size);
      for (size_t size : *image) found += (found.empty() ? "" : ", ") + std::to_string(size);
      TORCH_CHECK_VALUE(declared == found, "torch_cudajit: the declaration of prebuilt kernel '",
                        lowered_name, "' does not match the image: its parameters take (", declared,
                        ") bytes as declared, but (", found, ") bytes in the image. Pass the "
                        "declaration the image was compiled from.");
    }
    if (const auto sizes = loaded_->driver_param_sizes(slots.size())) {
      TORCH_INTERNAL_ASSERT(sizes->size() == slots.size(), lowered_name, " has ", sizes->size(),
                            " parameter(s) for the driver, ", slots.size(), " packed");
      for (size_t i = 0; i < sizes->size(); ++i)
        TORCH_INTERNAL_ASSERT((*sizes)[i] == slots[i].size, "parameter ", i, " of ", lowered_name,
                              ": driver size ", (*sizes)[i], " != packed size ", slots[i].size);
    }
  });
  return *loaded_;
}

using detail::DeviceScope;

KernelResources kernel_resources(Specialization& spec, int device) {
  DeviceScope scope(device);
  LoadedKernel& k = spec.loaded();
  KernelResources r;
  r.regs_per_thread = k.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS, device);
  r.shared_mem_per_block = k.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, device);
  r.const_mem_size = k.attribute(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, device);
  r.local_mem_per_thread = k.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, device);
  r.max_threads_per_block = k.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
  r.ptx_version = k.attribute(CU_FUNC_ATTRIBUTE_PTX_VERSION, device);
  r.binary_version = k.attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION, device);
  // Read after device_state, which applies what set_attribute recorded to this device.
  k.device_state(device);
  r.max_dynamic_shared_size_bytes = k.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, device);
  r.preferred_shared_memory_carveout = k.attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, device);
  return r;
}

void set_kernel_attribute(Specialization& spec, int device, CUfunction_attribute attr, int value) {
  DeviceScope scope(device);
  LoadedKernel& k = spec.loaded();
  const KernelDeviceState& state = k.device_state(device);
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    const DeviceLimits& lim = device_limits(device);
    const int available = lim.max_shared_optin - state.static_shared;
    TORCH_CHECK_VALUE(value <= available, "torch_cudajit: max_dynamic_shared_size_bytes of kernel '",
                      spec.kernel_name, "' ", spec.signature, " may be at most ", available,
                      " on cuda:", device, " (", lim.max_shared_optin, " per block minus ",
                      state.static_shared, " static); got ", value, ".");
  }
  k.set_attribute(attr, value);
}

at::Tensor module_global(const std::shared_ptr<Specialization>& spec, int device,
                         const std::string& name) {
  DeviceScope scope(device);
  LoadedKernel& k = spec->loaded();
  k.device_state(device);  // loads the module into this device's context
  const auto [address, size] = k.library().global(name.c_str());
  TORCH_CHECK_VALUE(address != 0, "torch_cudajit: the module of kernel '", spec->kernel_name, "' ",
                    spec->signature, " has no __device__ or __constant__ variable named '", name,
                    "'. Declare it at namespace scope in the kernel's source; a variable inside "
                    "a namespace is found by its mangled name, and extern \"C\" keeps the name "
                    "as written.");
  // The deleter holds the specialization, which holds the loaded module: the memory stays
  // valid for as long as any tensor aliases it.
  std::shared_ptr<Specialization> keep = spec;
  const c10::Device where(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
  return at::from_blob(reinterpret_cast<void*>(static_cast<uintptr_t>(address)),
                       {static_cast<int64_t>(size)}, [keep](void*) {},
                       at::TensorOptions().dtype(at::kByte).device(where), where);
}

int64_t max_cooperative_grid_blocks(Specialization& spec, int device, int threads,
                                    int64_t dynamic_shared) {
  TORCH_CHECK_VALUE(threads >= 1, "torch_cudajit: block must have at least 1 thread, got ", threads);
  TORCH_CHECK_VALUE(dynamic_shared >= 0, "torch_cudajit: dynamic_shared_mem must be >= 0, got ",
                    dynamic_shared);
  DeviceScope scope(device);
  LoadedKernel& k = spec.loaded();
  const KernelDeviceState& state = k.device_state(device);
  const DeviceLimits& lim = device_limits(device);
  TORCH_CHECK_VALUE(threads <= state.max_threads_per_block, "torch_cudajit: kernel '", spec.kernel_name,
                    "' allows at most ", state.max_threads_per_block,
                    " threads per block on this device; got ", threads, ".");
  const int64_t available = lim.max_shared_optin - state.static_shared;
  TORCH_CHECK_VALUE(dynamic_shared <= available, "torch_cudajit: kernel '", spec.kernel_name,
                    "' may use at most ", available, " bytes of dynamic shared memory (",
                    lim.max_shared_optin, " per block minus ", state.static_shared,
                    " static); got ", dynamic_shared, ".");
  if (dynamic_shared > state.dynamic_shared_limit)
    k.reserve_dynamic_shared(device, static_cast<int>(dynamic_shared));
  return int64_t(k.max_active_blocks_per_sm(threads, static_cast<size_t>(dynamic_shared))) *
         device_limits(device).multiprocessors;
}

}  // namespace torch_cudajit
