"""Plain-torch reference implementations of the kernel contracts (slow, obviously correct).

One submodule per area -- ``sampling``, ``spec_decode``, ``workers``, ``topk_topp`` -- each with
the same function names, signatures and in-place outputs as the compiled kernels in
``kernels_cpu``: one
reference per kernel (per implemented signature: ``compute_slot_mapping_hybrid_kernel`` too).
The tests compare the compiled kernels and our Triton kernels with them, and the bench scripts
time them side by side. They assume valid inputs: validation is the compiled kernels' job.

:data:`REFERENCES` maps every ``kernels_cpu`` implementation named in the kernel table
(``kernels_cpu.VLLM_KERNELS``) to its reference; a launch case's arguments (``fdkit.cases``) go
to it by name, ``REFERENCES[case.kernel](**kwargs)`` (no grid: a case's grid always covers its
buffers, as the compiled kernels assume).
"""

from kernels_cpu import VLLM_KERNELS

from . import sampling, spec_decode, topk_topp, workers

__all__ = ["REFERENCES", "sampling", "spec_decode", "topk_topp", "workers", "area_of"]

_AREAS = (sampling, spec_decode, workers, topk_topp)


def area_of(impl):
    """The submodule holding the reference of the ``kernels_cpu`` function named ``impl``."""
    found = [m for m in _AREAS if callable(getattr(m, impl, None))]
    if len(found) != 1:
        raise LookupError(f"{impl}: {len(found)} references (want exactly one)")
    return found[0]


#: ``kernels_cpu`` function name -> its reference, for every implementation in the kernel table.
REFERENCES = {
    impl: getattr(area_of(impl), impl) for entry in VLLM_KERNELS.values() for impl in entry.impls
}
