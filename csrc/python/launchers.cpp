// torch_cudajit: the Python binding's launchers (see launchers.h). The Launcher's __call__ is
// the launch hot path: it converts Python arguments in place, computes the key, looks it up
// and launches; anything it cannot convert (keywords, foreign arrays, extension objects) goes
// to the Python fallback, which normalises the arguments and calls launch_normalized.
#include "launchers.h"

#include "../cuda_api.h"

#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>

#include <c10/util/SmallVector.h>
#include <pybind11/stl.h>

#include <sys/mman.h>
#include <unistd.h>

namespace py = pybind11;
using namespace torch_cudajit;
using torch_cudajit::python::gc_tracks_fallback;
using torch_cudajit::python::get_or_compile;
using torch_cudajit::python::translating_errors;

namespace {

// torch_cudajit.DevicePointer (set when the package is imported): a wrapped raw device address.
PyTypeObject* g_device_pointer_type = nullptr;

// Converts one Python object; returns false when it needs the Python fallback.
bool convert(PyObject* o, Arg& a, const KernelDecl& decl, size_t i) {
  if (THPVariable_Check(o)) {
    a = tensor_arg(THPVariable_Unpack(o));
    return true;
  }
  // None and cj.DevicePointer are addresses; make_key lets only pointer parameters take them.
  if (o == Py_None) {
    a.kind = ArgKind::kAddress;
    a.u = 0;
    a.is_none = true;
    return true;
  }
  if (g_device_pointer_type != nullptr && PyObject_TypeCheck(o, g_device_pointer_type)) {
    // DevicePointer validated its value (an int in [0, 2**64)) when it was made.
    py::object value = py::reinterpret_borrow<py::object>(o).attr("value");
    a.kind = ArgKind::kAddress;
    a.u = PyLong_AsUnsignedLongLong(value.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    return true;
  }
  if (PyBool_Check(o)) {
    a.kind = ArgKind::kBool;
    a.i = o == Py_True;
    return true;
  }
  if (PyLong_Check(o)) {
    a.kind = ArgKind::kInt;
    int overflow = 0;
    a.i = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0) {
      a.u = PyLong_AsUnsignedLongLong(o);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        overflow = 2;
      } else {
        a.big_unsigned = true;
        overflow = 0;
      }
    }
    if (overflow != 0) {
      std::string name = i < decl.params.size() ? decl.params[i].name : std::to_string(i);
      std::string text = py::str(o);
      TORCH_CHECK_VALUE(false, "torch_cudajit: parameter '", name, "' of kernel '", decl.name,
                        "' got the Python int ", text, ", which does not fit in 64 bits.");
    }
    return true;
  }
  if (PyFloat_Check(o)) {
    a.kind = ArgKind::kFloat;
    a.d = PyFloat_AS_DOUBLE(o);
    return true;
  }
  if (PyComplex_Check(o)) {
    a.kind = ArgKind::kComplex;
    a.d = PyComplex_RealAsDouble(o);
    a.imag = PyComplex_ImagAsDouble(o);
    return true;
  }
  if (PyBytes_Check(o)) {
    a.kind = ArgKind::kBytes;
    a.bytes = PyBytes_AS_STRING(o);
    a.nbytes = static_cast<size_t>(PyBytes_GET_SIZE(o));
    return true;
  }
  return false;
}

[[noreturn]] void unsupported(PyObject* o, const KernelDecl& decl, size_t i) {
  std::string name = i < decl.params.size() ? decl.params[i].name : std::to_string(i);
  TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", name, "' of kernel '", decl.name,
                   "' got an object of type '", Py_TYPE(o)->tp_name,
                   "'; kernels take torch tensors, arrays with __cuda_array_interface__ or "
                   "__dlpack__, Python or numpy numbers, bytes, and None or "
                   "torch_cudajit.DevicePointer for pointer parameters. Register an extension "
                   "to pass other types.");
}

}  // namespace

namespace torch_cudajit::python {

std::vector<Arg> convert_all(const py::tuple& args, const KernelDecl& decl) {
  std::vector<Arg> out(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (!convert(args[i].ptr(), out[i], decl, i)) unsupported(args[i].ptr(), decl, i);
  return out;
}

SpecKey key_of(const KernelRuntime& r, const py::tuple& args, int arch, int* device) {
  std::vector<Arg> conv = convert_all(args, r.decl());
  return r.key(conv.data(), conv.size(), device, arch);
}

void run_without_gil(const std::function<void()>& work) {
  if (!PyGILState_Check()) {
    work();
    return;
  }
  torch::PyWarningHandler warnings;
  try {
    py::gil_scoped_release release;
    work();
  } catch (...) {
    warnings.set_in_exception();
    throw;
  }
}

std::shared_ptr<Specialization> compile_without_gil(KernelRuntime& r, const SpecKey& key) {
  std::shared_ptr<Specialization> spec;
  run_without_gil([&] { spec = r.table().get(key); });
  return spec;
}

std::shared_ptr<Specialization> get_or_compile(KernelRuntime& r, const SpecKey& key) {
  if (auto hit = r.table().lookup(key)) return hit;
  return compile_without_gil(r, key);
}

}  // namespace torch_cudajit::python

namespace {

/// A kernel configured with grid, block, stream and shared memory: kernel[grid, block](...), or
/// with a number of tasks: kernel.forall(n)(...).
struct Launcher {
  std::shared_ptr<KernelRuntime> runtime;
  LaunchRequest request;
  std::shared_ptr<Specialization> fixed;  // set for specialized kernels
  py::object fallback;                    // Python slow path, or None
  std::string warning;                    // a low-occupancy warning for the first launch

  // Returns false when the fallback must handle the call.
  bool try_launch(PyObject* args, bool allow_fallback) {
    const KernelDecl& decl = runtime->decl();
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    Arg converted[kMaxParams];
    if (static_cast<size_t>(n) > kMaxParams) {
      TORCH_CHECK_TYPE(false, "torch_cudajit: kernel '", decl.name, "' takes ", decl.params.size(),
                       " argument(s), got ", n, ".");
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* o = PyTuple_GET_ITEM(args, i);
      if (!convert(o, converted[i], decl, static_cast<size_t>(i))) {
        if (allow_fallback) return false;
        unsupported(o, decl, static_cast<size_t>(i));
      }
    }
    int device = 0;
    const SpecKey key = runtime->key(converted, static_cast<size_t>(n), &device);
    std::shared_ptr<Specialization> spec;
    if (fixed) {
      TORCH_CHECK_TYPE(key == fixed->key, "torch_cudajit: this specialized kernel '", decl.name,
                       "' is fixed to ", fixed->signature, " but got ",
                       describe_signature(decl, key), "; call the unspecialized kernel instead.");
      spec = fixed;
    } else {
      spec = get_or_compile(*runtime, key);
    }
    runtime->launch(*spec, converted, static_cast<size_t>(n), device, request);
    return true;
  }
};

// One grid or block extent: an int (not a bool) that fits in 64 bits; the device's limits are
// checked at launch.
int64_t dim_value(const py::handle& v, const char* what) {
  TORCH_CHECK_TYPE(!PyBool_Check(v.ptr()), "torch_cudajit: ", what, " must be ints, got the bool ",
                   std::string(py::repr(v)), "; write 1 for a single block or thread.");
  TORCH_CHECK_TYPE(PyLong_Check(v.ptr()), "torch_cudajit: ", what, " must contain ints, got ",
                   std::string(py::str(py::type::of(v))));
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  TORCH_CHECK_VALUE(overflow == 0, "torch_cudajit: ", what, " extent ", std::string(py::repr(v)),
                    " does not fit in 64 bits; CUDA allows at most 2**31-1 blocks in x and 65535 "
                    "in y and z, and 1024 threads per block.");
  return x;
}

// A grid or block from Python: an int, or a tuple or list of ints (launch_dims checks how many).
std::array<int64_t, 3> dims(const py::handle& h, const char* what, const std::string& kernel) {
  c10::SmallVector<int64_t, 3> extents;
  if (PyLong_Check(h.ptr())) {
    extents.push_back(dim_value(h, what));
    return launch_dims(extents, what, kernel);
  }
  if (py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) {
    for (const py::handle item : h.cast<py::sequence>()) extents.push_back(dim_value(item, what));
    return launch_dims(extents, what, kernel);
  }
  TORCH_CHECK_TYPE(false, "torch_cudajit: ", what, " must be an int or a tuple of up to 3 ints, got ",
                   std::string(py::str(py::type::of(h))));
}

// A raw stream handle from Python (torch_cudajit._args.stream_handle made it an int >= 0). Any
// handle but the special ones (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is asked of the driver
// once here, when the launch is configured, so that a stale or garbage handle raises ValueError
// instead of crashing the launch.
CUstream checked_stream(const py::object& stream) {
  const unsigned long long h = PyLong_AsUnsignedLongLong(stream.ptr());
  const bool in_range = PyErr_Occurred() == nullptr;
  if (!in_range) PyErr_Clear();
  TORCH_CHECK_VALUE(in_range, "torch_cudajit: stream handle ", std::string(py::repr(stream)),
                    " is not a CUstream (an int from 0 to 2**64-1).");
  CUstream s = reinterpret_cast<CUstream>(static_cast<uintptr_t>(h));
  if (h <= 2 || !torch_cudajit::detail::driver_available()) return s;
  // cuStreamGetCtx reads the handle's memory: an address that is not mapped at all (the usual
  // garbage) is refused before the driver sees it. (A pointer to mapped memory that is not a
  // stream can still crash the driver; the README's trust model says so.)
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), at = static_cast<uintptr_t>(h);
  const uintptr_t first = at & ~(page - 1), last = (at + 63) & ~(page - 1);  // the first 64 bytes
  unsigned char resident[2];
  const bool mapped = at <= UINTPTR_MAX - 64 &&
                      mincore(reinterpret_cast<void*>(first), last - first + page, resident) == 0;
  TORCH_CHECK_VALUE(mapped, "torch_cudajit: stream handle ", h, " (0x", std::hex, h,
                    ") is not a live CUDA stream of this process (no memory is mapped there). "
                    "Pass a torch.cuda.Stream, its .cuda_stream, or None for the current stream.");
  CUcontext ctx = nullptr;
  const CUresult r = torch_cudajit::detail::driver().cuStreamGetCtx(s, &ctx);
  if (r != CUDA_SUCCESS) {
    const char* name = "?";
    torch_cudajit::detail::driver().cuGetErrorName(r, &name);
    TORCH_CHECK_VALUE(false, "torch_cudajit: stream handle ", h, " (0x", std::hex, h,
                      ") is not a live CUDA stream of this process (cuStreamGetCtx: ", name,
                      "). Pass a torch.cuda.Stream, its .cuda_stream, or None for the current "
                      "stream.");
  }
  return s;
}

// Issues the launcher's pending warning once (LowOccupancyWarning); None, or NULL on error.
PyObject* warn_once(Launcher& l) {
  std::string text = std::move(l.warning);
  l.warning.clear();
  static PyObject* category = [] {
    py::object c = py::module_::import("torch_cudajit._errors").attr("LowOccupancyWarning");
    return c.release().ptr();
  }();
  if (PyErr_WarnEx(category, text.c_str(), 1) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* launcher_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  return translating_errors([&]() -> PyObject* {
    Launcher& l = py::cast<Launcher&>(py::handle(self));
    if ((kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0) && l.try_launch(args, !l.fallback.is_none())) {
      if (!l.warning.empty()) return warn_once(l);
      Py_RETURN_NONE;
    }
    TORCH_CHECK_TYPE(!l.fallback.is_none(), "torch_cudajit: this launcher takes no keywords");
    py::object r = l.fallback(py::handle(self), py::reinterpret_borrow<py::tuple>(args),
                              kwargs ? py::reinterpret_borrow<py::dict>(kwargs) : py::dict());
    return r.release().ptr();
  });
}

}  // namespace

namespace torch_cudajit::python {

void bind_launchers(py::module_& m) {
  m.def("set_device_pointer_type", [](py::type type) {
    // Kept for the life of the process, like the type itself.
    g_device_pointer_type = reinterpret_cast<PyTypeObject*>(type.release().ptr());
  });

  py::class_<Launcher, std::shared_ptr<Launcher>>(m, "Launcher", gc_tracks_fallback<Launcher>())
      .def(py::init([](std::shared_ptr<KernelRuntime> r, py::object grid, py::object block,
                       py::object stream, int64_t shared_mem, std::shared_ptr<Specialization> fixed,
                       py::object fallback, std::string warning, int64_t forall_tasks) {
             auto l = std::make_shared<Launcher>();
             l->runtime = std::move(r);
             TORCH_CHECK_VALUE(forall_tasks >= 0, "torch_cudajit: forall: ntasks must be >= 1, got ",
                               forall_tasks);
             l->request.forall_tasks = forall_tasks;
             if (forall_tasks == 0) {  // a forall launch chooses both when it runs
               l->request.grid = dims(grid, "grid", l->runtime->decl().name);
               l->request.block = dims(block, "block", l->runtime->decl().name);
             }
             TORCH_CHECK_VALUE(shared_mem >= 0, "torch_cudajit: shared_mem must be >= 0, got ", shared_mem);
             l->request.shared_mem = shared_mem;
             if (!stream.is_none()) {
               l->request.has_stream = true;
               l->request.stream = checked_stream(stream);
             }
             l->fixed = std::move(fixed);
             l->fallback = std::move(fallback);
             l->warning = std::move(warning);
             return l;
           }),
           py::arg("runtime"), py::arg("grid"), py::arg("block"), py::arg("stream"),
           py::arg("shared_mem"), py::arg("fixed"), py::arg("fallback"), py::arg("warning") = "",
           py::arg("forall_tasks") = 0)
      .def("launch_normalized", [](Launcher& l, py::tuple args) {
             l.try_launch(args.ptr(), false);
             if (!l.warning.empty()) {
               PyObject* r = warn_once(l);
               if (r == nullptr) throw py::error_already_set();
               Py_DECREF(r);
             }
           })
      .def_property_readonly("grid", [](const Launcher& l) { return l.request.grid; })
      .def_property_readonly("block", [](const Launcher& l) { return l.request.block; })
      .def_property_readonly("shared_mem", [](const Launcher& l) { return l.request.shared_mem; });

  // The hot path: tp_call set directly, so a launch skips pybind11's overload dispatch.
  py::object launcher_type = m.attr("Launcher");
  auto* type = reinterpret_cast<PyTypeObject*>(launcher_type.ptr());
  type->tp_call = &launcher_call;
  PyType_Modified(type);
}

}  // namespace torch_cudajit::python
