// torch_cudajit C++ tests: lazily loaded NVRTC and CUDA driver (csrc/cuda_api.h): NVRTC loads
// without a GPU, CJ_CHECK turns failures into c10::Error naming the API, and the driver is
// reported unavailable (not fatal) on machines without one.
#include "cuda_api.h"

#include "module.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;

TEST(CudaApiTest, NvrtcLoads) {
  const detail::NvrtcApi& api = detail::nvrtc();
  EXPECT_FALSE(api.library_path.empty());
  CJ_EXPECT_CONTAINS(api.library_path, "libnvrtc.so");
  EXPECT_NE(api.nvrtcCompileProgram, nullptr);
  EXPECT_NE(api.nvrtcGetCUBIN, nullptr);
  // Loaded once: the same table every time.
  EXPECT_EQ(&detail::nvrtc(), &api);
}

TEST(CudaApiTest, NvrtcVersionAndArchs) {
  int version = detail::nvrtc_version();
  EXPECT_GE(version, 12000);
  int major = 0, minor = 0;
  CJ_CHECK(nvrtcVersion, &major, &minor);
  EXPECT_EQ(version, major * 1000 + minor * 10);
  std::vector<int> archs = detail::nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  for (int a : archs) {
    SCOPED_TRACE("arch " + std::to_string(a));
    EXPECT_GE(a, 30);
    EXPECT_LT(a, 1000);
  }
}

TEST(CudaApiTest, CheckThrowsNamingTheApi) {
  // NVRTC validates its arguments: a null program is NVRTC_ERROR_INVALID_PROGRAM (or
  // _INVALID_INPUT), without any compilation.
  size_t size = 0;
  std::string msg = expect_throws<c10::Error>([&] { CJ_CHECK(nvrtcGetPTXSize, nullptr, &size); });
  CJ_EXPECT_CONTAINS(msg, "torch_cudajit: nvrtcGetPTXSize failed with NVRTC_ERROR_INVALID");
  CJ_EXPECT_CONTAINS(msg, "cuda_api_test.cpp:");
}

TEST(CudaApiTest, NvrtcErrorMessages) {
  struct Case {
    nvrtcResult result;
    const char* name;
  };
  const std::vector<Case> cases = {
      {NVRTC_ERROR_OUT_OF_MEMORY, "NVRTC_ERROR_OUT_OF_MEMORY"},
      {NVRTC_ERROR_INVALID_INPUT, "NVRTC_ERROR_INVALID_INPUT"},
      {NVRTC_ERROR_COMPILATION, "NVRTC_ERROR_COMPILATION"},
      {NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID, "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string msg = expect_throws<c10::Error>(
        [&] { detail::throw_api_error("nvrtcSomething", c.result, "file.cpp", 42); });
    CJ_EXPECT_CONTAINS(msg, std::string("nvrtcSomething failed with ") + c.name);
    CJ_EXPECT_CONTAINS(msg, "(code " + std::to_string(static_cast<int>(c.result)) + ")");
    CJ_EXPECT_CONTAINS(msg, "at file.cpp:42");
  }
}

TEST(CudaApiTest, DriverErrorMessages) {
  std::string msg = expect_throws<c10::Error>(
      [] { detail::throw_api_error("cuLaunchKernel", CUDA_ERROR_INVALID_VALUE, "file.cpp", 7); });
  CJ_EXPECT_CONTAINS(msg, "cuLaunchKernel failed with ");
  CJ_EXPECT_CONTAINS(msg, "code 1)");
  CJ_EXPECT_CONTAINS(msg, "at file.cpp:7");
  if (detail::driver_available()) CJ_EXPECT_CONTAINS(msg, "CUDA_ERROR_INVALID_VALUE");
}

TEST(CudaApiTest, DriverAvailabilityIsConsistent) {
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(detail::driver_available());
  }
  if (detail::driver_available()) {
    const detail::DriverApi& api = detail::driver();
    EXPECT_NE(api.cuLaunchKernel, nullptr);
    EXPECT_NE(api.cuLibraryLoadData, nullptr);
    int version = 0;
    CJ_CHECK(cuDriverGetVersion, &version);
    EXPECT_GE(version, 12000);
  } else {
    // No GPU: asking for the driver explains that compiling still works.
    std::string msg = expect_throws<c10::Error>([] { detail::driver(); });
    CJ_EXPECT_CONTAINS(msg, "cannot launch kernels");
    CJ_EXPECT_CONTAINS(msg, "works without a GPU");
  }
}

// The device of the context current on this thread, which the front end reads sources for: 0
// with none; with one (made current by a tensor on the GPU), that device's compute capability.
TEST(CudaApiTest, CurrentContextArchitecture) {
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(detail::current_context_arch(), 0);
    return;
  }
  at::empty({1}, at::TensorOptions().device(at::Device(at::kCUDA, 0))).fill_(1);
  EXPECT_EQ(detail::current_context_arch(), device_limits(0).compute_capability);
}

TEST(CudaApiTest, ExtraSearchPathsAreHarmless) {
  detail::add_library_search_path("/nonexistent/torch_cudajit/lib");
  EXPECT_GE(detail::nvrtc_version(), 12000);
}

}  // namespace
}  // namespace torch_cudajit
