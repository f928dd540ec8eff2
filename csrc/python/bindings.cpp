// torch_cudajit: the Python binding (torch_cudajit._C): exceptions with fields, the runtime and
// cache functions, programs, specializations and kernel runtimes, and the launchers
// (launchers.cpp, the launch hot path).
#include "launchers.h"

#include "../cache.h"
#include "../cache_archive.h"
#include "../cuda_api.h"
#include "../device_pass.h"
#include "../device_state.h"
#include "../frontend.h"
#include "../kernel_runtime.h"
#include "../log.h"
#include "../ops/kernel_object.h"
#include "../program.h"
#include "../reading.h"
#include "../sha256.h"
#include "../virtual_grid.h"

#include <torch/extension.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <pybind11/stl.h>

#include <algorithm>

namespace py = pybind11;
using namespace torch_cudajit;
using torch_cudajit::python::compile_without_gil;
using torch_cudajit::python::convert_all;
using torch_cudajit::python::get_or_compile;
using torch_cudajit::python::key_of;

namespace torch_cudajit::python {
void bind_job_store(py::module_& m);  // job_store.cpp
}  // namespace torch_cudajit::python

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

// C++ exceptions with fields become Python exceptions with attributes.
void bind_exceptions(py::module_& m) {
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

}

// The libraries found at run time (NVRTC, the driver, libclang) and the device limits.
void bind_runtime(py::module_& m) {
  m.def("add_library_search_path", &torch_cudajit::detail::add_library_search_path);
  m.def("library_file_found", &torch_cudajit::detail::library_file_found);
  m.def("add_cuda_include_dir", &add_cuda_include_dir);
  m.def("set_package_include_dir", &set_package_include_dir);
  m.def("set_libclang_path", &set_libclang_path);
  m.def("libclang_version", &libclang_version);
  m.def("frontend_parse_count", &frontend_parse_count);
  // The Python logger receives what the core reports (log.h); compiles may run on threads that
  // do not hold the GIL, and may report while the interpreter exits.
  m.def("set_log_sink", [](py::object fn) {
    if (fn.is_none()) return set_log_sink(nullptr);
    auto held = std::make_shared<py::object>(std::move(fn));
    set_log_sink([held](int level, const std::string& message) {
      if (!Py_IsInitialized()) return;
      py::gil_scoped_acquire gil;
      try {
        (*held)(level, message);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("torch_cudajit log sink");
      }
    });
  });
  m.def("log_level_from_env", &log_level_from_env);
  m.def("nvrtc_version", &torch_cudajit::detail::nvrtc_version);
  m.def(
      "device_source",
      [](const std::string& path, const std::vector<std::string>& options, const std::string& std,
         int arch, std::optional<std::string> text, bool cache) {
        DeviceSource d;
        {
          py::gil_scoped_release release;
          d = device_source(path, options, std, arch, text, cache);
        }
        py::dict out;
        out["text"] = d.text;
        out["path"] = d.path;
        out["files"] = d.files;
        out["notes"] = d.notes;
        return out;
      },
      py::arg("path"), py::arg("options"), py::arg("std") = "c++17",
      py::arg("arch") = kDefaultFrontendArch, py::arg("text") = py::none(),
      py::arg("cache") = true);
  m.def("nvrtc_library_file", &torch_cudajit::detail::nvrtc_library_file);
  m.def("cuda_include_dir", &cuda_include_dir);
  m.def("nvrtc_compile_count", &nvrtc_compile_count);
  m.def("use_pch", &torch_cudajit::detail::use_pch);
  // KernelModule.precompile: (runtime, argument tuple) entries of one architecture, the kernels
  // of one source compiled as one NVRTC program.
  m.def("compile_together", [](py::list entries, int arch) {
    std::vector<std::pair<SpecializationTable*, SpecKey>> keys;
    std::vector<std::pair<std::shared_ptr<KernelRuntime>, std::vector<Arg>>> converted;
    for (const auto& e : entries) {
      auto pair = e.cast<py::tuple>();
      auto runtime = pair[0].cast<std::shared_ptr<KernelRuntime>>();
      converted.emplace_back(runtime, convert_all(pair[1].cast<py::tuple>(), runtime->decl()));
      const auto& args = converted.back().second;
      keys.emplace_back(&runtime->table(), runtime->key(args.data(), args.size(), nullptr, arch));
    }
    std::vector<std::shared_ptr<Specialization>> specs;
    {
      py::gil_scoped_release release;
      specs = SpecializationTable::compile_together(keys);
    }
    for (size_t i = 0; i < specs.size(); ++i)
      check_pointees(converted[i].first->decl(), *specs[i], converted[i].second.data(),
                     converted[i].second.size());
    return specs;
  }, py::arg("entries"), py::arg("arch"));
  m.def("driver_available", &torch_cudajit::detail::driver_available);
  m.def("default_include_dirs", &default_include_dirs);
  m.def("cudadevrt_library", &cudadevrt_library);
  // The most parameters a kernel may have, for code generators that must stay within it.
  m.attr("max_kernel_params") = py::int_(kMaxParams);
  m.def("device_compute_capability", [](int d) { return device_limits(d).compute_capability; });
  m.def("image_format", [](py::bytes image) { return to_string(image_format(std::string(image))); });
  m.def("device_multiprocessors", [](int d) { return device_limits(d).multiprocessors; });

}

// The disk cache (see csrc/cache.h).
void bind_cache(py::module_& m) {
  m.def("cache_settings", [] {
    CacheSettings s = DiskCache::instance().settings();
    py::dict d;
    d["enabled"] = s.enabled;
    d["dir"] = s.dir;
    d["max_bytes"] = s.max_bytes;
    d["readonly_dirs"] = s.readonly_dirs;
    d["writable"] = s.writable;
    return d;
  });
  m.def("cache_configure", [](bool enabled, const std::string& dir, int64_t max_bytes,
                              std::vector<std::string> readonly_dirs, bool writable) {
    DiskCache::instance().configure({enabled, dir, max_bytes, std::move(readonly_dirs), writable});
  }, py::arg("enabled"), py::arg("dir"), py::arg("max_bytes"),
     py::arg("readonly_dirs") = std::vector<std::string>(), py::arg("writable") = true);
  m.def("cache_reset_from_environment", [] { DiskCache::instance().reset_from_environment(); });
  m.def("cache_info", [] { return info_dict(DiskCache::instance().info()); });
  // Whether the folder can be used (creates it); its warning, if not, becomes a Python warning.
  m.def("cache_usable", [] {
    torch::PyWarningHandler warnings;
    return DiskCache::instance().can_store();
  });
  // Each read-only folder: its totals, or why it is not used (its warning, if any, is Python's).
  m.def("cache_readonly_info", [] {
    torch::PyWarningHandler warnings;
    py::list out;
    for (const CacheInfo& i : DiskCache::instance().readonly_info()) {
      py::dict d = info_dict(i);
      d["problem"] = i.problem;
      out.append(d);
    }
    return out;
  });
  m.def("cache_clear", [] { return info_dict(DiskCache::instance().clear()); });
  m.def("cache_prune", [](int64_t max_bytes) { return info_dict(DiskCache::instance().prune(max_bytes)); },
        py::arg("max_bytes") = -1);
  m.def("cache_counters", [] { return counters_dict(DiskCache::instance().counters()); });
  auto summary_dict = [](const ArchiveSummary& s) {
    py::dict d;
    d["path"] = s.path;
    d["dir"] = s.dir;
    d["entries"] = s.entries;
    d["reflections"] = s.reflections;
    d["manifests"] = s.manifests;
    d["bytes"] = s.bytes;
    d["kernels"] = s.kernels;
    return d;
  };
  m.def("cache_export", [summary_dict](const std::string& path, const std::vector<std::string>& kernels) {
    torch::PyWarningHandler warnings;
    return summary_dict(export_cache_archive(path, kernels));
  }, py::arg("path"), py::arg("kernels"));
  m.def("cache_import", [summary_dict](const std::string& path, const std::string& dir) {
    torch::PyWarningHandler warnings;
    return summary_dict(import_cache_archive(path, dir));
  }, py::arg("path"), py::arg("dir"));

}

// Programs (the reflected source) and their specializations.
void bind_programs(py::module_& m) {
  py::class_<Program, std::shared_ptr<Program>>(m, "Program")
      .def(py::init([](std::string source, std::string filename, std::vector<std::string> options,
                       std::string std, int arch, bool cache) {
             // Reading the reflection may warn (an unusable cache folder, a damaged record):
             // those become Python warnings.
             torch::PyWarningHandler warnings;
             try {
               return std::const_pointer_cast<Program>(
                   read_program(std::move(source), std::move(filename), options, std, arch, cache));
             } catch (...) {
               warnings.set_in_exception();
               throw;
             }
           }),
           py::arg("source"), py::arg("filename") = "kernel.cu",
           py::arg("options") = std::vector<std::string>{}, py::arg("std") = "c++17",
           py::arg("arch") = 0, py::arg("cache") = true)
      .def_static("from_reflection",
                  [](std::string source, std::string filename, const py::bytes& reflection) {
                    return std::const_pointer_cast<Program>(load_program(
                        std::move(source), std::move(filename), std::string(reflection)));
                  })
      .def("dependencies",
           [](const Program& p, int arch, const std::string& std,
              const std::vector<std::string>& options) {
             torch::PyWarningHandler warnings;
             try {
               CompileOptions o;
               o.arch = arch;
               o.std = std;
               o.extra = options;
               const Dependencies d = program_dependencies(p, o);
               py::list files;
               for (const auto& f : d.files) files.append(py::make_tuple(f.path, f.digest));
               return py::make_tuple(files, d.inexact);
             } catch (...) {
               warnings.set_in_exception();
               throw;
             }
           },
           py::arg("arch"), py::arg("std") = "c++17",
           py::arg("options") = std::vector<std::string>{})
      .def_property_readonly("reflection",
                             [](const Program& p) { return py::bytes(p.reflection()); })
      .def_property_readonly("source", &Program::source)
      .def_property_readonly("filename", &Program::filename)
      .def_property_readonly("kernel_names", [](const Program& p) {
        std::vector<std::string> names;
        for (const auto& k : p.kernels()) names.push_back(k.name);
        return names;
      })
      .def("require_kernel", [](const Program& p, const std::string& name) { p.kernel(name); },
           "Raises ValueError naming the kernels that exist when none is called `name`.");

  py::class_<Specialization, std::shared_ptr<Specialization>>(m, "Specialization")
      .def_property_readonly("signature", [](const Specialization& s) { return s.signature; })
      .def("info", &spec_dict)
      .def_property_readonly("key_bytes", [](const Specialization& s) { return key_bytes(s.key); })
      .def_property_readonly("serialized", &spec_serialized);

}

using RuntimeClass = py::class_<KernelRuntime, std::shared_ptr<KernelRuntime>>;

void bind_batch_methods(RuntimeClass& c);
void bind_device_methods(RuntimeClass& c);

// A kernel's runtime: compiling, precompile's batches and workers, pickled specializations, and
// what a specialization is on a device.
void bind_runtime_class(py::module_& m) {
  RuntimeClass c(m, "KernelRuntime");
  c
      .def_property_readonly("name", [](const KernelRuntime& d) { return d.decl().name; })
      // The TorchScript object (torch.classes.cudajit.Kernel) of this runtime: the op path and
      // the Python Kernel then share every compiled specialization.
      .def("script_object", [](const std::shared_ptr<KernelRuntime>& d) {
             return torch::jit::toPyObject(c10::IValue(c10::make_intrusive<KernelObject>(d)));
           })
      .def("compile", [](KernelRuntime& d, py::tuple args, int arch) {
             std::vector<Arg> conv = convert_all(args, d.decl());
             auto spec = compile_without_gil(d, d.key(conv.data(), conv.size(), nullptr, arch));
             // What a launch would refuse (a misaligned float4* tensor), a compile refuses too.
             check_pointees(d.decl(), *spec, conv.data(), conv.size());
             return spec;
           }, py::arg("args"), py::arg("arch") = 0)
      .def_property_readonly("cache_counters", [](const KernelRuntime& d) {
             return counters_dict(d.table().cache_counters());
           })
      .def("compile_inputs", [](KernelRuntime& d, py::tuple args, int arch) {
             // What NVRTC is given for these arguments: the generated source, the options
             // and the name expressions (inspection and the bare-NVRTC benchmark).
             const SpecKey key = key_of(d, args, arch);
             const KernelOptions& options = d.definition().options();
             const Program& program = d.definition().program();
             const std::vector<InstantiationRequest> req = {{d.decl().name, key, options.template_args}};
             CompileOptions o = options.compile;
             o.arch = key.arch;
             const GeneratedSource generated = program.generate(req);
             py::list names;
             for (const auto& inst : generated.instantiations) {
               names.append(inst.kernel_expression);
               for (const auto& p : inst.probe_expressions)
                 if (!p.empty()) names.append(p);
             }
             py::dict out;
             out["source"] = generated.text;
             out["filename"] = program.filename();
             out["options"] = program.nvrtc_options(o);
             out["name_expressions"] = names;
             return out;
           }, py::arg("args"), py::arg("arch") = 0)
      .def("is_compiled", [](KernelRuntime& d, py::tuple args, int arch) {
             return d.table().lookup(key_of(d, args, arch)) != nullptr;
           }, py::arg("args"), py::arg("arch") = 0)
      .def("specializations", [](const KernelRuntime& d) { return d.table().specializations(); })
      .def_property_readonly("cooperative", [](const KernelRuntime& d) { return d.definition().cooperative(); })
      .def("adopt_key", [](KernelRuntime& d, py::bytes key, py::bytes data, const std::string& digest) {
             const std::string bytes = data;
             TORCH_CHECK_VALUE(sha256_hex(bytes) == digest, "torch_cudajit: a pickled "
                               "specialization of kernel '", d.decl().name, "' does not match "
                               "its recorded SHA-256; it is damaged.");
             auto compiled = deserialize_compiled("pickle", bytes);
             TORCH_CHECK_VALUE(compiled.has_value(), "torch_cudajit: a pickled specialization "
                               "of kernel '", d.decl().name, "' holds a damaged compile.");
             return d.table().adopt_foreign(key_from_bytes(key),
                                    std::make_shared<const CompiledProgram>(std::move(*compiled)),
                                    "a pickled specialization");
           }, py::arg("key"), py::arg("data"), py::arg("digest"))
      .def("lookup_key", [](KernelRuntime& d, py::bytes key) {
             const SpecKey k = key_from_bytes(key);
             check_key(d.decl(), k, "a pickled specialized kernel");
             return get_or_compile(d, k);
           });
  bind_batch_methods(c);
  bind_device_methods(c);
}

// Kernel.precompile's batches, compiled here or in worker processes.
void bind_batch_methods(RuntimeClass& c) {
  c
      // Several argument tuples of one architecture compile as one NVRTC program (keys in the
      // disk cache are loaded instead).
      .def("compile_many", [](KernelRuntime& d, py::list args, int arch) {
             std::vector<SpecKey> keys;
             std::vector<std::vector<Arg>> converted;
             for (const auto& a : args) {
               converted.push_back(convert_all(a.cast<py::tuple>(), d.decl()));
               keys.push_back(d.key(converted.back().data(), converted.back().size(), nullptr, arch));
             }
             std::vector<std::shared_ptr<Specialization>> specs;
             {
               py::gil_scoped_release release;
               specs = d.table().compile_many(keys);
             }
             for (size_t i = 0; i < specs.size(); ++i)
               check_pointees(d.decl(), *specs[i], converted[i].data(), converted[i].size());
             return specs;
           }, py::arg("args"), py::arg("arch"))
      // Kernel.precompile's worker processes: compile a batch and send back bytes, each distinct
      // program once with (program, index, outcome) per entry; the parent adopts.
      .def("compile_serialized", [](KernelRuntime& d, py::list args, int arch) {
             std::vector<SpecKey> keys;
             for (const auto& a : args) keys.push_back(key_of(d, a.cast<py::tuple>(), arch));
             std::vector<CompiledInstance> got;
             {
               py::gil_scoped_release release;
               got = d.table().compile_detached(keys);
             }
             py::list programs, entries;
             std::vector<const CompiledProgram*> seen;
             for (const CompiledInstance& inst : got) {
               auto it = std::find(seen.begin(), seen.end(), inst.compiled.get());
               if (it == seen.end()) {
                 seen.push_back(inst.compiled.get());
                 programs.append(py::bytes(serialize_compiled("precompile", *inst.compiled)));
                 it = seen.end() - 1;
               }
               entries.append(py::make_tuple(it - seen.begin(), inst.index, static_cast<int>(inst.outcome)));
             }
             return py::make_tuple(programs, entries);
           }, py::arg("args"), py::arg("arch"))
      .def("adopt_serialized", [](KernelRuntime& d, py::list args, int arch, py::list programs,
                                  py::list entries) {
             std::vector<std::shared_ptr<const CompiledProgram>> compiled;
             for (const auto& p : programs) {
               auto c = deserialize_compiled("precompile", p.cast<std::string>());
               TORCH_CHECK(c.has_value(), "torch_cudajit: a precompile worker sent back a "
                           "damaged result for kernel '", d.decl().name, "'");
               compiled.push_back(std::make_shared<const CompiledProgram>(std::move(*c)));
             }
             TORCH_INTERNAL_ASSERT(entries.size() == args.size());
             std::vector<std::shared_ptr<Specialization>> specs;
             for (size_t i = 0; i < args.size(); ++i) {
               const auto [program, index, outcome] = entries[i].cast<std::tuple<size_t, size_t, int>>();
               TORCH_INTERNAL_ASSERT(program < compiled.size());
               specs.push_back(d.table().adopt(key_of(d, args[i].cast<py::tuple>(), arch), compiled[program],
                                       index, static_cast<CacheOutcome>(outcome)));
             }
             return specs;
           }, py::arg("args"), py::arg("arch"), py::arg("programs"), py::arg("entries"));
}

// What a specialization is on a device: resources, attributes, module variables, the
// cooperative grid limit and forall's configuration.
void bind_device_methods(RuntimeClass& c) {
  c
      .def("resources", [](KernelRuntime&, std::shared_ptr<Specialization> spec, int device) {
             KernelResources r = kernel_resources(*spec, device);
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
      .def("set_attribute", [](KernelRuntime&, std::shared_ptr<Specialization> spec, int device,
                               const std::string& name, int value) {
             // The settable attributes, by the names CompiledKernel's properties use.
             CUfunction_attribute attr;
             if (name == "max_dynamic_shared_size_bytes") attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
             else if (name == "preferred_shared_memory_carveout") attr = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
             else TORCH_CHECK_VALUE(false, "torch_cudajit: '", name, "' is not a settable kernel attribute");
             set_kernel_attribute(*spec, device, attr, value);
           }, py::arg("spec"), py::arg("device"), py::arg("name"), py::arg("value"))
      .def("global_tensor", [](KernelRuntime&, std::shared_ptr<Specialization> spec, int device,
                               const std::string& name) { return module_global(spec, device, name); },
           py::arg("spec"), py::arg("device"), py::arg("name"))
      .def("max_cooperative_grid_blocks", [](KernelRuntime&, std::shared_ptr<Specialization> spec,
                                             int device, int threads, int64_t dynamic_shared) {
             return max_cooperative_grid_blocks(*spec, device, threads, dynamic_shared);
           })
      .def("forall_shape", [](KernelRuntime& d, py::tuple args, int64_t ntasks, int64_t shared_mem) {
             // What kernel.forall(ntasks)(*args) launches: grid, block, the virtual blocks each
             // physical block runs (0: the kernel itself, on a plain grid), why not, and the
             // parameters whose data the virtual grid prefetches into L2.
             int device = 0;
             std::vector<Arg> conv = convert_all(args, d.decl());
             const SpecKey key = d.key(conv.data(), conv.size(), &device);
             LaunchRequest request;
             request.forall_tasks = ntasks;
             request.shared_mem = shared_mem;
             const ForallPlan plan =
                 d.plan_forall(*get_or_compile(d, key), conv.data(), conv.size(), device, request);
             std::string why = plan.plain_because;
             if (plan.spec->virtual_blocks == 0 && why.empty()) why = d.table().virtual_grid_failure(key);
             py::list prefetched;
             for (size_t j = 0; j < plan.spec->companions.size(); ++j)
               if (j < size_t{kMaxPrefetched} && (plan.launch.prefetch_mask >> j & 1u))
                 prefetched.append(d.decl().params[plan.spec->companions[j]].name);
             return py::make_tuple(plan.launch.grid[0], plan.launch.block[0], plan.spec->virtual_blocks,
                                   why, py::tuple(prefetched));
           }, py::arg("args"), py::arg("ntasks"), py::arg("shared_mem") = 0)
      .def_property_readonly("virtual_grid_refusal",
                             [](const KernelRuntime& d) { return d.definition().virtual_grid_refusal(); })
      .def("virtual_grid", [](KernelRuntime& d, py::tuple args, int arch) -> py::object {
             // The virtual-grid variant for these arguments' key (compile-only with arch > 0),
             // or None; virtual_grid_failure(args, arch) says why.
             const SpecKey key = key_of(d, args, arch);
             std::shared_ptr<Specialization> spec;
             {
               py::gil_scoped_release release;
               spec = d.table().get_virtual(key);
             }
             if (!spec) return py::none();
             py::dict info = spec_dict(*spec);
             info["virtual_blocks"] = spec->virtual_blocks;
             info["companions"] = spec->companions;
             return std::move(info);
           }, py::arg("args"), py::arg("arch") = 0)
      .def("virtual_grid_failure", [](KernelRuntime& d, py::tuple args, int arch) {
             return d.table().virtual_grid_failure(key_of(d, args, arch));
           }, py::arg("args"), py::arg("arch") = 0)
      .def_property_readonly("grid_strides", [](const KernelRuntime& d) { return d.definition().grid_strides(); });

}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_cudajit C++ core";
  // The first forall launch of a key may compile its virtual-grid variant: without the GIL.
  torch_cudajit::set_blocking_runner(&torch_cudajit::python::run_without_gil);
  bind_exceptions(m);
  bind_runtime(m);
  bind_cache(m);
  bind_programs(m);
  bind_runtime_class(m);
  torch_cudajit::python::bind_definitions(m);
  torch_cudajit::python::bind_launchers(m);
  torch_cudajit::python::bind_op_launcher(m);
  torch_cudajit::python::bind_job_store(m);
}
