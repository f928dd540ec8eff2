// torch_cudajit: the dispatcher. It binds arguments to a kernel's parameters, computes the
// specialization key, finds (or compiles once) the matching Specialization and launches it on
// the tensors' device and current stream. The hot path is: key, one lookup, pack, launch.
#pragma once

#include "cache.h"
#include "compile_cache.h"
#include "definition.h"
#include "module.h"
#include "program.h"
#include "specialization.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace torch_cudajit {

namespace detail {
/// torch's current CUDA device.
int current_cuda_device();
/// torch's current CUDA stream on a device (what torch.cuda.current_stream() returns there).
CUstream current_cuda_stream(int device);
}  // namespace detail


/// One launch argument, converted from Python or from an IValue.
struct Arg {
  ArgKind kind = ArgKind::kNone;
  const at::Tensor* tensor = nullptr;
  int64_t i = 0;            ///< kInt, kBool
  uint64_t u = 0;           ///< kInt values in [2^63, 2^64) (with big_unsigned)
  bool big_unsigned = false;
  double d = 0;             ///< kFloat; real part of kComplex
  double imag = 0;          ///< imaginary part of kComplex
  const void* bytes = nullptr;  ///< kBytes: raw parameter bytes from an extension
  size_t nbytes = 0;
  bool is_none = false;  ///< kAddress from Python's None (u == 0), for messages
  /// kFloat read from a 0-d floating-point CPU tensor (tensor_arg), for messages.
  const at::Tensor* host_scalar = nullptr;
};

/// Launch configuration: grid, block, dynamic shared memory and stream.
struct LaunchConfig {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t shared_mem = 0;
  bool has_stream = false;  ///< false: the current torch stream of the tensors' device
  CUstream stream = nullptr;
  /// When > 0, a forall launch over this many tasks (Dispatcher::forall_launch chooses the grid
  /// and block); grid and block above are ignored.
  int64_t forall_tasks = 0;
  /// A launch of a virtual-grid specialization (Specialization::virtual_blocks): the forall's
  /// tasks, whose virtual grid the kernel sees in blocks of kVirtualBlockThreads threads.
  int64_t virtual_tasks = 0;
  /// Which companions (bit j: Specialization::companions[j]) the wrapper prefetches into L2,
  /// and how many physical blocks ahead (virtual_grid.h: kPrefetchBlocksPerMultiprocessor).
  uint32_t prefetch_mask = 0;
  uint32_t prefetch_ahead = 0;
};

/// How one parameter is filled at launch.
enum class PackOp : uint8_t {
  kArray, kPointer, kTensorScalar, kInt, kFloat, kBool, kComplex, kBytes,
  kAddress,  ///< an address (None, cj.DevicePointer) for a pointer parameter
  kTag,      ///< a tag (integral_constant): nothing to copy, the value is in the type
};

/// A kernel compiled for one key.
struct Specialization {
  SpecKey key;
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
  /// count and the prefetch mask and distance (LaunchConfig); buffer_size covers them all, from
  /// `companion_offset` on.
  int virtual_blocks = 0;
  std::vector<uint32_t> companions;
  uint32_t companion_offset = 0;
  /// The virtual-grid variant of this key, looked for once by the first forall launch that
  /// could use it (Dispatcher::plan_forall); null when there is none.
  std::once_flag virtual_once;
  std::shared_ptr<Specialization> virtual_variant;
  /// Set once virtual_once has run: the launch path's cheap test before anything that may block.
  std::atomic<bool> virtual_looked_up{false};

  /// The loaded kernel (first launch loads it; thread-safe).
  LoadedKernel& loaded();

 private:
  std::once_flag load_once_;
  std::shared_ptr<LoadedKernel> loaded_;
};

/// A failed bounds check or cj_assert in a debug-mode launch (jit(..., debug=True)). The
/// message names the kernel, the source file and line, the thread and block and, for bounds,
/// the index, the dimension and the array's shape. The CUDA context stays usable.
class KernelAssertionError : public c10::Error {
 public:
  KernelAssertionError(std::string message, std::string kernel_name, std::string file, int line,
                       std::array<unsigned, 3> thread, std::array<unsigned, 3> block,
                       bool bounds, int64_t index, int dim, std::vector<int64_t> shape);
  const std::string& kernel_name() const { return kernel_name_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::array<unsigned, 3>& thread() const { return thread_; }
  const std::array<unsigned, 3>& block() const { return block_; }
  bool bounds() const { return bounds_; }
  int64_t index() const { return index_; }
  int dim() const { return dim_; }
  const std::vector<int64_t>& shape() const { return shape_; }

 private:
  std::string kernel_name_, file_;
  int line_;
  std::array<unsigned, 3> thread_, block_;
  bool bounds_;
  int64_t index_;
  int dim_;
  std::vector<int64_t> shape_;
};

/// Resource use of a compiled kernel on a device (numba's get_regs_per_thread & co.).
struct KernelResources {
  int regs_per_thread = 0;
  int shared_mem_per_block = 0;  ///< static shared memory, bytes
  int const_mem_size = 0;        ///< bytes
  int local_mem_per_thread = 0;  ///< bytes
  int max_threads_per_block = 0;
  int ptx_version = 0;     ///< PTX ISA version the kernel was compiled from, e.g. 90 for 9.0
  int binary_version = 0;  ///< architecture of the machine code, e.g. 90 for sm_90
  int max_dynamic_shared_size_bytes = 0;     ///< settable (set_attribute)
  int preferred_shared_memory_carveout = 0;  ///< percent of L1 for shared memory, -1: default
};

/// Compiles, caches and launches one __global__ function of a Program.
class Dispatcher {
 public:
  /// The dispatcher of a definition, which it shares with every other holder.
  explicit Dispatcher(std::shared_ptr<const KernelDefinition> definition);
  /// The dispatcher of a new definition of kernel `kernel_name` of `program`.
  Dispatcher(std::shared_ptr<const Program> program, const std::string& kernel_name,
             KernelOptions options);

  const KernelDefinition& definition() const { return *def_; }
  const std::shared_ptr<const KernelDefinition>& definition_ptr() const { return def_; }
  const KernelDecl& decl() const { return *decl_; }
  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& program_ptr() const { return def_->program_ptr(); }
  /// The definition's options, as compiles use them (KernelDefinition::options).
  const KernelOptions& options() const { return options_; }

  /// Checks the arguments against the parameters and returns their key. `device` receives
  /// the tensors' CUDA device (the current device when no tensor is given). With arch > 0
  /// the key is for that architecture and tensors may live anywhere (compile-only use).
  SpecKey make_key(const Arg* args, size_t n, int* device, int arch = 0) const;
  /// The specialization for a key, or nullptr when it has not been compiled.
  std::shared_ptr<Specialization> lookup(const SpecKey& key) const;
  /// The specialization for a key, compiling it (once, even across threads) if needed.
  std::shared_ptr<Specialization> get(const SpecKey& key);
  /// Compiles several keys, those of one architecture in one NVRTC invocation (keys already
  /// compiled are reused, keys in the disk cache loaded): precompile's batches.
  std::vector<std::shared_ptr<Specialization>> compile_many(const std::vector<SpecKey>& keys);
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
  /// Checks what a specialization's pointer parameters need of their arguments' addresses and
  /// sizes (vector and struct pointees); throws ValueError naming the parameter. launch() does
  /// this itself; compile() calls it so that a compile-only call reports the same errors.
  void check_pointees(const Specialization& spec, const Arg* args, size_t n) const;
  /// All compiled specializations, in compile order.
  std::vector<std::shared_ptr<Specialization>> specializations() const;

  /// Launches a specialization with arguments whose key equals spec.key.
  void launch(Specialization& spec, const Arg* args, size_t n, int device, const LaunchConfig& cfg);
  /// make_key + get + launch; resolves a forall configuration (cfg.forall_tasks).
  ///
  /// Every launch path (Python, the cudajit op, the C++ API) ends in launch(spec, ...), which
  /// keeps autograd's rules for written tensors (non-const parameters) in one place: a write
  /// into a tensor that requires grad is refused while grad mode is on, and each written
  /// tensor's version counter is bumped after the launch, as torch's in-place ops do (in
  /// inference mode too; inference tensors have no counter).
  void launch(const Arg* args, size_t n, const LaunchConfig& cfg);
  /// The grid and block of a forall launch of cfg.forall_tasks tasks (cfg with those filled in
  /// and forall_tasks 0). The block size comes from the occupancy API (256 threads where that
  /// keeps the occupancy). The grid gives each thread one task, except that a cj::elementwise
  /// kernel whose arrays are all contiguous and 16-byte aligned gets one thread per
  /// kElementwiseVectors 16-byte vectors (one step of its loop, as torch's own vectorized
  /// kernels do) while the bytes it moves fit in the device's L2, and one thread per vector
  /// beyond.
  /// A grid-stride kernel's grid is capped at the most blocks CUDA allows.
  /// `blocks_per_sm`, when given, receives how many such blocks a multiprocessor holds at once.
  LaunchConfig forall_launch(Specialization& spec, int device, LaunchConfig cfg,
                             int* blocks_per_sm = nullptr);
  /// What a forall launch of `spec` with these arguments runs: the specialization and its
  /// configuration.
  struct ForallPlan {
    Specialization* spec;
    LaunchConfig cfg;
    /// Why the kernel runs on a plain grid, for inspection: one of the launch's conditions, or
    /// "" when the variant itself is missing (virtual_grid_failure) or is used.
    const char* plain_because = "";
  };
  /// Plans a forall launch (cfg.forall_tasks tasks): the kernel on a virtual grid of
  /// virtual_blocks_for(key) virtual blocks per physical block when its text allows it
  /// (KernelDefinition::virtual_grid_refusal), the plain grid fills the device at least that
  /// many times over, no dynamic shared memory is asked for, and no tensor the kernel may write
  /// overlaps another argument (writes_disjoint); forall_launch's shape of `spec` otherwise.
  ForallPlan plan_forall(Specialization& spec, const Arg* args, size_t n, int device,
                         const LaunchConfig& cfg);
  /// plan_forall, then launch.
  void launch_forall(Specialization& spec, const Arg* args, size_t n, int device,
                     const LaunchConfig& cfg);
  /// The virtual-grid specialization of a key (compiled once, through the disk cache), or
  /// nullptr when the kernel's text cannot run on a virtual grid or the variant does not compile
  /// (virtual_grid_failure says why; forall then launches the plain kernel).
  std::shared_ptr<Specialization> get_virtual(const SpecKey& key);
  /// Why the virtual-grid variant of a key is not used: the definition's refusal, or the first
  /// error of its compile; "" when it compiled or was not tried yet.
  std::string virtual_grid_failure(const SpecKey& key) const;
  /// True when no tensor the kernel may write (Slot::written) overlaps the memory of another
  /// tensor argument and no argument is an address or extension bytes, whose extent is unknown:
  /// then the virtual grid's __restrict__ pointers are true.
  bool writes_disjoint(const Specialization& spec, const Arg* args, size_t n) const;
  /// True when the kernel's own text calls cj::for_each or cj::elementwise, which loop over the
  /// grid, so that any grid covers its work.
  bool grid_strides() const { return def_->grid_strides(); }
  /// Registers, memory and the thread limit of a specialization on a device.
  KernelResources resources(Specialization& spec, int device);
  /// Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES or _PREFERRED_SHARED_MEMORY_CARVEOUT
  /// of a specialization, loading it on `device` first; the value applies on every device
  /// the specialization is loaded on, now or later. Throws c10::ValueError when `device`
  /// cannot give that much dynamic shared memory.
  void set_attribute(Specialization& spec, int device, CUfunction_attribute attr, int value);
  /// A uint8 tensor aliasing the __device__ or __constant__ variable `name` of a
  /// specialization's module on `device` (loading it there). The tensor keeps the module
  /// loaded. Throws c10::ValueError when the module has no such variable.
  at::Tensor global(const std::shared_ptr<Specialization>& spec, int device, const std::string& name);
  /// The most blocks of `threads` threads (with `dynamic_shared` bytes each) that can be
  /// resident at once on a device: the largest grid a cooperative launch may use.
  int64_t max_cooperative_grid_blocks(Specialization& spec, int device, int threads,
                                      int64_t dynamic_shared);
  /// True for kernels with a grid-wide barrier, launched with cuLaunchCooperativeKernel.
  bool cooperative() const { return def_->cooperative(); }
  /// Disk-cache hits and misses of this kernel's compiles.
  const CacheCounters& cache_counters() const { return counters_; }

 private:
  std::shared_ptr<Specialization> build(const SpecKey& key,
                                        const std::shared_ptr<const CompiledProgram>& compiled,
                                        size_t index) const;
  /// The parameters a virtual-grid wrapper takes after the kernel's: the companions' data
  /// pointers (Specialization::companions), then the virtual grid's size (from cfg's task
  /// count), the task count, cfg's prefetch mask and distance.
  void pack_virtual(const Specialization& spec, size_t n, char* buf, void** ptrs,
                    const LaunchConfig& cfg) const;
  /// The companions of virtual-grid specialization `v` whose data its wrapper prefetches for a
  /// forall over `tasks` tasks (bit j: v.companions[j]): tensors the kernel only reads, of 1- or
  /// 2-byte elements, contiguous, with one element per task; none below compute capability 9.0,
  /// which has no bulk prefetch.
  uint32_t prefetch_mask(const Specialization& v, const Arg* args, int64_t tasks) const;
  /// How parameter `i` is packed for an argument of signature `s` whose resolved type is `pr`,
  /// placed at the next aligned `offset` (advanced past it); refuses what the type cannot take.
  Specialization::Slot slot_for(uint32_t i, const ParamProbe& pr, const ArgSig& s,
                                uint32_t& offset) const;
  /// make_key's reading of a tensor argument for parameter `i`: its signature in `s`, checked
  /// against the declaration; `dev`/`dev_param` track the device of the first CUDA tensor.
  void key_tensor(size_t i, const at::Tensor& t, int arch, ArgSig& s, int& dev,
                  size_t& dev_param) const;
  /// Where a tensor argument for parameter `i` may live: CUDA tensors all on one device
  /// (`dev`, first seen at `dev_param`), or pinned host memory for pointer and Array parameters;
  /// compile-only keys (arch > 0) take tensors anywhere.
  void key_device(size_t i, const at::Tensor& t, int arch, int& dev, size_t& dev_param) const;
  /// make_key's reading of a number, tag or extension bytes for parameter `i`.
  void key_value(size_t i, const Arg& a, ArgSig& s) const;
  /// Checks a launch configuration against the device and the kernel's limits, raising the
  /// dynamic shared memory limit when a launch asks for more (the launch's first step).
  void check_config(LoadedKernel& kernel, int device, const LaunchConfig& cfg);
  /// Packs the arguments into the parameter buffer `buf`, with a pointer to each parameter in
  /// `ptrs` (numbers converted to the declared types and range-checked, pointees checked).
  void pack(const Specialization& spec, const Arg* args, size_t n, char* buf, void** ptrs) const;
  /// A cuLaunchCooperativeKernel of a kernel with a grid-wide barrier, after checking that the
  /// whole grid can be resident at once.
  void launch_cooperative(LoadedKernel& kernel, int device, const LaunchConfig& cfg,
                          CUstream stream, void** ptrs);
  /// Debug mode: waits for the launch and raises KernelAssertionError for a failed check.
  void check_debug_record(CUdeviceptr record, size_t size, CUstream stream);
  [[noreturn]] void fail_param(size_t i, const std::string& what) const;  // TypeError
  /// Compiles keys of one architecture together through the disk cache (or takes the prebuilt
  /// image); a compile error the arguments explain better becomes a TypeError.
  std::vector<CompiledInstance> compile_instances(const std::vector<SpecKey>& keys) const;
  /// Adds a compile's outcome to this kernel's cache counters.
  void count(CacheOutcome outcome);
  /// After a failed compile: raises TypeError when a Python complex given for a scalar parameter
  /// of template type is what failed (the type resolved to a real one), and returns otherwise.
  void explain_complex_failure(const SpecKey& key, const CompileOptions& opts) const;
  [[noreturn]] void fail_value(size_t i, const std::string& what) const;  // ValueError
  /// After a failed compile: raises TypeError when an address (None, cj.DevicePointer) was
  /// given for a pointer whose element type only that argument could have decided.
  void explain_address_failure(const SpecKey& key) const;
  /// Checks one pointer argument's address and size against the slot's pointee.
  void check_pointee(size_t i, const Specialization::Slot& slot, const ArgSig& sig,
                     const Arg& arg, uintptr_t address) const;

  std::shared_ptr<const KernelDefinition> def_;
  // Views into def_, which outlives them.
  const Program* program_;
  const KernelDecl* decl_;
  const KernelOptions& options_;
  mutable std::mutex mutex_;
  std::unordered_map<SpecKey, std::shared_future<std::shared_ptr<Specialization>>, SpecKeyHash> cache_;
  std::vector<std::shared_ptr<Specialization>> order_;
  /// Virtual-grid variants by key; a null specialization stands for one that failed to compile.
  std::unordered_map<SpecKey, std::shared_future<std::shared_ptr<Specialization>>, SpecKeyHash> virtual_;
  std::unordered_map<SpecKey, std::string, SpecKeyHash> virtual_failures_;
  CacheCounters counters_;
};

/// Runs work that may block for long on a launch path: the first forall launch of a key that
/// compiles its virtual-grid variant. The Python module installs a runner that releases the GIL
/// around it, as its own compiles do; without one (LibTorch programs) the work runs as it is.
using BlockingRunner = void (*)(const std::function<void()>& work);
void set_blocking_runner(BlockingRunner runner);

/// The TypeCode of a torch dtype; throws c10::TypeError for dtypes kernels cannot take.
TypeCode type_code_of(c10::ScalarType dtype);

/// A launch argument holding a number (bool, integer, floating or complex).
Arg scalar_arg(const c10::Scalar& s);

/// A launch argument holding a tensor. A 0-d floating-point CPU tensor that is not pinned is
/// read as a float, as the op path reads it (a learning rate kept in a tensor), so eager
/// launches, the op and the C++ API agree; no kernel parameter takes such a tensor's memory.
Arg tensor_arg(const at::Tensor& t);

/// Refuses a kernel's write into `t` when autograd tracks it (requires grad, grad mode on):
/// kernels have no derivative. `what` names the tensor in the message ("parameter 'out'").
void check_write_untracked(const at::Tensor& t, const std::string& kernel, const std::string& what);

/// Bumps the version counter of a tensor a kernel wrote, as torch's in-place ops do, so that
/// autograd notices a saved tensor that was overwritten. Inference tensors have no counter.
inline void bump_written_version(const at::Tensor& t) {
  if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace torch_cudajit
