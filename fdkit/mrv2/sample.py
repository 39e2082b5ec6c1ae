"""Launch cases for Model Runner V2's sample kernels (see ``fdkit.mrv2``).

Each case launches the grid vLLM's host code computes for its shapes (``apply_temperature``,
``gumbel_sample``, ``apply_min_p``, ``apply_penalties``, ``bincount``), with a vocabulary small
enough for the interpreter and, where the grid formula allows, block sizes below vLLM's so
that rows span several blocks. Logits are row-strided views between guards (a column slice of
a wider buffer), with -inf and NaN entries and ties; persistent per-request buffers are longer
than the batch needs.
"""

import torch

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
    v = rng.randint(1, 300)
    bs = rng.choice((32, 64, 128, 1024))
    nb = _cdiv(v, bs)
    fp64 = rng.random() < 0.3
    g = gen(rng)
    values = _logits(rng, n, v)
    logits, stride = _rows(values, rng)
    seeds = torch.randint(-(2**62), 2**62, (states,), generator=g)
    if idx == torch.int32:
        seeds = seeds.to(torch.int32)
    positions = torch.randint(0, 2**31 - 1, (n + 1,), generator=g).to(idx)
    # The logits-cache store (``mask=mask & is_valid_req``) stops Triton 3.9's interpreter
    # ("mask has unsupported dtype"): its cases are tests/test_mrv2_sample.py's, against torch.
    cache = False
    per_token = cache and rng.random() < 0.5
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
        expanded_idx_mapping_ptr=_mapping(rng, n, states, idx, invalid=True),
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
    return Case(
        "gumbel_sample_kernel",
        (n, nb),
        args,
        inplace=("logits_cache_ptr",) if cache else (),
        note=f"n={n} v={v} bs={bs} fp64={fp64} cache={cache}; local_max is a score with a "
        "float32 log in it (libm vs numpy: a few ulps)",
        tolerance={"local_max_ptr": (1e-5, 1e-5)},
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "temperature_kernel": _temperature,
    "gumbel_sample_kernel": _gumbel,
    "min_p_kernel": _min_p,
    "penalties_kernel": _penalties,
    "bincount_kernel": _bincount,
}
