"""GPU workers: vLLM's Triton kernels launched through :func:`fastdispatch.fast_launch` (opt-in).

On a worker whose Triton has a driver, vLLM launches the real Triton kernels (the ones
``kernels_cpu`` replaces on CPU) and :func:`fastdispatch.vllm.install` stays out; with
``FASTDISPATCH_VLLM_FAST_LAUNCH=1`` the plugin calls :func:`install_fast_launch` there instead,
which puts a fast-launch wrapper in every holder of those kernels.
"""

from ._installation import _lock, logger

#: With :func:`plugin` on a worker whose Triton has a driver: ``1`` launches vLLM's Triton
#: kernels (the ones ``kernels_cpu`` replaces on CPU) through :func:`fastdispatch.fast_launch`.
FAST_LAUNCH_ENV = "FASTDISPATCH_VLLM_FAST_LAUNCH"

_fast_pairs = None  # [(kernel, its fast_launch wrapper)] while installed


def _vllm_kernel_qualnames():
    """Every qualified name vLLM has kept one of our kernels under (all releases)."""
    from kernels_cpu._overrides import VLLM_KERNELS

    return tuple(n for entry in VLLM_KERNELS.values() for n in entry.names)


def install_fast_launch(names=None):
    """Launch vLLM's Triton kernels through :func:`fastdispatch.fast_launch` (a GPU worker).

    Each qualified name in ``names`` (default: our kernels, under every name vLLM has used)
    that resolves here to a plain Triton ``JITFunction`` gets a fast-launch wrapper in every
    holder -- module attributes, ``from ... import`` copies, launch owners' ``.kernel`` -- by the
    same rebinding pass as the registry's. A name that does not resolve, or holds anything else
    (an override, an autotuner), is left as it is. The wrapper gives Triton's own results and
    hands anything it does not recognise to Triton's own launch. Returns ``{name: wrapped?}``;
    :func:`uninstall_fast_launch` puts every holder back.
    """
    global _fast_pairs
    import fastdispatch
    from fastdispatch._registration import _rebind_kernels, _resolve_kernel

    with _lock:
        done = {}
        pairs = [] if _fast_pairs is None else list(_fast_pairs)
        wrapped = {id(k) for k, _ in pairs} | {id(w) for _, w in pairs}
        for name in names if names is not None else _vllm_kernel_qualnames():
            try:
                host, attr = _resolve_kernel(name)
            except (ImportError, ValueError, AttributeError) as exc:
                logger.debug("fastdispatch: fast launch: %s not here (%s)", name, exc)
                done[name] = False
                continue
            kernel = vars(host).get(attr) if hasattr(host, "__dict__") else None
            if type(kernel).__name__ != "JITFunction" or id(kernel) in wrapped:
                done[name] = id(kernel) in wrapped
                continue
            pairs.append((kernel, fastdispatch.fast_launch(kernel)))
            wrapped.update((id(kernel), id(pairs[-1][1])))
            done[name] = True
        new = pairs[len(_fast_pairs or ()) :]
        _rebind_kernels(new)
        _fast_pairs = pairs
        logger.info("fastdispatch: fast launch for %d of vLLM's Triton kernels", len(pairs))
        return done


def uninstall_fast_launch():
    """Every holder :func:`install_fast_launch` changed gets its Triton kernel back."""
    global _fast_pairs
    from fastdispatch._registration import _rebind_kernels

    with _lock:
        pairs, _fast_pairs = _fast_pairs, None
        if pairs:
            _rebind_kernels([(wrapper, kernel) for kernel, wrapper in pairs])


def fast_launch_installed():
    """The kernels now launched through fast_launch (``[(kernel, wrapper)]``)."""
    with _lock:
        return list(_fast_pairs or ())
