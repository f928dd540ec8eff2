// torch_cudajit: the Python binding of the job store (job_store.h): setting a
// torch.distributed.Store (any, Python subclasses included: torch's pybind11 types are shared),
// the package's provider of the default process group's store, and the counters.
#include "../job_store.h"

#include <torch/csrc/utils/pybind.h>

#include <pybind11/functional.h>

#include <memory>

namespace py = pybind11;

namespace torch_cudajit::python {
namespace {

std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// A Python store object as the C++ store it wraps; None is no store.
c10::intrusive_ptr<c10d::Store> to_store(const py::object& store) {
  if (store.is_none()) return {};
  TORCH_CHECK_TYPE(py::isinstance(store, py::module_::import("torch.distributed").attr("Store")),
                   "torch_cudajit: use_store takes a torch.distributed.Store (TCPStore, "
                   "FileStore, HashStore, PrefixStore or a subclass) or None; got ",
                   py::str(py::type::of(store)).cast<std::string>(), ".");
  return store.cast<c10::intrusive_ptr<c10d::Store>>();
}

}  // namespace

void bind_job_store(py::module_& m) {
  m.def(
      "set_compile_store",
      [](const py::object& store, double timeout, double heartbeat, double stale) {
        CompileStoreOptions options;
        options.timeout = seconds_to_ms(timeout);
        options.heartbeat = seconds_to_ms(heartbeat);
        options.stale = seconds_to_ms(stale);
        set_compile_store(to_store(store), options);
      },
      py::arg("store"), py::arg("timeout") = 0.0, py::arg("heartbeat") = 1.0,
      py::arg("stale") = 15.0);
  m.def("set_compile_store_provider", [](const py::object& fn) {
    if (fn.is_none()) {
      set_compile_store_provider({});
      return;
    }
    // Released with the GIL: the provider is replaced from Python, and the core keeps the last
    // one for the process's life.
    std::shared_ptr<py::object> held(new py::object(fn), [](py::object* p) {
      py::gil_scoped_acquire gil;
      delete p;
    });
    set_compile_store_provider([held]() -> c10::intrusive_ptr<c10d::Store> {
      py::gil_scoped_acquire gil;
      try {
        return to_store((*held)());
      } catch (py::error_already_set& e) {
        // Read while the GIL is held: the core catches the C++ error without it.
        TORCH_CHECK(false, e.what());
      }
    });
  });
  m.def("compile_store_timeout", [] {
    return detail::effective_store_options().timeout.count() / 1000.0;
  });
  m.def("compile_store_counters", [] {
    const CompileStoreCounters& c = compile_store_counters();
    py::dict d;
    d["compiled"] = c.compiled.load();
    d["received"] = c.received.load();
    d["failures_received"] = c.failures_received.load();
    d["timeouts"] = c.timeouts.load();
    d["rejected"] = c.rejected.load();
    d["store_errors"] = c.store_errors.load();
    return d;
  });
}

}  // namespace torch_cudajit::python
