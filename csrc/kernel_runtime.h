// torch_cudajit: a kernel definition at run time. The runtime joins the stages of a launch:
// the call binder (the key), the specialization table (one lookup; a compile on a miss), the
// forall planner and the launch. Every holder of a definition that launches it (the Python
// Kernel, the TorchScript object, the C++ Kernel) shares one runtime, so all of them share the
// compiled code. The hot path is: key, one lookup, pack, launch.
#pragma once

#include "arg.h"
#include "call_binder.h"
#include "definition.h"
#include "forall_plan.h"
#include "launch.h"
#include "launch_plan.h"
#include "specialization_table.h"

#include <memory>

namespace torch_cudajit {

/// Compiles, caches and launches one __global__ function of a Program.
class KernelRuntime {
 public:
  /// The runtime of a definition, which it shares with every other holder.
  explicit KernelRuntime(std::shared_ptr<const KernelDefinition> definition)
      : def_(std::move(definition)), binder_(*def_), table_(*def_) {}

  const KernelDefinition& definition() const { return *def_; }
  const std::shared_ptr<const KernelDefinition>& definition_ptr() const { return def_; }
  const KernelDecl& decl() const { return def_->decl(); }
  /// The specializations compiled so far, and compiles on a miss.
  SpecializationTable& table() { return table_; }
  const SpecializationTable& table() const { return table_; }

  /// The key of a call (CallBinder::key).
  SpecKey key(const Arg* args, size_t n, int* device, int arch = 0) const {
    return binder_.key(args, n, device, arch);
  }
  /// key + table lookup (a compile on a miss) + launch of the request.
  void launch(const Arg* args, size_t n, const LaunchRequest& request);
  /// Launches `spec`, whose key the arguments have, as `request` asks: its grid and block, or a
  /// forall (plan_forall).
  void launch(Specialization& spec, const Arg* args, size_t n, int device,
              const LaunchRequest& request);
  /// What a forall launch of `spec` (request.forall_tasks tasks) with these arguments runs:
  /// the kernel on forall's virtual grid when its text allows it
  /// (KernelDefinition::virtual_grid_refusal), the planner does not keep the plain grid
  /// (ForallPlanner::keeps_plain), and no tensor the kernel may write overlaps another argument
  /// (writes_disjoint); the kernel on the planner's plain grid otherwise.
  ForallPlan plan_forall(Specialization& spec, const Arg* args, size_t n, int device,
                         const LaunchRequest& request);

 private:
  std::shared_ptr<const KernelDefinition> def_;
  CallBinder binder_;
  SpecializationTable table_;
};

}  // namespace torch_cudajit
