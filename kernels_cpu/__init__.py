"""CPU implementations of vLLM's sampling and speculative-decoding Triton kernels.

Each kernel takes the Triton kernel's arguments in its order and under its names, reads int32 or
int64 buffers in place and writes outputs in the caller's dtype. ``vllm_overrides()`` maps vLLM's
qualified kernel names to these functions for ``register_kernels``; ``VLLM_KERNELS`` and
``impl_for`` pick the function per kernel signature for other vLLM releases.
"""

from typing import TYPE_CHECKING

import torch  # noqa: F401  -- load torch's libgomp before ours: one OpenMP runtime per process

from ._grid import GridLauncher  # noqa: E402
from ._mrv2_verify import rejection_sample_one_pass  # noqa: E402
from ._overrides import (  # noqa: E402
    MRV2_KERNELS,
    VLLM_KERNEL_NAMES,
    VLLM_KERNELS,
    impl_for,
    vllm_overrides,
)
from ._parallel import (  # noqa: E402
    get_num_threads,
    openmp_enabled,
    parallel_threshold,
    set_num_threads,
    set_parallel_threshold,
)
from ._row_argmax import argmax_rows  # noqa: E402
from ._topk_topp import top_k_top_p  # noqa: E402

if TYPE_CHECKING:  # the kernels' types, from their modules' stubs (at run time: _kernels())
    from ._expand import *  # noqa: F403
    from ._mrv2_argmax import *  # noqa: F403
    from ._mrv2_drafts import *  # noqa: F403
    from ._mrv2_inputs import *  # noqa: F403
    from ._mrv2_memory import *  # noqa: F403
    from ._mrv2_outputs import *  # noqa: F403
    from ._mrv2_sample import *  # noqa: F403
    from ._mrv2_sample_logits import *  # noqa: F403
    from ._mrv2_spec import *  # noqa: F403
    from ._recovered import *  # noqa: F403
    from ._sampling import *  # noqa: F403
    from ._spec_decode import *  # noqa: F403
    from ._topk_topp import *  # noqa: F403
    from ._workers import *  # noqa: F403


def _kernels():
    """Every kernel of the contract table, from the module its contract names: adding a kernel
    is its contract entry and its module, nothing here."""
    import importlib

    from .contracts import CONTRACTS

    found = {}
    for c in CONTRACTS:
        module = importlib.import_module(f"{__name__}.{c.module}")
        try:
            found[c.name] = getattr(module, c.name)
        except AttributeError:
            raise ImportError(
                f"kernels_cpu.contracts names {c.name} in kernels_cpu.{c.module}, which has none"
            ) from None
    return found


globals().update(_kernels())

__all__ = [
    "VLLM_KERNEL_NAMES",
    "VLLM_KERNELS",
    "MRV2_KERNELS",
    "GridLauncher",
    "impl_for",
    "vllm_overrides",
    "get_num_threads",
    "openmp_enabled",
    "parallel_threshold",
    "set_num_threads",
    "set_parallel_threshold",
    "top_k_top_p",
    "rejection_sample_one_pass",
    "argmax_rows",
    # the kernels: every implementation in the kernel table, in its order
    *(impl for entry in VLLM_KERNELS.values() for impl in entry.impls),
    *(impl for entry in MRV2_KERNELS.values() for impl in entry.impls),
]
