""":func:`install` and :func:`uninstall`: every concern of the integration, in order.

The order matters where two concerns meet: the 0.27-0.30 shims go back first (so that what is
chosen and registered over is the kernel itself), the kernels are chosen and registered before
the dispatcher is taken over and the owners are patched, and teardown undoes the one-pass step,
the registrations, what the 0.27-0.30 hook displaced and then every attribute patch, in reverse.
"""

from . import _installation
from ._cpu_specs import install_cpu_specs
from ._dispatcher import _make_front, _platform_shims
from ._fused_noise import _set_fused_noise
from ._installation import _DISPATCHER, _DISPATCHER_API, _Installation, _lock, logger
from ._kernels import _choose_kernels
from ._legacy import (
    _RUNNER_HOOK,
    _RUNNER_MODULE,
    _displace_shims,
    _legacy_originals,
    _legacy_runner,
    _legacy_shims,
    _restore_displaced,
    _wrap_runner_hook,
)
from ._mrv2 import install_mrv2
from ._owners import _patch_owners
from ._sampler import _install_sampling, _set_one_pass


def install(fused_noise=False, one_pass=None):
    """Make vLLM launch fastdispatch's compiled path and the ``kernels_cpu`` kernels.

    Idempotent: calling it again (the plugin loading twice) re-asserts our kernels where
    something displaced them and changes nothing else. ``fused_noise=True`` additionally
    replaces ``rejection_sampler.sample_recovered_tokens``/``rejection_sample`` with the fused
    implementation that draws its noise inside the kernel (``fastdispatch.ops.fused``): faster
    random sampling, same distribution, a different random stream than stock vLLM -- hence
    opt-in. With it, ``one_pass`` (default: ``fused_noise``) also replaces
    ``RejectionSampler.forward`` by the whole step in one pass over the logits
    (:mod:`fastdispatch.vllm._spec_step_dropin`) where vLLM's code is one it recognises; a batch it
    cannot serve takes vLLM's forward. Returns nothing; :func:`uninstall` undoes everything.
    """
    if one_pass is None:
        one_pass = fused_noise
    import importlib

    with _lock:
        current = _installation._state
        if current is not None:
            current.register(current.ours)
            current.register(current.sampling)
            current.register(current.mrv2)
            _set_fused_noise(current, fused_noise)
            _set_one_pass(current, bool(fused_noise and one_pass))
            return
        try:
            dispatcher = importlib.import_module(_DISPATCHER)
        except ModuleNotFoundError as exc:
            if exc.name != _DISPATCHER:
                raise
            dispatcher = None
        runner = _legacy_runner() if dispatcher is None else None
        if dispatcher is None and runner is None:
            raise RuntimeError(
                f"unsupported vLLM: no {_DISPATCHER} and no "
                f"{_RUNNER_MODULE}.CPUModelRunner.{_RUNNER_HOOK}: nothing says where its "
                "kernels are replaced"
            )
        state = _Installation(dispatcher, runner)
        try:
            if dispatcher is not None:
                state.platform = _platform_shims(dispatcher)
            if dispatcher is None and _legacy_shims:
                # vLLM's shims stand where a previous installation displaced them: its kernels
                # go back there first, so that what is chosen and registered over is the kernel
                # (its signature), and uninstall() gives the shims back.
                state.shims.update(_legacy_shims)
                _displace_shims(state, originals=True)
            state.ours = _choose_kernels(state)
            # Our kernels replace whatever stands now: the originals, or vLLM's own overrides if
            # the platform hook already ran (those come back on uninstall).
            state.register(state.ours)
            if dispatcher is not None:
                for name in _DISPATCHER_API:
                    state.patches.set(dispatcher, name, getattr(state.fd, name))
                state.patches.set(dispatcher, "register_kernels", _make_front(state))
            else:
                for name in state.ours:
                    _legacy_originals.setdefault(name, state.fd._registry[name].original)
                _wrap_runner_hook(state)
            _patch_owners(state)
            state.cpu_specs_left = install_cpu_specs(state)
            _install_sampling(state)
            install_mrv2(state)
            _set_fused_noise(state, fused_noise)
            _set_one_pass(state, bool(fused_noise and one_pass))
        except BaseException:
            _teardown(state)
            raise
        _installation._state = state
        logger.info(
            "fastdispatch: %d of vLLM's %d kernels now launch kernels_cpu through fastdispatch "
            "(%s)%s",
            len(state.ours),
            len(state.ours) + len(state.left),
            state.fd.BACKEND,
            f"; left to vLLM: {', '.join(state.left)}" if state.left else "",
        )


def _teardown(state):
    _set_one_pass(state, False)
    state.unregister_all()
    _restore_displaced(state)
    state.patches.undo()
    state.plan_caches.clear()


def uninstall():
    """Put vLLM back exactly as it was before :func:`install`.

    Every holder of one of our overrides gets back what it held before (the original kernel,
    or vLLM's own override if the platform hook had run), the dispatcher module and the launch
    owners get their own functions back, and the registrations vLLM asked for while we were
    installed are replayed through vLLM's own ``register_kernels`` -- so after the
    ``init_worker`` sequence and ``uninstall()``, vLLM is where stock ``init_worker`` leaves it.
    Does nothing when not installed.
    """
    with _lock:
        state = _installation._state
        if state is None:
            return
        _installation._state = None
        _teardown(state)
        if state.dispatcher is not None:
            stock_register = state.dispatcher.register_kernels
            for overrides in state.requested:
                stock_register(overrides)
