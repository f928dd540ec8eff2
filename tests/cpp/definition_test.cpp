// torch_cudajit C++ tests: the kernel definition (csrc/definition.cpp): each parameter's binding,
// the effective C++ standard, the fingerprint, the pickled state, and one definition shared by
// the C++ Kernel, the TorchScript object and their runtimes.
#include "definition.h"
#include "kernel.h"
#include "ops/kernel_object.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

const char* kMixed = R"(
template <typename T>
__global__ void mixed(cj::Array<T, 2> out, cj::Array<const float, 1> x, const T* y, float4* v,
                      double a, T b) {}
__global__ void other(int* p) {}
)";

std::shared_ptr<const KernelDefinition> define(const std::string& source, const std::string& name,
                                               KernelOptions options = {}) {
  return KernelDefinition::from_source(source, name, std::move(options), "mixed.cu");
}

TEST(DefinitionTest, BindsEachParameterOnce) {
  const auto def = define(kMixed, "mixed");
  struct Case {
    const char* name;
    ParamRole role;
    TypeCode element, scalar;
    int rank;
    bool vector;
  };
  const Case cases[] = {
      {"out", ParamRole::kOutput, TypeCode::kUnknown, TypeCode::kUnknown, 2, false},
      {"x", ParamRole::kInput, TypeCode::kFloat, TypeCode::kUnknown, 1, false},
      {"y", ParamRole::kInput, TypeCode::kUnknown, TypeCode::kUnknown, -1, false},
      {"v", ParamRole::kOutput, TypeCode::kUnknown, TypeCode::kUnknown, -1, true},
      {"a", ParamRole::kScalar, TypeCode::kUnknown, TypeCode::kDouble, -1, false},
      {"b", ParamRole::kScalar, TypeCode::kUnknown, TypeCode::kUnknown, -1, false},
  };
  ASSERT_EQ(def->bindings().size(), std::size(cases));
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    const ParamBinding& b = def->bindings()[i];
    EXPECT_EQ(b.param, &def->decl().params[i]);  // the reflected parameter, not a copy
    EXPECT_EQ(b.param->name, c.name);
    EXPECT_EQ(b.role, c.role);
    EXPECT_EQ(def->roles()[i], c.role);
    EXPECT_EQ(b.element, c.element);
    EXPECT_EQ(b.scalar, c.scalar);
    EXPECT_EQ(b.rank, c.rank);
    EXPECT_EQ(b.vector != nullptr, c.vector);
  }
  EXPECT_EQ(def->name(), "mixed");
  CJ_EXPECT_CONTAINS(def->describe_params(), "cj::Array<const float, 1> x (input: const, read only)");
}

TEST(DefinitionTest, UnknownKernelNamesTheKernelsThatExist) {
  CJ_EXPECT_CONTAINS(cjtest::expect_throws<c10::ValueError>([] { define(kMixed, "missing"); }),
                     "no __global__ function named 'missing' in the source; it defines 'mixed', "
                     "'other'");
}

TEST(DefinitionTest, AutoParametersRaiseTheStandardButStateKeepsTheRequestedOne) {
  struct Case {
    const char* name;
    const char* source;
    const char* requested;
    const char* effective;
  };
  const Case cases[] = {
      {"auto, c++17", "__global__ void k(auto x) {}", "c++17", "c++20"},
      {"auto elsewhere in the source", "__global__ void k(int* p) {}\n"
                                       "__global__ void j(auto x) {}", "c++14", "c++20"},
      {"no auto", "__global__ void k(int* p) {}", "c++17", "c++17"},
      {"auto, c++20 asked", "__global__ void k(auto x) {}", "c++20", "c++20"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    KernelOptions o;
    o.compile.std = c.requested;
    const auto def = define(c.source, "k", o);
    EXPECT_EQ(def->options().compile.std, c.effective);
    EXPECT_EQ(def->requested_std(), c.requested);
    EXPECT_EQ(std::get<3>(def->state()), c.requested);
  }
}

TEST(DefinitionTest, StateRoundTripsWithoutTheFrontEnd) {
  KernelOptions o;
  o.compile.extra = {"-DSCALE=2", "--use_fast_math"};
  o.compile.debug = true;
  o.template_args = "float";
  o.cache = false;
  o.cooperative = 0;
  const auto def = define(kMixed, "mixed", o);
  const std::string bytes = KernelDefinition::encode(def->state());
  const auto copy = KernelDefinition::from_state(KernelDefinition::decode(bytes));
  EXPECT_EQ(copy->fingerprint(), def->fingerprint());
  EXPECT_EQ(copy->options().compile.extra, o.compile.extra);
  EXPECT_TRUE(copy->options().compile.debug);
  EXPECT_EQ(copy->options().template_args, "float");
  EXPECT_FALSE(copy->options().cache);
  EXPECT_EQ(copy->options().cooperative, 0);
  EXPECT_EQ(copy->program().filename(), "mixed.cu");
  EXPECT_EQ(copy->roles(), def->roles());
  EXPECT_EQ(KernelDefinition::encode(copy->state()), bytes);

  struct Bad {
    const char* name;
    std::string bytes;
    const char* message;
  };
  const Bad bad[] = {
      {"truncated", bytes.substr(0, 30), "a pickled cudajit.Kernel is truncated"},
      {"trailing", bytes + "1:x", "a pickled cudajit.Kernel has trailing bytes"},
      {"other format", "5:hello", "has the format 'hello', expected 'torch_cudajit kernel 1'"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    CJ_EXPECT_CONTAINS(
        cjtest::expect_throws<c10::ValueError>([&] { KernelDefinition::decode(b.bytes); }),
        b.message);
  }
}

TEST(DefinitionTest, FingerprintCoversWhatDefinesTheKernel) {
  const std::string base = define(kMixed, "mixed")->fingerprint();
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(define(kMixed, "mixed")->fingerprint(), base);
  struct Case {
    const char* name;
    std::function<void(KernelOptions&)> change;
  };
  const Case cases[] = {
      {"options", [](KernelOptions& o) { o.compile.extra = {"-DA=1"}; }},
      {"std", [](KernelOptions& o) { o.compile.std = "c++20"; }},
      {"debug", [](KernelOptions& o) { o.compile.debug = true; }},
      {"lineinfo", [](KernelOptions& o) { o.compile.lineinfo = true; }},
      {"template args", [](KernelOptions& o) { o.template_args = "float"; }},
      {"cooperative", [](KernelOptions& o) { o.cooperative = 1; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    KernelOptions o;
    c.change(o);
    EXPECT_NE(define(kMixed, "mixed", o)->fingerprint(), base);
  }
  EXPECT_NE(define(kMixed, "other")->fingerprint(), base);
}

TEST(DefinitionTest, OneDefinitionServesEveryHolder) {
  const auto def = define(kMixed, "mixed");
  Kernel kernel(def);
  KernelObject object(def);
  auto runtime = std::make_shared<KernelRuntime>(def);
  KernelObject shared(runtime);
  // Every holder reads the same definition: nothing was reflected or bound again.
  EXPECT_EQ(&kernel.definition(), def.get());
  EXPECT_EQ(&object.definition(), def.get());
  EXPECT_EQ(&object.runtime().definition(), def.get());
  EXPECT_EQ(&runtime->definition(), def.get());
  EXPECT_EQ(&runtime->decl(), &def->decl());
  // An object made from a runtime shares it, and with it the compiled code.
  EXPECT_EQ(&shared.runtime(), runtime.get());
  EXPECT_EQ(&shared.definition(), def.get());
  EXPECT_EQ(object.fingerprint(), def->fingerprint());
  EXPECT_EQ(&object.roles(), &def->roles());
  // Two kernels of one program share its reflection.
  const auto other = std::make_shared<const KernelDefinition>(def->program_ptr(), "other",
                                                              KernelOptions{});
  EXPECT_EQ(&other->program(), &def->program());
}

}  // namespace
}  // namespace torch_cudajit
