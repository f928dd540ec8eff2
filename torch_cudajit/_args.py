"""The one place Python normalises what a launch or a compile is given: number arguments
(``number``), arguments on the slow path (``coerce``), grids and blocks (``dims``,
``as_tuple``), stream objects (``stream_handle``), architectures (``arch_number``), and
DevicePointer, the wrapper of raw device addresses."""
import ctypes
import functools
import numbers
import operator
import re

import torch

try:  # numpy is optional
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


class DevicePointer:
    """A raw device address for a pointer parameter (``T*``), e.g. from another library:
    ``kernel[grid, block](cj.DevicePointer(t.data_ptr()), n)``.

    Pointer parameters refuse bare ints, which are too easily a size or an index; wrapping says
    that the int is an address. The kernel receives it unchanged: it must point to device (or
    mapped host) memory that stays alive until the kernel has run, aligned for the pointee (a
    ``float4*`` needs 16 bytes, checked at launch). ``DevicePointer(0)`` is a NULL pointer, like
    ``None``. Like ``None``, it carries no element type: a template parameter ``T`` of ``T*``
    must come from the other arguments."""

    __slots__ = ("_value",)

    def __init__(self, value):
        if isinstance(value, bool):
            raise TypeError(f"DevicePointer takes an int address, got the bool {value!r}")
        try:
            address = operator.index(value)
        except TypeError:
            raise TypeError(f"DevicePointer takes an int address (such as tensor.data_ptr()), "
                            f"got {type(value).__name__}") from None
        if not 0 <= address < 1 << 64:
            raise ValueError(f"DevicePointer takes an address from 0 to 2**64-1, got {address}")
        self._value = address

    @property
    def value(self) -> int:
        """The address, an int in [0, 2**64)."""
        return self._value

    def __eq__(self, other):
        return isinstance(other, DevicePointer) and other._value == self._value

    def __hash__(self):
        return hash((DevicePointer, self._value))

    def __repr__(self):
        return f"DevicePointer(0x{self._value:x})"


def stream_handle(stream):
    """The raw CUstream of a stream object, or None for "the current torch stream"."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise TypeError(f"stream must be a torch.cuda.Stream, a raw handle (int) or None, got {stream!r}")
    if isinstance(stream, int):
        if not 0 <= stream < 1 << 64:
            raise ValueError(f"stream must be a raw CUstream handle (an int from 0 to 2**64-1), "
                             f"a torch.cuda.Stream or None, got {stream}")
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream / torch.cuda.ExternalStream, CuPy
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    handle = getattr(stream, "handle", None)  # numba-cuda streams
    if handle is not None:
        return int(getattr(handle, "value", handle) or 0)
    raise TypeError(
        f"stream must be a torch.cuda.Stream, a raw handle (int) or None, got {type(stream).__name__}")


def number(value):
    """A number argument as Python passes it on: a numpy scalar becomes its Python value
    (``np.float32(2.5)`` -> ``2.5``, ``np.bool_(True)`` -> ``True``); any other value comes back
    as it is, for the C++ core or the op path to check against its parameter."""
    if _np is not None and isinstance(value, _np.generic):
        return value.item()
    return value


def coerce(value):
    """An argument as the C++ core takes it: numbers through ``number``, foreign GPU arrays as
    tensors aliasing their memory."""
    if isinstance(value, torch.Tensor):
        return value
    value = number(value)
    if isinstance(value, numbers.Number) or isinstance(value, bytes):
        return value
    if hasattr(value, "__cuda_array_interface__"):
        # Zero-copy: the tensor aliases the foreign array's memory.
        return torch.as_tensor(value, device="cuda")
    if hasattr(value, "__dlpack__"):
        return torch.from_dlpack(value)
    return value


def arch_number(arch) -> int:
    """An ``arch=`` argument (90, "sm_90", "compute_90" or (9, 0)) as a compute capability
    number, checked to be one this NVRTC can target: ValueError otherwise, listing those it can.
    (A GPU newer than NVRTC is not named this way: a launch on it compiles PTX of the newest
    architecture NVRTC supports, which the driver compiles for the GPU.)"""
    number = None
    if isinstance(arch, int) and not isinstance(arch, bool):
        number = arch
    elif isinstance(arch, str):
        match = re.fullmatch(r"(?:sm_|compute_)?(\d+)([a-z]*)", arch.strip().lower())
        if match and match.group(2):
            raise ValueError(
                f"arch is {arch!r}, an architecture-specific target; compile and precompile take "
                f"a compute capability such as 'sm_{match.group(1)}' and compile machine code "
                f"that runs on every GPU of it. For an architecture-specific target (the 'a' "
                f"and 'f' suffixes), define the kernel with options=['-arch=sm_{match.group(1)}{match.group(2)}'] and "
                f"compile with arch='sm_{match.group(1)}'.")
        number = int(match.group(1)) if match else None
    elif (isinstance(arch, tuple) and len(arch) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in arch)):
        number = arch[0] * 10 + arch[1]
    if number is None:
        raise ValueError(f"arch must be like 90, 'sm_90' or (9, 0), got {arch!r}")
    supported = nvrtc_supported_archs()
    if supported and number not in supported:
        from ._loader import _C
        v = _C.nvrtc_version()
        oldest = (f"; the oldest architecture it supports is sm_{supported[0]}"
                  if number < supported[0] else "")
        raise ValueError(
            f"arch is {arch!r}: NVRTC {v // 1000}.{v % 1000 // 10} cannot target sm_{number}"
            f"{oldest}. It supports {', '.join(f'sm_{a}' for a in supported)}; pass one of "
            f"those (a kernel launched on a GPU needs no arch=: it is compiled for that GPU).")
    return number


@functools.lru_cache(maxsize=None)
def nvrtc_supported_archs() -> tuple:
    """The architectures the NVRTC in use can target, as compute capabilities (e.g. 90); empty
    when NVRTC cannot be asked (the compile itself then says what is missing)."""
    from ._loader import _C
    try:
        lib = ctypes.CDLL(_C.nvrtc_library_file())
        count = ctypes.c_int()
        if lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)) != 0:
            return ()
        archs = (ctypes.c_int * count.value)()
        if lib.nvrtcGetSupportedArchs(archs) != 0:
            return ()
    except (OSError, RuntimeError, AttributeError):
        return ()
    return tuple(sorted(archs))


def as_tuple(value):
    """A list grid or block as a tuple, so that the launch configuration can be cached."""
    return tuple(value) if isinstance(value, list) else value


def dims(value, what: str, kernel: str) -> list:
    """A grid or block (an int, or 1 to 3 ints) as three ints; TypeError names the kernel."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value, 1, 1]
    if isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value) + [1] * (3 - len(value))
    raise TypeError(f"kernel '{kernel}': {what} must be an int or a tuple of 1 to 3 ints, "
                    f"got {value!r}")

