"""A stand-in for ``triton.jit`` with no Triton: subscriptable, with
``fn``/``arg_names``/``constexprs``."""

import inspect


class FakeJITFunction:
    def __init__(self, fn, constexprs=()):
        self.fn = fn
        self.arg_names = [p for p in inspect.signature(fn).parameters]
        self.constexprs = [self.arg_names.index(name) for name in constexprs]
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self.fn(*args, **kwargs)

        return launch


def jit(constexprs=()):
    return lambda fn: FakeJITFunction(fn, constexprs)
