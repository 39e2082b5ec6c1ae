"""Types of ``kernels_cpu._mrv2_argmax``: vLLM 0.34's split argmax kernels (the greedy argmax's
two stages, the Gumbel sampler's combine) on CPU.

Buffers (``*_ptr``, ``X``, ``PV``, ``PI``, ``OUT``) are CPU tensors, used in place; integer
scalars accept anything with ``__index__`` (Python or numpy integers, 0-d integer tensors).
``grid`` is the launch grid (1-3 ints); the kernels take their row count from its first axis
and the partial stage its blocks per row from the second.
"""

from typing import SupportsIndex

from torch import Tensor

def argmax_partial_kernel(
    X: Tensor,
    PV: Tensor,
    PI: Tensor,
    N: SupportsIndex,
    SX: SupportsIndex,
    SPLITS: SupportsIndex,
    BLOCK: SupportsIndex,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
def argmax_finish_kernel(
    PV: Tensor,
    PI: Tensor,
    OUT: Tensor,
    SPLITS: SupportsIndex,
    BLOCK: SupportsIndex,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
def gumbel_combine_kernel(
    local_argmax_ptr: Tensor,
    local_argmax_stride: SupportsIndex,
    local_max_ptr: Tensor,
    local_max_stride: SupportsIndex,
    sampled_ptr: Tensor,
    num_blocks: SupportsIndex,
    PADDED_NUM_BLOCKS: SupportsIndex,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
