// torch_cudajit C++ tests: helpers shared by the *_test.cpp files (exception matching, keys,
// launch arguments, GPU skipping).
#pragma once

#include "cuda_api.h"
#include "kernel_runtime.h"
#include "program.h"
#include "reading.h"
#include "specialization.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <dirent.h>
#include <stdlib.h>

#include <fstream>
#include <initializer_list>
#include <string>
#include <typeinfo>

namespace torch_cudajit {
namespace cjtest {

/// Runs `fn`, expects it to throw E (c10::ValueError, c10::TypeError, CompileError, or any
/// c10::Error when E is c10::Error itself) and returns its message without the C++ backtrace;
/// records a failure otherwise.
template <class E, class F>
std::string expect_throws(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << typeid(e).name() << ": "
                  << (c10_error ? c10_error->what_without_backtrace() : e.what());
    return {};
  }
  ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  return {};
}

/// Expects `text` to contain `part`.
#define CJ_EXPECT_CONTAINS(text, part)                                                   \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                             \
      << "expected to find: " << (part) << "\nin:\n"                                       \
      << (text)

/// The kernels of a source as the plugin reflects them: the front end with the include folders,
/// macros and standard a kernel with default options compiles with. Fragments may name types
/// they do not declare: their parameters are classified from the text, as when a header is
/// missing (jit refuses such declarations).
inline std::vector<KernelDecl> reflect(const std::string& source) {
  return reflect_kernels(source, frontend_args({}, "c++17"), "kernel.cu", nullptr,
                         /*refuse_errors=*/false);
}

/// A fresh folder under /tmp.
inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/cj_test_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "/tmp";
}

/// Writes `text` to `path`, replacing what was there.
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

/// The files of `dir` whose names end with `suffix`, as paths.
inline std::vector<std::string> files_with(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && name.size() >= suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  return out;
}

/// An ArgSig for a tensor argument.
inline ArgSig tensor_sig(TypeCode dtype, int rank, bool contiguous = true) {
  ArgSig s;
  s.kind = ArgKind::kTensor;
  s.dtype = dtype;
  s.rank = static_cast<uint8_t>(rank);
  s.flags = contiguous ? kContiguousFlag : 0;
  return s;
}

/// tensor_sig with the flags the call binder gives an ordinary tensor: 16-byte aligned data and 32-bit
/// offsets (tensor_sig alone stands for an unaligned tensor with 64-bit offsets).
inline ArgSig aligned_sig(TypeCode dtype, int rank, bool contiguous = true) {
  ArgSig s = tensor_sig(dtype, rank, contiguous);
  s.flags |= kAligned16Flag | kIndex32Flag;
  return s;
}

/// An ArgSig for a Python-number argument (kInt, kFloat, kBool, kComplex).
inline ArgSig number_sig(ArgKind kind) {
  ArgSig s;
  s.kind = kind;
  return s;
}

inline SpecKey make_spec_key(int arch, std::initializer_list<ArgSig> args) {
  SpecKey k;
  k.arch = arch;
  for (const ArgSig& a : args) k.args[k.size++] = a;
  return k;
}

inline Arg int_arg(int64_t v) {
  Arg a;
  a.kind = ArgKind::kInt;
  a.i = v;
  return a;
}
inline Arg float_arg(double v) {
  Arg a;
  a.kind = ArgKind::kFloat;
  a.d = v;
  return a;
}
inline Arg bool_arg(bool v) {
  Arg a;
  a.kind = ArgKind::kBool;
  a.i = v;
  return a;
}

/// The runtime of kernel `name` of `source`.
inline std::shared_ptr<KernelRuntime> make_runtime(const std::string& source,
                                                   const std::string& name,
                                                   KernelOptions options = {}) {
  return std::make_shared<KernelRuntime>(std::make_shared<const KernelDefinition>(
      read_program(source), name, std::move(options)));
}

/// The first line of a compiler log that reports an error (for short messages).
inline std::string first_error_line(const std::string& log) {
  size_t at = log.find("error");
  if (at == std::string::npos) return log.substr(0, log.find('\n'));
  size_t begin = log.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return log.substr(begin, log.find('\n', at) - begin);
}

/// True when kernels can be launched here: torch sees a GPU and the driver API loads.
inline bool gpu_available() {
  return torch::cuda::is_available() && detail::driver_available();
}

/// A one-template source the cache and job-store tests compile: scale<T>(out, x, a).
inline constexpr const char* kScaleSource = R"(
template <typename T>
__global__ void scale(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < x.size(0)) out[i] = a * x[i];
}
)";

/// The request for kScaleSource's scale<T> on 1-d tensors of `dtype` and a float, for sm_90.
inline InstantiationRequest scale_request(TypeCode dtype) {
  return {"scale", make_spec_key(90, {tensor_sig(dtype, 1), tensor_sig(dtype, 1), number_sig(ArgKind::kFloat)}), ""};
}

}  // namespace cjtest
}  // namespace torch_cudajit

/// Skips the current test when there is no CUDA GPU.
#define CJ_SKIP_WITHOUT_GPU()                                                         \
  do {                                                                                \
    if (!::torch_cudajit::cjtest::gpu_available())                                   \
      GTEST_SKIP() << "no CUDA GPU (torch::cuda::is_available() is false)";           \
  } while (0)
