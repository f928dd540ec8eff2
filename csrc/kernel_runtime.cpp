// torch_cudajit: a kernel definition at run time (see kernel_runtime.h).
#include "kernel_runtime.h"

#include "torch_device.h"

namespace torch_cudajit {

void KernelRuntime::launch(const Arg* args, size_t n, const LaunchRequest& request) {
  int device = 0;
  const SpecKey k = key(args, n, &device);
  std::shared_ptr<Specialization> spec = table_.get(k);
  launch(*spec, args, n, device, request);
}

void KernelRuntime::launch(Specialization& spec, const Arg* args, size_t n, int device,
                           const LaunchRequest& request) {
  TORCH_CHECK_VALUE(request.forall_tasks >= 0, "torch_cudajit: a forall launch of kernel '",
                    decl().name, "' needs ntasks >= 1, got ", request.forall_tasks, ".");
  if (request.forall_tasks == 0)
    return launch_specialization(*def_, spec, args, n, device, LaunchPlan::of(request));
  const ForallPlan plan = plan_forall(spec, args, n, device, request);
  launch_specialization(*def_, *plan.spec, args, n, device, plan.launch);
}

ForallPlan KernelRuntime::plan_forall(Specialization& spec, const Arg* args, size_t n,
                                      int device, const LaunchRequest& request) {
  std::pair<int, int> shape;  // threads per block, blocks per multiprocessor
  {
    detail::DeviceScope scope(device);
    shape = spec.loaded().forall_block(device);
  }
  const ForallPlanner planner(def_->task_loop(), device_limits(device));
  ForallPlan plan{&spec, planner.plain(spec.key, request, shape.first)};
  if (!def_->virtual_grid_refusal().empty() || spec.virtual_blocks > 0) return plan;
  plan.plain_because = planner.keeps_plain(spec.key, request, plan.launch, shape.second);
  if (*plan.plain_because == '\0' && !writes_disjoint(spec, args, n))
    plan.plain_because = kOverlapKeepsPlain;
  if (*plan.plain_because != '\0') return plan;
  Specialization* variant = table_.virtual_variant(spec);
  if (variant == nullptr) return plan;
  LaunchPlan on_variant = plan.launch;
  plan.plain_because = planner.place_virtual(*variant, args, request, on_variant);
  if (*plan.plain_because == '\0') {
    plan.spec = variant;
    plan.launch = on_variant;
  }
  return plan;
}

}  // namespace torch_cudajit
