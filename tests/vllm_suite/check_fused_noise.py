"""The opt-in fused random-sampling switch: ``install(fused_noise=True)`` routes vLLM's
``rejection_sample``/``sample_recovered_tokens`` to ``fastdispatch.ops.fused`` and back.

The fused path draws its noise from its own Philox stream (its distribution is tested with the
fused op); here: the switch, that greedy results stay exactly stock's, and that random results are
well-formed tokens.
"""

import inspect

import pytest
import torch
from check_entrypoints import _rejection_args, _rejection_case, _rs

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
            # the fused function, behind an adapter with vLLM's own signature
            assert type(held) is fastdispatch.KernelOverride
            assert held.func._fastdispatch_impl is impl
            assert inspect.signature(held.func) == inspect.signature(original[name])
        assert not any(fastdispatch.verify(list(_names())).values())
    finally:
        modes.fv.install(fused_noise=False)
    for name, fn in original.items():
        assert getattr(rs, name.rsplit(".", 1)[1]) is fn


def test_fly_arguments_as_0_33_passes_them(modes):
    """vLLM 0.33's ``RejectionSampler.forward`` always passes ``fly_window_size``,
    ``fly_entropy_threshold`` and ``fly_entropy_top_k``: a ``rejection_sample`` of that shape
    (this release's own, given the three parameters) gets a fused replacement of the same shape
    at install; FLy off runs the fused path, FLy on is refused as vLLM refuses it on CPU."""
    import fastdispatch.vllm as fv

    rs = _rs()
    stock = rs.rejection_sample
    ns = {"stock": stock}
    exec(
        "def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len,\n"
        "        cu_num_draft_tokens, draft_probs, target_logits, bonus_token_ids,\n"
        "        sampling_metadata, synthetic_mode=False, synthetic_conditional_rates=None,\n"
        "        use_fp64_gumbel=False, fly_window_size=None, fly_entropy_threshold=None,\n"
        "        fly_entropy_top_k=3):\n"
        "    raise AssertionError('stock ran')\n",
        ns,
    )
    shaped = ns["rejection_sample"]
    shaped.__module__ = rs.__name__
    modes.fv.uninstall()
    rs.rejection_sample = shaped
    try:
        modes.fv.install(fused_noise=True)
        held = rs.rejection_sample
        assert type(held) is fastdispatch.KernelOverride
        assert inspect.signature(held.func) == inspect.signature(shaped)
        c = _rejection_case("greedy", with_draft_probs=False)
        args = (c["draft"], c["num_draft"], c["K"], c["cu"], None, c["logits"], c["bonus"], c["md"])
        fly = dict(synthetic_mode=False, synthetic_conditional_rates=None, use_fp64_gumbel=False)
        got = rs.rejection_sample(
            *args, **fly, fly_window_size=None, fly_entropy_threshold=None, fly_entropy_top_k=3
        )
        want = stock(*args)
        assert torch.equal(got, want)  # greedy: the fused path gives stock's tokens
        with pytest.raises(NotImplementedError, match=fv.FLY_REFUSAL):
            rs.rejection_sample(
                *args, **fly, fly_window_size=2, fly_entropy_threshold=0.5, fly_entropy_top_k=3
            )
    finally:
        modes.fv.uninstall()
        rs.rejection_sample = stock
        modes.fv.install()


def _sample(kind, n=8):
    rs = _rs()
    out = []
    for _ in range(n):
        c = _rejection_case(kind, with_draft_probs=kind != "greedy")
        got = rs.rejection_sample(*_rejection_args(c))
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
