// torch_cudajit: the NVRTC stage. A Program is a reflected, layout-rewritten source; compiling
// it for a set of instantiations and one architecture gives a CompiledProgram (PTX and CUBIN,
// lowered names, parameter probes). Failures raise CompileError with everything needed to fix
// the kernel. A Program is built from a source and its reflection; reading a source through the
// front end and the disk cache is the reading layer's (reading.h: read_program).
#pragma once

#include "cj/abi.h"
#include "headers.h"
#include "reflection.h"
#include "specialization.h"

#include <nvrtc.h>

#include <c10/util/Exception.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {

/// A kernel source failed to compile. Carries the kernel name, the architecture, the NVRTC
/// options, the compiler log and the numbered source that was compiled. Its message shows the
/// lines of the source around the errors the log reports in `filename` (a short source whole).
class CompileError : public c10::Error {
 public:
  CompileError(std::string kernel_name, std::string arch, std::vector<std::string> options,
               std::string log, const std::string& source, const std::string& filename,
               std::string hint);
  const std::string& kernel_name() const { return kernel_name_; }
  const std::string& arch() const { return arch_; }
  const std::vector<std::string>& options() const { return options_; }
  const std::string& log() const { return log_; }
  const std::string& numbered_source() const { return numbered_source_; }
  /// The lines the message puts before the NVRTC options (what to check, which header is
  /// missing); empty when there is nothing to add to the log.
  const std::string& hint() const { return hint_; }

 private:
  std::string kernel_name_, arch_;
  std::vector<std::string> options_;
  std::string log_, numbered_source_, hint_;
};

/// Options of one NVRTC compile.
struct CompileOptions {
  int arch = 0;  ///< compute capability, e.g. 90
  /// User options (-D..., -I..., --use_fast_math, ...), appended after the plugin's own.
  std::vector<std::string> extra;
  std::string std = "c++17";
  bool debug = false;     ///< -G and bounds-checked cj::Array
  bool lineinfo = false;  ///< -lineinfo
  /// Files linked into the kernel with nvJitLink (.cu, .ptx, .cubin, .fatbin, .ltoir, .o, .a).
  /// Non-empty: the kernel compiles to LTO-IR and is linked with link-time optimization.
  std::vector<std::string> link;
};

/// A caller's wrapping of a kernel in a compile (forall's virtual grid: virtual_grid.h): text the
/// compile puts around the user's source, and per instantiation a generated __global__ function
/// that NVRTC is asked for in the kernel's place. The requests of one compile share one
/// wrapping's text, or none has a wrapping: the user's source is compiled once for all of them.
struct KernelWrapping {
  std::string macros;    ///< lines before cj/cj.cuh is included
  std::string prologue;  ///< lines between cj/cj.cuh and the user's source
  std::string epilogue;  ///< lines after the user's source
  /// The text of the wrapper of `inst` (the instantiation of `decl` for `key`, named by `tag`:
  /// instantiation_tag), appended after every instantiation's alias; it sets
  /// `inst.kernel_expression` to the wrapper's name.
  std::function<std::string(const KernelDecl& decl, const SpecKey& key, const std::string& tag,
                            Instantiation& inst)>
      wrap;
};

/// One kernel instantiation asked of a compile.
struct InstantiationRequest {
  std::string kernel;         ///< kernel name
  SpecKey key;                ///< argument types (key.arch is ignored; CompileOptions::arch rules)
  std::string template_args;  ///< explicit template arguments, "" to deduce all
  /// The kernel compiled inside a wrapper (KernelWrapping); null for the kernel itself. Its
  /// kernel expression is then the wrapper's.
  std::shared_ptr<const KernelWrapping> wrapping;
};

/// The arguments of one NVRTC compile, built once (Program::nvrtc_arguments).
struct NvrtcArguments {
  std::string target;                ///< "sm_90", or "compute_90" when only PTX can be produced
  std::vector<std::string> options;  ///< the full option list, "-arch=<target>" first
};

/// The stage between a Program and its CompiledProgram: the full text handed to NVRTC for some
/// requests and the instantiation (name expressions, probes) of each request, built once and
/// read by both the disk cache's key and the compile.
struct GeneratedSource {
  std::vector<InstantiationRequest> requests;
  std::vector<Instantiation> instantiations;  ///< one per request
  std::string text;
};

/// The result of compiling a Program for some instantiations.
struct CompiledProgram {
  std::string target;       ///< "sm_90", or "compute_90" when only PTX could be produced
  bool has_cubin = false;
  std::string ptx;
  std::string cubin;
  std::string log;          ///< NVRTC's log (warnings)
  std::vector<std::string> options;    ///< the full option list given to NVRTC
  std::vector<std::string> lowered_names;  ///< one per request
  std::vector<std::vector<ParamProbe>> probes;  ///< one vector per request
  std::vector<std::string> name_expressions;    ///< the kernel name expression of each request
};


/// How a kernel's own text covers the tasks of a forall launch (ForallPlanner::tasks_per_thread).
enum class TaskLoop : uint8_t {
  kOnePerThread,  ///< each thread does one task: the grid covers them all
  kForEach,       ///< cj::for_each: a grid-stride loop, one task per thread and step
  kElementwise,   ///< cj::elementwise alone: kElementwiseVectors 16-byte vectors per thread and step
};

/// The 16-byte vectors one cj::elementwise step moves per thread and array (its unroll).
using cj::abi::kElementwiseVectors;

/// A reflected CUDA C++ source, ready to be compiled for any instantiations.
class Program {
 public:
  /// `source` (named `filename`) whose kernels were reflected as `kernels` (reflect_kernels, or
  /// a record of the reading layer): no front end runs and no file is read.
  Program(std::string source, std::string filename, std::vector<KernelDecl> kernels);
  /// A source whose reflection was read before (Program::reflection): no front end runs. Throws
  /// c10::ValueError when the reflection belongs to another source or is damaged.
  static Program from_reflection(std::string source, std::string filename,
                                 const std::string& reflection);
  /// Checks what a source must be before it is read: no NUL byte, a usable file name and user
  /// options NVRTC and the front end both take. Throws c10::ValueError saying what to change.
  static void check_source(const std::string& source, const std::string& filename,
                           const std::vector<std::string>& options);

  const std::string& source() const { return source_; }
  const std::string& filename() const { return filename_; }
  /// SHA-256 (hex) over the file name and the source, computed once.
  const std::string& digest() const { return digest_; }
  const std::vector<KernelDecl>& kernels() const { return kernels_; }
  /// The kernels' reflection as bytes, for pickles and scripted modules: the source's digest,
  /// the SHA-256 of the serialized kernels, then serialize_kernels. from_reflection checks both
  /// digests, so no damaged byte can change a parameter.
  std::string reflection() const;
  /// The kernel with this name; throws c10::ValueError listing the kernels that exist.
  const KernelDecl& kernel(const std::string& name) const;
  /// The text and instantiations of a compile of these requests.
  GeneratedSource generate(const std::vector<InstantiationRequest>& requests) const;
  /// The generated code and name expressions of each request, in order.
  std::vector<Instantiation> instantiations(const std::vector<InstantiationRequest>& requests) const;
  /// The target and NVRTC option list for these options (deterministic, canonical order). Throws
  /// c10::ValueError when this NVRTC can target neither the architecture nor an older one.
  NvrtcArguments nvrtc_arguments(const CompileOptions& options) const;
  /// The NVRTC option list for these options (nvrtc_arguments(options).options).
  std::vector<std::string> nvrtc_options(const CompileOptions& options) const {
    return nvrtc_arguments(options).options;
  }
  /// Compiles; throws CompileError when NVRTC rejects the source or an instantiation, or
  /// when nvJitLink cannot link the `link` files.
  CompiledProgram compile(const GeneratedSource& generated, const CompileOptions& options) const;
  /// compile(generate(requests), options).
  CompiledProgram compile(const std::vector<InstantiationRequest>& requests,
                          const CompileOptions& options) const {
    return compile(generate(requests), options);
  }
  /// True when a kernel uses a grid-wide barrier (cooperative_groups::this_grid / grid_group)
  /// in its own text; when only code outside the kernels does (a helper function), every
  /// kernel counts as cooperative. Such kernels launch with cuLaunchCooperativeKernel.
  bool cooperative(const std::string& kernel_name) const;
  /// True when the source uses CUDA's device runtime (headers.h: uses_device_runtime): its
  /// compiles are linked with cudadevrt (KernelDefinition::compile_options).
  bool uses_device_runtime() const { return device_runtime_; }
  /// How a kernel's own text covers forall's tasks: one thread per task, or a grid-stride loop
  /// (cj::for_each, cj::elementwise), which lets forall launch fewer threads than tasks.
  TaskLoop task_loop(const std::string& kernel_name) const;

 private:
  /// The CompileError of a compile NVRTC rejected: its log, and for a failed instantiation the
  /// signatures asked for and the first error.
  /// The error of a failed compile; `dumped` is where TORCH_CUDAJIT_DUMP wrote its source.
  CompileError compile_failure(const GeneratedSource& generated, const CompiledProgram& out,
                               const std::string& dumped = "") const;
  /// The source from a kernel's declaration to the next kernel's declaration (or the end).
  std::string kernel_region(const std::string& kernel_name) const;

  std::string source_, filename_, rewritten_, digest_;
  /// What the rewritten source needs of cj/cj.cuh's optional parts (read once: generate adds
  /// what each compile's instantiations need).
  detail::ImplicitNeeds source_needs_;
  bool device_runtime_ = false;
  std::vector<KernelDecl> kernels_;
};

/// SHA-256 (hex) over a file name and a source: what identifies a source in records and in a
/// kernel's serialized reflection.
std::string source_digest(const std::string& filename, const std::string& source);

/// NVRTC compiles this process has run (tests check that loading cached or pickled kernels
/// compiles nothing).
uint64_t nvrtc_compile_count();

/// Formats source with right-aligned line numbers ("  3 | code").
std::string number_lines(const std::string& source);

namespace detail {
/// For an NVRTC log that could not open a header of a CUDA header set (CCCL, or the CUDA headers
/// themselves) missing on this machine, a line naming the package or path that provides it;
/// empty otherwise. `cuda_include_dir` is the CUDA header folder in use ("" when none was found).
std::string missing_header_hint(const std::string& log, const std::string& cuda_include_dir);
/// The names of the kernels requests ask for, each once, comma-separated (for messages).
std::string kernel_names(const std::vector<InstantiationRequest>& requests);
/// The first error of an NVRTC log, with the "argument types are: (...)" line that follows a
/// failed overload resolution (the deduction helper's own priority tag dropped), indented for
/// a message; empty when the log has no error line. Errors of NVRTC's name-expression map
/// (__nv_name_map), which only follow from an earlier failure, are skipped.
std::string first_error(const std::string& log);
/// An NVRTC log for a message: the errors of NVRTC's name-expression map (__nv_name_map),
/// which only follow from an earlier failure and can run to dozens, are replaced by one line
/// that counts them after the rest of the log. CompileError::log() keeps the whole log.
std::string condensed_log(const std::string& log);
/// The nvJitLink stage of a compile of `program` with CompileOptions::link (link.cpp): the
/// kernel's LTO-IR from `prog` linked with the link files into `out`'s CUBIN.
void link_program(const Program& program, nvrtcProgram prog,
                  const std::vector<InstantiationRequest>& requests, const CompileOptions& options,
                  CompiledProgram& out);
}  // namespace detail

}  // namespace torch_cudajit
