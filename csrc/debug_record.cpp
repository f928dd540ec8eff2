// torch_cudajit: the debug-record protocol (see launch.h): a bounds-checked or cj_assert
// kernel (jit(..., debug=True)) writes its first failure into cj_debug_record; after the launch
// the host reads it and raises KernelAssertionError naming the kernel, the place and the index.
#include "launch.h"

#include "cj/abi.h"
#include "cuda_api.h"

#include <algorithm>
#include <sstream>

namespace torch_cudajit {

namespace {

// The record the kernel writes (cj/abi.h, which checks its layout on both sides).
using cj::abi::DebugRecord;

}  // namespace

KernelAssertionError::KernelAssertionError(std::string message, std::string kernel_name,
                                           std::string file, int line,
                                           std::array<unsigned, 3> thread,
                                           std::array<unsigned, 3> block, bool bounds,
                                           int64_t index, int dim, std::vector<int64_t> shape)
    : c10::Error(std::move(message), /*backtrace=*/nullptr),
      kernel_name_(std::move(kernel_name)),
      file_(std::move(file)),
      line_(line),
      thread_(thread),
      block_(block),
      bounds_(bounds),
      index_(index),
      dim_(dim),
      shape_(std::move(shape)) {}

void detail::check_debug_record(const std::string& kernel, CUdeviceptr ptr, size_t size,
                                CUstream stream) {
  // Reading the record needs a synchronization, which a CUDA graph capture forbids.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CJ_CHECK(cuStreamIsCapturing, stream, &capture);
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return;
  TORCH_INTERNAL_ASSERT(size == sizeof(DebugRecord), "cj_debug_record is ", size,
                        " bytes; the host expects ", sizeof(DebugRecord));
  CJ_CHECK(cuStreamSynchronize, stream);
  DebugRecord r;
  CJ_CHECK(cuMemcpyDtoH, &r, ptr, sizeof(r));
  if (r.kind == 0) return;
  r.file[sizeof(r.file) - 1] = 0;
  r.message[sizeof(r.message) - 1] = 0;
  std::ostringstream where;
  where << r.file << ":" << r.line << " in thread (" << r.thread[0] << ", " << r.thread[1] << ", "
        << r.thread[2] << ") of block (" << r.block[0] << ", " << r.block[1] << ", " << r.block[2]
        << ")";
  std::ostringstream os;
  std::vector<int64_t> shape;
  if (r.kind == cj::abi::kDebugBounds) {
    const int rank = std::max(0, std::min<int>(r.rank, cj::abi::kDebugShapeDims));
    shape.assign(r.shape, r.shape + rank);
    os << "torch_cudajit: kernel '" << kernel << "' indexed out of bounds at " << where.str()
       << ": index " << r.index << " is outside dimension " << r.dim << " of size "
       << (r.dim >= 0 && r.dim < rank ? r.shape[r.dim] : -1) << " of an array of shape [";
    for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << r.shape[d];
    os << "]. The access was not performed; the CUDA context is still usable.";
  } else {
    std::string text(r.message);
    const size_t sep = text.find(cj::abi::kDebugMessageSeparator);
    const std::string condition = sep == std::string::npos ? text : text.substr(0, sep);
    const std::string message = sep == std::string::npos ? "" : text.substr(sep + 1);
    os << "torch_cudajit: kernel '" << kernel << "' failed cj_assert(" << condition
       << ") at " << where.str() << ": " << message
       << ". The CUDA context is still usable.";
  }
  throw KernelAssertionError(os.str(), kernel, r.file, static_cast<int>(r.line),
                             {r.thread[0], r.thread[1], r.thread[2]},
                             {r.block[0], r.block[1], r.block[2]}, r.kind == cj::abi::kDebugBounds, r.index, r.dim,
                             std::move(shape));
}

}  // namespace torch_cudajit
