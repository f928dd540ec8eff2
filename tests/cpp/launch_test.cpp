// torch_cudajit C++ tests: what a launch checks without a GPU (csrc/launch.h): the pointee
// checks of raw pointer parameters, which a compile-only call runs too.
#include "launch.h"

#include "test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::make_runtime;

constexpr int kArch = 90;

TEST(LaunchTest, PointeeChecks) {
  auto d = make_runtime(R"(
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
  auto spec = d->table().get(d->key(good.data(), good.size(), nullptr, kArch));
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
  EXPECT_NO_THROW(check_pointees(d->decl(), *spec, good.data(), good.size()));

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
    SpecKey key = d->key(c.args.data(), c.args.size(), nullptr, kArch);
    ASSERT_TRUE(key == spec->key) << "size and alignment are no part of the key";
    std::string msg = expect_throws<c10::ValueError>(
        [&] { check_pointees(d->decl(), *spec, c.args.data(), c.args.size()); });
    CJ_EXPECT_CONTAINS(msg, c.message);
  }

  // A vector's lane dtype is checked when keying.
  at::Tensor halves = at::zeros({32}, at::kHalf);
  std::vector<Arg> wrong = args(halves, ints, aligned_address);
  std::string msg = expect_throws<c10::TypeError>(
      [&] { d->key(wrong.data(), wrong.size(), nullptr, kArch); });
  CJ_EXPECT_CONTAINS(msg, "parameter 'v' (float4*) of kernel 'k' points to float4, 4 lane(s) of "
                          "float32; got a tensor of dtype float16.");
}

}  // namespace
}  // namespace torch_cudajit
