// torch_cudajit: the files a program depends on (see dependencies.h): digests remembered per
// file identity, checks of recorded lists, and the manifest's byte format.
#include "dependencies.h"

#include "file_io.h"
#include "sha256.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

namespace torch_cudajit {
namespace {

using detail::ByteReader;
using detail::put_str;
using detail::put_u64;

constexpr const char* kManifestTag = "torch_cudajit manifest 1";

// A file's identity as stat gives it; a digest is remembered only while it is unchanged.
struct Identity {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t size = -1;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const Identity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
};

int64_t ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

bool identity_of(const std::string& path, Identity& id) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  id = {st.st_dev, st.st_ino, static_cast<int64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
  return true;
}

struct Remembered {
  Identity id;
  std::string digest;
};

std::mutex& memo_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, Remembered>& memo() {
  static auto* m = new std::unordered_map<std::string, Remembered>();  // used during exit
  return *m;
}

}  // namespace

std::string content_digest(const std::string& path) {
  Identity id;
  if (!identity_of(path, id)) return "";
  {
    std::lock_guard<std::mutex> lock(memo_mutex());
    auto it = memo().find(path);
    if (it != memo().end() && it->second.id == id) return it->second.digest;
  }
  std::string text;
  if (!detail::read_file(path, text)) return "";
  Identity after;
  // Read while being written: the digest stands for no state of the file.
  if (!identity_of(path, after) || !(after == id)) return "";
  std::string digest = sha256_hex(text);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  if (now - std::max(id.mtime_ns, id.ctime_ns) > 1000000000) {
    std::lock_guard<std::mutex> lock(memo_mutex());
    memo()[path] = {id, digest};
  }
  return digest;
}

std::string key_digest(const std::string& path, const std::string& toolkit_dir) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return "dir:" + std::to_string(st.st_ino) + ":" + std::to_string(ns(st.st_mtim));
  if (detail::under_folder(path, toolkit_dir)) {
    Identity id;
    if (!identity_of(path, id)) return "";
    return "stat:" + std::to_string(id.size) + ":" + std::to_string(id.mtime_ns);
  }
  return content_digest(path);
}

bool files_unchanged(const std::vector<FileDigest>& files, const std::string& toolkit_dir) {
  for (const FileDigest& f : files)
    if (key_digest(f.path, toolkit_dir) != f.digest) return false;
  return true;
}

Dependencies dependencies_of(const std::vector<std::pair<std::string, std::string>>& read,
                             const std::string& toolkit_dir) {
  Dependencies out;
  for (const auto& [path, bytes_digest] : read) {
    FileDigest f{path, key_digest(path, toolkit_dir)};
    // What the parse read must be what the file holds now; toolkit files are pinned by the
    // NVRTC version and are not read again.
    const bool same = !f.digest.empty() &&
                      (detail::under_folder(path, toolkit_dir) || bytes_digest.empty() ||
                       bytes_digest == f.digest);
    if (!same && out.inexact.empty())
      out.inexact = "'" + path + "' changed while it was read";
    out.files.push_back(std::move(f));
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const FileDigest& a, const FileDigest& b) { return a.path < b.path; });
  out.files.erase(std::unique(out.files.begin(), out.files.end()), out.files.end());
  return out;
}

void Dependencies::hash_into(Sha256& h) const {
  h.field("files").field(std::to_string(files.size()));
  for (const FileDigest& f : files) h.field(f.path).field(f.digest);
}

std::string encode_manifest(const std::string& key,
                            const std::vector<std::vector<FileDigest>>& entries) {
  std::string out;
  put_str(out, kManifestTag);
  put_str(out, key);
  put_u64(out, entries.size());
  for (const auto& files : entries) {
    put_u64(out, files.size());
    for (const FileDigest& f : files) {
      put_str(out, f.path);
      put_str(out, f.digest);
    }
  }
  return out;
}

std::optional<std::vector<std::vector<FileDigest>>> decode_manifest(const std::string& key,
                                                                     const std::string& bytes) {
  ByteReader r{bytes};
  if (r.str() != kManifestTag || !r.ok || r.str() != key || !r.ok) return std::nullopt;
  std::vector<std::vector<FileDigest>> entries;
  // Counts are bounded by the bytes left (ByteReader::count): a damaged count cannot allocate.
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) {
    std::vector<FileDigest> files;
    for (uint64_t m = r.count(), j = 0; j < m && r.ok; ++j) {
      FileDigest f;
      f.path = r.str();
      f.digest = r.str();
      files.push_back(std::move(f));
    }
    entries.push_back(std::move(files));
  }
  if (!r.ok || r.pos != bytes.size()) return std::nullopt;
  return entries;
}

}  // namespace torch_cudajit
