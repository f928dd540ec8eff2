// torch_cudajit: the Python binding of kernel definitions (torch_cudajit._C.KernelDefinition).
// The Python Kernel, KernelModule and PrebuiltKernel each hold one definition and read from it
// everything that defines the kernel (parameters with their roles, options, pickled form); the
// definition's KernelRuntime and its TorchScript object are made from the same instance.
#include "launchers.h"
#include "state_dict.h"

#include "../ops/kernel_object.h"

#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

namespace py = pybind11;

namespace torch_cudajit::python {
namespace {

using DefinitionPtr = std::shared_ptr<KernelDefinition>;

DefinitionPtr mutable_ptr(std::shared_ptr<const KernelDefinition> d) {
  // pybind11 holders are non-const; nothing in the binding mutates a definition.
  return std::const_pointer_cast<KernelDefinition>(std::move(d));
}

py::dict param_dict(const ParamBinding& b) {
  const Param& p = *b.param;
  py::dict d;
  d["name"] = p.name;
  d["type"] = p.type;
  d["kind"] = to_string(p.kind);
  d["is_const"] = p.is_const;
  d["role"] = to_string(b.role);
  d["element"] = p.element;
  d["rank"] = p.rank;
  return d;
}

// The options as jit() took them (Kernel.options, and precompile's worker identity).
py::dict options_dict(const KernelDefinition& d) {
  const KernelOptions& o = d.options();
  py::dict out;
  out["options"] = o.compile.extra;
  out["std"] = d.requested_std();
  out["debug"] = o.compile.debug;
  out["lineinfo"] = o.compile.lineinfo;
  out["template_args"] = o.template_args;
  out["cache"] = o.cache;
  out["link"] = py::tuple(py::cast(o.compile.link));
  out["cooperative"] = o.cooperative < 0 ? py::object(py::none()) : py::bool_(o.cooperative != 0);
  return out;
}

}  // namespace

void bind_definitions(py::module_& m) {
  py::class_<KernelDefinition, DefinitionPtr>(m, "KernelDefinition")
      .def(py::init([](std::shared_ptr<Program> program, const std::string& name,
                       std::vector<std::string> options, std::string std, bool debug,
                       bool lineinfo, std::string template_args, bool cache,
                       std::vector<std::string> link, std::optional<bool> cooperative) {
             KernelOptions o;
             o.compile.extra = std::move(options);
             o.compile.std = std::move(std);
             o.compile.debug = debug;
             o.compile.lineinfo = lineinfo;
             o.compile.link = std::move(link);
             o.template_args = std::move(template_args);
             o.cache = cache;
             o.cooperative = cooperative ? (*cooperative ? 1 : 0) : -1;
             return std::make_shared<KernelDefinition>(std::move(program), name, std::move(o));
           }),
           py::arg("program"), py::arg("name"), py::arg("options"), py::arg("std"),
           py::arg("debug"), py::arg("lineinfo"), py::arg("template_args"), py::arg("cache"),
           py::arg("link"), py::arg("cooperative"))
      // Prebuilt code (torch_cudajit.load): `program` holds the kernel's declaration.
      .def_static("prebuilt", [](std::shared_ptr<Program> program, const std::string& name,
                                 py::bytes image, const std::string& lowered_name,
                                 bool cooperative) {
             KernelOptions o;
             o.cooperative = cooperative ? 1 : 0;
             o.cache = false;
             o.prebuilt = std::make_shared<const CompiledProgram>(
                 prebuilt_program(std::string(image), program->kernel(name), lowered_name));
             return std::make_shared<KernelDefinition>(std::move(program), name, std::move(o));
           }, py::arg("program"), py::arg("name"), py::arg("image"), py::arg("lowered_name"),
           py::arg("cooperative"))
      .def_static("from_state", [](const py::bytes& state) {
             return mutable_ptr(KernelDefinition::from_state(KernelDefinition::decode(state)));
           })
      .def_static("from_state", [](const py::dict& state) {
             return mutable_ptr(KernelDefinition::from_state(state_from_dict(state)));
           })
      .def_property_readonly("state", [](const KernelDefinition& d) {
        return py::bytes(KernelDefinition::encode(d.state()));
      })
      .def_property_readonly("state_dict", [](const KernelDefinition& d) {
        return state_dict(d.state());
      })
      .def_property_readonly("name", &KernelDefinition::name)
      .def_property_readonly("source", [](const KernelDefinition& d) { return d.program().source(); })
      .def_property_readonly("is_template", [](const KernelDefinition& d) { return d.decl().is_template; })
      .def_property_readonly("fingerprint", &KernelDefinition::fingerprint)
      .def_property_readonly("options", &options_dict)
      .def_property_readonly("params", [](const KernelDefinition& d) {
        py::list out;
        for (const ParamBinding& b : d.bindings()) out.append(param_dict(b));
        return out;
      })
      // A new runtime of this definition: the Python Kernel's (whose TorchScript object shares
      // it, KernelRuntime.script_object) or a PrebuiltKernel's.
      .def("runtime", [](const DefinitionPtr& d) { return std::make_shared<KernelRuntime>(d); });
}

}  // namespace torch_cudajit::python
