"""The launch path's errors, written once for both backends.

A launch that does not fit its kernel is refused before the impl runs; the compiled launcher and
its pure-Python twin build the same exception here, so the two cannot drift apart in wording or
type. Only the failing path reaches this module: nothing here is on the hot path.
"""

__all__ = [
    "LaunchArgumentError",
    "bad_dispatch_function",
    "bad_spec",
    "describe",
    "input_count_mismatch",
    "missing_arguments",
    "positional_mismatch",
    "unexpected_arguments",
]


class LaunchArgumentError(TypeError, RuntimeError):
    """A launch's arguments do not fit the kernel (unexpected or missing names).

    A ``TypeError`` (wrong call) and, for code written against vLLM -- whose override raises
    ``RuntimeError`` for unexpected launch arguments -- also a ``RuntimeError``.
    """


def describe(obj):
    """The name a message gives a kernel, an impl or a dispatch function."""
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


def unexpected_arguments(impl_name, kernel_name, unexpected, arg_names):
    return LaunchArgumentError(
        f"Override for {impl_name!r} (kernel {kernel_name!r}) received unexpected launch "
        f"arguments: {list(unexpected)}; kernel arguments are {list(arg_names)}"
    )


def missing_arguments(impl_name, kernel_name, missing):
    return LaunchArgumentError(
        f"Override for {impl_name!r} (kernel {kernel_name!r}) is missing launch arguments "
        f"without a default: {list(missing)}"
    )


def positional_mismatch(impl_name, kernel_name, problem):
    return LaunchArgumentError(
        f"Override for {impl_name!r} (kernel {kernel_name!r}) received {problem}"
    )


def bad_spec(spec):
    return TypeError(
        "a dispatch function must return (grid, launch_kwargs) or (grid, launch_kwargs, outputs), "
        f"got {type(spec).__name__}"
    )


def input_count_mismatch(n_values, n_names):
    return ValueError(f"{n_values} dispatch input values for {n_names} input names")


def bad_dispatch_function(dispatch):
    return TypeError(
        f"dispatch function {describe(dispatch)!r} must have explicit parameters "
        "(no *args/**kwargs): their names bind to kernel arguments"
    )
