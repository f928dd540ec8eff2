"""A kernel definition's state as a dict of named fields (KernelDefinition.state_dict and
KernelDefinition.from_state): the same fields, in the same order, as the encoded state that
pickles keep. Runs without a GPU."""
import pytest

import torch_cudajit as tcj

SOURCE = "template <class T> __global__ void k(cj::Array<T, 1> o, T a) {}"
FIELDS = ["source", "name", "options", "std", "debug", "lineinfo", "template_args", "cache",
          "link", "filename", "cooperative", "reflection"]


def definition():
    return tcj.jit(SOURCE, options=["-DX=1"], debug=True, template_args="float",
                   cooperative=False)._definition


def test_state_dict_names_every_field_and_round_trips():
    d = definition()
    state = d.state_dict
    assert list(state) == FIELDS
    assert state["source"] == SOURCE and state["name"] == "k" and state["options"] == ["-DX=1"]
    assert state["debug"] is True and state["lineinfo"] is False and state["cache"] is True
    assert state["template_args"] == "float" and state["link"] == [] and state["cooperative"] == 0
    assert isinstance(state["reflection"], bytes) and state["reflection"]
    # The dict and the encoded state describe one definition.
    again = tcj._C.KernelDefinition.from_state(state)
    assert again.state == d.state and again.fingerprint == d.fingerprint
    assert tcj._C.KernelDefinition.from_state(d.state).state_dict == state
    # Every state a release writes carries the reflection: one without it is damaged.
    with pytest.raises(ValueError, match="a pickled cudajit.Kernel has no reflection; it is damaged"):
        tcj._C.KernelDefinition.from_state(dict(state, reflection=b""))


@pytest.mark.parametrize("change, error, match", [
    (lambda s: s.pop("std"), ValueError, "the state has no field 'std'"),
    (lambda s: s.update(extra=1), ValueError,
     "unknown field 'extra'; its fields are 'source', 'name', 'options'"),
    (lambda s: s.update(debug=1), TypeError, "field 'debug' must be a bool, got int"),
    (lambda s: s.update(cooperative=True), TypeError, "field 'cooperative' must be an int, got bool"),
    (lambda s: s.update(reflection="x"), TypeError, "field 'reflection' must be bytes, got str"),
    (lambda s: s.update(name=b"k"), TypeError, "field 'name' must be a str, got bytes"),
    (lambda s: s.update(options=["-DA", 2]), TypeError, "field 'options' must be a list of str, got int"),
], ids=["missing", "unknown", "flag", "number", "bytes", "text", "list"])
def test_state_dict_errors_name_the_field(change, error, match):
    state = definition().state_dict
    change(state)
    with pytest.raises(error, match=match):
        tcj._C.KernelDefinition.from_state(state)


def test_options_are_the_option_fields_of_the_state():
    d = definition()
    options = d.options
    # The option rows of the field list, in its order, with the state's values.
    assert list(options) == [f for f in FIELDS if f not in ("source", "name", "filename",
                                                              "reflection")]
    assert options == {k: v for k, v in d.state_dict.items() if k in options}
    # A definition made from them is the same kernel.
    program = tcj._C.Program(SOURCE, "kernel.cu", options["options"], options["std"])
    again = tcj._C.KernelDefinition(program, "k", options)
    assert again.fingerprint == d.fingerprint and again.state == d.state


@pytest.mark.parametrize("change, error, match", [
    (lambda o: o.pop("lineinfo"), ValueError, "the options dict has no field 'lineinfo'; pass "
                                              "what KernelDefinition.options gives"),
    (lambda o: o.update(source="x"), ValueError, "the options dict has an unknown field 'source'"),
    (lambda o: o.update(std=17), TypeError, "the options dict's field 'std' must be a str, got int"),
], ids=["missing", "not-an-option", "type"])
def test_options_errors_name_the_field(change, error, match):
    options = definition().options
    change(options)
    program = tcj._C.Program(SOURCE, "kernel.cu", [], "c++17")
    with pytest.raises(error, match=match):
        tcj._C.KernelDefinition(program, "k", options)
