"""Pick the hot paths: the compiled modules or their pure-Python twins.

The launch path (``core``) is picked once, at import: the compiled ``_core`` or its twin
``_core_py``. ``FASTDISPATCH_PURE_PYTHON=1`` (or ``true``/``yes``/``on``: the one rule of
:mod:`fastdispatch._env`) forces the twin, e.g. to debug or to compare. Without it the compiled
extension is used; if it cannot be imported (a source checkout that was never built, a platform
without a compiler) the twin takes over after one ``RuntimeWarning`` and one WARNING record on
the ``fastdispatch.backend`` logger -- slower, same behaviour. (Both, because the logger has only
a ``NullHandler`` unless the application configures logging; see :mod:`fastdispatch._log`.)

:func:`fast_launch` follows the same choice for native Triton launches: the compiled
``_fastlaunch`` where ``BACKEND`` is ``"cython"``, its twin ``_fastlaunch_py`` where it is
``"python"`` -- unless the caller names a backend -- and the twin, silently, when the compiled
module is missing. Both stand on the shared cold part, ``_fastlaunch_planner``.
"""

from ._env import env_flag
from ._log import get_logger, warn_both

logger = get_logger("backend")

if env_flag("FASTDISPATCH_PURE_PYTHON"):
    from . import _core_py as core

    BACKEND = "python"
else:
    try:
        from . import _core as core
    except ImportError as exc:
        _message = (
            f"fastdispatch: compiled extension unavailable ({exc}); using the pure-Python twin. "
            "Build it with `python setup.py build_ext --inplace` or `pip install .`."
        )
        # This module body runs once per process, so each is issued exactly once.
        warn_both(logger, _message, stacklevel=2)
        del _message
        from . import _core_py as core

        BACKEND = "python"
    else:
        BACKEND = "cython"

__all__ = ["BACKEND", "core", "fast_launch"]


def fast_launch(kernel, *, backend=None):
    """``kernel`` launched through fastdispatch's compiled launch path (opt-in, per kernel).

    Returns a :class:`FastLaunch` (the compiled one unless ``backend="python"``, or
    :data:`BACKEND` is ``"python"``: ``FASTDISPATCH_PURE_PYTHON=1``); ``fast_launch`` of one
    returns it unchanged. A plain ``JITFunction`` gets the fast path; any other subscriptable
    kernel (autotuned, heuristics-wrapped, interpreted, an override) a pass-through to
    ``kernel[grid](...)``. Anything else is refused with a ``TypeError`` naming it.
    """
    if backend not in (None, "cython", "python"):
        raise ValueError(f"fast_launch: backend must be 'cython' or 'python', not {backend!r}")
    from . import _fastlaunch_py

    cls = _fastlaunch_py.FastLaunch
    if (backend or BACKEND) == "cython":
        try:
            from . import _fastlaunch

            cls = _fastlaunch.FastLaunch
        except ImportError:
            pass
    if isinstance(kernel, cls):
        return kernel
    if not hasattr(type(kernel), "__getitem__"):
        raise TypeError(
            f"fast_launch: kernel must be a Triton kernel (launched as kernel[grid](...)), "
            f"got {type(kernel).__name__} {kernel!r}"
        )
    return cls(kernel)
