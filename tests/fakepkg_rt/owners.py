"""Launch owners: ours (kernel_dispatcher) and a foreign one shaped like vLLM's."""

import functools
import inspect

import fastdispatch

from .kernels import copy_kernel, expand_kernel


@fastdispatch.kernel_dispatcher(kernel=expand_kernel)
def expand(output, input, cu_num_tokens, replace_from=0, replace_to=1):
    return (len(cu_num_tokens),), dict(MAX_NUM_TOKENS=8), output


class ForeignOwner:
    """vLLM's owner contract: ``kernel`` in the instance dict, cached ``_kernel_arg_names``
    (a cached_property), and ``__getattr__`` forwarding to the kernel."""

    def __init__(self, kernel):
        self.kernel = kernel

    @functools.cached_property
    def _kernel_arg_names(self):
        names = getattr(self.kernel, "arg_names", None)
        return (
            tuple(names) if names is not None else tuple(inspect.signature(self.kernel).parameters)
        )

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __call__(self, src, dst, n):
        kwargs = dict(zip(self._kernel_arg_names, (src, dst, n, 1, 64)))
        self.kernel[(1,)](**kwargs)


copy = ForeignOwner(copy_kernel)

# Launch both once at import so their argument-name caches are populated, as in a warm process.
expand("o", "i", [1, 2])
copy("s", "d", 3)
