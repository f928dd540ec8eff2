// torch_cudajit: the Python binding's launchers: kernel[grid, block] as a Launcher
// (launchers.cpp), whose __call__ is the launch hot path, and kernel.op[grid, block] as an
// OpLauncher (op_launcher.cpp); the argument conversion and the tp_call helpers that the rest of
// the binding shares.
#pragma once

#include "../kernel_runtime.h"

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <vector>

namespace torch_cudajit::python {

/// Converts a whole argument tuple; anything unconvertible is a TypeError (no fallback).
std::vector<Arg> convert_all(const pybind11::tuple& args, const KernelDecl& decl);
/// Runs `work` without the GIL when this thread holds it (the core's BlockingRunner); C++
/// warnings raised meanwhile become Python warnings.
void run_without_gil(const std::function<void()>& work);
/// Compiles (or loads from the disk cache) without the GIL; C++ warnings raised meanwhile, such
/// as a damaged cache file, become Python warnings.
std::shared_ptr<Specialization> compile_without_gil(KernelRuntime& r, const SpecKey& key);
/// The key of a tuple of (already normalised) Python arguments; `device` (optional) receives
/// the tensors' device. With arch > 0 the key is for that architecture (compile-only use).
SpecKey key_of(const KernelRuntime& r, const pybind11::tuple& args, int arch, int* device = nullptr);
/// The specialization for a key; the GIL is released only when it must be compiled.
std::shared_ptr<Specialization> get_or_compile(KernelRuntime& r, const SpecKey& key);
/// Registers Launcher and OpLauncher (with their tp_call hot paths) and
/// set_device_pointer_type.
void bind_launchers(pybind11::module_& m);
/// Registers OpLauncher (op_launcher.cpp): kernel.op[grid, block] in eager mode.
void bind_op_launcher(pybind11::module_& m);
/// Registers KernelDefinition (definitions.cpp).
void bind_definitions(pybind11::module_& m);

// Runs the body of a tp_call: a pending Python error is restored, and a C++ exception goes
// through every registered translator (torch's c10 errors -> TypeError/ValueError,
// CompileError); either way the call returns nullptr.
template <class Body>
PyObject* translating_errors(Body&& body) {
  try {
    return body();
  } catch (pybind11::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    pybind11::detail::try_translate_exceptions();
    return nullptr;
  }
}

// Launchers hold their kernel's Python slow path (`fallback`), and the kernel caches its
// launchers: a reference cycle through C++ that the garbage collector must see, or every kernel
// ever configured would stay alive with its compiled code. This makes the type a GC type whose
// traversal visits `fallback`.
template <typename T>
pybind11::custom_type_setup gc_tracks_fallback() {
  return pybind11::custom_type_setup([](PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) -> int {
      Py_VISIT(Py_TYPE(self));
      auto* inst = reinterpret_cast<pybind11::detail::instance*>(self);
      if (!inst->get_value_and_holder().holder_constructed()) return 0;  // not initialised yet
      Py_VISIT(pybind11::cast<T&>(pybind11::handle(self)).fallback.ptr());
      return 0;
    };
    type->tp_clear = [](PyObject* self) -> int {
      auto* inst = reinterpret_cast<pybind11::detail::instance*>(self);
      if (inst->get_value_and_holder().holder_constructed())
        pybind11::cast<T&>(pybind11::handle(self)).fallback = pybind11::none();
      return 0;
    };
  });
}

}  // namespace torch_cudajit::python
