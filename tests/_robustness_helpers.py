"""Launches of the fused whole-step entry points (``kernels_cpu._fused``) for the robustness tests.

``fused_launches(idx)`` returns ``(label, new_output, launch)`` triples over one fixed random
batch: ``new_output()`` makes a fresh, pre-filled output tensor and ``launch(out)`` runs the entry
point into it, reading inputs that every launch shares.
"""

import torch

from kernels_cpu import _fused

FUSED_ENTRIES = ("rejection_sample_step", "rejection_sample_step_logits", "recovered_tokens")


def _probs(T, V, gen):
    p = torch.softmax(torch.randn(T, V, generator=gen) * 3, dim=-1)
    p[torch.rand(T, V, generator=gen) < 0.2] = 0
    return p.contiguous()


def fused_launches(idx, B=6, K=3, V=300, seed=0):
    gen = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, K + 1, (B,), generator=gen)
    counts[0] = K  # at least one full row
    cu = torch.cumsum(counts, 0).to(idx)
    T = int(counts.sum())
    t, q = _probs(T, V, gen), _probs(T, V, gen)
    logits = torch.randn(T, V, generator=gen)
    draft = torch.randint(-1, V, (T,), generator=gen).to(idx)
    take = torch.rand(T, generator=gen) < 0.5  # many accepted drafts
    draft[take] = t.argmax(-1)[take].to(idx)
    bonus = torch.randint(0, V, (B, 1), generator=gen).to(idx)
    greedy = torch.rand(B, generator=gen) < 0.3
    seeds = torch.randint(-(2**63), 2**63 - 1, (B, 2), generator=gen)

    def step_out():
        return torch.full((B, K + 1), -1, dtype=idx)

    def recovered_out():
        return torch.full((T,), -1, dtype=idx)

    return [
        (
            "rejection_sample_step",
            step_out,
            lambda out: _fused.rejection_sample_step(
                out, cu, draft, q, t, bonus, greedy, None, seeds, K
            ),
        ),
        (
            "rejection_sample_step_logits",
            step_out,
            lambda out: _fused.rejection_sample_step_logits(
                out, cu, draft, q, logits, bonus, greedy, seeds, K
            ),
        ),
        (
            "recovered_tokens",
            recovered_out,
            lambda out: _fused.recovered_tokens(out, cu, draft, q, t, seeds),
        ),
    ]


def shared_inputs(launch):
    """The tensors a ``launch`` closure reads (for refcount and untouched-input checks)."""
    cells = launch.__closure__ or ()
    return [c.cell_contents for c in cells if isinstance(c.cell_contents, torch.Tensor)]
