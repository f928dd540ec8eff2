// torch_cudajit: the Python binding's launchers (launchers.cpp): kernel[grid, block] as a
// Launcher, whose __call__ is the launch hot path, and kernel.op[grid, block] as an
// OpLauncher; and the argument conversion that the rest of the binding shares.
#pragma once

#include "../dispatcher.h"

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

namespace torch_cudajit::python {

/// Converts a whole argument tuple; anything unconvertible is a TypeError (no fallback).
std::vector<Arg> convert_all(const pybind11::tuple& args, const KernelDecl& decl);
/// Compiles (or loads from the disk cache) without the GIL; C++ warnings raised meanwhile, such
/// as a damaged cache file, become Python warnings.
std::shared_ptr<Specialization> compile_without_gil(Dispatcher& d, const SpecKey& key);
/// The key of a tuple of (already normalised) Python arguments; `device` (optional) receives
/// the tensors' device. With arch > 0 the key is for that architecture (compile-only use).
SpecKey key_of(Dispatcher& d, const pybind11::tuple& args, int arch, int* device = nullptr);
/// The specialization for a key; the GIL is released only when it must be compiled.
std::shared_ptr<Specialization> get_or_compile(Dispatcher& d, const SpecKey& key);
/// Registers Launcher and OpLauncher (with their tp_call hot paths) and
/// set_device_pointer_type.
void bind_launchers(pybind11::module_& m);
/// Registers KernelDefinition (definitions.cpp) and dispatcher_of.
void bind_definitions(pybind11::module_& m);

}  // namespace torch_cudajit::python
