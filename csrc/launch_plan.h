// torch_cudajit: what a caller asks of a launch (LaunchRequest) and what is launched
// (LaunchPlan). A request names a grid and block, or a number of tasks for forall to cover; a
// plan is always a concrete grid and block, plus the virtual grid's parameters when forall runs
// the kernel on one (forall_plan.h).
#pragma once

#include <cuda.h>

#include <c10/util/ArrayRef.h>

#include <array>
#include <cstdint>
#include <string>

namespace torch_cudajit {

/// A launch as the caller asks for it: grid, block, dynamic shared memory and stream, or a
/// forall over `forall_tasks` tasks whose grid and block the plugin chooses.
struct LaunchRequest {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t shared_mem = 0;
  bool has_stream = false;  ///< false: the current torch stream of the tensors' device
  CUstream stream = nullptr;
  /// When > 0, a forall launch over this many tasks: grid and block above are ignored.
  int64_t forall_tasks = 0;
};

/// A launch as it is issued: a concrete grid and block (forall resolved), and for a kernel on
/// forall's virtual grid (virtual_grid.h) the parameters its wrapper takes after the kernel's.
struct LaunchPlan {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t shared_mem = 0;
  bool has_stream = false;
  CUstream stream = nullptr;
  /// > 0 for a virtual-grid specialization: the forall's tasks, whose virtual grid the kernel
  /// sees in blocks of kVirtualBlockThreads threads.
  int64_t virtual_tasks = 0;
  /// Which companions (bit j: Specialization::companions[j]) the wrapper prefetches into L2,
  /// and how many physical blocks ahead (virtual_grid.h: kPrefetchBlocksPerMultiprocessor).
  uint32_t prefetch_mask = 0;
  uint32_t prefetch_ahead = 0;

  /// The plan of a request that names its grid and block (forall_tasks == 0).
  static LaunchPlan of(const LaunchRequest& request);
};

/// A grid or block given as 1 to 3 extents, as three (missing ones are 1). The one parser of
/// grid and block lists: throws c10::ValueError naming `what` ("grid", "block") and `kernel`
/// for an empty list or more than 3 entries. The device's limits are checked at launch.
std::array<int64_t, 3> launch_dims(c10::IntArrayRef extents, const char* what,
                                   const std::string& kernel);

}  // namespace torch_cudajit
