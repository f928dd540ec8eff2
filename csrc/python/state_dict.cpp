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
  // read_fields says whose field it is and what gives a right one.
  throw py::type_error("'" + std::string(field) + "' must be " + expected + ", got " +
                       std::string(py::str(py::type::of(got).attr("__name__"))));
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

namespace {

// `dict` into the fields of `state` that `take` selects: exactly their keys, each of its
// field's Python type. `what` names the dict in messages ("state", "options dict") and `source` what
// gives a right one.
template <class Take>
void read_fields(const py::dict& dict, State& state, const char* what, const char* source,
                 Take take) {
  std::set<std::string> known;
  std::string names;
  state.for_each([&](const StateField& f, auto& v) {
    if (!take(f)) return;
    known.insert(f.name);
    names += (names.empty() ? "'" : ", '") + std::string(f.name) + "'";
    if (!dict.contains(f.name))
      throw py::value_error("torch_cudajit: the " + std::string(what) + " has no field '" +
                            f.name + "'; pass what " + source + " gives.");
    try {
      from_python(f.name, dict[f.name], v);
    } catch (const py::type_error& e) {
      throw py::type_error("torch_cudajit: the " + std::string(what) + "'s field " + e.what() +
                           "; pass what " + source + " gives.");
    }
  });
  for (const auto& item : dict) {
    const std::string key = py::str(item.first);
    if (!known.count(key))
      throw py::value_error("torch_cudajit: the " + std::string(what) + " has an unknown field '" +
                            key + "'; its fields are " + names + ".");
  }
}

bool is_option(const StateField& f) { return f.kind == StateFieldKind::kOption; }

}  // namespace

py::dict state_dict(const State& state) {
  py::dict out;
  state.for_each([&](const StateField& f, const auto& v) { out[f.name] = to_python(v); });
  return out;
}

State state_from_dict(const py::dict& dict) {
  State s;
  read_fields(dict, s, "state", "KernelDefinition.state_dict", [](const StateField&) { return true; });
  return s;
}

py::dict options_dict(const State& state) {
  py::dict out;
  state.for_each([&](const StateField& f, const auto& v) {
    if (is_option(f)) out[f.name] = to_python(v);
  });
  return out;
}

KernelOptions options_from_dict(const py::dict& dict) {
  State s;
  read_fields(dict, s, "options dict", "KernelDefinition.options", is_option);
  return KernelDefinition::options_of(s);
}

}  // namespace torch_cudajit::python
