"""The opt-in fused random-sampling switch: ``install(fused_noise=True)`` routes vLLM's
``rejection_sample``/``sample_recovered_tokens`` to ``fastdispatch.ops.fused`` and back.

The fused path draws its noise from its own Philox stream (its distribution is tested with the
fused op); here: the switch, that greedy results stay exactly stock's, and that random results are
well-formed tokens.
"""

import torch
from check_entrypoints import _rejection_case, _rs

import fastdispatch


def _names():
    from fastdispatch.ops.fused import fastdispatch_fused_vllm_overrides

    return fastdispatch_fused_vllm_overrides()


def test_switch_on_and_off(modes):
    rs = _rs()
    original = {name: getattr(rs, name.rsplit(".", 1)[1]) for name in _names()}
    modes.fv.install(fused_noise=True)
    try:
        for name, impl in _names().items():
            held = getattr(rs, name.rsplit(".", 1)[1])
            assert type(held) is fastdispatch.KernelOverride and held.func is impl
        assert not any(fastdispatch.verify(list(_names())).values())
    finally:
        modes.fv.install(fused_noise=False)
    for name, fn in original.items():
        assert getattr(rs, name.rsplit(".", 1)[1]) is fn


def _sample(kind, n=8):
    rs = _rs()
    out = []
    for _ in range(n):
        c = _rejection_case(kind, with_draft_probs=kind != "greedy")
        got = rs.rejection_sample(
            c["draft"],
            c["num_draft"],
            c["K"],
            c["cu"],
            c["draft_probs"],
            c["logits"].clone(),
            c["bonus"],
            c["md"],
        )
        out.append((got, c))
    return out


def test_greedy_matches_stock_and_random_is_well_formed(modes):
    stock = modes.all(lambda: _sample("greedy"), modes=("stock",))["stock"]
    modes.fv.install(fused_noise=True)
    try:
        torch.manual_seed(0)
        fused = _sample("greedy")
        random = _sample("mixed")
    finally:
        modes.fv.install(fused_noise=False)
    for (s, _), (f, _) in zip(stock, fused):
        assert torch.equal(s, f)
    for got, c in random:
        assert got.dtype == torch.int32 and got.shape == (c["B"], c["K"] + 1)
        for i, n in enumerate(c["num_draft"]):
            row = got[i].tolist()
            emitted = [t for t in row if t != -1]
            assert 1 <= len(emitted) <= n + 1 and row[: len(emitted)] == emitted
            assert all(0 <= t < c["V"] for t in emitted)
