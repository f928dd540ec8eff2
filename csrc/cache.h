// torch_cudajit: the persistent (disk) tier of the kernel cache, a byte store. Each record is
// one file named by its key (64 hex characters, computed beside the compiler: cache_key.h);
// what the bytes hold is the caller's business (compile_cache.h). Reads take no lock; a miss
// takes a per-key file lock (flock, released by the kernel if the holder dies) so that
// processes starting together compile each specialization once. Files are written atomically
// (temporary file + rename), carry a hash of their own contents, and are only loaded when owned
// by the current user.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

/// Where and whether the disk cache is used. Read from the environment on first use:
/// TORCH_CUDAJIT_CACHE (0 disables), TORCH_CUDAJIT_CACHE_DIR (else $XDG_CACHE_HOME/torch_cudajit,
/// else ~/.cache/torch_cudajit) and TORCH_CUDAJIT_CACHE_MAX_BYTES (0 or unset: 4 GiB).
struct CacheSettings {
  bool enabled = true;
  std::string dir;
  int64_t max_bytes = 0;
};

/// Totals of one cache scan (`info`, `clear`, `prune`).
struct CacheInfo {
  std::string dir;
  bool enabled = false;
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t max_bytes = 0;
  int64_t removed = 0;  ///< entries (or stray files) removed by clear/prune
};

/// Disk hits and misses of this process, or of one kernel.
struct CacheCounters {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
};

/// The bytes of a cache file holding `payload`: a header (magic, format version, length), the
/// payload's SHA-256, then the payload. Records travel between caches in this form.
std::string frame_record(const std::string& payload);
/// The payload of a cache file's bytes, or nothing when they are not one whole record of this
/// format; `problem` then says why ("is corrupted (its checksum does not match)", ...).
std::optional<std::string> unframe_record(const std::string& bytes, std::string* problem);

/// The process-wide disk cache.
class DiskCache {
 public:
  static constexpr int64_t kDefaultMaxBytes = int64_t(4) << 30;
  static constexpr uint32_t kFormatVersion = 1;

  static DiskCache& instance();

  /// The settings in force (the environment's, unless `configure` replaced them).
  CacheSettings settings() const;
  /// Replaces the settings (tests, `torch_cudajit.cache.configure`).
  void configure(const CacheSettings& settings);
  /// Re-reads the settings from the environment.
  void reset_from_environment();

  /// The record stored under a key, or nothing. A damaged, foreign or wrongly owned file is
  /// ignored with one warning (and replaced by the next store).
  std::optional<std::string> load(const std::string& key);
  /// Stores a record atomically, then evicts least-recently-used entries over the bound.
  void store(const std::string& key, const std::string& record);
  /// A source's reflection stored under a key (reading.h), or nothing; as `load`. These
  /// records are files of their own kind (<key>.cjr), a few KB each; like manifests they count
  /// against the size bound (not as entries), are evicted with the entries, and `clear`
  /// removes them.
  std::optional<std::string> load_reflection(const std::string& key);
  /// Stores a reflection record atomically.
  void store_reflection(const std::string& key, const std::string& record);
  /// The dependency manifest stored under a source key (<key>.cjm, dependencies.h), or nothing.
  std::optional<std::string> load_manifest(const std::string& key);
  /// Stores a manifest atomically.
  void store_manifest(const std::string& key, const std::string& record);
  /// Warns once that the reflection record under `key` is unusable; it is replaced.
  void reject_reflection(const std::string& key, const std::string& problem);
  /// Warns once that the record under `key` is unusable (`problem` says why, e.g. "does not
  /// hold this kernel"); the next store replaces it.
  void reject(const std::string& key, const std::string& problem);

  /// Warns once per process with this text.
  void warn_once(const std::string& what);

  /// An exclusive lock on one key, held while compiling it.
  class KeyLock {
   public:
    KeyLock() = default;
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    KeyLock& operator=(KeyLock&&) = delete;
    ~KeyLock();

   private:
    int fd_ = -1;
  };
  /// Blocks until this process holds the lock of `key` (no-op lock when the folder is unusable).
  KeyLock lock(const std::string& key);

  /// Entries (compiled records) and bytes of all records on disk.
  CacheInfo info();
  /// Removes every entry.
  CacheInfo clear();
  /// Removes temporary files left by dead writers and unused lock files, then evicts
  /// least-recently-used entries until the total is at most `max_bytes` (<0: the setting).
  /// `keep_newest` keeps the most recent entry even when it alone is over the bound.
  CacheInfo prune(int64_t max_bytes = -1, bool keep_newest = false);

  /// True when the cache is enabled and its folder can be used.
  bool usable() { return !usable_dir().empty(); }

  /// Counters of this process.
  CacheCounters& counters() { return counters_; }

 private:
  DiskCache();
  /// The entry folder, created with mode 0700 if missing; "" when it cannot be used (with one
  /// warning saying why).
  std::string usable_dir();
  std::string entry_path(const std::string& dir, const std::string& key, const char* suffix) const;
  std::optional<std::string> load_file(const std::string& key, const char* suffix);
  /// Writes a record of any kind, then evicts over the bound.
  void store_record(const std::string& key, const std::string& record, const char* suffix);
  /// Writes the file of a record; false when it could not be written (with one warning).
  bool store_file(const std::string& dir, const std::string& key, const std::string& record,
                  const char* suffix);

  mutable std::mutex mutex_;
  CacheSettings settings_;
  void reject_file(const std::string& path, const std::string& problem);
  std::string checked_dir_;  ///< the folder usable_dir last approved
  std::vector<std::string> warned_;
  CacheCounters counters_;
};

}  // namespace torch_cudajit
