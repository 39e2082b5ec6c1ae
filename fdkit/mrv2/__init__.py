"""Random launch cases for Model Runner V2's kernels (``kernels_cpu.MRV2_KERNELS``).

One module per family, as the contracts are (``kernels_cpu._contracts_mrv2``), each with
``CASES = {contract name: case(rng, idx, scale)}`` returning an :class:`fdkit._case.Case` whose
``grid`` is the grid vLLM launches that shape with. The parity reference is vLLM's own Triton
kernel (``fdkit.vllm_source``), so a case must be a launch that vLLM's kernel handles correctly:
its buffers cover what the grid's programs touch.
"""

import random

import torch

from kernels_cpu import MRV2_KERNELS

from . import drafts, inputs, memory, outputs, sample, spec

__all__ = ["KERNELS", "absent_by_release", "make_case", "releases_of"]

#: Model Runner V2's kernels (contract names), in the kernel table's order.
KERNELS = tuple(MRV2_KERNELS)

_GENERATORS = {
    **inputs.CASES,
    **sample.CASES,
    **outputs.CASES,
    **spec.CASES,
    **drafts.CASES,
    **memory.CASES,
}

if set(_GENERATORS) != set(KERNELS):  # a kernel added to the table needs a case generator
    raise ImportError(
        f"fdkit.mrv2: no case generator for {sorted(set(KERNELS) - set(_GENERATORS))}, or one "
        f"for no kernel of the table: {sorted(set(_GENERATORS) - set(KERNELS))}"
    )


def make_case(kernel, seed, idx_dtype=torch.int32, scale="small"):
    """A random valid launch of Model Runner V2's ``kernel`` (contract name), from ``seed``."""
    return _GENERATORS[kernel](random.Random(seed), idx_dtype, scale)


def releases_of(kernel):
    """The vLLM releases that have Model Runner V2's ``kernel`` (contract name), from the
    ``releases`` of its contracts (every signature's); empty when one of them does not say --
    a kernel of every release the tests read."""
    from kernels_cpu.contracts import contract

    found = set()
    for impl in MRV2_KERNELS[kernel].impls:
        releases = contract(impl).releases
        if not releases:
            return ()
        found.update(releases)
    return tuple(sorted(found, key=lambda r: tuple(int(p) for p in r.split("."))))


def absent_by_release(kernel, root=None):
    """Why ``kernel`` may be missing from the vLLM sources at ``root`` (default: the sources
    under test, ``fdkit.vllm_source``): a sentence when its contracts date it and the sources'
    release is not one of those dates, else None -- then the sources must have it."""
    from fdkit import vllm_source

    releases = releases_of(kernel)
    standing = vllm_source.release(root)
    if not releases or standing is None or standing in releases:
        return None
    return (
        f"{kernel}: a kernel of vLLM {', '.join(releases)} only, and the sources under test "
        f"are vLLM {standing}'s ({root or vllm_source.source_root()})"
    )
