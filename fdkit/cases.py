"""Random launch cases for the kernel contracts, for differential testing.

A :class:`Case` is one launch of one kernel (by its contract name) on random, *valid* inputs:
``case.build(device)`` returns fresh launch arguments plus the buffers to compare afterwards, and
two builds of a case are bit-identical, so the same launch can be given to two implementations
(our Triton kernel natively or interpreted, ``kernels_cpu``, a plain reference) and their results
compared exactly. Outputs are poisoned and sit between canary guards inside a larger buffer (the
one scheme of :mod:`fdkit.guards`); the compared buffers include the guards, so an implementation
that writes out of bounds differs.

Used by ``tests/test_triton_parity.py`` (small cases, Triton interpreter) and
``tools/gpu_parity.py`` (larger cases, native Triton on a GPU), among others. Needs torch, and
``kernels_cpu`` for the kernel table (:data:`KERNELS` is read from ``VLLM_KERNELS``).
"""

import math
import random

import torch

from fdkit import guards
from fdkit._case import Case, Out, Ptrs, Slice, batch, gen, next_pow2
from kernels_cpu import VLLM_KERNELS

__all__ = ["Case", "KERNELS", "make_case", "guard_violations", "POISON", "GUARD"]

#: Integer poison written into outputs before a launch (:data:`fdkit.guards.POISON_INT`); float
#: outputs take :data:`fdkit.guards.POISON_FLOAT`, bool ones :data:`fdkit.guards.BOOL_PATTERN`.
POISON = guards.POISON_INT
#: Elements of canary guard on each side of every output buffer (:data:`fdkit.guards.GUARD`).
GUARD = guards.GUARD

#: The kernels (contract names), in the order of the kernel table ``kernels_cpu.VLLM_KERNELS``.
KERNELS = tuple(VLLM_KERNELS)


def guard_violations(case, compared):
    """Names of output buffers whose canary guards were written (any element of the backing
    buffer outside the view: :func:`fdkit.guards.guards_intact`)."""
    bad = []
    for name, spec in case.args.items():
        outs = [(name, spec)]
        if isinstance(spec, Ptrs):  # the tables behind raw addresses
            outs = [(f"{name}[{i}]", m) for i, m in enumerate(spec.members)]
        for key, out in outs:
            if not isinstance(out, Out):
                continue
            backing = compared[key].cpu()
            view = guards.view_of(backing, out.shape, out.row_stride)
            if not guards.guards_intact(backing, view, out.fill):
                bad.append(key)
    return bad


# ---------------------------------------------------------------------------------------------
# Per-kernel generators. ``rng`` is a random.Random; ``idx`` the index dtype (int32 or int64);
# ``scale`` bounds the sizes ("small" for the interpreter, "large" for a GPU).
# ---------------------------------------------------------------------------------------------

_SIZES = {
    "small": dict(B=5, K=4, V=12, L=6, bs=4),
    "large": dict(B=64, K=8, V=5000, L=300, bs=16),
}


def _t(values, dtype):
    return torch.tensor(values, dtype=dtype)


def _counts(rng, B, K, zero_ok=True):
    return [rng.randint(0 if zero_ok else 1, K) for _ in range(B)]


def _cumsum(counts):
    out, acc = [], 0
    for c in counts:
        acc += c
        out.append(acc)
    return out


def _case_expand(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    max_tokens = rng.choice((4, 8, 128)) if scale == "small" else 128
    counts = _counts(rng, B, min(max_tokens, z["K"] + 2 if scale == "small" else 128))
    cu = _cumsum(counts)
    T = cu[-1] if cu else 0
    data_dtype = rng.choice((torch.float32, torch.int32, torch.int64))
    values = [rng.choice((0, 1, 2, 7, -3, 100)) for _ in range(B)]
    replace_from, replace_to = rng.choice(((0, 1), (0, 0), (7, -5), (2, 9)))
    return Case(
        "expand_kernel",
        (B,),
        dict(
            output_ptr=Out(T, data_dtype),
            input_ptr=_t(values, data_dtype),
            cu_num_tokens_ptr=_t(cu, idx),
            replace_from=replace_from,
            replace_to=replace_to,
            MAX_NUM_TOKENS=max_tokens,
        ),
        note=f"B={B} T={T} {data_dtype}",
    )


def _drafts_like(rng, target, V, p_match=0.6, p_pad=0.1):
    out = []
    for t in target:
        r = rng.random()
        if r < p_pad:
            out.append(-1)
        elif r < p_pad + p_match:
            out.append(t)
        else:
            out.append(rng.randrange(V))
    return out


def _case_greedy(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    K = rng.randint(1, z["K"])
    V = rng.choice((1, z["V"]))
    counts = _counts(rng, B, K)
    cu = _cumsum(counts)
    T = cu[-1] if cu else 0
    argmax = [rng.randrange(V) for _ in range(T)]
    drafts = _drafts_like(rng, argmax, V)
    synthetic = rng.random() < 0.3
    greedy_none = rng.random() < 0.4
    return Case(
        "rejection_greedy_sample_kernel",
        (B,),
        dict(
            output_token_ids_ptr=Out((B, K + 1), idx, fill=-1),
            cu_num_draft_tokens_ptr=_t(cu, idx),
            draft_token_ids_ptr=_t(drafts, idx),
            target_argmax_ptr=_t(argmax, torch.int64),
            bonus_token_ids_ptr=_t([rng.randrange(V) for _ in range(B)], torch.int64),
            is_greedy_ptr=None
            if greedy_none
            else _t([rng.random() < 0.7 for _ in range(B)], torch.bool),
            max_spec_len=K,
            uniform_probs_ptr=torch.rand(T, dtype=torch.float64, generator=gen(rng))
            if synthetic
            else None,
            synthetic_conditional_rates_ptr=_t(
                [rng.choice((0.0, 0.5, 0.9, 1.0)) for _ in range(K)], torch.float32
            )
            if synthetic
            else None,
            SYNTHETIC_MODE=synthetic,
        ),
        note=f"B={B} K={K} V={V} T={T} synth={synthetic}",
    )


def _probs(rng, T, V, zero_frac=0.2):
    g = gen(rng)
    p = torch.rand((T, V), generator=g)
    p[torch.rand((T, V), generator=g) < zero_frac] = 0.0
    s = p.sum(dim=1, keepdim=True)
    p = torch.where(s > 0, p / torch.where(s > 0, s, 1.0), torch.full_like(p, 1.0 / V))
    return p.to(torch.float32).contiguous()


def _case_random(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    K = rng.randint(1, z["K"])
    V = rng.choice((1, 2, z["V"]))
    counts = _counts(rng, B, K)
    cu = _cumsum(counts)
    T = cu[-1] if cu else 0
    no_draft = rng.random() < 0.3
    synthetic = rng.random() < 0.2
    target = _probs(rng, T, V)
    draft = None if no_draft else _probs(rng, T, V)
    drafts = _drafts_like(rng, [rng.randrange(V) for _ in range(T)], V, p_match=0.0, p_pad=0.1)
    uniform = torch.rand(T, dtype=torch.float64, generator=gen(rng))
    for t, d in enumerate(drafts):
        if d < 0:
            continue
        r = rng.random()
        dp = torch.ones((), dtype=torch.float32) if no_draft else draft[t, d]
        if r < 0.15 and draft is not None:
            draft[t, d] = 0.0  # zero draft probability: must reject
        elif r < 0.35 and float(dp) > 0:
            uniform[t] = float(target[t, d] / dp)  # exact tie: accept (>=)
        elif r < 0.5:
            uniform[t] = 0.0
    return Case(
        "rejection_random_sample_kernel",
        (B,),
        dict(
            output_token_ids_ptr=Out((B, K + 1), idx, fill=-1),
            cu_num_draft_tokens_ptr=_t(cu, idx),
            draft_token_ids_ptr=_t(drafts, idx),
            draft_probs_ptr=draft,
            target_probs_ptr=target,
            bonus_token_ids_ptr=_t([rng.randrange(V) for _ in range(B)], torch.int64),
            recovered_token_ids_ptr=_t([rng.randrange(V) for _ in range(T)], idx),
            uniform_probs_ptr=uniform,
            is_greedy_ptr=_t([rng.random() < 0.3 for _ in range(B)], torch.bool),
            max_spec_len=K,
            vocab_size=V,
            synthetic_conditional_rates_ptr=_t(
                [rng.choice((0.0, 0.5, 1.0)) for _ in range(K)], torch.float32
            )
            if synthetic
            else None,
            NO_DRAFT_PROBS=no_draft,
            SYNTHETIC_MODE=synthetic,
        ),
        note=f"B={B} K={K} V={V} T={T} no_draft={no_draft} synth={synthetic}",
    )


def _case_recovered(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    K = rng.randint(1, z["K"])
    V = rng.choice((1, 3, z["V"]))
    counts = _counts(rng, B, K)
    cu = _cumsum(counts)
    T = cu[-1] if cu else 0
    no_draft = rng.random() < 0.4
    fp64 = rng.random() < 0.3
    coarse = rng.random() < 0.4  # quantized values: plenty of exact ties
    g = gen(rng)
    if coarse:
        target = (torch.randint(0, 3, (T, V), generator=g).float() / 4).contiguous()
        draft = None if no_draft else (torch.randint(0, 3, (T, V), generator=g).float() / 4)
        inv_q = torch.randint(1, 3, (B, V), generator=g).to(
            torch.float64 if fp64 else torch.float32
        )
    else:
        target = _probs(rng, T, V)
        draft = None if no_draft else _probs(rng, T, V)
        q = torch.empty((B, V), dtype=torch.float64 if fp64 else torch.float32)
        q.exponential_(generator=g)
        inv_q = q.clamp_(min=1e-6).reciprocal()
    drafts = [rng.randrange(-1, V) for _ in range(T)]
    block = rng.choice((2, 4, 8)) if scale == "small" else rng.choice((1024, 8192))
    return Case(
        "sample_recovered_tokens_kernel",
        (B, K),
        dict(
            output_token_ids_ptr=Out(T, idx),
            cu_num_draft_tokens_ptr=_t(cu, idx),
            draft_token_ids_ptr=_t(drafts, idx),
            draft_probs_ptr=draft,
            target_probs_ptr=target,
            inv_q_ptr=inv_q,
            vocab_size=V,
            BLOCK_SIZE=block,
            NO_DRAFT_PROBS=no_draft,
            USE_FP64_GUMBEL=fp64,
        ),
        note=f"B={B} K={K} V={V} no_draft={no_draft} fp64={fp64} coarse={coarse}",
    )


def _case_eagle_step(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    pad = rng.choice((0, 0, 1, 3))
    block_size = rng.choice((1, 2, z["bs"]))
    max_model_len = rng.randint(1, 4 * z["L"])
    n_blocks = -(-max_model_len // block_size)
    width = n_blocks + rng.choice((0, 2))  # a row stride wider than the used blocks
    g = gen(rng)
    table = Slice(torch.randint(0, 1000, (B, width), generator=g).to(idx), n_blocks)
    positions = [rng.randrange(max_model_len) for _ in range(B)]
    seq_lens = [min(p + 1, max_model_len) for p in positions]
    return Case(
        "eagle_step_slot_mapping_metadata_kernel",
        (B + pad,),
        dict(
            positions_ptr=_t(positions, torch.int64),
            block_table_ptr=table,
            block_table_stride=width,
            seq_lens_ptr=_t(seq_lens, idx),
            out_clamped_positions_ptr=Out(B, torch.int64),
            out_slot_mapping_ptr=Out(B + pad, torch.int64),
            block_size=block_size,
            max_model_len=max_model_len,
            n_blocks_per_req=n_blocks,
            PAD_ID=-1,
            batch_size=B,
        ),
        inplace=("seq_lens_ptr",),
        note=f"B={B} pad={pad} bs={block_size} mml={max_model_len}",
    )


def _case_prepare_inputs(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    counts = _counts(rng, B, z["K"])
    cu = _cumsum(counts)
    valid = [rng.randint(1, n + 1) for n in counts]
    qlen = [n + 1 + rng.randint(0, 3) for n in counts]
    qsl = [0] + _cumsum(qlen)
    return Case(
        "eagle_prepare_inputs_padded_kernel",
        (B,),
        dict(
            cu_num_draft_tokens_ptr=_t(cu, idx),
            valid_sampled_tokens_count_ptr=_t(valid, idx),
            query_start_loc_gpu_ptr=_t(qsl, idx),
            token_indices_to_sample_ptr=Out(B, idx),
            num_rejected_tokens_gpu_ptr=Out(B, idx),
            num_reqs=B,
        ),
        note=f"B={B}",
    )


def _case_next_token(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S = rng.randint(1, z["K"] + 1)
    V = z["V"]
    width = S + rng.choice((0, 3))
    rows = []
    for _ in range(B):
        n_ok = rng.randint(0, S)
        row = [rng.randrange(V) for _ in range(n_ok)] + [-1] * (S - n_ok)
        if rng.random() < 0.2:
            row[rng.randrange(S)] = V + rng.randrange(3)  # out of vocabulary: not valid
        rows.append(row + [rng.randrange(V) for _ in range(width - S)])
    sampled = Slice(_t(rows, idx).reshape(B, width), S)
    return Case(
        "eagle_prepare_next_token_padded_kernel",
        (B,),
        dict(
            sampled_token_ids_ptr=sampled,
            discard_request_mask_ptr=_t([rng.random() < 0.25 for _ in range(B)], torch.bool),
            backup_next_token_ids_ptr=_t([rng.randrange(V) for _ in range(B)], idx),
            next_token_ids_ptr=Out(B, idx),
            valid_sampled_tokens_count_ptr=Out(B, idx),
            vocab_size=V,
            num_sampled_tokens_per_req=S,
            num_reqs=B,
            stride_sampled_token_ids=width,
            BLOCK_SIZE_TOKENS=next_pow2(S),
        ),
        note=f"B={B} S={S} width={width}",
    )


def _case_eagle_copy(rng, idx, scale):
    z = _SIZES[scale]
    B = max(1, batch(rng, z["B"]))
    V = z["V"]
    P = rng.randint(1, 4)
    shift = rng.random() < 0.5
    lens = [rng.randint(1, z["L"]) for _ in range(B)]
    rejected = [rng.randint(0, n - 1) if rng.random() < 0.5 else 0 for n in lens]
    qsl = [0] + _cumsum(lens)
    qend = [qsl[r] + lens[r] - 1 - rejected[r] for r in range(B)]
    total_in = qsl[-1]
    net = P - 1 if shift else P
    total_out = total_in + net * B
    max_per_req = max(lens) + net
    block = min(256, next_pow2(max_per_req)) if scale == "large" else rng.choice((2, 4, 8))
    n_blocks = -(-max_per_req // block)
    g = gen(rng)
    starts = torch.randint(0, 1000, (B,), generator=g).tolist()
    positions = [starts[r] + j for r in range(B) for j in range(lens[r])]
    return Case(
        "copy_and_expand_eagle_inputs_kernel",
        (B, n_blocks),
        dict(
            target_token_ids_ptr=torch.randint(0, V, (total_in,), generator=g).to(idx),
            target_positions_ptr=_t(positions, torch.int64),
            next_token_ids_ptr=torch.randint(0, V, (B,), generator=g).to(idx),
            out_input_ids_ptr=Out(total_out, idx),
            out_positions_ptr=Out(total_out, torch.int64),
            out_is_rejected_token_mask_ptr=Out(total_out, torch.bool),
            out_is_masked_token_mask_ptr=Out(total_out, torch.bool),
            out_new_token_indices_ptr=Out(B * P, idx),
            out_hidden_state_mapping_ptr=Out(total_in, idx),
            query_start_loc_ptr=_t(qsl, idx),
            query_end_loc_ptr=_t(qend, idx),
            padding_token_id=rng.choice((0, 5)),
            parallel_drafting_token_id=rng.choice((V - 1, 99)),
            total_input_tokens=total_in,
            num_padding_slots_per_request=P,
            shift_input_ids=shift,
            BLOCK_SIZE_TOKENS=block,
        ),
        note=f"B={B} P={P} shift={shift} lens={lens} rej={rejected} block={block}",
    )


def _case_dflash(rng, idx, scale):
    z = _SIZES[scale]
    B = max(1, batch(rng, z["B"]))
    V = z["V"]
    S = rng.randint(1, z["K"])
    Q = 1 + S
    has_rej = rng.random() < 0.5
    lens = [rng.randint(1, z["L"]) for _ in range(B)]
    rejected = [rng.randint(0, n - 1) for n in lens]
    qsl = [0] + _cumsum(lens)
    total_in = qsl[-1]
    block_size = rng.choice((1, 2, z["bs"]))
    g = gen(rng)
    starts = torch.randint(0, 3 * z["L"], (B,), generator=g).tolist()
    positions = [starts[r] + j for r in range(B) for j in range(lens[r])]
    max_pos = max(starts[r] + lens[r] + Q for r in range(B))
    n_blk = max(1, -(-max_pos // block_size) - rng.choice((0, 1)))  # sometimes clamped
    table = torch.randint(0, 1000, (B, n_blk), generator=g).to(idx)
    max_tokens = max(lens) + Q
    block = min(256, next_pow2(max_tokens)) if scale == "large" else rng.choice((2, 4, 8))
    return Case(
        "copy_and_expand_dflash_inputs_kernel",
        (B, -(-max_tokens // block)),
        dict(
            next_token_ids_ptr=torch.randint(0, V, (B,), generator=g).to(idx),
            target_positions_ptr=_t(positions, torch.int64),
            out_input_ids_ptr=Out(B * Q, idx),
            out_context_positions_ptr=Out(total_in, torch.int64),
            out_query_positions_ptr=Out(B * Q, torch.int64),
            out_context_slot_mapping_ptr=Out(total_in, torch.int64),
            out_query_slot_mapping_ptr=Out(B * Q, torch.int64),
            out_token_indices_ptr=Out(B * S, idx),
            block_table_ptr=table,
            block_table_stride=table.stride(0),
            query_start_loc_ptr=_t(qsl, idx),
            num_rejected_tokens_ptr=_t(rejected, idx) if has_rej else 0,
            parallel_drafting_token_id=V - 1,
            block_size=block_size,
            num_query_per_req=Q,
            num_speculative_tokens=S,
            total_input_tokens=total_in,
            BLOCK_SIZE=block,
            HAS_NUM_REJECTED=has_rej,
        ),
        note=f"B={B} S={S} has_rej={has_rej} lens={lens} bs={block_size} block={block}",
    )


def _case_slot_mapping(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    kv_bs = rng.choice((1, 4, z["bs"]))
    world = rng.choice((1, 1, 2, 4))
    rank = rng.randrange(world)
    inter = rng.choice([d for d in (1, 2, 4) if kv_bs % d == 0 or d == 1])
    lens = [rng.randint(0, z["L"]) for _ in range(B)]
    qsl = [0] + _cumsum(lens)
    num_tokens = qsl[-1]
    max_num_tokens = num_tokens + rng.choice((0, 1, 5))
    stride = rng.randint(1, 8)
    g = gen(rng)
    table = torch.randint(0, 500, (B + rng.choice((0, 2)), stride), generator=g).to(idx)
    positions = torch.randint(0, stride * kv_bs * world, (num_tokens,), generator=g)
    block = rng.choice((2, 4, 8)) if scale == "small" else 1024
    return Case(
        "compute_slot_mapping_kernel",
        (B + 1,),
        dict(
            num_tokens=num_tokens,
            max_num_tokens=max_num_tokens,
            query_start_loc_ptr=_t(qsl, idx),
            positions_ptr=positions,
            block_table_ptr=table,
            block_table_stride=stride,
            slot_mapping_ptr=Out(max_num_tokens, torch.int64),
            KV_CACHE_BLOCK_SIZE=kv_bs,
            TOTAL_CP_WORLD_SIZE=world,
            TOTAL_CP_RANK=rank,
            CP_KV_CACHE_INTERLEAVE_SIZE=inter,
            PAD_ID=-1,
            BLOCK_SIZE=block,
        ),
        note=f"B={B} kv_bs={kv_bs} cp={world}/{rank}/{inter} tokens={num_tokens}",
    )


def _case_memcpy(rng, idx, scale):
    """Copies in disjoint segments of one byte arena; within a segment, source and destination
    may overlap either way (the overlap-safe promise) or coincide."""
    n = batch(rng, 6 if scale == "small" else 64)
    seg = 64 if scale == "small" else 4096
    g = gen(rng)
    arena = torch.randint(0, 256, (max(1, n) * seg,), generator=g).to(torch.uint8)
    src, dst, sizes = [], [], []
    for i in range(n):
        base = i * seg
        size = rng.choice((0, 1, rng.randint(1, seg // 2)))
        kind = rng.choice(("apart", "left", "right", "same"))
        a = rng.randint(0, seg - 2 * size) if size else 0
        if kind == "apart":
            s, d = a, a + size
        elif kind == "left":
            d = a
            s = a + rng.randint(1, max(1, size - 1)) if size > 1 else a + 1
        elif kind == "right":
            s = a
            d = a + rng.randint(1, max(1, size - 1)) if size > 1 else a + 1
        else:
            s = d = a
        if rng.random() < 0.5:
            s, d = (d, s) if kind == "apart" else (s, d)
        src.append(base + s)
        dst.append(base + d)
        sizes.append(size)
    block = rng.choice((4, 16)) if scale == "small" else 1024
    return Case(
        "batch_memcpy_kernel",
        (n,),
        {},
        memcpy=(arena, _t(src, torch.int64), _t(dst, torch.int64), _t(sizes, torch.int64), block),
        note=f"n={n} sizes={sizes}",
    )


def _logit_rows(rng, g, rows, W, V):
    """``[rows, W]`` float32 logits (the first ``V`` columns are what a launch reads): normal
    values, sometimes on a coarse grid (ties, ties at the k-th value and across the top-p
    boundary), some ``-inf`` (a whole row, or scattered), rarely a ``+inf``. No NaN: the
    differential tests compare with ``torch.equal`` (the NaN rows, left unchanged, are covered by
    the kernel's own tests)."""
    x = torch.randn(rows, W, generator=g) * rng.choice((0.5, 2.0, 4.0))
    if rng.random() < 0.4:
        x = (x * 2).round() / 2
    for r in range(rows):
        u = rng.random()
        if u < 0.08:
            x[r] = -math.inf
        elif u < 0.2:
            x[r, torch.rand(W, generator=g) < 0.5] = -math.inf
        elif u < 0.26 and V:
            x[r, rng.randrange(V)] = math.inf
    return x


def _case_topk_topp(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    V = rng.choice((1, 2, 7, 16, 33, z["V"] * 3)) if scale == "small" else rng.choice((1000, 5000))
    W = V + rng.choice((0, 0, 3))
    g = gen(rng)
    rows = B + rng.choice((0, 1))
    logits = _logit_rows(rng, g, max(rows, 1), W, V)
    topk, topp = rng.choice(((True, False), (False, True), (True, True)))
    k = torch.randint(1, V + 3, (max(B, 1),), generator=g).to(idx)
    if B and rng.random() < 0.5:
        k[0] = min(V, rng.choice((1, 2, 3)))
    p = torch.rand(max(B, 1), generator=g) * 0.98 + 0.02
    if B > 1:
        p[1] = rng.choice((1.0, 1.5))
    block = rng.choice((8, 16, 32)) if scale == "small" else 1024
    split = rng.random() < 0.5
    mask = rng.choice((-math.inf, -math.inf, -1e4))
    return Case(
        "topk_topp_kernel",
        (rng.randint(1, max(B, 1) + 1),),
        dict(
            LOGITS=logits,
            LOGITS_STRIDE_0=W,
            BUFFER=torch.zeros(1),
            PERCENTILE_TO_STD_TABLE=torch.zeros(200),
            NORMAL_CDF_TO_SIGMA_TABLE=torch.zeros(200),
            K=k if topk else torch.zeros(1),
            P=p if topp else torch.zeros(1),
            BATCH_SIZE=B,
            VOCAB_SIZE=V,
            MASK_VALUE=mask,
            BLOCK_SIZE=block,
            BLOCK_SIZE_TRUNC=block // 2,
            TOPK_ENABLED=topk,
            TOPP_ENABLED=topp,
            SPLIT_COVERS_PONLY=split,
        ),
        inplace=("LOGITS",),
        note=f"B={B} V={V} W={W} topk={topk} topp={topp} split={split} mask={mask}",
    )


_GENERATORS = {
    "expand_kernel": _case_expand,
    "rejection_greedy_sample_kernel": _case_greedy,
    "rejection_random_sample_kernel": _case_random,
    "sample_recovered_tokens_kernel": _case_recovered,
    "eagle_step_slot_mapping_metadata_kernel": _case_eagle_step,
    "eagle_prepare_inputs_padded_kernel": _case_prepare_inputs,
    "eagle_prepare_next_token_padded_kernel": _case_next_token,
    "copy_and_expand_eagle_inputs_kernel": _case_eagle_copy,
    "copy_and_expand_dflash_inputs_kernel": _case_dflash,
    "compute_slot_mapping_kernel": _case_slot_mapping,
    "batch_memcpy_kernel": _case_memcpy,
    "topk_topp_kernel": _case_topk_topp,
}


def _beside_references():
    """The generators that live beside their kernel's reference: ``case_<kernel>`` in the
    reference area of the kernel (``fdkit.reference``)."""
    from fdkit.reference import area_of

    found = {}
    for name in KERNELS:
        if name not in _GENERATORS:
            maker = getattr(area_of(name), f"case_{name}", None)
            if maker is not None:
                found[name] = maker
    return found


_GENERATORS.update(_beside_references())

if set(_GENERATORS) != set(KERNELS):  # a kernel added to the table needs a case generator
    raise ImportError(
        f"fdkit.cases: no case generator for {sorted(set(KERNELS) - set(_GENERATORS))} "
        f"(write case_<kernel>(rng, idx, scale) beside its reference in fdkit.reference)"
    )


def make_case(kernel, seed, idx_dtype=torch.int32, scale="small"):
    """A random valid launch of ``kernel`` (contract name), determined by ``seed``."""
    return _GENERATORS[kernel](random.Random(seed), idx_dtype, scale)
