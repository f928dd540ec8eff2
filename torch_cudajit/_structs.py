"""Struct parameters passed by value: a Python object with the struct's fields (a dataclass, a
namedtuple, any object with those attributes), a dict, a tuple in field order, a CPU ``uint8``
tensor of the struct's bytes, or ``bytes``. The layout (offsets, sizes, kinds, nested structs and
arrays) comes from the C++ front end (``KernelDefinition.param_layout``), template parameters
substituted from the kernel's ``template_args`` or from the call's tensors (``T`` of
``interval_gpu<T>`` from a ``T*`` or ``cj::Array<T, N>`` argument)."""
from __future__ import annotations

import numbers
import struct

import torch

# struct module formats by (kind, size): little-endian, as the GPU lays numbers out.
_FORMATS = {
    ("f", 4): "f", ("f", 8): "d", ("h", 2): "e",
    ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
    ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
    ("b", 1): "?", ("p", 8): "Q",
}


class StructArgs:
    """The conversion of one kernel's struct arguments into bytes (see the module docstring).
    Only parameters of a struct type (``definition.struct_params``) are looked at."""

    def __init__(self, definition, params):
        self._definition = definition
        self._params = params
        self.indexes = tuple(definition.struct_params)
        self._names = tuple(definition.template_param_names)
        self._layouts: dict = {}

    def convert(self, args: tuple) -> tuple:
        """``args`` (bound to the parameters, in order) with every struct argument given as an
        object, dict, tuple or byte tensor replaced by the struct's bytes."""
        out = None
        for i in self.indexes:
            if i >= len(args):
                continue
            value = args[i]
            if not _is_struct_value(value):
                continue
            if out is None:
                out = list(args)
            out[i] = self.pack(i, value, args)
        return args if out is None else tuple(out)

    def layout(self, i: int, args: tuple = ()) -> dict:
        """The layout of parameter ``i``'s struct, its template parameters deduced from ``args``
        where the kernel's template_args do not give them."""
        deduced = self._deduce(args)
        key = (i, tuple(sorted(deduced.items())))
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._definition.param_layout(i, deduced)
            self._layouts[key] = layout
        return layout

    def pack(self, i: int, value, args: tuple = ()) -> bytes:
        param = self._params[i]
        what = f"parameter '{param.name}' ({param.type})"
        layout = self.layout(i, args)
        if not layout["is_record"]:
            raise TypeError(f"{what} takes a number, got {type(value).__name__}")
        size = layout["size"]
        if isinstance(value, torch.Tensor):
            if value.device.type != "cpu" or value.dtype != torch.uint8 or value.dim() != 1:
                raise TypeError(f"{what} is a struct of {size} bytes ({layout['type']}); a tensor "
                                f"passed for it must hold its bytes: a 1-d uint8 CPU tensor, got "
                                f"a {value.dim()}-d {value.dtype} tensor on {value.device}")
            if value.numel() != size:
                raise ValueError(f"{what} is a struct of {size} bytes ({layout['type']}); got a "
                                 f"uint8 tensor of {value.numel()} bytes")
            return value.contiguous().numpy().tobytes()
        buf = bytearray(size)
        try:
            _pack_record(buf, 0, layout["fields"], value, param.name, layout["type"])
        except (TypeError, ValueError) as e:
            raise type(e)(f"torch_cudajit: kernel '{self._definition.name}': {e}") from None
        return bytes(buf)

    def _deduce(self, args: tuple) -> dict:
        """Template parameters named by the element type of a tensor argument's pointer or
        Array parameter (``T`` of ``T*`` bound to a float32 tensor is ``float``)."""
        from ._jit import _DTYPE_TO_CPP
        deduced = {}
        if not self._names:
            return deduced
        for p, a in zip(self._params, args):
            if p.kind not in ("pointer", "array") or not isinstance(a, torch.Tensor):
                continue
            element = p.element.replace("const", "").replace("volatile", "").strip()
            if element in self._names and element not in deduced and a.dtype in _DTYPE_TO_CPP:
                deduced[element] = _DTYPE_TO_CPP[a.dtype]
        return deduced


def _is_struct_value(value) -> bool:
    """A value the struct conversion handles (not a number, bytes or a tensor the C++ core
    takes as it is)."""
    if value is None or isinstance(value, (numbers.Number, bytes, bytearray, str)):
        return False
    if isinstance(value, torch.Tensor):
        # A 0-d tensor is a number; any other is the struct's bytes or a mistake pack names.
        return value.dim() >= 1
    return not hasattr(value, "__cuda_array_interface__") and not hasattr(value, "__dlpack__")


def _fields_of(fields: list, value, path: str, type_name: str) -> list:
    """The values of a struct's fields, in order, from a dict, a tuple or list, or an object's
    attributes."""
    names = [f["name"] for f in fields]
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(names))
        missing = [n for n in names if n not in value]
        if unknown or missing:
            raise TypeError(f"'{path}' is a {type_name} with the fields ({', '.join(names)}); the "
                            f"dict given for it"
                            f"{' lacks ' + ', '.join(missing) if missing else ''}"
                            f"{' and' if missing and unknown else ''}"
                            f"{' has no field ' + ', '.join(map(str, unknown)) if unknown else ''}")
        return [value[n] for n in names]
    if isinstance(value, (tuple, list)):
        if len(value) != len(fields):
            raise TypeError(f"'{path}' is a {type_name} with {len(fields)} field(s) "
                            f"({', '.join(names)}); got a {type(value).__name__} of "
                            f"{len(value)} value(s)")
        return list(value)
    out = []
    for n in names:
        if not hasattr(value, n):
            raise TypeError(f"'{path}' is a {type_name} with the fields ({', '.join(names)}); "
                            f"the {type(value).__name__} given for it has no attribute '{n}'. "
                            f"Pass an object with those attributes, a dict or a tuple in field "
                            f"order")
        out.append(getattr(value, n))
    return out


def _pack_record(buf: bytearray, at: int, fields: list, value, path: str, type_name: str):
    for field, v in zip(fields, _fields_of(fields, value, path, type_name)):
        _pack_field(buf, at + field["offset"], field, v, f"{path}.{field['name']}")


def _pack_field(buf: bytearray, at: int, field: dict, value, path: str):
    count = field["count"]
    if count == 1:
        _pack_one(buf, at, field, value, path)
        return
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise TypeError(f"'{path}' is an array of {count} {field['type']}; got "
                        f"{type(value).__name__}"
                        f"{' of ' + str(len(value)) if isinstance(value, (tuple, list)) else ''}")
    for k, v in enumerate(value):
        _pack_one(buf, at + k * field["size"], field, v, f"{path}[{k}]")


def _pack_one(buf: bytearray, at: int, field: dict, value, path: str):
    kind, size = field["kind"], field["size"]
    if kind == "r":
        _pack_record(buf, at, field["fields"], value, path, field["type"])
        return
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        value = value.item()
    if kind == "p":
        if value is None:
            value = 0
        elif isinstance(value, torch.Tensor):
            value = value.data_ptr()
        elif hasattr(value, "value") and not isinstance(value, numbers.Number):
            value = value.value  # DevicePointer
    if kind == "B":
        _pack_bfloat16(buf, at, value, path)
        return
    fmt = _FORMATS.get((kind, size))
    if fmt is None:
        if isinstance(value, (bytes, bytearray)) and len(value) == size:
            buf[at:at + size] = value
            return
        raise TypeError(f"'{path}' is a {field['type']} ({size} bytes), which is packed from "
                        f"bytes of that size; got {type(value).__name__}")
    if kind in ("f", "h"):
        ok = isinstance(value, numbers.Real)
    elif kind == "b":
        ok = isinstance(value, (bool, numbers.Integral))
    else:
        ok = isinstance(value, numbers.Integral)
    if not ok:
        raise TypeError(f"'{path}' is a {field['type']}; got {type(value).__name__} {value!r}")
    try:
        struct.pack_into("<" + fmt, buf, at, value)
    except (struct.error, OverflowError) as e:
        raise ValueError(f"'{path}' is a {field['type']} ({size} bytes); {value!r} does not fit "
                         f"({e})") from None


def _pack_bfloat16(buf: bytearray, at: int, value, path: str):
    if not isinstance(value, numbers.Real):
        raise TypeError(f"'{path}' is a __nv_bfloat16; got {type(value).__name__} {value!r}")
    bits = torch.tensor(float(value), dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF
    struct.pack_into("<H", buf, at, bits)
