"""Pure-Python twin of ``kernels_cpu._fused`` (generator, race, whole step) and test statistics.

Written from the algorithm's definition, independently of the Cython code: Philox-4x32-10 on
Python ints, block sums emulated in float32 with numpy in the kernel's documented lane order,
scores and the in-block choice in float64. The kernels must agree with it token for token.
"""

import math

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
BLOCK = 256
LANES = 32


def philox4x32_10(counter, key, rounds=10):
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
    return c0, c1, c2, c3


def split_key(key):
    key &= (1 << 64) - 1
    return key & MASK32, key >> 32


def u53(a, b):
    return ((a >> 5) * 67108864.0 + (b >> 6) + 0.5) * 2.0**-53


def step_uniforms(key, stream, pos):
    w = philox4x32_10((0, pos & MASK32, stream & MASK32, 1), split_key(key))
    return u53(w[0], w[1]), u53(w[2], w[3])


def block_exponential(key, stream, pos, b):
    w = philox4x32_10((b >> 2, pos & MASK32, stream & MASK32, 0), split_key(key))
    return -math.log((w[b & 3] + 0.5) * 2.0**-32)


def masses(t_row, q_row, skip):
    """The recovered distribution's unnormalised masses, float32, as the kernel defines them."""
    t = np.asarray(t_row, dtype=np.float32)
    x = t - np.asarray(q_row, dtype=np.float32) if q_row is not None else t.copy()
    x = np.where(x > 0, x, np.float32(0)).astype(np.float32)  # NaN and negatives -> 0
    if skip is not None and skip >= 0:
        x[skip] = 0
    return x


def lane_sum(x):
    """float32 sum in 32 lanes (lane j gets elements j, j+32, ...), then a halving tree."""
    acc = np.zeros(LANES, dtype=np.float32)
    n = len(x)
    full = n - n % LANES
    for i in range(0, full, LANES):
        acc += x[i : i + LANES]
    acc[: n - full] += x[full:]
    w = LANES // 2
    while w >= 1:
        acc[:w] = acc[:w] + acc[w : 2 * w]
        w //= 2
    return float(acc[0])


def recover(t_row, q_row, skip, key, stream, pos):
    """The recovered token of a rejected draft: the race over the probabilities' masses."""
    return recover_masses(masses(t_row, q_row, skip), key, stream, pos)


def first_argmax(row):
    row = np.asarray(row, dtype=np.float32)
    nan = np.flatnonzero(np.isnan(row))
    if len(nan):
        return int(nan[0])
    return int(np.flatnonzero(row == row.max())[0])


def _accepted(key, stream, j, d, rates, probs):
    """Whether draft token ``d`` at position ``j`` is accepted: its uniform below the synthetic
    rate, else target / draft probability (``probs()``, read only for a real draft) >= it."""
    u = step_uniforms(key, stream, j)[0]
    if rates is not None:
        return u < float(rates[j]) and d >= 0
    if d < 0:
        return False
    tp, dp = probs()
    return dp > 0 and tp / dp >= u


def _requests(cu, bonus, seeds, is_greedy, max_spec_len):
    """The requests of a step, as both step references walk them: (first token, draft count,
    an output row of -1, its (key, stream) seed, greedy, bonus token) per request."""
    cu = [int(c) for c in cu]
    bonus = [int(b) for b in bonus.reshape(-1)]
    seeds = [(int(k), int(s)) for k, s in seeds.tolist()]
    for r in range(len(cu)):
        s = cu[r - 1] if r else 0
        greedy = is_greedy is not None and bool(is_greedy[r])
        yield s, cu[r] - s, [-1] * (max_spec_len + 1), seeds[r], greedy, bonus[r]


def reference_step(
    cu,
    draft,
    draft_probs,
    target_probs,
    bonus,
    is_greedy,
    greedy_scores,
    seeds,
    max_spec_len,
    rates=None,
):
    """The whole step in Python; returns a [B, K + 1] list of lists (-1 where nothing)."""
    draft = [int(d) for d in draft]
    t = target_probs.numpy()
    q = draft_probs.numpy() if draft_probs is not None else None
    gs = greedy_scores.numpy() if greedy_scores is not None else t
    out = []
    for s, n, row, (key, stream), greedy, bonus_r in _requests(
        cu, bonus, seeds, is_greedy, max_spec_len
    ):
        if greedy and rates is None:
            for j in range(n):
                tok = first_argmax(gs[s + j])
                row[j] = tok
                if tok != draft[s + j]:
                    break
            else:
                row[n] = bonus_r
            out.append(row)
            continue
        for j in range(n):
            d = draft[s + j]

            def probs(d=d, t_j=t[s + j], q_j=None if q is None else q[s + j]):
                return float(t_j[d]), float(q_j[d]) if q_j is not None else 1.0

            ok = _accepted(key, stream, j, d, rates, probs)
            if not ok:
                if greedy:
                    row[j] = first_argmax(gs[s + j])
                else:
                    row[j] = recover(
                        t[s + j],
                        q[s + j] if q is not None else None,
                        None if q is not None else d,
                        key,
                        stream,
                        j,
                    )
                break
            row[j] = d
        else:
            row[n] = bonus_r
        out.append(row)
    return out


def chi2_pvalue(observed, expected_probs):
    """Pearson chi-square goodness of fit; categories with expected count < 5 are pooled."""
    observed = np.asarray(observed, dtype=np.float64)
    p = np.asarray(expected_probs, dtype=np.float64)
    p = p / p.sum()
    n = observed.sum()
    exp = n * p
    assert observed[exp == 0].sum() == 0, "a token with zero probability was drawn"
    small = exp < 5
    obs_c = np.append(observed[~small], observed[small].sum())
    exp_c = np.append(exp[~small], exp[small].sum())
    keep = exp_c > 0
    obs_c, exp_c = obs_c[keep], exp_c[keep]
    stat = float(((obs_c - exp_c) ** 2 / exp_c).sum())
    dof = len(obs_c) - 1
    return float(
        torch.special.gammaincc(
            torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)
        )
    )


def ks_pvalue(sample, cdf):
    """One-sample Kolmogorov-Smirnov test (asymptotic Kolmogorov distribution)."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = len(x)
    F = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - F), np.max(F - np.arange(0, n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(
        min(
            1.0,
            max(
                0.0,
                2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101)),
            ),
        )
    )


def spread_distribution(V, support, gen, floor=0.0):
    """A float32 distribution over V ids with mass on ``support`` ids spread over the blocks."""
    p = torch.full((V,), floor, dtype=torch.float64)
    ids = torch.randperm(V, generator=gen)[:support]
    p[ids] += torch.rand(support, generator=gen, dtype=torch.float64) + 0.1
    p /= p.sum()
    return p.to(torch.float32)


# ---------------------------------------------------------------------------------------------
# the logits step: the kernels' float32 exp, emulated operation by operation (no fma)
# ---------------------------------------------------------------------------------------------

F32 = np.float32


def expf(x):
    """``fd_expf``: every operation rounded to float32 in the kernel's order."""
    x = np.asarray(x, dtype=F32)
    with np.errstate(invalid="ignore", over="ignore"):
        xc = np.where(x < F32(-87.33654), F32(-87.33654), x).astype(F32)
        xc = np.where(xc > 0, F32(0), xc).astype(F32)
        n = (xc * F32(1.44269504088896341) + F32(12582912.0)) - F32(12582912.0)
        r = xc - n * F32(0.693359375)
        r = r - n * F32(-2.12194440e-4)
        p = np.full_like(r, F32(1.9875691500e-4))
        for c in (
            1.3981999507e-3,
            8.3334519073e-3,
            4.1665795894e-2,
            1.6666665459e-1,
            5.0000001201e-1,
        ):
            p = p * r + F32(c)
        p = p * (r * r) + r
        p = p + F32(1.0)
        ni = np.where(np.isnan(n), 0, n).astype(np.int32)
        scale = np.ldexp(F32(1.0), ni).astype(F32)
        y = (p * scale).astype(F32)
        return np.where(x < F32(-87.33654), F32(0), y).astype(F32)


def row_norm(logits):
    logits = np.asarray(logits, dtype=F32)
    with np.errstate(invalid="ignore"):
        finite = np.where(np.isnan(logits), -np.inf, logits)
        m = F32(np.max(finite)) if len(logits) else F32(-np.inf)
        e = expf(logits - m)
    e = np.where(e > 0, e, F32(0)).astype(F32)
    z = 0.0
    for b in range(0, len(logits), BLOCK):
        z += lane_sum(e[b : b + BLOCK])
    with np.errstate(divide="ignore"):
        invz = F32(1.0 / z) if z else F32(np.inf)
    return m, invz


def logit_masses(logits, q, skip, m, invz):
    with np.errstate(invalid="ignore"):
        e = expf(np.asarray(logits, dtype=F32) - m)
        x = e * invz - np.asarray(q, dtype=F32) if q is not None else e
        x = np.where(x > 0, x, F32(0)).astype(F32)
    if skip is not None and skip >= 0:
        x[skip] = 0
    return x


def recover_masses(x, key, stream, pos):
    """The race and in-block pick over given float32 masses (as ``recover``)."""
    V = len(x)
    best, best_b = -1.0, -1
    for b in range((V + BLOCK - 1) // BLOCK):
        s = lane_sum(x[b * BLOCK : (b + 1) * BLOCK]) / block_exponential(key, stream, pos, b)
        if s > best:
            best, best_b = s, b
    if best_b < 0:
        return 0
    lo = best_b * BLOCK
    blk = x[lo : lo + BLOCK].astype(np.float64)
    total = float(sum(float(m) for m in blk))
    target = step_uniforms(key, stream, pos)[1] * total
    c, last = 0.0, -1
    for i, m in enumerate(blk):
        if m > 0:
            c += float(m)
            last = i
            if c > target:
                return lo + i
    return lo + (last if last >= 0 else 0)


def reference_step_logits(
    cu, draft, draft_probs, logits, bonus, is_greedy, seeds, max_spec_len, rates=None
):
    """:func:`reference_step` from the logits (the fused-logits kernel's float32 row norm)."""
    draft = [int(d) for d in draft]
    lg = logits.numpy()
    q = draft_probs.numpy() if draft_probs is not None else None
    out = []
    for s, n, row, (key, stream), greedy, bonus_r in _requests(
        cu, bonus, seeds, is_greedy, max_spec_len
    ):
        for j in range(n):
            d = draft[s + j]
            lrow = lg[s + j]
            if greedy and rates is None:
                row[j] = first_argmax(lrow)
                if row[j] != d:
                    break
                continue

            def probs(lrow=lrow, d=d, j=j, s=s):
                m, invz = row_norm(lrow)
                dp = float(q[s + j, d]) if q is not None else 1.0
                with np.errstate(invalid="ignore", over="ignore"):
                    tp = float(expf(np.array([lrow[d] - m], dtype=F32))[0] * invz)
                return tp, dp

            ok = _accepted(key, stream, j, d, rates, probs)
            if ok:
                row[j] = d
                continue
            if greedy:
                row[j] = first_argmax(lrow)
            else:
                m, invz = row_norm(lrow)
                x = logit_masses(
                    lrow, q[s + j] if q is not None else None, None if q is not None else d, m, invz
                )
                row[j] = recover_masses(x, key, stream, j)
            break
        else:
            row[n] = bonus_r
        out.append(row)
    return out


def masked_law(row, temperature, k=None, p=None):
    """The law a sampler draws from after temperature, top-k then top-p -- the plain rule: rank
    by value, ties by lowest index; keep values >= the k-th largest, then each token whose mass
    ranked strictly above it is < p; the softmax (float64) of what is kept."""
    import math

    x = (row.float() / temperature).double()
    order = torch.sort(-x, stable=True).indices
    keep = torch.ones_like(x, dtype=torch.bool)
    if k is not None and k < len(x):
        keep &= x >= x[order[k - 1]]
    if p is not None:
        probs = torch.softmax(torch.where(keep, x, -math.inf), -1)
        above = 0.0
        for i in order.tolist():
            if keep[i]:
                if above >= p:
                    keep[i] = False
                above += float(probs[i])
    return torch.softmax(torch.where(keep, x, -math.inf), -1)


def draw_step_case(draw, *flags):
    """The random step both fused steps' fuzz tests draw: ``B`` requests of up to ``K`` drafts
    over ``V`` tokens, a seed, draft probabilities or not, which requests are greedy, then each
    boolean of ``flags`` in order, then the four index dtypes (out, cu, draft, bonus)."""
    from hypothesis import strategies as st

    B = draw(st.integers(1, 5))
    K = draw(st.integers(0, 4))
    case = dict(
        B=B,
        K=K,
        counts=[draw(st.integers(0, K)) for _ in range(B)],
        V=draw(st.sampled_from([1, 5, 256, 300, 777])),
        seed=draw(st.integers(0, 2**31)),
        with_q=draw(st.booleans()),
        greedy=draw(st.sampled_from(["none", "mixed", "all"])),
    )
    case.update({flag: draw(st.booleans()) for flag in flags})
    case["dt"] = [draw(st.sampled_from((torch.int32, torch.int64))) for _ in range(4)]
    return case


def step_start(case):
    """What building a drawn step starts from: its seeded generator, ``B``, ``K``, ``V``, the
    draft counts, their total and the four index dtypes."""
    gen = torch.Generator().manual_seed(case["seed"])
    counts = case["counts"]
    return gen, case["B"], case["K"], case["V"], counts, sum(counts), case["dt"]


def step_bonus_greedy(gen, case, b_dt):
    """A built step's bonus tokens and greedy mask (``None``: every request greedy), drawn from
    ``gen`` in that order."""
    B = case["B"]
    bonus = torch.randint(0, 10**6, (B, 1), generator=gen).to(b_dt)
    greedy = {
        "none": None,
        "all": torch.ones(B, dtype=torch.bool),
        "mixed": torch.rand(B, generator=gen) < 0.5,
    }[case["greedy"]]
    return bonus, greedy
