// torch_cudajit: kernel.op[grid, block](...) in eager mode (see launchers.h): a call of the
// cudajit::launch op through the C++ dispatcher, built with OpCall from the Python arguments.
#include "launchers.h"

#include "../ops/op_call.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <pybind11/stl.h>

namespace py = pybind11;
using namespace torch_cudajit;
using torch_cudajit::python::translating_errors;
using torch_cudajit::python::gc_tracks_fallback;

namespace {

// kernel.op[grid, block](...) in eager mode: a call of the cudajit::launch op through the C++
// dispatcher. torch.ops would convert all fourteen arguments from Python on every call (most of
// that cost is torch's __torch_function__ probe of the kernel object and its argument parsing;
// benchmarks/op_overhead.py measures it); this converts the kernel object once, when the
// launcher is made.
struct OpLauncher {
  c10::intrusive_ptr<KernelObject> kernel;
  std::vector<c10::SymInt> grid, block;
  c10::SymInt shared_mem{0};
  py::object fallback;  // binds keyword arguments, then calls back with positional ones

  void launch(PyObject* args) {
    const auto& params = kernel->definition().decl().params;
    const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
    TORCH_CHECK_TYPE(n == params.size(), "torch_cudajit: kernel '", kernel->name(), "' takes ",
                     params.size(), " argument(s), got ", n, ".");
    OpCall call(kernel);
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = PyTuple_GET_ITEM(args, i);
      if (THPVariable_Check(o)) {
        call.value(THPVariable_Unpack(o));
        continue;
      }
      const ParamRole role = call.next_role();
      TORCH_CHECK_TYPE(role == ParamRole::kScalar || role == ParamRole::kAuto,
                       "torch_cudajit: parameter '", params[i].name, "' of kernel '",
                       kernel->name(), "' takes a tensor; got ", Py_TYPE(o)->tp_name, ".");
      if (PyBool_Check(o)) call.number(o == Py_True);
      else if (PyLong_Check(o)) call.number(static_cast<int64_t>(PyLong_AsLongLong(o)));
      else if (PyFloat_Check(o)) call.number(PyFloat_AS_DOUBLE(o));
      else if (PyComplex_Check(o))
        call.number(c10::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)));
      else
        TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", params[i].name, "' of kernel '",
                         kernel->name(), "' takes a number on the op path; got ",
                         Py_TYPE(o)->tp_name, ".");
      if (PyErr_Occurred()) throw py::error_already_set();
    }
    call.launch(grid, block, shared_mem);
  }
};

PyObject* op_launcher_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  return translating_errors([&]() -> PyObject* {
    OpLauncher& l = py::cast<OpLauncher&>(py::handle(self));
    if (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0) {
      l.launch(args);
      Py_RETURN_NONE;
    }
    py::object r = l.fallback(py::handle(self), py::reinterpret_borrow<py::tuple>(args),
                              py::reinterpret_borrow<py::dict>(kwargs));
    return r.release().ptr();
  });
}
}  // namespace

namespace torch_cudajit::python {

void bind_op_launcher(py::module_& m) {
  py::class_<OpLauncher, std::shared_ptr<OpLauncher>>(m, "OpLauncher", gc_tracks_fallback<OpLauncher>())
      .def(py::init([](py::object script_object, std::vector<int64_t> grid,
                       std::vector<int64_t> block, int64_t shared_mem, py::object fallback) {
             auto l = std::make_shared<OpLauncher>();
             auto type = c10::getCustomClassType<c10::intrusive_ptr<KernelObject>>();
             l->kernel = torch::jit::toIValue(script_object, type).toCustomClass<KernelObject>();
             for (int64_t g : grid) l->grid.emplace_back(g);
             for (int64_t b : block) l->block.emplace_back(b);
             l->shared_mem = c10::SymInt(shared_mem);
             l->fallback = std::move(fallback);
             return l;
           }),
           py::arg("script_object"), py::arg("grid"), py::arg("block"), py::arg("shared_mem"),
           py::arg("fallback"))
      .def("launch_normalized", [](OpLauncher& l, py::tuple args) { l.launch(args.ptr()); });
  {
    py::object op_type = m.attr("OpLauncher");
    auto* t = reinterpret_cast<PyTypeObject*>(op_type.ptr());
    t->tp_call = &op_launcher_call;
    PyType_Modified(t);
  }
}

}  // namespace torch_cudajit::python
