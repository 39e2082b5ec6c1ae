"""Fast launches of real Triton kernels: Triton's key, derived cheaply, and its compiled launcher.

Why: ``JITFunction.run`` spends most of a launch in Python -- it binds the arguments with a
generated function, builds a specialization list of tuples, turns it into a string key, reads
knobs, builds launch metadata for the hooks -- before it calls the compiled kernel's launcher.
On a GPU host that is ~13-20 us per launch of a kernel that runs for a few microseconds.
``fast_launch(kernel)`` returns a :class:`FastLaunch` with the same ``kernel[grid](*args, **kw)``
semantics whose launch is: bind, derive a small key from what Triton specializes on, look the
``CompiledKernel`` up in our own cache, call its launcher with the stream, grid and arguments --
the call Triton makes (``kernel.run(...)``, Triton's launcher object; from an entry's second fast
launch on, that object's inner C function directly, with the layout it was seen to use:
:meth:`KernelState.first_launch`).

What the key holds, per kernel parameter (:func:`derive_key`): the dtype and the 16-byte
alignment of a tensor's data pointer; an integer's range class (int32/int64/uint64), whether it
is 1 and whether it is divisible by 16; ``None``, ``bool`` and ``float`` by type; a tuple's
length and each element's features (Triton's binder specializes a tuple element by element, as
it would each element passed alone); a constexpr's type and value; the launch options given as
kwargs and the knobs Triton folds into its options.
It is *not* taken on trust that this is what the installed Triton keys on. Every new key is
launched by Triton's own ``run`` once, with its binder wrapped so that we see the bound values,
the specialization and the options Triton produced for this very launch; we check that Triton
bound the same values we did, that the options it injected are knobs we read (and have the
values we read), and that its specialization of every parameter agrees with what every earlier
verified launch with the same per-parameter feature got. The first time a parameter is seen with
a given kind of value it is also probed: Triton's binder is run with boundary values
substituted (integers around 1, 16, 2**31, 2**63, 2**64; tensor views at every byte offset up to
32; inside a tuple, at each element) and each feature class must get one specialization.
Anything that disagrees disables the fast path for the kernel (one WARNING), and every later
launch goes to Triton's ``run``.

Not recognised, hence Triton's own path for that launch: a new key, launch hooks set
(``knobs.runtime.launch_enter_hook``/``launch_exit_hook`` with callables), pre-run hooks, a
stages-inspection hook, a changed global the kernel reads, a changed kernel source, arguments
Triton must bind itself (missing, given twice, too many: its errors name them), arguments of
other types (tensor descriptors, tensor subclasses, named tuples, tuples longer than
``MAX_TUPLE`` or nested deeper than ``MAX_DEPTH``, out-of-range integers), option values we
cannot key on, or a grid that is neither a tuple/list nor a callable. The device and stream
are read from the active driver at every launch, as Triton's ``run`` reads them.
``fast_launch`` of anything that is not a plain ``JITFunction`` (autotuned, heuristics-wrapped,
interpreted kernels, overrides) returns a pass-through: every launch is
``kernel[grid](*args, **kw)``.

With launch hooks unset Triton passes the launcher a launch-metadata object and two empty hook
chains, which the launcher hands only to the hooks; we pass ``None`` for the three, which the
launcher treats alike (no hook is called). Everything else -- the launcher, the function handle,
the packed metadata, the grid, the stream, every bound argument including constexprs -- is what
Triton passes.

This module is fast launch's cold part, written once for both backends (as ``_planner`` is the
launch path's): the key derivation's specification (:func:`derive_key`), what decides that a
kernel is served at all (:func:`support`), and the slow path that verifies and fills the cache
(:class:`KernelState`). Each backend's ``FastLaunch`` -- the compiled ``_fastlaunch`` and its
pure-Python twin ``_fastlaunch_py`` -- holds only the per-launch path over it, and
``fastdispatch.fast_launch`` (``_backend.fast_launch``) picks one as the launch path's backend is
picked.
"""

from __future__ import annotations

import logging
import struct
import threading
import weakref
from typing import Any

__all__ = ["KernelState", "derive_key", "support"]

_log = logging.getLogger("fastdispatch")

# Feature codes, one byte per kernel parameter (two for a tensor: the code, then its dtype's
# index in _DTYPE_INDEX). The compiled module uses the same values.
CODE_NONE = 0x01
CODE_BOOL = 0x02
CODE_FLOAT = 0x03
CODE_INT = 0x10  # | range << 2 | (value == 1) << 1 | (value % 16 == 0); range 0 i32, 1 i64, 2 u64
CODE_TENSOR = 0x20  # | (data_ptr % 16 == 0), followed by the dtype index byte
CODE_CONSTEXPR = 0x04  # the value goes into the key's tail as (type, value)
CODE_TUPLE = 0x05  # followed by the element count, then every element's codes in order
MAX_TUPLE = 64  # elements in one tuple argument we key on (larger: Triton's path)
MAX_DEPTH = 4  # tuples nested deeper than this: Triton's path

#: torch dtype -> small index (one byte of the key). Shared by both backends.
_DTYPE_INDEX: dict[Any, int] = {}
_MAX_DTYPES = 250

# Knobs that Triton's run folds into its options (the kwargs its binder sees), by option name:
# where the value comes from. Checked against what Triton actually injected at the first
# launch of every key; an option not listed here makes the kernel unsupported.
_KNOWN_INJECTED = ("debug", "instrumentation_mode", "fpsan_homomorphic_casts")

_INT_PROBES = (
    0, 1, 2, 3, 7, 8, 15, 16, 17, 24, 32, 48, 64, 96, 1000, 1024, 4096, 4097,
    -1, -2, -15, -16, -17, -32,
    2**31 - 16, 2**31 - 1, -(2**31), -(2**31) + 1, -(2**31) + 16,
    2**31, 2**31 + 1, 2**31 + 16, 2**32, -(2**31) - 1, -(2**31) - 16,
    2**62, 2**63 - 16, 2**63 - 1, -(2**63), -(2**63) + 1,
    2**63, 2**63 + 1, 2**63 + 16, 2**64 - 16, 2**64 - 1,
)  # fmt: skip


class _Triton:
    """What we use of Triton, imported on first need (the package builds and imports without
    Triton or a GPU)."""

    loaded = False
    JITFunction: Any = None
    CompiledKernel: Any = None
    HookChain: Any = None
    knobs: Any = None
    driver_cfg: Any = None
    Tensor: Any = None
    Parameter: Any = None  # torch.nn.Parameter: a tensor Triton's binder treats as a tensor
    tl_dtype: Any = None
    torch_dtype: Any = None
    version = ""

    @classmethod
    def load(cls):
        if cls.loaded:
            return cls.JITFunction is not None
        cls.loaded = True
        try:
            import torch
            import triton
            from triton.runtime.jit import JITFunction

            cls.Tensor = torch.Tensor
            cls.Parameter = torch.nn.Parameter
            cls.torch_dtype = torch.dtype
            cls.JITFunction = JITFunction
            cls.version = triton.__version__
        except Exception:  # noqa: BLE001 - no Triton (or a broken one): pass-through only
            cls.JITFunction = None
            return False
        try:
            from triton import knobs

            cls.knobs = knobs
            cls.HookChain = getattr(knobs, "HookChain", None)
        except Exception:  # noqa: BLE001
            cls.knobs = None
        try:
            from triton.runtime.driver import driver as driver_cfg

            cls.driver_cfg = driver_cfg
        except Exception:  # noqa: BLE001
            cls.driver_cfg = None
        try:
            from triton.compiler.compiler import CompiledKernel

            cls.CompiledKernel = CompiledKernel
        except Exception:  # noqa: BLE001
            cls.CompiledKernel = None
        try:
            import triton.language as tl

            cls.tl_dtype = tl.dtype
        except Exception:  # noqa: BLE001
            cls.tl_dtype = None
        return True


def _float_bits(v):
    return struct.unpack("<q", struct.pack("<d", v))[0]


def _tagged(v):
    """``(type, value)`` for a constexpr, option or knob value, or None when we cannot key on
    it (equal keys must mean equal ``str()`` in Triton's key: floats go by their bits, so that
    ``0.0``/``-0.0`` and NaNs are told apart)."""
    t = type(v)
    if t is int or t is bool or t is str or v is None:
        return (t, v)
    if t is float:
        return (t, _float_bits(v))
    if t is _Triton.torch_dtype or (_Triton.tl_dtype is not None and t is _Triton.tl_dtype):
        return (t, v)
    return None


def int_code(v):
    """The feature byte of an exact ``int`` argument, or None when out of every range."""
    if -(2**31) <= v <= 2**31 - 1:
        rng = 0
    elif -(2**63) <= v <= 2**63 - 1:
        rng = 1
    elif 2**63 <= v <= 2**64 - 1:
        rng = 2
    else:
        return None
    return CODE_INT | (rng << 2) | ((v == 1) << 1) | (v % 16 == 0)


def dtype_index(dtype):
    idx = _DTYPE_INDEX.get(dtype)
    if idx is None:
        if len(_DTYPE_INDEX) >= _MAX_DTYPES:
            return None
        idx = _DTYPE_INDEX.setdefault(dtype, len(_DTYPE_INDEX))
    return idx


def _plain_codes(codes, v, depth):
    """Append the feature codes of a non-constexpr value; False when it is not one we key on.

    A tuple is what Triton's binder makes of it, element by element: each element specialized
    as an argument of its own would be (a tensor's dtype and alignment, an int's range class
    and divisibility, ...), so its codes are the count and every element's codes.
    """
    t = type(v)
    if v is None:
        codes.append(CODE_NONE)
    elif t is bool:
        codes.append(CODE_BOOL)
    elif t is int:
        c = int_code(v)
        if c is None:
            return False
        codes.append(c)
    elif t is float:
        codes.append(CODE_FLOAT)
    elif t is _Triton.Tensor or t is _Triton.Parameter:
        idx = dtype_index(v.dtype)
        if idx is None:
            return False
        codes.append(CODE_TENSOR | (v.data_ptr() % 16 == 0))
        codes.append(idx)
    elif t is tuple and len(v) <= MAX_TUPLE and depth < MAX_DEPTH:
        codes.append(CODE_TUPLE)
        codes.append(len(v))
        return all(_plain_codes(codes, e, depth + 1) for e in v)
    else:
        return False
    return True


def derive_key(state, device, vals, opts):
    """Our cache key for one bound launch, or None when a value is not one we key on.

    ``vals``: every parameter's value in order (defaults applied); ``opts``: the launch kwargs
    that are not parameters (Triton's options), in the caller's order. The key:
    ``(device, codes, jit.debug, knobs.runtime.debug, <other knobs>..., *tail)`` where
    ``codes`` has the feature codes of every parameter in order (see the module doc; a tuple's
    are its elements') and ``tail`` holds ``(type, value)`` of every constexpr, then
    ``name, type, value`` of every option.
    """
    codes = bytearray()
    tail = []
    for i, v in enumerate(vals):
        if state.is_constexpr[i]:
            tv = _tagged(v)
            if tv is None:
                return None
            codes.append(CODE_CONSTEXPR)
            tail.extend(tv)
        elif not _plain_codes(codes, v, 0):
            return None
    for name, v in opts:
        tv = _tagged(v)
        if tv is None:
            return None
        tail.append(name)
        tail.extend(tv)
    knobs = []
    for obj, attr in state.knob_readers:
        kv = getattr(obj, attr)
        if not (kv is None or type(kv) is bool or type(kv) is str):
            return None
        knobs.append(kv)
    return (device, bytes(codes), *knobs, *tail)


def _codes_end(codes, j):
    """Where the codes of the value starting at ``codes[j]`` end."""
    c = codes[j]
    if c & 0xF0 == CODE_TENSOR:
        return j + 2
    if c == CODE_TUPLE:
        n, j = codes[j + 1], j + 2
        for _ in range(n):
            j = _codes_end(codes, j)
        return j
    return j + 1


def param_codes(key, n):
    """Split a key's codes into one feature per parameter: the tuple of its codes (a tensor:
    code and dtype index; a tuple: its count and its elements' codes)."""
    codes = key[1]
    out, j = [], 0
    for _ in range(n):
        k = _codes_end(codes, j)
        out.append(tuple(codes[j:k]))
        j = k
    return out


class KernelState:
    """Per-kernel state shared by both backends: parameters, our cache, and the slow path.

    ``cache`` maps our key to ``(launcher, function, packed_metadata, compiled_kernel,
    source_hash, inner, constants)``: only :meth:`launch_slow` adds entries, after Triton's own
    ``run`` launched that key and the checks in the module doc passed; :meth:`first_launch`
    fills in the launcher's inner call (``inner`` None: not seen yet; False: call the launcher
    object). ``disabled`` (a reason) stops all filling; ``last_slow`` says why the last launch
    left the fast path; ``stats`` counts launches that went through Triton's ``run``.
    """

    def __init__(self, jit):
        self.jit = jit
        self.params = list(jit.params)
        self.names = tuple(p.name for p in self.params)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.is_constexpr = tuple(bool(p.is_constexpr) for p in self.params)
        self.defaults = tuple(p.default if p.has_default else _MISSING for p in self.params)
        self.cache = {}
        self.disabled = None
        self.lock = threading.RLock()
        self.spec_table = {}
        self.probed = set()
        self.knob_readers = ()
        self.injected = None
        self.stats = {"learned": 0, "triton": 0}
        self.fallbacks = {}  # why a launch left the fast path -> how many did
        self.last_slow = None
        _STATES.add(self)
        k = _Triton.knobs
        self.runtime = getattr(k, "runtime", None)
        self.compilation = getattr(k, "compilation", None)
        self.knob_readers = self._readers(("debug", "instrumentation_mode"))
        if not _Triton.CompiledKernel or self.runtime is None or _Triton.driver_cfg is None:
            self.disabled = f"unsupported Triton {_Triton.version}: missing runtime pieces"

    def src_hash(self):
        """The kernel's source hash as Triton holds it (``None`` until computed, reset when
        the source is replaced): an entry learned under another one is stale."""
        return getattr(self.jit, "hash", None)

    def _readers(self, names):
        out = [(self.jit, "debug"), (self.runtime, "debug")]
        for name in names:
            if name == "debug":
                continue
            out.append((self.compilation, name))
        return tuple(out)

    # -- binding (the twin's and the slow path's; the compiled module has its own in C) --------

    def bind(self, args, kwargs):
        """``(vals, opts)`` as Triton's binder would bind them, or None (let Triton decide:
        too many arguments, a missing one, a name given twice)."""
        n = len(self.names)
        if len(args) > n:
            return None
        vals = list(args) + [_MISSING] * (n - len(args))
        opts = []
        for k, v in kwargs.items():
            i = self.index.get(k)
            if i is None:
                opts.append((k, v))
            elif i < len(args):
                return None
            else:
                vals[i] = v
        for i in range(len(args), n):
            if vals[i] is _MISSING:
                d = self.defaults[i]
                if d is _MISSING:
                    return None
                vals[i] = d
        return vals, opts

    # -- the slow path ------------------------------------------------------------------------

    def triton_launch(self, grid, args, kwargs):
        self.stats["triton"] += 1
        return self.jit.run(*args, grid=grid, warmup=False, **kwargs)

    def launch_slow(self, grid, args, kwargs, key, why):
        """A launch our cache cannot serve (``why``, kept in ``last_slow``): Triton's own ``run``
        launches it; when ``key`` is new and every check passes, the kernel it launched goes
        into our cache."""
        self.last_slow = why
        self.fallbacks[why] = self.fallbacks.get(why, 0) + 1
        if key is None or self.disabled is not None:
            return self.triton_launch(grid, args, kwargs)
        bound = self.bind(args, kwargs)
        if bound is None:
            return self.triton_launch(grid, args, kwargs)
        vals, opts = bound
        with self.lock:
            return self._learn(grid, args, kwargs, key, vals, opts)

    def first_launch(self, key, entry, call):
        """The first fast launch of a cache entry: through the launcher object (Triton's
        ``kernel.run``) with its inner C function wrapped, to see how the launcher calls it.
        When that call is ``(gridX, gridY, gridZ, stream, function, *constants, *rest)`` where
        ``rest`` is exactly what we passed after ``function`` and the constants are ``None``,
        bools or ints (no scratch buffer, which would depend on the grid), later launches call
        the C function directly with the same layout; otherwise the launcher object."""
        with self.lock:  # one thread learns; the launcher's attribute is swapped only here
            current = self.cache.get(key)
            if current is not None and current is not entry and current[5] is not None:
                entry = current  # learned by another thread meanwhile
                if entry[5] is False:
                    entry[0](*call)
                else:
                    head, rest = call[:5], call[5:]
                    entry[5](*head, *entry[6], *rest)
                return
            direct, middle = self._watch_inner(entry[0], call)
            if self.cache.get(key) is entry:
                self.cache[key] = (*entry[:5], direct, middle)

    def _watch_inner(self, launcher, call):
        """Launch ``call`` through ``launcher`` and return ``(inner, constants)`` as
        :meth:`first_launch` describes, or ``(False, ())``."""
        inner = getattr(launcher, "__dict__", {}).get("launch")
        if inner is None or not callable(inner):
            launcher(*call)
            return False, ()
        seen = []
        me = threading.get_ident()

        def recorder(*a):
            if threading.get_ident() == me and not seen:
                seen.append(a)
            return inner(*a)

        launcher.launch = recorder
        try:
            launcher(*call)
        finally:
            launcher.launch = inner
        if seen:
            a = seen[0]
            rest = call[5:]
            cut = len(a) - len(rest)
            if (
                cut >= 5
                and all(x is y for x, y in zip(a[:5], call[:5]))
                and all(x is y for x, y in zip(a[cut:], rest))
                and all(m is None or type(m) is bool or type(m) is int for m in a[5:cut])
            ):
                return inner, tuple(a[5:cut])
        return False, ()

    def _learn(self, grid, args, kwargs, key, vals, opts):
        jit = self.jit
        device = key[0]
        seen = []
        me = threading.get_ident()
        caches = jit.device_caches
        entry = caches[device]  # creates Triton's binder for this device, as run would
        if type(entry) is not tuple or not entry or not callable(entry[-1]):
            self._disable(f"unsupported Triton {_Triton.version}: no binder in device_caches")
            return self.triton_launch(grid, args, kwargs)
        binder = entry[-1]

        def recorder(*a, **kw):
            out = binder(*a, **kw)
            if threading.get_ident() == me and not seen:
                seen.append((a, dict(kw), out))
            return out

        caches[device] = (*entry[:-1], recorder)
        try:
            self.stats["learned"] += 1
            kernel = jit.run(*args, grid=grid, warmup=False, **kwargs)
        finally:
            if caches.get(device) is not None and caches[device][-1] is recorder:
                caches[device] = entry
        if not seen:
            return kernel
        try:
            problem = self._verify(key, vals, opts, seen[0], binder)
        except Exception as exc:  # noqa: BLE001 - a binder of another shape: not one we know
            problem = f"unsupported Triton {_Triton.version}: {type(exc).__name__}: {exc}"
        if problem is _RETRY:
            return kernel
        if problem is not None:
            self._disable(problem)
            return kernel
        ck = _Triton.CompiledKernel
        if type(kernel) is not ck or hasattr(kernel, "result"):
            return kernel  # a warm-up, a hook-cancelled compile or an async future: not cached
        check = derive_key(self, device, vals, opts)
        if check != key:
            self._disable(f"the compiled key derivation disagrees with the twin's: {key!r}")
            return kernel
        self.cache[key] = (
            kernel.run,
            kernel.function,
            kernel.packed_metadata,
            kernel,
            self.src_hash(),
            None,  # the launcher's inner call: learned at the entry's first fast launch
            (),
        )
        return kernel

    def _disable(self, reason):
        self.disabled = reason
        self.cache.clear()
        _log.warning("fast_launch(%s): Triton's own launch from now on: %s", self.jit, reason)

    def _verify(self, key, vals, opts, seen, binder):
        """None when Triton's binder, for this launch, bound and specialized as we assumed."""
        a, kw, (bound_args, spec, options) = seen
        bvals = list(bound_args.values())
        if len(bvals) != len(vals) or any(x is not y for x, y in zip(bvals, vals)):
            return "Triton bound the launch arguments differently"
        user = dict(opts)
        injected = tuple(k for k in options if k not in user)
        for k in injected:
            if k not in _KNOWN_INJECTED:
                return f"unsupported Triton {_Triton.version}: it injects option {k!r}"
        # Triton injects a knob as an option unless the launch gives that option itself
        # (``debug=True`` on one launch): what it injects is learned from a launch that gives
        # none of them, and every launch must get exactly that set less the ones it gives.
        if any(k in user for k in _KNOWN_INJECTED):
            if self.injected is not None:
                expected = tuple(k for k in self.injected if k not in user)
                if injected != expected:
                    return f"Triton injected options {injected}, expected {expected}"
        elif self.injected is None:
            self.injected = injected
            readers = self._readers(injected)
            if readers != self.knob_readers:
                # the key of this launch did not read all of them: learn again next launch
                self.knob_readers = readers
                return _RETRY
        elif injected != self.injected:
            return f"Triton injected options {injected}, earlier {self.injected}"
        for k in injected:
            if k == "debug":
                want = user.get("debug", self.jit.debug) or self.runtime.debug
            else:
                want = getattr(self.compilation, k)
            if options[k] != want or type(options[k]) is not type(want):
                return f"option {k!r}: Triton used {options[k]!r}, we read {want!r}"
        if list(options)[: len(user)] != list(user):
            return "Triton reordered the launch options"
        feats = param_codes(key, len(vals))
        for i, (f, s) in enumerate(zip(feats, spec)):
            if self.is_constexpr[i]:
                if s != ("constexpr", vals[i]):
                    return f"{self.names[i]}: constexpr specialized as {s!r}"
                continue
            problem = self._record(i, f, s)
            if problem is not None:
                return problem
            for path, leaf in _probed_leaves(vals[i], ()):
                kind = (i, path, type(leaf), getattr(leaf, "dtype", None))
                if kind not in self.probed:
                    self.probed.add(kind)
                    problem = self._probe(i, path, vals, options, binder)
                    if problem is not None:
                        return problem
        return None

    def _record(self, i, feature, spec_entry):
        known = self.spec_table.setdefault((i, feature), spec_entry)
        if known != spec_entry:
            return (
                f"{self.names[i]}: Triton specialized feature {feature} as {spec_entry!r} "
                f"and as {known!r}: it keys on something we do not"
            )
        return None

    def _probe(self, i, path, vals, options, binder):
        """Run Triton's binder with boundary values in parameter ``i`` (at ``path`` inside a
        tuple argument): each of our feature classes must get a single specialization."""
        v = _at(vals[i], path)
        if type(v) is int:
            probes = list(_INT_PROBES)
        else:
            esize = v.element_size()
            base = v.new_empty((64 // esize + 2) * 2)
            probes = [base[k:] for k in range(0, 33 // esize + 2)]
        for p in probes:
            sub = list(vals)
            sub[i] = _replaced(vals[i], path, p)
            probe_key = derive_key(self, 0, sub, ())
            if probe_key is None:
                continue
            _, spec, _ = binder(*sub, **options)
            problem = self._record(i, param_codes(probe_key, len(sub))[i], spec[i])
            if problem is not None:
                return problem
        return None


def _probed_leaves(v, path):
    """``(path, value)`` of every int and tensor in an argument (itself, or inside tuples)."""
    t = type(v)
    if t is int or t is _Triton.Tensor or t is _Triton.Parameter:
        yield path, v
    elif t is tuple:
        for k, e in enumerate(v):
            yield from _probed_leaves(e, (*path, k))


def _at(v, path):
    for k in path:
        v = v[k]
    return v


def _replaced(v, path, new):
    """``v`` with the element at ``path`` replaced by ``new`` (tuples rebuilt on the way)."""
    if not path:
        return new
    k = path[0]
    return (*v[:k], _replaced(v[k], path[1:], new), *v[k + 1 :])


_RETRY = "retry"
_STATES: Any = weakref.WeakSet()  # every live KernelState, for launch_stats()


def state_stats(state):
    """One kernel's fast-launch record: served or not (and why), the entries cached, the
    launches Triton's own ``run`` made, and every fallback from the fast path by reason (a new
    key is one per specialisation; anything else repeating is a launch the fast path misses)."""
    return {
        "kernel": getattr(state.jit, "__name__", repr(state.jit)),
        "fast_path": state.disabled is None,
        "disabled": state.disabled,
        "cached": len(state.cache),
        "learned": state.stats["learned"],
        "triton_launches": state.stats["triton"],
        "fallbacks": dict(state.fallbacks),
    }


def launch_stats():
    """:func:`state_stats` of every kernel given to ``fast_launch`` in this process."""
    return [state_stats(s) for s in list(_STATES)]


_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()


def support(kernel):
    """``(KernelState, None)`` for a kernel the fast path serves, else ``(None, why)``: a
    pass-through, every launch ``kernel[grid](*args, **kw)``. Both backends' ``FastLaunch``
    start here."""
    if not _Triton.load():
        return None, "Triton is not importable"
    if type(kernel) is not _Triton.JITFunction:
        return None, f"not a plain JITFunction ({type(kernel).__name__})"
    return KernelState(kernel), None
