"""Releases without a dispatcher (0.27-0.30): after ``CPUModelRunner._postprocess_triton``.

These releases replace the kernels in ``CPUModelRunner._postprocess_triton``, which a worker runs
in the model runner's ``__init__``, after the plugins: it assigns vLLM's CPU shims to module
attributes (0.27-0.29) and launch owners' ``.kernel`` (0.30), some of them where no launch ever
looks. There :func:`fastdispatch.vllm.install` registers our kernels at once and wraps
``_postprocess_triton`` (:func:`_wrap_runner_hook`): after vLLM's own body runs, every holder it
changed gets our kernel back, and so does every other holder of the shims it put there --
recorded, so that :func:`fastdispatch.vllm.uninstall` leaves each holder with what stock vLLM
put there. See :func:`_watch` and :func:`_absorb`.
"""

from . import _installation
from ._installation import _MISSING, logger

_RUNNER_MODULE = "vllm.v1.worker.cpu_model_runner"
_RUNNER_HOOK = "_postprocess_triton"


def _legacy_releases():
    from kernels_cpu.contracts import span

    return span("0.27", "0.30")


#: The releases read that replace their kernels in ``CPUModelRunner._postprocess_triton`` (no
#: dispatcher); 0.31+ have ``vllm.triton_utils.dispatcher``.
RELEASES = _legacy_releases()

#: id(vLLM shim) -> (shim, qualified name): every shim seen displacing our kernels in this
#: process, and qualified name -> the kernel vLLM defined there. vLLM runs
#: ``_postprocess_triton`` once per model runner; an :func:`install` after an :func:`uninstall`
#: (which put the shims back) must displace them again by itself.
_legacy_shims: dict = {}
_legacy_originals: dict = {}


def _legacy_runner():
    """vLLM's ``CPUModelRunner`` when it replaces kernels itself (``_postprocess_triton`` in its
    own namespace), else None."""
    import importlib

    try:
        module = importlib.import_module(_RUNNER_MODULE)
    except ImportError:
        return None
    runner = vars(module).get("CPUModelRunner")
    if isinstance(runner, type) and callable(vars(runner).get(_RUNNER_HOOK)):
        return runner
    return None


def _imported_modules(fn):
    """Modules ``fn``'s code imports by name (``import a.b``, ``from a import b``): what it is
    about to import anyway, read from its bytecode, nested code objects included."""
    import dis
    import types as _types

    names, todo = [], [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME" and isinstance(ins.argval, str):
                names.append(ins.argval)
        todo.extend(c for c in code.co_consts if isinstance(c, _types.CodeType))
    return names


def _watch(state):
    """Everything where one of our kernels stands now, before vLLM's ``_postprocess_triton``
    runs: ``[(container, key, value before, our override for it, its name)]``.

    First the modules vLLM's method imports are imported (they copy our kernels from the
    defining modules as they load), so that a holder it is about to overwrite exists and is
    watched. Holders are module attributes and launch owners' ``kernel`` (the registry's own
    scan); for a kernel kept on a class, every module-level instance of that class too, whose
    own ``kernel`` does not exist yet -- vLLM 0.29/0.30 assign one there, shadowing the class
    attribute.
    """
    import importlib

    from .._registration import _CLASS, _TYPE_MRO, _dict_reader, _namespaces, _scan

    for module in _imported_modules(state.runner_stock):
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - vLLM's own method will meet the same failure
            continue
    fd = state.fd
    by_id = {}
    classes = []
    for name in state.ours:
        entry = fd._registry.get(name)
        if entry is None:
            continue
        by_id[id(entry.override)] = (entry.override, name)
        if isinstance(entry.host, type):
            classes.append((entry.host, entry.attr, entry.override, name))
    watched = [
        (container, key, value, value, by_id[id(value)][1])
        for _k, _w, _h, container, key, value in _scan(by_id)
    ]
    if classes:
        for _mod, _ns, items in _namespaces():
            for _attr, value in items:
                tp = type(value)
                if issubclass(tp, type):
                    continue
                mro = _TYPE_MRO.__get__(tp)  # read, not isinstance(): no foreign code runs
                for cls, attr, override, name in classes:
                    if cls not in mro:
                        continue
                    reader = _dict_reader(tp)
                    if reader is None or reader is _CLASS:
                        continue
                    try:
                        own = reader.__get__(value)
                    except Exception:  # noqa: BLE001
                        continue
                    if type(own) is dict:
                        watched.append((own, attr, own.get(attr, _MISSING), override, name))
    return watched


def _absorb(state, watched):
    """After vLLM's ``_postprocess_triton``: our kernel back wherever it changed a watched
    holder, and in every other holder of what it put there. Each change is recorded in
    ``state.displaced`` for :func:`uninstall`."""
    seen = set()
    for container, key, before, override, name in watched:
        now = container.get(key, _MISSING)
        if now is before or now is _MISSING or (id(container), key) in seen:
            continue
        seen.add((id(container), key))
        state.shims[id(now)] = (now, name)
        _legacy_shims[id(now)] = (now, name)
        state.displaced.append((container, key, now))  # what stock vLLM left there
        container[key] = override
        if key == "kernel":
            container.pop("_kernel_arg_names", None)
    _displace_shims(state)


def _displace_shims(state, originals=False):
    """Every holder of a vLLM shim seen displacing our kernels (``state.shims``) gets our kernel
    -- or, with ``originals``, the kernel vLLM defined, for :func:`install` to register over as
    usual -- each change recorded in ``state.displaced``. Reaches copies of the shims anywhere
    (a module that imported one by name) and, on a re-install, the holders :func:`uninstall`
    gave back to vLLM."""
    from .._registration import _scan

    fd = state.fd
    target = {}
    for shim, name in state.shims.values():
        if originals:
            if name in _legacy_originals:
                target[id(shim)] = _legacy_originals[name]
        elif name in fd._registry:
            target[id(shim)] = fd._registry[name].override
    if not target:
        return
    changed = 0
    for _kind, _where, _holder, container, key, value in list(_scan(state.shims)):
        if id(value) in target and container.get(key) is value:
            state.displaced.append((container, key, value))
            container[key] = target[id(value)]
            changed += 1
            if key == "kernel":
                container.pop("_kernel_arg_names", None)
    if changed:
        logger.info(
            "fastdispatch: vLLM's CPU shims from %s stood in %d kernel holder(s); %s there",
            _RUNNER_HOOK,
            changed,
            "vLLM's kernels put back to register over" if originals else "kernels_cpu restored",
        )


def _wrap_runner_hook(state):
    """``CPUModelRunner._postprocess_triton`` runs vLLM's own body, then :func:`_absorb`."""
    stock = state.runner_stock = vars(state.runner)[_RUNNER_HOOK]

    def _postprocess_triton(self, *args, **kwargs):
        with _installation._lock:
            if _installation._state is not state:
                return stock(self, *args, **kwargs)
            watched = _watch(state)
            result = stock(self, *args, **kwargs)
            _absorb(state, watched)
            return result

    _postprocess_triton.__doc__ = stock.__doc__
    _postprocess_triton.__wrapped__ = stock
    state.patches.set(state.runner, _RUNNER_HOOK, _postprocess_triton)


def _restore_displaced(state):
    """What stock vLLM put where we stood goes back (after the registry restored originals)."""
    while state.displaced:
        container, key, value = state.displaced.pop()
        if value is _MISSING:
            container.pop(key, None)
        else:
            container[key] = value
        if key == "kernel":
            container.pop("_kernel_arg_names", None)
    state.shims.clear()
