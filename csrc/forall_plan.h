// torch_cudajit: forall's launch shape. A forall launch names only its number of tasks; the
// planner chooses the grid and block (one thread per task, or per step of a cj::elementwise or
// cj::for_each loop) and decides whether the kernel runs on the virtual grid (virtual_grid.h).
// It decides from values alone (the kernel's task loop, the key, the device's limits, the
// occupancy the caller read), so its decision table is tested without a GPU.
#pragma once

#include "arg.h"
#include "launch_plan.h"
#include "module.h"
#include "specialization_table.h"

#include <cstdint>

namespace torch_cudajit {

/// What a forall launch runs: the specialization (the kernel, or its virtual-grid variant) and
/// its plan.
struct ForallPlan {
  Specialization* spec = nullptr;
  LaunchPlan launch;
  /// Why the kernel runs on a plain grid, for inspection: one of the planner's conditions, or
  /// "" when the variant itself is missing (SpecializationTable::virtual_grid_failure) or used.
  const char* plain_because = "";
};

/// forall's decisions for one kernel on one device.
class ForallPlanner {
 public:
  /// A planner for a kernel whose text covers tasks as `loop` says, on a device with `device`'s
  /// limits (multiprocessors, L2 size and compute capability are read).
  ForallPlanner(TaskLoop loop, const DeviceLimits& device) : loop_(loop), device_(device) {}

  /// The tasks one thread covers. A cj::elementwise kernel whose tensor arguments all take its
  /// vector loop (contiguous and 16-byte aligned) gets whole 16-byte vectors: one step of the
  /// loop (kElementwiseVectors each) while the bytes the launch moves fit in L2, where fewer
  /// threads with more loads in flight win; one vector each once they do not, where the finer
  /// blocks keep every multiprocessor streaming from memory to the end. Any other kernel: one.
  int64_t tasks_per_thread(const SpecKey& key, int64_t tasks) const;
  /// The plain grid of a forall over request.forall_tasks tasks with `block` threads per block
  /// (the occupancy API's choice, LoadedKernel::forall_block): enough threads for
  /// tasks_per_thread, capped at the most blocks CUDA allows for a grid-stride kernel.
  LaunchPlan plain(const SpecKey& key, const LaunchRequest& request, int block) const;
  /// Why the launch keeps the plain grid `plain`, whose blocks fit `blocks_per_sm` to a
  /// multiprocessor, whatever the arguments: dynamic shared memory (it belongs to physical
  /// blocks), or a grid that fills the device fewer times than a physical block would run
  /// virtual blocks. "" when the virtual grid may be used.
  const char* keeps_plain(const SpecKey& key, const LaunchRequest& request,
                          const LaunchPlan& plain, int blocks_per_sm) const;
  /// Places the forall on virtual-grid variant `v`: fills `plan` and returns "", or returns why
  /// the virtual grid cannot hold the tasks (more blocks than blockIdx.x counts).
  const char* place_virtual(const Specialization& v, const Arg* args,
                            const LaunchRequest& request, LaunchPlan& plan) const;
  /// The companions of virtual-grid specialization `v` whose data its wrapper prefetches for a
  /// forall over `tasks` tasks (bit j: v.companions[j]): tensors the kernel only reads, of 1- or
  /// 2-byte elements, contiguous, with one element per task; none below compute capability 9.0,
  /// which has no bulk prefetch.
  uint32_t prefetch_mask(const Specialization& v, const Arg* args, int64_t tasks) const;

 private:
  TaskLoop loop_;
  DeviceLimits device_;
};

/// True when no tensor the kernel may write (Slot::written) overlaps the memory of another
/// tensor argument and no argument is an address or extension bytes, whose extent is unknown:
/// then the virtual grid's __restrict__ pointers are true.
bool writes_disjoint(const Specialization& spec, const Arg* args, size_t n);

/// The message of a forall launch kept on the plain grid by writes_disjoint.
extern const char* const kOverlapKeepsPlain;

namespace detail {
/// The bytes an argument spans, and whether the kernel may write them.
struct ByteRange {
  uintptr_t begin, end;
  bool written;
};
/// True when no written range overlaps another range.
bool written_ranges_disjoint(const ByteRange* ranges, size_t n);
}  // namespace detail

}  // namespace torch_cudajit
