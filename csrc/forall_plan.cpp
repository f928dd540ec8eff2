// torch_cudajit: forall's launch shape (see forall_plan.h).
#include "forall_plan.h"

#include "virtual_grid.h"

#include <algorithm>

namespace torch_cudajit {

const char* const kOverlapKeepsPlain =
    "a tensor the kernel may write overlaps another argument, or an argument's extent is "
    "unknown (a cj.DevicePointer, extension bytes, pinned host memory)";

int64_t ForallPlanner::tasks_per_thread(const SpecKey& key, int64_t tasks) const {
  if (loop_ != TaskLoop::kElementwise) return 1;
  size_t widest = 0, bytes_per_task = 0;
  for (uint32_t i = 0; i < key.size; ++i) {
    const ArgSig& a = key.args[i];
    if (a.kind != ArgKind::kTensor) continue;
    if ((a.flags & (kContiguousFlag | kAligned16Flag)) != (kContiguousFlag | kAligned16Flag)) return 1;
    widest = std::max(widest, type_size(a.dtype));
    bytes_per_task += type_size(a.dtype);
  }
  if (widest == 0 || widest >= cj::abi::kVectorBytes) return 1;
  const auto lanes = static_cast<int64_t>(cj::abi::kVectorBytes / widest);
  // tasks * bytes_per_task without overflow: every tensor holds at most INT64_MAX bytes.
  const bool streams = tasks > device_.l2_cache_bytes / static_cast<int64_t>(bytes_per_task);
  return streams ? lanes : kElementwiseVectors * lanes;
}

LaunchPlan ForallPlanner::plain(const SpecKey& key, const LaunchRequest& request, int block) const {
  TORCH_INTERNAL_ASSERT(request.forall_tasks > 0 && block > 0, "plain(): tasks ",
                        request.forall_tasks, ", block ", block);
  const int64_t per_thread = tasks_per_thread(key, request.forall_tasks);
  const int64_t threads = (request.forall_tasks - 1) / per_thread + 1;
  int64_t grid = (threads - 1) / block + 1;  // no overflow near INT64_MAX
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  if (loop_ != TaskLoop::kOnePerThread) grid = std::min(grid, kMaxGridX);
  // The request with the chosen grid and block: its shared memory and stream carry over.
  LaunchRequest chosen = request;
  chosen.forall_tasks = 0;
  chosen.grid = {grid, 1, 1};
  chosen.block = {block, 1, 1};
  return LaunchPlan::of(chosen);
}

const char* ForallPlanner::keeps_plain(const SpecKey& key, const LaunchRequest& request,
                                       const LaunchPlan& plain, int blocks_per_sm) const {
  if (request.shared_mem != 0) return "dynamic shared memory belongs to physical blocks";
  // Fewer physical blocks than the device holds at once would leave multiprocessors idle.
  const int64_t wave = int64_t(blocks_per_sm) * device_.multiprocessors;
  if (plain.grid[0] < virtual_blocks_for(key) * wave)
    return "the plain grid fills the GPU fewer times than a physical block would run virtual "
           "blocks";
  return "";
}

const char* ForallPlanner::place_virtual(const Specialization& v, const Arg* args,
                                         const LaunchRequest& request, LaunchPlan& plan) const {
  TORCH_INTERNAL_ASSERT(v.virtual_blocks > 0, "place_virtual() of a plain specialization");
  // The kernel sees a grid of `virtual_grid` blocks of kVirtualBlockThreads threads, which must
  // fit the unsigned int blockIdx.x it reads.
  const int64_t virtual_grid = virtual_grid_blocks(request.forall_tasks);
  if (virtual_grid > int64_t{0xffffffff})
    return "the virtual grid would have more blocks than blockIdx.x counts";
  plan.grid = {(virtual_grid - 1) / v.virtual_blocks + 1, 1, 1};
  plan.block = {kVirtualBlockThreads, 1, 1};
  plan.virtual_tasks = request.forall_tasks;
  plan.prefetch_mask = prefetch_mask(v, args, request.forall_tasks);
  plan.prefetch_ahead =
      plan.prefetch_mask != 0
          ? static_cast<uint32_t>(kPrefetchBlocksPerMultiprocessor * device_.multiprocessors)
          : 0;
  return "";
}

uint32_t ForallPlanner::prefetch_mask(const Specialization& v, const Arg* args,
                                      int64_t tasks) const {
  if (v.key.arch < 90) return 0;
  uint32_t mask = 0;
  for (size_t j = 0; j < v.companions.size() && j < size_t{kMaxPrefetched}; ++j) {
    const uint32_t i = v.companions[j];
    if (v.slots[i].written) continue;
    const at::Tensor& t = *args[i].tensor;
    if (t.element_size() <= 2 && t.numel() == tasks && t.is_contiguous()) mask |= 1u << j;
  }
  return mask;
}

bool writes_disjoint(const Specialization& spec, const Arg* args, size_t n) {
  detail::ByteRange ranges[kMaxParams];
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const Arg& a = args[i];
    // A cj.DevicePointer's extent is unknown, and an extension's bytes may hold pointers.
    if ((a.kind == ArgKind::kAddress && a.u != 0) || a.kind == ArgKind::kBytes) return false;
    const PackOp op = spec.slots[i].op;
    if (a.kind != ArgKind::kTensor || (op != PackOp::kArray && op != PackOp::kPointer)) continue;
    const at::Tensor& t = *a.tensor;
    // Pinned host memory is reached through another address: not worth a driver call here.
    if (!t.is_cuda()) return false;
    if (t.numel() == 0) continue;
    // The bytes the view spans: its last element is at sum((size - 1) * stride).
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
    ranges[count++] = {begin, begin + static_cast<uintptr_t>((last + 1) * t.element_size()),
                       spec.slots[i].written};
  }
  return detail::written_ranges_disjoint(ranges, count);
}

bool detail::written_ranges_disjoint(const ByteRange* ranges, size_t n) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if ((ranges[i].written || ranges[j].written) && ranges[i].begin < ranges[j].end &&
          ranges[j].begin < ranges[i].end)
        return false;
  return true;
}

}  // namespace torch_cudajit
