"""Extensions: objects that turn launch arguments into kernel parameters (numba's
``extensions`` with ``prepare_args``)."""


class Params(tuple):
    """Several values that replace one argument and bind to consecutive kernel parameters.

    An extension returns ``Params(a, b)`` to pass one user object as two parameters."""

    def __new__(cls, *values):
        return super().__new__(cls, values)


class Extension:
    """Base class of argument extensions.

    ``prepare_args(value, *, param, stream, retr)`` receives one argument, the Parameter it
    binds to, the launch's stream handle (None for the current stream) and a list ``retr`` to
    which it may append callables that run after the launch. It returns the value to pass on:
    the same value if it does not handle it, a replacement, or ``Params(...)`` to pass several
    parameters. Extensions run from the last in the kernel's list to the first."""

    def prepare_args(self, value, *, param, stream, retr):
        raise NotImplementedError
