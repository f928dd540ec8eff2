// torch_cudajit C++ tests: the dispatcher's CPU-side work (csrc/dispatcher.h). make_key in
// compile-only mode (arch given, CPU tensors), the argument errors it raises, and the
// specialization cache: compile once, compile_many in one NVRTC call, concurrent get().
#include "dispatcher.h"

#include "reading.h"
#include "test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::bool_arg;
using cjtest::expect_throws;
using cjtest::float_arg;
using cjtest::int_arg;
using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::aligned_sig;
using cjtest::tensor_sig;

constexpr int kArch = 90;

Arg none_arg() {
  Arg a;
  a.kind = ArgKind::kAddress;
  a.is_none = true;
  return a;
}

std::shared_ptr<Dispatcher> make_dispatcher(const std::string& source, const std::string& name,
                                            KernelOptions options = {}) {
  return std::make_shared<Dispatcher>(read_program(source), name,
                                      std::move(options));
}

const char* kMixed = R"(
__global__ void mixed(cj::Array<float, 2> out, cj::Array<const float, 2, cj::Contiguous> in,
                      cj::Array<const float, 1, cj::Strided> bias, const float* table,
                      float scale, int n, auto any) {}
)";

TEST(DispatcherTest, MakeKeyRecordsDtypeRankAndLayout) {
  auto d = make_dispatcher(kMixed, "mixed");
  at::Tensor out = at::zeros({4, 6});
  at::Tensor in = at::zeros({4, 6});
  at::Tensor bias = at::zeros({6});
  at::Tensor table = at::zeros({16});
  at::Tensor any = at::zeros({3, 4, 5}, at::kDouble);

  struct Case {
    const char* title;
    at::Tensor out;  // the first argument varies
    at::Tensor any;  // and the last
    uint8_t out_flags, any_rank, any_flags;
    TypeCode any_dtype;
  };
  const std::vector<Case> cases = {
      {"all contiguous", out, any, kContiguousFlag, 3, kContiguousFlag, TypeCode::kDouble},
      {"transposed output", at::zeros({6, 4}).t(), any, 0, 3, kContiguousFlag, TypeCode::kDouble},
      {"sliced output", at::zeros({4, 12}).slice(1, 0, 12, 2), any, 0, 3, kContiguousFlag,
       TypeCode::kDouble},
      {"auto takes any rank and dtype", out, at::zeros({2, 3}, at::kInt).t(), kContiguousFlag, 2,
       0, TypeCode::kInt32},
      {"auto takes a 0-d tensor", out, at::scalar_tensor(1.0, at::kHalf), kContiguousFlag, 0,
       kContiguousFlag, TypeCode::kHalf},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    std::vector<Arg> args = {tensor_arg(c.out), tensor_arg(in), tensor_arg(bias),
                             tensor_arg(table), float_arg(2.0),  int_arg(7),
                             tensor_arg(c.any)};
    int device = 123;
    SpecKey key = d->make_key(args.data(), args.size(), &device, kArch);
    EXPECT_EQ(key.arch, kArch);
    ASSERT_EQ(key.size, 7u);
    EXPECT_EQ(key.args[0], aligned_sig(TypeCode::kFloat, 2, c.out_flags != 0));
    // Declared cj::Contiguous / cj::Strided layouts override what the tensor is.
    EXPECT_EQ(key.args[1], aligned_sig(TypeCode::kFloat, 2, true));
    EXPECT_EQ(key.args[2], aligned_sig(TypeCode::kFloat, 1, false));
    EXPECT_EQ(key.args[3].kind, ArgKind::kTensor);
    EXPECT_EQ(key.args[3].dtype, TypeCode::kFloat);
    EXPECT_EQ(key.args[4], number_sig(ArgKind::kFloat));
    EXPECT_EQ(key.args[5], number_sig(ArgKind::kInt));
    EXPECT_EQ(key.args[6], aligned_sig(c.any_dtype, c.any_rank, c.any_flags != 0));
    // Compile-only keys involve no CUDA device.
    EXPECT_EQ(device, -1);
  }
}

TEST(DispatcherTest, EqualArgumentsGiveEqualKeys) {
  auto d = make_dispatcher(kMixed, "mixed");
  at::Tensor a = at::zeros({4, 6}), b = at::ones({4, 6}), bias = at::zeros({6}),
             table = at::zeros({2}), any = at::zeros({1});
  std::vector<Arg> first = {tensor_arg(a), tensor_arg(b), tensor_arg(bias), tensor_arg(table),
                            float_arg(1.0), int_arg(1), tensor_arg(any)};
  at::Tensor a2 = at::rand({8, 3}), b2 = at::rand({5, 5}), bias2 = at::rand({9}),
             table2 = at::rand({7}), any2 = at::rand({100});
  std::vector<Arg> second = {tensor_arg(a2), tensor_arg(b2), tensor_arg(bias2), tensor_arg(table2),
                             float_arg(-3.5), int_arg(99), tensor_arg(any2)};
  SpecKey k1 = d->make_key(first.data(), first.size(), nullptr, kArch);
  SpecKey k2 = d->make_key(second.data(), second.size(), nullptr, kArch);
  EXPECT_TRUE(k1 == k2) << "shapes and values are not part of the key";
  EXPECT_EQ(k1.hash(), k2.hash());
  SpecKey k3 = d->make_key(first.data(), first.size(), nullptr, 80);
  EXPECT_FALSE(k1 == k3);
}

TEST(DispatcherTest, MakeKeyErrors) {
  auto d = make_dispatcher(R"(
__global__ void k(cj::Array<float, 2> y, const float* p, int n, float s,
                  cj::Array<float, 1, cj::Contiguous> c) {}
)", "k");
  struct Case {
    const char* title;
    std::vector<at::Tensor> keep;  // tensors the arguments point to
    std::function<std::vector<Arg>(const std::vector<at::Tensor>&)> args;
    std::vector<std::string> message;
  };
  auto good = [](const std::vector<at::Tensor>& t) {
    return std::vector<Arg>{tensor_arg(t[0]), tensor_arg(t[1]), int_arg(3), float_arg(1.0),
                            tensor_arg(t[2])};
  };
  const std::vector<at::Tensor> ok = {at::zeros({2, 3}), at::zeros({4}), at::zeros({5})};
  const std::vector<Case> cases = {
      {"too few arguments", ok,
       [](const std::vector<at::Tensor>& t) { return std::vector<Arg>{tensor_arg(t[0])}; },
       {"kernel 'k' takes 5 argument(s) (y, p, n, s, c), got 1."}},
      {"too many arguments", ok,
       [&](const std::vector<at::Tensor>& t) {
         auto a = good(t);
         a.push_back(int_arg(1));
         return a;
       },
       {"takes 5 argument(s)", "got 6"}},
      {"dtype mismatch on an Array", {at::zeros({2, 3}, at::kDouble), ok[1], ok[2]}, good,
       {"parameter 'y'", "takes float32 elements, got a tensor of dtype float64"}},
      {"dtype mismatch on a pointer", {ok[0], at::zeros({4}, at::kInt), ok[2]}, good,
       {"parameter 'p'", "takes float32 elements, got a tensor of dtype int32"}},
      {"rank mismatch", {at::zeros({6}), ok[1], ok[2]}, good,
       {"parameter 'y'", "takes a tensor of rank 2, got rank 1", "shape [6]"}},
      {"non-contiguous tensor to a pointer", {ok[0], at::zeros({8}).slice(0, 0, 8, 2), ok[2]}, good,
       {"parameter 'p'", "is a raw pointer and needs a contiguous tensor", ".contiguous()"}},
      {"non-contiguous tensor to cj::Contiguous", {ok[0], ok[1], at::zeros({10}).slice(0, 0, 10, 2)},
       good, {"parameter 'c'", "declared cj::Contiguous", ".contiguous()"}},
      {"number to an Array", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{float_arg(1.0), tensor_arg(t[1]), int_arg(3), float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'y'", "takes a tensor, got float"}},
      {"int to a pointer", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{tensor_arg(t[0]), int_arg(5), int_arg(3), float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'p'", "takes a tensor, got the Python int 5",
        "pass cj.DevicePointer(5), or None for a NULL pointer"}},
      {"float to a pointer", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{tensor_arg(t[0]), float_arg(5), int_arg(3), float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'p'", "takes a tensor, None (NULL) or a cj.DevicePointer, got float"}},
      {"None to an Array", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{none_arg(), tensor_arg(t[1]), int_arg(3), float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'y' (cj::Array<float, 2>)", "got None; only raw pointer parameters (T*, const T*) "
        "take None (as a NULL pointer). Pass a tensor."}},
      {"device pointer to a scalar", ok,
       [](const std::vector<at::Tensor>& t) {
         Arg address;
         address.kind = ArgKind::kAddress;
         address.u = 4096;
         return std::vector<Arg>{tensor_arg(t[0]), tensor_arg(t[1]), address, float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'n' (int)", "got a cj.DevicePointer; only raw pointer parameters", "Pass a number."}},
      {"Python float to an int parameter", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{tensor_arg(t[0]), tensor_arg(t[1]), float_arg(2.5),
                                 float_arg(1.0), tensor_arg(t[2])};
       },
       {"parameter 'n'", "cannot take a Python float"}},
      {"tensor with dims to a scalar", {ok[0], ok[1], ok[2], at::zeros({3})},
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{tensor_arg(t[0]), tensor_arg(t[1]), int_arg(3), tensor_arg(t[3]),
                                 tensor_arg(t[2])};
       },
       {"parameter 's'", "is a scalar and takes a number or a 0-d tensor"}},
      {"missing value", ok,
       [](const std::vector<at::Tensor>& t) {
         return std::vector<Arg>{tensor_arg(t[0]), tensor_arg(t[1]), Arg{}, float_arg(1.0),
                                 tensor_arg(t[2])};
       },
       {"parameter 'n'", "got no value"}},
      {"undefined tensor", {at::Tensor(), ok[1], ok[2]}, good,
       {"parameter 'y'", "got an undefined tensor"}},
      {"unsupported dtype", {at::zeros({2, 3}, at::kFloat8_e4m3fn), ok[1], ok[2]}, good,
       {"cannot be passed to kernels"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    std::vector<Arg> args = c.args(c.keep);
    std::string msg =
        expect_throws<c10::TypeError>([&] { d->make_key(args.data(), args.size(), nullptr, kArch); });
    for (const auto& part : c.message) CJ_EXPECT_CONTAINS(msg, part);
  }
}

// Without an architecture the key is for a device, and CPU tensors are refused.
TEST(DispatcherTest, LaunchKeyRefusesCpuTensors) {
  auto d = make_dispatcher("__global__ void k(float* x) {}", "k");
  at::Tensor x = at::zeros({4});
  Arg a = tensor_arg(x);
  std::string msg = expect_throws<c10::TypeError>([&] { d->make_key(&a, 1, nullptr, 0); });
  CJ_EXPECT_CONTAINS(msg, "got a tensor on cpu; kernels take CUDA tensors");
}

// A 0-d floating-point CPU tensor is a float, as on the op path; to a tensor parameter it is
// still a CPU tensor, refused with the pinning hint.
TEST(DispatcherTest, HostScalarTensorIsAFloat) {
  struct Case {
    const char* title;
    at::Tensor t;
    ArgKind kind;
  };
  const Case cases[] = {
      {"0-d float64", at::scalar_tensor(0.375, at::kDouble), ArgKind::kFloat},
      {"0-d float16", at::scalar_tensor(0.375, at::kHalf), ArgKind::kFloat},
      {"0-d int64", at::scalar_tensor(3, at::kLong), ArgKind::kTensor},
      {"1-d float", at::full({1}, 0.375), ArgKind::kTensor},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    Arg a = tensor_arg(c.t);
    EXPECT_EQ(a.kind, c.kind);
    if (c.kind == ArgKind::kFloat) EXPECT_EQ(a.d, 0.375);
  }
  at::Tensor lr = at::scalar_tensor(0.5, at::kDouble);
  for (const char* source : {"__global__ void k(float* x) {}", "__global__ void k(cj::Array<float, 1> x) {}"}) {
    SCOPED_TRACE(source);
    auto d = make_dispatcher(source, "k");
    Arg a = tensor_arg(lr);
    std::string msg = expect_throws<c10::TypeError>([&] { d->make_key(&a, 1, nullptr, 0); });
    CJ_EXPECT_CONTAINS(msg, "got a tensor on cpu; kernels take CUDA tensors");
    CJ_EXPECT_CONTAINS(msg, "pin it with .pin_memory()");
  }
}

TEST(DispatcherTest, AddressesKeyAsAddresses) {
  auto d = make_dispatcher(
      "template <class T>\n__global__ void k(T* out, const T* bias, T* only) {}", "k");
  at::Tensor out = at::zeros({4}, at::kHalf);
  Arg device_pointer;
  device_pointer.kind = ArgKind::kAddress;
  device_pointer.u = 1 << 20;
  std::vector<Arg> with_none = {tensor_arg(out), none_arg(), tensor_arg(out)};
  std::vector<Arg> with_pointer = {tensor_arg(out), device_pointer, tensor_arg(out)};
  SpecKey a = d->make_key(with_none.data(), with_none.size(), nullptr, kArch);
  SpecKey b = d->make_key(with_pointer.data(), with_pointer.size(), nullptr, kArch);
  EXPECT_EQ(a.args[1], number_sig(ArgKind::kAddress));
  EXPECT_TRUE(a == b) << "None and a DevicePointer share one specialization";
  auto spec = d->get(a);
  EXPECT_EQ(spec->signature, "(float16*, address, float16*)");
  EXPECT_EQ(spec->slots[1].op, PackOp::kAddress);
  EXPECT_FALSE(spec->slots[1].written);
  EXPECT_EQ(spec->slots[1].size, 8u);

  // When nothing else gives T, the compile error becomes a TypeError that says so.
  std::vector<Arg> only_none = {tensor_arg(out), tensor_arg(out), none_arg()};
  SpecKey fine = d->make_key(only_none.data(), only_none.size(), nullptr, kArch);
  EXPECT_NO_THROW(d->get(fine));
  auto lone = make_dispatcher("template <class T>\n__global__ void k(T* out, float s) {}", "k");
  std::vector<Arg> lone_args = {none_arg(), float_arg(1.0)};
  SpecKey lone_key = lone->make_key(lone_args.data(), lone_args.size(), nullptr, kArch);
  std::string msg = expect_throws<c10::TypeError>([&] { lone->get(lone_key); });
  CJ_EXPECT_CONTAINS(msg, "parameter 'out' (T*) of kernel 'k' got an address (None or a "
                          "cj.DevicePointer), which has no element type, and its template "
                          "parameter 'T' appears in no other parameter");
  EXPECT_TRUE(lone->specializations().empty());
}

// Vector and struct pointees: the dtype is checked when keying, the data's alignment and size
// after the compile (check_pointees, which launch() also runs).
TEST(DispatcherTest, PointeeChecks) {
  auto d = make_dispatcher(R"(
struct alignas(8) Pair { int a, b; };
__global__ void k(float4* v, const Pair* p, float* f, const float4* address) {}
)", "k");
  at::Tensor base = at::zeros({32});
  at::Tensor ints = at::zeros({16}, at::kInt);
  Arg aligned_address;
  aligned_address.kind = ArgKind::kAddress;
  aligned_address.u = 0x10000;
  auto args = [&](const at::Tensor& v, const at::Tensor& p, Arg address) {
    return std::vector<Arg>{tensor_arg(v), tensor_arg(p), tensor_arg(base), address};
  };
  std::vector<Arg> good = args(base, ints, aligned_address);
  auto spec = d->get(d->make_key(good.data(), good.size(), nullptr, kArch));
  EXPECT_EQ(spec->signature, "(float4*, const int32*, float32*, address)");
  struct SlotCase {
    const char* title;
    uint32_t size, align;
  };
  const std::vector<SlotCase> slots = {{"float4*", 16, 16}, {"const Pair*", 8, 8},
                                       {"float* needs nothing more", 0, 0},
                                       {"address to float4", 16, 16}};
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE(slots[i].title);
    EXPECT_EQ(spec->slots[i].pointee_size, slots[i].size);
    EXPECT_EQ(spec->slots[i].pointee_align, slots[i].align);
    EXPECT_EQ(spec->slots[i].size, 8u);
  }
  EXPECT_NO_THROW(d->check_pointees(*spec, good.data(), good.size()));

  Arg misaligned_address = aligned_address;
  misaligned_address.u += 8;
  // Arguments point to their tensors: each one lives as long as the cases.
  at::Tensor odd_ints = at::zeros({15}, at::kInt);
  at::Tensor short_base = base.slice(0, 0, 30), offset_base = base.slice(0, 2, 30);
  struct Case {
    const char* title;
    std::vector<Arg> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"size", args(short_base, ints, aligned_address),
       "parameter 'v' (float4*) of kernel 'k' points to `float4` and needs a tensor whose data is "
       "16-byte aligned and whose size is a multiple of 16 bytes; got a float32 tensor of 30 "
       "elements (120 bytes) whose data is 16-byte aligned."},
      {"alignment", args(offset_base, ints, aligned_address),
       "got a float32 tensor of 28 elements (112 bytes) whose data starts 8 bytes past a 16-byte "
       "boundary. Use a tensor of a multiple of 4 elements that starts at a multiple of 4 elements"},
      {"struct size", args(base, odd_ints, aligned_address),
       "parameter 'p' (const Pair*) of kernel 'k' points to `Pair` and needs a tensor whose data is "
       "8-byte aligned and whose size is a multiple of 8 bytes; got a int32 tensor of 15 elements"},
      {"address", args(base, ints, misaligned_address),
       "parameter 'address' (const float4*) of kernel 'k' points to `float4` (16 bytes, 16-byte "
       "aligned) and needs a 16-byte aligned address; got cj.DevicePointer(0x10008), 8 bytes past a "
       "16-byte boundary."},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    SpecKey key = d->make_key(c.args.data(), c.args.size(), nullptr, kArch);
    ASSERT_TRUE(key == spec->key) << "size and alignment are no part of the key";
    std::string msg = expect_throws<c10::ValueError>(
        [&] { d->check_pointees(*spec, c.args.data(), c.args.size()); });
    CJ_EXPECT_CONTAINS(msg, c.message);
  }

  // A vector's lane dtype is checked when keying.
  at::Tensor halves = at::zeros({32}, at::kHalf);
  std::vector<Arg> wrong = args(halves, ints, aligned_address);
  std::string msg = expect_throws<c10::TypeError>(
      [&] { d->make_key(wrong.data(), wrong.size(), nullptr, kArch); });
  CJ_EXPECT_CONTAINS(msg, "parameter 'v' (float4*) of kernel 'k' points to float4, 4 lane(s) of "
                          "float32; got a tensor of dtype float16.");
}

TEST(DispatcherTest, ConstructorErrors) {
  std::string msg = expect_throws<c10::ValueError>(
      [] { make_dispatcher("__global__ void k(float* x) {}", "other"); });
  CJ_EXPECT_CONTAINS(msg, "no __global__ function named 'other'");

  std::string params;
  for (size_t i = 0; i <= kMaxParams; ++i) params += (i ? ", int p" : "int p") + std::to_string(i);
  std::string many = expect_throws<c10::ValueError>(
      [&] { make_dispatcher("__global__ void wide(" + params + ") {}", "wide"); });
  CJ_EXPECT_CONTAINS(many, "has 65 parameters; at most 64 are supported");
}

const char* kSaxpy = R"(
__global__ void saxpy(cj::Array<float, 1> y, cj::Array<const float, 1> x, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < y.size(0)) y[i] = a * x[i] + y[i];
}
)";

SpecKey saxpy_key(bool contiguous = true, int arch = kArch) {
  return make_spec_key(arch, {tensor_sig(TypeCode::kFloat, 1, contiguous),
                              tensor_sig(TypeCode::kFloat, 1, contiguous),
                              number_sig(ArgKind::kFloat)});
}

TEST(DispatcherTest, GetCompilesOnce) {
  auto d = make_dispatcher(kSaxpy, "saxpy");
  SpecKey key = saxpy_key();
  EXPECT_EQ(d->lookup(key), nullptr);
  EXPECT_TRUE(d->specializations().empty());
  std::shared_ptr<Specialization> first = d->get(key);
  ASSERT_NE(first, nullptr);
  std::shared_ptr<Specialization> second = d->get(key);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(d->lookup(key).get(), first.get());
  ASSERT_EQ(d->specializations().size(), 1u);
  EXPECT_EQ(d->specializations()[0].get(), first.get());

  // What the specialization knows.
  EXPECT_TRUE(first->key == key);
  // (saxpy_key's tensors stand for unaligned data with 64-bit offsets; signatures name that.)
  EXPECT_EQ(first->signature, "(Array<float32, 1, contiguous, unaligned, 64-bit index>, "
                              "Array<const float32, 1, contiguous, unaligned, 64-bit index>, float)");
  EXPECT_EQ(first->compiled->target, "sm_90");
  EXPECT_EQ(first->lowered_name, first->compiled->lowered_names[0]);
  ASSERT_EQ(first->slots.size(), 3u);
  struct SlotCase {
    PackOp op;
    TypeCode code;
    uint32_t offset, size;
  };
  const std::vector<SlotCase> slots = {{PackOp::kArray, TypeCode::kArray, 0, 24},
                                       {PackOp::kArray, TypeCode::kArray, 24, 24},
                                       {PackOp::kFloat, TypeCode::kFloat, 48, 4}};
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE("slot " + std::to_string(i));
    EXPECT_EQ(first->slots[i].op, slots[i].op);
    EXPECT_EQ(static_cast<int>(first->slots[i].code), static_cast<int>(slots[i].code));
    EXPECT_EQ(first->slots[i].offset, slots[i].offset);
    EXPECT_EQ(first->slots[i].size, slots[i].size);
  }
  EXPECT_EQ(first->buffer_size, 52u);

  // Another key is another specialization.
  std::shared_ptr<Specialization> strided = d->get(saxpy_key(false));
  EXPECT_NE(strided.get(), first.get());
  EXPECT_EQ(d->specializations().size(), 2u);
}

TEST(DispatcherTest, SlotsFollowParameterAlignment) {
  auto d = make_dispatcher(
      "__global__ void k(bool f, double d, const int* p, char c, cj::Array<float, 2> a, float s) {}",
      "k");
  at::Tensor p = at::zeros({3}, at::kInt);
  at::Tensor a = at::zeros({2, 2});
  at::Tensor s = at::scalar_tensor(5, at::kInt);  // a 0-d float CPU tensor would be a float
  std::vector<Arg> args = {bool_arg(true), float_arg(1.0), tensor_arg(p), int_arg(7),
                           tensor_arg(a), tensor_arg(s)};
  auto spec = d->get(d->make_key(args.data(), args.size(), nullptr, kArch));
  struct SlotCase {
    const char* title;
    PackOp op;
    uint32_t offset, size;
  };
  const std::vector<SlotCase> want = {
      {"bool", PackOp::kBool, 0, 1},          {"double", PackOp::kFloat, 8, 8},
      {"const int*", PackOp::kPointer, 16, 8}, {"char", PackOp::kInt, 24, 1},
      {"Array<float, 2>", PackOp::kArray, 32, 40}, {"0-d int tensor to float", PackOp::kTensorScalar, 72, 4},
  };
  ASSERT_EQ(spec->slots.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].title);
    EXPECT_EQ(spec->slots[i].op, want[i].op);
    EXPECT_EQ(spec->slots[i].offset, want[i].offset);
    EXPECT_EQ(spec->slots[i].size, want[i].size);
  }
  EXPECT_EQ(spec->buffer_size, 76u);
}

// Without the disk cache: keys it holds would load from there instead of compiling together.
KernelOptions without_disk_cache() {
  KernelOptions o;
  o.cache = false;
  return o;
}

TEST(DispatcherTest, CompileManyUsesOneNvrtcCall) {
  auto d = make_dispatcher(R"(
template <class T>
__global__ void scale(cj::Array<T, 1> y, T a) { y[0] = a * y[0]; }
)", "scale", without_disk_cache());
  std::vector<SpecKey> keys;
  const std::vector<std::pair<TypeCode, ArgKind>> types = {{TypeCode::kFloat, ArgKind::kFloat},
                                                           {TypeCode::kDouble, ArgKind::kFloat},
                                                           {TypeCode::kInt32, ArgKind::kInt}};
  for (const auto& t : types)
    for (bool contiguous : {true, false})
      keys.push_back(make_spec_key(kArch, {tensor_sig(t.first, 1, contiguous), number_sig(t.second)}));
  // Pre-compile one key: compile_many reuses it.
  std::shared_ptr<Specialization> early = d->get(keys[0]);
  std::vector<std::shared_ptr<Specialization>> specs = d->compile_many(keys);
  ASSERT_EQ(specs.size(), keys.size());
  EXPECT_EQ(specs[0].get(), early.get());
  for (size_t i = 1; i < specs.size(); ++i) {
    SCOPED_TRACE("key " + std::to_string(i));
    EXPECT_TRUE(specs[i]->key == keys[i]);
    // All new keys came out of one CompiledProgram, each under its own name.
    EXPECT_EQ(specs[i]->compiled.get(), specs[1]->compiled.get());
    EXPECT_EQ(specs[i]->compiled->lowered_names.size(), keys.size() - 1);
    for (size_t j = 1; j < i; ++j) EXPECT_NE(specs[i]->lowered_name, specs[j]->lowered_name);
  }
  EXPECT_NE(specs[0]->compiled.get(), specs[1]->compiled.get());
  EXPECT_EQ(d->specializations().size(), keys.size());
  // Asking again compiles nothing.
  std::vector<std::shared_ptr<Specialization>> again = d->compile_many(keys);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(again[i].get(), specs[i].get());
  EXPECT_EQ(d->specializations().size(), keys.size());
}

TEST(DispatcherTest, CompileManyGroupsByArchitecture) {
  auto d = make_dispatcher(kSaxpy, "saxpy", without_disk_cache());
  std::vector<SpecKey> keys = {saxpy_key(true, 90), saxpy_key(true, 80), saxpy_key(false, 90),
                               saxpy_key(true, 90)};
  auto specs = d->compile_many(keys);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0]->compiled->target, "sm_90");
  EXPECT_EQ(specs[1]->compiled->target, "sm_80");
  EXPECT_EQ(specs[0]->compiled.get(), specs[2]->compiled.get());
  EXPECT_NE(specs[0]->compiled.get(), specs[1]->compiled.get());
  EXPECT_EQ(specs[3].get(), specs[0].get()) << "a key repeated in one batch compiles once";
  EXPECT_EQ(d->specializations().size(), 3u);
}

TEST(DispatcherTest, ConcurrentGetCompilesOnce) {
  auto d = make_dispatcher(kSaxpy, "saxpy");
  const SpecKey key = saxpy_key();
  constexpr int kThreads = 2;
  std::atomic<int> ready{0};
  std::vector<std::shared_ptr<Specialization>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      try {
        got[t] = d->get(key);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_EQ(errors[t], "");
    ASSERT_NE(got[t], nullptr);
    EXPECT_EQ(got[t].get(), got[0].get());
  }
  EXPECT_EQ(d->specializations().size(), 1u);
}

// A failed compile is not cached: the next get() compiles (and fails) again, and other keys
// of the same dispatcher still work.
TEST(DispatcherTest, FailedCompileIsNotCached) {
  auto d = make_dispatcher(R"(
template <class T>
__global__ void k(cj::Array<T, 1> y) {
  static_assert(sizeof(T) == 4, "k needs 4-byte elements");
  y[0] = T(0);
}
)", "k");
  SpecKey bad = make_spec_key(kArch, {tensor_sig(TypeCode::kDouble, 1)});
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    std::string msg = expect_throws<CompileError>([&] { d->get(bad); });
    CJ_EXPECT_CONTAINS(msg, "k needs 4-byte elements");
    EXPECT_EQ(d->lookup(bad), nullptr);
  }
  EXPECT_TRUE(d->specializations().empty());
  SpecKey good = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
  EXPECT_NE(d->get(good), nullptr);
  EXPECT_EQ(d->specializations().size(), 1u);
}

// Errors found only once the compiler has resolved the parameter types.
TEST(DispatcherTest, ResolvedTypeErrors) {
  struct Case {
    const char* title;
    std::string source;
    SpecKey key;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"Python float to a deduced integer",
       "template <class T> __global__ void k(cj::Array<T, 1> y, T a) {}",
       make_spec_key(kArch, {tensor_sig(TypeCode::kInt32, 1), number_sig(ArgKind::kFloat)}),
       "is an integer (int32); got a Python float"},
      {"Python int to a struct",
       "struct Pair { int a, b; __device__ Pair(long long v) : a(v), b(v) {} };\n"
       "__global__ void k(cj::Array<float, 1> y, Pair p) {}",
       make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kInt)}),
       "which a Python int cannot be converted to"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto d = make_dispatcher(c.source, "k");
    std::string msg = expect_throws<c10::TypeError>([&] { d->get(c.key); });
    CJ_EXPECT_CONTAINS(msg, c.message);
    EXPECT_TRUE(d->specializations().empty());
  }
}

TEST(DispatcherTest, OptionsReachTheCompiler) {
  KernelOptions options;
  options.compile.extra = {"-DFACTOR=2"};
  options.compile.arch = 50;  // ignored: the key's architecture decides
  auto d = make_dispatcher("__global__ void k(float* y) { y[0] *= FACTOR; }", "k", options);
  at::Tensor y = at::zeros({1});
  Arg a = tensor_arg(y);
  auto spec = d->get(d->make_key(&a, 1, nullptr, kArch));
  EXPECT_EQ(spec->compiled->target, "sm_90");
  const auto& opts = spec->compiled->options;
  EXPECT_NE(std::find(opts.begin(), opts.end(), "-DFACTOR=2"), opts.end());
}

TEST(DispatcherTest, TypeCodeOfScalarTypes) {
  const std::vector<std::pair<c10::ScalarType, TypeCode>> cases = {
      {at::kBool, TypeCode::kBool},        {at::kChar, TypeCode::kInt8},
      {at::kByte, TypeCode::kUInt8},       {at::kShort, TypeCode::kInt16},
      {at::kInt, TypeCode::kInt32},        {at::kLong, TypeCode::kInt64},
      {at::kHalf, TypeCode::kHalf},        {at::kBFloat16, TypeCode::kBFloat16},
      {at::kFloat, TypeCode::kFloat},      {at::kDouble, TypeCode::kDouble},
      {at::kComplexFloat, TypeCode::kComplexFloat},
      {at::kComplexDouble, TypeCode::kComplexDouble},
      {at::kUInt16, TypeCode::kUInt16},    {at::kUInt32, TypeCode::kUInt32},
      {at::kUInt64, TypeCode::kUInt64},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c10::toString(c.first));
    EXPECT_EQ(static_cast<int>(type_code_of(c.first)), static_cast<int>(c.second));
  }
  for (c10::ScalarType bad : {at::kComplexHalf, at::kQInt8, at::kFloat8_e4m3fn}) {
    SCOPED_TRACE(c10::toString(bad));
    expect_throws<c10::TypeError>([&] { type_code_of(bad); });
  }
}

}  // namespace
}  // namespace torch_cudajit
