"""Launch cases for Model Runner V2's outputs kernels (see ``fdkit.mrv2``).

Logits rows as the sampler hands them over: mostly finite, with the ``-inf`` of masked tokens
(top-k/top-p leave most of a row ``-inf``), an occasional ``+inf`` and NaNs at a random rate
(none, a few, most, all). Layouts vary where the kernels take strides: contiguous, a column
slice of a wider buffer (padded rows), more rows than the launch reads (a persistent buffer),
and for the mask kernel, which takes a column stride too, a transposed table. Row counts come
only from the grid; ``BLOCK_SIZE`` is drawn among powers of two >= 8 (the kernels' results do
not depend on it; small blocks make the interpreter run the loop-carried counts over several
blocks), 8192 being vLLM's.
"""

import torch

from fdkit._case import Case, Out, Slice, batch, gen

_BLOCKS = (8, 16, 64, 256, 8192)
_MASK_POISON = 0xA5  # uint8 outputs cannot hold the integer poison


def _logits(rng, rows, vocab, dtype=torch.float32):
    """``(tensor or Slice, row stride, col stride)``: ``rows`` rows of ``vocab`` logits in a
    random layout, with -inf, +inf and NaN at random rates."""
    g = gen(rng)
    extra_rows = rng.choice((0, 0, 2))
    pad = rng.choice((0, 0, 3, 17))
    x = torch.randn((rows + extra_rows, vocab + pad), generator=g) * rng.choice((1.0, 30.0))
    u = torch.rand(x.shape, generator=g)
    ninf, pinf, nan = (
        rng.choice((0.0, 0.5, 0.95)),
        rng.choice((0.0, 0.01)),
        rng.choice((0.0, 0.0, 0.02, 0.5, 1.0)),
    )
    x[u < ninf] = float("-inf")
    x[(u >= ninf) & (u < ninf + pinf)] = float("inf")
    x[torch.rand(x.shape, generator=g) < nan] = float("nan")
    x = x.to(dtype)
    layout = rng.random()
    if layout < 0.2 and rows + extra_rows > 1 and vocab > 1:
        # a transposed table: rows 1 apart, columns a row length apart
        t = x[:, :vocab].t().contiguous().t()
        return t, t.stride(0), t.stride(1)
    if pad:
        return Slice(x, vocab), x.shape[1], 1
    return x[:, :vocab].contiguous(), vocab, 1


def case_num_nans_kernel(rng, idx, scale):
    rows = batch(rng, 6)
    vocab = 0 if rng.random() < 0.05 else rng.randint(1, 300)
    dtype = torch.float16 if rng.random() < 0.2 else torch.float32
    logits, stride, _ = _logits(rng, rows, vocab, dtype)
    if not isinstance(logits, Slice) and logits.stride(-1) != 1:
        logits = logits.contiguous()  # this kernel reads columns at unit stride
        stride = vocab
    args = dict(
        logits_ptr=logits,
        logits_stride=stride,
        num_nans_ptr=Out(rows + rng.choice((0, 0, 2)), idx),
        vocab_size=vocab,
        BLOCK_SIZE=rng.choice(_BLOCKS),
    )
    return Case("num_nans_kernel", (rows,), args, note=f"{rows} rows of {vocab} ({dtype})")


def case_compact_sampling_mask_kernel(rng, idx, scale):
    rpr = rng.choice((1, 1, 2, 3, 4))  # 1: the Sampler; K + 1: the rejection sampler
    reqs = batch(rng, 5)
    per_req = [rng.randint(1, rpr) for _ in range(reqs)]
    # mostly every logits row sampled; fewer after rejections, none for a chunked prefill
    sampled = [n if rng.random() < 0.6 else rng.randint(0, n) for n in per_req]
    starts, at = [], 0
    for n in per_req:
        starts.append(at)
        at += n + rng.choice((0, 0, 1))
    starts.append(at)  # cu_num_logits has num_reqs + 1 entries
    vocab = rng.randint(1, 300)
    logits, rs, cs = _logits(rng, max(at, 1), vocab)
    kept = rng.choice((0, 1, rng.randint(1, vocab), vocab))  # min(top_k, vocab, 2048)
    out_rows = reqs * rpr
    nbytes = (vocab + 7) // 8
    ids_stride = kept + rng.choice((0, 0, 5))
    mask_stride = nbytes + rng.choice((0, 0, 3))
    args = dict(
        logits_ptr=logits,
        logits_row_stride=rs,
        logits_col_stride=cs,
        cu_num_logits_ptr=torch.tensor(starts, dtype=idx),
        num_sampled_tokens_ptr=torch.tensor(sampled, dtype=idx).reshape(reqs),
        token_ids_ptr=Out((out_rows, kept), idx, row_stride=ids_stride if kept else None),
        token_ids_row_stride=ids_stride if kept else 0,
        packed_mask_ptr=Out(
            (out_rows, nbytes), torch.uint8, fill=_MASK_POISON, row_stride=mask_stride
        ),
        packed_mask_row_stride=mask_stride,
        counts_ptr=Out(out_rows + rng.choice((0, 0, 2)), idx),
        vocab_size=vocab,
        max_num_kept=kept,
        ROWS_PER_REQUEST=rpr,
        BLOCK_SIZE=rng.choice(_BLOCKS),
    )
    return Case(
        "compact_sampling_mask_kernel",
        (out_rows,),
        args,
        note=f"{reqs} requests x {rpr} rows, sampled {sampled}, V={vocab}, kept={kept}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "num_nans_kernel": case_num_nans_kernel,
    "compact_sampling_mask_kernel": case_compact_sampling_mask_kernel,
}
