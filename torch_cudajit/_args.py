"""Normalisation of launch arguments and stream objects on the Python slow path."""
import numbers

import torch

try:  # numpy is optional
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


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


def coerce(value):
    """Turns numpy scalars and foreign GPU arrays into what the C++ core takes."""
    if isinstance(value, torch.Tensor):
        return value
    if _np is not None and isinstance(value, _np.generic):
        return value.item()
    if isinstance(value, numbers.Number) or isinstance(value, bytes):
        return value
    if hasattr(value, "__cuda_array_interface__"):
        # Zero-copy: the tensor aliases the foreign array's memory.
        return torch.as_tensor(value, device="cuda")
    if hasattr(value, "__dlpack__"):
        return torch.from_dlpack(value)
    return value
