"""The map from vLLM's Triton kernels to the kernels in this package, for every signature we know.

One table, :data:`VLLM_KERNELS`, derived from the contracts (``kernels_cpu.contracts``: a
contract's ``vllm`` names and ``serves``): per kernel, the qualified names vLLM has kept it under
(newest first) and the ``kernels_cpu`` functions that implement its known signatures. Which function
serves a release is decided by :func:`impl_for` from the argument names of the kernel standing
there -- compared with each function's own parameters, read from the function itself -- so a new
signature is supported by adding a function to the table, and a signature nobody implements
gets no implementation (the caller leaves that kernel to vLLM) instead of a wrong one.

Why per signature: vLLM 0.27-0.31's slot-mapping kernel takes 15 arguments (``block_size`` and
``BLOCKS_PER_KV_BLOCK`` for KV-cache blocks split into attention-kernel blocks), 0.32's takes 13;
an implementation of the one cannot bind the other's launch, and the two compute different slots
from the same table. Likewise the top-k/top-p kernel: 14 arguments in 0.27-0.29, 15 from 0.30
(``SPLIT_COVERS_PONLY``, for the split top-p kernels vLLM launches only on CUDA). The others
have one signature in every release that has them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple


class KernelEntry(NamedTuple):
    """One of vLLM's kernels: where vLLM has kept it, and our implementations of it."""

    #: Qualified names vLLM has kept the kernel under, newest first.
    names: tuple[str, ...]
    #: Names of the ``kernels_cpu`` functions implementing its signatures, newest first.
    impls: tuple[str, ...]


def _kernel_table(runner: str) -> dict[str, KernelEntry]:
    """The kernel table of one of vLLM's model runners (``"v1"``: :data:`VLLM_KERNELS`,
    ``"v2"``: :data:`MRV2_KERNELS`), read from the contract table (``kernels_cpu.contracts``):
    each contract with ``vllm`` names is a vLLM kernel (its newest signature), each with
    ``serves`` another signature of one, tried after it -- in the table's order."""
    from .contracts import CONTRACTS

    CONTRACTS = tuple(c for c in CONTRACTS if c.runner == runner)
    table: dict[str, KernelEntry] = {}
    for c in CONTRACTS:
        if c.vllm:
            table[c.name] = KernelEntry(c.vllm, (c.name,))
    for c in CONTRACTS:
        if c.serves:
            if c.serves not in table:
                raise ImportError(
                    f"kernels_cpu.contracts: {c.name} serves {c.serves!r}, which is no vLLM "
                    f"kernel of the table (no contract of that name with vllm names)"
                )
            entry = table[c.serves]
            table[c.serves] = entry._replace(impls=entry.impls + (c.name,))
        elif not c.vllm:
            raise ImportError(
                f"kernels_cpu.contracts: {c.name} names neither the vLLM kernel it implements "
                f"(vllm=) nor the one whose other signature it is (serves=)"
            )
    return table


#: vLLM kernel (its function name) -> where vLLM keeps it and what implements it here: the V1
#: runner's kernels, behind vLLM's dispatcher.
VLLM_KERNELS: dict[str, KernelEntry] = _kernel_table("v1")

#: The same for Model Runner V2's kernels (``vllm/v1/worker/gpu/``), launched directly by the
#: runner and rebound by ``fastdispatch.vllm``'s Model Runner V2 support.
MRV2_KERNELS: dict[str, KernelEntry] = _kernel_table("v2")

#: vLLM 0.32's qualified kernel name -> the implementing function in ``kernels_cpu`` (the
#: newest name and signature of every :data:`VLLM_KERNELS` entry).
VLLM_KERNEL_NAMES: dict[str, str] = {
    entry.names[0]: entry.impls[0] for entry in VLLM_KERNELS.values()
}


def vllm_overrides() -> dict[str, Callable[..., Any]]:
    """Return ``{vLLM 0.32 qualified name: kernels_cpu function}`` for every kernel of the
    table.

    The result is ready for ``register_kernels`` -- fastdispatch's or vLLM's own -- against
    vLLM 0.32's signatures; for another release pick per signature with :func:`impl_for`.
    """
    import kernels_cpu

    return {qualname: getattr(kernels_cpu, fn) for qualname, fn in VLLM_KERNEL_NAMES.items()}


def parameter_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of ``fn``'s positional parameters, in order."""
    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def impl_for(
    kernel: str, arg_names: Sequence[str], defines: Collection[str] | None = None
) -> Callable[..., Any] | None:
    """The ``kernels_cpu`` function implementing ``kernel`` (a :data:`VLLM_KERNELS` or
    :data:`MRV2_KERNELS` key) with exactly these argument names in this order, or None when
    none does.

    Exact names and order, not just a count: a launch binds by name, and two signatures of the
    same length could mean different things. ``defines``: the names the standing kernel's
    module defines, for the contracts with a ``module_rule`` (a signature two releases share
    with different semantics); ``None`` -- not known -- takes such a contract only when no
    other contract has the same arguments.
    """
    import kernels_cpu
    from kernels_cpu.contracts import contract

    wanted = tuple(arg_names)
    entry = VLLM_KERNELS.get(kernel) or MRV2_KERNELS[kernel]
    matches = [
        fn
        for fn in (getattr(kernels_cpu, name) for name in entry.impls)
        if parameter_names(fn) == wanted
    ]
    for fn in matches:
        rule = contract(fn.__name__).module_rule
        if rule is None:
            return fn
        if defines is None:
            if len(matches) == 1:
                return fn
            continue
        name, present = rule
        if (name in defines) == present:
            return fn
    return None
