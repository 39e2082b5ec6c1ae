"""Every integer and flag argument of every kernel, read by the one parser (``_checks.pxd``).

The arguments come from the contract table (``kernels_cpu.contracts``: kind ``int`` or
``flag``) and the valid launches from the case generators (``fdkit.cases``), so a kernel added
to the table is covered here without a line of this file changing. The rules are the
contract's: an int is a Python or numpy integer or a 0-d integer tensor -- not a bool, not a
float; a flag is a bool or 0/1, ``None`` for its default. A refused value raises naming the
argument (``<name>: expected an int, got float``) before anything is written.
"""

import numpy as np
import pytest
import torch

import kernels_cpu
from fdkit import cases
from kernels_cpu import contracts

_SCALARS = [
    (c.name, a.name, a.kind)
    for c in contracts.CONTRACTS
    if c.name in cases.KERNELS
    for a in c.args
    if a.kind in ("int", "flag")
]


def _valid_case(kernel, arg):
    """Build a valid launch of ``kernel`` that passes ``arg`` as a Python int or bool."""
    for seed in range(40):
        case = cases.make_case(kernel, seed, torch.int64)
        if case.memcpy is not None:
            return case
        kwargs, _ = case.build()
        if isinstance(kwargs.get(arg), (bool, int)):
            return case
    return None


def _launch(kernel, kwargs):
    getattr(kernels_cpu, kernel)(**kwargs)


def _same_launch(case, kernel, arg, forms):
    """Every accepted form of one value gives the launch the Python value gives."""
    results = []
    for form in forms:
        kwargs, compared = case.build()
        kwargs[arg] = form
        _launch(kernel, kwargs)
        results.append({n: t.clone() for n, t in compared.items()})
    for other in results[1:]:
        assert all(torch.equal(other[n], results[0][n]) for n in results[0]), (arg, forms)


def _snapshot(kwargs, compared):
    held = {name: t.clone() for name, t in compared.items()}
    held.update(
        {n: v.clone() for n, v in kwargs.items() if isinstance(v, torch.Tensor) and n not in held}
    )
    return held


@pytest.mark.parametrize(("kernel", "arg", "kind"), _SCALARS)
def test_refused_scalars_name_the_argument_and_write_nothing(kernel, arg, kind):
    case = _valid_case(kernel, arg)
    if case is None:
        pytest.fail(f"fdkit.cases makes no launch of {kernel} passing {arg} as an int")
    kwargs, compared = case.build()
    good = kwargs.get(arg)
    bad = (
        [(2.0, TypeError, "an int, got float"), (True, TypeError, "an int, got bool")]
        + [(np.float32(1), TypeError, "an int, got float32"), ("3", TypeError, "an int, got str")]
        + [(torch.tensor(1.0), TypeError, "an int, got a torch.float32 tensor")]
        + [(1 << 70, ValueError, "an int that fits in int64")]
        if kind == "int"
        else [("yes", TypeError, "a bool, got str"), (1.0, TypeError, "a bool, got float")]
        + [(2, ValueError, r"a bool \(or 0/1\), got 2")]
    )
    for value, error, message in bad:
        kwargs, compared = case.build()
        before = _snapshot(kwargs, compared)
        kwargs[arg] = value
        with pytest.raises(error, match=f"^{arg}: expected {message}"):
            _launch(kernel, kwargs)
        for name, old in before.items():
            now = compared.get(name, kwargs.get(name))
            assert torch.equal(now, old), f"{kernel}: {name} written by a refused {arg}={value!r}"
    if isinstance(good, bool) or kind == "flag":
        return
    # the accepted forms of a valid value give the same launch as the Python int
    _same_launch(case, kernel, arg, (good, np.int64(good), torch.tensor(good)))


@pytest.mark.parametrize(("kernel", "arg"), [(k, a) for k, a, kind in _SCALARS if kind == "flag"])
def test_flags_take_bools_and_0_1_alike(kernel, arg):
    case = _valid_case(kernel, arg)
    if case is None:
        pytest.skip(f"no generated launch of {kernel} sets {arg}")
    kwargs, _ = case.build()
    value = kwargs.get(arg)
    if value is None:
        pytest.skip(f"the generated launches of {kernel} leave {arg} to its default")
    flag = bool(value)
    _same_launch(case, kernel, arg, (flag, int(flag), np.bool_(flag), torch.tensor(flag)))
