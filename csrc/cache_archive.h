// torch_cudajit: cache archives, the disk cache's records in one checksummed file. One process
// exports what its cache holds (all of it, or the records of some kernels); another imports the
// archive into a folder of its own, often ahead of time (an image's read-only cache folder, the
// nodes of a cluster job), and then finds those kernels without compiling or parsing.
//
// The file is framed like a record (cache.h: magic "TCJARCHV", format version, length, SHA-256
// of the payload); the payload is the tag "torch_cudajit cache archive", the number of members,
// then each member's name (<key>.cj, .cjr or .cjm), kind ("entry", "reflection", "manifest"),
// SHA-256 (hex) and bytes: the record file as the disk cache wrote it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_cudajit {

/// One member of an archive: a record file's name and its whole bytes.
struct ArchiveMember {
  std::string name;
  std::string bytes;
};

/// What an export or an import did.
struct ArchiveSummary {
  std::string path;  ///< the archive
  std::string dir;   ///< the folder imported into (empty for an export)
  int64_t entries = 0;
  int64_t reflections = 0;
  int64_t manifests = 0;
  int64_t bytes = 0;                 ///< the archive's size
  std::vector<std::string> kernels;  ///< names of the kernels the entries hold, sorted, each once
};

/// The current archive format version.
constexpr uint32_t kArchiveFormatVersion = 1;

/// The kind of a record by its file name: "entry" (.cj), "reflection" (.cjr) or "manifest" (.cjm).
std::string record_kind(const std::string& name);

/// The name of the kernel a lowered (mangled) name calls, with its namespaces and without
/// template arguments and parameters: `_Z5scaleIfEv...` -> `scale`.
std::string kernel_name_of_lowered(const std::string& lowered);

/// The bytes of an archive holding `members` (their names, kinds and SHA-256 are listed).
std::string encode_archive(const std::vector<ArchiveMember>& members);

/// The members of an archive, after checking all of it: its checksum and format, that each
/// member's name is a record's (no folders, no path tricks), its kind and SHA-256 agree with the
/// list, it is a whole record (unframe_record) and holds what its name says (a compile or a
/// batch reference stored under that key, a reflection or a manifest of that key). Throws
/// ValueError naming `file`, the member and what to do.
std::vector<ArchiveMember> decode_archive(const std::string& bytes, const std::string& file);

/// Writes the records the disk cache would load (the writable folder, then the read-only ones)
/// to `path`, atomically. With `kernels`, only what those kernels need: the entries whose
/// compiled kernel is named so (a name with namespaces, or without them: `scale` matches
/// `ns::scale`), the batch records they refer to, the reflection records declaring them and the
/// manifests leading to those reflections. Throws ValueError when a name matches no entry, or
/// when there is nothing to export.
ArchiveSummary export_cache_archive(const std::string& path,
                                    const std::vector<std::string>& kernels);

/// Verifies the archive at `path` (decode_archive), then writes its records atomically into
/// `dir` (default: the writable cache folder), mode 0600, as the disk cache writes them. Nothing
/// is written when any member is refused.
ArchiveSummary import_cache_archive(const std::string& path, const std::string& dir);

}  // namespace torch_cudajit
