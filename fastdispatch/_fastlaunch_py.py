"""Fast launches of real Triton kernels: the pure-Python twin of ``fastdispatch._fastlaunch``.

Read ``fastdispatch/_fastlaunch_planner.py`` first: what the key holds, why it is safe, and the
slow path both backends share. This module mirrors, step for step, what the compiled hot path
does for every launch -- check the kernel is served and nothing asks for Triton's own path,
bind, derive the key, look the ``CompiledKernel`` up, call its launcher -- and hands everything
else to the shared slow path (``KernelState.launch_slow``), so that a reader can understand the
compiled code from this one and the same tests run against both. It is the backend when the
extension is missing or when the launch path's backend is the twin
(``FASTDISPATCH_PURE_PYTHON=1``: ``fastdispatch._backend``).
"""

from __future__ import annotations

from ._fastlaunch_planner import _MISSING, _Triton, derive_key, state_stats, support

__all__ = ["FastLaunch"]


class _GridLaunch:
    """``fl[grid]``: the callable Triton's ``kernel[grid]`` returns."""

    __slots__ = ("owner", "grid")

    def __init__(self, owner, grid):
        self.owner = owner
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.owner.launch(self.grid, args, kwargs)


class FastLaunch:
    """A Triton kernel launched through our key and cache (see the module). Pure-Python twin.

    ``fl[grid](*args, **kw)`` and ``fl.run(*args, grid=..., warmup=..., **kw)`` behave as the
    kernel's; ``arg_names``/``constexprs``/``params`` are the kernel's, so launch owners and
    the registry treat it as a kernel; other attributes are the kernel's own.
    """

    def __init__(self, kernel):
        self.kernel = kernel
        self.fn = kernel
        self.arg_names = getattr(kernel, "arg_names", None)
        self.state, self.passthrough = support(kernel)
        if self.state is not None:
            self.constexprs = kernel.constexprs
            self.params = kernel.params

    def __getattr__(self, name):
        if name in ("kernel", "state", "passthrough"):
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def __repr__(self):
        return f"fast_launch({self.kernel!r})"

    def __getitem__(self, grid):
        return _GridLaunch(self, grid)

    def run(self, *args, grid, warmup, **kwargs):
        if warmup or self.state is None:
            return self.kernel.run(*args, grid=grid, warmup=warmup, **kwargs)
        return self.launch(grid, args, kwargs)

    def stats(self):
        """This kernel's fast-launch record (``_fastlaunch_planner.state_stats``): whether the
        fast path serves it, the entries cached, Triton's own launches, and every fallback by
        reason; a pass-through says why it is one."""
        if self.state is None:
            return {
                "kernel": repr(self.kernel),
                "fast_path": False,
                "pass_through": self.passthrough,
            }
        return state_stats(self.state)

    def _hooks_clear(self):
        """Whether a launch may skip Triton's run: no launch hooks, pre-run hooks or stage
        hooks; the globals the kernel read unchanged."""
        st = self.state
        rt = st.runtime
        hc = _Triton.HookChain
        for h in (rt.launch_enter_hook, rt.launch_exit_hook):
            if h is not None and (type(h) is not hc or h.calls):
                return False
        if getattr(rt, "add_stages_inspection_hook", None) is not None:
            return False
        jit = st.jit
        if jit.pre_run_hooks:
            return False
        for (name, _), (val, g) in jit.used_global_vals.items():
            if g.get(name, _MISSING) is not val and g.get(name, _MISSING) != val:
                return False
        return True

    def launch(self, grid, args, kwargs):
        st = self.state
        if st is None:
            return self.kernel[grid](*args, **kwargs)
        drv = _Triton.driver_cfg._active
        if st.disabled is not None:
            return st.launch_slow(grid, args, kwargs, None, "disabled")
        if drv is None:
            return st.launch_slow(grid, args, kwargs, None, "no active driver yet")
        if not self._hooks_clear():
            return st.launch_slow(grid, args, kwargs, None, "hooks set or globals changed")
        bound = st.bind(args, kwargs)
        if bound is None:
            return st.launch_slow(grid, args, kwargs, None, "arguments Triton must bind")
        vals, opts = bound
        device = drv.get_current_device()
        key = derive_key(st, device, vals, opts)
        if key is None:
            return st.launch_slow(grid, args, kwargs, None, "a value we do not key on")
        entry = st.cache.get(key)
        if entry is None:
            return st.launch_slow(grid, args, kwargs, key, "a new key")
        if st.src_hash() is not entry[4]:
            return st.launch_slow(grid, args, kwargs, key, "the kernel's source changed")
        if type(grid) is tuple or type(grid) is list:
            g = grid
        elif callable(grid):
            g = grid(dict(zip(st.names, vals)))
        else:
            return st.launch_slow(
                grid, args, kwargs, None, "a grid that is neither a sequence nor callable"
            )
        size = len(g)
        stream = drv.get_current_stream(device)
        launcher, function, packed, kernel, _, direct, middle = entry
        g0, g1, g2 = g[0], g[1] if size > 1 else 1, g[2] if size > 2 else 1
        if direct is None:
            st.first_launch(
                key, entry, (g0, g1, g2, stream, function, packed, None, None, None, *vals)
            )
        elif direct is False:
            launcher(g0, g1, g2, stream, function, packed, None, None, None, *vals)
        else:
            direct(g0, g1, g2, stream, function, *middle, packed, None, None, None, *vals)
        return kernel
