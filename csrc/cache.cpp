// torch_cudajit: the disk tier of the kernel cache (see cache.h).
#include "cache.h"

#include "file_io.h"
#include "serialize.h"
#include "sha256.h"

#include <c10/util/Exception.h>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unordered_set>

namespace torch_cudajit {
namespace {

using detail::ByteReader;
using detail::dirname_of;
using detail::errno_text;
using detail::Fd;
using detail::open_nonblocking;
using detail::put_u32;
using detail::put_u64;
using detail::read_all;
using detail::write_all;

constexpr char kMagic[8] = {'T', 'C', 'J', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 32;  // magic, version, reserved, length, hash
constexpr const char* kEntrySuffix = ".cj";
constexpr const char* kReflectionSuffix = ".cjr";
constexpr const char* kManifestSuffix = ".cjm";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTempSuffix = ".tmp";

bool is_hex_key(const std::string& s, size_t from, size_t to) {
  if (to - from != 64) return false;
  for (size_t i = from; i < to; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i])) || std::isupper(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}

// Only files this cache wrote are ever removed: <key>.cj, <key>.cjr, <key>.cjm, <key>.lock and
// .<key>.<pid>.<n>.tmp.
bool is_cache_file(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  if (name.size() < n || name.compare(name.size() - n, n, suffix) != 0) return false;
  if (std::strcmp(suffix, ".tmp") == 0) return name.size() > 66 && name[0] == '.' && is_hex_key(name, 1, 65);
  return is_hex_key(name, 0, name.size() - n);
}

// A record of any kind: compiled code, a reflection or a manifest. All of them count against
// the size bound and are evicted least recently used first.
bool is_record(const std::string& name) {
  return is_cache_file(name, kEntrySuffix) || is_cache_file(name, kReflectionSuffix) ||
         is_cache_file(name, kManifestSuffix);
}

// --- environment -----------------------------------------------------------------------------

std::string home_dir() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  if (const passwd* pw = getpwuid(geteuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/tmp";
}

// "4G", "512M", "100000": bytes; -1 when malformed.
int64_t parse_bytes(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(v) || v < 0) return -1;
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();  // "GiB" -> "G"
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return -1;
  if (v * scale >= 9.0e18) return -1;  // beyond int64
  return static_cast<int64_t>(v * scale);
}

bool env_disables(const char* value) {
  std::string v(value);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "0" || v == "false" || v == "off" || v == "no";
}

std::string mode_text(mode_t mode) {
  char m[8];
  std::snprintf(m, sizeof(m), "%04o", static_cast<unsigned>(mode & 07777));
  return m;
}

// Compiled code is loaded from these files: nobody but their owner may write them, and the owner
// is this user, or root for a read-only folder (files built into an image).
bool trusted_owner(const struct stat& st, bool readonly) {
  return (st.st_uid == geteuid() || (readonly && st.st_uid == 0)) && (st.st_mode & 0022) == 0;
}

// --- folders ---------------------------------------------------------------------------------

// Creates `dir` and its missing parents; the folders it creates get `mode`.
bool make_dirs(const std::string& dir, mode_t mode) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    errno = ENOTDIR;  // the message says why, not what an earlier call left in errno
    return false;
  }
  std::string parent = dirname_of(dir);
  if (parent != dir && !make_dirs(parent, mode)) return false;
  return ::mkdir(dir.c_str(), mode) == 0 || errno == EEXIST;
}

struct DirEntry {
  std::string path;
  std::string name;
  int64_t size;
  int64_t mtime_ns;
};

std::vector<DirEntry> list_dir(const std::string& dir) {
  std::vector<DirEntry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({path, name, static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  return out;
}

}  // namespace

// --- Record frames ---------------------------------------------------------------------------

std::string frame_record(const std::string& payload) {
  return detail::frame_bytes(kMagic, DiskCache::kFormatVersion, payload);
}

std::optional<std::string> unframe_record(const std::string& data, std::string* problem) {
  return detail::unframe_bytes(kMagic, DiskCache::kFormatVersion, "cache file", data, problem);
}

std::string detail::frame_bytes(const char* magic, uint32_t format_version,
                                const std::string& payload) {
  std::string data(magic, sizeof(kMagic));
  put_u32(data, format_version);
  put_u32(data, 0);
  put_u64(data, payload.size());
  auto digest = Sha256().update(payload).digest();
  data.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  data += payload;
  return data;
}

std::optional<std::string> detail::unframe_bytes(const char* magic, uint32_t format_version,
                                                 const char* what, const std::string& data,
                                                 std::string* problem) {
  std::string why;
  if (data.size() < kHeaderSize || std::memcmp(data.data(), magic, sizeof(kMagic)) != 0) {
    why = std::string("is truncated or not a torch_cudajit ") + what;
  } else {
    ByteReader r{data, sizeof(kMagic)};
    const uint64_t version = r.u(4);
    r.u(4);
    const uint64_t length = r.u(8);
    if (version != format_version) {
      why = "has another cache format version";
    } else if (length != data.size() - kHeaderSize) {
      why = "is truncated";
    } else {
      std::string payload = data.substr(kHeaderSize);
      auto digest = Sha256().update(payload).digest();
      if (std::memcmp(digest.data(), data.data() + kHeaderSize - 32, 32) == 0) return payload;
      why = "is corrupted (its checksum does not match)";
    }
  }
  if (problem) *problem = why;
  return std::nullopt;
}

// --- DiskCache -------------------------------------------------------------------------------

DiskCache& DiskCache::instance() {
  static DiskCache* cache = new DiskCache();  // leaked: used by static destructors' threads
  return *cache;
}

DiskCache::DiskCache() { reset_from_environment(); }

void DiskCache::reset_from_environment() {
  CacheSettings s;
  if (const char* v = std::getenv("TORCH_CUDAJIT_CACHE")) {
    std::string mode(v);
    for (auto& c : mode) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s.enabled = !env_disables(v);
    s.writable = mode != "readonly";
  }
  if (const char* v = std::getenv("TORCH_CUDAJIT_CACHE_DIR"); v && *v) {
    s.dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    s.dir = std::string(x) + "/torch_cudajit";
  } else {
    s.dir = home_dir() + "/.cache/torch_cudajit";
  }
  s.max_bytes = kDefaultMaxBytes;
  if (const char* v = std::getenv("TORCH_CUDAJIT_CACHE_MAX_BYTES"); v && *v) {
    int64_t b = parse_bytes(v);
    if (b < 0)
      warn_once(std::string("TORCH_CUDAJIT_CACHE_MAX_BYTES is '") + v +
                "', not a size such as 1000000, 512M or 4G; using the default of 4G.");
    else if (b > 0)
      s.max_bytes = b;
  }
  if (const char* v = std::getenv("TORCH_CUDAJIT_CACHE_READONLY_DIRS"); v && *v) {
    std::string list(v);
    for (size_t from = 0; from <= list.size();) {
      const size_t to = std::min(list.find(':', from), list.size());
      if (to > from) s.readonly_dirs.push_back(list.substr(from, to - from));
      from = to + 1;
    }
  }
  configure(s);
}

CacheSettings DiskCache::settings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return settings_;
}

void DiskCache::configure(const CacheSettings& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  settings_ = s;
  if (settings_.max_bytes <= 0) settings_.max_bytes = kDefaultMaxBytes;
  checked_dir_.clear();
  checked_readonly_.reset();
}

void DiskCache::warn_once(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(warned_.begin(), warned_.end(), what) != warned_.end()) return;
    warned_.push_back(what);
  }
  // Paths and record fields in the text are bytes from outside: keep the warning text.
  TORCH_WARN("torch_cudajit cache: ", detail::utf8_text(what));
}

std::string detail::prepare_writable_folder(const std::string& dir, std::string* fix) {
  if (!make_dirs(dir, 0700)) {
    *fix = "Set TORCH_CUDAJIT_CACHE_DIR to a writable folder.";
    return "cannot create the cache folder '" + dir + "' (" + errno_text() + ")";
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    *fix = "Set TORCH_CUDAJIT_CACHE_DIR to a folder of your own.";
    return "the cache folder '" + dir + "' is not a folder owned by this user (uid " +
           std::to_string(geteuid()) + ")";
  }
  // Compiled code is loaded from here: nobody else may write into the folder. Folders the cache
  // creates are 0700; an existing folder is never chmod'ed (it may be /tmp, or shared on
  // purpose), and one that others can write is not used.
  if ((st.st_mode & 0022) != 0) {
    *fix = "Set TORCH_CUDAJIT_CACHE_DIR to a folder only you can write (mode 0700 or 0755), or "
           "one that does not exist yet (it is created with mode 0700).";
    return "the cache folder '" + dir + "' can be written by other users (mode " +
           mode_text(st.st_mode) + "), and compiled code is loaded from it";
  }
  return "";
}

std::string DiskCache::usable_dir() {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!settings_.enabled || !settings_.writable) return "";
    if (!checked_dir_.empty()) return checked_dir_;
    dir = settings_.dir;
  }
  std::string fix;
  if (std::string problem = detail::prepare_writable_folder(dir, &fix); !problem.empty()) {
    warn_once(problem + "; kernels compile without the disk cache. " + fix);
    return "";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (settings_.dir == dir) checked_dir_ = dir;
  return dir;
}

namespace {
// Why a read-only folder's records cannot be trusted ("" when they can): it must be a folder
// (links followed) of this user's or root's that neither group nor others can write.
std::string readonly_folder_problem(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return "cannot be read (" + errno_text() + ")";
  if (!S_ISDIR(st.st_mode)) return "is not a folder";
  if (!trusted_owner(st, /*readonly=*/true))
    return "is owned by uid " + std::to_string(st.st_uid) + " with mode " + mode_text(st.st_mode);
  return "";
}

std::string readonly_trust_rule() {
  return "read-only cache folders and their files must be owned by this user (uid " +
         std::to_string(geteuid()) + ") or by root, and writable by neither group nor others";
}
}  // namespace

std::vector<std::string> DiskCache::usable_readonly_dirs() {
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!settings_.enabled) return {};
    if (checked_readonly_) return *checked_readonly_;
    dirs = settings_.readonly_dirs;
  }
  std::vector<std::string> usable;
  for (const std::string& dir : dirs) {
    if (std::string problem = readonly_folder_problem(dir); !problem.empty())
      warn_once("the read-only cache folder '" + dir + "' " + problem + "; it is not used (" +
                readonly_trust_rule() + ").");
    else
      usable.push_back(dir);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (settings_.readonly_dirs == dirs) checked_readonly_ = usable;
  return usable;
}

bool DiskCache::usable() { return can_store() || !usable_readonly_dirs().empty(); }

std::string DiskCache::entry_path(const std::string& dir, const std::string& key,
                                  const char* suffix) const {
  return dir + "/" + key + suffix;
}

std::optional<std::string> DiskCache::load(const std::string& key) {
  return load_file(key, kEntrySuffix);
}

std::optional<std::string> DiskCache::load_reflection(const std::string& key) {
  return load_file(key, kReflectionSuffix);
}

std::optional<std::string> DiskCache::load_manifest(const std::string& key) {
  return load_file(key, kManifestSuffix);
}

namespace {
// Where this thread's last load found its record, so that a record its caller then refuses
// (reject, reject_reflection) is named by the file it came from.
struct LoadedFrom {
  std::string path;
  bool readonly = false;
};
thread_local LoadedFrom last_loaded;
}  // namespace

std::optional<std::string> DiskCache::load_file(const std::string& key, const char* suffix) {
  if (const std::string dir = usable_dir(); !dir.empty()) {
    const std::string path = entry_path(dir, key, suffix);
    if (std::optional<std::string> payload = read_record(path, false, /*touch=*/true)) {
      last_loaded = {path, false};
      return payload;
    }
  }
  for (const std::string& dir : usable_readonly_dirs()) {
    const std::string path = entry_path(dir, key, suffix);
    if (std::optional<std::string> payload = read_record(path, true, /*touch=*/false)) {
      last_loaded = {path, true};
      return payload;
    }
  }
  return std::nullopt;
}

std::optional<std::string> DiskCache::read_record(const std::string& path, bool readonly,
                                                  bool touch, std::string* bytes) {
  Fd f(open_nonblocking(path, O_RDONLY | O_NOFOLLOW));
  if (f.fd < 0) {
    // A file built into an image as another user's, unreadable here, would miss silently.
    if (readonly && errno != ENOENT)
      warn_once("cannot read '" + path + "' (" + errno_text() + "); the kernel is compiled " +
                "again. Make the read-only folder's files readable (chmod -R a+rX,go-w FOLDER).");
    return std::nullopt;  // the usual miss
  }
  struct stat st;
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (!trusted_owner(st, readonly)) {
    warn_once("ignoring '" + path + "': it is owned by uid " + std::to_string(st.st_uid) +
              " with mode " + mode_text(st.st_mode) + "; " +
              (readonly ? readonly_trust_rule()
                        : "only files of this user (uid " + std::to_string(geteuid()) +
                              ") that nobody else can write are loaded") +
              ". The kernel is compiled again.");
    return std::nullopt;
  }
  std::string data;
  std::string problem = "is truncated";
  if (read_all(f.fd, data, static_cast<size_t>(st.st_size))) {
    if (std::optional<std::string> payload = unframe_record(data, &problem)) {
      if (touch) futimens(f.fd, nullptr);  // the modification time orders eviction (LRU)
      if (bytes) *bytes = std::move(data);
      return payload;
    }
  }
  reject_file(path, problem, readonly);
  return std::nullopt;
}

void DiskCache::reject(const std::string& key, const std::string& problem) {
  const std::string name = "/" + key + kEntrySuffix;
  const LoadedFrom& from = last_loaded;
  if (from.path.size() >= name.size() &&
      from.path.compare(from.path.size() - name.size(), name.size(), name) == 0) {
    reject_file(from.path, problem, from.readonly);
    return;
  }
  const std::string dir = usable_dir();
  if (!dir.empty()) reject_file(entry_path(dir, key, kEntrySuffix), problem, false);
}

void DiskCache::reject_reflection(const std::string& key, const std::string& problem) {
  const std::string name = "/" + key + kReflectionSuffix;
  const LoadedFrom& from = last_loaded;
  if (from.readonly && from.path.size() >= name.size() &&
      from.path.compare(from.path.size() - name.size(), name.size(), name) == 0) {
    warn_once("ignoring '" + from.path + "' (" + problem + "). The source is read again; the "
              "record cannot be replaced in a read-only cache folder.");
    return;
  }
  const std::string dir = usable_dir();
  if (!dir.empty())
    warn_once("ignoring '" + entry_path(dir, key, kReflectionSuffix) + "' (" + problem +
              "). The source is read again and the record replaced.");
}

void DiskCache::reject_file(const std::string& path, const std::string& problem, bool readonly) {
  if (readonly)
    warn_once("ignoring '" + path + "': the file " + problem + ". It cannot be replaced in a " +
              "read-only cache folder: the kernel is compiled again (and stored in the writable " +
              "cache folder, if there is one); rebuild the read-only folder (python -m " +
              "torch_cudajit cache import) to repair it.");
  else
    warn_once("ignoring '" + path + "': the file " + problem + ". The kernel is compiled again " +
              "and the file replaced.");
}

void DiskCache::store_reflection(const std::string& key, const std::string& record) {
  store_record(key, record, kReflectionSuffix);
}

void DiskCache::store_manifest(const std::string& key, const std::string& record) {
  store_record(key, record, kManifestSuffix);
}

std::string detail::write_file_atomically(const std::string& dir, const std::string& name,
                                          const std::string& data, mode_t mode) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          (uint64_t(::getpid()) << 32));
  const std::string tmp = dir + "/." + name.substr(0, name.find('.')) + "." +
                          std::to_string(::getpid()) + "." + std::to_string(rng()) + kTempSuffix;
  {
    Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (f.fd < 0 || !write_all(f.fd, data.data(), data.size())) {
      std::string error = errno_text();
      ::unlink(tmp.c_str());
      return error;
    }
  }
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) {
    std::string error = errno_text();
    ::unlink(tmp.c_str());
    return error;
  }
  return "";
}

bool DiskCache::store_file(const std::string& dir, const std::string& key,
                           const std::string& payload, const char* suffix) {
  const std::string error = detail::write_file_atomically(dir, key + suffix, frame_record(payload));
  if (error.empty()) return true;
  warn_once("cannot write to the cache folder '" + dir + "' (" + error +
            "); compiled kernels are not saved.");
  return false;
}

void DiskCache::store(const std::string& key, const std::string& payload) {
  store_record(key, payload, kEntrySuffix);
}

void DiskCache::store_record(const std::string& key, const std::string& payload,
                             const char* suffix) {
  const std::string dir = usable_dir();
  if (dir.empty() || !store_file(dir, key, payload, suffix)) return;
  int64_t bound;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bound = settings_.max_bytes;
  }
  // Eviction scans the folder; that happens only after a compile or a parse, which cost more.
  int64_t total = 0;
  for (const auto& e : list_dir(dir))
    if (is_record(e.name)) total += e.size;
  if (total > bound) prune(bound, /*keep_newest=*/true);  // it was just written
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

DiskCache::KeyLock DiskCache::lock(const std::string& key) {
  const std::string dir = usable_dir();
  if (dir.empty()) return KeyLock();
  const std::string path = dir + "/" + key + kLockSuffix;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) return KeyLock();  // compile without the cross-process lock
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // a FIFO or device in its place
    ::close(fd);
    return KeyLock();
  }
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return KeyLock(fd);
}

CacheInfo DiskCache::info() {
  CacheInfo out;
  CacheSettings s = settings();
  out.dir = s.dir;
  out.enabled = s.enabled;
  out.max_bytes = s.max_bytes;
  for (const auto& e : list_dir(s.dir))
    if (is_record(e.name)) {
      out.entries += is_cache_file(e.name, kEntrySuffix) ? 1 : 0;
      out.bytes += e.size;
    }
  return out;
}

std::vector<CacheInfo> DiskCache::readonly_info() {
  const CacheSettings s = settings();
  const std::vector<std::string> usable = usable_readonly_dirs();
  std::vector<CacheInfo> out;
  for (const std::string& dir : s.readonly_dirs) {
    CacheInfo i;
    i.dir = dir;
    i.enabled = s.enabled;
    if (std::find(usable.begin(), usable.end(), dir) == usable.end())
      i.problem = s.enabled ? readonly_folder_problem(dir) : "the cache is disabled";
    for (const auto& e : list_dir(dir))
      if (is_record(e.name)) {
        i.entries += is_cache_file(e.name, kEntrySuffix) ? 1 : 0;
        i.bytes += e.size;
      }
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<StoredRecord> DiskCache::records() {
  std::vector<std::pair<std::string, bool>> folders;
  if (const std::string dir = usable_dir(); !dir.empty()) folders.emplace_back(dir, false);
  for (const std::string& dir : usable_readonly_dirs()) folders.emplace_back(dir, true);
  std::vector<StoredRecord> out;
  std::unordered_set<std::string> seen;
  for (const auto& [dir, readonly] : folders) {
    std::vector<DirEntry> files = list_dir(dir);
    std::sort(files.begin(), files.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (const DirEntry& e : files) {
      if (!is_record(e.name) || seen.count(e.name) != 0) continue;
      StoredRecord r;
      std::optional<std::string> payload = read_record(e.path, readonly, /*touch=*/false, &r.bytes);
      if (!payload) continue;
      seen.insert(e.name);
      r.name = e.name;
      r.path = e.path;
      r.payload = std::move(*payload);
      r.readonly = readonly;
      out.push_back(std::move(r));
    }
  }
  return out;
}

bool detail::is_record_name(const std::string& name) { return is_record(name); }

namespace {
// clear and prune delete files: only in a folder of this user's, and only files named as this
// cache names them (a cache folder pointed at /tmp must not cost anyone their files).
bool owned_folder(const std::string& dir) {
  struct stat st;
  return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}
}  // namespace

CacheInfo DiskCache::clear() {
  CacheInfo out = info();
  if (!owned_folder(out.dir)) return out;
  for (const auto& e : list_dir(out.dir))
    if ((is_record(e.name) || is_cache_file(e.name, kTempSuffix)) &&
        ::unlink(e.path.c_str()) == 0)
      out.removed += 1;
  out.entries = out.bytes = 0;
  return out;
}

CacheInfo DiskCache::prune(int64_t max_bytes, bool keep_newest) {
  CacheSettings s = settings();
  if (max_bytes < 0) max_bytes = s.max_bytes;
  CacheInfo out;
  out.dir = s.dir;
  out.enabled = s.enabled;
  out.max_bytes = max_bytes;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  if (!owned_folder(s.dir)) return out;
  std::vector<DirEntry> entries;
  for (auto& e : list_dir(s.dir)) {
    if (is_record(e.name)) {
      entries.push_back(std::move(e));
    } else if (is_cache_file(e.name, kTempSuffix)) {
      // A writer renames within milliseconds; an hour-old temporary file's writer died.
      if (now_ns - e.mtime_ns > int64_t(3600) * 1000000000 && ::unlink(e.path.c_str()) == 0)
        out.removed += 1;
    } else if (is_cache_file(e.name, kLockSuffix)) {
      // Remove lock files nobody holds; one that is held is in use by a compile.
      Fd f(open_nonblocking(e.path, O_RDWR | O_NOFOLLOW));
      if (f.fd >= 0 && ::flock(f.fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(e.path.c_str()) == 0)
        out.removed += 1;
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.mtime_ns > b.mtime_ns; });
  int64_t total = 0;
  bool full = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    // Newest first; everything older than the first entry that does not fit goes.
    full = full || ((i > 0 || !keep_newest) && total + entries[i].size > max_bytes);
    if (full) {
      if (::unlink(entries[i].path.c_str()) == 0) out.removed += 1;
      continue;
    }
    total += entries[i].size;
    out.entries += is_cache_file(entries[i].name, kEntrySuffix) ? 1 : 0;
  }
  out.bytes = total;
  return out;
}

}  // namespace torch_cudajit
