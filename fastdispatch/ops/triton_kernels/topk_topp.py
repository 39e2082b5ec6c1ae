"""Top-k / top-p masking of logits rows: our Triton kernels, exact, under vLLM's argument names.

``topk_topp_kernel`` takes the 15 arguments of vLLM 0.30+'s ``_topk_topp_kernel``
(``topk_topp_nosplit.py`` holds the 14 of 0.27-0.29's). vLLM's kernel searches a pivot (a ternary
search seeded from Gaussian tables, within a tolerance); ours computes the kept set
``kernels_cpu.top_k_top_p`` defines, exactly, by bisection on the bit pattern of the values --
the Triton twin the CPU kernel is checked against, under the interpreter and on a GPU:

* every value maps to a monotone integer key (``-0.0`` as ``+0.0``), so "the k-th largest" and
  "the smallest value whose mass above is < p times the kept mass" are each found by a
  bisection of at most 33 passes over the row, each pass a count (or a float64 mass sum) of the
  keys above the midpoint;
* top-k keeps keys ``>=`` the k-th largest key (ties kept; fewer than ``k`` values above
  ``-inf`` keeps the row); top-p then finds that boundary value ``v*`` and keeps, of the values
  equal to it, the first ``ntie`` in index order -- ``ntie`` the count of ``i >= 0`` with
  ``above + i * e* < p * Z`` (``above`` the mass of the values above ``v*``, ``e*`` one tie's
  mass, ``Z`` the kept mass; masses ``exp(x - max)`` in float64 -- IEEE arithmetic on a GPU,
  no approximate ``exp`` -- or one per ``+inf`` value when the row holds one);
* a row holding a NaN, or all ``-inf``, is left as it is; only masked entries are stored.

``BUFFER`` and the two tables are not read (the exact search needs no scratch rows and no
pivot estimate): they are in the signature so a launch binds as vLLM's does.
"""

from .._triton import tl, triton


@triton.jit
def _key(x):
    """The monotone int32 key of float32 ``x`` (``-0.0`` maps as ``+0.0``; no NaN here)."""
    x = tl.where(x == 0.0, 0.0, x)
    b = x.to(tl.int32, bitcast=True)
    return tl.where(b >= 0, b, b ^ 0x7FFFFFFF)


@triton.jit
def _count_ge(row, t, VOCAB_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """How many of the row's keys are ``>= t``."""
    n = tl.zeros((), dtype=tl.int64)
    for start in range(0, VOCAB_SIZE, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        inb = offs < VOCAB_SIZE
        x = tl.load(row + offs, mask=inb, other=float("-inf")).to(tl.float32)
        n += tl.sum(((_key(x).to(tl.int64) >= t) & inb).to(tl.int64), axis=0)
    return n


@triton.jit
def _mass_gt(row, t, floor, m, VOCAB_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """The float64 mass of the kept values (keys ``>= floor``) whose key is ``> t``."""
    z = tl.zeros((), dtype=tl.float64)
    for start in range(0, VOCAB_SIZE, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        inb = offs < VOCAB_SIZE
        x = tl.load(row + offs, mask=inb, other=float("-inf")).to(tl.float32)
        k = _key(x).to(tl.int64)
        if m == float("inf"):
            e = tl.where(x == float("inf"), 1.0, 0.0).to(tl.float64)
        else:
            e = tl.exp(x.to(tl.float64) - m.to(tl.float64))
        z += tl.sum(tl.where(inb & (k >= floor) & (k > t), e, 0.0), axis=0)
    return z


@triton.jit
def _mask_row(
    row,
    k,
    p,
    DO_K,
    DO_P,
    MASK_VALUE: tl.constexpr,
    VOCAB_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """One row in place: top-k (``DO_K``: ``k`` < V) then top-p (``DO_P``: ``p`` < 1)."""
    # pass 1: the maximum, NaNs, values above -inf
    m = tl.full((), float("-inf"), tl.float32)
    nan = tl.zeros((), dtype=tl.int64)
    live = tl.zeros((), dtype=tl.int64)
    for start in range(0, VOCAB_SIZE, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        inb = offs < VOCAB_SIZE
        x = tl.load(row + offs, mask=inb, other=float("-inf")).to(tl.float32)
        isnan = x != x
        nan += tl.sum((isnan & inb).to(tl.int64), axis=0)
        m = tl.maximum(m, tl.max(tl.where(isnan, float("-inf"), x), axis=0))
        live += tl.sum(((x > float("-inf")) & inb).to(tl.int64), axis=0)
    if (nan == 0) and (m > float("-inf")):
        lowest = -2147483649  # below every int32 key
        floor = tl.full((), lowest, tl.int64)
        if DO_K and (live >= k):
            # the largest key t with count(key >= t) >= k: the k-th largest value's key
            lo = tl.full((), -2147483648, tl.int64)
            hi = _key(m).to(tl.int64)
            for _ in range(0, 33):
                if lo < hi:
                    mid = lo + (hi - lo + 1) // 2
                    if _count_ge(row, mid, VOCAB_SIZE, BLOCK_SIZE) >= k:
                        lo = mid
                    else:
                        hi = mid - 1
            floor = lo
        vstar = tl.full((), 2147483647, tl.int64)
        ntie = tl.zeros((), dtype=tl.int64)
        if DO_P:
            z = _mass_gt(row, lowest, floor, m, VOCAB_SIZE, BLOCK_SIZE)
            target = p * z
            # the smallest key t with mass(key > t) < target (a kept value's key)
            lo = floor - 1
            hi = _key(m).to(tl.int64)
            for _ in range(0, 34):
                if hi - lo > 1:
                    mid = lo + (hi - lo) // 2
                    if _mass_gt(row, mid, floor, m, VOCAB_SIZE, BLOCK_SIZE) < target:
                        hi = mid
                    else:
                        lo = mid
            vstar = hi
            above = _mass_gt(row, vstar, floor, m, VOCAB_SIZE, BLOCK_SIZE)
            # one tie's mass: the value whose key is vstar
            b = tl.where(vstar >= 0, vstar, vstar ^ 0x7FFFFFFF).to(tl.int32)
            v = b.to(tl.float32, bitcast=True)
            if m == float("inf"):
                estar = tl.where(v == float("inf"), 1.0, 0.0).to(tl.float64)
            else:
                estar = tl.exp(v.to(tl.float64) - m.to(tl.float64))
            q = (target - above) / estar
            ntie = tl.ceil(q).to(tl.int64)
        # the mask pass: store MASK_VALUE where a token is not kept
        seen = tl.zeros((), dtype=tl.int64)
        for start in range(0, VOCAB_SIZE, BLOCK_SIZE):
            offs = start + tl.arange(0, BLOCK_SIZE)
            inb = offs < VOCAB_SIZE
            x = tl.load(row + offs, mask=inb, other=float("-inf")).to(tl.float32)
            kk = _key(x).to(tl.int64)
            keep = kk >= floor
            if DO_P:
                tie = keep & (kk == vstar) & inb
                rank = seen + tl.cumsum(tie.to(tl.int64), axis=0) - 1
                seen += tl.sum(tie.to(tl.int64), axis=0)
                keep = keep & ((kk > vstar) | (tie & (rank < ntie)))
            tl.store(row + offs, MASK_VALUE, mask=inb & (~keep))


@triton.jit
def _rows(
    LOGITS,
    LOGITS_STRIDE_0,
    K,
    P,
    BATCH_SIZE,
    VOCAB_SIZE: tl.constexpr,
    MASK_VALUE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TOPK_ENABLED: tl.constexpr,
    TOPP_ENABLED: tl.constexpr,
    SPLIT_COVERS_PONLY: tl.constexpr,
):
    pid = tl.program_id(0)
    for r in range(pid, BATCH_SIZE, tl.num_programs(0)):
        r64 = tl.zeros((), dtype=tl.int64) + r  # a tensor also where range yields ints
        row = LOGITS + r64 * LOGITS_STRIDE_0
        k = tl.full((), VOCAB_SIZE, tl.int64)
        if TOPK_ENABLED:
            k = tl.load(K + r).to(tl.int64)
        p = tl.full((), 1.0, tl.float64)
        if TOPP_ENABLED:
            p = tl.load(P + r).to(tl.float64)
            if SPLIT_COVERS_PONLY and TOPK_ENABLED:
                if k >= VOCAB_SIZE:
                    p = tl.full((), 1.0, tl.float64)  # the split top-p kernels own this row
        do_k = k < VOCAB_SIZE
        do_p = p < 1.0
        if do_k or do_p:
            _mask_row(row, k, p, do_k, do_p, MASK_VALUE, VOCAB_SIZE, BLOCK_SIZE)


@triton.jit(do_not_specialize=["BATCH_SIZE"])
def topk_topp_kernel(
    LOGITS,  # [BATCH_SIZE, >= VOCAB_SIZE], rows LOGITS_STRIDE_0 apart (inout)
    LOGITS_STRIDE_0,
    BUFFER,  # not read (vLLM's pivot search scratch)
    PERCENTILE_TO_STD_TABLE,  # not read
    NORMAL_CDF_TO_SIGMA_TABLE,  # not read
    K,  # [BATCH_SIZE] int32/int64 (TOPK_ENABLED)
    P,  # [BATCH_SIZE] float32/float64 (TOPP_ENABLED)
    BATCH_SIZE,
    VOCAB_SIZE: tl.constexpr,
    MASK_VALUE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_SIZE_TRUNC: tl.constexpr,
    TOPK_ENABLED: tl.constexpr,
    TOPP_ENABLED: tl.constexpr,
    SPLIT_COVERS_PONLY: tl.constexpr,
):
    """Grid ``(G,)``: program ``pid`` masks rows ``pid, pid + G, ...`` in place."""
    _rows(
        LOGITS,
        LOGITS_STRIDE_0,
        K,
        P,
        BATCH_SIZE,
        VOCAB_SIZE,
        MASK_VALUE,
        BLOCK_SIZE,
        TOPK_ENABLED,
        TOPP_ENABLED,
        SPLIT_COVERS_PONLY,
    )
