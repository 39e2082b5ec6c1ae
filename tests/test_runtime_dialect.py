"""vLLM 0.34's dispatcher rules in the registry, and 0.31-0.33's kept where asked for (both
backends, ``registry_core``): a Triton-kernel impl installed raw (and taken back from exactly the
holders it was put in), the names of an impl that cannot be introspected, ``_rebind_impls``, and
which rules a dispatcher module has (``_dialect.dialect_of``).
"""

import sys
import types

import pytest

import fastdispatch
from fastdispatch import _registration
from fastdispatch._dialect import V031, V034, dialect_of, is_triton_kernel

HOME = "fd_test_dialect_home"
NAME = f"{HOME}.expand_kernel"


def make_kernel():
    """A fresh kernel for each test: this module must not hold it (the rebinding pass would
    rebind this module's global too)."""

    def expand_kernel(out_ptr, in_ptr, n, BLOCK=16):
        raise AssertionError("the original kernel must not run")

    return expand_kernel


class FakeJit:
    """Triton's JIT launch protocol without Triton: ``[grid]``, ``run``, ``warmup``,
    ``arg_names``, callable (a device function is called from inside other kernels)."""

    def __init__(self, arg_names=("out_ptr", "in_ptr", "n", "BLOCK")):
        self.arg_names = list(arg_names)
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))

    def run(self, *args, **kwargs):
        pass

    def warmup(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise AssertionError("a JIT function is launched, not called")


class Owner:
    """A launch owner: keeps its kernel in its instance ``__dict__``."""


@pytest.fixture
def home(registry_core):
    """A kernel's defining module, a ``from home import expand_kernel`` copy and a launch owner
    holding it as ``kernel``; and the module the Triton impl itself lives in."""
    expand_kernel = make_kernel()
    module = types.ModuleType(HOME)
    module.expand_kernel = expand_kernel
    user = types.ModuleType(HOME + "_user")
    user.expand_kernel = expand_kernel
    owner = Owner()
    owner.kernel, owner._kernel_arg_names = expand_kernel, ("stale",)
    user.owner = owner
    impl_home = types.ModuleType(HOME + "_impls")
    impl_home.jit_impl = FakeJit()
    for m in (module, user, impl_home):
        sys.modules[m.__name__] = m
    yield module, user, owner, impl_home, expand_kernel
    for m in (module, user, impl_home):
        del sys.modules[m.__name__]


def test_is_triton_kernel_is_vllm_034s_rule():
    assert is_triton_kernel(FakeJit())
    assert not is_triton_kernel(make_kernel())

    class Launcher:  # a grid-remapping launcher: [grid] but no run/warmup/arg_names
        def __getitem__(self, grid):
            return print

        def __call__(self):
            pass

    assert not is_triton_kernel(Launcher())
    assert fastdispatch._is_triton_kernel is is_triton_kernel


def test_a_triton_kernel_impl_is_installed_raw_and_taken_back_where_it_was_put(home):
    module, user, owner, impl_home, expand_kernel = home
    impl = impl_home.jit_impl
    fastdispatch.register_kernels({NAME: impl})
    assert module.expand_kernel is impl and user.expand_kernel is impl and owner.kernel is impl
    assert "_kernel_arg_names" not in vars(owner)
    entry = fastdispatch._registry[NAME]
    assert entry.override is impl and tuple(entry) == (expand_kernel, impl)
    assert _registration.forward_mode(entry.override) == "raw"
    module.expand_kernel[(4,)](out_ptr=1, in_ptr=2, n=3, num_warps=4)  # launches natively
    assert impl.launches == [((4,), (), {"out_ptr": 1, "in_ptr": 2, "n": 3, "num_warps": 4})]
    assert fastdispatch.verify() == {NAME: []}

    fastdispatch.unregister_kernels([NAME])
    assert module.expand_kernel is expand_kernel
    assert user.expand_kernel is expand_kernel and owner.kernel is expand_kernel
    assert impl_home.jit_impl is impl  # the impl's own home is not a holder we changed


def test_re_registering_over_a_raw_impl_moves_only_its_holders(home, registry_core):
    module, user, owner, impl_home, expand_kernel = home
    impl = impl_home.jit_impl
    fastdispatch.register_kernels({NAME: impl})

    def cpu(out_ptr, in_ptr, n, BLOCK=16):
        pass

    with pytest.warns(RuntimeWarning, match="already registered"):
        fastdispatch.register_kernels({NAME: cpu})
    override = fastdispatch._registry[NAME].override
    assert type(override) is registry_core.KernelOverride
    assert module.expand_kernel is override and user.expand_kernel is override
    assert owner.kernel is override and impl_home.jit_impl is impl
    with fastdispatch.overrides({NAME: impl}):
        assert module.expand_kernel is impl and owner.kernel is impl
    assert module.expand_kernel is override and owner.kernel is override
    assert impl_home.jit_impl is impl
    fastdispatch.unregister_kernels([NAME])
    assert module.expand_kernel is expand_kernel and owner.kernel is expand_kernel


def test_the_0_31_rules_wrap_a_triton_kernel_impl_and_ignore_the_grid(home, registry_core):
    module, _user, _owner, impl_home, _kernel = home
    _registration._register_as({NAME: impl_home.jit_impl}, V031)
    override = module.expand_kernel
    assert type(override) is registry_core.KernelOverride
    assert override._own_grid is None
    with pytest.raises(AssertionError, match="launched, not called"):
        override[(4,)](out_ptr=1, in_ptr=2, n=3)  # 0.31-0.33: the impl is called, grid ignored
    fastdispatch.unregister_kernels([NAME])


def test_rebind_impls_points_holders_at_any_replacement(home):
    module, user, owner, _impl_home, expand_kernel = home
    replacement = FakeJit()
    fastdispatch._rebind_impls([(expand_kernel, replacement)])
    assert user.expand_kernel is replacement and owner.kernel is replacement
    fastdispatch._rebind_kernels([(replacement, expand_kernel)])
    assert user.expand_kernel is expand_kernel and owner.kernel is expand_kernel


class Opaque:
    """An impl whose signature cannot be read, declaring its argument names."""

    __signature__ = property(lambda self: (_ for _ in ()).throw(ValueError("no signature")))

    def __init__(self, arg_names):
        self.arg_names = arg_names
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def test_names_of_an_impl_that_cannot_be_introspected_are_read(core):
    expand_kernel = make_kernel()
    impl = Opaque(["out_ptr", "in_ptr", "n", "BLOCK"])
    ov = core.KernelOverride(expand_kernel, impl)
    assert ov._forward_by_name is True
    ov[(1,)](n=3, out_ptr=1, in_ptr=2)
    assert impl.calls == [(1, 2, 3, 16)]  # kernel order, the kernel's default filled in

    with pytest.raises(TypeError, match=r"declares 2 argument\(s\).*passes 4"):
        core.KernelOverride(expand_kernel, Opaque(["a", "b"]))
    with pytest.raises(TypeError, match="impl argument 'in_ptr' would receive kernel argument"):
        core.KernelOverride(expand_kernel, Opaque(["in_ptr", "out_ptr", "n", "BLOCK"]))
    other = Opaque(["o", "i", "count", "block"])
    core.KernelOverride(expand_kernel, other)[(1,)](out_ptr=1, in_ptr=2, n=3, BLOCK=4)
    assert other.calls == [(1, 2, 3, 4)]


def test_dialect_is_read_from_the_module():
    old = types.ModuleType("old_dispatcher")
    old._rebind_kernels = print
    new = types.ModuleType("new_dispatcher")
    new._rebind_impls = print
    new._is_triton_kernel = print
    assert dialect_of(old) is V031 and dialect_of(new) is V034
    assert (V034.hand_grid, V034.raw_triton, V031.hand_grid, V031.raw_triton) == (
        True,
        True,
        False,
        False,
    )


def test_install_state_takes_the_rules_of_the_standing_dispatcher():
    from fastdispatch.vllm._installation import _Installation

    old = types.ModuleType("old_dispatcher")
    old.register_kernels = print
    old._rebind_kernels = print
    new = types.ModuleType("new_dispatcher")
    new.register_kernels = print
    new._rebind_impls = print
    assert _Installation(old).dialect is V031
    assert _Installation(new).dialect is V034
    assert _Installation(None, runner=object).dialect is V031  # 0.27-0.30: no dispatcher


def test_on_a_0_31_dispatcher_only_vllms_requests_follow_its_rules(home, registry_core):
    """vLLM's own registrations (through the front) get that release's rules; ours -- e.g. a
    CPU kernel that needs its grid -- keep fastdispatch's, wherever we run."""
    from fastdispatch.vllm._installation import _Installation

    module, _user, _owner, _impl_home, _kernel = home
    old = types.ModuleType("old_dispatcher")
    old.register_kernels = print
    state = _Installation(old)
    seen = []

    class GridImpl:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.append(grid)

        def __call__(self, *args, **kwargs):
            seen.append("called")

    state.register({NAME: GridImpl()})
    module.expand_kernel[(5,)](out_ptr=1, in_ptr=2, n=3)
    state.vllm_register_kernels({NAME: GridImpl()})
    module.expand_kernel[(6,)](out_ptr=1, in_ptr=2, n=3)
    assert seen == [(5,), "called"]
    state.unregister_all()
