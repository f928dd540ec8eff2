// torch_cudajit: a whole CUDA file as nvcc's device pass sees it. A .cu file holds host code
// (main, cudaMalloc, <<<>>> launch wrappers, CPU references, host-only includes) beside its
// kernels; nvcc splits the translation unit and its device pass compiles only the device side.
// NVRTC compiles no host function at all, so the plugin does the split: the Clang front end reads
// the whole file (NVRTC's folders and macros, function bodies included) and keeps what the device
// pass compiles, with line numbers that still point into the user's files.
#pragma once

#include "headers.h"

#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

/// The device side of a CUDA file, as one source for NVRTC.
struct DeviceSource {
  /// The source NVRTC compiles: the file with its host code left out, the user's own headers
  /// (those outside the plugin's and CUDA's folders) written in where they are included, each
  /// behind a `#line` directive, so that compiler messages name the user's file and line.
  std::string text;
  /// The file, by absolute path (the program's name: quoted includes are found beside it).
  std::string path;
  /// Every file written into `text`: the file first, then its headers in the order included.
  std::vector<std::string> files;
  /// What was left out and why, one line each ("file:line: ..."), for messages and the docs'
  /// "what the device pass keeps".
  std::vector<std::string> notes;
};

/// Reads the CUDA file at `path` as nvcc's device pass would compile it, for NVRTC with these
/// user `options` (-I, -D, -U, -include count) and language `std`, for `arch`. What it keeps:
/// - kernels, `__device__` and `__host__ __device__` functions, `__device__`, `__constant__`,
///   `__managed__` and `__shared__` variables, types, templates, typedefs, enums, namespaces and
///   every macro;
/// - const and constexpr variables of the host (device code may read them, as under nvcc);
/// - constexpr functions without an execution space, marked `__host__ __device__` (nvcc's
///   --expt-relaxed-constexpr; NVRTC refuses any host function);
/// - includes: the user's own headers, read the same way and written in where first included;
///   the plugin's and CUDA's headers that declare no host function.
/// What it leaves out (blanked, so lines keep their numbers): host functions and member
/// functions (`main`, launch wrappers, CPU references), host variables that are not constant,
/// declarations that do not compile in device code (they name host-only types), includes of
/// headers that cannot be found, and of headers that declare host functions (cuBLAS, NCCL, ...).
/// With `text`, that is the file's text (an open file's contents), and `path` only names it.
/// With `use_cache` and a usable disk cache, the result is kept there as a source's reflection
/// is (reading.h): a later process that finds the file, every header it read and the folders
/// headers are looked for unchanged reads nothing again.
/// Throws c10::ValueError when the file cannot be read, naming it.
DeviceSource device_source(const std::string& path, const std::vector<std::string>& options,
                           const std::string& std = "c++17", int arch = kDefaultFrontendArch,
                           const std::optional<std::string>& text = std::nullopt,
                           bool use_cache = true);

}  // namespace torch_cudajit
