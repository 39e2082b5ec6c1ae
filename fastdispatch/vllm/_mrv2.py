"""Model Runner V2 on a CPU without Triton: its kernels rebound to ``kernels_cpu``, the runner
let in where every kernel a configuration can launch is ours.

Model Runner V2 (``vllm/v1/worker/gpu``; the CPU worker's subclass in ``vllm/v1/worker/cpu``)
launches its Triton kernels directly -- ``kernel[grid](...)``, no dispatcher, no warmup owner --
and vLLM refuses to build it without Triton (``VllmConfig._validate_v2_model_runner``: "Model
Runner V2 requires Triton."). Without Triton each ``@triton.jit`` function is vLLM's
placeholder, the plain Python function, so a launch would fail. Here:

1. The kernels the installed runner launches are read from its own source files
   (:mod:`._mrv2_scan`), each filed under the feature that launches it.
2. Each one whose standing signature ``kernels_cpu`` implements (``kernels_cpu.MRV2_KERNELS``,
   chosen by argument names, as for the V1 runner's kernels) is registered with fastdispatch
   under its qualified name: the rebinding pass puts a ``KernelOverride`` wherever vLLM holds
   the kernel, and a kernel that needs its launch grid is a ``kernels_cpu.GridLauncher``, which
   the override hands the caller's grid.
3. ``VllmConfig._validate_v2_model_runner`` lets a configuration through without Triton when
   every kernel of every feature it uses is ours (:func:`needed_features`); otherwise vLLM's
   own check runs unchanged -- and refuses -- and the log says which kernels are missing.
4. The host-side pieces of Triton the runner calls (``triton.next_power_of_2``, absent from
   vLLM's placeholder) and the Triton guards of a speculator whose kernels are all ours (the
   ngram speculator's ``HAS_TRITON``) are provided.

Where Triton exists nothing of this is installed: the runner launches the real kernels.
``FASTDISPATCH_VLLM_MRV2=0`` turns it off; ``=1`` installs the kernels we have even where some
are missing (the configuration check still refuses a configuration that needs a missing one).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util

from .._env import env_flag
from ._installation import logger
from ._mrv2_drafter import draft_report, install_draft
from ._mrv2_scan import RUNNER_PACKAGE, launched_kernels, module_defines, runner_dir
from ._mrv2_verify import install_verify, verify_report

#: ``0`` keeps Model Runner V2 support out; ``1`` installs it where Triton exists too.
MRV2_ENV = "FASTDISPATCH_VLLM_MRV2"

_CONFIG_MODULE = "vllm.config.vllm"
_VALIDATE = "_validate_v2_model_runner"

#: ``speculative_config.method`` -> the features of the speculator it builds in the V2 runner
#: (EAGLE's and MTP's speculators are autoregressive drafters over a shared input stage).
_SPEC_METHODS = {
    "draft_model": ("draft_model",),
    "ngram": ("ngram",),
    "ngram_gpu": ("ngram",),
    "suffix": ("suffix",),
    "eagle": ("eagle", "autoregressive drafting"),
    "eagle3": ("eagle", "autoregressive drafting"),
    "mtp": ("mtp", "autoregressive drafting"),
    "dflash": ("dflash",),
}

_launchers: dict = {}  # kernels_cpu function -> its GridLauncher (one per function: identity)


def _launchable(impl):
    """What stands in vLLM's place for ``impl``: the function itself, or -- for a kernel whose
    contract says it needs the grid -- its (one, cached) ``GridLauncher``."""
    from kernels_cpu import GridLauncher
    from kernels_cpu.contracts import contract

    if not contract(impl.__name__).takes_grid:
        return impl
    if impl not in _launchers:
        _launchers[impl] = GridLauncher(impl)
    return _launchers[impl]


def coverage():
    """``(ours, missing)`` for the installed vLLM's Model Runner V2: ``ours`` maps each launched
    kernel's qualified name to the object that replaces it, ``missing`` each other launched
    kernel to ``(feature, why)``. ``(None, None)`` where vLLM has no Model Runner V2."""
    import kernels_cpu
    from kernels_cpu._overrides import parameter_names

    package = runner_dir()
    if package is None:
        return None, None
    launched = launched_kernels(package)
    ours, missing = {}, {}
    # The V1 runner's table too: a kernel both runners launch (the mamba state copies'
    # ``batch_memcpy_kernel``) is ours through either.
    for kernel, entry in {**kernels_cpu.VLLM_KERNELS, **kernels_cpu.MRV2_KERNELS}.items():
        for name in entry.names:
            if name not in launched:
                continue
            feature, args = launched[name]
            impl = kernels_cpu.impl_for(kernel, args, module_defines(package, name))
            if impl is None:
                known = "; ".join(
                    f"{fn}({', '.join(parameter_names(getattr(kernels_cpu, fn)))})"
                    for fn in entry.impls
                )
                missing[name] = (
                    feature,
                    f"signature ({', '.join(args)}) is not one kernels_cpu implements ({known})",
                )
            else:
                ours[name] = _launchable(impl)
            break
    for name, (feature, _) in launched.items():
        if name not in ours and name not in missing:
            missing[name] = (feature, "no kernels_cpu kernel")
    return ours, missing


def needed_features(config) -> set[str] | None:
    """The features a ``VllmConfig`` makes Model Runner V2 launch kernels of (``"core"``
    always), or None when the configuration uses something this function cannot judge (every
    feature is then needed). Read from the config's own attributes, each looked up defensively:
    an attribute a release lacks means the feature does not exist there."""
    needed = {"core"}
    spec = getattr(config, "speculative_config", None)
    if spec is not None:
        method = getattr(spec, "method", None)
        features = _SPEC_METHODS.get(str(method))
        if features is None:
            return None
        needed |= {"speculative decoding", *features}
        if getattr(spec, "enable_adaptive_verification", False):
            needed.add("adaptive verification")
    model = getattr(config, "model_config", None)
    if model is not None:
        if getattr(model, "is_hybrid", False) or getattr(model, "has_inner_state", False):
            needed.add("hybrid (mamba) models")
        if getattr(model, "enable_prompt_embeds", False):
            needed.add("prompt embeddings")
        if getattr(model, "uses_mrope", False):
            needed.add("multimodal M-RoPE")
        if getattr(model, "enable_trace_replay", False):
            needed.add("trace replay")
    parallel = getattr(config, "parallel_config", None)
    if parallel is not None:
        if (getattr(parallel, "decode_context_parallel_size", 1) or 1) > 1 or (
            getattr(parallel, "prefill_context_parallel_size", 1) or 1
        ) > 1:
            needed.add("context parallelism")
        if getattr(parallel, "enable_batch_sharded_sampling", False):
            needed.add("sharded sampling")
    if getattr(config, "watermark_config", None) is not None:
        needed.add("watermarking")
    # the sampler's thinking-budget state launches its kernels when the reasoning parser names
    # start and end tokens (ThinkingBudgetState.enabled)
    if getattr(config, "reasoning_config", None) is not None:
        needed.add("thinking budget")
    return needed


def lacking(config, missing) -> dict[str, tuple[str, str]]:
    """The missing kernels (``coverage()[1]``) that ``config`` would launch."""
    needed = needed_features(config)
    return {
        name: (feature, why)
        for name, (feature, why) in missing.items()
        if needed is None or feature in needed
    }


def _has_triton():
    try:
        from vllm.triton_utils import HAS_TRITON
    except Exception:  # noqa: BLE001
        return False
    return bool(HAS_TRITON)


def install_mrv2(state):
    """Install Model Runner V2 support on ``state`` (an ``_Installation``); records what it did
    (``state.mrv2``, ``state.mrv2_missing``) and why it did not, in ``state.mrv2_left``."""
    wanted = env_flag(MRV2_ENV)
    state.mrv2, state.mrv2_missing = {}, {}
    if wanted is False:
        state.mrv2_left = f"{MRV2_ENV}=0"
        return
    if _has_triton() and not wanted:
        state.mrv2_left = "vLLM has Triton: Model Runner V2 launches the real kernels"
        return
    ours, missing = coverage()
    if ours is None:
        state.mrv2_left = "this vLLM has no Model Runner V2 (vllm/v1/worker/gpu)"
        return
    state.mrv2_missing = missing
    core = sorted(n for n, (feature, _) in missing.items() if feature == "core")
    if core and not wanted:
        state.mrv2_left = f"{len(core)} of its core kernels have no CPU kernel: {', '.join(core)}"
        logger.info("fastdispatch: Model Runner V2 left to vLLM: %s", state.mrv2_left)
        return
    state.mrv2_left = None
    # The runner's modules are imported here (the rebinding pass resolves each name); a module
    # that cannot be imported leaves its kernels to vLLM, named, and the rest are still ours.
    for name, impl in ours.items():
        try:
            state.register({name: impl})
        except Exception as exc:  # noqa: BLE001 - that one name goes to vLLM
            state.mrv2_missing[name] = ("core", f"not registered: {type(exc).__name__}: {exc}")
            logger.warning("fastdispatch: %s left to vLLM: %s", name, exc)
        else:
            state.mrv2[name] = impl
    _patch_host_helpers(state)
    _patch_validation(state)
    _patch_speculator_guards(state)
    install_verify(state)
    install_draft(state)
    logger.info(
        "fastdispatch: Model Runner V2: %d kernels now launch kernels_cpu%s",
        len(state.mrv2),
        f"; without a CPU kernel: {', '.join(sorted(state.mrv2_missing))}"
        if state.mrv2_missing
        else "",
    )


def _patch_host_helpers(state):
    """vLLM's Triton placeholder lacks host helpers the runner calls (``next_power_of_2``)."""
    try:
        from vllm.triton_utils import triton
    except Exception:  # noqa: BLE001
        return
    if not callable(getattr(triton, "next_power_of_2", None)):
        state.patches.set(triton, "next_power_of_2", _next_power_of_2)


def _next_power_of_2(n: int) -> int:
    """Triton's ``next_power_of_2``: the smallest power of two >= ``n``; 0 for 0, as Triton's
    bit-smearing gives (``n - 1`` smeared, plus one)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"n: expected >= 0, got {n}")
    return 0 if n == 0 else 1 << (n - 1).bit_length()


def _patch_validation(state):
    """Let ``VllmConfig._validate_v2_model_runner`` pass a configuration without Triton when
    every kernel it would launch is ours: vLLM's own check runs with its Triton test answered
    yes, so every other check it makes still holds; a configuration needing a kernel we lack
    gets vLLM's check as it is (and its refusal), with the missing kernels logged."""
    try:
        module = importlib.import_module(_CONFIG_MODULE)
    except Exception:  # noqa: BLE001
        return
    cls = getattr(module, "VllmConfig", None)
    stock = vars(cls).get(_VALIDATE) if cls is not None else None
    if stock is None or "HAS_TRITON" not in vars(module):
        logger.info(
            "fastdispatch: %s.VllmConfig.%s not found: not patched", _CONFIG_MODULE, _VALIDATE
        )
        return
    missing = state.mrv2_missing

    def _validate_v2_model_runner(self):
        if vars(module).get("HAS_TRITON"):
            return stock(self)
        needs = lacking(self, missing)
        if needs:
            logger.warning(
                "fastdispatch: Model Runner V2 without Triton needs kernels with no CPU kernel "
                "here: %s",
                ", ".join(f"{n} ({f}: {why})" for n, (f, why) in sorted(needs.items())),
            )
            return stock(self)
        with _triton_answered_yes(module):
            return stock(self)

    _validate_v2_model_runner.__wrapped__ = stock
    state.patches.set(cls, _VALIDATE, _validate_v2_model_runner)


@contextlib.contextmanager
def _triton_answered_yes(module):
    """``module.HAS_TRITON`` reads True for the duration (vLLM's config check is one call on
    the thread building the configuration)."""
    old = vars(module)["HAS_TRITON"]
    module.HAS_TRITON = True
    try:
        yield
    finally:
        module.HAS_TRITON = old


def _patch_speculator_guards(state):
    """A speculator module that refuses to build without Triton (``if not HAS_TRITON: raise``)
    gets ``HAS_TRITON`` true when every kernel of its module is ours."""
    package = runner_dir()
    if package is None:
        return
    for path in sorted((package / "spec_decode").rglob("*.py")):
        rel = path.relative_to(package).with_suffix("")
        module_name = ".".join((RUNNER_PACKAGE, *rel.parts))
        text = path.read_text(encoding="utf-8", errors="replace")
        if "HAS_TRITON" not in text or "raise" not in text:
            continue
        prefix = module_name + "."
        if any(n.startswith(prefix) for n in state.mrv2_missing):
            continue
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        if vars(module).get("HAS_TRITON") is False:
            state.patches.set(module, "HAS_TRITON", True)


def mrv2_report():
    """Model Runner V2 on this host: ``{"installed": bool, "reason": str | None, "kernels":
    {qualified name: {"who", "feature", "reason"}}}``.

    ``installed`` is whether the runner's kernels are ours now (``reason`` says why not);
    per kernel the runner can launch, ``who`` is ``"ours"`` (our kernel stands wherever vLLM
    holds it), ``"stale"`` (a holder still on vLLM's object: ``reason`` names it) or
    ``"vllm"`` (no CPU kernel here: ``reason``; ``feature`` says which configurations need it
    -- a configuration that uses none of the missing kernels' features runs on Model Runner V2
    all the same); ``"verify"``: whether the speculative verification runs in one pass
    (``_mrv2_verify.verify_report``); ``"draft"``: whether the greedy draft pick runs on our
    argmax (``_mrv2_drafter.draft_report``). Empty before :func:`fastdispatch.vllm.install` ran.
    """
    from . import _installation

    with _installation._lock:
        state = _installation._state
        if state is None:
            return {}
        package = runner_dir()
        launched = launched_kernels(package) if package is not None else {}
        stale = state.fd.verify([n for n in state.mrv2 if n in state.fd._registry])
        kernels = {}
        for name, impl in state.mrv2.items():
            feature = launched.get(name, ("core", ()))[0]
            if not state.standing(name, impl):
                kernels[name] = dict(who="vllm", feature=feature, reason="displaced after install")
            elif stale.get(name):
                holders = ", ".join(stale[name])
                kernels[name] = dict(
                    who="stale", feature=feature, reason=f"still on vLLM's object: {holders}"
                )
            else:
                kernels[name] = dict(who="ours", feature=feature, reason=None)
        for name, (feature, why) in state.mrv2_missing.items():
            kernels[name] = dict(who="vllm", feature=feature, reason=why)
        return {
            "installed": state.mrv2_left is None and bool(state.mrv2),
            "reason": state.mrv2_left,
            "kernels": kernels,
            "verify": verify_report(state),
            "draft": draft_report(state),
        }
