"""The benchmark's groups, one module per suite, in display order.

Each suite module has ``groups(ctx) -> list[GroupSpec]``. Declaring a group must be cheap and
must not depend on what is importable (ids and row names are the same in every interpreter, so the
main process and a vLLM worker agree on them); missing dependencies surface when a group is
*built*, as rows marked unavailable with the reason.
"""

from __future__ import annotations

import importlib

SUITES = (
    "launch",
    "kernels",
    "vllm_entry",
    "spec_decode",
    "fused",
    "step",
    "topk_topp",
    "states",
    "threads",
    "registration",
    "engine",
)


def all_groups(ctx):
    specs = []
    for name in SUITES:
        mod = importlib.import_module(f"{__name__}.{name}")
        specs.extend(mod.groups(ctx))
    return specs
