"""Case builders and memory checks for the sampling-kernel tests.

Every tensor argument of a launch lives in the middle of a larger flat allocation whose edges
(``fdkit.guards.GUARD`` elements each side) hold the poison of ``fdkit.guards``; outputs are
poisoned inside too. A launch is judged on whole allocations: the kernel's run and the
reference's run (on a clone) must leave bit-identical allocations, which checks the outputs, that
inputs were not written, and that nothing outside the views changed; the guards must still hold
their poison.
"""

import torch
from _spec_helpers import threads  # noqa: F401 -- one thread-count switch for every kernel test

from fdkit import guards
from fdkit.guards import bits as _bits


def guarded(values, dtype=None):
    """A contiguous view, holding ``values``, into a poisoned allocation with guards."""
    if not isinstance(values, torch.Tensor):
        values = torch.as_tensor(values, dtype=dtype)  # no float32 detour for float64 values
    return guards.guarded(values, dtype)[1]


def poisoned(shape, dtype):
    """An output buffer: a guarded view filled entirely with the poison value."""
    return guards.guarded(tuple(shape), dtype)[1]


def _root(view):
    return view._base if view._base is not None else view


def clone_guarded(view):
    base = _root(view).clone()
    return base.as_strided(view.shape, view.stride(), view.storage_offset())


def clone_case(case):
    return {k: clone_guarded(v) if isinstance(v, torch.Tensor) else v for k, v in case.items()}


def allocations(case):
    return {
        k: _bits(_root(v)).clone()
        for k, v in case.items()
        if isinstance(v, torch.Tensor) and not v.is_meta
    }


def guards_intact(view):
    """Every element of ``view``'s allocation outside it still holds the poison."""
    return guards.guards_intact(_root(view), view)


def assert_same_allocations(case_a, case_b):
    """Both cases' allocations are bit-identical and every guard still holds its poison."""
    a, b = allocations(case_a), allocations(case_b)
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs:\n{_root(case_a[k])}\n{_root(case_b[k])}"
        guards.check_guards(_root(case_a[k]), case_a[k], name=k)


def run_both(kernel, reference, case):
    """Launch ``kernel`` on ``case`` and ``reference`` on a clone; return both cases."""
    ref_case = clone_case(case)
    kernel(**case)
    reference(**ref_case)
    return case, ref_case


def cu_from_counts(counts, dtype):
    total, cu = 0, []
    for c in counts:
        total += c
        cu.append(total)
    return guarded(torch.tensor(cu, dtype=torch.int64).reshape(len(counts)), dtype)


def peak_sweep(V, seed, ps=(0.5, 0.9, 0.999), lifts=tuple(6.0 + 0.5 * i for i in range(30))):
    """Rows of ``V`` standard normal logits, each with one value lifted to ``4 + lift`` at a
    random column, and the top-p ``p`` of each: every lift at every ``p`` -- a peak swept across
    the point where it alone holds p of the row's mass (about lift 10 at V = 20000)."""
    g = torch.Generator().manual_seed(seed)
    rows, ps_out = [], []
    for p in ps:
        for lift in lifts:
            x = torch.randn(V, generator=g)
            x[int(torch.randint(0, V, (1,), generator=g))] = lift + 4.0
            rows.append(x)
            ps_out.append(p)
    return rows, ps_out
