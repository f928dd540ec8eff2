// torch_cudajit: binding a call's arguments to a kernel's parameters. Each argument is checked
// against its parameter's declaration and reduced to what decides the compiled code (dtype,
// rank, layout, alignment and index width of tensors; kind of numbers), plus the device's
// architecture: the specialization key, the one lookup of the launch hot path.
#pragma once

#include "arg.h"
#include "definition.h"

namespace torch_cudajit {

/// Computes the specialization key of a call of one kernel definition.
class CallBinder {
 public:
  /// A binder of `definition`'s parameters; the definition must outlive it.
  explicit CallBinder(const KernelDefinition& definition) : def_(definition) {}

  /// Checks the arguments against the parameters and returns their key. `device` receives
  /// the tensors' CUDA device (the current device when no tensor is given). With arch > 0
  /// the key is for that architecture and tensors may live anywhere (compile-only use).
  /// Throws c10::TypeError or c10::ValueError naming the parameter an argument does not fit.
  SpecKey key(const Arg* args, size_t n, int* device, int arch = 0) const;

 private:
  /// A tensor argument for parameter `i`: its signature in `s`, checked against the
  /// declaration; `dev`/`dev_param` track the device of the first CUDA tensor.
  void key_tensor(size_t i, const at::Tensor& t, int arch, ArgSig& s, int& dev,
                  size_t& dev_param) const;
  /// Where a tensor argument for parameter `i` may live: CUDA tensors all on one device
  /// (`dev`, first seen at `dev_param`), or pinned host memory for pointer and Array
  /// parameters; compile-only keys (arch > 0) take tensors anywhere.
  void key_device(size_t i, const at::Tensor& t, int arch, int& dev, size_t& dev_param) const;
  /// A number, tag or extension bytes for parameter `i`.
  void key_value(size_t i, const Arg& a, ArgSig& s) const;

  const KernelDefinition& def_;
};

}  // namespace torch_cudajit
