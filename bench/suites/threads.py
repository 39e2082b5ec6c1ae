"""Thread scaling: the same launch at 1 thread and at all threads, next to the memcpy floor.

The memory-bound case is recovered-token sampling at B16 · K4 · V128256 (it reads the ``[B·K, V]``
float32 probabilities, and vLLM's path the ``[B, V]`` ``inv_q`` too); the floor is a memcpy of the
probability bytes at the same thread count, measured in the same run. Tiny launches (greedy and
expand at batch 4) show that a parallel region is not paid where it does not pay off.

A row's thread count is a *state* switched between samples: ``torch.set_num_threads`` and
``kernels_cpu.set_num_threads`` together (the memcpy is torch's ``copy_``, which follows torch's
count). All threads = ``torch.get_num_threads()`` at start-up. Anchor: the 1-thread row of the
first implementation; ``vs floor`` = ratio to the memcpy at the same thread count.
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec, need
from .._rows import RowDef
from .._timing import Case
from . import _presets
from .kernels import kernels_cpu_fn


def _all_threads() -> int:
    """torch's default thread count at start-up (before any ``--threads``)."""
    import os

    import torch

    return max(1, int(os.environ.get("FASTDISPATCH_BENCH_ALL_THREADS") or torch.get_num_threads()))


class _Threads:
    """State switch: ``"t1"`` -> 1 thread, ``"tN"`` -> all threads (torch and kernels_cpu)."""

    def __init__(self, n_all: int):
        import torch

        self.n_all = n_all
        self.torch_start = torch.get_num_threads()
        try:
            self.kc = importlib.import_module("kernels_cpu")
        except Exception:
            self.kc = None

    def switch(self, state):
        import torch

        if state is None:
            return
        n = 1 if state == "t1" else self.n_all
        torch.set_num_threads(n)
        if self.kc is not None:
            self.kc.set_num_threads(n)

    def restore(self):
        import os

        import torch

        torch.set_num_threads(self.torch_start)
        if self.kc is not None:  # back to the run's setting: a --threads pin, else follow torch
            pinned = os.environ.get("FASTDISPATCH_BENCH_THREADS")
            self.kc.set_num_threads(int(pinned) if pinned else None)


def _fused_recovered(B, K, V):
    return need("fastdispatch.ops.fused", "sample_recovered_tokens_fused")


def _memory_bound_builder(B, K, V):
    def build(ctx) -> Built:
        n = _all_threads()
        thr = _Threads(n)
        args, kw, keep = _presets.build("sample_recovered_tokens_kernel", B=B, K=K, V=V)
        probs = kw["target_probs_ptr"]
        dst = probs.clone()
        b = Built(
            info={
                "threads_all": n,
                "bytes_probs": probs.numel() * 4,
                "bytes_inv_q": kw["inv_q_ptr"].numel() * 4,
            },
            switch=thr.switch,
            state_order=("t1", "tN"),
            cleanup=thr.restore,
        )
        for state, tag in (("t1", "1 thread"), ("tN", f"{n} threads")):
            b.add(
                f"memcpy of probs @{tag}",
                lambda s=state: Case(
                    "",
                    stmt="dst.copy_(src)",
                    namespace={"dst": dst, "src": probs},
                    state=s,
                    meta={"bytes": probs.numel() * 4},
                ),
            )
        for state, tag in (("t1", "1 thread"), ("tN", f"{n} threads")):

            def ours(s=state):
                fn = kernels_cpu_fn("sample_recovered_tokens_kernel")
                return Case("", stmt="fn(*a)", namespace={"fn": fn, "a": args}, state=s)

            b.add(f"kernels_cpu recovered tokens @{tag}", ours)
        for state, tag in (("t1", "1 thread"), ("tN", f"{n} threads")):

            def fused(s=state):
                fn = _fused_recovered(B, K, V)
                call = (kw["cu_num_draft_tokens_ptr"], kw["draft_token_ids_ptr"], probs)
                return Case(
                    "",
                    stmt="fn(*a)",
                    namespace={"fn": fn, "a": call},
                    state=s,
                    meta={"note": "draws its own noise: no inv_q read"},
                )

            b.add(f"fused recovered tokens @{tag}", fused)
        return b

    return build


def _tiny_builder(kernel):
    def build(ctx) -> Built:
        n = _all_threads()
        thr = _Threads(n)
        args, kw, keep = _presets.build(kernel, B=4)
        b = Built(
            info={"threads_all": n},
            switch=thr.switch,
            state_order=("t1", "tN"),
            cleanup=thr.restore,
        )
        for state, tag in (("t1", "1 thread"), ("tN", f"{n} threads")):

            def ours(s=state):
                fn = kernels_cpu_fn(kernel)
                return Case("", stmt="fn(*a)", namespace={"fn": fn, "a": args}, state=s)

            b.add(f"kernels_cpu @{tag}", ours)
        return b

    return build


def groups(ctx):
    n = _all_threads()
    tN = f"{n} threads"
    B, K, V = 16, 4, 128256
    specs = [
        GroupSpec(
            id=f"threads/recovered_tokens/B{B}-k{K}-V{V}",
            suite="threads",
            title=f"recovered tokens B={B}, {K} drafts, V={V}: 1 vs {n} threads, memcpy floor",
            rows=(
                RowDef("kernels_cpu@t1", "kernels_cpu recovered tokens @1 thread"),
                RowDef("kernels_cpu@tN", f"kernels_cpu recovered tokens @{tN}"),
                RowDef("fused@t1", "fused recovered tokens @1 thread"),
                RowDef("fused@tN", f"fused recovered tokens @{tN}"),
                RowDef("memcpy@t1", "memcpy of probs @1 thread"),
                RowDef("memcpy@tN", f"memcpy of probs @{tN}"),
            ),
            anchor=(
                "kernels_cpu recovered tokens @1 thread",
                "fused recovered tokens @1 thread",
                "memcpy of probs @1 thread",
            ),
            vs={f"floor@{n}": f"memcpy of probs @{tN}"},
            build=_memory_bound_builder(B, K, V),
            params={"B": B, "k": K, "V": V, "threads_all": n},
        )
    ]
    for kernel in ("rejection_greedy_sample_kernel", "expand_kernel"):
        specs.append(
            GroupSpec(
                id=f"threads/tiny/{kernel}@B4",
                suite="threads",
                title=(
                    f"{kernel} at batch 4: 1 vs {n} threads "
                    "(a tiny launch must not pay for threads)"
                ),
                rows=(
                    RowDef("kernels_cpu@t1", "kernels_cpu @1 thread"),
                    RowDef("kernels_cpu@tN", f"kernels_cpu @{tN}"),
                ),
                anchor=("kernels_cpu @1 thread",),
                build=_tiny_builder(kernel),
                params={"kernel": kernel, "B": 4, "threads_all": n},
            )
        )
    return specs
