"""Launch cases for Model Runner V2's inputs kernels (see ``fdkit.mrv2``).

Every case is a launch of the shape Model Runner V2 makes: ``P`` programs over a batch of
requests whose states live in persistent buffers of ``S >= P`` rows (``idx_mapping`` picks
distinct rows in random order), queries laid out back to back by ``query_start_loc``, tables
that are column slices of wider buffers (a row stride beyond the row), outputs poisoned between
guards and state buffers compared whole after the launch. ``idx`` is the dtype of every index
buffer (request indices, offsets, counts, lengths); token buffers take int32 or int64 at random.
"""

import functools

import torch

from fdkit import vllm_source
from fdkit._case import Case, Out, Ptrs, Slice, batch, next_pow2

_BATCH = "vllm.v1.worker.gpu.input_batch"
_BLOCKS = "vllm.v1.worker.gpu.block_table"

_SIZES = {
    "small": dict(B=5, S=3, L=24, K=3, V=40, G=3),
    "large": dict(B=64, S=16, L=400, K=8, V=5000, G=4),
}


@functools.lru_cache(maxsize=None)
def _standing_has(qualname, arg):
    """Whether the signature of vLLM's kernel ``qualname`` in the sources under test (if any)
    has ``arg``: which release's form a case is built for (0.32's where there are none)."""
    try:
        names = vllm_source.arg_names(qualname)
    except FileNotFoundError:
        return False
    return names is not None and arg in names


def _t(values, dtype):
    return torch.tensor(values, dtype=dtype)


def _tok(rng):
    return rng.choice((torch.int32, torch.int64))


def _states(rng, B, extra):
    """``S`` request states and ``B`` distinct ones of them in random order."""
    S = B + rng.randint(0, extra)
    return S, rng.sample(range(S), B)


def _table(rng, rows, cols, dtype, high=1000):
    """A ``[rows, cols]`` table of random values, sometimes a column slice of a wider one
    (returns the argument and its row stride)."""
    extra = rng.choice((0, 0, 3))
    base = torch.tensor(
        [[rng.randint(0, high) for _ in range(cols + extra)] for _ in range(rows)], dtype=dtype
    ).reshape(rows, cols + extra)
    if extra and rows > 1:
        return Slice(base, cols), cols + extra
    return base[:, :cols].contiguous(), cols


def _qsl(rng, lens, start_max=2):
    qsl = [rng.randint(0, start_max)]
    for n in lens:
        qsl.append(qsl[-1] + n)
    return qsl


def _block(rng, vllm_block):
    """A block-size constexpr that only steps a loop: vLLM's, or a small power of two."""
    return rng.choice((vllm_block, 4, 1))


def _prepare_prefill_inputs(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    L = z["L"]
    plen = [rng.randint(1, L) for _ in range(S)]
    nct = [rng.randint(0, plen[s] + 2) for s in range(S)]
    lens = []
    for s in states:
        if nct[s] < plen[s]:  # prefilling: a chunk of the rest of the prompt
            lens.append(rng.randint(0, min(plen[s], L) - nct[s]))
        else:  # decoding: not touched by the kernel
            lens.append(rng.randint(0, 3))
    qsl = _qsl(rng, lens)
    look = rng.choice((0, 1, 1, 2, 3))
    all_ids, all_stride = _table(rng, S, L, _tok(rng))
    nstride = S + rng.choice((0, 2))
    return Case(
        "prepare_prefill_inputs_kernel",
        (B,),
        dict(
            input_ids_ptr=Out(qsl[-1] + rng.randint(0, 2), _tok(rng)),
            next_prefill_tokens_ptr=Out((look, S), _tok(rng), row_stride=nstride),
            next_prefill_tokens_stride=nstride,
            num_lookahead=look,
            idx_mapping_ptr=_t(states, idx),
            query_start_loc_ptr=_t(qsl, idx),
            all_token_ids_ptr=all_ids,
            all_token_ids_stride=all_stride,
            prefill_lens_ptr=_t(plen, idx),
            num_computed_tokens_ptr=_t(nct, idx),
            BLOCK_SIZE=_block(rng, 1024),
            LOOKAHEAD_BLOCK=next_pow2(look) if look else 1,
        ),
        note=f"B={B} S={S} lookahead={look}",
    )


def _prepare_pos_seq_lens(rng, idx, scale):
    z = _SIZES[scale]
    R = batch(rng, z["B"])
    S, states = _states(rng, R, z["S"])
    lens = [rng.randint(0, 6) for _ in range(R)]
    qsl = _qsl(rng, lens)
    max_num_reqs = R + rng.randint(-1, 3)
    return Case(
        "prepare_pos_seq_lens_kernel",
        (R + 1,),
        dict(
            pos_ptr=Out(qsl[-1] + rng.randint(0, 2), rng.choice((idx, torch.int64))),
            seq_lens_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            idx_mapping_ptr=_t(states, idx),
            query_start_loc_ptr=_t(qsl, idx),
            num_computed_tokens_ptr=_t([rng.randint(0, 50) for _ in range(S)], idx),
            max_num_reqs=max_num_reqs,
            BLOCK_SIZE=_block(rng, 1024),
        ),
        note=f"R={R} S={S} max_num_reqs={max_num_reqs}",
    )


def _combine_sampled_and_draft_tokens(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    K = rng.randint(0, z["K"])  # speculative steps
    nns = rng.choice((1, 1, 0))
    block = next_pow2(K + nns) if K + nns else 1
    plen = [rng.randint(1, 20) for _ in range(S)]
    lens, logits, seq = [], [], []
    for s in states:
        n = rng.randint(0, K + nns)  # logits of the request (<= the block)
        q = n + rng.randint(0, 4)  # its query: n logits at its end
        lens.append(q)
        logits.append(n)
        # past the prompt, inside it, or straddling its end
        seq.append(plen[s] + rng.randint(-q - 1, q + 2))
    qsl = _qsl(rng, lens)
    cu = [0]
    for n in logits:
        cu.append(cu[-1] + n)
    draft, dstride = _table(rng, S, max(K, 1), _tok(rng))
    return Case(
        "combine_sampled_and_draft_tokens_kernel",
        (B,),
        dict(
            input_ids_ptr=torch.tensor(
                [rng.randint(0, 999) for _ in range(qsl[-1] + 2)], dtype=_tok(rng)
            ),
            idx_mapping_ptr=_t(states, idx),
            last_sampled_tokens_ptr=_t([rng.randint(0, 999) for _ in range(S)], _tok(rng)),
            query_start_loc_ptr=_t(qsl, idx),
            seq_lens_ptr=_t(seq, idx),
            prefill_len_ptr=_t(plen, idx),
            draft_tokens_ptr=draft,
            draft_tokens_stride=dstride,
            cu_num_logits_ptr=_t(cu, idx),
            logits_indices_ptr=Out(cu[-1] + rng.randint(0, 2), rng.choice((idx, torch.int64))),
            BLOCK_SIZE=block,
            NUM_NEW_SAMPLED_TOKENS=nns,
        ),
        inplace=("input_ids_ptr",),
        note=f"B={B} K={K} nns={nns}",
    )


def _get_num_sampled_and_rejected(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    plen = [rng.randint(1, 20) for _ in range(S)]
    logits = [rng.randint(0, z["K"] + 1) for _ in range(B)]
    cu = [0]
    for n in logits:
        cu.append(cu[-1] + n)
    return Case(
        "get_num_sampled_and_rejected_kernel",
        (B,),
        dict(
            num_sampled_ptr=_t([rng.randint(0, n) for n in logits] + [7], idx),
            num_rejected_ptr=Out(B + rng.randint(0, 2), idx),
            seq_lens_ptr=_t([plen[s] + rng.randint(-3, 3) for s in states], idx),
            cu_num_logits_ptr=_t(cu, idx),
            idx_mapping_ptr=_t(states, idx),
            prefill_len_ptr=_t(plen, idx),
        ),
        inplace=("num_sampled_ptr",),
        note=f"B={B}",
    )


def _post_update(rng, idx, scale, drafts=None):
    """``drafts``: vLLM 0.34's form (draft tokens copied to the state rows); None: the form of
    the sources under test."""
    if drafts is None:
        drafts = _standing_has(f"{_BATCH}._post_update_kernel", "draft_tokens_ptr")
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    states = [s if rng.random() > 0.15 else -1 for s in states]  # skipped rows
    K, L, V = z["K"], z["L"], z["V"]
    total = [rng.randint(0, L - K - 1) for _ in range(S)]
    nsamp = [rng.randint(0, K + 1) for _ in range(B)]
    lens = [rng.randint(0, K + 3) for _ in range(B)]
    qsl = _qsl(rng, lens)
    sampled, sstride = _table(rng, max(B, 1), K + 1, _tok(rng), high=V - 1)
    all_ids, astride = _table(rng, S, L, _tok(rng))
    counts = rng.random() < 0.7
    bins, bstride = _table(rng, S, V, idx, high=5) if counts else (None, 0)
    extra, extra_inplace = {}, ()
    if drafts:
        nd = rng.randint(0, z["K"])
        given = rng.random() < 0.8
        extra = dict(
            draft_tokens_ptr=_t([rng.randint(0, 999) for _ in range(B * nd)], _tok(rng))
            if given
            else None,
            draft_tokens_out_ptr=_t([rng.randint(0, 999) for _ in range(S * nd + 1)], _tok(rng)),
            num_draft_tokens=nd,
        )
        extra_inplace = ("draft_tokens_out_ptr",)
    return Case(
        "post_update_with_drafts_kernel" if drafts else "post_update_kernel",
        (B,),
        dict(
            idx_mapping_ptr=_t(states, idx),
            num_computed_tokens_ptr=_t([rng.randint(0, 50) for _ in range(S)], idx),
            last_sampled_tokens_ptr=_t([rng.randint(0, 999) for _ in range(S)], _tok(rng)),
            output_bin_counts_ptr=bins,
            output_bin_counts_stride=bstride,
            sampled_tokens_ptr=sampled,
            sampled_tokens_stride=sstride,
            num_sampled_ptr=_t(nsamp, idx),
            num_rejected_ptr=_t([rng.randint(0, K) for _ in range(B)], idx),
            query_start_loc_ptr=_t(qsl, idx) if rng.random() < 0.85 else None,
            all_token_ids_ptr=all_ids,
            all_token_ids_stride=astride,
            total_len_ptr=_t(total, idx),
            **extra,
        ),
        inplace=(
            "num_computed_tokens_ptr",
            "last_sampled_tokens_ptr",
            "all_token_ids_ptr",
            "total_len_ptr",
        )
        + (("output_bin_counts_ptr",) if counts else ())
        + extra_inplace,
        note=f"B={B} S={S} counts={counts}",
    )


def _post_update_num_computed_tokens(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    qsl = _qsl(rng, [rng.randint(0, 6) for _ in range(B)])
    return Case(
        "post_update_num_computed_tokens_kernel",
        (B,),
        dict(
            idx_mapping_ptr=_t(states, idx),
            num_computed_tokens_ptr=_t([rng.randint(0, 50) for _ in range(S)], idx),
            query_start_loc_ptr=_t(qsl, idx),
        ),
        inplace=("num_computed_tokens_ptr",),
        note=f"B={B} S={S}",
    )


def _expand_idx_mapping(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    max_len = rng.randint(1, z["K"] + 1)
    block = next_pow2(max_len)
    logits = [rng.randint(0, block if rng.random() < 0.2 else max_len) for _ in range(B)]
    cu = [rng.randint(0, 1)]
    for n in logits:
        cu.append(cu[-1] + n)
    return Case(
        "expand_idx_mapping_kernel",
        (B,),
        dict(
            idx_mapping_ptr=_t(states, idx),
            expanded_idx_mapping_ptr=Out(cu[-1] + rng.randint(0, 2), idx),
            expanded_local_pos_ptr=Out(cu[-1] + rng.randint(0, 2), rng.choice((idx, torch.int32))),
            cu_num_logits_ptr=_t(cu, idx),
            BLOCK_SIZE=block,
        ),
        note=f"B={B} block={block}",
    )


def _gather_block_tables(rng, idx, scale, window=None):
    """``window``: vLLM 0.34's form (sliding-window entries nulled); None: the form of the
    sources under test."""
    if window is None:
        window = _standing_has(f"{_BLOCKS}._gather_block_tables_kernel", "block_sizes_ptr")
    z = _SIZES[scale]
    G = rng.randint(1, z["G"])
    B = batch(rng, z["B"])
    P = B + rng.randint(0, 2)  # padded rows
    S, states = _states(rng, B, z["S"])
    widths = [rng.randint(0, 6) for _ in range(G)]  # max blocks per group (the row stride)
    src = [
        torch.tensor([rng.randint(0, 500) for _ in range(S * w)], dtype=torch.int32) for w in widths
    ]
    dst = [Out((max(P, 1) * w,), torch.int32) for w in widths]
    num_reqs = B if rng.random() < 0.9 else B + rng.randint(-1, 1)
    num_reqs = max(0, min(num_reqs, P))
    nbstride = S + rng.choice((0, 2))
    counts = torch.zeros(G, nbstride, dtype=idx)
    for g, w in enumerate(widths):
        counts[g, :S] = torch.tensor([rng.randint(0, w) for _ in range(S)], dtype=idx)
    extra = {}
    if window:
        mask = rng.random() < 0.7
        reach = _t([rng.choice((0, rng.randint(1, 20))) for _ in range(G)], torch.int32)
        extra = dict(
            num_computed_tokens_ptr=_t([rng.randint(0, 60) for _ in range(S)], idx)
            if mask
            else reach,  # as vLLM passes it when not masking: not read
            sliding_window_reach_ptr=reach,
            block_sizes_ptr=_t([rng.randint(1, 8) for _ in range(G)], torch.int32),
            MASK_SLIDING_WINDOW=mask,
        )
    return Case(
        "gather_block_tables_windowed_kernel" if window else "gather_block_tables_kernel",
        (G, P),
        dict(
            batch_idx_to_req_idx=_t(states + [rng.randint(0, S - 1) if S else 0] * (P - B), idx),
            src_block_table_ptrs=Ptrs(src),
            dst_block_table_ptrs=Ptrs(dst),
            block_table_strides=_t(widths, torch.int64),
            num_blocks_ptr=Slice(counts, S) if nbstride > S and G > 1 else counts[:, :S].clone(),
            num_blocks_stride=nbstride if nbstride > S and G > 1 else S,
            num_reqs=num_reqs,
            **extra,
            BLOCK_SIZE=_block(rng, 1024),
        ),
        note=f"G={G} P={P} B={B} num_reqs={num_reqs} window={window}",
    )


def _compute_slot_mappings(rng, idx, scale, cp=1):
    """``cp``: the context-parallel world size (the kernel tests pass others)."""
    z = _SIZES[scale]
    G = rng.randint(1, z["G"])
    R = batch(rng, z["B"])
    S, states = _states(rng, R, z["S"])
    states = [s if rng.random() > 0.15 else -1 for s in states]  # dummy requests
    # Context parallelism (CP_SIZE > 1) is left to the kernel tests' reference: vLLM's kernel
    # does not run under Triton's interpreter there (``~sharded | is_local`` makes a mask of a
    # dtype the interpreter refuses).
    rank = rng.randint(0, cp - 1)
    inter = rng.choice((1, 2)) if cp > 1 else 1
    sizes = [rng.choice((1, 2, 4, 16)) for _ in range(G)]
    enabled = [rng.random() < 0.85 for _ in range(G)]
    sharded = [rng.random() < 0.7 for _ in range(G)]
    lens = [rng.randint(0, 5) for _ in range(R)]
    qsl = _qsl(rng, lens, start_max=1)
    max_pos = 40
    pos = [rng.randint(0, max_pos) for _ in range(qsl[-1] + 1)]
    # block-table rows wide enough for every position (a sharded group's local position is
    # smaller than the global one)
    widths = [max_pos // sizes[g] + 1 + rng.randint(0, 2) for g in range(G)]
    tables = [
        torch.tensor([rng.randint(0, 300) for _ in range(S * w)], dtype=torch.int32) for w in widths
    ]
    max_num_tokens = qsl[-1] + rng.randint(0, 4)
    sstride = max_num_tokens + rng.choice((0, 3))
    return Case(
        "compute_slot_mappings_kernel",
        (G, R + 1),
        dict(
            max_num_tokens=max_num_tokens,
            idx_mapping=_t(states, idx),
            query_start_loc=_t(qsl, idx),
            pos=_t(pos, rng.choice((idx, torch.int64))),
            block_table_ptrs=Ptrs(tables),
            block_table_strides=_t(widths, torch.int64),
            block_sizes=_t(sizes, rng.choice((torch.int32, idx))),
            slot_mapping_enabled=_t(enabled, torch.bool),
            dcp_sharded=_t(sharded, torch.bool),
            slot_mappings_ptr=Out((G, max_num_tokens), torch.int64, row_stride=sstride),
            slot_mappings_stride=sstride,
            cp_rank=rank,
            CP_SIZE=cp,
            CP_INTERLEAVE=inter,
            PAD_ID=-1,
            TRITON_BLOCK_SIZE=_block(rng, 1024),
        ),
        note=f"G={G} R={R} cp={cp} rank={rank} inter={inter}",
    )


def _apply_write(rng, idx, scale):
    z = _SIZES[scale]
    multi = rng.random() < 0.4
    W = batch(rng, z["B"])
    rows = rng.randint(1, 6)
    if multi:
        G = rng.randint(1, z["G"])
        widths = [rng.randint(1, 8) for _ in range(G)]
        dtype = torch.int32
    else:
        cols = rng.randint(1, 8)
        dtype = rng.choice((torch.int32, torch.int64, torch.float32))
        widths = [cols]
    # distinct (group, row) targets, as vLLM stages one write per row and tensor
    pool = [(g, r) for g in range(len(widths)) for r in range(rows)]
    rng.shuffle(pool)
    W = min(W, len(pool))
    targets = pool[:W]
    starts, lens = [], []
    for g, _ in targets:
        start = rng.randint(0, widths[g] - 1)
        starts.append(start)
        lens.append(rng.randint(0 if rng.random() < 0.1 else 1, widths[g] - start))
    cu, total = [], 0
    for n in lens:
        total += n
        cu.append(total)
    content_dtype = dtype if rng.random() < 0.8 else rng.choice((torch.int32, torch.int64))
    contents = _t([rng.randint(-50, 999) for _ in range(total + rng.randint(0, 2))], content_dtype)

    def _filled(g):
        return torch.tensor(
            [[rng.randint(0, 99) for _ in range(widths[g])] for _ in range(rows)], dtype=dtype
        )

    if multi:
        output = Ptrs([_filled(g) for g in range(len(widths))])
        stride = _t(widths, torch.int64)
    else:
        extra = rng.choice((0, 2))
        wide = torch.tensor(
            [[rng.randint(0, 99) for _ in range(widths[0] + extra)] for _ in range(rows)],
            dtype=dtype,
        )
        output = Slice(wide, widths[0]) if extra and rows > 1 else wide
        stride = widths[0] + extra if extra and rows > 1 else wide.shape[1]
    block = _block(rng, 1024)
    # vLLM 0.34 splits each write over the grid's second axis, as many blocks as the longest
    # write needs; 0.32's kernel loops instead, and its repeated programs write the same values
    chunks = max(1, -(-max(lens, default=0) // block))
    return Case(
        "apply_write_kernel",
        (W, chunks),
        dict(
            output_ptr=output,
            output_stride=stride,
            write_indices_ptr=_t([r for _, r in targets], idx),
            write_starts_ptr=_t(starts, idx),
            write_contents_ptr=contents,
            write_cu_lens_ptr=_t(cu, idx),
            write_group_ids_ptr=_t([g for g, _ in targets], idx) if multi else None,
            BLOCK_SIZE=block,
            MULTI_GROUP=multi,
        ),
        inplace=() if multi else ("output_ptr",),
        note=f"W={W} multi={multi} dtype={dtype} contents={content_dtype}",
    )


def _prompt_logprobs_token_ids(rng, idx, scale):
    z = _SIZES[scale]
    B = batch(rng, z["B"])
    S, states = _states(rng, B, z["S"])
    L = z["L"]
    nct = [rng.randint(0, L - 1) for _ in range(S)]
    lens = []
    for s in states:
        room = L - 1 - nct[s]  # the next tokens stay in the row
        lens.append(rng.randint(0, max(room, 0)))
    qsl = _qsl(rng, lens)
    all_ids, astride = _table(rng, S, L, _tok(rng))
    return Case(
        "prompt_logprobs_token_ids_kernel",
        (B,),
        dict(
            prompt_logprobs_token_ids_ptr=Out(
                qsl[-1] + rng.randint(0, 2), rng.choice((idx, torch.int64))
            ),
            query_start_loc_ptr=_t(qsl, idx),
            idx_mapping_ptr=_t(states, idx),
            num_computed_tokens_ptr=_t(nct, idx),
            all_token_ids_ptr=all_ids,
            all_token_ids_stride=astride,
            BLOCK_SIZE=_block(rng, 1024),
        ),
        note=f"B={B} S={S}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "prepare_prefill_inputs_kernel": _prepare_prefill_inputs,
    "prepare_pos_seq_lens_kernel": _prepare_pos_seq_lens,
    "combine_sampled_and_draft_tokens_kernel": _combine_sampled_and_draft_tokens,
    "get_num_sampled_and_rejected_kernel": _get_num_sampled_and_rejected,
    "post_update_kernel": _post_update,
    "post_update_num_computed_tokens_kernel": _post_update_num_computed_tokens,
    "expand_idx_mapping_kernel": _expand_idx_mapping,
    "gather_block_tables_kernel": _gather_block_tables,
    "compute_slot_mappings_kernel": _compute_slot_mappings,
    "apply_write_kernel": _apply_write,
    "prompt_logprobs_token_ids_kernel": _prompt_logprobs_token_ids,
}
