// torch_cudajit C++ tests: the headers a compile reads (csrc/headers.h): the scan of #include
// directives, and which optional parts of cj/cj.cuh a compile asks for (implicit_needs, and a
// Program's generated source for float, half and bfloat16 keys). Runs without a GPU.
#include "headers.h"

#include "cuda_api.h"
#include "file_io.h"

#include "program.h"
#include "reading.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::tensor_sig;

struct NeedsCase {
  const char* what;
  const char* text;
  bool half, math;
};

TEST(HeadersTest, ImplicitNeedsFollowWhatTheTextCanUse) {
  const NeedsCase cases[] = {
      {"arithmetic only", "__global__ void k(float* x, int n) { x[0] = 2.0f * x[1]; }", false, false},
      {"float-suffixed math", "__global__ void k(float* x) { x[0] = sqrtf(fmaxf(x[0], 1.0f)); }", false, false},
      {"unsuffixed math", "__global__ void k(float* x) { x[0] = sqrt(x[0]); }", false, true},
      {"std names", "__global__ void k(float* x) { x[0] = std::max(x[0], 1.0f); }", false, true},
      {"math macro", "__global__ void k(double* x) { x[0] = M_PI; }", false, true},
      {"INFINITY", "__global__ void k(float* x) { x[0] = -INFINITY; }", false, true},
      {"classification", "__global__ void k(float* x) { x[0] = fpclassify(x[0]) == FP_NORMAL; }", false, true},
      {"__half type", "__global__ void k(__half* x) {}", true, false},
      {"half typedef", "__global__ void k(half2* x) {}", true, false},
      {"bfloat16 type", "__global__ void k(__nv_bfloat16* x) {}", true, false},
      {"conversion", "__global__ void k(float* x) { auto h = __float2half_rn(x[0]); }", true, false},
      {"__h intrinsic", "template <class T> __global__ void k(T* x) { x[0] = __hadd(x[0], x[0]); }", true, false},
      {"h math function", "template <class T> __global__ void k(T* x) { x[0] = hsqrt(x[0]); }", true, false},
      {"h2 math function", "template <class T> __global__ void k(T* x) { x[0] = h2exp(x[0]); }", true, false},
      {"fp16 macro", "#if defined(__CUDA_FP16_TYPES_EXIST__)\n#endif\n__global__ void k() {}", true, false},
      {"fp16 constant", "__global__ void k(float* x) { x[0] = CUDART_INF_FP16; }", true, false},
      {"identifiers that only start alike", "__global__ void k(float* hist, int hsize, int Mx) {}", false, false},
      {"number suffix is not a word", "__global__ void k(float* x) { x[0] = 0x1p16f + 1e16f; }", false, false},
      {"CUDA header", "#include <cuda/std/cstdint>\n__global__ void k(float* x) {}", false, false},
      {"CUDA's fp16 header, types unused", "#include <cuda_fp16.h>\n__global__ void k(float* x) {}", false, false},
      {"the plugin's stand-in header", "#include <cmath>\n__global__ void k(float* x) {}", false, false},
      {"a header of the user's own", "#include \"my_types.cuh\"\n__global__ void k(float* x) {}", true, true},
      {"a header named by a macro", "#define H <cmath>\n#include H\n__global__ void k() {}", true, true},
  };
  for (const NeedsCase& c : cases) {
    SCOPED_TRACE(c.what);
    const detail::ImplicitNeeds needs = detail::implicit_needs(c.text);
    EXPECT_EQ(needs.half, c.half) << c.text;
    EXPECT_EQ(needs.math, c.math) << c.text;
  }
}

TEST(HeadersTest, ImplicitMacros) {
  EXPECT_TRUE(detail::implicit_macros({}).empty());
  EXPECT_EQ(detail::implicit_macros({false, true}), std::vector<std::string>{"-DCJ_IMPLICIT_MATH"});
  if (cuda_include_dir().empty()) GTEST_SKIP() << "no CUDA headers on this machine";
  EXPECT_EQ(detail::implicit_macros({true, false}),
            (std::vector<std::string>{"-DCJ_HAVE_FP16", "-DCJ_HAVE_BF16"}));
}

TEST(HeadersTest, CudaHeadersAreAFolderWithCrtAndCcclWhenOneIsFound) {
  // NVIDIA's wheels ship cuda_fp16.h and CCCL without crt/ (vector_types.h includes
  // crt/host_defines.h): the front end could not read a float2 there. A toolkit's complete
  // folder of the same major version is preferred.
  const std::string dir = cuda_include_dir();
  if (dir.empty()) GTEST_SKIP() << "no CUDA headers on this machine";
  const std::string toolkit = "/usr/local/cuda/include";
  std::string cuda_h;
  if (!detail::file_exists(toolkit + "/crt/host_defines.h") || !detail::read_file(toolkit + "/cuda.h", cuda_h))
    GTEST_SKIP() << "no CUDA toolkit headers in " << toolkit;
  const size_t at = cuda_h.find("#define CUDA_VERSION ");
  ASSERT_NE(at, std::string::npos);
  const int toolkit_major = std::stoi(cuda_h.substr(at + 21, 12)) / 1000;
  if (toolkit_major != detail::nvrtc_version() / 1000)
    GTEST_SKIP() << "the toolkit's CUDA " << toolkit_major << " is not NVRTC's major version";
  EXPECT_TRUE(detail::file_exists(dir + "/crt/host_defines.h")) << dir;
}

TEST(HeadersTest, ScanIncludesReadsDirectivesAndHasInclude) {
  std::string inexact;
  const std::vector<detail::Include> found = detail::scan_includes(
      "#include <a.h>\n  #  include \"b.h\"\n// #include <comment.h>\n"
      "#if __has_include(<c.h>)\n#endif\n",
      inexact);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].name, "a.h");
  EXPECT_FALSE(found[0].quoted);
  EXPECT_EQ(found[1].name, "b.h");
  EXPECT_TRUE(found[1].quoted);
  EXPECT_EQ(found[2].name, "c.h");
  EXPECT_TRUE(inexact.empty());
  detail::scan_includes("#include HEADER\n", inexact);
  EXPECT_EQ(inexact, "#include HEADER");
}

// A float kernel's compile leaves the fp16/bf16 headers and the prelude's <math.h> out; a half
// or bfloat16 key, or a source that names the types, brings them in, and all compile.
TEST(HeadersTest, GeneratedSourceDefinesImplicitMacrosOnlyWhenNeeded) {
  if (cuda_include_dir().empty()) GTEST_SKIP() << "no CUDA headers on this machine";
  const auto program = read_program(R"(
template <typename T>
__global__ void scale(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i];
}
)");
  struct KeyCase {
    const char* what;
    TypeCode dtype;
    bool needs;
  };
  const KeyCase cases[] = {{"float32", TypeCode::kFloat, false},
                           {"float16", TypeCode::kHalf, true},
                           {"bfloat16", TypeCode::kBFloat16, true}};
  CompileOptions options;
  options.arch = 90;
  for (const KeyCase& c : cases) {
    SCOPED_TRACE(c.what);
    const SpecKey key = make_spec_key(90, {tensor_sig(c.dtype, 1), tensor_sig(c.dtype, 1),
                                           number_sig(ArgKind::kFloat)});
    const GeneratedSource generated = program->generate({{"scale", key, ""}});
    EXPECT_EQ(generated.text.find("#define CJ_HAVE_FP16") != std::string::npos, c.needs);
    EXPECT_EQ(generated.text.find("#define CJ_HAVE_BF16") != std::string::npos, c.needs);
    EXPECT_EQ(generated.text.find("#define CJ_IMPLICIT_MATH"), std::string::npos);
    const CompiledProgram compiled = program->compile(generated, options);
    EXPECT_FALSE(compiled.cubin.empty());
  }
  const auto named = read_program(
      "__global__ void twice(__half* x) { x[threadIdx.x] = __hadd(x[threadIdx.x], x[threadIdx.x]); }");
  const SpecKey key = make_spec_key(90, {tensor_sig(TypeCode::kHalf, 1)});
  EXPECT_FALSE(named->compile({{"twice", key, ""}}, options).cubin.empty());
  // nvcc's implicit <math.h>: M_PI and an integer sqrt without an include.
  const auto math = read_program("__global__ void k(double* x, int n) { x[0] = M_PI * sqrt(n) + std::fabs(x[1]); }");
  const SpecKey math_key = make_spec_key(90, {tensor_sig(TypeCode::kDouble, 1), number_sig(ArgKind::kInt)});
  const GeneratedSource math_text = math->generate({{"k", math_key, ""}});
  EXPECT_NE(math_text.text.find("#define CJ_IMPLICIT_MATH"), std::string::npos);
  EXPECT_FALSE(math->compile(math_text, options).cubin.empty());
}

// A user macro or pre-included header may use cj/cj.cuh's optional parts: nvrtc_options then
// asks for them.
TEST(HeadersTest, UserOptionsNamingHalfTypesKeepTheHeaders) {
  if (cuda_include_dir().empty()) GTEST_SKIP() << "no CUDA headers on this machine";
  const auto program = read_program("__global__ void k(float* x) {}");
  CompileOptions o;
  o.arch = 90;
  auto has_macro = [&] {
    const auto opts = program->nvrtc_options(o);
    return std::find(opts.begin(), opts.end(), "-DCJ_HAVE_FP16") != opts.end();
  };
  EXPECT_FALSE(has_macro());
  o.extra = {"-DSTORAGE=__half"};
  EXPECT_TRUE(has_macro());
  o.extra = {"-include", "my_types.cuh"};
  EXPECT_TRUE(has_macro());
}

}  // namespace
}  // namespace torch_cudajit
