"""What the two files of vLLM's own Model Runner V2 tests share (``check_mrv2_upstream.py``,
vLLM 0.34.0's; ``check_mrv2_upstream_0_32.py``, 0.32.0's that 0.34.0 dropped): our kernels made to
stand in vLLM's modules for a file's tests, and the inputs and statistical checks vLLM's test
files build alike."""

import contextlib
import importlib
import math

import pytest
import torch

NEG = float("-inf")
INDEX_DTYPES = pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])

HEAD_LOG_GAP = 12.0  # vLLM's 18 puts the tail below what CPU-sized sample counts resolve
Z_TOLERANCE = 10.0
RS_VOCAB = 512  # vLLM's 4096; the trial counts keep vLLM's multiples of it


@contextlib.contextmanager
def ours_standing(kernels):
    """fastdispatch installed, each of ``kernels`` ({module: names}) ours in its module, for the
    block. The suite's worker may already have installed it (with options of its own): then it
    is left as it is, else installed here and uninstalled after, so later files find what they
    found. With it the CPU worker's own patches: ``RequestState``, ``BlockTables`` and the staged
    writes pin host buffers, which torch refuses without an accelerator; importing the CPU
    worker's module makes pinning a no-op, as it does in a worker."""
    import fastdispatch.vllm as fv

    was_installed = fv.installed()
    if not was_installed:
        fv.install()
    try:
        for module, names in kernels.items():
            held = vars(importlib.import_module(module))
            for name in names:
                assert type(held[name]).__name__ == "KernelOverride", f"{module}.{name}"
        import vllm.v1.worker.cpu.shm  # noqa: F401

        yield
    finally:
        if not was_installed:
            fv.uninstall()


# -- tests/v1/worker/test_gpu_gumbel_sample.py ---------------------------------------------------


def heavy_tailed_counts(vocab, seed=1234):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 4, (vocab,), generator=g, dtype=torch.int64)
    counts[0] = round(math.exp(HEAD_LOG_GAP))
    return counts


def counts_to_logits(counts):
    return counts.double().log().to(torch.float32)


def gumbel_draws(api, logits_1d, size, *, start=0, use_fp64=False, is_drafting=False):
    """vLLM's _sample: ``size`` Gumbel draws from one logit vector -- its rows a 0-stride view
    of it, one request (seed 0xABCD, temperature 1), positions ``start`` on, one a draw."""
    vocab = logits_1d.shape[0]
    return api.gumbel_sample(
        logits_1d.unsqueeze(0).expand(size, vocab),
        torch.zeros(size, dtype=torch.int32),
        torch.tensor([1.0]),
        torch.tensor([0xABCD], dtype=torch.int64),
        torch.arange(start, start + size, dtype=torch.int64),
        apply_temperature=True,
        is_drafting=is_drafting,
        use_fp64=use_fp64,
    )


def z_score(observed, expected, n):
    p = expected / n
    return (observed - expected) / math.sqrt(n * p * (1 - p))


# -- tests/v1/spec_decode/test_rejection_sampler_utils.py ----------------------------------------


def build_inputs(target_1d, draft_1d, k, temperature, num_trials, gen, index_dtype=torch.int32):
    """vLLM's _build_rejection_sample_inputs, its draws from ``gen`` and its index buffers'
    dtype chosen."""
    vocab = target_1d.shape[0]
    num_logits = num_trials * (k + 1)
    scaled = draft_1d.float()
    if temperature > 0:
        scaled = scaled / temperature
    probs = torch.softmax(scaled, dim=0).expand(num_trials, -1)
    draft_sampled = torch.zeros(num_trials, k + 1, dtype=torch.int64)
    draft_sampled[:, 1:] = torch.multinomial(probs, k, replacement=True, generator=gen)
    trials = torch.arange(num_trials, dtype=index_dtype)
    return dict(
        target_logits=target_1d.unsqueeze(0).expand(num_logits, -1).contiguous(),
        draft_logits=draft_1d.view(1, 1, vocab).expand(num_trials, k, -1).contiguous(),
        draft_sampled=draft_sampled.view(-1),
        cu_num_logits=torch.arange(num_trials + 1, dtype=index_dtype) * (k + 1),
        pos=torch.arange(num_logits, dtype=index_dtype),
        idx_mapping=trials,
        expanded_idx_mapping=trials.repeat_interleave(k + 1),
        expanded_local_pos=torch.arange(k + 1, dtype=index_dtype).repeat(num_trials),
        temperature=torch.full((num_trials,), temperature, dtype=torch.float32),
        seed=torch.arange(num_trials, dtype=torch.int64),
    )


def valid_mask(num_sampled, k):
    return torch.arange(k + 1).unsqueeze(0) < num_sampled.unsqueeze(1)


def assert_distribution_match(sampled, target_probs, label="", min_expected=5.0):
    """vLLM's chi-squared check: bins expected below 5 merged; chi2 < df + 10 sqrt(2 df)."""
    n = sampled.shape[0]
    observed = torch.zeros(target_probs.shape[0]).scatter_add_(0, sampled, torch.ones(n))
    expected = target_probs * n
    enough = expected >= min_expected
    obs, exp = observed[enough], expected[enough]
    if expected[~enough].sum() >= min_expected:
        obs = torch.cat([obs, observed[~enough].sum().view(1)])
        exp = torch.cat([exp, expected[~enough].sum().view(1)])
    df = obs.shape[0] - 1
    if df < 1:  # as vLLM's: too few samples at this position to say anything
        return
    chi2 = ((obs - exp) ** 2 / exp).sum().item()
    assert chi2 < df + 10 * math.sqrt(2 * df), f"[{label}] chi2={chi2:.1f} df={df}"
