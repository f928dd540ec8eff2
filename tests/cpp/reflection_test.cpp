// torch_cudajit C++ tests: reflection of __global__ declarations (csrc/reflection.h): parameter
// kinds, names, constness, cj::Array element/rank/layout, templates, extern "C", attributes,
// masking of comments and strings, redeclarations, overloads and the layout rewrite.
#include "reflection.h"
#include "tokens.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;

// What one reflected parameter should look like.
struct ParamExpect {
  std::string name;
  std::string type;
  ParamKind kind;
  bool is_const;
  std::string element;
  std::string rank;
  LayoutMode layout;
  bool named;
};

struct ParamCase {
  const char* title;
  std::string source;  // declares one kernel
  std::vector<ParamExpect> params;
};

void check_params(const KernelDecl& k, const std::vector<ParamExpect>& want) {
  ASSERT_EQ(k.params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    const Param& p = k.params[i];
    const ParamExpect& w = want[i];
    EXPECT_EQ(p.name, w.name);
    EXPECT_EQ(p.type, w.type);
    EXPECT_EQ(p.kind, w.kind) << "got " << to_string(p.kind) << ", want " << to_string(w.kind);
    EXPECT_EQ(p.is_const, w.is_const);
    EXPECT_EQ(p.element, w.element);
    EXPECT_EQ(p.named, w.named);
    if (w.kind == ParamKind::kArray) {
      EXPECT_EQ(p.rank, w.rank);
      EXPECT_EQ(static_cast<int>(p.layout), static_cast<int>(w.layout));
    }
  }
}

constexpr LayoutMode kDed = LayoutMode::kDeduced;

TEST(ReflectionTest, ParameterKinds) {
  const std::vector<ParamCase> cases = {
      {"plain pointers",
       "__global__ void k(float* x, int *idx, double * out) {}",
       {{"x", "float*", ParamKind::kPointer, false, "float", "", kDed, true},
        {"idx", "int*", ParamKind::kPointer, false, "int", "", kDed, true},
        {"out", "double*", ParamKind::kPointer, false, "double", "", kDed, true}}},
      {"const and restrict pointers",
       "__global__ void k(const float* __restrict__ a, float* __restrict__ b, float const* c,\n"
       "                  const int* const d, int64_t* e) {}",
       {{"a", "const float* __restrict__", ParamKind::kPointer, true, "float", "", kDed, true},
        {"b", "float* __restrict__", ParamKind::kPointer, false, "float", "", kDed, true},
        {"c", "const float*", ParamKind::kPointer, true, "float", "", kDed, true},
        {"d", "const int* const", ParamKind::kPointer, true, "int", "", kDed, true},
        {"e", "int64_t*", ParamKind::kPointer, false, "int64_t", "", kDed, true}}},
      {"unnamed parameters",
       "__global__ void k(float*, const int, cj::Array<float, 2>, unsigned long long);",
       {{"arg0", "float*", ParamKind::kPointer, false, "float", "", kDed, false},
        {"arg1", "const int", ParamKind::kScalar, false, "", "", kDed, false},
        {"arg2", "cj::Array<float, 2>", ParamKind::kArray, false, "float", "2", kDed, false},
        {"arg3", "unsigned long long", ParamKind::kScalar, false, "", "", kDed, false}}},
      {"scalars",
       "__global__ void k(int n, float alpha, unsigned int m, long long big, bool flag,\n"
       "                  MyStruct s, const double c) {}",
       {{"n", "int", ParamKind::kScalar, false, "", "", kDed, true},
        {"alpha", "float", ParamKind::kScalar, false, "", "", kDed, true},
        {"m", "unsigned int", ParamKind::kScalar, false, "", "", kDed, true},
        {"big", "long long", ParamKind::kScalar, false, "", "", kDed, true},
        {"flag", "bool", ParamKind::kScalar, false, "", "", kDed, true},
        {"s", "MyStruct", ParamKind::kScalar, false, "", "", kDed, true},
        {"c", "const double", ParamKind::kScalar, false, "", "", kDed, true}}},
      {"cj::Array with and without a layout",
       "__global__ void k(cj::Array<const float, 2> x, cj::Array<float, 2, cj::Contiguous> y,\n"
       "                  cj::Array<double, 3, cj::Strided> z, cj::Array<int, 1, MyLayout> w,\n"
       "                  Array<half, 1> v, ::cj::Array<const int64_t, 4, ::cj::Contiguous> u) {}",
       {{"x", "cj::Array<const float, 2>", ParamKind::kArray, true, "float", "2", kDed, true},
        {"y", "cj::Array<float, 2, cj::Contiguous>", ParamKind::kArray, false, "float", "2",
         LayoutMode::kContiguous, true},
        {"z", "cj::Array<double, 3, cj::Strided>", ParamKind::kArray, false, "double", "3",
         LayoutMode::kStrided, true},
        {"w", "cj::Array<int, 1, MyLayout>", ParamKind::kArray, false, "int", "1",
         LayoutMode::kOpaque, true},
        {"v", "Array<half, 1>", ParamKind::kArray, false, "half", "1", kDed, true},
        {"u", "::cj::Array<const int64_t, 4, ::cj::Contiguous>", ParamKind::kArray, true,
         "int64_t", "4", LayoutMode::kContiguous, true}}},
      {"template with several parameters and defaults",
       "template <typename T, int N = 2, class Acc = float>\n"
       "__global__ void k(cj::Array<const T, N> in, cj::Array<Acc, N> out, T scale) {}",
       {{"in", "cj::Array<const T, N>", ParamKind::kArray, true, "T", "N", kDed, true},
        {"out", "cj::Array<Acc, N>", ParamKind::kArray, false, "Acc", "N", kDed, true},
        {"scale", "T", ParamKind::kScalar, false, "", "", kDed, true}}},
      {"auto parameters",
       "__global__ void k(auto x, const auto y, float s) {}",
       {{"x", "auto", ParamKind::kAuto, false, "", "", kDed, true},
        {"y", "const auto", ParamKind::kAuto, false, "", "", kDed, true},
        {"s", "float", ParamKind::kScalar, false, "", "", kDed, true}}},
      {"void parameter list",
       "__global__ void k(void) {}",
       {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = cjtest::reflect(c.source);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0].name, "k");
    check_params(kernels[0], c.params);
  }
}

// One role per parameter, from kind and constness alone: every layer reads it (param_role).
TEST(ReflectionTest, RolesFollowKindAndConstness) {
  struct Case {
    const char* title;
    const char* source;
    std::vector<ParamRole> roles;
    std::vector<bool> may_write;
  };
  const Case cases[] = {
      {"arrays and pointers",
       "__global__ void k(cj::Array<float, 1> o, cj::Array<const float, 1> i, float* p, "
       "const float* q) {}",
       {ParamRole::kOutput, ParamRole::kInput, ParamRole::kOutput, ParamRole::kInput},
       {true, false, true, false}},
      {"numbers", "__global__ void k(int n, const float s, double d) {}",
       {ParamRole::kScalar, ParamRole::kScalar, ParamRole::kScalar}, {false, false, false}},
      // `const auto` deduces a const Array of non-const elements: the kernel may still write.
      {"auto", "__global__ void k(auto x, const auto y) {}", {ParamRole::kAuto, ParamRole::kAuto},
       {true, true}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = cjtest::reflect(c.source);
    ASSERT_EQ(kernels.size(), 1u);
    ASSERT_EQ(kernels[0].params.size(), c.roles.size());
    for (size_t i = 0; i < c.roles.size(); ++i) {
      SCOPED_TRACE(kernels[0].params[i].name);
      EXPECT_EQ(param_role(kernels[0].params[i]), c.roles[i]);
      EXPECT_EQ(may_write(kernels[0].params[i]), c.may_write[i]);
    }
  }
  EXPECT_STREQ(to_string(ParamRole::kOutput), "output");
  EXPECT_STREQ(to_string(ParamRole::kAuto), "auto");
}

// Declaration-level facts: name, template header, linkage, definition, line.
struct DeclCase {
  const char* title;
  std::string source;
  std::string name;
  bool is_template;
  std::string template_params;
  bool is_extern_c;
  bool is_definition;
  size_t line;
  size_t num_params;
};

TEST(ReflectionTest, Declarations) {
  const std::vector<DeclCase> cases = {
      {"plain definition", "\n\n__global__ void scale(float* x, float s) { x[0] *= s; }", "scale",
       false, "", false, true, 3, 2},
      {"declaration only", "__global__ void scale(float* x, float s);", "scale", false, "", false,
       false, 1, 2},
      {"template", "template <typename T, int N = 4, class U = float>\n__global__ void t(T* x, U y) {}",
       "t", true, "typename T, int N = 4, class U = float", false, true, 2, 2},
      {"extern \"C\"", "extern \"C\" __global__ void c_kernel(float* x) {}", "c_kernel", false, "",
       true, true, 1, 1},
      {"__launch_bounds__ after void",
       "__global__ void __launch_bounds__(256, 2) bounded(float* x, int n) {}", "bounded", false,
       "", false, true, 1, 2},
      {"__launch_bounds__ before void",
       "__global__ __launch_bounds__(128) void bounded2(float* x) {}", "bounded2", false, "",
       false, true, 1, 1},
      {"static kernel", "static __global__ void s(int n) {}", "s", false, "", false, true, 1, 1},
      {"template with __launch_bounds__",
       "template <int BLOCK>\n__global__ void __launch_bounds__(BLOCK) tb(float* x) {}", "tb", true,
       "int BLOCK", false, true, 2, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = cjtest::reflect(c.source);
    ASSERT_EQ(kernels.size(), 1u);
    const KernelDecl& k = kernels[0];
    EXPECT_EQ(k.name, c.name);
    EXPECT_EQ(k.is_template, c.is_template);
    EXPECT_EQ(k.template_params, c.template_params);
    EXPECT_EQ(k.is_extern_c, c.is_extern_c);
    EXPECT_EQ(k.is_definition, c.is_definition);
    EXPECT_EQ(k.line, c.line);
    EXPECT_EQ(k.params.size(), c.num_params);
  }
}

TEST(ReflectionTest, ExternCArraysAreStridedAndNotRewritten) {
  auto kernels = cjtest::reflect("extern \"C\" __global__ void k(cj::Array<float, 1> a, float* b) {}");
  ASSERT_EQ(kernels.size(), 1u);
  const KernelDecl& k = kernels[0];
  EXPECT_TRUE(k.is_extern_c);
  EXPECT_EQ(k.params[0].kind, ParamKind::kArray);
  EXPECT_EQ(k.params[0].layout, LayoutMode::kStrided);
  EXPECT_EQ(k.params[0].rewritten_type, k.params[0].type);
  EXPECT_EQ(k.layout_params(), 0u);
  EXPECT_EQ(k.rewritten_template_header(), "");
}

TEST(ReflectionTest, ExternCBlock) {
  const std::string source = "extern \"C\" {\n__global__ void k(cj::Array<float, 1> a) {}\n}\n";
  auto kernels = cjtest::reflect(source);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_TRUE(kernels[0].is_extern_c);
  EXPECT_EQ(kernels[0].layout_params(), 0u);
  EXPECT_EQ(rewrite_layouts(source, kernels), source);
}

TEST(ReflectionTest, IgnoresCommentsStringsAndDirectives) {
  const std::string source =
      "// __global__ void in_line_comment(int x);\n"
      "/* __global__ void in_block_comment(int x) {}\n"
      "   still a comment: __global__ void in_block_comment2(int x); */\n"
      "#define KERNEL_TEXT \"__global__ void in_macro(int)\"\n"
      "const char* text = \"__global__ void in_string(int) \\\" __global__ void esc(int)\";\n"
      "const char quote = '\"';\n"
      "__global__ void real(int n /* __global__ void in_params(int) */) {}\n"
      "const char* after = \"__global__ void after_string(float*)\";\n";
  auto kernels = cjtest::reflect(source);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].name, "real");
  EXPECT_EQ(kernels[0].line, 7u);
  ASSERT_EQ(kernels[0].params.size(), 1u);
  EXPECT_EQ(kernels[0].params[0].name, "n");
}

TEST(ReflectionTest, SeveralKernelsInOrder) {
  auto kernels = cjtest::reflect(
      "__global__ void first(float* a) {}\n"
      "__device__ float helper(float x) { return x; }\n"
      "template <class T> __global__ void second(T* b, int n) {}\n"
      "__global__ void third() {}\n");
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0].name, "first");
  EXPECT_EQ(kernels[1].name, "second");
  EXPECT_EQ(kernels[2].name, "third");
  EXPECT_EQ(kernels[1].find_param("n"), std::optional<size_t>(1));
  EXPECT_EQ(kernels[1].find_param("missing"), std::nullopt);
  EXPECT_TRUE(kernels[2].params.empty());
}

TEST(ReflectionTest, ForwardDeclarationThenDefinition) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"declaration first",
       "__global__ void k(float*, int);\n"
       "void host() {}\n"
       "__global__ void k(float* x, int n) { x[0] = n; }\n"},
      {"definition first",
       "__global__ void k(float* x, int n) { x[0] = n; }\n"
       "void host() {}\n"
       "__global__ void k(float* ignored, int names);\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    auto kernels = cjtest::reflect(c.second);
    ASSERT_EQ(kernels.size(), 1u);
    const KernelDecl& k = kernels[0];
    EXPECT_TRUE(k.is_definition);
    ASSERT_EQ(k.params.size(), 2u);
    EXPECT_EQ(k.params[0].name, "x");
    EXPECT_EQ(k.params[1].name, "n");
    EXPECT_TRUE(k.params[0].named);
  }
}

TEST(ReflectionTest, OverloadedKernelNamesAreRejected) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"different types", "__global__ void k(float* x) {}\n__global__ void k(int* x) {}\n"},
      {"different counts", "__global__ void k(float* x) {}\n\n__global__ void k(float* x, int n);\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    std::string msg = expect_throws<c10::ValueError>([&] { cjtest::reflect(c.second); });
    CJ_EXPECT_CONTAINS(msg, "kernel 'k' is declared at lines 1 and");
    CJ_EXPECT_CONTAINS(msg, "overloaded __global__ functions are not supported");
  }
}

TEST(ReflectionTest, ExplicitSpecializationIsNotAKernel) {
  auto kernels = cjtest::reflect(
      "template <class T> __global__ void k(T* x) {}\n"
      "template <> __global__ void k<float>(float* x) {}\n");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_TRUE(kernels[0].is_template);
  EXPECT_EQ(kernels[0].template_params, "class T");
}

std::string blanks(size_t n) { return std::string(n, ' '); }

struct MaskCase {
  const char* title;
  std::string in, out;
};

// Each case's masked text, which keeps every offset and newline of its input.
void expect_masks(std::string (*mask)(const std::string&), const std::vector<MaskCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    std::string m = mask(c.in);
    EXPECT_EQ(m, c.out);
    ASSERT_EQ(m.size(), c.in.size());
    for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i] == '\n', c.in[i] == '\n') << "at " << i;
  }
}

TEST(ReflectionTest, MaskSourceKeepsOffsetsAndNewlines) {
  expect_masks(mask_source, {
      {"line comment", "a // c\nb", "a     \nb"},
      {"block comment over lines", "x /* y\nz */ w", "x     \n     w"},
      {"string keeps its quotes", "s = \"__global__\";", "s = \"          \";"},
      {"escaped quote in string", "s = \"a\\\"b\"; t", "s = \"    \"; t"},
      {"character literals", "c = '\"'; d = '\\'';", "c = ' '; d = '  ';"},
      {"extern \"C\" stays recognisable", "extern \"C\" f", "extern \" \" f"},
      {"preprocessor line", "#include <cj/cj.cuh>\nint x;", blanks(20) + "\nint x;"},
      {"indented directive", "  # pragma once\nint y;", blanks(15) + "\nint y;"},
      {"directive with continuation", "#define A \\\n  B\nint z;", blanks(11) + "\n" + blanks(3) + "\nint z;"},
      {"'#' mid-line is code", "a # b", "a # b"},
      {"unterminated block comment", "k /* open", "k        "},
  });
}

// mask_comments blanks comments alone: literals (inline PTX) and directives stay, and a `//`
// inside a literal starts no comment.
TEST(ReflectionTest, MaskCommentsKeepsLiteralsAndDirectives) {
  expect_masks(mask_comments, {
      {"line comment", "a // __shared__\nb", "a " + blanks(13) + "\nb"},
      {"block comment over lines", "x /* y\nz */ w", "x     \n     w"},
      {"string kept", "asm(\"bar.sync 0;\");", "asm(\"bar.sync 0;\");"},
      {"`//` inside a string", "asm(\"// x\\n exit;\"); // y", "asm(\"// x\\n exit;\"); " + blanks(4)},
      {"escaped quote in string", "s = \"a\\\"//b\"; // c", "s = \"a\\\"//b\"; " + blanks(4)},
      {"directive kept, its comment blanked", "#include <cooperative_groups.h> // cg\nint x;",
       "#include <cooperative_groups.h> " + blanks(5) + "\nint x;"},
      {"unterminated block comment", "k /* open", "k        "},
  });
}

TEST(ReflectionTest, LayoutParamsAndRewrittenTypes) {
  auto kernels = cjtest::reflect(
      "template <class T>\n"
      "__global__ void k(cj::Array<T, 1> a, cj::Array<const T, 2, cj::Contiguous> b,\n"
      "                  cj::Array<const T, 3> c, T* d) {}\n");
  ASSERT_EQ(kernels.size(), 1u);
  const KernelDecl& k = kernels[0];
  EXPECT_EQ(k.layout_params(), 2u);
  EXPECT_EQ(k.params[0].rewritten_type, "cj::Array<T, 1, CjL0>");
  EXPECT_EQ(k.params[1].rewritten_type, "cj::Array<const T, 2, cj::Contiguous>");
  EXPECT_EQ(k.params[2].rewritten_type, "cj::Array<const T, 3, CjL1>");
  EXPECT_EQ(k.params[3].rewritten_type, "T*");
  // Layout parameters have no default: they are deduced even next to explicit template arguments.
  EXPECT_EQ(k.rewritten_template_header(), "template <class T, class CjL0, class CjL1>");
}

TEST(ReflectionTest, RewrittenTemplateHeader) {
  struct Case {
    const char* title;
    std::string source;
    std::string header;
  };
  const std::vector<Case> cases = {
      {"no template, no arrays", "__global__ void k(float* x) {}", ""},
      {"template, no arrays", "template <int N> __global__ void k(float* x) {}", "template <int N>"},
      {"no template, one array", "__global__ void k(cj::Array<float, 1> a) {}",
       "template <class CjL0>"},
      {"template with defaults, two arrays",
       "template <class T, int B = 4> __global__ void k(cj::Array<T, 1> a, cj::Array<T, 2> b) {}",
       "template <class T, int B = 4, class CjL0, class CjL1>"},
      {"explicit layouts only", "__global__ void k(cj::Array<float, 1, cj::Strided> a) {}", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = cjtest::reflect(c.source);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0].rewritten_template_header(), c.header);
  }
}

TEST(ReflectionTest, RewriteLayouts) {
  struct Case {
    const char* title;
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {"non-template kernel",
       "__global__ void k(cj::Array<const float, 2> a, float s) {}",
       "template <class CjL0> __global__ void k(cj::Array<const float, 2, CjL0> a, "
       "float s) {}"},
      {"template kernel, explicit layout kept",
       "template <class T>\n"
       "__global__ void k(cj::Array<T, 1> a, cj::Array<const T, 1, cj::Contiguous> b, "
       "cj::Array<const T, 1> c) {}",
       "template <class T, class CjL0, class CjL1>\n"
       "__global__ void k(cj::Array<T, 1, CjL0> a, cj::Array<const T, 1, cj::Contiguous> b, "
       "cj::Array<const T, 1, CjL1> c) {}"},
      {"declaration then definition: both rewritten",
       "__global__ void k(cj::Array<float, 1> a);\n"
       "__global__ void k(cj::Array<float, 1> a) {}\n",
       "template <class CjL0> __global__ void k(cj::Array<float, 1, CjL0> a);\n"
       "template <class CjL0> __global__ void k(cj::Array<float, 1, CjL0> a) {}\n"},
      {"comments untouched",
       "// cj::Array<float, 1> in a comment\n__global__ void k(cj::Array<float, 1> /* x */ a) {}",
       "// cj::Array<float, 1> in a comment\ntemplate <class CjL0> __global__ void "
       "k(cj::Array<float, 1, CjL0> /* x */ a) {}"},
      {"only kernels with deduced layouts change",
       "__global__ void p(float* x) {}\n__global__ void q(cj::Array<float, 1> a) {}\n",
       "__global__ void p(float* x) {}\ntemplate <class CjL0> __global__ void "
       "q(cj::Array<float, 1, CjL0> a) {}\n"},
      {"no arrays: unchanged", "__global__ void k(float* x, int n) {}",
       "__global__ void k(float* x, int n) {}"},
      {"extern \"C\": unchanged", "extern \"C\" __global__ void k(cj::Array<float, 1> a) {}",
       "extern \"C\" __global__ void k(cj::Array<float, 1> a) {}"},
      {"template kernel declared static",
       "template <class T> static __global__ void k(cj::Array<T, 1> a) {}",
       "template <class T, class CjL0> static __global__ void k(cj::Array<T, 1, "
       "CjL0> a) {}"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    EXPECT_EQ(rewrite_layouts(c.in, cjtest::reflect(c.in)), c.out);
  }
}

TEST(ReflectionTest, RewriteLayoutsOfStaticKernel) {
  const std::string in = "static __global__ void k(cj::Array<float, 1> a) {}";
  const std::string want =
      "template <class CjL0> static __global__ void k(cj::Array<float, 1, CjL0> "
      "a) {}";
  const std::string got = rewrite_layouts(in, cjtest::reflect(in));
  EXPECT_EQ(got, want);
}

TEST(ReflectionTest, TemplateParameterNamesAndDependentElements) {
  struct Case {
    const char* title;
    std::string source;
    std::vector<std::string> names;
    std::vector<bool> dependent;  // per parameter
  };
  const std::vector<Case> cases = {
      {"not a template", "__global__ void k(float* a, Vec* b, int n) {}", {}, {false, false, false}},
      {"type and value parameters with defaults",
       "template <typename T, int N = 4, class Acc = float>\n"
       "__global__ void k(T* a, const Acc* b, const float4* c, cj::Array<T, N> d) {}",
       {"T", "N", "Acc"}, {true, true, false, true}},
      {"a pack, an unnamed parameter and a template template parameter",
       "template <class... Ts, typename, template <class> class Box>\n"
       "__global__ void k(const Box<float>* a, Tsx* b, typename Ts::type* c) {}",
       {"Ts", "Box"}, {true, false, true}},
      {"names that only contain a parameter's name",
       "template <class T>\n__global__ void k(T2* a, const MyT* b, T const* c) {}",
       {"T"}, {false, false, true}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = cjtest::reflect(c.source);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0].template_param_names(), c.names);
    ASSERT_EQ(kernels[0].params.size(), c.dependent.size());
    for (size_t i = 0; i < c.dependent.size(); ++i) {
      SCOPED_TRACE(kernels[0].params[i].name);
      EXPECT_EQ(kernels[0].params[i].element_dependent, c.dependent[i]);
    }
  }
  EXPECT_EQ(identifiers_of("const ::cuda::std::complex<T2>* __restrict__"),
            (std::vector<std::string>{"const", "cuda", "std", "complex", "T2", "__restrict__"}));
}

// What the front end reads is what NVRTC compiles: preprocessed with the kernel's macros.
TEST(ReflectionTest, FrontEndReadsThePreprocessedSource) {
  struct Case {
    const char* title;
    std::string source;
    std::vector<std::string> options;  // the user's NVRTC options
    std::vector<std::string> names;    // kernel names, in order
    std::vector<std::string> qualified;
    std::vector<std::string> first_params;  // type of each kernel's first parameter
  };
  const std::vector<Case> cases = {
      {"#if 0 and #ifndef", "#if 0\n__global__ void ghost(int* a) {}\n#endif\n"
       "#ifndef FEATURE\n__global__ void off(int* a) {}\n#else\n__global__ void on(float* a) {}\n#endif\n",
       {"-DFEATURE"}, {"on"}, {"on"}, {"float*"}},
      {"long form define", "#ifdef FEATURE\n__global__ void on(float* a) {}\n#endif\n",
       {"--define-macro=FEATURE"}, {"on"}, {"on"}, {"float*"}},
      {"macro types and continuations", "#define TYPE double\n__global__ void k(const TYPE* \\\n a, int n) {}\n",
       {}, {"k"}, {"k"}, {"const double*"}},
      {"namespaces", "namespace a { namespace b { __global__ void k(float* x) {} } }\n"
       "namespace { __global__ void anon(int* x) {} }\n",
       {}, {"k", "anon"}, {"a::b::k", "anon"}, {"float*", "int*"}},
      {"kernels made by a macro", "#define K(name) __global__ void name(float* x) {}\nK(one)\nK(two)\n",
       {}, {"one", "two"}, {"one", "two"}, {"float*", "float*"}},
      {"typedefs keep their names", "typedef float real;\n__global__ void k(real* x) {}\n",
       {}, {"k"}, {"k"}, {"real*"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto kernels = reflect_kernels(c.source, frontend_args(c.options, "c++17"));
    ASSERT_EQ(kernels.size(), c.names.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      EXPECT_EQ(kernels[i].name, c.names[i]);
      EXPECT_EQ(kernels[i].qualified_name, c.qualified[i]);
      ASSERT_FALSE(kernels[i].params.empty());
      EXPECT_EQ(kernels[i].params[0].type, c.first_params[i]);
    }
  }
}

TEST(ReflectionTest, SerializedReflectionRoundTrips) {
  const std::string source =
      "namespace ns {\ntemplate <typename T, int N = 4>\n__global__ void k(cj::Array<T, 2> out, "
      "const T* __restrict__ x, T a, auto z) {}\n}\n__global__ void plain(float* o) {}\n";
  const auto kernels = cjtest::reflect(source);
  ASSERT_EQ(kernels.size(), 2u);
  const auto again = deserialize_kernels(serialize_kernels(kernels));
  ASSERT_EQ(again.size(), kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    SCOPED_TRACE(kernels[i].name);
    EXPECT_EQ(again[i].qualified_name, kernels[i].qualified_name);
    EXPECT_EQ(again[i].template_params, kernels[i].template_params);
    EXPECT_EQ(again[i].edits, kernels[i].edits);
    ASSERT_EQ(again[i].params.size(), kernels[i].params.size());
    for (size_t j = 0; j < kernels[i].params.size(); ++j) {
      EXPECT_EQ(again[i].params[j].rewritten_type, kernels[i].params[j].rewritten_type);
      EXPECT_EQ(again[i].params[j].kind, kernels[i].params[j].kind);
      EXPECT_EQ(again[i].params[j].layout_insert, kernels[i].params[j].layout_insert);
    }
  }
  EXPECT_EQ(rewrite_layouts(source, again), rewrite_layouts(source, kernels));
  const std::string bytes = serialize_kernels(kernels);
  CJ_EXPECT_CONTAINS(
      expect_throws<c10::ValueError>([&] { deserialize_kernels(bytes.substr(0, bytes.size() - 2)); }),
      "serialized reflection is");  // truncated or damaged, by where the cut falls
  CJ_EXPECT_CONTAINS(expect_throws<c10::ValueError>([&] { deserialize_kernels("5:other"); }),
                     "has the format 'other'");
}

TEST(ReflectionTest, ParamKindNames) {
  const std::vector<std::pair<ParamKind, std::string>> cases = {
      {ParamKind::kArray, "array"},
      {ParamKind::kPointer, "pointer"},
      {ParamKind::kScalar, "scalar"},
      {ParamKind::kAuto, "auto"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.second);
    EXPECT_EQ(to_string(c.first), c.second);
  }
}

}  // namespace
}  // namespace torch_cudajit
