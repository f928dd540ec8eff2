// torch_cudajit C++ tests: the torch binding (csrc/ops/): the cudajit op family's schema, the
// custom class (state, fingerprint, roles) and the op's argument checks. Launching through the
// op needs a GPU and skips itself without one.
#include "ops/kernel_object.h"

#include "test_util.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
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
  return c10::make_intrusive<KernelObject>(kAxpy, "axpy", std::move(options), "c++17", false,
                                           false, "", true, std::vector<std::string>{}, "axpy.cu", -1);
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
  const std::vector<OpRole> expected = {OpRole::kOutput, OpRole::kInput, OpRole::kInput, OpRole::kScalar};
  EXPECT_EQ(k->roles(), expected);
  EXPECT_EQ(k->name(), "axpy");
}

TEST(OpsTest, StateRoundTripsAndFingerprints) {
  auto k = make_axpy({"-DA=1"});
  KernelObject copy(k->state());
  EXPECT_EQ(copy.fingerprint(), k->fingerprint());
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
  std::vector<c10::Scalar> scalars = {2.0};
  std::vector<int64_t> grid = {1}, block = {8};
  std::string msg = cjtest::expect_throws<c10::ValueError>(
      [&] { k->launch(slots, {}, one_input, scalars, grid, block, 0); });
  CJ_EXPECT_CONTAINS(msg, "got 1 output tensor(s), 1 input tensor(s) and 1 scalar(s); the kernel takes 1, 2 and 1");
  std::vector<at::Tensor> inputs = {x, x * 2};
  auto y = torch::empty_like(x);
  const std::optional<at::Tensor> out_y = y;
  const std::optional<at::Tensor>* ok[4] = {&out_y, &none, &none, &none};
  k->launch(ok, {}, inputs, scalars, grid, block, 0);
  EXPECT_TRUE(torch::allclose(y, 2 * x + 2 * x));
}

// Through the dispatcher, as TorchScript and the deploy program call it: the Autograd kernel
// bumps the written tensor's version, leaves inputs alone, and refuses a written tensor that
// requires grad unless grad mode is off.
TEST(OpsTest, DispatcherCallTracksVersionsAndRefusesGradTensors) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA GPU";
  const auto& op = launch_op();
  auto k = make_axpy();
  auto x = torch::randn({8}, torch::kCUDA), y = torch::randn({8}, torch::kCUDA);
  const std::vector<at::Tensor> inputs = {x, y};
  const std::vector<c10::Scalar> scalars = {2.0};
  const std::vector<c10::SymInt> grid = {c10::SymInt(1)}, block = {c10::SymInt(8)};
  const std::optional<at::Tensor> none;
  struct Case {
    const char* name;
    bool requires_grad, grad_mode, throws;
  };
  const Case cases[] = {
      {"plain output", false, true, false},
      {"output that requires grad", true, true, true},
      {"output that requires grad, grad mode off", true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto out = torch::full({8}, std::nan(""), torch::kCUDA).requires_grad_(c.requires_grad);
    const std::optional<at::Tensor> slot = out;
    const auto version = out._version(), x_version = x._version();
    auto call = [&] {
      c10::AutoGradMode grad_mode(c.grad_mode);
      op.call(k, slot, none, none, none, {}, inputs, scalars, grid, block, c10::SymInt(0));
    };
    if (c.throws) {
      std::string msg = cjtest::expect_throws<c10::Error>(call);
      CJ_EXPECT_CONTAINS(msg, "kernel 'axpy' writes out0, a tensor that requires grad");
      EXPECT_EQ(out._version(), version);
      continue;
    }
    call();
    EXPECT_EQ(out._version(), version + 1);
    EXPECT_EQ(x._version(), x_version);
    EXPECT_TRUE(torch::allclose(out.detach(), 2 * x + y));
  }
}

}  // namespace
}  // namespace torch_cudajit
