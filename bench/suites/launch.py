"""Launch overhead: what a kernel launch costs before the kernel does any work.

Two groups, each anchored on a direct Python call of the same no-op with the same arguments:

* ``launch/override`` — ``override[grid](**kw)`` with 10 launch kwargs and an implementation whose
  parameter names differ from the kernel's (so every launch is reordered into positional
  arguments, as vLLM's C++ shims require): fastdispatch compiled (with literal keys, and with keys
  built at run time), fastdispatch's pure-Python twin, vLLM's ``KernelOverride``; and the floor
  under all of them, ``fdkit._floor.NullLauncher``, a C launcher that ignores the launch
  kwargs and calls the no-op with the 10 values it stores: what the interpreter charges for the
  ``**kw`` call form and a call from C into a Python impl, with zero binding work (no correct
  launcher can be faster). Two more rows take the floor apart: ``impl(**kw)``, the no-op called
  directly with the same 10 keyword arguments (the call shape of a launch, no launcher), and
  ``fdkit._floor.NullSink``, ``ns[grid](**kw)`` calling nothing (the caller's part alone:
  subscript, kwargs copy, call).
* ``launch/owner_chain`` — the whole path a vLLM launch takes: launch owner → dispatch function →
  binding plan (``x`` → ``x_ptr``) → override → no-op, for an ``expand_kernel``-shaped kernel:
  ``fastdispatch.kernel_dispatcher`` (compiled and twin) vs vLLM's
  ``triton_kernel_dispatcher_with_warmup`` owner; and the dispatch function alone, the part of the
  chain that belongs to the caller (it reads a tensor shape and builds the launch dict).

The kernels are plain functions, as they are when Triton is absent (vLLM's CPU path).
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec, Unavailable
from .._rows import RowDef
from .._timing import Case

N_KW = 10
DIRECT = "direct call of the no-op"
DIRECT_KW = "direct call of the no-op, impl(**kw)"
FLOOR = "floor: C launcher doing no binding work"
CALLER_ONLY = "caller's part alone: NullSink, calls nothing"
COMPILED = "fastdispatch KernelOverride (compiled)"
RUNTIME_KEYS = "fastdispatch KernelOverride (compiled), keys built at run time"
TWIN = "fastdispatch KernelOverride (pure-Python twin)"
VLLM = "vLLM KernelOverride"
DISPATCH_ONLY = "dispatch fn alone (called directly)"
CHAIN_COMPILED = "fastdispatch owner chain (compiled)"
CHAIN_TWIN = "fastdispatch owner chain (pure-Python twin)"
CHAIN_VLLM = "vLLM owner chain"


# -- the fake kernels and no-op implementations (names differ -> positional forwarding) ---------
def _kernel10(
    out_ptr,
    in_ptr,
    cu_ptr,
    draft_ptr,
    probs_ptr,
    bonus_ptr,
    uniform_ptr,
    max_spec_len,
    vocab_size,
    BLOCK_SIZE,
):  # pragma: no cover - never launched, only introspected
    raise AssertionError("the original kernel must never run: the override replaces it")


def _impl10(a, b, c, d, e, f, g, h, i, j):
    return None


def _noop_named_like(fn):
    """A no-op whose parameters are ``fn``'s (so it can be called with the launch's kwargs)."""
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    ns = {}
    exec(f"def {fn.__name__}_noop({', '.join(names)}):\n    return None\n", ns)
    return ns[f"{fn.__name__}_noop"]


_impl10_named = _noop_named_like(_kernel10)


def expand_like_kernel(
    output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS
):  # pragma: no cover
    raise AssertionError("the original kernel must never run: the override replaces it")


def _impl6(out, inp, cu, rf, rt, mx):
    return None


def _dispatch(output, input, cu_num_tokens, replace_from, replace_to):
    return (input.shape[0],), dict(MAX_NUM_TOKENS=8)


def _fastdispatch_modules():
    """(compiled module or None, twin module or None, reason) for the fastdispatch runtime."""
    try:
        fd = importlib.import_module("fastdispatch")
    except Exception as exc:
        raise Unavailable(f"fastdispatch not importable: {type(exc).__name__}: {exc}") from exc
    try:
        twin = importlib.import_module("fastdispatch._core_py")
    except Exception as exc:
        twin = None
        twin_reason = f"fastdispatch._core_py not importable: {type(exc).__name__}: {exc}"
    else:
        twin_reason = None
    backend = getattr(fd, "BACKEND", None)
    return fd, backend, twin, twin_reason


def _stmt_case(stmt: str, note: str, namespace):
    """Make a case timing ``stmt``; ``namespace()`` is called when the row is built (so an
    :class:`Unavailable` it raises becomes the row's reason)."""
    return lambda: Case("", stmt=stmt, namespace=namespace(), meta={"note": note})


def _override_group(ctx) -> Built:
    import torch

    args = tuple(torch.empty(1) for _ in range(7)) + (4, 32000, 1024)
    names = tuple(_kernel10.__code__.co_varnames[:N_KW])
    kw = dict(zip(names, args))
    grid = (4,)
    b = Built(info={"launch_kwargs": N_KW, "forward": "positional (impl names differ)"})
    b.add(
        DIRECT,
        _stmt_case(
            "impl(*args)",
            "impl(*args) with the same 10 values",
            lambda: {"impl": _impl10, "args": args},
        ),
    )
    b.add(
        DIRECT_KW,
        _stmt_case(
            "impl(**kw)",
            "the launch's call shape (a kwargs dict is built), no launcher",
            lambda: {"impl": _impl10_named, "kw": kw},
        ),
    )

    def ours(compiled: bool, launch_kw=kw):
        fd, backend, twin, twin_reason = _fastdispatch_modules()
        if compiled:
            if backend != "cython":
                raise Unavailable(
                    f"fastdispatch.BACKEND is {backend!r}: compiled extension not loaded"
                )
            cls = getattr(fd, "KernelOverride", None)
        else:
            if twin is None:
                raise Unavailable(twin_reason)
            cls = getattr(twin, "KernelOverride", None)
        if cls is None:
            raise Unavailable("no KernelOverride in fastdispatch")
        ov = cls(_kernel10, _impl10)
        return Case(
            "",
            stmt="ov[grid](**kw)",
            namespace={"ov": ov, "grid": grid, "kw": launch_kw},
            meta={"class": f"{type(ov).__module__}.{type(ov).__qualname__}"},
        )

    # Keys equal to the kernel's argument names but other objects (built at run time, as a
    # binding plan builds ``x + "_ptr"``), reused launch after launch.
    runtime_kw = dict(zip(("".join(list(n)) for n in names), args))
    assert all(a is not b for a, b in zip(runtime_kw, names))
    b.add(COMPILED, lambda: ours(True))
    b.add(RUNTIME_KEYS, lambda: ours(True, runtime_kw))
    b.add(TWIN, lambda: ours(False))

    def floor_module():
        try:
            from fdkit import _floor
        except ImportError as exc:
            raise Unavailable(f"fdkit._floor not built: {exc}") from exc
        return _floor

    b.add(
        FLOOR,
        _stmt_case(
            "nl[grid](**kw)",
            "ignores kw, calls impl(*args) from C: the interpreter's part alone",
            lambda: {"nl": floor_module().NullLauncher(_impl10, args), "grid": grid, "kw": kw},
        ),
    )
    b.add(
        CALLER_ONLY,
        _stmt_case(
            "ns[grid](**kw)",
            "subscript, kwargs copy and call; no impl is called",
            lambda: {"ns": floor_module().NullSink(), "grid": grid, "kw": kw},
        ),
    )

    def vllm_override():
        ctx.vllm.require()
        from vllm.triton_utils.dispatcher import KernelOverride

        ov = KernelOverride(_kernel10, _impl10)
        return Case(
            "",
            stmt="ov[grid](**kw)",
            namespace={"ov": ov, "grid": grid, "kw": kw},
            meta={"class": "vllm.triton_utils.dispatcher.KernelOverride"},
        )

    b.add(VLLM, vllm_override)
    return b


def _owner_group(ctx) -> Built:
    import torch

    output, inp, cu = torch.empty(8), torch.empty(4), torch.arange(1, 5, dtype=torch.int32)
    call_args = (output, inp, cu, 0, 0)
    b = Built(info={"kernel": "expand_kernel-shaped, 6 arguments, plain function"})
    b.add(
        DIRECT,
        lambda: Case(
            DIRECT,
            stmt="impl(o, i, c, 0, 0, 8)",
            namespace={"impl": _impl6, "o": output, "i": inp, "c": cu},
        ),
    )

    def ours(compiled: bool):
        fd, backend, twin, twin_reason = _fastdispatch_modules()
        if compiled:
            if backend != "cython":
                raise Unavailable(
                    f"fastdispatch.BACKEND is {backend!r}: compiled extension not loaded"
                )
            mod = fd
        else:
            if twin is None:
                raise Unavailable(twin_reason)
            mod = twin
        kd = getattr(mod, "kernel_dispatcher", None)
        ko = getattr(mod, "KernelOverride", None)
        if kd is None or ko is None:
            raise Unavailable(f"{mod.__name__} has no kernel_dispatcher/KernelOverride")
        owner = kd(kernel=ko(expand_like_kernel, _impl6))(_dispatch)
        return Case(
            "",
            stmt="owner(*a)",
            namespace={"owner": owner, "a": call_args},
            meta={"owner": f"{type(owner).__module__}.{type(owner).__qualname__}"},
        )

    b.add(
        DISPATCH_ONLY,
        lambda: Case(
            "",
            stmt="dispatch(*a)",
            namespace={"dispatch": _dispatch, "a": call_args},
            meta={"note": "what every owner pays before its launch: reads a shape, builds a dict"},
        ),
    )
    b.add(CHAIN_COMPILED, lambda: ours(True))
    b.add(CHAIN_TWIN, lambda: ours(False))

    def vllm_chain():
        ctx.vllm.require()
        from vllm.model_executor.warmup.jit_warmup_triton_helper import (
            triton_kernel_dispatcher_with_warmup,
        )
        from vllm.triton_utils.dispatcher import KernelOverride

        owner = triton_kernel_dispatcher_with_warmup(
            kernel=KernelOverride(expand_like_kernel, _impl6), warmup_inputs=lambda **_: {}
        )(_dispatch)
        return Case(
            "",
            stmt="owner(*a)",
            namespace={"owner": owner, "a": call_args},
            meta={"owner": "vllm triton_kernel_dispatcher_with_warmup"},
        )

    b.add(CHAIN_VLLM, vllm_chain)
    return b


def groups(ctx):
    return [
        GroupSpec(
            id="launch/override",
            suite="launch",
            title=f"override[grid](**kw), {N_KW} launch kwargs, positional forward (ns per launch)",
            rows=(
                RowDef("direct", DIRECT),
                RowDef("direct_kw", DIRECT_KW),
                RowDef("compiled", COMPILED),
                RowDef("compiled_runtime_keys", RUNTIME_KEYS),
                RowDef("twin", TWIN),
                RowDef("floor", FLOOR),
                RowDef("caller_only", CALLER_ONLY),
                RowDef("vllm", VLLM),
            ),
            anchor=(DIRECT,),
            vs={"floor": FLOOR, "vLLM": VLLM},
            build=_override_group,
            needs_vllm=True,
            params={"launch_kwargs": N_KW},
        ),
        GroupSpec(
            id="launch/owner_chain",
            suite="launch",
            title="launch owner → dispatch fn → binding plan → override → no-op (ns per launch)",
            rows=(
                RowDef("direct", DIRECT),
                RowDef("dispatch_only", DISPATCH_ONLY),
                RowDef("compiled", CHAIN_COMPILED),
                RowDef("twin", CHAIN_TWIN),
                RowDef("vllm", CHAIN_VLLM),
            ),
            anchor=(DIRECT,),
            vs={"vLLM": CHAIN_VLLM},
            build=_owner_group,
            needs_vllm=True,
            params={"kernel_args": 6},
        ),
    ]
