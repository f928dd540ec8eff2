// torch_cudajit C++ tests: device_pass.cpp, the device side of a whole CUDA file (what nvcc's
// device pass compiles), table-driven over the parts of a .cu file, and the struct layouts of
// struct_layout.cpp.
#include "definition.h"
#include "device_pass.h"
#include "struct_layout.h"
#include "test_util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;

// A folder of files for one test, removed at the end.
class Folder {
 public:
  Folder() {
    char tmpl[] = "/tmp/cj_device_pass_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~Folder() { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

 private:
  std::string dir_;
};

bool has_kernel(const Program& p, const std::string& name) {
  for (const auto& k : p.kernels())
    if (k.name == name) return true;
  return false;
}

size_t line_of(const std::string& text, const std::string& part) {
  const size_t at = text.find(part);
  if (at == std::string::npos) return 0;
  return static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n')) + 1;
}

struct Case {
  const char* name;
  const char* source;
  std::vector<const char*> kept;     // must be in the device source, on the same line
  std::vector<const char*> dropped;  // must not be in it
  const char* note = "";             // a note must contain this
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"host function and main",
       "#include <stdio.h>\n"
       "__global__ void k(float* x) { x[0] = 1; }\n"
       "void launch(float* x) { k<<<1, 1>>>(x); cudaDeviceSynchronize(); }\n"
       "int main() { float* d; cudaMalloc(&d, 4); launch(d); return 0; }\n",
       {"__global__ void k(float* x)"},
       {"launch(float", "int main", "cudaMalloc"}},
      {"device functions and variables",
       "__device__ float twice(float v) { return 2 * v; }\n"
       "__host__ __device__ int both(int v) { return v; }\n"
       "__constant__ float coeffs[4];\n"
       "__device__ int counter;\n"
       "__managed__ int shared_flag;\n"
       "__global__ void k(float* x) { x[0] = twice(coeffs[both(0)]) + counter + shared_flag; }\n",
       {"__device__ float twice", "__host__ __device__ int both", "__constant__ float coeffs[4];",
        "__device__ int counter;", "__managed__ int shared_flag;"},
       {}},
      {"host variables: constants stay",
       "const int kN = 256;\n"
       "constexpr float kScale = 0.5f;\n"
       "static const double kTable[2] = {1.0, 2.0};\n"
       "float* d_buffer = 0;\n"
       "int host_count = 3;\n"
       "extern cudaDeviceProp deviceProp;\n"
       "__global__ void k(float* x) { x[0] = kN * kScale * kTable[1]; }\n",
       {"const int kN = 256;", "constexpr float kScale = 0.5f;", "static const double kTable[2]"},
       {"d_buffer", "host_count", "deviceProp"}},
      {"constexpr host function becomes __host__ __device__",
       "constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }\n"
       "template <int N> __global__ void k(float* x) { x[0] = ceil_div(N, 32); }\n",
       {"__host__ __device__ constexpr int ceil_div"},
       {}},
      {"struct keeps its data and device members",
       "struct Timer {\n"
       "  float start_ms;\n"
       "  __device__ float get() const { return start_ms; }\n"
       "  void reset() { cudaEventRecord(0); }\n"
       "  Timer() = default;\n"
       "};\n"
       "__global__ void k(Timer t, float* x) { x[0] = t.get(); }\n",
       {"float start_ms;", "__device__ float get() const", "Timer() = default;"},
       {"reset", "cudaEventRecord"}},
      {"missing host header",
       "#include \"helper_cuda_not_here.h\"\n"
       "#include <iostream>\n"
       "__global__ void k(float* x) { x[0] = 1; }\n"
       "int main() { std::cout << checkCudaErrors(0); }\n",
       {"__global__ void k"},
       {"helper_cuda_not_here.h", "<iostream>", "std::cout"},
       "helper_cuda_not_here.h"},
      {"host library header",
       "#include <cublas_v2.h>\n"
       "cublasHandle_t handle;\n"
       "__global__ void k(float* x) { x[0] = 1; }\n"
       "void gemm() { cublasCreate(&handle); }\n",
       {"__global__ void k"},
       {"cublas_v2.h", "cublasHandle_t handle", "cublasCreate"},
       "declares host functions"},
      {"CUDA headers device code uses stay",
       "#include <cuda_runtime.h>\n"
       "#include <cuda_fp16.h>\n"
       "__global__ void k(__half* x) { x[0] = __float2half(1.0f); }\n",
       {"#include <cuda_runtime.h>", "#include <cuda_fp16.h>", "__global__ void k"},
       {}},
      {"a struct of a left-out header's types leaves too",
       "#include <cublas_v2.h>\n"
       "typedef struct {\n"
       "  cublasHandle_t handle;\n"
       "  int device;\n"
       "} Config;\n"
       "__global__ void k(float* x) { x[0] = 1; }\n",
       {"__global__ void k"},
       {"cublasHandle_t", "Config"},
       "does not compile in device code"},
  };
  return c;
}

TEST(DevicePass, KeepsWhatTheDevicePassCompiles) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Folder folder;
    const std::string path = folder.write("main.cu", c.source);
    const DeviceSource d = device_source(path, {});
    for (const char* part : c.kept) {
      CJ_EXPECT_CONTAINS(d.text, part);
      // Host code is blanked, not removed: a kept line keeps its number.
      if (std::string(c.source).find(part) != std::string::npos)
        EXPECT_EQ(line_of(d.text, part), line_of(c.source, part)) << part;
    }
    for (const char* part : c.dropped)
      EXPECT_EQ(d.text.find(part), std::string::npos) << part << " in:\n" << d.text;
    std::string notes;
    for (const auto& n : d.notes) notes += n + "\n";
    if (*c.note) CJ_EXPECT_CONTAINS(notes, c.note);
    // What is kept compiles: its kernels read as they do in any source.
    const auto program = read_program(d.text, path, {}, "c++17", 90, /*use_cache=*/false);
    EXPECT_TRUE(has_kernel(*program, "k"));
  }
}

TEST(DevicePass, UserHeadersAreWrittenInBehindLineDirectives) {
  Folder folder;
  folder.write("common.h",
               "#pragma once\n"
               "#include <stdlib.h>\n"
               "__device__ float warp_sum(float v) { return v; }\n"
               "void cuda_check(int e) { if (e) exit(1); }\n"
               "__global__ void from_header(float* x) { x[0] = warp_sum(1); }\n");
  const std::string path = folder.write("main.cu",
                                        "#include \"common.h\"\n"
                                        "#include \"common.h\"\n"
                                        "__global__ void k(float* x) { x[0] = warp_sum(2); }\n");
  const DeviceSource d = device_source(path, {});
  ASSERT_EQ(d.files.size(), 2u);
  EXPECT_EQ(d.files[0], path);
  CJ_EXPECT_CONTAINS(d.files[1], "common.h");
  CJ_EXPECT_CONTAINS(d.text, "#line 1 \"" + d.files[1] + "\"");
  CJ_EXPECT_CONTAINS(d.text, "#line 2 \"" + path + "\"");
  CJ_EXPECT_CONTAINS(d.text, "__device__ float warp_sum");
  EXPECT_EQ(d.text.find("cuda_check"), std::string::npos);
  EXPECT_EQ(d.text.find("#pragma once"), std::string::npos);
  // Written in once: the second include is blank.
  EXPECT_EQ(d.text.find("warp_sum(float"), d.text.rfind("warp_sum(float"));
  const auto program = read_program(d.text, path, {}, "c++17", 90, /*use_cache=*/false);
  EXPECT_TRUE(has_kernel(*program, "from_header"));
  EXPECT_TRUE(has_kernel(*program, "k"));
}

TEST(DevicePass, TextOfAnOpenFile) {
  const DeviceSource d = device_source("/nonexistent/kernel.cu", {}, "c++17", 90,
                                       std::string("__global__ void k(int* x) { x[0] = 1; }\n"
                                                   "int main() { return 0; }\n"));
  CJ_EXPECT_CONTAINS(d.text, "__global__ void k");
  EXPECT_EQ(d.text.find("main"), std::string::npos);
}

TEST(DevicePass, RefusesAFileThatCannotBeRead) {
  const std::string msg =
      expect_throws<c10::ValueError>([] { device_source("/nonexistent/kernel.cu", {}); });
  CJ_EXPECT_CONTAINS(msg, "cannot read the CUDA file '/nonexistent/kernel.cu'");
}

std::shared_ptr<const KernelDefinition> define(const std::string& source, const std::string& name,
                                               const std::string& template_args = "") {
  KernelOptions o;
  o.template_args = template_args;
  o.cache = false;
  return std::make_shared<KernelDefinition>(read_program(source, "kernel.cu", {}, "c++17", 90, false),
                                            name, o);
}

TEST(StructLayout, FieldsOffsetsAndKinds) {
  const auto def = define(
      "#include <cuda_fp16.h>\n"
      "struct Inner { short s; float2 v; };\n"
      "struct P { float a; unsigned b; double c; __half h; Inner in; unsigned char raw[3]; "
      "const float* ptr; };\n"
      "__global__ void k(P p, float* out) { out[0] = p.a; }\n",
      "k");
  const TypeLayout t = param_layout(*def, 0);
  EXPECT_TRUE(t.is_record);
  EXPECT_EQ(t.size, 56u);
  EXPECT_EQ(t.align, 8u);
  struct Want {
    const char* name;
    size_t offset, size;
    char kind;
    size_t count;
  };
  const std::vector<Want> want = {{"a", 0, 4, 'f', 1},  {"b", 4, 4, 'u', 1},  {"c", 8, 8, 'f', 1},
                                  {"h", 16, 2, 'h', 1}, {"in", 24, 16, 'r', 1}, {"raw", 40, 1, 'u', 3},
                                  {"ptr", 48, 8, 'p', 1}};
  ASSERT_EQ(t.fields.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(t.fields[i].name, want[i].name);
    EXPECT_EQ(t.fields[i].offset, want[i].offset);
    EXPECT_EQ(t.fields[i].size, want[i].size);
    EXPECT_EQ(t.fields[i].kind, want[i].kind);
    EXPECT_EQ(t.fields[i].count, want[i].count);
  }
  // Inner: float2 is aligned to 8 bytes.
  ASSERT_EQ(t.fields[4].fields.size(), 2u);
  EXPECT_EQ(t.fields[4].fields[1].offset, 8u);
  EXPECT_EQ(t.fields[4].fields[1].kind, 'r');  // float2 {x, y}
}

TEST(StructLayout, TemplateArgumentsGivenOrDeduced) {
  const std::string src =
      "namespace ns { template <typename T> struct interval { T lo, hi; };\n"
      "template <typename T> __global__ void w(interval<T> iv, T* out) { out[0] = iv.lo; } }\n";
  const TypeLayout d = param_layout(*define(src, "w"), 0, {{"T", "double"}});
  EXPECT_EQ(d.size, 16u);
  EXPECT_EQ(d.type, "ns::interval<double>");
  const TypeLayout f = param_layout(*define(src, "w", "T=float"), 0);
  EXPECT_EQ(f.size, 8u);
  ASSERT_EQ(f.fields.size(), 2u);
  EXPECT_EQ(f.fields[1].offset, 4u);
  const std::string msg = expect_throws<c10::ValueError>([&] { param_layout(*define(src, "w"), 0); });
  CJ_EXPECT_CONTAINS(msg, "depends on the template parameter 'T'");
}

TEST(DeviceEnvironment, HostMacrosTypedefsAndDeviceRuntime) {
  EXPECT_TRUE(uses_device_runtime("__global__ void p(float* x) { c<<<1, 1>>>(x); }"));
  EXPECT_TRUE(uses_device_runtime("cudaGraphSetConditional(h, 1);"));
  EXPECT_FALSE(uses_device_runtime("__global__ void k(float* x) { x[0] = 1; }"));
  EXPECT_FALSE(uses_device_runtime("int cudaGraphSetConditionalish = 0;"));
#if defined(__linux__)
  const auto& m = host_platform_macros();
  EXPECT_NE(std::find(m.begin(), m.end(), "-D__linux__=1"), m.end());
#endif
}

}  // namespace
}  // namespace torch_cudajit
