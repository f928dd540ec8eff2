// torch_cudajit C++ tests: the NVRTC stage (csrc/program.h). Compiles to CUBIN and PTX for
// sm_90 on a machine without a GPU (only NVRTC is needed): targets, lowered names, parameter
// probes, template deduction, the PTX fallback for unknown architectures, CompileError and
// the rejection of writes through const parameters.
#include "program.h"

#include "cache.h"
#include "cuda_api.h"
#include "frontend.h"
#include "reading.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::aligned_sig;
using cjtest::tensor_sig;

constexpr int kArch = 90;

CompileOptions options_for(int arch) {
  CompileOptions o;
  o.arch = arch;
  return o;
}

const char* kSaxpy = R"(
__global__ void saxpy(cj::Array<float, 1> y, cj::Array<const float, 1> x, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < y.size(0)) y[i] = a * x[i] + y[i];
}
)";

SpecKey saxpy_key(bool contiguous = true) {
  return make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1, contiguous),
                               tensor_sig(TypeCode::kFloat, 1, contiguous),
                               number_sig(ArgKind::kFloat)});
}

// A program rebuilt from its reflection (as a pickle or a TorchScript archive is loaded) runs no
// front end and rewrites the source exactly as the original did.
TEST(ProgramTest, FromReflectionParsesNothing) {
  const std::string source =
      "namespace ns {\ntemplate <typename T>\n__global__ void k(cj::Array<T, 1> out, T a) {}\n}\n";
  const auto original = read_program(source);
  const uint64_t parses = frontend_parse_count();
  const Program again = Program::from_reflection(source, "kernel.cu", original->reflection());
  EXPECT_EQ(frontend_parse_count(), parses);
  ASSERT_EQ(again.kernels().size(), 1u);
  EXPECT_EQ(again.kernel("k").qualified_name, "ns::k");
  const InstantiationRequest request{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1),
                                                                number_sig(ArgKind::kFloat)}), ""};
  EXPECT_EQ(again.generate({request}).text, original->generate({request}).text);
  CJ_EXPECT_CONTAINS(
      expect_throws<c10::ValueError>(
          [&] { Program::from_reflection(source + " ", "kernel.cu", original->reflection()); }),
      "was read from another source");
}

TEST(ProgramTest, NvrtcSupportsSm90) {
  std::vector<int> archs = detail::nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_NE(std::find(archs.begin(), archs.end(), kArch), archs.end());
}

TEST(ProgramTest, DefaultIncludeDirsHoldTheDeviceHeader) {
  std::vector<std::string> dirs = default_include_dirs();
  ASSERT_FALSE(dirs.empty());
  // The package's own headers come first, CUDA's (cuda_fp16.h) last, and libcu++ (CUDA 13's
  // include/cccl, which cooperative_groups.h needs) between them when the toolkit has it.
  EXPECT_TRUE(std::ifstream(dirs[0] + "/cj/cj.cuh").good()) << dirs[0];
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_TRUE(std::ifstream(dirs.back() + "/cuda_fp16.h").good()) << dirs.back();
  if (dirs.size() == 3) {
    EXPECT_EQ(dirs[1], dirs.back() + "/cccl");
    EXPECT_TRUE(std::ifstream(dirs[1] + "/cuda/std/type_traits").good()) << dirs[1];
  }
}

// A header NVRTC could not open is traced to the header set that provides it, and only when
// that set is missing: the hint names the package to install.
TEST(ProgramTest, MissingHeaderHintNamesThePackage) {
  const std::string dir = ::testing::TempDir() + "cj_hint_cuda";
  const std::string with_cccl = dir + "/with", without_cccl = dir + "/without";
  for (const std::string& d : {with_cccl + "/cccl/cuda/std", without_cccl})
    ASSERT_EQ(std::system(("mkdir -p '" + d + "'").c_str()), 0);
  std::ofstream(with_cccl + "/cccl/cuda/std/type_traits") << "";
  auto log = [](const char* header) {
    return std::string("kernel.cu(1): catastrophic error: cannot open source file \"") + header +
           "\"\n";
  };
  struct Case {
    const char* title;
    std::string log, cuda_dir, want;  // want: a substring of the hint, "" for no hint
  };
  const std::vector<Case> cases = {
      {"nv/target without CCCL", log("nv/target"), without_cccl, "pip install nvidia-cuda-cccl"},
      {"cuda/std without CCCL", log("cuda/std/type_traits"), without_cccl, "part of CCCL"},
      {"cub without CCCL", log("cub/cub.cuh"), without_cccl, "nvidia-cuda-cccl"},
      {"nv/target with CCCL", log("nv/target"), with_cccl, ""},
      {"cuda_fp16.h without CUDA headers", log("cuda_fp16.h"), "", "nvidia-cuda-runtime"},
      {"cuda_fp16.h with CUDA headers", log("cuda_fp16.h"), with_cccl, ""},
      {"the user's own header", log("my_header.h"), "", ""},
      {"another error", "kernel.cu(3): error: identifier \"x\" is undefined", "", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    const std::string hint = detail::missing_header_hint(c.log, c.cuda_dir);
    if (c.want.empty()) {
      EXPECT_EQ(hint, "");
    } else {
      EXPECT_NE(hint.find(c.want), std::string::npos) << hint;
    }
  }
}

TEST(ProgramTest, CompilesToCubinAndPtx) {
  const auto program = read_program(kSaxpy);
  CompiledProgram out = program->compile({{"saxpy", saxpy_key(), ""}}, options_for(kArch));
  EXPECT_EQ(out.target, "sm_90");
  EXPECT_TRUE(out.has_cubin);
  ASSERT_GE(out.cubin.size(), 4u);
  EXPECT_EQ(out.cubin.substr(0, 4), std::string("\x7f" "ELF"));
  CJ_EXPECT_CONTAINS(out.ptx, ".entry");
  CJ_EXPECT_CONTAINS(out.ptx, ".target sm_90");
  EXPECT_NE(out.ptx.back(), '\0');
  ASSERT_EQ(out.lowered_names.size(), 1u);
  EXPECT_EQ(out.lowered_names[0].rfind("_Z", 0), 0u) << out.lowered_names[0];
  CJ_EXPECT_CONTAINS(out.lowered_names[0], "saxpy");
  CJ_EXPECT_CONTAINS(out.ptx, out.lowered_names[0]);
  ASSERT_EQ(out.name_expressions.size(), 1u);
  EXPECT_EQ(out.name_expressions[0], "static_cast<cj_detail_spec_" +
                                         instantiation_tag(program->kernel("saxpy"), saxpy_key()) +
                                         "::fn>(saxpy)");
  EXPECT_EQ(out.options, program->nvrtc_options(options_for(kArch)));
}

TEST(ProgramTest, ProbesReportParameterTypes) {
  const auto program = read_program(R"(
__global__ void k(cj::Array<float, 2> a, cj::Array<const double, 3> b, float* p, float s,
                  int n, double d, bool f, unsigned char u, cj::Array<int, 0> z, long long q) {}
)");
  SpecKey key = make_spec_key(
      kArch, {tensor_sig(TypeCode::kFloat, 2), tensor_sig(TypeCode::kDouble, 3, false),
              tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kFloat),
              number_sig(ArgKind::kInt), number_sig(ArgKind::kFloat), number_sig(ArgKind::kBool),
              number_sig(ArgKind::kInt), tensor_sig(TypeCode::kInt32, 0),
              number_sig(ArgKind::kInt)});
  CompiledProgram out = program->compile({{"k", key, ""}}, options_for(kArch));
  ASSERT_EQ(out.probes.size(), 1u);
  struct Case {
    const char* title;
    TypeCode code;
    uint32_t size, align;
  };
  const std::vector<Case> want = {
      {"Array<float, 2>", TypeCode::kArray, 8 + 16 * 2, 8},
      {"Array<const double, 3>", TypeCode::kArray, 8 + 16 * 3, 8},
      {"float* (its pointee)", TypeCode::kFloat, 4, 4},
      {"float", TypeCode::kFloat, 4, 4},
      {"int", TypeCode::kInt32, 4, 4},
      {"double", TypeCode::kDouble, 8, 8},
      {"bool", TypeCode::kBool, 1, 1},
      {"unsigned char", TypeCode::kUInt8, 1, 1},
      {"Array<int, 0>", TypeCode::kArray, 8, 8},
      {"long long", TypeCode::kInt64, 8, 8},
  };
  ASSERT_EQ(out.probes[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].title);
    const ParamProbe& p = out.probes[0][i];
    EXPECT_EQ(static_cast<int>(p.code), static_cast<int>(want[i].code));
    EXPECT_EQ(p.size, want[i].size);
    EXPECT_EQ(p.align, want[i].align);
  }
}

// T comes from the arrays; the scalar `T a` is non-deduced, so a Python float does not force
// T = double. One NVRTC call compiles all instantiations.
TEST(ProgramTest, DeducesTemplateTypeFromArrays) {
  const auto program = read_program(R"(
template <class T>
__global__ void axpy(cj::Array<T, 2> y, cj::Array<const T, 2> x, T a) {
  long long i = blockIdx.x, j = threadIdx.x;
  if (i < y.size(0) && j < y.size(1)) y(i, j) = a * x(i, j) + y(i, j);
}
)");
  struct Case {
    const char* title;
    TypeCode dtype;
    ArgKind scalar;
    uint32_t scalar_size;
  };
  const std::vector<Case> cases = {
      {"float32 tensors, Python float", TypeCode::kFloat, ArgKind::kFloat, 4},
      {"float64 tensors, Python float", TypeCode::kDouble, ArgKind::kFloat, 8},
      {"int32 tensors, Python int", TypeCode::kInt32, ArgKind::kInt, 4},
      {"float16 tensors, Python float", TypeCode::kHalf, ArgKind::kFloat, 2},
  };
  std::vector<InstantiationRequest> requests;
  for (const auto& c : cases)
    requests.push_back({"axpy",
                        make_spec_key(kArch, {tensor_sig(c.dtype, 2), tensor_sig(c.dtype, 2, false),
                                              number_sig(c.scalar)}),
                        ""});
  CompiledProgram out = program->compile(requests, options_for(kArch));
  ASSERT_EQ(out.lowered_names.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].title);
    const ParamProbe& scalar = out.probes[i][2];
    EXPECT_EQ(static_cast<int>(scalar.code), static_cast<int>(cases[i].dtype));
    EXPECT_EQ(scalar.size, cases[i].scalar_size);
    EXPECT_EQ(static_cast<int>(out.probes[i][0].code), static_cast<int>(TypeCode::kArray));
    for (size_t j = 0; j < i; ++j) EXPECT_NE(out.lowered_names[i], out.lowered_names[j]);
  }
}

// Without a tensor to fix T, the scalar's own (Python) type deduces it.
TEST(ProgramTest, ScalarDeducesWhenNoArrayDoes) {
  const auto program = read_program("template <class T> __global__ void fill(float* out, T v) { out[0] = v; }");
  struct Case {
    const char* title;
    ArgKind kind;
    TypeCode code;
    uint32_t size;
  };
  const std::vector<Case> cases = {
      {"Python int", ArgKind::kInt, TypeCode::kInt64, 8},
      {"Python float", ArgKind::kFloat, TypeCode::kDouble, 8},
      {"Python bool", ArgKind::kBool, TypeCode::kBool, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    SpecKey key = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), number_sig(c.kind)});
    CompiledProgram out = program->compile({{"fill", key, ""}}, options_for(kArch));
    EXPECT_EQ(static_cast<int>(out.probes[0][1].code), static_cast<int>(c.code));
    EXPECT_EQ(out.probes[0][1].size, c.size);
  }
}

// Explicit template arguments for parameters that the arguments also determine.
TEST(ProgramTest, ExplicitTemplateArguments) {
  struct Case {
    const char* title;
    std::string source, template_args, lowered;
  };
  const std::vector<Case> cases = {
      {"pointer", "template <class T> __global__ void k(T* a) {}", "float", "_Z1kIfEvPT_"},
      {"array, layout still deduced", "template <class T> __global__ void k(cj::Array<T, 1> a) {}",
       "float", "_Z1kIfN2cj6LayoutILi1EEEEvNS0_5ArrayIT_Li1ET0_EE"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    const auto program = read_program(c.source);
    CompiledProgram out = program->compile(
        {{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), c.template_args}},
        options_for(kArch));
    EXPECT_EQ(out.lowered_names[0], c.lowered);
  }
}

// The outcome of compiling one request: the program, or the CompileError's message.
struct Attempt {
  std::optional<CompiledProgram> out;
  std::string error;  // first error line of the NVRTC log
  std::string message;
};

Attempt try_compile(const std::string& source, const SpecKey& key,
                    const std::string& template_args = "", CompileOptions o = options_for(kArch)) {
  Attempt a;
  try {
    const auto program = read_program(source);
    a.out = program->compile({{"k", key, template_args}}, o);
  } catch (const CompileError& e) {
    a.error = cjtest::first_error_line(e.log());
    a.message = e.what_without_backtrace();
  }
  return a;
}

// Explicit template arguments name the kernel itself (`static_cast<Alias::fn>(k<args>)`), so
// template parameters that no parameter type determines take the requested values. (Before
// 2d79ac6 the name expression ignored them: ambiguous without a default, silently the default
// with one.)
TEST(ProgramTest, ExplicitNonDeducedTemplateArguments) {
  const SpecKey key = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
  struct Case {
    const char* title;
    std::string source, template_args, lowered_part;
  };
  const std::vector<Case> cases = {
      {"no default", "template <int N> __global__ void k(float* out) { out[0] = N; }", "4", "ILi4E"},
      {"overriding a default",
       "template <class T, int BLOCK = 128> __global__ void k(cj::Array<T, 1> a) { a[0] = BLOCK; }",
       "float, 64", "IfLi64E"},
      {"default kept", "template <class T, int BLOCK = 128> __global__ void k(cj::Array<T, 1> a) {}",
       "float", "IfLi128E"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    Attempt a = try_compile(c.source, key, c.template_args);
    ASSERT_TRUE(a.out.has_value()) << a.message;
    CJ_EXPECT_CONTAINS(a.out->lowered_names[0], c.lowered_part);
  }
}

TEST(ProgramTest, StaticKernelWithArrayCompiles) {
  Attempt a = try_compile("static __global__ void k(cj::Array<float, 1> a) { a[0] = 1.0f; }",
                          make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}));
  EXPECT_EQ(a.message, "");
}

TEST(ProgramTest, ExternCBlockKernelCompiles) {
  Attempt a = try_compile("extern \"C\" {\n__global__ void k(cj::Array<float, 1> a) { a[0] = 1.0f; }\n}\n",
                          make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}));
  ASSERT_TRUE(a.out.has_value());
  EXPECT_EQ(a.out->lowered_names[0], "k");
}

TEST(ProgramTest, GridConstantParameterCompiles) {
  Attempt a = try_compile(
      "struct Params { float scale[4]; };\n"
      "__global__ void k(float* y, const __grid_constant__ Params p) { y[0] = p.scale[0]; }\n",
      make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kBytes)}));
  ASSERT_TRUE(a.out.has_value());
  EXPECT_EQ(static_cast<int>(a.out->probes[0][1].code), static_cast<int>(TypeCode::kUnknown));
  EXPECT_EQ(a.out->probes[0][1].size, 16u);
}

// A Python complex arrives as ::cj::complex<double> and converts to either precision.
TEST(ProgramTest, PythonComplexToComplexParameters) {
  const std::string source =
      "template <class C> __global__ void k(cj::Array<C, 1> a, C s) { a[0] = s; }\n";
  Attempt c128 = try_compile(source, make_spec_key(kArch, {tensor_sig(TypeCode::kComplexDouble, 1),
                                                           number_sig(ArgKind::kComplex)}));
  ASSERT_TRUE(c128.out.has_value()) << c128.message;
  EXPECT_EQ(static_cast<int>(c128.out->probes[0][1].code), static_cast<int>(TypeCode::kComplexDouble));
  Attempt c64 = try_compile(source, make_spec_key(kArch, {tensor_sig(TypeCode::kComplexFloat, 1),
                                                          number_sig(ArgKind::kComplex)}));
  ASSERT_TRUE(c64.out.has_value()) << c64.message;
  EXPECT_EQ(static_cast<int>(c64.out->probes[0][1].code), static_cast<int>(TypeCode::kComplexFloat));
  EXPECT_EQ(c64.out->probes[0][1].size, 8u);
}

TEST(ProgramTest, KernelInNamespaceCompiles) {
  Attempt a = try_compile("namespace ns {\n__global__ void k(float* a) { a[0] = 1.0f; }\n}\n",
                          make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}));
  ASSERT_TRUE(a.out.has_value());
  CJ_EXPECT_CONTAINS(a.out->lowered_names[0], "2ns1k");
}

TEST(ProgramTest, ExternCKernelKeepsItsName) {
  const auto program = read_program("extern \"C\" __global__ void plain(float* x, cj::Array<float, 1> a) { x[0] = a[0]; }");
  CompiledProgram out = program->compile(
      {{"plain",
        make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kFloat, 1, false)}),
        ""}},
      options_for(kArch));
  ASSERT_EQ(out.lowered_names.size(), 1u);
  EXPECT_EQ(out.lowered_names[0], "plain");
}

// Layout-rewritten sources that must still compile.
TEST(ProgramTest, RewrittenDeclarationsCompile) {
  struct Case {
    const char* title;
    std::string source;
    int args = 1;  // float tensors
    std::string std = "c++17";
  };
  const std::vector<Case> cases = {
      {"forward declaration then definition",
       "__global__ void k(cj::Array<float, 1> a);\n"
       "__global__ void k(cj::Array<float, 1> a) { a[0] = 1.0f; }\n"},
      {"__launch_bounds__ and restrict",
       "__global__ void __launch_bounds__(128) k(cj::Array<float, 1> a, const float* __restrict__ b) "
       "{ a[0] = b[0]; }\n", 2},
      {"rank from a template parameter",
       "template <int N> __global__ void k(cj::Array<float, N> a) { a[0] = N; }\n"},
      {"template declared static",
       "template <class T> static __global__ void k(cj::Array<T, 1> a) { a[0] = T(1); }\n"},
      {"const Array object", "__global__ void k(const cj::Array<float, 1> a) { a[0] = 1.0f; }\n"},
      {"auto parameter with C++20", "__global__ void k(auto a) { a[0] = 1.0f; }\n", 1, "c++20"},
      {"template with defaults",
       "template <class T, int UNROLL = 2>\n"
       "__global__ void k(cj::Array<T, 1> a) { for (int u = 0; u < UNROLL; ++u) a[u] = T(0); }\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    try {
      const auto program = read_program(c.source);
      SpecKey key = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
      if (c.args == 2) key.args[key.size++] = tensor_sig(TypeCode::kFloat, 1);
      CompileOptions o = options_for(kArch);
      o.std = c.std;
      CompiledProgram out = program->compile({{"k", key, ""}}, o);
      EXPECT_EQ(out.lowered_names.size(), 1u);
    } catch (const c10::Error& e) {
      ADD_FAILURE() << e.what_without_backtrace();
    }
  }
}

// An architecture this NVRTC cannot emit machine code for gets the newest older PTX target.
TEST(ProgramTest, UnknownArchFallsBackToPtx) {
  std::vector<int> archs = detail::nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  std::vector<int> unknown;
  for (int a = archs.front() + 1; a <= archs.back() && unknown.size() < 2; ++a)
    if (std::find(archs.begin(), archs.end(), a) == archs.end()) unknown.push_back(a);
  unknown.push_back(archs.back() + 10);  // a future architecture
  const auto program = read_program(kSaxpy);
  for (int arch : unknown) {
    SCOPED_TRACE("arch " + std::to_string(arch));
    int best = 0;
    for (int a : archs)
      if (a <= arch) best = std::max(best, a);
    SpecKey key = saxpy_key();
    key.arch = arch;
    CompiledProgram out = program->compile({{"saxpy", key, ""}}, options_for(arch));
    EXPECT_EQ(out.target, "compute_" + std::to_string(best));
    EXPECT_EQ(out.options[0], "-arch=compute_" + std::to_string(best));
    EXPECT_FALSE(out.has_cubin);
    EXPECT_TRUE(out.cubin.empty());
    CJ_EXPECT_CONTAINS(out.ptx, ".entry");
    CJ_EXPECT_CONTAINS(out.ptx, ".target sm_" + std::to_string(best));
    ASSERT_EQ(out.lowered_names.size(), 1u);
  }
}

TEST(ProgramTest, ArchOlderThanNvrtcSupportsIsRejected) {
  std::vector<int> archs = detail::nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  ASSERT_GT(archs.front(), 30);
  const auto program = read_program(kSaxpy);
  std::string msg = expect_throws<c10::ValueError>([&] { program->nvrtc_options(options_for(30)); });
  CJ_EXPECT_CONTAINS(msg, "cannot target sm_30");
  CJ_EXPECT_CONTAINS(msg, "sm_" + std::to_string(archs.front()));
}

TEST(ProgramTest, NvrtcOptions) {
  const auto program = read_program(kSaxpy);
  CompileOptions o = options_for(kArch);
  std::vector<std::string> base = program->nvrtc_options(o);
  ASSERT_GE(base.size(), 4u);
  EXPECT_EQ(base[0], "-arch=sm_90");
  EXPECT_EQ(base[1], "-std=c++17");
  EXPECT_EQ(base[2], "-default-device");
  EXPECT_EQ(base[3], "-I" + default_include_dirs()[0]);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_FALSE(has(base, "-G"));
  EXPECT_FALSE(has(base, "-lineinfo"));

  o.debug = true;
  o.lineinfo = true;
  o.std = "c++20";
  o.extra = {"-DSCALE=3", "--use_fast_math"};
  std::vector<std::string> full = program->nvrtc_options(o);
  EXPECT_EQ(full[1], "-std=c++20");
  EXPECT_TRUE(has(full, "-G"));
  EXPECT_TRUE(has(full, "-DCJ_DEBUG"));
  EXPECT_TRUE(has(full, "-lineinfo"));
  // User options come last, in order.
  ASSERT_GE(full.size(), 2u);
  EXPECT_EQ(full[full.size() - 2], "-DSCALE=3");
  EXPECT_EQ(full.back(), "--use_fast_math");
}

TEST(ProgramTest, UserDefinesReachTheSource) {
  const auto program = read_program(R"(
__global__ void k(float* out) {
#if SCALE != 3
#error SCALE must be 3
#endif
  out[0] = SCALE;
}
)");
  CompileOptions o = options_for(kArch);
  SpecKey key = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
  EXPECT_THROW(program->compile({{"k", key, ""}}, o), CompileError);
  o.extra = {"-DSCALE=3"};
  EXPECT_NO_THROW(program->compile({{"k", key, ""}}, o));
}

TEST(ProgramTest, GeneratedSource) {
  const auto program = read_program(kSaxpy, "saxpy.cu");
  std::string text = program->generate({{"saxpy", saxpy_key(), ""}, {"saxpy", saxpy_key(false), ""}}).text;
  EXPECT_EQ(text.rfind("#include <cj/cj.cuh>\n#line 1 \"saxpy.cu\"\n", 0), 0u) << text;
  CJ_EXPECT_CONTAINS(text, "#line 1 \"torch_cudajit_generated\"");
  CJ_EXPECT_CONTAINS(text, "cj::Array<float, 1, CjL0> y");
  const KernelDecl& decl = program->kernel("saxpy");
  CJ_EXPECT_CONTAINS(text, "using cj_detail_spec_" + instantiation_tag(decl, saxpy_key()) + " = ");
  CJ_EXPECT_CONTAINS(text, "using cj_detail_spec_" + instantiation_tag(decl, saxpy_key(false)) + " = ");
  // One deduction helper (two overloads) for the kernel, however many requests.
  size_t helpers = 0;
  for (size_t p = text.find("__device__ auto cj_detail_sig_saxpy("); p != std::string::npos;
       p = text.find("__device__ auto cj_detail_sig_saxpy(", p + 1))
    ++helpers;
  EXPECT_EQ(helpers, 2u);
}

// A Program is built from a source and its reflection alone: with the disk cache switched off
// and its folder absent, it generates the text and compiles, and its reflection's bytes give
// the same Program again; the folder is never created.
TEST(ProgramTest, BuiltFromSourceAndReflectionWithoutDiskCache) {
  const CacheSettings saved = DiskCache::instance().settings();
  const std::string folder = cjtest::make_temp_dir() + "/never";
  DiskCache::instance().configure({false, folder, 0});
  const uint64_t parses = frontend_parse_count();
  const Program program(kSaxpy, "saxpy.cu", cjtest::reflect(kSaxpy));
  EXPECT_EQ(frontend_parse_count(), parses + 1);
  EXPECT_EQ(program.digest(), source_digest("saxpy.cu", kSaxpy));
  const InstantiationRequest request{"saxpy", saxpy_key(), ""};
  const GeneratedSource generated = program.generate({request});
  EXPECT_EQ(generated.text.rfind("#include <cj/cj.cuh>\n#line 1 \"saxpy.cu\"\n", 0), 0u)
      << generated.text;
  CJ_EXPECT_CONTAINS(generated.text, "cj::Array<float, 1, CjL0> y");
  const Program again = Program::from_reflection(kSaxpy, "saxpy.cu", program.reflection());
  EXPECT_EQ(frontend_parse_count(), parses + 1);
  EXPECT_EQ(again.generate({request}).text, generated.text);
  const CompiledProgram compiled = program.compile(generated, options_for(kArch));
  EXPECT_EQ(compiled.target, "sm_90");
  EXPECT_EQ(compiled.options, program.nvrtc_arguments(options_for(kArch)).options);
  EXPECT_EQ(access(folder.c_str(), F_OK), -1) << "the disk cache's folder was created";
  DiskCache::instance().configure(saved);
}

// A request's wrapping (KernelWrapping) puts its text around the user's source, appends each
// instantiation's wrapper after the aliases, and makes the wrapper the kernel NVRTC is asked
// for; requests compiled together share one wrapping's text.
TEST(ProgramTest, WrappingSurroundsTheSourceAndNamesTheKernel) {
  const auto program = read_program(kSaxpy, "saxpy.cu");
  auto wrapping = std::make_shared<KernelWrapping>();
  wrapping->macros = "#define WRAPPED 1\n";
  wrapping->prologue = "// before the source\n";
  wrapping->epilogue = "// after the source\n";
  wrapping->wrap = [](const KernelDecl& decl, const SpecKey&, const std::string& tag,
                      Instantiation& inst) {
    const std::string text = "// wraps " + decl.name + " as " + inst.kernel_expression + "\n";
    inst.kernel_expression = "wrapper_" + tag;
    return text;
  };
  const InstantiationRequest plain{"saxpy", saxpy_key(), ""};
  InstantiationRequest wrapped = plain;
  wrapped.wrapping = wrapping;
  const GeneratedSource base = program->generate({plain});
  const GeneratedSource out = program->generate({wrapped});
  const std::string tag = instantiation_tag(program->kernel("saxpy"), saxpy_key());
  EXPECT_EQ(out.instantiations[0].kernel_expression, "wrapper_" + tag);
  CJ_EXPECT_CONTAINS(out.text, "#define WRAPPED 1\n#include <cj/cj.cuh>\n// before the source\n"
                               "#line 1 \"saxpy.cu\"\n");
  CJ_EXPECT_CONTAINS(out.text, "\n// after the source\n#line 1 \"torch_cudajit_generated\"\n");
  // The wrapper follows the instantiation's alias and names the kernel it wraps.
  const std::string wraps = "// wraps saxpy as " + base.instantiations[0].kernel_expression + "\n";
  CJ_EXPECT_CONTAINS(out.text, base.instantiations[0].alias_definition + wraps);
  EXPECT_EQ(out.text.size(), base.text.size() + wrapping->macros.size() +
                                 wrapping->prologue.size() + wrapping->epilogue.size() +
                                 wraps.size());
  InstantiationRequest other = wrapped;
  auto other_text = std::make_shared<KernelWrapping>(*wrapping);
  other_text->prologue = "// another prologue\n";
  other.wrapping = other_text;
  expect_throws<c10::Error>([&] { program->generate({wrapped, plain}); });
  expect_throws<c10::Error>([&] { program->generate({wrapped, other}); });
}

// An instantiation is spelled the same alone and among others: a batch's entry is found under
// its own key, and a pickled specialization of a batch is adopted like one compiled alone.
TEST(ProgramTest, InstantiationsAreSpelledAlikeAloneAndInABatch) {
  const auto program = read_program(kSaxpy, "saxpy.cu");
  const InstantiationRequest a{"saxpy", saxpy_key(), ""}, b{"saxpy", saxpy_key(false), ""};
  const GeneratedSource batch = program->generate({a, b});
  ASSERT_EQ(batch.instantiations.size(), 2u);
  EXPECT_EQ(batch.requests.size(), 2u);
  EXPECT_EQ(batch.instantiations[1].kernel_expression,
            program->generate({b}).instantiations[0].kernel_expression);
  EXPECT_EQ(batch.instantiations[1].probe_expressions,
            program->generate({b}).instantiations[0].probe_expressions);
  EXPECT_NE(batch.instantiations[0].kernel_expression, batch.instantiations[1].kernel_expression);
  const CompiledProgram together = program->compile(batch, options_for(kArch));
  const CompiledProgram alone = program->compile({b}, options_for(kArch));
  EXPECT_EQ(together.lowered_names[1], alone.lowered_names[0]);
  EXPECT_EQ(together.name_expressions[1], alone.name_expressions[0]);
}

TEST(ProgramTest, CompileErrorCarriesEverything) {
  const std::string source =
      "__global__ void bad(float* x) {\n"
      "  x[0] = undefined_name;\n"
      "}\n";
  const auto program = read_program(source, "bad_kernel.cu");
  CompileOptions o = options_for(kArch);
  o.extra = {"-DMARKER=1"};
  try {
    program->compile({{"bad", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), ""}}, o);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kernel_name(), "bad");
    EXPECT_EQ(e.arch(), "sm_90");
    EXPECT_EQ(e.options(), program->nvrtc_options(o));
    EXPECT_NE(std::find(e.options().begin(), e.options().end(), "-DMARKER=1"), e.options().end());
    // Line numbers are those of the user's source, thanks to #line.
    CJ_EXPECT_CONTAINS(e.log(), "bad_kernel.cu(2)");
    CJ_EXPECT_CONTAINS(e.log(), "undefined_name");
    EXPECT_EQ(e.numbered_source(), number_lines(source));
    CJ_EXPECT_CONTAINS(e.numbered_source(), "2 |   x[0] = undefined_name;");
    const std::string msg = e.what_without_backtrace();
    CJ_EXPECT_CONTAINS(msg, "kernel 'bad' failed to compile for sm_90");
    CJ_EXPECT_CONTAINS(msg, "-DMARKER=1");
    CJ_EXPECT_CONTAINS(msg, "NVRTC log:");
  }
}

// A key the kernel cannot be instantiated for fails in the generated code, and says so.
TEST(ProgramTest, InstantiationFailureNamesTheArgumentTypes) {
  const auto program = read_program("__global__ void k(cj::Array<float, 1> a) { a[0] = 0.f; }");
  SpecKey key = make_spec_key(kArch, {aligned_sig(TypeCode::kInt32, 1)});
  std::string msg = expect_throws<CompileError>([&] { program->compile({{"k", key, ""}}, options_for(kArch)); });
  CJ_EXPECT_CONTAINS(msg, "could not be instantiated for the argument types");
  CJ_EXPECT_CONTAINS(msg, "k(Array<int32, 1, contiguous>)");
  // NVRTC's first error comes before the options and the full log.
  const size_t first = msg.find("NVRTC's first error:\n  torch_cudajit_generated(");
  ASSERT_NE(first, std::string::npos) << msg;
  EXPECT_LT(first, msg.find("NVRTC options:"));
  CJ_EXPECT_CONTAINS(msg, "\n    argument types are: (cj::Array<int, 1, cj::Layout<7>>)\n");
}

TEST(ProgramTest, FirstErrorOfALog) {
  struct Case {
    const char* title;
    std::string log, want;
  };
  const std::vector<Case> cases = {
      {"failed overload resolution with its argument types",
       "a.cu(3): warning #47-D: something\n"
       "torch_cudajit_generated(5): error: no instance of overloaded function \"f\" matches\n"
       "            argument types are: (cj::detail::priority<1>, float *, double)\n"
       "  using x = decltype(f(...));\n"
       "__nv_name_map(2): error: expected an identifier\n",
       "  torch_cudajit_generated(5): error: no instance of overloaded function \"f\" matches\n"
       "    argument types are: (float *, double)"},
      {"an error without argument types",
       "k.cu(7): error: identifier \"y\" is undefined\n  y = 1;\n      ^\n",
       "  k.cu(7): error: identifier \"y\" is undefined"},
      {"name-map errors are follow-ups",
       "__nv_name_map(2): error: expected a \">\"\nk.cu(1): catastrophic error: cannot open source file \"x.h\"\n",
       "  k.cu(1): catastrophic error: cannot open source file \"x.h\""},
      {"no error", "k.cu(3): warning #177-D: variable \"v\" was declared but never referenced\n", ""},
      {"empty log", "", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    EXPECT_EQ(detail::first_error(c.log), c.want);
  }
}

TEST(ProgramTest, CondensedLogCountsTheNameMapErrors) {
  const std::string log =
      "torch_cudajit_generated(5): error: no instance of overloaded function \"f\" matches\n"
      "            argument types are: (float *)\n"
      "\n"
      "__nv_name_map(2): error: expected an identifier\n"
      "  #pragma nv_mangled_name &f\n"
      "                          ^\n"
      "\n"
      "__nv_name_map(3): error: expected a \">\"\n"
      "  #pragma nv_mangled_name &g\n"
      "\n"
      "3 errors detected in the compilation of \"k.cu\".";
  EXPECT_EQ(detail::condensed_log(log),
            "torch_cudajit_generated(5): error: no instance of overloaded function \"f\" matches\n"
            "            argument types are: (float *)\n"
            "\n"
            "3 errors detected in the compilation of \"k.cu\".\n"
            "(2 follow-on error(s) of NVRTC's name map (__nv_name_map), caused by the errors "
            "above, are left out here; CompileError.log has the whole log.)");
  EXPECT_EQ(detail::condensed_log("k.cu(1): error: x\n"), "k.cu(1): error: x");
}

// A pointer parameter's probe describes its pointee: what the launch checks of the data.
TEST(ProgramTest, PointerProbesDescribeThePointee) {
  const auto program = read_program(R"(
#include <cuda_fp16.h>
struct alignas(16) Vec { float v[4]; };
struct Rgb { unsigned char r, g, b; };
struct Opaque;
typedef double scalar_t;
__global__ void k(float4* a, const __half2* __restrict__ b, Vec* const c, const Rgb* d,
                  Opaque* e, void* f, const void* g, scalar_t* h, float** i, double2* j) {}
)");
  SpecKey key = make_spec_key(
      kArch, {tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kHalf, 1),
              tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kUInt8, 1),
              tensor_sig(TypeCode::kInt64, 1), tensor_sig(TypeCode::kHalf, 1),
              tensor_sig(TypeCode::kInt32, 1), tensor_sig(TypeCode::kDouble, 1),
              tensor_sig(TypeCode::kInt64, 1), tensor_sig(TypeCode::kDouble, 1)});
  CompiledProgram out = program->compile({{"k", key, ""}}, options_for(kArch));
  struct Case {
    const char* title;
    TypeCode code;
    uint32_t size, align;
  };
  const std::vector<Case> want = {
      {"float4", TypeCode::kUnknown, 16, 16},  {"const __half2, restrict", TypeCode::kUnknown, 4, 4},
      {"Vec, const pointer", TypeCode::kUnknown, 16, 16}, {"Rgb", TypeCode::kUnknown, 3, 1},
      {"incomplete", TypeCode::kUnknown, 0, 0}, {"void", TypeCode::kUnknown, 0, 0},
      {"const void", TypeCode::kUnknown, 0, 0}, {"typedef of double", TypeCode::kDouble, 8, 8},
      {"float*", TypeCode::kPointer, 8, 8},      {"double2", TypeCode::kUnknown, 16, 16},
  };
  ASSERT_EQ(out.probes[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].title);
    const ParamProbe& p = out.probes[0][i];
    EXPECT_EQ(static_cast<int>(p.code), static_cast<int>(want[i].code));
    EXPECT_EQ(p.size, want[i].size);
    EXPECT_EQ(p.align, want[i].align);
  }
}

// An address (None, cj.DevicePointer) leaves T to the other arguments.
TEST(ProgramTest, AddressTakesTheTypeOfTheOtherArguments) {
  const auto program = read_program(
      "template <class T>\n"
      "__global__ void k(T* out, const T* x, const T* bias, float s) { if (bias) out[0] = x[0]; }");
  for (TypeCode dtype : {TypeCode::kFloat, TypeCode::kHalf, TypeCode::kInt64}) {
    SCOPED_TRACE(dtype_name(dtype));
    SpecKey key = make_spec_key(kArch, {tensor_sig(dtype, 1), tensor_sig(dtype, 1),
                                        number_sig(ArgKind::kAddress), number_sig(ArgKind::kFloat)});
    CompiledProgram out = program->compile({{"k", key, ""}}, options_for(kArch));
    ASSERT_EQ(out.probes[0].size(), 4u);
    EXPECT_EQ(static_cast<int>(out.probes[0][2].code), static_cast<int>(dtype));
    EXPECT_EQ(out.probes[0][2].size, type_size(dtype));
  }
}

TEST(ProgramTest, WritesThroughConstParametersAreRejected) {
  struct Case {
    const char* title;
    std::string source;
  };
  const std::vector<Case> cases = {
      {"const Array element", "__global__ void k(cj::Array<const float, 1> x) { x[0] = 1.0f; }"},
      {"const Array, compound assignment", "__global__ void k(cj::Array<const float, 1> x) { x(0) += 1.0f; }"},
      {"const pointer", "__global__ void k(const float* x) { x[0] = 1.0f; }"},
      {"const template Array",
       "template <class T> __global__ void k(cj::Array<const T, 1> x) { x[0] = T(1); }"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    const auto program = read_program(c.source);
    SpecKey key = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
    try {
      program->compile({{"k", key, ""}}, options_for(kArch));
      ADD_FAILURE() << "writing through a const parameter compiled";
    } catch (const CompileError& e) {
      EXPECT_EQ(e.kernel_name(), "k");
      CJ_EXPECT_CONTAINS(e.log(), "kernel.cu(1)");
    }
  }
}

TEST(ProgramTest, MissingKernelNameListsTheKernels) {
  const auto program = read_program("__global__ void alpha(float* x) {}\n__global__ void beta(int n) {}\n");
  std::string msg = expect_throws<c10::ValueError>([&] { program->kernel("gamma"); });
  CJ_EXPECT_CONTAINS(msg, "no __global__ function named 'gamma'");
  CJ_EXPECT_CONTAINS(msg, "'alpha', 'beta'");
  EXPECT_EQ(program->kernel("beta").name, "beta");

  const auto empty = read_program("__device__ float f(float x) { return x; }");
  std::string none = expect_throws<c10::ValueError>([&] { empty->kernel("f"); });
  CJ_EXPECT_CONTAINS(none, "defines none");
}

TEST(ProgramTest, NumberLines) {
  struct Case {
    const char* title;
    std::string in, out;
  };
  std::string ten;
  for (int i = 1; i <= 10; ++i) ten += "l" + std::to_string(i) + (i < 10 ? "\n" : "");
  std::string ten_out;
  for (int i = 1; i <= 10; ++i) ten_out += (i < 10 ? " " : "") + std::to_string(i) + " | l" + std::to_string(i) + "\n";
  const std::vector<Case> cases = {
      {"one line", "a", "1 | a\n"},
      {"two lines", "a\nb", "1 | a\n2 | b\n"},
      {"ten lines align", ten, ten_out},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    EXPECT_EQ(number_lines(c.in), c.out);
  }
}

TEST(ProgramTest, CooperativeDetection) {
  struct Case {
    const char* title;
    const char* source;
    bool cooperative;
  };
  const Case cases[] = {
      {"plain", "__global__ void k(float* o) { o[0] = 1; }", false},
      {"this_grid", "#include <cooperative_groups.h>\n__global__ void k(float* o) { "
                    "cooperative_groups::this_grid().sync(); o[0] = 1; }", true},
      {"grid_group", "#include <cooperative_groups.h>\n__global__ void k(float* o) { "
                     "cooperative_groups::grid_group g = cooperative_groups::this_grid(); g.sync(); }", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    const auto p = read_program(c.source);
    EXPECT_EQ(p->cooperative("k"), c.cooperative);
    // Grid-synchronizing kernels compile without -rdc for sm_90 (libcu++ is found).
    CompiledProgram out = p->compile({{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), ""}},
                                    options_for(kArch));
    EXPECT_FALSE(out.cubin.empty());
  }
}

TEST(ProgramTest, LinksACuFileWithNvJitLink) {
  char dir_template[] = "/tmp/cj_link_XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string helper = dir + "/helper.cu";
  std::ofstream(helper) << "__device__ float helper(float v) { return 2.0f * v; }\n";
  const auto p = read_program("extern __device__ float helper(float);\n"
            "__global__ void k(float* o) { o[threadIdx.x] = helper(o[threadIdx.x]); }\n");
  CompileOptions o = options_for(kArch);
  o.link = {helper};
  CompiledProgram out = p->compile({{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), ""}}, o);
  EXPECT_TRUE(out.has_cubin);
  EXPECT_FALSE(out.cubin.empty());
  EXPECT_EQ(out.target, "sm_90");
  EXPECT_NE(std::find(out.options.begin(), out.options.end(), "-dlto"), out.options.end());

  o.link = {dir + "/missing.cu"};
  std::string missing = expect_throws<c10::ValueError>(
      [&] { p->compile({{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), ""}}, o); });
  CJ_EXPECT_CONTAINS(missing, "missing.cu' cannot be read");
  std::ofstream(dir + "/other.cu") << "__device__ float other(float v) { return v; }\n";
  o.link = {dir + "/other.cu"};
  std::string undefined = expect_throws<CompileError>(
      [&] { p->compile({{"k", make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)}), ""}}, o); });
  CJ_EXPECT_CONTAINS(undefined, "Linking failed");
}

// The probes make_instantiation leaves out (known_probe) are what NVRTC reports: asking for
// them anyway gives the same code, size and alignment.
TEST(ProgramTest, KnownProbesMatchTheCompiler) {
  const auto program = read_program(R"(
__global__ void k(cj::Array<float, 2> a, const double* p, long long n, cj::complex<float> c,
                  const __half* h, bool flag, cj::Array<const int, 0> z) {}
)");
  const SpecKey key = make_spec_key(
      kArch, {tensor_sig(TypeCode::kFloat, 2), tensor_sig(TypeCode::kDouble, 1), number_sig(ArgKind::kInt),
              number_sig(ArgKind::kComplex), tensor_sig(TypeCode::kHalf, 1), number_sig(ArgKind::kBool),
              tensor_sig(TypeCode::kInt32, 0)});
  GeneratedSource generated = program->generate({{"k", key, ""}});
  Instantiation& inst = generated.instantiations[0];
  const std::string expr = inst.kernel_expression;
  const std::string alias = expr.substr(12, expr.find("::fn>") - 12);  // static_cast<ALIAS::fn>
  const std::vector<ParamProbe> known = inst.known_probes;
  for (size_t i = 0; i < inst.probe_expressions.size(); ++i) {
    ASSERT_TRUE(inst.probe_expressions[i].empty()) << "parameter " << i << " is not known";
    const std::string t = alias + "::arg<" + std::to_string(i) + ">";
    const std::string e = "::cj::detail::pointee<" + t + ">";
    inst.probe_expressions[i] =
        program->kernel("k").params[i].kind == ParamKind::kPointer
            ? "&::cj::detail::probe<" + e + "::code, " + e + "::size, " + e + "::align>"
            : "&::cj::detail::probe<::cj::detail::type_code<" + t + ">::value, sizeof(" + t +
                  "), alignof(" + t + ")>";
  }
  const CompiledProgram compiled = program->compile(generated, options_for(kArch));
  ASSERT_EQ(compiled.probes.size(), 1u);
  ASSERT_EQ(compiled.probes[0].size(), known.size());
  for (size_t i = 0; i < known.size(); ++i) {
    SCOPED_TRACE(program->kernel("k").params[i].name);
    EXPECT_EQ(compiled.probes[0][i].code, known[i].code);
    EXPECT_EQ(compiled.probes[0][i].size, known[i].size);
    EXPECT_EQ(compiled.probes[0][i].align, known[i].align);
  }
}

}  // namespace
}  // namespace torch_cudajit
