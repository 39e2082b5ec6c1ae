"""Types of ``kernels_cpu._topk_topp_rows``: nothing is Python-visible.

The module is the ``nogil`` row loop behind ``kernels_cpu._topk_topp``; its functions are shared
at C level only (``_topk_topp_rows.pxd``).
"""
