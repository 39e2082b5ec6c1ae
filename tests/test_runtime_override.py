"""KernelOverride: binding of launches to impls, the registration-time bind check, refcounts.

Every test runs against the compiled module and the pure-Python twin (``core`` fixture).
"""

import gc
import sys

import pytest

GRID = (3,)


def kernel(out_ptr, in_ptr, n, scale, BLOCK=128):
    raise AssertionError("the original kernel must not run")


class Recorder:
    """Impl factory: each impl appends what it received to ``calls``."""

    def __init__(self):
        self.calls = []

    def positional(self):
        def impl(out, inp, count, factor, block):  # names differ from the kernel's
            self.calls.append((out, inp, count, factor, block))
            return "ret"

        return impl


def test_attributes_mirror_vllm(core):
    rec = Recorder()
    impl = rec.positional()
    ov = core.KernelOverride(kernel, impl)
    assert ov.arg_names == ("out_ptr", "in_ptr", "n", "scale", "BLOCK")
    assert type(ov.arg_names) is tuple
    assert ov.constexprs is None
    assert ov.func is impl
    assert ov._impl is impl
    assert ov.__name__ == "impl"
    assert ov.__module__ == kernel.__module__
    assert ov._forward_by_name is False
    assert core._kernel_arg_names(ov) == ov.arg_names


def test_positional_forward_with_differing_names(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    # kwargs in a different order than the kernel's: still placed by kernel order
    assert ov[GRID](scale=4, n=3, in_ptr="i", out_ptr="o", BLOCK=64) == "ret"
    assert rec.calls == [("o", "i", 3, 4, 64)]


def test_forward_by_name_any_order(core):
    calls = []

    def impl(n, out_ptr, BLOCK, scale, in_ptr):  # same names, permuted: bound by name
        calls.append((out_ptr, in_ptr, n, scale, BLOCK))

    ov = core.KernelOverride(kernel, impl)
    assert ov._forward_by_name is True
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
    assert calls == [(1, 2, 3, 4, 5)]


def test_identical_names_forward_by_name_like_vllm(core):
    calls = []

    def impl(out_ptr, in_ptr, n, scale, BLOCK=128):
        calls.append((out_ptr, in_ptr, n, scale, BLOCK))

    ov = core.KernelOverride(kernel, impl)
    assert ov._forward_by_name is True
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4)
    assert calls == [(1, 2, 3, 4, 128)]


def test_keyword_only_kernel_argument_goes_by_keyword(core):
    calls = []

    def impl(o, i, cnt, fac, *, BLOCK):
        calls.append((o, i, cnt, fac, BLOCK))

    ov = core.KernelOverride(kernel, impl)
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
    assert calls == [(1, 2, 3, 4, 5)]


def test_grid_is_ignored_and_launcher_is_reused(core):
    ov = core.KernelOverride(kernel, Recorder().positional())
    assert ov[(1,)] is ov[(2, 3)] is ov[None]


def test_unexpected_launch_kwargs_are_named(core):
    ov = core.KernelOverride(kernel, Recorder().positional())
    with pytest.raises(
        TypeError, match=r"unexpected launch arguments: \['bogus', 'other'\]"
    ) as info:
        ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, bogus=5, other=6)
    # vLLM raises RuntimeError here; code catching that keeps working.
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value, core.LaunchArgumentError)


def test_unexpected_kwargs_raised_even_by_name(core):
    def impl(out_ptr, in_ptr, n, scale, BLOCK):
        raise AssertionError("must not run")

    ov = core.KernelOverride(kernel, impl)
    with pytest.raises(TypeError, match="bogus"):
        ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5, bogus=6)


def test_non_str_keys_reported(core):
    ov = core.KernelOverride(kernel, Recorder().positional())
    with pytest.raises(TypeError, match=r"\[7\]"):
        ov._launch_kwargs({"out_ptr": 1, "in_ptr": 2, "n": 3, "scale": 4, 7: 8})


def test_missing_argument_uses_impl_default_then_kernel_default(core):
    calls = []

    def impl(o, i, cnt, fac=10, block=None):
        calls.append((o, i, cnt, fac, block))

    ov = core.KernelOverride(kernel, impl)
    ov[GRID](out_ptr=1, in_ptr=2, n=3)
    # fac: the impl's default; block: the impl's default (None) wins over the kernel's 128.
    assert calls[-1] == (1, 2, 3, 10, None)

    def impl2(o, i, cnt, fac, block):
        calls.append((o, i, cnt, fac, block))

    ov2 = core.KernelOverride(kernel, impl2)
    ov2[GRID](out_ptr=1, in_ptr=2, n=3, scale=4)
    assert calls[-1] == (1, 2, 3, 4, 128)  # the kernel's default for BLOCK


def test_missing_required_argument_is_named_not_shifted(core):
    ov = core.KernelOverride(kernel, Recorder().positional())
    # vLLM would call impl("o", 3, 4) here (values shifted left); we refuse and name it.
    with pytest.raises(
        TypeError, match=r"missing launch arguments without a default: \['in_ptr'\]"
    ):
        ov[GRID](out_ptr="o", n=3, scale=4)


def test_triton_launch_options_are_dropped(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5, num_warps=4, num_stages=2)
    assert rec.calls == [(1, 2, 3, 4, 5)]


def test_launch_option_name_that_is_a_kernel_argument_is_passed(core):
    calls = []

    def k(x_ptr, num_warps):
        pass

    def impl(x, w):
        calls.append((x, w))

    core.KernelOverride(k, impl)[GRID](x_ptr=1, num_warps=8)
    assert calls == [(1, 8)]


def test_positional_launch_and_direct_call_pass_through(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    ov[GRID](1, 2, 3, 4, 5)
    ov(6, 7, 8, 9, block=10)
    assert rec.calls == [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10)]


def test_equal_but_not_identical_keys(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    kw = {
        "".join(["out", "_ptr"]): 1,
        "".join(["in", "_ptr"]): 2,
        "".join("n"): 3,
        "".join(["sca", "le"]): 4,
        "".join(["BLO", "CK"]): 5,
    }
    for _ in range(3):  # first launch fills the key cache, later ones must still be right
        ov[GRID](**kw)
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
    assert rec.calls == [(1, 2, 3, 4, 5)] * 4


def test_fresh_key_objects_every_launch_and_mixed_with_literals(core):
    """New equal key objects on every launch, alternating with literal keys and with a wrong
    key at one position: each launch binds its own keys (the remembered keys are hints only)."""
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    names = ["out_ptr", "in_ptr", "n", "scale", "BLOCK"]
    for i in range(6):
        fresh = {"".join(list(k)): v for k, v in zip(names, range(10 * i, 10 * i + 5))}
        ov[GRID](**fresh)
        ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
        with pytest.raises(TypeError, match="sca1e"):
            ov[GRID](**{"out_ptr": 1, "in_ptr": 2, "n": 3, "sca1e": 4, "BLOCK": 5})
    expected = []
    for i in range(6):
        expected += [tuple(range(10 * i, 10 * i + 5)), (1, 2, 3, 4, 5)]
    assert rec.calls == expected


def test_remembered_keys_are_owned_and_released(core):
    """Run-time keys the override remembers stay alive while remembered and are let go when the
    next launch brings other keys, or with the override: no leak, no dangling pointer."""
    rec = Recorder()

    # every name longer than one character: a one-character str is CPython's shared cached
    # object, whose count moves with unrelated interpreter activity (before 3.12 made it
    # immortal), so only fresh strings can show what the override holds
    def kernel_nn(out_ptr, in_ptr, nn, scale, BLOCK=128):
        raise AssertionError("the original kernel must not run")

    ov = core.KernelOverride(kernel_nn, rec.positional())
    keys = ["".join(list(k)) for k in ("out_ptr", "in_ptr", "nn", "scale", "BLOCK")]
    kw = dict(zip(keys, range(5)))
    gc.collect()
    before = [sys.getrefcount(k) for k in keys]
    for _ in range(1000):
        ov[GRID](**kw)
    mid = [sys.getrefcount(k) for k in keys]
    assert all(m - b <= 1 for m, b in zip(mid, before)), (before, mid)  # at most one, held
    ov[GRID](out_ptr=1, in_ptr=2, nn=3, scale=4, BLOCK=5)  # other keys take their places
    assert [sys.getrefcount(k) for k in keys] == before
    for _ in range(10):
        ov[GRID](**kw)
    del ov
    gc.collect()
    assert [sys.getrefcount(k) for k in keys] == before
    assert rec.calls[:1000] == [(0, 1, 2, 3, 4)] * 1000


def test_key_order_changes_between_launches(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
    ov[GRID](BLOCK=5, scale=4, n=3, in_ptr=2, out_ptr=1)
    ov[GRID](n=3, out_ptr=1, BLOCK=5, in_ptr=2, scale=4)
    assert rec.calls == [(1, 2, 3, 4, 5)] * 3


def test_dict_with_deleted_entries(core):
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    d = {"junk": 0, "out_ptr": 1, "tmp": 9, "in_ptr": 2, "n": 3, "scale": 4, "BLOCK": 5}
    del d["junk"], d["tmp"]
    ov._launch_kwargs(d)
    assert rec.calls == [(1, 2, 3, 4, 5)]


def test_impl_exception_propagates(core):
    def impl(o, i, c, f, b):
        raise KeyError("from impl")

    ov = core.KernelOverride(kernel, impl)
    with pytest.raises(KeyError, match="from impl"):
        ov[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)


def test_unknown_signature_forwards_positionally(core):
    # A C builtin has no readable signature: forwarded unchecked in kernel order, omitted
    # trailing arguments stay omitted.
    def k(a_ptr, b_ptr, c_ptr):
        pass

    ov = core.KernelOverride(k, max)
    assert ov[GRID](a_ptr=3, b_ptr=7) == 7
    assert ov[GRID](a_ptr=3, b_ptr=7, c_ptr=9) == 9
    with pytest.raises(TypeError, match=r"\['b_ptr'\]"):  # a gap is never closed up
        ov[GRID](a_ptr=3, c_ptr=9)

    def k2(a_ptr, b_ptr, c_ptr=11):
        pass

    assert core.KernelOverride(k2, max)[GRID](a_ptr=3, b_ptr=7) == 11  # the kernel's default


def test_many_arguments_beyond_the_stack_array(core):
    names = [f"a{i}_ptr" for i in range(70)]
    ns = {}
    exec(f"def k({', '.join(names)}): pass", ns)
    params = ", ".join(f"x{i}" for i in range(70))
    exec(f"def impl({params}): return ({params},)", ns)
    ov = core.KernelOverride(ns["k"], ns["impl"])
    assert ov[GRID](**{name: i for i, name in enumerate(names)}) == tuple(range(70))


# -- registration-time bind check ---------------------------------------------------------------


def test_bind_check_too_few_positional(core):
    def impl(o, i, c):
        pass

    with pytest.raises(TypeError, match=r"takes 3 positional parameter\(s\).*passes 5"):
        core.KernelOverride(kernel, impl)


def test_bind_check_required_parameter_the_kernel_lacks(core):
    def impl(o, i, c, f, b, extra):
        pass

    with pytest.raises(TypeError, match=r"requires parameter\(s\) 'extra'"):
        core.KernelOverride(kernel, impl)


def test_bind_check_keyword_only_not_a_kernel_argument(core):
    def impl(o, i, c, f, b, *, threads=1):
        pass

    with pytest.raises(TypeError, match=r"keyword-only parameter\(s\) 'threads'"):
        core.KernelOverride(kernel, impl)


def test_bind_check_permuted_names_with_extra_kernel_argument(core):
    def k(out_ptr, in_ptr, n, BLOCK):
        pass

    def impl(in_ptr, out_ptr, n, block):  # BLOCK not named: positional forwarding would swap
        pass

    with pytest.raises(
        TypeError, match=r"impl parameter 'in_ptr' would receive kernel argument 'out_ptr'"
    ):
        core.KernelOverride(k, impl)


def test_bind_check_accepts_extra_defaulted_and_varargs(core):
    calls = []

    def impl(o, i, c, f, b, extra=None, **unused):
        calls.append((o, i, c, f, b, extra))

    core.KernelOverride(kernel, impl)[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)

    def impl_var(*args):
        calls.append(args)

    core.KernelOverride(kernel, impl_var)[GRID](out_ptr=1, in_ptr=2, n=3, scale=4, BLOCK=5)
    assert calls == [(1, 2, 3, 4, 5, None), (1, 2, 3, 4, 5)]


# vLLM 0.32's CPU shims (their parameter lists, against their kernels'): all must bind.
VLLM_SHIM_SIGNATURES = [
    (
        "positions_ptr, block_table_ptr, block_table_stride, seq_lens_ptr, "
        "out_clamped_positions_ptr, out_slot_mapping_ptr, block_size, max_model_len, "
        "n_blocks_per_req, PAD_ID, batch_size",
        "positions, block_table, stride, seq_lens, out_clamped_positions, out_slot_mapping, "
        "block_size, max_model_len, n_blocks_per_req, PAD_ID, batch_size=None",
    ),
    (
        "output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS",
        "output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None",
    ),
    (
        "target_token_ids_ptr, target_positions_ptr, next_token_ids_ptr, BLOCK_SIZE_TOKENS",
        "target_token_ids_ptr, target_positions_ptr, next_token_ids_ptr, BLOCK_SIZE_TOKENS=None, "
        "BLOCK_SIZE_REQS=None",
    ),
    (
        "sampled_token_ids_ptr, discard_request_mask_ptr, vocab_size, stride_sampled_token_ids, "
        "BLOCK_SIZE_TOKENS",
        "sampled_token_ids, discard_request_mask, vocab_size, stride=None, BLOCK_SIZE_TOKENS=None",
    ),
]


@pytest.mark.parametrize("kernel_params,impl_params", VLLM_SHIM_SIGNATURES)
def test_bind_check_accepts_vllm_shims(core, kernel_params, impl_params):
    ns = {}
    exec(f"def k({kernel_params}): pass", ns)
    returned = ", ".join(p.split("=")[0] for p in impl_params.split(", "))
    exec(f"def impl({impl_params}):\n    return ({returned},)", ns)
    ov = core.KernelOverride(ns["k"], ns["impl"])
    names = ov.arg_names
    got = ov[GRID](**{name: i for i, name in enumerate(names)})
    assert got[: len(names)] == tuple(range(len(names)))


# -- refcounts ---------------------------------------------------------------------------------


def _launch_many(core, n):
    class Arg:
        pass

    args = [Arg() for _ in range(5)]
    default = Arg()

    def impl(o, i, c, f, b=default):
        return None

    ov = core.KernelOverride(kernel, impl)
    launcher = ov[GRID]
    before = [sys.getrefcount(a) for a in args] + [
        sys.getrefcount(impl),
        sys.getrefcount(default),
        sys.getrefcount(ov),
    ]
    kw_full = dict(zip(ov.arg_names, args))
    kw_short = dict(zip(ov.arg_names[:4], args))  # BLOCK from the impl default
    kw_bad = dict(kw_full, bogus=args[0])
    for _ in range(n):
        launcher(**kw_full)
        launcher(**kw_short)
    for _ in range(max(n // 100, 10)):
        try:
            launcher(**kw_bad)
        except TypeError:
            pass
    del kw_full, kw_short, kw_bad
    gc.collect()
    after = [sys.getrefcount(a) for a in args] + [
        sys.getrefcount(impl),
        sys.getrefcount(default),
        sys.getrefcount(ov),
    ]
    return before, after


def test_refcounts_unchanged_after_a_million_launches():
    from fastdispatch import _core

    before, after = _launch_many(_core, 10**6)
    assert before == after


def test_refcounts_unchanged_twin():
    from fastdispatch import _core_py

    before, after = _launch_many(_core_py, 10**4)  # the twin holds no C references to leak
    assert before == after


def test_override_is_not_picklable(core):
    import pickle

    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(core.KernelOverride(kernel, Recorder().positional()))


def test_signature_of_bind_layout_is_shared():
    # Both backends build from the same bind check: same layout for the same pair.
    from fastdispatch import _core, _core_py

    impl = Recorder().positional()
    a = _core.KernelOverride(kernel, impl)._layout
    b = _core_py.KernelOverride(kernel, impl)._layout
    assert (a.npos, a.kwnames, a.arg_slots, a.slot_args, a.slot_defaults) == (
        b.npos,
        b.kwnames,
        b.arg_slots,
        b.slot_args,
        b.slot_defaults,
    )


def test_uninitialised_objects_raise_instead_of_crashing():
    from fastdispatch import _core

    with pytest.raises(TypeError):
        _core.Launcher.__new__(_core.Launcher)(a=1)
    with pytest.raises(TypeError):
        _core.KernelOverride.__new__(_core.KernelOverride)(1)
    with pytest.raises(TypeError):
        _core.LaunchOwner.__new__(_core.LaunchOwner)(1)
    ov = _core.KernelOverride(kernel, Recorder().positional())
    with pytest.raises(TypeError, match="already initialised"):
        ov.__init__(kernel, Recorder().positional())


def test_repeated_launches_follow_each_call_s_keys_and_values(core):
    """A launch with the same keys in the same order as the last complete one takes a shortcut
    in the compiled core; any change of values, order, count or names must still bind right."""
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    launch = ov[GRID]
    for i in range(3):  # same layout, new values each time
        launch(**dict(out_ptr=f"o{i}", in_ptr=i, n=i + 1, scale=2 * i, BLOCK=64))
    assert rec.calls == [("o0", 0, 1, 0, 64), ("o1", 1, 2, 2, 64), ("o2", 2, 3, 4, 64)]
    rec.calls.clear()
    launch(BLOCK=8, scale=1, n=2, in_ptr="i", out_ptr="o")  # another order
    launch(out_ptr="p", in_ptr="j", n=3, scale=5, BLOCK=9)  # back to the first order
    launch(out_ptr="q", in_ptr="k", n=4, scale=6)  # fewer keys: BLOCK's default
    launch(out_ptr="r", in_ptr="l", n=5, scale=7, num_warps=4)  # same count, a launch option
    kw = dict(out_ptr="s", in_ptr="m", n=6, scale=8, BLOCK=1, extra=0)
    del kw["extra"]  # a dict with a deleted entry in its table
    launch(**kw)
    kw = dict(out_ptr="t", in_ptr="n", n=7, scale=9, BLOCK=2)
    launch(**kw)
    assert rec.calls == [
        ("o", "i", 2, 1, 8),
        ("p", "j", 3, 5, 9),
        ("q", "k", 4, 6, 128),
        ("r", "l", 5, 7, 128),
        ("s", "m", 6, 8, 1),
        ("t", "n", 7, 9, 2),
    ]
    with pytest.raises(TypeError, match="unexpected launch arguments"):
        launch(out_ptr="u", in_ptr="o", n=8, scale=1, BLOCKS=2)  # same count, a wrong name
    with pytest.raises(TypeError, match="unexpected launch arguments"):
        launch(out_ptr="u", in_ptr="o", n=8, scale=1, BLOCK=1, BLOCKS=2)
    launch(out_ptr="v", in_ptr="p", n=9, scale=2, BLOCK=3)
    assert rec.calls[-1] == ("v", "p", 9, 2, 3)


def test_shortcut_launch_keeps_refcounts(core):
    """Values placed by the shortcut are owned for the call and released after it: repeated
    launches, returning or raising, leave every refcount as it was."""
    obj, impl_calls = [7], []

    def impl(out, inp, count, factor, block):
        impl_calls.append(count)
        if count < 0:
            raise ValueError("impl failed")

    ov = core.KernelOverride(kernel, impl)
    before = sys.getrefcount(obj)
    for i in range(200):
        ov[GRID](out_ptr=obj, in_ptr=obj, n=i, scale=obj, BLOCK=1)
    for _ in range(50):
        with pytest.raises(ValueError, match="impl failed"):
            ov[GRID](out_ptr=obj, in_ptr=obj, n=-1, scale=obj, BLOCK=1)
    assert sys.getrefcount(obj) == before
    assert impl_calls == list(range(200)) + [-1] * 50


def test_shortcut_abandoned_late_gives_back_what_it_took(core):
    """A launch that matches the shortcut's keys up to the last one and then differs (another
    name, or a deleted entry) falls back to the full binding: right values, and every value the
    shortcut had already taken is given back."""
    objs = [object() for _ in range(5)]
    rec = Recorder()
    ov = core.KernelOverride(kernel, rec.positional())
    a, b, c, d, e = objs
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(100):
        ov[GRID](out_ptr=a, in_ptr=b, n=c, scale=d, BLOCK=e)  # arms the shortcut
        ov[GRID](out_ptr=a, in_ptr=b, n=c, scale=d, num_warps=e)  # differs at the last key
        with pytest.raises(TypeError, match="unexpected launch arguments"):
            ov[GRID](out_ptr=a, in_ptr=b, n=c, scale=d, BLOCKS=e)
        kw = dict(out_ptr=a, in_ptr=b, n=c, scale=d, junk=0, BLOCK=e)
        del kw["junk"]  # same 5 keys, but a deleted entry sits in the table at position 4
        ov._launch_kwargs(kw)
    assert rec.calls == [(a, b, c, d, e), (a, b, c, d, 128), (a, b, c, d, e)] * 100
    rec.calls.clear()  # the recorder's own references
    del kw
    assert [sys.getrefcount(o) for o in objs] == before


def _override_emptying_its_launch_dict(core):
    """``(launch_kwargs, seen, override)``: an override of ``kernel`` whose impl clears the dict
    ``launch_kwargs`` then records what it was handed (three lengths, count, block) in ``seen``."""
    launch_kwargs = {}
    seen = []

    def impl(out, inp, count, factor, block):
        launch_kwargs.clear()
        seen.append([len(x) for x in (out, inp, factor)] + [count, block])

    return launch_kwargs, seen, core.KernelOverride(kernel, impl)


def test_shortcut_owns_values_while_the_impl_empties_the_launch_dict(core):
    """The launch dict is the only other holder of each value; an impl that clears it must still
    see live arguments (the shortcut owns them for the call)."""
    launch_kwargs, seen, ov = _override_emptying_its_launch_dict(core)
    for i in range(3):  # the second and third launches take the shortcut
        launch_kwargs.update(
            out_ptr=[0] * (i + 1), in_ptr=[0] * (i + 2), n=i, scale=[0] * (i + 3), BLOCK=7
        )
        ov._launch_kwargs(launch_kwargs)
    assert seen == [[1, 2, 3, 0, 7], [2, 3, 4, 1, 7], [3, 4, 5, 2, 7]]


def test_launcher_called_from_c_with_a_dict_the_impl_can_reach(core):
    """``PyObject_Call(launcher, (), d)`` from C with a dict the caller still holds (not the
    interpreter's fresh ``**kw`` copy): an impl that empties ``d`` must still see live arguments,
    and every reference taken is given back."""
    import ctypes

    call = ctypes.pythonapi.PyObject_Call
    call.restype = ctypes.py_object
    call.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.py_object]
    launch_kwargs, seen, ov = _override_emptying_its_launch_dict(core)
    launcher = ov[GRID]
    block = object()
    before = sys.getrefcount(block)
    for i in range(3):  # the second and third launches take the shortcut
        launch_kwargs.update(
            out_ptr=[0] * (i + 1), in_ptr=[0] * (i + 2), n=i, scale=[0] * (i + 3), BLOCK=block
        )
        call(launcher, (), launch_kwargs)
    assert [row[:4] for row in seen] == [[1, 2, 3, 0], [2, 3, 4, 1], [3, 4, 5, 2]]
    assert all(row[4] is block for row in seen)
    seen.clear()
    assert sys.getrefcount(block) == before


def test_launch_with_no_kwargs_uses_defaults_or_names_the_missing(core):
    """``override[grid]()``: the interpreter passes no kwargs dict at all; defaults fill every
    slot, or the launch is refused naming the arguments without one."""

    def all_defaults(a=1, b=2):  # pragma: no cover - introspected only
        raise AssertionError

    def one_required(a, b=2):  # pragma: no cover - introspected only
        raise AssertionError

    assert core.KernelOverride(all_defaults, lambda x, y: (x, y))[GRID]() == (1, 2)
    with pytest.raises(TypeError, match=r"missing launch arguments without a default: \['a'\]"):
        core.KernelOverride(one_required, lambda x, y: (x, y))[GRID]()
