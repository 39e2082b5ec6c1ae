"""Launch cases for Model Runner V2's sample kernels (see ``fdkit.mrv2``).

Each case launches the grid vLLM's host code computes for its shapes (``apply_temperature``,
``gumbel_sample`` and its combine, ``greedy_argmax``, ``apply_min_p``, ``apply_penalties``,
``bincount``), with a vocabulary small
enough for the interpreter and, where the grid formula allows, block sizes below vLLM's so
that rows span several blocks. Logits are row-strided views between guards (a column slice of
a wider buffer), with -inf and NaN entries and ties; persistent per-request buffers are longer
than the batch needs.
"""

import torch

from fdkit import vllm_source
from fdkit._case import Case, Out, Slice, batch, gen

__all__ = ["CASES"]


def _cdiv(a, b):
    return -(-a // b)


def _logits(rng, n, v, dtype=torch.float32, specials=True):
    """``[n, v]`` logits: normal values, some rounded to force ties, some -inf and NaN."""
    g = gen(rng)
    x = torch.randn(n, v, generator=g) * rng.choice((1.0, 3.0, 10.0))
    if specials and n * v:
        if rng.random() < 0.5:  # ties
            x = torch.round(x)
        for _ in range(rng.randint(0, 3)):
            x[rng.randrange(n), rng.randrange(v)] = float("-inf")
        if rng.random() < 0.3:
            x[rng.randrange(n), rng.randrange(v)] = float("nan")
        if rng.random() < 0.15:  # a row cut down to a handful of candidates, as top-k leaves it
            r = rng.randrange(n)
            keep = x[r].clone()
            x[r] = float("-inf")
            for _ in range(rng.randint(1, 4)):
                c = rng.randrange(v)
                x[r, c] = keep[c]
        if rng.random() < 0.1:
            # a row with no number above -inf: -inf and NaN lanes (argmaxes read NaN as -inf),
            # a -inf in every 8 (a block of NaN only is past what vLLM's kernels can run under
            # the interpreter: its nanargmax raises)
            r = rng.randrange(n)
            x[r] = float("-inf")
            x[r, torch.rand(v, generator=g) < rng.choice((0.1, 0.5, 1.0))] = float("nan")
            x[r, 7::8] = float("-inf")
    return x.to(dtype)


def _rows(values, rng):
    """``values`` as a column slice of a wider buffer (rows a random distance apart) and that
    distance; the columns past the slice hold NaN, which a kernel reading them would show."""
    n, v = values.shape
    extra = rng.choice((0, 0, 3, 17))
    base = torch.cat([values, torch.full((n, extra), float("nan"), dtype=values.dtype)], 1)
    return Slice(base, v), v + extra


def _mapping(rng, n, states, idx, invalid=False):
    """Each token's request state (a persistent buffer: longer than ``n``)."""
    lo = -1 if invalid else 0
    vals = [rng.randint(lo, states - 1) for _ in range(n + rng.randint(0, 3))]
    return torch.tensor(vals, dtype=idx)


def _per_state(rng, states, choices, dtype=torch.float32):
    vals = [
        rng.choice(choices) if rng.random() < 0.6 else rng.uniform(0.05, 2.0) for _ in range(states)
    ]
    return torch.tensor(vals, dtype=dtype)


def _temperature(rng, idx, scale):
    n = batch(rng, 5)
    states = rng.randint(1, 6)
    v = rng.randint(1, 300)
    bs = rng.choice((32, 64, 128, 8192))
    logits, stride = _rows(_logits(rng, n, v), rng)
    return Case(
        "temperature_kernel",
        (n, _cdiv(v, bs)),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            expanded_idx_mapping_ptr=_mapping(rng, n, states, idx),
            temperature_ptr=_per_state(rng, states, (0.0, 1.0, 0.5, 0.7, -1.0)),
            vocab_size=v,
            BLOCK_SIZE=bs,
        ),
        inplace=("logits_ptr",),
        note=f"n={n} v={v} bs={bs}",
    )


def _min_p(rng, idx, scale):
    n = batch(rng, 5)
    states = rng.randint(1, 6)
    v = rng.randint(1, 300)
    bs = rng.choice((32, 64, 1024))
    logits, stride = _rows(_logits(rng, n, v), rng)
    return Case(
        "min_p_kernel",
        (n,),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            expanded_idx_mapping_ptr=_mapping(rng, n, states, idx),
            min_p_ptr=_per_state(rng, states, (0.0, 0.1, 0.5, 1.0)),
            vocab_size=v,
            BLOCK_SIZE=bs,
        ),
        inplace=("logits_ptr",),
        note=f"n={n} v={v}; the threshold adds a float32 log (libm vs numpy: an ulp apart "
        "only where a logit sits on it)",
    )


def _steps(rng, states, idx):
    """A step's tokens: requests of 1-4 tokens each (a decode and its drafts), in order."""
    mapping, local = [], []
    for _ in range(batch(rng, 4)):
        r = rng.randrange(states)
        k = rng.randint(1, 4)
        mapping += [r] * k
        local += list(range(k))
    return mapping, local


def _penalties(rng, idx, scale):
    states = rng.randint(1, 5)
    v = rng.randint(1, 300)
    bs = rng.choice((32, 64, 128, 8192))
    mapping, local = _steps(rng, states, idx)
    n = len(mapping)
    g = gen(rng)
    logits, stride = _rows(_logits(rng, n, v), rng)
    words = _cdiv(v, 32)
    mask = torch.randint(-(2**31), 2**31, (states, words), generator=g, dtype=torch.int64)
    mask = mask.to(torch.int32)
    counts = torch.randint(0, 3, (states, v), generator=g, dtype=torch.int32)
    counts = counts * (torch.rand(states, v, generator=g) < 0.2)
    tokens = [
        rng.randrange(v) if rng.random() < 0.9 else rng.randint(-1, v + 5) for _ in range(n + 2)
    ]
    return Case(
        "penalties_kernel",
        (n, _cdiv(v, bs)),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            expanded_idx_mapping_ptr=torch.tensor(mapping + [0], dtype=idx),
            token_ids_ptr=torch.tensor(tokens, dtype=idx),
            expanded_local_pos_ptr=torch.tensor(local + [0], dtype=idx),
            repetition_penalty_ptr=_per_state(rng, states, (1.0, 1.2, 0.8)),
            frequency_penalty_ptr=_per_state(rng, states, (0.0, 0.5, -0.5)),
            presence_penalty_ptr=_per_state(rng, states, (0.0, 0.3, -1.0)),
            prompt_bin_mask_ptr=mask,
            prompt_bin_mask_stride=words,
            output_bin_counts_ptr=counts.to(torch.int32),
            output_bin_counts_stride=v,
            vocab_size=v,
            BLOCK_SIZE=bs,
        ),
        inplace=("logits_ptr",),
        note=f"n={n} v={v} bs={bs}",
    )


def _bincount(rng, idx, scale):
    states = rng.randint(1, 5)
    v = rng.randint(1, 300)
    width = rng.randint(1, 200)
    bs = rng.choice((16, 32, 64, 1024))
    g = gen(rng)
    n = batch(rng, states)
    mapping = rng.sample(range(states), n)  # new requests: distinct states
    prompt = [rng.randint(0, width) for _ in range(states)]
    prefill = [min(width, p + rng.randint(0, 20)) for p in prompt]
    ids = torch.randint(0, v, (states, width + rng.choice((0, 5))), generator=g)
    words = _cdiv(v, 32)
    max_prefill = max((prefill[r] for r in mapping), default=0)
    return Case(
        "bincount_kernel",
        (n, _cdiv(max_prefill, bs)),
        dict(
            expanded_idx_mapping_ptr=torch.tensor(mapping, dtype=idx),
            all_token_ids_ptr=ids.to(idx),
            all_token_ids_stride=ids.shape[1],
            prompt_len_ptr=torch.tensor(prompt, dtype=idx),
            prefill_len_ptr=torch.tensor(prefill, dtype=idx),
            prompt_bin_mask_ptr=Out((states, words), torch.int32, fill=0),
            prompt_bin_mask_stride=words,
            output_bin_counts_ptr=Out((states, v), torch.int32, fill=0),
            output_bin_counts_stride=v,
            BLOCK_SIZE=bs,
        ),
        note=f"n={n} v={v} bs={bs}",
    )


def _gumbel(rng, idx, scale):
    n = batch(rng, 5)
    states = rng.randint(1, 5)
    # now and then a vocabulary of several 1024-blocks and many chunks: the draw skips the
    # logarithms of lanes whose noise bound cannot beat the best so far, so long blocks of
    # near-equal logits (and a huge spread, and +inf) are where a wrong bound would show
    v = rng.randint(1, 300) if rng.random() < 0.8 else rng.randint(1000, 3000)
    bs = rng.choice((32, 64, 128, 1024))
    nb = _cdiv(v, bs)
    fp64 = rng.random() < 0.3
    g = gen(rng)
    values = _logits(rng, n, v) * rng.choice((1.0, 1.0, 0.01, 100.0))
    if n * v and rng.random() < 0.1:
        values[rng.randrange(n), rng.randrange(v)] = float("inf")
    logits, stride = _rows(values, rng)
    seeds = torch.randint(-(2**62), 2**62, (states,), generator=g)
    if idx == torch.int32:
        seeds = seeds.to(torch.int32)
    positions = torch.randint(0, 2**31 - 1, (n + 1,), generator=g).to(idx)
    cache = rng.random() < 0.35
    per_token = cache and rng.random() < 0.5
    if cache:
        # each cache slot (request, column) written by one token at most, as the runner writes
        # it (one token per request when drafting, a draft step per column otherwise): two
        # programs writing one slot leave whichever ran last, an order no launch defines
        states = max(states, n)
        rows = rng.sample(range(states), n)
        mapping = torch.tensor([r if rng.random() < 0.9 else -1 for r in rows], dtype=idx)
        g_states = torch.Generator().manual_seed(rng.randrange(2**31))
        seeds = torch.randint(-(2**62), 2**62, (states,), generator=g_states)
        if idx == torch.int32:
            seeds = seeds.to(torch.int32)
    else:
        mapping = _mapping(rng, n, states, idx, invalid=True)
    args = dict(
        local_argmax_ptr=Out((n, nb), idx, row_stride=nb + rng.choice((0, 2))),
        local_argmax_stride=None,
        local_max_ptr=Out((n, nb), torch.float64 if fp64 else torch.float32),
        local_max_stride=nb,
        logits_cache_ptr=None,
        logits_cache_stride_0=0,
        logits_cache_stride_1=0,
        logits_cache_col_ptr=None,
        logits_cache_source_ptr=None,
        logits_cache_source_stride=0,
        logits_ptr=logits,
        logits_stride=stride,
        expanded_idx_mapping_ptr=mapping,
        seeds_ptr=seeds,
        pos_ptr=positions,
        temp_ptr=_per_state(rng, states, (0.0, 1.0, 0.7)),
        vocab_size=v,
        BLOCK_SIZE=bs,
        IS_DRAFTING=rng.random() < 0.5,
        APPLY_TEMPERATURE=rng.random() < 0.5,
        USE_FP64=fp64,
        PER_TOKEN_COL=per_token,
    )
    args["local_argmax_stride"] = args["local_argmax_ptr"].row_stride
    if cache:
        cols = rng.randint(1, 3)
        width = v + rng.choice((0, 4))
        store = torch.randn(states, cols, width, generator=g)
        args.update(
            logits_cache_ptr=store,
            logits_cache_stride_0=cols * width,
            logits_cache_stride_1=width,
            logits_cache_col_ptr=(
                torch.randint(0, cols, (n + 1,), generator=g).to(idx)
                if per_token
                else torch.tensor(rng.randrange(cols), dtype=idx)
            ),
            logits_cache_source_ptr=torch.randn(n, v, generator=g),
            logits_cache_source_stride=v,
        )
    names = vllm_source.arg_names("vllm.v1.worker.gpu.sample.gumbel._gumbel_sample_kernel")
    if names and "bias_ptr" in names:  # vLLM 0.34's form: bias, cache rows, logits cached
        has_bias = rng.random() < 0.5
        args.update(
            logits_cache_row_mapping_ptr=None,
            bias_ptr=torch.randn(n, v, generator=g) if has_bias else None,
            bias_stride=v if has_bias else 0,
            HAS_BIAS=has_bias,
        )
        if cache:
            if rng.random() < 0.5:
                # distinct cache rows (or -1: not cached), one request state per row
                rows = [r if rng.random() < 0.8 else -1 for r in rng.sample(range(states), states)]
                args["logits_cache_row_mapping_ptr"] = torch.tensor(rows, dtype=idx)
            if rng.random() < 0.5:  # no separate source: the sampled logits are cached
                args.update(logits_cache_source_ptr=None, logits_cache_source_stride=0)
        args = {k: args[k] for k in names}
    return Case(
        "gumbel_sample_kernel",
        (n, nb),
        args,
        inplace=("logits_cache_ptr",) if cache else (),
        note=f"n={n} v={v} bs={bs} fp64={fp64} cache={cache}; local_max is a score with a "
        "float32 log in it (libm vs numpy: a few ulps)",
        tolerance={"local_max_ptr": (1e-5, 1e-5)},
    )


def _next_pow2(n):
    return 1 << max(0, n - 1).bit_length()


def _bias(rng, idx, scale):
    n = batch(rng, 5)
    states = rng.randint(1, 5)
    v = rng.randint(1, 300)
    g = gen(rng)
    wa, wb, ws = rng.randint(1, 8), rng.randint(1, 8), rng.randint(1, 8)
    allowed = torch.randint(0, v, (states, wa), generator=g)
    stop = torch.randint(0, v, (states, ws), generator=g)
    n_allowed = [rng.choice((0, 0, rng.randint(1, wa))) for _ in range(states)]
    n_stop = [rng.choice((0, rng.randint(1, ws))) for _ in range(states)]
    for r in range(states):  # stop tokens that are all the allowed ones: an all -inf row
        k = min(wa, ws)
        if rng.random() < 0.3:
            stop[r, :k] = allowed[r, :k]
            n_allowed[r] = n_stop[r] = k
    values = _logits(rng, n, v)
    logits, stride = _rows(values, rng)
    return Case(
        "bias_kernel",
        (n,),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            vocab_size=v,
            expanded_idx_mapping_ptr=_mapping(rng, n, states, idx),
            num_allowed_token_ids_ptr=torch.tensor(n_allowed, dtype=idx),
            allowed_token_ids_ptr=allowed.to(idx),
            allowed_token_ids_stride=wa,
            num_logit_bias_ptr=torch.tensor(
                [rng.choice((0, rng.randint(1, wb))) for _ in range(states)], dtype=idx
            ),
            bias_token_ids_ptr=torch.randint(0, v, (states, wb), generator=g).to(idx),
            bias_token_ids_stride=wb,
            bias_ptr=torch.randn(states, wb, generator=g),
            bias_stride=wb,
            pos_ptr=torch.randint(0, 6, (n + 1,), generator=g).to(idx),
            min_lens_ptr=torch.randint(0, 8, (states,), generator=g).to(idx),
            num_stop_token_ids_ptr=torch.tensor(n_stop, dtype=idx),
            restore_when_all_masked_ptr=torch.randint(0, 2, (states,), generator=g).to(idx),
            stop_token_ids_ptr=stop.to(idx),
            stop_token_ids_stride=ws,
            BLOCK_SIZE=_next_pow2(max(wa, wb, ws)),
            LOGITS_BLOCK_SIZE=rng.choice((64, 8192)),
            CHECK_ALL_MASKED_ROWS=rng.random() < 0.6,
        ),
        inplace=("logits_ptr",),
        note=f"n={n} v={v}",
    )


def _bad_words(rng, idx, scale):
    states = rng.randint(1, 4)
    alphabet = rng.randint(2, 5)  # few distinct tokens: prefixes match
    v = rng.randint(alphabet, 40)
    g = gen(rng)
    maxw, width = 4, 12
    prompt = [rng.randint(0, 5) for _ in range(states)]
    total = [p + rng.randint(0, 6) for p in prompt]
    all_ids = torch.randint(0, alphabet, (states, 12), generator=g)
    offsets = torch.zeros(states, maxw + 1, dtype=torch.int64)
    words = torch.randint(0, alphabet, (states, width), generator=g)
    num = []
    for r in range(states):
        k = rng.randint(0, maxw)
        ends, end = [0], 0
        for _ in range(k):
            end = min(width, end + rng.randint(1, 3))
            ends.append(end)
        if len(set(ends)) < len(ends):  # ran out of room: fewer words
            ends = sorted(set(ends))
        offsets[r, : len(ends)] = torch.tensor(ends)
        offsets[r, len(ends) :] = ends[-1] + 1
        num.append(len(ends) - 1)
    mapping, local = _steps(rng, states, idx)
    n = len(mapping)
    logits, stride = _rows(_logits(rng, n, v, specials=False), rng)
    most = max((num[r] for r in mapping), default=0)
    return Case(
        "bad_words_kernel",
        (n, most),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            expanded_idx_mapping_ptr=torch.tensor(mapping + [0], dtype=idx),
            bad_word_token_ids_ptr=words.to(idx),
            bad_word_token_ids_stride=width,
            bad_word_offsets_ptr=offsets.to(idx),
            bad_word_offsets_stride=maxw + 1,
            num_bad_words_ptr=torch.tensor(num, dtype=idx),
            all_token_ids_ptr=all_ids.to(idx),
            all_token_ids_stride=12,
            prompt_len_ptr=torch.tensor(prompt, dtype=idx),
            total_len_ptr=torch.tensor(total, dtype=idx),
            input_ids_ptr=torch.randint(0, alphabet, (n + 1,), generator=g).to(idx),
            expanded_local_pos_ptr=torch.tensor(local + [0], dtype=idx),
        ),
        inplace=("logits_ptr",),
        note=f"n={n} words={num}",
    )


def _topk_log_softmax(rng, idx, scale):
    n = batch(rng, 5)
    v = rng.randint(1, 300)
    k = rng.randint(0, 6)
    g = gen(rng)
    logits, stride = _rows(_logits(rng, n, v), rng)
    ids = torch.randint(0, v, (n, k + rng.choice((0, 2))), generator=g)
    return Case(
        "topk_log_softmax_kernel",
        (n,),
        dict(
            output_ptr=Out(n * k, torch.float32),
            logits_ptr=logits,
            logits_stride=stride,
            topk_ids_ptr=ids.to(idx),
            topk_ids_stride=ids.shape[1],
            topk=k,
            vocab_size=v,
            BLOCK_SIZE=rng.choice((32, 64, 1024)),
            TOPK_BLOCK_SIZE=min(_next_pow2(k), 1024),
        ),
        note=f"n={n} v={v} k={k}; exp/log of the C library vs numpy's: an ulp or so",
        tolerance={"output_ptr": (1e-5, 1e-5)},
    )


def _ranks(rng, idx, scale):
    n = batch(rng, 5)
    v = rng.randint(1, 300)
    g = gen(rng)
    values = _logits(rng, n, v)
    tokens = torch.randint(0, v, (n + 1,), generator=g)
    if n and rng.random() < 0.3:  # a sampled token at -inf: the padding lanes count
        values[0, tokens[0]] = float("-inf")
    logits, stride = _rows(values, rng)
    return Case(
        "ranks_kernel",
        (n,),
        dict(
            output_ptr=Out(n, idx),
            logits_ptr=logits,
            logits_stride=stride,
            token_ids_ptr=tokens.to(idx),
            vocab_size=v,
            BLOCK_SIZE=rng.choice((32, 64, 8192)),
        ),
        note=f"n={n} v={v}",
    )


def _fill_logprob_token_ids(rng, idx, scale):
    n = batch(rng, 5)
    states = rng.randint(1, 5)
    g = gen(rng)
    k = rng.randint(0, 4)
    own = [rng.choice((0, 0, rng.randint(1, 5))) for _ in range(states)]
    mapping = _mapping(rng, n, states, idx)
    cols = max([k] + [own[r] for r in mapping[:n].tolist()])
    padded = _next_pow2(max(cols, 1))
    per_req = torch.randint(0, 1000, (states, 6), generator=g)
    topk = torch.randint(0, 1000, (n, max(k, 1)), generator=g)
    return Case(
        "fill_logprob_token_ids_kernel",
        (n,),
        dict(
            out_token_ids_ptr=Out((n, 1 + cols), idx, fill=0),
            out_token_ids_stride=1 + cols,
            out_valid_mask_ptr=Out((n, 1 + cols), torch.bool, fill=False),
            out_valid_mask_stride=1 + cols,
            sampled_token_ids_ptr=torch.randint(0, 1000, (n + 1,), generator=g).to(idx),
            topk_indices_ptr=topk.to(idx),
            topk_indices_stride=topk.shape[1],
            expanded_idx_mapping_ptr=mapping,
            num_per_req_token_ids_ptr=torch.tensor(own, dtype=idx),
            per_req_token_ids_ptr=per_req.to(idx),
            per_req_token_ids_stride=6,
            NUM_TOPK=k,
            PADDED_COLS=padded,
        ),
        note=f"n={n} k={k} own={own}",
    )


def _grammar_bitmask(rng, idx, scale):
    reqs = rng.randint(1, 4)
    counts = [rng.randint(0, 3) for _ in range(reqs)]
    cu = [0]
    for c in counts:
        cu.append(cu[-1] + c)
    ms = 4
    v = rng.randint(1, 300)
    g = gen(rng)
    m = batch(rng, 5)
    indices = [rng.randrange(reqs) * ms + rng.randrange(ms) for _ in range(m)]
    words = -(-v // 32)
    width = words if rng.random() < 0.8 else max(1, words - 2)  # a narrower tokenizer vocab
    bitmask = torch.randint(-(2**31), 2**31, (m, width), generator=g, dtype=torch.int64)
    logits, stride = _rows(_logits(rng, max(cu[-1], 1), v, specials=False), rng)
    bs = rng.choice((32, 64, 8192))
    return Case(
        "apply_grammar_bitmask_kernel",
        (m, _cdiv(v, bs)),
        dict(
            logits_ptr=logits,
            logits_stride=stride,
            logits_indices_ptr=torch.tensor(indices + [0], dtype=idx),
            cu_num_logits_ptr=torch.tensor(cu, dtype=idx),
            bitmask_ptr=bitmask.to(torch.int32),
            bitmask_stride=width,
            vocab_size=v,
            MASK_STRIDE=ms,
            BLOCK_SIZE=bs,
        ),
        inplace=("logits_ptr",),
        note=f"m={m} v={v} cu={cu} width={width}",
    )


def _specials(rng, x):
    """Rows the argmax kernels decide by their rules alone, put in now and then: all -inf,
    NaN among -inf (NaN counts as -inf: index 0), +inf ties, all NaN."""
    n, v = x.shape
    for _ in range(rng.randint(0, 2) if n * v else 0):
        r = rng.randrange(n)
        kind = rng.randrange(4)
        if kind == 0:
            x[r] = float("-inf")
        elif kind == 1:
            x[r] = float("-inf")
            x[r, rng.randrange(v)] = float("nan")
        elif kind == 2:
            x[r, rng.randrange(v)] = float("inf")
            x[r, rng.randrange(v)] = float("inf")
        else:
            x[r] = float("nan")
    return x


def _argmax_partial(rng, idx, scale):
    """``greedy_argmax``'s first stage: rows of logits (float32, bfloat16 as vLLM passes them,
    float16) cut into blocks, blocks smaller than vLLM's 4096 so a row spans several; now and
    then a grid block wholly past ``N`` and slots spaced wider than the grid's blocks."""
    n = batch(rng, 5)
    v = rng.randint(1, 300)
    dtype = rng.choice((torch.float32, torch.float32, torch.bfloat16, torch.float16))
    bs = rng.choice((1, 4, 32, 64, 128, 4096))
    cols = v if rng.random() < 0.8 else v - rng.randint(0, v - 1)  # N: the columns read
    parts = _cdiv(cols, bs) + (1 if rng.random() < 0.15 else 0)
    splits = parts + rng.choice((0, 0, 0, 1, 3))
    logits, stride = _rows(_specials(rng, _logits(rng, n, v, dtype)), rng)
    pv_dtype = torch.float32 if rng.random() < 0.8 else torch.float64
    pi_dtype = torch.int32 if rng.random() < 0.5 else idx
    wide = rng.random() < 0.5  # a view of the first ``parts`` columns of [n, SPLITS] slots
    return Case(
        "argmax_partial_kernel",
        (n, parts),
        dict(
            X=logits,
            PV=Out((n, parts), pv_dtype, row_stride=splits) if wide else Out(n * splits, pv_dtype),
            PI=Out((n, parts), pi_dtype, row_stride=splits) if wide else Out(n * splits, pi_dtype),
            N=cols,
            SX=stride,
            SPLITS=splits,
            BLOCK=bs,
        ),
        note=f"n={n} v={v} N={cols} bs={bs} parts={parts} SPLITS={splits} {dtype}",
    )


def _block_maxima(rng, n, width, dtype, nan=True):
    """``[n, width]`` per-block scores: ties, -inf, rows all -inf and (``nan``) NaN after the
    first column of a row, never a row of NaN only."""
    g = gen(rng)
    x = torch.randn(n, width, generator=g, dtype=torch.float64) * 4
    if rng.random() < 0.5:
        x = torch.round(x)
    if n * width:
        for _ in range(rng.randint(0, 3)):
            x[rng.randrange(n), rng.randrange(width)] = float("-inf")
        if rng.random() < 0.2:
            x[rng.randrange(n)] = float("-inf")
        if nan and width > 1 and rng.random() < 0.3:
            x[rng.randrange(n), rng.randint(1, width - 1)] = float("nan")
    return x.to(dtype)


def _argmax_finish(rng, idx, scale):
    """``greedy_argmax``'s second stage: the block maxima and their columns, ``BLOCK`` the
    next power of two of ``SPLITS`` as vLLM launches it, or smaller (blocks past it unread).
    A NaN maximum (the partial stage writes none) is never a row's only lane: the
    interpreter's ``nanargmax`` refuses an all-NaN row."""
    n = batch(rng, 5)
    splits = rng.randint(1, 40)
    bs = _next_pow2(splits) if rng.random() < 0.8 else _next_pow2(splits) // 2 or 1
    g = gen(rng)
    pv_dtype = torch.float32 if rng.random() < 0.8 else torch.float64
    pv = _block_maxima(rng, n, splits, pv_dtype, nan=min(splits, bs) > 1)
    pi = torch.randint(0, 2**31 - 1, (n, splits), generator=g).to(idx)
    return Case(
        "argmax_finish_kernel",
        (n,),
        dict(
            PV=pv,
            PI=pi,
            OUT=Out(n, torch.int64 if rng.random() < 0.7 else torch.int32),
            SPLITS=splits,
            BLOCK=bs,
        ),
        note=f"n={n} SPLITS={splits} BLOCK={bs} {pv_dtype}",
    )


def _gumbel_combine(rng, idx, scale):
    """``gumbel_sample``'s combine: per-block winners and scores (float32, or float64 under
    USE_FP64) with ties, -inf and NaN (the first NaN wins), tables that are column slices of
    wider ones; ``PADDED_NUM_BLOCKS`` the next power of two, or now and then smaller."""
    n = batch(rng, 5)
    nb = rng.randint(1, 40)
    padded = _next_pow2(nb) if rng.random() < 0.85 else max(1, _next_pow2(nb) // 2)
    g = gen(rng)
    scores = _block_maxima(rng, n, nb, rng.choice((torch.float32, torch.float64)))
    if n and rng.random() < 0.2:  # NaN first, or in every lane
        scores[rng.randrange(n), 0] = float("nan")
    if n and rng.random() < 0.1:
        scores[rng.randrange(n)] = float("nan")
    winners = torch.randint(0, 2**40, (n, nb), generator=g).to(idx)
    local_max, max_stride = _rows(scores, rng)
    extra = rng.choice((0, 0, 5))
    wide = torch.cat([winners, torch.full((n, extra), -5, dtype=idx)], 1)
    return Case(
        "gumbel_combine_kernel",
        (n,),
        dict(
            local_argmax_ptr=Slice(wide, nb),
            local_argmax_stride=nb + extra,
            local_max_ptr=local_max,
            local_max_stride=max_stride,
            sampled_ptr=Out(n, torch.int64 if rng.random() < 0.7 else idx),
            num_blocks=nb,
            PADDED_NUM_BLOCKS=padded,
        ),
        note=f"n={n} num_blocks={nb} PADDED={padded} {scores.dtype}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "temperature_kernel": _temperature,
    "gumbel_sample_kernel": _gumbel,
    "gumbel_combine_kernel": _gumbel_combine,
    "argmax_partial_kernel": _argmax_partial,
    "argmax_finish_kernel": _argmax_finish,
    "min_p_kernel": _min_p,
    "penalties_kernel": _penalties,
    "bincount_kernel": _bincount,
    "bias_kernel": _bias,
    "bad_words_kernel": _bad_words,
    "topk_log_softmax_kernel": _topk_log_softmax,
    "ranks_kernel": _ranks,
    "fill_logprob_token_ids_kernel": _fill_logprob_token_ids,
    "apply_grammar_bitmask_kernel": _grammar_bitmask,
}
