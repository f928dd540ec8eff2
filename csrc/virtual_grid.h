// torch_cudajit: forall's virtual grid. A kernel written one task per thread (`i = blockIdx.x *
// blockDim.x + threadIdx.x; if (i < n) out[i] = f(x[i])`) keeps a few bytes per thread in flight,
// too few for HBM's bandwidth. For a forall launch, its text can be compiled a second time as a
// __device__ function whose `blockIdx` and `gridDim` are virtual, behind a generated __global__
// wrapper that runs K virtual blocks per physical block. The wrapper takes each tensor's data
// pointer again as a __restrict__ parameter, so that the compiler may issue the loads of all K
// virtual blocks before their stores; the launch uses it only when no written tensor overlaps
// another argument, which is what makes __restrict__ true. The kernel sees the grid it asked
// for: every virtual block runs once, with the blockIdx, gridDim, blockDim and threadIdx of a
// launch of that many blocks of kVirtualBlockThreads threads.
#pragma once

#include "cj/abi.h"
#include "program.h"
#include "reflection.h"
#include "specialization.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {

/// The block size of every virtual-grid launch, a compile-time constant in the variant
/// (cj::detail::kVirtualBlockThreads in cj/cj.cuh): a kernel's blockDim is then known to the
/// compiler, which folds the addresses of later virtual blocks into offsets of the first one's.
/// Any kernel can take it: a block of 256 threads fits every register budget.
using cj::abi::kVirtualBlockThreads;

/// The most virtual blocks a physical block runs. Each unrolled block's bounds check holds one of
/// the seven predicate registers of an NVIDIA GPU while its loads are in flight; beyond four,
/// ptxas runs out for kernels with a second condition and stores an early block's result before
/// the later blocks' loads, which then wait for it. Deeper unrolls measured no faster.
constexpr int kMaxVirtualBlocks = 4;

/// The virtual grid a forall over `tasks` tasks sees: blocks of kVirtualBlockThreads threads.
inline int64_t virtual_grid_blocks(int64_t tasks) { return (tasks - 1) / kVirtualBlockThreads + 1; }

/// How far ahead a physical block prefetches (prefetch_ahead in cj/cj.cuh), in physical blocks
/// per multiprocessor: half of what a multiprocessor holds at once (2048 threads, blocks of
/// kVirtualBlockThreads), so that the data arrives in L2 about half a wave before its loads.
constexpr int kPrefetchBlocksPerMultiprocessor = 4;

/// The most companions a wrapper prefetches: one bit each in its `cj_prefetch` mask.
constexpr int kMaxPrefetched = 32;

/// How many virtual blocks one physical block runs for a key: enough that a thread moving one
/// element of the narrowest tensor per virtual block has 16 bytes of it in flight, at least 2
/// (float64) and at most kMaxVirtualBlocks (float32 and narrower).
int virtual_blocks_for(const SpecKey& key);

/// Why kernel `kernel_name` of `program`, compiled with `options`, cannot run on a virtual
/// grid, or "" when it can. Refused: code whose meaning depends on the physical block (shared
/// memory and block barriers, which would mix virtual blocks; cooperative groups, clusters, PTX's
/// block registers, dynamic parallelism, PTX `exit`), module variables (`__device__`,
/// `__constant__`, `__managed__`: the variant's module would hold copies that kernel.get_global
/// does not reach), text the scan cannot read (headers from outside CUDA's and the plugin's
/// folders, pre-included files, linked files), debug mode, and kernels that loop over the grid
/// themselves (cj::for_each, cj::elementwise), which forall already launches for throughput.
/// Words in comments do not count; words in string literals do, since inline PTX is one (a false
/// refusal costs speed, never correctness). Cooperative
/// launches (forced, or detected from a grid sync) and prebuilt code are the definition's to
/// refuse (KernelDefinition::virtual_grid_refusal).
std::string virtual_grid_refusal(const Program& program, const std::string& kernel_name,
                                 const CompileOptions& options);

/// Whether parameter `p` bound to an argument of signature `s` gets a __restrict__ companion in
/// the wrapper: a tensor bound to a pointer, cj::Array or `auto` parameter.
bool virtual_grid_companion(const Param& p, const ArgSig& s);

/// The wrapper's name for an instantiation tag: its (extern "C") kernel expression.
std::string virtual_grid_name(const std::string& tag);

/// The generated __global__ wrapper of instantiation `inst` (of `decl` for `key`, named by
/// `tag`), running `blocks` virtual blocks per physical block. Its parameters are the kernel's,
/// then one __restrict__ pointer per companion (virtual_grid_companion), then the virtual
/// grid's size (unsigned int), the task count (unsigned long long), a mask of the companions
/// whose data thread 0 prefetches into L2 for a later block (bit j: the j-th companion, for the
/// first kMaxPrefetched) and that block's distance (both unsigned int).
std::string virtual_grid_wrapper(const KernelDecl& decl, const SpecKey& key,
                                 const Instantiation& inst, const std::string& tag, int blocks);

/// The wrapping (KernelWrapping) that compiles a kernel on a virtual grid of `blocks` virtual
/// blocks per physical block: CJ_VIRTUAL_GRID before cj/cj.cuh, kVirtualGridPrologue and
/// kVirtualGridEpilogue around the user's source, and virtual_grid_wrapper as each
/// instantiation's kernel. A request carrying it (InstantiationRequest::wrapping) compiles the
/// variant through Program::compile or compile_cached.
std::shared_ptr<const KernelWrapping> virtual_grid_wrapping(int blocks);

/// What a virtual-grid compile puts between cj/cj.cuh and the user's source (__global__ becomes
/// a forced-inline __device__, blockIdx and gridDim read the virtual grid, blockDim is the
/// constant kVirtualBlockThreads, launch bounds and __grid_constant__ are dropped), and what it
/// puts after (all but the last two undone).
extern const char* const kVirtualGridPrologue;
extern const char* const kVirtualGridEpilogue;

}  // namespace torch_cudajit
