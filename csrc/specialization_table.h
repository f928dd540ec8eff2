// torch_cudajit: the specializations of one kernel definition. A Specialization is the kernel
// compiled for one key with how each parameter is packed; the table builds each key's once
// (even across threads), through the disk cache, or adopts a compile done elsewhere (a worker
// process, a pickle), and keeps the forall virtual-grid variant of a key beside it.
#pragma once

#include "cache.h"
#include "compile_cache.h"
#include "definition.h"
#include "module.h"

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch_cudajit {

/// How one parameter is filled at launch.
enum class PackOp : uint8_t {
  kArray, kPointer, kTensorScalar, kInt, kFloat, kBool, kComplex, kBytes,
  kAddress,  ///< an address (None, cj.DevicePointer) for a pointer parameter
  kTag,      ///< a tag (integral_constant): nothing to copy, the value is in the type
};

/// A kernel compiled for one key. Everything but the loaded module and the virtual-grid
/// variant is fixed when the table builds it.
struct Specialization {
  SpecKey key;
  std::string kernel_name;    ///< the kernel's name, for messages
  std::string signature;      ///< readable argument types
  std::shared_ptr<const CompiledProgram> compiled;
  std::string lowered_name;
  std::string name_expression;
  std::vector<ParamProbe> probes;
  struct Slot {
    PackOp op;
    TypeCode code;  ///< the parameter's resolved type (scalars)
    uint8_t rank;
    uint32_t offset;
    uint32_t size;
    bool written;  ///< a tensor bound to a non-const Array or pointer: the kernel may write it
    /// Pointer slots whose pointee asks more than the tensor's dtype gives (a float4* needs
    /// 16-byte aligned data whose size is a multiple of 16 bytes): the pointee's size and
    /// alignment, checked at every launch. 0 when there is nothing to check.
    uint32_t pointee_size = 0;
    uint32_t pointee_align = 0;
  };
  std::vector<Slot> slots;
  uint32_t buffer_size = 0;
  bool writes_tensors = false;  ///< some slot is written (skips the autograd bookkeeping loop)
  /// Prebuilt code: the declaration, not a compiler, gave the parameter list, so loading checks
  /// it against the image and reports a mismatch as the caller's error.
  bool prebuilt = false;
  /// > 0: the kernel on forall's virtual grid (virtual_grid.h), this many virtual blocks per
  /// physical block. The wrapper takes the kernel's parameters, then the data pointer of each
  /// slot in `companions` again (as __restrict__), then the virtual grid's size, the task
  /// count and the prefetch mask and distance (LaunchPlan); buffer_size covers them all, from
  /// `companion_offset` on.
  int virtual_blocks = 0;
  std::vector<uint32_t> companions;
  uint32_t companion_offset = 0;

  /// The loaded kernel (the first call loads it; thread-safe).
  LoadedKernel& loaded();

 private:
  friend class SpecializationTable;
  std::once_flag load_once_;
  std::shared_ptr<LoadedKernel> loaded_;
  // The virtual-grid variant of this key, looked for once by the first forall launch that
  // could use it (SpecializationTable::virtual_variant); null when there is none.
  std::once_flag virtual_once_;
  std::shared_ptr<Specialization> virtual_variant_;
  std::atomic<bool> virtual_looked_up_{false};
};

/// Runs work that may block for long on a launch path: the first forall launch of a key that
/// compiles its virtual-grid variant. The Python module installs a runner that releases the GIL
/// around it, as its own compiles do; without one (LibTorch programs) the work runs as it is.
using BlockingRunner = void (*)(const std::function<void()>& work);
void set_blocking_runner(BlockingRunner runner);

/// The specializations of one kernel definition, by key.
class SpecializationTable {
 public:
  /// The table of `definition`, which must outlive it.
  explicit SpecializationTable(const KernelDefinition& definition) : def_(definition) {}

  /// The specialization for a key, or nullptr when it has not been compiled.
  std::shared_ptr<Specialization> lookup(const SpecKey& key) const;
  /// The specialization for a key, compiling it (once, even across threads) if needed.
  std::shared_ptr<Specialization> get(const SpecKey& key);
  /// Compiles several keys, those of one architecture in one NVRTC invocation (keys already
  /// compiled are reused, keys in the disk cache loaded): precompile's batches.
  std::vector<std::shared_ptr<Specialization>> compile_many(const std::vector<SpecKey>& keys);
  /// Compiles the keys of several kernels defined on one source (a module's kernels) as one
  /// NVRTC program, through the disk cache: entries whose definitions share the Program, the
  /// compile options and the architecture compile together; keys already compiled are reused.
  /// An entry that cannot join a batch (a prebuilt kernel, another source), or a batch that
  /// fails, compiles alone, so that an error names its own kernel. Returns one specialization
  /// per entry, in order.
  static std::vector<std::shared_ptr<Specialization>> compile_together(
      const std::vector<std::pair<SpecializationTable*, SpecKey>>& entries);
  /// Compiles keys of one architecture together (through the disk cache, as compile_many
  /// does) without keeping the result: what a worker process of Kernel.precompile sends back
  /// to its parent.
  std::vector<CompiledInstance> compile_detached(const std::vector<SpecKey>& keys) const;
  /// Makes instantiation `index` of a compile done elsewhere (a worker process) the
  /// specialization of `key`; returns the existing one when the key is already compiled.
  /// `outcome` feeds the cache counters.
  std::shared_ptr<Specialization> adopt(const SpecKey& key,
                                        std::shared_ptr<const CompiledProgram> compiled,
                                        size_t index, CacheOutcome outcome);
  /// adopt() for a compile that crossed a trust boundary (a pickle, a TorchScript archive): the
  /// key, the compile's shape, its target and its name expression are checked against this
  /// kernel first. Throws ValueError naming `origin` and what does not match.
  std::shared_ptr<Specialization> adopt_foreign(const SpecKey& key,
                                                std::shared_ptr<const CompiledProgram> compiled,
                                                const char* origin);
  /// All compiled specializations, in compile order.
  std::vector<std::shared_ptr<Specialization>> specializations() const;

  /// The virtual-grid specialization of a key (compiled once, through the disk cache), or
  /// nullptr when the kernel's text cannot run on a virtual grid or the variant does not compile
  /// (virtual_grid_failure says why; forall then launches the plain kernel).
  std::shared_ptr<Specialization> get_virtual(const SpecKey& key);
  /// get_virtual(spec.key), remembered in `spec` so that later launches ask nothing that may
  /// block; the first call runs through the BlockingRunner.
  Specialization* virtual_variant(Specialization& spec);
  /// Why the virtual-grid variant of a key is not used: the definition's refusal, or the first
  /// error of its compile; "" when it compiled or was not tried yet.
  std::string virtual_grid_failure(const SpecKey& key) const;

  /// Disk-cache hits and misses of this kernel's compiles.
  const CacheCounters& cache_counters() const { return counters_; }

 private:
  /// The specialization of instantiation `index` of `compiled` for `key`: each parameter's slot
  /// from its resolved type.
  std::shared_ptr<Specialization> build(const SpecKey& key,
                                        const std::shared_ptr<const CompiledProgram>& compiled,
                                        size_t index) const;
  /// How parameter `i` is packed for an argument of signature `s` whose resolved type is `pr`,
  /// placed at the next aligned `offset` (advanced past it); refuses what the type cannot take.
  Specialization::Slot slot_for(uint32_t i, const ParamProbe& pr, const ArgSig& s,
                                uint32_t& offset) const;
  /// Compiles keys of one architecture together through the disk cache (or takes the prebuilt
  /// image); a compile error the arguments explain better becomes a TypeError.
  std::vector<CompiledInstance> compile_instances(const std::vector<SpecKey>& keys) const;
  /// After a failed compile: raises TypeError when a Python complex given for a scalar parameter
  /// of template type is what failed (the type resolved to a real one), and returns otherwise.
  void explain_complex_failure(const SpecKey& key, const CompileOptions& opts) const;
  /// After a failed compile: raises TypeError when an address (None, cj.DevicePointer) was
  /// given for a pointer whose element type only that argument could have decided.
  void explain_address_failure(const SpecKey& key) const;
  /// Adds a compile's outcome to the cache counters.
  void count(CacheOutcome outcome);

  const KernelDefinition& def_;
  using Entry = std::shared_future<std::shared_ptr<Specialization>>;
  mutable std::mutex mutex_;
  std::unordered_map<SpecKey, Entry, SpecKeyHash> table_;
  std::vector<std::shared_ptr<Specialization>> order_;
  /// Virtual-grid variants by key; a null specialization stands for one that failed to compile.
  std::unordered_map<SpecKey, Entry, SpecKeyHash> virtual_;
  std::unordered_map<SpecKey, std::string, SpecKeyHash> virtual_failures_;
  CacheCounters counters_;
};

}  // namespace torch_cudajit
