"""Opt-in fused noise: vLLM's random rejection sampling with the noise drawn inside the kernel.

``install(fused_noise=True)`` also replaces ``rejection_sampler.rejection_sample`` and
``sample_recovered_tokens`` with ``fastdispatch.ops.fused``, which draws the random-sampling noise
inside the kernel instead of materialising a ``[batch, vocab]`` exponential tensor: same
distribution, a different random stream than stock vLLM (hence off by default). Each replacement
takes the signature of the function it replaces, read at install (:func:`_fused_adapter`); a
parameter we do not know means that replacement is not installed, with a warning.
"""

from ._installation import logger

# How the fused replacements honour each parameter of the vLLM function they replace, by
# release: a parameter not listed here means a signature we do not know (the replacement is then
# not installed). _PASS: handed to the replacement under the same name. _FLY: vLLM 0.33's FLy
# switch -- FLy is on when it is not None. _FLY_ONLY: read by FLy alone (ignored when it is off).
_PASS, _FLY, _FLY_ONLY = "pass", "fly", "fly-only"
_FUSED_PARAMETERS = {
    "rejection_sample": {
        "draft_token_ids": _PASS,
        "num_draft_tokens": _PASS,
        "max_spec_len": _PASS,
        "cu_num_draft_tokens": _PASS,
        "draft_probs": _PASS,
        "target_logits": _PASS,
        "bonus_token_ids": _PASS,
        "sampling_metadata": _PASS,
        "synthetic_mode": _PASS,
        "synthetic_conditional_rates": _PASS,
        "use_fp64_gumbel": _PASS,
        "fly_window_size": _FLY,  # 0.33
        "fly_entropy_threshold": _FLY_ONLY,  # 0.33
        "fly_entropy_top_k": _FLY_ONLY,  # 0.33
    },
    "sample_recovered_tokens": {
        "max_spec_len": _PASS,
        "num_draft_tokens": _PASS,
        "cu_num_draft_tokens": _PASS,
        "draft_token_ids": _PASS,
        "draft_probs": _PASS,
        "target_probs": _PASS,
        "sampling_metadata": _PASS,
        "device": _PASS,
        "use_fp64_gumbel": _PASS,
    },
}


def _fused_releases():
    from kernels_cpu.contracts import span

    return {
        **{r: "replaced" for r in span("0.27", "0.32")},
        "0.33.0": "replaced, FLy refused as on vLLM's CPU path",
    }


#: The releases read whose ``rejection_sample``/``sample_recovered_tokens`` the fused
#: replacements take, and how (0.34 deletes ``rejection_sampler.py``).
FUSED_RELEASES = _fused_releases()

#: What a fused step says to a FLy request -- vLLM's own words where it meets FLy on CPU
#: (``RejectionSampler.__init__`` raises this for a CPU device). FLy's deferred verification
#: rewrites the uniforms or target argmaxes of a materialised pass, which the fused kernel,
#: drawing its noise inside the vocabulary loop, never has.
FLY_REFUSAL = "FLy verification is not supported on CPU."


def _refuse_fly():
    raise NotImplementedError(
        f"{FLY_REFUSAL} (fastdispatch's fused rejection sampling: install without "
        "fused_noise to leave rejection sampling to vLLM)"
    )


def _fused_adapter(target, impl):
    """A function with ``target``'s exact signature that runs ``impl``, or ``(None, why)``.

    ``target`` is the vLLM function being replaced, read at install (``inspect.signature``);
    every one of its parameters must be known (``_FUSED_PARAMETERS``) and every parameter
    ``impl`` requires must be among them. The adapter is generated source, not a
    ``*args``/``**kwargs`` shim: vLLM calls it positionally and by keyword exactly as it calls
    its own function, the defaults are vLLM's own objects, and a FLy request (``fly_window_size``
    not None) raises ``NotImplementedError`` before anything runs, as vLLM does on CPU.
    """
    import inspect

    known = _FUSED_PARAMETERS.get(getattr(target, "__name__", ""))
    if known is None:
        return None, f"no fused replacement is known for {target!r}"
    try:
        params = list(inspect.signature(target).parameters.values())
        impl_params = inspect.signature(impl).parameters
    except (TypeError, ValueError) as exc:
        return None, f"its signature cannot be read ({exc})"
    unknown = [p.name for p in params if p.name not in known]
    odd = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown or odd:
        return (
            None,
            f"unknown parameter(s) {', '.join(unknown + odd)} in {inspect.signature(target)}",
        )
    names = {p.name for p in params}
    missing = [n for n, p in impl_params.items() if p.default is p.empty and n not in names]
    if missing:
        return None, f"it lacks {', '.join(missing)}, which the fused path needs"
    untaken = [p.name for p in params if known[p.name] == _PASS and p.name not in impl_params]
    if untaken:
        return None, f"{impl.__name__} does not take {', '.join(untaken)}"
    namespace = {"__impl": impl, "__refuse_fly": _refuse_fly}
    parts, kind = [], None
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and kind is not p.KEYWORD_ONLY:
            parts.append("*")
        if kind is p.POSITIONAL_ONLY and p.kind is not p.POSITIONAL_ONLY:
            parts.append("/")
        kind = p.kind
        if p.default is p.empty:
            parts.append(p.name)
        else:
            namespace[f"__d{i}"] = p.default
            parts.append(f"{p.name}=__d{i}")
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    body = []
    for p in params:
        if known[p.name] == _FLY:
            body.append(f"    if {p.name} is not None:\n        __refuse_fly()")
    passed = ", ".join(f"{p.name}={p.name}" for p in params if known[p.name] == _PASS)
    body.append(f"    return __impl({passed})")
    source = f"def {target.__name__}({', '.join(parts)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<fastdispatch.vllm adapter of {target.__name__}>", "exec"), namespace)
    adapter = namespace[target.__name__]
    adapter.__module__ = "fastdispatch.vllm"  # the public package, as the reports name it
    adapter.__qualname__ = impl.__name__
    adapter.__doc__ = (
        f"``{impl.__module__}.{impl.__name__}`` with the signature of vLLM's "
        f"``{target.__module__}.{target.__name__}`` (read at install)."
    )
    adapter.__annotations__ = dict(getattr(target, "__annotations__", None) or {})
    adapter._fastdispatch_impl = impl
    return adapter, None


def _fused_noise_overrides(fd=None):
    """The opt-in fused random-sampling replacements (``fastdispatch.ops.fused``), each shaped
    like the vLLM function it replaces; one whose target's signature we do not know (or that
    this vLLM lacks) is left out, with a warning -- vLLM's own function stays."""
    import fastdispatch
    from fastdispatch.ops.fused import fastdispatch_fused_vllm_overrides

    fd = fd or fastdispatch
    mapping = {}
    for name, impl in fastdispatch_fused_vllm_overrides().items():
        try:
            host, attr = fd._resolve_kernel(name)
            target = vars(host).get(attr) if not isinstance(host, type) else getattr(host, attr)
            entry = fd._registry.get(name)
            if entry is not None and target is entry.override:
                target = entry.original
        except (ImportError, ValueError) as exc:
            adapter, why = None, f"not found ({exc})"
        else:
            adapter, why = _fused_adapter(target, impl)
        if adapter is None:
            logger.warning("fastdispatch: fused noise not installed for %s: %s", name, why)
            continue
        mapping[name] = adapter
    return mapping


def _set_fused_noise(state, enable):
    if enable and not state.fused:
        fused = _fused_noise_overrides(state.fd)
        state.register(fused)
        state.fused = fused
    elif not enable and state.fused:
        names = [name for name in state.fused if name in state.fd._registry]
        state.fd.unregister_kernels(names)
        state.names[:] = [name for name in state.names if name not in state.fused]
        state.fused = {}
