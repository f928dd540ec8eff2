// torch_cudajit: the persistent (disk) tier of the kernel cache. Each compile of a Program is
// stored as one file named by a SHA-256 key over everything that changes the binary: the
// generated source, the contents of the headers it includes, the name expressions, the
// canonical NVRTC options, the target and the NVRTC version. Reads take no lock; a miss takes
// a per-key file lock (flock, released by the kernel if the holder dies) so that processes
// starting together compile each specialization once. Files are written atomically (temporary
// file + rename), carry a hash of their own contents, and are only loaded when owned by the
// current user.
#pragma once

#include "program.h"

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

  /// The cache key (64 hex characters) of compiling `requests` of `program` with `options`, or
  /// "" when the source (or a header it reads) names a header through a macro (#include HDR,
  /// __has_include(HDR)): then the key could not cover every file the compiler reads, the compile
  /// must bypass the disk cache, and `inexact` (when given) receives the directive. Computing
  /// it never loads NVRTC.
  std::string key(const Program& program, const std::vector<InstantiationRequest>& requests,
                  const CompileOptions& options, std::string* inexact = nullptr) const;

  /// The cached compile for a key, or nothing. A damaged, foreign or wrongly owned file is
  /// ignored with one warning (and replaced by the next store).
  std::optional<CompiledProgram> load(const std::string& key);
  /// Stores a compile atomically, then evicts least-recently-used entries over the bound.
  void store(const std::string& key, const CompiledProgram& compiled);

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

  /// Entries and bytes on disk.
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
  std::string entry_path(const std::string& dir, const std::string& key) const;

  mutable std::mutex mutex_;
  CacheSettings settings_;
  std::string checked_dir_;  ///< the folder usable_dir last approved
  std::vector<std::string> warned_;
  CacheCounters counters_;
};

/// Serializes a compile to the cache file payload (exposed for tests).
std::string serialize_compiled(const std::string& key, const CompiledProgram& compiled);
/// Parses a payload; nothing when it is malformed or was stored under another key.
std::optional<CompiledProgram> deserialize_compiled(const std::string& key, const std::string& payload);

/// What the disk cache did for one compile.
enum class CacheOutcome { kBypassed, kHit, kMiss };

/// Compiles through the cache: loads a stored compile when there is one, else takes the key's
/// lock, compiles and stores. The cache is bypassed when `use_cache` is false, when it is
/// disabled, or when its folder cannot be used.
CompiledProgram compile_cached(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, bool use_cache,
                               CacheOutcome* outcome = nullptr);

}  // namespace torch_cudajit
