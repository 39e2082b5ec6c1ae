"""The ``fastdispatch`` stdlib logger family.

    import logging
    logging.basicConfig()
    logging.getLogger("fastdispatch").setLevel(logging.DEBUG)   # see every registration

Library convention: the package logger gets a ``NullHandler`` and no other handler, so the
application decides where records go and at what level (``logging.basicConfig``, vLLM's own
config, pytest's ``caplog``). Children name the part that speaks: ``fastdispatch.registry``
(registration at DEBUG, overwrites at WARNING), ``fastdispatch.backend`` (the fall back to the
pure-Python twin, at WARNING, once per process) and ``fastdispatch.vllm``.

The NullHandler also switches off :data:`logging.lastResort` for these records: with no logging
configured, nothing reaches stderr through logging. That is why an overwrite and the fall back
*also* issue a ``RuntimeWarning`` (vLLM's dispatcher module logs only): a warning is visible by
default, can be made an error with ``-W error`` or ``pytest.warns``, and is what callers of the
registry have been told to expect.
"""

import logging
import warnings

__all__ = ["LOGGER_NAME", "get_logger", "warn_both"]

#: The root of fastdispatch's loggers.
LOGGER_NAME = "fastdispatch"

logging.getLogger(LOGGER_NAME).addHandler(logging.NullHandler())


def get_logger(part):
    """The child logger ``fastdispatch.<part>``."""
    return logging.getLogger(f"{LOGGER_NAME}.{part}")


def warn_both(logger, message, stacklevel=1):
    """One WARNING record on ``logger`` and one ``RuntimeWarning`` with the same text (see the
    module for why both); ``stacklevel`` counts from the caller, as ``warnings.warn``'s does."""
    logger.warning("%s", message)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
