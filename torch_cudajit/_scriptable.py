"""Kernel objects stored on a module script to their TorchScript object: the base class that
makes torch.jit.script convert a Kernel, with RecursiveScriptClass's forwarding turned off."""
import torch


class _Scriptable(torch.jit.RecursiveScriptClass):
    """Lets ``torch.jit.script`` take a Kernel stored on a module. TorchScript types a module
    attribute through torch.jit's registry of script classes (the Kernel class is registered
    as torch.classes.cudajit.Kernel), and converts an instance of RecursiveScriptClass to the
    script object in its ``_c``: here the kernel's own script object, so the scripted module
    shares its compiled code. The rest of RecursiveScriptClass (forwarding attributes and
    operators to ``_c``) is turned off: a Kernel behaves as a plain Python object."""

    @property
    def _c(self):
        return self.script_object

    def __getattr__(self, name):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    __setattr__ = object.__setattr__
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __lt__ = object.__lt__
    __le__ = object.__le__
    __gt__ = object.__gt__
    __ge__ = object.__ge__
    __hash__ = object.__hash__
    __str__ = object.__str__

    def __bool__(self):
        return True

    def __getstate__(self):
        return self.__dict__


def _unsupported(name: str):
    def method(self, *args):
        raise TypeError(f"'{type(self).__name__}' object does not support {name}")
    return method


def _not_implemented(self, other):
    return NotImplemented


# The operators RecursiveScriptClass forwards to its script object, back to plain behaviour:
# arithmetic is not implemented (Python then raises its usual TypeError), the rest raises.
for _name in ("__iter__", "__len__", "__neg__", "__contains__", "__setitem__", "__int__",
              "__float__", "__enter__", "__exit__"):
    setattr(_Scriptable, _name, _unsupported(_name))
for _name in ("__mul__", "__add__", "__sub__", "__pow__", "__truediv__", "__mod__", "__and__",
              "__or__", "__xor__", "__iadd__"):
    setattr(_Scriptable, _name, _not_implemented)
del _name
