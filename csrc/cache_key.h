// torch_cudajit: the disk cache's key, computed beside the compiler. It is a SHA-256 over
// everything that changes a compile's output: the generated source, the files the program reads
// (as the front end's preprocessor found them for the compile's architecture: dependencies.h),
// the name expressions, the canonical NVRTC options, the link inputs, the target and the NVRTC
// library. The byte store (cache.h) only sees the key.
#pragma once

#include "dependencies.h"
#include "program.h"
#include "reading.h"

#include <string>
#include <vector>

namespace torch_cudajit {

/// The cache key (64 hex characters) of compiling `generated` of `program` with `options`, whose
/// source reads the files `deps` (program_dependencies(program, options)); "" when the files are
/// not known exactly (Dependencies::inexact, or a linked .cu file's): the compile must then
/// bypass the disk cache, and `inexact` (when given) receives why. Computing it never loads
/// NVRTC.
std::string compile_key(const Program& program, const GeneratedSource& generated,
                        const CompileOptions& options, const Dependencies& deps,
                        std::string* inexact = nullptr);
/// compile_key of program.generate(requests), with the program's own dependencies.
inline std::string compile_key(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, std::string* inexact = nullptr) {
  return compile_key(program, program.generate(requests), options,
                     program_dependencies(program, options), inexact);
}

}  // namespace torch_cudajit
