"""Releases with a dispatcher (0.31+): ``vllm.triton_utils.dispatcher`` becomes fastdispatch's.

:func:`fastdispatch.vllm.install` gives vLLM's dispatcher module fastdispatch's
``register_kernels`` (behind a thin vLLM-facing front, :func:`_make_front`), ``KernelOverride``,
``_registry``, ``_resolve_kernel``, ``_rebind_kernels`` and ``_kernel_arg_names``: every later
registration gets the compiled launch path. vLLM's only caller
(``CpuPlatform.register_triton_kernel_overrides``) imports ``register_kernels`` inside the
function, so replacing the module attribute reaches it.

Why a front for ``register_kernels``: a CPU worker's ``init_worker`` loads the general plugins
*first* and then calls the platform hook, which registers vLLM's own C++ shims for the same 11
names -- last writer wins. The front recognises those shims by identity (recorded once, at
install, by running the hook against a recorder: :func:`_platform_shims`) and registers our
kernel in their place (``_Installation.vllm_register_kernels``); a registration of something
else (another plugin's kernel) goes through unchanged. Registering what is already standing is a
no-op, so the hook, or the plugin, may run any number of times.
"""

from . import _installation
from ._installation import logger


def _platform_shims(dispatcher):
    """``{qualified name: implementation}`` the platform hook registers, without registering it.

    Runs the platform's ``register_triton_kernel_overrides`` once with ``register_kernels``
    swapped for a recorder, so the shims are known by identity whatever their names are.
    """
    try:
        from vllm.platforms import current_platform

        hook = type(current_platform).register_triton_kernel_overrides
    except Exception:  # noqa: BLE001 - no platform, no shims to recognise
        return {}
    recorded = {}
    saved = vars(dispatcher)["register_kernels"]
    dispatcher.register_kernels = recorded.update
    try:
        hook()
    except Exception as exc:  # noqa: BLE001
        logger.warning("fastdispatch: could not read the platform's kernel overrides: %s", exc)
    finally:
        dispatcher.register_kernels = saved
    return recorded


def _make_front(state):
    """What ``register_kernels`` is in vLLM's dispatcher while ``state`` stands: its registrations
    go through ``state.vllm_register_kernels`` (the platform's shims recognised)."""

    def register_kernels(overrides):
        with _installation._lock:
            if _installation._state is state:
                return state.vllm_register_kernels(overrides)
        # A reference kept past uninstall: behave as whatever the dispatcher has now.
        return state.dispatcher.register_kernels(overrides)

    register_kernels.__doc__ = state.stock["register_kernels"].__doc__
    register_kernels.__wrapped__ = state.stock["register_kernels"]
    return register_kernels
