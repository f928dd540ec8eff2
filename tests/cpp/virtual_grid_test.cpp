// torch_cudajit C++ tests: forall's virtual grid (csrc/virtual_grid.h). Which kernels may run on
// one and why not, how many virtual blocks a physical block runs, the generated wrapper, its
// compile for sm_90 (no GPU needed: the PTX shows the __restrict__ loads), and the table's
// variant: its packing, and the plain launch it falls back to when the variant does not compile.
#include "virtual_grid.h"

#include "kernel_runtime.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::aligned_sig;
using cjtest::expect_throws;
using cjtest::make_spec_key;
using cjtest::number_sig;

constexpr int kArch = 90;

// The README's kernel: one element per thread, Array parameters.
const char* kReadme = R"(
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(a * float(x[i]) + float(y[i]));
}
)";

SpecKey readme_key(TypeCode dtype) {
  return make_spec_key(kArch, {aligned_sig(dtype, 1), aligned_sig(dtype, 1), aligned_sig(dtype, 1),
                               number_sig(ArgKind::kFloat)});
}

CompileOptions options_for(int arch) {
  CompileOptions o;
  o.arch = arch;
  return o;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(VirtualGridTest, VirtualBlocksFollowTheNarrowestTensor) {
  struct Case {
    const char* name;
    SpecKey key;
    int blocks;
  };
  const Case cases[] = {
      {"float32", readme_key(TypeCode::kFloat), 4},
      {"bfloat16 (at most 4)", readme_key(TypeCode::kBFloat16), 4},
      {"float64", readme_key(TypeCode::kDouble), 2},
      {"int8 (at most 4)", readme_key(TypeCode::kInt8), 4},
      {"complex128 (at least 2)", readme_key(TypeCode::kComplexDouble), 2},
      {"float32 and float16", make_spec_key(kArch, {aligned_sig(TypeCode::kFloat, 1),
                                                    aligned_sig(TypeCode::kHalf, 1)}), 4},
      {"float64 and float32", make_spec_key(kArch, {aligned_sig(TypeCode::kDouble, 1),
                                                    aligned_sig(TypeCode::kFloat, 1)}), 4},
      {"no tensors", make_spec_key(kArch, {number_sig(ArgKind::kInt)}), 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(virtual_blocks_for(c.key), c.blocks);
  }
}

TEST(VirtualGridTest, RefusalNamesWhatTheKernelUses) {
  const std::string body = "(float* out) { out[threadIdx.x] = 1; }\n";
  struct Case {
    const char* name;
    std::string source;
    std::vector<std::string> extra;
    bool debug;
    std::string expected;  // "" : the kernel may run on a virtual grid
  };
  const Case cases[] = {
      {"one task per thread", "__global__ void k" + body, {}, false, ""},
      {"grid-stride loop over gridDim",
       "__global__ void k(float* out, int n) {\n"
       "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
       "    out[i] = 1; }\n",
       {}, false, ""},
      {"static shared memory",
       "__global__ void k(float* out) { __shared__ float t[32]; t[0] = 1; out[0] = t[0]; }\n", {},
       false, "shared memory"},
      {"dynamic shared memory",
       "__global__ void k(float* out) { extern __shared__ float t[]; out[0] = t[0]; }\n", {}, false,
       "shared memory"},
      {"block barrier", "__global__ void k(float* out) { __syncthreads(); out[0] = 1; }\n", {},
       false, "block barrier"},
      {"PTX barrier", "__global__ void k(float* out) { asm volatile(\"bar.sync 0;\"); }\n", {},
       false, "PTX barrier"},
      {"words in comments", "// no __syncthreads or __shared__ needed: one task per thread\n"
       "/* a cuda::barrier would wait across\n   virtual blocks */\n__global__ void k" + body, {},
       false, ""},
      {"a comment after a directive", "#include <cuda_fp16.h>  // __shared__ staging is not needed\n"
       "__global__ void k" + body, {}, false, ""},
      {"a `//` inside inline PTX starts no comment",
       "__global__ void k(float* out) { asm volatile(\"// wait\\n\\tbar.sync 0;\"); }\n", {}, false,
       "PTX barrier"},
      {"cooperative groups",
       "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
       "__global__ void k(float* out) { cg::this_thread_block().sync(); }\n",
       {}, false, "cooperative groups"},
      {"clusters", "__global__ void __cluster_dims__(2, 1, 1) k" + body, {}, false, "clusters"},
      {"PTX block index",
       "__global__ void k(unsigned* out) { unsigned b; asm(\"mov.u32 %0, %%ctaid.x;\" : \"=r\"(b));"
       " out[0] = b; }\n",
       {}, false, "block index registers"},
      {"PTX exit", "__global__ void k(float* out) { asm(\"exit;\"); }\n", {}, false, "PTX `exit`"},
      {"device-side launch",
       "__global__ void child(float* out) {}\n__global__ void k(float* out) { child<<<1, 1>>>(out); }\n",
       {}, false, "device-side launch"},
      {"cj::elementwise",
       "__global__ void k(cj::Array<float, 1> out) { cj::elementwise(out, [] { return 1.f; }); }\n",
       {}, false, "loops over the grid itself"},
      {"a user header", "#include \"my_helpers.cuh\"\n__global__ void k" + body, {}, false,
       "headers from outside"},
      {"an include through a macro", "#define H <cuda_fp16.h>\n#include H\n__global__ void k" + body,
       {}, false, "headers from outside"},
      {"a macro option", "__global__ void k(float* out) { SMEM float t[4]; out[0] = t[0]; }\n",
       {"-DSMEM=__shared__"}, false, "the option -DSMEM=__shared__"},
      {"a pre-included file", "__global__ void k" + body, {"-include", "helpers.cuh"}, false,
       "pre-included"},
      {"debug mode", "__global__ void k" + body, {}, true, "debug mode"},
      {"CUDA headers are read", "#include <cuda_fp16.h>\n__global__ void k" + body, {}, false, ""},
      {"a __device__ variable", "__device__ float* g_table;\n__global__ void k" + body, {}, false,
       "declares a __device__ variable"},
      {"a __device__ array", "__device__ int counts[4] = {0};\n__global__ void k" + body, {}, false,
       "declares a __device__ variable"},
      {"a __constant__ variable", "__constant__ float scale;\n__global__ void k" + body, {}, false,
       "declares a __constant__ variable"},
      {"a __managed__ variable", "__managed__ int flag;\n__global__ void k" + body, {}, false,
       "declares a __managed__ variable"},
      {"__device__ functions are no variables",
       "template <class T> __device__ __forceinline__ T twice(T v) { return 2 * v; }\n"
       "__host__ __device__ inline int one() { return 1; }\n__global__ void k" + body,
       {}, false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto program = read_program(c.source);
    CompileOptions options = options_for(kArch);
    options.extra = c.extra;
    options.debug = c.debug;
    const std::string why = virtual_grid_refusal(*program, "k", options);
    if (c.expected.empty())
      EXPECT_EQ(why, "");
    else
      CJ_EXPECT_CONTAINS(why, c.expected);
  }
}

TEST(VirtualGridTest, LinkedFilesAreRefused) {
  const auto program = read_program("__global__ void k(float* out) { out[0] = 1; }\n");
  CompileOptions options = options_for(kArch);
  options.link = {"helpers.cu"};
  CJ_EXPECT_CONTAINS(virtual_grid_refusal(*program, "k", options), "linked");
}

TEST(VirtualGridTest, CompanionsAreTensorsBoundToPointersArraysAndAuto) {
  const auto program = read_program(
      "__global__ void k(cj::Array<float, 1> a, const float* p, float s, auto any, int n) {}\n");
  const KernelDecl& d = program->kernel("k");
  const ArgSig tensor = aligned_sig(TypeCode::kFloat, 1);
  struct Case {
    size_t param;
    ArgSig sig;
    bool companion;
  };
  const Case cases[] = {
      {0, tensor, true},
      {1, tensor, true},
      {2, tensor, false},  // a 0-d tensor read as a scalar
      {3, tensor, true},
      {3, number_sig(ArgKind::kFloat), false},
      {4, number_sig(ArgKind::kInt), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("parameter " + d.params[c.param].name);
    EXPECT_EQ(virtual_grid_companion(d.params[c.param], c.sig), c.companion);
  }
}

TEST(VirtualGridTest, GenerateWrapsTheSourceAndNamesTheWrapper) {
  const auto program = read_program(kReadme);
  const SpecKey key = readme_key(TypeCode::kFloat);
  const GeneratedSource plain = program->generate({{"axpy", key, ""}});
  const GeneratedSource virt = program->generate({{"axpy", key, "", virtual_grid_wrapping(4)}});
  const std::string tag = instantiation_tag(program->kernel("axpy"), key);
  EXPECT_EQ(count_of(plain.text, "CJ_VIRTUAL_GRID"), 0u);
  CJ_EXPECT_CONTAINS(virt.text, "#define CJ_VIRTUAL_GRID 1\n#include <cj/cj.cuh>\n");
  CJ_EXPECT_CONTAINS(virt.text, "#define blockIdx (::cj::detail::virtual_block_idx())");
  CJ_EXPECT_CONTAINS(virt.text, "#define __global__ __device__ __forceinline__");
  // The user's source keeps its line numbers, and __global__ is itself again for the wrapper.
  CJ_EXPECT_CONTAINS(virt.text, "#line 1 \"kernel.cu\"\n");
  CJ_EXPECT_CONTAINS(virt.text, "#define blockDim (::cj::detail::virtual_block_dim())");
  CJ_EXPECT_CONTAINS(virt.text, "#undef blockIdx\n#undef gridDim\n#undef blockDim\n#undef __global__\n"
                                "#define __global__ __location__(global)\n");
  CJ_EXPECT_CONTAINS(virt.text, "extern \"C\" __global__ void " + virtual_grid_name(tag) + "(");
  CJ_EXPECT_CONTAINS(virt.text, "run_virtual_blocks<4>");
  EXPECT_EQ(count_of(virt.text, "::cj::detail::restrict_t<"), 3u);
  // Each companion may be prefetched, as the launch's mask says: bit j for the j-th one.
  for (int j = 0; j < 3; ++j) {
    SCOPED_TRACE(j);
    CJ_EXPECT_CONTAINS(virt.text, "if (cj_prefetch & (1u << " + std::to_string(j) +
                                      ")) cj_zero |= ::cj::detail::prefetch_ahead<4>(cj_r" + std::to_string(j));
  }
  CJ_EXPECT_CONTAINS(virt.text, "unsigned int cj_grid, unsigned long long cj_tasks, "
                                "unsigned int cj_prefetch, unsigned int cj_ahead)");
  EXPECT_EQ(virt.instantiations[0].kernel_expression, virtual_grid_name(tag));
  // The probes are the instantiation's own.
  EXPECT_EQ(virt.instantiations[0].probe_expressions, plain.instantiations[0].probe_expressions);
  expect_throws<c10::Error>([&] {
    program->generate({{"axpy", key, ""}, {"axpy", key, "", virtual_grid_wrapping(4)}});
  });
}

// Kernels as nvcc projects write them, each compiled on a virtual grid for sm_90: the wrapper is
// the entry, and the loads of the read-only tensors go through the non-coherent path that
// __restrict__ allows (the plain kernel's do not).
TEST(VirtualGridTest, KernelsCompileOnAVirtualGridWithRestrictLoads) {
  struct Case {
    const char* name;
    std::string source;
    std::string kernel;
    SpecKey key;
    std::string template_args;
    std::string std;
  };
  const ArgSig f32 = aligned_sig(TypeCode::kFloat, 1);
  const ArgSig bf16 = aligned_sig(TypeCode::kBFloat16, 1);
  const Case cases[] = {
      {"README kernel, float32", kReadme, "axpy", readme_key(TypeCode::kFloat), "", "c++17"},
      {"README kernel, bfloat16", kReadme, "axpy", readme_key(TypeCode::kBFloat16), "", "c++17"},
      {"raw pointers, extern \"C\", launch bounds, __grid_constant__",
       "extern \"C\" __global__ void __launch_bounds__(256) scale(float* out, const float* x,\n"
       "    const __grid_constant__ long long n) {\n"
       "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
       "  if (i >= n) return;\n  out[i] = 2.f * x[i];\n}\n",
       "scale", make_spec_key(kArch, {f32, f32, number_sig(ArgKind::kInt)}), "", "c++17"},
      {"const-qualified pointer parameters",
       "__global__ void scale(float* const out, const float* const x, const long long n) {\n"
       "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
       "  if (i < n) out[i] = 2.f * x[i];\n}\n",
       "scale", make_spec_key(kArch, {f32, f32, number_sig(ArgKind::kInt)}), "", "c++17"},
      {"a helper reads blockIdx, in a namespace",
       "namespace ops {\n__device__ long long global_index() {\n"
       "  return blockIdx.x * (long long)blockDim.x + threadIdx.x; }\n"
       "__global__ void copy(__nv_bfloat16* out, const __nv_bfloat16* x, long long n) {\n"
       "  long long i = global_index();\n  if (i < n) out[i] = x[i];\n}\n}\n",
       "copy", make_spec_key(kArch, {bf16, bf16, number_sig(ArgKind::kInt)}), "", "c++17"},
      {"explicit template arguments",
       "template <typename T, int N>\n__global__ void fill(T* out, const T* x) {\n"
       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < N) out[i] = x[i];\n}\n",
       "fill", make_spec_key(kArch, {f32, f32}), "float, 1024", "c++17"},
      {"auto parameters",
       "__global__ void add(auto out, auto x, auto y) {\n"
       "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
       "  if (i < out.size(0)) out[i] = x[i] + y[i];\n}\n",
       "add", make_spec_key(kArch, {f32, f32, f32}), "", "c++20"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto program = read_program(c.source, "kernel.cu", {}, c.std);
    CompileOptions options = options_for(kArch);
    options.std = c.std;
    EXPECT_EQ(virtual_grid_refusal(*program, c.kernel, options), "");
    const InstantiationRequest request{c.kernel, c.key, c.template_args,
                                       virtual_grid_wrapping(virtual_blocks_for(c.key))};
    const CompiledProgram virt = program->compile({request}, options);
    InstantiationRequest plain_request = request;
    plain_request.wrapping = nullptr;
    const CompiledProgram plain = program->compile({plain_request}, options);
    const std::string tag = instantiation_tag(program->kernel(c.kernel), c.key);
    EXPECT_EQ(virt.lowered_names[0], virtual_grid_name(tag));
    CJ_EXPECT_CONTAINS(virt.ptx, ".entry " + virtual_grid_name(tag) + "(");
    EXPECT_GT(count_of(virt.ptx, "ld.global.nc"), 0u);
    EXPECT_EQ(count_of(plain.ptx, "ld.global.nc"), 0u);
    // blockDim is the constant kVirtualBlockThreads: the variant never reads %ntid.
    EXPECT_GT(count_of(plain.ptx, "%ntid.x"), 0u);
    EXPECT_EQ(count_of(virt.ptx, "%ntid"), 0u);
    ASSERT_EQ(virt.probes[0].size(), plain.probes[0].size());
    for (size_t i = 0; i < plain.probes[0].size(); ++i) {
      EXPECT_EQ(virt.probes[0][i].code, plain.probes[0][i].code);
      EXPECT_EQ(virt.probes[0][i].size, plain.probes[0][i].size);
    }
    // The kernel's parameters, one restrict pointer per tensor, the grid size, the task count,
    // the prefetch mask and distance; one bulk L2 prefetch per tensor, issued when its bit is set.
    const std::regex param(virtual_grid_name(tag) + "_param_([0-9]+)");
    size_t params = 0;
    for (auto it = std::sregex_iterator(virt.ptx.begin(), virt.ptx.end(), param);
         it != std::sregex_iterator(); ++it)
      params = std::max<size_t>(params, std::stoul((*it)[1].str()) + 1);
    size_t tensors = 0;
    for (uint32_t i = 0; i < c.key.size; ++i) tensors += c.key.args[i].kind == ArgKind::kTensor;
    EXPECT_EQ(params, c.key.size + tensors + 4);
    EXPECT_EQ(count_of(virt.ptx, "cp.async.bulk.prefetch.L2.global"), tensors);
    EXPECT_EQ(count_of(plain.ptx, "cp.async.bulk.prefetch"), 0u);
  }
}

// Bulk prefetch is new in compute capability 9.0: an earlier target's variant has none, and
// compiles.
TEST(VirtualGridTest, VariantBeforeSm90HasNoBulkPrefetch) {
  const auto program = read_program(kReadme);
  const SpecKey key = make_spec_key(80, {aligned_sig(TypeCode::kBFloat16, 1),
                                         aligned_sig(TypeCode::kBFloat16, 1),
                                         aligned_sig(TypeCode::kBFloat16, 1), number_sig(ArgKind::kFloat)});
  const CompiledProgram virt =
      program->compile({{"axpy", key, "", virtual_grid_wrapping(4)}}, options_for(80));
  EXPECT_GT(count_of(virt.ptx, "ld.global.nc"), 0u);
  EXPECT_EQ(count_of(virt.ptx, "cp.async.bulk"), 0u);
}

// The variant of a key through the specialization table (compile-only): the wrapper's extra parameters in
// the buffer, and a kernel whose plain compile works but whose virtual one cannot (an attribute
// only a __global__ function takes) has no variant, with the compiler's reason.
TEST(VirtualGridTest, TableVariantPacksCompanionsAndFallsBack) {
  auto readme = cjtest::make_runtime(kReadme, "axpy");
  const SpecKey key = readme_key(TypeCode::kFloat);
  std::shared_ptr<Specialization> plain = readme->table().get(key);
  std::shared_ptr<Specialization> v = readme->table().get_virtual(key);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->virtual_blocks, 4);
  EXPECT_EQ(v->companions, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(v->companion_offset % 8, 0u);
  EXPECT_GE(v->companion_offset, plain->buffer_size);
  EXPECT_EQ(v->buffer_size, v->companion_offset + 3 * 8 + 20);
  EXPECT_EQ(readme->table().get_virtual(key), v);  // compiled once
  EXPECT_EQ(readme->table().virtual_grid_failure(key), "");
  EXPECT_EQ(readme->table().specializations().size(), 1u);  // the variant is no specialization of its own

  auto maxnreg = cjtest::make_runtime(
      "__global__ void __maxnreg__(32) k(float* out) { out[threadIdx.x] = 1; }\n", "k");
  const SpecKey k1 = make_spec_key(kArch, {aligned_sig(TypeCode::kFloat, 1)});
  ASSERT_TRUE(maxnreg->table().get(k1));
  EXPECT_EQ(maxnreg->table().get_virtual(k1), nullptr);
  CJ_EXPECT_CONTAINS(maxnreg->table().virtual_grid_failure(k1), "__maxnreg__");

  auto shared = cjtest::make_runtime(
      "__global__ void k(float* out) { __shared__ float t[1]; out[0] = t[0]; }\n", "k");
  EXPECT_EQ(shared->table().get_virtual(k1), nullptr);
  CJ_EXPECT_CONTAINS(shared->table().virtual_grid_failure(k1), "shared memory");
}

}  // namespace
}  // namespace torch_cudajit
