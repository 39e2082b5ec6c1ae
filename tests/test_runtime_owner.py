"""Launch owner (``kernel_dispatcher``) and ``launch_owner``: dispatch -> bind -> launch (both
backends)."""

import pytest
import torch
from _runtime_helpers import contract_args


def expand_kernel(
    output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS
):
    raise AssertionError("plain-function kernel called with:", output_ptr)


class Recording:
    """A subscriptable kernel (like a Triton JITFunction) that records each launch."""

    def __init__(self, arg_names):
        self.arg_names = list(arg_names)
        self.launches = []

    def __getitem__(self, grid):
        def launch(**kwargs):
            self.launches.append((grid, kwargs))

        return launch


def make_expand_owner(core, kernel):
    @core.kernel_dispatcher(kernel=kernel)
    def expand(output, input, cu_num_tokens, replace_from=0, replace_to=1):
        """Dispatch docstring."""
        return (cu_num_tokens.shape[0],), dict(MAX_NUM_TOKENS=8), output

    return expand


def test_owner_binds_inputs_and_returns_outputs(core):
    k = Recording(list(contract_args("expand_kernel")))
    expand = make_expand_owner(core, k)
    out, inp, cu = torch.zeros(4), torch.ones(2), torch.tensor([1, 3])
    assert expand(out, inp, cu, replace_to=5) is out
    grid, kwargs = k.launches[0]
    assert grid == (2,)
    assert kwargs == {
        "MAX_NUM_TOKENS": 8,
        "output_ptr": out,
        "input_ptr": inp,
        "cu_num_tokens_ptr": cu,
        "replace_from": 0,
        "replace_to": 5,
    }


def test_owner_metadata(core):
    k = Recording(["x_ptr"])

    @core.kernel_dispatcher(kernel=k, warmup_inputs=lambda: {})
    def op(x):
        """Doc."""
        return (1,), {}

    assert op.__name__ == "op" and op.__doc__ == "Doc." and op.__wrapped__ is not None
    assert vars(op)["kernel"] is k
    assert op.kernel is k
    assert op(1) is None
    assert vars(op)["_kernel_arg_names"] == ("x_ptr",)  # cached in the instance dict
    assert op.arg_names == ["x_ptr"]  # unknown attributes come from the kernel (as vLLM's)
    with pytest.raises(AttributeError):
        _ = op.no_such_attribute
    assert op[(7,)] is not None  # owner[grid] is kernel[grid]
    assert op.register_warmup(anything=1) is None


def test_two_tuple_spec_returns_none_and_grid_none_skips(core):
    k = Recording(["x_ptr", "n"])

    @core.kernel_dispatcher(kernel=k)
    def op(x, n, skip=False):
        return (None if skip else (1,)), dict(n=n), "outputs" if skip else None

    assert op("x", 3) is None
    assert op("x", 3, skip=True) == "outputs"
    assert len(k.launches) == 1


def test_strides_from_tensors_and_explicit_kwargs_win(core):
    k = Recording(["a_ptr", "a_stride_0", "a_stride_1", "B", "B_STRIDE", "c", "n"])

    @core.kernel_dispatcher(kernel=k)
    def op(a, b, c, n):
        return (1,), dict(B_STRIDE=99, c="explicit")

    a, b = torch.zeros(3, 4), torch.zeros(5, 6)
    op(a, b, "input c", 7)
    _, kwargs = k.launches[0]
    assert kwargs == {
        "B_STRIDE": 99,
        "c": "explicit",
        "a_ptr": a,
        "B": b,
        "n": 7,
        "a_stride_0": 4,
        "a_stride_1": 1,
    }


def test_owner_with_override_kernel_takes_the_direct_path(core):
    calls = []

    def impl(out, inp, cu, rf, rt, mx):
        calls.append((out, inp, cu, rf, rt, mx))

    ov = core.KernelOverride(expand_kernel, impl)
    expand = make_expand_owner(core, ov)
    cu = torch.tensor([1, 2])
    assert expand("o", "i", cu) == "o"
    assert expand("o", "i", cu, 3, 4) == "o"
    assert expand(output="o", input="i", cu_num_tokens=cu, replace_to=9) == "o"
    assert calls == [("o", "i", cu, 0, 1, 8), ("o", "i", cu, 3, 4, 8), ("o", "i", cu, 0, 9, 8)]


def test_owner_with_plain_function_kernel_calls_it(core):
    calls = []

    def plain_kernel(x_ptr, y_ptr, n):
        calls.append((x_ptr, y_ptr, n))

    @core.kernel_dispatcher(kernel=plain_kernel)
    def op(x, y):
        return (1,), dict(n=2)

    op(1, 2)
    assert calls == [(1, 2, 2)]


def test_rebinding_the_owner_kernel_drops_cached_names(core):
    k1 = Recording(["x_ptr", "n"])
    calls = []

    def impl(p, q):
        calls.append((p, q))

    @core.kernel_dispatcher(kernel=k1)
    def op(x, n):
        return (1,), {}

    op("x", 1)
    assert vars(op)["_kernel_arg_names"] == ("x_ptr", "n")
    ov = core.KernelOverride(k1, impl)
    vars(op)["kernel"] = ov  # what the rebinding pass does
    vars(op).pop("_kernel_arg_names")
    op("x", 2)
    assert calls == [("x", 2)]
    assert vars(op)["_kernel_arg_names"] == ("x_ptr", "n")


def test_kernel_key_in_launch_kwargs_replaces_the_kernel(core):
    k = Recording(["x_ptr"])
    other = Recording(["x_ptr"])

    @core.kernel_dispatcher(kernel=k)
    def op(x):
        return (1,), dict(kernel=other)

    op(5)
    assert k.launches == [] and other.launches == [((1,), {"x_ptr": 5})]


def test_runtime_launcher(core):
    k = Recording(["x_ptr", "y_ptr", "n"])
    seen = []

    def runtime_launcher(kernel, grid, *args, **kwargs):
        seen.append((kernel, grid, args, kwargs))

    @core.kernel_dispatcher(kernel=k)
    def op(x, y):
        return (2,), dict(n=3, _runtime_launcher=runtime_launcher, _runtime_launcher_arg_count=2)

    op(1, 2)
    assert seen == [(k, (2,), (1, 2), {"n": 3})]


def test_dispatch_function_must_have_explicit_parameters(core):
    with pytest.raises(TypeError, match="explicit parameters"):
        core.kernel_dispatcher(kernel=Recording(["x"]))(lambda *args: ((1,), {}))


def test_bad_spec_is_a_type_error(core):
    @core.kernel_dispatcher(kernel=Recording(["x"]))
    def op(x):
        return (1,)

    with pytest.raises(TypeError, match=r"\(grid, launch_kwargs\)"):
        op(1)


def test_launch_with_mapping_of_inputs_like_vllm(core):
    k = Recording(["x_ptr", "n"])

    @core.kernel_dispatcher(kernel=k)
    def op(x, n):
        return (1,), {}

    assert op.launch(((4,), {"n": 2}, "out"), {"x": "X", "n": 9}) == "out"
    assert k.launches == [((4,), {"n": 2, "x_ptr": "X"})]


def test_launch_owner_free_function_with_cache(core):
    calls = []

    def impl(a, b, c):
        calls.append((a, b, c))

    def k(x_ptr, y_ptr, BLOCK):
        pass

    ov = core.KernelOverride(k, impl)
    cache = core.PlanCache()
    spec_dict = {"BLOCK": 16}
    for _ in range(3):
        assert (
            core.launch_owner(ov, ov.arg_names, ((1,), spec_dict, "o"), ("x", "y"), (1, 2), cache)
            == "o"
        )
    assert spec_dict == {"BLOCK": 16}  # the dispatch result is not modified
    assert calls == [(1, 2, 16)] * 3
    assert cache.plan.input_targets == ((0, "x_ptr"), (1, "y_ptr"))
    # different launch kwargs: the cache re-plans
    core.launch_owner(ov, ov.arg_names, ((1,), {"BLOCK": 8, "y_ptr": 7}), ("x", "y"), (1, 2), cache)
    assert calls[-1] == (1, 7, 8)
    with pytest.raises(ValueError, match="input values"):
        core.launch_owner(ov, ov.arg_names, ((1,), {}), ("x", "y"), (1,))


def test_launch_owner_with_list_arg_names_and_foreign_kernel(core):
    k = Recording(["x_ptr"])
    assert core.launch_owner(k, ["x_ptr"], [(1,), {}], ["x"], [3]) is None
    assert k.launches == [((1,), {"x_ptr": 3})]


def test_owner_errors_from_the_override_name_the_arguments(core):
    def impl(a, b, c, d, e, f):
        pass

    @core.kernel_dispatcher(kernel=core.KernelOverride(expand_kernel, impl))
    def op(output, input, cu_num_tokens):
        return (1,), dict(MAX_NUM_TOKENS=1, bogus=2)

    with pytest.raises(TypeError, match="bogus"):
        op(1, 2, torch.zeros(1))


def test_stride_of_none_raises_like_vllm(core):
    @core.kernel_dispatcher(
        kernel=core.KernelOverride(lambda x_ptr, x_stride: None, lambda a, b: None)
    )
    def op(x):
        return (1,), {}

    with pytest.raises(AttributeError):
        op(None)


def test_input_bound_to_a_kernel_named_argument_replaces_the_kernel_like_vllm(core):
    # vLLM pops "kernel" from the completed launch kwargs, whatever put it there.
    k = Recording(["kernel", "x_ptr"])
    other = Recording(["kernel", "x_ptr"])

    @core.kernel_dispatcher(kernel=k)
    def op(kernel, x):
        return (1,), {}

    op(other, 3)
    assert k.launches == [] and other.launches == [((1,), {"x_ptr": 3})]
