"""The four sampling kernels of ``kernels_cpu`` against their plain-torch references.

Random cases (hypothesis draws the structure, a seeded torch generator the bulk values) cover
B = 0 and 1, requests without drafts, -1 padded drafts, V = 1, argmax ties, zero probabilities,
all-accepted and first-rejected rows, synthetic mode, float32/float64 ``inv_q`` and uniforms, and
int32/int64 buffers in every combination; every output is poisoned and guarded (see
``_sampling_helpers``). Bad inputs must raise the named exception and leave every allocation
untouched; results must not depend on the thread count.
"""

import inspect
import math

import pytest
import torch
from _fuzz import fuzz_settings
from _sampling_helpers import (
    allocations,
    assert_same_allocations,
    clone_case,
    cu_from_counts,
    guarded,
    guards_intact,
    poisoned,
    run_both,
    threads,
)
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import kernels_cpu
from fdkit.guards import POISON_FLOAT, POISON_INT
from fdkit.reference import sampling as ref
from kernels_cpu import contracts

KERNELS = (
    "expand_kernel",
    "rejection_greedy_sample_kernel",
    "rejection_random_sample_kernel",
    "sample_recovered_tokens_kernel",
)
INDEX = st.sampled_from([torch.int32, torch.int64])
HYP = fuzz_settings(120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


@st.composite
def batches(draw, max_b=6, max_k=5):
    """(counts per request, max_spec_len): B in [0, max_b], counts in [0, K]."""
    k = draw(st.integers(0, max_k))
    counts = draw(st.lists(st.integers(0, k), min_size=0, max_size=max_b))
    return counts, k


# ------------------------------------------------------------------------------------------
# case builders (valid inputs)
# ------------------------------------------------------------------------------------------


def expand_case(counts, data_dtype, cu_dtype, replace_from, replace_to, max_num, seed):
    g = _gen(seed)
    B = len(counts)
    if data_dtype.is_floating_point:
        pool = torch.tensor([0.0, 1.0, -0.0, 0.5, float("nan"), 3.0])
        x = pool[torch.randint(0, len(pool), (B,), generator=g)]
    else:
        x = torch.randint(-3, 4, (B,), generator=g)
    return dict(
        output_ptr=poisoned((sum(counts),), data_dtype),
        input_ptr=guarded(x, data_dtype),
        cu_num_tokens_ptr=cu_from_counts(counts, cu_dtype),
        replace_from=replace_from,
        replace_to=replace_to,
        MAX_NUM_TOKENS=max_num,
    )


def greedy_case(
    counts,
    K,
    V,
    dt,
    *,
    greedy_mask=None,
    synthetic=False,
    seed=0,
    match_p=0.75,
    uniform_dtype=torch.float64,
):
    """dt: dtypes for (out, cu, draft, argmax, bonus)."""
    g = _gen(seed)
    B, T = len(counts), sum(counts)
    argmax = torch.randint(0, V, (T,), generator=g)
    other = torch.randint(-1, V, (T,), generator=g)
    draft = torch.where(torch.rand(T, generator=g) < match_p, argmax, other)
    case = dict(
        output_token_ids_ptr=poisoned((B, K + 1), dt[0]),
        cu_num_draft_tokens_ptr=cu_from_counts(counts, dt[1]),
        draft_token_ids_ptr=guarded(draft, dt[2]),
        target_argmax_ptr=guarded(argmax, dt[3]),
        bonus_token_ids_ptr=guarded(torch.randint(0, V, (B, 1), generator=g), dt[4]),
        is_greedy_ptr=None if greedy_mask is None else guarded(greedy_mask, torch.bool),
        max_spec_len=K,
        uniform_probs_ptr=guarded(torch.rand(T, generator=g, dtype=torch.float64), uniform_dtype),
        synthetic_conditional_rates_ptr=None,
        SYNTHETIC_MODE=synthetic,
    )
    if synthetic:
        case["synthetic_conditional_rates_ptr"] = guarded(torch.rand(K, generator=g), torch.float32)
    return case


def _probs(g, T, V, zero_p=0.3, levels=None):
    if levels:
        p = torch.randint(0, levels, (T, V), generator=g).float() / levels
    else:
        p = torch.rand(T, V, generator=g)
    return p * (torch.rand(T, V, generator=g) >= zero_p)


def random_case(
    counts,
    K,
    V,
    dt,
    *,
    greedy_mask,
    with_draft_probs=True,
    synthetic=False,
    seed=0,
    uniform_dtype=torch.float64,
):
    """dt: dtypes for (out, cu, draft, bonus, recovered)."""
    g = _gen(seed)
    B, T = len(counts), sum(counts)
    target = _probs(g, T, V)
    draft_probs = _probs(g, T, V, zero_p=0.2) if with_draft_probs else None
    draft = torch.randint(-1, V, (T,), generator=g) if V > 0 else torch.full((T,), -1)
    case = dict(
        output_token_ids_ptr=poisoned((B, K + 1), dt[0]),
        cu_num_draft_tokens_ptr=cu_from_counts(counts, dt[1]),
        draft_token_ids_ptr=guarded(draft, dt[2]),
        draft_probs_ptr=None if draft_probs is None else guarded(draft_probs),
        target_probs_ptr=guarded(target),
        bonus_token_ids_ptr=guarded(torch.randint(0, max(V, 1), (B, 1), generator=g), dt[3]),
        recovered_token_ids_ptr=guarded(torch.randint(0, max(V, 1), (T,), generator=g), dt[4]),
        uniform_probs_ptr=guarded(torch.rand(T, generator=g, dtype=torch.float64), uniform_dtype),
        is_greedy_ptr=guarded(greedy_mask, torch.bool),
        max_spec_len=K,
        vocab_size=V,
        synthetic_conditional_rates_ptr=None,
        NO_DRAFT_PROBS=not with_draft_probs,
        SYNTHETIC_MODE=synthetic,
    )
    if synthetic:
        case["synthetic_conditional_rates_ptr"] = guarded(torch.rand(K, generator=g), torch.float32)
    return case


def recovered_case(
    counts, V, dt, *, with_draft_probs=True, inv_q_dtype=torch.float32, levels=None, seed=0
):
    """dt: dtypes for (out, cu, draft)."""
    g = _gen(seed)
    B, T = len(counts), sum(counts)
    if levels:
        inv_q = torch.randint(1, 3, (B, V), generator=g).to(inv_q_dtype)
    else:
        inv_q = (1.0 / torch.empty(B, V, dtype=torch.float64).exponential_(generator=g)).to(
            inv_q_dtype
        )
    draft = torch.randint(-1, V + 2, (T,), generator=g)  # out-of-range ids are legal here
    return dict(
        output_token_ids_ptr=poisoned((T,), dt[0]),
        cu_num_draft_tokens_ptr=cu_from_counts(counts, dt[1]),
        draft_token_ids_ptr=guarded(draft, dt[2]),
        draft_probs_ptr=guarded(_probs(g, T, V, levels=levels)) if with_draft_probs else None,
        target_probs_ptr=guarded(_probs(g, T, V, levels=levels)),
        inv_q_ptr=guarded(inv_q),
        vocab_size=V,
        BLOCK_SIZE=8192,
        NO_DRAFT_PROBS=not with_draft_probs,
        USE_FP64_GUMBEL=inv_q_dtype == torch.float64,
    )


def _check(name, case):
    a, b = run_both(getattr(kernels_cpu, name), getattr(ref, name), case)
    assert_same_allocations(a, b)
    return a


# ------------------------------------------------------------------------------------------
# interface
# ------------------------------------------------------------------------------------------


def contract_args(name):
    """The kernel's argument names in launch order, from its contract (the one written form)."""
    return [a.name for a in contracts.contract(name).args]


@pytest.mark.parametrize("name", KERNELS)
def test_signature_matches_contract(name):
    for fn in (getattr(kernels_cpu, name), getattr(ref, name)):
        assert list(inspect.signature(fn).parameters) == contract_args(name)


def _sample_case(name):
    dt = (torch.int32,) * 5
    if name == "expand_kernel":
        return expand_case([2, 0, 3], torch.int32, torch.int32, 0, 9, None, 1)
    if name == "rejection_greedy_sample_kernel":
        return greedy_case([2, 0, 3], 3, 7, dt, seed=1)
    if name == "rejection_random_sample_kernel":
        return random_case([2, 0, 3], 3, 7, dt, greedy_mask=[False, True, False], seed=1)
    return recovered_case([2, 0, 3], 7, dt[:3], seed=1)


@pytest.mark.parametrize("name", KERNELS)
def test_positional_and_keyword_launches_agree(name):
    case = _sample_case(name)
    positional = clone_case(case)
    _check(name, case)
    getattr(kernels_cpu, name)(*[positional[k] for k in contract_args(name)])
    assert_same_allocations(case, positional)


# ------------------------------------------------------------------------------------------
# expand_kernel
# ------------------------------------------------------------------------------------------


@HYP
@given(
    batch=batches(max_k=6),
    data_dtype=st.sampled_from([torch.float32, torch.int32, torch.int64]),
    cu_dtype=INDEX,
    rf=st.sampled_from([0, 1, -3, 0.0, 2**40]),
    rt=st.sampled_from([0, 1, -1, 7]),
    max_num=st.sampled_from([None, None, 128, 2, 0]),
    seed=st.integers(0, 2**31),
)
def test_expand_matches_reference(batch, data_dtype, cu_dtype, rf, rt, max_num, seed):
    counts, _ = batch
    _check("expand_kernel", expand_case(counts, data_dtype, cu_dtype, rf, rt, max_num, seed))


def test_expand_float_replacement_and_cap():
    out = poisoned((7,), torch.float32)
    kernels_cpu.expand_kernel(
        out,
        guarded([0.0, 2.5, -0.0]),
        cu_from_counts([2, 1, 4], torch.int32),
        0,
        1,
        MAX_NUM_TOKENS=3,
    )
    # -0.0 == 0 in float32, so it is replaced too; the third request is capped at 3 tokens
    assert out.tolist() == [1.0, 1.0, 2.5, 1.0, 1.0, 1.0, POISON_FLOAT]
    assert guards_intact(out)


# ------------------------------------------------------------------------------------------
# rejection_greedy_sample_kernel
# ------------------------------------------------------------------------------------------


@HYP
@given(
    batch=batches(),
    V=st.integers(1, 6),
    dt=st.tuples(INDEX, INDEX, INDEX, INDEX, INDEX),
    mask_kind=st.sampled_from(["none", "all", "random"]),
    synthetic=st.booleans(),
    uniform_dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 2**31),
)
def test_greedy_matches_reference(batch, V, dt, mask_kind, synthetic, uniform_dtype, seed):
    counts, K = batch
    mask = None
    if mask_kind == "all":
        mask = [True] * len(counts)
    elif mask_kind == "random":
        mask = (torch.rand(len(counts), generator=_gen(seed)) < 0.6).tolist()
    _check(
        "rejection_greedy_sample_kernel",
        greedy_case(
            counts,
            K,
            V,
            dt,
            greedy_mask=mask,
            synthetic=synthetic,
            seed=seed,
            uniform_dtype=uniform_dtype,
        ),
    )


def test_greedy_all_accepted_first_rejected_and_padding():
    out = poisoned((4, 4), torch.int32)
    kernels_cpu.rejection_greedy_sample_kernel(
        out,
        cu_from_counts([3, 3, 0, 2], torch.int32),
        guarded([5, 6, 7, 1, 6, 7, 4, 4], torch.int32),
        guarded([5, 6, 7, 9, 6, 7, 4, 3], torch.int64),
        guarded([[11], [12], [13], [14]], torch.int64),
        guarded([True, True, True, False]),
        3,
    )
    P = POISON_INT
    assert out.tolist() == [
        [5, 6, 7, 11],  # all accepted: bonus appended
        [9, P, P, P],  # first rejected: target argmax, stop
        [13, P, P, P],  # no drafts: bonus at position 0
        [P, P, P, P],
    ]  # not greedy: untouched
    assert guards_intact(out)


def test_greedy_synthetic_rejects_padding():
    out = poisoned((1, 4), torch.int64)
    kernels_cpu.rejection_greedy_sample_kernel(
        out,
        cu_from_counts([3], torch.int64),
        guarded([8, -1, 9]),
        guarded([1, 2, 3]),
        guarded([5]),
        None,
        3,
        guarded([0.0, 0.0, 0.0], torch.float64),
        guarded([0.5, 0.5, 0.5], torch.float32),
        True,
    )
    # uniform < rate accepts the draft; a -1 draft is rejected and replaced by the argmax
    assert out.tolist() == [[8, 2, POISON_INT, POISON_INT]]


def test_greedy_argmax_truncated_to_int32_like_the_kernel():
    out = poisoned((1, 2), torch.int64)
    kernels_cpu.rejection_greedy_sample_kernel(
        out,
        cu_from_counts([1], torch.int32),
        guarded([3]),
        guarded([3 + 2**32]),
        guarded([4]),
        None,
        1,
    )
    assert out.tolist() == [[3, 4]]


# ------------------------------------------------------------------------------------------
# rejection_random_sample_kernel
# ------------------------------------------------------------------------------------------


@HYP
@given(
    batch=batches(),
    V=st.integers(0, 6),
    dt=st.tuples(INDEX, INDEX, INDEX, INDEX, INDEX),
    with_draft_probs=st.booleans(),
    synthetic=st.booleans(),
    uniform_dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 2**31),
)
def test_random_matches_reference(batch, V, dt, with_draft_probs, synthetic, uniform_dtype, seed):
    counts, K = batch
    mask = (torch.rand(len(counts), generator=_gen(seed + 1)) < 0.3).tolist()
    _check(
        "rejection_random_sample_kernel",
        random_case(
            counts,
            K,
            V,
            dt,
            greedy_mask=mask,
            with_draft_probs=with_draft_probs,
            synthetic=synthetic,
            seed=seed,
            uniform_dtype=uniform_dtype,
        ),
    )


def _accept_one(tp, dp, u, out_dtype=torch.int32):
    out = poisoned((1, 2), out_dtype)
    target = torch.zeros(1, 4)
    target[0, 2] = tp
    draft = torch.zeros(1, 4)
    draft[0, 2] = dp
    kernels_cpu.rejection_random_sample_kernel(
        out,
        cu_from_counts([1], torch.int32),
        guarded([2], torch.int32),
        guarded(draft),
        guarded(target),
        guarded([[3]]),
        guarded([1], torch.int32),
        guarded([u], torch.float64),
        guarded([False]),
        1,
        4,
    )
    return out.tolist()[0]


def test_random_accept_test_is_float32_quotient_compared_in_float64():
    tp, dp = torch.tensor(0.3), torch.tensor(0.7)
    q32 = float(tp / dp)  # the float32 quotient, exactly, as a float64
    assert _accept_one(0.3, 0.7, q32) == [2, 3]  # equal: accepted
    above = math.nextafter(q32, 1.0)
    assert float(torch.tensor(above, dtype=torch.float64).float()) == q32  # float32 would tie
    assert _accept_one(0.3, 0.7, above) == [1, POISON_INT]  # float64: rejected


def test_random_all_accepted_first_rejected_and_greedy_skipped():
    V = 5
    target = torch.full((6, V), 0.2)
    draft_probs = target.clone()
    draft_probs[3, 4] = 0.9  # request 1, position 0: 0.2 / 0.9 < 0.5
    out = poisoned((3, 4), torch.int64)
    kernels_cpu.rejection_random_sample_kernel(
        out,
        cu_from_counts([3, 2, 1], torch.int64),
        guarded([1, 2, 3, 4, 0, 2], torch.int64),
        guarded(draft_probs),
        guarded(target),
        guarded([[7], [8], [9]]),
        guarded([10, 11, 12, 13, 14, 15], torch.int64),
        guarded([0.99, 0.5, 0.0, 0.5, 0.5, 0.5], torch.float64),
        guarded([False, False, True]),
        3,
        V,
    )
    P = POISON_INT
    assert out.tolist() == [
        [1, 2, 3, 7],  # ratio 1 >= u everywhere: bonus appended
        [13, P, P, P],  # first rejected: recovered id, stop
        [P, P, P, P],
    ]  # greedy request: untouched
    assert guards_intact(out)


def test_random_zero_draft_prob_rejects():
    assert _accept_one(0.5, 0.0, 0.0) == [1, POISON_INT]


# ------------------------------------------------------------------------------------------
# sample_recovered_tokens_kernel
# ------------------------------------------------------------------------------------------


@HYP
@given(
    batch=batches(),
    V=st.integers(0, 40),
    dt=st.tuples(INDEX, INDEX, INDEX),
    with_draft_probs=st.booleans(),
    inv_q_dtype=st.sampled_from([torch.float32, torch.float64]),
    levels=st.sampled_from([None, 2, 3]),
    seed=st.integers(0, 2**31),
)
def test_recovered_matches_reference(batch, V, dt, with_draft_probs, inv_q_dtype, levels, seed):
    counts, _ = batch
    _check(
        "sample_recovered_tokens_kernel",
        recovered_case(
            counts,
            V,
            dt,
            with_draft_probs=with_draft_probs,
            inv_q_dtype=inv_q_dtype,
            levels=levels,
            seed=seed,
        ),
    )


def test_recovered_ties_lowest_index_and_masking():
    V = 6
    target = guarded(
        [
            [0.0, 0.5, 0.2, 0.5, 0.5, 0.0],
            [0.0, 0.5, 0.2, 0.5, 0.5, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    out = poisoned((3,), torch.int32)
    kernels_cpu.sample_recovered_tokens_kernel(
        out,
        cu_from_counts([3], torch.int32),
        guarded([1, 4, 2], torch.int32),
        None,
        target,
        guarded(torch.ones(1, V)),
        V,
    )
    # the draft's own id is masked: 1 is masked so 3 wins over 4; all-zero row: index 0
    assert out.tolist() == [3, 1, 0]


@pytest.mark.parametrize("inv_q_dtype,expected", [(torch.float32, 0), (torch.float64, 1)])
def test_recovered_scores_in_inv_q_dtype(inv_q_dtype, expected):
    """(1 - 2**-24) * (1 + 2**-23) rounds to 1.0 in float32 (a tie: index 0 wins) but stays
    above 1.0 in float64 (index 1 wins), as the Triton kernel's type promotion gives."""
    target = guarded([[1.0, 1.0 - 2**-24, 0.5]])
    inv_q = guarded(torch.tensor([[1.0, 1.0 + 2**-23, 1.0]], dtype=torch.float64), inv_q_dtype)
    out = poisoned((1,), torch.int32)
    kernels_cpu.sample_recovered_tokens_kernel(
        out, cu_from_counts([1], torch.int32), guarded([2], torch.int32), None, target, inv_q, 3
    )
    assert out.tolist() == [expected]
    ref_out = poisoned((1,), torch.int32)
    ref.sample_recovered_tokens_kernel(
        ref_out, cu_from_counts([1], torch.int32), guarded([2], torch.int32), None, target, inv_q, 3
    )
    assert ref_out.tolist() == [expected]


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("inv_q_dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_recovered_large_vocab_chunked(nt, inv_q_dtype, with_draft_probs):
    """Vocab split into chunks across threads: ties across chunks go to the earliest chunk."""
    V = 3 * 8192 + 1234
    g = _gen(7)
    target = torch.rand(3, V, generator=g) * 0.5
    target[0, 20000] = target[0, 5000] = 0.99  # tie across chunks
    target[1, V - 1] = 0.99  # max in the last, short chunk
    target[2].fill_(0.25)  # all tied: index 0 (or 1 if 0 masked)
    draft_probs = torch.zeros(3, V) if with_draft_probs else None
    case = dict(
        output_token_ids_ptr=poisoned((3,), torch.int64),
        cu_num_draft_tokens_ptr=cu_from_counts([1, 2], torch.int32),
        draft_token_ids_ptr=guarded([7, 8, 0], torch.int32),
        draft_probs_ptr=None if draft_probs is None else guarded(draft_probs),
        target_probs_ptr=guarded(target),
        inv_q_ptr=guarded(torch.ones(2, V, dtype=inv_q_dtype)),
        vocab_size=V,
    )
    with threads(nt):
        out = _check("sample_recovered_tokens_kernel", case)["output_token_ids_ptr"]
    assert out.tolist() == [5000, V - 1, 0 if with_draft_probs else 1]


@pytest.mark.parametrize("inv_q_dtype", [torch.float32, torch.float64])
def test_recovered_nan_and_inf_never_crash(inv_q_dtype):
    g = _gen(3)
    V = 50
    target = torch.rand(4, V, generator=g)
    target[0, 3] = float("nan")
    target[1].fill_(0.0)
    draft = torch.rand(4, V, generator=g)
    draft[2, :] = float("nan")
    inv_q = torch.rand(2, V, generator=g).to(inv_q_dtype)
    inv_q[0, 10] = float("inf")  # q = 0 -> 1/q = inf; 0 * inf = NaN must not win
    inv_q[1, :] = float("inf")
    case = dict(
        output_token_ids_ptr=poisoned((4,), torch.int32),
        cu_num_draft_tokens_ptr=cu_from_counts([2, 2], torch.int32),
        draft_token_ids_ptr=guarded([0, 1, 2, 3], torch.int32),
        draft_probs_ptr=guarded(draft),
        target_probs_ptr=guarded(target),
        inv_q_ptr=guarded(inv_q),
        vocab_size=V,
    )
    out = _check("sample_recovered_tokens_kernel", case)["output_token_ids_ptr"]
    assert all(0 <= v < V for v in out.tolist())


# ------------------------------------------------------------------------------------------
# thread-count invariance
# ------------------------------------------------------------------------------------------


@fuzz_settings(40, deep_examples=1000, deadline=None)  # each example: 4 kernels x 2 thread counts
@given(
    batch=batches(max_b=12),
    V=st.integers(1, 30),
    seed=st.integers(0, 2**31),
    dt=st.tuples(INDEX, INDEX, INDEX, INDEX, INDEX),
)
def test_results_do_not_depend_on_thread_count(batch, V, seed, dt):
    counts, K = batch
    mask = (torch.rand(len(counts), generator=_gen(seed)) < 0.5).tolist()
    cases = {
        "expand_kernel": expand_case(counts, torch.int32, dt[0], 0, 5, None, seed),
        "rejection_greedy_sample_kernel": greedy_case(
            counts, K, V, dt, greedy_mask=mask, seed=seed
        ),
        "rejection_random_sample_kernel": random_case(
            counts, K, V, dt, greedy_mask=mask, seed=seed
        ),
        "sample_recovered_tokens_kernel": recovered_case(counts, V, dt[:3], levels=2, seed=seed),
    }
    for name, case in cases.items():
        other = clone_case(case)
        with threads(1):
            getattr(kernels_cpu, name)(**case)
        with threads(2):
            getattr(kernels_cpu, name)(**other)
        assert_same_allocations(case, other)


# ------------------------------------------------------------------------------------------
# bad inputs: named exception, nothing written
# ------------------------------------------------------------------------------------------


def _noncontig(t):
    wide = torch.stack([t, t], dim=-1)
    return wide[..., 0]


def _meta(t):
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


def _as(dtype):
    return lambda t: guarded(t.to(dtype))


def _replace_values(values, dtype=None):
    return lambda t: guarded(torch.tensor(values, dtype=dtype or t.dtype).reshape(-1))


BAD = [
    # (kernel, argument, mutation, expected exception, words in the message)
    ("expand_kernel", "output_ptr", _as(torch.float64), TypeError, "output_ptr"),
    ("expand_kernel", "input_ptr", _as(torch.int64), TypeError, "input_ptr"),
    ("expand_kernel", "input_ptr", _noncontig, ValueError, "input_ptr"),
    ("expand_kernel", "output_ptr", _meta, ValueError, "output_ptr"),
    ("expand_kernel", "cu_num_tokens_ptr", _as(torch.float32), TypeError, "cu_num_tokens_ptr"),
    (
        "expand_kernel",
        "cu_num_tokens_ptr",
        _replace_values([2, 1, 5]),
        ValueError,
        "cu_num_tokens_ptr",
    ),
    (
        "expand_kernel",
        "cu_num_tokens_ptr",
        _replace_values([-1, 2, 5]),
        ValueError,
        "cu_num_tokens_ptr",
    ),
    (
        "expand_kernel",
        "cu_num_tokens_ptr",
        _replace_values([2, 2]),
        ValueError,
        "cu_num_tokens_ptr",
    ),
    ("expand_kernel", "output_ptr", lambda t: [0] * 5, TypeError, "output_ptr"),
    ("expand_kernel", "replace_to", lambda v: 2**40, ValueError, "replace_to"),
    ("expand_kernel", "replace_to", lambda v: 0.5, TypeError, "replace_to"),
    ("expand_kernel", "MAX_NUM_TOKENS", lambda v: -1, ValueError, "MAX_NUM_TOKENS"),
    ("expand_kernel", "replace_from", lambda v: None, TypeError, "replace_from"),
    ("expand_kernel", "replace_from", lambda v: 2**70, ValueError, "replace_from"),
    (
        "rejection_greedy_sample_kernel",
        "output_token_ids_ptr",
        _as(torch.float32),
        TypeError,
        "output_token_ids_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "output_token_ids_ptr",
        lambda t: guarded(t[:, :3]),
        ValueError,
        "output_token_ids_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "output_token_ids_ptr",
        _noncontig,
        ValueError,
        "output_token_ids_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "draft_token_ids_ptr",
        _as(torch.int16),
        TypeError,
        "draft_token_ids_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "is_greedy_ptr",
        _as(torch.int32),
        TypeError,
        "is_greedy_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "is_greedy_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "is_greedy_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "cu_num_draft_tokens_ptr",
        _replace_values([2, 6, 5]),
        ValueError,
        "cu_num_draft_tokens_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "cu_num_draft_tokens_ptr",
        _replace_values([4, 4, 5]),
        ValueError,
        "max_spec_len",
    ),
    (
        "rejection_greedy_sample_kernel",
        "max_spec_len",
        lambda v: 2,
        ValueError,
        "output_token_ids_ptr",
    ),
    ("rejection_greedy_sample_kernel", "max_spec_len", lambda v: "3", TypeError, ""),
    (
        "rejection_greedy_sample_kernel",
        "synthetic_conditional_rates_ptr",
        lambda t: None,
        ValueError,
        "synthetic_conditional_rates_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "uniform_probs_ptr",
        lambda t: None,
        ValueError,
        "uniform_probs_ptr",
    ),
    (
        "rejection_greedy_sample_kernel",
        "uniform_probs_ptr",
        _as(torch.float16),
        TypeError,
        "uniform_probs_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "draft_token_ids_ptr",
        _replace_values([1, 7, 2, 3, 4]),
        IndexError,
        "draft_token_ids_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "target_probs_ptr",
        _as(torch.float64),
        TypeError,
        "target_probs_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "target_probs_ptr",
        lambda t: guarded(t[:, :-1]),
        ValueError,
        "target_probs_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "draft_probs_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "draft_probs_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "draft_probs_ptr",
        _noncontig,
        ValueError,
        "draft_probs_ptr",
    ),
    ("rejection_random_sample_kernel", "vocab_size", lambda v: 8, ValueError, "target_probs_ptr"),
    ("rejection_random_sample_kernel", "vocab_size", lambda v: -1, ValueError, "vocab_size"),
    ("rejection_random_sample_kernel", "is_greedy_ptr", lambda t: None, TypeError, "is_greedy_ptr"),
    (
        "rejection_random_sample_kernel",
        "uniform_probs_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "uniform_probs_ptr",
    ),
    (
        "rejection_random_sample_kernel",
        "recovered_token_ids_ptr",
        _meta,
        ValueError,
        "recovered_token_ids_ptr",
    ),
    ("rejection_random_sample_kernel", "NO_DRAFT_PROBS", lambda v: False, None, None),
    (
        "rejection_random_sample_kernel",
        "cu_num_draft_tokens_ptr",
        _replace_values([3, 2, 5]),
        ValueError,
        "cu_num_draft_tokens_ptr",
    ),
    (
        "sample_recovered_tokens_kernel",
        "inv_q_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "inv_q_ptr",
    ),
    ("sample_recovered_tokens_kernel", "inv_q_ptr", _as(torch.float16), TypeError, "inv_q_ptr"),
    (
        "sample_recovered_tokens_kernel",
        "target_probs_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "target_probs_ptr",
    ),
    (
        "sample_recovered_tokens_kernel",
        "output_token_ids_ptr",
        lambda t: guarded(t[:-1]),
        ValueError,
        "output_token_ids_ptr",
    ),
    (
        "sample_recovered_tokens_kernel",
        "output_token_ids_ptr",
        _as(torch.float32),
        TypeError,
        "output_token_ids_ptr",
    ),
    (
        "sample_recovered_tokens_kernel",
        "cu_num_draft_tokens_ptr",
        _replace_values([2, 1, 5]),
        ValueError,
        "cu_num_draft_tokens_ptr",
    ),
    ("sample_recovered_tokens_kernel", "vocab_size", lambda v: 6, ValueError, "target_probs_ptr"),
    (
        "sample_recovered_tokens_kernel",
        "draft_probs_ptr",
        _noncontig,
        ValueError,
        "draft_probs_ptr",
    ),
]

# Calls the Triton kernel handles correctly although they look unusual: per-token buffers longer
# than the offsets use, rows of requests the kernel skips left short or past ``max_spec_len``.
# Each must run, write exactly what the reference writes, and leave the rest untouched.
NOT_BAD = [
    # (kernel, argument, mutation)
    ("expand_kernel", "cu_num_tokens_ptr", _replace_values([2, 2, 4])),
    ("rejection_greedy_sample_kernel", "target_argmax_ptr", lambda t: guarded(t[:-1])),
    ("rejection_greedy_sample_kernel", "bonus_token_ids_ptr", lambda t: guarded(t[:-1])),
    ("rejection_greedy_sample_kernel", "cu_num_draft_tokens_ptr", _replace_values([2, 2, 6])),
    ("rejection_greedy_sample_kernel", "synthetic_conditional_rates_ptr", lambda t: guarded(t[:2])),
]


def _bad_case(name):
    dt = (torch.int32,) * 5
    if name == "expand_kernel":
        return expand_case([2, 0, 3], torch.int32, torch.int32, 0, 9, None, 1)
    if name == "rejection_greedy_sample_kernel":
        # synthetic, so that the uniforms and rates are read and checked
        return greedy_case(
            [2, 0, 3], 3, 7, dt, greedy_mask=[True, True, False], seed=1, synthetic=True
        )
    if name == "rejection_random_sample_kernel":
        return random_case([2, 0, 3], 3, 7, dt, greedy_mask=[False, True, False], seed=1)
    return recovered_case([2, 0, 3], 7, dt[:3], seed=1)


@pytest.mark.parametrize(
    "name,arg,mutate,exc,words", BAD, ids=[f"{b[0][:14]}-{b[1]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_input_raises_and_writes_nothing(name, arg, mutate, exc, words):
    case = _bad_case(name)
    if arg == "NO_DRAFT_PROBS":  # draft probs demanded but absent
        case["draft_probs_ptr"] = None
        case[arg] = False
        exc, words = ValueError, "draft_probs_ptr"
    else:
        case[arg] = mutate(case[arg])
    before = allocations(case)
    with pytest.raises(exc) as info:
        getattr(kernels_cpu, name)(**case)
    assert words in str(info.value)
    after = allocations(case)
    for k in before:
        assert torch.equal(before[k], after[k]), f"{k} was written"


@pytest.mark.parametrize(
    "name,arg,mutate", NOT_BAD, ids=[f"{b[0][:14]}-{b[1]}-{i}" for i, b in enumerate(NOT_BAD)]
)
def test_calls_the_triton_kernel_handles_run(name, arg, mutate):
    case = _bad_case(name)
    case[arg] = mutate(case[arg])
    _check(name, case)


def test_output_overlapping_offsets_is_refused():
    base = torch.zeros(12, dtype=torch.int32)
    out = base[:8].view(2, 4)
    cu = base[4:6]
    cu.copy_(torch.tensor([1, 2], dtype=torch.int32))
    snapshot = base.clone()
    with pytest.raises(ValueError, match="overlap"):
        kernels_cpu.rejection_greedy_sample_kernel(
            out, cu, guarded([1, 2], torch.int32), guarded([1, 2]), guarded([0, 0]), None, 3
        )
    assert torch.equal(base, snapshot)


def test_random_draft_ids_of_greedy_requests_are_not_range_checked():
    # the random kernel never reads probabilities for greedy requests, so ids there are free
    case = _bad_case("rejection_random_sample_kernel")
    case["draft_token_ids_ptr"] = guarded([1, 2, 99, 3, 4], torch.int32)
    case["is_greedy_ptr"] = guarded([False, True, True])
    case["cu_num_draft_tokens_ptr"] = cu_from_counts([2, 1, 2], torch.int32)
    _check("rejection_random_sample_kernel", case)


def test_random_synthetic_mode_does_not_index_with_draft_ids():
    case = _bad_case("rejection_random_sample_kernel")
    case["draft_token_ids_ptr"] = guarded([1, 99, 2, 3, 4], torch.int32)
    case["synthetic_conditional_rates_ptr"] = guarded([0.9, 0.9, 0.9], torch.float32)
    case["SYNTHETIC_MODE"] = True
    _check("rejection_random_sample_kernel", case)
