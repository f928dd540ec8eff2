// torch_cudajit: the C++ front end. Clang (libclang, loaded at run time) preprocesses a kernel
// source with the include folders, macros and language standard that NVRTC gets, and parses its
// declarations (function bodies skipped). What it returns is what the compiler sees: kernels in
// `#if 0` blocks are gone, macros and backslash continuations are expanded, namespaces and
// extern "C" blocks are known, typedefs resolve. reflection.cpp turns these declarations into
// the parameter table; nothing else reads source text for declarations.
#pragma once

#include "libclang.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace torch_cudajit {

/// One parameter of a kernel declaration, as Clang read it.
struct ParsedParam {
  std::string name;       ///< declared name, "" when unnamed
  std::string spelling;   ///< the type as written, macros expanded, typedef names kept
  bool invalid = false;   ///< Clang could not resolve the type; `source_text` is what was written
  std::string source_text;  ///< the declaration's text in the source ("" when a macro made it)
  size_t begin = std::string::npos;  ///< offset of the declaration in the source, npos if none
};

/// One declaration (or definition) of a __global__ function in the main source.
struct ParsedKernel {
  std::string name;            ///< the unqualified name
  std::string qualified_name;  ///< with its named namespaces (`ns::saxpy`), as code refers to it
  bool is_template = false;
  bool is_extern_c = false;
  bool is_definition = false;
  size_t begin = 0;  ///< offset of the declaration (its template header or first specifier)
  /// Template parameter list: offsets of its first and one past its last character, and of the
  /// closing '>' (npos when not a template).
  size_t template_params_begin = std::string::npos;
  size_t template_params_end = std::string::npos;
  size_t template_close = std::string::npos;
  size_t line = 1;  ///< 1-based line of the declaration
  /// Offset one past the declaration: its body's '{' or its ';'.
  size_t end = std::string::npos;
  std::vector<ParsedParam> params;
  /// Clang's errors located inside the declaration ("file:line:col: error: text"), when every
  /// header was found (an unresolved type is then the source's own mistake, which NVRTC would
  /// refuse too). Errors of `auto` parameters before C++20 are not among them.
  std::vector<std::string> errors;
  /// The 1-based lines those errors point at.
  std::vector<size_t> error_lines;
  /// The header of the user's own that declares the kernel ("" for the source itself). Its
  /// offsets above are then npos (they are offsets of the source): `template_params_text` holds
  /// its template parameter list, and `line` is a line of the header.
  std::string file;
  std::string template_params_text;
};

/// What a parse read besides the source itself.
struct FrontendReads {
  /// Every file the preprocessor opened (headers, pre-included files, those of the precompiled
  /// preamble), by absolute path, with the SHA-256 (hex) of the bytes Clang read ("" where this
  /// libclang cannot show them).
  std::vector<std::pair<std::string, std::string>> files;
  /// The first header the preprocessor could not find ("" when it found them all).
  std::string missing;
};

/// Parses the __global__ declarations of `source` with Clang. `args` are the preprocessor
/// options NVRTC gets (frontend_args: -I, -iquote, -D, -U, -include, -std=); the front end adds
/// its own CUDA mode and prelude. `reads`, when given, receives the files the parse read.
/// Before parsing, headers named in #include lines that resolve to something other than a
/// regular file (a FIFO, a device) are refused with c10::ValueError: Clang would hang on them or
/// read without end. The parse runs on a thread with a large stack, so deeply nested
/// declarations do not overflow it. Throws c10::Error when libclang cannot be loaded, saying how
/// to install it.
std::vector<ParsedKernel> parse_kernels(const std::string& source, const std::string& filename,
                                        const std::vector<std::string>& args,
                                        FrontendReads* reads = nullptr);

/// Sources the front end has parsed in this process (tests check that loading a pickled or
/// scripted kernel parses nothing).
uint64_t frontend_parse_count();

/// This library's build (its file's size and time), which holds the front end and the
/// reflection code; part of source_key (reading.h). Computed without loading libclang.
std::string frontend_identity();

namespace detail {

/// The bytes Clang read of `file` (at `path`) in `tu`; read from the disk with a libclang that
/// cannot show them (before LLVM 16). False when neither works.
bool unit_file_text(CXTranslationUnit tu, CXFile file, const std::string& path, std::string& out);

/// Runs `fn` on the translation unit of `text` (held in memory under `path`, an absolute name:
/// quoted includes are found beside it), parsed as parse_kernels parses a source (NVRTC's
/// folders, macros and standard from `args`, the front end's prelude) but whole: function bodies
/// included, with a detailed preprocessing record (inclusion directives and macro definitions
/// are cursors), and `extra` added to Clang's arguments. The unit is disposed of when `fn`
/// returns; it runs under the front end's lock, on its large stack. `reads`, when given,
/// receives the files the parse read (as parse_kernels'). Throws c10::ValueError for a header
/// that is a special file (as parse_kernels).
void with_translation_unit(const std::string& path, const std::string& text,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& extra,
                           const std::function<void(CXTranslationUnit)>& fn,
                           FrontendReads* reads = nullptr);

}  // namespace detail
}  // namespace torch_cudajit
