"""Module attributes that must never be touched beyond identity by the rebinding pass."""

import warnings

from .kernels import expand_kernel as same_kernel_here  # noqa: F401  (a copy, must be rebound)


class Boom:
    """Raises from every hook a careless scan would call."""

    def __eq__(self, other):
        raise AssertionError("__eq__ called on a foreign object")

    def __hash__(self):
        raise AssertionError("__hash__ called on a foreign object")

    def __getattr__(self, name):
        raise AssertionError(f"__getattr__({name!r}) called on a foreign object")

    @property
    def __dict__(self):
        raise AssertionError("__dict__ property read on a foreign object")

    @property
    def __class__(self):
        raise AssertionError("__class__ property read on a foreign object")


class Deprecated:
    """Reading ``kernel`` warns, like torch's deprecated module attributes."""

    @property
    def kernel(self):
        warnings.warn("deprecated attribute", FutureWarning, stacklevel=2)
        return None


class Slotted:
    __slots__ = ("kernel",)

    def __init__(self):
        self.kernel = None


boom = Boom()
deprecated = Deprecated()
slotted = Slotted()


def __getattr__(name):
    raise AssertionError(f"module __getattr__({name!r}) called")
