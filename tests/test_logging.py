"""The ``fastdispatch`` logger family: what is logged, at which level, and how often.

* the package logger carries a ``NullHandler`` (the library convention) and nothing else;
* a registration is a DEBUG record on ``fastdispatch.registry`` (name, impl, forward mode), a
  removal too; overwriting a registered name is one WARNING record *and* one ``RuntimeWarning``;
  a refused registration (nothing changed) and a scoped override log no warning;
* the fall back to the pure-Python twin is one WARNING on ``fastdispatch.backend`` per process,
  however often the package is imported (fresh interpreter with the extension blocked);
* with logging left unconfigured, an overwrite reaches stderr once (the warning), not twice;
* no ``print`` in library code.
"""

import ast
import logging
import re
from pathlib import Path

import pytest
from _runtime_helpers import BLOCKER, ROOT, run_python

import fastdispatch

EXPAND = "fakepkg_rt.kernels.expand_kernel"
COPY = "fakepkg_rt.kernels.copy_kernel"


def expand_impl(out, inp, cu, rf, rt, max_tokens):  # names differ: positional forwarding
    pass


def other_expand_impl(out, inp, cu, rf, rt, max_tokens):
    pass


def copy_impl(src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE=128):  # the kernel's names
    pass


def records(caplog, logger, level):
    return [r for r in caplog.records if r.name == logger and r.levelno == level]


def test_package_logger_has_only_a_null_handler():
    logger = logging.getLogger("fastdispatch")
    assert [type(h) for h in logger.handlers] == [logging.NullHandler]
    assert logger.propagate  # the application's handlers see every record
    assert logging.getLogger("fastdispatch.registry").parent is logger


def test_registration_and_removal_are_debug_records(clean_registry, caplog):
    caplog.set_level(logging.DEBUG, logger="fastdispatch")
    fastdispatch.register_kernels({EXPAND: expand_impl, COPY: copy_impl})
    debug = [r.getMessage() for r in records(caplog, "fastdispatch.registry", logging.DEBUG)]
    assert debug == [
        f"Registered kernel override {EXPAND} -> test_logging.expand_impl (positional)",
        f"Registered kernel override {COPY} -> test_logging.copy_impl (by name)",
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    caplog.clear()
    fastdispatch.unregister_kernels([EXPAND])
    assert [r.getMessage() for r in records(caplog, "fastdispatch.registry", logging.DEBUG)] == [
        f"Unregistered kernel override {EXPAND} (original restored)"
    ]


def test_nothing_logged_at_info_and_above_for_a_plain_registration(clean_registry, caplog):
    caplog.set_level(logging.INFO, logger="fastdispatch")
    fastdispatch.register_kernels({EXPAND: expand_impl})
    fastdispatch.unregister_kernels()
    assert caplog.records == []


def test_overwrite_is_one_warning_record_and_one_runtime_warning(clean_registry, caplog):
    caplog.set_level(logging.DEBUG, logger="fastdispatch")
    fastdispatch.register_kernels({EXPAND: expand_impl})
    caplog.clear()
    with pytest.warns(RuntimeWarning, match="already registered. Overwriting.") as caught:
        fastdispatch.register_kernels({EXPAND: other_expand_impl})
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert caught[0].filename == __file__  # attributed to the caller of register_kernels
    warning = records(caplog, "fastdispatch.registry", logging.WARNING)
    assert [r.getMessage() for r in warning] == [
        f"Kernel {EXPAND} is already registered. Overwriting."
    ]
    assert [r.getMessage() for r in records(caplog, "fastdispatch.registry", logging.DEBUG)] == [
        f"Registered kernel override {EXPAND} -> test_logging.other_expand_impl (positional)"
    ]


def test_refused_overwrite_logs_no_overwrite(clean_registry, caplog, recwarn):
    fastdispatch.register_kernels({EXPAND: expand_impl})
    caplog.set_level(logging.DEBUG, logger="fastdispatch")

    def too_few(a, b):  # cannot take the kernel's launch arguments: refused, nothing changes
        pass

    with pytest.raises(TypeError):
        fastdispatch.register_kernels({EXPAND: too_few})
    assert caplog.records == []
    assert not [w for w in recwarn if "Overwriting" in str(w.message)]
    assert fastdispatch._registry[EXPAND].impl is expand_impl


def test_scoped_override_logs_no_warning(clean_registry, caplog, recwarn):
    fastdispatch.register_kernels({EXPAND: expand_impl})
    caplog.set_level(logging.DEBUG, logger="fastdispatch")
    with fastdispatch.overrides({EXPAND: other_expand_impl}):
        pass
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in caplog.records] == [
        f"Registered kernel override {EXPAND} -> test_logging.other_expand_impl (positional)",
        f"Kernel override {EXPAND}: previous override restored",
    ]
    assert not list(recwarn)


def test_fallback_to_the_twin_logs_one_warning_per_process():
    run_python(
        BLOCKER
        + """
block("fastdispatch._core")
import logging, warnings

class Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []
    def emit(self, record):
        self.records.append(record)

keep = Keep()
logging.getLogger().addHandler(keep)
logging.getLogger().setLevel(logging.DEBUG)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fastdispatch
    import fastdispatch._backend, fastdispatch._registration, fastdispatch._cli
    import importlib
    importlib.import_module("fastdispatch")
    from fastdispatch import register_kernels
assert fastdispatch.BACKEND == "python"
mine = [r for r in keep.records if r.name.startswith("fastdispatch")]
assert [(r.name, r.levelname) for r in mine] == [("fastdispatch.backend", "WARNING")], mine
assert "pure-Python twin" in mine[0].getMessage()
assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
"""
    )


def test_unconfigured_logging_reports_an_overwrite_once_on_stderr():
    """The NullHandler keeps logging's last-resort handler quiet; the warning is the one line."""
    proc = run_python("""
        import fastdispatch
        def impl(a, b, c, d, e, f): pass
        fastdispatch.register_kernels({"fakepkg_rt.kernels.expand_kernel": impl})
        fastdispatch.register_kernels({"fakepkg_rt.kernels.expand_kernel": impl})
    """)
    assert proc.stderr.count("already registered. Overwriting.") == 1, proc.stderr
    assert "RuntimeWarning" in proc.stderr


LIBRARY = [Path(ROOT) / "fastdispatch", Path(ROOT) / "kernels_cpu"]


def _python_prints(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]


_CYTHON_PRINT = re.compile(r"^[^#'\"]*\bprint\s*\(")


def test_no_prints_in_library_code():
    found = []
    for root in LIBRARY:
        for path in sorted(root.rglob("*.py")):
            found += [f"{path.relative_to(ROOT)}:{line}" for line in _python_prints(path)]
        for path in sorted(list(root.rglob("*.pyx")) + list(root.rglob("*.pxd"))):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _CYTHON_PRINT.match(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}")
    assert found == []
