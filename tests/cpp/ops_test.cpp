// torch_cudajit C++ tests: the torch binding (csrc/ops/): the cudajit op family's schema, the
// custom class (state, fingerprint, roles) and the op's argument checks. Launching through the
// op needs a GPU and skips itself without one.
#include "ops/kernel_object.h"

#include "test_util.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>

namespace torch_cudajit {
namespace {

const char* kAxpy = R"(
template <typename T>
__global__ void axpy(cj::Array<T, 1> out, cj::Array<const T, 1> x, cj::Array<const T, 1> y, T a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < out.size(0)) out[i] = a * x[i] + y[i];
}
)";

c10::intrusive_ptr<KernelObject> make_axpy(std::vector<std::string> options = {}) {
  KernelOptions o;
  o.compile.extra = std::move(options);
  return c10::make_intrusive<KernelObject>(kAxpy, "axpy", std::move(o), "axpy.cu");
}

TEST(OpsTest, SchemaAnnotatesWrittenTensors) {
  ensure_kernel_class();
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("cudajit::launch", "");
  const auto& schema = op.schema();
  struct Case {
    const char* name;
    bool written;
  };
  const Case cases[] = {{"out0", true}, {"out3", true}, {"more_outputs", true}, {"inputs", false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto index = schema.argumentIndexWithName(c.name);
    ASSERT_TRUE(index.has_value());
    const auto& alias = schema.arguments()[*index].alias_info();
    EXPECT_EQ(alias != nullptr && alias->isWrite(), c.written);
  }
}

TEST(OpsTest, RolesFollowConstness) {
  auto k = make_axpy();
  const std::vector<ParamRole> expected = {ParamRole::kOutput, ParamRole::kInput, ParamRole::kInput, ParamRole::kScalar};
  EXPECT_EQ(k->roles(), expected);
  EXPECT_EQ(k->name(), "axpy");
}

// `auto` parameters: a tensor or a number, decided by the argument (written unless const).
const char* kAutoScale = R"(
__global__ void auto_scale(auto out, const auto x, auto a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}
)";

c10::intrusive_ptr<KernelObject> make_auto_scale() {
  KernelOptions o;
  o.compile.std = "c++20";
  return c10::make_intrusive<KernelObject>(kAutoScale, "auto_scale", std::move(o), "auto_scale.cu");
}

TEST(OpsTest, AutoParametersHaveRolesOfTheirOwn) {
  // `const auto x` deduces a const Array of non-const elements: the kernel may still write.
  const std::vector<ParamRole> expected = {ParamRole::kAuto, ParamRole::kAuto, ParamRole::kAuto,
                                        ParamRole::kScalar};
  EXPECT_EQ(make_auto_scale()->roles(), expected);
  OpNumbers n;
  n.add_tensor();
  n.add(c10::Scalar(1.5));
  EXPECT_EQ(n.kinds, "tf");
  EXPECT_TRUE(n.ints.empty());
}

// Numbers keep their kind on the op path: the kind can decide a template argument.
TEST(OpsTest, NumbersEncodeKindAndValue) {
  OpNumbers n;
  for (const c10::Scalar& s : {c10::Scalar(true), c10::Scalar(int64_t{7}), c10::Scalar(1.5),
                               c10::Scalar(c10::complex<double>(2.0, -3.0)), c10::Scalar(false)})
    n.add(s);
  EXPECT_EQ(n.kinds, "bifcb");
  EXPECT_EQ(std::vector<int64_t>(n.ints.begin(), n.ints.end()), (std::vector<int64_t>{1, 7, 0}));
  EXPECT_EQ(std::vector<double>(n.floats.begin(), n.floats.end()),
            (std::vector<double>{1.5, 2.0, -3.0}));
}

TEST(OpsTest, StateRoundTripsAndFingerprints) {
  auto k = make_axpy({"-DA=1"});
  KernelObject copy(k->state());
  EXPECT_EQ(copy.fingerprint(), k->fingerprint());
  // What pickling keeps: one string, and nothing else.
  const KernelObject::State s = k->state();
  const c10::IValue pickled(KernelObject::encode(s));
  EXPECT_EQ(KernelObject(KernelObject::state_from(pickled)).fingerprint(), k->fingerprint());
  const c10::IValue tuple(c10::ivalue::Tuple::create({c10::IValue(s.source)}));
  CJ_EXPECT_CONTAINS(cjtest::expect_throws<c10::ValueError>(
                         [&] { KernelObject::state_from(tuple); }),
                     "a pickled cudajit.Kernel holds a Tuple, expected a string");
  KernelObject::State without_reflection = s;
  without_reflection.reflection = "";
  CJ_EXPECT_CONTAINS(cjtest::expect_throws<c10::ValueError>(
                         [&] { KernelObject object(without_reflection); }),
                     "a pickled cudajit.Kernel has no reflection");
  const std::string damaged = KernelObject::encode(s).substr(0, 40);
  CJ_EXPECT_CONTAINS(cjtest::expect_throws<c10::ValueError>(
                         [&] { KernelObject::state_from(c10::IValue(damaged)); }),
                     "a pickled cudajit.Kernel is truncated");
  EXPECT_EQ(copy.source(), k->source());
  EXPECT_EQ(k->fingerprint().size(), 16u);
  EXPECT_NE(make_axpy({"-DA=2"})->fingerprint(), k->fingerprint());
}

TEST(OpsTest, LaunchChecksArgumentCounts) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA GPU";
  auto k = make_axpy();
  auto x = torch::randn({8}, torch::kCUDA);
  const std::optional<at::Tensor> out = x, none;
  const std::optional<at::Tensor>* slots[4] = {&out, &none, &none, &none};
  std::vector<at::Tensor> one_input = {x};
  std::vector<double> floats = {2.0};
  std::vector<int64_t> grid = {1}, block = {8};
  std::string msg = cjtest::expect_throws<c10::ValueError>(
      [&] { k->launch(slots, {}, one_input, {}, floats, "f", grid, block, 0, ScalarTensors()); });
  CJ_EXPECT_CONTAINS(msg, "got 1 output tensor(s), 1 input tensor(s) and 1 number(s); the kernel takes 1, 2 and 1");
  std::vector<at::Tensor> inputs = {x, x * 2};
  auto y = torch::empty_like(x);
  const std::optional<at::Tensor> out_y = y;
  const std::optional<at::Tensor>* ok[4] = {&out_y, &none, &none, &none};
  k->launch(ok, {}, inputs, {}, floats, "f", grid, block, 0, ScalarTensors());
  EXPECT_TRUE(torch::allclose(y, 2 * x + 2 * x));
}

// Through the dispatcher, as TorchScript and the deploy program call it: the written tensor's
// version is bumped (in inference mode too, where the Autograd kernel does not run), inputs are
// left alone, and a written tensor that requires grad is refused unless grad mode is off.
TEST(OpsTest, DispatcherCallTracksVersionsAndRefusesGradTensors) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA GPU";
  const auto& op = launch_op();
  auto k = make_axpy();
  auto x = torch::randn({8}, torch::kCUDA), y = torch::randn({8}, torch::kCUDA);
  const std::vector<at::Tensor> inputs = {x, y};
  const std::vector<double> floats = {2.0};
  const std::vector<c10::SymInt> grid = {c10::SymInt(1)}, block = {c10::SymInt(8)};
  const std::optional<at::Tensor> none;
  struct Case {
    const char* name;
    bool requires_grad, grad_mode, inference, throws;
  };
  const Case cases[] = {
      {"plain output", false, true, false, false},
      {"output that requires grad", true, true, false, true},
      {"output that requires grad, grad mode off", true, false, false, false},
      {"plain output, inference mode", false, true, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto out = torch::full({8}, std::nan(""), torch::kCUDA).requires_grad_(c.requires_grad);
    const std::optional<at::Tensor> slot = out;
    const auto version = out._version(), x_version = x._version();
    auto call = [&] {
      c10::AutoGradMode grad_mode(c.grad_mode);
      std::optional<c10::InferenceMode> inference;
      if (c.inference) inference.emplace();
      op.call(k, slot, none, none, none, at::TensorList(), at::TensorList(inputs), std::nullopt,
              floats, "f", grid, block, c10::SymInt(0), ScalarTensors());
    };
    if (c.throws) {
      std::string msg = cjtest::expect_throws<c10::Error>(call);
      CJ_EXPECT_CONTAINS(msg, "kernel 'axpy' writes parameter 'out', a tensor that requires grad");
      EXPECT_EQ(out._version(), version);
      continue;
    }
    call();
    EXPECT_EQ(out._version(), version + 1);
    EXPECT_EQ(x._version(), x_version);
    EXPECT_TRUE(torch::allclose(out.detach(), 2 * x + y));
  }
}

// The short form (the script object's launch method) checks its counts before anything runs,
// and the op checks scalar_tensors and a forall grid while binding, before the device is used:
// no GPU needed.
TEST(OpsTest, BindingErrorsNameWhatIsWrong) {
  auto k = make_axpy();
  auto x = torch::randn({8});
  const std::optional<at::Tensor> out = x, none;
  const std::optional<at::Tensor>* slots[4] = {&out, &none, &none, &none};
  const std::vector<at::Tensor> inputs = {x, x};
  const std::vector<c10::Scalar> scalars = {2.0};
  const std::vector<double> floats = {2.0};
  c10::List<std::optional<at::Tensor>> matrix({std::optional<at::Tensor>(torch::ones({2, 2}))});
  c10::List<std::optional<at::Tensor>> two({std::optional<at::Tensor>(), std::optional<at::Tensor>()});
  c10::List<std::optional<at::Tensor>> int_tensor(
      {std::optional<at::Tensor>(torch::tensor(3, torch::kInt64))});
  struct Case {
    const char* name;
    std::function<void()> call;
    const char* message;
    bool type_error = false;  // c10::TypeError rather than c10::ValueError
  };
  const std::vector<int64_t> grid = {1}, block = {8}, forall = {0}, grid2 = {2, 2};
  auto auto_k = make_auto_scale();
  const std::vector<int64_t> auto_ints = {8};
  const Case cases[] = {
      {"short form, one tensor", [&] { launch_through_op(k, grid, block, {x}, scalars); },
       "kernel 'axpy' takes 3 tensor(s) and 1 number(s), in parameter order; got 1 tensor(s) and 1 number(s)",
       true},
      {"short form, no number", [&] { launch_through_op(k, grid, block, {x, x, x}, {}); },
       "T a (number)", true},
      {"int below -2^62",
       [&] { OpNumbers().add(c10::Scalar(std::numeric_limits<int64_t>::min())); },
       "the op path takes ints from -2^62 up, got -9223372036854775808"},
      {"integer scalar tensor",
       [&] { k->launch(slots, {}, inputs, {}, floats, "f", grid, block, 0, int_tensor); },
       "scalar_tensors[0] must be a 0-d floating-point CPU tensor, got a Long tensor"},
      {"scalar tensor of rank 2",
       [&] { k->launch(slots, {}, inputs, {}, floats, "f", grid, block, 0, matrix); },
       "scalar_tensors[0] must be a 0-d floating-point CPU tensor, got a Float tensor of shape [2, 2]"},
      {"scalar tensors of the wrong length",
       [&] { k->launch(slots, {}, inputs, {}, floats, "f", grid, block, 0, two); },
       "scalar_tensors has 2 entries; it must be None or have one per number (1)"},
      {"forall with a 2-D grid", [&] { k->launch(slots, {}, inputs, {}, floats, "f", grid2, forall, 0, ScalarTensors()); },
       "a forall launch of kernel 'axpy' (block [0]) takes grid [ntasks] with ntasks >= 1, got [2, 2]"},
      {"a tensor kind for a number parameter",
       [&] { k->launch(slots, {}, inputs, {}, {}, "t", grid, block, 0, ScalarTensors()); },
       "kinds[0] is 't' (a tensor) for parameter 'a', which takes a number; 't' is for auto "
       "parameters"},
      {"auto tensor missing from the outputs",
       [&] { auto_k->launch(slots, {}, {}, auto_ints, floats, "ttfi", grid, block, 0, ScalarTensors()); },
       "got 1 output tensor(s), 0 input tensor(s) and 4 number(s); the kernel takes 2, 0 and 4"},
      {"parameters listed with the auto role",
       [&] { launch_values_through_op(auto_k, grid, block, {x}, {}, 0); },
       "auto out (auto: a number, or a tensor it writes)", true},
      {"short form, a tensor for a number parameter",
       [&] { launch_values_through_op(auto_k, grid, block, {}, {x, x, 2.0, x}, 0); },
       "scalars[3] (parameter 'n') is a Tensor; scalars takes numbers", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string msg = c.type_error ? cjtest::expect_throws<c10::TypeError>(c.call)
                                         : cjtest::expect_throws<c10::ValueError>(c.call);
    CJ_EXPECT_CONTAINS(msg, c.message);
  }
}

// launch_forall through the op matches a launch with an explicit grid.
TEST(OpsTest, ForallThroughTheOp) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA GPU";
  auto k = make_axpy();
  for (int64_t n : {1, 1000, 1 << 20}) {
    SCOPED_TRACE(n);
    auto x = torch::randn({n}, torch::kCUDA), y = torch::randn({n}, torch::kCUDA);
    auto out = torch::full({n}, std::nan(""), torch::kCUDA);
    launch_through_op(k, {n}, {0}, {out, x, y}, {3.0});
    // One rounding (NVRTC contracts a * x + y into an FMA): compare with the double result.
    EXPECT_TRUE(torch::allclose(out.to(torch::kDouble), 3 * x.to(torch::kDouble) + y, 1e-6, 1e-6));
  }
}

}  // namespace
}  // namespace torch_cudajit
