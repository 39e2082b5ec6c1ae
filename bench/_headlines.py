"""Headline ratios: the figures the project's goals are stated in, read back from one run.

Each headline is a ratio of two rows of the *same group* (so measured interleaved, in one process),
printed next to the goal it speaks to. Nothing here passes or fails: a goal is context for the
number, and a headline whose rows were not measured in this run is simply absent.
"""

from __future__ import annotations

from .suites import kernels as K
from .suites import launch as L
from .suites import registration as R
from .suites import spec_decode as S
from .suites import vllm_entry as E


def _row(doc, gid, name):
    for g in doc["groups"]:
        if g["id"] == gid and g["status"] == "ok":
            for r in g["rows"]:
                if r["name"] == name and r["status"] == "ok":
                    return r
    return None


def _ratio(doc, gid, num, den):
    """median(num) / median(den) within group ``gid``, with both rows' noise flags."""
    a, b = _row(doc, gid, num), _row(doc, gid, den)
    if a is None or b is None or b["ns"]["median"] <= 0:
        return None
    return (
        a["ns"]["median"] / b["ns"]["median"],
        bool(a["noisy"] or b["noisy"]),
        a["ns"]["median"],
        b["ns"]["median"],
    )


def _threads_rows(doc):
    for g in doc["groups"]:
        if g["id"].startswith("threads/recovered_tokens") and g["status"] == "ok":
            n = g["params"].get("threads_all")
            return g["id"], n
    return None, None


def headlines(doc: dict) -> list:
    """``[{label, value, kind, goal, group, noisy, num, den, num_ns, den_ns}]``.

    ``value`` = median(num) / median(den); kind "x": shown as a ratio, "faster": shown as the
    speed-up of ``den`` (ours) over ``num`` (the baseline).
    """
    out = []

    def add(label, gid, num, den, goal, kind="faster"):
        got = _ratio(doc, gid, num, den)
        if got is None:
            return
        value, noisy, num_ns, den_ns = got
        out.append(
            {
                "label": label,
                "value": value,
                "kind": kind,
                "goal": goal,
                "group": gid,
                "noisy": noisy,
                "num": num,
                "den": den,
                "num_ns": num_ns,
                "den_ns": den_ns,
            }
        )

    ov, ch = "launch/override", "launch/owner_chain"
    add(
        "compiled override[grid](**kw) vs direct call",
        ov,
        "fastdispatch KernelOverride (compiled)",
        L.DIRECT,
        "≤ 2x",
        kind="x",
    )
    add(
        "floor (C launcher doing no binding work) vs direct call",
        ov,
        L.FLOOR,
        L.DIRECT,
        "context: no launcher can go below",
        kind="x",
    )
    add(
        "compiled override vs the floor",
        ov,
        "fastdispatch KernelOverride (compiled)",
        L.FLOOR,
        "context: our own share of a launch",
        kind="x",
    )
    add(
        "compiled override, keys built at run time, vs the floor",
        ov,
        L.RUNTIME_KEYS,
        L.FLOOR,
        "≤ 1.10x",
        kind="x",
    )
    add(
        "compiled override vs pure-Python twin",
        ov,
        "fastdispatch KernelOverride (pure-Python twin)",
        "fastdispatch KernelOverride (compiled)",
        "≥ 15x faster",
    )
    add(
        "compiled override vs vLLM KernelOverride",
        ov,
        "vLLM KernelOverride",
        "fastdispatch KernelOverride (compiled)",
        "≥ 15x faster",
    )
    add(
        "owner chain (compiled) vs direct call",
        ch,
        "fastdispatch owner chain (compiled)",
        L.DIRECT,
        "≤ 10x",
        kind="x",
    )
    add(
        "owner chain (compiled) vs its dispatch fn alone",
        ch,
        "fastdispatch owner chain (compiled)",
        L.DISPATCH_ONLY,
        "context: the dispatch fn is the caller's",
        kind="x",
    )
    add(
        "owner chain: ours (compiled) vs vLLM's",
        ch,
        "vLLM owner chain",
        "fastdispatch owner chain (compiled)",
        "faster",
    )
    add(
        "greedy kernel B4: kernels_cpu vs vLLM shim",
        "kernels/rejection_greedy_sample_kernel",
        K.VLLM,
        K.OURS,
        "≤ 2 µs per launch (anchor 23 µs)",
    )
    add(
        "expand kernel B4: kernels_cpu vs vLLM shim",
        "kernels/expand_kernel",
        K.VLLM,
        K.OURS,
        "≤ 2 µs per launch (anchor 12 µs)",
    )
    add(
        "batch_memcpy 64 regions × 4 KiB: kernels_cpu vs ctypes.memmove loop (vLLM shim)",
        "kernels/batch_memcpy_kernel",
        K.VLLM,
        K.OURS,
        "context: copy-bound (256 KiB moved; the 64 B row carries the ≥ 20x goal)",
    )
    add(
        "batch_memcpy 64 regions × 64 B: kernels_cpu vs ctypes.memmove loop (vLLM shim)",
        "kernels/batch_memcpy_kernel@64B",
        K.VLLM,
        K.OURS,
        "≥ 20x faster",
    )
    add(
        "vLLM _rejection_greedy_sample B4: install() vs stock",
        "vllm_entry/_rejection_greedy_sample@B4",
        E.STOCK,
        E.OURS,
        "≥ 10x faster",
    )
    add(
        "vLLM expand_batch_to_tokens int32: install() vs stock",
        "vllm_entry/expand_batch_to_tokens(int32)",
        E.STOCK,
        E.OURS,
        "≥ 4x faster",
    )
    add(
        "register_kernels, 11 names: ours vs vLLM's",
        "registration/register_kernels(11 names)",
        R.STOCK,
        R.OURS,
        "faster than ~125 ms",
    )
    for V in S.VOCABS:
        gid = f"spec_decode/random/B16-k4-V{V}"
        add(
            f"random step B16·k4·V{V}: install() vs stock",
            gid,
            S.STOCK,
            S.INSTALLED,
            "no slower (≥ 1x)",
        )
        add(
            f"random step B16·k4·V{V}: install(fused) vs stock",
            gid,
            S.STOCK,
            S.INSTALLED_FUSED,
            "≥ 5x faster" if V == 128256 else "faster",
        )
        add(
            f"random step B16·k4·V{V}: fused op vs memcpy of the logits",
            gid,
            S.FUSED,
            S.FLOOR,
            "≤ 1.5x the memcpy" if V == 128256 else "close to the memcpy",
            kind="x",
        )
    gid, n = _threads_rows(doc)
    if gid:
        add(
            f"recovered tokens B16·k4·V128256: {n} threads vs 1",
            gid,
            "kernels_cpu recovered tokens @1 thread",
            f"kernels_cpu recovered tokens @{n} threads",
            "≥ 1.7x faster",
        )
        add(
            f"recovered tokens B16·k4·V128256 @{n} threads vs memcpy of its probabilities",
            gid,
            f"kernels_cpu recovered tokens @{n} threads",
            f"memcpy of probs @{n} threads",
            "≤ 1.5x the memcpy",
            kind="x",
        )
    for kernel in ("rejection_greedy_sample_kernel", "expand_kernel"):
        gid = f"threads/tiny/{kernel}@B4"
        if n:
            add(
                f"{kernel} B4: {n} threads vs 1 (tiny launch)",
                gid,
                "kernels_cpu @1 thread",
                f"kernels_cpu @{n} threads",
                "no slower (≥ 1x)",
            )
    return out


def fmt(h: dict, medians: bool = True) -> str:
    from ._report import fmt_ns

    v = h["value"]
    text = f"{v:.2f}x faster" if h["kind"] == "faster" else f"{v:.2f}x"
    if h["kind"] == "faster" and v < 1:
        text = f"{1 / v:.2f}x SLOWER"
    if medians and "num_ns" in h:
        a, b = fmt_ns(h["num_ns"]), fmt_ns(h["den_ns"])
        text += f" ({b} vs {a})" if h["kind"] == "faster" else f" ({a} vs {b})"
    return text + (" (noisy)" if h["noisy"] else "")
