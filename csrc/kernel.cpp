// torch_cudajit: the C++ Kernel API and extension application (see kernel.h).
#include "kernel.h"

#include "kernel_runtime.h"
#include "torch_device.h"

namespace torch_cudajit {

Kernel::Kernel(const std::string& source, const std::string& name, KernelOptions options)
    : Kernel(KernelDefinition::from_source(source, name, std::move(options))) {}

Kernel::Kernel(std::shared_ptr<const Program> program, const std::string& name, KernelOptions options)
    : Kernel(std::make_shared<const KernelDefinition>(std::move(program), name, std::move(options))) {}

Kernel::Kernel(std::shared_ptr<const KernelDefinition> definition)
    : runtime_(std::make_shared<KernelRuntime>(std::move(definition))) {}

const KernelDefinition& Kernel::definition() const { return runtime_->definition(); }

void Kernel::add_extension(std::shared_ptr<Extension> extension) {
  TORCH_CHECK_VALUE(extension != nullptr, "torch_cudajit: add_extension got a null extension");
  extensions_.push_back(std::move(extension));
}

std::vector<Arg> Kernel::bind(const std::vector<c10::IValue>& values, CUstream stream,
                              std::vector<c10::IValue>& storage,
                              std::vector<std::function<void()>>& after) const {
  std::vector<c10::IValue> current = values;
  for (auto it = extensions_.rbegin(); it != extensions_.rend(); ++it) {
    std::vector<c10::IValue> next;
    for (const auto& v : current) {
      std::vector<c10::IValue> out;
      if ((*it)->prepare(v, stream, out, after))
        next.insert(next.end(), out.begin(), out.end());
      else
        next.push_back(v);
    }
    current = std::move(next);
  }
  storage = std::move(current);
  std::vector<Arg> args;
  args.reserve(storage.size());
  for (size_t i = 0; i < storage.size(); ++i) args.push_back(to_arg(storage[i], i));
  return args;
}

void Kernel::launch(const LaunchRequest& request, const std::vector<c10::IValue>& values) {
  std::vector<c10::IValue> storage;
  std::vector<std::function<void()>> after;
  // Extensions see the stream the launch will use: the given one or the current torch stream.
  CUstream stream =
      request.has_stream ? request.stream : detail::current_cuda_stream(detail::current_cuda_device());
  std::vector<Arg> args = bind(values, stream, storage, after);
  runtime_->launch(args.data(), args.size(), request);
  for (auto& f : after) f();
}

std::shared_ptr<Specialization> Kernel::compile(const std::vector<c10::IValue>& values, int arch) {
  std::vector<c10::IValue> storage;
  std::vector<std::function<void()>> after;
  std::vector<Arg> args = bind(values, nullptr, storage, after);
  const SpecKey key = runtime_->key(args.data(), args.size(), nullptr, arch);
  std::shared_ptr<Specialization> spec = runtime_->table().get(key);
  check_pointees(runtime_->decl(), *spec, args.data(), args.size());
  return spec;
}

}  // namespace torch_cudajit
