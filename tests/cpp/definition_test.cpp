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
#include <sstream>
#include <string>
#include <type_traits>
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
    EXPECT_EQ(def->state().std, c.requested);
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

// A State with every field set apart from its default.
KernelDefinition::State sample_state() {
  KernelDefinition::State s;
  s.source = "__global__ void k(float* p) {}\n";
  s.name = "k";
  s.options = {"-DA=1", "--use_fast_math"};
  s.std = "c++17";
  s.debug = true;
  s.lineinfo = false;
  s.template_args = "float";
  s.cache = false;
  s.link = {"a.ptx", "b.ltoir"};
  s.filename = "k.cu";
  s.cooperative = -1;
  s.reflection = std::string("\x01\xff" "bytes");
  return s;
}

// Each field as "name=value", in list order, for comparing States field by field.
std::vector<std::string> describe(const KernelDefinition::State& s) {
  std::vector<std::string> out;
  s.for_each([&](const StateField& f, const auto& v) {
    std::ostringstream os;
    os << f.name << "=";
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::vector<std::string>>)
      for (const auto& item : v) os << "[" << item << "]";
    else
      os << v;
    out.push_back(os.str());
  });
  return out;
}

// The encoding of sample_state() as this format has always written it: pickles, TorchScript
// archives and disk records hold these bytes, so any change here breaks them.
const std::string kGoldenState = std::string("22:torch_cudajit kernel 1") +
                                 "31:__global__ void k(float* p) {}\n" + "1:k" +
                                 "1:2" + "5:-DA=1" + "15:--use_fast_math" + "5:c++17" +
                                 "1:1" + "1:0" + "5:float" + "1:0" +
                                 "1:2" + "5:a.ptx" + "7:b.ltoir" + "4:k.cu" + "2:-1" +
                                 "7:\x01\xff" "bytes";

TEST(DefinitionStateTest, EncodingIsTheGoldenOne) {
  EXPECT_EQ(KernelDefinition::encode(sample_state()), kGoldenState);
  EXPECT_EQ(describe(KernelDefinition::decode(kGoldenState)), describe(sample_state()));
}

TEST(DefinitionStateTest, FingerprintsAreTheGoldenOnes) {
  // What fingerprints have always been for these definitions: they name kernels in TorchScript
  // and torch.compile guards, and must not change with the State's form.
  KernelOptions all;
  all.compile.extra = {"-DA=1", "-DB=2"};
  all.compile.std = "c++14";
  all.compile.debug = true;
  all.compile.lineinfo = true;
  all.template_args = "float";
  all.cache = false;
  all.compile.link = {"x.ptx"};
  all.cooperative = 0;
  EXPECT_EQ(define(kMixed, "mixed")->fingerprint(), "b94bd50843e7617d");
  EXPECT_EQ(define(kMixed, "mixed", all)->fingerprint(), "53164b3ebae3d33b");
  // A definition made again from its State keeps it.
  const auto def = define(kMixed, "mixed", all);
  EXPECT_EQ(KernelDefinition::from_state(def->state())->fingerprint(), "53164b3ebae3d33b");
}

TEST(DefinitionStateTest, EveryFieldRoundTrips) {
  using State = KernelDefinition::State;
  struct Case {
    const char* field;
    std::function<void(State&)> change;
  };
  const Case cases[] = {
      {"source", [](State& s) { s.source = "__global__ void j() {}\n// \xc3\xa9t\xc3\xa9\n"; }},
      {"name", [](State& s) { s.name = "j"; }},
      {"options", [](State& s) { s.options = {"", "-DX=\"a b\"", "1:2"}; }},
      {"std", [](State& s) { s.std = "c++20"; }},
      {"debug", [](State& s) { s.debug = false; }},
      {"lineinfo", [](State& s) { s.lineinfo = true; }},
      {"template_args", [](State& s) { s.template_args = "double, 4"; }},
      {"cache", [](State& s) { s.cache = true; }},
      {"link", [](State& s) { s.link.clear(); }},
      {"filename", [](State& s) { s.filename = "dir/other file.cu"; }},
      {"cooperative", [](State& s) { s.cooperative = 1; }},
      {"reflection", [](State& s) { s.reflection = std::string("\0\x80:9", 4); }},
  };
  // One case per field of the list, so that a new field needs a case.
  std::vector<std::string> names;
  sample_state().for_each([&](const StateField& f, const auto&) { names.push_back(f.name); });
  ASSERT_EQ(names.size(), std::size(cases));
  ASSERT_EQ(names.size(), State::kFieldCount);
  const std::string base = KernelDefinition::encode(sample_state());
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.field);
    EXPECT_EQ(names[i], c.field);
    State s = sample_state();
    c.change(s);
    const std::string bytes = KernelDefinition::encode(s);
    EXPECT_NE(bytes, base);  // the field is encoded
    const State back = KernelDefinition::decode(bytes);
    EXPECT_EQ(describe(back), describe(s));
    EXPECT_EQ(KernelDefinition::encode(back), bytes);
  }
}

// The "<length>:<bytes>" fields of kGoldenState with field `at` replaced by `with`.
std::string golden_with(size_t at, const std::string& with) {
  std::vector<std::string> fields;
  for (size_t pos = 0; pos < kGoldenState.size();) {
    const size_t colon = kGoldenState.find(':', pos);
    const size_t n = std::stoull(kGoldenState.substr(pos, colon - pos));
    fields.push_back(kGoldenState.substr(colon + 1, n));
    pos = colon + 1 + n;
  }
  fields.at(at) = with;
  std::string out;
  for (const auto& f : fields) out += std::to_string(f.size()) + ":" + f;
  return out;
}

TEST(DefinitionStateTest, DecodeErrorsNameTheDamagedField) {
  // kGoldenState's fields: 0 format, 1 source, 2 name, 3-5 options (count, items), 6 std,
  // 7 debug, 8 lineinfo, 9 template_args, 10 cache, 11-13 link, 14 filename, 15 cooperative,
  // 16 reflection.
  struct Case {
    const char* name;
    std::string bytes;
    std::string message;
  };
  const Case cases[] = {
      {"source", golden_with(1, "\xff"), "has text that is not UTF-8 in its field 'source'"},
      {"name", golden_with(2, "k\xc0"), "has text that is not UTF-8 in its field 'name'"},
      {"options", golden_with(3, "x"), "(a number holds 'x') in its field 'options'"},
      {"options item", golden_with(5, "\xfe"), "has text that is not UTF-8 in its field 'options'"},
      {"std", golden_with(6, "c++\xff"), "has text that is not UTF-8 in its field 'std'"},
      {"debug", golden_with(7, "2"), "(a flag holds '2') in its field 'debug'"},
      {"lineinfo", golden_with(8, "yes"), "(a flag holds 'yes') in its field 'lineinfo'"},
      {"template_args", golden_with(9, "\xff"),
       "has text that is not UTF-8 in its field 'template_args'"},
      {"cache", golden_with(10, ""), "(a flag holds '') in its field 'cache'"},
      {"link", golden_with(11, "99"), "(it counts 99 items, and 35 bytes remain) in its field 'link'"},
      {"filename", golden_with(14, "k\xff.cu"), "has text that is not UTF-8 in its field 'filename'"},
      {"cooperative", golden_with(15, "-x"), "(an integer holds '-x') in its field 'cooperative'"},
      {"cooperative range", golden_with(15, "2"), "has cooperative = 2, expected -1, 0 or 1"},
      {"reflection", kGoldenState.substr(0, kGoldenState.size() - 2),
       "(a field of 7 bytes, 5 left) in its field 'reflection'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CJ_EXPECT_CONTAINS(
        cjtest::expect_throws<c10::ValueError>([&] { KernelDefinition::decode(c.bytes); }),
        c.message);
  }
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
