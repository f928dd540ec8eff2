// torch_cudajit: binding, key computation, specialization cache and launch (see dispatcher.h).
#include "dispatcher.h"

#include <ATen/ops/from_blob.h>
#include <c10/core/GradMode.h>
#include <c10/core/DeviceGuard.h>
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
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace torch_cudajit {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::ostringstream os;
  os << "shape " << t.sizes() << " and strides " << t.strides();
  return os.str();
}

const char* kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::kTensor: return "tensor";
    case ArgKind::kInt: return "int";
    case ArgKind::kFloat: return "float";
    case ArgKind::kBool: return "bool";
    case ArgKind::kComplex: return "complex";
    case ArgKind::kBytes: return "extension bytes";
    case ArgKind::kAddress: return "address";
    case ArgKind::kTag: return "tag";
    case ArgKind::kNone: return "nothing";
  }
  return "?";
}

bool is_integer_literal(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Makes `device` current for a scope: torch's current device and the driver context.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (detail::current_cuda_device() != device)
      guard_.reset_device(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
    ensure_context(device);
  }

 private:
  c10::OptionalDeviceGuard guard_;
};

uint32_t align_up(uint32_t v, uint32_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// The address a kernel reaches a tensor's data at: its data pointer for CUDA tensors; for a
// pinned host tensor (make_key let no other CPU tensor through) the device pointer of its
// mapping, which CUDA's unified addressing makes equal to the host pointer.
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

}  // namespace

TypeCode type_code_of(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Bool: return TypeCode::kBool;
    case c10::ScalarType::Char: return TypeCode::kInt8;
    case c10::ScalarType::Byte: return TypeCode::kUInt8;
    case c10::ScalarType::Short: return TypeCode::kInt16;
    case c10::ScalarType::Int: return TypeCode::kInt32;
    case c10::ScalarType::Long: return TypeCode::kInt64;
    case c10::ScalarType::Half: return TypeCode::kHalf;
    case c10::ScalarType::BFloat16: return TypeCode::kBFloat16;
    case c10::ScalarType::Float: return TypeCode::kFloat;
    case c10::ScalarType::Double: return TypeCode::kDouble;
    case c10::ScalarType::ComplexFloat: return TypeCode::kComplexFloat;
    case c10::ScalarType::ComplexDouble: return TypeCode::kComplexDouble;
    case c10::ScalarType::UInt16: return TypeCode::kUInt16;
    case c10::ScalarType::UInt32: return TypeCode::kUInt32;
    case c10::ScalarType::UInt64: return TypeCode::kUInt64;
    default:
      TORCH_CHECK_TYPE(false, "torch_cudajit: tensors of dtype ", dtype,
                       " cannot be passed to kernels; supported dtypes are float16, bfloat16, "
                       "float32, float64, int8/16/32/64, uint8/16/32/64, bool, complex64 and "
                       "complex128.");
  }
}

LoadedKernel& Specialization::loaded() {
  std::call_once(load_once_, [this] {
    auto library = std::make_shared<LoadedLibrary>(compiled);
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

Dispatcher::Dispatcher(std::shared_ptr<const Program> program, std::string kernel_name,
                       KernelOptions options)
    : program_(std::move(program)), options_(std::move(options)) {
  decl_ = &program_->kernel(kernel_name);
  // Decided once: the launch path only reads the flag.
  cooperative_ = options_.cooperative >= 0 ? options_.cooperative != 0
                                           : program_->cooperative(decl_->name);
  grid_strides_ = program_->grid_strides(decl_->name);
  // Abbreviated function templates anywhere in the source need C++20 for the whole source.
  const std::string& std_ = options_.compile.std;
  if (std_ == "c++11" || std_ == "c++14" || std_ == "c++17") {
    for (const auto& k : program_->kernels())
      for (const auto& p : k.params)
        if (p.kind == ParamKind::kAuto) options_.compile.std = "c++20";
  }
  TORCH_CHECK_VALUE(decl_->params.size() <= kMaxParams, "torch_cudajit: kernel '", decl_->name,
                    "' has ", decl_->params.size(), " parameters; at most ", kMaxParams,
                    " are supported.");
  for (const Param& p : decl_->params) {
    Declared d;
    d.element = type_code_of(p.element);
    d.scalar = type_code_of(p.type.rfind("const ", 0) == 0 ? p.type.substr(6) : p.type);
    if (p.kind == ParamKind::kArray && is_integer_literal(p.rank)) d.rank = std::stoi(p.rank);
    if (p.kind == ParamKind::kPointer) d.vector = vector_type_of(p.element);
    declared_.push_back(d);
  }
}

void Dispatcher::fail_value(size_t i, const std::string& what) const {
  const Param& p = decl_->params[i];
  TORCH_CHECK_VALUE(false, "torch_cudajit: parameter '", p.name, "' (", p.type, ") of kernel '",
                    decl_->name, "' ", what);
}

void Dispatcher::fail_param(size_t i, const std::string& what) const {
  const Param& p = decl_->params[i];
  TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' (", p.type, ") of kernel '",
                   decl_->name, "' ", what);
}

namespace detail {

// torch's CUDA device and stream through its device-generic guard interface (registered by
// libc10_cuda), so the core needs no CUDA runtime headers: NVIDIA's wheels ship those only with
// nvidia-cuda-crt, which torch does not bring.
const c10::impl::DeviceGuardImplInterface* cuda_guard_impl() {
  static const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl;
}

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

}  // namespace detail

namespace {
// The alignment and index-width bits of a tensor's key: 16-byte aligned data, and every element
// offset (numel, and the farthest strided offset) below 2^31.
uint8_t layout_property_flags(const at::Tensor& t) {
  uint8_t flags = 0;
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) flags |= kAligned16Flag;
  constexpr int64_t kMax32 = 2147483647;
  bool fits = t.numel() <= kMax32;
  int64_t farthest = 0;
  for (int64_t d = 0; fits && d < t.dim(); ++d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size == 0) return flags | kIndex32Flag;  // nothing is ever indexed
    farthest += (size - 1) * (stride < 0 ? -stride : stride);
    fits = farthest <= kMax32 && stride <= kMax32;
  }
  return fits ? flags | kIndex32Flag : flags;
}
}  // namespace

SpecKey Dispatcher::make_key(const Arg* args, size_t n, int* device, int arch) const {
  const auto& params = decl_->params;
  if (n != params.size()) {
    std::string names;
    for (const auto& p : params) names += (names.empty() ? "" : ", ") + p.name;
    TORCH_CHECK_TYPE(false, "torch_cudajit: kernel '", decl_->name, "' takes ", params.size(),
                     " argument(s) (", names, "), got ", n, ".");
  }
  SpecKey key;
  key.size = static_cast<uint32_t>(n);
  int dev = -1;
  size_t dev_param = 0;
  for (size_t i = 0; i < n; ++i) {
    const Param& p = params[i];
    const Arg& a = args[i];
    ArgSig& s = key.args[i];
    s.kind = a.kind;
    if (a.kind == ArgKind::kTensor) {
      const at::Tensor& t = *a.tensor;
      if (!t.defined()) fail_param(i, "got an undefined tensor.");
      if (arch == 0 && !t.is_cuda()) {
        // Pinned host memory is mapped into the device's address space: pointer and Array
        // parameters reach it through its device address (launch, device_address).
        const bool addressable = p.kind != ParamKind::kScalar && t.is_cpu();
        if (!addressable || !t.is_pinned())
          fail_param(i, "got a tensor on " + t.device().str() +
                            "; kernels take CUDA tensors. Move it with .cuda() or .to('cuda')" +
                            (addressable ? ", or pin it with .pin_memory(): pointer and cj::Array "
                                           "parameters take pinned CPU tensors, which the kernel "
                                           "reads and writes in host memory."
                                         : "."));
      } else if (arch == 0) {
        int d = t.get_device();
        if (dev < 0) {
          dev = d;
          dev_param = i;
        } else if (d != dev) {
          TORCH_CHECK_VALUE(false, "torch_cudajit: kernel '", decl_->name,
                            "' got tensors on two devices: parameter '", params[dev_param].name,
                            "' is on cuda:", dev, " and parameter '", p.name, "' is on cuda:", d,
                            ". Move them to one device.");
        }
      }
      s.dtype = type_code_of(t.scalar_type());
      const TypeCode declared = declared_[i].element;
      if (p.kind == ParamKind::kArray || p.kind == ParamKind::kPointer) {
        if (declared != TypeCode::kUnknown && declared != s.dtype)
          fail_param(i, std::string("takes ") + dtype_name(declared) +
                            " elements, got a tensor of dtype " + dtype_name(s.dtype) + ".");
      }
      if (const VectorType* v = declared_[i].vector) {
        if (v->element != s.dtype)
          fail_param(i, "points to " + p.element + ", " + std::to_string(v->lanes) + " lane(s) of " +
                            dtype_name(v->element) + "; got a tensor of dtype " +
                            dtype_name(s.dtype) + ". Pass a " + dtype_name(v->element) +
                            " tensor whose size is a multiple of " + std::to_string(v->lanes) +
                            " elements.");
      }
      switch (p.kind) {
        case ParamKind::kArray:
        case ParamKind::kAuto: {
          int64_t rank = t.dim();
          if (declared_[i].rank >= 0 && declared_[i].rank != rank)
            fail_param(i, "takes a tensor of rank " + p.rank + ", got rank " +
                              std::to_string(rank) + " (" + shape_of(t) + ").");
          if (rank > 16) fail_param(i, "got a tensor of rank " + std::to_string(rank) + "; at most 16 is supported.");
          s.rank = static_cast<uint8_t>(rank);
          bool contiguous = t.is_contiguous();
          if (p.layout == LayoutMode::kContiguous && !contiguous)
            fail_param(i, "is declared cj::Contiguous and needs a contiguous tensor, got " +
                              shape_of(t) + ". Call .contiguous() on it, or declare it cj::Strided.");
          if (p.layout == LayoutMode::kStrided) contiguous = false;
          if (p.layout == LayoutMode::kContiguous) contiguous = true;
          s.flags = (contiguous ? kContiguousFlag : 0) | layout_property_flags(t);
          break;
        }
        case ParamKind::kPointer:
          if (!t.is_contiguous())
            fail_param(i, "is a raw pointer and needs a contiguous tensor, got " + shape_of(t) +
                              ". Call .contiguous() on it, or declare the parameter as a "
                              "cj::Array to take strided tensors.");
          break;
        case ParamKind::kScalar:
          if (p.tag)
            fail_param(i, "is a tag and takes a Python bool or int (its value picks the "
                          "specialization), got a tensor.");
          if (t.dim() != 0)
            fail_param(i, "is a scalar and takes a number or a 0-d tensor, got a tensor of " +
                              shape_of(t) + ".");
          break;
      }
    } else if (a.kind == ArgKind::kNone) {
      fail_param(i, "got no value.");
    } else if (a.kind == ArgKind::kAddress) {
      if (p.kind != ParamKind::kPointer) {
        const std::string wants = p.kind == ParamKind::kScalar ? "a number" : "a tensor";
        fail_param(i, std::string(a.is_none ? "got None" : "got a cj.DevicePointer") + "; only raw "
                      "pointer parameters (T*, const T*) take " +
                      (a.is_none ? "None (as a NULL pointer)" : "device addresses") +
                      ". Pass " + wants + ".");
      }
    } else {
      if (p.kind == ParamKind::kPointer && a.kind == ArgKind::kInt) {
        const std::string v = a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i);
        fail_param(i, "takes a tensor, got the Python int " + v + ". A raw device address "
                      "must be wrapped: pass cj.DevicePointer(" + v + "), or None for a NULL "
                      "pointer.");
      }
      if (p.kind == ParamKind::kPointer)
        fail_param(i, std::string("takes a tensor, None (NULL) or a cj.DevicePointer, got ") +
                          kind_name(a.kind) + ".");
      if (p.kind == ParamKind::kArray)
        fail_param(i, std::string("takes a tensor, got ") + kind_name(a.kind) + ".");
      if (p.kind == ParamKind::kAuto && a.kind == ArgKind::kBytes)
        fail_param(i, "is `auto`; extension bytes need a declared parameter type.");
      if (a.kind == ArgKind::kBytes) {
        // Bytes carry no type, so they cannot decide a template parameter the type names.
        const auto names = decl_->template_param_names();
        for (const std::string& id : identifiers_of(p.type))
          if (std::find(names.begin(), names.end(), id) != names.end())
            fail_param(i, "has type `" + p.type + "`, which depends on template parameter `" +
                              id + "`; extension bytes cannot decide it. Pass a value the "
                              "kernel can deduce `" + id + "` from, or declare a concrete type.");
      }
      if (p.tag && a.kind != ArgKind::kBytes) {
        if (a.kind != ArgKind::kBool && a.kind != ArgKind::kInt)
          fail_param(i, std::string("is a tag and takes a Python bool or int (its value picks "
                                    "the specialization), got ") + kind_name(a.kind) + ".");
        if (a.big_unsigned || a.i < -32768 || a.i > 32767)
          fail_value(i, "is a tag; its value must be in [-32768, 32767], got " +
                            (a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i)) + ".");
        set_tag(s, a.kind == ArgKind::kBool, static_cast<int16_t>(a.i));
      } else if (p.kind == ParamKind::kScalar) {
        const TypeCode declared = declared_[i].scalar;
        if (declared != TypeCode::kUnknown) {
          bool ok = true;
          if (a.kind == ArgKind::kFloat) ok = is_floating(declared) || is_complex(declared);
          if (a.kind == ArgKind::kComplex) ok = is_complex(declared);
          if (!ok) fail_param(i, std::string("cannot take a Python ") + kind_name(a.kind) + ".");
        }
      }
    }
  }
  if (arch > 0) {
    key.arch = arch;
  } else {
    if (dev < 0) dev = detail::current_cuda_device();
    key.arch = device_limits(dev).compute_capability;
  }
  if (device) *device = dev;
  return key;
}

std::shared_ptr<Specialization> Dispatcher::lookup(const SpecKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  return it->second.get();
}

std::shared_ptr<Specialization> Dispatcher::build(
    const SpecKey& key, const std::shared_ptr<const CompiledProgram>& compiled, size_t index) const {
  auto spec = std::make_shared<Specialization>();
  spec->key = key;
  spec->signature = describe_signature(*decl_, key);
  spec->compiled = compiled;
  spec->lowered_name = compiled->lowered_names[index];
  spec->name_expression = compiled->name_expressions[index];
  spec->probes = compiled->probes[index];
  spec->prebuilt = options_.prebuilt != nullptr;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < key.size; ++i) {
    const ParamProbe& pr = spec->probes[i];
    const ArgSig& s = key.args[i];
    const Param& p = decl_->params[i];
    Specialization::Slot slot{};
    // A pointer's probe describes its pointee; the pointer itself is 8 bytes.
    const bool pointer = p.kind == ParamKind::kPointer;
    slot.code = pointer ? TypeCode::kPointer : pr.code;
    slot.rank = s.rank;
    slot.size = pointer ? uint32_t(sizeof(void*)) : pr.size;
    slot.offset = offset = align_up(offset, pointer ? uint32_t(alignof(void*)) : pr.align);
    offset += slot.size;
    switch (s.kind) {
      case ArgKind::kTensor:
        // The parameter's declared kind decides; the probe confirms the size.
        if (p.kind == ParamKind::kArray || p.kind == ParamKind::kAuto) {
          slot.op = PackOp::kArray;
          TORCH_INTERNAL_ASSERT(pr.size == (s.rank ? 8u + 16u * s.rank : 8u), "Array size ", pr.size);
        } else if (pointer) {
          slot.op = PackOp::kPointer;
          // A concrete pointee that is a dtype (a typedef such as scalar_t) must be the tensor's.
          if (static_cast<int>(pr.code) >= 0 && pr.code != s.dtype)
            TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' (", p.type,
                             ") of kernel '", decl_->name, "' points to ", dtype_name(pr.code),
                             " elements (`", p.element, "` is ", cpp_type_name(pr.code),
                             "); got a tensor of dtype ", dtype_name(s.dtype), ".");
          // A vector or struct pointee asks more of the data than the dtype gives.
          const uint32_t elem = static_cast<uint32_t>(type_size(s.dtype));
          if (pr.size > 0 && (pr.size != elem || pr.align > elem)) {
            slot.pointee_size = pr.size;
            slot.pointee_align = pr.align;
          }
        } else {
          slot.op = PackOp::kTensorScalar;
        }
        break;
      case ArgKind::kAddress:
        slot.op = PackOp::kAddress;
        if (pr.align > 1) {
          slot.pointee_size = pr.size;
          slot.pointee_align = pr.align;
        }
        break;
      case ArgKind::kInt: slot.op = PackOp::kInt; break;
      case ArgKind::kFloat: slot.op = PackOp::kFloat; break;
      case ArgKind::kBool: slot.op = PackOp::kBool; break;
      case ArgKind::kComplex: slot.op = PackOp::kComplex; break;
      case ArgKind::kBytes: slot.op = PackOp::kBytes; break;
      case ArgKind::kTag: slot.op = PackOp::kTag; break;
      case ArgKind::kNone: TORCH_INTERNAL_ASSERT(false, "kNone in a key");
    }
    slot.written = (slot.op == PackOp::kArray || slot.op == PackOp::kPointer) && !p.is_const;
    bool numeric = s.kind == ArgKind::kInt || s.kind == ArgKind::kFloat ||
                   s.kind == ArgKind::kBool || s.kind == ArgKind::kComplex ||
                   slot.op == PackOp::kTensorScalar;
    if (numeric && static_cast<int>(pr.code) < 0)
      TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", decl_->name,
                       "' has type `", p.type, "`, which a Python ", kind_name(s.kind),
                       " cannot be converted to; pass such a value through an extension.");
    if (s.kind == ArgKind::kFloat && is_integer(pr.code))
      TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", decl_->name,
                       "' is an integer (", dtype_name(pr.code), "); got a Python float.");
    if (s.kind == ArgKind::kComplex && !is_complex(pr.code))
      TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", decl_->name,
                       "' is ", dtype_name(pr.code), "; got a Python complex.");
    spec->slots.push_back(slot);
  }
  spec->buffer_size = offset;
  spec->writes_tensors = std::any_of(spec->slots.begin(), spec->slots.end(),
                                     [](const Specialization::Slot& s) { return s.written; });
  return spec;
}

std::vector<std::shared_ptr<Specialization>> Dispatcher::compile_many(const std::vector<SpecKey>& keys) {
  std::vector<std::shared_ptr<Specialization>> out(keys.size());
  std::vector<size_t> todo;
  std::vector<std::promise<std::shared_ptr<Specialization>>> promises;
  std::vector<std::shared_future<std::shared_ptr<Specialization>>> waits(keys.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = cache_.find(keys[i]);
      if (it != cache_.end()) {
        waits[i] = it->second;
        continue;
      }
      promises.emplace_back();
      auto fut = promises.back().get_future().share();
      cache_.emplace(keys[i], fut);
      waits[i] = fut;
      todo.push_back(i);
    }
  }
  if (!todo.empty()) {
    // Compile outside the lock: other keys stay launchable, equal keys wait on the future.
    try {
      std::vector<InstantiationRequest> requests;
      for (size_t i : todo) requests.push_back({decl_->name, keys[i], options_.template_args});
      // All keys of one batch share the architecture; group by it.
      CompileOptions opts = options_.compile;
      std::vector<std::shared_ptr<Specialization>> built(todo.size());
      std::vector<bool> done(todo.size(), false);
      for (size_t first = 0; first < todo.size(); ++first) {
        if (done[first]) continue;
        opts.arch = keys[todo[first]].arch;
        std::vector<size_t> group;
        std::vector<InstantiationRequest> group_requests;
        for (size_t j = first; j < todo.size(); ++j)
          if (!done[j] && keys[todo[j]].arch == opts.arch) {
            group.push_back(j);
            group_requests.push_back(requests[j]);
          }
        CacheOutcome outcome;
        std::shared_ptr<const CompiledProgram> compiled;
        try {
          compiled = options_.prebuilt ? options_.prebuilt
                                       : std::make_shared<const CompiledProgram>(compile_cached(
                                             *program_, group_requests, opts, options_.cache, &outcome));
        } catch (const CompileError&) {
          for (size_t j : group) {
            explain_address_failure(keys[todo[j]]);
            explain_complex_failure(keys[todo[j]], opts);
          }
          throw;
        }
        if (outcome == CacheOutcome::kHit) counters_.hits++;
        if (outcome == CacheOutcome::kMiss) counters_.misses++;
        for (size_t g = 0; g < group.size(); ++g) {
          // A prebuilt image holds the one kernel every key launches.
          built[group[g]] = build(keys[todo[group[g]]], compiled, options_.prebuilt ? 0 : g);
          done[group[g]] = true;
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = 0; j < todo.size(); ++j) {
        order_.push_back(built[j]);
        promises[j].set_value(built[j]);
      }
    } catch (...) {
      // Forget the failed keys so a later call compiles (and reports) again.
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = 0; j < todo.size(); ++j) {
        cache_.erase(keys[todo[j]]);
        promises[j].set_exception(std::current_exception());
      }
      throw;
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) out[i] = waits[i].get();
  return out;
}

void Dispatcher::explain_complex_failure(const SpecKey& key, const CompileOptions& opts) const {
  for (uint32_t i = 0; i < key.size; ++i) {
    if (key.args[i].kind != ArgKind::kComplex || decl_->params[i].kind != ParamKind::kScalar ||
        declared_[i].scalar != TypeCode::kUnknown)
      continue;
    SpecKey as_real = key;
    as_real.args[i].kind = ArgKind::kFloat;
    try {
      program_->compile({{decl_->name, as_real, options_.template_args}}, opts);
    } catch (const CompileError&) {
      continue;  // something else fails too: the compile error stands
    }
    fail_param(i, "cannot take a Python complex: for these arguments its type is a real one. "
                  "Pass a real number, or complex tensors so that it becomes complex.");
  }
}

void Dispatcher::explain_address_failure(const SpecKey& key) const {
  // Explicit template arguments may give the element type: the compile error stands then.
  if (!options_.template_args.empty()) return;
  const std::vector<std::string> template_names = decl_->template_param_names();
  for (uint32_t i = 0; i < key.size; ++i) {
    const Param& p = decl_->params[i];
    if (key.args[i].kind != ArgKind::kAddress || !p.element_dependent) continue;
    for (const std::string& name : identifiers_of(p.element)) {
      if (std::find(template_names.begin(), template_names.end(), name) == template_names.end())
        continue;
      // Another argument that is no address may deduce it.
      bool elsewhere = false;
      for (uint32_t j = 0; j < key.size && !elsewhere; ++j) {
        if (j == i || key.args[j].kind == ArgKind::kAddress) continue;
        for (const std::string& id : identifiers_of(decl_->params[j].type))
          elsewhere = elsewhere || id == name;
      }
      if (!elsewhere)
        fail_param(i, "got an address (None or a cj.DevicePointer), which has no element type, "
                      "and its template parameter '" + name + "' appears in no other "
                      "parameter, so nothing else can deduce it. Pass a tensor of the element "
                      "type (an empty one will do), or give '" + name +
                      "' with cj.jit(..., template_args=...).");
    }
  }
}

void Dispatcher::check_pointee(size_t i, const Specialization::Slot& slot, const ArgSig& sig,
                               const Arg& a, uintptr_t address) const {
  const uint32_t align = slot.pointee_align, size = slot.pointee_size;
  const Param& p = decl_->params[i];
  if (a.kind == ArgKind::kAddress) {
    if (align > 1 && address % align != 0)
      fail_value(i, "points to `" + p.element + "` (" + std::to_string(size) + " bytes, " +
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
  fail_value(i, "points to `" + p.element + "` and needs a tensor whose data is " +
                    std::to_string(align) + "-byte aligned and whose size is a multiple of " +
                    std::to_string(size) + " bytes; got a " + dtype_name(sig.dtype) +
                    " tensor of " + std::to_string(t.numel()) + " elements (" +
                    std::to_string(nbytes) + " bytes) whose data " +
                    (aligned ? "is " + std::to_string(align) + "-byte aligned"
                             : "starts " + std::to_string(address % align) + " bytes past a " +
                                   std::to_string(align) + "-byte boundary") +
                    ". " + fix);
}

void Dispatcher::check_pointees(const Specialization& spec, const Arg* args, size_t n) const {
  TORCH_INTERNAL_ASSERT(n == spec.slots.size(), "argument count changed after keying");
  for (size_t i = 0; i < n; ++i) {
    const Specialization::Slot& slot = spec.slots[i];
    if (slot.pointee_align == 0 && slot.pointee_size == 0) continue;
    // Compile-only arguments may be CPU or meta tensors: their own data pointer stands in.
    const uintptr_t address = args[i].kind == ArgKind::kAddress
                                  ? static_cast<uintptr_t>(args[i].u)
                                  : reinterpret_cast<uintptr_t>(args[i].tensor->data_ptr());
    check_pointee(i, slot, spec.key.args[i], args[i], address);
  }
}

CompiledProgram Dispatcher::compile_detached(const SpecKey& key, CacheOutcome* outcome) const {
  TORCH_CHECK_VALUE(!options_.prebuilt, "torch_cudajit: kernel '", decl_->name,
                    "' is prebuilt code (torch_cudajit.load); there is nothing to compile.");
  CompileOptions opts = options_.compile;
  opts.arch = key.arch;
  return compile_cached(*program_, {{decl_->name, key, options_.template_args}}, opts,
                        options_.cache, outcome);
}

std::shared_ptr<Specialization> Dispatcher::adopt(const SpecKey& key,
                                                  std::shared_ptr<const CompiledProgram> compiled,
                                                  CacheOutcome outcome) {
  TORCH_INTERNAL_ASSERT(compiled && compiled->lowered_names.size() == 1 &&
                            compiled->probes.size() == 1 &&
                            compiled->probes[0].size() == key.size,
                        "adopt: a compile of one instantiation with ", key.size, " parameters expected");
  if (outcome == CacheOutcome::kHit) counters_.hits++;
  if (outcome == CacheOutcome::kMiss) counters_.misses++;
  std::shared_ptr<Specialization> spec = build(key, compiled, 0);
  std::shared_future<std::shared_ptr<Specialization>> existing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      std::promise<std::shared_ptr<Specialization>> ready;
      ready.set_value(spec);
      cache_.emplace(key, ready.get_future().share());
      order_.push_back(spec);
      return spec;
    }
    existing = it->second;
  }
  // Compiled (or being compiled) here meanwhile: keep that one. Waiting outside the lock lets
  // the compiling thread finish.
  return existing.get();
}

std::shared_ptr<Specialization> Dispatcher::adopt_foreign(
    const SpecKey& key, std::shared_ptr<const CompiledProgram> compiled, const char* origin) {
  check_key(*decl_, key, origin);
  auto fail = [&](const std::string& what) {
    TORCH_CHECK_VALUE(false, "torch_cudajit: ", origin, " of kernel '", decl_->name, "' ", what,
                      "; it is damaged or belongs to another kernel.");
  };
  if (compiled->lowered_names.size() != 1 || compiled->probes.size() != 1 ||
      compiled->name_expressions.size() != 1 || compiled->probes[0].size() != key.size)
    fail("does not hold one instantiation with " + std::to_string(key.size) + " parameter(s)");
  if (compiled->has_cubin ? compiled->cubin.empty() : compiled->ptx.empty())
    fail("holds no " + std::string(compiled->has_cubin ? "CUBIN" : "PTX"));
  // sm_XX machine code must be for the key's architecture; compute_XX PTX for it or older.
  const std::string& t = compiled->target;
  const bool sm = t.rfind("sm_", 0) == 0, compute = t.rfind("compute_", 0) == 0;
  const int target_arch = sm ? std::atoi(t.c_str() + 3) : compute ? std::atoi(t.c_str() + 8) : 0;
  if (target_arch <= 0 || (sm && target_arch != key.arch) || (compute && target_arch > key.arch))
    fail("was compiled for '" + t + "', not for sm_" + std::to_string(key.arch));
  const std::string expected =
      program_->instantiations({{decl_->name, key, options_.template_args}})[0].kernel_expression;
  if (compiled->name_expressions[0] != expected)
    fail("instantiates '" + compiled->name_expressions[0] + "', but its key asks for '" +
         expected + "'");
  for (uint32_t i = 0; i < key.size; ++i) {
    const ParamProbe& pr = compiled->probes[0][i];
    const ArgSig& s = key.args[i];
    const ParamKind kind = decl_->params[i].kind;
    const bool array = s.kind == ArgKind::kTensor && (kind == ParamKind::kArray || kind == ParamKind::kAuto);
    const bool pow2 = pr.align != 0 && (pr.align & (pr.align - 1)) == 0;
    // A pointer's probe describes its pointee: 0 and 0 for void, else any size of whole
    // alignment units.
    const bool bad = kind == ParamKind::kPointer
                         ? (pr.size == 0) != (pr.align == 0) || (pr.size != 0 && (!pow2 || pr.size % pr.align != 0))
                         : (array && pr.size != (s.rank ? 8u + 16u * s.rank : 8u)) || !pow2 || pr.size > 4096;
    if (bad)
      fail("reports a size of " + std::to_string(pr.size) + " and alignment " +
           std::to_string(pr.align) + " for parameter '" + decl_->params[i].name + "'");
  }
  return adopt(key, std::move(compiled), CacheOutcome::kBypassed);
}

std::shared_ptr<Specialization> Dispatcher::get(const SpecKey& key) {
  if (auto hit = lookup(key)) return hit;
  return compile_many({key})[0];
}

std::vector<std::shared_ptr<Specialization>> Dispatcher::specializations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return order_;
}

std::pair<int, int64_t> Dispatcher::forall_config(Specialization& spec, int device) {
  DeviceScope scope(device);
  const auto [block, per_sm] = spec.loaded().forall_block(device);
  const int64_t wave = static_cast<int64_t>(device_limits(device).multiprocessors) * std::max(per_sm, 1);
  return {block, grid_strides_ ? wave : 0};
}

LaunchConfig Dispatcher::forall_launch(Specialization& spec, int device, LaunchConfig cfg) {
  const auto [block, wave] = forall_config(spec, device);
  int64_t grid = (cfg.forall_tasks - 1) / block + 1;  // no overflow near INT64_MAX
  if (wave > 0) grid = std::min(grid, wave);
  cfg.grid = {grid, 1, 1};
  cfg.block = {block, 1, 1};
  cfg.forall_tasks = 0;
  return cfg;
}

void Dispatcher::launch(Specialization& spec, const Arg* args, size_t n, int device,
                        const LaunchConfig& cfg) {
  TORCH_INTERNAL_ASSERT(n == spec.slots.size(), "argument count changed after keying");
  TORCH_INTERNAL_ASSERT(cfg.forall_tasks == 0, "a forall configuration reached launch(spec)");
  DeviceScope scope(device);

  LoadedKernel& kernel = spec.loaded();
  const KernelDeviceState& state = kernel.device_state(device);
  const DeviceLimits& lim = device_limits(device);
  const int64_t threads = cfg.block[0] * cfg.block[1] * cfg.block[2];
  for (int d = 0; d < 3; ++d) {
    TORCH_CHECK_VALUE(cfg.block[d] >= 1 && cfg.block[d] <= lim.max_block[d],
                      "torch_cudajit: block dimension ", "xyz"[d], " of kernel '", decl_->name,
                      "' is ", cfg.block[d], "; this device allows 1 to ", lim.max_block[d], ".");
    TORCH_CHECK_VALUE(cfg.grid[d] >= 1 && cfg.grid[d] <= lim.max_grid[d],
                      "torch_cudajit: grid dimension ", "xyz"[d], " of kernel '", decl_->name,
                      "' is ", cfg.grid[d], "; this device allows 1 to ", lim.max_grid[d],
                      ". Use more threads per block or a grid-stride loop.");
  }
  TORCH_CHECK_VALUE(threads <= state.max_threads_per_block, "torch_cudajit: block of kernel '",
                    decl_->name, "' has ", threads, " threads (", cfg.block[0], "x", cfg.block[1],
                    "x", cfg.block[2], "); this kernel allows at most ",
                    state.max_threads_per_block, " on this device.");
  if (cfg.shared_mem > state.dynamic_shared_limit) {
    const int64_t available = lim.max_shared_optin - state.static_shared;
    TORCH_CHECK_VALUE(cfg.shared_mem >= 0 && cfg.shared_mem <= available,
                      "torch_cudajit: kernel '", decl_->name, "' asks for ", cfg.shared_mem,
                      " bytes of dynamic shared memory; this device allows at most ", available,
                      " (", lim.max_shared_optin, " per block minus ", state.static_shared,
                      " static).");
    kernel.reserve_dynamic_shared(device, static_cast<int>(cfg.shared_mem));
  }
  TORCH_CHECK_VALUE(cfg.shared_mem >= 0, "torch_cudajit: shared memory size must be >= 0, got ",
                    cfg.shared_mem);

  const bool track_writes = spec.writes_tensors;
  if (track_writes && c10::GradMode::is_enabled()) {
    for (size_t i = 0; i < n; ++i)
      if (spec.slots[i].written)
        check_write_untracked(*args[i].tensor, decl_->name,
                              "parameter '" + decl_->params[i].name + "'");
  }

  // Pack the parameters. Small kernels (nearly all) use the stack.
  alignas(16) char small[1024];
  std::vector<char> large;
  char* buf = small;
  if (spec.buffer_size > sizeof(small)) {
    large.resize(spec.buffer_size + 16);
    buf = large.data();
  }
  void* ptrs[kMaxParams];
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
        std::memcpy(dst + 8, sizes, 8u * slot.rank);
        std::memcpy(dst + 8 + 8u * slot.rank, strides, 8u * slot.rank);
        break;
      }
      case PackOp::kPointer: {
        void* address = device_address(*a.tensor);
        if (slot.pointee_align != 0)
          check_pointee(i, slot, spec.key.args[i], a, reinterpret_cast<uintptr_t>(address));
        store(dst, address);
        break;
      }
      case PackOp::kAddress:
        if (slot.pointee_align != 0)
          check_pointee(i, slot, spec.key.args[i], a, static_cast<uintptr_t>(a.u));
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
          fail_value(i, "got a 0-d tensor whose value does not fit.");
        }
        break;
      }
      case PackOp::kInt:
      case PackOp::kBool:
        if (!store_integer(dst, slot.code, a.i, a.u, a.big_unsigned)) {
          std::string v = a.big_unsigned ? std::to_string(a.u) : std::to_string(a.i);
          fail_value(i, "is " + std::string(dtype_name(slot.code)) + " with range " +
                            range_of(slot.code) + "; the Python int " + v + " does not fit.");
        }
        break;
      case PackOp::kFloat: store_real(dst, slot.code, a.d, 0.0); break;
      case PackOp::kComplex: store_real(dst, slot.code, a.d, a.imag); break;
      case PackOp::kTag: break;  // an empty struct: its value is in its type
      case PackOp::kBytes:
        if (a.nbytes != slot.size)
          fail_param(i, "is " + std::to_string(slot.size) + " bytes; the extension gave " +
                            std::to_string(a.nbytes) + ".");
        std::memcpy(dst, a.bytes, a.nbytes);
        break;
    }
  }
  CUstream stream = cfg.has_stream ? cfg.stream : detail::current_cuda_stream(device);
  // Debug mode: clear the failure record on the launch's stream, so that a failure recorded
  // by an earlier launch (another stream, a graph replay) is never reported for this one.
  std::pair<CUdeviceptr, size_t> debug_record{0, 0};
  if (options_.compile.debug) {
    debug_record = kernel.library().global("cj_debug_record");
    if (debug_record.first != 0)
      CJ_CHECK(cuMemsetD8Async, debug_record.first, 0, debug_record.second, stream);
  }
  if (cooperative()) {
    // A grid-wide barrier needs every block resident at once: a larger grid would hang.
    TORCH_CHECK_VALUE(lim.cooperative_launch, "torch_cudajit: kernel '", decl_->name,
                      "' synchronizes the whole grid, but device ", device,
                      " does not support cooperative launches.");
    const int64_t blocks = cfg.grid[0] * cfg.grid[1] * cfg.grid[2];
    const int per_sm = kernel.max_active_blocks_per_sm(static_cast<int>(threads),
                                                       static_cast<size_t>(cfg.shared_mem));
    const int64_t max_blocks = int64_t(per_sm) * lim.multiprocessors;
    TORCH_CHECK_VALUE(blocks <= max_blocks, "torch_cudajit: kernel '", decl_->name,
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
  if (debug_record.first != 0) check_debug_record(debug_record.first, debug_record.second, stream);
}

Arg scalar_arg(const c10::Scalar& s) {
  Arg a;
  if (s.isBoolean()) {
    a.kind = ArgKind::kBool;
    a.i = s.toBool();
  } else if (s.isIntegral(/*includeBool=*/false)) {
    a.kind = ArgKind::kInt;
    a.i = s.toLong();
  } else if (s.isComplex()) {
    a.kind = ArgKind::kComplex;
    auto c = s.toComplexDouble();
    a.d = c.real();
    a.imag = c.imag();
  } else {
    a.kind = ArgKind::kFloat;
    a.d = s.toDouble();
  }
  return a;
}

void check_write_untracked(const at::Tensor& t, const std::string& kernel, const std::string& what) {
  TORCH_CHECK(!t.requires_grad(), "torch_cudajit: kernel '", kernel, "' writes ", what,
              ", a tensor that requires grad; kernels have no derivative, so autograd cannot "
              "track the write. Write into a tensor that does not require grad (torch.empty(...), "
              "or t.detach()), launch under torch.no_grad(), or wrap the launch in a "
              "torch.autograd.Function that defines backward.");
}

namespace {

// The device's CjDebugRecord (torch_cudajit/include/cj/cj.cuh), field for field.
struct DebugRecord {
  uint32_t kind;
  uint32_t line;
  uint32_t thread[3];
  uint32_t block[3];
  int32_t dim;
  int32_t rank;
  int64_t index;
  int64_t shape[8];
  char file[128];
  char message[256];
};
static_assert(sizeof(DebugRecord) == 496, "DebugRecord must match CjDebugRecord in cj.cuh");

}  // namespace

KernelAssertionError::KernelAssertionError(std::string message, std::string kernel_name,
                                           std::string file, int line,
                                           std::array<unsigned, 3> thread,
                                           std::array<unsigned, 3> block, bool bounds,
                                           int64_t index, int dim, std::vector<int64_t> shape)
    : c10::Error(std::move(message), /*backtrace=*/nullptr),
      kernel_name_(std::move(kernel_name)),
      file_(std::move(file)),
      line_(line),
      thread_(thread),
      block_(block),
      bounds_(bounds),
      index_(index),
      dim_(dim),
      shape_(std::move(shape)) {}

void Dispatcher::check_debug_record(CUdeviceptr ptr, size_t size, CUstream stream) {
  // Reading the record needs a synchronization, which a CUDA graph capture forbids.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CJ_CHECK(cuStreamIsCapturing, stream, &capture);
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return;
  TORCH_INTERNAL_ASSERT(size == sizeof(DebugRecord), "cj_debug_record is ", size,
                        " bytes; the host expects ", sizeof(DebugRecord));
  CJ_CHECK(cuStreamSynchronize, stream);
  DebugRecord r;
  CJ_CHECK(cuMemcpyDtoH, &r, ptr, sizeof(r));
  if (r.kind == 0) return;
  r.file[sizeof(r.file) - 1] = 0;
  r.message[sizeof(r.message) - 1] = 0;
  std::ostringstream where;
  where << r.file << ":" << r.line << " in thread (" << r.thread[0] << ", " << r.thread[1] << ", "
        << r.thread[2] << ") of block (" << r.block[0] << ", " << r.block[1] << ", " << r.block[2]
        << ")";
  std::ostringstream os;
  std::vector<int64_t> shape;
  if (r.kind == 1) {
    const int rank = std::max(0, std::min<int>(r.rank, 8));
    shape.assign(r.shape, r.shape + rank);
    os << "torch_cudajit: kernel '" << decl_->name << "' indexed out of bounds at " << where.str()
       << ": index " << r.index << " is outside dimension " << r.dim << " of size "
       << (r.dim >= 0 && r.dim < rank ? r.shape[r.dim] : -1) << " of an array of shape [";
    for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << r.shape[d];
    os << "]. The access was not performed; the CUDA context is still usable.";
  } else {
    std::string text(r.message);
    const size_t sep = text.find('\x1f');
    const std::string condition = sep == std::string::npos ? text : text.substr(0, sep);
    const std::string message = sep == std::string::npos ? "" : text.substr(sep + 1);
    os << "torch_cudajit: kernel '" << decl_->name << "' failed cj_assert(" << condition
       << ") at " << where.str() << ": " << message
       << ". The CUDA context is still usable.";
  }
  throw KernelAssertionError(os.str(), decl_->name, r.file, static_cast<int>(r.line),
                             {r.thread[0], r.thread[1], r.thread[2]},
                             {r.block[0], r.block[1], r.block[2]}, r.kind == 1, r.index, r.dim,
                             std::move(shape));
}

KernelResources Dispatcher::resources(Specialization& spec, int device) {
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

void Dispatcher::set_attribute(Specialization& spec, int device, CUfunction_attribute attr, int value) {
  DeviceScope scope(device);
  LoadedKernel& k = spec.loaded();
  const KernelDeviceState& state = k.device_state(device);
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    const DeviceLimits& lim = device_limits(device);
    const int available = lim.max_shared_optin - state.static_shared;
    TORCH_CHECK_VALUE(value <= available, "torch_cudajit: max_dynamic_shared_size_bytes of kernel '",
                      decl_->name, "' ", spec.signature, " may be at most ", available,
                      " on cuda:", device, " (", lim.max_shared_optin, " per block minus ",
                      state.static_shared, " static); got ", value, ".");
  }
  k.set_attribute(attr, value);
}

at::Tensor Dispatcher::global(const std::shared_ptr<Specialization>& spec, int device,
                              const std::string& name) {
  DeviceScope scope(device);
  LoadedKernel& k = spec->loaded();
  k.device_state(device);  // loads the module into this device's context
  const auto [address, size] = k.library().global(name.c_str());
  TORCH_CHECK_VALUE(address != 0, "torch_cudajit: the module of kernel '", decl_->name, "' ",
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

int64_t Dispatcher::max_cooperative_grid_blocks(Specialization& spec, int device, int threads,
                                                int64_t dynamic_shared) {
  TORCH_CHECK_VALUE(threads >= 1, "torch_cudajit: block must have at least 1 thread, got ", threads);
  TORCH_CHECK_VALUE(dynamic_shared >= 0, "torch_cudajit: dynamic_shared_mem must be >= 0, got ",
                    dynamic_shared);
  DeviceScope scope(device);
  LoadedKernel& k = spec.loaded();
  const KernelDeviceState& state = k.device_state(device);
  const DeviceLimits& lim = device_limits(device);
  TORCH_CHECK_VALUE(threads <= state.max_threads_per_block, "torch_cudajit: kernel '", decl_->name,
                    "' allows at most ", state.max_threads_per_block,
                    " threads per block on this device; got ", threads, ".");
  const int64_t available = lim.max_shared_optin - state.static_shared;
  TORCH_CHECK_VALUE(dynamic_shared <= available, "torch_cudajit: kernel '", decl_->name,
                    "' may use at most ", available, " bytes of dynamic shared memory (",
                    lim.max_shared_optin, " per block minus ", state.static_shared,
                    " static); got ", dynamic_shared, ".");
  if (dynamic_shared > state.dynamic_shared_limit)
    k.reserve_dynamic_shared(device, static_cast<int>(dynamic_shared));
  return int64_t(k.max_active_blocks_per_sm(threads, static_cast<size_t>(dynamic_shared))) *
         device_limits(device).multiprocessors;
}

void Dispatcher::launch(const Arg* args, size_t n, const LaunchConfig& cfg) {
  int device = 0;
  SpecKey key = make_key(args, n, &device);
  std::shared_ptr<Specialization> spec = get(key);
  TORCH_CHECK_VALUE(cfg.forall_tasks >= 0, "torch_cudajit: a forall launch of kernel '",
                    decl_->name, "' needs ntasks >= 1, got ", cfg.forall_tasks, ".");
  if (cfg.forall_tasks > 0) return launch(*spec, args, n, device, forall_launch(*spec, device, cfg));
  launch(*spec, args, n, device, cfg);
}

}  // namespace torch_cudajit
