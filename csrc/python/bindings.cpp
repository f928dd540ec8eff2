// torch_cudajit: the Python binding (torch_cudajit._C). The Launcher's __call__ is the launch
// hot path: it converts Python arguments in place, computes the key, looks it up and launches;
// anything it cannot convert (keywords, foreign arrays, extension objects) goes to the Python
// fallback, which normalises the arguments and calls launch_normalized.
#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>

#include <pybind11/stl.h>

#include <cxxabi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torch/csrc/jit/python/pybind_utils.h>

#include "../cache.h"
#include "../cuda_api.h"
#include "../ops/kernel_object.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include "../dispatcher.h"
#include "../frontend.h"
#include "../program.h"
#include "../sha256.h"

namespace py = pybind11;
using namespace torch_cudajit;

namespace {

PyObject* g_compile_error = nullptr;
PyObject* g_assertion_error = nullptr;
// torch_cudajit.DevicePointer (set when the package is imported): a wrapped raw device address.
PyTypeObject* g_device_pointer_type = nullptr;

// Converts one Python object; returns false when it needs the Python fallback.
bool convert(PyObject* o, Arg& a, const KernelDecl& decl, size_t i) {
  if (THPVariable_Check(o)) {
    a.kind = ArgKind::kTensor;
    a.tensor = &THPVariable_Unpack(o);
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

// Converts a whole argument tuple; anything unconvertible is a TypeError (no fallback).
std::vector<Arg> convert_all(const py::tuple& args, const KernelDecl& decl) {
  std::vector<Arg> out(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (!convert(args[i].ptr(), out[i], decl, i)) unsupported(args[i].ptr(), decl, i);
  return out;
}

// Compiles (or loads from the disk cache) without the GIL; C++ warnings raised meanwhile, such
// as a damaged cache file, become Python warnings.
std::shared_ptr<Specialization> compile_key(Dispatcher& d, const SpecKey& key) {
  torch::PyWarningHandler warnings;
  try {
    py::gil_scoped_release release;
    return d.get(key);
  } catch (...) {
    warnings.set_in_exception();
    throw;
  }
}

py::dict counters_dict(const CacheCounters& c) {
  py::dict d;
  d["hits"] = c.hits.load();
  d["misses"] = c.misses.load();
  return d;
}

py::dict info_dict(const CacheInfo& i) {
  py::dict d;
  d["dir"] = i.dir;
  d["enabled"] = i.enabled;
  d["entries"] = i.entries;
  d["bytes"] = i.bytes;
  d["max_bytes"] = i.max_bytes;
  d["removed"] = i.removed;
  return d;
}

// The key of a tuple of (already normalised) Python arguments; `device` (optional) receives
// the tensors' device. With arch > 0 the key is for that architecture (compile-only use).
SpecKey key_of(Dispatcher& d, const py::tuple& args, int arch, int* device = nullptr) {
  std::vector<Arg> conv = convert_all(args, d.decl());
  return d.make_key(conv.data(), conv.size(), device, arch);
}

// The specialization for a key; the GIL is released only when it must be compiled.
std::shared_ptr<Specialization> get_or_compile(Dispatcher& d, const SpecKey& key) {
  if (auto hit = d.lookup(key)) return hit;
  return compile_key(d, key);
}

/// A kernel configured with grid, block, stream and shared memory: kernel[grid, block](...).
struct Launcher {
  std::shared_ptr<Dispatcher> dispatcher;
  LaunchConfig config;
  std::shared_ptr<Specialization> fixed;  // set for specialized kernels
  py::object fallback;                    // Python slow path, or None
  std::string warning;                    // a low-occupancy warning for the first launch

  // Returns false when the fallback must handle the call.
  bool try_launch(PyObject* args, bool allow_fallback) {
    const KernelDecl& decl = dispatcher->decl();
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
    SpecKey key = dispatcher->make_key(converted, static_cast<size_t>(n), &device);
    std::shared_ptr<Specialization> spec;
    if (fixed) {
      TORCH_CHECK_TYPE(key == fixed->key, "torch_cudajit: this specialized kernel '", decl.name,
                       "' is fixed to ", fixed->signature, " but got ",
                       describe_signature(decl, key), "; call the unspecialized kernel instead.");
      spec = fixed;
    } else {
      spec = get_or_compile(*dispatcher, key);
    }
    dispatcher->launch(*spec, converted, static_cast<size_t>(n), device, config);
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

std::array<int64_t, 3> dims(const py::handle& h, const char* what) {
  std::array<int64_t, 3> d{1, 1, 1};
  if (PyLong_Check(h.ptr())) {
    d[0] = dim_value(h, what);
    return d;
  }
  if (py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) {
    auto seq = h.cast<py::sequence>();
    TORCH_CHECK_VALUE(seq.size() >= 1 && seq.size() <= 3, "torch_cudajit: ", what,
                      " must be an int or a tuple of 1 to 3 ints, got ", seq.size(), " values");
    for (size_t i = 0; i < seq.size(); ++i) d[i] = dim_value(seq[i], what);
    return d;
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

// Launchers hold their kernel's Python slow path (`fallback`), and the kernel caches its
// launchers: a reference cycle through C++ that the garbage collector must see, or every kernel
// ever configured would stay alive with its compiled code. This makes the type a GC type whose
// traversal visits `fallback`.
template <typename T>
py::custom_type_setup gc_tracks_fallback() {
  return py::custom_type_setup([](PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) -> int {
      Py_VISIT(Py_TYPE(self));
      auto* inst = reinterpret_cast<py::detail::instance*>(self);
      if (!inst->get_value_and_holder().holder_constructed()) return 0;  // not initialised yet
      Py_VISIT(py::cast<T&>(py::handle(self)).fallback.ptr());
      return 0;
    };
    type->tp_clear = [](PyObject* self) -> int {
      auto* inst = reinterpret_cast<py::detail::instance*>(self);
      if (inst->get_value_and_holder().holder_constructed())
        py::cast<T&>(py::handle(self)).fallback = py::none();
      return 0;
    };
  });
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
  try {
    Launcher& l = py::cast<Launcher&>(py::handle(self));
    if ((kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0) && l.try_launch(args, !l.fallback.is_none())) {
      if (!l.warning.empty()) return warn_once(l);
      Py_RETURN_NONE;
    }
    TORCH_CHECK_TYPE(!l.fallback.is_none(), "torch_cudajit: this launcher takes no keywords");
    py::object r = l.fallback(py::handle(self), py::reinterpret_borrow<py::tuple>(args),
                              kwargs ? py::reinterpret_borrow<py::dict>(kwargs) : py::dict());
    return r.release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    // Every registered translator (torch's c10 errors -> TypeError/ValueError, CompileError).
    pybind11::detail::try_translate_exceptions();
    return nullptr;
  }
}

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
    const auto& roles = kernel->roles();
    const auto& params = kernel->dispatcher().decl().params;
    const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
    TORCH_CHECK_TYPE(n == roles.size(), "torch_cudajit: kernel '", kernel->name(), "' takes ",
                     roles.size(), " argument(s), got ", n, ".");
    std::optional<at::Tensor> slots[kOpOutputSlots];
    c10::SmallVector<at::Tensor, 4> more, inputs;
    OpNumbers numbers;
    size_t n_out = 0;
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = PyTuple_GET_ITEM(args, i);
      const bool auto_tensor = roles[i] == ParamRole::kAuto && THPVariable_Check(o);
      if (auto_tensor) numbers.add_tensor();  // then placed with the written tensors below
      if (roles[i] == ParamRole::kScalar || (roles[i] == ParamRole::kAuto && !auto_tensor)) {
        if (PyBool_Check(o)) numbers.add(o == Py_True);
        else if (PyLong_Check(o)) numbers.add(static_cast<int64_t>(PyLong_AsLongLong(o)));
        else if (PyFloat_Check(o)) numbers.add(PyFloat_AS_DOUBLE(o));
        else if (PyComplex_Check(o))
          numbers.add(c10::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)));
        else
          TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", params[i].name, "' of kernel '",
                           kernel->name(), "' takes a number on the op path; got ",
                           Py_TYPE(o)->tp_name, ".");
        if (PyErr_Occurred()) throw py::error_already_set();
        continue;
      }
      TORCH_CHECK_TYPE(THPVariable_Check(o), "torch_cudajit: parameter '", params[i].name,
                       "' of kernel '", kernel->name(), "' takes a tensor; got ",
                       Py_TYPE(o)->tp_name, ".");
      const at::Tensor& t = THPVariable_Unpack(o);
      if (roles[i] == ParamRole::kInput) inputs.push_back(t);
      else if (n_out < kOpOutputSlots) slots[n_out++] = t;
      else more.push_back(t);
    }
    launch_op().call(kernel, slots[0], slots[1], slots[2], slots[3], at::TensorList(more),
                     at::TensorList(inputs), c10::fromIntArrayRefSlow(numbers.ints),
                     c10::ArrayRef<double>(numbers.floats), numbers.kinds, grid, block, shared_mem,
                     ScalarTensors());
  }
};

PyObject* op_launcher_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  try {
    OpLauncher& l = py::cast<OpLauncher&>(py::handle(self));
    if (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0) {
      l.launch(args);
      Py_RETURN_NONE;
    }
    py::object r = l.fallback(py::handle(self), py::reinterpret_borrow<py::tuple>(args),
                              py::reinterpret_borrow<py::dict>(kwargs));
    return r.release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    pybind11::detail::try_translate_exceptions();
    return nullptr;
  }
}

py::dict param_dict(const Param& p) {
  py::dict d;
  d["name"] = p.name;
  d["type"] = p.type;
  d["kind"] = to_string(p.kind);
  d["is_const"] = p.is_const;
  d["role"] = to_string(param_role(p));
  d["element"] = p.element;
  d["rank"] = p.rank;
  return d;
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string r = status == 0 && out ? std::string(out) : name;
  std::free(out);
  return r;
}

// SpecKey <-> bytes, for pickling: arch, count, then one 4-byte ArgSig per parameter.
py::bytes key_bytes(const SpecKey& k) {
  std::string b(8 + 4 * k.size, '\0');
  std::memcpy(&b[0], &k.arch, 4);
  std::memcpy(&b[4], &k.size, 4);
  std::memcpy(&b[8], k.args.data(), 4 * k.size);
  return py::bytes(b);
}

SpecKey key_from_bytes(const std::string& b) {
  SpecKey k;
  TORCH_CHECK_VALUE(b.size() >= 8, "torch_cudajit: a pickled specialization key of ", b.size(),
                    " bytes is damaged (expected 8 + 4 per parameter).");
  std::memcpy(&k.arch, &b[0], 4);
  std::memcpy(&k.size, &b[4], 4);
  TORCH_CHECK_VALUE(k.size <= kMaxParams && b.size() == 8 + 4 * size_t(k.size),
                    "torch_cudajit: a pickled specialization key claims ", k.size,
                    " parameter(s) in ", b.size(), " bytes; it is damaged.");
  std::memcpy(k.args.data(), &b[8], 4 * k.size);
  return k;
}

// One specialization's compile, alone (a batch compile may hold several).
py::bytes spec_serialized(const Specialization& s) {
  CompiledProgram one = *s.compiled;
  one.lowered_names = {s.lowered_name};
  one.name_expressions = {s.name_expression};
  one.probes = {s.probes};
  return py::bytes(serialize_compiled("pickle", one));
}

py::dict spec_dict(const Specialization& s) {
  py::dict d;
  d["demangled"] = demangle(s.lowered_name);
  d["signature"] = s.signature;
  d["arch"] = s.key.arch;
  d["target"] = s.compiled->target;
  d["lowered_name"] = s.lowered_name;
  d["name_expression"] = s.name_expression;
  d["options"] = s.compiled->options;
  d["log"] = s.compiled->log;
  d["ptx"] = s.compiled->ptx;
  d["cubin"] = py::bytes(s.compiled->cubin);
  py::list types;
  for (const auto& p : s.probes) types.append(py::make_tuple(static_cast<int>(p.code), p.size, p.align));
  d["param_probes"] = types;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_cudajit C++ core";

  // C++ exceptions with fields become Python exceptions with attributes.
  static py::exception<CompileError> compile_error(m, "CompileError", PyExc_RuntimeError);
  static py::exception<KernelAssertionError> assertion_error(m, "KernelAssertionError", PyExc_RuntimeError);
  g_compile_error = compile_error.ptr();
  g_assertion_error = assertion_error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CompileError& e) {
      py::object err = py::reinterpret_borrow<py::object>(g_compile_error)(e.what_without_backtrace());
      err.attr("kernel_name") = e.kernel_name();
      err.attr("arch") = e.arch();
      err.attr("options") = e.options();
      err.attr("log") = e.log();
      err.attr("source") = e.numbered_source();
      PyErr_SetObject(g_compile_error, err.ptr());
    } catch (const KernelAssertionError& e) {
      py::object err = py::reinterpret_borrow<py::object>(g_assertion_error)(e.what_without_backtrace());
      err.attr("kernel_name") = e.kernel_name();
      err.attr("file") = e.file();
      err.attr("line") = e.line();
      err.attr("thread") = py::make_tuple(e.thread()[0], e.thread()[1], e.thread()[2]);
      err.attr("block") = py::make_tuple(e.block()[0], e.block()[1], e.block()[2]);
      const bool bounds = e.bounds();
      err.attr("index") = bounds ? py::object(py::int_(e.index())) : py::object(py::none());
      err.attr("dim") = bounds ? py::object(py::int_(e.dim())) : py::object(py::none());
      err.attr("shape") = bounds ? py::object(py::tuple(py::cast(e.shape()))) : py::object(py::none());
      PyErr_SetObject(g_assertion_error, err.ptr());
    }
  });

  m.def("set_device_pointer_type", [](py::type type) {
    // Kept for the life of the process, like the type itself.
    g_device_pointer_type = reinterpret_cast<PyTypeObject*>(type.release().ptr());
  });
  m.def("add_library_search_path", &torch_cudajit::detail::add_library_search_path);
  m.def("set_package_include_dir", &set_package_include_dir);
  m.def("set_libclang_path", &set_libclang_path);
  m.def("libclang_version", &libclang_version);
  m.def("frontend_parse_count", &frontend_parse_count);
  m.def("nvrtc_version", &torch_cudajit::detail::nvrtc_version);
  m.def("nvrtc_compile_count", &nvrtc_compile_count);
  m.def("driver_available", &torch_cudajit::detail::driver_available);
  m.def("default_include_dirs", &default_include_dirs);
  m.def("device_compute_capability", [](int d) { return device_limits(d).compute_capability; });
  m.def("image_format", [](py::bytes image) { return to_string(image_format(std::string(image))); });
  m.def("device_multiprocessors", [](int d) { return device_limits(d).multiprocessors; });

  // The disk cache (see csrc/cache.h).
  m.def("cache_settings", [] {
    CacheSettings s = DiskCache::instance().settings();
    py::dict d;
    d["enabled"] = s.enabled;
    d["dir"] = s.dir;
    d["max_bytes"] = s.max_bytes;
    return d;
  });
  m.def("cache_configure", [](bool enabled, const std::string& dir, int64_t max_bytes) {
    DiskCache::instance().configure({enabled, dir, max_bytes});
  }, py::arg("enabled"), py::arg("dir"), py::arg("max_bytes"));
  m.def("cache_reset_from_environment", [] { DiskCache::instance().reset_from_environment(); });
  m.def("cache_info", [] { return info_dict(DiskCache::instance().info()); });
  m.def("cache_clear", [] { return info_dict(DiskCache::instance().clear()); });
  m.def("cache_prune", [](int64_t max_bytes) { return info_dict(DiskCache::instance().prune(max_bytes)); },
        py::arg("max_bytes") = -1);
  m.def("cache_counters", [] { return counters_dict(DiskCache::instance().counters()); });

  // The Dispatcher inside a torch.classes.cudajit.Kernel: the Python Kernel launches through
  // it, so the eager path and the op path share every compiled specialization.
  m.def("dispatcher_of", [](py::object script_object) {
    auto type = c10::getCustomClassType<c10::intrusive_ptr<KernelObject>>();
    c10::IValue v = torch::jit::toIValue(script_object, type);
    return v.toCustomClass<KernelObject>()->dispatcher_ptr();
  });

  // The TorchScript object of one kernel of an already reflected program (shared, not copied).
  m.def("kernel_object", [](std::shared_ptr<Program> program, std::string name,
                            std::vector<std::string> options, std::string std, bool debug,
                            bool lineinfo, std::string template_args, bool cache,
                            std::vector<std::string> link, int64_t cooperative) {
    auto obj = c10::make_intrusive<KernelObject>(std::move(program), std::move(name),
                                                 std::move(options), std::move(std), debug,
                                                 lineinfo, std::move(template_args), cache,
                                                 std::move(link), cooperative);
    return torch::jit::toPyObject(c10::IValue(std::move(obj)));
  });

  py::class_<Program, std::shared_ptr<Program>>(m, "Program")
      .def(py::init<std::string, std::string, std::vector<std::string>, std::string>(),
           py::arg("source"), py::arg("filename") = "kernel.cu",
           py::arg("options") = std::vector<std::string>{}, py::arg("std") = "c++17")
      .def_static("from_reflection",
                  [](std::string source, std::string filename, const py::bytes& reflection) {
                    return std::const_pointer_cast<Program>(Program::from_reflection(
                        std::move(source), std::move(filename), std::string(reflection)));
                  })
      .def_property_readonly("reflection",
                             [](const Program& p) { return py::bytes(p.reflection()); })
      .def_property_readonly("source", &Program::source)
      .def_property_readonly("filename", &Program::filename)
      .def_property_readonly("kernel_names", [](const Program& p) {
        std::vector<std::string> names;
        for (const auto& k : p.kernels()) names.push_back(k.name);
        return names;
      })
      .def("params", [](const Program& p, const std::string& name) {
        py::list out;
        for (const auto& prm : p.kernel(name).params) out.append(param_dict(prm));
        return out;
      })
      .def("is_template", [](const Program& p, const std::string& name) { return p.kernel(name).is_template; });

  py::class_<Specialization, std::shared_ptr<Specialization>>(m, "Specialization")
      .def_property_readonly("signature", [](const Specialization& s) { return s.signature; })
      .def("info", &spec_dict)
      .def_property_readonly("key_bytes", [](const Specialization& s) { return key_bytes(s.key); })
      .def_property_readonly("serialized", &spec_serialized);

  py::class_<Dispatcher, std::shared_ptr<Dispatcher>>(m, "Dispatcher")
      .def(py::init([](std::shared_ptr<Program> program, const std::string& name,
                       std::vector<std::string> extra, const std::string& std_, bool debug,
                       bool lineinfo, const std::string& template_args, bool cache) {
             KernelOptions o;
             o.compile.extra = std::move(extra);
             o.compile.std = std_;
             o.compile.debug = debug;
             o.compile.lineinfo = lineinfo;
             o.template_args = template_args;
             o.cache = cache;
             return std::make_shared<Dispatcher>(program, name, o);
           }),
           py::arg("program"), py::arg("name"), py::arg("options"), py::arg("std"),
           py::arg("debug"), py::arg("lineinfo"), py::arg("template_args"), py::arg("cache") = true)
      // Prebuilt code (torch_cudajit.load): `program` holds the kernel's declaration.
      .def_static("prebuilt", [](std::shared_ptr<Program> program, const std::string& name,
                                 py::bytes image, const std::string& lowered_name, bool cooperative) {
             KernelOptions o;
             o.cooperative = cooperative ? 1 : 0;
             o.cache = false;
             o.prebuilt = std::make_shared<const CompiledProgram>(
                 prebuilt_program(std::string(image), program->kernel(name), lowered_name));
             return std::make_shared<Dispatcher>(program, name, o);
           }, py::arg("program"), py::arg("name"), py::arg("image"), py::arg("lowered_name"),
           py::arg("cooperative"))
      .def_property_readonly("name", [](const Dispatcher& d) { return d.decl().name; })
      .def("compile", [](Dispatcher& d, py::tuple args, int arch) {
             std::vector<Arg> conv = convert_all(args, d.decl());
             auto spec = compile_key(d, d.make_key(conv.data(), conv.size(), nullptr, arch));
             // What a launch would refuse (a misaligned float4* tensor), a compile refuses too.
             d.check_pointees(*spec, conv.data(), conv.size());
             return spec;
           }, py::arg("args"), py::arg("arch") = 0)
      .def_property_readonly("cache_counters", [](const Dispatcher& d) { return counters_dict(d.cache_counters()); })
      .def("compile_inputs", [](Dispatcher& d, py::tuple args, int arch) {
             // What NVRTC is given for these arguments: the generated source, the options
             // and the name expressions (inspection and the bare-NVRTC benchmark).
             const SpecKey key = key_of(d, args, arch);
             const std::vector<InstantiationRequest> req = {{d.decl().name, key, d.options().template_args}};
             CompileOptions o = d.options().compile;
             o.arch = key.arch;
             py::list names;
             for (const auto& inst : d.program().instantiations(req)) {
               names.append(inst.kernel_expression);
               for (const auto& p : inst.probe_expressions) names.append(p);
             }
             py::dict out;
             out["source"] = d.program().generated_source(req);
             out["filename"] = d.program().filename();
             out["options"] = d.program().nvrtc_options(o);
             out["name_expressions"] = names;
             return out;
           }, py::arg("args"), py::arg("arch") = 0)
      // Kernel.precompile's worker processes: compile and send back bytes; the parent adopts.
      .def("compile_serialized", [](Dispatcher& d, py::tuple args, int arch) {
             const SpecKey key = key_of(d, args, arch);
             CacheOutcome outcome;
             CompiledProgram compiled;
             {
               py::gil_scoped_release release;
               compiled = d.compile_detached(key, &outcome);
             }
             return py::make_tuple(py::bytes(serialize_compiled("precompile", compiled)),
                                   static_cast<int>(outcome));
           }, py::arg("args"), py::arg("arch"))
      .def("adopt_serialized", [](Dispatcher& d, py::tuple args, int arch, py::bytes data,
                                  int outcome) {
             const SpecKey key = key_of(d, args, arch);
             auto compiled = deserialize_compiled("precompile", std::string(data));
             TORCH_CHECK(compiled.has_value(), "torch_cudajit: a precompile worker sent back a "
                         "damaged result for kernel '", d.decl().name, "'");
             return d.adopt(key, std::make_shared<const CompiledProgram>(std::move(*compiled)),
                            static_cast<CacheOutcome>(outcome));
           }, py::arg("args"), py::arg("arch"), py::arg("data"), py::arg("outcome"))
      .def("is_compiled", [](Dispatcher& d, py::tuple args, int arch) {
             return d.lookup(key_of(d, args, arch)) != nullptr;
           }, py::arg("args"), py::arg("arch") = 0)
      .def("specializations", &Dispatcher::specializations)
      .def_property_readonly("cooperative", &Dispatcher::cooperative)
      .def("adopt_key", [](Dispatcher& d, py::bytes key, py::bytes data, const std::string& digest) {
             const std::string bytes = data;
             TORCH_CHECK_VALUE(sha256_hex(bytes) == digest, "torch_cudajit: a pickled "
                               "specialization of kernel '", d.decl().name, "' does not match "
                               "its recorded SHA-256; it is damaged.");
             auto compiled = deserialize_compiled("pickle", bytes);
             TORCH_CHECK_VALUE(compiled.has_value(), "torch_cudajit: a pickled specialization "
                               "of kernel '", d.decl().name, "' holds a damaged compile.");
             return d.adopt_foreign(key_from_bytes(key),
                                    std::make_shared<const CompiledProgram>(std::move(*compiled)),
                                    "a pickled specialization");
           }, py::arg("key"), py::arg("data"), py::arg("digest"))
      .def("lookup_key", [](Dispatcher& d, py::bytes key) {
             const SpecKey k = key_from_bytes(key);
             check_key(d.decl(), k, "a pickled specialized kernel");
             return get_or_compile(d, k);
           })
      .def("resources", [](Dispatcher& d, std::shared_ptr<Specialization> spec, int device) {
             KernelResources r = d.resources(*spec, device);
             py::dict out;
             out["regs_per_thread"] = r.regs_per_thread;
             out["shared_mem_per_block"] = r.shared_mem_per_block;
             out["const_mem_size"] = r.const_mem_size;
             out["local_mem_per_thread"] = r.local_mem_per_thread;
             out["max_threads_per_block"] = r.max_threads_per_block;
             out["ptx_version"] = r.ptx_version;
             out["binary_version"] = r.binary_version;
             out["max_dynamic_shared_size_bytes"] = r.max_dynamic_shared_size_bytes;
             out["preferred_shared_memory_carveout"] = r.preferred_shared_memory_carveout;
             return out;
           })
      .def("set_attribute", [](Dispatcher& d, std::shared_ptr<Specialization> spec, int device,
                               const std::string& name, int value) {
             // The settable attributes, by the names CompiledKernel's properties use.
             CUfunction_attribute attr;
             if (name == "max_dynamic_shared_size_bytes") attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
             else if (name == "preferred_shared_memory_carveout") attr = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
             else TORCH_CHECK_VALUE(false, "torch_cudajit: '", name, "' is not a settable kernel attribute");
             d.set_attribute(*spec, device, attr, value);
           }, py::arg("spec"), py::arg("device"), py::arg("name"), py::arg("value"))
      .def("global_tensor", [](Dispatcher& d, std::shared_ptr<Specialization> spec, int device,
                               const std::string& name) { return d.global(spec, device, name); },
           py::arg("spec"), py::arg("device"), py::arg("name"))
      .def("max_cooperative_grid_blocks", [](Dispatcher& d, std::shared_ptr<Specialization> spec,
                                             int device, int threads, int64_t dynamic_shared) {
             return d.max_cooperative_grid_blocks(*spec, device, threads, dynamic_shared);
           })
      .def("forall_config", [](Dispatcher& d, py::tuple args) {
             int device = 0;
             const SpecKey key = key_of(d, args, 0, &device);
             return d.forall_config(*get_or_compile(d, key), device);
           })
      .def_property_readonly("grid_strides", &Dispatcher::grid_strides);

  py::class_<Launcher, std::shared_ptr<Launcher>>(m, "Launcher", gc_tracks_fallback<Launcher>())
      .def(py::init([](std::shared_ptr<Dispatcher> d, py::object grid, py::object block,
                       py::object stream, int64_t shared_mem, std::shared_ptr<Specialization> fixed,
                       py::object fallback, std::string warning) {
             auto l = std::make_shared<Launcher>();
             l->dispatcher = std::move(d);
             l->config.grid = dims(grid, "grid");
             l->config.block = dims(block, "block");
             TORCH_CHECK_VALUE(shared_mem >= 0, "torch_cudajit: shared_mem must be >= 0, got ", shared_mem);
             l->config.shared_mem = shared_mem;
             if (!stream.is_none()) {
               l->config.has_stream = true;
               l->config.stream = checked_stream(stream);
             }
             l->fixed = std::move(fixed);
             l->fallback = std::move(fallback);
             l->warning = std::move(warning);
             return l;
           }),
           py::arg("dispatcher"), py::arg("grid"), py::arg("block"), py::arg("stream"),
           py::arg("shared_mem"), py::arg("fixed"), py::arg("fallback"), py::arg("warning") = "")
      .def("launch_normalized", [](Launcher& l, py::tuple args) {
             l.try_launch(args.ptr(), false);
             if (!l.warning.empty()) {
               PyObject* r = warn_once(l);
               if (r == nullptr) throw py::error_already_set();
               Py_DECREF(r);
             }
           })
      .def_property_readonly("grid", [](const Launcher& l) { return l.config.grid; })
      .def_property_readonly("block", [](const Launcher& l) { return l.config.block; })
      .def_property_readonly("shared_mem", [](const Launcher& l) { return l.config.shared_mem; });

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

  // The hot path: tp_call set directly, so a launch skips pybind11's overload dispatch.
  py::object launcher_type = m.attr("Launcher");
  auto* type = reinterpret_cast<PyTypeObject*>(launcher_type.ptr());
  type->tp_call = &launcher_call;
  PyType_Modified(type);
}
