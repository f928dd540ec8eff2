// torch_cudajit: the Python binding (torch_cudajit._C): exceptions with fields, the runtime and
// cache functions, programs, specializations and dispatchers, and the launchers
// (launchers.cpp, the launch hot path).
#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>

#include <pybind11/stl.h>

#include <cxxabi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torch/csrc/jit/python/pybind_utils.h>

#include "../cache.h"
#include "launchers.h"
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
using torch_cudajit::python::compile_without_gil;
using torch_cudajit::python::convert_all;
using torch_cudajit::python::get_or_compile;
using torch_cudajit::python::key_of;

namespace {

PyObject* g_compile_error = nullptr;
PyObject* g_assertion_error = nullptr;

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
             auto spec = compile_without_gil(d, d.make_key(conv.data(), conv.size(), nullptr, arch));
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

  torch_cudajit::python::bind_launchers(m);
}
