// torch_cudajit: the disk tier of the kernel cache (see cache.h).
#include "cache.h"

#include "cuda_api.h"
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
#include <set>
#include <unordered_map>

namespace torch_cudajit {
namespace {

constexpr char kMagic[8] = {'T', 'C', 'J', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 32;  // magic, version, reserved, length, hash
constexpr const char* kEntrySuffix = ".cj";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTempSuffix = ".tmp";

std::string dirname_of(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

std::string errno_text() { return std::strerror(errno); }

bool is_hex_key(const std::string& s, size_t from, size_t to) {
  if (to - from != 64) return false;
  for (size_t i = from; i < to; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i])) || std::isupper(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}

// Only files this cache wrote are ever removed: <key>.cj, <key>.lock and .<key>.<pid>.<n>.tmp.
bool is_cache_file(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  if (name.size() < n || name.compare(name.size() - n, n, suffix) != 0) return false;
  if (std::strcmp(suffix, ".tmp") == 0) return name.size() > 66 && name[0] == '.' && is_hex_key(name, 1, 65);
  return is_hex_key(name, 0, name.size() - n);
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

// --- file helpers ----------------------------------------------------------------------------

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_all(int fd, std::string& out, size_t size) {
  out.resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, &out[got], size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Opens an existing file without blocking: a FIFO or device named like a header or an entry
// would otherwise block the open (or the read) forever. Callers check S_ISREG with fstat.
int open_nonblocking(const std::string& path, int flags) {
  return ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC);
}

bool read_file(const std::string& path, std::string& out) {
  Fd f(open_nonblocking(path, O_RDONLY));
  if (f.fd < 0) return false;
  struct stat st;
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return read_all(f.fd, out, static_cast<size_t>(st.st_size));
}

// Creates `dir` and its missing parents; the folders it creates get `mode`.
bool make_dirs(const std::string& dir, mode_t mode) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
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

// --- serialization ---------------------------------------------------------------------------

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_str(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

struct Reader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  uint64_t u(int bytes) {
    if (!ok || s.size() - pos < static_cast<size_t>(bytes)) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(s[pos + i])) << (8 * i);
    pos += bytes;
    return v;
  }
  std::string str() {
    uint64_t n = u(8);
    if (!ok || s.size() - pos < n) {
      ok = false;
      return {};
    }
    std::string v = s.substr(pos, n);
    pos += n;
    return v;
  }
  // A count that cannot exceed what is left (guards against huge allocations).
  uint64_t count() {
    uint64_t n = u(8);
    if (n > s.size() - pos) ok = false;
    return ok ? n : 0;
  }
};

// --- key: headers ----------------------------------------------------------------------------

struct Include {
  std::string name;
  bool quoted;
};

// The text as the preprocessor's directive reader sees it: backslash-newlines joined, comments
// replaced by a space (string and character literals kept), one entry per logical line.
std::vector<std::string> logical_lines(const std::string& text) {
  std::vector<std::string> lines(1);
  enum { kCode, kLineComment, kBlockComment, kString, kChar } state = kCode;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\\' && (next == '\n' || (next == '\r' && i + 2 < text.size() && text[i + 2] == '\n'))) {
      i += next == '\r' ? 2 : 1;  // a continuation: the logical line goes on
      continue;
    }
    if (c == '\n') {
      if (state == kLineComment || state == kString || state == kChar) state = kCode;
      if (state == kCode) lines.emplace_back();
      continue;  // a newline inside a block comment keeps the logical line (it is a space)
    }
    std::string& line = lines.back();
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') { state = kLineComment; line += ' '; ++i; }
        else if (c == '/' && next == '*') { state = kBlockComment; line += ' '; ++i; }
        else { if (c == '"') state = kString; else if (c == '\'') state = kChar; line += c; }
        break;
      case kBlockComment:
        if (c == '*' && next == '/') { state = kCode; ++i; }
        break;
      case kLineComment:
        break;
      case kString:
      case kChar:
        line += c;
        if (c == '\\' && i + 1 < text.size()) line += text[++i];
        else if (c == (state == kString ? '"' : '\'')) state = kCode;
        break;
    }
  }
  return lines;
}

// Trimmed, for messages.
std::string trimmed(const std::string& l) {
  const size_t b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : l.substr(b, e - b + 1);
}

// The headers a text reads: #include directives, and the headers whose existence it tests with
// __has_include. `inexact` receives the first line that names a header through a macro
// (#include HDR, __has_include(HDR)): what such a text reads depends on the preprocessor, which
// this scan does not run.
std::vector<Include> scan_includes(const std::string& text, std::string& inexact) {
  std::vector<Include> out;
  auto skip_space = [](const std::string& l, size_t i) {
    while (i < l.size() && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r')) ++i;
    return i;
  };
  for (const std::string& l : logical_lines(text)) {
    // __has_include(<name>) reads whether a header exists: the key records that like an
    // #include (found or not). Only a name given through a macro cannot be resolved.
    for (size_t at = l.find("__has_include"); at != std::string::npos;
         at = l.find("__has_include", at + 13)) {
      size_t j = at + 13;
      if (l.compare(j, 5, "_next") == 0) j += 5;
      j = skip_space(l, j);
      if (j >= l.size() || l[j] != '(') continue;  // defined(__has_include)
      j = skip_space(l, j + 1);
      const char close = j < l.size() && l[j] == '"' ? '"' : j < l.size() && l[j] == '<' ? '>' : 0;
      const size_t end = close ? l.find(close, j + 1) : std::string::npos;
      if (end != std::string::npos) {
        out.push_back({l.substr(j + 1, end - j - 1), close == '"'});
      } else if (inexact.empty()) {
        inexact = trimmed(l);
      }
    }
    size_t i = skip_space(l, 0);
    if (i >= l.size() || l[i] != '#') continue;
    i = skip_space(l, i + 1);
    size_t word = i;
    while (i < l.size() && (std::isalnum(static_cast<unsigned char>(l[i])) || l[i] == '_')) ++i;
    const std::string directive = l.substr(word, i - word);
    if (directive != "include" && directive != "include_next" && directive != "import") continue;
    i = skip_space(l, i);
    if (i < l.size() && (l[i] == '"' || l[i] == '<')) {
      const char close = l[i] == '"' ? '"' : '>';
      const size_t end = l.find(close, i + 1);
      if (end != std::string::npos) {
        out.push_back({l.substr(i + 1, end - i - 1), close == '"'});
        continue;
      }
    }
    if (inexact.empty()) inexact = trimmed(l);  // #include MACRO, or a malformed directive
  }
  return out;
}

// What the key needs of one header file, memoized per process while the file is unchanged.
struct HeaderFacts {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t size = -1;
  int64_t mtime_ns = 0;
  std::string digest;
  std::vector<Include> includes;
  std::string inexact;  // a directive naming a header scan_includes cannot resolve, if any
};

std::mutex& header_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, HeaderFacts>& header_memo() {
  static std::unordered_map<std::string, HeaderFacts> memo;
  return memo;
}

// The content digest and includes of a header; false when it cannot be read.
bool header_facts(const std::string& path, const struct stat& st, HeaderFacts& out) {
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(header_mutex());
    auto it = header_memo().find(path);
    if (it != header_memo().end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino &&
        it->second.size == st.st_size && it->second.mtime_ns == mtime) {
      out = it->second;
      return true;
    }
  }
  std::string text;
  if (!read_file(path, text)) return false;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.size = st.st_size;
  out.mtime_ns = mtime;
  out.digest = sha256_hex(text);
  out.inexact.clear();
  out.includes = scan_includes(text, out.inexact);
  // A file edited within the same timestamp tick as it was read would keep a stale memo, so
  // only files older than a second are remembered.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  if (std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - mtime > 1000000000) {
    std::lock_guard<std::mutex> lock(header_mutex());
    header_memo()[path] = out;
  }
  return true;
}

bool is_regular(const std::string& path, struct stat& st) {
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Adds every header reachable from `text` (and from `pre_included`, the files of --pre-include
// options) to the hash. User and package headers count by content; headers of the CUDA toolkit
// by path, size and time (the NVRTC version pins them), which keeps the key cheap for sources
// that include cuda_fp16.h and friends. Returns the first directive naming a header this scan
// cannot resolve (see scan_includes), "" when there is none: with one, the key does not cover
// what the compiler reads.
std::string hash_headers(Sha256& h, const std::string& text, const std::vector<std::string>& pre_included,
                  const std::vector<std::string>& include_dirs, const std::string& toolkit_dir) {
  struct Pending {
    Include inc;
    std::string from_dir;
  };
  std::vector<Pending> stack;
  char cwd[4096];
  const std::string main_dir = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
  std::string inexact;
  for (auto& inc : scan_includes(text, inexact)) stack.push_back({inc, main_dir});
  for (const auto& name : pre_included) stack.push_back({{name, true}, main_dir});
  std::set<std::string> seen;
  while (!stack.empty()) {
    Pending p = stack.back();
    stack.pop_back();
    std::string found;
    struct stat st;
    if (!p.inc.name.empty() && p.inc.name[0] == '/') {
      if (is_regular(p.inc.name, st)) found = p.inc.name;
    } else {
      if (p.inc.quoted && is_regular(p.from_dir + "/" + p.inc.name, st)) found = p.from_dir + "/" + p.inc.name;
      for (size_t i = 0; found.empty() && i < include_dirs.size(); ++i)
        if (is_regular(include_dirs[i] + "/" + p.inc.name, st)) found = include_dirs[i] + "/" + p.inc.name;
    }
    if (!seen.insert(p.inc.name + "\n" + found).second) continue;
    h.field("include").field(p.inc.name).field(found);
    if (found.empty()) continue;  // an NVRTC built-in header, or one under a false #if
    if (!toolkit_dir.empty() && found.compare(0, toolkit_dir.size() + 1, toolkit_dir + "/") == 0) {
      const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      h.field(std::to_string(st.st_size) + ":" + std::to_string(mtime));
      continue;
    }
    HeaderFacts facts;
    if (!header_facts(found, st, facts)) {
      h.field("unreadable");
      continue;
    }
    h.field(facts.digest);
    if (inexact.empty() && !facts.inexact.empty()) inexact = facts.inexact + " (in " + found + ")";
    for (auto& inc : facts.includes) stack.push_back({inc, dirname_of(found)});
  }
  return inexact;
}

}  // namespace

// --- serialization ---------------------------------------------------------------------------

std::string serialize_compiled(const std::string& key, const CompiledProgram& c) {
  std::string out;
  put_str(out, key);
  put_str(out, c.target);
  put_u32(out, c.has_cubin ? 1 : 0);
  put_str(out, c.ptx);
  put_str(out, c.cubin);
  put_str(out, c.log);
  put_u64(out, c.options.size());
  for (const auto& o : c.options) put_str(out, o);
  put_u64(out, c.lowered_names.size());
  for (size_t i = 0; i < c.lowered_names.size(); ++i) {
    put_str(out, c.lowered_names[i]);
    put_str(out, c.name_expressions[i]);
    put_u64(out, c.probes[i].size());
    for (const auto& p : c.probes[i]) {
      put_u32(out, static_cast<uint32_t>(static_cast<int32_t>(p.code)));
      put_u32(out, p.size);
      put_u32(out, p.align);
    }
  }
  return out;
}

std::optional<CompiledProgram> deserialize_compiled(const std::string& key, const std::string& payload) {
  Reader r{payload};
  CompiledProgram c;
  if (r.str() != key || !r.ok) return std::nullopt;
  c.target = r.str();
  c.has_cubin = r.u(4) != 0;
  c.ptx = r.str();
  c.cubin = r.str();
  c.log = r.str();
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) c.options.push_back(r.str());
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) {
    c.lowered_names.push_back(r.str());
    c.name_expressions.push_back(r.str());
    std::vector<ParamProbe> probes;
    for (uint64_t m = r.count(), j = 0; j < m && r.ok; ++j) {
      ParamProbe p;
      p.code = static_cast<TypeCode>(static_cast<int32_t>(r.u(4)));
      p.size = static_cast<uint32_t>(r.u(4));
      p.align = static_cast<uint32_t>(r.u(4));
      probes.push_back(p);
    }
    c.probes.push_back(std::move(probes));
  }
  if (!r.ok || r.pos != payload.size()) return std::nullopt;
  if (c.has_cubin == c.cubin.empty() || c.lowered_names.empty()) return std::nullopt;
  return c;
}

// --- DiskCache -------------------------------------------------------------------------------

DiskCache& DiskCache::instance() {
  static DiskCache* cache = new DiskCache();  // leaked: used by static destructors' threads
  return *cache;
}

DiskCache::DiskCache() { reset_from_environment(); }

void DiskCache::reset_from_environment() {
  CacheSettings s;
  if (const char* v = std::getenv("TORCH_CUDAJIT_CACHE")) s.enabled = !env_disables(v);
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
}

void DiskCache::warn_once(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(warned_.begin(), warned_.end(), what) != warned_.end()) return;
    warned_.push_back(what);
  }
  TORCH_WARN("torch_cudajit cache: ", what);
}

std::string DiskCache::usable_dir() {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!settings_.enabled) return "";
    if (!checked_dir_.empty()) return checked_dir_;
    dir = settings_.dir;
  }
  if (!make_dirs(dir, 0700)) {
    warn_once("cannot create the cache folder '" + dir + "' (" + errno_text() +
              "); kernels compile without the disk cache. Set TORCH_CUDAJIT_CACHE_DIR to a "
              "writable folder.");
    return "";
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    warn_once("the cache folder '" + dir + "' is not a folder owned by this user (uid " +
              std::to_string(geteuid()) + "); kernels compile without the disk cache. Set "
              "TORCH_CUDAJIT_CACHE_DIR to a folder of your own.");
    return "";
  }
  // Compiled code is loaded from here: nobody else may write into the folder. Folders the cache
  // creates are 0700; an existing folder is never chmod'ed (it may be /tmp, or shared on
  // purpose), and one that others can write is not used.
  if ((st.st_mode & 0022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    warn_once("the cache folder '" + dir + "' can be written by other users (mode " + mode +
              "), and compiled code is loaded from it; kernels compile without the disk cache. "
              "Set TORCH_CUDAJIT_CACHE_DIR to a folder only you can write (mode 0700 or 0755), "
              "or one that does not exist yet (it is created with mode 0700).");
    return "";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (settings_.dir == dir) checked_dir_ = dir;
  return dir;
}

std::string DiskCache::entry_path(const std::string& dir, const std::string& key) const {
  return dir + "/" + key + kEntrySuffix;
}

std::string DiskCache::key(const Program& program, const std::vector<InstantiationRequest>& requests,
                           const CompileOptions& options, std::string* inexact) const {
  Sha256 h;
  h.field("torch_cudajit cache").field(std::to_string(kFormatVersion));
  // The NVRTC library file stands for its version, its built-in headers and the targets it
  // supports (which decide between sm_XX and compute_XX for options.arch).
  h.field("nvrtc").field(detail::nvrtc_identity());
  h.field("arch").field(std::to_string(options.arch)).field("std").field(options.std);
  h.field(options.debug ? "debug" : "").field(options.lineinfo ? "lineinfo" : "");
  // The plugin's include folders come first, then the user's, in order (the order decides
  // which header wins). -D and -U of one macro name keep their order (a later one overrides an
  // earlier one), while different names commute; the other options are a set: the same options
  // in another order give the same key.
  std::vector<std::string> include_dirs = default_include_dirs();
  const size_t n_default = include_dirs.size();
  std::vector<std::string> macros, others, pre_included;
  for (size_t i = 0; i < options.extra.size(); ++i) {
    const std::string& o = options.extra[i];
    const bool has_value = i + 1 < options.extra.size();
    auto value_of = [&](const char* flag) -> std::optional<std::string> {
      const std::string f = flag;
      if (o == f && has_value) return options.extra[++i];
      if (f.size() > 2 && o.rfind(f + "=", 0) == 0) return o.substr(f.size() + 1);
      if (f.size() == 2 && o.size() > 2 && o.rfind(f, 0) == 0) return o.substr(2);
      return std::nullopt;
    };
    if (auto v = value_of("-I")) include_dirs.push_back(*v);
    else if (auto v = value_of("--include-path")) include_dirs.push_back(*v);
    else if (auto v = value_of("-D")) macros.push_back("-D" + *v);
    else if (auto v = value_of("--define-macro")) macros.push_back("-D" + *v);
    else if (auto v = value_of("-U")) macros.push_back("-U" + *v);
    else if (auto v = value_of("--undefine-macro")) macros.push_back("-U" + *v);
    else if (auto v = value_of("--pre-include")) pre_included.push_back(*v);
    else if (o == "-include" && has_value) pre_included.push_back(options.extra[++i]);
    else others.push_back(o);
  }
  std::sort(others.begin(), others.end());
  for (const auto& f : pre_included) others.push_back("--pre-include=" + f);  // in order
  auto macro_name = [](const std::string& m) { return m.substr(2, m.find_first_of("=(") - 2); };
  std::stable_sort(macros.begin(), macros.end(), [&](const std::string& a, const std::string& b) {
    return macro_name(a) < macro_name(b);
  });
  h.field("link");
  for (const auto& path : options.link) {
    std::string data;
    h.field(path).field(read_file(path, data) ? sha256_hex(data) : "unreadable");
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".cu") == 0) {
      std::vector<std::string> dirs = {dirname_of(path)};
      dirs.insert(dirs.end(), include_dirs.begin(), include_dirs.end());
      const std::string why = hash_headers(h, data, {}, dirs, n_default > 1 ? include_dirs[n_default - 1] : "");
      if (!why.empty()) {
        if (inexact) *inexact = why + " (in " + path + ")";
        return "";
      }
    }
  }
  if (!options.link.empty()) {
    const std::string jitlink = detail::nvjitlink().library_path;
    struct stat st;
    h.field(jitlink).field(stat(jitlink.c_str(), &st) == 0 ? std::to_string(st.st_size) + ":" +
                                                               std::to_string(st.st_mtim.tv_sec)
                                                         : "");
  }
  h.field("macros");
  for (const auto& m : macros) h.field(m);
  h.field("options");
  for (const auto& o : others) h.field(o);
  h.field("include dirs");
  for (const auto& d : include_dirs) h.field(d);
  const std::vector<Instantiation> insts = program.instantiations(requests);
  const std::string text = program.generated_source(requests, insts);
  h.field("source").field(program.filename()).field(text);
  h.field("name expressions");
  for (const auto& inst : insts) {
    h.field(inst.kernel_expression);
    for (const auto& p : inst.probe_expressions) h.field(p);
  }
  // The CUDA include folder is the last default one when the toolkit headers were found.
  const std::string toolkit = n_default > 1 ? include_dirs[n_default - 1] : "";
  const std::string why = hash_headers(h, text, pre_included, include_dirs, toolkit);
  if (!why.empty()) {
    if (inexact) *inexact = why;
    return "";
  }
  return h.hex_digest();
}

std::optional<CompiledProgram> DiskCache::load(const std::string& key) {
  const std::string dir = usable_dir();
  if (dir.empty()) return std::nullopt;
  const std::string path = entry_path(dir, key);
  Fd f(open_nonblocking(path, O_RDONLY | O_NOFOLLOW));
  if (f.fd < 0) return std::nullopt;  // the usual miss
  struct stat st;
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (st.st_uid != geteuid() || (st.st_mode & 0022) != 0) {
    warn_once("ignoring '" + path + "': it is owned by uid " + std::to_string(st.st_uid) +
              " with mode " + [&] {
                char m[8];
                std::snprintf(m, sizeof(m), "%04o", static_cast<unsigned>(st.st_mode & 07777));
                return std::string(m);
              }() + "; only files of this user (uid " + std::to_string(geteuid()) +
              ") that nobody else can write are loaded. The kernel is compiled again.");
    return std::nullopt;
  }
  std::string data;
  const char* problem = nullptr;
  if (!read_all(f.fd, data, static_cast<size_t>(st.st_size)) || data.size() < kHeaderSize ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    problem = "is truncated or not a torch_cudajit cache file";
  } else {
    Reader r{data, sizeof(kMagic)};
    const uint64_t version = r.u(4);
    r.u(4);
    const uint64_t length = r.u(8);
    if (version != kFormatVersion) {
      problem = "has another cache format version";
    } else if (length != data.size() - kHeaderSize) {
      problem = "is truncated";
    } else {
      std::string payload = data.substr(kHeaderSize);
      auto digest = Sha256().update(payload).digest();
      if (std::memcmp(digest.data(), data.data() + kHeaderSize - 32, 32) != 0) {
        problem = "is corrupted (its checksum does not match)";
      } else if (auto c = deserialize_compiled(key, payload)) {
        futimens(f.fd, nullptr);  // the modification time orders eviction (LRU)
        return c;
      } else {
        problem = "does not hold this kernel";
      }
    }
  }
  warn_once("ignoring '" + path + "': the file " + problem + ". The kernel is compiled again " +
            "and the file replaced.");
  return std::nullopt;
}

void DiskCache::store(const std::string& key, const CompiledProgram& compiled) {
  const std::string dir = usable_dir();
  if (dir.empty()) return;
  const std::string payload = serialize_compiled(key, compiled);
  std::string data(kMagic, sizeof(kMagic));
  put_u32(data, kFormatVersion);
  put_u32(data, 0);
  put_u64(data, payload.size());
  auto digest = Sha256().update(payload).digest();
  data.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  data += payload;

  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          (uint64_t(::getpid()) << 32));
  const std::string tmp = dir + "/." + key + "." + std::to_string(::getpid()) + "." +
                          std::to_string(rng()) + kTempSuffix;
  {
    Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (f.fd < 0 || !write_all(f.fd, data.data(), data.size())) {
      warn_once("cannot write to the cache folder '" + dir + "' (" + errno_text() +
                "); compiled kernels are not saved.");
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), entry_path(dir, key).c_str()) != 0) {
    warn_once("cannot rename a cache file in '" + dir + "' (" + errno_text() + ").");
    ::unlink(tmp.c_str());
    return;
  }
  int64_t bound;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bound = settings_.max_bytes;
  }
  // Eviction scans the folder; that happens only after a compile, which costs far more.
  int64_t total = 0;
  for (const auto& e : list_dir(dir))
    if (is_cache_file(e.name, kEntrySuffix)) total += e.size;
  if (total > bound) prune(bound, /*keep_newest=*/true);  // it was just compiled
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
    if (is_cache_file(e.name, kEntrySuffix)) {
      out.entries += 1;
      out.bytes += e.size;
    }
  return out;
}

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
    if ((is_cache_file(e.name, kEntrySuffix) || is_cache_file(e.name, kTempSuffix)) &&
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
    if (is_cache_file(e.name, kEntrySuffix)) {
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
    out.entries += 1;
  }
  out.bytes = total;
  return out;
}

CompiledProgram compile_cached(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, bool use_cache,
                               CacheOutcome* outcome) {
  CacheOutcome unused;
  CacheOutcome& result = outcome ? *outcome : unused;
  result = CacheOutcome::kBypassed;
  DiskCache& cache = DiskCache::instance();
  if (!use_cache || !cache.usable()) return program.compile(requests, options);
  std::string inexact;
  const std::string key = cache.key(program, requests, options, &inexact);
  if (key.empty()) {
    cache.warn_once(
        "kernel '" + requests.front().kernel + "': `" + inexact + "` names a header through a "
        "macro, so the cache cannot tell which files the compiler reads; it compiles without the disk cache. Write the header's name in the "
        "#include line to cache it.");
    return program.compile(requests, options);
  }
  // An entry must hold one instantiation per request, with one probe per parameter.
  auto fits = [&](const std::optional<CompiledProgram>& c) {
    if (!c || c->lowered_names.size() != requests.size() || c->probes.size() != requests.size())
      return false;
    for (size_t i = 0; i < requests.size(); ++i)
      if (c->probes[i].size() != requests[i].key.size) return false;
    return true;
  };
  auto found = cache.load(key);
  if (found && !fits(found)) found.reset();
  if (!found) {
    // Processes that start together queue here; all but the first then find the file.
    DiskCache::KeyLock lock = cache.lock(key);
    found = cache.load(key);
    if (found && !fits(found)) found.reset();
    if (!found) {
      result = CacheOutcome::kMiss;
      cache.counters().misses++;
      CompiledProgram compiled = program.compile(requests, options);
      cache.store(key, compiled);
      return compiled;
    }
  }
  result = CacheOutcome::kHit;
  cache.counters().hits++;
  return std::move(*found);
}

}  // namespace torch_cudajit
