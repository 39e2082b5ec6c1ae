"""``fastdispatch.fast_launch``: Triton's key derived cheaply, Triton's launcher called directly.

No GPU here, so Triton runs against a fake driver: its own ``JITFunction.run``, binder and
specialization code are real (the installed Triton's), only the driver (device, stream, target)
and the compiler are stand-ins; the "compiled kernel" is a recorder whose launcher logs every
call. That is enough to check what matters on a GPU too: that our key separates every launch
Triton's binder separates (compared with Triton's own specialization over random arguments),
that a fast launch hands the launcher exactly what Triton's launch hands it, and that each
fallback goes to Triton's ``run``. Every test runs against the compiled module and the
pure-Python twin. Interpreted kernels are checked in a subprocess with ``TRITON_INTERPRET=1``.
The GPU counterparts are ``tools/gpu_fast_launch_check.py`` and ``tools/gpu_launch_bench.py``.
"""

import importlib.util
import os
import random

import pytest
from _required import missing
from _runtime_helpers import run_python
from _triton_helpers import require_triton, triton_installed

import fastdispatch
from fastdispatch import _fastlaunch_planner

# Triton 3.9 warns once when a compile takes its FP-fusion default implicitly; these tests keep
# that default (fusion on), said explicitly, so the run stays free of warnings.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


class _Subscriptable:
    """A kernel-like object that is not a JITFunction: launches must reach it unchanged."""

    arg_names = ["a", "b"]

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((grid, args, kw)) or "done"


def test_refuses_what_is_not_a_kernel():
    with pytest.raises(TypeError, match="int 42"):
        fastdispatch.fast_launch(42)
    with pytest.raises(ValueError, match="backend"):
        fastdispatch.fast_launch(_Subscriptable(), backend="cuda")


@pytest.mark.parametrize("backend", ["cython", "python"])
def test_other_kernels_pass_through(backend):
    k = _Subscriptable()
    fl = fastdispatch.fast_launch(k, backend=backend)
    assert fl.passthrough is not None and fl.state is None
    assert fl[(3,)](1, b=2) == "done"
    assert k.calls == [((3,), (1,), {"b": 2})]
    assert fl.arg_names == ["a", "b"]
    assert fastdispatch.fast_launch(fl, backend=backend) is fl


def test_interpreted_kernels_pass_through():
    """Under ``TRITON_INTERPRET=1`` kernels are ``InterpretedFunction``s: a fast-launch object
    hands every launch to the interpreter, with the interpreter's results."""
    require_triton()
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("Triton's interpreter needs numpy")
    run_python(
        """
        import torch, triton, triton.language as tl
        import fastdispatch

        @triton.jit
        def axpy(x, y, out, n, a, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(out + offs, tl.load(x + offs, mask=m) * a + tl.load(y + offs, mask=m), mask=m)

        x, y = torch.randn(100), torch.randn(100)
        want, got = torch.zeros(100), torch.zeros(100)
        axpy[(4,)](x, y, want, 100, 0.5, BLOCK=32)
        for backend in ("cython", "python"):
            fl = fastdispatch.fast_launch(axpy, backend=backend)
            assert fl.passthrough and "InterpretedFunction" in fl.passthrough, fl.passthrough
            got.zero_()
            fl[(4,)](x, y, got, n=100, a=0.5, BLOCK=32)
            assert torch.equal(got, want)
        """,
        env={"TRITON_INTERPRET": "1"},
    )


# -- a fake driver under Triton's real JITFunction ------------------------------------------------

if triton_installed():
    import torch
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    def _k_add(x, y, out, n, BLOCK: tl.constexpr):
        pass

    def _k_mixed(p, q, n, m, f, flag, maybe, s: tl.constexpr, r=1, TAIL: tl.constexpr = 4):
        pass

    def _k_plain(a, b):
        pass

    def _k_tuple(ptrs, dims, n, BLOCK: tl.constexpr):
        pass

    K_ADD = JITFunction(_k_add)
    K_MIXED = JITFunction(_k_mixed, do_not_specialize=["m"], do_not_specialize_on_alignment=["q"])
    K_TUPLE = JITFunction(_k_tuple)


class FakeDriver:
    def __init__(self):
        self.device = 0
        self.stream = 1000

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device):
        return self.stream + device

    def get_active_torch_device(self):
        return torch.device("cpu")


class FakeLauncher:
    """The launcher object (``kernel.run``): logs its calls; ``launch`` is its inner call, with
    the layout Triton 3.6's launcher uses (``None`` scratch buffers, two flags)."""

    def __init__(self, log, kernel_id):
        self.log = log
        self.kernel_id = kernel_id
        self.launch = self._inner
        self.inner_calls = []

    def _inner(self, *a):
        self.inner_calls.append(a)

    def __call__(self, gx, gy, gz, stream, function, *rest):
        self.log.append(("launcher", self.kernel_id, gx, gy, gz, stream, function, *rest))
        self.launch(gx, gy, gz, stream, function, False, False, None, None, *rest)


class FakeCompiledKernel:
    count = 0

    def __init__(self, src, options, log):
        FakeCompiledKernel.count += 1
        self.id = FakeCompiledKernel.count
        self.src = src
        self.options = options
        self.function = ("function", self.id)
        self.packed_metadata = ("packed", self.id)
        self.run = FakeLauncher(log, self.id)
        self.source_hash = src.fn.cache_key  # a real compilation computes it first

    def launch_metadata(self, grid, stream, *args):
        return ("metadata", self.id)


@pytest.fixture
def fake(monkeypatch):
    """Triton with a fake driver and compiler; yields the launch log and the compile list."""
    require_triton()
    import triton.compiler
    from triton.runtime.driver import driver

    log, compiled = [], []

    def compile(src, target=None, options=None, **kw):
        ck = FakeCompiledKernel(src, options, log)
        compiled.append(ck)
        return ck

    saved = driver._active
    drv = FakeDriver()
    driver.set_active(drv)
    monkeypatch.setattr(triton.compiler, "compile", compile)
    _fastlaunch_planner._Triton.load()
    monkeypatch.setattr(_fastlaunch_planner._Triton, "CompiledKernel", FakeCompiledKernel)
    for k in (K_ADD, K_MIXED, K_TUPLE):
        k.device_caches.clear()
        k.hash = None
    try:
        yield type("Fake", (), {"log": log, "compiled": compiled, "driver": drv})
    finally:
        driver._active = saved


def _backend_or_skip(backend):
    if backend == "cython":
        try:
            from fastdispatch import _fastlaunch  # noqa: F401
        except ImportError as exc:
            missing(f"fastdispatch._fastlaunch is not built: {exc}")
    return backend


BACKENDS = ["cython", "python"]


def _counts(fl):
    return fl.state.stats["learned"] + fl.state.stats["triton"]


def _warm(fl, grid, *args, **kw):
    """Launch until our cache serves the launch (the first one or two go through Triton)."""
    for _ in range(3):
        before = _counts(fl)
        fl[grid](*args, **kw)
        if _counts(fl) == before:
            return
    raise AssertionError(f"never served from the cache: {fl.state.last_slow}, {fl.state.disabled}")


def _tensors():
    return [torch.empty(64) for _ in range(3)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_launch_hands_the_launcher_what_triton_does(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    _warm(fl, (4,), x, y, out, 64, BLOCK=16)
    K_ADD[(4, 2)](x, y, out, 64, BLOCK=16)  # Triton's own launch
    r = fl[(4, 2)](x, y, out, n=64, BLOCK=16)  # ours: same arguments, partly by name
    assert r is fake.compiled[-1]
    # what the launcher's inner (C) call received, Triton's launch then ours
    triton_call, ours = r.run.inner_calls[-2:]
    # everything but the launch metadata and hooks is identical, object for object
    assert len(ours) == len(triton_call) == 13 + 5
    assert ours[:10] + ours[13:] == triton_call[:10] + triton_call[13:]
    assert all(a is b for a, b in zip(ours[13:], (x, y, out)))
    assert ours[10:13] == (None, None, None)
    # Triton passed metadata that only hooks read, and two empty hook chains (nothing to call)
    from triton import knobs

    assert triton_call[11] is knobs.runtime.launch_enter_hook and not triton_call[11].calls
    assert triton_call[12] is knobs.runtime.launch_exit_hook and not triton_call[12].calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_launcher_inner_call_learned_from_the_launcher(fake, backend):
    """After an entry's first fast launch, later ones call the launcher's inner function with
    the layout the launcher itself used: the same inner calls as through the launcher."""
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    _warm(fl, (4,), x, y, out, 64, BLOCK=16)
    fl[(4,)](x, y, out, 64, BLOCK=16)
    launcher = fake.compiled[-1].run
    (entry,) = fl.state.cache.values()
    assert entry[5] == launcher._inner and entry[6] == (False, False, None, None)
    launcher.inner_calls.clear()
    fake.log.clear()
    fl[(5, 1, 2)](x, y, out, 64, BLOCK=16)
    launcher((5), 1, 2, 1000, entry[1], entry[2], None, None, None, x, y, out, 64, 16)
    via_direct, via_launcher = launcher.inner_calls
    assert via_direct == via_launcher
    assert len(fake.log) == 1  # only the reference call went through the launcher object


def _spec(kernel, vals, opts=()):
    from triton.runtime.driver import driver

    binder = kernel.device_caches[driver.active.get_current_device()][-1]
    return binder(*vals, **dict(opts))[1]


def _random_value(rng, kind, dtypes):
    if kind == "tensor":
        t = torch.empty(80, dtype=rng.choice(dtypes))
        return t[rng.choice([0, 1, 2, 4, 8, 16]) :]
    if kind == "int":
        return rng.choice(
            [
                0,
                1,
                2,
                15,
                16,
                17,
                32,
                2**31 - 1,
                2**31,
                2**31 + 16,
                2**62,
                2**63 + 32,
                2**64 - 1,
                -16,
                -17,
            ]
        )
    if kind == "float":
        return rng.choice([0.0, -0.0, 1.0, 2.5])
    if kind == "bool":
        return rng.random() < 0.5
    return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_separates_what_tritons_binder_separates(fake, backend):
    """Random launches of a kernel with tensors at every alignment, ints of every range class,
    floats, bools, None, constexprs, do_not_specialize parameters: whenever two launches get
    the same key from us, Triton's binder specializes them identically; and both backends
    derive the same key."""
    _backend_or_skip(backend)
    fl = fastdispatch.fast_launch(K_MIXED, backend=backend)
    rng = random.Random(7)
    dtypes = [torch.float32, torch.float16, torch.int8, torch.int64, torch.bool]
    kinds = {
        "p": ["tensor"],
        "q": ["tensor"],
        "n": ["int"],
        "m": ["int"],
        "f": ["float"],
        "flag": ["bool"],
        "maybe": ["tensor", "none", "int"],
        "r": ["int"],
    }
    # warm up once so that Triton's binder exists and our knob readers are final
    base = [torch.empty(8), torch.empty(8), 3, 3, 1.0, True, None, 4, 1, 4]
    for _ in range(2):
        fl[(1,)](*base)
    by_key = {}
    for i in range(400):
        vals = []
        for name in K_MIXED.arg_names:
            if name == "s":
                vals.append(rng.choice([1, 2, True, 1.0, "a", None]))
            elif name == "TAIL":
                vals.append(rng.choice([4, 8]))
            else:
                vals.append(_random_value(rng, rng.choice(kinds[name]), dtypes))
        opts = [("num_warps", rng.choice([2, 4]))] if i % 3 == 0 else []
        key = _fastlaunch_planner.derive_key(fl.state, 0, vals, opts)
        if backend == "cython":
            assert fl._derive_key(0, vals, opts) == key
        spec = (_spec(K_MIXED, vals, opts), tuple(opts))
        assert key is not None
        if key in by_key:
            assert by_key[key] == spec, (vals, key)
        by_key[key] = spec
    assert len(by_key) > 50  # the random launches did cover many keys


def _random_tuple(rng, dtypes, depth=0):
    kinds = ["tensor", "int", "float", "bool", "none"] + (["tuple"] if depth < 2 else [])
    out = []
    for _ in range(rng.choice([0, 1, 2, 3])):
        kind = rng.choice(kinds)
        if kind == "tuple":
            out.append(_random_tuple(rng, dtypes, depth + 1))
        else:
            out.append(_random_value(rng, kind, dtypes))
    return tuple(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_arguments_are_keyed_as_tritons_binder_specializes_them(fake, backend):
    """Tuple arguments (tensors, ints of every range class, floats, bools, None and nested
    tuples inside): two launches with one key from us are specialized alike by Triton's binder,
    both backends derive the same key, and a launch with tuples is served from our cache with
    what Triton's own launch hands the launcher."""
    _backend_or_skip(backend)
    fl = fastdispatch.fast_launch(K_TUPLE, backend=backend)
    rng = random.Random(11)
    dtypes = [torch.float32, torch.float16, torch.int64]
    x, y = torch.empty(64), torch.empty(64, dtype=torch.int32)
    _warm(fl, (2,), (x, y), (16, 3), 64, BLOCK=16)
    by_key = {}
    for _ in range(300):
        vals = [_random_tuple(rng, dtypes), _random_tuple(rng, dtypes), rng.choice([3, 16]), 8]
        key = _fastlaunch_planner.derive_key(fl.state, 0, vals, [])
        if backend == "cython":
            assert fl._derive_key(0, vals, []) == key
        assert key is not None, vals
        spec = _spec(K_TUPLE, vals)
        if key in by_key:
            assert by_key[key] == spec, (vals, key)
        by_key[key] = spec
    assert len(by_key) > 50
    # served from the cache, the launcher called with Triton's arguments, tuples as given
    K_TUPLE[(2,)]((x, y), (16, 3), 64, BLOCK=16)
    before = _counts(fl)
    r = fl[(2,)]((x, y), dims=(16, 3), n=64, BLOCK=16)
    assert _counts(fl) == before and fl.state.disabled is None
    triton_call, ours = r.run.inner_calls[-2:]
    assert ours[:10] + ours[13:] == triton_call[:10] + triton_call[13:]
    assert ours[13] == (x, y) and ours[13][0] is x and ours[14] == (16, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuples_we_do_not_key_on_go_to_tritons_path(fake, backend):
    """A named tuple, a tuple too long or nested too deep, or one holding a value of another
    type: Triton's own launch, counted, never our cache."""
    import collections

    fl = fastdispatch.fast_launch(K_TUPLE, backend=_backend_or_skip(backend))
    x = torch.empty(64)
    _warm(fl, (2,), (x,), (1,), 64, BLOCK=16)
    pair = collections.namedtuple("pair", "a b")
    deep = (((((x,),),),),)
    for ptrs in [pair(x, x), tuple([x] * (_fastlaunch_planner.MAX_TUPLE + 1)), deep, (x, "s")]:
        before = fl.state.stats["triton"]
        try:
            want = K_TUPLE[(2,)](ptrs, (1,), 64, BLOCK=16)
        except TypeError as exc:  # a value Triton cannot specialize: its own error, from ours too
            with pytest.raises(TypeError, match=str(exc)):
                fl[(2,)](ptrs, (1,), 64, BLOCK=16)
        else:
            assert fl[(2,)](ptrs, (1,), 64, BLOCK=16) is want
        assert fl.state.stats["triton"] == before + 1, ptrs
        assert fl.state.last_slow is not None
    assert fl.state.disabled is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_new_specialization_is_compiled_by_triton(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    big = torch.empty(128)
    _warm(fl, (1,), big, big, big, 64, BLOCK=16)
    n_compiled = len(fake.compiled)
    for args in [
        (big[1:], big, big, 64),  # unaligned pointer
        (big, big, big, 1),  # n == 1: a constexpr for Triton
        (big, big, big, 17),  # not divisible by 16
        (big, big, big, 2**40),  # int64
        (big.half(), big, big, 64),  # another dtype
    ]:
        fl[(1,)](*args, BLOCK=16)
        fl[(1,)](*args, BLOCK=16)
    fl[(1,)](big, big, big, 64, BLOCK=32)  # another constexpr value
    fl[(1,)](big, big, big, 64, BLOCK=32)
    assert len(fake.compiled) == n_compiled + 6
    # each launch went to the kernel Triton compiled for it
    for ck in fake.compiled[n_compiled:]:
        assert len(ck.run.inner_calls) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_and_changed_state_go_to_tritons_path(fake, backend):
    from triton import knobs
    from triton.runtime.driver import driver

    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    _warm(fl, (1,), x, y, out, 64, BLOCK=16)

    def triton_path(reason_part):
        before = fl.state.stats["triton"]
        fl[(1,)](x, y, out, 64, BLOCK=16)
        assert fl.state.stats["triton"] == before + 1
        assert reason_part in fl.state.last_slow

    seen = []
    knobs.runtime.launch_enter_hook.add(seen.append)
    try:
        triton_path("hooks")
        # Triton's launch handed the launcher the hook chain holding it
        assert fake.log[-1][9] is knobs.runtime.launch_enter_hook
    finally:
        knobs.runtime.launch_enter_hook.remove(seen.append)
    K_ADD.add_pre_run_hook(lambda *a, **k: seen.append("pre"))
    try:
        triton_path("hooks")
        assert seen[-1] == "pre"
    finally:
        K_ADD.pre_run_hooks.clear()
    # the stream is the active driver's at each launch, as in Triton's run
    other = FakeDriver()
    other.stream = 5000
    driver.set_active(other)
    try:
        fl[(1,)](x, y, out, 64, BLOCK=16)
        assert fake.compiled[-1].run.inner_calls[-1][3] == 5000
    finally:
        driver.set_active(fake.driver)
    before = _counts(fl)
    fl[(1,)](x, y, out, 64, BLOCK=16)
    assert _counts(fl) == before  # back on the fast path


@pytest.mark.parametrize("backend", BACKENDS)
def test_arguments_it_cannot_bind_raise_tritons_errors(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    _warm(fl, (1,), x, y, out, 64, BLOCK=16)
    with pytest.raises(TypeError, match="'n'"):
        fl[(1,)](x, y, out, BLOCK=16)
    with pytest.raises(TypeError, match="'x'"):
        fl[(1,)](x, y, out, 64, x=x, BLOCK=16)
    with pytest.raises(TypeError):
        fl[(1,)](x, y, out, 64, 16, 99)
    # values we do not key on (a string argument) go to Triton, which decides
    before = fl.state.stats["triton"]
    try:
        fl[(1,)](x, y, out, "64", BLOCK=16)
    except Exception:  # noqa: BLE001 - whether this Triton takes a tuple is its business
        pass
    assert fl.state.stats["triton"] == before + 1
    assert "do not key on" in fl.state.last_slow


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_when_triton_keys_on_something_we_do_not(fake, backend, caplog):
    """A Triton whose binder also keys on ``n % 32`` (which our key does not hold): the probes
    at the first launch see it, the kernel goes to Triton's path for good, launches stay
    correct."""
    from triton.runtime.driver import driver

    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    cache = K_ADD.device_caches[driver.active.get_current_device()]
    binder = cache[-1]

    def keyed_on_32(*a, **kw):
        bound, spec, options = binder(*a, **kw)
        spec = list(spec)
        if isinstance(a[3], int):
            spec[3] = (spec[3][0], f"{spec[3][1]}:{a[3] % 32 == 0}")
        return bound, spec, options

    K_ADD.device_caches[driver.active.get_current_device()] = (*cache[:-1], keyed_on_32)
    for _ in range(3):
        fl[(1,)](x, y, out, 64, BLOCK=16)
    assert fl.state.disabled is not None and "n:" in fl.state.disabled
    assert not fl.state.cache
    n_compiled = len(fake.compiled)
    fl[(1,)](x, y, out, 48, BLOCK=16)  # 48 % 32 != 0: Triton compiles another kernel
    assert len(fake.compiled) == n_compiled + 1
    assert any("Triton's own launch from now on" in r.message for r in caplog.records)


@pytest.mark.parametrize("backend", BACKENDS)
def test_source_change_relearns(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    _warm(fl, (1,), x, y, out, 64, BLOCK=16)
    K_ADD.hash = "another source"
    before = fl.state.stats["learned"]
    fl[(1,)](x, y, out, 64, BLOCK=16)
    assert fl.state.stats["learned"] == before + 1
    assert "source" in fl.state.last_slow


@pytest.mark.parametrize("backend", BACKENDS)
def test_callable_grid_and_options(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    grid = lambda meta: (meta["n"] // meta["BLOCK"], 3)  # noqa: E731
    _warm(fl, grid, x, y, out, 64, BLOCK=16, num_warps=2)
    fl[grid](x, y, out, 64, BLOCK=16, num_warps=2)
    K_ADD[grid](x, y, out, 64, BLOCK=16, num_warps=2)
    ours, triton_call = fake.compiled[-1].run.inner_calls[-2:]
    assert ours[:10] == triton_call[:10] and ours[:3] == (4, 3, 1)
    # another option value is another compiled kernel
    n_compiled = len(fake.compiled)
    fl[grid](x, y, out, 64, BLOCK=16, num_warps=4)
    assert len(fake.compiled) == n_compiled + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_launch_owner_launches_through_it(fake, backend):
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))

    @fastdispatch.kernel_dispatcher(kernel=fl)
    def add(x, y, out, n):
        return (n // 16,), {"BLOCK": 16}, out

    x, y, out = _tensors()
    for _ in range(3):
        assert add(x, y, out, 64) is out
    before = _counts(fl)
    fake.log.clear()
    add(x, y, out, 64)
    assert _counts(fl) == before  # served from our cache
    assert fake.log == [] or fake.log[0][2] == 4
    (entry,) = fl.state.cache.values()
    assert entry[0].inner_calls[-1][:3] == (4, 1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_launches_run_the_kernel_triton_runs(fake, backend):
    """Random launches drawn from a small pool of values (so that keys repeat, back to back and
    not): every launch of ours uses the compiled kernel Triton's own launch of the same
    arguments uses, with the same inner launcher call."""
    fl = fastdispatch.fast_launch(K_MIXED, backend=_backend_or_skip(backend))
    rng = random.Random(11)
    buf = torch.empty(64)
    pool = {
        "p": [buf, buf[1:], buf.half()],
        "q": [buf, buf[2:]],
        "n": [1, 16, 17, 2**33],
        "m": [3, 1],
        "f": [0.5, -0.0],
        "flag": [True, False],
        "maybe": [None, buf, 5],
        "s": [1, 1.0, True, "x"],
        "r": [1, 2],
        "TAIL": [4, 8],
    }
    vals = [pool[name][0] for name in K_MIXED.arg_names]
    for i in range(300):
        if rng.random() < 0.5:  # change one or two values, else repeat the last launch
            for name in rng.sample(K_MIXED.arg_names, rng.choice([1, 2])):
                vals[K_MIXED.arg_names.index(name)] = rng.choice(pool[name])
        opts = {"num_warps": 2} if i % 7 == 0 else {}
        ours = fl[(2,)](*vals, **opts)
        theirs = K_MIXED[(2,)](*vals, **opts)
        assert ours is theirs, (i, vals)
        a, b = theirs.run.inner_calls[-2:]
        assert a[:10] == b[:10] and a[13:] == b[13:]
    assert fl.state.disabled is None
    assert len(fl.state.cache) > 20


@pytest.mark.parametrize("backend", BACKENDS)
def test_rebinding_pass_puts_it_behind_every_holder(fake, backend):
    """``_rebind_kernels([(kernel, fast_launch(kernel))])`` -- the registry's one pass over
    module attributes, launch owners and classes -- makes every holder launch through the fast
    path, and the reverse pair puts the kernel back."""
    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))

    @fastdispatch.kernel_dispatcher(kernel=K_ADD)
    def add(x, y, out, n):
        return (n // 16,), {"BLOCK": 16}, out

    x, y, out = _tensors()
    globals()["_OWNER"] = add  # the pass finds holders through modules
    fastdispatch._rebind_kernels([(K_ADD, fl)])
    try:
        assert vars(add)["kernel"] is fl
        for _ in range(3):
            add(x, y, out, 64)
        before = _counts(fl)
        add(x, y, out, 64)
        assert _counts(fl) == before
        assert globals()["K_ADD"] is fl
    finally:
        fastdispatch._rebind_kernels([(fl, fl.kernel)])
        del globals()["_OWNER"]
    assert vars(add)["kernel"] is fl.kernel and globals()["K_ADD"] is fl.kernel


def test_direct_tensor_reads_agree_with_attribute_reads(fake):
    """The compiled key reads an exact tensor's dtype and data pointer through torch's C getter
    and method; it must see what ``.dtype``/``data_ptr()`` report (the twin reads those), also
    after ``torch.Tensor`` changed (its version tag: the slots are looked up again)."""
    try:
        from fastdispatch import _fastlaunch
    except ImportError as exc:
        missing(f"fastdispatch._fastlaunch is not built: {exc}")
    assert _fastlaunch.direct_tensor_reads()
    fl = _fastlaunch.FastLaunch(K_ADD)
    base = torch.empty(40, dtype=torch.float16)
    for t in (base, base[1:], base[8:], base.float()[3:], base.to(torch.int8)[16:]):
        vals = [t, t, t, 16, 4]
        assert fl._derive_key(0, vals, []) == _fastlaunch_planner.derive_key(fl.state, 0, vals, [])
        torch.Tensor._fastlaunch_probe = 1  # changes torch.Tensor's version tag
        try:
            assert fl._derive_key(0, vals, []) == _fastlaunch_planner.derive_key(
                fl.state, 0, vals, []
            )
        finally:
            del torch.Tensor._fastlaunch_probe
    assert not _fastlaunch.direct_tensor_reads(False)
    try:
        vals = [base[1:], base, base, 16, 4]
        assert fl._derive_key(0, vals, []) == _fastlaunch_planner.derive_key(fl.state, 0, vals, [])
    finally:
        assert _fastlaunch.direct_tensor_reads(True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_launching_at_once_get_their_own_kernels(fake, backend):
    """Four threads launch one fast-launch object at once with different specializations (the
    last-key reuse and the first fast launch of an entry raced): each launch still runs the
    kernel Triton's own launch of its arguments runs."""
    import sys
    import threading

    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    buf = torch.empty(64)
    cases = [
        (buf, buf, buf, 64),
        (buf[1:], buf, buf, 64),
        (buf, buf, buf, 1),
        (buf, buf.half(), buf, 17),
        (buf, buf, buf, 2**40),
    ]
    for args in cases:  # one launch each: learned, the first fast launches happen in threads
        fl[(1,)](*args, BLOCK=16)
    results, errors = [], []

    def worker(seed):
        rng = random.Random(seed)
        try:
            for _ in range(200):
                i = rng.randrange(len(cases))
                results.append((i, fl[(1,)](*cases[i], BLOCK=16)))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors
    want = {i: K_ADD[(1,)](*args, BLOCK=16) for i, args in enumerate(cases)}
    assert len(results) == 800
    assert all(kernel is want[i] for i, kernel in results)
    for entry in fl.state.cache.values():  # every launcher's attribute is its own again
        assert entry[0].launch == entry[0]._inner


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_caches_of_another_shape_mean_tritons_path(fake, backend):
    """A Triton whose per-device cache entry is not the tuple we read the binder from (a list
    here, which Triton's own run unpacks just as well): the fast path is disabled with a reason
    and every launch goes through Triton's run, which still launches correctly."""
    from triton.runtime.driver import driver

    fl = fastdispatch.fast_launch(K_ADD, backend=_backend_or_skip(backend))
    x, y, out = _tensors()
    dev = driver.active.get_current_device()
    K_ADD.device_caches[dev] = list(K_ADD.device_caches[dev])
    for _ in range(3):
        r = fl[(1,)](x, y, out, 64, BLOCK=16)
    assert fl.state.disabled is not None and "unsupported Triton" in fl.state.disabled
    assert not fl.state.cache and fl.state.stats["triton"] == 3
    assert r is fake.compiled[-1] and len(r.run.inner_calls) == 3
