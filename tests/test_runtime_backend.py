"""Backend selection and kernels from real Triton, each in a fresh interpreter.

* ``FASTDISPATCH_PURE_PYTHON=1`` selects the twin; by default the compiled module is used;
* a missing extension falls back to the twin with exactly one warning;
* with Triton blocked from importing, everything works on plain-function kernels;
* with ``TRITON_INTERPRET=1``, an owner launches a real interpreted kernel, and an override
  registered over it takes its place;
* a real ``triton.jit`` kernel (no driver: import only) is wrapped and launched through the impl.
"""

from _runtime_helpers import BLOCKER, run_python
from _triton_helpers import require_triton


def test_default_backend_is_compiled():
    out = run_python("""
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            import fastdispatch
        assert fastdispatch.BACKEND == "cython", fastdispatch.BACKEND
        from fastdispatch import _core
        assert fastdispatch.KernelOverride is _core.KernelOverride
        assert fastdispatch.kernel_dispatcher is _core.kernel_dispatcher
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_env_var_forces_the_twin():
    run_python(
        """
        import sys, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            import fastdispatch
        assert fastdispatch.BACKEND == "python"
        from fastdispatch import _core_py
        assert fastdispatch.KernelOverride is _core_py.KernelOverride
        assert "fastdispatch._core" not in sys.modules
    """,
        env={"FASTDISPATCH_PURE_PYTHON": "1"},
    )


def test_missing_extension_falls_back_with_one_warning():
    run_python(
        BLOCKER
        + """
block("fastdispatch._core")
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fastdispatch
    import fastdispatch._registration
    from fastdispatch import register_kernels, KernelOverride
msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
assert len(msgs) == 1 and "pure-Python twin" in msgs[0], msgs
assert fastdispatch.BACKEND == "python"
def k(x_ptr, n): pass
calls = []
ov = KernelOverride(k, lambda a, b: calls.append((a, b)))
ov[(1,)](x_ptr=1, n=2)
assert calls == [(1, 2)]
"""
    )


def test_everything_works_with_triton_blocked():
    run_python(
        BLOCKER
        + """
block("triton")
import sys, warnings
warnings.simplefilter("error")
import fastdispatch
from fakepkg_rt import CALLS, kernels, owners, users, worker

def expand_impl(out, inp, cu, rf, rt, mx):
    CALLS.append("impl")

fastdispatch.register_kernels({"fakepkg_rt.kernels.expand_kernel": expand_impl})
kernels.launch_expand("o", "i", [1])
users.launch_copy_of_expand("o", "i", [1])
owners.expand("o", "i", [1])
assert CALLS[-3:] == ["impl"] * 3, CALLS
assert fastdispatch.verify() == {"fakepkg_rt.kernels.expand_kernel": []}

# a plain-function kernel (Triton absent) launched by an owner, then overridden
seen = []
def plain(x_ptr, x_stride, n):
    seen.append(("plain", x_ptr, x_stride, n))

@fastdispatch.kernel_dispatcher(kernel=plain)
def op(x, n):
    return (1,), {}

class T:
    def stride(self, d):
        return 5
t = T()
op(t, 3)
import types
mod = types.ModuleType("plainmod"); mod.plain = plain; mod.op = op
sys.modules["plainmod"] = mod
fastdispatch.register_kernels({"plainmod.plain": lambda a, b, c: seen.append(("impl", a, b, c))})
op(t, 4)
assert seen == [("plain", t, 5, 3), ("impl", t, 5, 4)], seen
assert "triton" not in sys.modules
print("ok")
"""
    )


INTERPRETED_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 8):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
"""


def _write_kernel_module(tmp_path):
    pkg = tmp_path / "rt_triton_kernels.py"
    pkg.write_text(INTERPRETED_KERNEL)
    return str(tmp_path)


def test_interpreted_kernel_through_owner_then_override(tmp_path):
    require_triton()
    path = _write_kernel_module(tmp_path)
    run_python(
        """
        import sys
        sys.path.insert(0, %r)
        import torch
        import fastdispatch
        import rt_triton_kernels as m
        assert type(m.add_kernel).__name__ == "InterpretedFunction"

        @fastdispatch.kernel_dispatcher(kernel=m.add_kernel)
        def add(x, y, out):
            return ((x.numel() + 7) // 8,), dict(n=x.numel()), out

        m.add = add
        x = torch.arange(11, dtype=torch.float32)
        y = torch.full((11,), 2.0)
        out = add(x, y, torch.zeros(11))
        assert torch.equal(out, x + y), out

        calls = []
        def impl(a, b, c, n, block):
            calls.append((n, block))
            torch.add(a, b, out=c)
        fastdispatch.register_kernels({"rt_triton_kernels.add_kernel": impl})
        ov = m.add_kernel
        assert ov.arg_names == ("x_ptr", "y_ptr", "out_ptr", "n", "BLOCK")
        assert ov.constexprs is None  # interpreted kernels have none
        out2 = add(x, y, torch.zeros(11))
        assert torch.equal(out2, x + y) and calls == [(11, 8)], calls  # BLOCK: kernel default
        assert fastdispatch.verify() == {"rt_triton_kernels.add_kernel": []}
        fastdispatch.unregister_kernels()
        assert type(add.kernel).__name__ == "InterpretedFunction"
        assert torch.equal(add(x, y, torch.zeros(11)), x + y)
        print("ok")
    """
        % path,
        env={"TRITON_INTERPRET": "1"},
    )


def test_real_jit_function_is_wrapped(tmp_path):
    require_triton()
    path = _write_kernel_module(tmp_path)
    run_python(
        """
        import sys
        sys.path.insert(0, %r)
        import fastdispatch
        import rt_triton_kernels as m
        import triton
        assert isinstance(m.add_kernel, triton.runtime.jit.JITFunction)
        calls = []
        def impl(a, b, c, n, block):
            calls.append((a, b, c, n, block))
        for backend in ("_core", "_core_py"):
            core = __import__("fastdispatch." + backend, fromlist=["x"])
            ov = core.KernelOverride(m.add_kernel, impl)
            assert ov.arg_names == ("x_ptr", "y_ptr", "out_ptr", "n", "BLOCK")
            assert list(ov.constexprs) == [4]
            assert ov.__module__ == "rt_triton_kernels"
            ov[(1,)](x_ptr=1, y_ptr=2, out_ptr=3, n=4, num_warps=4)
        assert calls == [(1, 2, 3, 4, 8)] * 2, calls
        fastdispatch.register_kernels({"rt_triton_kernels.add_kernel": impl})
        names = fastdispatch._kernel_arg_names(m.add_kernel)
        assert names == ("x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"), names
        print("ok")
    """
        % path
    )
