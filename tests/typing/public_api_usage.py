"""The public API as a user writes it: type-checked by mypy and run as a script.

``tests/test_typing.py`` runs mypy on this file (with the project's ``[tool.mypy]`` config) and
runs it with each backend. ``assert_type`` pins what the stubs and annotations promise; the
calls in ``_refused_calls`` must be rejected by the types -- each carries a ``type: ignore``
with its error code, and ``warn_unused_ignores`` turns an ignore that is no longer needed (a
type that went loose, e.g. to ``Any``) into an error.

Not a test module (pytest collects ``test_*.py`` only): ``python tests/typing/public_api_usage.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import torch
from typing_extensions import assert_type

import fastdispatch
import kernels_cpu
from fastdispatch import (
    KernelOverride,
    LaunchArgumentError,
    LaunchBindingPlan,
    Launcher,
    LaunchOwner,
    PlanCache,
    RegistryEntry,
    kernel_dispatcher,
    launch_binding_plan,
    launch_owner,
    ops,
    overrides,
    prepare_launch_kwargs,
    register_kernels,
    unregister_kernels,
    verify,
)

# -- a kernel, its CPU implementation and a launch owner for it --------------------------------


def toy_kernel(x_ptr: Any, out_ptr: Any, n: Any, BLOCK: int = 4) -> None:
    """Stands in for a Triton kernel (what a ``@triton.jit`` function is without Triton)."""
    raise RuntimeError("the original kernel ran although an override is registered")


def toy_impl(x_ptr: torch.Tensor, out_ptr: torch.Tensor, n: int, BLOCK: int = 4) -> None:
    out_ptr[:n] = x_ptr[:n] * 2


@kernel_dispatcher(kernel=toy_kernel)
def double(x: torch.Tensor, out: torch.Tensor) -> tuple[tuple[int], dict[str, int]]:
    return (1,), {"n": x.shape[0]}


KERNEL = f"{__name__}.toy_kernel"


def registry_usage() -> None:
    x = torch.arange(4, dtype=torch.int64)
    out = torch.zeros(4, dtype=torch.int64)

    register_kernels({KERNEL: toy_impl})
    report = verify()  # every registered name (importing ``ops`` may have registered more)
    assert_type(report, dict[str, list[str]])
    assert report[KERNEL] == [] and not any(report.values()), report

    entry = fastdispatch._registry[KERNEL]
    assert_type(entry, RegistryEntry)
    override = entry.override
    assert isinstance(override, KernelOverride)  # a Triton-kernel impl would stand raw
    assert_type(override, KernelOverride)
    assert_type(override.arg_names, tuple[str, ...])
    assert override.arg_names == ("x_ptr", "out_ptr", "n", "BLOCK")
    assert entry.impl is toy_impl and entry.original is not override

    launcher = override[(1,)]
    assert_type(launcher, Callable[..., Any])
    assert isinstance(launcher, Launcher)  # a plain impl: the override's own launcher
    launcher(x_ptr=x, out_ptr=out, n=4, num_warps=4)  # launch options are dropped
    assert out.tolist() == [0, 2, 4, 6]
    try:
        launcher(x_ptr=x, out_ptr=out, n=4, bogus=1)
    except LaunchArgumentError as exc:
        assert "bogus" in str(exc)
    else:
        raise AssertionError("an unexpected launch argument was accepted")

    assert_type(double, LaunchOwner)
    out.zero_()
    double(x, out)  # dispatch -> bind x/out to x_ptr/out_ptr -> the override
    assert out.tolist() == [0, 2, 4, 6]

    unregister_kernels(KERNEL)
    assert KERNEL not in fastdispatch._registry

    with overrides({KERNEL: toy_impl}) as installed:
        assert_type(installed, dict[str, KernelOverride])
        assert verify(KERNEL) == {KERNEL: []}
    assert KERNEL not in fastdispatch._registry


def binding_usage() -> None:
    x = torch.arange(6, dtype=torch.int64).view(2, 3)
    plan = launch_binding_plan(("x_ptr", "out_ptr", "n", "x_stride_0"), ("x", "out"), ("n",))
    assert_type(plan, LaunchBindingPlan)
    assert_type(plan.input_targets, tuple[tuple[int, str], ...])
    assert_type(plan.stride_targets, tuple[tuple[str, str, int], ...])
    assert plan.input_targets == ((0, "x_ptr"), (1, "out_ptr"))
    assert plan.stride_targets == (("x_stride_0", "x_ptr", 0),)

    kwargs = prepare_launch_kwargs(plan.arg_names, plan.input_names, (x, x), {"n": 6})
    assert_type(kwargs, dict[str, Any])
    assert kwargs["x_stride_0"] == 3

    cache = PlanCache()
    hit = cache.lookup(plan.arg_names, plan.input_names, {"n": 6})
    assert_type(hit, LaunchBindingPlan)
    assert_type(cache.plan, Optional[LaunchBindingPlan])

    seen: dict[str, Any] = {}

    def record(**launch: Any) -> None:
        seen.update(launch)

    outputs = launch_owner(record, ("x_ptr", "n"), (None, {"n": 1}, "out"), ("x",), (x,))
    assert outputs == "out" and not seen  # grid None: no launch, outputs returned


def kernels_cpu_usage() -> None:
    assert_type(kernels_cpu.openmp_enabled(), bool)
    assert_type(kernels_cpu.get_num_threads(), int)
    kernels_cpu.set_num_threads(1)
    kernels_cpu.set_num_threads(None)

    values = torch.tensor([5, 0, 7], dtype=torch.int32)
    cu = torch.tensor([2, 2, 5], dtype=torch.int64)
    expanded = torch.full((5,), -1, dtype=torch.int32)
    kernels_cpu.expand_kernel(expanded, values, cu, 0, 9, MAX_NUM_TOKENS=None)
    assert expanded.tolist() == [5, 5, 7, 7, 7]

    qsl = torch.tensor([0, 2], dtype=torch.int32)
    positions = torch.tensor([0, 1], dtype=torch.int64)
    table = torch.tensor([[3]], dtype=torch.int32)
    slots = torch.empty(3, dtype=torch.int64)
    kernels_cpu.compute_slot_mapping_kernel(2, 3, qsl, positions, table, 1, slots, 16)
    assert slots.tolist() == [48, 49, -1]

    mapping = kernels_cpu.vllm_overrides()
    assert_type(mapping, dict[str, Callable[..., Any]])
    assert len(mapping) == len(kernels_cpu.VLLM_KERNEL_NAMES) == len(kernels_cpu.VLLM_KERNELS)
    assert all(callable(fn) and fn.__name__ in kernels_cpu.__all__ for fn in mapping.values())


def ops_usage() -> None:
    x = torch.tensor([0.0, 0.5], dtype=torch.float32)
    cu = torch.tensor([1, 3], dtype=torch.int32)
    tokens = ops.expand_batch_to_tokens(x, cu, 3, replace_from=0, replace_to=1)
    assert_type(tokens, torch.Tensor)
    assert tokens.tolist() == [1.0, 0.5, 0.5]

    draft = torch.tensor([4, 1], dtype=torch.int64)
    cu_drafts = torch.tensor([2], dtype=torch.int64)
    logits = torch.full((2, 8), -5.0)
    logits[0, 4] = 5.0  # the target agrees with the first draft, not the second
    logits[1, 2] = 5.0
    out = ops.rejection_sample(draft, cu_drafts, 2, logits, torch.tensor([7]))
    assert_type(out, torch.Tensor)
    assert out.tolist() == [[4, 2, ops.PLACEHOLDER_TOKEN_ID]]

    seeds = ops.request_seeds(1, {0: torch.Generator().manual_seed(0)})
    assert_type(seeds, torch.Tensor)

    slot_mapping = torch.empty(2, dtype=torch.int64)
    ops.compute_slot_mapping(
        torch.tensor([0, 2]),
        torch.tensor([0, 1]),
        torch.tensor([[3]], dtype=torch.int32),
        slot_mapping,
        block_size=16,
    )
    assert slot_mapping.tolist() == [48, 49]

    assert_type(ops.cpu_kernels_active(), bool)
    assert_type(ops.cpu_overrides(), dict[str, Callable[..., Any]])
    token_indices, num_rejected = ops.eagle_prepare_inputs_padded(
        torch.tensor([2]), torch.tensor([2]), torch.tensor([0, 3])
    )
    assert_type(token_indices, torch.Tensor)
    assert (token_indices.tolist(), num_rejected.tolist()) == ([1], [1])


def _refused_calls() -> None:
    """Never called: calls the types must reject (see the module docstring)."""
    t = torch.zeros(1)
    register_kernels([("pkg.mod.kernel", toy_impl)])  # type: ignore[arg-type]
    verify(42)  # type: ignore[arg-type]
    KernelOverride(toy_kernel)  # type: ignore[call-arg]
    kernel_dispatcher(toy_kernel)  # type: ignore[call-arg]
    launch_binding_plan(("x_ptr",), 3)  # type: ignore[arg-type]
    PlanCache().lookup(["x_ptr"], ("x",), {})  # type: ignore[arg-type]
    kernels_cpu.set_num_threads("4")  # type: ignore[arg-type]
    kernels_cpu.expand_kernel(t, t)  # type: ignore[call-arg]
    kernels_cpu.batch_memcpy_kernel([0], t, t)  # type: ignore[arg-type]
    ops.rejection_sample(t, t, 2, t, t, is_greedy=[True])  # type: ignore[arg-type]
    ops.compute_slot_mapping(t, t, t, t)  # type: ignore[call-arg]
    ops.expand_batch_to_tokens(t, t, "3")  # type: ignore[arg-type]


def main() -> None:
    registry_usage()
    binding_usage()
    kernels_cpu_usage()
    ops_usage()
    print(f"public API usage: ok ({fastdispatch.BACKEND} backend)")


if __name__ == "__main__":
    main()
