"""``kernels_cpu._spec_step.spec_sample_step``: the whole speculative step read from the logits.

Three references:

* token-exact against ``_fused.rejection_sample_step_logits`` on what vLLM's forward would hand
  ``rejection_sample`` (the rows gathered, ``.float()``, divided by the temperature, masked by
  vLLM's sort-based top-k/top-p rules), with each request's bonus row appended as one more
  position whose draft id is -1 -- the fused step's recovered token there is exactly the race the
  one-pass step runs for the bonus (same Philox counters);
* the law: the first emitted token of a request is distributed as the masked softmax of its first
  target row (speculative sampling's guarantee), and a request without drafts draws its bonus from
  its bonus row's masked softmax -- by chi-square, never a token outside the kept set;
* greedy requests: the first maximum of the raw rows, walked as vLLM walks them.

Plus layouts (row-strided logits, int32/int64 everywhere, fp16/bf16), canaries around the output,
logits never written, thread invariance, and every bad argument named.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu
from kernels_cpu import _fused
from kernels_cpu._spec_step import spec_sample_step
from tests._fused_helpers import chi2_pvalue, masked_law
from tests._fuzz import fuzz_settings

ALPHA = 1e-4
IDX = (torch.int32, torch.int64)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class Batch:
    """A step's inputs in the layout vLLM's model runner uses: per request its target rows, then
    its bonus row (optionally inside a wider buffer, rows any distance apart)."""

    def __init__(
        self,
        counts,
        V,
        *,
        seed=0,
        dtype=torch.float32,
        idx=torch.int32,
        pad=0,
        scale=3.0,
        hit=0.4,
        with_q=False,
        k=None,
        p=None,
        temperature=0.8,
        greedy=None,
        bonus_greedy=None,
        shuffle=False,
    ):
        g = torch.Generator().manual_seed(seed)
        self.counts, self.V, self.B = list(counts), V, len(counts)
        self.K = max(self.counts, default=0)
        rows = sum(self.counts) + self.B
        wide = torch.randn(rows, V + pad, generator=g) * scale
        self.logits = wide.to(dtype)[:, :V]
        order = torch.randperm(rows, generator=g) if shuffle else torch.arange(rows)
        target, bonus, at = [], [], 0
        for n in self.counts:
            target += order[at : at + n].tolist()
            bonus.append(int(order[at + n]))
            at += n + 1
        self.T = len(target)
        self.target = torch.tensor(target, dtype=idx)
        self.bonus = torch.tensor(bonus, dtype=idx)
        self.cu = (
            torch.tensor(np.cumsum(self.counts), dtype=idx) if self.B else torch.zeros(0, dtype=idx)
        )
        draft = torch.randint(0, V, (self.T,), generator=g)
        if self.T:
            top = self.logits[self.target.long()].float().argmax(-1)
            take = torch.rand(self.T, generator=g) < hit
            draft[take] = top[take]
        self.draft = draft.to(idx)
        self.q = None
        if with_q:
            self.q = torch.softmax(torch.randn(self.T, V, generator=g), -1)
        self.k = (
            None
            if k is None
            else torch.as_tensor(k, dtype=torch.int64).expand(self.B).to(idx).contiguous()
        )
        self.p = (
            None
            if p is None
            else torch.as_tensor(p, dtype=torch.float32).expand(self.B).contiguous()
        )
        self.temperature = (
            torch.as_tensor(temperature, dtype=torch.float32).expand(self.B).contiguous()
        )
        self.greedy = (
            None if greedy is None else torch.as_tensor(greedy).expand(self.B).contiguous()
        )
        self.bonus_greedy = (
            None
            if bonus_greedy is None
            else torch.as_tensor(bonus_greedy).expand(self.B).contiguous()
        )
        self.seeds = torch.stack(
            [torch.randint(0, 2**62, (self.B,), generator=g), torch.arange(self.B)], 1
        )

    def run(self, out_dtype=torch.int32, **override):
        out = torch.full((self.B, self.K + 1), -1, dtype=out_dtype)
        args = dict(
            output_token_ids=out,
            logits=self.logits,
            target_logits_indices=self.target,
            bonus_logits_indices=self.bonus,
            cu_num_draft_tokens=self.cu,
            draft_token_ids=self.draft,
            draft_probs=self.q,
            temperature=self.temperature,
            is_greedy=self.greedy,
            bonus_greedy=self.bonus_greedy,
            top_k=self.k,
            top_p=self.p,
            seeds=self.seeds,
            max_spec_len=self.K,
        )
        args.update(override)
        spec_sample_step(*args.values())
        return args["output_token_ids"]

    def processed(self, rows):
        """vLLM's processing of some logits rows: float32, / temperature, top-k then top-p."""
        x = self.logits[rows.long()].float()
        req = torch.repeat_interleave(torch.arange(self.B), torch.tensor(self.counts) + 1)
        return x, req

    def reference(self):
        """The fused step on vLLM-processed rows, each bonus row one more position (draft -1)."""
        rows, req, drafts, qs = [], [], [], []
        at = 0
        for r, n in enumerate(self.counts):
            rows += self.target[at : at + n].tolist() + [int(self.bonus[r])]
            drafts += self.draft[at : at + n].tolist() + [-1]
            if self.q is not None:
                qs += [self.q[at : at + n], torch.zeros(1, self.V)]
            req += [r] * (n + 1)
            at += n
        req_t = torch.tensor(req, dtype=torch.long)
        x = (
            self.logits[torch.tensor(rows, dtype=torch.long)].float()
            if rows
            else torch.zeros(0, self.V)
        )
        x = x / self.temperature[req_t].unsqueeze(1)
        k = None if self.k is None else self.k.long()[req_t]
        p = None if self.p is None else self.p[req_t]
        if rows and (k is not None or p is not None):
            x = x.contiguous()
            kernels_cpu.top_k_top_p(x, k, p)  # the row mask itself is tested on its own
        greedy_rows = None
        if self.greedy is not None:
            greedy_rows = self.greedy
        out = torch.full((self.B, self.K + 2), -1, dtype=torch.int64)
        cu = torch.tensor(np.cumsum([n + 1 for n in self.counts]), dtype=torch.int64)
        q = torch.cat(qs).contiguous() if self.q is not None and qs else None
        # greedy targets argmax the raw rows: the fused reference argmaxes its logits input, so
        # greedy requests are given the raw rows there
        if greedy_rows is not None and rows:
            raw = self.logits[torch.tensor(rows, dtype=torch.long)].float()
            g = greedy_rows[req_t]
            x = torch.where(g.unsqueeze(1), raw, x)
        _fused.rejection_sample_step_logits(
            out,
            cu,
            torch.tensor(drafts, dtype=torch.int64),
            q,
            x.contiguous(),
            torch.zeros(self.B, dtype=torch.int64),
            greedy_rows,
            self.seeds,
            self.K + 1,
        )
        return out[:, : self.K + 1]


def _masked_probs(row, k, p, t):
    return masked_law(row, t, k, p)


# -- token-exact against the fused step on vLLM-processed rows ----------------------------------


@st.composite
def case(draw):
    B = draw(st.integers(0, 5))
    K = draw(st.integers(0, 4))
    return dict(
        counts=[draw(st.integers(0, K)) for _ in range(B)],
        V=draw(st.sampled_from([1, 7, 256, 300, 1000])),
        seed=draw(st.integers(0, 2**31)),
        dtype=draw(st.sampled_from(DTYPES)),
        idx=draw(st.sampled_from(IDX)),
        pad=draw(st.sampled_from([0, 3])),
        with_q=draw(st.booleans()),
        k=draw(st.sampled_from([None, 1, 3, 50])),
        p=draw(st.sampled_from([None, 0.5, 0.9, 1.0])),
        temperature=draw(st.sampled_from([1.0, 0.8, 0.3, 2.5])),
        greedy=draw(st.sampled_from([None, False, True])),
        shuffle=draw(st.booleans()),
        hit=draw(st.sampled_from([0.0, 0.5, 1.0])),
    )


@fuzz_settings(120, deadline=None, derandomize=True)
@given(case())
def test_tokens_equal_the_fused_step_on_vllm_processed_rows(c):
    greedy = c.pop("greedy")
    b = Batch(**c, greedy=greedy, bonus_greedy=greedy)
    logits_before = b.logits.clone()
    got = b.run().long()
    assert torch.equal(got, b.reference()), (got, b.reference())
    assert torch.equal(b.logits, logits_before)  # never written


@pytest.mark.parametrize("out_dtype", IDX)
def test_output_slots_and_canaries(out_dtype):
    b = Batch([4, 0, 2, 4, 1], 500, seed=3, k=20, p=0.9)
    buf = torch.full((b.B * (b.K + 1) + 8,), 12345, dtype=out_dtype)
    out = buf[4 : 4 + b.B * (b.K + 1)].view(b.B, b.K + 1)
    out.fill_(-1)
    b.run(out_dtype, output_token_ids=out)
    assert (buf[:4] == 12345).all() and (buf[-4:] == 12345).all()
    for r, n in enumerate(b.counts):
        row = out[r].tolist()
        j = next((j for j in range(n) if row[j] != int(b.draft[sum(b.counts[:r]) + j])), n)
        assert 0 <= row[j] < b.V and all(t == -1 for t in row[j + 1 :])


def test_same_tokens_at_any_thread_count():
    b = Batch([4] * 12, 4096, seed=5, p=0.8, k=[3000] * 12)
    old = kernels_cpu.parallel_threshold()
    kernels_cpu.set_parallel_threshold(0)
    try:
        outs = set()
        for threads in (1, 2, 3):
            kernels_cpu.set_num_threads(threads)
            outs.add(tuple(b.run().reshape(-1).tolist()))
        assert len(outs) == 1
    finally:
        kernels_cpu.set_parallel_threshold(old)
        kernels_cpu.set_num_threads(None)


# -- greedy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_walk_is_vllms(dtype):
    b = Batch([3, 4, 0, 2], 300, seed=7, dtype=dtype, hit=0.7, greedy=True, bonus_greedy=True)
    got = b.run().long()
    rows = b.logits.float()
    at = 0
    for r, n in enumerate(b.counts):
        want = []
        for j in range(n):
            tok = int(rows[int(b.target[at + j])].argmax())
            want.append(tok)
            if tok != int(b.draft[at + j]):
                break
        else:
            want.append(int(rows[int(b.bonus[r])].argmax()))
        at += n
        assert got[r, : len(want)].tolist() == want
        assert (got[r, len(want) :] == -1).all()


def test_greedy_targets_random_bonus_and_the_reverse():
    # vLLM decides targets (temperature == 0) and bonus (< 1e-5) by different rules
    b = Batch([2, 2], 64, seed=9, hit=1.0, greedy=[True, True], bonus_greedy=[False, True])
    tokens = {int(b.run(seeds=torch.tensor([[s, 0], [s, 1]]))[0, 2]) for s in range(200)}
    assert len(tokens) > 3  # request 0's bonus token is drawn
    tokens = {int(b.run(seeds=torch.tensor([[s, 0], [s, 1]]))[1, 2]) for s in range(50)}
    assert tokens == {int(b.logits[int(b.bonus[1])].argmax())}


# -- the law -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k,p,dtype",
    [
        (None, None, torch.float32),
        (5, None, torch.float32),
        (None, 0.7, torch.bfloat16),
        (6, 0.8, torch.float16),
        (40, None, torch.float32),
    ],
)
@pytest.mark.parametrize("with_q", [False, True])
def test_first_token_law_is_the_masked_target(k, p, dtype, with_q):
    V, N = 40, 6000
    b = Batch(
        [3], V, seed=11, dtype=dtype, k=k, p=p, temperature=0.7, hit=0.0, with_q=with_q, scale=1.0
    )
    b.draft[0] = int(b.logits[int(b.target[0])].float().argmax())  # often accepted
    keys = torch.randint(0, 2**62, (N,), generator=torch.Generator().manual_seed(1))
    counts = np.zeros(V)
    # the guarantee holds for drafts drawn from the draft law: q's when given, else any draft
    drafts = (
        torch.multinomial(b.q[0], N, replacement=True, generator=torch.Generator().manual_seed(2))
        if with_q
        else None
    )
    for i, key in enumerate(keys.tolist()):
        if drafts is not None:
            b.draft[0] = int(drafts[i])
        counts[int(b.run(seeds=torch.tensor([[key, 0]]))[0, 0])] += 1
    want = _masked_probs(b.logits[int(b.target[0])], k, p, 0.7)
    assert counts[want.numpy() == 0].sum() == 0
    assert chi2_pvalue(counts, want.numpy()) > ALPHA


@pytest.mark.parametrize("k,p", [(None, None), (3, None), (None, 0.6), (8, 0.9)])
def test_bonus_law_without_drafts(k, p):
    V, N = 30, 6000
    b = Batch([0], V, seed=13, k=k, p=p, temperature=1.3, scale=1.5)
    counts = np.zeros(V)
    for key in range(N):
        counts[int(b.run(seeds=torch.tensor([[key * 7919 + 1, 5]]))[0, 0])] += 1
    want = _masked_probs(b.logits[int(b.bonus[0])], k, p, 1.3)
    assert chi2_pvalue(counts, want.numpy()) > ALPHA


def test_top_k_ties_at_the_kth_value_are_kept():
    V = 16
    b = Batch([0], V, seed=1, k=2, temperature=1.0)
    b.logits[int(b.bonus[0])] = torch.tensor([0.0] * 10 + [5.0, 5.0, 5.0, 1.0, 0.0, 0.0])
    seen = {int(b.run(seeds=torch.tensor([[s, 0]]))[0, 0]) for s in range(300)}
    assert seen == {10, 11, 12}


def test_rows_of_minus_inf_and_a_single_finite_value():
    V = 50
    b = Batch([1, 0], V, seed=2, p=0.5)
    b.logits[int(b.target[0])] = -math.inf
    b.logits[int(b.target[0]), 17] = 3.0
    b.draft[0] = 4
    b.logits[int(b.bonus[1])] = -math.inf
    out = b.run()
    assert int(out[0, 0]) == 17  # draft 4 has no mass: rejected, the one finite value recovered
    assert 0 <= int(out[1, 0]) < V  # an all -inf row: nothing to rank, a valid id all the same


# -- validation --------------------------------------------------------------------------------


def _bad(b, name, value, exc=(ValueError, TypeError, IndexError)):
    out = torch.full((b.B, b.K + 1), -7, dtype=torch.int32)
    with pytest.raises(exc) as info:
        b.run(**{"output_token_ids": out, name: value})
    assert name.split(".")[0] in str(info.value) or name in str(info.value)
    assert (out == -7).all()  # nothing written


def test_bad_arguments_are_named_and_nothing_is_written():
    b = Batch([2, 1], 100, seed=4, k=5, p=0.9)
    _bad(b, "top_k", torch.tensor([0, 5]))
    _bad(b, "top_k", torch.tensor([5]))
    _bad(b, "top_p", torch.tensor([0.0, 0.5]))
    _bad(b, "top_p", torch.tensor([0.5, 1.5]))
    _bad(b, "top_p", torch.tensor([0.5, 0.5], dtype=torch.float16))
    _bad(b, "temperature", torch.tensor([0.8, 0.0]))
    _bad(b, "temperature", torch.tensor([0.8, float("nan")]))
    _bad(b, "temperature", torch.tensor([0.8, 0.8], dtype=torch.float64))
    _bad(b, "target_logits_indices", torch.tensor([0, 1, 99], dtype=torch.int32))
    _bad(b, "target_logits_indices", torch.tensor([0, -1, 3], dtype=torch.int32))
    _bad(b, "target_logits_indices", torch.tensor([0, 1], dtype=torch.int32))
    _bad(b, "bonus_logits_indices", torch.tensor([2, 5], dtype=torch.int32))
    _bad(b, "draft_token_ids", torch.tensor([0, 1, 100], dtype=torch.int32))
    _bad(b, "logits", b.logits.double())
    _bad(b, "logits", b.logits.t())
    _bad(b, "logits", b.logits[:, None])
    _bad(b, "draft_probs", torch.rand(3, 99))
    _bad(b, "seeds", torch.zeros(2, 3, dtype=torch.int64))
    _bad(b, "is_greedy", torch.tensor([1, 0]))
    _bad(b, "max_spec_len", 2.0)
    _bad(b, "max_spec_len", -1)
    _bad(b, "cu_num_draft_tokens", torch.tensor([2, 1], dtype=torch.int32))


def test_temperature_is_not_read_for_greedy_requests():
    b = Batch([2, 1], 100, seed=4, greedy=[True, False], bonus_greedy=[True, False])
    out = b.run(temperature=torch.tensor([0.0, 0.9]))
    assert (out[0] >= -1).all()


def test_empty_batch_and_no_drafts():
    b = Batch([], 10)
    assert b.run().shape == (0, 1)
    b = Batch([0, 0, 0], 10, seed=3)
    out = b.run()
    assert ((out[:, 0] >= 0) & (out[:, 0] < 10)).all()
