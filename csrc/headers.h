// torch_cudajit: the headers NVRTC and the front end see. The package's device headers (cj/),
// CUDA's headers and CCCL (libcu++, CUB) are found where the NVRTC in use, CUDA_HOME or the
// usual toolkit folder puts them; the front end reads a source with the same folders and macros
// NVRTC gets.
#pragma once

#include <string>
#include <vector>

namespace torch_cudajit {

/// Directories NVRTC searches by default: the package's device headers and CUDA's headers.
std::vector<std::string> default_include_dirs();
/// The CUDA header folder in use ("" when none was found): the one of NVRTC's CUDA version,
/// with CCCL where one has it.
std::string cuda_include_dir();
/// Adds a CUDA header folder to consider after the one beside the NVRTC in use (the Python
/// package passes the one cuda-pathfinder finds when it also found NVRTC).
void add_cuda_include_dir(const std::string& dir);
/// The architecture the front end reads a source for when none is named (compiles for another
/// one read it again for theirs).
constexpr int kDefaultFrontendArch = 90;

/// The preprocessor options the front end reads a source with: exactly what NVRTC gets, from
/// the plugin (include folders, macros, cj/cj.cuh before the source) and from the user's
/// `options` (-I, -D, -U and pre-included files in order, the last -std), for a compile for
/// `arch` (__CUDA_ARCH__) of a program named `filename` (its folder, taken from the working
/// directory, is searched first for quoted includes, as NVRTC does).
std::vector<std::string> frontend_args(const std::vector<std::string>& options,
                                       const std::string& std, int arch = kDefaultFrontendArch,
                                       const std::string& filename = "kernel.cu");
/// What nvcc's device pass gets from the host compiler and NVRTC does not define: the host's
/// platform macros (-D__linux__=1, -D__x86_64__=1, ...), for the operating system and processor
/// this library was built for. Code that tests them (`#if defined(__linux__) ... #else #error`)
/// then compiles as under nvcc. GCC's identity (__GNUC__) is not among them: NVRTC's own headers
/// read it as the host compiler and then look for glibc's headers.
const std::vector<std::string>& host_platform_macros();

/// Whether `text` uses CUDA's device runtime: a device-side launch (`<<<`) or a function that
/// <cuda_device_runtime_api.h> declares (cudaGraphSetConditional, cudaMalloc in device code,
/// cudaDeviceSynchronize, ...). Such code compiles as relocatable device code and is linked with
/// cudadevrt (cudadevrt_library).
bool uses_device_runtime(const std::string& text);

/// The static device runtime library (libcudadevrt.a) beside the CUDA headers in use or in
/// NVIDIA's wheels; "" when none is found.
std::string cudadevrt_library();

/// The CUDA header folder whose files keys count by size and time (dependencies.h), the last of
/// default_include_dirs; "" when the CUDA headers were not found.
std::string toolkit_include_dir();
/// True when `path` is a file of the user's own: an absolute path outside `system_dirs` (the
/// plugin's and CUDA's folders, default_include_dirs) and outside the front end's in-memory
/// files (/torch_cudajit/...). Kernels of such headers are the source's, and a whole file's
/// device pass reads them as it reads the file.
bool is_user_header(const std::string& path, const std::vector<std::string>& system_dirs);
/// Overrides the package include directory (the Python package sets its own location).
void set_package_include_dir(const std::string& dir);

namespace detail {

/// A header named by a directive: `#include "name"` (quoted) or `#include <name>`.
struct Include {
  std::string name;
  bool quoted;
};

/// The headers a text names: its #include directives, and the headers whose existence it tests
/// with __has_include. A text scan, which keys never use (the front end reports what the
/// preprocessor opened: dependencies.h); the front end's check for special files and
/// implicit_needs read it. `inexact` receives the first line that names a header through a macro
/// (#include HDR, __has_include(HDR)): what such a text reads depends on the preprocessor, which
/// this scan does not run.
std::vector<Include> scan_includes(const std::string& text, std::string& inexact);

/// Whether every header `text` includes comes from the plugin's or CUDA's folders, and none is
/// named through a macro: then a scan of `text` alone sees all of the code it brings.
bool includes_only_known_headers(const std::string& text);

/// The optional parts of cj/cj.cuh a text compiled after it can use. Each costs a large part of
/// a small kernel's compile, so cj/cj.cuh includes it only where it can be needed.
struct ImplicitNeeds {
  /// CUDA's fp16 and bf16 headers (CJ_HAVE_FP16, CJ_HAVE_BF16): the text names one of their
  /// types, functions or macros (an identifier with `half`, `bfloat16`, `fp16` or `bf16` in it,
  /// `__h...`, or one of the `h...` half math functions).
  bool half = false;
  /// The implicit prelude's <math.h> (CJ_IMPLICIT_MATH), what nvcc's implicit includes give:
  /// the text names `std`, a math function without its float suffix (`sqrt`, whose integer
  /// overloads the prelude adds), a classification function, or a <math.h> macro or type
  /// (INFINITY, NAN, HUGE_VAL, FP_..., M_..., float_t).
  bool math = false;
  ImplicitNeeds& operator|=(const ImplicitNeeds& o) {
    half = half || o.half;
    math = math || o.math;
    return *this;
  }
};

/// What a text needs of cj/cj.cuh's optional parts. A text that includes a file from outside the
/// plugin's and CUDA's folders, or names one through a macro, needs everything: this scan does
/// not read such files. Comments and strings count too: a false positive costs compile time,
/// never correctness.
ImplicitNeeds implicit_needs(const std::string& text);

/// The options that ask cj/cj.cuh for these parts ("-DCJ_HAVE_FP16", "-DCJ_HAVE_BF16",
/// "-DCJ_IMPLICIT_MATH"); the fp16/bf16 ones only where the CUDA headers were found.
std::vector<std::string> implicit_macros(const ImplicitNeeds& needs);

}  // namespace detail

}  // namespace torch_cudajit
