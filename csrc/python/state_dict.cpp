// torch_cudajit: the Python dict form of a kernel definition's State (see state_dict.h),
// following the State's field list.
#include "state_dict.h"

#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace torch_cudajit::python {
namespace {

using State = KernelDefinition::State;

py::object to_python(const std::string& v) { return py::str(v); }
py::object to_python(const StateBytes& v) { return py::bytes(v); }
py::object to_python(bool v) { return py::bool_(v); }
py::object to_python(int64_t v) { return py::int_(v); }
py::object to_python(const std::vector<std::string>& v) {
  py::list out;
  for (const auto& item : v) out.append(py::str(item));
  return out;
}

[[noreturn]] void wrong_type(const char* field, const char* expected, const py::handle& got) {
  throw py::type_error("torch_cudajit: the state's field '" + std::string(field) + "' must be " +
                       expected + ", got " + std::string(py::str(py::type::of(got).attr("__name__"))) +
                       "; pass what KernelDefinition.state_dict gives.");
}

// Each field's Python type, exactly: a bool is not taken for an int, nor a str for bytes.
void from_python(const char* field, const py::handle& o, std::string& v) {
  if (!py::isinstance<py::str>(o)) wrong_type(field, "a str", o);
  v = o.cast<std::string>();
}
void from_python(const char* field, const py::handle& o, StateBytes& v) {
  if (!py::isinstance<py::bytes>(o)) wrong_type(field, "bytes", o);
  v = o.cast<std::string>();
}
void from_python(const char* field, const py::handle& o, bool& v) {
  if (!py::isinstance<py::bool_>(o)) wrong_type(field, "a bool", o);
  v = o.cast<bool>();
}
void from_python(const char* field, const py::handle& o, int64_t& v) {
  if (!py::isinstance<py::int_>(o) || py::isinstance<py::bool_>(o)) wrong_type(field, "an int", o);
  v = o.cast<int64_t>();
}
void from_python(const char* field, const py::handle& o, std::vector<std::string>& v) {
  if (!py::isinstance<py::list>(o) && !py::isinstance<py::tuple>(o))
    wrong_type(field, "a list of str", o);
  for (const py::handle item : o) {
    if (!py::isinstance<py::str>(item)) wrong_type(field, "a list of str", item);
    v.push_back(item.cast<std::string>());
  }
}

}  // namespace

py::dict state_dict(const State& state) {
  py::dict out;
  state.for_each([&](const StateField& f, const auto& v) { out[f.name] = to_python(v); });
  return out;
}

State state_from_dict(const py::dict& dict) {
  State s;
  std::set<std::string> known;
  std::string names;
  s.for_each([&](const StateField& f, auto& v) {
    known.insert(f.name);
    names += (names.empty() ? "'" : ", '") + std::string(f.name) + "'";
    if (!dict.contains(f.name))
      throw py::value_error("torch_cudajit: the state has no field '" + std::string(f.name) +
                            "'; pass what KernelDefinition.state_dict gives.");
    const py::object value = dict[f.name];
    from_python(f.name, value, v);
  });
  for (const auto& item : dict) {
    const std::string key = py::str(item.first);
    if (!known.count(key))
      throw py::value_error("torch_cudajit: the state has an unknown field '" + key +
                            "'; its fields are " + names + ".");
  }
  return s;
}

}  // namespace torch_cudajit::python
