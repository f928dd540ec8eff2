// torch_cudajit: the disk cache's key, computed beside the compiler. It is a SHA-256 over
// everything that changes a compile's output: the generated source, the contents of the headers
// it includes (followed through the include path; toolkit headers by path, size and time), the
// name expressions, the canonical NVRTC options, the link inputs, the target and the NVRTC
// library. The byte store (cache.h) only sees the key.
#pragma once

#include "program.h"

#include <string>
#include <vector>

namespace torch_cudajit {

/// The cache key (64 hex characters) of compiling `requests` of `program` with `options`, or
/// "" when the source (or a header it reads) names a header through a macro (#include HDR,
/// __has_include(HDR)): then the key could not cover every file the compiler reads, the compile
/// must bypass the disk cache, and `inexact` (when given) receives the directive. Computing
/// it never loads NVRTC.
std::string compile_key(const Program& program, const GeneratedSource& generated,
                        const CompileOptions& options, std::string* inexact = nullptr);
/// compile_key of program.generate(requests).
inline std::string compile_key(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, std::string* inexact = nullptr) {
  return compile_key(program, program.generate(requests), options, inexact);
}

/// The disk cache key (64 hex characters) of a source's reflection: the source and its file
/// name, the front end's arguments (`frontend_args`: include folders, macros, pre-included
/// files, standard), the headers reachable from the source and from cj/cj.cuh (as in
/// compile_key), and frontend_identity. "" when a header is named through a macro (the key
/// could not cover what Clang reads); `inexact` then receives the directive.
std::string reflection_key(const std::string& filename, const std::string& source,
                           const std::vector<std::string>& frontend_args,
                           const std::vector<std::string>& options, std::string* inexact = nullptr);

}  // namespace torch_cudajit
