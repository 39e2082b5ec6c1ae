"""``kernels_cpu.argmax_rows`` (torch's ``argmax(dim=-1)``, Model Runner V2's greedy draft pick)
and the plugin's ``DraftModelSpeculator.sample_draft`` built on it.

The contract is torch's: the first index of the largest value, the first NaN when a row holds
one, 0 for a row of -inf. Checked against ``torch.argmax`` on random rows (float32, bfloat16,
float16; ties, NaN, +-inf; rows a column slice of a wider table; one row or many; one thread or
a team that splits a row), the result written into a poisoned buffer whose tail must stay as it
was; bad input refused naming the argument with nothing written.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels_cpu import argmax_rows
from tests._fuzz import fuzz_settings
from tests._spec_helpers import threads

POISON = -7777


@pytest.fixture(params=[1, 4], ids=["one-thread", "team-of-4"])
def team(request):
    with threads(request.param):
        yield request.param


def _rows(seed, R, V, dtype, ties, specials, wide):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(R, V + wide, generator=g) * 3
    if ties:  # few distinct values: the first occurrence decides
        x = torch.round(x)
    for _ in range(specials):
        r = int(torch.randint(0, R, (1,), generator=g))
        c = int(torch.randint(0, V, (1,), generator=g))
        kind = int(torch.randint(0, 4, (1,), generator=g))
        if kind == 0:
            x[r, c] = float("nan")
        elif kind == 1:
            x[r, c] = float("inf")
        elif kind == 2:
            x[r] = float("-inf")
        else:
            x[r, c:] = float("-inf")
    return x.to(dtype)[:, :V]  # a column slice when wide > 0: rows V + wide apart


@fuzz_settings(40, deep_examples=1500, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    R=st.integers(1, 6),
    V=st.sampled_from([1, 7, 2047, 2048, 2049, 40000]),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
    ties=st.booleans(),
    specials=st.integers(0, 3),
    wide=st.sampled_from([0, 0, 5]),
)
def test_gives_torchs_argmax(seed, R, V, dtype, ties, specials, wide):
    x = _rows(seed, R, V, dtype, ties, specials, wide)
    want = x.argmax(dim=-1)
    for n in (1, 4):
        with threads(n):
            out = torch.full((R + 3,), POISON, dtype=torch.int64)
            assert argmax_rows(x, out) is out
        assert out[:R].tolist() == want.tolist(), n
        assert out[R:].tolist() == [POISON] * 3  # canaries past the rows


def test_the_rules_at_their_edges(team):
    """The first NaN beats +inf before it; ties keep the first; -inf only gives 0; a NaN in a
    later part of a split row still wins over a larger value in an earlier part."""
    V = 70000
    x = torch.zeros(5, V)
    x[0, 10] = float("inf")
    x[0, 50000] = float("nan")
    x[0, 60000] = float("nan")
    x[1, 3] = 2.0
    x[1, 69999] = 2.0
    x[2] = float("-inf")
    x[3, 1] = 5.0
    x[3, 65000] = float("nan")
    x[4, -1] = 1.0
    out = torch.full((5,), POISON, dtype=torch.int64)
    argmax_rows(x, out)
    assert out.tolist() == x.argmax(dim=-1).tolist() == [50000, 3, 0, 65000, V - 1]


def test_no_rows_writes_nothing():
    out = torch.full((2,), POISON, dtype=torch.int64)
    argmax_rows(torch.empty(0, 5), out)
    assert out.tolist() == [POISON] * 2


def _bad_cases():
    x = torch.randn(3, 10)
    return [
        (dict(logits=x[0]), "logits"),  # 1-D
        (dict(logits=x.to(torch.int32)), "logits"),  # not a float dtype
        (dict(logits=x.double()), "logits"),  # float64: not a logits dtype here
        (dict(logits=torch.empty(3, 0)), "logits"),  # an argmax of nothing
        (dict(logits=x.t()), "logits"),  # columns not unit-stride
        (dict(out=torch.zeros(2, dtype=torch.int64)), "out"),  # too short
        (dict(out=torch.zeros(3, dtype=torch.int32)), "out"),  # int32
        (dict(out=torch.zeros(3, 2, dtype=torch.int64)), "out"),  # 2-D
    ]


@pytest.mark.parametrize("kw,name", _bad_cases())
def test_bad_input_is_refused_naming_it(kw, name):
    args = dict(logits=torch.randn(3, 10), out=torch.full((3,), POISON, dtype=torch.int64))
    args.update(kw)
    before = args["out"].clone()
    with pytest.raises((ValueError, TypeError), match=name):
        argmax_rows(args["logits"], args["out"])
    assert torch.equal(args["out"], before)


def test_out_overlapping_the_logits_is_refused():
    buf = torch.zeros(64)
    logits = buf[:40].view(4, 10)
    out = buf[32:40].view(torch.int64)  # inside the last row
    with pytest.raises(ValueError, match="out"):
        argmax_rows(logits, out)


# -- the plugin's sample_draft ---------------------------------------------------------------------


class _Speculator:
    """What ``sample_draft`` reads of vLLM's ``DraftModelSpeculator``."""

    def __init__(self, logits, local_argmax=False):
        self.logits = logits
        self.use_local_argmax_reduction = local_argmax
        self.predicted = []

    def compute_draft_logits(self, hidden_states, spec_step_idx):
        return self.logits

    def _maybe_predict_acceptance(self, logits, idx_mapping, draft_step):
        self.predicted.append(logits)


def _original(self, *args):
    return ("vllm", args)


def _call(ours, spec, draft_logits=None):
    return ours(spec, None, None, None, None, None, None, draft_logits, 0)


def test_sample_draft_picks_torchs_argmax_and_leaves_the_rest_to_vllm():
    from fastdispatch.vllm import _mrv2_drafter as D

    ours = D.sample_draft_for(_original)
    x = _rows(3, 4, 5000, torch.float32, True, 2, 0)
    spec = _Speculator(x)
    before = dict(D._counts)
    got = _call(ours, spec)
    assert got.dtype == torch.int64 and got.tolist() == x.argmax(dim=-1).tolist()
    assert spec.predicted == [x]  # the acceptance estimator still sees the logits
    assert D._counts["ours"] == before["ours"] + 1
    # draft probabilities (the Gumbel draw) and the local-argmax reduction: vLLM's code
    assert _call(ours, spec, draft_logits=torch.zeros(1))[0] == "vllm"
    assert _call(ours, _Speculator(x, local_argmax=True))[0] == "vllm"
    # logits it does not read (float64): torch's argmax, same answer
    x64 = x.double()
    assert _call(ours, _Speculator(x64)).tolist() == x64.argmax(dim=-1).tolist()
    assert D._counts["vllm"] == before["vllm"] + 3
    assert ours.__wrapped__ is _original
