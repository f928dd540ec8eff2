// torch_cudajit: POSIX file helpers and little-endian records (see file_io.h).
#include "file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace torch_cudajit::detail {

Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

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

bool file_exists(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0;
}

std::string dirname_of(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

bool under_folder(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

std::string errno_text() { return std::strerror(errno); }

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

uint64_t ByteReader::u(int bytes) {
  if (!ok || s.size() - pos < static_cast<size_t>(bytes)) {
    ok = false;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(s[pos + i])) << (8 * i);
  pos += bytes;
  return v;
}
std::string ByteReader::str() {
  uint64_t n = u(8);
  if (!ok || s.size() - pos < n) {
    ok = false;
    return {};
  }
  std::string v = s.substr(pos, n);
  pos += n;
  return v;
}
uint64_t ByteReader::count() {
  uint64_t n = u(8);
  if (n > s.size() - pos) ok = false;
  return ok ? n : 0;
}

std::string temp_folder() {
  const char* env = std::getenv("TMPDIR");
  return env != nullptr && *env != '\0' ? env : "/tmp";
}

void remove_flat_folder(const std::string& folder) {
  if (DIR* d = opendir(folder.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        unlink((folder + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(folder.c_str());
}

int sweep_dead_process_folders(const std::string& tmp, const std::string& prefix) {
  DIR* d = opendir(tmp.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    struct stat st;
    const std::string folder = tmp + "/" + name;
    if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) ||
        lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      continue;
    remove_flat_folder(folder);
    removed += !file_exists(folder);
  }
  closedir(d);
  return removed;
}

}  // namespace torch_cudajit::detail
