// torch_cudajit: the Python binding of kernel definitions (torch_cudajit._C.KernelDefinition).
// The Python Kernel, KernelModule and PrebuiltKernel each hold one definition and read from it
// everything that defines the kernel (parameters with their roles, options, pickled form); the
// definition's KernelRuntime and its TorchScript object are made from the same instance.
#include "launchers.h"
#include "state_dict.h"

#include "../ops/kernel_object.h"
#include "../specialization.h"
#include "../struct_layout.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <map>
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

}  // namespace

void bind_definitions(py::module_& m) {
  py::class_<KernelDefinition, DefinitionPtr>(m, "KernelDefinition")
      // `options`: the option fields of the State (KernelDefinition.options gives them).
      .def(py::init([](std::shared_ptr<Program> program, const std::string& name,
                       const py::dict& options) {
             return std::make_shared<KernelDefinition>(std::move(program), name,
                                                       options_from_dict(options));
           }),
           py::arg("program"), py::arg("name"), py::arg("options"))
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
      .def_property_readonly("struct_params",
                             [](const KernelDefinition& d) { return struct_params(d.decl()); })
      .def_property_readonly("template_param_names",
                             [](const KernelDefinition& d) { return d.decl().template_param_names(); })
      .def(
          "param_layout",
          [](const KernelDefinition& d, size_t param, const std::map<std::string, std::string>& deduced) {
            TypeLayout t;
            {
              py::gil_scoped_release release;
              t = param_layout(d, param, deduced);
            }
            std::function<py::list(const std::vector<FieldLayout>&)> fields =
                [&](const std::vector<FieldLayout>& fs) {
                  py::list out;
                  for (const FieldLayout& f : fs) {
                    py::dict e;
                    e["name"] = f.name;
                    e["offset"] = f.offset;
                    e["size"] = f.size;
                    e["kind"] = std::string(1, f.kind);
                    e["count"] = f.count;
                    e["type"] = f.type;
                    e["fields"] = fields(f.fields);
                    out.append(e);
                  }
                  return out;
                };
            py::dict out;
            out["type"] = t.type;
            out["size"] = t.size;
            out["align"] = t.align;
            out["is_record"] = t.is_record;
            out["fields"] = fields(t.fields);
            return out;
          },
          py::arg("param"), py::arg("deduced") = std::map<std::string, std::string>{})
      .def_property_readonly("source", [](const KernelDefinition& d) { return d.program().source(); })
      .def_property_readonly("is_template", [](const KernelDefinition& d) { return d.decl().is_template; })
      .def_property_readonly("fingerprint", &KernelDefinition::fingerprint)
      .def_property_readonly("template_problem", &KernelDefinition::template_problem)
      .def_property_readonly("options", [](const KernelDefinition& d) {
        return options_dict(d.state());
      })
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
