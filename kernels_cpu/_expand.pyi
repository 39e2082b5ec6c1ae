"""Types of ``kernels_cpu._expand``: vLLM's ``expand_kernel`` on CPU.

Buffers, scalars and ``constexpr`` flags are taken as ``kernels_cpu._sampling``'s stub says.
"""

from typing import SupportsIndex

from torch import Tensor

def expand_kernel(
    output_ptr: Tensor,
    input_ptr: Tensor,
    cu_num_tokens_ptr: Tensor,
    replace_from: float,
    replace_to: float,
    MAX_NUM_TOKENS: SupportsIndex | None = None,
) -> None: ...
