"""Shared machinery for the spec-decode and worker kernel tests.

Every tensor argument of a test launch is a ``Guarded`` buffer (``fdkit.guards.Guarded``: the
one guard/poison scheme): a larger allocation filled with the poison, of which the kernel sees
only a middle slice (2-D: guard rows above and below, optional extra columns). After a launch the
whole allocation is compared -- so a write outside the slice (or to an input) shows up as a
mismatch -- and the guard regions must still hold the poison. A case is a dict of launch
arguments; ``clone_case`` gives an independent copy so the kernel and the reference run on
identical inputs.
"""

import contextlib

import torch

import kernels_cpu
from fdkit.guards import Guarded


def clone_case(case):
    return {k: (v.clone() if isinstance(v, Guarded) else v) for k, v in case.items()}


def launch_args(case):
    """The launch's keyword arguments: guarded buffers become their views."""
    return {k: (v.view if isinstance(v, Guarded) else v) for k, v in case.items()}


def bases(case):
    return {k: v.base for k, v in case.items() if isinstance(v, Guarded)}


def assert_same_buffers(got, want):
    """Every guarded allocation of ``got`` equals ``want`` bit for bit (guards included)."""
    for k, g in got.items():
        if isinstance(g, Guarded):
            w = want[k]
            assert g.base.dtype == w.base.dtype
            assert torch.equal(g.base, w.base), f"{k}: got {g.view} want {w.view}"
            g.check_guards(name=k)


def run_both(kernel, reference, case, positional=False):
    """Run ``kernel`` and ``reference`` on identical copies of ``case``; return both copies."""
    mine, ref = clone_case(case), clone_case(case)
    if positional:
        kernel(*launch_args(mine).values())
    else:
        kernel(**launch_args(mine))
    reference(**launch_args(ref))
    return mine, ref


def assert_rejected(kernel, case, exc, name):
    """The launch raises ``exc`` whose message names ``name``, and writes nothing at all."""
    before = {k: b.clone() for k, b in bases(case).items()}
    try:
        kernel(**launch_args(case))
    except exc as e:
        assert name in str(e), f"expected {name!r} in message {str(e)!r}"
    else:
        raise AssertionError(f"{kernel.__name__} accepted bad {name}")
    for k, b in bases(case).items():
        assert torch.equal(b, before[k]), f"{k} was written before {exc.__name__}({name})"


@contextlib.contextmanager
def threads(n, threshold=0):
    """Run with ``n`` kernel threads and a given parallel threshold (0: everything parallel)."""
    old = kernels_cpu.parallel_threshold()
    kernels_cpu.set_num_threads(n)
    kernels_cpu.set_parallel_threshold(threshold)
    try:
        yield
    finally:
        kernels_cpu.set_num_threads(None)
        kernels_cpu.set_parallel_threshold(old)


INDEX_DTYPES = (torch.int32, torch.int64)


def set_arg(key, value):
    """A mutation of a bad-input case: replace an argument (a tensor given as a callable of the
    case, or a scalar)."""

    def mutate(case):
        case[key] = value(case) if callable(value) else value

    return mutate


def poke(key, index, value):
    """A mutation of a bad-input case: write one value into a guarded input's view."""

    def mutate(case):
        case[key].view.view(-1)[index] = value

    return mutate


def bad_arg(key, value, exc):
    """A bad-input row ``(mutation, exception, argument named)`` replacing argument ``key``,
    which the exception must name."""
    return set_arg(key, value), exc, key


def bad_at(key, index, value, exc):
    """A bad-input row writing one value of input ``key``, which the exception must name."""
    return poke(key, index, value), exc, key


def check_bad_input(kernel, make, mutate, exc, name):
    """The case ``make()`` launches (it is valid); mutated by ``mutate``, the launch raises
    ``exc`` naming ``name`` and writes nothing."""
    kernel(**launch_args(make()))
    case = make()
    mutate(case)
    assert_rejected(kernel, case, exc, name)


#: The context-parallel arguments of a slot-mapping launch without context parallelism.
ONE_CP_RANK = dict(TOTAL_CP_WORLD_SIZE=1, TOTAL_CP_RANK=0, CP_KV_CACHE_INTERLEAVE_SIZE=1)


def slot_mapping_case(kernel, positions, table, columns, **args):
    """A hand-checked launch of the slot-mapping ``kernel`` (``compute_slot_mapping_kernel`` or
    its hybrid form), in its contract's argument order: two requests (1 and 3 tokens at
    ``positions``, 6 slots, the last two padding) over a 2-row block table of ``columns``
    columns holding ``table``, KV-cache blocks of 4 tokens, one context-parallel rank; ``args``
    adds or replaces arguments."""
    from kernels_cpu.contracts import contract

    case = dict(
        num_tokens=4,
        max_num_tokens=6,
        query_start_loc_ptr=Guarded((3,), torch.int32, [0, 1, 4]),
        positions_ptr=Guarded((4,), torch.int64, positions),
        block_table_ptr=Guarded((2, columns), torch.int32, table),
        block_table_stride=columns,
        slot_mapping_ptr=Guarded((6,), torch.int64),
        KV_CACHE_BLOCK_SIZE=4,
        PAD_ID=-1,
        BLOCK_SIZE=1024,
        **ONE_CP_RANK,
    )
    case.update(args)
    return {a.name: case[a.name] for a in contract(kernel).args if a.name in case}
