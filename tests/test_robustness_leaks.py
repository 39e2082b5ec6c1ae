"""Leak checks: many launches keep memory flat and leave every reference count where it was.

Each check warms up, takes a baseline (resident set size from ``/proc/self/statm``, the
interpreter's allocated block count, ``sys.getrefcount`` of every argument, the impl, the
kernel and the override), launches ``n`` times, collects garbage and compares. A leak of one
object or one malloc per launch would grow the resident set by megabytes over these counts;
the bounds leave room only for allocator noise.

Counts: the compiled override's main path runs 10**7 launches in every profile (about 2 s at
~200 ns each); its other paths run 10**6 (10**7 under ``FASTDISPATCH_FUZZ=deep``); every
``kernels_cpu`` kernel runs 10**5 valid launches (half with int32, half with int64 index buffers;
10**5 each under deep) and 10**4 rejected ones (10**5 under deep); the fused whole-step entry
points run 2 * 10**4 launches per index dtype (10**5 under deep).
"""

import ctypes
import gc
import os
import sys

import pytest
import torch
from _fuzz import DEEP
from _robustness_helpers import FUSED_ENTRIES, fused_launches, shared_inputs

import fdkit.cases as fdcases
import kernels_cpu
from fastdispatch import _core

if not os.path.exists("/proc/self/statm"):
    pytest.skip("resident set size is read from /proc/self/statm (Linux)", allow_module_level=True)

PAGE = os.sysconf("SC_PAGE_SIZE")
RSS_BOUND = 1 << 20  # bytes of growth allowed after warm-up
BLOCKS_BOUND = 200  # interpreter blocks allowed after warm-up
WARMUP = 20_000

OVERRIDE_MAIN = 10**7
OVERRIDE_OTHER = 10**7 if DEEP else 10**6
KERNEL_VALID_PER_DTYPE = 10**5 if DEEP else 10**5 // 2
KERNEL_REJECTED = 10**5 if DEEP else 10**4
FUSED_LAUNCHES = 10**5 if DEEP else 2 * 10**4


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def _check_flat(run, n, watched, label):
    """``run(k)`` launches k times. Returns the growth figures after asserting them."""
    run(WARMUP)
    gc.collect()
    refs_before = [sys.getrefcount(o) for o in watched]
    blocks_before = sys.getallocatedblocks()
    rss_before = _rss()
    run(n)
    gc.collect()
    rss_growth = _rss() - rss_before
    block_growth = sys.getallocatedblocks() - blocks_before
    refs_after = [sys.getrefcount(o) for o in watched]
    print(f"\n{label}: {n} launches, RSS {rss_growth:+d} B, blocks {block_growth:+d}")
    changed = [
        (i, type(o).__name__, b, a)
        for i, (o, b, a) in enumerate(zip(watched, refs_before, refs_after))
        if a != b
    ]
    assert not changed, f"{label}: reference counts changed (index, type, before, after): {changed}"
    assert block_growth < BLOCKS_BOUND, f"{label}: {block_growth} interpreter blocks leaked"
    assert rss_growth < RSS_BOUND, f"{label}: RSS grew by {rss_growth} bytes over {n} launches"


# ------------------------------------------------------------------------------------------
# The check itself sees leaks
# ------------------------------------------------------------------------------------------


def test_check_detects_a_leaked_object_per_launch():
    kept = []
    ov = _core.KernelOverride(_kernel, lambda *a: kept.append(object()))
    args = _args()

    def run(k):
        for _ in range(k):
            ov(*args)

    with pytest.raises(AssertionError, match="leaked|RSS grew"):
        _check_flat(run, 10**5, [*args, ov], "leaky impl")


def test_check_detects_a_leaked_reference_per_launch():
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]
    args = _args()
    ov = _core.KernelOverride(_kernel, lambda o, *rest: incref(o))
    leaked = []

    def run(k):
        leaked.append(k)
        for _ in range(k):
            ov(*args)

    with pytest.raises(AssertionError, match="reference counts changed"):
        _check_flat(run, 1000, [*args, ov], "over-referencing impl")
    # Give the extra references back so the tensor can be freed.
    for _ in range(sum(leaked)):
        ctypes.pythonapi.Py_DecRef(ctypes.py_object(args[0]))


# ------------------------------------------------------------------------------------------
# The compiled override and launch owner
# ------------------------------------------------------------------------------------------


def _kernel(out_ptr, in_ptr, cu_ptr, num_tokens, vocab_size, BLOCK_SIZE):
    raise AssertionError("the original kernel must never run")


def _impl_named(out_ptr, in_ptr, cu_ptr, num_tokens, vocab_size, BLOCK_SIZE):
    return None


def _impl_positional(o, i, c, n, v, b):
    return None


class _ImplError(Exception):
    pass


def _impl_raises(out_ptr, in_ptr, cu_ptr, num_tokens, vocab_size, BLOCK_SIZE):
    raise _ImplError


def _args():
    # Values that are not interned or immortal, so a lost or extra reference shows.
    return (
        torch.empty(8),
        torch.empty(4),
        torch.arange(1, 5, dtype=torch.int32),
        4000 * 4000,
        32000 * 7,
        1024 * 1024,
    )


NAMES = ("out_ptr", "in_ptr", "cu_ptr", "num_tokens", "vocab_size", "BLOCK_SIZE")


@pytest.mark.parametrize("forward", ["by_name", "positional"])
def test_override_launches_keep_memory_flat(forward):
    impl = _impl_named if forward == "by_name" else _impl_positional
    ov = _core.KernelOverride(_kernel, impl)
    assert ov._forward_by_name == (forward == "by_name")
    args = _args()
    kw = dict(zip(NAMES, args))
    grid = (4,)

    def run(k):
        for _ in range(k):
            ov[grid](**kw)

    n = OVERRIDE_MAIN if forward == "by_name" else OVERRIDE_OTHER
    _check_flat(run, n, [*args, kw, grid, ov, impl, _kernel], f"override[grid](**kw) {forward}")


def test_override_passthrough_and_launch_options_keep_memory_flat():
    ov = _core.KernelOverride(_kernel, _impl_named)
    args = _args()
    kw = dict(zip(NAMES, args), num_warps=4, num_stages=2)  # options: dropped
    grid = (4,)

    def run(k):
        for _ in range(k // 2):
            ov(*args)
            ov[grid](**kw)

    _check_flat(run, OVERRIDE_OTHER, [*args, kw, grid, ov], "override(*args) + launch options")


def test_override_error_paths_keep_memory_flat():
    """Rejected launches (unknown argument) and impls that raise: exception paths free too."""
    ov = _core.KernelOverride(_kernel, _impl_named)
    bad = _core.KernelOverride(_kernel, _impl_raises)
    args = _args()
    unknown = dict(zip(NAMES, args), not_an_argument=args[0])
    kw = dict(zip(NAMES, args))
    grid = (4,)

    def run(k):
        for _ in range(k // 2):
            try:
                ov[grid](**unknown)
            except TypeError:
                pass
            else:
                raise AssertionError("unknown launch argument accepted")
            try:
                bad[grid](**kw)
            except _ImplError:
                pass

    _check_flat(
        run, OVERRIDE_OTHER // 10, [*args, unknown, kw, grid, ov, bad], "override error paths"
    )


def test_launch_owner_chain_keeps_memory_flat():
    args = _args()

    def dispatch(out_ptr, in_ptr, cu_ptr, num_tokens, vocab_size, BLOCK_SIZE):
        return (4,), {
            "out_ptr": out_ptr,
            "in_ptr": in_ptr,
            "cu_ptr": cu_ptr,
            "num_tokens": num_tokens,
            "vocab_size": vocab_size,
            "BLOCK_SIZE": BLOCK_SIZE,
        }

    owner = _core.kernel_dispatcher(kernel=_core.KernelOverride(_kernel, _impl_positional))(
        dispatch
    )

    def run(k):
        for _ in range(k):
            owner(*args)

    _check_flat(run, OVERRIDE_OTHER, [*args, owner, dispatch], "launch owner chain")


# ------------------------------------------------------------------------------------------
# kernels_cpu
# ------------------------------------------------------------------------------------------


def _case(name, idx):
    for seed in range(500):  # a launch of several programs
        case = fdcases.make_case(name, seed, idx)
        if case.grid and max(case.grid) >= 2:
            return case
    raise AssertionError(f"fdkit.cases makes no launch of {name} with 2 programs")


@pytest.mark.parametrize("idx", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("name", fdcases.KERNELS)
def test_kernel_launches_keep_memory_flat(name, idx):
    impl = getattr(kernels_cpu, name)
    built = _case(name, idx).build()  # keeps the memcpy arena alive with its addresses
    kw = built[0]
    tensors = [v for v in kw.values() if isinstance(v, torch.Tensor)]

    def run(k):
        for _ in range(k):
            impl(**kw)

    _check_flat(run, KERNEL_VALID_PER_DTYPE, [*tensors, kw, impl], f"{name} {idx}")


@pytest.mark.parametrize("name", fdcases.KERNELS)
def test_rejected_kernel_launches_keep_memory_flat(name):
    """Validation failures raise after acquiring buffers: nothing may stay behind."""
    impl = getattr(kernels_cpu, name)
    built = _case(name, torch.int64).build()
    kw = built[0]
    from kernels_cpu import contracts

    # the first tensor argument whose contract names its dtypes (none takes complex; a state
    # copied as bytes, scatter_states' ``state_ptr``, takes any dtype and is skipped)
    typed = {a.name for a in contracts.contract(name).args if a.dtypes and "any" not in a.dtypes}
    first = next(k for k, v in kw.items() if isinstance(v, torch.Tensor) and k in typed)
    kw[first] = torch.zeros(kw[first].shape, dtype=torch.complex64)
    tensors = [v for v in kw.values() if isinstance(v, torch.Tensor)]
    with pytest.raises((TypeError, ValueError)) as info:
        impl(**kw)
    assert first in str(info.value), f"{name}: the error does not name {first!r}: {info.value}"

    def run(k):
        for _ in range(k):
            try:
                impl(**kw)
            except (TypeError, ValueError):
                pass

    _check_flat(run, KERNEL_REJECTED, [*tensors, kw, impl], f"{name} rejected")


@pytest.mark.parametrize("idx", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("entry", FUSED_ENTRIES)
def test_fused_entry_points_keep_memory_flat(entry, idx):
    """The fused whole-step entry points allocate per-launch scratch (malloc/free): none stays."""
    label, new_output, launch = next(x for x in fused_launches(idx) if x[0] == entry)
    out = new_output()

    def run(k):
        for _ in range(k):
            launch(out)

    _check_flat(run, FUSED_LAUNCHES, [*shared_inputs(launch), out, launch], f"{label} {idx}")
