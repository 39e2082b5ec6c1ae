"""``fdkit._floor``: the measuring instruments behind the launch-overhead floor rows.

They are only worth their rows if they do exactly what their names say: ``NullLauncher`` calls the
impl with its stored arguments and nothing else (so its time is a floor, not a guess), and
``NullSink`` calls nothing. Compiled only: a floor has no pure-Python twin.
"""

import sys

import pytest

_floor = pytest.importorskip("fdkit._floor", reason="compiled extension required")


def test_null_launcher_calls_impl_with_stored_args_and_ignores_the_launch():
    seen = []

    def impl(*a, **k):
        seen.append((a, k))
        return "result"

    nl = _floor.NullLauncher(impl, (1, "two", None))
    assert nl[(4,)] is nl
    assert nl[(4,)](x_ptr=9, y=10) == "result"
    assert nl() == "result"
    assert nl.__call__(5, z=6) == "result"  # the Python-visible form does the same
    assert seen == [((1, "two", None), {})] * 3
    assert nl.impl is impl and nl.args == (1, "two", None)


def test_null_launcher_propagates_the_impl_exception():
    def impl(a):
        raise ValueError(f"boom {a}")

    with pytest.raises(ValueError, match="boom 3"):
        _floor.NullLauncher(impl, (3,))[None](a=1)


def test_null_launcher_with_no_args_and_many_args():
    assert _floor.NullLauncher(lambda: 7, ())[0]() == 7
    args = tuple(range(40))
    assert _floor.NullLauncher(lambda *a: sum(a), args)[0](k=1) == sum(args)


@pytest.mark.parametrize(
    ("impl", "args", "name"),
    [(None, (), "impl"), (1, (), "impl"), (print, [1], "args"), (print, None, "args")],
)
def test_null_launcher_refuses_bad_construction(impl, args, name):
    with pytest.raises(TypeError, match=f"^{name} must be"):
        _floor.NullLauncher(impl, args)


def test_null_launcher_refcounts_are_stable():
    val = object()

    def impl(a):
        return None

    nl = _floor.NullLauncher(impl, (val,))
    kw = {"a": val}
    before = (sys.getrefcount(val), sys.getrefcount(impl))
    for _ in range(100_000):
        nl[0](**kw)
    assert (sys.getrefcount(val), sys.getrefcount(impl)) == before


def test_null_sink_calls_nothing():
    ns = _floor.NullSink()
    assert ns[(4,)] is ns
    assert ns[(4,)](a=1, b=2) is None
    assert ns(1, 2) is None
    assert repr(ns) == "<NullSink>"
