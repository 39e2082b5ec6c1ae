"""Types of ``kernels_cpu._tables``.

Its API is C-level only (``cimport`` through ``_tables.pxd``: row-strided tables, length and
scalar checks); Python sees no names of its own.
"""
