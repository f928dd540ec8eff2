// torch_cudajit: a source as the front end reads it, through the disk cache. One reader, the
// Clang front end run with NVRTC's own arguments for one architecture, decides both what a
// source declares (its reflection) and which files it depends on; the disk cache keeps both,
// so that a later process that finds every file unchanged reads neither the source nor its
// headers again, and never loads libclang. The Programs it makes (read_program, load_program)
// keep, for as long as they live, whether their compiles may use the disk cache and the files
// they read under each set of compile options (program_dependencies).
#pragma once

#include "dependencies.h"
#include "program.h"
#include "reflection.h"

#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {

/// A source as the front end read it for one architecture.
struct SourceReading {
  int arch = 0;
  std::vector<KernelDecl> kernels;
  /// The files it read. Not exact when the disk cache cannot be trusted with this source (a
  /// header the front end could not find, a file that changed while read, no libclang to read
  /// a source that arrived with its reflection): its compiles then skip the disk cache.
  Dependencies deps;
  /// The reflection came from a disk cache record: nothing was parsed.
  bool from_cache = false;
};

/// The disk cache key of a source before its headers are known: the source and its file name,
/// the front end's arguments for `arch` (frontend_args) and frontend_identity (this library's
/// build). Its manifest lists the dependency sets seen under it.
std::string source_key(const std::string& source, const std::string& filename,
                       const std::vector<std::string>& frontend_args);

/// Adds to `deps` the folders whose contents can change what a source read with these
/// front-end arguments compiles to beyond the files it read: where the program's own headers
/// are looked for (its folder, the user's include folders). A header that does not exist is not
/// among the files read, yet it is found once it is created there; a folder's modification time
/// changes then. Each with its digest; the list stays sorted, each path once.
void add_search_folders(Dependencies& deps, const std::vector<std::string>& frontend_args,
                        const std::string& toolkit_dir);

/// The disk cache key of a reflection record: the source key and the files read.
std::string reflection_key(const std::string& source_key, const Dependencies& deps);

/// Reads `source` (named `filename`, compiled with the user's `options` and `std`) for `arch`.
/// With `use_cache` and a usable disk cache, a manifest entry whose files all still hold their
/// digests gives the reflection record, and nothing is parsed; otherwise libclang parses the
/// source and the records are stored. A record that is damaged or belongs to another source is
/// refused with one warning and replaced. Without `use_cache` no record is read or written.
SourceReading read_source(const std::string& source, const std::string& filename,
                          const std::vector<std::string>& options, const std::string& std,
                          int arch, bool use_cache);

/// The dependencies of a source, as read_source finds them, for a source whose reflection is
/// already known (a linked .cu file, a kernel loaded from a pickle or a scripted module). When
/// they cannot be found (no libclang), they are inexact and say why.
Dependencies read_dependencies(const std::string& source, const std::string& filename,
                               const std::vector<std::string>& options, const std::string& std,
                               int arch, bool use_cache, std::vector<KernelDecl>* kernels = nullptr);

/// A reflection record's bytes: its key, the digest of the source it was read from, the
/// libclang it was read with, and the serialized kernels with their own SHA-256 (exposed for
/// tests).
std::string encode_reflection_record(const std::string& key, const std::string& source_digest,
                                     const std::vector<KernelDecl>& kernels);
/// The kernels of a record; throws c10::ValueError saying what is wrong when the record is
/// damaged or was stored for another key or source. `libclang`, when given, receives the
/// libclang_identity the record was read with.
std::vector<KernelDecl> decode_reflection_record(const std::string& key,
                                                 const std::string& source_digest,
                                                 const std::string& bytes,
                                                 std::string* libclang = nullptr);

/// Reads `source` into a Program as NVRTC will see it with these user options (-D, -U, -I,
/// -include and --pre-include count) and language standard, compiled for `arch` (0: the device
/// of the CUDA context current on this thread, else kDefaultFrontendArch), through read_source.
/// Compiles for other architectures read the source again for theirs (program_dependencies).
/// With `use_cache` false, no disk record is read or written for it, the reflection included.
/// Throws c10::ValueError for a source Program::check_source refuses.
std::shared_ptr<const Program> read_program(std::string source, std::string filename = "kernel.cu",
                                            const std::vector<std::string>& options = {},
                                            const std::string& std = "c++17", int arch = 0,
                                            bool use_cache = true);

/// A source whose reflection was read before (Program::from_reflection): no front end runs.
/// Its compiles through the disk cache read which headers the source includes, with
/// `use_cache` as read_program's.
std::shared_ptr<const Program> load_program(std::string source, std::string filename,
                                            const std::string& reflection, bool use_cache = true);

/// Whether compiles of `program` may use the disk cache: the `use_cache` read_program or
/// load_program made it with; true for a Program made otherwise.
bool program_uses_cache(const Program& program);

/// The files `program` reads when compiled with `options` (its architecture, standard and user
/// options), as the front end finds them there (read_dependencies). For a Program read_program
/// or load_program made, they are remembered while it lives and checked against the disk each
/// time: a file that changed since makes the source be read again. Throws c10::ValueError when
/// the source declares its kernels differently for `options.arch` than the program's reflection
/// says (an `#if __CUDA_ARCH__` around parameters, or a header that changed since the kernel was
/// defined).
Dependencies program_dependencies(const Program& program, const CompileOptions& options);

}  // namespace torch_cudajit
