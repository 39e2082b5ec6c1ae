"""``fastdispatch.vllm.install_fast_launch``: a GPU worker's Triton kernels behind fast_launch.

On a worker whose Triton has a driver, ``FASTDISPATCH_VLLM_FAST_LAUNCH=1`` makes the plugin put a
``fast_launch`` wrapper in every holder of vLLM's Triton kernels (module attributes, imported
copies, launch owners). Here a fake vLLM module holds a real Triton ``JITFunction`` (Triton is
installed, without a driver: nothing is launched); the rebinding and its undo are what is tested.
"""

import sys
import types

import pytest
from _triton_helpers import require_triton

import fastdispatch.vllm as fv

MOD = "fakevllm_fastlaunch.kernels"


class Owner:
    def __init__(self, kernel):
        self.kernel = kernel
        self._kernel_arg_names = ("x_ptr", "n", "BLOCK")


@pytest.fixture
def fake_vllm():
    require_triton()
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    if type(add_one).__name__ != "JITFunction":
        pytest.skip("TRITON_INTERPRET is set in this process: kernels are interpreted")
    pkg = types.ModuleType("fakevllm_fastlaunch")
    mod = types.ModuleType(MOD)
    mod.add_one = add_one
    mod.not_a_kernel = len
    user = types.ModuleType("fakevllm_fastlaunch.user")
    user.add_one = add_one  # a `from ... import` copy
    user.owner = Owner(add_one)
    pkg.kernels, pkg.user = mod, user
    sys.modules.update({pkg.__name__: pkg, MOD: mod, user.__name__: user})
    yield add_one, mod, user
    fv.uninstall_fast_launch()
    for name in (pkg.__name__, MOD, user.__name__):
        sys.modules.pop(name, None)


def test_every_holder_gets_the_wrapper_and_back(fake_vllm):
    kernel, mod, user = fake_vllm
    done = fv.install_fast_launch(
        [f"{MOD}.add_one", f"{MOD}.not_a_kernel", f"{MOD}.missing", "no_such_pkg.mod.kernel"]
    )
    assert done == {
        f"{MOD}.add_one": True,
        f"{MOD}.not_a_kernel": False,
        f"{MOD}.missing": False,
        "no_such_pkg.mod.kernel": False,
    }
    wrapper = mod.add_one
    assert type(wrapper).__name__ == "FastLaunch"
    assert wrapper.kernel is kernel and wrapper.arg_names == kernel.arg_names
    assert user.add_one is wrapper and user.owner.kernel is wrapper
    assert "_kernel_arg_names" not in vars(user.owner)  # re-derived from the wrapper
    assert mod.not_a_kernel is len
    assert fv.fast_launch_installed() == [(kernel, wrapper)]
    # asking again wraps nothing twice
    assert fv.install_fast_launch([f"{MOD}.add_one"]) == {f"{MOD}.add_one": True}
    assert mod.add_one is wrapper
    fv.uninstall_fast_launch()
    assert mod.add_one is kernel and user.add_one is kernel and user.owner.kernel is kernel
    assert fv.fast_launch_installed() == []


def test_plugin_uses_it_only_when_asked_on_a_triton_worker(monkeypatch):
    from fastdispatch.vllm import _plugin  # plugin() reads these names there

    calls = []
    monkeypatch.setattr(_plugin, "install_fast_launch", lambda: calls.append("fast"))
    monkeypatch.setattr(_plugin, "install", lambda **kw: calls.append("cpu"))
    monkeypatch.setattr(_plugin, "_reason_to_stay_out", lambda: "vLLM has a usable Triton driver")
    monkeypatch.delenv(fv.PLUGIN_ENV, raising=False)
    monkeypatch.delenv(fv.FAST_LAUNCH_ENV, raising=False)
    fv.plugin()
    assert calls == []  # a GPU worker that did not ask: vLLM stays as it is
    monkeypatch.setenv(fv.FAST_LAUNCH_ENV, "1")
    fv.plugin()
    assert calls == ["fast"]
    monkeypatch.setattr(_plugin, "_reason_to_stay_out", lambda: None)  # a CPU worker
    fv.plugin()
    assert calls == ["fast", "cpu"]
