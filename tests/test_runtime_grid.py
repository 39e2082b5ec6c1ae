"""Impls with a ``[grid]`` of their own, ``warmup``, and launches with positional and keyword
arguments together (both backends, ``core`` fixture).

vLLM 0.34's ``KernelOverride.__getitem__`` hands the caller's grid to an impl that has its own
``[grid]`` (a grid-remapping launcher, or a CPU impl that needs the launch grid); 0.31-0.33's
ignores it (``hand_grid=False``). What reaches the launcher such an impl returns: the kernel's
arguments as written, and the Triton launch options only when it can take them.
"""

import pytest

GRID = (3, 2)


def kernel(x_ptr, out_ptr, n, BLOCK=128):
    raise AssertionError("the original kernel must not run")


class GridImpl:
    """A CPU impl that needs the grid: ``impl[grid]`` returns a launcher taking the kernel's
    parameters only (no ``**kwargs``), positionally and/or by keyword."""

    def __init__(self):
        self.launches = []
        self.direct = []

    def __getitem__(self, grid):
        def launch(x_ptr, out_ptr, n, BLOCK=128):
            self.launches.append((grid, x_ptr, out_ptr, n, BLOCK))
            return "grid-ret"

        return launch

    def __call__(self, *args, **kwargs):
        self.direct.append((args, kwargs))
        return "direct"


class OpenLauncherImpl:
    """A grid-remapping launcher over a Triton-like kernel: its launch takes ``**kwargs``."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((grid, args, kwargs))

        return launch


def test_grid_reaches_the_impl_and_launch_options_that_it_cannot_take_do_not(core):
    impl = GridImpl()
    ov = core.KernelOverride(kernel, impl)
    assert ov._own_grid is not None
    assert ov[GRID](x_ptr=1, out_ptr=2, n=3, num_warps=4, num_stages=2) == "grid-ret"
    ov[(7,)](1, 2, n=3, BLOCK=64, num_warps=8)  # positional and keyword, like a Triton launch
    ov[(8,)](1, 2, 3)
    assert impl.launches == [(GRID, 1, 2, 3, 128), ((7,), 1, 2, 3, 64), ((8,), 1, 2, 3, 128)]
    assert impl.direct == []
    assert ov(5, 6) == "direct"  # a direct call is the impl's own __call__
    assert impl.direct == [((5, 6), {})]


def test_a_launcher_with_kwargs_is_returned_as_is_and_gets_everything(core):
    impl = OpenLauncherImpl()
    ov = core.KernelOverride(kernel, impl)
    launcher = ov[GRID]
    assert type(launcher).__name__ == "function" and launcher.__qualname__.endswith("launch")
    launcher(1, out_ptr=2, n=3, num_warps=4)
    assert impl.launches == [(GRID, (1,), {"out_ptr": 2, "n": 3, "num_warps": 4})]


def test_a_launcher_naming_an_option_gets_that_option_only(core):
    seen = []

    class Impl:
        def __getitem__(self, grid):
            def launch(x_ptr, out_ptr, n, BLOCK=128, num_warps=None):
                seen.append((grid, x_ptr, num_warps))

            return launch

    ov = core.KernelOverride(kernel, Impl())
    ov[GRID](x_ptr=1, out_ptr=2, n=3, num_warps=4, num_stages=3, launch_pdl=True)
    assert seen == [(GRID, 1, 4)]


def test_a_kernel_argument_named_like_an_option_is_an_argument(core):
    def pdl_kernel(x_ptr, launch_pdl):
        pass

    seen = []

    class Impl:
        def __getitem__(self, grid):
            def launch(x_ptr, launch_pdl):
                seen.append((x_ptr, launch_pdl))

            return launch

    core.KernelOverride(pdl_kernel, Impl())[GRID](x_ptr=1, launch_pdl=True, num_warps=2)
    assert seen == [(1, True)]


def test_owner_launch_hands_the_dispatch_grid_to_a_grid_impl(core):
    impl = GridImpl()
    ov = core.KernelOverride(kernel, impl)

    @core.kernel_dispatcher(kernel=ov)
    def double(x, out, n):
        return (n, 1), dict(BLOCK=32, num_warps=4), out

    assert double("x", "o", 5) == "o"
    assert double("x", "o", 6) == "o"  # the plan cache's second launch takes the same road
    assert impl.launches == [((5, 1), "x", "o", 5, 32), ((6, 1), "x", "o", 6, 32)]


def test_the_vllm_owner_call_hands_the_grid_to_a_grid_impl(core):
    from fastdispatch.vllm._owners import OWNER_LAYOUT

    impl = GridImpl()
    ov = core.KernelOverride(kernel, impl)

    class Owner:
        _warming = False

        def __init__(self):
            self.kernel = ov
            self._dispatch_fn = lambda x, out, n: ((n,), {"num_warps": 2}, out)
            self._dispatch_arg_names = ("x", "out", "n")
            self._dispatch_defaults = {}

        def __call__(self, *args, **kwargs):
            raise AssertionError("the fallback must not run")

    Owner.__call__ = core.owner_call_method(Owner.__dict__["__call__"], {}, **OWNER_LAYOUT)
    assert Owner()("x", "o", 4) == "o"
    assert impl.launches == [((4,), "x", "o", 4, 128)]


def test_hand_grid_false_keeps_the_0_31_rule(core):
    calls = []

    class Impl:
        def __getitem__(self, grid):
            raise AssertionError("the grid must not be handed over")

        def __call__(self, x_ptr, out_ptr, n, BLOCK=128):
            calls.append((x_ptr, out_ptr, n, BLOCK))

    ov = core.KernelOverride(kernel, Impl(), hand_grid=False)
    assert ov._own_grid is None
    ov[GRID](x_ptr=1, out_ptr=2, n=3, num_warps=4)
    assert calls == [(1, 2, 3, 128)]


def test_a_plain_impl_has_no_grid_and_keeps_the_cached_launcher(core):
    def impl(x_ptr, out_ptr, n, BLOCK=128):
        pass

    ov = core.KernelOverride(kernel, impl)
    assert ov._own_grid is None
    assert ov[(1,)] is ov[(2,)] is ov[None]


def test_warmup_delegates_to_the_impl_or_does_nothing(core):
    warmed = []

    class Impl:
        def __call__(self, x_ptr, out_ptr, n, BLOCK=128):
            pass

        def warmup(self, grid=None, **kwargs):
            warmed.append((grid, kwargs))
            return "compiled"

    assert core.KernelOverride(kernel, Impl()).warmup((1,), x_ptr=1, n=4) == "compiled"
    assert warmed == [((1,), {"x_ptr": 1, "n": 4})]

    def plain(x_ptr, out_ptr, n, BLOCK=128):
        raise AssertionError("warm-up must not launch")

    assert core.KernelOverride(kernel, plain).warmup(grid=(1,), x_ptr=1, n=4) is None


def test_positional_and_keyword_arguments_bind_as_one_launch_without_options(core):
    calls = []

    def impl(x, out, count, block):  # names differ: bound positionally in kernel order
        calls.append((x, out, count, block))

    ov = core.KernelOverride(kernel, impl)
    ov[GRID](1, 2, n=3, num_warps=4, num_stages=1)
    ov[GRID](1, 2, 3, 4)  # positional only: straight through
    assert calls == [(1, 2, 3, 128), (1, 2, 3, 4)]
    with pytest.raises(TypeError, match=r"both by position and by name: \['x_ptr'\]"):
        ov[GRID](1, x_ptr=2, out_ptr=3, n=4)
    with pytest.raises(TypeError, match=r"5 positional launch arguments; the kernel takes 4"):
        ov[GRID](1, 2, 3, 4, 5, num_warps=4)
    assert len(calls) == 2


def test_registry_accepts_a_grid_impl_that_is_not_callable(registry_core):
    import types

    import fastdispatch

    module = types.ModuleType("fd_test_grid_home")

    def home_kernel(x_ptr, n):
        raise AssertionError("the original kernel must not run")

    module.home_kernel = home_kernel
    seen = []

    class NotCallable:
        def __getitem__(self, grid):
            return lambda x_ptr, n: seen.append((grid, x_ptr, n))

    import sys

    sys.modules[module.__name__] = module
    try:
        fastdispatch.register_kernels({"fd_test_grid_home.home_kernel": NotCallable()})
        module.home_kernel[(2,)](x_ptr=1, n=3, num_warps=4)
        assert seen == [((2,), 1, 3)]
        with pytest.raises(TypeError, match="expected a callable or an object with a"):
            fastdispatch.register_kernels({"fd_test_grid_home.home_kernel": object()})
    finally:
        fastdispatch.unregister_kernels(["fd_test_grid_home.home_kernel"])
        del sys.modules[module.__name__]
    assert module.home_kernel is home_kernel


def test_partial_launchers_are_told_apart_by_what_they_wrap(core):
    import functools

    seen = []

    def strict(grid, x_ptr, out_ptr, n, BLOCK=128):
        seen.append(("strict", grid, x_ptr))

    def open_(grid, *args, **kwargs):
        seen.append(("open", grid, kwargs.get("num_warps")))

    class Impl:  # one launcher function per grid size, both as functools.partial
        def __getitem__(self, grid):
            return functools.partial(strict if len(grid) == 1 else open_, grid)

    ov = core.KernelOverride(kernel, Impl())
    for grid in ((1,), (1, 2), (3,)):
        ov[grid](x_ptr=1, out_ptr=2, n=3, num_warps=4)
    assert seen == [("strict", (1,), 1), ("open", (1, 2), 4), ("strict", (3,), 1)]
