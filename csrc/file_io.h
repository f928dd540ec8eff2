// torch_cudajit: POSIX file helpers and a little-endian record format, shared by the disk
// cache's byte store (cache.cpp), its key (cache_key.cpp) and the compile records it stores
// (compile_cache.cpp). Reads open files without blocking, so a FIFO named like a header or an
// entry cannot hang a compile.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace torch_cudajit::detail {

/// An owned file descriptor, closed on destruction.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  ~Fd();
};

/// Reads exactly `size` bytes into `out`; false on error or early end of file.
bool read_all(int fd, std::string& out, size_t size);
/// Writes all of `data`; false on error.
bool write_all(int fd, const char* data, size_t size);
/// Opens an existing file without blocking (callers check S_ISREG with fstat).
int open_nonblocking(const std::string& path, int flags);
/// The whole of a regular file; false when it cannot be opened or is not a regular file.
bool read_file(const std::string& path, std::string& out);
/// True when something exists at `path` (a file or a folder).
bool file_exists(const std::string& path);
/// The folder part of a path ("." for a bare name).
std::string dirname_of(const std::string& path);
/// True when `path` lies in the folder `dir` or below it ("" is no folder).
bool under_folder(const std::string& path, const std::string& dir);
/// strerror(errno).
std::string errno_text();
/// The folder for temporary files: $TMPDIR, or /tmp.
std::string temp_folder();
/// Removes a folder that holds only files, with them.
void remove_flat_folder(const std::string& folder);
/// Removes the folders in `tmp` whose names are `prefix` followed by a process id (and anything
/// after it), owned by this user, whose process no longer exists: what killed processes leave
/// behind. Returns how many went.
int sweep_dead_process_folders(const std::string& tmp, const std::string& prefix);

/// Appends a little-endian integer or a length-prefixed string.
void put_u32(std::string& out, uint32_t v);
void put_u64(std::string& out, uint64_t v);
void put_str(std::string& out, const std::string& s);

/// Reads what put_* wrote. Any read past the end clears `ok` and returns zero or empty values,
/// so a caller checks `ok` once at the end.
struct ByteReader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  uint64_t u(int bytes);
  std::string str();
  /// A count that cannot exceed what is left (guards against huge allocations).
  uint64_t count();
};

}  // namespace torch_cudajit::detail
