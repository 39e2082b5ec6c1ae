"""Who launches what now: the integration's reports (``python -m fastdispatch verify --vllm``)."""

from . import _installation
from ._kernels import KERNEL_NAMES


def installed():
    """True while :func:`install` is in effect."""
    return _installation._state is not None


def kernel_names():
    """This release's qualified names of the kernels ``kernels_cpu`` implements: the names
    resolved at :func:`install` (0.27/0.28 keep the slot-mapping kernel at module level), or
    :data:`KERNEL_NAMES` (vLLM 0.32's) when not installed."""
    with _installation._lock:
        state = _installation._state
        if state is None:
            return KERNEL_NAMES
        return tuple(state.ours) + tuple(state.left)


def kernel_report():
    """Per kernel, who launches it now: ``{qualified name: {"who", "impl", "reason"}}``.

    ``who`` is ``"ours"`` (a kernels_cpu function through fastdispatch, every holder on it),
    ``"vllm"`` (left to vLLM: ``reason`` says why -- a signature we do not know, a kernel this
    release lacks, fastdispatch not installed -- or, ``"stale"``, a holder still on vLLM's own
    object, named in ``reason``) or ``"absent"`` (a kernel of other releases that this one does
    not have: ``reason`` says "not in this release (removed in 0.34)" or "(added in 0.30)").
    Empty before :func:`install` ran.
    """
    with _installation._lock:
        state = _installation._state
        if state is None:
            return {}
        from .._registration import _describe

        fd = state.fd
        report = {}
        stale = fd.verify([n for n in state.ours if n in fd._registry])
        shim_holders = {}
        if state.shims:
            from .._registration import _scan

            for _kind, where, _h, _c, _k, value in _scan(state.shims):
                shim_holders.setdefault(state.shims[id(value)][1], []).append(where)
        for name, impl in state.ours.items():
            entry = fd._registry.get(name)
            if entry is None or entry.impl is not impl:
                now = "nothing" if entry is None else _describe(entry.impl)
                report[name] = dict(
                    who="vllm", impl=now, reason="displaced after install (install() again)"
                )
                continue
            holders = list(stale.get(name, [])) + shim_holders.get(name, [])
            report[name] = _registered(impl, holders)
        for name, why in state.left.items():
            report[name] = dict(who="vllm", impl=None, reason=why)
        for name, why in state.absent.items():
            report[name] = dict(who="absent", impl=None, reason=why)
        sampling_stale = fd.verify([n for n in state.sampling if n in fd._registry])
        for name, impl in state.sampling.items():
            entry = fd._registry.get(name)
            if entry is None or entry.impl is not impl:
                report[name] = dict(who="vllm", impl=None, reason="displaced after install")
            else:
                report[name] = _registered(impl, sampling_stale.get(name))
        for name, why in state.sampling_left.items():
            report[name] = dict(who="vllm", impl=None, reason=why)
        return report


def _registered(impl, holders):
    """The row of a name whose registered impl is still ours: ``"ours"``, or ``"stale"`` while
    ``holders`` (the places that still hold vLLM's own object) is not empty -- one wording for
    the kernels and the sampling functions alike."""
    from .._registration import _describe

    if holders:
        return dict(
            who="stale",
            impl=_describe(impl),
            reason=f"still on vLLM's object: {', '.join(holders)}",
        )
    return dict(who="ours", impl=_describe(impl), reason=None)


def step_report():
    """The speculative step: ``{"who", "reason", "fallbacks"}`` -- ``who`` is ``"ours"`` (the
    one-pass step stands in ``RejectionSampler.forward``) or ``"vllm"`` (``reason`` says why);
    ``fallbacks`` counts the batches that took vLLM's forward, by reason. Empty before
    :func:`install` ran."""
    with _installation._lock:
        state = _installation._state
        if state is None:
            return {}
        from ._spec_step_dropin import fallbacks

        if state.step is not None:
            cls, _raw, ours = state.step
            if vars(cls).get("forward") is ours:
                return dict(who="ours", reason=None, fallbacks=fallbacks())
            return dict(who="vllm", reason="displaced after install", fallbacks=fallbacks())
        why = state.step_left or "not asked for (install(fused_noise=True) enables it)"
        return dict(who="vllm", reason=why, fallbacks={})
