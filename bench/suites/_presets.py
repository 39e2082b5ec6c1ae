"""Launch arguments for the bench: the kernel contracts, sized to a decode step.

The bench times every kernel vLLM keeps under a qualified name (a contract with ``vllm=`` in
``kernels_cpu.contracts``) on the launch vLLM makes, so what a launch holds is not written here
a second time:

* the argument names and their order come from the kernel's contract (an implementation is
  called positionally, as vLLM's ``KernelOverride`` forwards to its C++ shims, or by name);
* the dtype of every index argument (one the contract accepts as int32 or int64) is the one the
  kernel's case generator in ``fdkit.cases`` gives it when indices are int32: int32 where vLLM
  allocates int32 (outputs, offsets, draft ids), int64 where it allocates int64 (argmax, bonus,
  positions, slot mappings);
* what is left to a preset below is the sizes and the values: ``B`` requests, ``K`` drafts each,
  vocab ``V``, valid inputs (ids in range, offsets monotonic) so every implementation takes its
  real path, a fixed seed per kernel.

A contract without a preset (or a preset whose names are not its contract's) fails at import,
naming what is missing; a kernel the bench times in a suite of its own is named in
:data:`OWN_SUITE`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

import fdkit.guards as fdguards
from kernels_cpu.contracts import CONTRACTS, contract

#: Kernels of the contract table timed by a suite of their own (vLLM has no CPU shim to compare).
OWN_SUITE = {
    "topk_topp_kernel": "bench/suites/topk_topp.py",
    "scatter_states_kernel": "bench/suites/states.py",
}

#: vLLM's CPU shims in ``vllm.utils.cpu_triton_utils`` are ``_<kernel>_impl`` but for these.
_SHIM_NAMES = {"batch_memcpy_kernel": "_batch_memcpy_impl"}

#: The dtypes a contract accepts for an index buffer: which one vLLM passes is the generator's.
_INDEX = ("int32", "int64")


class Out(NamedTuple):
    """An output buffer: poisoned as the tests poison theirs (``fdkit.guards``: never
    uninitialised memory), so an entry a kernel does not write keeps the poison and two
    implementations' buffers can be compared; ``fill`` instead where vLLM pre-fills it.
    ``dtype`` None: an index buffer, of the dtype the case generator gives it."""

    shape: int | tuple
    dtype: torch.dtype | None = None
    fill: int | None = None


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cu(B: int, K: int) -> torch.Tensor:
    """Inclusive cumulative draft counts: request i owns [cu[i-1], cu[i])."""
    return torch.arange(K, B * K + 1, K)[:B].contiguous()


def _qsl(B: int, L: int) -> torch.Tensor:
    return torch.arange(0, (B + 1) * L, L)[: B + 1].contiguous()


def _probs(T, V, g):
    return torch.softmax(torch.randn(T, V, generator=g) * 3, dim=-1).contiguous()


def _positions(B, L, block_size, nblk, g):
    """``L`` consecutive positions per request from a random start in the first half of the
    table's reach."""
    starts = torch.randint(0, nblk * block_size // 2, (B,), generator=g)
    return torch.cat([torch.arange(int(s), int(s) + L) for s in starts])


def expand_kernel(B=4, K=4, **_):
    temp = torch.rand(B, generator=_gen(1), dtype=torch.float32)
    temp[0] = 0.0  # a greedy request: replaced by 1 (replace_from=0 -> replace_to=1)
    return dict(
        output_ptr=Out(B * K, torch.float32),
        input_ptr=temp,
        cu_num_tokens_ptr=_cu(B, K),
        replace_from=0,
        replace_to=1,
        MAX_NUM_TOKENS=K,
    )


def _rejection(B, K, **args):
    """The arguments both rejection kernels take alike: output rows pre-filled with -1 (as
    vLLM fills them), the offsets, the spec length, no synthetic mode."""
    return dict(
        output_token_ids_ptr=Out((B, K + 1), fill=-1),
        cu_num_draft_tokens_ptr=_cu(B, K),
        max_spec_len=K,
        synthetic_conditional_rates_ptr=None,
        SYNTHETIC_MODE=False,
        **args,
    )


def rejection_greedy_sample_kernel(B=4, K=4, V=32000, **_):
    g = _gen(2)
    T = B * K
    draft = torch.randint(0, V, (T,), generator=g)
    argmax = draft.clone()
    flip = torch.rand(T, generator=g) < 0.3  # ~30 % mismatches: a mix of accept lengths
    argmax[flip] = (argmax[flip] + 1) % V
    return _rejection(
        B,
        K,
        draft_token_ids_ptr=draft,
        target_argmax_ptr=argmax,
        bonus_token_ids_ptr=torch.randint(0, V, (B, 1), generator=g),
        is_greedy_ptr=None,
        uniform_probs_ptr=None,
    )


def rejection_random_sample_kernel(B=4, K=4, V=32000, **_):
    g = _gen(3)
    T = B * K
    return _rejection(
        B,
        K,
        draft_token_ids_ptr=torch.randint(0, V, (T,), generator=g),
        draft_probs_ptr=None,
        target_probs_ptr=_probs(T, V, g),
        bonus_token_ids_ptr=torch.randint(0, V, (B, 1), generator=g),
        recovered_token_ids_ptr=torch.randint(0, V, (T,), generator=g),
        uniform_probs_ptr=torch.rand(T, generator=g, dtype=torch.float64),
        is_greedy_ptr=torch.zeros(B, dtype=torch.bool),
        vocab_size=V,
        NO_DRAFT_PROBS=True,
    )


def sample_recovered_tokens_kernel(B=4, K=4, V=32000, **_):
    g = _gen(4)
    T = B * K
    q = torch.empty(B, V).exponential_(generator=g)
    return dict(
        output_token_ids_ptr=Out(T),
        cu_num_draft_tokens_ptr=_cu(B, K),
        draft_token_ids_ptr=torch.randint(0, V, (T,), generator=g),
        draft_probs_ptr=None,
        target_probs_ptr=_probs(T, V, g),
        inv_q_ptr=q.reciprocal(),
        vocab_size=V,
        BLOCK_SIZE=8192,
        NO_DRAFT_PROBS=True,
        USE_FP64_GUMBEL=False,
    )


def eagle_step_slot_mapping_metadata_kernel(B=4, block_size=16, max_model_len=4096, **_):
    g = _gen(5)
    nblk = max_model_len // block_size
    return dict(
        positions_ptr=torch.randint(0, max_model_len - 2, (B,), generator=g),
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g),
        block_table_stride=nblk,
        seq_lens_ptr=torch.randint(1, max_model_len // 2, (B,), generator=g),
        out_clamped_positions_ptr=Out(B),
        out_slot_mapping_ptr=Out(B),
        block_size=block_size,
        max_model_len=max_model_len,
        n_blocks_per_req=nblk,
        PAD_ID=-1,
        batch_size=B,
    )


def eagle_prepare_inputs_padded_kernel(B=4, K=4, **_):
    return dict(
        cu_num_draft_tokens_ptr=_cu(B, K),
        valid_sampled_tokens_count_ptr=torch.randint(1, K + 2, (B,), generator=_gen(6)),
        query_start_loc_gpu_ptr=_qsl(B, K + 1),
        token_indices_to_sample_ptr=Out(B),
        num_rejected_tokens_gpu_ptr=Out(B),
        num_reqs=B,
    )


def eagle_prepare_next_token_padded_kernel(B=4, K=4, V=32000, **_):
    g = _gen(7)
    sampled = torch.randint(0, V, (B, K + 1), generator=g)
    for i in range(B):  # rejected tail positions are -1
        sampled[i, 1 + (i % (K + 1)) :] = -1
    return dict(
        sampled_token_ids_ptr=sampled,
        discard_request_mask_ptr=torch.tensor([i % 4 == 3 for i in range(B)], dtype=torch.bool),
        backup_next_token_ids_ptr=torch.randint(0, V, (B,), generator=g),
        next_token_ids_ptr=Out(B),
        valid_sampled_tokens_count_ptr=Out(B),
        vocab_size=V,
        num_sampled_tokens_per_req=K + 1,
        num_reqs=B,
        stride_sampled_token_ids=K + 1,
        BLOCK_SIZE_TOKENS=8,
    )


def copy_and_expand_eagle_inputs_kernel(B=4, K=4, V=32000, P=2, **_):
    g = _gen(8)
    L = K + 1
    total = B * L
    qsl = _qsl(B, L)
    rejected = torch.randint(0, K, (B,), generator=g)
    out_n = total + B * P
    return dict(
        target_token_ids_ptr=torch.randint(0, V, (total,), generator=g),
        target_positions_ptr=torch.arange(100, 100 + total),
        next_token_ids_ptr=torch.randint(0, V, (B,), generator=g),
        out_input_ids_ptr=Out(out_n),
        out_positions_ptr=Out(out_n),
        out_is_rejected_token_mask_ptr=Out(out_n, torch.bool),
        out_is_masked_token_mask_ptr=Out(out_n, torch.bool),
        out_new_token_indices_ptr=Out(B * P),
        out_hidden_state_mapping_ptr=Out(total),
        query_start_loc_ptr=qsl,
        query_end_loc_ptr=(qsl[1:] - 1 - rejected).contiguous(),
        padding_token_id=0,
        parallel_drafting_token_id=V - 1,
        total_input_tokens=total,
        num_padding_slots_per_request=P,
        shift_input_ids=False,
        BLOCK_SIZE_TOKENS=8,
    )


def copy_and_expand_dflash_inputs_kernel(B=4, K=4, V=32000, block_size=16, nblk=64, **_):
    g = _gen(9)
    L = K + 1
    Q = 1 + K
    total = B * L
    positions = _positions(B, L, block_size, nblk, g)
    return dict(
        next_token_ids_ptr=torch.randint(0, V, (B,), generator=g),
        target_positions_ptr=positions,
        out_input_ids_ptr=Out(B * Q),
        out_context_positions_ptr=Out(total),
        out_query_positions_ptr=Out(B * Q),
        out_context_slot_mapping_ptr=Out(total),
        out_query_slot_mapping_ptr=Out(B * Q),
        out_token_indices_ptr=Out(B * K),
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g),
        block_table_stride=nblk,
        num_rejected_tokens_ptr=torch.randint(0, K, (B,), generator=g),
        parallel_drafting_token_id=V - 1,
        block_size=block_size,
        query_start_loc_ptr=_qsl(B, L),
        num_query_per_req=Q,
        num_speculative_tokens=K,
        total_input_tokens=total,
        BLOCK_SIZE=16,
        HAS_NUM_REJECTED=True,
    )


def compute_slot_mapping_kernel(B=4, K=4, block_size=16, nblk=256, **_):
    g = _gen(10)
    L = K + 1
    total = B * L
    positions = _positions(B, L, block_size, nblk, g)
    return dict(
        num_tokens=total,
        max_num_tokens=total + 8,
        query_start_loc_ptr=_qsl(B, L),
        positions_ptr=positions,
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g),
        block_table_stride=nblk,
        slot_mapping_ptr=Out(total + 8),
        KV_CACHE_BLOCK_SIZE=block_size,
        TOTAL_CP_WORLD_SIZE=1,
        TOTAL_CP_RANK=0,
        CP_KV_CACHE_INTERLEAVE_SIZE=1,
        PAD_ID=-1,
        BLOCK_SIZE=1024,
    )


def batch_memcpy_kernel(regions=64, region_bytes=4096, **_):
    src = torch.randint(0, 255, (regions * region_bytes,), generator=_gen(11), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    offs = torch.arange(regions) * region_bytes
    return dict(
        src_ptrs=offs + src.data_ptr(),
        dst_ptrs=offs + dst.data_ptr(),
        sizes=torch.full((regions,), region_bytes),
        BLOCK_SIZE=1024,
        _keepalive=(src, dst),
    )


#: Every kernel vLLM keeps under a qualified name, newest signature, in the contracts' order.
KERNELS = tuple(
    c.name for c in CONTRACTS if c.vllm and c.runner == "v1" and c.name not in OWN_SUITE
)

PRESETS = {name: globals().get(name) for name in KERNELS}

_missing = sorted(name for name, fn in PRESETS.items() if fn is None)
if _missing:  # a kernel added to the contracts needs its decode-step launch here
    raise ImportError(
        f"bench/suites/_presets.py: no decode-step preset for {_missing} (write "
        f"<kernel>(**sizes) returning its arguments, or name its suite in OWN_SUITE)"
    )


def vllm_shim_name(name: str) -> str:
    """The attribute of ``vllm.utils.cpu_triton_utils`` that vLLM's CPU build runs for ``name``."""
    return _SHIM_NAMES.get(name, f"_{name}_impl")


@functools.cache
def index_dtypes(name: str) -> dict[str, torch.dtype]:
    """Argument name -> dtype, for every index argument of ``name``'s contract, as
    ``fdkit.cases`` generates it with int32 indices (some draws leave an optional argument out:
    the first draws that pass it decide)."""
    from fdkit.cases import make_case

    wanted = {a.name for a in contract(name).args if a.dtypes == _INDEX}
    found: dict[str, torch.dtype] = {}
    for seed in range(64):
        kwargs, _ = make_case(name, seed, torch.int32).build()
        for arg in wanted - set(found):
            if isinstance(kwargs.get(arg), torch.Tensor):
                found[arg] = kwargs[arg].dtype
        if len(found) == len(wanted):
            return found
    raise LookupError(
        f"fdkit.cases never passes a tensor for {sorted(wanted - set(found))} of {name}: "
        "no dtype to give them"
    )


def _value(name, arg, value, dtypes):
    """The preset's ``value`` for ``arg``: an :class:`Out` made a buffer, an index tensor in
    vLLM's dtype, anything else as it is; a dtype the contract does not accept is an error."""
    want = dtypes.get(arg.name)
    if isinstance(value, Out):
        dtype = value.dtype or want
        shape = (value.shape,) if isinstance(value.shape, int) else value.shape
        if value.fill is not None:
            value = torch.full(shape, value.fill, dtype=dtype)
        else:
            value = fdguards.poison(torch.empty(shape, dtype=dtype))
    elif isinstance(value, torch.Tensor) and want is not None and value.dtype != want:
        value = value.to(want).contiguous()
    if isinstance(value, torch.Tensor) and str(value.dtype).removeprefix("torch.") not in (
        arg.dtypes
    ):
        raise TypeError(f"{name} preset: {arg.name} is {value.dtype}, contract: {arg.dtypes}")
    if value is None and not arg.optional:
        raise TypeError(f"{name} preset: {arg.name} is None, which its contract does not allow")
    return value


def build(name: str, **sizes):
    """``(args, kwargs, keepalive)`` for kernel ``name``: its arguments in contract order, as a
    tuple and by name, and what must outlive the launch (batch_memcpy's byte arenas)."""
    kw = PRESETS[name](**sizes)
    keep = kw.pop("_keepalive", None)
    args = contract(name).args
    names = [a.name for a in args]
    if set(kw) != set(names):
        raise TypeError(
            f"{name} preset: missing {sorted(set(names) - set(kw))}, "
            f"not in its contract {sorted(set(kw) - set(names))}"
        )
    dtypes = index_dtypes(name)
    ordered = {a.name: _value(name, a, kw[a.name], dtypes) for a in args}
    return tuple(ordered.values()), ordered, keep
