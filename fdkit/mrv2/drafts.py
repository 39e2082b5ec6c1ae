"""Launch cases for Model Runner V2's drafts kernels (see ``fdkit.mrv2``).

Each case is a launch the way the speculator makes it (``vllm/v1/worker/gpu/spec_decode/``):
persistent buffers longer than the launch touches, request-state indices that are a random
subset of the states in random order, queries of a decode step (one token plus drafts, some
rejected) beside chunked-prefill ones.
"""

import functools

import torch

from fdkit import vllm_source
from fdkit._case import Case, Out, Slice, batch, gen, next_pow2

_TDAR = "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator"


@functools.lru_cache(maxsize=None)
def _standing(qualname):
    """The argument names of vLLM's kernel in the sources under test (``()`` without any):
    a case is built for the signature that stands there (vLLM 0.34 reads some scalars from
    tensors)."""
    try:
        return vllm_source.arg_names(qualname) or ()
    except FileNotFoundError:
        return ()


def _ints(rng, n, low, high, dtype):
    """``n`` random ints in ``[low, high]`` as a tensor of ``dtype``."""
    return torch.tensor([rng.randint(low, high) for _ in range(n)], dtype=dtype)


def _queries(rng, R, longest=6):
    """Query lengths (>= 1: every scheduled request has a token) and their offsets."""
    lens = [rng.randint(1, longest) for _ in range(R)]
    qsl = [0]
    for n in lens:
        qsl.append(qsl[-1] + n)
    return lens, qsl


def _states(rng, R):
    """``R`` distinct request-state indices out of a few more states, in random order."""
    n_states = R + rng.randint(0, 4)
    return rng.sample(range(n_states), R), max(n_states, 1)


def _tokens(rng, n, idx, vocab=300):
    return _ints(rng, n, 0, vocab - 1, idx)


def case_standalone_ar_prepare_prefill_inputs_kernel(rng, idx, scale):
    R = batch(rng, 6)
    lens, qsl = _queries(rng, R)
    states, n_states = _states(rng, R)
    num_tokens = qsl[-1]
    pad = rng.randint(0, 3)
    max_num_reqs = R + rng.randint(0, 4)
    max_model_len = rng.randint(8, 64)
    positions = []
    for n in lens:  # a request's positions are consecutive; some run into the length limit
        first = rng.randint(0, max_model_len + 2)
        positions += list(range(first, first + n))
    rejected = [rng.randint(0, n - 1) for n in lens]
    last_sampled = _tokens(rng, n_states, idx)
    if idx == torch.int64 and n_states and rng.random() < 0.3:
        last_sampled[rng.randrange(n_states)] = 2**33 + rng.randint(0, 9)  # cast to int32
    seq_lens = [rng.randint(qsl[i + 1] - qsl[i], max_model_len + 1) for i in range(R)]
    expanded = num_tokens + R
    return Case(
        "standalone_ar_prepare_prefill_inputs_kernel",
        (R,),
        dict(
            target_input_ids_ptr=_tokens(rng, num_tokens + pad, idx),
            target_positions_ptr=torch.tensor(positions + [0] * pad, dtype=idx),
            last_sampled_ptr=last_sampled.view(-1, 1) if rng.random() < 0.5 else last_sampled,
            idx_mapping_ptr=torch.tensor(states, dtype=idx),
            out_input_ids_ptr=Out(expanded + rng.randint(0, 3), idx),
            out_positions_ptr=Out(expanded + rng.randint(0, 3), idx),
            last_token_indices_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            out_query_start_loc_ptr=Out(max_num_reqs + 1 + rng.randint(0, 2), idx),
            out_seq_lens_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            query_start_loc_ptr=torch.tensor(qsl + [qsl[-1]] * pad, dtype=idx),
            seq_lens_ptr=torch.tensor(seq_lens + [0] * pad, dtype=idx),
            num_rejected_ptr=torch.tensor(rejected, dtype=idx),
            max_num_reqs=max_num_reqs,
            max_model_len=max_model_len,
            BLOCK_SIZE=min(512, next_pow2(max(lens, default=0) + 2)),
        ),
        note=f"R={R} lens={lens} rejected={rejected} max_num_reqs={max_num_reqs}",
    )


def _ngram_layout(rng, idx):
    """The ngram drafter's state: a token table (rows = request states, ``L`` columns, maybe a
    column slice of a wider one), total lengths, the batch's states, and the block size vLLM's
    formula picks for ``L`` -- or a smaller power of two, for more blocks in a small case."""
    B = batch(rng, 4)
    states, n_states = _states(rng, B)
    L = rng.randint(4, 90)
    if L >= 64:
        block_l = 64
    else:
        block_l = max(16, next_pow2(L))
    if rng.random() < 0.6:
        block_l = rng.choice([4, 8, 16, 32])
    n_blocks = -(-L // block_l)
    vocab = rng.choice([2, 3, 5, 300])  # a small vocabulary repeats n-grams
    extra = rng.choice([0, 0, 3])
    base = _tokens(rng, n_states * (L + extra), idx, vocab).view(n_states, L + extra)
    if idx == torch.int64 and rng.random() < 0.3:  # equal as int32 (the scan's cast), not as int64
        base[rng.randrange(n_states), rng.randrange(L)] += 2**32
    tokens = Slice(base, L) if extra else base
    total_len = [rng.choice([0, 1, rng.randint(0, L), L, L]) for _ in range(n_states)]
    num_sampled = [rng.choice([0, 1, 1, 2, 3]) for _ in range(B)]
    return B, states, n_states, L, block_l, n_blocks, tokens, base.stride(0), total_len, num_sampled


def _lookup_sizes(rng):
    min_n = rng.randint(1, 4)
    return min_n, rng.randint(min_n, 5)


def case_ngram_scan_kernel(rng, idx, scale):
    B, states, n_states, L, block_l, n_blocks, tokens, stride, total_len, num_sampled = (
        _ngram_layout(rng, idx)
    )
    min_n, max_n = _lookup_sizes(rng)
    rows = B + rng.randint(0, 2)
    row_stride = n_blocks + rng.choice([0, 0, 2])
    return Case(
        "ngram_scan_kernel",
        (B, n_blocks),
        dict(
            token_ids_ptr=tokens,
            token_ids_stride=stride,
            idx_mapping_ptr=torch.tensor(states, dtype=idx),
            total_len_ptr=torch.tensor(total_len, dtype=idx),
            num_sampled_ptr=torch.tensor(num_sampled, dtype=idx),
            scratch_ptr=Out((rows, n_blocks), idx, row_stride=row_stride),
            scratch_stride=row_stride,
            L=L,
            MIN_N=min_n,
            MAX_N=max_n,
            MAX_N_PO2=max(1, next_pow2(max_n)),
            BLOCK_L=block_l,
        ),
        note=f"B={B} L={L} BLOCK_L={block_l} n={min_n}..{max_n} lens={total_len}",
    )


def case_ngram_finalize_kernel(rng, idx, scale):
    B, states, n_states, L, block_l, n_blocks, tokens, stride, total_len, num_sampled = (
        _ngram_layout(rng, idx)
    )
    K = rng.randint(1, 5)
    rows = B + rng.randint(0, 2)
    extra = rng.choice([0, 0, 2])
    scores = []
    for r in range(rows):  # packed (n, pos) scores as the scan writes them, 0, or noise
        row = []
        for _ in range(n_blocks):
            seq = total_len[states[r]] if r < B else L
            n = rng.randint(1, 5)
            kind = rng.random()
            if kind < 0.5 and seq > n:
                row.append(n * (L + 1) + rng.randint(0, seq - n - 1) + 1)
            elif kind < 0.9:
                row.append(0)
            else:
                row.append(rng.randint(-5, 3 * (L + 1)))
        scores.append(row + [0] * extra)
    scratch = torch.tensor(scores, dtype=idx).view(rows, n_blocks + extra)
    last = _tokens(rng, n_states, idx)
    return Case(
        "ngram_finalize_kernel",
        (B,),
        dict(
            token_ids_ptr=tokens,
            token_ids_stride=stride,
            idx_mapping_ptr=torch.tensor(states, dtype=idx),
            total_len_ptr=torch.tensor(total_len, dtype=idx),
            num_sampled_ptr=torch.tensor(num_sampled, dtype=idx),
            last_sampled_ptr=last.view(-1, 1),
            scratch_ptr=Slice(scratch, n_blocks) if extra else scratch,
            scratch_stride=scratch.stride(0),
            drafts_ptr=Out(B * K + rng.randint(0, 3), idx),
            L=L,
            N_BLOCKS=n_blocks,
            K=K,
            K_PO2=next_pow2(K),
            N_BLOCKS_PO2=next_pow2(n_blocks),
        ),
        note=f"B={B} L={L} K={K} n_blocks={n_blocks} lens={total_len} scores={scores}",
    )


def case_target_dependent_ar_prepare_prefill_inputs_kernel(rng, idx, scale):
    R = batch(rng, 6)
    lens, qsl = _queries(rng, R)
    states, n_states = _states(rng, R)
    num_tokens, pad = qsl[-1], rng.randint(0, 3)
    max_num_reqs = R + rng.randint(0, 4)
    rejected = [rng.randint(0, n - 1) for n in lens]
    sampled = [rng.choice([0, 1, 1, 2]) for _ in range(R)]  # 0: a chunked prefill
    last = _tokens(rng, n_states, idx)
    if idx == torch.int64 and rng.random() < 0.3:
        last[rng.randrange(n_states)] = 2**33 + rng.randint(0, 9)  # cast to int32
    lookahead = rng.randint(1, 2)  # vLLM's [num_prefill_lookahead, max_num_reqs], read flat
    seq_lens = [rng.randint(n, 100) for n in lens]
    return Case(
        "target_dependent_ar_prepare_prefill_inputs_kernel",
        (R,),
        dict(
            last_token_indices_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            draft_current_step_ptr=Out(1, idx),
            draft_input_ids_ptr=Out(num_tokens + pad, idx),
            draft_positions_ptr=Out(num_tokens + pad, idx),
            draft_query_start_loc_ptr=Out(max_num_reqs + 1 + rng.randint(0, 2), idx),
            draft_seq_lens_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            target_input_ids_ptr=_tokens(rng, num_tokens + pad, idx),
            target_positions_ptr=_ints(rng, num_tokens + pad, 0, 1000, idx),
            idx_mapping_ptr=torch.tensor(states, dtype=idx),
            last_sampled_ptr=last.view(-1, 1),
            next_prefill_tokens_ptr=_tokens(rng, lookahead * n_states, idx).view(lookahead, -1),
            num_sampled_ptr=torch.tensor(sampled, dtype=idx),
            num_rejected_ptr=torch.tensor(rejected, dtype=idx),
            query_start_loc_ptr=torch.tensor(qsl + [qsl[-1]] * pad, dtype=idx),
            seq_lens_ptr=torch.tensor(seq_lens + [0] * pad, dtype=idx),
            max_num_reqs=max_num_reqs,
            BLOCK_SIZE=rng.choice([1024, 4]),
        ),
        note=f"R={R} lens={lens} rejected={rejected} sampled={sampled}",
    )


def case_target_dependent_ar_prepare_decode_inputs_kernel(rng, idx, scale):
    R = batch(rng, 6)
    K = rng.randint(2, 4)
    max_num_reqs = R + rng.randint(0, 4)
    max_model_len = rng.randint(8, 40)
    extra = rng.randint(0, 2)
    table = _tokens(rng, (R + extra) * K, idx).view(R + extra, K)
    rejected = [rng.randint(0, K) for _ in range(R)]
    target_seq_lens = [rng.randint(r + 1, max_model_len + 1) for r in rejected]
    return Case(
        "target_dependent_ar_prepare_decode_inputs_kernel",
        (R + 1,),
        dict(
            draft_tokens_ptr=Slice(table, 1),  # column 0 of the drafts table, rows K apart
            draft_tokens_stride=K,
            target_seq_lens_ptr=torch.tensor(target_seq_lens, dtype=idx),
            num_rejected_ptr=torch.tensor(rejected, dtype=idx),
            input_ids_ptr=Out(R + extra, idx),
            positions_ptr=_ints(rng, R + extra, 0, max_model_len, idx),
            sample_src_positions_ptr=_ints(rng, R + extra, 0, 100, idx),
            query_start_loc_ptr=Out(max_num_reqs + 1 + extra, idx),
            seq_lens_ptr=Out(max(R, max_num_reqs) + extra, idx),
            max_model_len=max_model_len,
            max_num_reqs=max_num_reqs,
            BLOCK_SIZE=rng.choice([1024, 4]),
            ADVANCE_DRAFT_POSITIONS=rng.random() < 0.7,
        ),
        inplace=("positions_ptr", "sample_src_positions_ptr"),
        note=f"R={R} K={K} rejected={rejected}",
    )


def case_target_dependent_ar_update_draft_inputs_kernel(rng, idx, scale):
    R = batch(rng, 5)
    steps = rng.randint(1, 4)
    step = rng.randrange(steps) if rng.random() < 0.3 else rng.randrange(max(steps - 1, 1))
    rows = R + rng.randint(0, 2)
    H = rng.randint(1, 40)
    # (source, destination) dtypes: vLLM copies the model dtype to itself; a conversion rounds
    # as the compiled kernel's store does (to nearest even). Not float32 -> bfloat16 here:
    # Triton's interpreter truncates that one (its cast passes no rounding mode), unlike the
    # compiled kernel; tests/test_mrv2_drafts.py checks it against torch's rounding instead.
    src_dtype, dtype = rng.choice(
        [(torch.float32, torch.float32)] * 3
        + [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16)]
        + [(torch.float32, torch.float16), (torch.bfloat16, torch.float32)]
    )
    max_model_len = rng.randint(8, 40)
    out_stride = steps + rng.choice([0, 0, 2])
    hid_stride = H + rng.choice([0, 0, 3])
    src = torch.randn(rows, H + rng.choice([0, 0, 5]), generator=gen(rng)).to(src_dtype)
    return Case(
        "target_dependent_ar_update_draft_inputs_kernel",
        (R,),
        dict(
            output_draft_tokens_ptr=Out((rows, steps), idx, row_stride=out_stride),
            output_draft_tokens_stride=out_stride,
            next_input_hidden_states_ptr=Out((rows, H), dtype, row_stride=hid_stride),
            next_input_hidden_states_stride=hid_stride,
            input_ids_ptr=Out(rows, idx),
            positions_ptr=_ints(rng, rows, 0, max_model_len, idx),
            sample_src_positions_ptr=_ints(rng, rows, 0, 100, idx),
            seq_lens_ptr=_ints(rng, rows, 1, max_model_len, idx),
            draft_tokens_ptr=_tokens(rng, R, idx),
            current_draft_step_ptr=torch.tensor(step, dtype=idx),
            hidden_states_ptr=Slice(src, H) if src.shape[1] > H else src,
            hidden_states_stride=src.stride(0),
            hidden_size=H,
            **(
                # vLLM 0.34: a one-element int32 tensor (its max_model_len_gpu)
                {"max_model_len_ptr": torch.tensor([max_model_len], dtype=torch.int32)}
                if "max_model_len_ptr" in _standing(f"{_TDAR}._update_draft_inputs_kernel")
                else {"max_model_len": max_model_len}
            ),
            num_speculative_steps=steps,
            BLOCK_SIZE=rng.choice([1024, 16]),
            ADVANCE_DRAFT_POSITIONS=rng.random() < 0.7,
        ),
        inplace=("positions_ptr", "sample_src_positions_ptr", "seq_lens_ptr"),
        note=f"R={R} step={step}/{steps} H={H} {src_dtype}->{dtype}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "standalone_ar_prepare_prefill_inputs_kernel": (
        case_standalone_ar_prepare_prefill_inputs_kernel
    ),
    "ngram_scan_kernel": case_ngram_scan_kernel,
    "ngram_finalize_kernel": case_ngram_finalize_kernel,
    "target_dependent_ar_prepare_prefill_inputs_kernel": (
        case_target_dependent_ar_prepare_prefill_inputs_kernel
    ),
    "target_dependent_ar_prepare_decode_inputs_kernel": (
        case_target_dependent_ar_prepare_decode_inputs_kernel
    ),
    "target_dependent_ar_update_draft_inputs_kernel": (
        case_target_dependent_ar_update_draft_inputs_kernel
    ),
}
