// torch_cudajit C++ tests: the specialization table (csrc/specialization_table.h): compile
// once, compile_many in one NVRTC call, compile_together across the kernels of one source,
// concurrent get(), slots and failed compiles.
#include "specialization_table.h"

#include "test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::bool_arg;
using cjtest::expect_throws;
using cjtest::float_arg;
using cjtest::int_arg;
using cjtest::make_runtime;
using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::tensor_sig;

constexpr int kArch = 90;

const char* kSaxpy = R"(
__global__ void saxpy(cj::Array<float, 1> y, cj::Array<const float, 1> x, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < y.size(0)) y[i] = a * x[i] + y[i];
}
)";

SpecKey saxpy_key(bool contiguous = true, int arch = kArch) {
  return make_spec_key(arch, {tensor_sig(TypeCode::kFloat, 1, contiguous),
                              tensor_sig(TypeCode::kFloat, 1, contiguous),
                              number_sig(ArgKind::kFloat)});
}

TEST(SpecializationTableTest, GetCompilesOnce) {
  auto d = make_runtime(kSaxpy, "saxpy");
  SpecKey key = saxpy_key();
  EXPECT_EQ(d->table().lookup(key), nullptr);
  EXPECT_TRUE(d->table().specializations().empty());
  std::shared_ptr<Specialization> first = d->table().get(key);
  ASSERT_NE(first, nullptr);
  std::shared_ptr<Specialization> second = d->table().get(key);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(d->table().lookup(key).get(), first.get());
  ASSERT_EQ(d->table().specializations().size(), 1u);
  EXPECT_EQ(d->table().specializations()[0].get(), first.get());

  // What the specialization knows.
  EXPECT_TRUE(first->key == key);
  // (saxpy_key's tensors stand for unaligned data with 64-bit offsets; signatures name that.)
  EXPECT_EQ(first->signature, "(Array<float32, 1, contiguous, unaligned, 64-bit index>, "
                              "Array<const float32, 1, contiguous, unaligned, 64-bit index>, float)");
  EXPECT_EQ(first->compiled->target, "sm_90");
  EXPECT_EQ(first->lowered_name, first->compiled->lowered_names[0]);
  ASSERT_EQ(first->slots.size(), 3u);
  struct SlotCase {
    PackOp op;
    TypeCode code;
    uint32_t offset, size;
  };
  const std::vector<SlotCase> slots = {{PackOp::kArray, TypeCode::kArray, 0, 24},
                                       {PackOp::kArray, TypeCode::kArray, 24, 24},
                                       {PackOp::kFloat, TypeCode::kFloat, 48, 4}};
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE("slot " + std::to_string(i));
    EXPECT_EQ(first->slots[i].op, slots[i].op);
    EXPECT_EQ(static_cast<int>(first->slots[i].code), static_cast<int>(slots[i].code));
    EXPECT_EQ(first->slots[i].offset, slots[i].offset);
    EXPECT_EQ(first->slots[i].size, slots[i].size);
  }
  EXPECT_EQ(first->buffer_size, 52u);

  // Another key is another specialization.
  std::shared_ptr<Specialization> strided = d->table().get(saxpy_key(false));
  EXPECT_NE(strided.get(), first.get());
  EXPECT_EQ(d->table().specializations().size(), 2u);
}

TEST(SpecializationTableTest, SlotsFollowParameterAlignment) {
  auto d = make_runtime(
      "__global__ void k(bool f, double d, const int* p, char c, cj::Array<float, 2> a, float s) {}",
      "k");
  at::Tensor p = at::zeros({3}, at::kInt);
  at::Tensor a = at::zeros({2, 2});
  at::Tensor s = at::scalar_tensor(5, at::kInt);  // a 0-d float CPU tensor would be a float
  std::vector<Arg> args = {bool_arg(true), float_arg(1.0), tensor_arg(p), int_arg(7),
                           tensor_arg(a), tensor_arg(s)};
  auto spec = d->table().get(d->key(args.data(), args.size(), nullptr, kArch));
  struct SlotCase {
    const char* title;
    PackOp op;
    uint32_t offset, size;
  };
  const std::vector<SlotCase> want = {
      {"bool", PackOp::kBool, 0, 1},          {"double", PackOp::kFloat, 8, 8},
      {"const int*", PackOp::kPointer, 16, 8}, {"char", PackOp::kInt, 24, 1},
      {"Array<float, 2>", PackOp::kArray, 32, 40}, {"0-d int tensor to float", PackOp::kTensorScalar, 72, 4},
  };
  ASSERT_EQ(spec->slots.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].title);
    EXPECT_EQ(spec->slots[i].op, want[i].op);
    EXPECT_EQ(spec->slots[i].offset, want[i].offset);
    EXPECT_EQ(spec->slots[i].size, want[i].size);
  }
  EXPECT_EQ(spec->buffer_size, 76u);
}

// Without the disk cache: keys it holds would load from there instead of compiling together.
KernelOptions without_disk_cache() {
  KernelOptions o;
  o.cache = false;
  return o;
}

TEST(SpecializationTableTest, CompileManyUsesOneNvrtcCall) {
  auto d = make_runtime(R"(
template <class T>
__global__ void scale(cj::Array<T, 1> y, T a) { y[0] = a * y[0]; }
)", "scale", without_disk_cache());
  std::vector<SpecKey> keys;
  const std::vector<std::pair<TypeCode, ArgKind>> types = {{TypeCode::kFloat, ArgKind::kFloat},
                                                           {TypeCode::kDouble, ArgKind::kFloat},
                                                           {TypeCode::kInt32, ArgKind::kInt}};
  for (const auto& t : types)
    for (bool contiguous : {true, false})
      keys.push_back(make_spec_key(kArch, {tensor_sig(t.first, 1, contiguous), number_sig(t.second)}));
  // Pre-compile one key: compile_many reuses it.
  std::shared_ptr<Specialization> early = d->table().get(keys[0]);
  std::vector<std::shared_ptr<Specialization>> specs = d->table().compile_many(keys);
  ASSERT_EQ(specs.size(), keys.size());
  EXPECT_EQ(specs[0].get(), early.get());
  for (size_t i = 1; i < specs.size(); ++i) {
    SCOPED_TRACE("key " + std::to_string(i));
    EXPECT_TRUE(specs[i]->key == keys[i]);
    // All new keys came out of one CompiledProgram, each under its own name.
    EXPECT_EQ(specs[i]->compiled.get(), specs[1]->compiled.get());
    EXPECT_EQ(specs[i]->compiled->lowered_names.size(), keys.size() - 1);
    for (size_t j = 1; j < i; ++j) EXPECT_NE(specs[i]->lowered_name, specs[j]->lowered_name);
  }
  EXPECT_NE(specs[0]->compiled.get(), specs[1]->compiled.get());
  EXPECT_EQ(d->table().specializations().size(), keys.size());
  // Asking again compiles nothing.
  std::vector<std::shared_ptr<Specialization>> again = d->table().compile_many(keys);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(again[i].get(), specs[i].get());
  EXPECT_EQ(d->table().specializations().size(), keys.size());
}

TEST(SpecializationTableTest, CompileManyGroupsByArchitecture) {
  auto d = make_runtime(kSaxpy, "saxpy", without_disk_cache());
  std::vector<SpecKey> keys = {saxpy_key(true, 90), saxpy_key(true, 80), saxpy_key(false, 90),
                               saxpy_key(true, 90)};
  auto specs = d->table().compile_many(keys);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0]->compiled->target, "sm_90");
  EXPECT_EQ(specs[1]->compiled->target, "sm_80");
  EXPECT_EQ(specs[0]->compiled.get(), specs[2]->compiled.get());
  EXPECT_NE(specs[0]->compiled.get(), specs[1]->compiled.get());
  EXPECT_EQ(specs[3].get(), specs[0].get()) << "a key repeated in one batch compiles once";
  EXPECT_EQ(d->table().specializations().size(), 3u);
}

// The kernels of one source, compiled together: one NVRTC program for every kernel of one
// Program, options and architecture; keys already compiled reused; a failing batch compiles its
// entries alone so that the error names its own kernel.
TEST(SpecializationTableTest, CompileTogetherSpansTheKernelsOfOneProgram) {
  const char* source = R"(
__global__ void a(cj::Array<float, 1> y, float s) { y[0] = s; }
__global__ void b(cj::Array<float, 1> y, cj::Array<const float, 1> x) { y[0] = x[0]; }
)";
  auto program = read_program(source);
  auto make = [&](const char* name) {
    return std::make_shared<KernelRuntime>(
        std::make_shared<const KernelDefinition>(program, name, without_disk_cache()));
  };
  auto ka = make("a"), kb = make("b");
  auto other = make_runtime(kSaxpy, "saxpy", without_disk_cache());
  const SpecKey key_a = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kFloat)});
  const SpecKey key_b = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kFloat, 1)});
  const SpecKey key_b2 = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1, false),
                                               tensor_sig(TypeCode::kFloat, 1)});
  const uint64_t before = nvrtc_compile_count();
  auto specs = SpecializationTable::compile_together(
      {{&ka->table(), key_a}, {&kb->table(), key_b}, {&kb->table(), key_b2}, {&other->table(), saxpy_key()},
       {&kb->table(), key_b}});
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(nvrtc_compile_count() - before, 2u) << "one program for a and b, one for saxpy";
  EXPECT_EQ(specs[0]->compiled.get(), specs[1]->compiled.get());
  EXPECT_EQ(specs[1]->compiled.get(), specs[2]->compiled.get());
  EXPECT_NE(specs[0]->compiled.get(), specs[3]->compiled.get());
  EXPECT_EQ(specs[4].get(), specs[1].get()) << "a repeated entry compiles once";
  EXPECT_EQ(ka->table().lookup(key_a).get(), specs[0].get());
  // Compiled already: nothing more.
  const uint64_t after = nvrtc_compile_count();
  SpecializationTable::compile_together({{&ka->table(), key_a}, {&kb->table(), key_b}});
  EXPECT_EQ(nvrtc_compile_count(), after);
}

TEST(SpecializationTableTest, CompileTogetherReportsTheFailingKernelItself) {
  auto program = read_program(R"(
__global__ void good(cj::Array<float, 1> y) { y[0] = 1.0f; }
template <class T>
__global__ void bad(cj::Array<T, 1> y) {
  static_assert(sizeof(T) == 4, "bad needs 4-byte elements");
  y[0] = T(0);
}
)");
  auto make = [&](const char* name) {
    return std::make_shared<KernelRuntime>(
        std::make_shared<const KernelDefinition>(program, name, without_disk_cache()));
  };
  auto good = make("good"), bad = make("bad");
  const SpecKey key_good = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
  const SpecKey key_bad = make_spec_key(kArch, {tensor_sig(TypeCode::kDouble, 1)});
  std::string msg = expect_throws<CompileError>([&] {
    SpecializationTable::compile_together({{&good->table(), key_good}, {&bad->table(), key_bad}});
  });
  CJ_EXPECT_CONTAINS(msg, "bad needs 4-byte elements");
  EXPECT_NE(good->table().lookup(key_good), nullptr) << "the good entry compiled alone";
  EXPECT_EQ(bad->table().lookup(key_bad), nullptr);
}

TEST(SpecializationTableTest, ConcurrentGetCompilesOnce) {
  auto d = make_runtime(kSaxpy, "saxpy");
  const SpecKey key = saxpy_key();
  constexpr int kThreads = 2;
  std::atomic<int> ready{0};
  std::vector<std::shared_ptr<Specialization>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      try {
        got[t] = d->table().get(key);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_EQ(errors[t], "");
    ASSERT_NE(got[t], nullptr);
    EXPECT_EQ(got[t].get(), got[0].get());
  }
  EXPECT_EQ(d->table().specializations().size(), 1u);
}

// A failed compile is not cached: the next get() compiles (and fails) again, and other keys
// of the same table still work.
TEST(SpecializationTableTest, FailedCompileIsNotCached) {
  auto d = make_runtime(R"(
template <class T>
__global__ void k(cj::Array<T, 1> y) {
  static_assert(sizeof(T) == 4, "k needs 4-byte elements");
  y[0] = T(0);
}
)", "k");
  SpecKey bad = make_spec_key(kArch, {tensor_sig(TypeCode::kDouble, 1)});
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    std::string msg = expect_throws<CompileError>([&] { d->table().get(bad); });
    CJ_EXPECT_CONTAINS(msg, "k needs 4-byte elements");
    EXPECT_EQ(d->table().lookup(bad), nullptr);
  }
  EXPECT_TRUE(d->table().specializations().empty());
  SpecKey good = make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1)});
  EXPECT_NE(d->table().get(good), nullptr);
  EXPECT_EQ(d->table().specializations().size(), 1u);
}

// Errors found only once the compiler has resolved the parameter types.
TEST(SpecializationTableTest, ResolvedTypeErrors) {
  struct Case {
    const char* title;
    std::string source;
    SpecKey key;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"Python float to a deduced integer",
       "template <class T> __global__ void k(cj::Array<T, 1> y, T a) {}",
       make_spec_key(kArch, {tensor_sig(TypeCode::kInt32, 1), number_sig(ArgKind::kFloat)}),
       "is an integer (int32); got a Python float"},
      {"Python int to a struct",
       "struct Pair { int a, b; __device__ Pair(long long v) : a(v), b(v) {} };\n"
       "__global__ void k(cj::Array<float, 1> y, Pair p) {}",
       make_spec_key(kArch, {tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kInt)}),
       "which a Python int cannot be converted to"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    auto d = make_runtime(c.source, "k");
    std::string msg = expect_throws<c10::TypeError>([&] { d->table().get(c.key); });
    CJ_EXPECT_CONTAINS(msg, c.message);
    EXPECT_TRUE(d->table().specializations().empty());
  }
}

TEST(SpecializationTableTest, OptionsReachTheCompiler) {
  KernelOptions options;
  options.compile.extra = {"-DFACTOR=2"};
  options.compile.arch = 50;  // ignored: the key's architecture decides
  auto d = make_runtime("__global__ void k(float* y) { y[0] *= FACTOR; }", "k", options);
  at::Tensor y = at::zeros({1});
  Arg a = tensor_arg(y);
  auto spec = d->table().get(d->key(&a, 1, nullptr, kArch));
  EXPECT_EQ(spec->compiled->target, "sm_90");
  const auto& opts = spec->compiled->options;
  EXPECT_NE(std::find(opts.begin(), opts.end(), "-DFACTOR=2"), opts.end());
}

}  // namespace
}  // namespace torch_cudajit
