"""Our own Triton kernels for the 12 kernels, and the ops that launch them.

    from fastdispatch.ops import rejection_sample, expand_batch_to_tokens
    out = rejection_sample(draft_ids, cu_num_draft_tokens, max_spec_len, logits, bonus_ids)

The ops launch our Triton kernels (:mod:`fastdispatch.ops.triton_kernels`) through
``fastdispatch.kernel_dispatcher`` launch owners, so what runs is whatever the owner holds:

* a usable Triton GPU driver: the Triton kernels, natively (``RUN_MODE == "native"``);
* ``TRITON_INTERPRET=1`` set before import: the Triton kernels, interpreted on CPU tensors
  (``"interpret"``; slow, for differential tests);
* otherwise -- Triton absent, or installed with no active driver, as on a CPU-only host --
  importing this package registers the ``kernels_cpu`` implementations over our kernels'
  qualified names with :func:`fastdispatch.register_kernels` (``"cpu"``): the same pass a foreign
  project uses for vLLM's kernels, so the ops double as its end-to-end test.

``use_cpu_kernels()`` / ``use_triton_kernels()`` switch by hand (e.g. to run ``kernels_cpu``
under the interpreter, or ``FASTDISPATCH_OPS_CPU_KERNELS=1`` at import).
"""

from collections.abc import Callable
from typing import Any

from .._env import env_flag
from ._triton import HAS_TRITON, INTERPRET, active_driver, run_mode
from .fused import (
    fastdispatch_fused_vllm_overrides,
    fused_kernel_overrides,
    rejection_sample_fused,
    rejection_sample_fused_logits,
    request_seeds,
    sample_recovered_tokens_fused,
)
from .sampling import (
    PLACEHOLDER_TOKEN_ID,
    expand_batch_to_tokens,
    generate_inv_q,
    generate_uniform_probs,
    rejection_sample,
    sample_recovered_tokens,
)
from .spec_decode import (
    PADDING_SLOT_ID,
    DFlashInputs,
    EagleInputs,
    copy_and_expand_dflash_inputs,
    copy_and_expand_eagle_inputs,
    eagle_prepare_inputs_padded,
    eagle_prepare_next_token_padded,
    eagle_step_update_slot_mapping_and_metadata,
)
from .topk_topp import apply_top_k_top_p
from .triton_kernels import QUALNAMES
from .workers import PAD_SLOT_ID, batch_memcpy, compute_slot_mapping, scatter_states

__all__ = [
    "HAS_TRITON",
    "INTERPRET",
    "PADDING_SLOT_ID",
    "PAD_SLOT_ID",
    "PLACEHOLDER_TOKEN_ID",
    "QUALNAMES",
    "RUN_MODE",
    "DFlashInputs",
    "EagleInputs",
    "active_driver",
    "apply_top_k_top_p",
    "batch_memcpy",
    "scatter_states",
    "compute_slot_mapping",
    "copy_and_expand_dflash_inputs",
    "copy_and_expand_eagle_inputs",
    "cpu_kernels_active",
    "cpu_overrides",
    "eagle_prepare_inputs_padded",
    "eagle_prepare_next_token_padded",
    "eagle_step_update_slot_mapping_and_metadata",
    "expand_batch_to_tokens",
    "fastdispatch_fused_vllm_overrides",
    "fused_kernel_overrides",
    "generate_inv_q",
    "generate_uniform_probs",
    "rejection_sample",
    "rejection_sample_fused",
    "rejection_sample_fused_logits",
    "request_seeds",
    "run_mode",
    "sample_recovered_tokens",
    "sample_recovered_tokens_fused",
    "use_cpu_kernels",
    "use_triton_kernels",
]


def cpu_overrides() -> dict[str, Callable[..., Any]]:
    """``{our kernel's qualified name: kernels_cpu implementation}`` for all 12 kernels."""
    import kernels_cpu

    return {qualname: getattr(kernels_cpu, name) for name, qualname in QUALNAMES.items()}


def use_cpu_kernels() -> None:
    """Register the ``kernels_cpu`` implementations over our Triton kernels (idempotent)."""
    from .. import _registry, register_kernels

    todo = {
        name: impl
        for name, impl in cpu_overrides().items()
        if name not in _registry or _registry[name][1] is not impl
    }
    if todo:
        register_kernels(todo)


def use_triton_kernels() -> None:
    """Undo :func:`use_cpu_kernels`: the ops launch our Triton kernels again."""
    from .. import _registry, unregister_kernels

    registered = [name for name in QUALNAMES.values() if name in _registry]
    if registered:
        unregister_kernels(registered)


def cpu_kernels_active() -> bool:
    """Whether the ops currently launch the ``kernels_cpu`` implementations."""
    from .. import _registry

    return all(name in _registry for name in QUALNAMES.values())


def _env_flag(name: str) -> bool:
    return bool(env_flag(name))


#: How the ops run in this process, as decided at import: "native", "interpret" or "cpu".
RUN_MODE: str = run_mode()
if RUN_MODE == "cpu" or _env_flag("FASTDISPATCH_OPS_CPU_KERNELS"):
    use_cpu_kernels()
