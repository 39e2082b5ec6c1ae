"""The ``vllm.general_plugins`` entry point: :func:`plugin`, which installs where it helps.

:func:`plugin` is the entry point (``pyproject.toml``: ``fastdispatch.vllm:plugin``).
``FASTDISPATCH_VLLM_PLUGIN=0`` turns it off, ``=1`` forces it on; by default it installs only
where vLLM itself runs without Triton on the CPU platform -- with a usable Triton driver vLLM
launches real Triton kernels and we stay out. The switches are read by
:func:`fastdispatch._env.env_flag` (one rule for every fastdispatch switch).
"""

from .._env import env_flag
from ._fast_launch import FAST_LAUNCH_ENV, install_fast_launch
from ._install import install
from ._installation import logger
from ._malloc import keep_large_blocks

#: The environment variable read by :func:`plugin`: ``0``/``off`` disables, ``1``/``on`` forces.
PLUGIN_ENV = "FASTDISPATCH_VLLM_PLUGIN"
#: With :func:`plugin`: ``1`` also routes random sampling through the fused-noise path.
FUSED_NOISE_ENV = "FASTDISPATCH_VLLM_FUSED_NOISE"
#: With :func:`plugin` and fused noise: ``0`` keeps vLLM's ``RejectionSampler.forward`` (the
#: fused kernels inside it) instead of the one-pass step.
ONE_PASS_ENV = "FASTDISPATCH_VLLM_ONE_PASS"


def plugin():
    """The ``vllm.general_plugins`` entry point: :func:`install` where it helps.

    ``FASTDISPATCH_VLLM_PLUGIN=0`` (or ``off``): do nothing. ``=1`` (or ``on``): install
    regardless. Unset: install only when vLLM runs without Triton (``HAS_TRITON`` false: vLLM
    would launch its CPU shims) on the CPU platform; with a usable Triton driver vLLM launches
    real Triton kernels and we stay out -- unless ``FASTDISPATCH_VLLM_FAST_LAUNCH=1`` asks for
    :func:`install_fast_launch` there (those kernels launched through fast_launch).
    ``FASTDISPATCH_VLLM_FUSED_NOISE=1`` opts into the fused random-sampling path (and the
    one-pass step, unless ``FASTDISPATCH_VLLM_ONE_PASS=0``). Where it installs, glibc's
    malloc keeps the large blocks a step frees (``fastdispatch.vllm._malloc``;
    ``FASTDISPATCH_VLLM_MALLOC=0`` leaves it alone). Safe to call any number of times.
    Unless forced, a failure to install is logged and leaves vLLM stock rather than failing
    the worker.
    """
    wanted = env_flag(PLUGIN_ENV)
    if wanted is False:
        logger.debug("fastdispatch: %s disables the vLLM plugin", PLUGIN_ENV)
        return
    if wanted is None:
        reason = _reason_to_stay_out()
        if reason and env_flag(FAST_LAUNCH_ENV) and "Triton driver" in reason:
            # a GPU worker that asked for it: Triton's own kernels, through our launch path
            try:
                install_fast_launch()
            except Exception:
                logger.warning(
                    "fastdispatch: fast launch could not install; vLLM launches its Triton "
                    "kernels itself",
                    exc_info=True,
                )
            return
        if reason:
            logger.info(
                "fastdispatch: vLLM plugin not installed: %s (set %s=1 to force)",
                reason,
                PLUGIN_ENV,
            )
            return
    try:
        install(
            fused_noise=bool(env_flag(FUSED_NOISE_ENV)),
            one_pass=env_flag(ONE_PASS_ENV) is not False,
        )
    except Exception:
        if wanted:
            raise
        # A plugin must not take the worker down: vLLM stays exactly stock (install() undid
        # whatever it had changed) and says why.
        logger.warning(
            "fastdispatch: vLLM plugin could not install; vLLM runs stock "
            "(set %s=1 to make this an error)",
            PLUGIN_ENV,
            exc_info=True,
        )
    else:
        # a CPU worker we serve: large per-step blocks reused, not faulted in again each step
        logger.info("fastdispatch: %s", keep_large_blocks())


def _reason_to_stay_out():
    try:
        from vllm.triton_utils import HAS_TRITON
    except Exception as exc:  # noqa: BLE001
        return f"vllm.triton_utils cannot be imported ({exc})"
    if HAS_TRITON:
        return "vLLM has a usable Triton driver"
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return f"platform is {type(current_platform).__name__}, not CPU"
    except Exception as exc:  # noqa: BLE001
        return f"vLLM platform unknown ({exc})"
    return None
