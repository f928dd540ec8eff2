// torch_cudajit: the error a debug-mode launch raises when a kernel's bounds check or
// cj_assert fails (the device side is in cj/cj.cuh, the reading of its record in
// debug_record.cpp).
#pragma once

#include <c10/util/Exception.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_cudajit {

/// A failed bounds check or cj_assert in a debug-mode launch (jit(..., debug=True)). The
/// message names the kernel, the source file and line, the thread and block and, for bounds,
/// the index, the dimension and the array's shape. The CUDA context stays usable.
class KernelAssertionError : public c10::Error {
 public:
  KernelAssertionError(std::string message, std::string kernel_name, std::string file, int line,
                       std::array<unsigned, 3> thread, std::array<unsigned, 3> block,
                       bool bounds, int64_t index, int dim, std::vector<int64_t> shape);
  const std::string& kernel_name() const { return kernel_name_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::array<unsigned, 3>& thread() const { return thread_; }
  const std::array<unsigned, 3>& block() const { return block_; }
  bool bounds() const { return bounds_; }
  int64_t index() const { return index_; }
  int dim() const { return dim_; }
  const std::vector<int64_t>& shape() const { return shape_; }

 private:
  std::string kernel_name_, file_;
  int line_;
  std::array<unsigned, 3> thread_, block_;
  bool bounds_;
  int64_t index_;
  int dim_;
  std::vector<int64_t> shape_;
};

}  // namespace torch_cudajit
