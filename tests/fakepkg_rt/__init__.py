"""A small package shaped like vLLM's kernel call sites, for the runtime's rebinding tests.

Every way vLLM holds a kernel is here: a module-global kernel launched by global lookup
(``kernels``), a ``from ... import kernel`` copy in another module (``users``), launch owners that
keep the kernel as ``.kernel`` with cached argument names -- ours and a foreign one shaped like
vLLM's ``_DecoratedTritonJitKernel`` (``owners``) -- and a kernel kept as a class attribute
(``worker``). ``CALLS`` records which function ran for each launch.
"""

CALLS = []
