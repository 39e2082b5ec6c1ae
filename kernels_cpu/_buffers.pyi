"""Types of ``kernels_cpu._buffers``.

Its API is C-level only (``cimport`` through ``_buffers.pxd``: dtype codes, ``IBuf``,
``check_tensor``, ``check_index``); Python sees no names of its own.
"""
