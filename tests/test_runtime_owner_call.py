"""``owner_call_method``: the compiled ``__call__`` glue for foreign launch owners (both
backends)."""

import pytest

from fastdispatch.vllm._owners import OWNER_LAYOUT


def expand_kernel(
    output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS
):
    raise AssertionError("the original kernel must not run")


def dispatch(output, input, cu_num_tokens, replace_from=0, replace_to=1):
    return (len(cu_num_tokens),), dict(MAX_NUM_TOKENS=8), output


NAMES = ("output", "input", "cu_num_tokens", "replace_from", "replace_to")
DEFAULTS = {"replace_from": 0, "replace_to": 1}


def make_owner_class(core, caches, fallback_calls):
    """A foreign owner class laid out like vLLM's decorator-made owner (state in ``__dict__``)."""

    class Owner:
        _warming = False

        def __init__(self, kernel, dispatch_fn=dispatch):
            self.kernel = kernel
            self._dispatch_fn = dispatch_fn
            self._dispatch_arg_names = NAMES
            self._dispatch_defaults = dict(DEFAULTS)

        def __call__(self, *args, **kwargs):
            fallback_calls.append((self, args, kwargs))
            return "fallback"

    stock = Owner.__dict__["__call__"]
    Owner.__call__ = core.owner_call_method(stock, caches, **OWNER_LAYOUT)
    return Owner


@pytest.fixture
def setup(core):
    launches = []

    def impl(output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS):
        launches.append(
            (output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS)
        )

    caches, fallback_calls = {}, []
    owner_cls = make_owner_class(core, caches, fallback_calls)
    override = core.KernelOverride(expand_kernel, impl)
    return core, owner_cls, override, launches, caches, fallback_calls


def test_positional_launch_binds_and_returns_outputs(setup):
    core, Owner, override, launches, caches, fallback = setup
    owner = Owner(override)
    out = ["out"]
    assert owner(out, "inp", [1, 2, 3], 7, 9) is out
    assert launches == [(out, "inp", [1, 2, 3], 7, 9, 8)]
    assert fallback == []
    hit = caches[id(owner)]
    assert hit[0] is owner and isinstance(hit[1], core.PlanCache)
    owner(out, "inp", [1], 7, 9)  # the same cache is reused
    assert caches[id(owner)] is hit and len(caches) == 1
    assert launches[-1] == (out, "inp", [1], 7, 9, 8)


def test_keywords_and_defaults_complete_the_inputs(setup):
    _, Owner, override, launches, _, _ = setup
    owner = Owner(override)
    owner("o", "i", cu_num_tokens=[1], replace_to=5)
    assert launches == [("o", "i", [1], 0, 5, 8)]
    owner(output="o", input="i", cu_num_tokens=[1])
    assert launches[-1] == ("o", "i", [1], 0, 1, 8)


def test_missing_argument_raises_like_the_dispatch_function(setup):
    _, Owner, override, launches, _, _ = setup
    with pytest.raises(TypeError):
        Owner(override)("o", "i")
    assert launches == []


def test_other_kernels_warming_and_no_dispatch_take_the_fallback(setup):
    _, Owner, override, launches, _, fallback = setup
    plain = Owner(expand_kernel)
    assert plain(1, 2, x=3) == "fallback"
    assert fallback[-1] == (plain, (1, 2), {"x": 3})
    warming = Owner(override)
    warming._warming = True
    assert warming("o", "i", [1]) == "fallback"
    no_dispatch = Owner(override, dispatch_fn=None)
    assert no_dispatch("o") == "fallback"
    assert launches == [] and len(fallback) == 3


def test_stale_cache_entry_for_a_reused_id_is_replaced(setup):
    core, Owner, override, launches, caches, _ = setup
    owner = Owner(override)
    other = object()
    caches[id(owner)] = (other, core.PlanCache())
    owner("o", "i", [1])
    assert caches[id(owner)][0] is owner
    assert len(launches) == 1


def test_bad_construction_arguments(core):
    kw = OWNER_LAYOUT
    with pytest.raises(TypeError):
        core.owner_call_method(print, [], **kw)
    with pytest.raises(TypeError):
        core.owner_call_method(print, {}, **dict(kw, kernel_attr=None))
    with pytest.raises(TypeError):
        core.owner_call_method(print, {})  # attribute names are required
