// torch_cudajit C++ tests: the C++ Kernel API (csrc/kernel.h). IValue conversion, extensions
// (expansion of one value into several parameters, `after` callbacks, their order) and
// compile-only use on CPU tensors; then launches on a GPU, compared with torch, which skip
// themselves when torch::cuda::is_available() is false.
#include "kernel.h"

#include "reading.h"
#include "test_util.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;

constexpr int kArch = 90;

c10::IValue pair(const at::Tensor& a, const at::Tensor& b) {
  return c10::IValue(c10::ivalue::Tuple::create(std::vector<c10::IValue>{a, b}));
}

/// Expands a tuple of two tensors into two arguments (two cj::Array parameters).
class PairExtension : public Extension {
 public:
  bool prepare(const c10::IValue& value, CUstream stream, std::vector<c10::IValue>& out,
               std::vector<std::function<void()>>& after) override {
    if (!value.isTuple()) return false;
    const auto& elements = value.toTupleRef().elements();
    if (elements.size() != 2 || !elements[0].isTensor() || !elements[1].isTensor()) return false;
    out.push_back(elements[0]);
    out.push_back(elements[1]);
    ++expanded;
    return true;
  }
  int expanded = 0;
};

/// Passes a contiguous copy of every non-contiguous tensor and copies it back after the launch
/// (numba-style write-back), through an `after` callback.
class WritebackExtension : public Extension {
 public:
  bool prepare(const c10::IValue& value, CUstream stream, std::vector<c10::IValue>& out,
               std::vector<std::function<void()>>& after) override {
    if (!value.isTensor() || value.toTensor().is_contiguous()) return false;
    at::Tensor original = value.toTensor();
    at::Tensor copy = original.contiguous();
    out.push_back(copy);
    after.push_back([original, copy]() mutable { original.copy_(copy); });
    return true;
  }
};

/// Records the values it sees, changes nothing.
class RecordingExtension : public Extension {
 public:
  RecordingExtension(std::string tag, std::vector<std::string>* log) : tag_(std::move(tag)), log_(log) {}
  bool prepare(const c10::IValue& value, CUstream stream, std::vector<c10::IValue>& out,
               std::vector<std::function<void()>>& after) override {
    log_->push_back(tag_ + ":" + value.tagKind());
    return false;
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
};

const char* kAxpy = R"(
__global__ void axpy(cj::Array<float, 1> y, cj::Array<const float, 1> x, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < y.size(0)) y[i] = a * x[i] + y[i];
}
)";

TEST(KernelTest, ToArg) {
  at::Tensor t = at::zeros({2});
  struct Case {
    const char* title;
    c10::IValue value;
    ArgKind kind;
    int64_t i;
    double d, imag;
  };
  const std::vector<Case> cases = {
      {"bool", c10::IValue(true), ArgKind::kBool, 1, 0, 0},
      {"int", c10::IValue(int64_t{-5}), ArgKind::kInt, -5, 0, 0},
      {"float", c10::IValue(2.5), ArgKind::kFloat, 0, 2.5, 0},
      {"complex", c10::IValue(c10::complex<double>(1.0, -2.0)), ArgKind::kComplex, 0, 1.0, -2.0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    Arg a = to_arg(c.value, 0);
    EXPECT_EQ(a.kind, c.kind);
    EXPECT_EQ(a.i, c.i);
    EXPECT_EQ(a.d, c.d);
    EXPECT_EQ(a.imag, c.imag);
  }
  c10::IValue tv(t);
  Arg ta = to_arg(tv, 0);
  EXPECT_EQ(ta.kind, ArgKind::kTensor);
  EXPECT_EQ(ta.tensor, &tv.toTensor());

  // None is a NULL address (the call binder lets only pointer parameters take it).
  Arg none = to_arg(c10::IValue(), 0);
  EXPECT_EQ(none.kind, ArgKind::kAddress);
  EXPECT_TRUE(none.is_none);
  EXPECT_EQ(none.u, 0u);

  const std::vector<std::pair<const char*, c10::IValue>> bad = {
      {"String", c10::IValue(std::string("text"))},
      {"Tuple", pair(t, t)},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.first);
    std::string msg = expect_throws<c10::TypeError>([&] { to_arg(b.second, 3); });
    CJ_EXPECT_CONTAINS(msg, std::string("argument 3 is a ") + b.first);
    CJ_EXPECT_CONTAINS(msg, "add an extension");
  }
}

TEST(KernelTest, ExtensionExpandsATupleIntoTwoArrays) {
  Kernel kernel(kAxpy, "axpy");
  auto ext = std::make_shared<PairExtension>();
  kernel.add_extension(ext);
  at::Tensor y = at::zeros({8});
  at::Tensor x = at::zeros({16}).slice(0, 0, 16, 2);
  std::vector<c10::IValue> values = {pair(y, x), c10::IValue(2.0)};

  std::vector<c10::IValue> storage;
  std::vector<std::function<void()>> after;
  std::vector<Arg> args = kernel.bind(values, nullptr, storage, after);
  ASSERT_EQ(args.size(), 3u);
  ASSERT_EQ(storage.size(), 3u);
  EXPECT_TRUE(after.empty());
  EXPECT_EQ(args[0].kind, ArgKind::kTensor);
  EXPECT_EQ(args[1].kind, ArgKind::kTensor);
  EXPECT_EQ(args[2].kind, ArgKind::kFloat);
  EXPECT_TRUE(args[0].tensor->is_same(y));
  EXPECT_TRUE(args[1].tensor->is_same(x));

  std::shared_ptr<Specialization> spec = kernel.compile(values, kArch);
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->key.arch, kArch);
  ASSERT_EQ(spec->key.size, 3u);
  int tensors = 0;
  for (uint32_t i = 0; i < spec->key.size; ++i) tensors += spec->key.args[i].kind == ArgKind::kTensor;
  EXPECT_EQ(tensors, 2);
  EXPECT_EQ(spec->key.args[0], cjtest::aligned_sig(TypeCode::kFloat, 1, true));
  EXPECT_EQ(spec->key.args[1], cjtest::aligned_sig(TypeCode::kFloat, 1, false));
  EXPECT_EQ(spec->signature,
            "(Array<float32, 1, contiguous>, Array<const float32, 1, strided>, float)");
  EXPECT_EQ(spec->compiled->target, "sm_90");
  EXPECT_EQ(ext->expanded, 2);  // once by bind(), once by compile()
  // Compiling again hits the cache.
  EXPECT_EQ(kernel.compile(values, kArch).get(), spec.get());
  EXPECT_EQ(kernel.runtime().table().specializations().size(), 1u);
}

TEST(KernelTest, WithoutTheExtensionATupleIsRejected) {
  Kernel kernel(kAxpy, "axpy");
  at::Tensor y = at::zeros({8}), x = at::zeros({8});
  std::string msg = expect_throws<c10::TypeError>(
      [&] { kernel.compile({pair(y, x), c10::IValue(2.0)}, kArch); });
  CJ_EXPECT_CONTAINS(msg, "argument 0 is a Tuple");
}

TEST(KernelTest, AfterCallbacksAreCollectedByBind) {
  Kernel kernel(
      "__global__ void fill(float* out, float v, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) out[i] = v;\n"
      "}\n",
      "fill");
  kernel.add_extension(std::make_shared<WritebackExtension>());
  at::Tensor base = at::zeros({10});
  at::Tensor strided = base.slice(0, 0, 10, 2);  // not contiguous: the extension takes it
  at::Tensor plain = at::zeros({5});             // contiguous: left alone

  struct Case {
    const char* title;
    at::Tensor out;
    size_t callbacks;
  };
  const std::vector<Case> cases = {{"strided output", strided, 1}, {"contiguous output", plain, 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    std::vector<c10::IValue> values = {c.out, c10::IValue(3.0), c10::IValue(int64_t{5})};
    std::vector<c10::IValue> storage;
    std::vector<std::function<void()>> after;
    std::vector<Arg> args = kernel.bind(values, nullptr, storage, after);
    ASSERT_EQ(after.size(), c.callbacks);
    ASSERT_EQ(args.size(), 3u);
    EXPECT_TRUE(args[0].tensor->is_contiguous());
    // A raw-pointer parameter now accepts the argument.
    EXPECT_NO_THROW(kernel.runtime().key(args.data(), args.size(), nullptr, kArch));
    if (c.callbacks == 1) {
      EXPECT_FALSE(args[0].tensor->is_same(c.out));
      args[0].tensor->fill_(7.0);  // what the kernel would have written
      for (auto& f : after) f();
      EXPECT_TRUE(at::equal(c.out, at::full({5}, 7.0)));
      EXPECT_TRUE(at::equal(base.slice(0, 1, 10, 2), at::zeros({5}))) << "only the view is written";
    }
  }
  // Without the extension the strided tensor is refused by the pointer parameter.
  Kernel bare("__global__ void fill(float* out, float v, int n) {}", "fill");
  expect_throws<c10::TypeError>(
      [&] { bare.compile({strided, c10::IValue(3.0), c10::IValue(int64_t{5})}, kArch); });
}

// Extensions run from the last added to the first; each sees what the later ones produced.
TEST(KernelTest, ExtensionOrder) {
  Kernel kernel(kAxpy, "axpy");
  std::vector<std::string> log;
  kernel.add_extension(std::make_shared<RecordingExtension>("first", &log));
  kernel.add_extension(std::make_shared<PairExtension>());
  kernel.add_extension(std::make_shared<RecordingExtension>("last", &log));
  at::Tensor y = at::zeros({4}), x = at::zeros({4});
  std::vector<c10::IValue> storage;
  std::vector<std::function<void()>> after;
  kernel.bind({pair(y, x), c10::IValue(1.5)}, nullptr, storage, after);
  const std::vector<std::string> want = {"last:Tuple", "last:Double", "first:Tensor",
                                         "first:Tensor", "first:Double"};
  EXPECT_EQ(log, want);
  EXPECT_EQ(storage.size(), 3u);
}

TEST(KernelTest, NullExtensionIsRejected) {
  Kernel kernel(kAxpy, "axpy");
  std::string msg = expect_throws<c10::ValueError>([&] { kernel.add_extension(nullptr); });
  CJ_EXPECT_CONTAINS(msg, "null extension");
}

TEST(KernelTest, SharedProgramServesSeveralKernels) {
  auto program = read_program(
      "__global__ void a(float* x) { x[0] = 1.f; }\n__global__ void b(int* x) { x[0] = 2; }\n");
  Kernel ka(program, "a");
  Kernel kb(program, "b");
  EXPECT_EQ(&ka.definition().program(), &kb.definition().program());
  EXPECT_EQ(ka.compile({at::zeros({1})}, kArch)->signature, "(float32*)");
  EXPECT_EQ(kb.compile({at::zeros({1}, at::kInt)}, kArch)->signature, "(int32*)");
  std::string msg = expect_throws<c10::TypeError>([&] { kb.compile({at::zeros({1})}, kArch); });
  CJ_EXPECT_CONTAINS(msg, "takes int32 elements, got a tensor of dtype float32");
}

TEST(KernelTest, AutoParametersWithCxx20) {
  KernelOptions options;
  options.compile.std = "c++20";
  Kernel kernel("__global__ void k(auto a, auto b) { a[0] = b; }", "k", options);
  at::Tensor a = at::zeros({4}, at::kDouble);
  auto spec = kernel.compile({a, c10::IValue(int64_t{3})}, kArch);
  EXPECT_EQ(spec->signature, "(Array<float64, 1, contiguous>, int)");
  EXPECT_EQ(static_cast<int>(spec->probes[1].code), static_cast<int>(TypeCode::kInt64));
}

TEST(KernelTest, AutoParametersWithDefaultOptions) {
  Kernel kernel("__global__ void k(auto a) { a[0] = 1.0f; }", "k");
  std::shared_ptr<Specialization> spec;
  std::string error;
  try {
    spec = kernel.compile({at::zeros({4})}, kArch);
  } catch (const CompileError& e) {
    error = cjtest::first_error_line(e.log());
  }
  EXPECT_EQ(spec->signature, "(Array<float32, 1, contiguous>)");
}

// ---------------------------------------------------------------------------------------------
// Launches (GPU only).

class KernelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { CJ_SKIP_WITHOUT_GPU(); }

  static at::TensorOptions cuda(at::ScalarType dtype = at::kFloat) {
    return at::TensorOptions().device(at::kCUDA).dtype(dtype);
  }
  /// A 1-D launch covering n threads.
  static LaunchRequest cover(int64_t n, int64_t block = 256) {
    LaunchRequest cfg;
    cfg.block = {block, 1, 1};
    cfg.grid = {std::max<int64_t>(1, (n + block - 1) / block), 1, 1};
    return cfg;
  }
  /// Fills an output with NaN (or a sentinel for integers) so that unwritten elements show.
  static void poison(at::Tensor& t) {
    if (at::isFloatingType(t.scalar_type()))
      t.fill_(std::numeric_limits<double>::quiet_NaN());
    else
      t.fill_(-12345);
  }
};

TEST_F(KernelGpuTest, SaxpyOnArrays) {
  Kernel kernel(R"(
__global__ void saxpy(cj::Array<float, 1> out, cj::Array<const float, 1> x,
                      cj::Array<const float, 1> y, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
)", "saxpy");
  struct Case {
    const char* title;
    int64_t n;
    int x_step, out_step;
  };
  const std::vector<Case> cases = {
      {"contiguous", 1000, 1, 1},
      {"one element", 1, 1, 1},
      {"strided input", 4097, 2, 1},
      {"strided output", 513, 1, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    at::Tensor x = at::randn({c.n * c.x_step}, cuda()).slice(0, 0, c.n * c.x_step, c.x_step);
    at::Tensor y = at::randn({c.n}, cuda());
    at::Tensor out_base = at::empty({c.n * c.out_step}, cuda());
    poison(out_base);
    at::Tensor out = out_base.slice(0, 0, c.n * c.out_step, c.out_step);
    const double a = 1.75;
    kernel.launch(cover(c.n), {out, x, y, c10::IValue(a)});
    at::Tensor want = x * a + y;
    EXPECT_TRUE(at::allclose(out.cpu(), want.cpu(), 1e-5, 1e-6));
    if (c.out_step > 1) {
      // Elements between the strided output's must stay untouched.
      at::Tensor gaps = out_base.slice(0, 1, c.n * c.out_step, c.out_step).cpu();
      EXPECT_TRUE(at::isnan(gaps).all().item<bool>());
    }
  }
  // Contiguous and strided tensors compile to different specializations.
  EXPECT_EQ(kernel.runtime().table().specializations().size(), 3u);
}

TEST_F(KernelGpuTest, RawPointerKernel) {
  Kernel kernel(R"(
__global__ void scale(float* out, const float* in, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s * in[i];
}
)", "scale");
  struct Case {
    const char* title;
    int64_t n, offset;
  };
  const std::vector<Case> cases = {{"from the start", 1000, 0}, {"view with an offset", 300, 7}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    at::Tensor base = at::randn({c.n + c.offset}, cuda());
    at::Tensor in = base.slice(0, c.offset, c.offset + c.n);
    at::Tensor out = at::empty({c.n}, cuda());
    poison(out);
    kernel.launch(cover(c.n), {out, in, c10::IValue(-0.5), c10::IValue(c.n)});
    EXPECT_TRUE(at::allclose(out.cpu(), (in * -0.5).cpu()));
  }
}

TEST_F(KernelGpuTest, ExtensionLaunch) {
  Kernel kernel(R"(
__global__ void add2(cj::Array<float, 2> out, cj::Array<const float, 2> a,
                     cj::Array<const float, 2> b) {
  long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long rows = out.size(0), cols = out.size(1);
  if (idx < rows * cols) {
    long long i = idx / cols, j = idx % cols;
    out(i, j) = a(i, j) + b(i, j);
  }
}
)", "add2");
  auto ext = std::make_shared<PairExtension>();
  kernel.add_extension(ext);
  at::Tensor a = at::randn({33, 17}, cuda());
  at::Tensor b = at::randn({17, 33}, cuda()).t();  // strided
  at::Tensor out = at::empty({33, 17}, cuda());
  poison(out);
  kernel.launch(cover(33 * 17), {out, pair(a, b)});
  EXPECT_EQ(ext->expanded, 1);
  EXPECT_TRUE(at::allclose(out.cpu(), (a + b).cpu()));
}

TEST_F(KernelGpuTest, AfterCallbackRunsAfterTheLaunch) {
  Kernel kernel(R"(
__global__ void iota(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float(i);
}
)", "iota");
  kernel.add_extension(std::make_shared<WritebackExtension>());
  at::Tensor base = at::empty({2 * 100}, cuda());
  poison(base);
  at::Tensor out = base.slice(0, 0, 200, 2);
  kernel.launch(cover(100), {out, c10::IValue(int64_t{100})});
  EXPECT_TRUE(at::equal(out.cpu(), at::arange(100, at::kFloat)));
  EXPECT_TRUE(at::isnan(base.slice(0, 1, 200, 2).cpu()).all().item<bool>());
}

TEST_F(KernelGpuTest, TemplateKernelOverDtypes) {
  Kernel kernel(R"(
template <class T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i];
}
)", "axpy");
  struct Case {
    at::ScalarType dtype;
    c10::IValue a;
  };
  const std::vector<Case> cases = {
      {at::kFloat, c10::IValue(2.5)},
      {at::kDouble, c10::IValue(2.5)},
      {at::kInt, c10::IValue(int64_t{3})},
      {at::kLong, c10::IValue(int64_t{-4})},
      {at::kHalf, c10::IValue(0.5)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c10::toString(c.dtype));
    at::Tensor x = at::arange(1, 258, cuda(c.dtype));
    at::Tensor out = at::empty_like(x);
    poison(out);
    kernel.launch(cover(x.numel()), {out, x, c.a});
    at::Tensor want = x * c.a.toScalar();
    EXPECT_TRUE(at::allclose(out.cpu().to(at::kDouble), want.cpu().to(at::kDouble)));
  }
  EXPECT_EQ(kernel.runtime().table().specializations().size(), cases.size());
}

// Every kind of scalar parameter receives the value it was given.
TEST_F(KernelGpuTest, ScalarPacking) {
  Kernel kernel(R"(
__global__ void pack(double* out, signed char a, unsigned short b, int c, unsigned long long d,
                     float e, __half f, bool g, double h, cj::complex<double> z, float t) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = (double)d; out[4] = e;
  out[5] = __half2float(f); out[6] = g; out[7] = h; out[8] = z.real(); out[9] = z.imag();
  out[10] = t;
}
)", "pack");
  at::Tensor out = at::empty({11}, cuda(at::kDouble));
  poison(out);
  at::Tensor t = at::scalar_tensor(2.5, cuda());  // a 0-d tensor read as a scalar
  const int64_t big = int64_t{1} << 53;
  auto values = [&](int64_t a, int64_t b) {
    return std::vector<c10::IValue>{out, c10::IValue(a), c10::IValue(b), c10::IValue(int64_t{-123456}),
                                    c10::IValue(big), c10::IValue(1.5), c10::IValue(0.25),
                                    c10::IValue(true), c10::IValue(int64_t{3}),
                                    c10::IValue(c10::complex<double>(1.0, -2.0)), t};
  };
  kernel.launch(LaunchRequest{}, values(-7, 65535));
  const std::vector<double> want = {-7, 65535, -123456, static_cast<double>(big), 1.5, 0.25, 1, 3, 1, -2, 2.5};
  at::Tensor got = out.cpu();
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i + 1));
    EXPECT_EQ(got[static_cast<int64_t>(i)].item<double>(), want[i]);
  }
  struct Case {
    const char* title;
    int64_t a, b;
    std::string message;
  };
  const std::vector<Case> bad = {
      {"int8 overflow", 200, 1, "is int8 with range [-128, 127]; the Python int 200 does not fit"},
      {"uint16 underflow", 1, -1, "is uint16 with range [0, 65535]; the Python int -1 does not fit"},
  };
  for (const auto& c : bad) {
    SCOPED_TRACE(c.title);
    std::string msg = expect_throws<c10::ValueError>([&] { kernel.launch(LaunchRequest{}, values(c.a, c.b)); });
    CJ_EXPECT_CONTAINS(msg, c.message);
  }
}

TEST_F(KernelGpuTest, ExplicitStreamAndOccupancyBlock) {
  Kernel kernel(R"(
__global__ void twice(cj::Array<float, 1> out, cj::Array<const float, 1> in) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = 2.0f * in[i];
}
)", "twice");
  at::Tensor in = at::randn({5000}, cuda());
  at::Tensor out = at::empty({5000}, cuda());
  poison(out);
  c10::cuda::device_synchronize();  // inputs are ready before the side stream reads them
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  LaunchRequest cfg = cover(5000);
  cfg.has_stream = true;
  cfg.stream = stream.stream();
  kernel.launch(cfg, {out, in});
  stream.synchronize();
  EXPECT_TRUE(at::allclose(out.cpu(), (in * 2).cpu()));
  auto specs = kernel.runtime().table().specializations();
  ASSERT_EQ(specs.size(), 1u);
  LaunchRequest forall;
  forall.forall_tasks = 5000;
  const ForallPlan plan = kernel.runtime().plan_forall(*specs[0], nullptr, 0,
                                                       static_cast<int>(in.get_device()), forall);
  const int64_t block = plan.launch.block[0];
  EXPECT_GE(block, 32);
  EXPECT_LE(block, 1024);
  EXPECT_EQ(plan.launch.grid[0], (5000 + block - 1) / block);  // one thread per task
  EXPECT_EQ(plan.spec, specs[0].get());
}

// More than the default 48 KiB of dynamic shared memory raises the kernel's limit first.
TEST_F(KernelGpuTest, LargeDynamicSharedMemory) {
  Kernel kernel(R"(
__global__ void reverse(float* out, const float* in, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
)", "reverse");
  const int64_t n = 20000;  // 80000 bytes
  at::Tensor in = at::randn({n}, cuda());
  at::Tensor out = at::empty({n}, cuda());
  poison(out);
  LaunchRequest cfg;
  cfg.block = {256, 1, 1};
  cfg.shared_mem = n * 4;
  kernel.launch(cfg, {out, in, c10::IValue(n)});
  EXPECT_TRUE(at::equal(out.cpu(), in.flip(0).cpu()));
  cfg.shared_mem = 16 << 20;
  std::string msg = expect_throws<c10::ValueError>([&] { kernel.launch(cfg, {out, in, c10::IValue(n)}); });
  CJ_EXPECT_CONTAINS(msg, "bytes of dynamic shared memory; this device allows at most");
}

// KernelOptions::template_args reach template parameters no argument determines.
TEST_F(KernelGpuTest, ExplicitTemplateArgumentsLaunch) {
  const char* source = R"(
template <class T, int VALUE = 1>
__global__ void fill(cj::Array<T, 1> out) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = T(VALUE);
}
)";
  struct Case {
    const char* title;
    std::string template_args;
    at::ScalarType dtype;
    double value;
  };
  const std::vector<Case> cases = {
      {"default", "", at::kFloat, 1},
      {"explicit value", "float, 7", at::kFloat, 7},
      {"explicit type and value", "int, -3", at::kInt, -3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    KernelOptions options;
    options.template_args = c.template_args;
    Kernel kernel(source, "fill", options);
    at::Tensor out = at::empty({300}, cuda(c.dtype));
    poison(out);
    kernel.launch(cover(300), {out});
    EXPECT_TRUE(at::equal(out.cpu(), at::full({300}, c.value, at::TensorOptions().dtype(c.dtype))));
  }
}

TEST_F(KernelGpuTest, LaunchErrors) {
  Kernel kernel(kAxpy, "axpy");
  at::Tensor y = at::zeros({8}, cuda()), x = at::zeros({8}, cuda());
  LaunchRequest too_big = cover(8);
  too_big.block = {2048, 1, 1};
  std::string msg = expect_throws<c10::ValueError>([&] { kernel.launch(too_big, {y, x, c10::IValue(1.0)}); });
  CJ_EXPECT_CONTAINS(msg, "block dimension x of kernel 'axpy' is 2048");
  at::Tensor cpu = at::zeros({8});
  std::string where = expect_throws<c10::TypeError>([&] { kernel.launch(cover(8), {y, cpu, c10::IValue(1.0)}); });
  CJ_EXPECT_CONTAINS(where, "got a tensor on cpu");
}

}  // namespace
}  // namespace torch_cudajit
