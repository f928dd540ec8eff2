// torch_cudajit C++ tests: NVRTC, nvJitLink and CUDA driver entry points (csrc/cuda_api.h):
// NVRTC loads without a GPU, each entry point is resolved when first called (a library that lacks
// one fails only its calls, naming it), CJ_CHECK turns failures into c10::Error naming the API,
// and the driver is reported unavailable (not fatal) on machines without one.
#include "cuda_api.h"

#include "file_io.h"
#include "module.h"
#include "test_util.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
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

TEST(CudaApiTest, LibraryFileFoundAgreesWithTheLoadedNvrtc) {
  // The loaded NVRTC came from an absolute candidate here (toolkit or wheel), so the check that
  // reads the same candidates without loading finds it too.
  if (detail::nvrtc().library_path.find('/') != std::string::npos)
    EXPECT_TRUE(detail::library_file_found("nvrtc"));
  const std::string msg = expect_throws<c10::Error>([] { detail::library_file_found("cublas"); });
  CJ_EXPECT_CONTAINS(msg, "unknown library 'cublas'; expected 'nvrtc' or 'nvJitLink'");
}

TEST(CudaApiTest, NvJitLinkComesFromTheFolderOfTheNvrtcInUse) {
  // nvJitLink must be at least as new as the NVRTC whose LTO-IR it links: the one beside the
  // loaded NVRTC wins over an older toolkit's on the dynamic linker's path (torch's wheels bring
  // a newer NVRTC than the toolkit the machine has).
  const std::string nvrtc = detail::nvrtc_library_file();
  ASSERT_NE(nvrtc.find('/'), std::string::npos) << nvrtc;
  const std::string beside = nvrtc.substr(0, nvrtc.rfind('/') + 1) + "libnvJitLink.so.13";
  if (!detail::file_exists(beside)) GTEST_SKIP() << "no libnvJitLink.so.13 beside " << nvrtc;
  EXPECT_EQ(detail::nvjitlink().library_path, beside);
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

// A real library (NVRTC or nvJitLink, already open in this process) that lacks the entry points
// in `lacking`, and records every entry point looked up in it.
class LackingLibrary final : public detail::Library {
 public:
  LackingLibrary(const std::string& file, std::set<std::string> lacking)
      : file_(file), lacking_(std::move(lacking)),
        handle_(dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD)) {}
  ~LackingLibrary() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  const std::string& file() const override { return file_; }
  void* find(const char* name) const noexcept override {
    looked_up.push_back(name);
    if (lacking_.count(name) != 0) return nullptr;
    for (const char* suffix : {"_13_0", "_12_0", ""}) {
      const std::string symbol = (*suffix ? std::string("__") : std::string()) + name + suffix;
      if (void* p = dlsym(handle_, symbol.c_str())) return p;
    }
    return nullptr;
  }
  std::string advice() const override { return "install a complete library."; }
  bool opened() const { return handle_ != nullptr; }

  mutable std::vector<std::string> looked_up;

 private:
  std::string file_;
  std::set<std::string> lacking_;
  void* handle_;
};

TEST(CudaApiTest, EntryPointsResolveWhenFirstCalled) {
  // An NVRTC without the LTO-IR and CUBIN entry points still compiles to PTX: nothing is looked
  // up when the table is made, and each entry point once, when first called.
  LackingLibrary library(detail::nvrtc().library_path,
                         {"nvrtcGetLTOIRSize", "nvrtcGetLTOIR", "nvrtcGetCUBIN"});
  ASSERT_TRUE(library.opened());
  const detail::NvrtcApi api(library);
  EXPECT_TRUE(library.looked_up.empty());
  EXPECT_EQ(api.library_path, detail::nvrtc().library_path);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    nvrtcProgram prog = nullptr;
    ASSERT_EQ(api.nvrtcCreateProgram(&prog, "extern \"C\" __global__ void k() {}", "k.cu", 0,
                                     nullptr, nullptr),
              NVRTC_SUCCESS);
    EXPECT_EQ(api.nvrtcCompileProgram(prog, 0, nullptr), NVRTC_SUCCESS);
    size_t size = 0;
    EXPECT_EQ(api.nvrtcGetPTXSize(prog, &size), NVRTC_SUCCESS);
    std::string ptx(size, '\0');
    EXPECT_EQ(api.nvrtcGetPTX(prog, &ptx[0]), NVRTC_SUCCESS);
    CJ_EXPECT_CONTAINS(ptx, ".entry k");
    EXPECT_EQ(api.nvrtcDestroyProgram(&prog), NVRTC_SUCCESS);
  }
  EXPECT_EQ(library.looked_up,
            (std::vector<std::string>{"nvrtcCreateProgram", "nvrtcCompileProgram",
                                      "nvrtcGetPTXSize", "nvrtcGetPTX", "nvrtcDestroyProgram"}));
  // A lacking entry point fails its own calls, each time, naming it and the library.
  EXPECT_TRUE(api.nvrtcGetCUBIN == nullptr);
  EXPECT_FALSE(api.nvrtcGetCUBIN.available());
  for (int round = 0; round < 2; ++round) {
    size_t size = 0;
    std::string msg = expect_throws<c10::Error>([&] { api.nvrtcGetLTOIRSize(nullptr, &size); });
    EXPECT_EQ(msg, "torch_cudajit: " + detail::nvrtc().library_path +
                       " has no entry point nvrtcGetLTOIRSize; install a complete library.");
  }
  EXPECT_EQ(library.looked_up.size(), 7u) << "a lacking entry point is looked up once too";
}

TEST(CudaApiTest, MissingEntryPointSaysWhichLibraryAndWhatToDo) {
  // The libraries the tables use: an entry point none of them has.
  const detail::EntryPoint<nvrtcResult (*)(int*)> missing(detail::nvrtc_library(),
                                                          "nvrtcNoSuchEntryPoint");
  EXPECT_FALSE(missing.available());
  std::string msg = expect_throws<c10::Error>([&] {
    int x = 0;
    CJ_CHECK(nvrtcVersion, &x, &x);  // the table's own entry points are unaffected
    missing(&x);
  });
  CJ_EXPECT_CONTAINS(msg, "torch_cudajit: " + detail::nvrtc().library_path +
                              " has no entry point nvrtcNoSuchEntryPoint; this feature needs a "
                              "newer NVRTC (libnvrtc.so): install CUDA 12.0 or newer");
  CJ_EXPECT_CONTAINS(msg, "nvidia-cuda-nvrtc wheel");
}

TEST(CudaApiTest, LinkingNeedsOnlyTheEntryPointsItCalls) {
  std::string file;
  try {
    file = detail::nvjitlink().library_path;
  } catch (const c10::Error&) {
    GTEST_SKIP() << "nvJitLink is not installed";
  }
  // Without the error log entry points, a linker is still made and destroyed.
  LackingLibrary library(file, {"nvJitLinkGetErrorLogSize", "nvJitLinkGetErrorLog"});
  ASSERT_TRUE(library.opened());
  const detail::NvJitLinkApi api(library);
  const char* options[] = {"-arch=sm_90"};
  nvJitLinkHandle handle = nullptr;
  ASSERT_EQ(api.nvJitLinkCreate(&handle, 1, options), NVJITLINK_SUCCESS);
  EXPECT_EQ(api.nvJitLinkDestroy(&handle), NVJITLINK_SUCCESS);
  EXPECT_EQ(library.looked_up, (std::vector<std::string>{"nvJitLinkCreate", "nvJitLinkDestroy"}));
  size_t size = 0;
  CJ_EXPECT_CONTAINS(expect_throws<c10::Error>([&] { api.nvJitLinkGetErrorLogSize(handle, &size); }),
                     "has no entry point nvJitLinkGetErrorLogSize");
  // The real library's message names what provides nvJitLink.
  const detail::EntryPoint<nvJitLinkResult (*)()> missing(detail::nvjitlink_library(),
                                                          "nvJitLinkNoSuchEntryPoint");
  CJ_EXPECT_CONTAINS(expect_throws<c10::Error>([&] { missing(); }),
                     file + " has no entry point nvJitLinkNoSuchEntryPoint; this feature needs a "
                            "newer nvJitLink (libnvJitLink.so)");
}

TEST(CudaApiTest, ExtraSearchPathsAreHarmless) {
  detail::add_library_search_path("/nonexistent/torch_cudajit/lib");
  EXPECT_GE(detail::nvrtc_version(), 12000);
}

}  // namespace
}  // namespace torch_cudajit
