"""Registry and rebinding pass over a vLLM-shaped fake package (overrides from both backends).

The central regression: after one ``register_kernels`` every holder of a kernel -- module-global
lookup, ``from x import kernel`` copies, launch owners with cached argument names (ours and a
foreign vLLM-shaped one), a class-attribute kernel -- launches the impl, and ``verify()`` is clean.
"""

import sys
import threading
import types
import warnings

import pytest
from fakepkg_rt import CALLS, hostile, kernels, owners, users, worker

import fastdispatch

EXPAND = "fakepkg_rt.kernels.expand_kernel"
COPY = "fakepkg_rt.kernels.copy_kernel"
SLOT = "fakepkg_rt.worker.SlotMappingOwner.kernel"
# Kept in a dict: module attributes holding a kernel are themselves rebound by the pass.
ORIGINALS = {
    "expand": kernels.expand_kernel,
    "copy": kernels.copy_kernel,
    "slot": worker.SlotMappingOwner.__dict__["kernel"],
}


def expand_impl(out, inp, cu, rf, rt, max_tokens):  # names differ: positional forwarding
    CALLS.append(("expand_impl", out, inp, cu, rf, rt, max_tokens))


def copy_impl(src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE=128):  # same names: by name
    CALLS.append(("copy_impl", src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE))


def slot_impl(n, positions, slots, block):
    CALLS.append(("slot_impl", n, positions, slots, block))


def launch_everything():
    CALLS.clear()
    kernels.launch_expand("o", "i", [1, 2])  # module-global lookup
    users.launch_copy_of_expand("o", "i", [1])  # from-import copy, positional launch
    owners.expand("o", "i", [1, 2, 3])  # our launch owner (cached arg names)
    owners.copy("s", "d", 3)  # foreign vLLM-shaped owner
    worker.SlotMappingOwner().run(4, "p", "s")  # class-attribute kernel
    return [c[0] for c in CALLS]


ALL_ORIGINAL = ["expand_kernel", "expand_kernel", "expand_kernel", "copy_kernel", "slot_kernel"]
ALL_IMPL = ["expand_impl", "expand_impl", "expand_impl", "copy_impl", "slot_impl"]


def holders_are_original():
    return (
        kernels.expand_kernel is ORIGINALS["expand"]
        and users.expand_kernel is ORIGINALS["expand"]
        and hostile.same_kernel_here is ORIGINALS["expand"]
        and vars(owners.expand)["kernel"] is ORIGINALS["expand"]
        and vars(owners.copy)["kernel"] is ORIGINALS["copy"]
        and worker.SlotMappingOwner.__dict__["kernel"] is ORIGINALS["slot"]
    )


def register_all():
    fastdispatch.register_kernels({EXPAND: expand_impl, COPY: copy_impl, SLOT: slot_impl})


def test_every_holder_launches_the_impl_then_restores(registry_core):
    assert launch_everything() == ALL_ORIGINAL
    register_all()
    assert type(kernels.expand_kernel) is registry_core.KernelOverride
    assert launch_everything() == ALL_IMPL
    assert CALLS[0] == ("expand_impl", "o", "i", [1, 2], 0, 1, 8)
    assert CALLS[3] == ("copy_impl", "s", "d", 3, 1, 64)
    assert CALLS[4] == ("slot_impl", 4, "p", "s", 1024)  # BLOCK_SIZE: the kernel's default
    assert fastdispatch.verify() == {EXPAND: [], COPY: [], SLOT: []}
    # the foreign owner lost its cached names (re-derived from the wrapper on next launch)
    assert owners.copy._kernel_arg_names == ("src_ptr", "dst_ptr", "n", "src_stride", "BLOCK_SIZE")
    fastdispatch.unregister_kernels()
    assert holders_are_original()
    assert launch_everything() == ALL_ORIGINAL
    assert fastdispatch._registry == {}


def test_registry_entries_have_vllms_meaning(registry_core):
    register_all()
    original, impl = fastdispatch._registry[EXPAND]
    assert original is ORIGINALS["expand"] and impl is expand_impl
    entry = fastdispatch._registry[EXPAND]
    assert entry.override is kernels.expand_kernel
    assert (entry.host, entry.attr) == (kernels, "expand_kernel")


def test_verify_reports_holders_still_on_the_original(registry_core):
    register_all()
    users.expand_kernel = ORIGINALS["expand"]  # a holder that escaped (e.g. re-imported later)
    report = fastdispatch.verify()
    assert report[EXPAND] == ["fakepkg_rt.users.expand_kernel"]
    assert fastdispatch.verify([COPY]) == {COPY: []}
    with pytest.raises(KeyError, match="not registered"):
        fastdispatch.verify(["nope.kernel"])


def test_reregistration_warns_replaces_and_unregister_restores_true_original(registry_core):
    register_all()
    first = kernels.expand_kernel

    def other_impl(a, b, c, d, e, f):
        CALLS.append(("other_impl",))

    with pytest.warns(RuntimeWarning, match="already registered. Overwriting."):
        fastdispatch.register_kernels({EXPAND: other_impl})
    assert kernels.expand_kernel is not first
    assert launch_everything()[:3] == ["other_impl"] * 3
    assert fastdispatch._registry[EXPAND][0] is ORIGINALS["expand"]
    assert fastdispatch.verify()[EXPAND] == []
    fastdispatch.unregister_kernels([EXPAND])
    assert (
        kernels.expand_kernel is ORIGINALS["expand"] and users.expand_kernel is ORIGINALS["expand"]
    )
    assert vars(owners.expand)["kernel"] is ORIGINALS["expand"]
    assert set(fastdispatch._registry) == {COPY, SLOT}


def test_scoped_overrides_nest_and_restore_exactly(registry_core):
    fastdispatch.register_kernels({EXPAND: expand_impl})
    outer = kernels.expand_kernel

    def scoped(a, b, c, d, e, f):
        CALLS.append(("scoped",))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a scoped override of a registered name does not warn
        with fastdispatch.overrides({EXPAND: scoped, COPY: copy_impl}) as installed:
            assert installed[EXPAND] is kernels.expand_kernel
            assert launch_everything()[:4] == ["scoped"] * 3 + ["copy_impl"]
    assert kernels.expand_kernel is outer and users.expand_kernel is outer
    assert vars(owners.expand)["kernel"] is outer
    assert COPY not in fastdispatch._registry and kernels.copy_kernel is ORIGINALS["copy"]
    assert launch_everything()[:4] == ["expand_impl"] * 3 + ["copy_kernel"]


def test_scoped_overrides_restore_on_exception(registry_core):
    with pytest.raises(ZeroDivisionError):
        with fastdispatch.overrides({EXPAND: expand_impl}):
            raise ZeroDivisionError("raised inside the scope")
    assert holders_are_original() and fastdispatch._registry == {}


def test_bind_check_failure_changes_nothing(registry_core):
    def bad(a, b):  # too few parameters for expand_kernel
        pass

    with pytest.raises(TypeError, match="positional parameter"):
        fastdispatch.register_kernels({COPY: copy_impl, EXPAND: bad})
    assert holders_are_original() and fastdispatch._registry == {}


def test_resolution_errors_name_what_is_missing(registry_core):
    with pytest.raises(ModuleNotFoundError, match="fakepkg_rt.nomodule"):
        fastdispatch.register_kernels({"fakepkg_rt.nomodule.k": expand_impl})
    with pytest.raises(ValueError, match="has no attribute 'missing_kernel'"):
        fastdispatch.register_kernels({"fakepkg_rt.kernels.missing_kernel": expand_impl})
    with pytest.raises(ValueError, match="has no attribute 'NoClass'"):
        fastdispatch.register_kernels({"fakepkg_rt.worker.NoClass.kernel": expand_impl})
    with pytest.raises(ValueError, match="SlotMappingOwner has no attribute 'nokernel'"):
        fastdispatch.register_kernels({"fakepkg_rt.worker.SlotMappingOwner.nokernel": expand_impl})
    with pytest.raises(ValueError, match="qualified"):
        fastdispatch.register_kernels({"bare": expand_impl})
    assert fastdispatch._resolve_kernel(EXPAND) == (kernels, "expand_kernel")
    assert fastdispatch._resolve_kernel(SLOT) == (worker.SlotMappingOwner, "kernel")
    with pytest.raises(
        TypeError, match="expected a callable or an object with a \\[grid\\] of its own, got 42"
    ):
        fastdispatch.register_kernels({EXPAND: 42})
    assert holders_are_original()


def test_unregister_unknown_name(registry_core):
    with pytest.raises(KeyError, match="nope"):
        fastdispatch.unregister_kernels(["nope.k"])


def test_hostile_modules_are_never_touched(registry_core):
    """No module __getattr__, lazy hook, foreign __eq__/__hash__/__dict__, and no warnings."""

    class LazyModule(types.ModuleType):
        def __getattribute__(self, name):
            raise AssertionError(f"lazy module attribute {name!r} read")

    lazy = LazyModule("fakepkg_rt_lazy")
    types.ModuleType.__dict__["__dict__"].__get__(lazy)["k"] = ORIGINALS[
        "expand"
    ]  # a holder inside

    class Key:
        armed = False

        def __hash__(self):
            if Key.armed:
                raise AssertionError("__hash__ called on a foreign module-dict key")
            return 1

    odd = types.ModuleType("fakepkg_rt_odd")
    odd.__dict__[Key()] = ORIGINALS["expand"]  # a foreign non-str key: never hashed again
    Key.armed = True
    odd.__dict__["boom"] = hostile.boom
    sys.modules["fakepkg_rt_lazy"] = lazy
    sys.modules["fakepkg_rt_odd"] = odd
    sys.modules["fakepkg_rt_not_a_module"] = hostile.boom
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            register_all()
            assert fastdispatch.verify()[EXPAND] == []
        assert hostile.same_kernel_here is kernels.expand_kernel
        assert types.ModuleType.__dict__["__dict__"].__get__(lazy)["k"] is kernels.expand_kernel
        assert [v for k, v in odd.__dict__.items() if type(k) is not str] == [ORIGINALS["expand"]]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fastdispatch.unregister_kernels()
        assert types.ModuleType.__dict__["__dict__"].__get__(lazy)["k"] is ORIGINALS["expand"]
        assert holders_are_original()
    finally:
        for name in ("fakepkg_rt_lazy", "fakepkg_rt_odd", "fakepkg_rt_not_a_module"):
            sys.modules.pop(name, None)


def test_staticmethod_class_attribute_is_restored_exactly(registry_core):
    stored = worker.StaticOwner.__dict__["kernel"]
    assert type(stored) is staticmethod
    calls = []
    fastdispatch.register_kernels(
        {"fakepkg_rt.worker.StaticOwner.kernel": lambda n, p, b: calls.append((n, p, b))}
    )
    worker.StaticOwner().run(3, "p")
    assert calls == [(3, "p", 64)]
    assert fastdispatch._registry["fakepkg_rt.worker.StaticOwner.kernel"][0] is stored.__func__
    fastdispatch.unregister_kernels()
    assert worker.StaticOwner.__dict__["kernel"] is stored
    CALLS.clear()
    worker.StaticOwner().run(4, "q")  # through the instance: still a staticmethod, not bound
    assert CALLS == [("static_kernel", 4, "q", 64)]


def test_rebind_kernels_signature_like_vllm(registry_core):
    wrapper = registry_core.KernelOverride(ORIGINALS["copy"], copy_impl)
    fastdispatch._rebind_kernels([(ORIGINALS["copy"], wrapper)])
    try:
        assert kernels.copy_kernel is wrapper and vars(owners.copy)["kernel"] is wrapper
        assert "_kernel_arg_names" not in vars(owners.copy)
    finally:
        fastdispatch._rebind_kernels([(wrapper, ORIGINALS["copy"])])
    assert holders_are_original()


def test_thread_safety_launching_while_registering(registry_core):
    """4 threads launch through every holder while another registers and unregisters (4 times
    each: every pass walks sys.modules, sharing the GIL with the launchers -- more threads or
    passes only stretch the test on a loaded host)."""
    stop = threading.Event()
    errors = []
    seen = set()

    def launcher():
        try:
            while not stop.is_set():
                seen.update(launch_everything_local())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def launch_everything_local():
        # CALLS is shared between threads: only which functions ran is checked.
        kernels.launch_expand("o", "i", [1])
        owners.expand("o", "i", [1])
        worker.SlotMappingOwner().run(1, "p", "s")
        return {c[0] for c in CALLS[-3:]}

    def registrar():
        try:
            for i in range(8):  # 4 registrations, 4 unregistrations: each a pass over sys.modules
                if i % 2 == 0:
                    register_all()
                else:
                    fastdispatch.unregister_kernels()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=launcher) for _ in range(4)]
    for t in threads:
        t.start()
    reg = threading.Thread(target=registrar)
    reg.start()
    reg.join()
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert seen <= {
        "expand_kernel",
        "expand_impl",
        "slot_kernel",
        "slot_impl",
        "copy_kernel",
        "copy_impl",
    }
    assert holders_are_original() and fastdispatch._registry == {}


def test_concurrent_registrations_are_serialised(registry_core):
    errors = []

    def worker_thread(name, impl):
        try:
            for _ in range(20):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fastdispatch.register_kernels({name: impl})
                fastdispatch.unregister_kernels([name])
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [
        threading.Thread(target=worker_thread, args=(EXPAND, expand_impl)),
        threading.Thread(target=worker_thread, args=(COPY, copy_impl)),
        threading.Thread(target=worker_thread, args=(SLOT, slot_impl)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert holders_are_original() and fastdispatch._registry == {}
