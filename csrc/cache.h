// torch_cudajit: the persistent (disk) tier of the kernel cache, a byte store. Each record is
// one file named by its key (64 hex characters, computed beside the compiler: cache_key.h);
// what the bytes hold is the caller's business (compile_cache.h). Reads take no lock; a miss
// takes a per-key file lock (flock, released by the kernel if the holder dies) so that
// processes starting together compile each specialization once. Files are written atomically
// (temporary file + rename), carry a hash of their own contents, and are only loaded when owned
// by the current user. Read-only folders (records built ahead of time into an image) are searched
// after the writable folder; they are never written, locked, touched or evicted.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

/// Where and whether the disk cache is used. Read from the environment on first use:
/// TORCH_CUDAJIT_CACHE (0 disables, "readonly" uses the read-only folders alone),
/// TORCH_CUDAJIT_CACHE_DIR (else $XDG_CACHE_HOME/torch_cudajit, else ~/.cache/torch_cudajit),
/// TORCH_CUDAJIT_CACHE_MAX_BYTES (0 or unset: 4 GiB) and TORCH_CUDAJIT_CACHE_READONLY_DIRS
/// (folders separated by ':').
struct CacheSettings {
  bool enabled = true;
  std::string dir;
  int64_t max_bytes = 0;
  /// Folders of records built ahead of time, searched after `dir` in this order and only read.
  std::vector<std::string> readonly_dirs;
  /// False: `dir` is neither read nor written; loads come from `readonly_dirs` alone.
  bool writable = true;
};

/// Totals of one cache scan (`info`, `clear`, `prune`).
struct CacheInfo {
  std::string dir;
  bool enabled = false;
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t max_bytes = 0;
  int64_t removed = 0;  ///< entries (or stray files) removed by clear/prune
  std::string problem;  ///< why a read-only folder is not used ("" when it is)
};

/// One record file as a load would find it (`DiskCache::records`).
struct StoredRecord {
  std::string name;     ///< <key>.cj, <key>.cjr or <key>.cjm
  std::string path;
  std::string bytes;    ///< the whole file, as frame_record wrote it
  std::string payload;  ///< what unframe_record returned
  bool readonly = false;
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

namespace detail {
/// frame_record with another 8-byte magic and version: the outer frame of other files made of
/// records (cache archives, cache_archive.h).
std::string frame_bytes(const char* magic, uint32_t version, const std::string& payload);
/// unframe_record of frame_bytes; `what` names the kind of file in `problem` ("cache file").
std::optional<std::string> unframe_bytes(const char* magic, uint32_t version, const char* what,
                                         const std::string& bytes, std::string* problem);
/// True for the name of a record file: 64 lowercase hex digits, then .cj, .cjr or .cjm.
bool is_record_name(const std::string& name);
/// Prepares a folder records are written to: creates it (mode 0700) when missing, then checks
/// that it is a folder of this user's that nobody else can write. "" when it can be used, else
/// what is wrong ("the cache folder '...' can be written by other users (mode 0777)"); `fix`
/// then says what to do.
std::string prepare_writable_folder(const std::string& dir, std::string* fix);
/// Writes `bytes` to <dir>/<name> atomically, with `mode`: a temporary file in `dir` (named as
/// the cache names them: .<name up to its first dot>.<pid>.<n>.tmp), then a rename. "" on
/// success, else the system's reason (strerror).
std::string write_file_atomically(const std::string& dir, const std::string& name,
                                  const std::string& bytes, mode_t mode = 0600);
}  // namespace detail

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

  /// True when the cache is enabled and a folder can be used: the writable one, or a read-only
  /// one.
  bool usable();
  /// True when records can be stored: the cache is enabled and writable and its folder usable.
  bool can_store() { return !usable_dir().empty(); }
  /// One entry per configured read-only folder: its entries and bytes, or why it is not used.
  std::vector<CacheInfo> readonly_info();
  /// Every record a load could return, each name once, from the first folder that holds a
  /// usable file of that name (the writable folder, then the read-only ones). Damaged or
  /// untrusted files are left out with one warning. Nothing is touched.
  std::vector<StoredRecord> records();

  /// Counters of this process.
  CacheCounters& counters() { return counters_; }

 private:
  DiskCache();
  /// The entry folder, created with mode 0700 if missing; "" when it cannot be used (with one
  /// warning saying why).
  std::string usable_dir();
  /// The read-only folders that can be used (checked once per configure; each refused folder
  /// warns once).
  std::vector<std::string> usable_readonly_dirs();
  std::string entry_path(const std::string& dir, const std::string& key, const char* suffix) const;
  std::optional<std::string> load_file(const std::string& key, const char* suffix);
  /// The payload of the record file at `path` when it is trusted and whole (else one warning);
  /// a file of the writable folder gets its modification time renewed when `touch`.
  std::optional<std::string> read_record(const std::string& path, bool readonly, bool touch,
                                         std::string* bytes = nullptr);
  /// Writes a record of any kind, then evicts over the bound.
  void store_record(const std::string& key, const std::string& record, const char* suffix);
  /// Writes the file of a record; false when it could not be written (with one warning).
  bool store_file(const std::string& dir, const std::string& key, const std::string& record,
                  const char* suffix);

  mutable std::mutex mutex_;
  CacheSettings settings_;
  void reject_file(const std::string& path, const std::string& problem, bool readonly);
  std::string checked_dir_;  ///< the folder usable_dir last approved
  std::optional<std::vector<std::string>> checked_readonly_;  ///< usable_readonly_dirs' answer
  std::vector<std::string> warned_;
  CacheCounters counters_;
};

}  // namespace torch_cudajit
