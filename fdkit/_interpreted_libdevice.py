"""``libdevice`` as Triton's interpreter can run it (see ``fdkit.vllm_source``).

The interpreter cannot call extern functions (``create_extern_elementwise`` raises) and runs
``triton.language.extra.libdevice``'s stubs as no-ops, so a kernel importing ``libdevice`` gets
these instead: the functions vLLM's kernels use, each by its definition.
"""

import triton
import triton.language as tl  # noqa: F401  -- the interpreter patches the tl its kernels see


@triton.jit
def isnan(x):
    return x != x
