// torch_cudajit: a kernel definition's State as a Python dict (KernelDefinition.state_dict and
// KernelDefinition.from_state) and its options alone (KernelDefinition(program, name, options)
// and KernelDefinition.options), one key per field of CJ_KERNEL_STATE_FIELDS: str for text,
// bytes for the reflection, bool, int, and a list of str.
#pragma once

#include "../definition.h"

#include <pybind11/pybind11.h>

namespace torch_cudajit::python {

/// The State as {field name: value}.
pybind11::dict state_dict(const KernelDefinition::State& state);

/// The State a dict describes: exactly the State's keys, each of its field's Python type; a
/// missing or unknown key is a ValueError, a value of another type a TypeError, each naming
/// the field.
KernelDefinition::State state_from_dict(const pybind11::dict& dict);

/// The State's option fields (the OPTION rows of CJ_KERNEL_STATE_FIELDS) as {name: value}.
pybind11::dict options_dict(const KernelDefinition::State& state);

/// The KernelOptions a dict of exactly the option fields describes, checked as state_from_dict
/// checks its fields.
KernelOptions options_from_dict(const pybind11::dict& dict);

}  // namespace torch_cudajit::python
