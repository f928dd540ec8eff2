// torch_cudajit: the launch of a specialization (see launch.h). A debug-mode launch's record
// is read in debug_record.cpp.
#include "launch.h"

#include "cuda_api.h"
#include "torch_device.h"
#include "virtual_grid.h"

#include <c10/core/GradMode.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace torch_cudajit {
namespace {

using detail::device_address;
using detail::DeviceScope;

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

template <class T>
void store(char* dst, T v) {
  std::memcpy(dst, &v, sizeof(T));
}

// Writes a real value into a floating-point or complex parameter.
void store_real(char* dst, TypeCode code, double re, double im) {
  switch (code) {
    case TypeCode::kHalf: store(dst, c10::Half(static_cast<float>(re)).x); break;
    case TypeCode::kBFloat16: store(dst, c10::BFloat16(static_cast<float>(re)).x); break;
    case TypeCode::kFloat: store(dst, static_cast<float>(re)); break;
    case TypeCode::kDouble: store(dst, re); break;
    case TypeCode::kComplexFloat:
      store(dst, static_cast<float>(re));
      store(dst + 4, static_cast<float>(im));
      break;
    case TypeCode::kComplexDouble:
      store(dst, re);
      store(dst + 8, im);
      break;
    default: TORCH_INTERNAL_ASSERT(false, "store_real on code ", static_cast<int>(code));
  }
}

// Writes an integer into an integer, bool, floating or complex parameter, checking its range.
bool store_integer(char* dst, TypeCode code, int64_t v, uint64_t u, bool big) {
  auto in = [&](long double lo, long double hi) {
    long double x = big ? static_cast<long double>(u) : static_cast<long double>(v);
    return x >= lo && x <= hi;
  };
  switch (code) {
    case TypeCode::kBool: store(dst, static_cast<bool>(big ? u != 0 : v != 0)); return true;
    case TypeCode::kInt8: if (!in(-128, 127)) return false; store(dst, static_cast<int8_t>(v)); return true;
    case TypeCode::kUInt8: if (!in(0, 255)) return false; store(dst, static_cast<uint8_t>(v)); return true;
    case TypeCode::kInt16: if (!in(-32768, 32767)) return false; store(dst, static_cast<int16_t>(v)); return true;
    case TypeCode::kUInt16: if (!in(0, 65535)) return false; store(dst, static_cast<uint16_t>(v)); return true;
    case TypeCode::kInt32: if (!in(-2147483648.0L, 2147483647.0L)) return false; store(dst, static_cast<int32_t>(v)); return true;
    case TypeCode::kUInt32: if (!in(0, 4294967295.0L)) return false; store(dst, static_cast<uint32_t>(v)); return true;
    case TypeCode::kInt64: if (big) return false; store(dst, v); return true;
    case TypeCode::kUInt64:
      if (!big && v < 0) return false;
      store(dst, big ? u : static_cast<uint64_t>(v));
      return true;
    default:
      store_real(dst, code, big ? static_cast<double>(u) : static_cast<double>(v), 0.0);
      return true;
  }
}

// Integer range of a code, for messages.
std::string range_of(TypeCode code) {
  switch (code) {
    case TypeCode::kInt8: return "[-128, 127]";
    case TypeCode::kUInt8: return "[0, 255]";
    case TypeCode::kInt16: return "[-32768, 32767]";
    case TypeCode::kUInt16: return "[0, 65535]";
    case TypeCode::kInt32: return "[-2147483648, 2147483647]";
    case TypeCode::kUInt32: return "[0, 4294967295]";
    case TypeCode::kInt64: return "[-9223372036854775808, 9223372036854775807]";
    case TypeCode::kUInt64: return "[0, 18446744073709551615]";
    default: return "?";
  }
}

// The type of parameter `i` in a compiled kernel's demangled signature, pointer removed ("" when
// it cannot be read): what a pointee written as a template parameter became.
std::string compiled_pointee(const std::string& lowered, size_t i) {
  int status = 0;
  char* d = abi::__cxa_demangle(lowered.c_str(), nullptr, nullptr, &status);
  const std::string text = status == 0 && d != nullptr ? d : "";
  std::free(d);
  if (text.empty() || text.back() != ')') return "";
  // The parameter list: from the '(' that matches the last ')'.
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t k = text.size(); k-- > 0;) {
    if (text[k] == ')') ++depth;
    if (text[k] == '(' && --depth == 0) {
      open = k;
      break;
    }
  }
  if (open == std::string::npos) return "";
  std::vector<std::string> params(1);
  depth = 0;
  for (size_t k = open + 1; k + 1 < text.size(); ++k) {
    const char c = text[k];
    depth += (c == '<' || c == '(' || c == '[') ? 1 : (c == '>' || c == ')' || c == ']') ? -1 : 0;
    if (c == ',' && depth == 0) params.emplace_back();
    else if (!(c == ' ' && params.back().empty())) params.back() += c;
  }
  if (i >= params.size()) return "";
  std::string t = params[i];
  while (!t.empty() && (t.back() == '*' || t.back() == ' ')) t.pop_back();
  if (t.rfind("const ", 0) == 0) t.erase(0, 6);
  return t;
}

// Checks one pointer argument's address and size against the slot's pointee.
void check_pointee(const KernelDecl& decl, size_t i, const Specialization::Slot& slot,
                   const ArgSig& sig, const Arg& a, uintptr_t address,
                   const std::string& lowered) {
  const uint32_t align = slot.pointee_align, size = slot.pointee_size;
  Param p = decl.params[i];
  // `State*` compiled as `curandStatePhilox4_32_10*`: the message names both.
  if (p.element_dependent) {
    const std::string compiled = compiled_pointee(lowered, i);
    if (!compiled.empty() && compiled != p.element) p.element += "` = `" + compiled;
  }
  if (a.kind == ArgKind::kAddress) {
    if (align > 1 && address % align != 0)
      detail::param_value_error(decl, i, "points to `" + p.element + "` (" + std::to_string(size) + " bytes, " +
                        std::to_string(align) + "-byte aligned) and needs a " +
                        std::to_string(align) + "-byte aligned address; got cj.DevicePointer(" +
                        hex(address) + "), " + std::to_string(address % align) + " bytes past a " +
                        std::to_string(align) + "-byte boundary.");
    return;
  }
  const at::Tensor& t = *a.tensor;
  const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
  const bool aligned = align <= 1 || address % align == 0;
  if (aligned && (size == 0 || nbytes % size == 0)) return;
  const uint64_t lanes = size / std::max<uint64_t>(1, t.element_size());
  std::string fix = size % t.element_size() == 0
                        ? "Use a tensor of a multiple of " + std::to_string(lanes) +
                              " elements that starts at a multiple of " + std::to_string(lanes) +
                              " elements of its storage (a fresh tensor is aligned)."
                        : "Its bytes must hold whole `" + p.element + "` values.";
  detail::param_value_error(decl, i, "points to `" + p.element + "` and needs a tensor whose data is " +
                    std::to_string(align) + "-byte aligned and whose size is a multiple of " +
                    std::to_string(size) + " bytes; got a " + dtype_name(sig.dtype) +
                    " tensor of " + std::to_string(t.numel()) + " elements (" +
                    std::to_string(nbytes) + " bytes) whose data " +
                    (aligned ? "is " + std::to_string(align) + "-byte aligned"
                             : "starts " + std::to_string(address % align) + " bytes past a " +
                                   std::to_string(align) + "-byte boundary") +
                    ". " + fix);
}

}  // namespace

void check_pointees(const KernelDecl& decl, const Specialization& spec, const Arg* args, size_t n) {
  TORCH_INTERNAL_ASSERT(n == spec.slots.size(), "argument count changed after keying");
  for (size_t i = 0; i < n; ++i) {
    const Specialization::Slot& slot = spec.slots[i];
    if (slot.pointee_align == 0 && slot.pointee_size == 0) continue;
    // Compile-only arguments may be CPU or meta tensors: their own data pointer stands in.
    const uintptr_t address = args[i].kind == ArgKind::kAddress
                                  ? static_cast<uintptr_t>(args[i].u)
                                  : reinterpret_cast<uintptr_t>(args[i].tensor->data_ptr());
    check_pointee(decl, i, slot, spec.key.args[i], args[i], address, spec.lowered_name);
  }
}

namespace {

// The parameters a virtual-grid wrapper takes after the kernel's: the companions' data
// pointers (Specialization::companions), then the virtual grid's size (from the plan's task
// count), the task count, the plan's prefetch mask and distance.
void pack_virtual(const Specialization& spec, size_t n, char* buf, void** ptrs,
                  const LaunchPlan& cfg) {
  const int64_t virtual_grid = virtual_grid_blocks(cfg.virtual_tasks);
  TORCH_INTERNAL_ASSERT(cfg.virtual_tasks > 0 && virtual_grid <= int64_t{0xffffffff},
                        "a virtual-grid launch without its task count, or with too many");
  char* dst = buf + spec.companion_offset;
  void** p = ptrs + n;
  for (size_t j = 0; j < spec.companions.size(); ++j, dst += 8) {
    // Array and pointer parameters both begin with the data pointer.
    std::memcpy(dst, buf + spec.slots[spec.companions[j]].offset, 8);
    *p++ = dst;
  }
  // The wrapper's order: grid, tasks, mask, distance; the buffer puts the 8-byte one first.
  store(dst, static_cast<uint64_t>(cfg.virtual_tasks));
  store(dst + 8, static_cast<uint32_t>(virtual_grid));
  store(dst + 12, cfg.prefetch_mask);
  store(dst + 16, cfg.prefetch_ahead);
  *p++ = dst + 8;
  *p++ = dst;
  *p++ = dst + 12;
  *p++ = dst + 16;
}

// Checks a launch configuration against the device and the kernel's limits, raising the
// dynamic shared memory limit when a launch asks for more (the launch's first step).
void check_config(const KernelDecl& decl, LoadedKernel& kernel, int device, const LaunchPlan& cfg) {
  const KernelDeviceState& state = kernel.device_state(device);
  const DeviceLimits& lim = device_limits(device);
  for (int d = 0; d < 3; ++d) {
    TORCH_CHECK_VALUE(cfg.block[d] >= 1 && cfg.block[d] <= lim.max_block[d],
                      "torch_cudajit: block dimension ", "xyz"[d], " of kernel '", decl.name,
                      "' is ", cfg.block[d], "; this device allows 1 to ", lim.max_block[d], ".");
    TORCH_CHECK_VALUE(cfg.grid[d] >= 1 && cfg.grid[d] <= lim.max_grid[d],
                      "torch_cudajit: grid dimension ", "xyz"[d], " of kernel '", decl.name,
                      "' is ", cfg.grid[d], "; this device allows 1 to ", lim.max_grid[d],
                      ". Use more threads per block or a grid-stride loop.");
  }
  const int64_t threads = cfg.block[0] * cfg.block[1] * cfg.block[2];
  TORCH_CHECK_VALUE(threads <= state.max_threads_per_block, "torch_cudajit: block of kernel '",
                    decl.name, "' has ", threads, " threads (", cfg.block[0], "x", cfg.block[1],
                    "x", cfg.block[2], "); this kernel allows at most ",
                    state.max_threads_per_block, " on this device.");
  if (cfg.shared_mem > state.dynamic_shared_limit) {
    const int64_t available = lim.max_shared_optin - state.static_shared;
    TORCH_CHECK_VALUE(cfg.shared_mem >= 0 && cfg.shared_mem <= available,
                      "torch_cudajit: kernel '", decl.name, "' asks for ", cfg.shared_mem,
                      " bytes of dynamic shared memory; this device allows at most ", available,
                      " (", lim.max_shared_optin, " per block minus ", state.static_shared,
                      " static).");
    kernel.reserve_dynamic_shared(device, static_cast<int>(cfg.shared_mem));
  }
  TORCH_CHECK_VALUE(cfg.shared_mem >= 0, "torch_cudajit: shared memory size must be >= 0, got ",
                    cfg.shared_mem);
}

// Packs the arguments into the parameter buffer `buf`, with a pointer to each parameter in
// `ptrs` (numbers converted to the declared types and range-checked, pointees checked).
void pack(const KernelDecl& decl, const Specialization& spec, const Arg* args, size_t n,
          char* buf, void** ptrs) {
  for (size_t i = 0; i < n; ++i) {
    const Specialization::Slot& slot = spec.slots[i];
    const Arg& a = args[i];
    char* dst = buf + slot.offset;
    ptrs[i] = dst;
    switch (slot.op) {
      case PackOp::kArray: {
        const at::Tensor& t = *a.tensor;
        store(dst, device_address(t));
        const int64_t* sizes = t.sizes().data();
        const int64_t* strides = t.strides().data();
        std::memcpy(dst + cj::abi::kArrayShapeOffset, sizes, 8u * slot.rank);
        std::memcpy(dst + cj::abi::array_strides_offset(slot.rank), strides, 8u * slot.rank);
        break;
      }
      case PackOp::kPointer: {
        void* address = device_address(*a.tensor);
        if (slot.pointee_align != 0)
          check_pointee(decl, i, slot, spec.key.args[i], a, reinterpret_cast<uintptr_t>(address),
                        spec.lowered_name);
        store(dst, address);
        break;
      }
      case PackOp::kAddress:
        if (slot.pointee_align != 0)
          check_pointee(decl, i, slot, spec.key.args[i], a, static_cast<uintptr_t>(a.u),
                        spec.lowered_name);
        store(dst, a.u);
        break;
      case PackOp::kTensorScalar: {
        // A 0-d tensor read as a scalar (a device sync for CUDA tensors).
        c10::Scalar v = a.tensor->item();
        if (is_complex(slot.code)) {
          auto c = v.toComplexDouble();
          store_real(dst, slot.code, c.real(), c.imag());
        } else if (is_floating(slot.code)) {
          store_real(dst, slot.code, v.toDouble(), 0.0);
        } else if (!store_integer(dst, slot.code, v.toLong(), 0, false)) {
          detail::param_value_error(decl, i, "got a 0-d tensor whose value does not fit.");
        }
        break;
      }
      case PackOp::kInt:
      case PackOp::kBool:
        if (!store_integer(dst, slot.code, a.i, a.u, a.big_unsigned)) {
          std::string v = a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i);
          detail::param_value_error(decl, i, "is " + std::string(dtype_name(slot.code)) + " with range " +
                            range_of(slot.code) + "; the Python int " + v + " does not fit.");
        }
        break;
      case PackOp::kFloat: store_real(dst, slot.code, a.d, 0.0); break;
      case PackOp::kComplex: store_real(dst, slot.code, a.d, a.imag); break;
      case PackOp::kTag: break;  // an empty struct: its value is in its type
      case PackOp::kBytes:
        if (a.nbytes != slot.size)
          detail::param_type_error(decl, i, "is " + std::to_string(slot.size) + " bytes; the extension gave " +
                            std::to_string(a.nbytes) + ".");
        std::memcpy(dst, a.bytes, a.nbytes);
        break;
    }
  }
}

// A cuLaunchCooperativeKernel of a kernel with a grid-wide barrier, after checking that the
// whole grid can be resident at once.
void launch_cooperative(const KernelDecl& decl, LoadedKernel& kernel, int device,
                        const LaunchPlan& cfg, CUstream stream, void** ptrs) {
  // A grid-wide barrier needs every block resident at once: a larger grid would hang.
  const DeviceLimits& lim = device_limits(device);
  TORCH_CHECK_VALUE(lim.cooperative_launch, "torch_cudajit: kernel '", decl.name,
                    "' synchronizes the whole grid, but device ", device,
                    " does not support cooperative launches.");
  const int64_t threads = cfg.block[0] * cfg.block[1] * cfg.block[2];
  const int64_t blocks = cfg.grid[0] * cfg.grid[1] * cfg.grid[2];
  const int per_sm = kernel.max_active_blocks_per_sm(static_cast<int>(threads),
                                                     static_cast<size_t>(cfg.shared_mem));
  const int64_t max_blocks = int64_t(per_sm) * lim.multiprocessors;
  TORCH_CHECK_VALUE(blocks <= max_blocks, "torch_cudajit: kernel '", decl.name,
                    "' synchronizes the whole grid, so all its blocks must be resident at "
                    "once; the grid has ", blocks, " blocks but at most ", max_blocks, " (",
                    per_sm, " per SM x ", lim.multiprocessors, " SMs) fit with ", threads,
                    " threads and ", cfg.shared_mem, " bytes of dynamic shared memory per "
                    "block. Launch at most kernel.max_cooperative_grid_blocks(block) blocks.");
  CJ_CHECK(cuLaunchCooperativeKernel, kernel.function(), static_cast<unsigned>(cfg.grid[0]),
           static_cast<unsigned>(cfg.grid[1]), static_cast<unsigned>(cfg.grid[2]),
           static_cast<unsigned>(cfg.block[0]), static_cast<unsigned>(cfg.block[1]),
           static_cast<unsigned>(cfg.block[2]), static_cast<unsigned>(cfg.shared_mem), stream,
           ptrs);
}

}  // namespace

void launch_specialization(const KernelDefinition& definition, Specialization& spec,
                           const Arg* args, size_t n, int device, const LaunchPlan& cfg) {
  TORCH_INTERNAL_ASSERT(n == spec.slots.size(), "argument count changed after keying");
  const KernelDecl& decl = definition.decl();
  DeviceScope scope(device);
  LoadedKernel& kernel = spec.loaded();
  check_config(decl, kernel, device, cfg);
  const bool track_writes = spec.writes_tensors;
  if (track_writes && c10::GradMode::is_enabled()) {
    for (size_t i = 0; i < n; ++i)
      if (spec.slots[i].written)
        check_write_untracked(*args[i].tensor, decl.name,
                              "parameter '" + decl.params[i].name + "'");
  }
  // Pack the parameters. Small kernels (nearly all) use the stack.
  alignas(16) char small[1024];
  std::vector<char> large;
  char* buf = small;
  if (spec.buffer_size > sizeof(small)) {
    large.resize(spec.buffer_size + 16);
    buf = large.data();
  }
  // The kernel's parameters, then a virtual-grid wrapper's companions, grid and prefetch.
  void* ptrs[2 * kMaxParams + 4];
  pack(decl, spec, args, n, buf, ptrs);
  if (spec.virtual_blocks > 0) pack_virtual(spec, n, buf, ptrs, cfg);
  CUstream stream = cfg.has_stream ? cfg.stream : detail::current_cuda_stream(device);
  // Debug mode: clear the failure record on the launch's stream, so that a failure recorded
  // by an earlier launch (another stream, a graph replay) is never reported for this one.
  std::pair<CUdeviceptr, size_t> debug_record{0, 0};
  if (definition.options().compile.debug) {
    debug_record = kernel.library().global("cj_debug_record");
    if (debug_record.first != 0)
      CJ_CHECK(cuMemsetD8Async, debug_record.first, 0, debug_record.second, stream);
  }
  if (definition.cooperative()) {
    launch_cooperative(decl, kernel, device, cfg, stream, ptrs);
  } else {
    CJ_CHECK(cuLaunchKernel, reinterpret_cast<CUfunction>(kernel.handle()),
             static_cast<unsigned>(cfg.grid[0]), static_cast<unsigned>(cfg.grid[1]),
             static_cast<unsigned>(cfg.grid[2]), static_cast<unsigned>(cfg.block[0]),
             static_cast<unsigned>(cfg.block[1]), static_cast<unsigned>(cfg.block[2]),
             static_cast<unsigned>(cfg.shared_mem), stream, ptrs, nullptr);
  }
  if (track_writes) {
    for (size_t i = 0; i < n; ++i)
      if (spec.slots[i].written) bump_written_version(*args[i].tensor);
  }
  if (debug_record.first != 0)
    detail::check_debug_record(decl.name, debug_record.first, debug_record.second, stream);
}

void check_write_untracked(const at::Tensor& t, const std::string& kernel, const std::string& what) {
  TORCH_CHECK(!t.requires_grad(), "torch_cudajit: kernel '", kernel, "' writes ", what,
              ", a tensor that requires grad; kernels have no derivative, so autograd cannot "
              "track the write. Write into a tensor that does not require grad (torch.empty(...), "
              "or t.detach()), launch under torch.no_grad(), or wrap the launch in a "
              "torch.autograd.Function that defines backward.");
}

LaunchPlan LaunchPlan::of(const LaunchRequest& request) {
  TORCH_INTERNAL_ASSERT(request.forall_tasks == 0, "a forall request has no plan of its own");
  LaunchPlan plan;
  plan.grid = request.grid;
  plan.block = request.block;
  plan.shared_mem = request.shared_mem;
  plan.has_stream = request.has_stream;
  plan.stream = request.stream;
  return plan;
}

std::array<int64_t, 3> launch_dims(c10::IntArrayRef extents, const char* what,
                                   const std::string& kernel) {
  TORCH_CHECK_VALUE(!extents.empty() && extents.size() <= 3, "torch_cudajit: ", what,
                    " must be an int or a tuple of 1 to 3 ints, got ", extents.size(),
                    " values (", extents, ") for kernel '", kernel, "'.");
  std::array<int64_t, 3> d{1, 1, 1};
  std::copy(extents.begin(), extents.end(), d.begin());
  return d;
}

}  // namespace torch_cudajit
