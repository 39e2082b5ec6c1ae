"""Pick the launch hot path: the compiled ``_core`` or its pure-Python twin ``_core_py``.

``FASTDISPATCH_PURE_PYTHON=1`` (any value but empty or ``0``) forces the twin, e.g. to debug or to
compare. Without it the compiled extension is used; if it cannot be imported (a source checkout
that was never built, a platform without a compiler) the twin takes over after one
``RuntimeWarning`` and one WARNING record on the ``fastdispatch.backend`` logger -- slower, same
behaviour. (Both, because the logger has only a ``NullHandler`` unless the application
configures logging; see :mod:`fastdispatch._log`.)
"""

import os
import warnings

from ._log import get_logger

logger = get_logger("backend")

if os.environ.get("FASTDISPATCH_PURE_PYTHON", "") not in ("", "0"):
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
        logger.warning("%s", _message)
        warnings.warn(_message, RuntimeWarning, stacklevel=2)
        del _message
        from . import _core_py as core

        BACKEND = "python"
    else:
        BACKEND = "cython"

__all__ = ["BACKEND", "core"]
