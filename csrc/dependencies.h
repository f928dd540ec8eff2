// torch_cudajit: the files a program depends on, as the real preprocessor read them. The front
// end (libclang) reports every file it opened while reading a source with NVRTC's arguments;
// this stage gives each a digest, checks later that they still hold it, and stores the lists as
// a manifest, the way ccache's direct mode does: a later process that finds a manifest entry
// whose files all match knows the program's keys without parsing anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

class Sha256;

/// One file a program reads: its absolute path and the digest that stands for its contents
/// (SHA-256 of the bytes; headers of the CUDA toolkit, which the NVRTC version pins, by size and
/// modification time).
struct FileDigest {
  std::string path;
  std::string digest;
  bool operator==(const FileDigest& o) const { return path == o.path && digest == o.digest; }
};

/// The files a source depends on beyond its own text, for one architecture.
struct Dependencies {
  /// Sorted by path, each once. Empty with `inexact` set when the list is not known. Where the
  /// program asks whether a header exists (__has_include), the folders it may be found in are
  /// listed too: creating a file there can change what compiles.
  std::vector<FileDigest> files;
  /// Why the list may miss a file the compiler reads ("" when it is complete): a header the
  /// front end could not find (NVRTC may still find it), or files that changed while read.
  std::string inexact;
  bool exact() const { return inexact.empty(); }
  /// Adds the list to a key.
  void hash_into(Sha256& h) const;
};

/// The digest of a file's contents now (SHA-256, hex), remembered per process while the file's
/// identity (device, inode, size, modification time) is unchanged; "" when it cannot be read.
/// Files modified within the last second are read again each time (a coarse clock could hide an
/// edit).
std::string content_digest(const std::string& path);

/// The digest a key records for `path` now: the content digest, or for a file under
/// `toolkit_dir` its size and modification time; for a folder its inode and modification time
/// (which change when a file is created, removed or renamed in it); "" when it cannot be read.
std::string key_digest(const std::string& path, const std::string& toolkit_dir);

/// True when every file still has the digest recorded for it.
bool files_unchanged(const std::vector<FileDigest>& files, const std::string& toolkit_dir);

/// Dependencies from what the front end read: each (path, SHA-256 of the bytes it read) pair,
/// recorded with key_digest. A file whose bytes on disk no longer match what was read makes
/// the list inexact (it changed during the parse).
Dependencies dependencies_of(const std::vector<std::pair<std::string, std::string>>& read,
                             const std::string& toolkit_dir);

/// A manifest: the dependency lists seen for one source key, newest first, as bytes. It starts
/// with the key it belongs to.
std::string encode_manifest(const std::string& key, const std::vector<std::vector<FileDigest>>& entries);
/// The lists of a manifest; nothing when the bytes are damaged or belong to another key.
std::optional<std::vector<std::vector<FileDigest>>> decode_manifest(const std::string& key,
                                                                     const std::string& bytes);
/// The most lists a manifest keeps (newest first).
constexpr size_t kManifestEntries = 8;

}  // namespace torch_cudajit
