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
/// The preprocessor options the front end reads a source with: what NVRTC gets from the plugin
/// (include folders, macros, cj/cj.cuh before the source) and from the user's `options`.
std::vector<std::string> frontend_args(const std::vector<std::string>& options,
                                       const std::string& std);
/// Overrides the package include directory (the Python package sets its own location).
void set_package_include_dir(const std::string& dir);

}  // namespace torch_cudajit
