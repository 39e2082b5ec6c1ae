"""Types of ``kernels_cpu._race``: the exponential race's random stream, visible for tests.

The Philox helpers expose the stream the race draws from, so tests can recompute it.
"""

from collections.abc import Sequence
from typing import Literal

from torch import Tensor

#: Vocabulary entries per block of the exponential race (also the C block-sum loop's block).
BLOCK_SIZE: int

def philox4x32(counter: Sequence[int], key: Sequence[int]) -> tuple[int, int, int, int]: ...
def philox_words(out: Tensor, counter: Sequence[int], key: Sequence[int]) -> None: ...
def variates(
    words: Tensor, kind: Literal["u01_float", "u01_open", "exp_open", "exp_float"]
) -> Tensor: ...
def block_exponentials(key: int, stream: int, pos: int, nblocks: int) -> Tensor: ...
def step_uniforms(key: int, stream: int, pos: int) -> tuple[float, float]: ...
