"""vLLM's entry points on the layouts its callers really pass, stock against ours.

``torch.multinomial(probs, 1)`` gives draft ids as ``[N, 1]``; vLLM's ``sample_recovered_tokens``
then allocates its output ``empty_like`` them and launches the kernel on both. Stock vLLM and its
Triton kernel accept that (the kernel sees pointers); so must we -- with the same tokens as
stock, and the same tokens as the ``[N]`` call -- on the plain plugin path and on the fused one.
"""

import pytest
import torch
from check_entrypoints import _recovered_args, _rejection_case, _rs


def _recovered(c, draft, probs):
    rs = _rs()
    return rs.sample_recovered_tokens(*_recovered_args(c, draft, probs))


@pytest.mark.parametrize("with_draft_probs", [False, True], ids=["no_draft_probs", "draft_probs"])
def test_sample_recovered_tokens_with_column_draft_ids(modes, with_draft_probs):
    def fn():
        out = []
        for _ in range(8):
            c = _rejection_case("random", with_draft_probs)
            probs = c["logits"].softmax(-1, dtype=torch.float32)
            state = torch.get_rng_state()
            flat = _recovered(c, c["draft"], probs)
            torch.set_rng_state(state)
            col = _recovered(c, c["draft"].view(-1, 1), probs)
            out.append((flat.clone(), col.clone()))
        return out

    res = modes.all(fn)
    for (o_flat, o_col), (s_flat, s_col) in zip(res["ours"], res["stock"]):
        assert o_col.shape == (o_flat.numel(), 1) and o_col.dtype == o_flat.dtype
        assert torch.equal(o_col.view(-1), o_flat)
        assert torch.equal(o_col, s_col) and torch.equal(o_flat, s_flat)


def test_fused_sample_recovered_tokens_with_column_draft_ids(modes):
    modes.fv.install(fused_noise=True)
    try:
        for seed in range(6):
            torch.manual_seed(seed)
            c = _rejection_case("random", with_draft_probs=seed % 2 == 0)
            probs = c["logits"].softmax(-1, dtype=torch.float32)
            state = torch.get_rng_state()
            flat = _recovered(c, c["draft"], probs)
            torch.set_rng_state(state)
            col = _recovered(c, c["draft"].view(-1, 1), probs)
            assert col.shape == (flat.numel(), 1)
            assert torch.equal(col.view(-1), flat)
            assert ((flat >= 0) & (flat < c["V"])).all()
    finally:
        modes.fv.install(fused_noise=False)
