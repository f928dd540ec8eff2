// torch_cudajit C++ tests: binding a call's arguments (csrc/call_binder.h, csrc/arg.h): the
// key in compile-only mode (arch given, CPU tensors) and the argument errors it raises.
#include "call_binder.h"

#include "test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::float_arg;
using cjtest::int_arg;
using cjtest::make_runtime;
using cjtest::number_sig;
using cjtest::aligned_sig;

constexpr int kArch = 90;

const char* kMixed = R"(
__global__ void mixed(cj::Array<float, 2> out, cj::Array<const float, 2, cj::Contiguous> in,
                      cj::Array<const float, 1, cj::Strided> bias, const float* table,
                      float scale, int n, auto any) {}
)";

TEST(CallBinderTest, MakeKeyRecordsDtypeRankAndLayout) {
  auto d = make_runtime(kMixed, "mixed");
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
    SpecKey key = d->key(args.data(), args.size(), &device, kArch);
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

TEST(CallBinderTest, EqualArgumentsGiveEqualKeys) {
  auto d = make_runtime(kMixed, "mixed");
  at::Tensor a = at::zeros({4, 6}), b = at::ones({4, 6}), bias = at::zeros({6}),
             table = at::zeros({2}), any = at::zeros({1});
  std::vector<Arg> first = {tensor_arg(a), tensor_arg(b), tensor_arg(bias), tensor_arg(table),
                            float_arg(1.0), int_arg(1), tensor_arg(any)};
  at::Tensor a2 = at::rand({8, 3}), b2 = at::rand({5, 5}), bias2 = at::rand({9}),
             table2 = at::rand({7}), any2 = at::rand({100});
  std::vector<Arg> second = {tensor_arg(a2), tensor_arg(b2), tensor_arg(bias2), tensor_arg(table2),
                             float_arg(-3.5), int_arg(99), tensor_arg(any2)};
  SpecKey k1 = d->key(first.data(), first.size(), nullptr, kArch);
  SpecKey k2 = d->key(second.data(), second.size(), nullptr, kArch);
  EXPECT_TRUE(k1 == k2) << "shapes and values are not part of the key";
  EXPECT_EQ(k1.hash(), k2.hash());
  SpecKey k3 = d->key(first.data(), first.size(), nullptr, 80);
  EXPECT_FALSE(k1 == k3);
}

TEST(CallBinderTest, MakeKeyErrors) {
  auto d = make_runtime(R"(
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
         return std::vector<Arg>{null_pointer_arg(), tensor_arg(t[1]), int_arg(3), float_arg(1.0),
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
        expect_throws<c10::TypeError>([&] { d->key(args.data(), args.size(), nullptr, kArch); });
    for (const auto& part : c.message) CJ_EXPECT_CONTAINS(msg, part);
  }
}

// Without an architecture the key is for a device, and CPU tensors are refused.
TEST(CallBinderTest, LaunchKeyRefusesCpuTensors) {
  auto d = make_runtime("__global__ void k(float* x) {}", "k");
  at::Tensor x = at::zeros({4});
  Arg a = tensor_arg(x);
  std::string msg = expect_throws<c10::TypeError>([&] { d->key(&a, 1, nullptr, 0); });
  CJ_EXPECT_CONTAINS(msg, "got a tensor on cpu; kernels take CUDA tensors");
}

// A 0-d floating-point CPU tensor is a float, as on the op path; to a tensor parameter it is
// still a CPU tensor, refused with the pinning hint.
TEST(CallBinderTest, HostScalarTensorIsAFloat) {
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
    auto d = make_runtime(source, "k");
    Arg a = tensor_arg(lr);
    std::string msg = expect_throws<c10::TypeError>([&] { d->key(&a, 1, nullptr, 0); });
    CJ_EXPECT_CONTAINS(msg, "got a tensor on cpu; kernels take CUDA tensors");
    // Without a driver nothing launches, and nothing can be pinned: compiling is the advice.
    CJ_EXPECT_CONTAINS(msg, detail::driver_available() ? "pin it with .pin_memory()"
                                                       : "kernel.compile(..., arch=...)");
  }
}

TEST(CallBinderTest, AddressesKeyAsAddresses) {
  auto d = make_runtime(
      "template <class T>\n__global__ void k(T* out, const T* bias, T* only) {}", "k");
  at::Tensor out = at::zeros({4}, at::kHalf);
  Arg device_pointer;
  device_pointer.kind = ArgKind::kAddress;
  device_pointer.u = 1 << 20;
  std::vector<Arg> with_none = {tensor_arg(out), null_pointer_arg(), tensor_arg(out)};
  std::vector<Arg> with_pointer = {tensor_arg(out), device_pointer, tensor_arg(out)};
  SpecKey a = d->key(with_none.data(), with_none.size(), nullptr, kArch);
  SpecKey b = d->key(with_pointer.data(), with_pointer.size(), nullptr, kArch);
  EXPECT_EQ(a.args[1], number_sig(ArgKind::kAddress));
  EXPECT_TRUE(a == b) << "None and a DevicePointer share one specialization";
  auto spec = d->table().get(a);
  EXPECT_EQ(spec->signature, "(float16*, address, float16*)");
  EXPECT_EQ(spec->slots[1].op, PackOp::kAddress);
  EXPECT_FALSE(spec->slots[1].written);
  EXPECT_EQ(spec->slots[1].size, 8u);

  // When nothing else gives T, the compile error becomes a TypeError that says so.
  std::vector<Arg> only_none = {tensor_arg(out), tensor_arg(out), null_pointer_arg()};
  SpecKey fine = d->key(only_none.data(), only_none.size(), nullptr, kArch);
  EXPECT_NO_THROW(d->table().get(fine));
  auto lone = make_runtime("template <class T>\n__global__ void k(T* out, float s) {}", "k");
  std::vector<Arg> lone_args = {null_pointer_arg(), float_arg(1.0)};
  SpecKey lone_key = lone->key(lone_args.data(), lone_args.size(), nullptr, kArch);
  std::string msg = expect_throws<c10::TypeError>([&] { lone->table().get(lone_key); });
  CJ_EXPECT_CONTAINS(msg, "parameter 'out' (T*) of kernel 'k' got an address (None or a "
                          "cj.DevicePointer), which has no element type, and its template "
                          "parameter 'T' appears in no other parameter");
  EXPECT_TRUE(lone->table().specializations().empty());
}

TEST(CallBinderTest, ConstructorErrors) {
  std::string msg = expect_throws<c10::ValueError>(
      [] { make_runtime("__global__ void k(float* x) {}", "other"); });
  CJ_EXPECT_CONTAINS(msg, "no __global__ function named 'other'");

  std::string params;
  for (size_t i = 0; i <= kMaxParams; ++i) params += (i ? ", int p" : "int p") + std::to_string(i);
  std::string many = expect_throws<c10::ValueError>(
      [&] { make_runtime("__global__ void wide(" + params + ") {}", "wide"); });
  CJ_EXPECT_CONTAINS(many, "has 65 parameters; at most 64 are supported");
}

TEST(CallBinderTest, TypeCodeOfScalarTypes) {
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
