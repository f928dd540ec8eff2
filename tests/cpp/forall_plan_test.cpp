// torch_cudajit C++ tests: forall's decisions (csrc/forall_plan.h) from values alone, on the
// limits of an H200-like device and of a small one: the tasks per thread of each task loop,
// the plain grid, when the virtual grid is refused, its plan and what it prefetches.
#include "forall_plan.h"

#include "test_util.h"
#include "virtual_grid.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::aligned_sig;
using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::tensor_sig;

DeviceLimits device(int multiprocessors, int64_t l2_bytes, int compute_capability = 90) {
  DeviceLimits d;
  d.compute_capability = compute_capability;
  d.multiprocessors = multiprocessors;
  d.l2_cache_bytes = l2_bytes;
  return d;
}

const DeviceLimits kH200 = device(132, 60 << 20);

LaunchRequest forall(int64_t tasks, int64_t shared_mem = 0) {
  LaunchRequest r;
  r.forall_tasks = tasks;
  r.shared_mem = shared_mem;
  return r;
}

TEST(ForallPlanTest, TasksPerThread) {
  const SpecKey f32 = make_spec_key(90, {aligned_sig(TypeCode::kFloat, 1), aligned_sig(TypeCode::kFloat, 1)});
  const SpecKey f64 = make_spec_key(90, {aligned_sig(TypeCode::kDouble, 1), aligned_sig(TypeCode::kDouble, 1)});
  const SpecKey mixed = make_spec_key(90, {aligned_sig(TypeCode::kHalf, 1), aligned_sig(TypeCode::kFloat, 1)});
  const SpecKey unaligned = make_spec_key(90, {aligned_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kFloat, 1)});
  const SpecKey strided = make_spec_key(90, {aligned_sig(TypeCode::kFloat, 2, /*contiguous=*/false)});
  const SpecKey numbers = make_spec_key(90, {number_sig(ArgKind::kFloat)});
  const SpecKey complex128 = make_spec_key(90, {aligned_sig(TypeCode::kComplexDouble, 1)});
  // 8 bytes per task: 60 MiB of L2 holds 7864320 tasks.
  const int64_t in_l2 = 1 << 20, streams = int64_t{1} << 26;
  struct Case {
    const char* name;
    TaskLoop loop;
    const SpecKey& key;
    int64_t tasks;
    int64_t expected;
  } cases[] = {
      {"one per thread", TaskLoop::kOnePerThread, f32, in_l2, 1},
      {"for_each", TaskLoop::kForEach, f32, in_l2, 1},
      {"elementwise f32 in L2: a whole step", TaskLoop::kElementwise, f32, in_l2, 4 * kElementwiseVectors},
      {"elementwise f32 streaming: one vector", TaskLoop::kElementwise, f32, streams, 4},
      {"elementwise f64 in L2", TaskLoop::kElementwise, f64, in_l2, 2 * kElementwiseVectors},
      {"elementwise mixed: the widest sets the lanes", TaskLoop::kElementwise, mixed, in_l2, 4 * kElementwiseVectors},
      {"elementwise with an unaligned tensor", TaskLoop::kElementwise, unaligned, in_l2, 1},
      {"elementwise with a strided tensor", TaskLoop::kElementwise, strided, in_l2, 1},
      {"elementwise without tensors", TaskLoop::kElementwise, numbers, in_l2, 1},
      {"elementwise of 16-byte elements", TaskLoop::kElementwise, complex128, in_l2, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ForallPlanner(c.loop, kH200).tasks_per_thread(c.key, c.tasks), c.expected);
  }
}

TEST(ForallPlanTest, PlainGrid) {
  const SpecKey f32 = make_spec_key(90, {aligned_sig(TypeCode::kFloat, 1)});
  const int64_t huge = int64_t{1} << 42;
  struct Case {
    const char* name;
    TaskLoop loop;
    int64_t tasks;
    int block;
    int64_t grid;
  } cases[] = {
      {"one task", TaskLoop::kOnePerThread, 1, 256, 1},
      {"a partial block", TaskLoop::kOnePerThread, 1000, 256, 4},
      {"exact blocks", TaskLoop::kOnePerThread, 1024, 256, 4},
      {"a huge grid is not capped without a loop", TaskLoop::kOnePerThread, huge, 256, huge / 256},
      {"a grid-stride kernel is capped", TaskLoop::kForEach, huge, 256, (int64_t{1} << 31) - 1},
      {"elementwise threads cover 16 tasks", TaskLoop::kElementwise, 4096, 128, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LaunchRequest request = forall(c.tasks, 64);
    request.has_stream = true;
    request.stream = reinterpret_cast<CUstream>(uintptr_t{0x1234});
    const LaunchPlan plan = ForallPlanner(c.loop, kH200).plain(f32, request, c.block);
    EXPECT_EQ(plan.grid, (std::array<int64_t, 3>{c.grid, 1, 1}));
    EXPECT_EQ(plan.block, (std::array<int64_t, 3>{c.block, 1, 1}));
    // The request's shared memory and stream carry over; no virtual grid.
    EXPECT_EQ(plan.shared_mem, 64);
    EXPECT_TRUE(plan.has_stream);
    EXPECT_EQ(plan.stream, request.stream);
    EXPECT_EQ(plan.virtual_tasks, 0);
    EXPECT_EQ(plan.prefetch_mask, 0u);
  }
}

TEST(ForallPlanTest, KeepsPlain) {
  const SpecKey f32 = make_spec_key(90, {aligned_sig(TypeCode::kFloat, 1)});  // 4 virtual blocks
  const SpecKey f64 = make_spec_key(90, {aligned_sig(TypeCode::kDouble, 1)});  // 2 virtual blocks
  const ForallPlanner planner(TaskLoop::kOnePerThread, kH200);
  // 8 blocks of 256 threads fit a multiprocessor: a wave is 8 x 132 = 1056 blocks.
  struct Case {
    const char* name;
    const SpecKey& key;
    int64_t tasks;
    int64_t shared_mem;
    const char* because;  // "" when the virtual grid may be used
  } cases[] = {
      {"dynamic shared memory", f32, int64_t{1} << 30, 16, "dynamic shared memory"},
      {"less than four waves of f32", f32, 4 * 1056 * 256 - 256, 0, "fills the GPU fewer times"},
      {"four waves of f32", f32, 4 * 1056 * 256, 0, ""},
      {"two waves of f64", f64, 2 * 1056 * 256, 0, ""},
      {"less than two waves of f64", f64, 2 * 1056 * 256 - 256, 0, "fills the GPU fewer times"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const LaunchRequest request = forall(c.tasks, c.shared_mem);
    const LaunchPlan plain = planner.plain(c.key, request, 256);
    const std::string because = planner.keeps_plain(c.key, request, plain, 8);
    if (*c.because == '\0')
      EXPECT_EQ(because, "");
    else
      CJ_EXPECT_CONTAINS(because, c.because);
  }
}

// A virtual-grid variant of (const at::Half* in, float* out, const at::Half* other): companions
// 0, 1 and 2; `out` is written.
std::shared_ptr<Specialization> variant(int arch) {
  auto made = std::make_shared<Specialization>();
  Specialization& v = *made;
  v.key = make_spec_key(arch, {aligned_sig(TypeCode::kHalf, 1), aligned_sig(TypeCode::kFloat, 1),
                               aligned_sig(TypeCode::kHalf, 1)});
  v.virtual_blocks = 4;
  v.companions = {0, 1, 2};
  for (bool written : {false, true, false}) {
    Specialization::Slot slot{};
    slot.op = PackOp::kPointer;
    slot.written = written;
    v.slots.push_back(slot);
  }
  return made;
}

TEST(ForallPlanTest, PlaceVirtual) {
  const int64_t tasks = 1 << 20;
  at::Tensor in = at::randn({tasks}).to(at::kHalf), out = at::randn({tasks});
  at::Tensor shorter = at::randn({tasks / 2}).to(at::kHalf);
  at::Tensor strided = at::randn({tasks, 2}).to(at::kHalf).select(1, 0);
  struct Case {
    const char* name;
    int arch;
    const at::Tensor& other;
    uint32_t mask;
  } cases[] = {
      // `out` is written, and 4-byte elements are not prefetched either way.
      {"both read-only half tensors", 90, in, 0b101u},
      {"one element per task only", 90, shorter, 0b001u},
      {"contiguous only", 90, strided, 0b001u},
      {"no bulk prefetch before sm_90", 80, in, 0u},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto held = variant(c.arch);
    const Specialization& v = *held;
    const Arg args[] = {tensor_arg(in), tensor_arg(out), tensor_arg(c.other)};
    const ForallPlanner planner(TaskLoop::kOnePerThread, kH200);
    LaunchPlan plan = planner.plain(v.key, forall(tasks), 512);
    EXPECT_STREQ(planner.place_virtual(v, args, forall(tasks), plan), "");
    // 4096 virtual blocks of 256 threads, 4 to a physical block.
    EXPECT_EQ(plan.grid, (std::array<int64_t, 3>{1024, 1, 1}));
    EXPECT_EQ(plan.block, (std::array<int64_t, 3>{kVirtualBlockThreads, 1, 1}));
    EXPECT_EQ(plan.virtual_tasks, tasks);
    EXPECT_EQ(plan.prefetch_mask, c.mask);
    EXPECT_EQ(plan.prefetch_ahead,
              c.mask ? uint32_t(kPrefetchBlocksPerMultiprocessor * kH200.multiprocessors) : 0u);
  }
  // More virtual blocks than blockIdx.x counts: the plan is left as it was.
  const auto v = variant(90);
  const Arg args[] = {tensor_arg(in), tensor_arg(out), tensor_arg(in)};
  const ForallPlanner planner(TaskLoop::kOnePerThread, kH200);
  const LaunchRequest too_many = forall(int64_t{0x100000000} * kVirtualBlockThreads);
  LaunchPlan plan = planner.plain(v->key, too_many, 256);
  const LaunchPlan before = plan;
  CJ_EXPECT_CONTAINS(std::string(planner.place_virtual(*v, args, too_many, plan)), "blockIdx.x");
  EXPECT_EQ(plan.grid, before.grid);
  EXPECT_EQ(plan.virtual_tasks, 0);
}

TEST(ForallPlanTest, WrittenRangesDisjoint) {
  using detail::ByteRange;
  struct Case {
    const char* name;
    std::vector<ByteRange> ranges;
    bool disjoint;
  } cases[] = {
      {"none", {}, true},
      {"apart", {{0, 100, true}, {100, 200, false}}, true},
      {"overlapping, both read", {{0, 100, false}, {50, 150, false}}, true},
      {"overlapping, one written", {{0, 100, false}, {50, 150, true}}, false},
      {"one inside another written", {{0, 400, true}, {100, 200, false}}, false},
      {"the same range written twice", {{0, 8, true}, {0, 8, true}}, false},
      {"third overlaps the first", {{0, 10, true}, {20, 30, false}, {5, 6, false}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(detail::written_ranges_disjoint(c.ranges.data(), c.ranges.size()), c.disjoint);
  }
}

TEST(ForallPlanTest, UnknownExtentsAreNotDisjoint) {
  const auto held = variant(90);
  const Specialization& v = *held;
  at::Tensor a = at::randn({16}).to(at::kHalf), b = at::randn({16});
  Arg address;
  address.kind = ArgKind::kAddress;
  address.u = 0x10000;
  Arg bytes;
  bytes.kind = ArgKind::kBytes;
  // Host memory (reached through another address), a cj.DevicePointer, extension bytes.
  const Arg host[] = {tensor_arg(a), tensor_arg(b), tensor_arg(a)};
  const Arg with_address[] = {address, tensor_arg(b), tensor_arg(a)};
  const Arg with_bytes[] = {bytes, tensor_arg(b), tensor_arg(a)};
  EXPECT_FALSE(writes_disjoint(v, host, 3));
  EXPECT_FALSE(writes_disjoint(v, with_address, 3));
  EXPECT_FALSE(writes_disjoint(v, with_bytes, 3));
}

}  // namespace
}  // namespace torch_cudajit
